//! `fastwrite list`: what `tar -tv` and `zipinfo` say of the same archives (names, types, modes,
//! sizes, link targets), in archive order, and what extracting each entry would do.

#[macro_use]
mod common;

#[cfg(unix)] // GNU tar, bsdtar, Info-ZIP and python3, which a Windows build under Wine cannot start
mod unix {
    use std::ffi::OsString;
    use std::fs;
    use std::path::Path;

    use crate::common::*;

    /// An entry as both sides show it: type letter and permissions, size, name, link target.
    type Row = (String, u64, String, Option<String>);

    fn ours(archive: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
        ours_exiting(archive, extra, 0)
    }

    /// `list --json`, which must exit with `code`.
    fn ours_exiting(archive: &Path, extra: &[&str], code: i32) -> Vec<serde_json::Value> {
        let mut args = osv!["list", archive, "--json"];
        args.extend(extra.iter().map(OsString::from));
        let r = run_fastwrite(&args);
        assert_eq!(r.code(), code, "{}", r.dump());
        r.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn row(v: &serde_json::Value) -> Row {
        let letter = match v["type"].as_str().unwrap() {
            "file" => '-',
            "dir" => 'd',
            "symlink" => 'l',
            "hardlink" => 'h',
            other => panic!("{other}"),
        };
        let mode = u32::from_str_radix(v["mode"].as_str().unwrap(), 8).unwrap();
        let bits: String = (0..9)
            .map(|i| {
                let on = mode & (0o400 >> i) != 0;
                if on { ['r', 'w', 'x'][i % 3] } else { '-' }
            })
            .collect();
        (
            format!("{letter}{bits}"),
            v["size"].as_u64().unwrap(),
            v["name"].as_str().unwrap().to_string(),
            v["target"].as_str().map(str::to_string),
        )
    }

    /// `tar -tvf` (GNU tar) read back into rows: a hard link is `h` here (GNU tar prints `h`
    /// too, with "link to"), sizes of links 0.
    fn gnu_listing(archive: &Path) -> Vec<Row> {
        let out = run_tool("tar", &osv!["--numeric-owner", "-tvf", archive], None);
        out.stdout
            .lines()
            .map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let (name, target) = match line.split_once(" -> ") {
                    Some((_, target)) => (f[5].to_string(), Some(target.to_string())),
                    None => match line.split_once(" link to ") {
                        Some((_, target)) => (f[5].to_string(), Some(target.to_string())),
                        None => (f[5..].join(" "), None),
                    },
                };
                (f[0].to_string(), f[2].parse().unwrap(), name, target)
            })
            .collect()
    }

    fn tree(t: &Path) -> std::path::PathBuf {
        let src = t.join("src");
        fs::create_dir(&src).unwrap();
        project_tree(&src);
        src
    }

    /// Archives made by GNU tar, bsdtar and Python's tarfile, listed by GNU tar and by us: the
    /// same entries in the same order, with the same types, modes, sizes and link targets.
    #[test]
    fn a_tar_lists_as_gnu_tar_lists_it() {
        let t = tempdir();
        let src = tree(t.path());
        let gnu = t.join("gnu.tar");
        run_tool(
            "tar",
            &osv!["-C", &src, "--sort=name", "-cf", &gnu, "project-1.2"],
            None,
        );
        let bsd = t.join("bsd.tar.gz");
        run_tool(
            "bsdtar",
            &osv!["-C", &src, "-czf", &bsd, "project-1.2"],
            None,
        );
        let py = t.join("py.tar.xz");
        let script = "import sys, tarfile\nwith tarfile.open(sys.argv[1], 'w:xz', format=tarfile.PAX_FORMAT) as t: t.add(sys.argv[2], 'project-1.2')";
        run_tool(
            "python3",
            &osv!["-c", script, &py, src.join("project-1.2")],
            None,
        );
        for archive in [&gnu, &bsd, &py] {
            let listed: Vec<Row> = ours(archive, &[]).iter().map(row).collect();
            let expected = gnu_listing(archive);
            assert_eq!(listed, expected, "{}", archive.display());
            assert!(
                listed.iter().any(|r| r.0.starts_with('h')),
                "a hard link is listed"
            );
            assert!(listed.iter().any(|r| r.3.as_deref() == Some("README.md")));
        }
        // The human lines have tar's columns, the owner's among them (issue 35, item 5): type
        // and mode, then `user/group`, names where archived.
        for archive in [&gnu, &bsd, &py] {
            let r = run_fastwrite(&osv!["list", archive]);
            r.assert_success();
            let gnu_lines = run_tool("tar", &osv!["-tvf", archive], None).stdout;
            let first_two = |text: &str| -> Vec<String> {
                text.lines()
                    .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
                    .collect()
            };
            assert_eq!(
                first_two(&r.stdout),
                first_two(&gnu_lines),
                "{}",
                archive.display()
            );
        }
        let r = run_fastwrite(&osv!["list", &gnu]);
        let line = r
            .stdout
            .lines()
            .find(|l| l.contains("readme-link"))
            .unwrap();
        assert!(line.starts_with("lrwxrwxrwx"), "{line}");
        assert!(
            line.ends_with("project-1.2/readme-link -> README.md"),
            "{line}"
        );
    }

    /// Zips made by Info-ZIP and Python's zipfile, listed by zipinfo and by us: the same
    /// names in the same order, types, modes and sizes; symlink targets as stored.
    #[test]
    fn a_zip_lists_as_zipinfo_lists_it() {
        let t = tempdir();
        let src = tree(t.path());
        let info = t.join("info.zip");
        infozip_dir(&src, &info, &[]);
        let py = t.join("py.zip");
        let script = "import os, sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n for d, _, fs in sorted(os.walk(sys.argv[2])):\n  for f in sorted(fs):\n   p = os.path.join(d, f)\n   if not os.path.islink(p): z.write(p, os.path.relpath(p, sys.argv[2]))";
        run_tool("python3", &osv!["-c", script, &py, &src], None);
        for archive in [&info, &py] {
            let listed: Vec<Row> = ours(archive, &[]).iter().map(row).collect();
            let out = run_tool("zipinfo", &osv![archive], None);
            let expected: Vec<(String, u64, String)> = out
                .stdout
                .lines()
                .filter(|l| l.starts_with(['-', 'd', 'l']) && l.len() > 40)
                .map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f[0].to_string(), f[3].parse().unwrap(), f[8..].join(" "))
                })
                .collect();
            let listed_cmp: Vec<(String, u64, String)> = listed
                .iter()
                .map(|(m, size, name, _)| {
                    // zipinfo gives a symlink its stored size (the target's length).
                    let size = if m.starts_with('l') {
                        expected_size(&expected, name)
                    } else {
                        *size
                    };
                    (m.clone(), size, name.clone())
                })
                .collect();
            assert_eq!(listed_cmp, expected, "{}", archive.display());
        }
        let link = ours(&info, &["**/readme-link"]);
        assert_eq!(link.len(), 1);
        assert_eq!(link[0]["target"], "README.md");
        // Info-ZIP's zip keeps the owner's ids on Unix (its "ux" field), as bsdtar lists them
        // (issue 35, item 5); Python's zipfile keeps none.
        use std::os::unix::fs::MetadataExt;
        let owner = fs::metadata(src.join("project-1.2/README.md")).unwrap();
        let readme = |entries: Vec<serde_json::Value>| {
            entries
                .into_iter()
                .find(|e| e["name"] == "project-1.2/README.md")
                .unwrap()
        };
        let listed = readme(ours(&info, &[]));
        assert_eq!(listed["uid"], owner.uid(), "{listed}");
        assert_eq!(listed["gid"], owner.gid(), "{listed}");
        assert!(readme(ours(&py, &[]))["uid"].is_null());
        let line = run_fastwrite(&osv!["list", &info]).stdout;
        let ids = format!(" {}/{} ", owner.uid(), owner.gid());
        assert!(line.lines().all(|l| l.contains(&ids)), "{line}");
    }

    fn expected_size(rows: &[(String, u64, String)], name: &str) -> u64 {
        rows.iter().find(|r| r.2 == name).map_or(0, |r| r.1)
    }

    /// What extraction would do is said per entry: the hostile entries of the Zip Slip samples
    /// are marked refused, with the reason, and not given a path; selection and stripping
    /// show the names extract would write. An entry extract would refuse fails the listing as
    /// it fails the extraction and its test (exit 1, named on stderr: issue 35, item 3), and
    /// keeps the time the archive records (item 5).
    #[test]
    fn refusals_and_renames_are_shown() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/zip-slip");
        for sample in ["zip-slip.zip", "zip-slip.tar"] {
            let archive = data.join(sample);
            let entries = ours_exiting(&archive, &[], 1);
            let evil = entries
                .iter()
                .find(|e| e["name"].as_str().unwrap().starts_with("../"))
                .unwrap();
            assert!(evil["path"].is_null(), "{sample}: {evil}");
            assert_eq!(evil["fails"], true, "{sample}: {evil}");
            assert!(evil["mtime"].as_f64().is_some(), "{sample}: {evil}");
            let problem = evil["problem"].as_str().unwrap();
            assert!(
                problem.contains("escapes the output folder"),
                "{sample}: {problem}"
            );
            let good = entries.iter().find(|e| e["name"] == "good.txt").unwrap();
            assert_eq!(good["path"], "good.txt");
            assert!(good["problem"].is_null());
            let r = run_fastwrite(&osv!["list", &archive]);
            assert!(
                r.stdout.contains("  [refused: path escapes"),
                "{}",
                r.dump()
            );
            assert!(
                !r.stdout.contains("??:??"),
                "the time is known\n{}",
                r.dump()
            );
            r.assert_stderr_names(evil["name"].as_str().unwrap(), &["escapes"]);
            // As extract and its test exit on the same archive.
            let out = tempdir();
            for how in [
                osv!["extract", &archive, "-o", out.join("o")],
                osv!["extract", &archive, "-t"],
            ] {
                let done = run_fastwrite(&how);
                assert_eq!(done.code(), r.code(), "{}\n{}", done.dump(), r.dump());
            }
        }
        let t = tempdir();
        let src = tree(t.path());
        let archive = t.join("p.tar");
        run_tool(
            "tar",
            &osv!["-C", &src, "--sort=name", "-cf", &archive, "project-1.2"],
            None,
        );
        let r = run_fastwrite(&osv![
            "list",
            &archive,
            "project-1.2/docs",
            "--strip-components",
            "1"
        ]);
        assert_eq!(r.code(), 0, "{}", r.dump());
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(lines.len(), 5, "docs/, its 3 files and old/\n{}", r.stdout);
        assert!(lines.iter().all(|l| l.contains("project-1.2/docs")));
        assert!(
            r.stdout.contains("project-1.2/docs/a.md  [as docs/a.md]"),
            "{}",
            r.stdout
        );
        let none = run_fastwrite(&osv!["list", &archive, "nothing"]);
        assert_eq!(none.code(), 1, "{}", none.dump());
        assert!(
            none.stderr
                .contains("'nothing': no entry of the archive matches")
        );
    }
}

/// Issue 26, item 17: `list` of a single compressed file says the one file it holds, as
/// `gzip -l` does (its name as extract names it, its size counted whole), and `list` of a zip
/// on standard input lists it as from a file (it was refused, exit 1).
#[test]
fn a_single_file_and_a_zip_on_stdin_are_listed() {
    let t = common::tempdir();
    let data = b"a line of notes\n".repeat(1000);
    let single = t.join("download.gz");
    let mut gz = flate2::GzBuilder::new()
        .filename("notes.txt")
        .write(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &data).unwrap();
    std::fs::write(&single, gz.finish().unwrap()).unwrap();
    let r = common::run_fastwrite(&osv!["list", &single, "--json"]);
    r.assert_code(0);
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{}", r.dump());
    assert_eq!(lines[0]["name"], "notes.txt");
    assert_eq!(lines[0]["size"], data.len());
    assert_eq!(lines[0]["type"], "file");

    let zip = t.join("a.zip");
    common::crate_zip(
        &zip,
        &[
            common::Z::Dir("d/", 0o755),
            common::Z::File("d/a.txt", b"aaa".to_vec(), 0o644, common::STORED),
        ],
    );
    let from_file = common::run_fastwrite(&osv!["list", &zip]);
    from_file.assert_code(0);
    let piped = common::run_fastwrite_piped(&osv!["list", "-"], &zip);
    piped.assert_code(0);
    assert_eq!(piped.stdout, from_file.stdout);
    assert_eq!(piped.stdout.lines().count(), 2, "{}", piped.dump());
}

/// Issue 64, item 5: `list` says what extract would warn of, once, after the entries: a zip's
/// central directory mended (yauzl's zip64 field shorter than its record needs), a .tar.gz
/// with bytes after its gzip data; `-q` says nothing.
#[test]
fn list_warns_as_extract_warns() {
    let zip = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/data/corpus/yz__test__failure__zip64 extended information extra field does not include compressed size.zip",
    );
    let r = common::run_fastwrite(&osv!["list", &zip]);
    r.assert_code(0);
    assert!(r.stdout.contains("empty.txt"), "{}", r.dump());
    let said = "'empty.txt' (15 of its 24 bytes)";
    assert_eq!(r.stderr_lines_with(said).len(), 1, "{}", r.dump());
    let quiet = common::run_fastwrite(&osv!["list", "-q", &zip]);
    quiet.assert_code(0);
    assert!(quiet.stderr.is_empty(), "{}", quiet.dump());

    let t = common::tempdir();
    let tar = t.join("a.tar");
    let entries = [common::TarEntry::file("a.txt", b"a".to_vec(), 0o644)];
    common::make_tar(&tar, "gnu", &entries);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &std::fs::read(&tar).unwrap()).unwrap();
    let mut bytes = gz.finish().unwrap();
    bytes.extend(b"junk after the gzip data");
    let tar = t.join("a.tar.gz");
    std::fs::write(&tar, &bytes).unwrap();
    let out = t.join("out");
    let extracted = common::run_fastwrite(&osv!["extract", &tar, "-o", &out]);
    let listed = common::run_fastwrite(&osv!["list", &tar]);
    let warned = |r: &common::Output| -> Vec<String> { r.stderr_lines_with("warning") };
    assert!(!warned(&extracted).is_empty(), "{}", extracted.dump());
    assert_eq!(warned(&listed), warned(&extracted), "{}", listed.dump());
}
