//! Writing zips with Python's zipfile (precise control of names, modes and methods).

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

pub(crate) const PY_ZIP_SCRIPT: &str = r#"
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
