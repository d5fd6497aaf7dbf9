//! The differential corpus: every small tar, zip and compressed file of the peers' test suites
//! (libarchive, Apache commons-compress, node-tar, tar-rs, and a few archives of yauzl, zip2,
//! Go and CPython: 405 archives, byte for byte in `tests/data/corpus`, sources and licences in SOURCE.md there),
//! each extracted by fastwrite from the file and through a pipe, and by the reference tools
//! (GNU tar and bsdtar for a tar; Info-ZIP's unzip, bsdtar and 7-Zip for a zip).
//!
//! What must hold on every one: fastwrite never crashes, panics or hangs, exits 0, 1 or 2, and
//! writes nothing outside its output folder; a tar gives the same tree and exit code through a
//! pipe as from its file. Where two or more references extract an archive and agree, fastwrite
//! extracts the same tree from the file, and a zip through a pipe gives that tree too, with exit
//! 0: except for the archives in [`DIFFERS`] (either way), [`FILE_DIFFERS`] (from the file) and
//! [`PIPE_DIFFERS`] (through a pipe), each in one of the classes docs/security.md gives ("Where fastwrite differs from the
//! references", "A zip from a pipe").

#[macro_use]
mod common;

#[cfg(unix)] // the reference tools are Unix programs, which a Windows build cannot start
mod unix {
    use std::ffi::OsString;
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::Mutex;

    use crate::common::*;

    /// Archives where the references that extract them agree and fastwrite deliberately does
    /// not, with the class (docs/security.md).
    const DIFFERS: &[(&str, &str)] = &[
        (
            "la__unzip__test__test_symlink_1.zip",
            "symlinks leaving OUT are refused",
        ),
        (
            "la__unzip__test__test_symlink_dotdot.zip",
            "symlinks leaving OUT are refused",
        ),
        (
            "cc__src__test__resources__COMPRESS-214_unix_symlinks.zip",
            "symlinks leaving OUT are refused",
        ),
        (
            "go__src__archive__zip__testdata__symlink.zip",
            "symlinks leaving OUT are refused",
        ),
        (
            "yz__test__failure__unsupported compression method 1.zip",
            "a zip entry whose local header and central record disagree is refused",
        ),
    ];

    /// Zips that fastwrite extracts as the agreeing references do through a pipe, and from the
    /// file deliberately does not, with the class (docs/security.md). None now: the two central
    /// directories the zip crate refused (yauzl's extra field past its buffer, zip2's empty
    /// extended timestamp) are read from a mended copy (`zip/mended.rs`, issue 54).
    const FILE_DIFFERS: &[(&str, &str)] = &[];

    /// Zips that fastwrite extracts as the agreeing references do from the file, and through a
    /// pipe deliberately does not, with the class (docs/security.md, "A zip from a pipe").
    const PIPE_DIFFERS: &[(&str, &str)] = &[(
        "cc__src__test__resources__COMPRESS-380__COMPRESS-380-dd.zip",
        "a data descriptor after deflate64 data cannot be followed in a stream",
    )];

    /// References not run on an archive: what they would write is too large to compare.
    const NOT_RUN: &[(&str, &str)] = &[(
        "la__libarchive__test__test_read_format_zip_uncompressed_size_off_by_4gib.zip",
        "bsdtar", // writes 4 GiB, as the central directory says (unzip and 7-Zip write 5 bytes)
    )];

    /// A reference tool, and whether it reads zips or tars.
    struct Reference {
        program: &'static str,
        args: fn(&Path, &Path) -> Vec<OsString>,
    }

    /// bsdtar reads both kinds.
    const BSDTAR: Reference = Reference {
        program: "bsdtar",
        args: |archive, dest| osv!["-xpf", archive, "-C", dest],
    };

    const TAR_REFERENCES: &[Reference] = &[
        Reference {
            program: "tar",
            args: |archive, dest| osv!["-xpf", archive, "-C", dest],
        },
        BSDTAR,
    ];

    const ZIP_REFERENCES: &[Reference] = &[
        Reference {
            program: "unzip",
            args: |archive, dest| osv!["-qo", archive, "-d", dest],
        },
        BSDTAR,
        Reference {
            program: "7z",
            args: |archive, dest| {
                let mut out = OsString::from("-o");
                out.push(dest);
                osv!["x", "-y", "-p", out, archive]
            },
        },
    ];

    /// Whether a file of more than 64 MiB is anywhere under `dir`.
    fn holds_huge_file(dir: &Path) -> bool {
        let Ok(entries) = fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|e| match e.file_type() {
            Ok(t) if t.is_dir() => holds_huge_file(&e.path()),
            Ok(t) if t.is_file() => e.metadata().is_ok_and(|m| m.len() > 64 << 20),
            _ => false,
        })
    }

    fn corpus() -> Vec<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
        let mut archives: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_none_or(|e| e != "md"))
            .collect();
        archives.sort();
        assert!(
            archives.len() > 390,
            "the corpus is missing: {}",
            dir.display()
        );
        archives
    }

    /// What went wrong with one archive, if anything.
    fn check(archive: &Path, work: &Path) -> Vec<String> {
        let name = archive.file_name().unwrap().to_string_lossy().into_owned();
        let mut problems = Vec::new();
        let bytes = fs::read(archive).unwrap();
        // A zip by its start or by an end record near its end (a self-extracting one).
        let tail = &bytes[bytes.len().saturating_sub(66_000)..];
        let is_zip = bytes.starts_with(b"PK") || tail.windows(4).any(|w| w == b"PK\x05\x06");

        // fastwrite, from the file and through a pipe: never a crash, an odd exit code or a
        // write outside OUT (anything that climbs out of OUT lands in `work`).
        let from_file = work.join("fastwrite-file");
        let from_pipe = work.join("fastwrite-pipe");
        fs::create_dir(&from_file).unwrap();
        fs::create_dir(&from_pipe).unwrap();
        let file = run_fastwrite(&osv!["extract", archive, "-o", &from_file, "--devices"]);
        let mut pipe = run_fastwrite_piped(
            &osv!["extract", "-", "-o", &from_pipe, "--devices"],
            archive,
        );
        if pipe
            .stderr
            .contains("with no name inside: give it one with --name")
        {
            // A single compressed file on standard input, without a gzip name: named here
            // (--name with an archive is refused, so it is not given to every input).
            pipe = run_fastwrite_piped(
                &osv![
                    "extract",
                    "-",
                    "-o",
                    &from_pipe,
                    "--devices",
                    "--name",
                    "single"
                ],
                archive,
            );
        }
        for (how, out) in [("file", &file), ("pipe", &pipe)] {
            match out.status.code() {
                Some(0..=2) => {}
                _ => problems.push(format!(
                    "{name} ({how}): exit {:?}\n{}",
                    out.status,
                    out.dump()
                )),
            }
            if out.stderr.contains("panicked") {
                problems.push(format!("{name} ({how}): panicked\n{}", out.dump()));
            }
        }
        let mut left: Vec<String> = fs::read_dir(work)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("fastwrite-"))
            .collect();
        left.sort();
        if !left.is_empty() {
            problems.push(format!("{name}: written outside OUT: {left:?}"));
        }
        // Trees holding huge (sparse) files are compared in tests/peers.rs, by their data
        // regions: reading 12 GB of holes here would take the machine's memory.
        if [&from_file, &from_pipe]
            .iter()
            .any(|tree| holds_huge_file(tree))
        {
            return problems;
        }
        // A tar is a stream either way: the same tree and exit code. (A single compressed file
        // is named from its file, and `single` from a pipe.)
        let single = from_pipe.join("single").exists();
        if !is_zip && !single && file.code() != 2 {
            let diffs = diff_trees(&from_file, &from_pipe, &Compare::content_only());
            if !diffs.is_empty() || file.code() != pipe.code() {
                problems.push(format!(
                    "{name}: through a pipe, another result (exit {} against {}):\n{}",
                    pipe.code(),
                    file.code(),
                    diffs.join("\n")
                ));
            }
        }

        // The references: where two or more extract it and agree, fastwrite must too.
        let references = if is_zip {
            ZIP_REFERENCES
        } else {
            TAR_REFERENCES
        };
        let mut agreeing: Vec<(&str, PathBuf)> = Vec::new();
        for reference in references {
            if NOT_RUN.contains(&(name.as_str(), reference.program)) {
                continue;
            }
            let dest = work.join(format!("ref-{}", reference.program));
            fs::create_dir_all(&dest).unwrap();
            require_tool(reference.program);
            let mut cmd = Command::new(reference.program);
            cmd.args((reference.args)(archive, &dest))
                .env("TZ", TEST_TZ)
                .current_dir(&dest);
            // A reference that runs out of time or memory gives no verdict (`None`); fastwrite
            // was checked above on its own.
            if run_reference(cmd).is_some_and(|done| done.status.success()) {
                agreeing.push((reference.program, dest));
            }
        }
        if agreeing.len() < 2 || agreeing.iter().any(|(_, tree)| holds_huge_file(tree)) {
            return problems;
        }
        let (first, first_tree) = &agreeing[0];
        if agreeing[1..]
            .iter()
            .any(|(_, tree)| !diff_trees(first_tree, tree, &Compare::content_only()).is_empty())
        {
            return problems;
        }
        // A single compressed file is decompressed, as `gzip -d` does, where the tar tools
        // see an empty tar (an empty member, say) and extract nothing.
        let nothing = fs::read_dir(first_tree).unwrap().next().is_none();
        if nothing && !is_zip && fs::read_dir(&from_file).unwrap().count() == 1 {
            let only = fs::read_dir(&from_file).unwrap().next().unwrap().unwrap();
            if only.file_type().unwrap().is_file() && file.code() == 0 {
                return problems;
            }
        }
        let diffs = diff_trees(first_tree, &from_file, &Compare::content_only());
        let listed = |list: &[(&str, &str)]| list.iter().any(|(n, _)| *n == name);
        let excused = listed(DIFFERS);
        let excused_file = excused || listed(FILE_DIFFERS);
        match (diffs.is_empty(), excused_file) {
            (true, false) | (false, true) => {}
            (false, false) => problems.push(format!(
                "{name}: the references ({}) agree, and fastwrite differs from {first}:\n{}\n{}",
                agreeing
                    .iter()
                    .map(|(p, _)| *p)
                    .collect::<Vec<_>>()
                    .join(", "),
                diffs.join("\n"),
                file.dump()
            )),
            (true, true) => problems.push(format!(
                "{name}: listed in {}, but fastwrite now agrees with the references: take it off",
                if excused { "DIFFERS" } else { "FILE_DIFFERS" }
            )),
        }
        // A zip through a pipe, read by its local headers and then its central directory:
        // the same tree, and exit 0 as the references.
        if is_zip {
            let diffs = diff_trees(first_tree, &from_pipe, &Compare::content_only());
            let same = diffs.is_empty() && pipe.code() == 0;
            let excused_here = listed(PIPE_DIFFERS);
            match (same, excused || excused_here) {
                (true, false) | (false, true) => {}
                (false, false) => problems.push(format!(
                    "{name} (pipe): the references ({}) agree, and fastwrite through a pipe differs from {first} (exit {}):\n{}\n{}",
                    agreeing.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(", "),
                    pipe.code(),
                    diffs.join("\n"),
                    pipe.dump()
                )),
                (true, true) => problems.push(format!(
                    "{name}: listed in {}, but fastwrite through a pipe now agrees with the references: take it off",
                    if excused { "DIFFERS" } else { "PIPE_DIFFERS" }
                )),
            }
        }
        problems
    }

    #[test]
    fn the_peers_corpus_never_crashes_escapes_or_differs_where_the_references_agree() {
        let archives = corpus();
        let next = Mutex::new(archives.iter());
        let problems = Mutex::new(Vec::new());
        let root = tempdir();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    loop {
                        let Some(archive) = next.lock().unwrap().next() else {
                            break;
                        };
                        let work = root.join(archive.file_name().unwrap());
                        fs::create_dir(&work).unwrap();
                        let found = check(archive, &work);
                        problems.lock().unwrap().extend(found);
                        // Keep the disk small: each archive's trees go once checked.
                        make_dirs_writable(&work);
                        let _ = fs::remove_dir_all(&work);
                    }
                });
            }
        });
        let problems = problems.into_inner().unwrap();
        assert!(
            problems.is_empty(),
            "{} of {} archives:\n\n{}",
            problems.len(),
            archives.len(),
            problems.join("\n\n")
        );
    }
}
