//! Integration tests for `fastwrite mirror SRC DST`: DST made an exact copy of the contents of
//! SRC, as `rsync -a SRC/ DST/` makes it.
//!
//! The references are the source tree itself (compared strictly: modes with the setid and
//! sticky bits, mtimes of files, directories and symlinks to the nanosecond), and `cp -a` and
//! `rsync -a` (with `--delete`, `-H`, `-L`, `--exclude`) run on the very same trees. What an
//! incremental run must leave alone is checked by inode and ctime, not by content: a rewrite
//! with the same bytes is still a write. Permission failures run the binary as an unprivileged
//! user, because root reads a mode-000 file as easily as any other.

// Modes, symlinks, hard links, FIFOs and every reference tool used here are unix things.
#![cfg(unix)]

#[macro_use]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use filetime::FileTime;

// -------------------------------------------------------------------------------------------
// Helpers local to the mirror tests
// -------------------------------------------------------------------------------------------

/// The two ways of closing files: every main scenario runs in both.
const CLOSE_MODES: &[&[&str]] = &[&[], &["--no-defer-close"]];

/// A base mtime for the hand-made parts of the trees (2011-03-13).
const M: i64 = 1_300_000_000;

/// `fastwrite GLOBALS... mirror FLAGS... SRC DST`.
fn mirror_args(globals: &[&str], flags: &[&str], src: &Path, dst: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = globals.iter().map(OsString::from).collect();
    a.push("mirror".into());
    a.extend(flags.iter().map(OsString::from));
    a.extend(osv![src, dst]);
    a
}

/// `fastwrite mirror FLAGS... SRC DST` (global flags go after the subcommand too).
#[track_caller]
fn mirror(src: &Path, dst: &Path, flags: &[&str]) -> Output {
    run_fastwrite(&mirror_args(&[], flags, src, dst))
}

/// `mode` followed by `more`: the close-mode flags of a loop plus the flags of one run.
fn with(mode: &[&'static str], more: &[&'static str]) -> Vec<&'static str> {
    [mode, more].concat()
}

/// Set the mtime of `p` (not following a symlink) to `secs`.`nanos`.
fn set_mtime_ns(p: &Path, secs: i64, nanos: u32) {
    let at = FileTime::from_unix_time(DEFAULT_MTIME, 0);
    filetime::set_symlink_file_times(p, at, FileTime::from_unix_time(secs, nanos))
        .unwrap_or_else(|e| panic!("set times {}: {e}", p.display()));
}

/// `cp -a SRC DST` (DST must not exist): GNU cp's copy, ownership, times and links kept.
#[track_caller]
fn cp_a(src: &Path, dst: &Path) {
    run_tool("cp", &osv!["-a", src, dst], None);
}

/// `rsync -a EXTRA... SRC/ DST/`.
#[track_caller]
fn rsync(src: &Path, dst: &Path, extra: &[&str]) {
    let mut a: Vec<OsString> = vec!["-a".into()];
    a.extend(extra.iter().map(OsString::from));
    let (mut s, mut d) = (src.as_os_str().to_owned(), dst.as_os_str().to_owned());
    s.push("/");
    d.push("/");
    a.extend([s, d]);
    run_tool("rsync", &a, None);
}

/// How a tree that rsync updated is compared: rsync (3.5 here) leaves the mtime of a
/// symlink it replaces on an incremental run at the time of the run, so link mtimes are left
/// out; the same DST is compared strictly with the source as well.
fn vs_rsync_update() -> Compare {
    Compare {
        symlink_mtimes: false,
        ..Compare::strict()
    }
}

/// A seeded tree with every kind of entry mirror copies, built under `root`: the generator's
/// files of many sizes and modes (empty ones, ~1 MiB ones), read-only and empty directories and
/// relative symlinks; setuid, setgid and sticky bits, a mode-000 file, a 1.5 MiB file, nested
/// empty directories, absolute and dangling symlinks, a non-ASCII name; then `extra`. Every
/// mtime has a fraction of a second, the root's too, and the root has an unusual mode.
fn rich_tree(seed: u64, files: usize, root: &Path, extra: TreeSpec) -> TreeSpec {
    let mut spec = generate_tree(seed, &GenOptions::new(files))
        .dir("special", 0o1777, M)
        .dir("special/setgid-dir", 0o2775, M + 1)
        .file("special/setuid", "suid", 0o4755, M + 2)
        .file("special/setgid", "sgid", 0o2711, M + 3)
        .file("special/all-bits", "every bit", 0o7777, M + 4)
        .file("special/mode-000", "nobody may read this", 0o000, M + 5)
        .file("special/empty", "", 0o644, M + 6)
        .file("special/big", random(seed, (3 << 19) + 3), 0o640, M + 7)
        .dir("special/empty-dir", 0o700, M + 8)
        .dir("special/empty-dir/nested-empty", 0o755, M + 9)
        .file("special/ünïcödé 名前.txt", "utf-8", 0o644, M + 10)
        .symlink("special/abs-link", "/etc/hostname")
        .symlink("special/abs-dangling", "/nonexistent/fastwrite/target")
        .symlink("special/dangling", "no/such/target")
        .symlink("special/to-parent", "..");
    spec.nodes.extend(extra.nodes);
    spec.build(root);
    set_subsecond_mtimes(root, seed);
    set_mode(root, 0o751);
    set_mtime_ns(root, M + 99, 123_456_789);
    spec
}

/// DST is SRC: every path, kind, content and symlink target, modes, mtimes to the nanosecond
/// (symlinks' too), hard-link identity; the root's mode and mtime; no temp file left.
#[track_caller]
fn assert_mirrored(src: &Path, dst: &Path, context: &str) {
    assert_same_tree(src, dst, &Compare::strict(), context);
    assert_root_same(src, dst, context);
    assert_no_temp_names(dst, context);
}

#[track_caller]
fn assert_root_same(src: &Path, dst: &Path, context: &str) {
    let (s, d) = (meta_of(src), meta_of(dst));
    assert_eq!(
        (d.kind, format!("{:04o}", d.perm), d.mtime, d.mtime_nsec),
        (s.kind, format!("{:04o}", s.perm), s.mtime, s.mtime_nsec),
        "{context}: DST root does not have SRC root's mode and mtime"
    );
}

/// Files are written under a temp name (containing `.fastwrite-`) and renamed into place: none
/// may be left behind, whatever happened.
#[track_caller]
fn assert_no_temp_names(dst: &Path, context: &str) {
    let stray: Vec<String> = all_paths(dst)
        .into_iter()
        .filter(|p| p.contains(".fastwrite-"))
        .collect();
    assert!(
        stray.is_empty(),
        "{context}: temp files left in DST: {stray:?}"
    );
}

fn same_mtime(a: &Meta, b: &Meta) -> bool {
    (a.mtime, a.mtime_nsec) == (b.mtime, b.mtime_nsec)
}

fn same_content(a: &Path, b: &Path) -> bool {
    fs::read(a).unwrap() == fs::read(b).unwrap()
}

fn count_files(root: &Path) -> usize {
    scan_tree(root)
        .values()
        .filter(|m| m.kind == Kind::File)
        .count()
}

fn rel_string(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The `--stats` figures of `r` that are not as wanted, one line each (empty when all are):
/// collected, so that a wrong count does not hide what the rest of a test would find.
fn stat_mismatches(r: &Output, want: &[(&str, u64)]) -> Vec<String> {
    want.iter()
        .filter(|(key, n)| r.stat(key) != *n)
        .map(|(key, n)| format!("{}: `{key}` {}, expected {n}", r.cmdline, r.stat(key)))
        .collect()
}

#[track_caller]
fn assert_no_mismatches(mismatches: &[String], r: &Output) {
    assert!(
        mismatches.is_empty(),
        "wrong --stats figures:\n  {}\n{}",
        mismatches.join("\n  "),
        r.dump()
    );
}

// -------------------------------------------------------------------------------------------
// The dry-run oracle
// -------------------------------------------------------------------------------------------

const VERBS: &[&str] = &[
    "mkdir", "copy", "replace", "symlink", "hardlink", "update", "delete",
];

/// What a dry run may print for one path.
#[derive(Debug)]
struct Action {
    /// The verbs it may be printed with (a type change may be told as a delete and a create,
    /// or as one replace).
    verbs: Vec<&'static str>,
    /// It must be printed (a path below a deleted directory may or may not be).
    required: bool,
    /// SRC has a directory there.
    src_dir: bool,
    /// DST has a directory there.
    dst_dir: bool,
}

/// Every action a run of `mirror SRC DST` (with `--delete` and `-c` as given) has to take,
/// worked out from the two trees as they are: the test's model of the spec's comparison rules.
fn expected_actions(
    src: &Path,
    dst: &Path,
    delete: bool,
    checksum: bool,
) -> BTreeMap<String, Action> {
    let s = scan_tree(src);
    let d = if dst.exists() {
        scan_tree(dst)
    } else {
        BTreeMap::new()
    };
    let mut out = BTreeMap::new();
    for (p, sm) in &s {
        let create = match sm.kind {
            Kind::Dir => "mkdir",
            Kind::File => "copy",
            Kind::Symlink => "symlink",
            Kind::Other => continue,
        };
        let verbs = match d.get(p) {
            None => Some(vec![create]),
            Some(dm) if dm.kind != sm.kind => Some(vec![create, "replace", "delete"]),
            Some(dm) => match sm.kind {
                Kind::File => {
                    let (a, b) = (src.join(p), dst.join(p));
                    let trusted = !checksum && sm.len == dm.len && same_mtime(sm, dm);
                    if !trusted && (sm.len != dm.len || !same_content(&a, &b)) {
                        Some(vec!["replace"])
                    } else if sm.perm != dm.perm || !same_mtime(sm, dm) {
                        Some(vec!["update"])
                    } else {
                        None
                    }
                }
                Kind::Dir => (sm.perm != dm.perm || !same_mtime(sm, dm)).then(|| vec!["update"]),
                Kind::Symlink if sm.target != dm.target => Some(vec!["symlink", "replace"]),
                Kind::Symlink => (!same_mtime(sm, dm)).then(|| vec!["update"]),
                Kind::Other => None,
            },
        };
        if let Some(verbs) = verbs {
            let dst_dir = d.get(p).is_some_and(|m| m.kind == Kind::Dir);
            out.insert(
                rel_string(p),
                Action {
                    verbs,
                    required: true,
                    src_dir: sm.kind == Kind::Dir,
                    dst_dir,
                },
            );
        }
    }
    if delete {
        for (p, dm) in &d {
            if s.contains_key(p) {
                continue;
            }
            // Under a directory that stays, the delete must be told; under one that goes, the
            // run may tell each path or just the directory.
            let parent_stays = p.parent().is_none_or(|parent| {
                parent.as_os_str().is_empty() || s.get(parent).is_some_and(|m| m.kind == Kind::Dir)
            });
            out.insert(
                rel_string(p),
                Action {
                    verbs: vec!["delete"],
                    required: parent_stays,
                    src_dir: false,
                    dst_dir: dm.kind == Kind::Dir,
                },
            );
        }
    }
    out
}

/// Splits a dry-run line into verb, path, and the link target that `symlink`, `hardlink` and
/// their `replace` lines add after ` -> ` (symlink) or ` => ` (hard link).
fn dry_run_line(line: &str) -> Option<(&str, &str, Option<&str>)> {
    let (verb, rest) = line.split_once(' ')?;
    for arrow in [" -> ", " => "] {
        if matches!(verb, "symlink" | "hardlink" | "replace")
            && let Some((path, target)) = rest.split_once(arrow)
        {
            return Some((verb, path, Some(target)));
        }
    }
    Some((verb, rest, None))
}

/// The `VERB PATH[ -> TARGET]` lines of a dry run, each checked against the oracle: a known verb, the
/// trailing `/` exactly on directories, an allowed verb for a path that needs an action, no
/// path that needs none, every required path told, no line twice. Lines for the root itself
/// (`./`) are allowed. All problems are reported at once.
#[track_caller]
fn assert_dry_run(out: &Output, expected: &BTreeMap<String, Action>, context: &str) {
    let mut problems = Vec::new();
    let mut told = BTreeSet::new();
    let mut seen_lines = BTreeSet::new();
    for line in out.stdout.lines() {
        if !seen_lines.insert(line) {
            problems.push(format!("line printed twice: {line:?}"));
        }
        let Some((verb, path, target)) = dry_run_line(line) else {
            problems.push(format!("not `VERB PATH`: {line:?}"));
            continue;
        };
        if target.is_some() != matches!(verb, "symlink" | "hardlink") && verb != "replace" {
            problems.push(format!("a link target only on link lines: {line:?}"));
        }
        if !VERBS.contains(&verb) {
            problems.push(format!("unknown verb: {line:?}"));
            continue;
        }
        if ["", ".", "./", "/"].contains(&path) {
            continue;
        }
        let slash = path.ends_with('/');
        let key = path.trim_end_matches('/');
        let Some(a) = expected.get(key) else {
            problems.push(format!("needs no action: {line:?}"));
            continue;
        };
        told.insert(key.to_string());
        if !a.verbs.contains(&verb) {
            problems.push(format!(
                "wrong verb: {line:?} (expected one of {:?})",
                a.verbs
            ));
        }
        let want_slash = match verb {
            "mkdir" => true,
            "copy" | "symlink" | "hardlink" => false,
            "delete" => a.dst_dir,
            _ => a.src_dir,
        };
        if slash != want_slash {
            problems.push(format!(
                "{line:?}: a directory must end with `/`, nothing else may"
            ));
        }
    }
    for (p, a) in expected {
        if a.required && !told.contains(p) {
            problems.push(format!("not told: {p} (one of {:?})", a.verbs));
        }
    }
    assert!(
        problems.is_empty(),
        "{context}: the dry run's list is wrong:\n  {}\n{}",
        problems.join("\n  "),
        out.dump()
    );
}

// -------------------------------------------------------------------------------------------
// The change scenario: a fixed part of the tree edited in every way the spec names
// -------------------------------------------------------------------------------------------

/// The part of the tree `apply_changes` edits; the generated part around it stays as it is.
fn chg_spec() -> TreeSpec {
    TreeSpec::new()
        .dir("chg", 0o755, M)
        .file("chg/same-size.txt", text(1, 1000), 0o644, M + 1)
        .file("chg/append.txt", "hello\n", 0o644, M + 2)
        .file("chg/touch-only.txt", "touch", 0o644, M + 3)
        .file("chg/chmod-only.txt", "chmod", 0o644, M + 4)
        .file("chg/suid-content.bin", random(2, 3000), 0o4755, M + 5)
        .file("chg/big.bin", random(3, 1_200_000), 0o640, M + 6)
        .file("chg/remove-me.txt", "bye", 0o644, M + 7)
        .dir("chg/remove-dir", 0o755, M + 8)
        .file("chg/remove-dir/a", "a", 0o644, M + 9)
        .dir("chg/remove-dir/sub", 0o700, M + 10)
        .file("chg/remove-dir/sub/b", "b", 0o600, M + 11)
        .symlink("chg/link", "same-size.txt")
        .file("chg/file-to-dir", "was a file", 0o644, M + 12)
        .dir("chg/emptydir-to-file", 0o755, M + 13)
        .dir("chg/dir-to-file", 0o755, M + 14)
        .file("chg/dir-to-file/x", "x", 0o644, M + 15)
        .file("chg/file-to-link", "will be a link", 0o644, M + 16)
        .symlink("chg/link-to-file", "append.txt")
        .symlink("chg/link-to-dir", "nowhere")
        .dir("chg/dir-mode", 0o755, M + 17)
        .file("chg/dir-mode/inside", "i", 0o644, M + 18)
        .file("chg/keep.txt", "keep", 0o644, M + 19)
        .symlink("chg/keep-link", "keep.txt")
        .dir("chg/keep-dir", 0o750, M + 20)
        .file("chg/keep-dir/k.txt", "k", 0o644, M + 21)
}

/// Edit `chg/` of a tree made with `chg_spec`: same-size content change, append, touch only,
/// chmod only, new content on a setuid file, a change in the middle of a big file, removed
/// file and directory, new symlink target, file->dir, empty dir->file, file->symlink,
/// symlink->file, symlink->dir, directory chmod, new file, directories and symlink. With
/// `nonempty_dir_to_file` a non-empty directory also becomes a file (which only `--delete` may
/// do). Every time set here is explicit, so nothing depends on the clock.
fn apply_changes(v2: &Path, nonempty_dir_to_file: bool) {
    let c = |p: &str| v2.join("chg").join(p);
    let write = |p: &str, data: &[u8]| fs::write(c(p), data).unwrap();

    let mut d = fs::read(c("same-size.txt")).unwrap();
    d[0] ^= 1;
    d[500] ^= 0xff;
    write("same-size.txt", &d);
    set_mtime_ns(&c("same-size.txt"), M + 101, 1);

    let mut d = fs::read(c("append.txt")).unwrap();
    d.extend_from_slice(b"world\n");
    write("append.txt", &d);
    set_mtime_ns(&c("append.txt"), M + 102, 2);

    set_mtime_ns(&c("touch-only.txt"), M + 103, 3);
    set_mode(&c("chmod-only.txt"), 0o600);

    write("suid-content.bin", &random(20, 2500));
    set_mode(&c("suid-content.bin"), 0o4755);
    set_mtime_ns(&c("suid-content.bin"), M + 104, 4);

    let mut d = fs::read(c("big.bin")).unwrap();
    d[600_000] ^= 0x55;
    write("big.bin", &d);
    set_mtime_ns(&c("big.bin"), M + 105, 5);

    fs::remove_file(c("remove-me.txt")).unwrap();
    fs::remove_dir_all(c("remove-dir")).unwrap();

    fs::remove_file(c("link")).unwrap();
    make_symlink("append.txt", &c("link"));

    fs::remove_file(c("file-to-dir")).unwrap();
    fs::create_dir(c("file-to-dir")).unwrap();
    write("file-to-dir/inner.txt", b"inside what was a file");
    set_mtime_ns(&c("file-to-dir/inner.txt"), M + 106, 6);
    set_mtime_ns(&c("file-to-dir"), M + 107, 7);

    fs::remove_dir(c("emptydir-to-file")).unwrap();
    write("emptydir-to-file", b"was an empty dir");
    set_mtime_ns(&c("emptydir-to-file"), M + 108, 8);

    if nonempty_dir_to_file {
        fs::remove_dir_all(c("dir-to-file")).unwrap();
        write("dir-to-file", b"was a full dir");
        set_mtime_ns(&c("dir-to-file"), M + 109, 9);
    }

    fs::remove_file(c("file-to-link")).unwrap();
    make_symlink("keep.txt", &c("file-to-link"));

    fs::remove_file(c("link-to-file")).unwrap();
    write("link-to-file", b"was a symlink");
    set_mtime_ns(&c("link-to-file"), M + 110, 10);

    fs::remove_file(c("link-to-dir")).unwrap();
    fs::create_dir(c("link-to-dir")).unwrap();
    write("link-to-dir/f", b"in what was a symlink");
    set_mtime_ns(&c("link-to-dir/f"), M + 111, 11);
    set_mtime_ns(&c("link-to-dir"), M + 112, 12);

    set_mode(&c("dir-mode"), 0o700);

    write("new.txt", b"new");
    set_mtime_ns(&c("new.txt"), M + 113, 13);
    fs::create_dir_all(c("newdir/deep")).unwrap();
    write("newdir/deep/f.txt", b"deep");
    set_mtime_ns(&c("newdir/deep/f.txt"), M + 114, 14);
    set_mtime_ns(&c("newdir/deep"), M + 115, 15);
    set_mtime_ns(&c("newdir"), M + 116, 16);
    fs::create_dir(c("new-empty-dir")).unwrap();
    set_mode(&c("new-empty-dir"), 0o705);
    set_mtime_ns(&c("new-empty-dir"), M + 117, 17);
    make_symlink("new.txt", &c("new-link"));

    set_mtime_ns(&v2.join("chg"), M + 200, 200);
}

/// v1 (a rich tree with `chg/`) and v2 (its `cp -a` copy, then `apply_changes`), under `t`.
fn v1_v2(t: &TestDir, seed: u64, nonempty_dir_to_file: bool) -> (PathBuf, PathBuf) {
    let (v1, v2) = (t.join("v1"), t.join("v2"));
    rich_tree(seed, 200, &v1, chg_spec());
    cp_a(&v1, &v2);
    apply_changes(&v2, nonempty_dir_to_file);
    (v1, v2)
}

/// Inodes after an incremental run: a file whose content did not change from v1 to v2 keeps
/// its inode (left alone, or updated in place); one whose content changed gets a new one
/// (written aside and renamed); a directory that stays a directory keeps its inode.
#[track_caller]
fn assert_inodes_follow_changes(
    v1: &Path,
    v2: &Path,
    before: &BTreeMap<PathBuf, Meta>,
    after: &BTreeMap<PathBuf, Meta>,
    context: &str,
) {
    let (s1, s2) = (scan_tree(v1), scan_tree(v2));
    let mut problems = Vec::new();
    for (p, m2) in &s2 {
        let (Some(m1), Some(b), Some(a)) = (s1.get(p), before.get(p), after.get(p)) else {
            continue;
        };
        if m1.kind != m2.kind || b.kind != m1.kind {
            continue;
        }
        let kept = a.file_id == b.file_id;
        match m2.kind {
            Kind::File => {
                let changed = m1.len != m2.len || !same_content(&v1.join(p), &v2.join(p));
                if changed && kept {
                    problems.push(format!("{}: changed, but rewritten in place", p.display()));
                }
                if !changed && !kept {
                    problems.push(format!(
                        "{}: content unchanged, but a new inode",
                        p.display()
                    ));
                }
            }
            Kind::Dir if !kept => {
                problems.push(format!("{}: directory recreated", p.display()));
            }
            _ => {}
        }
    }
    assert!(
        problems.is_empty(),
        "{context}:\n  {}",
        problems.join("\n  ")
    );
}

/// Files of v2 whose content differs from v1's at that path (new ones included): what an
/// incremental run has to write.
fn files_to_write(v1: &Path, v2: &Path) -> u64 {
    let (s1, s2) = (scan_tree(v1), scan_tree(v2));
    s2.iter()
        .filter(|(p, m2)| {
            m2.kind == Kind::File
                && s1.get(*p).is_none_or(|m1| {
                    m1.kind != Kind::File || !same_content(&v1.join(p), &v2.join(p))
                })
        })
        .count() as u64
}

/// Files of v2 identical in v1 (content, mode, mtime): what an incremental run leaves alone.
fn files_unchanged(v1: &Path, v2: &Path) -> u64 {
    let (s1, s2) = (scan_tree(v1), scan_tree(v2));
    s2.iter()
        .filter(|(p, m2)| {
            m2.kind == Kind::File
                && s1.get(*p).is_some_and(|m1| {
                    m1.kind == Kind::File
                        && m1.perm == m2.perm
                        && same_mtime(m1, m2)
                        && same_content(&v1.join(p), &v2.join(p))
                })
        })
        .count() as u64
}

// -------------------------------------------------------------------------------------------
// A fresh copy
// -------------------------------------------------------------------------------------------

/// A fresh copy of a tree with every kind of entry is the source, to the nanosecond, whatever
/// the close mode, thread counts, fsync, and wherever the global flags are put. `--stats`
/// counts what was made.
#[test]
fn fresh_copy_is_exact_in_every_close_mode() {
    let t = tempdir();
    let src = t.join("src");
    let spec = rich_tree(11, 300, &src, TreeSpec::new());
    let src_before = deep_snapshot(&src);
    let runs: &[(&[&str], &[&str])] = &[
        (&[], &["--stats"]),
        (&["--no-defer-close"], &["--stats"]),
        (&[], &["--no-defer-close", "-j", "1"]),
        (&["-j", "8", "--close-threads", "1"], &[]),
        (&["--fsync"], &["--no-defer-close", "-j", "3"]),
        (&["-q"], &["--close-threads", "16", "--fsync"]),
    ];
    for (i, (globals, flags)) in runs.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        let r = run_fastwrite(&mirror_args(globals, flags, &src, &dst));
        r.assert_success();
        assert_mirrored(&src, &dst, &r.cmdline);
        if flags.contains(&"--stats") {
            let want = [
                ("files:", spec.count_files() as u64),
                ("symlinks:", spec.count_symlinks() as u64),
                ("hard links:", 0),
                ("unchanged:", 0),
                ("updated:", 0),
                ("deleted:", 0),
                ("failed:", 0),
                ("bytes:", spec.total_bytes()),
            ];
            for (key, n) in want {
                assert_eq!(r.stat(key), n, "{key}\n{}", r.dump());
            }
            let dirs = r.stat("directories:");
            let n = spec.count_dirs() as u64;
            assert!(
                dirs == n || dirs == n + 1,
                "directories: {dirs}, expected {n} (or {} with the root)\n{}",
                n + 1,
                r.dump()
            );
        }
        if globals.contains(&"-q") {
            assert!(
                r.stdout.is_empty() && r.stderr.is_empty(),
                "-q printed something\n{}",
                r.dump()
            );
        }
        fs::remove_dir_all(&dst).unwrap();
    }
    assert_same_snapshot(&src_before, &deep_snapshot(&src), "SRC was written to");
}

/// The same tree copied by `cp -a` and by `rsync -a SRC/ X/` is what mirror makes, root
/// included.
#[test]
fn fresh_copy_matches_cp_a_and_rsync() {
    let t = tempdir();
    let src = t.join("src");
    rich_tree(12, 250, &src, TreeSpec::new());
    let (by_cp, by_rsync) = (t.join("cp"), t.join("rsync"));
    cp_a(&src, &by_cp);
    rsync(&src, &by_rsync, &[]);
    for (reference, name) in [(&by_cp, "cp -a"), (&by_rsync, "rsync -a")] {
        assert_same_tree(
            &src,
            reference,
            &Compare::strict(),
            &format!("sanity: {name} vs the source"),
        );
        assert_root_same(&src, reference, &format!("sanity: {name}"));
    }
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        let r = mirror(&src, &dst, mode);
        r.assert_success();
        for (reference, name) in [(&by_cp, "cp -a"), (&by_rsync, "rsync -a")] {
            let context = format!("{}: fastwrite vs {name}", r.cmdline);
            assert_same_tree(reference, &dst, &Compare::strict(), &context);
            assert_root_same(reference, &dst, &context);
        }
    }
}

// -------------------------------------------------------------------------------------------
// Incremental runs
// -------------------------------------------------------------------------------------------

/// After every kind of change, a run with --delete makes DST the new source again, as
/// `rsync -a --delete` does; only what changed is written (inodes), and `--stats` says so.
#[test]
fn changes_with_delete_give_the_new_source_like_rsync() {
    let t = tempdir();
    let (v1, v2) = v1_v2(&t, 21, true);
    let by_rsync = t.join("rsync");
    rsync(&v1, &by_rsync, &[]);
    rsync(&v2, &by_rsync, &["--delete"]);
    assert_same_tree(
        &v2,
        &by_rsync,
        &vs_rsync_update(),
        "sanity: rsync --delete vs v2",
    );
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        mirror(&v1, &dst, mode).assert_success();
        assert_mirrored(&v1, &dst, "first run");
        let before = scan_tree(&dst);
        let r = mirror(&v2, &dst, &with(mode, &["--delete", "--stats"]));
        r.assert_success();
        assert_mirrored(&v2, &dst, &r.cmdline);
        assert_same_tree(
            &by_rsync,
            &dst,
            &vs_rsync_update(),
            &format!("{}: fastwrite vs rsync -a --delete", r.cmdline),
        );
        assert_inodes_follow_changes(&v1, &v2, &before, &scan_tree(&dst), &r.cmdline);
        // touch-only.txt and chmod-only.txt are updated; directories may count too.
        assert!(r.stat("updated:") >= 2, "{}", r.dump());
        // remove-me.txt and remove-dir/ at least (its content may count too).
        assert!(r.stat("deleted:") >= 2, "{}", r.dump());
        let mismatches = stat_mismatches(
            &r,
            &[
                ("files:", files_to_write(&v1, &v2)),
                ("unchanged:", files_unchanged(&v1, &v2)),
                ("failed:", 0),
            ],
        );
        assert_no_mismatches(&mismatches, &r);
    }
}

/// Without --delete, the same changes are applied but what SRC lost stays in DST: the result
/// is `rsync -a` without --delete. (Only an empty directory may become a file then.)
#[test]
fn changes_without_delete_keep_extra_files_like_rsync() {
    let t = tempdir();
    let (v1, v2) = v1_v2(&t, 22, false);
    let by_rsync = t.join("rsync");
    rsync(&v1, &by_rsync, &[]);
    rsync(&v2, &by_rsync, &[]);
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        mirror(&v1, &dst, mode).assert_success();
        let before = scan_tree(&dst);
        let r = mirror(&v2, &dst, mode);
        r.assert_success();
        assert_same_tree(
            &by_rsync,
            &dst,
            &vs_rsync_update(),
            &format!("{}: fastwrite vs rsync -a", r.cmdline),
        );
        assert_root_same(&v2, &dst, &r.cmdline);
        assert_no_temp_names(&dst, &r.cmdline);
        // Everything of v2 is there, exactly; the rest is what v1 had and v2 lost.
        let diffs = diff_trees(&v2, &dst, &Compare::strict());
        let mut extras: Vec<&str> = diffs
            .iter()
            .map(|d| d.strip_prefix("extra: ").unwrap_or_else(|| panic!("{d}")))
            .collect();
        extras.sort();
        assert_eq!(
            extras,
            [
                "chg/remove-dir (Dir)",
                "chg/remove-dir/a (File)",
                "chg/remove-dir/sub (Dir)",
                "chg/remove-dir/sub/b (File)",
                "chg/remove-me.txt (File)",
            ],
            "{}",
            r.dump()
        );
        assert_eq!(
            fs::read_to_string(dst.join("chg/remove-me.txt")).unwrap(),
            "bye"
        );
        assert_inodes_follow_changes(&v1, &v2, &before, &scan_tree(&dst), &r.cmdline);
    }
}

/// A second run on an unchanged tree writes nothing at all: every inode, mtime and ctime in
/// DST (root and directories included) stays; the dry run prints nothing; `--stats` counts
/// every file as unchanged. SRC is never written to.
#[test]
fn unchanged_second_run_writes_nothing() {
    let t = tempdir();
    let src = t.join("src");
    let spec = rich_tree(31, 250, &src, TreeSpec::new());
    let src_before = deep_snapshot(&src);
    let flag_sets: &[&[&str]] = &[
        &[],
        &["--no-defer-close"],
        &["--delete"],
        &["-c"],
        &["-H"],
        &["--no-defer-close", "--delete", "-c", "-H", "-j", "1"],
    ];
    let (mut mismatches, mut last) = (Vec::new(), None);
    for (i, flags) in flag_sets.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        mirror(&src, &dst, flags).assert_success();
        assert_mirrored(&src, &dst, "first run");
        let before = deep_snapshot(&dst);
        // ctimes tick with the clock: give a rewrite time to show.
        std::thread::sleep(Duration::from_millis(30));
        let dry = mirror(&src, &dst, &with(flags, &["-n"]));
        dry.assert_success();
        assert!(
            dry.stdout.trim().is_empty(),
            "the dry run lists actions on an unchanged tree\n{}",
            dry.dump()
        );
        let r = mirror(&src, &dst, &with(flags, &["--stats"]));
        r.assert_success();
        assert_same_snapshot(
            &before,
            &deep_snapshot(&dst),
            &format!("second run wrote to DST: {}", r.cmdline),
        );
        mismatches.extend(stat_mismatches(
            &r,
            &[
                ("unchanged:", spec.count_files() as u64),
                ("files:", 0),
                ("updated:", 0),
                ("deleted:", 0),
                ("failed:", 0),
            ],
        ));
        last = Some(r);
    }
    assert_same_snapshot(&src_before, &deep_snapshot(&src), "SRC was written to");
    if let Some(r) = last {
        assert_no_mismatches(&mismatches, &r);
    }
}

/// A file whose content changed but whose size and mtime were put back is trusted (left
/// alone) without -c and copied with it; a -c run on what is then identical writes nothing.
#[test]
fn checksum_finds_same_size_same_mtime_changes() {
    for mode in CLOSE_MODES {
        let t = tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        let old = random(41, 4096);
        TreeSpec::new()
            .file("data.bin", old.clone(), 0o644, M)
            .file("other.txt", "other", 0o644, M + 1)
            .build(&src);
        set_mtime_ns(&src.join("data.bin"), M, 777);
        mirror(&src, &dst, mode).assert_success();
        let ino = meta_of(&dst.join("data.bin")).file_id;

        let mut new = old.clone();
        new[2000] ^= 0x80;
        fs::write(src.join("data.bin"), &new).unwrap();
        set_mtime_ns(&src.join("data.bin"), M, 777);
        set_mtime_ns(&src, M + 5, 0);
        set_mtime_ns(&dst, M + 5, 0);

        let r = mirror(&src, &dst, &with(mode, &["--stats"]));
        r.assert_success();
        assert_eq!(
            fs::read(dst.join("data.bin")).unwrap(),
            old,
            "copied without -c"
        );
        assert_eq!(meta_of(&dst.join("data.bin")).file_id, ino);
        let mut mismatches = stat_mismatches(&r, &[("unchanged:", 2), ("files:", 0)]);

        let dry = mirror(&src, &dst, &with(mode, &["-n", "-c"]));
        dry.assert_success();
        assert_eq!(dry.stdout.trim(), "replace data.bin", "{}", dry.dump());
        assert_eq!(
            fs::read(dst.join("data.bin")).unwrap(),
            old,
            "by the dry run"
        );

        let r = mirror(&src, &dst, &with(mode, &["--checksum", "--stats"]));
        r.assert_success();
        assert_mirrored(&src, &dst, &r.cmdline);
        assert_ne!(meta_of(&dst.join("data.bin")).file_id, ino, "not renamed");
        mismatches.extend(stat_mismatches(&r, &[("files:", 1), ("unchanged:", 1)]));

        let before = deep_snapshot(&dst);
        std::thread::sleep(Duration::from_millis(30));
        mirror(&src, &dst, &with(mode, &["-c"])).assert_success();
        assert_same_snapshot(&before, &deep_snapshot(&dst), "-c on an identical tree");
        assert_no_mismatches(&mismatches, &r);
    }
}

/// A replaced file is written under a temp name and renamed over the old one: a second name
/// of the old file (a hard link the user made in DST) keeps the old content, the path gets a
/// new inode, and no temp file is left.
#[test]
fn replaced_files_are_renamed_into_place() {
    for mode in CLOSE_MODES {
        let t = tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        TreeSpec::new()
            .file("small.txt", "old content", 0o644, M)
            .dir("d", 0o755, M + 1)
            .file("d/big.bin", random(51, 2 << 20), 0o600, M + 2)
            .build(&src);
        mirror(&src, &dst, mode).assert_success();
        let (small_ino, big_ino) = (
            meta_of(&dst.join("small.txt")).file_id,
            meta_of(&dst.join("d/big.bin")).file_id,
        );
        fs::hard_link(dst.join("small.txt"), dst.join("small.keep")).unwrap();
        fs::hard_link(dst.join("d/big.bin"), dst.join("d/big.keep")).unwrap();

        fs::write(src.join("small.txt"), "new content, longer").unwrap();
        set_mtime_ns(&src.join("small.txt"), M + 10, 10);
        let mut big = fs::read(src.join("d/big.bin")).unwrap();
        big[1 << 20] ^= 1;
        fs::write(src.join("d/big.bin"), &big).unwrap();
        set_mtime_ns(&src.join("d/big.bin"), M + 11, 11);

        let r = mirror(&src, &dst, mode);
        r.assert_success();
        assert_eq!(fs::read(dst.join("d/big.bin")).unwrap(), big);
        assert_eq!(
            fs::read_to_string(dst.join("small.txt")).unwrap(),
            "new content, longer"
        );
        assert_eq!(
            fs::read_to_string(dst.join("small.keep")).unwrap(),
            "old content",
            "small.txt was rewritten in place\n{}",
            r.dump()
        );
        assert_eq!(
            fs::read(dst.join("d/big.keep")).unwrap(),
            random(51, 2 << 20),
            "d/big.bin was rewritten in place\n{}",
            r.dump()
        );
        assert_ne!(meta_of(&dst.join("small.txt")).file_id, small_ino);
        assert_ne!(meta_of(&dst.join("d/big.bin")).file_id, big_ino);
        assert_no_temp_names(&dst, &r.cmdline);
    }
}

// -------------------------------------------------------------------------------------------
// Dry run
// -------------------------------------------------------------------------------------------

/// A dry run into a missing DST creates nothing anywhere and lists every path: `mkdir d/`,
/// `copy f`, `symlink l`.
#[test]
fn dry_run_on_a_fresh_destination() {
    let t = tempdir();
    let src = t.join("src");
    let spec = rich_tree(61, 150, &src, TreeSpec::new());
    let dst = t.join("dst");
    let before = deep_snapshot(t.path());
    for flags in [&["-n"][..], &["--dry-run", "--delete", "--no-defer-close"]] {
        let r = mirror(&src, &dst, flags);
        r.assert_success();
        assert_same_snapshot(&before, &deep_snapshot(t.path()), &r.cmdline);
        assert!(!dst.exists(), "DST created by a dry run");
        let expected = expected_actions(&src, &dst, true, false);
        assert_eq!(
            expected.len(),
            spec.nodes.len(),
            "sanity: the oracle wants every path"
        );
        assert_dry_run(&r, &expected, &r.cmdline);
        for line in ["mkdir special/empty-dir/nested-empty/", "copy special/big"] {
            assert!(
                r.stdout.lines().any(|l| l == line),
                "no {line:?}\n{}",
                r.dump()
            );
        }
    }
}

/// A dry run on a DST that needs every kind of action changes nothing in it (not a byte, not
/// a time) and lists exactly the actions the real run takes.
#[test]
fn dry_run_on_a_changed_destination() {
    let t = tempdir();
    let (v1, v2) = v1_v2(&t, 62, false);
    let dst = t.join("dst");
    mirror(&v1, &dst, &[]).assert_success();
    let before = deep_snapshot(&dst);
    for delete in [false, true] {
        let flags: &[&str] = if delete {
            &["-n", "--delete"]
        } else {
            &["--dry-run"]
        };
        let r = mirror(&v2, &dst, flags);
        r.assert_success();
        assert_same_snapshot(&before, &deep_snapshot(&dst), &r.cmdline);
        assert_dry_run(&r, &expected_actions(&v2, &dst, delete, false), &r.cmdline);
        let lines: Vec<&str> = r.stdout.lines().collect();
        for want in [
            "replace chg/same-size.txt",
            "replace chg/append.txt",
            "replace chg/big.bin",
            "update chg/touch-only.txt",
            "update chg/chmod-only.txt",
            "update chg/dir-mode/",
            "update chg/",
            "copy chg/new.txt",
            "mkdir chg/newdir/",
            "copy chg/newdir/deep/f.txt",
            "mkdir chg/new-empty-dir/",
            "symlink chg/new-link -> new.txt",
        ] {
            assert!(lines.contains(&want), "no {want:?}\n{}", r.dump());
        }
        let deletes: Vec<&&str> = lines.iter().filter(|l| l.starts_with("delete ")).collect();
        if delete {
            for want in ["delete chg/remove-me.txt", "delete chg/remove-dir/"] {
                assert!(lines.contains(&want), "no {want:?}\n{}", r.dump());
            }
        } else {
            assert!(
                deletes.is_empty(),
                "deletes without --delete: {deletes:?}\n{}",
                r.dump()
            );
        }
    }
    // The run itself then does it.
    mirror(&v2, &dst, &["--delete"]).assert_success();
    assert_mirrored(&v2, &dst, "the real run after the dry runs");
}

// -------------------------------------------------------------------------------------------
// Hard links, copy-links, excludes
// -------------------------------------------------------------------------------------------

/// A rich tree with hard links (some files with several extra names), under `root`; returns
/// how many extra names were made.
fn tree_with_hard_links(seed: u64, root: &Path) -> usize {
    let spec = rich_tree(seed, 200, root, TreeSpec::new());
    let links = add_hard_links(root, &spec, seed, 10);
    assert!(
        !hardlink_groups(&scan_tree(root)).is_empty(),
        "sanity: no hard links in SRC"
    );
    links.len()
}

/// With -H, files hard-linked together in SRC are hard-linked together in DST, as
/// `rsync -aH` makes them; `--stats` counts the links; a second run writes nothing.
#[test]
fn hard_links_kept_with_h_like_rsync() {
    let t = tempdir();
    let src = t.join("src");
    let links = tree_with_hard_links(71, &src);
    let by_rsync = t.join("rsync");
    rsync(&src, &by_rsync, &["-H"]);
    assert_same_tree(&src, &by_rsync, &Compare::strict(), "sanity: rsync -aH");
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        let r = mirror(&src, &dst, &with(mode, &["-H", "--stats"]));
        r.assert_success();
        assert_mirrored(&src, &dst, &r.cmdline);
        assert_same_tree(
            &by_rsync,
            &dst,
            &Compare::strict(),
            "fastwrite vs rsync -aH",
        );
        assert_eq!(r.stat("hard links:"), links as u64, "{}", r.dump());
        let before = deep_snapshot(&dst);
        std::thread::sleep(Duration::from_millis(30));
        mirror(&src, &dst, &with(mode, &["--hard-links"])).assert_success();
        assert_same_snapshot(&before, &deep_snapshot(&dst), "second -H run");
    }
}

/// Without -H each path of a hard-linked file is a file of its own (same content and
/// metadata); a later -H run over those separate copies links them as SRC has them.
#[test]
fn hard_links_split_without_h_and_joined_by_a_later_h_run() {
    let t = tempdir();
    let src = t.join("src");
    tree_with_hard_links(72, &src);
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        let r = mirror(&src, &dst, mode);
        r.assert_success();
        let linked = hardlink_groups(&scan_tree(&dst));
        assert!(
            linked.is_empty(),
            "hard links without -H: {linked:?}\n{}",
            r.dump()
        );
        let no_links = Compare {
            hardlinks: false,
            ..Compare::strict()
        };
        assert_same_tree(&src, &dst, &no_links, &r.cmdline);
        assert_root_same(&src, &dst, &r.cmdline);

        let r = mirror(&src, &dst, &with(mode, &["-H"]));
        r.assert_success();
        assert_mirrored(&src, &dst, &r.cmdline);
    }
}

/// The everyday incremental case for -H: a new name is linked to a file DST already has
/// unchanged, first from another directory (the file's own directory untouched), then from
/// its own directory. The file is left alone (same inode) and the new names become links to it.
#[test]
fn new_hard_link_to_an_unchanged_file() {
    for mode in CLOSE_MODES {
        let t = tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        TreeSpec::new()
            .dir("d1", 0o755, M)
            .file("d1/a.txt", "a", 0o644, M + 1)
            .dir("d2", 0o755, M + 2)
            .file("d2/x.txt", "x", 0o644, M + 3)
            .build(&src);
        mirror(&src, &dst, &with(mode, &["-H"])).assert_success();
        let ino = meta_of(&dst.join("d1/a.txt")).file_id;
        for (link, dir, time) in [
            ("d2/other-dir.txt", "d2", M + 10),
            ("d1/same-dir.txt", "d1", M + 11),
        ] {
            fs::hard_link(src.join("d1/a.txt"), src.join(link)).unwrap();
            set_mtime_ns(&src.join(dir), time, 10);
            let r = mirror(&src, &dst, &with(mode, &["-H"]));
            r.assert_success();
            assert_mirrored(&src, &dst, &r.cmdline);
            assert_eq!(
                meta_of(&dst.join("d1/a.txt")).file_id,
                ino,
                "the unchanged file was rewritten\n{}",
                r.dump()
            );
        }
    }
}

/// A dry run with -H tells each extra name of a hard-linked file as `hardlink PATH`, and
/// nothing but names that are hard links in SRC.
#[test]
fn dry_run_tells_hard_links() {
    let t = tempdir();
    let src = t.join("src");
    let links = tree_with_hard_links(73, &src);
    let groups = hardlink_groups(&scan_tree(&src));
    let dst = t.join("dst");
    let r = mirror(&src, &dst, &["-H", "-n"]);
    r.assert_success();
    assert!(!dst.exists(), "DST created by a dry run");
    let hardlink_lines: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("hardlink "))
        .collect();
    assert_eq!(
        hardlink_lines.len(),
        links,
        "one `hardlink` per extra name\n{}",
        r.dump()
    );
    for l in &hardlink_lines {
        let (_, path, target) = dry_run_line(l).unwrap();
        let (p, target) = (Path::new(path), Path::new(target.unwrap_or_default()));
        assert!(
            groups
                .get(p)
                .is_some_and(|names| names.iter().any(|n| n == target) && p != target),
            "{l:?}: not `hardlink PATH => TARGET` with PATH and TARGET names of one file in SRC\n{}",
            r.dump()
        );
    }
    // Every path is told once; the hard links' other names as copies.
    let copies = r.stdout.lines().filter(|l| l.starts_with("copy ")).count();
    assert_eq!(
        copies + links,
        count_files(&src),
        "every file told once, as `copy` or `hardlink`\n{}",
        r.dump()
    );
}

/// -L: a symlink to a file becomes a regular file with the target's content, mode and mtime;
/// to a directory, a directory; through chains and absolute links too. A dangling link and a
/// link loop are failures for those paths (exit 1), the rest is copied. Like `rsync -aL`.
#[test]
fn copy_links_follow_symlinks() {
    let t = tempdir();
    let (src, outside) = (t.join("src"), t.join("outside"));
    TreeSpec::new()
        .file("o.txt", "outside file", 0o600, M + 50)
        .dir("odir", 0o710, M + 51)
        .file("odir/in.txt", "in outside dir", 0o644, M + 52)
        .build(&outside);
    TreeSpec::new()
        .file("f.txt", "target", 0o640, M + 1)
        .symlink("lf", "f.txt")
        .symlink("chain", "lf")
        .dir("d", 0o750, M + 2)
        .file("d/a.txt", "a", 0o644, M + 3)
        .dir("d/sub", 0o700, M + 4)
        .file("d/sub/b.txt", "b", 0o600, M + 5)
        .symlink("ld", "d")
        .symlink("abs", outside.join("o.txt").to_str().unwrap())
        .symlink("absdir", outside.join("odir").to_str().unwrap())
        .symlink("dangling", "no-such-file")
        .symlink("loop1", "loop2")
        .symlink("loop2", "loop1")
        .build(&src);
    set_subsecond_mtimes(&src, 81);
    set_subsecond_mtimes(&outside, 82);

    let by_rsync = t.join("rsync");
    fs::create_dir(&by_rsync).unwrap();
    let mut cmd = std::process::Command::new("rsync");
    let (mut s, mut d) = (src.as_os_str().to_owned(), by_rsync.as_os_str().to_owned());
    s.push("/");
    d.push("/");
    cmd.arg("-aL").arg(s).arg(d);
    require_tool("rsync");
    let rr = run_command(cmd);
    assert_eq!(
        rr.code(),
        23,
        "sanity: rsync -aL skips the bad links\n{}",
        rr.dump()
    );

    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        let r = mirror(&src, &dst, &with(mode, &["-L"]));
        r.assert_code(1);
        for bad in ["dangling", "loop1", "loop2"] {
            r.assert_stderr_names(&format!("'{bad}'"), &[""]);
            assert!(
                fs::symlink_metadata(dst.join(bad)).is_err(),
                "{bad} made in DST\n{}",
                r.dump()
            );
        }
        assert_same_tree(
            &by_rsync,
            &dst,
            &Compare::strict(),
            &format!("{}: fastwrite vs rsync -aL", r.cmdline),
        );
        // Spelled out: links followed to files and directories, with the target's metadata.
        let f = meta_of(&src.join("f.txt"));
        for p in ["lf", "chain"] {
            let m = meta_of(&dst.join(p));
            assert_eq!(m.kind, Kind::File, "{p}");
            assert_eq!(
                (m.perm, m.mtime, m.mtime_nsec),
                (f.perm, f.mtime, f.mtime_nsec)
            );
            assert_eq!(fs::read_to_string(dst.join(p)).unwrap(), "target");
        }
        assert_same_tree(&src.join("d"), &dst.join("ld"), &Compare::strict(), "ld");
        assert_root_same(&src.join("d"), &dst.join("ld"), "ld");
        assert_eq!(fs::read_to_string(dst.join("abs")).unwrap(), "outside file");
        assert_same_tree(
            &outside.join("odir"),
            &dst.join("absdir"),
            &Compare::strict(),
            "absdir",
        );
    }
}

/// -L on a link to one of its own ancestors (a directory loop) fails that path, does not
/// recurse forever, and copies the rest (GNU `cp -rL` says "cycle detected" and skips it).
#[test]
fn copy_links_directory_loop_is_a_failure() {
    let t = tempdir();
    let src = t.join("src");
    TreeSpec::new()
        .dir("a", 0o755, M)
        .file("a/f.txt", "f", 0o644, M + 1)
        .symlink("a/up", "..")
        .file("b.txt", "b", 0o644, M + 2)
        .build(&src);
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        let r = run_fastwrite_timeout(
            &mirror_args(&[], &with(mode, &["-L"]), &src, &dst),
            Duration::from_secs(60),
        );
        r.assert_code(1);
        r.assert_stderr_names("a/up", &[""]);
        assert!(
            fs::symlink_metadata(dst.join("a/up")).is_err(),
            "a/up made in DST\n{}",
            r.dump()
        );
        assert_eq!(fs::read_to_string(dst.join("a/f.txt")).unwrap(), "f");
        assert_eq!(fs::read_to_string(dst.join("b.txt")).unwrap(), "b");
    }
}

/// --exclude, rsync-like: a pattern without `/` matches a name at any depth, one with `/` the
/// path from the root (a leading `/` allowed), a trailing `/` directories only, `*` stops at
/// `/` and `**` does not. Excluded directories are not descended into (a FIFO in one draws no
/// warning, a dangling link in one no -L failure), and excluded paths in DST survive --delete.
/// The result is rsync's with the same patterns (anchored: rsync lets `a/b` match at any depth).
#[test]
fn exclude_patterns_and_protection_from_delete() {
    let t = tempdir();
    let src = t.join("src");
    TreeSpec::new()
        .file("top.txt", "top", 0o644, M)
        .dir("sub", 0o755, M + 1)
        .file("sub/top.txt", "not at the root", 0o644, M + 2)
        .file("a.log", "log", 0o644, M + 3)
        .dir("x", 0o755, M + 4)
        .dir("x/y", 0o755, M + 5)
        .file("x/y/b.log", "deep log", 0o644, M + 6)
        .file("x/keep.txt", "keep", 0o644, M + 7)
        .dir("build", 0o755, M + 8)
        .file("build/out.o", "obj", 0o644, M + 9)
        .symlink("build/dangling", "nowhere")
        .dir("sub/build", 0o755, M + 10)
        .file("sub/build/z", "z", 0o644, M + 11)
        .dir("other", 0o755, M + 12)
        .file("other/build", "a file named build", 0o644, M + 13)
        .dir("docs", 0o755, M + 14)
        .file("docs/a.md", "a", 0o644, M + 15)
        .file("docs/readme.txt", "r", 0o644, M + 16)
        .dir("docs/sub", 0o755, M + 17)
        .file("docs/sub/b.md", "b", 0o644, M + 18)
        .dir("x/docs", 0o755, M + 19)
        .file("x/docs/a.md", "xa", 0o644, M + 20)
        .dir("assets", 0o755, M + 21)
        .dir("assets/a", 0o755, M + 22)
        .file("assets/a/x.tmp", "t", 0o644, M + 23)
        .dir("assets/a/b", 0o755, M + 24)
        .file("assets/a/b/y.tmp", "t", 0o644, M + 25)
        .file("assets/a/keep.txt", "k", 0o644, M + 26)
        .build(&src);
    let build_mtime = meta_of(&src.join("build"));
    run_tool("mkfifo", &osv![src.join("build/fifo")], None);
    let t_build = FileTime::from_unix_time(build_mtime.mtime, build_mtime.mtime_nsec);
    filetime::set_file_mtime(src.join("build"), t_build).unwrap();
    set_mtime_ns(&src, M + 30, 30);

    // What DST holds before the run: excluded paths (to keep) and an extra one (to delete).
    let dst_before = TreeSpec::new()
        .file("a.log", "dst-only log", 0o600, M + 40)
        .dir("build", 0o700, M + 41)
        .file("build/old.o", "old", 0o644, M + 42)
        .file("extra.txt", "not excluded, not in SRC", 0o644, M + 43)
        .dir("x", 0o755, M + 44)
        .dir("x/y", 0o755, M + 45)
        .file("x/y/c.log", "excluded by name", 0o644, M + 46)
        .dir("docs", 0o755, M + 47)
        .file("docs/old.md", "excluded by docs/*.md", 0o644, M + 48)
        .file("top.txt", "dst's own top.txt", 0o644, M + 49);
    let patterns = [
        "*.log",
        "build/",
        "/top.txt",
        "docs/*.md",
        "assets/**/*.tmp",
    ];
    let mut flags: Vec<&str> = Vec::new();
    let mut rsync_flags: Vec<String> = vec!["--delete".into()];
    for p in patterns {
        flags.extend(["--exclude", p]);
        let anchored = if p.trim_end_matches('/').contains('/') && !p.starts_with('/') {
            format!("/{p}")
        } else {
            p.to_string()
        };
        rsync_flags.push(format!("--exclude={anchored}"));
    }
    let by_rsync = t.join("rsync");
    dst_before.build(&by_rsync);
    let rf: Vec<&str> = rsync_flags.iter().map(String::as_str).collect();
    rsync(&src, &by_rsync, &rf);

    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        dst_before.build(&dst);
        let mut f = with(mode, &["--delete"]);
        f.extend(&flags);
        let r = mirror(&src, &dst, &f);
        r.assert_success();
        assert!(
            r.stderr_lines_with("warning").is_empty(),
            "a warning: the excluded build/ was read\n{}",
            r.dump()
        );
        assert_same_tree(
            &by_rsync,
            &dst,
            &Compare::strict(),
            &format!("{}: fastwrite vs rsync", r.cmdline),
        );
        assert_root_same(&src, &dst, &r.cmdline);
        let present = |p: &str| fs::symlink_metadata(dst.join(p)).is_ok();
        for p in [
            "sub/top.txt",
            "x/keep.txt",
            "other/build",
            "docs/readme.txt",
            "docs/sub/b.md",
            "x/docs/a.md",
            "assets/a/keep.txt",
            "build/old.o",
            "x/y/c.log",
            "docs/old.md",
        ] {
            assert!(present(p), "{p} missing\n{}", r.dump());
        }
        for p in [
            "x/y/b.log",
            "build/out.o",
            "build/fifo",
            "sub/build",
            "docs/a.md",
            "assets/a/x.tmp",
            "assets/a/b/y.tmp",
            "extra.txt",
        ] {
            assert!(!present(p), "{p} present\n{}", r.dump());
        }
        assert_eq!(
            fs::read_to_string(dst.join("a.log")).unwrap(),
            "dst-only log"
        );
        assert_eq!(
            fs::read_to_string(dst.join("top.txt")).unwrap(),
            "dst's own top.txt"
        );

        // Not descended into: -L would fail on build/dangling if it were read.
        let dst_l = t.join(format!("dst-l{i}"));
        let mut f = with(mode, &["-L"]);
        f.extend(&flags);
        let r = mirror(&src, &dst_l, &f);
        r.assert_success();
        assert!(!dst_l.join("build").exists());
    }
}

// -------------------------------------------------------------------------------------------
// Symlinks in DST, type changes, special files
// -------------------------------------------------------------------------------------------

/// Symlinks already in DST are never followed: where SRC has a directory or a file, a link in
/// DST pointing outside (even at a file of the same size and mtime, or a directory holding
/// same-named files) is replaced, not written through; with --delete, links and directories of
/// links that SRC does not have are removed as links. Nothing outside DST changes.
#[test]
fn symlinks_in_dst_are_never_followed() {
    let t = tempdir();
    let (src, outside) = (t.join("src"), t.join("outside"));
    TreeSpec::new()
        .dir("d", 0o755, M)
        .file("d/a.txt", "AAAA", 0o644, M + 1)
        .file("d/b.txt", "BBBB", 0o644, M + 2)
        .file("f.txt", "FFFF", 0o644, M + 3)
        .dir("nested", 0o755, M + 4)
        .dir("nested/sub", 0o755, M + 5)
        .file("nested/sub/c.txt", "CCCC", 0o644, M + 6)
        .build(&src);
    // Same sizes and mtimes as SRC's files, other content and modes: a run that follows the
    // links would take them for up to date, or chmod them.
    TreeSpec::new()
        .dir("dir", 0o755, M + 10)
        .file("dir/a.txt", "xxxx", 0o600, M + 1)
        .file("dir/c.txt", "yyyy", 0o600, M + 6)
        .file("dir/extra.txt", "outside, not in SRC", 0o600, M + 11)
        .file("target.txt", "zzzz", 0o600, M + 3)
        .build(&outside);
    let out_abs = |p: &str| outside.join(p).to_str().unwrap().to_string();
    let mut n = 0;
    for mode in CLOSE_MODES {
        for delete in [false, true] {
            n += 1;
            let dst = t.join(format!("dst{n}"));
            TreeSpec::new()
                .symlink("d", &out_abs("dir"))
                .symlink("f.txt", &out_abs("target.txt"))
                .dir("nested", 0o755, M + 4)
                .symlink("nested/sub", "../../outside/dir")
                .symlink("gone", &out_abs("dir"))
                .dir("gone-dir", 0o755, M + 20)
                .symlink("gone-dir/link", &out_abs("dir"))
                .symlink("gone-dir/up", "../../outside")
                .build(&dst);
            let before = deep_snapshot(&outside);
            let flags = if delete {
                with(mode, &["--delete"])
            } else {
                with(mode, &[])
            };
            let r = mirror(&src, &dst, &flags);
            r.assert_success();
            assert_same_snapshot(
                &before,
                &deep_snapshot(&outside),
                &format!("{}: written through a symlink in DST", r.cmdline),
            );
            if delete {
                assert_mirrored(&src, &dst, &r.cmdline);
            } else {
                let diffs = diff_trees(&src, &dst, &Compare::strict());
                assert!(
                    diffs.iter().all(|d| d.starts_with("extra: gone")),
                    "{}: {diffs:#?}",
                    r.cmdline
                );
                assert_eq!(meta_of(&dst.join("gone")).kind, Kind::Symlink);
            }
        }
    }
}

/// A non-empty directory in DST where SRC has a file is replaced only with --delete: without
/// it that path fails (exit 1, named), the directory and its content stay, the rest is copied
/// (an empty directory does become the file).
#[test]
fn nonempty_dir_becomes_a_file_only_with_delete() {
    for mode in CLOSE_MODES {
        let t = tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        TreeSpec::new()
            .file("was-dir", "now a file", 0o644, M)
            .file("was-empty-dir", "now a file too", 0o644, M + 1)
            .file("keep.txt", "keep", 0o644, M + 2)
            .dir("later", 0o755, M + 3)
            .file("later/y.txt", "y", 0o644, M + 4)
            .build(&src);
        TreeSpec::new()
            .dir("was-dir", 0o755, M + 10)
            .file("was-dir/inner.txt", "inner", 0o644, M + 11)
            .dir("was-empty-dir", 0o755, M + 12)
            .build(&dst);
        let r = mirror(&src, &dst, mode);
        r.assert_code(1);
        r.assert_stderr_names("was-dir", &["director", "empty", "delete"]);
        assert_eq!(
            fs::read_to_string(dst.join("was-dir/inner.txt")).unwrap(),
            "inner"
        );
        for p in ["was-empty-dir", "keep.txt", "later/y.txt"] {
            assert_eq!(
                fs::read(dst.join(p)).unwrap(),
                fs::read(src.join(p)).unwrap(),
                "{p}\n{}",
                r.dump()
            );
        }
        assert_no_temp_names(&dst, &r.cmdline);

        let r = mirror(&src, &dst, &with(mode, &["--delete"]));
        r.assert_success();
        assert_mirrored(&src, &dst, &r.cmdline);
    }
}

/// FIFOs, sockets and devices in SRC are skipped with one warning each, naming it; the run
/// succeeds and copies the rest.
#[test]
fn special_files_skipped_with_a_warning() {
    let t = tempdir();
    let src = t.join("src");
    TreeSpec::new()
        .file("a.txt", "a", 0o644, M)
        .dir("dev", 0o755, M + 1)
        .file("z.txt", "z", 0o644, M + 2)
        .build(&src);
    let dev = src.join("dev");
    let mut specials = vec!["dev/fifo", "dev/sock"];
    run_tool("mkfifo", &osv![dev.join("fifo")], None);
    let sock = std::os::unix::net::UnixListener::bind(dev.join("sock")).unwrap();
    drop(sock);
    if is_root() {
        run_tool("mknod", &osv![dev.join("null-dev"), "c", "1", "3"], None);
        specials.push("dev/null-dev");
    }
    set_mtime_ns(&dev, M + 1, 1);
    set_mtime_ns(&src, M + 5, 5);
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        let r = mirror(&src, &dst, mode);
        r.assert_success();
        for s in &specials {
            let lines = r.stderr_lines_with(s);
            assert!(
                lines.iter().any(|l| l.to_lowercase().contains("warning")),
                "no warning naming {s}\n{}",
                r.dump()
            );
            assert!(fs::symlink_metadata(dst.join(s)).is_err(), "{s} made");
        }
        assert_eq!(
            r.stderr_lines_with("warning").len(),
            specials.len(),
            "one warning per special file\n{}",
            r.dump()
        );
        let diffs = diff_trees(&src, &dst, &Compare::strict());
        assert!(
            diffs
                .iter()
                .all(|d| d.starts_with("missing: dev/") && d.ends_with("(Other)")),
            "{diffs:#?}"
        );
        assert_root_same(&src, &dst, &r.cmdline);
    }
}

// -------------------------------------------------------------------------------------------
// Refusals
// -------------------------------------------------------------------------------------------

/// Every refusal: exit 2, a message naming the path, and nothing created or changed anywhere
/// (with --delete too, where SRC inside DST would otherwise lose SRC).
#[test]
fn refusals_change_nothing() {
    let t = tempdir();
    let (src, dst) = (t.join("src"), t.join("dst"));
    TreeSpec::new()
        .file("f.txt", "f", 0o644, M)
        .dir("existing-dir", 0o755, M + 1)
        .build(&src);
    TreeSpec::new()
        .file("old.txt", "old", 0o644, M)
        .dir("inner", 0o755, M + 1)
        .file("inner/i.txt", "i", 0o644, M + 2)
        .build(&dst);
    fs::write(t.join("file.txt"), "a file").unwrap();
    make_symlink("src", &t.join("src-link"));
    make_symlink("dst", &t.join("dst-link"));
    make_symlink("file.txt", &t.join("file-link"));
    let p = |s: &str| t.join(s);
    let cases: &[(&str, PathBuf, PathBuf, &str)] = &[
        ("SRC missing", p("missing"), p("new-dst"), "missing"),
        ("SRC is a file", p("file.txt"), p("new-dst"), "file.txt"),
        ("SRC is DST", p("src"), p("src"), "src"),
        ("SRC is DST, by a symlink", p("src"), p("src-link"), "src"),
        (
            "SRC is DST, spelled a/../a",
            p("src"),
            p("src/../src"),
            "src",
        ),
        ("SRC is DST, spelled a/.", p("src/."), p("src"), "src"),
        ("DST inside SRC", p("src"), p("src/sub"), "src"),
        (
            "DST inside SRC, existing",
            p("src"),
            p("src/existing-dir"),
            "src",
        ),
        (
            "DST inside SRC, by a symlink",
            p("src"),
            p("src-link/new"),
            "src",
        ),
        ("SRC inside DST", p("dst/inner"), p("dst"), "dst"),
        (
            "SRC inside DST, by a symlink",
            p("dst-link/inner"),
            p("dst"),
            "dst",
        ),
        ("DST is a file", p("src"), p("file.txt"), "file.txt"),
        (
            "DST is a symlink to a file",
            p("src"),
            p("file-link"),
            "file-link",
        ),
    ];
    for (what, s, d, name) in cases {
        for flags in [&[][..], &["--delete", "--no-defer-close"]] {
            let before = deep_snapshot(t.path());
            let r = mirror(s, d, flags);
            r.assert_code(2);
            assert!(
                r.stderr.contains(name),
                "{what}: the message does not name {name:?}\n{}",
                r.dump()
            );
            assert_same_snapshot(&before, &deep_snapshot(t.path()), what);
        }
    }
}

// -------------------------------------------------------------------------------------------
// Failures mid-run (unreadable files and directories, as an unprivileged user)
// -------------------------------------------------------------------------------------------

/// An unreadable file fails alone: named on stderr, exit 1, every other file copied, nothing
/// under its name in a fresh DST, and an older copy in DST left whole; no temp file left.
#[test]
fn unreadable_file_fails_alone() {
    for mode in CLOSE_MODES {
        let t = tempdir();
        let (src, fresh, old) = (t.join("src"), t.join("fresh"), t.join("old"));
        TreeSpec::new()
            .file("a.txt", "a", 0o644, M)
            .file("secret.txt", "the secret, new version", 0o000, M + 1)
            .dir("sub", 0o755, M + 2)
            .file("sub/b.txt", "b", 0o644, M + 3)
            .file("sub/big.bin", random(91, 1 << 20), 0o644, M + 4)
            .file("z.txt", "z", 0o644, M + 5)
            .build(&src);
        TreeSpec::new()
            .file("secret.txt", "old secret", 0o644, M - 100)
            .build(&old);
        give_to_nobody(t.path());
        for dst in [&fresh, &old] {
            let args = mirror_args(&[], &with(mode, &["--stats"]), &src, dst);
            let Some(r) = run_fastwrite_unprivileged(&args) else {
                return;
            };
            r.assert_code(1);
            r.assert_stderr_names("secret.txt", &["denied", "permission", "read", "open"]);
            assert_eq!(r.stat("failed:"), 1, "{}", r.dump());
            let diffs = diff_trees(&src, dst, &Compare::strict());
            if dst == &fresh {
                assert_eq!(diffs, ["missing: secret.txt (File)"], "{}", r.dump());
                assert!(
                    fs::symlink_metadata(fresh.join("secret.txt")).is_err(),
                    "something left under the name of the unreadable file"
                );
            } else {
                assert_eq!(
                    fs::read_to_string(old.join("secret.txt")).unwrap(),
                    "old secret",
                    "the old copy was damaged\n{}",
                    r.dump()
                );
                assert!(diffs.iter().all(|d| d.contains("secret.txt")), "{diffs:#?}");
            }
            assert_no_temp_names(dst, &r.cmdline);
        }
    }
}

/// An unreadable directory in SRC fails, named; with --delete nothing under the matching DST
/// directory is deleted (SRC's listing is unknown, not empty), while the rest of the run,
/// deletes included, goes on.
#[test]
fn unreadable_dir_fails_and_protects_its_dst_from_delete() {
    for mode in CLOSE_MODES {
        let t = tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        TreeSpec::new()
            .file("ok.txt", "ok", 0o644, M)
            .dir("locked", 0o755, M + 1)
            .file("locked/a.txt", "a", 0o644, M + 2)
            .file("locked/b.txt", "b", 0o644, M + 3)
            .dir("other", 0o755, M + 4)
            .file("other/c.txt", "c", 0o644, M + 5)
            .build(&src);
        mirror(&src, &dst, mode).assert_success();
        fs::write(dst.join("locked/old-only.txt"), "only in DST").unwrap();
        fs::write(dst.join("extra.txt"), "only in DST").unwrap();
        fs::write(src.join("ok.txt"), "ok, changed").unwrap();
        set_mtime_ns(&src.join("ok.txt"), M + 10, 10);
        set_mode(&src.join("locked"), 0o000);
        give_to_nobody(t.path());

        let args = mirror_args(&[], &with(mode, &["--delete"]), &src, &dst);
        let Some(r) = run_fastwrite_unprivileged(&args) else {
            return;
        };
        r.assert_code(1);
        r.assert_stderr_names("locked", &["denied", "permission", "read", "open"]);
        for (p, content) in [
            ("locked/a.txt", "a"),
            ("locked/b.txt", "b"),
            ("locked/old-only.txt", "only in DST"),
            ("ok.txt", "ok, changed"),
            ("other/c.txt", "c"),
        ] {
            assert_eq!(
                fs::read_to_string(dst.join(p)).ok().as_deref(),
                Some(content),
                "{p}\n{}",
                r.dump()
            );
        }
        assert!(
            !dst.join("extra.txt").exists(),
            "--delete did nothing\n{}",
            r.dump()
        );
        assert_no_temp_names(&dst, &r.cmdline);
    }
}

// -------------------------------------------------------------------------------------------
// Reflinks on a copy-on-write filesystem
// -------------------------------------------------------------------------------------------

/// A filesystem image mounted on a loop device for one test; unmounted when dropped (declare
/// it after the TestDir that holds it, so it drops first).
struct LoopMount {
    dir: PathBuf,
}

impl LoopMount {
    /// A fresh `fs_type` ("btrfs", or "xfs" with reflink=1) image under `t`, mounted at
    /// `t/mnt`. `None`, after printing why, where loop mounts cannot be made.
    fn new(t: &TestDir, fs_type: &str) -> Option<LoopMount> {
        if !is_root() {
            eprintln!("SKIPPED: {fs_type} reflinks: loop mounts need root");
            return None;
        }
        if !Path::new("/dev/loop-control").exists() {
            eprintln!("SKIPPED: {fs_type} reflinks: no loop devices (/dev/loop-control)");
            return None;
        }
        let img = t.join(format!("{fs_type}.img"));
        run_tool("truncate", &osv!["-s", "512M", &img], None);
        match fs_type {
            "btrfs" => run_tool("mkfs.btrfs", &osv!["-q", &img], None),
            "xfs" => run_tool("mkfs.xfs", &osv!["-q", "-m", "reflink=1", &img], None),
            _ => unreachable!(),
        };
        let dir = t.join("mnt");
        fs::create_dir(&dir).unwrap();
        let mut cmd = std::process::Command::new("mount");
        cmd.args(["-t", fs_type, "-o", "loop"]).arg(&img).arg(&dir);
        let r = run_command(cmd);
        if !r.status.success() {
            eprintln!(
                "SKIPPED: {fs_type} reflinks: cannot mount the image\n{}",
                r.dump()
            );
            return None;
        }
        Some(LoopMount { dir })
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        for args in [&["umount"][..], &["umount", "-l"]] {
            let ok = std::process::Command::new(args[0])
                .args(&args[1..])
                .arg(&self.dir)
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
        }
        eprintln!("could not unmount {}", self.dir.display());
    }
}

/// On btrfs and on xfs (reflink=1), a copy inside the filesystem shares the source's extents
/// (`filefrag -v` shows them shared) and `--stats` counts it as reflinked; the copy is exact.
#[test]
fn copies_are_reflinked_on_cow_filesystems() {
    require_tool("filefrag");
    for fs_type in ["btrfs", "xfs"] {
        let t = tempdir();
        let Some(m) = LoopMount::new(&t, fs_type) else {
            continue;
        };
        let src = m.dir.join("src");
        TreeSpec::new()
            .file("big.bin", random(101, 32 << 20), 0o644, M)
            .dir("d", 0o755, M + 1)
            .file("d/small.txt", "small", 0o600, M + 2)
            .symlink("link", "big.bin")
            .build(&src);
        set_subsecond_mtimes(&src, 101);
        for (i, mode) in CLOSE_MODES.iter().enumerate() {
            let dst = m.dir.join(format!("dst{i}"));
            let r = mirror(&src, &dst, &with(mode, &["--stats"]));
            r.assert_success();
            assert_mirrored(&src, &dst, &r.cmdline);
            assert!(r.stat("reflinked:") >= 1, "{fs_type}\n{}", r.dump());
            let ff = run_tool("filefrag", &osv!["-v", dst.join("big.bin")], None);
            assert!(
                ff.stdout.contains("shared"),
                "{fs_type}: big.bin shares no extent with its source\n{}\n{}",
                ff.stdout,
                r.dump()
            );
        }
        drop(m);
    }
}
