//! Integration tests for `fastwrite mirror SRC DST`: DST made an exact copy of the contents of
//! SRC, as `rsync -a SRC/ DST/` makes it.
//!
//! The references are the source tree itself (compared strictly: modes with the setid and
//! sticky bits, mtimes of files, directories and symlinks to the nanosecond), and `cp -a` and
//! `rsync -a` (with `--delete`, `-H`, `-L`, `--exclude`) run on the very same trees. What an
//! incremental run must leave alone is checked by inode and ctime, not by content: a rewrite
//! with the same bytes is still a write. Permission failures run the binary as an unprivileged
//! user, because root reads a mode-000 file as easily as any other.
//!
//! On Windows (run under Wine by `.ci/windows/wine-test`) the same scenarios run on trees without
//! symlinks, where the only mode is the read-only attribute (set where the unix mode has no write
//! bit, as fastwrite maps it); file identities and change times come from
//! `GetFileInformationByHandle(Ex)`, an unreadable path is one the test holds open without
//! sharing. What needs modes, symlinks, `-H`, FIFOs or a reference tool (`cp`, `rsync`,
//! `setpriv`, `mount`: a test under Wine cannot wait for a Unix process) is `#[cfg(unix)]`, each
//! test saying why.

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
#[cfg(unix)]
#[track_caller]
fn cp_a(src: &Path, dst: &Path) {
    run_tool("cp", &osv!["-a", src, dst], None);
}

/// `rsync -a EXTRA... SRC/ DST/`.
#[cfg(unix)]
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
#[cfg(unix)]
fn vs_rsync_update() -> Compare {
    Compare {
        symlink_mtimes: false,
        ..strict()
    }
}

/// `Compare::strict()`, less hard-link identity off Unix: there `mirror` keeps no hard links
/// (`-H` is refused), so a linked source becomes separate files. (The Windows tests check
/// identities with `file_id`.)
fn strict() -> Compare {
    Compare {
        hardlinks: cfg!(unix),
        ..Compare::strict()
    }
}

/// Sets a mode the way the platform keeps it: the permission bits on unix; on Windows the
/// read-only attribute, for a mode without write bits (as fastwrite maps modes there).
fn chmod(p: &Path, mode: u32) {
    #[cfg(unix)]
    set_mode(p, mode);
    #[cfg(windows)]
    {
        let mut perms = fs::symlink_metadata(p)
            .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()))
            .permissions();
        perms.set_readonly(mode & 0o222 == 0);
        fs::set_permissions(p, perms)
            .unwrap_or_else(|e| panic!("set read-only {}: {e}", p.display()));
    }
}

/// Windows: the files of `spec` (built under `root`) whose mode has no write bit made
/// read-only, which `TreeSpec::build` does not do there. Call it after every mtime is set:
/// filetime sets times through a handle opened for writing, which Windows refuses on a
/// read-only file.
#[cfg(windows)]
fn mark_readonly(root: &Path, spec: &TreeSpec) {
    for n in &spec.nodes {
        if matches!(n.kind, NodeKind::File(_)) && n.mode & 0o222 == 0 {
            chmod(&root.join(&n.path), n.mode);
        }
    }
}

/// What identifies a file (hard links share it): (device, inode) on unix, (volume serial,
/// file index) on Windows.
fn file_id(p: &Path) -> (u64, u64) {
    meta_of(p).file_id
}

/// The identity of every path under `root`, with its kind.
fn file_ids(root: &Path) -> BTreeMap<PathBuf, (Kind, (u64, u64))> {
    scan_tree(root)
        .into_iter()
        .map(|(rel, m)| {
            let id = file_id(&root.join(&rel));
            (rel, (m.kind, id))
        })
        .collect()
}

/// A `TestDir` that on Windows first takes the read-only attribute off everything under it:
/// under Wine 8, std's `remove_file` and `remove_dir_all` fail on a read-only file ("Access
/// denied": a Wine quirk; on Windows std deletes one, with
/// FILE_DISPOSITION_FLAG_IGNORE_READONLY_ATTRIBUTE), and the temp dir would be left behind.
struct Scratch(TestDir);

impl std::ops::Deref for Scratch {
    type Target = TestDir;
    fn deref(&self) -> &TestDir {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        #[cfg(windows)]
        clear_readonly(self.0.path());
    }
}

fn scratch() -> Scratch {
    Scratch(tempdir())
}

/// `remove_dir_all`, read-only files included (see `Scratch` for why this is needed under Wine).
fn remove_tree(p: &Path) {
    #[cfg(windows)]
    clear_readonly(p);
    fs::remove_dir_all(p).unwrap_or_else(|e| panic!("remove {}: {e}", p.display()));
}

/// Clears the read-only attribute of everything under `dir`; never panics (it runs in drops).
#[cfg(windows)]
#[expect(
    clippy::permissions_set_readonly_false,
    reason = "Windows: clears the attribute, touches no mode"
)]
fn clear_readonly(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else {
            continue;
        };
        if ft.is_dir() {
            clear_readonly(&e.path());
        } else if let Ok(md) = e.metadata()
            && md.permissions().readonly()
        {
            let mut perms = md.permissions();
            perms.set_readonly(false);
            let _ = fs::set_permissions(e.path(), perms);
        }
    }
}

/// Runs fastwrite with `args` while it cannot read `unreadable`. On unix that path has mode
/// 000 (the caller's doing) and the run is made as an unprivileged user (a prerequisite
/// where it cannot be: see `run_fastwrite_unprivileged`). On Windows, where no mode denies
/// anything to the file's owner, the test holds the path open without sharing for the run, so
/// fastwrite can neither open the file nor list the directory.
#[track_caller]
fn run_with_unreadable(args: &[OsString], unreadable: &Path) -> Output {
    #[cfg(unix)]
    {
        let _ = unreadable;
        run_fastwrite_unprivileged(args)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_BACKUP_SEMANTICS;
        let lock = fs::OpenOptions::new()
            .read(true)
            .share_mode(0)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
            .open(unreadable)
            .unwrap_or_else(|e| panic!("lock {}: {e}", unreadable.display()));
        let r = run_fastwrite(args);
        drop(lock);
        r
    }
}

/// The options of the generated part of the test trees: no symlinks on Windows (common's
/// `make_symlink` is unix-only; Windows needs a privilege for them, and Wine 8's
/// CreateSymbolicLinkW reports success but makes nothing).
fn gen_options(files: usize) -> GenOptions {
    let opts = GenOptions::new(files);
    if cfg!(unix) { opts } else { opts.no_symlinks() }
}

/// A seeded tree with every kind of entry mirror copies, built under `root`: the generator's
/// files of many sizes and modes (empty ones, ~1 MiB ones), read-only and empty directories and
/// relative symlinks; setuid, setgid and sticky bits, a mode-000 file, a 1.5 MiB file, nested
/// empty directories, absolute and dangling symlinks, a non-ASCII name; then `extra`. Every
/// mtime has a fraction of a second, the root's too, and the root has an unusual mode. On
/// Windows, the same without symlinks, and files whose mode has no write bit read-only.
fn rich_tree(seed: u64, files: usize, root: &Path, extra: TreeSpec) -> TreeSpec {
    let mut spec = generate_tree(seed, &gen_options(files))
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
        .file("special/ünïcödé 名前.txt", "utf-8", 0o644, M + 10);
    if cfg!(unix) {
        spec = spec
            .symlink("special/abs-link", "/etc/hostname")
            .symlink("special/abs-dangling", "/nonexistent/fastwrite/target")
            .symlink("special/dangling", "no/such/target")
            .symlink("special/to-parent", "..");
    }
    spec.nodes.extend(extra.nodes);
    spec.build(root);
    set_subsecond_mtimes(root, seed);
    set_mode(root, 0o751);
    set_mtime_ns(root, M + 99, 123_456_789);
    #[cfg(windows)]
    mark_readonly(root, &spec);
    spec
}

/// DST is SRC: every path, kind, content and symlink target, modes, mtimes to the nanosecond
/// (symlinks' too), hard-link identity; the root's mode and mtime; no temp file left.
#[track_caller]
fn assert_mirrored(src: &Path, dst: &Path, context: &str) {
    assert_same_tree(src, dst, &strict(), context);
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

#[cfg(unix)]
fn count_files(root: &Path) -> usize {
    scan_tree(root)
        .values()
        .filter(|m| m.kind == Kind::File)
        .count()
}

/// A relative path as the dry run prints it, with `/` separators.
fn rel_string(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
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
/// (Its symlinks are unix-only.)
fn chg_spec() -> TreeSpec {
    let spec = TreeSpec::new()
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
        .file("chg/file-to-dir", "was a file", 0o644, M + 12)
        .dir("chg/emptydir-to-file", 0o755, M + 13)
        .dir("chg/dir-to-file", 0o755, M + 14)
        .file("chg/dir-to-file/x", "x", 0o644, M + 15)
        .file("chg/file-to-link", "will be a link", 0o644, M + 16)
        .dir("chg/dir-mode", 0o755, M + 17)
        .file("chg/dir-mode/inside", "i", 0o644, M + 18)
        .file("chg/keep.txt", "keep", 0o644, M + 19)
        .dir("chg/keep-dir", 0o750, M + 20)
        .file("chg/keep-dir/k.txt", "k", 0o644, M + 21);
    if !cfg!(unix) {
        return spec;
    }
    spec.symlink("chg/link", "same-size.txt")
        .symlink("chg/link-to-file", "append.txt")
        .symlink("chg/link-to-dir", "nowhere")
        .symlink("chg/keep-link", "keep.txt")
}

/// Edit `chg/` of a tree made with `chg_spec`: same-size content change, append, touch only,
/// chmod only (write bits dropped: read-only on Windows), new content on a setuid file, a
/// change in the middle of a big file, removed file and directory, new symlink target,
/// file->dir, empty dir->file, file->symlink, symlink->file, symlink->dir, directory chmod, new
/// file, directories and symlink (symlinks and directory modes on unix only). With
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
    chmod(&c("chmod-only.txt"), 0o444);

    write("suid-content.bin", &random(20, 2500));
    set_mode(&c("suid-content.bin"), 0o4755);
    set_mtime_ns(&c("suid-content.bin"), M + 104, 4);

    let mut d = fs::read(c("big.bin")).unwrap();
    d[600_000] ^= 0x55;
    write("big.bin", &d);
    set_mtime_ns(&c("big.bin"), M + 105, 5);

    fs::remove_file(c("remove-me.txt")).unwrap();
    fs::remove_dir_all(c("remove-dir")).unwrap();

    if cfg!(unix) {
        fs::remove_file(c("link")).unwrap();
        make_symlink("append.txt", &c("link"));
    }

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

    if cfg!(unix) {
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
    }

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
    if cfg!(unix) {
        make_symlink("new.txt", &c("new-link"));
    }

    set_mtime_ns(&v2.join("chg"), M + 200, 200);
}

/// v1 (a rich tree with `chg/`) and v2 (the same tree built again, then `apply_changes`),
/// under `t`.
fn v1_v2(t: &TestDir, seed: u64, nonempty_dir_to_file: bool) -> (PathBuf, PathBuf) {
    let (v1, v2) = (t.join("v1"), t.join("v2"));
    rich_tree(seed, 200, &v1, chg_spec());
    rich_tree(seed, 200, &v2, chg_spec());
    assert_mirrored(&v1, &v2, "sanity: v2 built as v1");
    apply_changes(&v2, nonempty_dir_to_file);
    (v1, v2)
}

/// Inodes (file indexes on Windows) after an incremental run, `before` and `after` taken with
/// `file_ids`: a file whose content did not change from v1 to v2 keeps its inode (left alone,
/// or updated in place); one whose content changed gets a new one (written aside and renamed);
/// a directory that stays a directory keeps its inode.
#[track_caller]
fn assert_inodes_follow_changes(
    v1: &Path,
    v2: &Path,
    before: &BTreeMap<PathBuf, (Kind, (u64, u64))>,
    after: &BTreeMap<PathBuf, (Kind, (u64, u64))>,
    context: &str,
) {
    let (s1, s2) = (scan_tree(v1), scan_tree(v2));
    let mut problems = Vec::new();
    for (p, m2) in &s2 {
        let (Some(m1), Some(b), Some(a)) = (s1.get(p), before.get(p), after.get(p)) else {
            continue;
        };
        if m1.kind != m2.kind || b.0 != m1.kind {
            continue;
        }
        let kept = a.1 == b.1;
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
fn fresh_copy_is_exact_in_every_close_mode() {
    let t = scratch();
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
        remove_tree(&dst);
    }
    assert_same_snapshot(&src_before, &deep_snapshot(&src), "SRC was written to");
}

/// The same tree copied by `cp -a` and by `rsync -a SRC/ X/` is what mirror makes, root
/// included.
#[cfg(unix)] // compares with cp -a and rsync -a; Wine cannot wait for a Unix process
fn fresh_copy_matches_cp_a_and_rsync() {
    let t = scratch();
    let src = t.join("src");
    rich_tree(12, 250, &src, TreeSpec::new());
    let (by_cp, by_rsync) = (t.join("cp"), t.join("rsync"));
    cp_a(&src, &by_cp);
    rsync(&src, &by_rsync, &[]);
    for (reference, name) in [(&by_cp, "cp -a"), (&by_rsync, "rsync -a")] {
        assert_same_tree(
            &src,
            reference,
            &strict(),
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
            assert_same_tree(reference, &dst, &strict(), &context);
            assert_root_same(reference, &dst, &context);
        }
    }
}

// -------------------------------------------------------------------------------------------
// Incremental runs
// -------------------------------------------------------------------------------------------

/// After every kind of change, a run with --delete makes DST the new source again, as
/// `rsync -a --delete` does (compared on unix); only what changed is written (inodes), and
/// `--stats` says so.
fn changes_with_delete_give_the_new_source_like_rsync() {
    let t = scratch();
    let (v1, v2) = v1_v2(&t, 21, true);
    #[cfg(unix)] // rsync: Wine cannot wait for a Unix process
    let by_rsync = {
        let by_rsync = t.join("rsync");
        rsync(&v1, &by_rsync, &[]);
        rsync(&v2, &by_rsync, &["--delete"]);
        assert_same_tree(
            &v2,
            &by_rsync,
            &vs_rsync_update(),
            "sanity: rsync --delete vs v2",
        );
        by_rsync
    };
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        mirror(&v1, &dst, mode).assert_success();
        assert_mirrored(&v1, &dst, "first run");
        let before = file_ids(&dst);
        let r = mirror(&v2, &dst, &with(mode, &["--delete", "--stats"]));
        r.assert_success();
        assert_mirrored(&v2, &dst, &r.cmdline);
        #[cfg(unix)]
        assert_same_tree(
            &by_rsync,
            &dst,
            &vs_rsync_update(),
            &format!("{}: fastwrite vs rsync -a --delete", r.cmdline),
        );
        assert_inodes_follow_changes(&v1, &v2, &before, &file_ids(&dst), &r.cmdline);
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
/// is `rsync -a` without --delete (compared on unix). (Only an empty directory may become a
/// file then.)
fn changes_without_delete_keep_extra_files_like_rsync() {
    let t = scratch();
    let (v1, v2) = v1_v2(&t, 22, false);
    #[cfg(unix)] // rsync: Wine cannot wait for a Unix process
    let by_rsync = {
        let by_rsync = t.join("rsync");
        rsync(&v1, &by_rsync, &[]);
        rsync(&v2, &by_rsync, &[]);
        by_rsync
    };
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        mirror(&v1, &dst, mode).assert_success();
        let before = file_ids(&dst);
        let r = mirror(&v2, &dst, mode);
        r.assert_success();
        #[cfg(unix)]
        assert_same_tree(
            &by_rsync,
            &dst,
            &vs_rsync_update(),
            &format!("{}: fastwrite vs rsync -a", r.cmdline),
        );
        assert_root_same(&v2, &dst, &r.cmdline);
        assert_no_temp_names(&dst, &r.cmdline);
        // Everything of v2 is there, exactly; the rest is what v1 had and v2 lost.
        let diffs = diff_trees(&v2, &dst, &strict());
        let mut extras: Vec<String> = diffs
            .iter()
            .map(|d| d.strip_prefix("extra: ").unwrap_or_else(|| panic!("{d}")))
            .map(|d| d.replace('\\', "/"))
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
        assert_inodes_follow_changes(&v1, &v2, &before, &file_ids(&dst), &r.cmdline);
    }
}

/// A second run on an unchanged tree writes nothing at all: every inode, mtime and ctime in
/// DST (root and directories included) stays; the dry run prints nothing; `--stats` counts
/// every file as unchanged. SRC is never written to.
fn unchanged_second_run_writes_nothing() {
    let t = scratch();
    let src = t.join("src");
    let spec = rich_tree(31, 250, &src, TreeSpec::new());
    let src_before = deep_snapshot(&src);
    let mut flag_sets: Vec<&[&str]> = vec![
        &[],
        &["--no-defer-close"],
        &["--delete"],
        &["-c"],
        &["--no-defer-close", "--delete", "-c", "-j", "1"],
    ];
    // -H is refused on Windows (see hard_links_refused_on_windows).
    if cfg!(unix) {
        flag_sets.extend([
            &["-H"][..],
            &["--no-defer-close", "--delete", "-c", "-H", "-j", "1"],
        ]);
    }
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
fn checksum_finds_same_size_same_mtime_changes() {
    for mode in CLOSE_MODES {
        let t = scratch();
        let (src, dst) = (t.join("src"), t.join("dst"));
        let old = random(41, 4096);
        TreeSpec::new()
            .file("data.bin", old.clone(), 0o644, M)
            .file("other.txt", "other", 0o644, M + 1)
            .build(&src);
        set_mtime_ns(&src.join("data.bin"), M, 777);
        mirror(&src, &dst, mode).assert_success();
        let ino = file_id(&dst.join("data.bin"));

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
        assert_eq!(file_id(&dst.join("data.bin")), ino);
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
        assert_ne!(file_id(&dst.join("data.bin")), ino, "not renamed");
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
fn replaced_files_are_renamed_into_place() {
    for mode in CLOSE_MODES {
        let t = scratch();
        let (src, dst) = (t.join("src"), t.join("dst"));
        TreeSpec::new()
            .file("small.txt", "old content", 0o644, M)
            .dir("d", 0o755, M + 1)
            .file("d/big.bin", random(51, 2 << 20), 0o600, M + 2)
            .build(&src);
        mirror(&src, &dst, mode).assert_success();
        let (small_ino, big_ino) = (
            file_id(&dst.join("small.txt")),
            file_id(&dst.join("d/big.bin")),
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
        assert_ne!(file_id(&dst.join("small.txt")), small_ino);
        assert_ne!(file_id(&dst.join("d/big.bin")), big_ino);
        assert_no_temp_names(&dst, &r.cmdline);
    }
}

// -------------------------------------------------------------------------------------------
// Dry run
// -------------------------------------------------------------------------------------------

/// A dry run into a missing DST creates nothing anywhere and lists every path: `mkdir d/`,
/// `copy f`, `symlink l`.
fn dry_run_on_a_fresh_destination() {
    let t = scratch();
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
fn dry_run_on_a_changed_destination() {
    let t = scratch();
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
        let mut wants = vec![
            "replace chg/same-size.txt",
            "replace chg/append.txt",
            "replace chg/big.bin",
            "update chg/touch-only.txt",
            "update chg/chmod-only.txt",
            "update chg/",
            "copy chg/new.txt",
            "mkdir chg/newdir/",
            "copy chg/newdir/deep/f.txt",
            "mkdir chg/new-empty-dir/",
        ];
        // Directory modes and symlinks change on unix only.
        if cfg!(unix) {
            wants.extend(["update chg/dir-mode/", "symlink chg/new-link -> new.txt"]);
        }
        for want in wants {
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
#[cfg(unix)]
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
#[cfg(unix)] // -H, refused on Windows (see hard_links_refused_on_windows), and rsync -aH
fn hard_links_kept_with_h_like_rsync() {
    let t = scratch();
    let src = t.join("src");
    let links = tree_with_hard_links(71, &src);
    let by_rsync = t.join("rsync");
    rsync(&src, &by_rsync, &["-H"]);
    assert_same_tree(&src, &by_rsync, &strict(), "sanity: rsync -aH");
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        let r = mirror(&src, &dst, &with(mode, &["-H", "--stats"]));
        r.assert_success();
        assert_mirrored(&src, &dst, &r.cmdline);
        assert_same_tree(&by_rsync, &dst, &strict(), "fastwrite vs rsync -aH");
        assert_eq!(r.stat("hard links:"), links as u64, "{}", r.dump());
        let before = deep_snapshot(&dst);
        std::thread::sleep(Duration::from_millis(30));
        mirror(&src, &dst, &with(mode, &["--hard-links"])).assert_success();
        assert_same_snapshot(&before, &deep_snapshot(&dst), "second -H run");
    }
}

/// Without -H each path of a hard-linked file is a file of its own (same content and
/// metadata); a later -H run over those separate copies links them as SRC has them.
#[cfg(unix)] // -H, refused on Windows (see hard_links_refused_on_windows)
fn hard_links_split_without_h_and_joined_by_a_later_h_run() {
    let t = scratch();
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
            ..strict()
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
#[cfg(unix)] // -H, refused on Windows (see hard_links_refused_on_windows)
fn new_hard_link_to_an_unchanged_file() {
    for mode in CLOSE_MODES {
        let t = scratch();
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
#[cfg(unix)] // -H, refused on Windows (see hard_links_refused_on_windows)
fn dry_run_tells_hard_links() {
    let t = scratch();
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
#[cfg(unix)] // symlinks (see gen_options), and rsync -aL
fn copy_links_follow_symlinks() {
    let t = scratch();
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
            &strict(),
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
        assert_same_tree(&src.join("d"), &dst.join("ld"), &strict(), "ld");
        assert_root_same(&src.join("d"), &dst.join("ld"), "ld");
        assert_eq!(fs::read_to_string(dst.join("abs")).unwrap(), "outside file");
        assert_same_tree(
            &outside.join("odir"),
            &dst.join("absdir"),
            &strict(),
            "absdir",
        );
    }
}

/// -L on a link to one of its own ancestors (a directory loop) fails that path, does not
/// recurse forever, and copies the rest (GNU `cp -rL` says "cycle detected" and skips it).
#[cfg(unix)] // symlinks (see gen_options)
fn copy_links_directory_loop_is_a_failure() {
    let t = scratch();
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
/// `/` and `**` does not. Excluded directories are not descended into (on unix: a FIFO in one
/// draws no warning, a dangling link in one no -L failure), and excluded paths in DST survive
/// --delete. Everything else is SRC's, exactly; on unix the result is also rsync's with the
/// same patterns (anchored: rsync lets `a/b` match at any depth).
fn exclude_patterns_and_protection_from_delete() {
    let t = scratch();
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
    #[cfg(unix)] // symlinks (see gen_options), FIFOs
    {
        let build_mtime = meta_of(&src.join("build"));
        make_symlink("nowhere", &src.join("build/dangling"));
        run_tool("mkfifo", &osv![src.join("build/fifo")], None);
        let t_build = FileTime::from_unix_time(build_mtime.mtime, build_mtime.mtime_nsec);
        filetime::set_file_mtime(src.join("build"), t_build).unwrap();
    }
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
    for p in patterns {
        flags.extend(["--exclude", p]);
    }
    #[cfg(unix)] // rsync: Wine cannot wait for a Unix process
    let by_rsync = {
        let mut rsync_flags: Vec<String> = vec!["--delete".into()];
        for p in patterns {
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
        by_rsync
    };
    // The paths where DST may differ from SRC: the excluded ones on either side (and what is
    // in them), DST's own. Every other path must be SRC's exactly.
    let may_differ = |p: &str| {
        [
            "a.log",
            "top.txt",
            "build",
            "x/y/b.log",
            "x/y/c.log",
            "sub/build",
        ]
        .iter()
        .any(|x| p == *x || p.starts_with(&format!("{x}/")))
            || [
                "docs/a.md",
                "docs/old.md",
                "assets/a/x.tmp",
                "assets/a/b/y.tmp",
            ]
            .contains(&p)
    };

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
        #[cfg(unix)]
        assert_same_tree(
            &by_rsync,
            &dst,
            &strict(),
            &format!("{}: fastwrite vs rsync", r.cmdline),
        );
        let unexpected: Vec<String> = diff_trees(&src, &dst, &strict())
            .into_iter()
            .filter(|d| !may_differ(&diff_path(d)))
            .collect();
        assert!(
            unexpected.is_empty(),
            "{}: DST differs from SRC outside the excluded paths: {unexpected:#?}",
            r.cmdline
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
        #[cfg(unix)] // symlinks (see gen_options)
        {
            let dst_l = t.join(format!("dst-l{i}"));
            let mut f = with(mode, &["-L"]);
            f.extend(&flags);
            let r = mirror(&src, &dst_l, &f);
            r.assert_success();
            assert!(!dst_l.join("build").exists());
        }
    }
}

/// The path a line of `diff_trees` is about, with `/` separators.
fn diff_path(line: &str) -> String {
    let rest = line.split_once(": ").map_or(line, |(_, rest)| rest);
    let end = [rest.find(" ("), rest.find(": ")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(rest.len());
    rest[..end].replace('\\', "/")
}

// -------------------------------------------------------------------------------------------
// Symlinks in DST, type changes, special files
// -------------------------------------------------------------------------------------------

/// Symlinks already in DST are never followed: where SRC has a directory or a file, a link in
/// DST pointing outside (even at a file of the same size and mtime, or a directory holding
/// same-named files) is replaced, not written through; with --delete, links and directories of
/// links that SRC does not have are removed as links. Nothing outside DST changes.
#[cfg(unix)] // symlinks (see gen_options)
fn symlinks_in_dst_are_never_followed() {
    let t = scratch();
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
                let diffs = diff_trees(&src, &dst, &strict());
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
fn nonempty_dir_becomes_a_file_only_with_delete() {
    for mode in CLOSE_MODES {
        let t = scratch();
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
#[cfg(unix)] // FIFOs, unix sockets and device nodes
fn special_files_skipped_with_a_warning() {
    let t = scratch();
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
        let diffs = diff_trees(&src, &dst, &strict());
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
/// (with --delete too, where SRC inside DST would otherwise lose SRC). Through symlinks on
/// unix; through other spellings (letter case, `/`) on Windows.
fn refusals_change_nothing() {
    let t = scratch();
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
    let p = |s: &str| t.join(s);
    let mut cases: Vec<(&str, PathBuf, PathBuf, &str)> = vec![
        ("SRC missing", p("missing"), p("new-dst"), "missing"),
        ("SRC is a file", p("file.txt"), p("new-dst"), "file.txt"),
        ("SRC is DST", p("src"), p("src"), "src"),
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
        ("SRC inside DST", p("dst/inner"), p("dst"), "dst"),
        ("DST is a file", p("src"), p("file.txt"), "file.txt"),
    ];
    #[cfg(unix)] // symlinks (see gen_options)
    {
        make_symlink("src", &t.join("src-link"));
        make_symlink("dst", &t.join("dst-link"));
        make_symlink("file.txt", &t.join("file-link"));
        cases.extend([
            ("SRC is DST, by a symlink", p("src"), p("src-link"), "src"),
            (
                "DST inside SRC, by a symlink",
                p("src"),
                p("src-link/new"),
                "src",
            ),
            (
                "SRC inside DST, by a symlink",
                p("dst-link/inner"),
                p("dst"),
                "dst",
            ),
            (
                "DST is a symlink to a file",
                p("src"),
                p("file-link"),
                "file-link",
            ),
        ]);
    }
    // Windows' names are case-insensitive, and `/` separates as well as `\`.
    #[cfg(windows)]
    {
        let slashed = |s: &str| PathBuf::from(format!("{}/{s}", t.path().display()));
        cases.extend([
            ("SRC is DST, in other letters", p("src"), p("SRC"), "SRC"),
            (
                "DST inside SRC, in other letters",
                p("src"),
                p("Src/sub"),
                "Src",
            ),
            (
                "DST inside SRC, existing, in other letters",
                p("SRC"),
                p("src/EXISTING-DIR"),
                "SRC",
            ),
            (
                "SRC inside DST, in other letters",
                p("DST/Inner"),
                p("dst"),
                "dst",
            ),
            (
                "DST inside SRC, spelled with /",
                p("src"),
                slashed("src/sub/x"),
                "src",
            ),
            (
                "SRC is DST, spelled with /",
                slashed("src/"),
                p("src"),
                "src",
            ),
        ]);
    }
    for (what, s, d, name) in &cases {
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
// Failures mid-run (unreadable files and directories: mode 000 as an unprivileged user on
// unix, held open without sharing on Windows; see run_with_unreadable)
// -------------------------------------------------------------------------------------------

/// An unreadable file fails alone: named on stderr, exit 1, every other file copied, nothing
/// under its name in a fresh DST, and an older copy in DST left whole; no temp file left.
fn unreadable_file_fails_alone() {
    for mode in CLOSE_MODES {
        let t = scratch();
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
        #[cfg(unix)]
        give_to_nobody(t.path());
        for dst in [&fresh, &old] {
            let args = mirror_args(&[], &with(mode, &["--stats"]), &src, dst);
            let r = run_with_unreadable(&args, &src.join("secret.txt"));
            r.assert_code(1);
            r.assert_stderr_names("secret.txt", &["denied", "permission", "read", "open"]);
            assert_eq!(r.stat("failed:"), 1, "{}", r.dump());
            let diffs = diff_trees(&src, dst, &strict());
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
fn unreadable_dir_fails_and_protects_its_dst_from_delete() {
    for mode in CLOSE_MODES {
        let t = scratch();
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
        #[cfg(unix)]
        {
            set_mode(&src.join("locked"), 0o000);
            give_to_nobody(t.path());
        }

        let args = mirror_args(&[], &with(mode, &["--delete"]), &src, &dst);
        let r = run_with_unreadable(&args, &src.join("locked"));
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
#[cfg(unix)]
struct LoopMount {
    dir: PathBuf,
}

#[cfg(unix)]
impl LoopMount {
    /// A fresh `fs_type` ("btrfs", or "xfs" with reflink=1) image under `t`, mounted at
    /// `t/mnt`. A prerequisite ([`unmet`]) where loop mounts cannot be made.
    fn new(t: &TestDir, fs_type: &str) -> LoopMount {
        if !is_root() {
            unmet(format!("{fs_type} reflinks: loop mounts need root"));
        }
        if !Path::new("/dev/loop-control").exists() {
            unmet(format!(
                "{fs_type} reflinks: no loop devices (/dev/loop-control)"
            ));
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
            unmet(format!(
                "{fs_type} reflinks: cannot mount the image\n{}",
                r.dump()
            ));
        }
        LoopMount { dir }
    }
}

#[cfg(unix)]
impl Drop for LoopMount {
    fn drop(&mut self) {
        unmount(&self.dir);
    }
}

/// On btrfs and on xfs (reflink=1), a copy inside the filesystem shares the source's extents
/// (`filefrag -v` shows them shared) and `--stats` counts it as reflinked; the copy is exact.
#[cfg(unix)] // loop-mounted btrfs and xfs images, filefrag; Windows copies without reflinks
fn copies_are_reflinked_on_cow_filesystems() {
    require_tool("filefrag");
    for fs_type in ["btrfs", "xfs"] {
        let t = scratch();
        let m = LoopMount::new(&t, fs_type);
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

// -------------------------------------------------------------------------------------------
// Windows only
// -------------------------------------------------------------------------------------------

/// -H needs file identities, which std does not give on Windows: `-H` and `--hard-links` are
/// refused (exit 2, saying so) before anything is written, into a new DST or an existing one.
/// Without -H, the names of a hard-linked file in SRC become separate files, each with its
/// content and mtime.
#[cfg(windows)]
fn hard_links_refused_on_windows() {
    let t = scratch();
    let (src, old) = (t.join("src"), t.join("old"));
    TreeSpec::new()
        .file("a.txt", "linked", 0o644, M)
        .dir("d", 0o755, M + 1)
        .file("d/other.txt", "other", 0o644, M + 2)
        .build(&src);
    fs::hard_link(src.join("a.txt"), src.join("d/a-link.txt")).unwrap();
    set_mtime_ns(&src.join("d"), M + 1, 100);
    set_mtime_ns(&src, M + 3, 300);
    assert_eq!(
        file_id(&src.join("a.txt")),
        file_id(&src.join("d/a-link.txt")),
        "sanity: no hard link in SRC"
    );
    TreeSpec::new()
        .file("a.txt", "old", 0o644, M - 10)
        .file("extra.txt", "extra", 0o644, M - 9)
        .build(&old);
    for dst in [t.join("new"), old] {
        for flags in [
            &["-H"][..],
            &["--hard-links", "--delete", "--no-defer-close"],
        ] {
            let before = deep_snapshot(t.path());
            let r = mirror(&src, &dst, flags);
            r.assert_code(2);
            r.assert_stderr_names("hard-links", &["not supported"]);
            assert_same_snapshot(&before, &deep_snapshot(t.path()), &r.cmdline);
        }
    }
    for (i, mode) in CLOSE_MODES.iter().enumerate() {
        let dst = t.join(format!("dst{i}"));
        let r = mirror(&src, &dst, &with(mode, &["--stats"]));
        r.assert_success();
        assert_mirrored(&src, &dst, &r.cmdline);
        assert_ne!(
            file_id(&dst.join("a.txt")),
            file_id(&dst.join("d/a-link.txt")),
            "hard-linked without -H\n{}",
            r.dump()
        );
        let mismatches = stat_mismatches(&r, &[("files:", 3), ("hard links:", 0)]);
        assert_no_mismatches(&mismatches, &r);
    }
}

/// Windows keeps one permission bit, read-only, and fastwrite reads it as a mode without write
/// bits: a read-only file is copied read-only; setting or clearing it in SRC is an update in
/// place (the same file, its content not rewritten); a read-only file whose content changed
/// is replaced by a new read-only file; --delete removes a read-only file.
#[cfg(windows)]
fn read_only_attribute_is_mirrored() {
    // Under Wine 8, as on Windows, DeleteFile refuses a read-only file: fastwrite clears the
    // attribute of a file it was asked to delete.
    for mode in CLOSE_MODES {
        let t = scratch();
        let (src, dst) = (t.join("src"), t.join("dst"));
        let spec = TreeSpec::new()
            .file("ro.txt", "read-only", 0o444, M)
            .file("rw.txt", "writable", 0o644, M + 1)
            .file("to-ro.txt", "becomes read-only", 0o644, M + 2)
            .file("to-rw.txt", "becomes writable", 0o444, M + 3)
            .file("ro-changed.txt", "old content", 0o444, M + 4)
            .file("ro-gone.txt", "deleted", 0o444, M + 5)
            .dir("d", 0o755, M + 6)
            .file("d/ro.bin", random(61, 100_000), 0o400, M + 7);
        spec.build(&src);
        set_mtime_ns(&src, M + 9, 900);
        mark_readonly(&src, &spec);
        let r = mirror(&src, &dst, mode);
        r.assert_success();
        assert_mirrored(&src, &dst, &r.cmdline);
        let readonly = |p: &str| meta_of(&dst.join(p)).perm == 0o444;
        for (p, want) in [
            ("ro.txt", true),
            ("rw.txt", false),
            ("to-ro.txt", false),
            ("to-rw.txt", true),
            ("d/ro.bin", true),
        ] {
            assert_eq!(readonly(p), want, "{p} read-only\n{}", r.dump());
        }
        let before = file_ids(&dst);

        chmod(&src.join("to-ro.txt"), 0o444);
        chmod(&src.join("to-rw.txt"), 0o644);
        let changed = src.join("ro-changed.txt");
        chmod(&changed, 0o644);
        fs::write(&changed, "new content, longer").unwrap();
        set_mtime_ns(&changed, M + 10, 1000);
        chmod(&changed, 0o444);
        chmod(&src.join("ro-gone.txt"), 0o644);
        fs::remove_file(src.join("ro-gone.txt")).unwrap();
        set_mtime_ns(&src, M + 11, 1100);

        let r = mirror(&src, &dst, &with(mode, &["--delete", "--stats"]));
        r.assert_success();
        assert_mirrored(&src, &dst, &r.cmdline);
        for (p, want) in [
            ("to-ro.txt", true),
            ("to-rw.txt", false),
            ("ro-changed.txt", true),
        ] {
            assert_eq!(readonly(p), want, "{p} read-only\n{}", r.dump());
        }
        let after = file_ids(&dst);
        for (p, same) in [
            ("to-ro.txt", true),
            ("to-rw.txt", true),
            ("ro.txt", true),
            ("ro-changed.txt", false),
        ] {
            assert_eq!(
                before[Path::new(p)] == after[Path::new(p)],
                same,
                "{p}: {}\n{}",
                if same { "rewritten" } else { "not replaced" },
                r.dump()
            );
        }
        let mismatches = stat_mismatches(
            &r,
            &[
                ("files:", 1),
                ("updated:", 2),
                ("deleted:", 1),
                ("unchanged:", 3),
                ("failed:", 0),
            ],
        );
        assert_no_mismatches(&mismatches, &r);
    }
}

/// A source entry renamed only in case (`name.txt` -> `Name.txt`, `dir/` -> `Dir/`). Where
/// names ignore case the destination entry is the same one: it is renamed to the new spelling
/// in place (same file, nothing copied), and the next run has nothing to do. Where names keep
/// case they are different entries: the new spelling is copied and, without --delete, the old
/// one stays.
fn a_change_of_case_alone_is_a_rename() {
    let ignore_case = cfg!(any(windows, target_os = "macos"));
    let t = tempdir();
    let (src, dst) = (t.join("src"), t.join("dst"));
    let tree = |dir: &str, name: &str| {
        TreeSpec::new()
            .dir(dir, 0o755, DEFAULT_MTIME)
            .file(&format!("{dir}/f.txt"), "in dir", 0o644, DEFAULT_MTIME)
            .file(name, "named", 0o644, DEFAULT_MTIME)
    };
    tree("dir", "name.txt").build(&src);
    set_mtime(&src, DEFAULT_MTIME);
    mirror(&src, &dst, &[]).assert_success();
    let before = file_ids(&dst);
    // Made anew rather than renamed: under Wine (8.0) a rename that changes only case
    // changes nothing.
    remove_tree(&src);
    tree("Dir", "Name.txt").build(&src);
    set_mtime(&src, DEFAULT_MTIME);
    assert_eq!(all_paths(&src), ["Dir", "Dir/f.txt", "Name.txt"]);

    let dry = mirror(&src, &dst, &["--dry-run"]);
    dry.assert_success();
    let r = mirror(&src, &dst, &["--stats"]);
    r.assert_success();
    if ignore_case {
        assert_eq!(
            dry.stdout.lines().collect::<Vec<_>>(),
            ["rename dir -> Dir", "rename name.txt -> Name.txt"],
            "{}",
            dry.dump()
        );
        assert_eq!(all_paths(&dst), ["Dir", "Dir/f.txt", "Name.txt"]);
        assert_no_mismatches(&stat_mismatches(&r, &[("files:", 0), ("updated:", 2)]), &r);
        for (old, new) in [("name.txt", "Name.txt"), ("dir/f.txt", "Dir/f.txt")] {
            assert_eq!(
                before[Path::new(old)].1,
                file_id(&dst.join(new)),
                "{new} is the same file, renamed"
            );
        }
        assert_mirrored(&src, &dst, "after the rename");
        let again = mirror(&src, &dst, &["--dry-run"]);
        again.assert_success();
        assert_eq!(again.stdout, "", "nothing left to do\n{}", again.dump());
    } else {
        assert!(dry.stdout.contains("copy Name.txt"), "{}", dry.dump());
        assert_eq!(
            all_paths(&dst),
            [
                "Dir",
                "Dir/f.txt",
                "Name.txt",
                "dir",
                "dir/f.txt",
                "name.txt"
            ]
        );
        mirror(&src, &dst, &["--delete"]).assert_success();
        assert_eq!(all_paths(&dst), ["Dir", "Dir/f.txt", "Name.txt"]);
    }
}

fn main() {
    run_tests(tests![
        fresh_copy_is_exact_in_every_close_mode,
        #[cfg(unix)]
        fresh_copy_matches_cp_a_and_rsync,
        changes_with_delete_give_the_new_source_like_rsync,
        changes_without_delete_keep_extra_files_like_rsync,
        unchanged_second_run_writes_nothing,
        checksum_finds_same_size_same_mtime_changes,
        replaced_files_are_renamed_into_place,
        dry_run_on_a_fresh_destination,
        dry_run_on_a_changed_destination,
        #[cfg(unix)]
        hard_links_kept_with_h_like_rsync,
        #[cfg(unix)]
        hard_links_split_without_h_and_joined_by_a_later_h_run,
        #[cfg(unix)]
        new_hard_link_to_an_unchanged_file,
        #[cfg(unix)]
        dry_run_tells_hard_links,
        #[cfg(unix)]
        copy_links_follow_symlinks,
        #[cfg(unix)]
        copy_links_directory_loop_is_a_failure,
        exclude_patterns_and_protection_from_delete,
        #[cfg(unix)]
        symlinks_in_dst_are_never_followed,
        nonempty_dir_becomes_a_file_only_with_delete,
        #[cfg(unix)]
        special_files_skipped_with_a_warning,
        refusals_change_nothing,
        unreadable_file_fails_alone,
        unreadable_dir_fails_and_protects_its_dst_from_delete,
        #[cfg(unix)]
        copies_are_reflinked_on_cow_filesystems,
        #[cfg(windows)]
        hard_links_refused_on_windows,
        #[cfg(windows)]
        read_only_attribute_is_mirrored,
        a_change_of_case_alone_is_a_rename,
    ])
}
