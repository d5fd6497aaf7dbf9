//! Integration tests for `fastwrite extract` on tar archives: plain, gzip (one or several
//! members), zstd, xz and bzip2, from a file or from standard input.
//!
//! The reference result is GNU tar's own extraction (`tar -xpf`, run as root: modes exact, the
//! umask ignored, mtimes of files, directories and symlinks restored) of the very same archive.
//! Archives come from GNU tar in every `--format`, from bsdtar, from Python's tarfile and from
//! the `tar` crate; hostile ones are written by Python (any name, any entry type), damaged ones
//! are patched byte by byte.

// Most tests need unix modes, symlinks and the reference tools; elsewhere their helpers idle.
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

#[macro_use]
mod common;

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

// -------------------------------------------------------------------------------------------
// Helpers local to the tar tests
// -------------------------------------------------------------------------------------------

/// Run `program args` with `input` on its standard input; returns its standard output.
#[track_caller]
fn pipe_through(program: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    require_tool(program);
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// How a tar stream is wrapped. The `*Multi` kinds are two members (or frames, or streams)
/// made from the two halves of the tar, cut in the middle of a block, and concatenated, as
/// `cat a.gz b.gz` makes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Comp {
    None,
    Gzip,
    GzipMulti,
    Pigz,
    Zstd,
    ZstdMulti,
    Xz,
    XzMulti,
    Bzip2,
    Bzip2Multi,
}

const EVERY_COMPRESSOR: &[Comp] = &[
    Comp::None,
    Comp::Gzip,
    Comp::GzipMulti,
    Comp::Pigz,
    Comp::Zstd,
    Comp::ZstdMulti,
    Comp::Xz,
    Comp::XzMulti,
    Comp::Bzip2,
    Comp::Bzip2Multi,
];

/// One of each decoder.
const EACH_DECODER: &[Comp] = &[Comp::None, Comp::Gzip, Comp::Zstd, Comp::Xz, Comp::Bzip2];

impl Comp {
    fn suffix(self) -> &'static str {
        match self {
            Comp::None => "",
            Comp::Gzip => ".gz",
            Comp::GzipMulti => ".multi.gz",
            Comp::Pigz => ".pigz.gz",
            Comp::Zstd => ".zst",
            Comp::ZstdMulti => ".multi.zst",
            Comp::Xz => ".xz",
            Comp::XzMulti => ".multi.xz",
            Comp::Bzip2 => ".bz2",
            Comp::Bzip2Multi => ".multi.bz2",
        }
    }

    fn compress(self, tar: &[u8]) -> Vec<u8> {
        let one = |program: &str, args: &[&str], data: &[u8]| pipe_through(program, args, data);
        let two = |program: &str, args: &[&str]| {
            // An odd offset: the second member starts inside a header or inside file data.
            let cut = tar.len() / 2 + 77;
            let mut v = one(program, args, &tar[..cut]);
            v.extend(one(program, args, &tar[cut..]));
            v
        };
        match self {
            Comp::None => tar.to_vec(),
            Comp::Gzip => one("gzip", &["-c", "-6", "-n"], tar),
            Comp::GzipMulti => two("gzip", &["-c", "-6", "-n"]),
            Comp::Pigz => one("pigz", &["-c", "-p", "2", "-b", "64"], tar),
            Comp::Zstd => one("zstd", &["-q", "-c", "-3"], tar),
            Comp::ZstdMulti => two("zstd", &["-q", "-c", "-3"]),
            Comp::Xz => one("xz", &["-c", "-T1", "-3"], tar),
            Comp::XzMulti => two("xz", &["-c", "-T1", "-3"]),
            Comp::Bzip2 => one("bzip2", &["-c", "-9"], tar),
            Comp::Bzip2Multi => two("bzip2", &["-c", "-9"]),
        }
    }
}

/// How long the names of a generated tree may be, for the formats that limit them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Names {
    /// Every path and link target under 100 bytes: v7 holds them.
    Short,
    /// Adds a 217-byte path that ustar splits into its prefix and name fields.
    Ustar,
    /// Adds paths, a symlink target and a hard-link target far over 100 bytes (GNU long-name
    /// records, pax `path`/`linkpath`).
    Long,
}

/// A seeded tree holding everything a tar can: files of many sizes and modes (0o401, 0o777,
/// 0o470, ...), read-only and empty directories, symlinks, hard links (several paths per
/// inode), and mtimes with a fraction of a second on every path. Built under `root`.
#[cfg(unix)]
fn rich_tree(seed: u64, files: usize, root: &Path, names: Names) {
    let base = generate_tree(seed, &GenOptions::new(files));
    let m = 1_234_567_890;
    let mut spec = base
        .clone()
        .dir("odd", 0o711, m)
        // Odd, but readable by their owner, so the archivers can read them without root.
        .file("odd/mode-401", "owner-read", 0o401, m + 1)
        .file("odd/mode-777", "all", 0o777, m + 2)
        .file("odd/mode-470", "group", 0o470, m + 3)
        .file("odd/mode-407", "other", 0o407, m + 4)
        .file("odd/empty", "", 0o644, m + 5)
        .dir("odd/empty-readonly", 0o555, m + 6)
        .symlink("odd/dangling", "no-such-file")
        .symlink("odd/to-dir", "../odd/empty-readonly");
    let long_file = match names {
        Names::Short => None,
        Names::Ustar => {
            let d = format!("{}/{}", "u".repeat(70), "v".repeat(60));
            let f = format!("{d}/{}.txt", "w".repeat(80));
            spec = spec
                .dir(&"u".repeat(70), 0o755, m + 7)
                .dir(&d, 0o750, m + 8)
                .file(&f, text(seed, 3000), 0o644, m + 9)
                .symlink(
                    &format!("{d}/short-link"),
                    &format!("{}.txt", "w".repeat(80)),
                );
            Some(f)
        }
        Names::Long => {
            let a = format!("long-names/{}", "a".repeat(120));
            let b = format!("{a}/{}", "b".repeat(130));
            let f = format!("{b}/{}.txt", "c".repeat(200));
            spec = spec
                .dir("long-names", 0o755, m + 7)
                .dir(&a, 0o755, m + 8)
                .dir(&b, 0o700, m + 9)
                .file(&f, text(seed, 5000), 0o640, m + 10)
                .symlink("long-link", &f);
            Some(f)
        }
    };
    spec.build(root);
    if names == Names::Long {
        // A hard link whose own name and whose target are both long.
        let f = long_file.as_deref().unwrap();
        let link = format!("long-names/{}/{}", "a".repeat(120), "d".repeat(150));
        fs::hard_link(root.join(f), root.join(&link)).unwrap();
    }
    // Links only to files of the generated part: a ustar link target must fit in 100 bytes.
    add_hard_links(root, &base, seed, 8);
    set_subsecond_mtimes(root, seed);
}

/// The top-level names of `dir`, sorted: what to give tar so that no `./` entry is archived.
fn top_level(dir: &Path) -> Vec<OsString> {
    children(dir).into_iter().map(OsString::from).collect()
}

/// `tar -C SRC --sort=name EXTRA... -cf ARCHIVE -- <top-level names>` with GNU tar.
#[track_caller]
fn gnu_tar_create(src: &Path, archive: &Path, extra: &[&str]) {
    let archive = std::path::absolute(archive).unwrap();
    let mut a: Vec<OsString> = osv!["-C", src, "--sort=name"];
    a.extend(extra.iter().map(OsString::from));
    a.extend(osv!["-cf", &archive, "--"]);
    a.extend(top_level(src));
    run_tool("tar", &a, None);
}

/// The reference: GNU tar extracts `archive` into `dest` (created), keeping modes and times.
/// `--delay-directory-restore`: by default GNU tar sets a directory's mtime as soon as the
/// archive moves on to another directory, which is wrong for archives that come back to it
/// later (bsdtar writes a directory's entry, then its siblings, then its content).
#[track_caller]
fn gnu_tar_extract(archive: &Path, dest: &Path) {
    fs::create_dir_all(dest).unwrap();
    run_tool(
        "tar",
        &osv!["--delay-directory-restore", "-xpf", archive, "-C", dest],
        None,
    );
}

/// What a reference extraction is held to against its source tree: everything, but mtimes to
/// the nanosecond only when the format keeps them.
fn vs_source(nanos: bool) -> Compare {
    Compare {
        mtime_nanos: nanos,
        ..Compare::strict()
    }
}

/// The offset of the 512-byte header of the entry named `name` in a plain tar.
fn header_offset(tar: &[u8], name: &str) -> usize {
    let mut a = tar::Archive::new(tar);
    for e in a.entries().unwrap() {
        let e = e.unwrap();
        if e.path_bytes().as_ref() == name.as_bytes() {
            return e.raw_header_position() as usize;
        }
    }
    panic!("no entry {name:?} in the tar");
}

/// The names of the entries of a plain tar, as stored (long names resolved).
fn entry_names(tar: &[u8]) -> Vec<String> {
    let mut a = tar::Archive::new(tar);
    a.entries()
        .unwrap()
        .map(|e| String::from_utf8_lossy(&e.unwrap().path_bytes()).into_owned())
        .collect()
}

/// A plain tar (GNU headers) made with the `tar` crate: files with mode 0o644 and a fixed mtime.
fn crate_tar(files: &[(&str, &[u8])]) -> Vec<u8> {
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

/// One entry for `python_tar`: any name, any type, any mode, mtime as Python reads it.
#[derive(Clone, Debug)]
struct TarEntry {
    /// f file, d directory, l symlink, h hard link, c char device, b block device, p FIFO.
    kind: char,
    name: String,
    target: String,
    mode: u32,
    /// A number as Python's float() or int() reads it: "-1.5", "1700000000.123456789".
    mtime: String,
    data: Vec<u8>,
}

impl TarEntry {
    fn new(kind: char, name: &str, target: &str, mode: u32, data: Vec<u8>) -> Self {
        TarEntry {
            kind,
            name: name.into(),
            target: target.into(),
            mode,
            mtime: DEFAULT_MTIME.to_string(),
            data,
        }
    }
    fn file(name: &str, data: impl Into<Vec<u8>>, mode: u32) -> Self {
        Self::new('f', name, "", mode, data.into())
    }
    fn dir(name: &str, mode: u32) -> Self {
        Self::new('d', name, "", mode, Vec::new())
    }
    fn symlink(name: &str, target: &str) -> Self {
        Self::new('l', name, target, 0o777, Vec::new())
    }
    fn hardlink(name: &str, target: &str) -> Self {
        Self::new('h', name, target, 0o644, Vec::new())
    }
    fn special(kind: char, name: &str) -> Self {
        Self::new(kind, name, "", 0o644, Vec::new())
    }
    fn mtime(mut self, t: &str) -> Self {
        self.mtime = t.into();
        self
    }
}

const PY_TAR_SCRIPT: &str = r#"
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
#[track_caller]
fn python_tar(archive: &Path, format: &str, entries: &[TarEntry]) {
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

/// Python's tarfile archiving the top-level names of `src` (recursively, hard links detected).
#[track_caller]
fn python_tar_dir(src: &Path, archive: &Path, format: &str) {
    const SCRIPT: &str = r#"
import os, sys, tarfile
src, fmt, out = sys.argv[1], sys.argv[2], sys.argv[3]
formats = {"gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT, "ustar": tarfile.USTAR_FORMAT}
with tarfile.open(out, "w", format=formats[fmt]) as tf:
    for name in sorted(os.listdir(src)):
        tf.add(os.path.join(src, name), arcname=name)
"#;
    run_tool("python3", &osv!["-c", SCRIPT, src, format, archive], None);
}

// -------------------------------------------------------------------------------------------
// Round trips: seeded tree -> GNU tar (every format, every compressor) -> fastwrite, compared
// with GNU tar's own extraction of the same archive
// -------------------------------------------------------------------------------------------

/// Flags rotated over the compressors, so each format also runs both close modes, one and
/// several writers, and a budget small enough (4 MiB) that the ~1 MiB files are streamed.
const FLAG_ROTATION: &[&[&str]] = &[
    &[],
    &["--no-defer-close", "-j", "1"],
    &["-j", "8"],
    &["--no-defer-close", "-j", "3"],
    &["--memory-budget", "4", "-j", "2"],
];

#[cfg(unix)] // GNU tar, unix modes, symlinks and hard links
fn gnu_tar_roundtrip(format: &str, seed: u64, files: usize, names: Names) {
    let t = tempdir();
    let src = t.join("src");
    rich_tree(seed, files, &src, names);
    let plain = t.join(format!("{format}.tar"));
    gnu_tar_create(&src, &plain, &[&format!("--format={format}")]);
    let tar_bytes = fs::read(&plain).unwrap();

    // The archive holds what the test is about.
    let has = |needle: &[u8]| tar_bytes.windows(needle.len()).any(|w| w == needle);
    match format {
        "gnu" | "oldgnu" => assert!(has(b"././@LongLink"), "setup: no GNU long names"),
        "pax" => {
            assert!(has(b" path="), "setup: no pax path records");
            assert!(has(b" mtime="), "setup: no pax mtime records");
        }
        "ustar" => assert!(
            !has(b"././@LongLink") && !has(b" path="),
            "setup: ustar archive with extensions"
        ),
        "v7" => assert_eq!(
            &tar_bytes[257..262],
            &[0u8; 5],
            "setup: v7 header has a magic"
        ),
        _ => unreachable!(),
    }
    let names_in_tar = entry_names(&tar_bytes);
    assert!(
        names_in_tar.iter().all(|n| !n.starts_with("./")),
        "setup: {names_in_tar:?}"
    );

    let reference = t.join("ref");
    gnu_tar_extract(&plain, &reference);
    assert_same_tree(
        &src,
        &reference,
        &vs_source(format == "pax"),
        &format!("sanity: GNU tar --format={format} vs source"),
    );

    for (i, comp) in EVERY_COMPRESSOR.iter().enumerate() {
        let archive = t.join(format!("{format}.tar{}", comp.suffix()));
        if *comp != Comp::None {
            fs::write(&archive, comp.compress(&tar_bytes)).unwrap();
        }
        let flags = FLAG_ROTATION[i % FLAG_ROTATION.len()];
        let out = t.join(format!("out-{i}"));
        let r = extract(&archive, &out, flags);
        r.assert_success();
        assert_same_tree(
            &reference,
            &out,
            &Compare::strict(),
            &format!("--format={format} {comp:?} {flags:?}: fastwrite vs GNU tar"),
        );
        fs::remove_dir_all(&out).ok();
    }
}

#[cfg(unix)]
#[test]
fn gnu_tar_format_gnu_every_compressor() {
    gnu_tar_roundtrip("gnu", 101, 150, Names::Long);
}

#[cfg(unix)]
#[test]
fn gnu_tar_format_oldgnu_every_compressor() {
    gnu_tar_roundtrip("oldgnu", 102, 120, Names::Long);
}

/// pax keeps sub-second mtimes: they must come back to the nanosecond, on files, directories
/// and symlinks.
#[cfg(unix)]
#[test]
fn gnu_tar_format_pax_every_compressor() {
    gnu_tar_roundtrip("pax", 103, 150, Names::Long);
}

#[cfg(unix)]
#[test]
fn gnu_tar_format_ustar_every_compressor() {
    gnu_tar_roundtrip("ustar", 104, 120, Names::Ustar);
}

#[cfg(unix)]
#[test]
fn gnu_tar_format_v7_every_compressor() {
    gnu_tar_roundtrip("v7", 105, 100, Names::Short);
}

// -------------------------------------------------------------------------------------------
// Other producers: bsdtar and Python's tarfile give the same tree as GNU tar does
// -------------------------------------------------------------------------------------------

#[cfg(unix)] // GNU tar, bsdtar/python3, unix modes, symlinks, hard links
fn producer_roundtrip(
    label: &str,
    seed: u64,
    names: Names,
    make: impl Fn(&Path, &Path),
    pax_nanos: bool,
) {
    let t = tempdir();
    let src = t.join("src");
    rich_tree(seed, 80, &src, names);
    let archive = t.join(format!("{label}.tar"));
    make(&src, &archive);
    let bytes = fs::read(&archive).unwrap();
    if pax_nanos {
        let has_fraction = bytes.windows(7).enumerate().any(|(i, w)| {
            w == b" mtime="
                && bytes[i + 7..]
                    .iter()
                    .take_while(|&&b| b != b'\n')
                    .any(|&b| b == b'.')
        });
        assert!(has_fraction, "setup: {label} wrote no sub-second pax mtime");
    }
    let reference = t.join("ref");
    gnu_tar_extract(&archive, &reference);
    // Sub-second times are held against GNU tar's reading of the archive, not the source:
    // Python stores them as a float, which rounds the last digits.
    assert_same_tree(
        &src,
        &reference,
        &vs_source(false),
        &format!("sanity: GNU tar reading the {label} archive vs source"),
    );
    for flags in [&[][..], &["--no-defer-close", "-j", "1"][..]] {
        let out = t.join(format!("out{}", flags.len()));
        extract(&archive, &out, flags).assert_success();
        assert_same_tree(
            &reference,
            &out,
            &Compare::strict(),
            &format!("{label} {flags:?}: fastwrite vs GNU tar"),
        );
    }
    // The same archive compressed, through a pipe on standard input.
    let zst = t.join(format!("{label}.tar.zst"));
    fs::write(&zst, Comp::Zstd.compress(&bytes)).unwrap();
    let out = t.join("out-stdin");
    run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &zst).assert_success();
    assert_same_tree(
        &reference,
        &out,
        &Compare::strict(),
        &format!("{label} on stdin: fastwrite vs GNU tar"),
    );
}

#[cfg(unix)]
fn bsdtar(extra: &'static [&'static str]) -> impl Fn(&Path, &Path) {
    move |src, archive| {
        let archive = std::path::absolute(archive).unwrap();
        let mut a: Vec<OsString> = osv!["-C", src];
        a.extend(extra.iter().map(OsString::from));
        a.extend(osv!["-cf", &archive]);
        a.extend(top_level(src));
        run_tool("bsdtar", &a, None);
    }
}

#[cfg(unix)]
#[test]
fn bsdtar_default_format() {
    producer_roundtrip("bsdtar", 201, Names::Long, bsdtar(&[]), false);
}

#[cfg(unix)]
#[test]
fn bsdtar_pax_format() {
    producer_roundtrip(
        "bsdtar-pax",
        202,
        Names::Long,
        bsdtar(&["--format", "pax"]),
        true,
    );
}

#[cfg(unix)]
#[test]
fn bsdtar_ustar_format() {
    producer_roundtrip(
        "bsdtar-ustar",
        203,
        Names::Ustar,
        bsdtar(&["--format", "ustar"]),
        false,
    );
}

#[cfg(unix)]
#[test]
fn python_tarfile_gnu_format() {
    producer_roundtrip(
        "py-gnu",
        211,
        Names::Long,
        |s, a| python_tar_dir(s, a, "gnu"),
        false,
    );
}

#[cfg(unix)]
#[test]
fn python_tarfile_pax_format() {
    producer_roundtrip(
        "py-pax",
        212,
        Names::Long,
        |s, a| python_tar_dir(s, a, "pax"),
        true,
    );
}

#[cfg(unix)]
#[test]
fn python_tarfile_ustar_format() {
    producer_roundtrip(
        "py-ustar",
        213,
        Names::Ustar,
        |s, a| python_tar_dir(s, a, "ustar"),
        false,
    );
}

/// `tar -C dir -cf x.tar .` is the most common way to make a tarball: every name starts with
/// `./`, and the first entry is `./` itself (the folder being archived). That entry names OUT;
/// it is not an error, and the tree is the one GNU tar extracts.
#[cfg(unix)]
#[test]
fn dot_slash_names_and_root_entry() {
    let t = tempdir();
    let src = t.join("src");
    rich_tree(221, 60, &src, Names::Short);
    let archive = std::path::absolute(t.join("dot.tar.gz")).unwrap();
    run_tool(
        "tar",
        &osv!["-C", &src, "--sort=name", "-czf", &archive, "."],
        None,
    );
    let reference = t.join("ref");
    gnu_tar_extract(&archive, &reference);
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_success();
    assert_same_tree(
        &reference,
        &out,
        &Compare::strict(),
        "tar -cf x.tar . : fastwrite vs GNU tar",
    );
}

// -------------------------------------------------------------------------------------------
// Both close modes and any number of writers give the same tree
// -------------------------------------------------------------------------------------------

#[cfg(unix)]
#[test]
fn close_modes_and_thread_counts_agree() {
    let t = tempdir();
    let src = t.join("src");
    rich_tree(301, 400, &src, Names::Long);
    let plain = t.join("t.tar");
    gnu_tar_create(&src, &plain, &["--format=pax"]);
    let archive = t.join("t.tar.zst");
    fs::write(&archive, Comp::Zstd.compress(&fs::read(&plain).unwrap())).unwrap();
    let reference = t.join("ref");
    gnu_tar_extract(&plain, &reference);

    let runs: &[(&[&str], &[&str])] = &[
        (&[], &[]),
        (&[], &["--no-defer-close"]),
        (&["-j", "1"], &[]),
        (&["-j", "8"], &[]),
        (&["--no-defer-close", "-j", "1"], &[]),
        (&["--no-defer-close"], &["-j", "8"]),
        (&["--close-threads", "1"], &["-j", "8"]),
        (&[], &["--close-threads", "16", "-j", "2"]),
        (&["-j", "8"], &["--memory-budget", "4"]),
        (&["--no-defer-close", "-j", "1"], &["--memory-budget", "4"]),
        (&["--fsync"], &[]),
        (&["--fsync", "--no-defer-close"], &["-j", "2"]),
    ];
    let first = t.join("out0");
    for (i, (globals, flags)) in runs.iter().enumerate() {
        let out = t.join(format!("out{i}"));
        let mut args: Vec<OsString> = globals.iter().map(OsString::from).collect();
        args.extend(osv!["extract", &archive, "-o", &out]);
        args.extend(flags.iter().map(OsString::from));
        let r = run_fastwrite(&args);
        r.assert_success();
        assert_same_tree(
            &reference,
            &out,
            &Compare::strict(),
            &format!("{}: fastwrite vs GNU tar", r.cmdline),
        );
        if i > 0 {
            assert_same_tree(
                &first,
                &out,
                &Compare::strict(),
                &format!("{}: vs the default run", r.cmdline),
            );
        }
    }
}

// -------------------------------------------------------------------------------------------
// Standard input, and the format told by content, never by name
// -------------------------------------------------------------------------------------------

#[cfg(unix)]
#[test]
fn tar_streams_on_stdin() {
    let t = tempdir();
    let src = t.join("src");
    rich_tree(401, 60, &src, Names::Long);
    let plain = t.join("s.tar");
    gnu_tar_create(&src, &plain, &["--format=gnu"]);
    let reference = t.join("ref");
    gnu_tar_extract(&plain, &reference);
    let tar_bytes = fs::read(&plain).unwrap();
    for (i, comp) in [
        Comp::None,
        Comp::Gzip,
        Comp::GzipMulti,
        Comp::Zstd,
        Comp::Xz,
        Comp::Bzip2,
    ]
    .into_iter()
    .enumerate()
    {
        let archive = t.join(format!("s.tar{}", comp.suffix()));
        if comp != Comp::None {
            fs::write(&archive, comp.compress(&tar_bytes)).unwrap();
        }
        // Through a pipe (`cat a.tar.zst | fastwrite extract - -o OUT`).
        let out = t.join(format!("pipe{i}"));
        let flags: &[&str] = if i % 2 == 0 {
            &[]
        } else {
            &["--no-defer-close", "-j", "1"]
        };
        let mut args = osv!["extract", "-", "-o", &out];
        args.extend(flags.iter().map(OsString::from));
        run_fastwrite_piped(&args, &archive).assert_success();
        assert_same_tree(
            &reference,
            &out,
            &Compare::strict(),
            &format!("{comp:?} piped on stdin {flags:?}"),
        );
        // Redirected from the file (`fastwrite extract - -o OUT < a.tar.zst`).
        let out = t.join(format!("redirect{i}"));
        let stdin = Stdio::from(fs::File::open(&archive).unwrap());
        run_fastwrite_stdin(&osv!["extract", "-", "-o", &out], stdin).assert_success();
        assert_same_tree(
            &reference,
            &out,
            &Compare::strict(),
            &format!("{comp:?} redirected on stdin"),
        );
    }
}

/// A zip must be read from its end, so it cannot come on stdin: refused before anything is
/// written (exit 2, saying why). So are garbage and an empty stdin.
#[test]
fn unusable_stdin_is_refused() {
    let t = tempdir();
    let zip_path = t.join("a.zip");
    {
        let mut w = zip::ZipWriter::new(fs::File::create(&zip_path).unwrap());
        w.start_file("inside.txt", zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(b"zip content").unwrap();
        w.finish().unwrap();
    }
    let garbage = t.join("garbage");
    let mut g = b"GARBAGE!".to_vec();
    g.extend(random(402, 100_000));
    fs::write(&garbage, g).unwrap();
    let empty = t.join("empty");
    fs::write(&empty, "").unwrap();
    for (input, word) in [(&zip_path, "zip"), (&garbage, "tar"), (&empty, "empty")] {
        let out = t.join("out");
        let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &out], input);
        r.assert_code(2);
        assert!(
            r.stderr.to_lowercase().contains(word),
            "stderr does not say why ({word:?})\n{}",
            r.dump()
        );
        assert!(
            all_paths(&out).is_empty(),
            "something was extracted from {}: {:?}",
            input.display(),
            all_paths(&out)
        );
    }
}

/// The name of an archive says nothing: a .tar.gz named x.zip or data.bin, a .tar.zst named
/// .tar.gz, a plain tar named .zip and so on all extract by what they hold.
#[cfg(unix)]
#[test]
fn format_told_by_content_not_name() {
    let t = tempdir();
    let src = t.join("src");
    rich_tree(501, 40, &src, Names::Short);
    let plain = t.join("real.tar");
    gnu_tar_create(&src, &plain, &["--format=ustar"]);
    let reference = t.join("ref");
    gnu_tar_extract(&plain, &reference);
    let tar_bytes = fs::read(&plain).unwrap();
    for (i, (comp, name)) in [
        (Comp::Gzip, "x.zip"),
        (Comp::Gzip, "data.bin"),
        (Comp::Zstd, "a.tar.gz"),
        (Comp::Xz, "b.tar.bz2"),
        (Comp::Bzip2, "noextension"),
        (Comp::None, "plain.zip"),
        (Comp::None, "plain.tar.xz"),
        (Comp::Pigz, "p.7z"),
    ]
    .into_iter()
    .enumerate()
    {
        let archive = t.join(name);
        fs::write(&archive, comp.compress(&tar_bytes)).unwrap();
        let out = t.join(format!("out{i}"));
        extract(&archive, &out, &[]).assert_success();
        assert_same_tree(
            &reference,
            &out,
            &Compare::strict(),
            &format!("{comp:?} named {name}"),
        );
    }
}

// -------------------------------------------------------------------------------------------
// GNU sparse files
// -------------------------------------------------------------------------------------------

/// `tar --sparse --format=gnu|oldgnu` stores holes as a map ('S' entries). The file comes back
/// with the same content and, on disk, with its holes: far fewer blocks than its length.
#[cfg(unix)]
#[test]
fn gnu_sparse_files_written_sparse() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    // 64 MiB of hole then "x\n" (streamed: larger than any buffer).
    let f = fs::File::create(src.join("big-sparse")).unwrap();
    f.set_len(64 << 20).unwrap();
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(src.join("big-sparse"))
        .unwrap();
    f.write_all(b"x\n").unwrap();
    drop(f);
    // 3 MiB with data in the middle only (buffered: small enough to be read whole).
    let mut f = fs::File::create(src.join("middle-sparse")).unwrap();
    f.set_len(3 << 20).unwrap();
    f.seek(SeekFrom::Start(1 << 20)).unwrap();
    f.write_all(&random(601, 12_288)).unwrap();
    drop(f);
    // 32 MiB: data at the start, then a hole to the end.
    let mut f = fs::File::create(src.join("tail-hole")).unwrap();
    f.write_all(&random(602, 8192)).unwrap();
    f.set_len(32 << 20).unwrap();
    drop(f);
    for p in ["big-sparse", "middle-sparse", "tail-hole"] {
        set_mode(&src.join(p), 0o640);
        set_mtime(&src.join(p), DEFAULT_MTIME + 7);
    }

    for format in ["gnu", "oldgnu"] {
        let plain = t.join(format!("{format}.tar"));
        gnu_tar_create(&src, &plain, &[&format!("--format={format}"), "--sparse"]);
        let tar_bytes = fs::read(&plain).unwrap();
        assert_eq!(
            tar_bytes[156], b'S',
            "setup: the first entry is not a GNU sparse entry"
        );
        assert!(
            tar_bytes.len() < 1 << 20,
            "setup: the holes were archived as data"
        );
        let reference = t.join(format!("ref-{format}"));
        gnu_tar_extract(&plain, &reference);
        for (i, comp) in [Comp::None, Comp::Zstd, Comp::Gzip].into_iter().enumerate() {
            let archive = t.join(format!("{format}.tar{}", comp.suffix()));
            if comp != Comp::None {
                fs::write(&archive, comp.compress(&tar_bytes)).unwrap();
            }
            let out = t.join(format!("out-{format}-{i}"));
            let flags: &[&str] = if i == 1 { &["--no-defer-close"] } else { &[] };
            extract(&archive, &out, flags).assert_success();
            assert_same_tree(
                &reference,
                &out,
                &Compare::strict(),
                &format!("sparse {format} {comp:?}"),
            );
            for name in ["big-sparse", "middle-sparse", "tail-hole"] {
                let m = meta_of(&out.join(name));
                assert_eq!(
                    fs::read(out.join(name)).unwrap(),
                    fs::read(src.join(name)).unwrap(),
                    "{name}: content"
                );
                assert!(
                    m.disk_bytes < 1 << 20,
                    "{name} ({format}, {comp:?}) takes {} bytes on disk for {} bytes: holes were \
                     written as data",
                    m.disk_bytes,
                    m.len
                );
            }
        }
    }
}

/// GNU tar's `--sparse` with `--format=pax` (sparse format 1.0) stores the map inside the data
/// and names the entry `./GNUSparseFile.NNN/name`. Either it is restored (right name, right
/// content), or the entry fails loudly: never a silent exit 0 with the raw map written out.
#[cfg(unix)]
#[test]
fn pax_sparse_file_restored_or_refused() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    let f = fs::File::create(src.join("sp")).unwrap();
    f.set_len(8 << 20).unwrap();
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(src.join("sp"))
        .unwrap();
    f.write_all(b"end\n").unwrap();
    drop(f);
    let archive = t.join("pax-sparse.tar");
    gnu_tar_create(&src, &archive, &["--format=pax", "--sparse"]);
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    if r.code() == 0 {
        assert_eq!(
            all_paths(&out),
            ["sp"],
            "exit 0 but the sparse file was not restored under its name\n{}",
            r.dump()
        );
        assert_eq!(
            fs::read(out.join("sp")).unwrap(),
            fs::read(src.join("sp")).unwrap()
        );
    } else {
        r.assert_stderr_names("sp", &["sparse", "unsupported", "not supported"]);
    }
}

// -------------------------------------------------------------------------------------------
// Modes and mtimes
// -------------------------------------------------------------------------------------------

#[cfg(unix)] // unix modes, python3
#[test]
fn setid_bits_cleared_unless_keep_setid() {
    let t = tempdir();
    let archive = t.join("suid.tar");
    python_tar(
        &archive,
        "gnu",
        &[
            TarEntry::file("suid", "#!/bin/sh\n", 0o4755),
            TarEntry::file("sgid", "#!/bin/sh\n", 0o2750),
            TarEntry::file("plain", "x", 0o751),
            TarEntry::dir("sticky", 0o1777),
            TarEntry::file("sticky/inner", "y", 0o644),
        ],
    );
    let out = t.join("default");
    extract(&archive, &out, &[]).assert_success();
    assert_eq!(mode_of(&out.join("suid")), 0o755, "setuid must be cleared");
    assert_eq!(mode_of(&out.join("sgid")), 0o750, "setgid must be cleared");
    assert_eq!(mode_of(&out.join("plain")), 0o751);
    assert_eq!(
        mode_of(&out.join("sticky")),
        0o777,
        "sticky must be cleared"
    );

    let keep = t.join("keep");
    extract(&archive, &keep, &["--keep-setid"]).assert_success();
    let reference = t.join("ref");
    gnu_tar_extract(&archive, &reference);
    assert_same_tree(
        &reference,
        &keep,
        &Compare::strict(),
        "--keep-setid vs tar -xp",
    );
    assert_eq!(mode_of(&keep.join("suid")), 0o4755);
    assert_eq!(mode_of(&keep.join("sgid")), 0o2750);
    assert_eq!(mode_of(&keep.join("sticky")), 0o1777);
}

/// Modes come back exactly as archived whatever the umask (like `tar -p` as root).
#[cfg(unix)] // bash, unix modes
#[test]
fn umask_is_ignored() {
    let t = tempdir();
    let archive = t.join("m.tar");
    python_tar(
        &archive,
        "ustar",
        &[
            TarEntry::dir("d777", 0o777),
            TarEntry::file("d777/f666", "a", 0o666),
            TarEntry::file("f777", "b", 0o777),
            TarEntry::dir("d775", 0o775),
            TarEntry::file("d775/f664", "c", 0o664),
            TarEntry::file("f604", "d", 0o604),
        ],
    );
    let out = t.join("out");
    let r = run_tool(
        "bash",
        &osv![
            "-c",
            "umask 077; exec \"$0\" extract \"$1\" -o \"$2\"",
            BIN,
            &archive,
            &out
        ],
        None,
    );
    assert_no_panic(&r);
    for (p, mode) in [
        ("d777", 0o777),
        ("d777/f666", 0o666),
        ("f777", 0o777),
        ("d775", 0o775),
        ("d775/f664", 0o664),
        ("f604", 0o604),
    ] {
        assert_eq!(mode_of(&out.join(p)), mode, "{p} under umask 077");
    }
}

/// pax records: paths and link targets far over 100 bytes, sub-second mtimes (before 1970
/// too) on files, directories and symlinks. GNU tar's result, to the nanosecond.
#[cfg(unix)]
#[test]
fn pax_records_long_names_and_precise_times() {
    let t = tempdir();
    let p = "p".repeat(150);
    let pq = format!("{p}/{}", "q".repeat(150));
    let deep = format!("{pq}/{}", "r".repeat(150));
    let archive = t.join("pax.tar");
    python_tar(
        &archive,
        "pax",
        &[
            TarEntry::dir(&p, 0o755).mtime("1300000000.000000001"),
            TarEntry::dir(&pq, 0o700).mtime("1300000001.999999999"),
            TarEntry::dir("times", 0o755).mtime("1600000000.5"),
            TarEntry::file("times/frac", "f", 0o644).mtime("1700000000.25"),
            TarEntry::file("times/pre1970", "p", 0o644).mtime("-12345.75"),
            TarEntry::file("times/far", "far", 0o644).mtime("8589934597"),
            TarEntry::symlink("times/link", "frac").mtime("1500000000.125"),
            TarEntry::file(&deep, "deep", 0o600).mtime("1400000000.875"),
            TarEntry::symlink("deep-link", &deep),
            TarEntry::hardlink("deep-hard", &deep),
            TarEntry::file("utf8-é-ß-日本.txt", "u", 0o644),
        ],
    );
    let reference = t.join("ref");
    gnu_tar_extract(&archive, &reference);
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert_same_tree(
        &reference,
        &out,
        &Compare::strict(),
        "pax: fastwrite vs GNU tar",
    );
    let m = meta_of(&out.join("times/frac"));
    assert_eq!((m.mtime, m.mtime_nsec), (1_700_000_000, 250_000_000));
    let m = meta_of(&out.join("times/pre1970"));
    assert_eq!((m.mtime, m.mtime_nsec), (-12_346, 250_000_000));
}

/// GNU headers store a time that does not fit in octal (before 1970, after 2242) in base-256:
/// such an archive extracts like GNU tar does, and never crashes or hangs the extractor.
#[cfg(unix)]
#[test]
fn gnu_base256_times_before_1970_and_far_future() {
    let t = tempdir();
    let archive = t.join("b256.tar");
    python_tar(
        &archive,
        "gnu",
        &[
            TarEntry::file("before1970", "a", 0o644).mtime("-100"),
            TarEntry::file("far-future", "b", 0o644).mtime("8589934597"),
            TarEntry::file("normal", "c", 0o644),
        ],
    );
    let out = t.join("out");
    let r = run_fastwrite_timeout(
        &osv!["extract", &archive, "-o", &out],
        Duration::from_secs(30),
    );
    r.assert_success();
    let reference = t.join("ref");
    gnu_tar_extract(&archive, &reference);
    assert_same_tree(&reference, &out, &Compare::strict(), "base-256 times");
    assert_eq!(mtime_of(&out.join("before1970")), -100);
}

/// A directory's mode and mtime are applied after its content is written, whether its entry
/// comes before its files (GNU tar) or after them: read-only directories keep their files.
#[cfg(unix)]
#[test]
fn directory_metadata_applied_last() {
    let t = tempdir();
    let archive = t.join("dirs.tar");
    python_tar(
        &archive,
        "gnu",
        &[
            TarEntry::dir("first", 0o555).mtime("1000000001"),
            TarEntry::file("first/a", "a", 0o644).mtime("1000000002"),
            TarEntry::dir("first/sub", 0o500).mtime("1000000003"),
            TarEntry::file("first/sub/b", "b", 0o400).mtime("1000000004"),
            TarEntry::file("last/c", "c", 0o644).mtime("1000000005"),
            TarEntry::symlink("last/l", "c").mtime("1000000006"),
            TarEntry::dir("last", 0o550).mtime("1000000007"),
        ],
    );
    let reference = t.join("ref");
    gnu_tar_extract(&archive, &reference);
    for flags in [&[][..], &["--no-defer-close", "-j", "1"][..]] {
        let out = t.join(format!("out{}", flags.len()));
        extract(&archive, &out, flags).assert_success();
        assert_same_tree(&reference, &out, &Compare::strict(), "directory metadata");
        assert_eq!(mtime_of(&out.join("first")), 1_000_000_001);
        assert_eq!(mode_of(&out.join("last")), 0o550);
    }
}

// -------------------------------------------------------------------------------------------
// Hostile archives
// -------------------------------------------------------------------------------------------

fn zip_slip_tar_case(archive_name: &str, evil_entry_tail: &str, outside_probes: &[&str]) {
    let sb = Sandbox::new();
    let archive = sb.archive(archive_name);
    fs::copy(shared_zip_slip(archive_name), &archive).unwrap();
    let probes: Vec<(PathBuf, Option<String>)> = outside_probes
        .iter()
        .map(|p| (PathBuf::from(p), path_state(Path::new(p))))
        .collect();
    let before = sb.snapshot();
    let r = extract(&archive, &sb.out(), &[]);
    r.assert_code(1);
    assert_eq!(
        all_paths(&sb.out()),
        ["good.txt"],
        "only good.txt may be extracted\n{}",
        r.dump()
    );
    assert!(!fs::read(sb.out().join("good.txt")).unwrap().is_empty());
    let evil = entry_names(&fs::read(&archive).unwrap())
        .into_iter()
        .find(|n| n.ends_with(evil_entry_tail))
        .unwrap();
    r.assert_stderr_names(&evil, REFUSAL_WORDS);
    sb.assert_unchanged_outside(&before, &r);
    for (p, st) in probes {
        assert_eq!(
            path_state(&p),
            st,
            "{} was created or changed by the run\n{}",
            p.display(),
            r.dump()
        );
    }
}

#[test]
fn zip_slip_tar_sample_refused() {
    zip_slip_tar_case("zip-slip.tar", "tmp/evil.txt", &["/tmp/evil.txt"]);
}

#[test]
fn zip_slip_windows_tar_sample_refused() {
    zip_slip_tar_case(
        "zip-slip-win.tar",
        "Temp\\evil.txt",
        &["/Temp/evil.txt", "/tmp/evil.txt"],
    );
}

/// Absolute paths and drive letters are refused (not stripped and extracted), in GNU headers
/// and in pax `path` records alike.
#[cfg(unix)] // python3
#[test]
fn absolute_and_drive_letter_paths_refused() {
    for format in ["gnu", "pax"] {
        let sb = Sandbox::new();
        let abs = format!("/tmp/{}.txt", unique_name("abs"));
        let bad = [
            abs.as_str(),
            "C:/x.txt",
            "D:\\y.txt",
            "E:z.txt",
            "//server/share/w.txt",
            "\\\\server\\share\\v.txt",
        ];
        let mut entries = vec![TarEntry::file("good.txt", "good", 0o644)];
        entries.extend(bad.iter().map(|n| TarEntry::file(n, "evil", 0o644)));
        entries.push(TarEntry::dir("/tmp/abs-dir", 0o755));
        let archive = sb.archive("abs.tar");
        python_tar(&archive, format, &entries);
        let before = sb.snapshot();
        let r = extract(&archive, &sb.out(), &[]);
        let abs_created = Path::new(&abs).exists();
        if abs_created {
            let _ = fs::remove_file(&abs);
        }
        assert!(!abs_created, "{abs} was written outside OUT\n{}", r.dump());
        r.assert_code(1);
        for n in bad {
            r.assert_stderr_names(n, REFUSAL_WORDS);
        }
        r.assert_stderr_names("/tmp/abs-dir", REFUSAL_WORDS);
        assert_eq!(
            all_paths(&sb.out()),
            ["good.txt"],
            "refused entries must not be extracted in any form ({format})\n{}",
            r.dump()
        );
        sb.assert_unchanged_outside(&before, &r);
    }
}

/// Any `..` component is refused, with `/` or `\` as separator, even one that stays inside.
#[cfg(unix)] // python3
#[test]
fn dotdot_components_refused() {
    let sb = Sandbox::new();
    let bad = [
        "a/../../escape.txt",
        "a/../inside.txt",
        "..\\..\\win.txt",
        "sub\\..\\..\\mixed.txt",
        "../dirup",
        "x/..",
    ];
    let mut entries = vec![TarEntry::file("good.txt", "good", 0o644)];
    for n in bad {
        entries.push(if n == "../dirup" {
            TarEntry::dir(n, 0o755)
        } else {
            TarEntry::file(n, "evil", 0o644)
        });
    }
    let archive = sb.archive("dotdot.tar");
    python_tar(&archive, "gnu", &entries);
    let before = sb.snapshot();
    let r = extract(&archive, &sb.out(), &["-j", "4"]);
    r.assert_code(1);
    for n in bad {
        r.assert_stderr_names(n, REFUSAL_WORDS);
    }
    assert_eq!(all_paths(&sb.out()), ["good.txt"], "{}", r.dump());
    sb.assert_unchanged_outside(&before, &r);
    assert!(!sb.root().join("escape.txt").exists() && !sb.root().join("work/escape.txt").exists());
}

/// Symlink entries whose target leaves OUT (relative or absolute) are refused; entries below
/// them are refused too. Symlinks that stay inside are kept.
#[cfg(unix)] // python3, symlinks
#[test]
fn escaping_symlink_entries_refused() {
    let sb = Sandbox::new();
    let outside_abs = sb.outside().display().to_string();
    let entries = vec![
        TarEntry::file("good.txt", "good", 0o644),
        TarEntry::symlink("escape_rel_link", "../../outside"),
        TarEntry::file("escape_rel_link/through.txt", "evil", 0o644),
        TarEntry::symlink("escape_abs_link", &outside_abs),
        TarEntry::file("escape_abs_link/through_abs.txt", "evil", 0o644),
        TarEntry::dir("d", 0o755),
        TarEntry::symlink("d/escape_nested_link", "../../x"),
        TarEntry::symlink("d/dotdot_after_name", "sub/../../.."),
        TarEntry::symlink("ok_link", "good.txt"),
        TarEntry::symlink("d/ok_up_link", "../good.txt"),
    ];
    let archive = sb.archive("links.tar");
    python_tar(&archive, "pax", &entries);
    let before = sb.snapshot();
    for flags in [&["-j", "1"][..], &["-j", "8", "--no-defer-close"][..]] {
        let _ = fs::remove_dir_all(sb.out());
        let r = extract(&archive, &sb.out(), flags);
        r.assert_code(1);
        for n in [
            "escape_rel_link",
            "escape_abs_link",
            "d/escape_nested_link",
            "d/dotdot_after_name",
        ] {
            r.assert_stderr_names(n, REFUSAL_WORDS);
            // The file entries "below" a refused link may land in a real directory of that
            // name inside OUT: what matters is that no symlink was made.
            assert!(
                !sb.out().join(n).is_symlink(),
                "{n} was created as a symlink\n{}",
                r.dump()
            );
        }
        sb.assert_unchanged_outside(&before, &r);
        assert!(children(&sb.outside()).is_empty());
        assert_eq!(
            fs::read_link(sb.out().join("ok_link")).unwrap(),
            Path::new("good.txt")
        );
        assert_eq!(
            fs::read_link(sb.out().join("d/ok_up_link")).unwrap(),
            Path::new("../good.txt")
        );
        assert_eq!(
            fs::read_to_string(sb.out().join("good.txt")).unwrap(),
            "good"
        );
    }
}

/// The classic: a symlink to /etc, then a file through it. Nothing may appear in /etc.
#[cfg(unix)] // python3, symlinks
#[test]
fn symlink_to_etc_then_file_through_it() {
    let sb = Sandbox::new();
    let probe = unique_name("probe");
    let archive = sb.archive("etc.tar");
    python_tar(
        &archive,
        "gnu",
        &[
            TarEntry::symlink("etc_link", "/etc"),
            TarEntry::file(&format!("etc_link/{probe}"), "evil", 0o644),
            TarEntry::file("good.txt", "good", 0o644),
        ],
    );
    let r = extract(&archive, &sb.out(), &[]);
    let leaked = Path::new("/etc").join(&probe);
    let was_written = leaked.exists();
    if was_written {
        let _ = fs::remove_file(&leaked);
    }
    assert!(
        !was_written,
        "{} was written through the symlink\n{}",
        leaked.display(),
        r.dump()
    );
    r.assert_code(1);
    r.assert_stderr_names("etc_link", REFUSAL_WORDS);
    assert!(!sb.out().join("etc_link").is_symlink());
    assert_eq!(
        fs::read_to_string(sb.out().join("good.txt")).unwrap(),
        "good"
    );
}

/// Nothing below a symlink seen earlier in the archive is extracted, even when the symlink
/// stays inside OUT: not a file, not a directory, not a link.
#[cfg(unix)] // python3, symlinks
#[test]
fn entries_below_an_archived_symlink_refused() {
    let below = [
        "alias/x.txt",
        "alias/newdir",
        "alias/deeper/y.txt",
        "alias/sl",
        "alias/hl",
    ];
    for flags in [&["-j", "1"][..], &["-j", "8"][..], &["--overwrite"][..]] {
        let t = tempdir();
        let archive = t.join("alias.tar");
        python_tar(
            &archive,
            "gnu",
            &[
                TarEntry::dir("sub", 0o755),
                TarEntry::file("good.txt", "good", 0o644),
                TarEntry::symlink("alias", "sub"),
                TarEntry::file("alias/x.txt", "through", 0o644),
                TarEntry::dir("alias/newdir", 0o755),
                TarEntry::file("alias/deeper/y.txt", "through", 0o644),
                TarEntry::symlink("alias/sl", "../good.txt"),
                TarEntry::hardlink("alias/hl", "good.txt"),
            ],
        );
        let out = t.join("out");
        let r = extract(&archive, &out, flags);
        r.assert_code(1);
        for n in below {
            r.assert_stderr_names(n, &["symlink", "link", "refus"]);
        }
        assert!(
            children(&out.join("sub")).is_empty(),
            "entries were written through alias ({flags:?}): {:?}\n{}",
            children(&out.join("sub")),
            r.dump()
        );
        assert_eq!(fs::read_link(out.join("alias")).unwrap(), Path::new("sub"));
        assert_eq!(fs::read_to_string(out.join("good.txt")).unwrap(), "good");
    }
}

/// Hard links may only name a regular file earlier in the same archive: not `..`, not an
/// absolute path, not a file that is only on disk, not a later entry, not a directory or a
/// symlink.
#[cfg(unix)] // python3, hard links
#[test]
fn hard_link_targets_refused() {
    let sb = Sandbox::new();
    fs::write(sb.outside().join("secret.txt"), "secret").unwrap();
    let bad = [
        ("h_dotdot", "../../outside/secret.txt"),
        ("h_etc", "../../../../../../../../etc/passwd"),
        ("h_abs", "/etc/passwd"),
        (
            "h_abs_outside",
            &*sb.outside().join("secret.txt").display().to_string(),
        ),
        ("h_missing", "not-in-archive.txt"),
        ("h_on_disk", "preexisting.txt"),
        ("h_later", "later.txt"),
        ("h_dir", "adir"),
        ("h_symlink", "asymlink"),
    ]
    .map(|(a, b)| (a.to_string(), b.to_string()));
    let mut entries = vec![
        TarEntry::file("good.txt", "good", 0o644),
        TarEntry::dir("adir", 0o755),
        TarEntry::symlink("asymlink", "good.txt"),
        TarEntry::hardlink("h_ok", "good.txt"),
        TarEntry::hardlink("sub/h_ok2", "./good.txt"),
    ];
    entries.extend(bad.iter().map(|(n, target)| TarEntry::hardlink(n, target)));
    entries.push(TarEntry::file("later.txt", "later", 0o644));
    let archive = sb.archive("hard.tar");
    python_tar(&archive, "gnu", &entries);
    fs::create_dir_all(sb.out()).unwrap();
    fs::write(sb.out().join("preexisting.txt"), "mine").unwrap();
    let passwd_links = fs::metadata("/etc/passwd").ok().map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.nlink()
    });
    let before = sb.snapshot();
    let r = extract(&archive, &sb.out(), &[]);
    r.assert_code(1);
    for (n, _) in &bad {
        r.assert_stderr_names(n, &["refus", "hard link", "not a file", "escape"]);
        assert!(
            fs::symlink_metadata(sb.out().join(n)).is_err(),
            "{n} was created\n{}",
            r.dump()
        );
    }
    let good = meta_of(&sb.out().join("good.txt"));
    assert_eq!(meta_of(&sb.out().join("h_ok")).file_id, good.file_id);
    assert_eq!(meta_of(&sb.out().join("sub/h_ok2")).file_id, good.file_id);
    assert_eq!(
        fs::read_to_string(sb.out().join("later.txt")).unwrap(),
        "later"
    );
    assert_eq!(
        fs::read_to_string(sb.out().join("preexisting.txt")).unwrap(),
        "mine"
    );
    sb.assert_unchanged_outside(&before, &r);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        fs::metadata(sb.outside().join("secret.txt"))
            .unwrap()
            .nlink(),
        1
    );
    assert_eq!(
        fs::metadata("/etc/passwd").ok().map(|m| m.nlink()),
        passwd_links
    );
}

/// A symlink already in OUT pointing outside must not be followed by an entry below it (a
/// file, a directory, a link) nor by a hard link naming a file below it. By default and with
/// --skip-existing those entries fail; --overwrite may replace the link with a real directory,
/// never write through it.
#[cfg(unix)] // symlinks, hard links
#[test]
fn preexisting_symlink_parent_in_out_not_followed() {
    for flags in [&[][..], &["--skip-existing"][..], &["--overwrite"][..]] {
        let sb = Sandbox::new();
        let target = sb.outside().join("target.txt");
        fs::write(&target, "ORIGINAL").unwrap();
        let archive = sb.archive("through.tar");
        python_tar(
            &archive,
            "gnu",
            &[
                TarEntry::file("good.txt", "good", 0o644),
                TarEntry::file("plink/x.txt", "evil", 0o644),
                TarEntry::file("plink/target.txt", "evil", 0o644),
                TarEntry::hardlink("h", "plink/target.txt"),
                TarEntry::hardlink("plink/h2", "good.txt"),
                TarEntry::symlink("plink/sl", "x.txt"),
                TarEntry::dir("plink/newdir", 0o755),
            ],
        );
        fs::create_dir_all(sb.out()).unwrap();
        make_symlink(&sb.outside().display().to_string(), &sb.out().join("plink"));
        let before = sb.snapshot();
        let r = extract(&archive, &sb.out(), flags);
        sb.assert_unchanged_outside(&before, &r);
        assert_eq!(children(&sb.outside()), ["target.txt"], "{flags:?}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "ORIGINAL");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            fs::metadata(&target).unwrap().nlink(),
            1,
            "a hard link to {} (outside OUT) was made through the symlink plink ({flags:?})\n{}",
            target.display(),
            r.dump()
        );
        if let Ok(m) = fs::symlink_metadata(sb.out().join("h")) {
            assert_ne!(
                (m.dev(), m.ino()),
                (
                    fs::metadata(&target).unwrap().dev(),
                    fs::metadata(&target).unwrap().ino()
                ),
                "OUT/h is the file outside OUT ({flags:?})\n{}",
                r.dump()
            );
        }
        assert_eq!(
            fs::read_to_string(sb.out().join("good.txt")).unwrap(),
            "good"
        );
        let plink = sb.out().join("plink");
        if flags == ["--overwrite"] && r.code() == 0 {
            assert!(!plink.is_symlink() && plink.is_dir(), "{}", r.dump());
            assert_eq!(fs::read_to_string(plink.join("x.txt")).unwrap(), "evil");
            continue;
        }
        r.assert_code(1);
        r.assert_stderr_names("plink/x.txt", &["symlink", "not a directory", "refus"]);
        assert!(
            plink.is_symlink(),
            "the existing symlink was removed ({flags:?})"
        );
    }
}

/// A symlink already in OUT at the path of a file entry: the default refuses (exists),
/// --overwrite replaces the link itself, --skip-existing keeps it; the link's target outside is
/// never written, and a dangling link is never used to create a file outside.
#[cfg(unix)] // symlinks
#[test]
fn preexisting_symlink_at_file_path_not_written_through() {
    for (flags, code) in [
        (&[][..], 1),
        (&["--overwrite"][..], 0),
        (&["--skip-existing"][..], 0),
    ] {
        let sb = Sandbox::new();
        let target = sb.outside().join("target.txt");
        fs::write(&target, "ORIGINAL").unwrap();
        let archive = sb.archive("f.tar");
        fs::write(
            &archive,
            crate_tar(&[("link_to_target", b"NEW"), ("dangling_link", b"NEW")]),
        )
        .unwrap();
        fs::create_dir_all(sb.out()).unwrap();
        make_symlink(
            &target.display().to_string(),
            &sb.out().join("link_to_target"),
        );
        let dangling = sb.outside().join("created.txt");
        make_symlink(
            &dangling.display().to_string(),
            &sb.out().join("dangling_link"),
        );
        let r = extract(&archive, &sb.out(), flags);
        r.assert_code(code);
        assert_eq!(
            fs::read_to_string(&target).unwrap(),
            "ORIGINAL",
            "{flags:?}"
        );
        assert!(
            !dangling.exists(),
            "created through a dangling link ({flags:?})"
        );
        match flags.first().copied() {
            None => {
                r.assert_stderr_names("link_to_target", &["exist"]);
                r.assert_stderr_names("dangling_link", &["exist"]);
            }
            Some("--overwrite") => {
                for n in ["link_to_target", "dangling_link"] {
                    let p = sb.out().join(n);
                    assert!(!p.is_symlink(), "{n} still a symlink after --overwrite");
                    assert_eq!(fs::read_to_string(&p).unwrap(), "NEW");
                }
            }
            _ => assert!(
                sb.out().join("link_to_target").is_symlink()
                    && sb.out().join("dangling_link").is_symlink()
            ),
        }
    }
}

/// Device nodes and FIFOs are skipped with a warning naming each; the run still succeeds.
#[cfg(unix)] // python3
#[test]
fn devices_and_fifos_skipped_with_warning() {
    let t = tempdir();
    let archive = t.join("dev.tar");
    python_tar(
        &archive,
        "gnu",
        &[
            TarEntry::file("before.txt", "b", 0o644),
            TarEntry::special('c', "dev/null"),
            TarEntry::special('b', "dev/sda"),
            TarEntry::special('p', "a-fifo"),
            TarEntry::file("after.txt", "a", 0o644),
        ],
    );
    for flags in [&[][..], &["--no-defer-close", "-j", "1"][..]] {
        let out = t.join(format!("out{}", flags.len()));
        let r = extract(&archive, &out, flags);
        r.assert_success();
        for (name, what) in [
            ("dev/null", "character device"),
            ("dev/sda", "block device"),
            ("a-fifo", "fifo"),
        ] {
            let lines = r.stderr_lines_with(&format!("'{name}'"));
            assert!(
                lines.iter().any(|l| {
                    let l = l.to_lowercase();
                    l.contains("warning") && l.contains("skip") && l.contains(what)
                }),
                "no warning naming {name} as a {what}\n{}",
                r.dump()
            );
            assert!(
                fs::symlink_metadata(out.join(name)).is_err(),
                "{name} was created"
            );
        }
        assert_eq!(
            r.stderr_lines_with("warning").len(),
            3,
            "one warning per skipped entry\n{}",
            r.dump()
        );
        assert_eq!(fs::read_to_string(out.join("before.txt")).unwrap(), "b");
        assert_eq!(fs::read_to_string(out.join("after.txt")).unwrap(), "a");
    }
}

/// A path given twice as a file: the second is an error for that path, the first is kept
/// whole (with --overwrite too), and the rest of the archive is extracted. `./b.txt` is the
/// same path as `b.txt`.
#[cfg(unix)] // python3
#[test]
fn same_path_twice_is_an_error() {
    let t = tempdir();
    let archive = t.join("dup.tar");
    let first = text(701, 300_000);
    let second = text(702, 1000);
    python_tar(
        &archive,
        "gnu",
        &[
            TarEntry::file("a.txt", first.clone(), 0o644),
            TarEntry::file("b.txt", "bee", 0o644),
            TarEntry::file("a.txt", second, 0o644),
            TarEntry::file("c.txt", "sea", 0o644),
            TarEntry::file("./b.txt", "second bee", 0o644),
        ],
    );
    for flags in [
        &[][..],
        &["--overwrite"][..],
        &["-j", "1", "--no-defer-close"][..],
    ] {
        let out = t.join(format!("out{}", flags.join("")));
        let r = extract(&archive, &out, flags);
        r.assert_code(1);
        r.assert_stderr_names("a.txt", &["more than once"]);
        r.assert_stderr_names("./b.txt", &["more than once"]);
        assert_eq!(fs::read(out.join("a.txt")).unwrap(), first, "{flags:?}");
        assert_eq!(fs::read_to_string(out.join("b.txt")).unwrap(), "bee");
        assert_eq!(fs::read_to_string(out.join("c.txt")).unwrap(), "sea");
        assert_eq!(all_paths(&out), ["a.txt", "b.txt", "c.txt"]);
    }
}

// -------------------------------------------------------------------------------------------
// Corrupt, truncated and unusable input
// -------------------------------------------------------------------------------------------

/// a.txt, b.txt, then a 3 MiB incompressible big.bin, then z.txt.
fn damaged_sample() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let a = text(801, 10_000);
    let b = text(802, 20_000);
    let big = random(803, 3 << 20);
    let tar = crate_tar(&[
        ("a.txt", &a),
        ("b.txt", &b),
        ("big.bin", &big),
        ("z.txt", b"zzz"),
    ]);
    (tar, a, b)
}

/// A broken stream: exit 1, one line naming the archive, saying "corrupt or truncated" and
/// naming the last good entry; the entries before the break intact, the one being written
/// absent (under any name), nothing after it.
#[track_caller]
fn assert_broken_stream(
    r: &Output,
    archive: &Path,
    out: &Path,
    last_good: &str,
    good: &[(&str, &[u8])],
) {
    r.assert_code(1);
    let name = archive.file_name().unwrap().to_string_lossy();
    let lines = r.stderr_lines_with("corrupt or truncated");
    assert!(
        lines.iter().any(|l| l.contains(&*name)),
        "no 'corrupt or truncated' line naming the archive {name}\n{}",
        r.dump()
    );
    assert!(
        lines.iter().any(|l| l.contains(&format!("'{last_good}'"))),
        "the 'corrupt or truncated' line does not name the last good entry {last_good}\n{}",
        r.dump()
    );
    let expected: Vec<&str> = good.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        all_paths(out),
        expected,
        "only the entries before the break may exist (no partial or temporary file)\n{}",
        r.dump()
    );
    for (n, data) in good {
        assert_eq!(&fs::read(out.join(n)).unwrap(), data, "{n} damaged");
    }
}

/// Every decoder, the archive cut in half (inside big.bin): big.bin and z.txt absent, a.txt
/// and b.txt intact; with big.bin buffered (default budget) or streamed (4 MiB budget).
#[test]
fn truncated_in_half_every_decoder() {
    let t = tempdir();
    let (tar, a, b) = damaged_sample();
    for comp in EACH_DECODER {
        let whole = comp.compress(&tar);
        let archive = t.join(format!("half.tar{}", comp.suffix()));
        fs::write(&archive, &whole[..whole.len() / 2]).unwrap();
        for flags in [
            &[][..],
            &["--memory-budget", "4"][..],
            &["--no-defer-close", "-j", "1"][..],
        ] {
            let out = t.join(format!("out-{comp:?}-{}", flags.join("")));
            let r = extract(&archive, &out, flags);
            assert_broken_stream(&r, &archive, &out, "b.txt", &[("a.txt", &a), ("b.txt", &b)]);
        }
    }
}

/// The same through a pipe on stdin: the archive is named as standard input.
#[test]
fn truncated_stream_on_stdin() {
    let t = tempdir();
    let (tar, a, b) = damaged_sample();
    let whole = Comp::Zstd.compress(&tar);
    let archive = t.join("half.tar.zst");
    fs::write(&archive, &whole[..whole.len() / 2]).unwrap();
    let out = t.join("out");
    let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &archive);
    r.assert_code(1);
    let lines = r.stderr_lines_with("corrupt or truncated");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("standard input") && l.contains("'b.txt'")),
        "{}",
        r.dump()
    );
    assert_eq!(all_paths(&out), ["a.txt", "b.txt"], "{}", r.dump());
    assert_eq!(fs::read(out.join("a.txt")).unwrap(), a);
    assert_eq!(fs::read(out.join("b.txt")).unwrap(), b);
}

/// Cut inside a header (not on a block boundary): a short header is a break, not an end.
#[test]
fn truncated_inside_a_header() {
    let t = tempdir();
    let (tar, a, b) = damaged_sample();
    let cut = header_offset(&tar, "big.bin") + 100;
    for comp in [Comp::None, Comp::Gzip] {
        let archive = t.join(format!("cut.tar{}", comp.suffix()));
        fs::write(&archive, comp.compress(&tar[..cut])).unwrap();
        let out = t.join(format!("out{comp:?}"));
        let r = extract(&archive, &out, &[]);
        assert_broken_stream(&r, &archive, &out, "b.txt", &[("a.txt", &a), ("b.txt", &b)]);
    }
}

/// A header in the middle with a bad checksum: the entries before it extracted, the rest not.
#[test]
fn bad_header_checksum_in_the_middle() {
    let t = tempdir();
    let c = text(804, 5000);
    let mut tar = crate_tar(&[
        ("a.txt", b"aaa"),
        ("b.txt", b"bbb"),
        ("c.txt", &c),
        ("d.txt", b"ddd"),
    ]);
    let h = header_offset(&tar, "c.txt");
    tar[h] = b'k'; // "k.txt": the stored checksum no longer matches
    for comp in [Comp::None, Comp::Xz] {
        let archive = t.join(format!("cksum.tar{}", comp.suffix()));
        fs::write(&archive, comp.compress(&tar)).unwrap();
        let out = t.join(format!("out{comp:?}"));
        let r = extract(&archive, &out, &[]);
        assert_broken_stream(
            &r,
            &archive,
            &out,
            "b.txt",
            &[("a.txt", b"aaa"), ("b.txt", b"bbb")],
        );
    }
}

/// One flipped bit in the compressed data of an incompressible file (stored as is, so only the
/// stream's checksum can tell): the damage must be reported (exit non-zero, the archive named),
/// as GNU tar (through gzip, zstd, xz, bzip2) reports it.
#[test]
fn flipped_bit_in_compressed_stream_detected() {
    let t = tempdir();
    let data = random(805, 300_000);
    let tar = crate_tar(&[("a.txt", b"hello"), ("data.bin", &data)]);
    for comp in [Comp::Gzip, Comp::Zstd, Comp::Xz, Comp::Bzip2] {
        let mut bytes = comp.compress(&tar);
        let i = bytes.len() / 2;
        bytes[i] ^= 0x01;
        let archive = t.join(format!("flip.tar{}", comp.suffix()));
        fs::write(&archive, &bytes).unwrap();
        let out = t.join(format!("out{comp:?}"));
        let r = extract(&archive, &out, &[]);
        let name = archive.file_name().unwrap().to_string_lossy();
        assert_eq!(
            r.code(),
            1,
            "{comp:?}: corrupt data extracted without an error (data.bin intact: {})\n{}",
            fs::read(out.join("data.bin")).ok().as_deref() == Some(&data[..]),
            r.dump()
        );
        assert!(
            r.stderr_lines_with(&name)
                .iter()
                .any(|l| l.to_lowercase().contains("corrupt")),
            "{comp:?}: no line naming {name} as corrupt\n{}",
            r.dump()
        );
    }
}

/// Garbage after the end-of-archive blocks (GNU tar ignores it): no crash, a sensible exit
/// (0, or 1 with a message), and every entry intact.
#[test]
fn garbage_after_the_end_blocks() {
    let t = tempdir();
    let (tar, a, b) = damaged_sample();
    let garbage = random(806, 20_000);
    for comp in [Comp::None, Comp::Gzip, Comp::Zstd] {
        let mut bytes = comp.compress(&tar);
        bytes.extend(&garbage);
        let archive = t.join(format!("trailing.tar{}", comp.suffix()));
        fs::write(&archive, &bytes).unwrap();
        let out = t.join(format!("out{comp:?}"));
        let r = extract(&archive, &out, &[]);
        let code = r.code();
        assert!(
            code == 0 || code == 1,
            "{comp:?}: exit {code}\n{}",
            r.dump()
        );
        if code == 1 {
            assert!(!r.stderr.trim().is_empty(), "exit 1 without a word");
        }
        assert_eq!(
            all_paths(&out),
            ["a.txt", "b.txt", "big.bin", "z.txt"],
            "{comp:?}\n{}",
            r.dump()
        );
        assert_eq!(fs::read(out.join("a.txt")).unwrap(), a);
        assert_eq!(fs::read(out.join("b.txt")).unwrap(), b);
        assert_eq!(fs::read(out.join("big.bin")).unwrap(), random(803, 3 << 20));
        assert_eq!(fs::read(out.join("z.txt")).unwrap(), b"zzz");
    }
}

/// With --overwrite, the file being written when the stream broke must not replace the old
/// one, nor leave a temporary file behind.
#[test]
fn truncated_with_overwrite_keeps_old_file() {
    let t = tempdir();
    let (tar, a, b) = damaged_sample();
    let whole = Comp::Gzip.compress(&tar);
    let archive = t.join("half.tar.gz");
    fs::write(&archive, &whole[..whole.len() / 2]).unwrap();
    for flags in [
        &["--overwrite"][..],
        &["--overwrite", "--memory-budget", "4"][..],
        &["--overwrite", "--no-defer-close"][..],
    ] {
        let out = t.join(format!("out{}", flags.join("")));
        fs::create_dir(&out).unwrap();
        fs::write(out.join("big.bin"), "OLD").unwrap();
        fs::write(out.join("a.txt"), "OLD").unwrap();
        let r = extract(&archive, &out, flags);
        r.assert_code(1);
        assert_eq!(
            fs::read_to_string(out.join("big.bin")).unwrap(),
            "OLD",
            "{flags:?}: big.bin replaced by a partial file\n{}",
            r.dump()
        );
        assert_eq!(fs::read(out.join("a.txt")).unwrap(), a);
        assert_eq!(fs::read(out.join("b.txt")).unwrap(), b);
        assert_eq!(
            all_paths(&out),
            ["a.txt", "b.txt", "big.bin"],
            "leftover temporary files\n{}",
            r.dump()
        );
    }
}

/// An archive that cannot be used: exit 2, a message naming it, nothing extracted.
#[track_caller]
fn assert_unusable(archive: &Path, t: &TestDir) {
    let out = t.join("out");
    let r = extract(archive, &out, &[]);
    r.assert_code(2);
    let name = archive.file_name().unwrap().to_string_lossy();
    assert!(
        r.stderr.contains(&*name),
        "stderr does not name the archive {name}\n{}",
        r.dump()
    );
    assert!(all_paths(&out).is_empty(), "{:?}", all_paths(&out));
}

#[test]
fn empty_archive_file() {
    let t = tempdir();
    let p = t.join("empty.tar");
    fs::write(&p, "").unwrap();
    assert_unusable(&p, &t);
}

#[test]
fn random_garbage_file() {
    let t = tempdir();
    let p = t.join("garbage.tar");
    let mut g = b"NOT-AN-ARCHIVE".to_vec();
    g.extend(random(807, 50_000));
    fs::write(&p, g).unwrap();
    assert_unusable(&p, &t);
}

#[test]
fn nonexistent_archive() {
    let t = tempdir();
    assert_unusable(&t.join("does-not-exist.tar.gz"), &t);
}

/// A tar holding only its end-of-archive blocks (what `tar -cf x.tar -T /dev/null` makes) is a
/// valid, empty archive: exit 0, OUT created, nothing in it. Plain, compressed, and on stdin.
#[test]
fn archive_of_only_end_blocks() {
    let t = tempdir();
    let zeros = vec![0u8; 10240];
    for comp in [Comp::None, Comp::Gzip, Comp::Zstd] {
        let archive = t.join(format!("none.tar{}", comp.suffix()));
        fs::write(&archive, comp.compress(&zeros)).unwrap();
        let out = t.join(format!("out{comp:?}"));
        let r = extract(&archive, &out, &[]);
        r.assert_success();
        assert!(out.is_dir(), "OUT was not created");
        assert!(all_paths(&out).is_empty());
        let out = t.join(format!("stdin{comp:?}"));
        let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &archive);
        r.assert_success();
        assert!(all_paths(&out).is_empty());
    }
}

// -------------------------------------------------------------------------------------------
// Memory stays bounded, whatever the size of an entry
// -------------------------------------------------------------------------------------------

/// Runs `fastwrite ARGS` with stdin piped from `cat INPUT`, under a small Python parent that
/// reports the peak RSS of its children (fastwrite, cat) in bytes. Measured there, not with
/// wait4 from this test process: Linux carries a process's peak RSS across exec, and a child
/// spawned from this (large, multi-threaded) test binary starts with the binary's own peak.
const PY_PEAK_RSS: &str = r#"
import resource, subprocess, sys
rss_file, archive, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(archive, "rb") as f:
    cat = subprocess.Popen(["cat"], stdin=f, stdout=subprocess.PIPE)
    code = subprocess.call(cmd, stdin=cat.stdout, timeout=170)
    cat.stdout.close()
    cat.wait()
with open(rss_file, "w") as r:
    r.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
if code < 0:
    sys.stderr.write("fastwrite died from signal %d\n" % -code)
    sys.exit(100)
sys.exit(code)
"#;

#[cfg(target_os = "linux")]
fn run_measuring_peak_rss(args: &[OsString], input: &Path) -> (Output, u64) {
    let t = tempdir();
    let rss_file = t.join("rss");
    let mut a = osv!["-c", PY_PEAK_RSS, &rss_file, input, BIN];
    a.extend(args.iter().cloned());
    require_tool("python3");
    let mut cmd = Command::new("python3");
    cmd.args(&a).env("TZ", TEST_TZ);
    let out = run_command(cmd);
    assert_no_panic(&out);
    let kib: u64 = fs::read_to_string(&rss_file)
        .unwrap_or_else(|e| panic!("no RSS reported ({e})\n{}", out.dump()))
        .trim()
        .parse()
        .unwrap();
    // ru_maxrss is in KiB on Linux.
    (out, kib * 1024)
}

/// A 3 GiB entry (zeros: the .tar.zst is tiny) streamed on stdin: the file is written whole,
/// and fastwrite's peak RSS stays far below the entry's size.
#[cfg(target_os = "linux")]
#[test]
fn memory_bounded_for_a_multi_gib_entry() {
    const SIZE: u64 = 3 << 30;
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    fs::File::create(src.join("huge"))
        .unwrap()
        .set_len(SIZE)
        .unwrap();
    fs::write(src.join("small.txt"), "after the huge one").unwrap();
    let archive = std::path::absolute(t.join("huge.tar.zst")).unwrap();
    require_tool("zstd");
    // No --sparse: the tar carries 3 GiB of zeros, which zstd squeezes to almost nothing.
    run_tool(
        "bash",
        &osv![
            "-c",
            "set -o pipefail; tar -C \"$1\" --format=gnu -cf - huge small.txt | zstd -1 -q -c > \"$2\"",
            "bash",
            &src,
            &archive
        ],
        None,
    );
    fs::remove_file(src.join("huge")).unwrap();
    assert!(fs::metadata(&archive).unwrap().len() < 10 << 20);

    let out = t.join("out");
    let (r, peak) = run_measuring_peak_rss(&osv!["extract", "-", "-o", &out], &archive);
    r.assert_success();
    eprintln!("fastwrite peak RSS: {} MiB", peak >> 20);
    let huge = out.join("huge");
    let len = fs::metadata(&huge).unwrap().len();
    let mut f = fs::File::open(&huge).unwrap();
    let mut chunk = vec![0xFFu8; 1 << 20];
    let mut samples_ok = true;
    for off in [0, SIZE / 2 + 12_345, SIZE - (1 << 20)] {
        f.seek(SeekFrom::Start(off)).unwrap();
        f.read_exact(&mut chunk).unwrap();
        samples_ok &= chunk.iter().all(|&b| b == 0);
    }
    drop(f);
    let small = fs::read_to_string(out.join("small.txt")).unwrap();
    fs::remove_file(&huge).unwrap();
    assert_eq!(len, SIZE, "the huge entry was not written whole");
    assert!(
        samples_ok,
        "the huge entry holds something other than zeros"
    );
    assert_eq!(small, "after the huge one");
    assert!(
        peak < 200 << 20,
        "peak RSS {} MiB for a 3 GiB entry with the default 64 MiB budget",
        peak >> 20
    );
}

// -------------------------------------------------------------------------------------------
// Overwrite policy
// -------------------------------------------------------------------------------------------

fn policy_setup(t: &TestDir) -> (PathBuf, PathBuf) {
    let archive = t.join("p.tar");
    let mut b = tar::Builder::new(Vec::new());
    for (name, data, mode) in [("a.txt", &b"new"[..], 0o640), ("b.txt", b"bee", 0o644)] {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_mtime(1_500_000_000);
        b.append_data(&mut h, name, data).unwrap();
    }
    fs::write(&archive, b.into_inner().unwrap()).unwrap();
    let out = t.join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("a.txt"), "old").unwrap();
    set_mode(&out.join("a.txt"), 0o600);
    set_mtime(&out.join("a.txt"), 1_000_000_000);
    (archive, out)
}

#[test]
fn existing_file_is_an_error_by_default() {
    let t = tempdir();
    let (archive, out) = policy_setup(&t);
    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    r.assert_stderr_names("a.txt", &["exist"]);
    assert_eq!(fs::read_to_string(out.join("a.txt")).unwrap(), "old");
    assert_eq!(mtime_of(&out.join("a.txt")), 1_000_000_000);
    #[cfg(unix)]
    assert_eq!(mode_of(&out.join("a.txt")), 0o600);
    assert_eq!(fs::read_to_string(out.join("b.txt")).unwrap(), "bee");
    assert!(r.stderr_lines_with("b.txt").is_empty(), "{}", r.dump());
}

#[test]
fn overwrite_replaces_existing_file() {
    let t = tempdir();
    let (archive, out) = policy_setup(&t);
    extract(&archive, &out, &["--overwrite"]).assert_success();
    assert_eq!(fs::read_to_string(out.join("a.txt")).unwrap(), "new");
    assert_eq!(mtime_of(&out.join("a.txt")), 1_500_000_000);
    #[cfg(unix)]
    assert_eq!(mode_of(&out.join("a.txt")), 0o640);
    assert_eq!(fs::read_to_string(out.join("b.txt")).unwrap(), "bee");
    assert_eq!(
        all_paths(&out),
        ["a.txt", "b.txt"],
        "leftover temporary files"
    );
}

#[test]
fn skip_existing_keeps_existing_file() {
    let t = tempdir();
    let (archive, out) = policy_setup(&t);
    extract(&archive, &out, &["--skip-existing"]).assert_success();
    assert_eq!(fs::read_to_string(out.join("a.txt")).unwrap(), "old");
    assert_eq!(mtime_of(&out.join("a.txt")), 1_000_000_000);
    assert_eq!(fs::read_to_string(out.join("b.txt")).unwrap(), "bee");
}

/// The same tarball twice into one folder: the default refuses every existing path (exit 1)
/// and changes nothing; --skip-existing changes nothing; --overwrite rewrites everything, hard
/// links and symlinks included, and the tree is still GNU tar's.
#[cfg(unix)]
#[test]
fn extract_twice_into_same_output() {
    let t = tempdir();
    let src = t.join("src");
    rich_tree(901, 120, &src, Names::Long);
    let plain = t.join("t.tar");
    gnu_tar_create(&src, &plain, &["--format=pax"]);
    let archive = t.join("t.tar.gz");
    fs::write(&archive, Comp::Gzip.compress(&fs::read(&plain).unwrap())).unwrap();
    let reference = t.join("ref");
    gnu_tar_extract(&plain, &reference);
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert_same_tree(&reference, &out, &Compare::strict(), "first extraction");

    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    assert!(r.stderr.to_lowercase().contains("exist"), "{}", r.dump());
    assert_same_tree(
        &reference,
        &out,
        &Compare::strict(),
        "after a refused second run",
    );

    extract(&archive, &out, &["--skip-existing"]).assert_success();
    assert_same_tree(
        &reference,
        &out,
        &Compare::strict(),
        "after --skip-existing",
    );

    extract(&archive, &out, &["--overwrite", "-j", "8"]).assert_success();
    assert_same_tree(&reference, &out, &Compare::strict(), "after --overwrite");
    extract(&archive, &out, &["--overwrite", "--no-defer-close"]).assert_success();
    assert_same_tree(
        &reference,
        &out,
        &Compare::strict(),
        "after --overwrite inline",
    );
}

// -------------------------------------------------------------------------------------------
// Harness self-checks for what the tar tests added to the comparator
// -------------------------------------------------------------------------------------------

#[cfg(unix)]
#[test]
fn harness_comparator_sees_nanoseconds_and_hard_links() {
    let t = tempdir();
    let (a, b) = (t.join("a"), t.join("b"));
    for root in [&a, &b] {
        TreeSpec::new()
            .file("x", "x", 0o644, DEFAULT_MTIME)
            .file("y", "y", 0o644, DEFAULT_MTIME)
            .file("z", "z", 0o644, DEFAULT_MTIME)
            .symlink("l", "x")
            .build(root);
    }
    fs::hard_link(a.join("x"), a.join("x2")).unwrap();
    fs::write(b.join("x2"), "x").unwrap(); // same content, not a link
    fs::hard_link(b.join("y"), b.join("y2")).unwrap();
    fs::write(a.join("y2"), "y").unwrap();
    let ft = |ns| filetime::FileTime::from_unix_time(DEFAULT_MTIME, ns);
    for p in ["x2", "y2"] {
        filetime::set_file_mtime(a.join(p), ft(0)).unwrap();
        filetime::set_file_mtime(b.join(p), ft(0)).unwrap();
    }
    filetime::set_file_mtime(a.join("z"), ft(5)).unwrap();
    filetime::set_symlink_file_times(a.join("l"), ft(0), ft(7)).unwrap();

    let d = diff_trees(&a, &b, &Compare::strict()).join("\n");
    for want in [
        "hard links differ: x",
        "hard links differ: x2",
        "hard links differ: y",
        "mtime differs: z",
        "mtime differs: l",
    ] {
        assert!(d.contains(want), "comparator missed {want:?}:\n{d}");
    }
    let loose = diff_trees(&a, &b, &Compare::exact()).join("\n");
    assert!(
        loose.is_empty(),
        "Compare::exact() must not see these:\n{loose}"
    );

    // The tree the round trips use has everything they claim to test.
    let tree = t.join("rich");
    rich_tree(7, 60, &tree, Names::Long);
    let scanned = scan_tree(&tree);
    assert!(!hardlink_groups(&scanned).is_empty(), "no hard links");
    assert!(
        scanned.values().all(|m| m.mtime_nsec != 0),
        "a whole-second mtime"
    );
    assert!(
        scanned.keys().any(|p| p.as_os_str().len() > 255),
        "no long path"
    );
    assert!(
        scanned
            .values()
            .any(|m| m.target.as_ref().is_some_and(|t| t.as_os_str().len() > 100)),
        "no long symlink target"
    );
}
