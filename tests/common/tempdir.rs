//! Temp dirs.

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

pub(crate) fn make_dirs_writable(root: &Path) {
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
