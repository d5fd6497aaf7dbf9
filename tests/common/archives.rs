//! Archives written entry by entry for the tests, names exactly as given (nothing checked or
//! normalised): tars by Python's tarfile (or `RawTar` where python3 cannot run), zips by the
//! `zip` crate.

#![allow(unused_imports)]

use std::fmt::Write as _;
use std::fs;
use std::io::Write;
use std::path::Path;

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::*;

/// 2021-03-04 05:06:08, an even second (DOS time has 2 s granularity).
pub const DOS_Y: u16 = 2021;
pub const DOS_MO: u8 = 3;
pub const DOS_D: u8 = 4;
pub const DOS_H: u8 = 5;
pub const DOS_MI: u8 = 6;
pub const DOS_S: u8 = 8;

pub fn dos_time() -> DateTime {
    DateTime::from_date_and_time(DOS_Y, DOS_MO, DOS_D, DOS_H, DOS_MI, DOS_S).unwrap()
}

/// One entry for `crate_zip`.
pub enum Z<'a> {
    File(&'a str, Vec<u8>, u32, CompressionMethod),
    Dir(&'a str, u32),
    /// A symlink: its target is its content, its mode says it is a link.
    Symlink(&'a str, &'a str),
}

pub const STORED: CompressionMethod = CompressionMethod::Stored;

/// Write a zip with the `zip` crate (works on every platform, no external tool). Entries are
/// marked as made on Unix whatever the host, so their modes mean the same everywhere.
pub fn crate_zip(path: &Path, entries: &[Z]) {
    let f = fs::File::create(path).unwrap();
    let mut w = ZipWriter::new(f);
    for e in entries {
        match e {
            Z::File(name, data, mode, method) => {
                let opts = SimpleFileOptions::default()
                    .system(zip::System::Unix)
                    .compression_method(*method)
                    .unix_permissions(*mode)
                    .last_modified_time(dos_time())
                    .large_file(data.len() > u32::MAX as usize);
                w.start_file(*name, opts).unwrap();
                w.write_all(data).unwrap();
            }
            Z::Dir(name, mode) => {
                let opts = SimpleFileOptions::default()
                    .system(zip::System::Unix)
                    .unix_permissions(*mode)
                    .last_modified_time(dos_time());
                w.add_directory(*name, opts).unwrap();
            }
            Z::Symlink(name, target) => {
                let opts = SimpleFileOptions::default()
                    .system(zip::System::Unix)
                    .last_modified_time(dos_time());
                w.add_symlink(*name, *target, opts).unwrap();
            }
        }
    }
    w.finish().unwrap();
}

/// One entry for `make_tar`: any name, any type, any mode, mtime as Python reads it.
#[derive(Clone, Debug)]
pub struct TarEntry {
    /// f file, d directory, l symlink, h hard link, c char device, b block device, p FIFO.
    pub kind: char,
    pub name: String,
    pub target: String,
    pub mode: u32,
    /// A number as Python's float() or int() reads it: "-1.5", "1700000000.123456789".
    pub mtime: String,
    pub data: Vec<u8>,
}

impl TarEntry {
    pub fn new(kind: char, name: &str, target: &str, mode: u32, data: Vec<u8>) -> Self {
        TarEntry {
            kind,
            name: name.into(),
            target: target.into(),
            mode,
            mtime: DEFAULT_MTIME.to_string(),
            data,
        }
    }
    pub fn file(name: &str, data: impl Into<Vec<u8>>, mode: u32) -> Self {
        Self::new('f', name, "", mode, data.into())
    }
    pub fn dir(name: &str, mode: u32) -> Self {
        Self::new('d', name, "", mode, Vec::new())
    }
    pub fn symlink(name: &str, target: &str) -> Self {
        Self::new('l', name, target, 0o777, Vec::new())
    }
    pub fn hardlink(name: &str, target: &str) -> Self {
        Self::new('h', name, target, 0o644, Vec::new())
    }
    pub fn special(kind: char, name: &str) -> Self {
        Self::new(kind, name, "", 0o644, Vec::new())
    }
    pub fn mtime(mut self, t: &str) -> Self {
        self.mtime = t.into();
        self
    }
}

#[cfg(unix)] // see python_tar
pub const PY_TAR_SCRIPT: &str = r#"
import sys, tarfile, io
manifest, fmt, out = sys.argv[1], sys.argv[2], sys.argv[3]
formats = {"gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT, "ustar": tarfile.USTAR_FORMAT}
types = {"f": tarfile.REGTYPE, "d": tarfile.DIRTYPE, "l": tarfile.SYMTYPE, "h": tarfile.LNKTYPE,
         "c": tarfile.CHRTYPE, "b": tarfile.BLKTYPE, "p": tarfile.FIFOTYPE}
with tarfile.open(out, "w", format=formats[fmt]) as tf:
    for line in open(manifest, encoding="ascii"):
        kind, name_hex, target_hex, mode, mtime, data_path = line.rstrip("\n").split("\t")
        ti = tarfile.TarInfo(bytes.fromhex(name_hex).decode("utf-8", "surrogateescape"))
        ti.type = types[kind]
        ti.linkname = bytes.fromhex(target_hex).decode("utf-8", "surrogateescape")
        ti.mode = int(mode, 8)
        ti.mtime = float(mtime) if "." in mtime else int(mtime)
        ti.uname = ti.gname = "root"
        if kind == "c":
            ti.devmajor, ti.devminor = 1, 3
        if kind == "b":
            ti.devmajor, ti.devminor = 8, 0
        data = open(data_path, "rb").read() if kind == "f" else b""
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data) if kind == "f" else None)
"#;

/// Write a tar with Python's tarfile in `format` ("gnu", "pax" or "ustar"); names are written
/// exactly as given (tarfile does not check them when writing).
#[cfg(unix)] // python3: the Windows build under Wine cannot start it (make_tar uses RawTar there)
#[track_caller]
pub fn python_tar(archive: &Path, format: &str, entries: &[TarEntry]) {
    use std::fmt::Write as _;
    let tmp = tempdir();
    let mut manifest = String::new();
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    for (i, e) in entries.iter().enumerate() {
        let data_path = tmp.join(format!("d{i}"));
        fs::write(&data_path, &e.data).unwrap();
        let _ = writeln!(
            manifest,
            "{}\t{}\t{}\t{:o}\t{}\t{}",
            e.kind,
            hex(&e.name),
            hex(&e.target),
            e.mode,
            e.mtime,
            data_path.display()
        );
    }
    let mpath = tmp.join("manifest");
    fs::write(&mpath, manifest).unwrap();
    run_tool(
        "python3",
        &osv!["-c", PY_TAR_SCRIPT, &mpath, format, archive],
        None,
    );
}

/// Write `entries` as a tar in `format` ("gnu" or "pax"; "ustar" too on Unix): with Python's
/// tarfile on Unix, with `RawTar` elsewhere (the Windows build cannot start python3 under Wine).
#[track_caller]
pub fn make_tar(archive: &Path, format: &str, entries: &[TarEntry]) {
    #[cfg(unix)] // python3 (see python_tar)
    python_tar(archive, format, entries);
    #[cfg(not(unix))] // no python3: see above
    {
        let mut tar = RawTar::new(format);
        for e in entries {
            tar.append(e);
        }
        fs::write(archive, tar.finish()).unwrap();
    }
}

/// Writes tar entries header by header as Python's tarfile does in its "gnu" and "pax" formats
/// (`harness_raw_tar_matches_python` holds it to Python): names and link targets exactly as
/// given, nothing checked or normalised (a directory gets a trailing `/`, as tarfile adds);
/// any entry type; user and group root. Names and targets over 100 bytes go into GNU
/// `././@LongLink` records, or pax `path`/`linkpath` records (non-ASCII ones too). An mtime
/// with a fraction, before 1970 or after 2242 goes into a pax `mtime` record exactly as
/// spelled (Python writes its float, a few digits rounded), or a GNU base-256 field (whole
/// seconds, truncated towards zero as Python's `int()`).
pub struct RawTar {
    bytes: Vec<u8>,
    pax: bool,
}

/// The first time a header's 12-byte octal field (11 digits) cannot hold.
pub const OCTAL_TIME_END: i64 = 8i64.pow(11);

impl RawTar {
    pub fn new(format: &str) -> Self {
        let pax = match format {
            "gnu" => false,
            "pax" => true,
            _ => panic!("RawTar writes the gnu and pax formats, not {format:?}"),
        };
        RawTar {
            bytes: Vec::new(),
            pax,
        }
    }

    /// A header block of this format with `name` (cut to its 100 bytes), `kind` and `size`;
    /// the checksum is set by `push`.
    pub fn header(&self, kind: u8, name: &[u8], size: u64) -> tar::Header {
        let mut h = if self.pax {
            tar::Header::new_ustar()
        } else {
            tar::Header::new_gnu()
        };
        let field = &mut h.as_old_mut().name;
        let n = name.len().min(field.len());
        field[..n].copy_from_slice(&name[..n]);
        h.set_entry_type(tar::EntryType::new(kind));
        h.set_size(size);
        h.set_mode(0o644);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h.set_username("root").unwrap();
        h.set_groupname("root").unwrap();
        h
    }

    pub fn push(&mut self, mut header: tar::Header, data: &[u8]) {
        header.set_cksum();
        self.bytes.extend_from_slice(header.as_bytes());
        self.bytes.extend_from_slice(data);
        self.bytes.resize(self.bytes.len().next_multiple_of(512), 0);
    }

    pub fn append(&mut self, e: &TarEntry) {
        let (kind, dir) = match e.kind {
            'f' => (b'0', false),
            'h' => (b'1', false),
            'l' => (b'2', false),
            'c' => (b'3', false),
            'b' => (b'4', false),
            'd' => (b'5', true),
            'p' => (b'6', false),
            k => panic!("unknown entry kind {k:?}"),
        };
        let mut name = e.name.clone();
        if dir && !name.ends_with('/') {
            name.push('/');
        }
        let (name, target) = (name.as_bytes(), e.target.as_bytes());
        // Whole seconds for the header, and whether the exact value needs more than it holds.
        let value: f64 = e.mtime.parse().unwrap();
        let exact_in_header =
            !e.mtime.contains('.') && (0..OCTAL_TIME_END).contains(&(value as i64));
        let mut secs = if self.pax {
            value.round()
        } else {
            value.trunc()
        } as i64;
        if self.pax {
            let mut records = Vec::new();
            if !name.is_ascii() || name.len() > 100 {
                records.push(("path", name));
            }
            if !target.is_ascii() || target.len() > 100 {
                records.push(("linkpath", target));
            }
            if !exact_in_header {
                records.push(("mtime", e.mtime.as_bytes()));
                if !(0..OCTAL_TIME_END).contains(&secs) {
                    secs = 0;
                }
            }
            if !records.is_empty() {
                let mut data = Vec::new();
                for (key, value) in records {
                    // "LEN key=value\n", LEN counting its own digits.
                    let rest = key.len() + value.len() + 3;
                    let mut len = rest + 1;
                    while len != rest + len.to_string().len() {
                        len = rest + len.to_string().len();
                    }
                    data.extend(format!("{len} {key}=").as_bytes());
                    data.extend(value);
                    data.push(b'\n');
                }
                let h = self.header(b'x', b"././@PaxHeader", data.len() as u64);
                self.push(h, &data);
            }
        } else {
            for (kind, long) in [(b'K', target), (b'L', name)] {
                if long.len() > 100 {
                    let mut data = long.to_vec();
                    data.push(0);
                    let h = self.header(kind, b"././@LongLink", data.len() as u64);
                    self.push(h, &data);
                }
            }
        }
        let mut h = self.header(kind, name, e.data.len() as u64);
        let field = &mut h.as_old_mut().linkname;
        let n = target.len().min(field.len());
        field[..n].copy_from_slice(&target[..n]);
        h.set_mode(e.mode & 0o7777);
        if (0..OCTAL_TIME_END).contains(&secs) {
            h.set_mtime(secs as u64);
        } else {
            // GNU base-256: a leading byte with the top bit set, then the number big-endian in
            // two's complement (0xff... for a negative one).
            let field = &mut h.as_old_mut().mtime;
            field.copy_from_slice(&i128::from(secs).to_be_bytes()[4..]);
            field[0] |= 0x80;
        }
        match e.kind {
            'c' => {
                h.set_device_major(1).unwrap();
                h.set_device_minor(3).unwrap();
            }
            'b' => {
                h.set_device_major(8).unwrap();
                h.set_device_minor(0).unwrap();
            }
            _ => {}
        }
        self.push(h, &e.data);
    }

    /// The archive, with its two zero blocks at the end.
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.extend([0u8; 1024]);
        self.bytes
    }
}
