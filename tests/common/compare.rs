//! Tree comparator.

#![allow(unused_imports)]

use filetime::FileTime;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Clone, Debug)]
pub struct Meta {
    pub kind: Kind,
    pub perm: u32,
    pub mtime: i64,
    /// The sub-second part of the mtime, in nanoseconds.
    pub mtime_nsec: u32,
    pub len: u64,
    pub target: Option<PathBuf>,
    /// (device, inode), or (volume serial, file index) on Windows: paths that share it are hard
    /// links to one file.
    pub file_id: (u64, u64),
    /// Bytes the file occupies on disk (st_blocks * 512); `len` off Unix.
    pub disk_bytes: u64,
}

/// What `diff_trees` checks besides the set of paths, kinds, file contents and symlink targets
/// (which it always checks).
#[derive(Clone, Copy, Debug)]
pub struct Compare {
    /// Permission bits of files (and of directories when `dir_modes` is also set).
    pub modes: bool,
    /// Permission bits of directories.
    pub dir_modes: bool,
    /// mtimes of files.
    pub mtimes: bool,
    /// mtimes of directories.
    pub dir_mtimes: bool,
    /// mtimes of symlinks themselves (unzip does not restore them, so off by default).
    pub symlink_mtimes: bool,
    /// Allowed |difference| in seconds (2 for DOS timestamps).
    pub mtime_tolerance: i64,
    /// Compare mtimes to the nanosecond, not in whole seconds (with a zero tolerance).
    pub mtime_nanos: bool,
    /// Paths that are hard links to one file in the expected tree must be hard links to one
    /// file in the actual tree, and no others.
    pub hardlinks: bool,
}

impl Compare {
    /// Everything exact (whole seconds), except symlink mtimes.
    pub fn exact() -> Self {
        Compare {
            modes: true,
            dir_modes: true,
            mtimes: true,
            dir_mtimes: true,
            symlink_mtimes: false,
            mtime_tolerance: 0,
            mtime_nanos: false,
            hardlinks: false,
        }
    }
    /// Paths, kinds, contents and symlink targets only.
    pub fn content_only() -> Self {
        Compare {
            modes: false,
            dir_modes: false,
            mtimes: false,
            dir_mtimes: false,
            symlink_mtimes: false,
            mtime_tolerance: 0,
            mtime_nanos: false,
            hardlinks: false,
        }
    }
    /// Everything exact: modes, mtimes of every kind (symlinks too) to the nanosecond, and
    /// hard-link identity. For extractors that restore all of it, such as `tar -xp`.
    pub fn strict() -> Self {
        Compare {
            symlink_mtimes: true,
            mtime_nanos: true,
            hardlinks: true,
            ..Compare::exact()
        }
    }
    pub fn tolerance(mut self, secs: i64) -> Self {
        self.mtime_tolerance = secs;
        self
    }
    pub fn without_dir_mtimes(mut self) -> Self {
        self.dir_mtimes = false;
        self
    }
    /// Directories without archived metadata (implied by file paths) get whatever mode and
    /// mtime the extractor chooses.
    pub fn files_metadata_only(mut self) -> Self {
        self.dir_modes = false;
        self.dir_mtimes = false;
        self
    }
    pub fn without_modes(mut self) -> Self {
        self.modes = false;
        self
    }
}

pub fn meta_of(p: &Path) -> Meta {
    let md = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
    let ft = md.file_type();
    let kind = if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else {
        Kind::Other
    };
    #[cfg(unix)]
    let perm = {
        use std::os::unix::fs::PermissionsExt;
        md.permissions().mode() & 0o7777
    };
    #[cfg(not(unix))]
    let perm = if md.permissions().readonly() {
        0o444
    } else {
        0o666
    };
    #[cfg(unix)]
    let (file_id, disk_bytes) = {
        use std::os::unix::fs::MetadataExt;
        ((md.dev(), md.ino()), md.blocks() * 512)
    };
    #[cfg(windows)]
    let (file_id, disk_bytes) = (win::info(p).id, md.len());
    #[cfg(not(any(unix, windows)))]
    let (file_id, disk_bytes) = ((0, 0), md.len());
    let mtime = FileTime::from_last_modification_time(&md);
    Meta {
        kind,
        perm,
        mtime: mtime.unix_seconds(),
        mtime_nsec: mtime.nanoseconds(),
        len: md.len(),
        target: if kind == Kind::Symlink {
            fs::read_link(p).ok()
        } else {
            None
        },
        file_id,
        disk_bytes,
    }
}

/// For every regular file that has other hard links in the tree, the sorted list of all the
/// paths of its inode (itself included). Files with a single path are left out.
pub fn hardlink_groups(tree: &BTreeMap<PathBuf, Meta>) -> BTreeMap<PathBuf, Vec<PathBuf>> {
    let mut by_id: BTreeMap<(u64, u64), Vec<PathBuf>> = BTreeMap::new();
    for (p, m) in tree {
        if m.kind == Kind::File {
            by_id.entry(m.file_id).or_default().push(p.clone());
        }
    }
    let mut out = BTreeMap::new();
    for group in by_id.into_values().filter(|g| g.len() > 1) {
        for p in &group {
            out.insert(p.clone(), group.clone());
        }
    }
    out
}

/// Every path under `root` (not `root` itself), relative, without following symlinks.
pub fn scan_tree(root: &Path) -> BTreeMap<PathBuf, Meta> {
    fn walk(root: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, Meta>) {
        let dir = root.join(rel);
        let rd = fs::read_dir(&dir).unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()));
        for e in rd {
            let e = e.unwrap_or_else(|e| panic!("read_dir entry in {}: {e}", dir.display()));
            let r = rel.join(e.file_name());
            let m = meta_of(&root.join(&r));
            let is_dir = m.kind == Kind::Dir;
            out.insert(r.clone(), m);
            if is_dir {
                walk(root, &r, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// Compare two trees; returns one human-readable line per difference (empty = same).
pub fn diff_trees(expected: &Path, actual: &Path, cmp: &Compare) -> Vec<String> {
    let e = scan_tree(expected);
    let a = scan_tree(actual);
    let mut diffs = Vec::new();
    for (p, em) in &e {
        let Some(am) = a.get(p) else {
            diffs.push(format!("missing: {} ({:?})", p.display(), em.kind));
            continue;
        };
        let d = p.display();
        if em.kind != am.kind {
            diffs.push(format!(
                "kind differs: {d}: expected {:?}, got {:?}",
                em.kind, am.kind
            ));
            continue;
        }
        match em.kind {
            Kind::File => {
                if em.len != am.len {
                    diffs.push(format!(
                        "size differs: {d}: expected {}, got {}",
                        em.len, am.len
                    ));
                } else {
                    let eb = fs::read(expected.join(p)).unwrap();
                    let ab = fs::read(actual.join(p)).unwrap();
                    // (Compared whole first, as memcmp: the tests are built unoptimized, and a
                    // byte loop over a sparse file's 64 MiB took seconds.)
                    if eb != ab
                        && let Some(i) = eb.iter().zip(&ab).position(|(x, y)| x != y)
                    {
                        diffs.push(format!(
                            "content differs: {d}: first difference at byte {i}"
                        ));
                    }
                }
            }
            Kind::Symlink if em.target != am.target => {
                diffs.push(format!(
                    "symlink target differs: {d}: expected {:?}, got {:?}",
                    em.target, am.target
                ));
            }
            _ => {}
        }
        let check_mode = match em.kind {
            Kind::Symlink => false,
            Kind::Dir => cmp.modes && cmp.dir_modes,
            _ => cmp.modes,
        };
        if check_mode && em.perm != am.perm {
            diffs.push(format!(
                "mode differs: {d}: expected {:04o}, got {:04o}",
                em.perm, am.perm
            ));
        }
        let check_time = match em.kind {
            Kind::File | Kind::Other => cmp.mtimes,
            Kind::Dir => cmp.dir_mtimes,
            Kind::Symlink => cmp.symlink_mtimes,
        };
        if check_time && cmp.mtime_nanos {
            let ns = |m: &Meta| i128::from(m.mtime) * 1_000_000_000 + i128::from(m.mtime_nsec);
            if (ns(em) - ns(am)).abs() > i128::from(cmp.mtime_tolerance) * 1_000_000_000 {
                diffs.push(format!(
                    "mtime differs: {d} ({:?}): expected {}.{:09}, got {}.{:09}",
                    em.kind, em.mtime, em.mtime_nsec, am.mtime, am.mtime_nsec
                ));
            }
        } else if check_time && (em.mtime - am.mtime).abs() > cmp.mtime_tolerance {
            diffs.push(format!(
                "mtime differs: {d} ({:?}): expected {}, got {} (delta {} s, tolerance {} s)",
                em.kind,
                em.mtime,
                am.mtime,
                am.mtime - em.mtime,
                cmp.mtime_tolerance
            ));
        }
    }
    for (p, am) in &a {
        if !e.contains_key(p) {
            diffs.push(format!("extra: {} ({:?})", p.display(), am.kind));
        }
    }
    if cmp.hardlinks {
        let (eg, ag) = (hardlink_groups(&e), hardlink_groups(&a));
        for (p, em) in &e {
            if em.kind != Kind::File || a.get(p).is_none_or(|am| am.kind != Kind::File) {
                continue;
            }
            let (want, got) = (eg.get(p), ag.get(p));
            if want != got {
                diffs.push(format!(
                    "hard links differ: {}: expected the same file as {:?}, got {:?}",
                    p.display(),
                    want.map_or(&[][..], Vec::as_slice),
                    got.map_or(&[][..], Vec::as_slice)
                ));
            }
        }
    }
    diffs
}

#[track_caller]
pub fn assert_same_tree(expected: &Path, actual: &Path, cmp: &Compare, context: &str) {
    let diffs = diff_trees(expected, actual, cmp);
    if !diffs.is_empty() {
        let n = diffs.len();
        let shown: Vec<&String> = diffs.iter().take(40).collect();
        let mut msg = format!(
            "{context}: {n} difference(s) between expected {} and actual {}:\n",
            expected.display(),
            actual.display()
        );
        for d in shown {
            let _ = writeln!(msg, "  {d}");
        }
        if n > 40 {
            let _ = writeln!(msg, "  ... and {} more", n - 40);
        }
        panic!("{msg}");
    }
}

/// A cheap fingerprint of everything under `root` except the paths in `exclude` (relative),
/// used to prove that a run wrote nothing outside its output folder.
pub fn snapshot(root: &Path, exclude: &[&Path]) -> BTreeMap<PathBuf, String> {
    scan_tree(root)
        .into_iter()
        .filter(|(p, _)| !exclude.iter().any(|x| p.starts_with(x)))
        .map(|(p, m)| {
            (
                p,
                format!(
                    "{:?} {:o} {} {} {:?}",
                    m.kind, m.perm, m.len, m.mtime, m.target
                ),
            )
        })
        .collect()
}

/// Everything a run could change under `root`, `root` itself included (as the empty path):
/// kind, mode, size, mtime and ctime to the nanosecond, inode, symlink target and a hash of the
/// content. Two equal fingerprints mean nothing was written, not even metadata.
pub fn deep_snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut paths: Vec<PathBuf> = vec![PathBuf::new()];
    paths.extend(scan_tree(root).into_keys());
    paths
        .into_iter()
        .map(|rel| {
            let p = root.join(&rel);
            let m = meta_of(&p);
            let content = if m.kind == Kind::File {
                let data = fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
                format!(" content={:016x}", fnv1a(&data))
            } else {
                String::new()
            };
            let state = format!(
                "{:?} mode={:o} len={} id={:?} mtime={}.{:09} ctime={} target={:?}{content}",
                m.kind,
                m.perm,
                m.len,
                m.file_id,
                m.mtime,
                m.mtime_nsec,
                change_time(&p),
                m.target
            );
            (rel, state)
        })
        .collect()
}

/// When a path's data or metadata last changed (ctime; Windows' change time), as text.
pub(crate) fn change_time(p: &Path) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let md = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
        format!("{}.{:09}", md.ctime(), md.ctime_nsec())
    }
    #[cfg(windows)]
    {
        win::info(p).change_time.to_string()
    }
}

/// Assert two `deep_snapshot`s are equal, listing only the paths that differ.
#[track_caller]
pub fn assert_same_snapshot(
    before: &BTreeMap<PathBuf, String>,
    after: &BTreeMap<PathBuf, String>,
    context: &str,
) {
    let mut diffs = Vec::new();
    for (p, b) in before {
        match after.get(p) {
            None => diffs.push(format!("  gone: {}\n    was {b}", p.display())),
            Some(a) if a != b => diffs.push(format!(
                "  changed: {}\n    was {b}\n    now {a}",
                p.display()
            )),
            _ => {}
        }
    }
    for (p, a) in after {
        if !before.contains_key(p) {
            diffs.push(format!("  new: {}\n    now {a}", p.display()));
        }
    }
    if !diffs.is_empty() {
        let n = diffs.len();
        diffs.truncate(40);
        panic!(
            "{context}: {n} path(s) changed (root shown as \"\"):\n{}",
            diffs.join("\n")
        );
    }
}

/// 64-bit FNV-1a: a content fingerprint for snapshots, not a defence against anything.
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// State of a single path outside any temp dir (e.g. /tmp/evil.txt) to check it is not touched.
pub fn path_state(p: &Path) -> Option<String> {
    fs::symlink_metadata(p).ok().map(|_| {
        let m = meta_of(p);
        format!(
            "{:?} {:o} {} {} {:?}",
            m.kind, m.perm, m.len, m.mtime, m.target
        )
    })
}
