//! Hostile-archive helpers shared by the format tests.

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
