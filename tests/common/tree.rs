//! Tree specification and builder.

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
