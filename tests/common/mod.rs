//! Test harness shared by the integration tests: temp trees, a seeded tree generator, a tree
//! comparator, and helpers that run the `fastwrite` binary and the external reference tools.
//!
//! Everything here is deterministic: the generator uses its own splitmix64 PRNG, so a failing
//! seed reproduces exactly on any machine.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use filetime::FileTime;

// ---------------------------------------------------------------------------------------------
// Temp dirs
// ---------------------------------------------------------------------------------------------

/// A `tempfile::TempDir` that first makes every directory under it writable again, so trees
/// holding read-only directories (0555) can still be removed when the tests do not run as root.
pub struct TestDir(Option<tempfile::TempDir>);

impl TestDir {
    pub fn path(&self) -> &Path {
        self.0.as_ref().unwrap().path()
    }
    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.path().join(p)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            // FASTWRITE_KEEP_TMP=1 keeps every temp tree for debugging a failure.
            if std::env::var_os("FASTWRITE_KEEP_TMP").is_some() {
                eprintln!("kept temp dir {}", t.keep().display());
                return;
            }
            make_dirs_writable(t.path());
            drop(t);
        }
    }
}

pub fn tempdir() -> TestDir {
    TestDir(Some(
        tempfile::Builder::new()
            .prefix("fastwrite-test-")
            .tempdir()
            .expect("create temp dir"),
    ))
}

fn make_dirs_writable(root: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(md) = fs::symlink_metadata(root) else {
            return;
        };
        if !md.is_dir() {
            return;
        }
        let _ = fs::set_permissions(root, fs::Permissions::from_mode(0o700));
        if let Ok(rd) = fs::read_dir(root) {
            for e in rd.flatten() {
                make_dirs_writable(&e.path());
            }
        }
    }
    #[cfg(not(unix))]
    let _ = root;
}

// ---------------------------------------------------------------------------------------------
// Tree specification and builder
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Dir,
    File(Vec<u8>),
    Symlink(String),
}

/// One path of a tree to build. `path` is relative and uses `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub path: String,
    pub kind: NodeKind,
    /// Permission bits (0o7777 range). Ignored for symlinks.
    pub mode: u32,
    /// Modification time in whole seconds since the epoch.
    pub mtime: i64,
}

/// A tree described in memory; `build` materialises it under a root with exact modes and
/// mtimes (the umask plays no part: every mode is set with chmod after creation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeSpec {
    pub nodes: Vec<Node>,
}

pub const DEFAULT_MTIME: i64 = 1_600_000_000; // 2020-09-13, an even second

impl TreeSpec {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn dir(mut self, path: &str, mode: u32, mtime: i64) -> Self {
        self.nodes.push(Node {
            path: path.trim_end_matches('/').to_string(),
            kind: NodeKind::Dir,
            mode,
            mtime,
        });
        self
    }

    pub fn file(mut self, path: &str, content: impl Into<Vec<u8>>, mode: u32, mtime: i64) -> Self {
        self.nodes.push(Node {
            path: path.to_string(),
            kind: NodeKind::File(content.into()),
            mode,
            mtime,
        });
        self
    }

    pub fn symlink(mut self, path: &str, target: &str) -> Self {
        self.nodes.push(Node {
            path: path.to_string(),
            kind: NodeKind::Symlink(target.to_string()),
            mode: 0o777,
            mtime: DEFAULT_MTIME,
        });
        self
    }

    pub fn count_files(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n.kind, NodeKind::File(_)))
            .count()
    }
    pub fn count_dirs(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n.kind, NodeKind::Dir))
            .count()
    }
    pub fn count_symlinks(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n.kind, NodeKind::Symlink(_)))
            .count()
    }
    pub fn total_bytes(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| {
                if let NodeKind::File(d) = &n.kind {
                    d.len() as u64
                } else {
                    0
                }
            })
            .sum()
    }

    /// Create the tree under `root` (created if missing). Directories get their modes and mtimes
    /// last, deepest first, so that creating their children does not disturb them.
    pub fn build(&self, root: &Path) {
        fs::create_dir_all(root).unwrap_or_else(|e| panic!("create {}: {e}", root.display()));
        for n in &self.nodes {
            let p = root.join(&n.path);
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent)
                    .unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
            }
            match &n.kind {
                NodeKind::Dir => {
                    fs::create_dir_all(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()))
                }
                NodeKind::File(data) => {
                    fs::write(&p, data).unwrap_or_else(|e| panic!("write {}: {e}", p.display()))
                }
                NodeKind::Symlink(target) => make_symlink(target, &p),
            }
        }
        for n in &self.nodes {
            let p = root.join(&n.path);
            match &n.kind {
                NodeKind::File(_) => {
                    set_mode(&p, n.mode);
                    set_mtime(&p, n.mtime);
                }
                NodeKind::Symlink(_) => {
                    let t = FileTime::from_unix_time(n.mtime, 0);
                    filetime::set_symlink_file_times(&p, t, t)
                        .unwrap_or_else(|e| panic!("set symlink times {}: {e}", p.display()));
                }
                NodeKind::Dir => {}
            }
        }
        let mut dirs: Vec<&Node> = self
            .nodes
            .iter()
            .filter(|n| matches!(n.kind, NodeKind::Dir))
            .collect();
        dirs.sort_by_key(|n| std::cmp::Reverse(n.path.matches('/').count()));
        for n in dirs {
            let p = root.join(&n.path);
            set_mode(&p, n.mode);
            set_mtime(&p, n.mtime);
        }
    }
}

pub fn make_symlink(target: &str, link: &Path) {
    #[cfg(unix)]
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|e| panic!("symlink {} -> {target}: {e}", link.display()));
    #[cfg(not(unix))]
    panic!(
        "symlinks in test trees need unix (link {} -> {target})",
        link.display()
    );
}

pub fn set_mode(p: &Path, mode: u32) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(p, fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("chmod {:o} {}: {e}", mode, p.display()));
    }
    #[cfg(not(unix))]
    let _ = (p, mode);
}

pub fn set_mtime(p: &Path, secs: i64) {
    let t = FileTime::from_unix_time(secs, 0);
    filetime::set_file_times(p, t, t).unwrap_or_else(|e| panic!("set times {}: {e}", p.display()));
}

pub fn mtime_of(p: &Path) -> i64 {
    let md = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
    FileTime::from_last_modification_time(&md).unix_seconds()
}

/// Permission bits (0o7777) of a path, not following symlinks.
#[cfg(unix)]
pub fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

// ---------------------------------------------------------------------------------------------
// Seeded generator
// ---------------------------------------------------------------------------------------------

/// splitmix64: tiny, fast, and good enough to make varied test data reproducibly.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `per_mille`/1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
    /// Compressible text made of words from a small vocabulary.
    pub fn text(&mut self, n: usize) -> Vec<u8> {
        const WORDS: &[&str] = &[
            "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "archive", "extract",
            "close", "write", "thread", "queue", "deferred", "entry", "zip", "tar", "lorem",
            "ipsum",
        ];
        let mut v = Vec::with_capacity(n + 16);
        while v.len() < n {
            v.extend_from_slice(self.pick(WORDS).as_bytes());
            v.push(if self.chance(80) { b'\n' } else { b' ' });
        }
        v.truncate(n);
        v
    }
}

#[derive(Clone, Debug)]
pub struct GenOptions {
    /// Number of regular files.
    pub files: usize,
    /// Symlinks (relative, pointing inside the tree) are added when true.
    pub symlinks: bool,
    /// Allow files of about 1 MiB (at most `max_big_files` of them).
    pub big_files: bool,
    pub max_big_files: usize,
    /// Extra directories that stay empty.
    pub empty_dirs: usize,
    pub max_depth: usize,
    /// Allow read-only directories (0555, 0500). Fine as root; TestDir cleans them up otherwise.
    pub readonly_dirs: bool,
}

impl GenOptions {
    pub fn new(files: usize) -> Self {
        GenOptions {
            files,
            symlinks: true,
            big_files: true,
            max_big_files: 3,
            empty_dirs: 4,
            max_depth: 4,
            readonly_dirs: true,
        }
    }
    pub fn no_symlinks(mut self) -> Self {
        self.symlinks = false;
        self
    }
    pub fn no_big_files(mut self) -> Self {
        self.big_files = false;
        self
    }
}

/// A random mtime between 1985 and 2037 (inside both the DOS range and a signed 32-bit
/// extended-timestamp field), odd seconds included.
fn random_mtime(rng: &mut Rng) -> i64 {
    rng.range(480_000_000, 2_120_000_000) as i64
}

/// Generate a tree description from `seed`: the same seed always gives the same tree.
pub fn generate_tree(seed: u64, opts: &GenOptions) -> TreeSpec {
    let mut rng = Rng::new(seed);
    let mut spec = TreeSpec::new();

    let mut dir_modes: Vec<u32> = vec![0o755, 0o755, 0o755, 0o700, 0o750, 0o775, 0o711];
    if opts.readonly_dirs {
        dir_modes.extend([0o555, 0o500]);
    }
    const FILE_MODES: &[u32] = &[
        0o644, 0o644, 0o644, 0o644, 0o755, 0o600, 0o444, 0o640, 0o664, 0o400, 0o700,
    ];
    const DIR_WORDS: &[&str] = &[
        "src",
        "lib",
        "docs",
        "assets",
        "a b",
        "x-y",
        "data",
        ".hidden",
        "deep",
        "node_modules",
    ];

    // Directories: (path, depth). The root ("") is implicit.
    let mut dirs: Vec<(String, usize)> = vec![(String::new(), 0)];
    let ndirs = opts.files / 8 + 3;
    for i in 0..ndirs {
        let parent = loop {
            let c = rng.pick(&dirs).clone();
            if c.1 < opts.max_depth {
                break c;
            }
        };
        let name = format!("{}{}", rng.pick(DIR_WORDS), i);
        let path = if parent.0.is_empty() {
            name
        } else {
            format!("{}/{}", parent.0, name)
        };
        dirs.push((path.clone(), parent.1 + 1));
        spec.nodes.push(Node {
            path,
            kind: NodeKind::Dir,
            mode: *rng.pick(&dir_modes),
            mtime: random_mtime(&mut rng),
        });
    }

    let mut big = 0;
    let mut files: Vec<String> = Vec::new();
    for i in 0..opts.files {
        let dir = rng.pick(&dirs).0.clone();
        let name = match rng.below(10) {
            0 => format!(".dot{i}"),
            1 => format!("with space {i}.txt"),
            2 => format!("f{i}"),
            3 => format!("archive-{i}.tar.gz"),
            4 => format!("UPPER_{i}.BIN"),
            _ => format!("file{i}.{}", rng.pick(&["txt", "rs", "json", "bin", "md"])),
        };
        let path = if dir.is_empty() {
            name
        } else {
            format!("{dir}/{name}")
        };
        let size = match rng.below(100) {
            0..=9 => 0,
            10..=49 => rng.range(1, 200) as usize,
            50..=89 => rng.range(200, 8 * 1024) as usize,
            _ => {
                if opts.big_files && big < opts.max_big_files && rng.chance(300) {
                    big += 1;
                    rng.range(1 << 20, (1 << 20) + 65_536) as usize
                } else {
                    rng.range(8 * 1024, 96 * 1024) as usize
                }
            }
        };
        let data = if rng.chance(600) {
            rng.text(size)
        } else {
            rng.bytes(size)
        };
        files.push(path.clone());
        spec.nodes.push(Node {
            path,
            kind: NodeKind::File(data),
            mode: *rng.pick(FILE_MODES),
            mtime: random_mtime(&mut rng),
        });
    }

    // Empty directories are added after the files were placed, so nothing lands in them.
    for i in 0..opts.empty_dirs {
        let parent = loop {
            let c = rng.pick(&dirs).clone();
            if c.1 < opts.max_depth {
                break c;
            }
        };
        let name = format!("empty{i}");
        let path = if parent.0.is_empty() {
            name
        } else {
            format!("{}/{}", parent.0, name)
        };
        let mode = *rng.pick(&[0o755, 0o700, 0o775, 0o750]);
        spec.nodes.push(Node {
            path,
            kind: NodeKind::Dir,
            mode,
            mtime: random_mtime(&mut rng),
        });
    }

    if opts.symlinks {
        let nlinks = (opts.files / 20).max(2);
        for i in 0..nlinks {
            let at_dir = rng.pick(&dirs).0.clone();
            let target = if rng.chance(750) || dirs.len() < 2 {
                rng.pick(&files).clone()
            } else {
                rng.pick(&dirs[1..]).0.clone()
            };
            let name = format!("link{i}");
            let path = if at_dir.is_empty() {
                name
            } else {
                format!("{at_dir}/{name}")
            };
            let rel = relative_target(&at_dir, &target);
            spec.nodes.push(Node {
                path,
                kind: NodeKind::Symlink(rel),
                mode: 0o777,
                mtime: random_mtime(&mut rng),
            });
        }
    }
    spec
}

/// The relative path from directory `from_dir` to `to` (both relative to the same root).
pub fn relative_target(from_dir: &str, to: &str) -> String {
    let a: Vec<&str> = from_dir.split('/').filter(|s| !s.is_empty()).collect();
    let b: Vec<&str> = to.split('/').filter(|s| !s.is_empty()).collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<&str> = vec![".."; a.len() - common];
    parts.extend(&b[common..]);
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

/// Add `count` hard links to files of a tree built from `spec` under `root`: each one named
/// `hardlink{i}` in a directory of the tree, linking to a file chosen with `seed` (some files get
/// several). The directories written into keep their mode and mtime. Returns (link, file) pairs.
#[cfg(unix)]
pub fn add_hard_links(
    root: &Path,
    spec: &TreeSpec,
    seed: u64,
    count: usize,
) -> Vec<(String, String)> {
    let mut rng = Rng::new(seed ^ 0x4841_5244);
    let files: Vec<&Node> = spec
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::File(_)))
        .collect();
    let mut dirs: Vec<&str> = vec![""];
    dirs.extend(
        spec.nodes
            .iter()
            .filter(|n| matches!(n.kind, NodeKind::Dir))
            .map(|n| n.path.as_str()),
    );
    let mut links = Vec::new();
    for i in 0..count {
        let target = rng.pick(&files).path.clone();
        let dir = *rng.pick(&dirs);
        let link = if dir.is_empty() {
            format!("hardlink{i}")
        } else {
            format!("{dir}/hardlink{i}")
        };
        let dir_path = root.join(dir);
        let (mode, mtime) = (mode_of(&dir_path), meta_of(&dir_path));
        set_mode(&dir_path, 0o755);
        fs::hard_link(root.join(&target), root.join(&link))
            .unwrap_or_else(|e| panic!("hard link {link} -> {target}: {e}"));
        set_mode(&dir_path, mode);
        let t = FileTime::from_unix_time(mtime.mtime, mtime.mtime_nsec);
        filetime::set_file_mtime(&dir_path, t)
            .unwrap_or_else(|e| panic!("set mtime {}: {e}", dir_path.display()));
        links.push((link, target));
    }
    links
}

/// Give every path under `root` (symlinks too, not followed) a random sub-second part in its
/// mtime, keeping the whole seconds. Call it last: creating anything afterwards changes the
/// mtime of the directory it is created in.
pub fn set_subsecond_mtimes(root: &Path, seed: u64) {
    let mut rng = Rng::new(seed ^ 0x4E41_4E4F);
    for (rel, m) in scan_tree(root) {
        let p = root.join(&rel);
        // Never a whole second, so a dropped fraction always shows.
        let nanos = rng.range(1, 999_999_999) as u32;
        let t = FileTime::from_unix_time(m.mtime, nanos);
        let at = FileTime::from_unix_time(DEFAULT_MTIME, 0);
        filetime::set_symlink_file_times(&p, at, t)
            .unwrap_or_else(|e| panic!("set times {}: {e}", p.display()));
    }
}

// ---------------------------------------------------------------------------------------------
// Tree comparator
// ---------------------------------------------------------------------------------------------

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
                    if let Some(i) = eb.iter().zip(&ab).position(|(x, y)| x != y) {
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
fn change_time(p: &Path) -> String {
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

// ---------------------------------------------------------------------------------------------
// Running programs
// ---------------------------------------------------------------------------------------------

pub const BIN: &str = env!("CARGO_BIN_EXE_fastwrite");

/// Every child process (fastwrite and the reference tools) runs with this TZ unless a test
/// sets its own: DOS timestamps are local time, and a zone with DST would make an mtime in a
/// repeated hour ambiguous, so results would depend on the machine's zone.
pub const TEST_TZ: &str = "UTC0";
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub cmdline: String,
}

impl Output {
    /// The exit code; panics (with the output) if the process died from a signal.
    #[track_caller]
    pub fn code(&self) -> i32 {
        match self.status.code() {
            Some(c) => c,
            None => panic!(
                "{} was killed by a signal ({:?})\n{}",
                self.cmdline,
                self.status,
                self.dump()
            ),
        }
    }

    pub fn dump(&self) -> String {
        format!(
            "command: {}\nstatus: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.cmdline, self.status, self.stdout, self.stderr
        )
    }

    #[track_caller]
    pub fn assert_code(&self, expected: i32) -> &Self {
        let c = self.code();
        assert_eq!(
            c,
            expected,
            "unexpected exit code {c} (expected {expected})\n{}",
            self.dump()
        );
        self
    }

    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        self.assert_code(0)
    }

    /// The number on the `--stats` line that starts with `key` (e.g. `"files:"`); panics with
    /// the output if there is no such line.
    #[track_caller]
    pub fn stat(&self, key: &str) -> u64 {
        let line = self
            .stderr
            .lines()
            .map(str::trim_start)
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no `{key}` line in the --stats block\n{}", self.dump()));
        line[key.len()..]
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no number on the stats line {line:?}\n{}", self.dump()))
    }

    /// The lines of stderr that mention `needle` (case-insensitive).
    pub fn stderr_lines_with(&self, needle: &str) -> Vec<String> {
        let n = needle.to_lowercase();
        self.stderr
            .lines()
            .filter(|l| l.to_lowercase().contains(&n))
            .map(str::to_string)
            .collect()
    }

    /// Assert that one stderr line names `entry` and contains at least one of `keywords`
    /// (both case-insensitive).
    #[track_caller]
    pub fn assert_stderr_names(&self, entry: &str, keywords: &[&str]) -> &Self {
        let mut lines = self.stderr_lines_with(entry);
        // Stderr shows ten failures of a kind and counts the rest; with `--json` the report on
        // stdout has every one, as `'ENTRY': reason` lines here.
        lines.extend(self.json_failures(entry));
        assert!(
            !lines.is_empty(),
            "stderr does not name entry {entry:?}\n{}",
            self.dump()
        );
        let ok = lines.iter().any(|l| {
            let l = l.to_lowercase();
            keywords.iter().any(|k| l.contains(&k.to_lowercase()))
        });
        assert!(
            ok,
            "no stderr line naming {entry:?} contains any of {keywords:?}\n{}",
            self.dump()
        );
        self
    }
}

impl Output {
    /// The failures the `--json` report on stdout (if there is one) gives for `entry`, each as
    /// stderr would say it: `'ENTRY': reason`.
    pub fn json_failures(&self, entry: &str) -> Vec<String> {
        let Some(report) = self
            .stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        else {
            return Vec::new();
        };
        let Some(failures) = report["failures"].as_array() else {
            return Vec::new();
        };
        failures
            .iter()
            .filter_map(|f| {
                let path = f["path"].as_str()?.replace('\\', "/");
                let reason = f["reason"].as_str()?;
                (path == entry).then(|| format!("'{path}': {reason}"))
            })
            .collect()
    }
}

fn quote(s: &OsStr) -> String {
    let s = s.to_string_lossy();
    if s.is_empty() || s.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
        format!("'{}'", s.replace('\'', "'\\''"))
    } else {
        s.into_owned()
    }
}

/// Starts `cmd`. Under Wine a start now and then fails with ERROR_INTERNAL_ERROR (1359, seen
/// once in a CI run) before the program runs; that is retried, a few times.
/// Any other failure, and that one anywhere else, is returned at once.
fn spawn_retrying_wine(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    const ERROR_INTERNAL_ERROR: i32 = 1359;
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e)
                if cfg!(windows) && e.raw_os_error() == Some(ERROR_INTERNAL_ERROR) && tries < 3 =>
            {
                tries += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            result => return result,
        }
    }
}

/// Run a command to completion with a timeout, capturing stdout and stderr.
pub fn run_command(cmd: Command) -> Output {
    run_command_with_stdin(cmd, Stdio::null())
}

/// `run_command` with the child's standard input taken from `stdin` (a file, or the stdout of
/// another child for a real pipe).
pub fn run_command_with_stdin(cmd: Command, stdin: Stdio) -> Output {
    run_command_full(cmd, stdin, RUN_TIMEOUT)
}

/// `run_command` with its standard input and timeout chosen: a run that outlives `timeout` is
/// killed and the test fails with a message saying so.
pub fn run_command_full(mut cmd: Command, stdin: Stdio, timeout: Duration) -> Output {
    let cmdline = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ");
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child =
        spawn_retrying_wine(&mut cmd).unwrap_or_else(|e| panic!("cannot start {cmdline}: {e}"));
    wait_output(child, cmdline, timeout)
}

/// Waits for a child started with piped stdout and stderr, reading both as it runs; a child
/// that outlives `timeout` is killed and the test fails. `cmdline` names it in the output.
pub fn wait_output(mut child: std::process::Child, cmdline: String, timeout: Duration) -> Output {
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = so.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = se.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for child") {
            break s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmdline} did not finish within {timeout:?} (hang or deadlock?)");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    Output {
        status,
        stdout,
        stderr,
        cmdline,
    }
}

/// Build an argument list from mixed strings and paths: `args(["extract"]).path(a)...` is
/// clumsy, so tests use `osv!["extract", &archive, "-o", &out]`.
#[macro_export]
macro_rules! osv {
    ($($a:expr),* $(,)?) => {{
        #[allow(clippy::useless_vec)]
        let v: Vec<::std::ffi::OsString> = vec![$(::std::ffi::OsString::from($a)),*];
        v
    }};
}

/// Run fastwrite with `args`; always asserts it did not panic.
#[track_caller]
pub fn run_fastwrite(args: &[OsString]) -> Output {
    run_fastwrite_env(args, &[])
}

#[track_caller]
pub fn run_fastwrite_env(args: &[OsString], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    cmd.env("TZ", TEST_TZ);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_command(cmd);
    assert_no_panic(&out);
    out
}

/// Run fastwrite with `args`, killed after `timeout` (for inputs that could make it hang);
/// asserts it did not panic.
#[track_caller]
pub fn run_fastwrite_timeout(args: &[OsString], timeout: Duration) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    cmd.env("TZ", TEST_TZ);
    let out = run_command_full(cmd, Stdio::null(), timeout);
    assert_no_panic(&out);
    out
}

/// Run fastwrite with `args` and its standard input from `stdin`; asserts it did not panic.
#[track_caller]
pub fn run_fastwrite_stdin(args: &[OsString], stdin: Stdio) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    cmd.env("TZ", TEST_TZ);
    let out = run_command_with_stdin(cmd, stdin);
    assert_no_panic(&out);
    out
}

/// Run fastwrite with `args`, feeding the bytes of `input` to its standard input through a real
/// pipe, as a shell pipeline would (`cat FILE | fastwrite ...`): no seeking, no size known in
/// advance. A thread of this process writes into the pipe, so no external program is needed
/// (under Wine, the Windows tests cannot start Unix ones). fastwrite may stop reading early on
/// bad input: the writer then meets a broken pipe, which is not an error. The run has the same
/// timeout as every other (`run_command_full`).
#[track_caller]
pub fn run_fastwrite_piped(args: &[OsString], input: &Path) -> Output {
    use std::io::Write as _;
    let data = fs::read(input).unwrap_or_else(|e| panic!("read {}: {e}", input.display()));
    let (reader, mut writer) = std::io::pipe().expect("create a pipe");
    let feeder = std::thread::spawn(move || match writer.write_all(&data) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()), // the write end closes here: fastwrite then reads the end of its input
    });
    // The read end goes to the child; this process's copy is dropped with the `Command` once
    // the child has ended, so a writer still blocked on a full pipe then fails and returns.
    let out = run_fastwrite_stdin(args, Stdio::from(reader));
    match feeder.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!(
            "feeding {} to the pipe failed: {e}\n{}",
            input.display(),
            out.dump()
        ),
        Err(_) => panic!("the thread feeding {} panicked", input.display()),
    }
    out
}

#[track_caller]
pub fn assert_no_panic(out: &Output) {
    assert!(
        !out.stderr.contains("panicked") && !out.stderr.contains("RUST_BACKTRACE"),
        "fastwrite panicked\n{}",
        out.dump()
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.signal().is_none(),
            "fastwrite died from signal {:?}\n{}",
            out.status.signal(),
            out.dump()
        );
    }
}

/// The uid and gid the tests drop to when they need permission checks that root bypasses.
pub const NOBODY: u32 = 65534;

#[cfg(unix)]
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Give everything under `root` (itself included, symlinks not followed) to `NOBODY`, so that
/// `run_fastwrite_unprivileged` can read and write it. Does nothing when not root.
#[cfg(unix)]
pub fn give_to_nobody(root: &Path) {
    if !is_root() {
        return;
    }
    let mut paths = vec![root.to_path_buf()];
    paths.extend(scan_tree(root).into_keys().map(|r| root.join(r)));
    for p in paths {
        std::os::unix::fs::lchown(&p, Some(NOBODY), Some(NOBODY))
            .unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
    }
}

/// Run fastwrite where permission bits are enforced: as `NOBODY` through `setpriv` when the
/// tests run as root (chmod 000 denies root nothing), as is otherwise. The paths it works on
/// must be accessible to that user (see `give_to_nobody`). A prerequisite ([`unmet`]) where
/// the binary cannot be run unprivileged here (e.g. it sits under a folder only root can enter).
#[cfg(unix)]
#[track_caller]
pub fn run_fastwrite_unprivileged(args: &[OsString]) -> Output {
    let command = |args: &[OsString]| {
        let mut c = if is_root() {
            require_tool("setpriv");
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "--",
            ]);
            c.arg(BIN);
            c
        } else {
            Command::new(BIN)
        };
        c.args(args);
        c.env("TZ", TEST_TZ);
        c
    };
    let probe = run_command(command(&osv!["--version"]));
    if !probe.status.success() {
        unmet(format!(
            "cannot run {BIN} as uid {NOBODY} here (is the repository under a folder only root can enter?)\n{}",
            probe.dump()
        ));
    }
    let out = run_command(command(args));
    assert_no_panic(&out);
    out
}

/// `fastwrite extract ARCHIVE -o OUT FLAGS...` (flags after the subcommand, as the contract
/// allows for global flags too).
#[track_caller]
pub fn extract(archive: &Path, out: &Path, flags: &[&str]) -> Output {
    let mut a = osv!["extract", archive, "-o", out];
    a.extend(flags.iter().map(OsString::from));
    run_fastwrite(&a)
}

/// `fastwrite GLOBALS... extract ARCHIVE -o OUT` (global flags before the subcommand).
#[track_caller]
pub fn extract_globals_first(globals: &[&str], archive: &Path, out: &Path) -> Output {
    let mut a: Vec<OsString> = globals.iter().map(OsString::from).collect();
    a.extend(osv!["extract", archive, "-o", out]);
    run_fastwrite(&a)
}

/// Panic with a clear message if an external tool is not installed. Tests that need one must
/// fail loudly rather than silently pass: CI installs them.
#[track_caller]
pub fn require_tool(name: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "required external tool `{name}` not found in PATH; install it (Debian: zip, unzip, p7zip-full, \
         libarchive-tools, python3, tar, gzip, pigz, zstd, xz-utils, bzip2; .ci/setup does) - this \
         test must not pass without it"
    );
}

/// Run an external tool that must succeed; returns its output.
#[track_caller]
pub fn run_tool(program: &str, args: &[OsString], cwd: Option<&Path>) -> Output {
    require_tool(program);
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd.env("TZ", TEST_TZ);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let out = run_command(cmd);
    assert!(out.status.success(), "external tool failed\n{}", out.dump());
    out
}

/// Zip the contents of `src_dir` with Info-ZIP (`zip -qry archive .` run inside it): keeps the
/// UT extended-timestamp field, unix modes and symlinks. `extra` adds flags (e.g. "-fz").
#[track_caller]
pub fn infozip_dir(src_dir: &Path, archive: &Path, extra: &[&str]) {
    let archive = std::path::absolute(archive).unwrap();
    let mut a: Vec<OsString> = vec!["-qry".into()];
    a.extend(extra.iter().map(OsString::from));
    a.push(archive.into());
    a.push(".".into());
    run_tool("zip", &a, Some(src_dir));
}

/// Extract with Info-ZIP `unzip -q ARCHIVE -d DEST` (the reference result).
#[track_caller]
pub fn unzip_to(archive: &Path, dest: &Path) {
    run_tool("unzip", &osv!["-q", archive, "-d", dest], None);
}

// ---------------------------------------------------------------------------------------------
// Writing zips with Python's zipfile (precise control of names, modes and methods)
// ---------------------------------------------------------------------------------------------

/// One entry for `python_zip`.
#[derive(Clone, Debug)]
pub struct PyEntry {
    pub name: String,
    /// Full st_mode (type bits included, e.g. 0o100644, 0o40755, 0o120777), or None to leave
    /// external_attr at 0 (Python's writestr then fills in 0o600 for files).
    pub mode: Option<u32>,
    pub mtime: i64,
    /// "stored", "deflated", "bzip2" or "lzma".
    pub method: &'static str,
    pub data: Vec<u8>,
}

impl PyEntry {
    pub fn file(name: &str, data: impl Into<Vec<u8>>, mode: u32) -> Self {
        PyEntry {
            name: name.into(),
            mode: Some(0o100000 | mode),
            mtime: DEFAULT_MTIME,
            method: "deflated",
            data: data.into(),
        }
    }
    pub fn dir(name: &str, mode: u32) -> Self {
        let name = if name.ends_with('/') {
            name.to_string()
        } else {
            format!("{name}/")
        };
        PyEntry {
            name,
            mode: Some(0o040000 | mode),
            mtime: DEFAULT_MTIME,
            method: "stored",
            data: Vec::new(),
        }
    }
    pub fn symlink(name: &str, target: &str) -> Self {
        PyEntry {
            name: name.into(),
            mode: Some(0o120777),
            mtime: DEFAULT_MTIME,
            method: "stored",
            data: target.as_bytes().to_vec(),
        }
    }
    pub fn method(mut self, m: &'static str) -> Self {
        self.method = m;
        self
    }
    pub fn mtime(mut self, t: i64) -> Self {
        self.mtime = t;
        self
    }
}

/// Entries for every node of a spec (files with `method`).
pub fn py_entries_from_spec(spec: &TreeSpec, method: &'static str) -> Vec<PyEntry> {
    spec.nodes
        .iter()
        .map(|n| match &n.kind {
            NodeKind::Dir => PyEntry::dir(&n.path, n.mode).mtime(n.mtime),
            NodeKind::File(d) => PyEntry::file(&n.path, d.clone(), n.mode)
                .method(method)
                .mtime(n.mtime),
            NodeKind::Symlink(t) => PyEntry::symlink(&n.path, t).mtime(n.mtime),
        })
        .collect()
}

const PY_ZIP_SCRIPT: &str = r#"
import sys, zipfile, time, stat
manifest, out, stream = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
methods = {"stored": zipfile.ZIP_STORED, "deflated": zipfile.ZIP_DEFLATED,
           "bzip2": zipfile.ZIP_BZIP2, "lzma": zipfile.ZIP_LZMA}
class NoSeek:
    # No tell/seek: zipfile then writes data descriptors, as a streaming writer does.
    def __init__(self, f): self.f = f
    def write(self, b): return self.f.write(b)
    def flush(self): self.f.flush()
f = open(out, "wb")
with zipfile.ZipFile(NoSeek(f) if stream else f, "w") as zf:
    for line in open(manifest, encoding="ascii"):
        name_hex, mode, mtime, method, data_path = line.rstrip("\n").split("\t")
        name = bytes.fromhex(name_hex).decode("utf-8")
        zi = zipfile.ZipInfo(name, time.localtime(int(mtime))[:6])
        if mode != "-":
            m = int(mode, 8)
            zi.create_system = 3
            zi.external_attr = (m << 16) | (0x10 if stat.S_ISDIR(m) else 0)
        else:
            zi.external_attr = 0x10 if name.endswith("/") else 0
        zi.compress_type = methods[method]
        with open(data_path, "rb") as d:
            zf.writestr(zi, d.read())
f.close()
"#;

/// Write a zip with Python's zipfile. `stream`: write through a non-seekable wrapper, so every
/// entry gets a data descriptor.
#[track_caller]
pub fn python_zip(archive: &Path, entries: &[PyEntry], stream: bool) {
    let tmp = tempdir();
    let mut manifest = String::new();
    for (i, e) in entries.iter().enumerate() {
        let data_path = tmp.join(format!("d{i}"));
        fs::write(&data_path, &e.data).unwrap();
        let hex: String = e.name.bytes().map(|b| format!("{b:02x}")).collect();
        let mode = e
            .mode
            .map(|m| format!("{m:o}"))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            manifest,
            "{hex}\t{mode}\t{}\t{}\t{}",
            e.mtime,
            e.method,
            data_path.display()
        );
    }
    let mpath = tmp.join("manifest");
    fs::write(&mpath, manifest).unwrap();
    run_tool(
        "python3",
        &osv![
            "-c",
            PY_ZIP_SCRIPT,
            &mpath,
            archive,
            if stream { "1" } else { "0" }
        ],
        None,
    );
}

// ---------------------------------------------------------------------------------------------
// Raw zip surgery
// ---------------------------------------------------------------------------------------------

/// Offset of the local header of entry `name` in `zip`.
pub fn local_header_offset(zip: &[u8], name: &str) -> usize {
    let n = name.as_bytes();
    let mut i = 0;
    while i + 30 <= zip.len() {
        if zip[i..i + 4] == *b"PK\x03\x04" {
            let name_len = u16::from_le_bytes([zip[i + 26], zip[i + 27]]) as usize;
            if zip.get(i + 30..i + 30 + name_len) == Some(n) {
                return i;
            }
        }
        i += 1;
    }
    panic!("no local header for {name:?} in zip");
}

/// Offset of the data of entry `name` in `zip` (found through its local header).
pub fn local_data_offset(zip: &[u8], name: &str) -> usize {
    let i = local_header_offset(zip, name);
    let name_len = u16::from_le_bytes([zip[i + 26], zip[i + 27]]) as usize;
    let extra_len = u16::from_le_bytes([zip[i + 28], zip[i + 29]]) as usize;
    i + 30 + name_len + extra_len
}

/// Seconds since the epoch of a civil date-time taken as UTC.
pub fn civil_to_unix(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> i64 {
    // Howard Hinnant's days_from_civil.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + h * 3600 + mi * 60 + s
}

// ---------------------------------------------------------------------------------------------
// Hostile-archive helpers shared by the format tests
// ---------------------------------------------------------------------------------------------

/// Words one of which a refusal message must contain.
pub const REFUSAL_WORDS: &[&str] = &[
    "refus",
    "escape",
    "outside",
    "unsafe",
    "not allowed",
    "absolute",
    "invalid",
    "forbidden",
    "reject",
];

/// Names of the direct children of `dir` (sorted); empty if `dir` does not exist.
pub fn children(dir: &Path) -> Vec<String> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every path under `dir`, relative, as strings with `/` (sorted); empty if `dir` is missing.
pub fn all_paths(dir: &Path) -> Vec<String> {
    if !dir.exists() {
        return Vec::new();
    }
    scan_tree(dir)
        .keys()
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .collect()
}

/// Seeded text and bytes, for file contents.
pub fn text(seed: u64, n: usize) -> Vec<u8> {
    Rng::new(seed).text(n)
}

pub fn random(seed: u64, n: usize) -> Vec<u8> {
    Rng::new(seed).bytes(n)
}

/// A unique name, so tests that probe shared system folders (/tmp, /etc) cannot collide.
pub fn unique_name(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("fastwrite-{tag}-{}-{nanos}", std::process::id())
}

/// A public Zip Slip sample archive, kept in the repository (`tests/data/zip-slip`, with its
/// source and licence in SOURCE.md there).
#[track_caller]
pub fn zip_slip_sample(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/zip-slip")
        .join(name);
    assert!(p.is_file(), "sample archive {} is missing", p.display());
    p
}

/// A temp layout for hostile archives:
///   ROOT/archives/   the archives
///   ROOT/outside/    a folder a broken extractor could be tricked into writing to
///   ROOT/work/out    OUT
/// `snapshot()` fingerprints everything except OUT, so a test can prove nothing else changed.
pub struct Sandbox {
    dir: TestDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempdir();
        for d in ["archives", "outside", "work"] {
            fs::create_dir(dir.join(d)).unwrap();
        }
        Sandbox { dir }
    }
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    pub fn out(&self) -> PathBuf {
        self.dir.join("work/out")
    }
    pub fn outside(&self) -> PathBuf {
        self.dir.join("outside")
    }
    pub fn archive(&self, name: &str) -> PathBuf {
        self.dir.join("archives").join(name)
    }
    pub fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        let mut s = snapshot(self.root(), &[Path::new("work/out")]);
        // Creating OUT legitimately changes work/'s mtime; its contents are checked apart.
        s.remove(Path::new("work"));
        s
    }
    #[track_caller]
    pub fn assert_unchanged_outside(&self, before: &BTreeMap<PathBuf, String>, out: &Output) {
        let after = self.snapshot();
        assert_eq!(
            before,
            &after,
            "something outside OUT changed (before vs after)\n{}",
            out.dump()
        );
        let work = children(&self.dir.join("work"));
        assert!(
            work.is_empty() || work == ["out"],
            "unexpected entries next to OUT: {work:?}\n{}",
            out.dump()
        );
    }
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------------
// The close-latency lab (lab/slowclose.c)
// ---------------------------------------------------------------------------------------------

/// The lab's LD_PRELOAD library, which makes closes of written files slow or failing
/// (`FASTWRITE_LAB_CLOSE_MS`, `FASTWRITE_LAB_FAIL_CLOSE`, `FASTWRITE_LAB_FAIL_EVERY`: see the
/// header of lab/slowclose.c). Built by `lab/build` (into target/lab, only when the source is
/// newer) at most once per test process; returns the library's absolute path. Set it as
/// `LD_PRELOAD` in a child's environment only, never in the test process's own.
///
/// Panics, saying what to install, when there is no C compiler: the tests that need the lab
/// must fail loudly rather than pass without it (`.ci/setup` installs gcc).
#[cfg(target_os = "linux")]
#[track_caller]
pub fn lab_library() -> PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let has_cc = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join("cc").is_file()));
        assert!(
            has_cc,
            "the close-latency lab (lab/slowclose.c) needs a C compiler: `cc` is not in PATH; \
             install gcc (Debian: apt-get install gcc; .ci/setup does) - the fault tests must \
             not pass without it"
        );
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(root.join("lab/build"))
            .current_dir(root)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run lab/build: {e}"));
        assert!(
            out.status.success(),
            "lab/build failed ({:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        assert!(
            path.is_absolute() && path.is_file(),
            "lab/build did not print the path of a built library: {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        path
    })
    .clone()
}

/// Unmounts a test's mount point, lazily if it is busy; says so if neither works (a leftover
/// mount must not fail the test that made it, but must not go unnoticed either).
#[cfg(unix)]
pub fn unmount(dir: &Path) {
    for args in [&["umount"][..], &["umount", "-l"]] {
        let ok = Command::new(args[0])
            .args(&args[1..])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
    }
    eprintln!("could not unmount {}", dir.display());
}

/// A plain tar (GNU headers) made with the `tar` crate: files with mode 0o644 and a fixed mtime.
pub fn crate_tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(DEFAULT_MTIME as u64);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// What the Windows tests read through a handle: std gives no file index, link count or change
/// time there.
#[cfg(windows)]
pub mod win {
    use std::fs;
    use std::os::windows::fs::OpenOptionsExt;
    use std::os::windows::io::AsRawHandle;
    use std::path::Path;

    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, FILE_BASIC_INFO, FILE_FLAG_BACKUP_SEMANTICS,
        FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES, FileBasicInfo,
        GetFileInformationByHandle, GetFileInformationByHandleEx,
    };

    pub struct Info {
        /// (volume serial number, file index).
        pub id: (u64, u64),
        /// How many names the file has.
        pub links: u64,
        /// When the file's data or metadata last changed (100 ns ticks), as ctime on unix.
        pub change_time: i64,
    }

    pub fn info(p: &Path) -> Info {
        let f = fs::OpenOptions::new()
            .access_mode(FILE_READ_ATTRIBUTES)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
            .open(p)
            .unwrap_or_else(|e| panic!("open {}: {e}", p.display()));
        let h = f.as_raw_handle() as _;
        // SAFETY: `h` is an open handle for the duration of the calls; the out-parameters
        // are plain structs on the stack, of the size given.
        unsafe {
            let mut by_handle: BY_HANDLE_FILE_INFORMATION = std::mem::zeroed();
            assert!(
                GetFileInformationByHandle(h, &mut by_handle) != 0,
                "GetFileInformationByHandle {}: {}",
                p.display(),
                std::io::Error::last_os_error()
            );
            let mut basic: FILE_BASIC_INFO = std::mem::zeroed();
            assert!(
                GetFileInformationByHandleEx(
                    h,
                    FileBasicInfo,
                    (&raw mut basic).cast(),
                    std::mem::size_of::<FILE_BASIC_INFO>() as u32,
                ) != 0,
                "GetFileInformationByHandleEx {}: {}",
                p.display(),
                std::io::Error::last_os_error()
            );
            Info {
                id: (
                    u64::from(by_handle.dwVolumeSerialNumber),
                    (u64::from(by_handle.nFileIndexHigh) << 32)
                        | u64::from(by_handle.nFileIndexLow),
                ),
                links: u64::from(by_handle.nNumberOfLinks),
                change_time: basic.ChangeTime,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Prerequisites: a test that cannot run here is ignored with its reason, never passed
// ---------------------------------------------------------------------------------------------

/// Why a test cannot run on this machine (not root, no loop devices, mounts forbidden). A
/// helper deep inside a test raises it with [`unmet`]; the harness ([`run_tests`]) reports the
/// test as ignored with the reason, or as failed under CI (`CI=true`), where every
/// prerequisite must be there. A test never passes without having checked what it claims.
pub struct Unmet(pub String);

/// Stops the current test: it cannot run here, for `reason` (see [`Unmet`]).
pub fn unmet(reason: impl Into<String>) -> ! {
    std::panic::panic_any(Unmet(reason.into()))
}

/// Whether this run is CI's, where a missing prerequisite is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The `main` of a test file built with `harness = false`: runs `tests` (name, function) as
/// libtest does (same arguments and output), except that a test that calls [`unmet`] is
/// reported as ignored with its reason, or failed under CI.
pub fn run_tests(mut tests: Vec<(&'static str, fn())>) -> ! {
    if std::env::var_os(HARNESS_PROBE).is_some() {
        tests.push(("harness_probe", || unmet("the probe's prerequisite")));
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // An unmet prerequisite is reported by the harness, not as a panic.
        if !info.payload().is::<Unmet>() {
            default_hook(info);
        }
    }));
    let args = libtest_mimic::Arguments::from_args();
    let trials = tests
        .into_iter()
        .map(|(name, test)| {
            libtest_mimic::Trial::ignorable_test(name, move || {
                match std::panic::catch_unwind(test) {
                    Ok(()) => Ok(libtest_mimic::Completion::Completed),
                    Err(payload) => match payload.downcast::<Unmet>() {
                        Ok(unmet) if in_ci() => Err(format!(
                            "cannot run here, and CI=true requires every prerequisite: {}",
                            unmet.0
                        )
                        .into()),
                        Ok(unmet) => Ok(libtest_mimic::Completion::ignored_with(unmet.0)),
                        Err(other) => std::panic::resume_unwind(other),
                    },
                }
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// Set, [`run_tests`] adds a test named `harness_probe` whose prerequisite is never met, so
/// that a test can check how the harness reports it.
pub const HARNESS_PROBE: &str = "FASTWRITE_HARNESS_PROBE";

/// Checks the harness of this test binary: the probe is reported as ignored with its reason,
/// and under CI as a failure.
pub fn check_harness_reports_unmet_prerequisites() {
    let run = |ci: &str| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["harness_probe", "--exact"])
            .env(HARNESS_PROBE, "1")
            .env("CI", ci);
        run_command(cmd)
    };
    let here = run("false");
    assert!(
        here.status.success() && here.stdout.contains("ignored (the probe's prerequisite)"),
        "{}",
        here.dump()
    );
    let ci = run("true");
    assert!(
        !ci.status.success() && ci.stdout.contains("CI=true requires every prerequisite"),
        "{}",
        ci.dump()
    );
}

/// The list of tests for [`run_tests`]: `tests![a, #[cfg(unix)] b]`.
#[macro_export]
macro_rules! tests {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {{
        // Entries may be cfg'd out one by one, so the list is pushed, not a `vec![]`.
        #[allow(clippy::vec_init_then_push)]
        fn list() -> Vec<(&'static str, fn())> {
            let mut tests: Vec<(&'static str, fn())> = Vec::new();
            $(
                $(#[$attr])*
                tests.push((stringify!($name), $name as fn()));
            )*
            tests
        }
        list()
    }};
}

/// A release's tree for the selection tests: `project-1.2/` with docs, sources, a
/// backup file, a symlink and a hard link, every mtime and mode set.
#[cfg(unix)]
pub fn project_tree(root: &Path) {
    let top = root.join("project-1.2");
    for (i, (file, data)) in [
        ("README.md", "readme"),
        ("docs/a.md", "a"),
        ("docs/b.bak", "backup"),
        ("docs/old/x.md", "old"),
        ("src/lib.rs", "lib"),
        ("src/deep/y.rs", "y"),
        ("src/lib.rs.bak", "backup"),
    ]
    .into_iter()
    .enumerate()
    {
        let path = top.join(file);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, data).unwrap();
        set_mode(&path, if i % 2 == 0 { 0o644 } else { 0o600 });
        set_mtime(&path, 1_600_000_000 + i as i64);
    }
    fs::hard_link(top.join("src/lib.rs"), top.join("src/lib-copy.rs")).unwrap();
    make_symlink("README.md", &top.join("readme-link"));
    let link_time = filetime::FileTime::from_unix_time(1_500_000_000, 0);
    filetime::set_symlink_file_times(top.join("readme-link"), link_time, link_time).unwrap();
    for (i, dir) in ["docs/old", "docs", "src/deep", "src", ""]
        .into_iter()
        .enumerate()
    {
        set_mtime(&top.join(dir), 1_400_000_000 + i as i64);
    }
}
