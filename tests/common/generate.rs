//! Seeded generator.

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
pub(crate) fn random_mtime(rng: &mut Rng) -> i64 {
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
