//! What fastwrite must do on every system, with archives built in-process by the `zip` and
//! `tar` crates, so that these tests run unchanged on Linux, macOS, Windows and under Wine
//! (where no Unix tool can be started: Wine gives a Windows program no handle to wait on one).
//!
//! Where systems differ the test says what each must do: names Windows cannot hold, names that
//! differ only by case, read-only files, paths longer than Windows' MAX_PATH, 100 ns times.

#[macro_use]
mod common;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use common::*;
use zip::write::SimpleFileOptions;

const WINDOWS: bool = cfg!(windows);
/// Where names ignore case (NTFS and APFS by default): `README` and `readme` are one file.
const NAMES_IGNORE_CASE: bool = cfg!(any(windows, target_os = "macos"));

/// Zip entry options that say "made on Unix" whatever the host: the zip crate otherwise marks
/// entries written on Windows as made by DOS, whose attributes keep no Unix mode.
fn unix_options() -> SimpleFileOptions {
    SimpleFileOptions::default().system(zip::System::Unix)
}

/// Whether this Windows program runs under Wine (whose ntdll exports `wine_get_version`).
#[cfg(windows)]
fn under_wine() -> bool {
    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn GetModuleHandleA(name: *const u8) -> *mut std::ffi::c_void;
        fn GetProcAddress(
            module: *mut std::ffi::c_void,
            name: *const u8,
        ) -> Option<unsafe extern "system" fn() -> isize>;
    }
    // SAFETY: both names are NUL-terminated; ntdll is loaded in every Windows process.
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}

#[cfg(not(windows))]
fn under_wine() -> bool {
    false
}

/// A zip of (name, content) files, written by the zip crate exactly as named.
fn zip_of(path: &Path, files: &[(&str, &[u8])]) {
    let mut w = zip::ZipWriter::new(fs::File::create(path).unwrap());
    for (name, data) in files {
        w.start_file(*name, unix_options().unix_permissions(0o644))
            .unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap();
}

/// A tar of (name, content) files, with the names written raw into the headers (the tar crate's
/// own path setter would refuse some of the hostile ones).
fn tar_of(path: &Path, files: &[(&str, &[u8])]) {
    let mut b = tar::Builder::new(fs::File::create(path).unwrap());
    for (name, data) in files {
        let mut h = tar::Header::new_ustar();
        let raw = &mut h.as_old_mut().name;
        assert!(name.len() < raw.len(), "name too long for this helper");
        raw[..name.len()].copy_from_slice(name.as_bytes());
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(DEFAULT_MTIME as u64);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap().flush().unwrap();
}

fn contents(path: &Path) -> Option<Vec<u8>> {
    fs::read(path).ok()
}

// -------------------------------------------------------------------------------------------
// Names
// -------------------------------------------------------------------------------------------

/// Reserved device names (with or without an extension, any case), trailing dots and spaces,
/// and the characters Windows forbids: refused on Windows, each named with the reason, and the
/// rest extracts; on other systems they are ordinary names and extract as they are.
#[test]
fn names_windows_cannot_hold() {
    let bad = [
        "CON",
        "nul.txt",
        "Aux.tar.gz",
        "com1",
        "LPT9.log",
        "COM0",
        "dir/prn",
        "trailing-dot.",
        "trailing-space ",
        "colon:stream",
        "what?",
        "star*",
        "pipe|x",
        "quote\"x",
        "less<x",
        "more>x",
    ];
    let good = ["ok.txt", "CONSOLE", "com10.txt", "dir/.hidden", "x y.txt"];
    let t = tempdir();
    let mut files: Vec<(&str, &[u8])> = good.iter().map(|n| (*n, n.as_bytes())).collect();
    files.extend(bad.iter().map(|n| (*n, n.as_bytes())));
    for format in ["zip", "tar"] {
        let archive = t.join(format!("names.{format}"));
        if format == "zip" {
            zip_of(&archive, &files);
        } else {
            tar_of(&archive, &files);
        }
        let out = t.join(format!("out-{format}"));
        // More refusals than stderr shows one by one: `--json` has them all.
        let r = extract(&archive, &out, &["--json"]);
        for name in good {
            assert_eq!(
                contents(&out.join(name)).as_deref(),
                Some(name.as_bytes()),
                "{format}: {name}\n{}",
                r.dump()
            );
        }
        if WINDOWS {
            r.assert_code(1);
            for name in bad {
                let why = if name.ends_with(['.', ' ']) {
                    "dot or a space"
                } else if name.contains(|c: char| "<>:\"|?*".contains(c)) {
                    "does not allow"
                } else {
                    "reserved"
                };
                r.assert_stderr_names(name, &[why]);
            }
            let mut expected: Vec<&str> = good.to_vec();
            expected.push("dir");
            expected.sort();
            assert_eq!(
                all_paths(&out),
                expected,
                "{format}: nothing else is written"
            );
        } else {
            r.assert_success();
            for name in bad {
                assert_eq!(
                    contents(&out.join(name)).as_deref(),
                    Some(name.as_bytes()),
                    "{format}: {name:?} is an ordinary name here"
                );
            }
        }
    }
}

/// `\` in a zip name is a separator everywhere (zips made on Windows use it), never part of a
/// name: `dir\sub\file.txt` lands in dir/sub/file.txt, and `..\x` is refused as an escape.
#[test]
fn backslash_in_a_zip_name_is_a_separator() {
    let t = tempdir();
    let archive = t.join("bs.zip");
    zip_of(
        &archive,
        &[
            ("dir\\sub\\file.txt", b"deep"),
            ("top.txt", b"top"),
            ("..\\escape.txt", b"evil"),
        ],
    );
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    r.assert_stderr_names("escape.txt", &["escapes", ".."]);
    assert_eq!(contents(&out.join("dir/sub/file.txt")).unwrap(), b"deep");
    assert_eq!(
        all_paths(&out),
        ["dir", "dir/sub", "dir/sub/file.txt", "top.txt"]
    );
    assert!(!t.join("escape.txt").exists());
}

/// Two entries that differ only by case: where names ignore case the second is refused as a
/// collision naming the first (even with --overwrite), so neither silently replaces the other;
/// where they do not, both are extracted.
#[test]
fn names_that_differ_only_by_case() {
    let files: [(&str, &[u8]); 5] = [
        ("README", b"upper"),
        ("Dir/a.txt", b"a"),
        ("readme", b"lower"),
        ("dir/A.TXT", b"A"),
        ("dir/b.txt", b"b"),
    ];
    let t = tempdir();
    for format in ["zip", "tar"] {
        let archive = t.join(format!("case.{format}"));
        if format == "zip" {
            zip_of(&archive, &files);
        } else {
            tar_of(&archive, &files);
        }
        // One writer: under Wine, names ignore case only as Wine looks them up over a
        // case-keeping Unix directory, and two writers making `Dir` and `dir` at the same
        // moment can both succeed there (NTFS decides atomically). Wine's race, not ours.
        for flags in [&["-j", "1"][..], &["-j", "1", "--overwrite"]] {
            let out = t.join(format!("out-{format}{}", flags.len()));
            let r = extract(&archive, &out, flags);
            if NAMES_IGNORE_CASE {
                r.assert_code(1);
                r.assert_stderr_names("readme", &["case"]);
                r.assert_stderr_names("dir/A.TXT", &["case"]);
                assert!(
                    r.stderr.contains("'README'") && r.stderr.contains("'Dir/a.txt'"),
                    "the earlier names are given\n{}",
                    r.dump()
                );
                assert_eq!(contents(&out.join("README")).unwrap(), b"upper");
                assert_eq!(contents(&out.join("Dir/a.txt")).unwrap(), b"a");
                // Not a collision: another file in the same directory, whatever its case.
                assert_eq!(contents(&out.join("Dir/b.txt")).unwrap(), b"b");
                assert_eq!(all_paths(&out), ["Dir", "Dir/a.txt", "Dir/b.txt", "README"]);
            } else {
                r.assert_success();
                for (name, data) in files {
                    assert_eq!(contents(&out.join(name)).as_deref(), Some(data), "{name}");
                }
            }
        }
    }
}

/// Paths far longer than Windows' MAX_PATH (260) extract, and mirror, on every system.
#[test]
fn paths_longer_than_max_path() {
    let t = tempdir();
    let segment = "a-directory-name-of-sixty-characters-to-make-a-long-path-0123";
    let deep = format!("{}/file.txt", [segment; 6].join("/"));
    assert!(deep.len() > 360);
    let archive = t.join("long.zip");
    zip_of(&archive, &[(&deep, b"far down"), ("short.txt", b"near")]);
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert!(out.join(&deep).as_os_str().len() > 400);
    assert_eq!(contents(&out.join(&deep)).unwrap(), b"far down");

    let copy = t.join("copy");
    run_fastwrite(&osv!["mirror", &out, &copy]).assert_success();
    assert_eq!(contents(&copy.join(&deep)).unwrap(), b"far down");
    assert_eq!(all_paths(&copy), all_paths(&out));
}

// -------------------------------------------------------------------------------------------
// Metadata
// -------------------------------------------------------------------------------------------

/// A file without write permission gets its content first and then the read-only attribute
/// (on Windows a read-only file cannot be written through a new handle), with its mtime; an
/// --overwrite run replaces it, and keeps it read-only.
#[test]
fn read_only_files_keep_their_content_and_mtime() {
    let t = tempdir();
    let archive = t.join("ro.tar");
    let mut b = tar::Builder::new(fs::File::create(&archive).unwrap());
    for (name, data, mode) in [
        ("ro.txt", &b"locked"[..], 0o444),
        ("rw.txt", &b"open"[..], 0o644),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_mtime(1_500_000_000);
        b.append_data(&mut h, name, data).unwrap();
    }
    b.into_inner().unwrap();
    for close in [&[][..], &["--no-defer-close"]] {
        let out = t.join(format!("out{}", close.len()));
        for overwrite in [false, true] {
            let mut flags: Vec<&str> = close.to_vec();
            if overwrite {
                flags.push("--overwrite");
            }
            extract(&archive, &out, &flags).assert_success();
            for (name, data, readonly) in
                [("ro.txt", &b"locked"[..], true), ("rw.txt", b"open", false)]
            {
                let p = out.join(name);
                assert_eq!(fs::read(&p).unwrap(), data, "{name} {flags:?}");
                let md = fs::metadata(&p).unwrap();
                assert_eq!(md.permissions().readonly(), readonly, "{name} {flags:?}");
                assert_eq!(mtime_of(&p), 1_500_000_000, "{name} {flags:?}");
            }
        }
    }
}

/// Sub-second mtimes from pax headers are kept as finely as the system keeps them: to the
/// nanosecond on Linux, to 100 ns on Windows (NTFS and SystemTime count 100 ns ticks).
#[test]
fn pax_mtimes_keep_their_fraction() {
    let t = tempdir();
    let archive = t.join("pax.tar");
    let mut b = tar::Builder::new(fs::File::create(&archive).unwrap());
    b.append_pax_extensions([("mtime", &b"1700000000.123456789"[..])])
        .unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_size(3);
    h.set_mode(0o644);
    h.set_mtime(1_700_000_000);
    b.append_data(&mut h, "fine.txt", &b"abc"[..]).unwrap();
    b.into_inner().unwrap();
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    let got = fs::metadata(out.join("fine.txt"))
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(UNIX_EPOCH)
        .unwrap();
    let nanos = if WINDOWS { 123_456_700 } else { 123_456_789 };
    assert_eq!(got, Duration::new(1_700_000_000, nanos));
}

/// A generated tree of a few hundred files through tar and zip, in both close modes and with
/// --fsync: every file's content, read-only state and mtime come back, on every system.
#[test]
fn generated_tree_through_both_close_modes() {
    let spec = generate_tree(501, &GenOptions::new(300).no_symlinks().no_big_files());
    let t = tempdir();
    let tar_path = t.join("tree.tar");
    let zip_path = t.join("tree.zip");
    {
        let mut b = tar::Builder::new(fs::File::create(&tar_path).unwrap());
        let mut z = zip::ZipWriter::new(fs::File::create(&zip_path).unwrap());
        for node in &spec.nodes {
            let mut h = tar::Header::new_gnu();
            h.set_mode(node.mode);
            h.set_mtime(node.mtime as u64);
            let zopts = unix_options().unix_permissions(node.mode);
            match &node.kind {
                NodeKind::Dir => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_size(0);
                    b.append_data(&mut h, format!("{}/", node.path), std::io::empty())
                        .unwrap();
                    z.add_directory(node.path.as_str(), zopts).unwrap();
                }
                NodeKind::File(data) => {
                    h.set_size(data.len() as u64);
                    b.append_data(&mut h, &node.path, data.as_slice()).unwrap();
                    z.start_file(node.path.as_str(), zopts).unwrap();
                    z.write_all(data).unwrap();
                }
                NodeKind::Symlink(_) => unreachable!("generated without symlinks"),
            }
        }
        b.into_inner().unwrap();
        z.finish().unwrap();
    }
    let flag_sets: [&[&str]; 4] = [
        &[],
        &["--no-defer-close"],
        &["--fsync"],
        &["--close-threads", "1", "-j", "3"],
    ];
    for (archive, exact_mtimes) in [(&tar_path, true), (&zip_path, false)] {
        for flags in flag_sets {
            let out = t.join(format!("out-{}", unique_name("tree")));
            let mut args = osv!["extract", archive, "-o", &out];
            args.extend(flags.iter().map(Into::into));
            let r = run_fastwrite(&args);
            r.assert_success();
            assert_eq!(r.code(), 0);
            let mut files = 0;
            for node in &spec.nodes {
                let p = out.join(&node.path);
                let md =
                    fs::metadata(&p).unwrap_or_else(|e| panic!("{flags:?}: {}: {e}", node.path));
                if let NodeKind::File(data) = &node.kind {
                    files += 1;
                    assert_eq!(&fs::read(&p).unwrap(), data, "{flags:?}: {}", node.path);
                    assert_eq!(
                        md.permissions().readonly(),
                        node.mode & 0o222 == 0,
                        "{flags:?}: read-only state of {}",
                        node.path
                    );
                    // The zip crate writes DOS times only (local time, 2 s steps); the tar
                    // keeps every second.
                    if exact_mtimes {
                        assert_eq!(mtime_of(&p), node.mtime, "{flags:?}: {}", node.path);
                    }
                } else {
                    assert!(md.is_dir(), "{}", node.path);
                    if exact_mtimes {
                        assert_eq!(mtime_of(&p), node.mtime, "{flags:?}: dir {}", node.path);
                    }
                }
            }
            assert_eq!(files, spec.count_files());
            assert_eq!(
                all_paths(&out).len(),
                spec.nodes.len(),
                "{flags:?}: nothing more"
            );
        }
    }
}

/// Symlink entries: extracted where the system lets this user make symlinks; where it does not
/// (Windows without Developer Mode or elevation) the entry fails with a message naming the fix,
/// and everything else extracts.
#[test]
fn symlinks_or_a_message_naming_the_fix() {
    let t = tempdir();
    let archive = t.join("links.tar");
    let mut b = tar::Builder::new(fs::File::create(&archive).unwrap());
    let mut h = tar::Header::new_gnu();
    h.set_size(6);
    h.set_mode(0o644);
    h.set_mtime(1_600_000_000);
    b.append_data(&mut h, "target.txt", &b"target"[..]).unwrap();
    let mut l = tar::Header::new_gnu();
    l.set_entry_type(tar::EntryType::Symlink);
    l.set_size(0);
    l.set_mode(0o777);
    l.set_mtime(1_600_000_000);
    b.append_link(&mut l, "link.txt", "target.txt").unwrap();
    b.into_inner().unwrap();
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    assert_eq!(contents(&out.join("target.txt")).unwrap(), b"target");
    if under_wine() {
        // Wine (8.0) itself: CreateSymbolicLinkW is a stub that reports success and makes
        // nothing. fastwrite notices when it sets the link's mtime, and names the entry.
        r.assert_code(1);
        r.assert_stderr_names("link.txt", &["symlink"]);
        assert!(fs::symlink_metadata(out.join("link.txt")).is_err());
    } else if r.code() == 0 {
        let link = out.join("link.txt");
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("target.txt"));
        assert_eq!(contents(&link).unwrap(), b"target");
    } else {
        if !WINDOWS {
            panic!("only Windows may refuse a symlink\n{}", r.dump());
        }
        r.assert_code(1);
        r.assert_stderr_names("link.txt", &["Developer Mode"]);
    }
}
