//! Hostile archives, one table over formats: each attack that a zip and a tar can both carry
//! (absolute names, `..`, symlinks that escape, a symlink then a file through it, symlinks
//! already in OUT) is built in every format (zip, GNU tar, pax tar) and held to the same
//! expectations. What only one format can carry stays with its tests: zip bombs and two-faced
//! zips in zip_extract.rs, hard links and sparse maps in tar_extract.rs.

#[macro_use]
mod common;

use std::fs;
use std::path::Path;

use common::*;
use zip::CompressionMethod;

/// An archive format a hostile entry list is written in.
#[derive(Debug, Clone, Copy)]
enum Format {
    Zip,
    Tar(&'static str),
}

const FORMATS: [Format; 3] = [Format::Zip, Format::Tar("gnu"), Format::Tar("pax")];

/// One entry, as any format holds it.
#[derive(Debug, Clone, Copy)]
enum H<'a> {
    File(&'a str, &'a str),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
}

impl Format {
    fn suffix(self) -> &'static str {
        match self {
            Format::Zip => "zip",
            Format::Tar(_) => "tar",
        }
    }

    /// Writes `entries` as an archive of this format at `path`, names exactly as given.
    #[track_caller]
    fn write(self, path: &Path, entries: &[H<'_>]) {
        match self {
            Format::Zip => {
                let dirs: Vec<String> = entries
                    .iter()
                    .map(|e| match e {
                        H::Dir(name) if !name.ends_with('/') => format!("{name}/"),
                        H::Dir(name) => name.to_string(),
                        _ => String::new(),
                    })
                    .collect();
                let zip: Vec<Z<'_>> = entries
                    .iter()
                    .zip(&dirs)
                    .map(|(e, dir)| match *e {
                        H::File(name, data) => {
                            Z::File(name, data.into(), 0o644, CompressionMethod::Deflated)
                        }
                        H::Dir(_) => Z::Dir(dir, 0o755),
                        H::Symlink(name, target) => Z::Symlink(name, target),
                    })
                    .collect();
                crate_zip(path, &zip);
            }
            Format::Tar(format) => {
                let tar: Vec<TarEntry> = entries
                    .iter()
                    .map(|e| match *e {
                        H::File(name, data) => TarEntry::file(name, data, 0o644),
                        H::Dir(name) => TarEntry::dir(name, 0o755),
                        H::Symlink(name, target) => TarEntry::symlink(name, target),
                    })
                    .collect();
                make_tar(path, format, &tar);
            }
        }
    }
}

/// Whether symlinks can be made here (Wine 8's CreateSymbolicLinkW is a stub that makes
/// nothing): where they cannot, the symlinks fastwrite should have made are not looked for,
/// and the test says so.
fn symlinks_work() -> bool {
    let t = tempdir();
    fs::write(t.join("target"), "x").unwrap();
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink("target", t.join("link")).is_ok();
    #[cfg(windows)]
    let made = std::os::windows::fs::symlink_file("target", t.join("link")).is_ok();
    let made = made && t.join("link").is_symlink();
    if !made {
        eprintln!("NOT CHECKED: no symlinks can be made here, so fastwrite's are not looked for");
    }
    made
}

/// Drive letters and Windows' UNC and rooted names are refused; a Unix absolute name loses its
/// leading `/` and is written inside OUT, as GNU tar, bsdtar, unzip and 7-Zip do, said in a
/// warning (issue 35: it was refused).
#[test]
fn absolute_and_drive_letter_paths_refused() {
    for format in FORMATS {
        let sb = Sandbox::new();
        let abs = format!("/tmp/{}.txt", unique_name("abs"));
        let bad = [
            "C:/x.txt",
            "D:\\y.txt",
            "E:z.txt",
            "\\\\server\\share\\v.txt",
            "\\rooted.txt",
        ];
        let mut entries = vec![H::File("good.txt", "good")];
        entries.extend(bad.iter().map(|n| H::File(n, "evil")));
        entries.push(H::File(&abs, "inside"));
        entries.push(H::File("//server/share/w.txt", "inside"));
        entries.push(H::Dir("/tmp/abs-dir"));
        let archive = sb.archive(&format!("abs.{}", format.suffix()));
        format.write(&archive, &entries);
        let before = sb.snapshot();
        let r = extract(&archive, &sb.out(), &[]);
        let abs_created = Path::new(&abs).exists();
        if abs_created {
            let _ = fs::remove_file(&abs);
        }
        assert!(
            !abs_created,
            "{format:?}: {abs} was written outside OUT\n{}",
            r.dump()
        );
        r.assert_code(1);
        for n in bad {
            r.assert_stderr_names(n, REFUSAL_WORDS);
        }
        assert_eq!(
            r.stderr_lines_with("removed the leading '/' from 3 names")
                .len(),
            1,
            "{}",
            r.dump()
        );
        let inside = abs.trim_start_matches('/');
        let mut expected = vec![
            "good.txt".to_string(),
            "server".into(),
            "server/share".into(),
            "server/share/w.txt".into(),
            "tmp".into(),
            "tmp/abs-dir".into(),
            inside.to_string(),
        ];
        expected.sort();
        assert_eq!(
            all_paths(&sb.out()),
            expected,
            "{format:?}: refused entries must not be extracted in any form\n{}",
            r.dump()
        );
        sb.assert_unchanged_outside(&before, &r);
    }
}

/// `..` anywhere, with `/` or `\`, is refused, even when the path would end up inside.
#[test]
fn dotdot_components_refused() {
    for format in FORMATS {
        let sb = Sandbox::new();
        let bad = [
            "a/../../escape.txt",
            "a/../inside.txt",
            "..\\..\\win.txt",
            "sub\\..\\..\\mixed.txt",
            "x/..",
        ];
        let mut entries = vec![H::File("good.txt", "good"), H::Dir("../dirup")];
        entries.extend(bad.iter().map(|n| H::File(n, "evil")));
        let archive = sb.archive(&format!("dotdot.{}", format.suffix()));
        format.write(&archive, &entries);
        let before = sb.snapshot();
        let r = extract(&archive, &sb.out(), &["-j", "4"]);
        r.assert_code(1);
        for n in bad.iter().chain(&["../dirup"]) {
            r.assert_stderr_names(n, REFUSAL_WORDS);
        }
        assert_eq!(
            all_paths(&sb.out()),
            ["good.txt"],
            "{format:?}\n{}",
            r.dump()
        );
        sb.assert_unchanged_outside(&before, &r);
        assert!(
            !sb.root().join("escape.txt").exists() && !sb.root().join("work/escape.txt").exists()
        );
    }
}

/// A symlink whose target leaves OUT is refused (relative, absolute, nested, `..` after a
/// name), and so is what the archive puts below it; links that stay inside are made.
#[test]
fn escaping_symlink_entries_refused() {
    let links = symlinks_work();
    for format in FORMATS {
        let sb = Sandbox::new();
        let outside_abs = sb.outside().display().to_string();
        let entries = [
            H::File("good.txt", "good"),
            H::Symlink("escape_rel_link", "../../outside"),
            H::File("escape_rel_link/through.txt", "evil"),
            H::Symlink("escape_abs_link", &outside_abs),
            H::File("escape_abs_link/through_abs.txt", "evil"),
            H::Dir("d"),
            H::Symlink("d/escape_nested_link", "../../x"),
            H::Symlink("d/dotdot_after_name", "sub/../../.."),
            H::Symlink("ok_link", "good.txt"),
            H::Symlink("d/ok_up_link", "../good.txt"),
        ];
        let archive = sb.archive(&format!("links.{}", format.suffix()));
        format.write(&archive, &entries);
        let before = sb.snapshot();
        for flags in [&["-j", "1"][..], &["-j", "8", "--no-defer-close"][..]] {
            let _ = fs::remove_dir_all(sb.out());
            let r = extract(&archive, &sb.out(), flags);
            r.assert_code(1);
            for n in [
                "escape_rel_link",
                "escape_abs_link",
                "d/escape_nested_link",
                "d/dotdot_after_name",
            ] {
                r.assert_stderr_names(n, REFUSAL_WORDS);
                assert!(
                    !sb.out().join(n).is_symlink(),
                    "{format:?}: {n} was created as a symlink\n{}",
                    r.dump()
                );
            }
            // What the archive puts below a refused symlink is refused too, never written
            // into a folder of that name.
            r.assert_stderr_names("escape_rel_link/through.txt", &["symlink"]);
            r.assert_stderr_names("escape_abs_link/through_abs.txt", &["symlink"]);
            sb.assert_unchanged_outside(&before, &r);
            assert!(children(&sb.outside()).is_empty());
            if links {
                assert_eq!(
                    fs::read_link(sb.out().join("ok_link")).unwrap(),
                    Path::new("good.txt")
                );
                assert_eq!(
                    fs::read_link(sb.out().join("d/ok_up_link")).unwrap(),
                    Path::new("../good.txt")
                );
            } else {
                // Never silently missing: each link that could not be made is reported.
                r.assert_stderr_names("'ok_link':", &["symlink"]);
                r.assert_stderr_names("'d/ok_up_link':", &["symlink"]);
            }
            assert_eq!(
                fs::read_to_string(sb.out().join("good.txt")).unwrap(),
                "good"
            );
        }
    }
}

/// The classic: a symlink to /etc, then a file "inside" it. Nothing reaches /etc.
#[test]
fn symlink_to_etc_then_file_through_it() {
    for format in FORMATS {
        let sb = Sandbox::new();
        let probe = unique_name("probe");
        let through = format!("etc_link/{probe}");
        let archive = sb.archive(&format!("etc.{}", format.suffix()));
        format.write(
            &archive,
            &[
                H::Symlink("etc_link", "/etc"),
                H::File(&through, "evil"),
                H::File("good.txt", "good"),
            ],
        );
        let r = extract(&archive, &sb.out(), &[]);
        let leaked = Path::new("/etc").join(&probe);
        let was_written = leaked.exists();
        if was_written {
            let _ = fs::remove_file(&leaked);
        }
        assert!(
            !was_written,
            "{format:?}: {} was written through the symlink\n{}",
            leaked.display(),
            r.dump()
        );
        r.assert_code(1);
        r.assert_stderr_names("etc_link", REFUSAL_WORDS);
        r.assert_stderr_names(&through, &["symlink"]);
        assert!(
            !sb.out().join("etc_link").exists(),
            "{format:?}\n{}",
            r.dump()
        );
        assert_eq!(
            fs::read_to_string(sb.out().join("good.txt")).unwrap(),
            "good"
        );
    }
}

/// A symlink already in OUT where the archive has a folder is never followed, whatever the
/// overwrite policy: `--overwrite` replaces the link with a real folder, the others fail the
/// entries below it and keep the link.
#[cfg(unix)] // a symlink made in OUT first: Windows needs a privilege, Wine 8 makes none (stub)
#[test]
fn preexisting_symlink_parent_in_out_not_followed() {
    for format in FORMATS {
        for flags in [&[][..], &["--skip-existing"][..], &["--overwrite"][..]] {
            let sb = Sandbox::new();
            let target = sb.outside().join("target.txt");
            fs::write(&target, "ORIGINAL").unwrap();
            let archive = sb.archive(&format!("through.{}", format.suffix()));
            format.write(
                &archive,
                &[
                    H::File("good.txt", "good"),
                    H::File("plink/x.txt", "evil"),
                    H::File("plink/target.txt", "evil"),
                    H::Symlink("plink/sl", "x.txt"),
                    H::Dir("plink/newdir"),
                ],
            );
            fs::create_dir_all(sb.out()).unwrap();
            make_symlink(&sb.outside().display().to_string(), &sb.out().join("plink"));
            let before = sb.snapshot();
            let r = extract(&archive, &sb.out(), flags);
            sb.assert_unchanged_outside(&before, &r);
            assert_eq!(
                children(&sb.outside()),
                ["target.txt"],
                "{format:?} {flags:?}"
            );
            assert_eq!(fs::read_to_string(&target).unwrap(), "ORIGINAL");
            assert_eq!(
                fs::read_to_string(sb.out().join("good.txt")).unwrap(),
                "good"
            );
            let plink = sb.out().join("plink");
            if flags == ["--overwrite"] && r.code() == 0 {
                // The link was replaced, not followed.
                assert!(!plink.is_symlink() && plink.is_dir(), "{}", r.dump());
                assert_eq!(fs::read_to_string(plink.join("x.txt")).unwrap(), "evil");
                continue;
            }
            r.assert_code(1);
            r.assert_stderr_names("plink/x.txt", &["symlink", "not a directory", "refus"]);
            assert!(
                plink.is_symlink(),
                "{format:?}: the existing symlink was removed ({flags:?})"
            );
        }
    }
}

/// A symlink already in OUT at a file's name (pointing outside, or dangling) is never written
/// through: refused by default, replaced by the file with `--overwrite`, kept with
/// `--skip-existing`.
#[cfg(unix)] // symlinks made in OUT first: Windows needs a privilege, Wine 8 makes none (stub)
#[test]
fn preexisting_symlink_at_file_path_not_written_through() {
    for format in FORMATS {
        for (flags, code) in [
            (&[][..], 1),
            (&["--overwrite"][..], 0),
            (&["--skip-existing"][..], 0),
        ] {
            let sb = Sandbox::new();
            let target = sb.outside().join("target.txt");
            fs::write(&target, "ORIGINAL").unwrap();
            let archive = sb.archive(&format!("f.{}", format.suffix()));
            format.write(
                &archive,
                &[
                    H::File("link_to_target", "NEW"),
                    H::File("dangling_link", "NEW"),
                ],
            );
            fs::create_dir_all(sb.out()).unwrap();
            make_symlink(
                &target.display().to_string(),
                &sb.out().join("link_to_target"),
            );
            let dangling = sb.outside().join("created.txt");
            make_symlink(
                &dangling.display().to_string(),
                &sb.out().join("dangling_link"),
            );
            let r = extract(&archive, &sb.out(), flags);
            r.assert_code(code);
            assert_eq!(
                fs::read_to_string(&target).unwrap(),
                "ORIGINAL",
                "{format:?}: written through symlink link_to_target ({flags:?})\n{}",
                r.dump()
            );
            assert!(
                !dangling.exists(),
                "{format:?}: created through dangling symlink ({flags:?})\n{}",
                r.dump()
            );
            let links_kept = || {
                sb.out().join("link_to_target").is_symlink()
                    && sb.out().join("dangling_link").is_symlink()
            };
            match flags.first().copied() {
                None => {
                    r.assert_stderr_names("link_to_target", &["exist"]);
                    r.assert_stderr_names("dangling_link", &["exist"]);
                    assert!(links_kept());
                }
                Some("--overwrite") => {
                    for n in ["link_to_target", "dangling_link"] {
                        let p = sb.out().join(n);
                        assert!(!p.is_symlink(), "{n} still a symlink after --overwrite");
                        assert_eq!(fs::read_to_string(&p).unwrap(), "NEW");
                    }
                }
                _ => assert!(links_kept()),
            }
        }
    }
}

/// No control character of a name reaches the terminal unquoted (issue 26): `list` lines, the
/// failure lines on stderr and a mirror's dry run quote them as GNU tar does (`\033`, `\a`,
/// `\n`), so a name cannot recolour the terminal, set its title (`ESC ]0;...BEL`), or split its
/// line in two: one entry, one line. (`--json` escapes them its own way.)
#[test]
fn control_characters_in_names_never_reach_the_terminal() {
    let t = tempdir();
    let names = [
        "red-\u{1b}[31m.txt",
        "title-\u{1b}]0;pwned\u{7}.txt",
        "two\nlines.txt",
        "c1-\u{9b}2J.txt",
    ];
    let archive = t.join("names.tar");
    let mut entries: Vec<TarEntry> = names
        .iter()
        .map(|n| TarEntry::file(n, "x", 0o644))
        .collect();
    // Absolute: written without its `/`, its name in the warning on stderr.
    entries.push(TarEntry::file("/abs-\u{1b}[2J.txt", "x", 0o644));
    make_tar(&archive, "pax", &entries);
    let clean = |text: &str, what: &str| {
        let bad: Vec<char> = text
            .chars()
            .filter(|&c| c.is_control() && c != '\n')
            .collect();
        assert!(
            bad.is_empty(),
            "{what}: {bad:?} reach the terminal:\n{text}"
        );
    };
    let listed = run_fastwrite(&osv!["list", &archive]);
    clean(&listed.stdout, "list");
    clean(&listed.stderr, "list's stderr");
    assert_eq!(
        listed.stdout.lines().count(),
        names.len() + 1,
        "{}",
        listed.dump()
    );
    assert!(
        listed.stdout.contains("red-\\033[31m.txt"),
        "{}",
        listed.dump()
    );
    assert!(
        listed.stdout.contains("title-\\033]0;pwned\\a.txt"),
        "{}",
        listed.dump()
    );
    assert!(
        listed.stdout.contains("two\\nlines.txt"),
        "{}",
        listed.dump()
    );
    let got = extract(&archive, &t.join("out"), &[]);
    clean(&got.stderr, "extract's stderr");
    assert!(got.stderr.contains("/abs-\\033[2J.txt"), "{}", got.dump());
    #[cfg(unix)] // Windows names cannot hold control characters
    {
        let src = t.join("src");
        std::fs::create_dir(&src).unwrap();
        for name in names {
            std::fs::write(src.join(name), "x").unwrap();
        }
        let dry = run_fastwrite(&osv!["mirror", "-n", &src, t.join("dst")]);
        dry.assert_success();
        clean(&dry.stdout, "mirror -n");
        let copies = dry
            .stdout
            .lines()
            .filter(|l| l.starts_with("copy "))
            .count();
        assert_eq!(copies, names.len(), "one line each\n{}", dry.dump());
    }
}
