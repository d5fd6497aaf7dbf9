//! Integration tests for `fastwrite extract` on tar archives: plain, gzip (one or several
//! members), zstd, xz and bzip2, from a file or from standard input.
//!
//! The reference result is GNU tar's own extraction (`tar -xpf`, run as root: modes exact, the
//! umask ignored, mtimes of files, directories and symlinks restored) of the very same archive.
//! Archives come from GNU tar in every `--format`, from bsdtar, from Python's tarfile and from
//! the `tar` crate; hostile ones are written by Python (any name, any entry type), damaged ones
//! are patched byte by byte.
//!
//! The Windows build (run under Wine by `.ci/windows/wine-test`) cannot start those Unix
//! programs, so there the compressors are the same libraries in-process (`Comp::one_member`),
//! Python's tarfile is `RawTar` (held to Python on Unix by `harness_raw_tar_matches_python`),
//! and the reference tree is the source tree itself (`fixture`). Tests that need what Windows
//! lacks are `#[cfg(unix)]`, each saying why on the same line.

#[macro_use]
mod common;

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::*;

// -------------------------------------------------------------------------------------------
// Helpers local to the tar tests
// -------------------------------------------------------------------------------------------

/// Run `program args` with `input` on its standard input; returns its standard output.
#[cfg(unix)] // the compressors are Unix programs, which a Windows build under Wine cannot start
#[track_caller]
fn pipe_through(program: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    require_tool(program);
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    let out = run_command_feeding(cmd, input.to_vec());
    assert!(out.status.success(), "{}", out.dump());
    out.stdout_bytes
}

/// How a tar stream is wrapped. The `*Multi` kinds are two members (or frames, or streams)
/// made from the two halves of the tar, cut in the middle of a block, and concatenated, as
/// `cat a.gz b.gz` makes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Comp {
    None,
    Gzip,
    GzipMulti,
    /// pigz's output (one member of independently flushed blocks).
    #[cfg(unix)] // pigz is a Unix program, and nothing in-process makes its output
    Pigz,
    Zstd,
    ZstdMulti,
    Xz,
    XzMulti,
    /// Many independent blocks (`xz -T2 --block-size`), which fastwrite decodes on every core.
    XzBlocks,
    Bzip2,
    Bzip2Multi,
}

const EVERY_COMPRESSOR: &[Comp] = &[
    Comp::None,
    Comp::Gzip,
    Comp::GzipMulti,
    #[cfg(unix)] // see Comp::Pigz
    Comp::Pigz,
    Comp::Zstd,
    Comp::ZstdMulti,
    Comp::Xz,
    Comp::XzMulti,
    Comp::XzBlocks,
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
            #[cfg(unix)] // see Comp::Pigz
            Comp::Pigz => ".pigz.gz",
            Comp::Zstd => ".zst",
            Comp::ZstdMulti => ".multi.zst",
            Comp::Xz => ".xz",
            Comp::XzMulti => ".multi.xz",
            Comp::XzBlocks => ".blocks.xz",
            Comp::Bzip2 => ".bz2",
            Comp::Bzip2Multi => ".multi.bz2",
        }
    }

    fn compress(self, tar: &[u8]) -> Vec<u8> {
        let two = |single: Comp| {
            // An odd offset: the second member starts inside a header or inside file data.
            let cut = tar.len() / 2 + 77;
            let mut v = single.one_member(&tar[..cut]);
            v.extend(single.one_member(&tar[cut..]));
            v
        };
        match self {
            Comp::None => tar.to_vec(),
            Comp::GzipMulti => two(Comp::Gzip),
            Comp::ZstdMulti => two(Comp::Zstd),
            Comp::XzMulti => two(Comp::Xz),
            Comp::Bzip2Multi => two(Comp::Bzip2),
            _ => self.one_member(tar),
        }
    }

    /// One member (frame, stream) made by the real tool: what users feed fastwrite.
    #[cfg(unix)] // the real tools (see one_member below for Windows)
    fn one_member(self, data: &[u8]) -> Vec<u8> {
        match self {
            Comp::Gzip => pipe_through("gzip", &["-c", "-6", "-n"], data),
            Comp::Pigz => pipe_through("pigz", &["-c", "-p", "2", "-b", "64"], data),
            Comp::Zstd => pipe_through("zstd", &["-q", "-c", "-3"], data),
            Comp::Xz => pipe_through("xz", &["-c", "-T1", "-3"], data),
            Comp::XzBlocks => pipe_through("xz", &["-c", "-T2", "--block-size=16KiB", "-3"], data),
            Comp::Bzip2 => pipe_through("bzip2", &["-c", "-9"], data),
            _ => unreachable!("{self:?} is not a single-member compressor"),
        }
    }

    /// One member made in-process with the libraries fastwrite itself links, set up as the
    /// tools' defaults are (same levels, gzip without a name or time, zstd and xz with their
    /// content checksum): under Wine the Windows tests cannot start the Unix tools.
    #[cfg(not(unix))] // the Unix tools cannot be started (see above)
    fn one_member(self, data: &[u8]) -> Vec<u8> {
        fn done<W: Write>(mut w: W, data: &[u8]) -> W {
            w.write_all(data).unwrap();
            w
        }
        match self {
            Comp::Gzip => {
                let w = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::new(6));
                done(w, data).finish().unwrap()
            }
            Comp::Zstd => {
                let mut w = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
                w.include_checksum(true).unwrap();
                done(w, data).finish().unwrap()
            }
            Comp::Xz => {
                let w = liblzma::write::XzEncoder::new(Vec::new(), 3);
                done(w, data).finish().unwrap()
            }
            Comp::XzBlocks => {
                let stream = liblzma::stream::MtStreamBuilder::new()
                    .threads(2)
                    .block_size(16 << 10)
                    .preset(3)
                    .check(liblzma::stream::Check::Crc64)
                    .encoder()
                    .unwrap();
                let w = liblzma::write::XzEncoder::new_stream(Vec::new(), stream);
                done(w, data).finish().unwrap()
            }
            Comp::Bzip2 => {
                let w = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(9));
                done(w, data).finish().unwrap()
            }
            _ => unreachable!("{self:?} is not a single-member compressor"),
        }
    }
}

/// How long the names of a generated tree may be, for the formats that limit them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Names {
    /// Every path and link target under 100 bytes: v7 holds them.
    Short,
    /// Adds a 217-byte path that ustar splits into its prefix and name fields.
    #[cfg(unix)] // only for the ustar archives of GNU tar, bsdtar and python3
    Ustar,
    /// Adds paths, a symlink target and a hard-link target far over 100 bytes (GNU long-name
    /// records, pax `path`/`linkpath`).
    Long,
}

/// A seeded tree holding everything a tar can: files of many sizes and modes (0o401, 0o777,
/// 0o470, ...), read-only and empty directories, symlinks, hard links (several paths per
/// inode), and mtimes with a fraction of a second on every path. Built under `root`; returns
/// its spec (the modes `tar_of_tree` archives).
///
/// Off Unix the tree has no symlinks (Windows needs a privilege to make them, and Wine 8's
/// CreateSymbolicLinkW is a stub that makes nothing) and no hard links (the comparator cannot
/// see them there), and its modes are what Windows keeps of them: read-only, for a path that
/// no one may write (`kept_mode`).
fn rich_tree(seed: u64, files: usize, root: &Path, names: Names) -> TreeSpec {
    let opts = GenOptions::new(files);
    let base = generate_tree(seed, &if cfg!(unix) { opts } else { opts.no_symlinks() });
    let symlink = |spec: TreeSpec, link: &str, target: &str| {
        if cfg!(unix) {
            spec.symlink(link, target)
        } else {
            spec
        }
    };
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
        .dir("odd/empty-readonly", 0o555, m + 6);
    spec = symlink(spec, "odd/dangling", "no-such-file");
    spec = symlink(spec, "odd/to-dir", "../odd/empty-readonly");
    let long_file = match names {
        Names::Short => None,
        #[cfg(unix)] // see Names::Ustar
        Names::Ustar => {
            let d = format!("{}/{}", "u".repeat(70), "v".repeat(60));
            let f = format!("{d}/{}.txt", "w".repeat(80));
            spec = spec
                .dir(&"u".repeat(70), 0o755, m + 7)
                .dir(&d, 0o750, m + 8)
                .file(&f, text(seed, 3000), 0o644, m + 9);
            spec = symlink(
                spec,
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
                .file(&f, text(seed, 5000), 0o640, m + 10);
            spec = symlink(spec, "long-link", &f);
            Some(f)
        }
    };
    spec.build(root);
    #[cfg(unix)] // hard links: see above
    {
        if names == Names::Long {
            // A hard link whose own name and whose target are both long.
            let f = long_file.as_deref().unwrap();
            let link = format!("long-names/{}/{}", "a".repeat(120), "d".repeat(150));
            fs::hard_link(root.join(f), root.join(&link)).unwrap();
        }
        // Links only to files of the generated part: a ustar link target must fit in 100 bytes.
        add_hard_links(root, &base, seed, 8);
    }
    #[cfg(not(unix))] // no hard links: see above
    let _ = long_file;
    set_subsecond_mtimes(root, seed);
    #[cfg(not(unix))] // Windows keeps only read-only
    for n in spec.nodes.iter().filter(|n| kept_mode(n.mode) == 0o444) {
        let p = root.join(&n.path);
        let mut perms = fs::metadata(&p).unwrap().permissions();
        perms.set_readonly(true);
        fs::set_permissions(&p, perms).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }
    spec
}

/// A mode as this system keeps it, as `meta_of` reports it: whole on Unix; on Windows only
/// "read-only" (no write bit at all), reported as 0o444, or else 0o666.
fn kept_mode(mode: u32) -> u32 {
    if cfg!(unix) {
        mode
    } else if mode & 0o222 == 0 {
        0o444
    } else {
        0o666
    }
}

/// The mode `meta_of` reports for a directory given `mode`: `kept_mode`, except under Wine,
/// which drops the read-only attribute of directories (SetFileAttributesW reports success, and
/// the attribute is not there): a Wine quirk, Windows keeps it. Probed once.
fn kept_dir_mode(mode: u32) -> u32 {
    static KEPT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if cfg!(unix) {
        return mode;
    }
    let kept = *KEPT.get_or_init(|| {
        let t = tempdir();
        let d = t.join("d");
        fs::create_dir(&d).unwrap();
        let set = |readonly| {
            let mut perms = fs::metadata(&d).unwrap().permissions();
            perms.set_readonly(readonly);
            fs::set_permissions(&d, perms).unwrap();
        };
        set(true);
        let kept = fs::metadata(&d).unwrap().permissions().readonly();
        set(false);
        if !kept {
            eprintln!(
                "NOTE: read-only directories read as writable here (Wine drops the attribute)"
            );
        }
        kept
    });
    if kept { kept_mode(mode) } else { 0o666 }
}

/// A sub-second part as this system keeps it: Windows keeps mtimes in 100 ns steps.
fn kept_nanos(nanos: u32) -> u32 {
    if cfg!(unix) { nanos } else { nanos / 100 * 100 }
}

/// Assert the mtime of `p` (not following a symlink) to the nanosecond this system keeps.
#[track_caller]
fn assert_mtime(p: &Path, secs: i64, nanos: u32) {
    let m = meta_of(p);
    assert_eq!(
        (m.mtime, m.mtime_nsec),
        (secs, kept_nanos(nanos)),
        "mtime of {}",
        p.display()
    );
}

/// What tells hard links apart: the volume (device) and file index (inode) of a file, and how
/// many names it has. On Windows too, where `meta_of` has no file ids.
#[derive(Debug, PartialEq, Eq)]
struct FileId {
    volume: u64,
    index: u64,
    links: u64,
}

#[track_caller]
fn file_identity(p: &Path) -> FileId {
    #[cfg(unix)] // inode numbers
    {
        use std::os::unix::fs::MetadataExt;
        let m = fs::metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
        FileId {
            volume: m.dev(),
            index: m.ino(),
            links: m.nlink(),
        }
    }
    #[cfg(windows)] // no file ids in std: ask Windows
    {
        let info = win::info(p);
        FileId {
            volume: info.id.0,
            index: info.id.1,
            links: info.links,
        }
    }
}

/// Whether symlinks can be made here, so that the ones fastwrite makes can be checked.
#[cfg(unix)] // always; the Windows version probes
fn symlinks_work() -> bool {
    true
}

/// Windows needs a privilege for symlinks (Developer Mode or an elevated shell), and Wine 8's
/// CreateSymbolicLinkW is a stub that reports success and makes nothing: a Wine quirk, not
/// Windows'. Where symlinks cannot be made, fastwrite's are not checked, and the test says so.
#[cfg(windows)] // see symlinks_work above
fn symlinks_work() -> bool {
    let t = tempdir();
    fs::write(t.join("target"), "x").unwrap();
    let link = t.join("link");
    let made = std::os::windows::fs::symlink_file("target", &link).is_ok()
        && fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink());
    if !made {
        eprintln!(
            "NOT CHECKED: no symlinks can be made here (no privilege, or Wine's stub), so the \
             symlinks fastwrite should have made are not looked for"
        );
    }
    made
}

/// A plain tar of a `rich_tree` and the tree that extracting it must give.
struct Fixture {
    tar: Vec<u8>,
    /// Compare with `vs_reference()`.
    reference: PathBuf,
}

/// On Unix: a `rich_tree` archived by GNU tar in `format`, and GNU tar's own extraction of it
/// as the reference. Off Unix, where GNU tar cannot run: the tree archived in-process in pax
/// form whatever `format` says (`tar_of_tree`), and the source tree as the reference.
fn fixture(t: &TestDir, seed: u64, files: usize, names: Names, format: &str) -> Fixture {
    let src = t.join("src");
    let spec = rich_tree(seed, files, &src, names);
    #[cfg(unix)] // GNU tar
    {
        let _ = spec;
        let plain = t.join("fixture.tar");
        gnu_tar_create(&src, &plain, &[&format!("--format={format}")]);
        let reference = t.join("ref");
        gnu_tar_extract(&plain, &reference);
        Fixture {
            tar: fs::read(&plain).unwrap(),
            reference,
        }
    }
    #[cfg(not(unix))] // no GNU tar: see above
    {
        let _ = format;
        Fixture {
            tar: tar_of_tree(&src, &spec, ""),
            reference: src,
        }
    }
}

/// How an extraction is held to a `fixture`'s reference: `Compare::strict()` on Unix. Off Unix
/// the same, but modes as `kept_mode` says and mtimes in Windows' 100 ns steps on both sides,
/// and no hard links (`meta_of` has no file ids there; `rich_tree` makes none).
fn vs_reference() -> Compare {
    Compare {
        hardlinks: cfg!(unix),
        ..Compare::strict()
    }
}

/// A pax tar of a tree built from `spec` under `root`, in `spec` order, as RawTar writes it: the
/// modes of the spec, the mtimes on disk (with their fraction, in pax records). A `prefix`
/// such as `./` starts every name, after an entry for the prefix itself (`tar -cf x.tar .`).
fn tar_of_tree(root: &Path, spec: &TreeSpec, prefix: &str) -> Vec<u8> {
    let mtime = |path: &str| {
        let m = meta_of(&root.join(path));
        assert!(m.mtime >= 0, "{path}: a time before 1970");
        format!("{}.{:09}", m.mtime, m.mtime_nsec)
    };
    let mut tar = RawTar::new("pax");
    if !prefix.is_empty() {
        tar.append(&TarEntry::dir(prefix, 0o755).mtime(&mtime("")));
    }
    for n in &spec.nodes {
        let name = format!("{prefix}{}", n.path);
        let entry = match &n.kind {
            NodeKind::Dir => TarEntry::dir(&name, n.mode),
            NodeKind::File(data) => TarEntry::file(&name, data.clone(), n.mode),
            NodeKind::Symlink(target) => TarEntry::symlink(&name, target),
        };
        tar.append(&entry.mtime(&mtime(&n.path)));
    }
    tar.finish()
}

/// The top-level names of `dir`, sorted: what to give tar so that no `./` entry is archived.
#[cfg(unix)] // GNU tar and bsdtar, which the Windows build under Wine cannot start
fn top_level(dir: &Path) -> Vec<OsString> {
    children(dir).into_iter().map(OsString::from).collect()
}

/// `tar -C SRC --sort=name EXTRA... -cf ARCHIVE -- <top-level names>` with GNU tar.
#[cfg(unix)] // GNU tar, which the Windows build under Wine cannot start
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
#[cfg(unix)] // GNU tar, which the Windows build under Wine cannot start
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
#[cfg(unix)] // GNU tar makes the references it compares
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

/// Python's tarfile archiving the top-level names of `src` (recursively, hard links detected).
#[cfg(unix)] // python3, which the Windows build under Wine cannot start
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

#[cfg(unix)] // GNU tar makes the archives and the reference; unix modes, symlinks, hard links
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
        if *comp == Comp::XzBlocks {
            assert!(tar_bytes.len() > 64 << 10, "setup: several xz blocks");
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

#[cfg(unix)] // GNU tar (see gnu_tar_roundtrip)
#[test]
fn gnu_tar_format_gnu_every_compressor() {
    gnu_tar_roundtrip("gnu", 101, 150, Names::Long);
}

#[cfg(unix)] // GNU tar (see gnu_tar_roundtrip)
#[test]
fn gnu_tar_format_oldgnu_every_compressor() {
    gnu_tar_roundtrip("oldgnu", 102, 120, Names::Long);
}

/// pax keeps sub-second mtimes: they must come back to the nanosecond, on files, directories
/// and symlinks.
#[cfg(unix)] // GNU tar (see gnu_tar_roundtrip)
#[test]
fn gnu_tar_format_pax_every_compressor() {
    gnu_tar_roundtrip("pax", 103, 150, Names::Long);
}

#[cfg(unix)] // GNU tar (see gnu_tar_roundtrip)
#[test]
fn gnu_tar_format_ustar_every_compressor() {
    gnu_tar_roundtrip("ustar", 104, 120, Names::Ustar);
}

#[cfg(unix)] // GNU tar (see gnu_tar_roundtrip)
#[test]
fn gnu_tar_format_v7_every_compressor() {
    gnu_tar_roundtrip("v7", 105, 100, Names::Short);
}

/// Off Unix, where GNU tar cannot make the archives above: the in-process pax archive of a
/// `rich_tree` in every compressor (pigz aside: see `Comp::Pigz`), with the same flags.
#[cfg(not(unix))] // on Unix the gnu_tar_format_* tests above do this with GNU tar's archives
#[test]
fn in_process_pax_every_compressor() {
    let t = tempdir();
    let fx = fixture(&t, 106, 150, Names::Long, "pax");
    for (i, comp) in EVERY_COMPRESSOR.iter().enumerate() {
        let archive = t.join(format!("pax.tar{}", comp.suffix()));
        fs::write(&archive, comp.compress(&fx.tar)).unwrap();
        let flags = FLAG_ROTATION[i % FLAG_ROTATION.len()];
        let out = t.join(format!("out-{i}"));
        extract(&archive, &out, flags).assert_success();
        assert_same_tree(
            &fx.reference,
            &out,
            &vs_reference(),
            &format!("{comp:?} {flags:?}: fastwrite vs the source"),
        );
    }
}

// -------------------------------------------------------------------------------------------
// Other producers: bsdtar and Python's tarfile give the same tree as GNU tar does
// -------------------------------------------------------------------------------------------

#[cfg(unix)] // bsdtar or python3 make the archive, GNU tar the reference; symlinks, hard links
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

#[cfg(unix)] // bsdtar, which a Windows build under Wine cannot start
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

#[cfg(unix)] // bsdtar and GNU tar (see producer_roundtrip)
#[test]
fn bsdtar_default_format() {
    producer_roundtrip("bsdtar", 201, Names::Long, bsdtar(&[]), false);
}

#[cfg(unix)] // bsdtar and GNU tar (see producer_roundtrip)
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

#[cfg(unix)] // bsdtar and GNU tar (see producer_roundtrip)
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

#[cfg(unix)] // python3 and GNU tar (see producer_roundtrip)
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

#[cfg(unix)] // python3 and GNU tar (see producer_roundtrip)
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

#[cfg(unix)] // python3 and GNU tar (see producer_roundtrip)
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
/// it is not an error, and the tree is the one GNU tar extracts. Off Unix, RawTar writes that
/// layout and the source tree is the reference.
#[test]
fn dot_slash_names_and_root_entry() {
    let t = tempdir();
    let src = t.join("src");
    let spec = rich_tree(221, 60, &src, Names::Short);
    let archive = std::path::absolute(t.join("dot.tar.gz")).unwrap();
    #[cfg(unix)] // GNU tar's own layout, and its extraction as the reference
    let reference = {
        let _ = spec;
        run_tool(
            "tar",
            &osv!["-C", &src, "--sort=name", "-czf", &archive, "."],
            None,
        );
        let reference = t.join("ref");
        gnu_tar_extract(&archive, &reference);
        reference
    };
    #[cfg(not(unix))] // no GNU tar: RawTar writes that layout
    let reference = {
        let tar = tar_of_tree(&src, &spec, "./");
        fs::write(&archive, Comp::Gzip.compress(&tar)).unwrap();
        src
    };
    let mut tar = Vec::new();
    flate2::read::MultiGzDecoder::new(fs::File::open(&archive).unwrap())
        .read_to_end(&mut tar)
        .unwrap();
    let names = entry_names(&tar);
    assert!(
        names[0] == "./" && names.iter().all(|n| n.starts_with("./")),
        "setup: {names:?}"
    );
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_success();
    assert_same_tree(
        &reference,
        &out,
        &vs_reference(),
        "tar -cf x.tar . : fastwrite vs GNU tar",
    );
}

// -------------------------------------------------------------------------------------------
// Both close modes and any number of writers give the same tree
// -------------------------------------------------------------------------------------------

#[test]
fn close_modes_and_thread_counts_agree() {
    let t = tempdir();
    let fx = fixture(&t, 301, 400, Names::Long, "pax");
    let archive = t.join("t.tar.zst");
    fs::write(&archive, Comp::Zstd.compress(&fx.tar)).unwrap();

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
            &fx.reference,
            &out,
            &vs_reference(),
            &format!("{}: fastwrite vs GNU tar", r.cmdline),
        );
        if i > 0 {
            assert_same_tree(
                &first,
                &out,
                &vs_reference(),
                &format!("{}: vs the default run", r.cmdline),
            );
        }
    }
}

// -------------------------------------------------------------------------------------------
// Standard input, and the format told by content, never by name
// -------------------------------------------------------------------------------------------

#[test]
fn tar_streams_on_stdin() {
    let t = tempdir();
    let fx = fixture(&t, 401, 60, Names::Long, "gnu");
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
        fs::write(&archive, comp.compress(&fx.tar)).unwrap();
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
            &fx.reference,
            &out,
            &vs_reference(),
            &format!("{comp:?} piped on stdin {flags:?}"),
        );
        // Redirected from the file (`fastwrite extract - -o OUT < a.tar.zst`).
        let out = t.join(format!("redirect{i}"));
        let stdin = Stdio::from(fs::File::open(&archive).unwrap());
        run_fastwrite_stdin(&osv!["extract", "-", "-o", &out], stdin).assert_success();
        assert_same_tree(
            &fx.reference,
            &out,
            &vs_reference(),
            &format!("{comp:?} redirected on stdin"),
        );
    }
}

/// Garbage and an empty stdin are refused before anything is written (exit 2, saying why). (A
/// zip on stdin is read by its local headers: see zip_extract.rs.)
#[test]
fn unusable_stdin_is_refused() {
    let t = tempdir();
    let garbage = t.join("garbage");
    let mut g = b"GARBAGE!".to_vec();
    g.extend(random(402, 100_000));
    fs::write(&garbage, g).unwrap();
    let empty = t.join("empty");
    fs::write(&empty, "").unwrap();
    for (input, word) in [(&garbage, "tar"), (&empty, "empty")] {
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
#[test]
fn format_told_by_content_not_name() {
    let t = tempdir();
    let fx = fixture(&t, 501, 40, Names::Short, "ustar");
    for (i, (comp, name)) in [
        (Comp::Gzip, "x.zip"),
        (Comp::Gzip, "data.bin"),
        (Comp::Zstd, "a.tar.gz"),
        (Comp::Xz, "b.tar.bz2"),
        (Comp::Bzip2, "noextension"),
        (Comp::None, "plain.zip"),
        (Comp::None, "plain.tar.xz"),
        #[cfg(unix)] // see Comp::Pigz
        (Comp::Pigz, "p.7z"),
    ]
    .into_iter()
    .enumerate()
    {
        let archive = t.join(name);
        fs::write(&archive, comp.compress(&fx.tar)).unwrap();
        let out = t.join(format!("out{i}"));
        extract(&archive, &out, &[]).assert_success();
        assert_same_tree(
            &fx.reference,
            &out,
            &vs_reference(),
            &format!("{comp:?} named {name}"),
        );
    }
}

// -------------------------------------------------------------------------------------------
// GNU sparse files
// -------------------------------------------------------------------------------------------

/// `tar --sparse` stores holes as a map: in 'S' entries (`--format=gnu|oldgnu`), or in pax
/// records (`--format=posix`, GNU sparse versions 0.0 and 0.1) or at the start of the data
/// (1.0, under a `GNUSparseFile.NNN/` name with the real one in a record). Every kind comes
/// back under its name, with the same content and, on disk, with its holes: far fewer blocks
/// than its length.
#[cfg(unix)] // GNU tar --sparse makes the archive; holes are counted in st_blocks
#[test]
fn sparse_files_of_every_gnu_format_written_sparse() {
    use std::io::{Seek, SeekFrom};
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

    for (format, flags) in [
        ("gnu", &["--format=gnu"][..]),
        ("oldgnu", &["--format=oldgnu"][..]),
        ("pax-0.0", &["--format=posix", "--sparse-version=0.0"][..]),
        ("pax-0.1", &["--format=posix", "--sparse-version=0.1"][..]),
        ("pax-1.0", &["--format=posix", "--sparse-version=1.0"][..]),
    ] {
        let plain = t.join(format!("{format}.tar"));
        gnu_tar_create(&src, &plain, &[flags, &["--sparse"]].concat());
        let tar_bytes = fs::read(&plain).unwrap();
        if format.starts_with("pax") {
            assert!(
                tar_bytes.windows(11).any(|w| w == b"GNU.sparse."),
                "setup: no pax sparse records"
            );
        } else {
            assert_eq!(
                tar_bytes[156], b'S',
                "setup: the first entry is not a GNU sparse entry"
            );
        }
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

// -------------------------------------------------------------------------------------------
// Modes and mtimes
// -------------------------------------------------------------------------------------------

#[cfg(unix)] // setuid, setgid and sticky bits: Windows keeps only read-only; GNU tar reference
#[test]
fn setid_bits_cleared_unless_keep_setid() {
    let t = tempdir();
    let archive = t.join("suid.tar");
    make_tar(
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
#[cfg(unix)] // the umask, set by bash: Windows has neither
#[test]
fn umask_is_ignored() {
    let t = tempdir();
    let archive = t.join("m.tar");
    make_tar(
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
/// too) on files, directories and symlinks. GNU tar's result, to the nanosecond. Off Unix: no
/// symlinks (see `rich_tree`), and the values themselves, as Windows keeps them.
#[test]
fn pax_records_long_names_and_precise_times() {
    let t = tempdir();
    let p = "p".repeat(150);
    let pq = format!("{p}/{}", "q".repeat(150));
    let deep = format!("{pq}/{}", "r".repeat(150));
    let archive = t.join("pax.tar");
    make_tar(
        &archive,
        "pax",
        &[
            TarEntry::dir(&p, 0o755).mtime("1300000000.000000001"),
            TarEntry::dir(&pq, 0o700).mtime("1300000001.999999999"),
            TarEntry::dir("times", 0o755).mtime("1600000000.5"),
            TarEntry::file("times/frac", "f", 0o644).mtime("1700000000.25"),
            TarEntry::file("times/pre1970", "p", 0o644).mtime("-12345.75"),
            TarEntry::file("times/far", "far", 0o644).mtime("8589934597"),
            #[cfg(unix)] // symlinks: see rich_tree
            TarEntry::symlink("times/link", "frac").mtime("1500000000.125"),
            TarEntry::file(&deep, "deep", 0o600).mtime("1400000000.875"),
            #[cfg(unix)] // symlinks: see rich_tree
            TarEntry::symlink("deep-link", &deep),
            TarEntry::hardlink("deep-hard", &deep),
            TarEntry::file("utf8-é-ß-日本.txt", "u", 0o644),
        ],
    );
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    #[cfg(unix)] // GNU tar is the reference
    {
        let reference = t.join("ref");
        gnu_tar_extract(&archive, &reference);
        assert_same_tree(
            &reference,
            &out,
            &Compare::strict(),
            "pax: fastwrite vs GNU tar",
        );
    }
    assert_mtime(&out.join("times"), 1_600_000_000, 500_000_000);
    assert_mtime(&out.join("times/frac"), 1_700_000_000, 250_000_000);
    assert_mtime(&out.join("times/pre1970"), -12_346, 250_000_000);
    assert_mtime(&out.join("times/far"), 8_589_934_597, 0);
    assert_mtime(&out.join(&deep), 1_400_000_000, 875_000_000);
    assert_eq!(fs::read_to_string(out.join(&deep)).unwrap(), "deep");
    let deep_id = file_identity(&out.join(&deep));
    assert_eq!(deep_id.links, 2, "the deep file has not two names");
    assert_eq!(file_identity(&out.join("deep-hard")), deep_id);
    assert_eq!(
        fs::read_to_string(out.join("utf8-é-ß-日本.txt")).unwrap(),
        "u"
    );
    #[cfg(not(unix))] // RawTar's own digits (see the comment)
    {
        // Python stores these two through a float (the GNU tar reference covers them on Unix);
        // RawTar writes every digit.
        assert_mtime(&out.join(&p), 1_300_000_000, 1);
        assert_mtime(&out.join(&pq), 1_300_000_001, 999_999_999);
        assert_eq!(meta_of(&out.join(&pq)).perm, kept_dir_mode(0o700));
        let mut want = vec![
            p.clone(),
            pq.clone(),
            deep.clone(),
            "deep-hard".into(),
            "times".into(),
            "times/far".into(),
            "times/frac".into(),
            "times/pre1970".into(),
            "utf8-é-ß-日本.txt".into(),
        ];
        want.sort();
        let mut got = all_paths(&out);
        got.sort();
        assert_eq!(got, want);
    }
}

/// GNU headers store a time that does not fit in octal (before 1970, after 2242) in base-256:
/// such an archive extracts like GNU tar does, and never crashes or hangs the extractor.
#[test]
fn gnu_base256_times_before_1970_and_far_future() {
    let t = tempdir();
    let archive = t.join("b256.tar");
    make_tar(
        &archive,
        "gnu",
        &[
            TarEntry::file("before1970", "a", 0o644).mtime("-100"),
            TarEntry::file("far-future", "b", 0o644).mtime("8589934597"),
            TarEntry::file("normal", "c", 0o644),
        ],
    );
    let tar = fs::read(&archive).unwrap();
    for (name, first_byte) in [("before1970", 0xff), ("far-future", 0x80)] {
        let mtime_field = header_offset(&tar, name) + 136;
        assert_eq!(
            tar[mtime_field], first_byte,
            "setup: {name} has no base-256 mtime"
        );
    }
    let out = t.join("out");
    let r = run_fastwrite_timeout(
        &osv!["extract", &archive, "-o", &out],
        Duration::from_secs(30),
    );
    r.assert_success();
    #[cfg(unix)] // GNU tar is the reference
    {
        let reference = t.join("ref");
        gnu_tar_extract(&archive, &reference);
        assert_same_tree(&reference, &out, &Compare::strict(), "base-256 times");
    }
    assert_eq!(all_paths(&out), ["before1970", "far-future", "normal"]);
    assert_mtime(&out.join("before1970"), -100, 0);
    assert_mtime(&out.join("far-future"), 8_589_934_597, 0);
    assert_mtime(&out.join("normal"), DEFAULT_MTIME, 0);
    assert_eq!(fs::read_to_string(out.join("far-future")).unwrap(), "b");
}

/// The most negative base-256 time (i64::MIN seconds) on a directory and a symlink, whose
/// mtimes are set by path: the extraction finishes (a debug build once panicked negating it),
/// and the entries are there. The kernel clamps such a time to what the filesystem holds.
#[cfg(unix)] // symlinks made by the test's archive; Python writes it
#[test]
fn the_most_negative_base256_time_does_not_crash_the_extractor() {
    let t = tempdir();
    let archive = t.join("min.tar");
    let min = i64::MIN.to_string();
    make_tar(
        &archive,
        "gnu",
        &[
            TarEntry::dir("dir", 0o755).mtime(&min),
            TarEntry::file("dir/f", "x", 0o644),
            TarEntry::symlink("link", "dir/f").mtime(&min),
        ],
    );
    let tar = fs::read(&archive).unwrap();
    assert_eq!(
        tar[header_offset(&tar, "dir/") + 136],
        0xff,
        "setup: no base-256 mtime"
    );
    let out = t.join("out");
    let r = run_fastwrite_timeout(
        &osv!["extract", &archive, "-o", &out],
        Duration::from_secs(30),
    );
    r.assert_success();
    assert!(out.join("dir").is_dir());
    assert_eq!(fs::read_link(out.join("link")).unwrap(), Path::new("dir/f"));
}

/// A directory's mode and mtime are applied after its content is written, whether its entry
/// comes before its files (GNU tar) or after them: read-only directories keep their files.
#[test]
fn directory_metadata_applied_last() {
    let t = tempdir();
    let archive = t.join("dirs.tar");
    make_tar(
        &archive,
        "gnu",
        &[
            TarEntry::dir("first", 0o555).mtime("1000000001"),
            TarEntry::file("first/a", "a", 0o644).mtime("1000000002"),
            TarEntry::dir("first/sub", 0o500).mtime("1000000003"),
            TarEntry::file("first/sub/b", "b", 0o400).mtime("1000000004"),
            TarEntry::file("last/c", "c", 0o644).mtime("1000000005"),
            #[cfg(unix)] // symlinks: see rich_tree
            TarEntry::symlink("last/l", "c").mtime("1000000006"),
            TarEntry::dir("last", 0o550).mtime("1000000007"),
        ],
    );
    #[cfg(unix)] // GNU tar is the reference
    let reference = t.join("ref");
    #[cfg(unix)] // GNU tar is the reference
    gnu_tar_extract(&archive, &reference);
    for flags in [&[][..], &["--no-defer-close", "-j", "1"][..]] {
        let out = t.join(format!("out{}", flags.len()));
        extract(&archive, &out, flags).assert_success();
        #[cfg(unix)] // GNU tar is the reference
        assert_same_tree(&reference, &out, &Compare::strict(), "directory metadata");
        for (path, mode, mtime) in [
            ("first", 0o555, 1_000_000_001),
            ("first/a", 0o644, 1_000_000_002),
            ("first/sub", 0o500, 1_000_000_003),
            ("first/sub/b", 0o400, 1_000_000_004),
            ("last/c", 0o644, 1_000_000_005),
            ("last", 0o550, 1_000_000_007),
        ] {
            let m = meta_of(&out.join(path));
            let mode = match m.kind {
                Kind::Dir => kept_dir_mode(mode),
                _ => kept_mode(mode),
            };
            assert_eq!(
                (m.perm, m.mtime, m.mtime_nsec),
                (mode, mtime, 0),
                "{path} {flags:?}: mode and mtime"
            );
        }
        assert_eq!(fs::read_to_string(out.join("first/sub/b")).unwrap(), "b");
    }
}

// -------------------------------------------------------------------------------------------
// Hostile archives
// -------------------------------------------------------------------------------------------

fn zip_slip_tar_case(archive_name: &str, evil_entry_tail: &str, outside_probes: &[&str]) {
    let sb = Sandbox::new();
    let archive = sb.archive(archive_name);
    fs::copy(zip_slip_sample(archive_name), &archive).unwrap();
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

/// Nothing below a symlink seen earlier in the archive is extracted, even when the symlink
/// stays inside OUT: not a file, not a directory, not a link.
#[test]
fn entries_below_an_archived_symlink_refused() {
    let below = [
        "alias/x.txt",
        "alias/newdir",
        "alias/deeper/y.txt",
        "alias/sl",
        "alias/hl",
    ];
    let links = symlinks_work();
    for flags in [&["-j", "1"][..], &["-j", "8"][..], &["--overwrite"][..]] {
        let t = tempdir();
        let archive = t.join("alias.tar");
        make_tar(
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
        if links {
            assert_eq!(fs::read_link(out.join("alias")).unwrap(), Path::new("sub"));
        } else {
            // Never silently missing: the link that could not be made is reported.
            r.assert_stderr_names("'alias':", &["symlink"]);
        }
        assert_eq!(fs::read_to_string(out.join("good.txt")).unwrap(), "good");
    }
}

/// Hard links may only name a regular file earlier in the same archive: not `..`, not an
/// absolute path, not a file that is only on disk, not a later entry, not a directory or a
/// symlink.
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
    make_tar(&archive, "gnu", &entries);
    fs::create_dir_all(sb.out()).unwrap();
    fs::write(sb.out().join("preexisting.txt"), "mine").unwrap();
    // Wine shows the host's /etc/passwd as \etc\passwd; on Windows it is usually absent.
    let passwd = Path::new("/etc/passwd");
    let passwd_links = || passwd.is_file().then(|| file_identity(passwd).links);
    let passwd_links_before = passwd_links();
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
    let good = file_identity(&sb.out().join("good.txt"));
    assert_eq!(
        good.links, 3,
        "good.txt, h_ok and sub/h_ok2 are not one file"
    );
    assert_eq!(file_identity(&sb.out().join("h_ok")), good);
    assert_eq!(file_identity(&sb.out().join("sub/h_ok2")), good);
    assert_eq!(
        fs::read_to_string(sb.out().join("later.txt")).unwrap(),
        "later"
    );
    assert_eq!(
        fs::read_to_string(sb.out().join("preexisting.txt")).unwrap(),
        "mine"
    );
    sb.assert_unchanged_outside(&before, &r);
    assert_eq!(file_identity(&sb.outside().join("secret.txt")).links, 1);
    assert_eq!(passwd_links(), passwd_links_before);
}

/// Device nodes and FIFOs are skipped with a warning naming each; the run still succeeds.
#[test]
fn devices_and_fifos_skipped_with_warning() {
    let t = tempdir();
    let archive = t.join("dev.tar");
    make_tar(
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
                    l.contains("warning")
                        && l.contains("skip")
                        && l.contains(what)
                        && l.contains("--devices creates it")
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

/// A path given twice as a file: the last copy wins, as with GNU tar and bsdtar, with any
/// thread and close mode, whether the earlier copy was buffered or streamed (300 KB with a
/// small memory budget). `./b.txt` is the same path as `b.txt`.
#[test]
fn the_last_copy_of_a_path_wins() {
    let t = tempdir();
    let archive = t.join("dup.tar");
    let first = text(701, 300_000);
    let second = text(702, 1000);
    let third = text(703, 2000);
    make_tar(
        &archive,
        "gnu",
        &[
            TarEntry::file("a.txt", first, 0o644),
            TarEntry::file("b.txt", "bee", 0o644),
            TarEntry::file("a.txt", second, 0o600),
            TarEntry::file("c.txt", "sea", 0o644),
            TarEntry::file("./b.txt", "second bee", 0o644),
            TarEntry::file("a.txt", third.clone(), 0o640),
        ],
    );
    for flags in [
        &[][..],
        &["--overwrite"][..],
        &["-j", "1", "--no-defer-close"][..],
        &["--defer-close", "always", "--memory-budget", "4"][..],
    ] {
        let out = t.join(format!("out{}", flags.join("")));
        let r = extract(&archive, &out, &[flags, &["--stats"]].concat());
        r.assert_success();
        assert_eq!(fs::read(out.join("a.txt")).unwrap(), third, "{flags:?}");
        assert_eq!(fs::read_to_string(out.join("b.txt")).unwrap(), "second bee");
        assert_eq!(fs::read_to_string(out.join("c.txt")).unwrap(), "sea");
        assert_eq!(
            all_paths(&out),
            ["a.txt", "b.txt", "c.txt"],
            "no temporary left"
        );
        #[cfg(unix)] // modes
        assert_eq!(
            mode_of(&out.join("a.txt")),
            0o640,
            "the last copy's mode too"
        );
        assert_eq!(
            r.stat("files:"),
            3,
            "three files in the output\n{}",
            r.dump()
        );
    }
    #[cfg(unix)] // GNU tar is the reference
    {
        let reference = t.join("gnu");
        gnu_tar_extract(&archive, &reference);
        assert_same_tree(
            &reference,
            &t.join("out"),
            &vs_reference(),
            "last copy wins",
        );
    }
}

/// Links stored again, and files and links taking each other's path, as GNU tar's
/// incremental archives have them: the last entry of each path wins, as GNU tar extracts it.
#[cfg(unix)] // symlinks; GNU tar is the reference
#[test]
fn links_and_files_stored_again_end_as_the_last_entry_says() {
    let t = tempdir();
    let archive = t.join("again.tar");
    make_tar(
        &archive,
        "gnu",
        &[
            TarEntry::file("a", "aaa", 0o644),
            TarEntry::file("b", "bbb", 0o644),
            // A file, then a symlink at its path.
            TarEntry::file("x", "file first", 0o644),
            TarEntry::symlink("x", "a"),
            // A symlink, then a file at its path.
            TarEntry::symlink("y", "a"),
            TarEntry::file("y", "file last", 0o644),
            // A symlink stored twice, pointing elsewhere the second time.
            TarEntry::symlink("z", "a"),
            TarEntry::symlink("z", "b"),
            // A hard link stored again.
            TarEntry::hardlink("h", "a"),
            TarEntry::hardlink("h", "b"),
            // A file, a symlink, then a file again.
            TarEntry::file("w", "one", 0o644),
            TarEntry::symlink("w", "a"),
            TarEntry::file("w", "three", 0o644),
        ],
    );
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    let reference = t.join("gnu");
    gnu_tar_extract(&archive, &reference);
    assert_same_tree(&reference, &out, &vs_reference(), "stored again");
    assert_eq!(fs::read_link(out.join("x")).unwrap(), Path::new("a"));
    assert_eq!(fs::read_to_string(out.join("y")).unwrap(), "file last");
    assert_eq!(fs::read_link(out.join("z")).unwrap(), Path::new("b"));
    assert_eq!(fs::read_to_string(out.join("h")).unwrap(), "bbb");
    assert_eq!(fs::read_to_string(out.join("w")).unwrap(), "three");
}

/// `tar -r` appends a newer copy of a file to an archive; extracting it gives the newer copy,
/// as GNU tar does.
#[cfg(unix)] // GNU tar makes and extracts the archive
#[test]
fn gnu_tar_append_restores_the_newer_copy() {
    let t = tempdir();
    let src = t.join("src");
    TreeSpec::new()
        .file(
            "doc.txt",
            "version one, longer than the second\n",
            0o644,
            DEFAULT_MTIME,
        )
        .file("other.txt", "other\n", 0o644, DEFAULT_MTIME)
        .build(&src);
    let archive = std::path::absolute(t.join("appended.tar")).unwrap();
    gnu_tar_create(&src, &archive, &[]);
    fs::write(src.join("doc.txt"), "version two\n").unwrap();
    set_mtime(&src.join("doc.txt"), DEFAULT_MTIME + 60);
    run_tool("tar", &osv!["-rf", &archive, "./doc.txt"], Some(&src));
    for comp in EACH_DECODER {
        let packed = t.join(format!("appended.tar{}", comp.suffix()));
        fs::write(&packed, comp.compress(&fs::read(&archive).unwrap())).unwrap();
        let out = t.join(format!("out{}", comp.suffix()));
        extract(&packed, &out, &[]).assert_success();
        assert_eq!(
            fs::read_to_string(out.join("doc.txt")).unwrap(),
            "version two\n"
        );
        assert_eq!(mtime_of(&out.join("doc.txt")), DEFAULT_MTIME + 60);
    }
    let reference = t.join("gnu");
    gnu_tar_extract(&archive, &reference);
    assert_same_tree(&reference, &t.join("out"), &vs_reference(), "tar -r");
}

/// A later copy replaces only what this run wrote: a file that was in OUT before the run is
/// kept (an error by default, skipped with --skip-existing) unless --overwrite is given.
#[test]
fn a_later_copy_never_replaces_a_file_that_was_there_before() {
    let t = tempdir();
    let archive = t.join("dup.tar");
    make_tar(
        &archive,
        "gnu",
        &[
            TarEntry::file("mine.txt", "first", 0o644),
            TarEntry::file("new.txt", "new one", 0o644),
            TarEntry::file("mine.txt", "second", 0o644),
            TarEntry::file("new.txt", "new two", 0o644),
        ],
    );
    for (flags, code, mine) in [
        (&[][..], 1, "the user's"),
        (&["--skip-existing"][..], 0, "the user's"),
        (&["--overwrite"][..], 0, "second"),
    ] {
        let out = t.join(format!("out{}", flags.join("")));
        fs::create_dir(&out).unwrap();
        fs::write(out.join("mine.txt"), "the user's").unwrap();
        let r = extract(&archive, &out, flags);
        r.assert_code(code);
        assert_eq!(
            fs::read_to_string(out.join("mine.txt")).unwrap(),
            mine,
            "{flags:?}\n{}",
            r.dump()
        );
        assert_eq!(
            fs::read_to_string(out.join("new.txt")).unwrap(),
            "new two",
            "{flags:?}"
        );
        assert_eq!(all_paths(&out), ["mine.txt", "new.txt"], "{flags:?}");
        if code == 1 {
            r.assert_stderr_names("mine.txt", &["already exists"]);
        }
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

/// Every decoder, the archive cut in half (inside big.bin): big.bin and z.txt absent; with
/// big.bin buffered (default budget) or streamed (4 MiB budget). Every one keeps a.txt and
/// b.txt whole, as GNU tar does: a compressed one cut short never reaches its check, but what
/// came before the cut is what was compressed, and the files are kept with a warning naming
/// them (issue 35, item 7; issue 26, item 2 removed them).
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
            if *comp != Comp::None {
                assert_kept_unconfirmed(&r, &["a.txt", "b.txt"]);
            }
        }
    }
}

/// `names` were kept from an archive cut short, and one warning names them.
#[track_caller]
fn assert_kept_unconfirmed(r: &Output, names: &[&str]) {
    let warning = r.stderr_lines_with("the archive is cut short");
    assert_eq!(warning.len(), 1, "{}", r.dump());
    let listed = names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>();
    assert!(
        warning[0].contains(&format!("{} files ({})", names.len(), listed.join(", "))),
        "{}",
        r.dump()
    );
    assert!(warning[0].contains("--atomic"), "{}", r.dump());
}

/// The same through a pipe on stdin: the archive is named as standard input. With `--atomic`,
/// nothing stays of a run that failed.
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
    assert_kept_unconfirmed(&r, &["a.txt", "b.txt"]);
    let atomic = t.join("atomic");
    let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &atomic, "--atomic"], &archive);
    r.assert_code(1);
    assert!(!atomic.exists(), "{}", r.dump());
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

/// Issue 26, item 2: one byte flipped inside the first file's compressed data (a 6 MB random
/// file, stored as is by every compressor, then 20 small ones). gzip, zstd and xz decode on
/// past the damage, and only their checksum, after the last entry, tells: every file was
/// written by then. None may stay under its name with data that failed its check (a replaced
/// file keeps its old content), and each one missing or old is named. Buffered, streamed,
/// closed inline, and over old files with --overwrite.
#[test]
fn a_damaged_compressed_tar_leaves_nothing_unverified() {
    let t = tempdir();
    let big = random(807, 6 << 20);
    let smalls: Vec<(String, Vec<u8>)> = (0..20)
        .map(|i| (format!("s{i:02}.txt"), text(810 + i, 100)))
        .collect();
    let mut files: Vec<(&str, &[u8])> = vec![("a-random.bin", &big)];
    files.extend(smalls.iter().map(|(n, d)| (n.as_str(), d.as_slice())));
    let tar = crate_tar(&files);
    for comp in [Comp::Gzip, Comp::Zstd, Comp::Xz, Comp::Bzip2] {
        let mut bytes = comp.compress(&tar);
        let i = bytes.len() / 3;
        bytes[i] ^= 0x10;
        let archive = t.join(format!("flip.tar{}", comp.suffix()));
        fs::write(&archive, &bytes).unwrap();
        for flags in [
            &[][..],
            &["--memory-budget", "4"][..],
            &["--no-defer-close", "-j", "1"][..],
            &["--overwrite"][..],
        ] {
            let out = t.join(format!("out-{comp:?}-{}", flags.join("")));
            let old = ["a-random.bin", "s00.txt", "s19.txt"];
            if flags.contains(&"--overwrite") {
                fs::create_dir(&out).unwrap();
                for name in old {
                    fs::write(out.join(name), "OLD").unwrap();
                }
            }
            let r = extract(&archive, &out, &[flags, &["--json"]].concat());
            r.assert_code(1);
            for (name, data) in &files {
                let now = fs::read(out.join(name)).ok();
                if now.as_deref() == Some(*data) {
                    continue;
                }
                let kept_old = flags.contains(&"--overwrite") && old.contains(name);
                let expected = if kept_old { Some(&b"OLD"[..]) } else { None };
                assert_eq!(
                    now.as_deref(),
                    expected,
                    "{comp:?} {flags:?}: '{name}' is under its name with data that is not the archive's{}\n{}",
                    if kept_old {
                        " (nor its old content)"
                    } else {
                        ""
                    },
                    r.dump()
                );
                // Named, or never reached: after the break ("corrupt or truncated after entry
                // 'X'", as bzip2 says at its damaged block).
                let reached = match r.stdout.split_once("after entry '") {
                    Some((_, rest)) => {
                        let last = rest.split('\'').next().unwrap();
                        let at = |n: &str| files.iter().position(|(f, _)| *f == n);
                        at(name) <= at(last)
                    }
                    None => !r.stdout.contains("before its first entry"),
                };
                assert!(
                    !r.json_failures(name).is_empty() || !reached,
                    "{comp:?} {flags:?}: '{name}' was taken back, or kept old, and is not named\n{}",
                    r.dump()
                );
            }
            let mut names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
            names.sort_unstable();
            let left = all_paths(&out);
            assert!(
                left.iter().all(|p| names.contains(&p.as_str())),
                "{comp:?} {flags:?}: a temporary file is left: {left:?}\n{}",
                r.dump()
            );
        }
    }
}

/// Issue 26, item 2, with members: a check covers its own member (gzip, bzip2), stream (xz) or
/// frame (zstd). The archive in two, cut inside big.bin, one byte flipped in the second half:
/// a.txt and b.txt, whole in the first member, passed its check and stay; big.bin, half in
/// the second, is removed and named; z.txt is not kept either.
#[test]
fn a_damaged_second_member_keeps_what_the_first_verified() {
    let t = tempdir();
    let (tar, a, b) = damaged_sample();
    for comp in [
        Comp::GzipMulti,
        Comp::ZstdMulti,
        Comp::XzMulti,
        Comp::Bzip2Multi,
    ] {
        let mut bytes = comp.compress(&tar);
        let i = bytes.len() - bytes.len() / 4;
        bytes[i] ^= 0x10;
        let archive = t.join(format!("second.tar{}", comp.suffix()));
        fs::write(&archive, &bytes).unwrap();
        let out = t.join(format!("out-{comp:?}"));
        let r = extract(&archive, &out, &["--json"]);
        r.assert_code(1);
        assert_eq!(
            all_paths(&out),
            ["a.txt", "b.txt"],
            "{comp:?}\n{}",
            r.dump()
        );
        assert_eq!(fs::read(out.join("a.txt")).unwrap(), a);
        assert_eq!(fs::read(out.join("b.txt")).unwrap(), b);
        assert!(
            !r.json_failures("big.bin").is_empty(),
            "{comp:?}: big.bin is not named\n{}",
            r.dump()
        );
    }
}

/// Issue 26, item 7: `list` and `extract` exit alike on what they cannot read: 2 for an input
/// that is no archive (random bytes; a gzip of text named .tar.gz, where GNU tar says "does not
/// look like a tar archive"; a zip cut before its central directory; an empty file), 1 for an
/// archive that breaks after its start.
#[test]
fn list_and_extract_exit_alike() {
    let t = tempdir();
    let text = b"plain text, not a tar at all\n".repeat(40);
    let (tar, _, _) = damaged_sample();
    let zip = t.join("whole.zip");
    crate_zip(
        &zip,
        &[
            Z::File("a.txt", b"a".to_vec(), 0o644, STORED),
            Z::File("b.txt", text.clone(), 0o644, STORED),
        ],
    );
    let zip_bytes = fs::read(&zip).unwrap();
    let gz_tar = Comp::Gzip.compress(&tar);
    let cases: [(&str, Vec<u8>, i32, &str); 6] = [
        ("random.bin", random(830, 3000), 2, "not an archive"),
        ("text.tar.gz", Comp::Gzip.compress(&text), 2, "not a tar"),
        ("short.tar.gz", Comp::Gzip.compress(b"hi\n"), 2, "not a tar"),
        (
            "cut.zip",
            zip_bytes[..zip_bytes.len() / 2].to_vec(),
            2,
            "zip",
        ),
        ("empty.tar", Vec::new(), 2, "empty"),
        (
            "half.tar.gz",
            gz_tar[..gz_tar.len() / 2].to_vec(),
            1,
            "corrupt or truncated",
        ),
    ];
    for (name, bytes, code, says) in cases {
        let archive = t.join(name);
        fs::write(&archive, bytes).unwrap();
        let listed = run_fastwrite(&osv!["list", &archive]);
        let extracted = extract(&archive, &t.join(format!("out-{name}")), &[]);
        for (what, r) in [("list", &listed), ("extract", &extracted)] {
            assert_eq!(r.code(), code, "{what} {name}\n{}", r.dump());
            assert!(
                r.stderr.to_lowercase().contains(says),
                "{what} {name}: no word of {says:?}\n{}",
                r.dump()
            );
        }
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
/// one, nor leave a temporary file behind; the files before it, whole before the cut, replace
/// theirs (as GNU tar's do), named in the warning.
#[test]
fn truncated_with_overwrite_keeps_old_file() {
    let t = tempdir();
    let (tar, _, _) = damaged_sample();
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
        assert_eq!(fs::read(out.join("a.txt")).unwrap(), damaged_sample().1);
        assert_kept_unconfirmed(&r, &["a.txt", "b.txt"]);
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

/// A 3 GiB entry (zeros: the .tar.zst is tiny) streamed on stdin: the file is written whole,
/// and fastwrite's peak RSS stays far below the entry's size.
#[cfg(target_os = "linux")] // bash, GNU tar and zstd make the archive; see run_measuring_peak_rss
#[test]
fn memory_bounded_for_a_multi_gib_entry() {
    use std::io::{Seek, SeekFrom};
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
    let (r, peak) = run_measuring_peak_rss(&osv!["extract", "-", "-o", &out], Some(&archive));
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
    // a.txt read-only for everyone, so that Windows (which keeps only that) sees its mode too.
    for (name, data, mode) in [("a.txt", &b"new"[..], 0o440), ("b.txt", b"bee", 0o644)] {
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
    assert_eq!(meta_of(&out.join("a.txt")).perm, kept_mode(0o600));
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
    assert_eq!(meta_of(&out.join("a.txt")).perm, kept_mode(0o440));
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
    assert_eq!(meta_of(&out.join("a.txt")).perm, kept_mode(0o600));
    assert_eq!(fs::read_to_string(out.join("b.txt")).unwrap(), "bee");
}

/// The same tarball twice into one folder: the default refuses every existing path (exit 1)
/// and changes nothing; --skip-existing changes nothing; --overwrite rewrites everything, hard
/// links and symlinks included, and the tree is still GNU tar's.
#[test]
fn extract_twice_into_same_output() {
    let t = tempdir();
    let fx = fixture(&t, 901, 120, Names::Long, "pax");
    let (reference, strict) = (&fx.reference, &vs_reference());
    let archive = t.join("t.tar.gz");
    fs::write(&archive, Comp::Gzip.compress(&fx.tar)).unwrap();
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert_same_tree(reference, &out, strict, "first extraction");

    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    assert!(r.stderr.to_lowercase().contains("exist"), "{}", r.dump());
    assert_same_tree(reference, &out, strict, "after a refused second run");

    extract(&archive, &out, &["--skip-existing"]).assert_success();
    assert_same_tree(reference, &out, strict, "after --skip-existing");

    extract(&archive, &out, &["--overwrite", "-j", "8"]).assert_success();
    assert_same_tree(reference, &out, strict, "after --overwrite");
    extract(&archive, &out, &["--overwrite", "--no-defer-close"]).assert_success();
    assert_same_tree(reference, &out, strict, "after --overwrite inline");
}

// -------------------------------------------------------------------------------------------
// Harness self-checks for what the tar tests added to the comparator
// -------------------------------------------------------------------------------------------

#[cfg(unix)] // hard links seen through inode numbers, symlinks in the trees
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

/// What a tar holds, record by record (long-name and pax records as such: type, header magic,
/// the keys of a pax record, the name a long-name record carries) and entry by entry as a
/// reader sees them (type, name, link target, mode, owner, size, content, device numbers),
/// with each entry's mtime apart: the pax record's value, or the header's.
#[cfg(unix)] // used by harness_raw_tar_matches_python only
fn describe_tar(tar: &[u8]) -> (Vec<String>, Vec<f64>) {
    let mut lines = Vec::new();
    let mut a = tar::Archive::new(tar);
    for e in a.entries().unwrap().raw(true) {
        let mut e = e.unwrap();
        let h = e.header();
        let (kind, magic) = (h.entry_type().as_byte() as char, &h.as_bytes()[257..265]);
        let magic = String::from_utf8_lossy(magic).into_owned();
        let detail = match kind {
            'x' => {
                let mut keys: Vec<String> = e
                    .pax_extensions()
                    .unwrap()
                    .unwrap()
                    .map(|x| x.unwrap().key().unwrap().to_string())
                    .collect();
                keys.sort();
                keys.join(",")
            }
            'L' | 'K' => {
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                String::from_utf8_lossy(&data).into_owned()
            }
            _ => String::new(),
        };
        lines.push(format!("record {kind} {magic:?} {detail}"));
    }
    let mut mtimes = Vec::new();
    let mut a = tar::Archive::new(tar);
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let pax_mtime = e.pax_extensions().unwrap().and_then(|mut x| {
            x.find(|x| x.as_ref().unwrap().key() == Ok("mtime"))
                .map(|x| x.unwrap().value().unwrap().parse::<f64>().unwrap())
        });
        let h = e.header().clone();
        mtimes.push(pax_mtime.unwrap_or(h.mtime().unwrap() as i64 as f64));
        let dev = match h.entry_type() {
            tar::EntryType::Char | tar::EntryType::Block => {
                Some((h.device_major().unwrap(), h.device_minor().unwrap()))
            }
            _ => None,
        };
        let (path, link) = (
            String::from_utf8_lossy(&e.path_bytes()).into_owned(),
            e.link_name_bytes()
                .map(|l| String::from_utf8_lossy(&l).into_owned()),
        );
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        lines.push(format!(
            "entry {} {path:?} -> {link:?} mode {:o} owner {:?}/{:?} size {} data {:016x} dev {dev:?}",
            h.entry_type().as_byte() as char,
            h.mode().unwrap(),
            h.username().unwrap(),
            h.groupname().unwrap(),
            h.size().unwrap(),
            fnv1a(&data)
        ));
    }
    (lines, mtimes)
}

/// RawTar, which stands in for Python's tarfile off Unix, writes what Python writes, for every
/// kind of entry, name and mtime the tests give: the same records (long names, pax records)
/// and the same entries. mtimes agree to the microsecond (Python rounds pax fractions through
/// a float; RawTar keeps every digit).
#[cfg(unix)] // python3 is the yardstick
#[test]
fn harness_raw_tar_matches_python() {
    let t = tempdir();
    let long = format!("{}/{}", "l".repeat(120), "m".repeat(90));
    let entries = [
        TarEntry::dir("d", 0o755),
        TarEntry::dir("e/", 0o500).mtime("1000000001"),
        TarEntry::file("d/f.txt", text(1, 700), 0o640).mtime("1700000000.25"),
        TarEntry::file("./b.txt", "b", 0o4755),
        TarEntry::file("/tmp/abs.txt", "x", 0o644),
        TarEntry::file("C:/x.txt", "x", 0o644),
        TarEntry::file("..\\..\\win.txt", "x", 0o644),
        TarEntry::file("utf8-é-ß-日本.txt", "u", 0o644),
        TarEntry::file(&long, text(2, 3000), 0o600).mtime("-12345.75"),
        TarEntry::dir(&format!("{long}-dir"), 0o700),
        TarEntry::file("old", "o", 0o644).mtime("-100"),
        TarEntry::file("neg-frac", "o", 0o644).mtime("-1.5"),
        TarEntry::file("future", "f", 0o644).mtime("8589934597"),
        TarEntry::file("float", "f", 0o644).mtime("1300000001.999999999"),
        TarEntry::symlink("s", "../x"),
        TarEntry::symlink("long-link", &long),
        TarEntry::hardlink("h", "d/f.txt"),
        TarEntry::hardlink(&format!("{long}-h"), &long),
        TarEntry::special('c', "dev/null"),
        TarEntry::special('b', "dev/sda"),
        TarEntry::special('p', "fifo"),
    ];
    for format in ["gnu", "pax"] {
        let py = t.join(format!("py-{format}.tar"));
        python_tar(&py, format, &entries);
        let mut raw = RawTar::new(format);
        for e in &entries {
            raw.append(e);
        }
        let (want, want_mtimes) = describe_tar(&fs::read(&py).unwrap());
        let (got, got_mtimes) = describe_tar(&raw.finish());
        assert_eq!(got, want, "{format}: RawTar (left) vs Python (right)");
        for (i, (g, w)) in got_mtimes.iter().zip(&want_mtimes).enumerate() {
            assert!(
                (g - w).abs() < 1e-6,
                "{format}: mtime of entry {i} ({:?}): RawTar {g}, Python {w}",
                entries[i].name
            );
        }
    }
}

/// `tar_of_tree`, the Windows fixtures' archiver, archives a tree so that GNU tar gives it back
/// exactly: modes, mtimes to the nanosecond, long names, symlinks; with a `./` prefix too.
#[cfg(unix)] // GNU tar is the yardstick
#[test]
fn harness_tar_of_tree_gives_the_tree_back() {
    let t = tempdir();
    let src = t.join("src");
    let spec = generate_tree(31, &GenOptions::new(40).no_big_files())
        .dir(&"n".repeat(120), 0o750, DEFAULT_MTIME)
        .file(
            &format!("{}/{}", "n".repeat(120), "o".repeat(140)),
            "x",
            0o604,
            7,
        );
    spec.build(&src);
    set_subsecond_mtimes(&src, 31);
    for prefix in ["", "./"] {
        let archive = t.join(format!("tree{}.tar", prefix.len()));
        fs::write(&archive, tar_of_tree(&src, &spec, prefix)).unwrap();
        let back = t.join(format!("back{}", prefix.len()));
        gnu_tar_extract(&archive, &back);
        assert_same_tree(
            &src,
            &back,
            &Compare::strict(),
            &format!("GNU tar reading tar_of_tree (prefix {prefix:?}) vs the tree"),
        );
    }
}

// -------------------------------------------------------------------------------------------
// Bombs: --max-output
// -------------------------------------------------------------------------------------------

/// A tar.gz of zeros is a bomb too (1,000 to 1 here): with `--max-output` the first file that
/// would pass the cap fails, named, with the cap in its message, and the run stops there; the
/// files before it are whole. Without the flag everything is written.
#[test]
fn max_output_stops_a_tar_stream_at_the_cap() {
    let t = tempdir();
    let tar = t.join("zeros.tar");
    make_tar(
        &tar,
        "gnu",
        &[
            TarEntry::file("a.bin", vec![0u8; 1 << 20], 0o644),
            TarEntry::file("b.bin", vec![0u8; 1 << 20], 0o644),
            TarEntry::file("c.bin", vec![0u8; 1 << 20], 0o644),
        ],
    );
    for comp in EACH_DECODER {
        let archive = t.join(format!("zeros.tar{}", comp.suffix()));
        fs::write(&archive, comp.compress(&fs::read(&tar).unwrap())).unwrap();
        let out = t.join(format!("capped{}", comp.suffix()));
        let r = extract(&archive, &out, &["--max-output", "1.5M"]);
        r.assert_code(1);
        r.assert_stderr_names("b.bin", &["--max-output"]);
        assert!(r.stderr.contains("1.5 MiB"), "{}", r.dump());
        assert_eq!(all_paths(&out), ["a.bin"], "{comp:?}\n{}", r.dump());
        assert_eq!(fs::metadata(out.join("a.bin")).unwrap().len(), 1 << 20);

        let out = t.join(format!("whole{}", comp.suffix()));
        extract(&archive, &out, &[]).assert_success();
        assert_eq!(all_paths(&out), ["a.bin", "b.bin", "c.bin"], "{comp:?}");
    }

    // The run stops at the refused file without reading on, not even that file's data (a
    // bomb's gigabytes): cut the archive inside b.bin, and only b.bin's refusal is said, no
    // "truncated" from reading past it.
    let whole = fs::read(&tar).unwrap();
    let cut = t.join("cut.tar");
    fs::write(&cut, &whole[..(1 << 20) + 2048 + 4096]).unwrap();
    let out = t.join("cut-out");
    let r = extract(&cut, &out, &["--max-output", "1.5M"]);
    r.assert_code(1);
    r.assert_stderr_names("b.bin", &["--max-output"]);
    assert!(
        !r.stderr.contains("truncated"),
        "read past the cap\n{}",
        r.dump()
    );
    assert_eq!(all_paths(&out), ["a.bin"]);
}

// -------------------------------------------------------------------------------------------
// Odd headers real writers make: fastwrite restores what GNU tar restores
// -------------------------------------------------------------------------------------------

/// Recomputes a header's checksum after a test changed it (GNU tar's layout: six octal
/// digits, NUL, space).
#[cfg(unix)] // used by the GNU tar comparisons below
fn reseal(header: &mut [u8]) {
    header[148..156].copy_from_slice(b"        ");
    let sum: u32 = header[..512].iter().map(|&b| u32::from(b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// The offsets of every header of a plain tar with no extension headers (v7, ustar).
#[cfg(unix)] // used by the GNU tar comparisons below
fn header_offsets(tar: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut found = Vec::new();
    while at + 512 <= tar.len() && tar[at..at + 512].iter().any(|&b| b != 0) {
        found.push(at);
        let size_field = String::from_utf8_lossy(&tar[at + 124..at + 136]).into_owned();
        let size = u64::from_str_radix(size_field.trim_matches(['\0', ' ']), 8).unwrap_or(0);
        let data = if matches!(tar[at + 156], b'1' | b'2' | b'5') {
            0
        } else {
            size
        };
        at += 512 + data.next_multiple_of(512) as usize;
    }
    found
}

/// Names that are not UTF-8 (Latin-1, as older tarballs hold them), in files, a directory and
/// a symlink's target: restored byte for byte on Unix, as GNU tar restores them. A refused
/// name of that kind is shown with its odd bytes as `\xNN`.
#[cfg(unix)] // byte names; GNU tar is the reference
#[test]
fn names_that_are_not_utf8_are_restored_byte_for_byte() {
    use std::os::unix::ffi::OsStrExt;
    let t = tempdir();
    let src = t.join("src");
    let latin1 = |bytes: &[u8]| std::ffi::OsStr::from_bytes(bytes).to_os_string();
    fs::create_dir_all(src.join(latin1(b"r\xe9sum\xe9s"))).unwrap();
    fs::write(src.join(latin1(b"caf\xe9.txt")), "coffee").unwrap();
    fs::write(
        src.join(latin1(b"r\xe9sum\xe9s")).join(latin1(b"na\xefve")),
        "x",
    )
    .unwrap();
    std::os::unix::fs::symlink(latin1(b"caf\xe9.txt"), src.join("link")).unwrap();
    let archive = t.join("latin1.tar");
    // `.`: the names cannot pass through gnu_tar_create's lossy listing.
    run_tool(
        "tar",
        &osv!["-C", &src, "--format=gnu", "-cf", &archive, "."],
        None,
    );
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    let reference = t.join("gnu");
    gnu_tar_extract(&archive, &reference);
    assert_same_tree(&reference, &out, &vs_reference(), "Latin-1 names");
    assert_eq!(
        fs::read(out.join(latin1(b"caf\xe9.txt"))).unwrap(),
        b"coffee"
    );

    // A hostile name of that kind is refused like any other, and named readably.
    make_tar(
        &t.join("evil.tar"),
        "gnu",
        &[TarEntry::file("ok.txt", "ok", 0o644)],
    );
    let mut evil = fs::read(t.join("evil.tar")).unwrap();
    evil[..11].copy_from_slice(b"../\xff.txt\0\0\0");
    reseal(&mut evil[..512]);
    fs::write(t.join("evil.tar"), &evil).unwrap();
    let out = t.join("evil-out");
    let r = extract(&t.join("evil.tar"), &out, &[]);
    r.assert_code(1);
    r.assert_stderr_names("../\\xFF.txt", &["escapes"]);
    assert!(!t.join("\u{fffd}.txt").exists() && all_paths(&out).is_empty());
}

/// Old writers pad a header's checksum (and other numbers) with leading spaces: the archive is
/// still recognised as a tar and extracted, as GNU tar does.
#[cfg(unix)] // GNU tar makes the v7 archive and is the reference
#[test]
fn v7_headers_with_space_padded_checksums_are_read() {
    let t = tempdir();
    let src = t.join("src");
    TreeSpec::new()
        .file("a.c", "int a;\n", 0o644, DEFAULT_MTIME)
        .file("sub/b.c", "int b;\n", 0o600, DEFAULT_MTIME)
        .build(&src);
    let archive = t.join("v7.tar");
    gnu_tar_create(&src, &archive, &["--format=v7"]);
    let mut tar = fs::read(&archive).unwrap();
    let headers = header_offsets(&tar);
    assert!(headers.len() >= 3, "setup: {headers:?}");
    for at in headers {
        let header = &mut tar[at..at + 512];
        header[148..156].copy_from_slice(b"        ");
        let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
        header[148..156].copy_from_slice(format!("{:>6o}\0 ", sum).as_bytes());
        assert_eq!(header[148], b' ', "setup: the checksum starts with a space");
    }
    fs::write(&archive, &tar).unwrap();
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    let reference = t.join("gnu");
    gnu_tar_extract(&archive, &reference);
    assert_same_tree(
        &reference,
        &out,
        &vs_reference(),
        "v7 with padded checksums",
    );
}

/// GNU long names as some writers leave them: several long-name headers in a row (the last
/// one counts) and a long name with a NUL inside (the name ends there). Both are extracted as
/// GNU tar extracts them.
#[cfg(unix)] // GNU tar makes the archive and is the reference
#[test]
fn repeated_gnu_long_names_and_names_with_a_nul_inside() {
    let t = tempdir();
    let src = t.join("src");
    let long = format!("dir/{}", "n".repeat(150));
    TreeSpec::new()
        .file(&long, "long\n", 0o644, DEFAULT_MTIME)
        .build(&src);
    let archive = t.join("long.tar");
    gnu_tar_create(&src, &archive, &["--format=gnu"]);
    let tar = fs::read(&archive).unwrap();
    // The 'L' header of the long name and its data block.
    let l = (0..tar.len())
        .step_by(512)
        .find(|&at| tar[at + 156] == b'L' && tar[at + 512..].starts_with(long.as_bytes()))
        .expect("setup: a long-name header");
    let record = tar[l..l + 1024].to_vec();

    // A decoy long name first: the member's own long name is the last one and counts.
    let mut decoy = record.clone();
    decoy[512..512 + 9].copy_from_slice(b"decoy/xyz");
    let mut repeated = tar[..l].to_vec();
    repeated.extend(&decoy);
    repeated.extend(&tar[l..]);
    let repeated_tar = t.join("repeated.tar");
    fs::write(&repeated_tar, &repeated).unwrap();

    // A NUL inside the long name: the name is what comes before it.
    let mut nul = tar.clone();
    nul[l + 512 + 4 + 100] = 0;
    let nul_tar = t.join("nul.tar");
    fs::write(&nul_tar, &nul).unwrap();

    for (archive, expected) in [
        (&repeated_tar, long.clone()),
        (&nul_tar, long[..104].to_string()),
    ] {
        let out = t.join(format!(
            "out-{}",
            archive.file_name().unwrap().to_string_lossy()
        ));
        extract(archive, &out, &[]).assert_success();
        assert_eq!(fs::read_to_string(out.join(&expected)).unwrap(), "long\n");
        let reference = t.join(format!(
            "gnu-{}",
            archive.file_name().unwrap().to_string_lossy()
        ));
        gnu_tar_extract(archive, &reference);
        assert_same_tree(&reference, &out, &vs_reference(), &expected);
    }
}

/// GNU tar's incremental archives (`tar -g`) store directories as dumpdirs ('D', with a
/// listing of names as data), and `tar -V` adds a volume label: both extract as GNU tar
/// extracts them (the folders, empty ones too, with their modes and mtimes; the label makes
/// nothing), without a warning.
#[cfg(unix)] // GNU tar makes the archives and is the reference
#[test]
fn gnu_incremental_archives_and_volume_labels() {
    let t = tempdir();
    let src = t.join("src");
    TreeSpec::new()
        .dir("empty", 0o750, DEFAULT_MTIME + 1)
        .dir("full", 0o755, DEFAULT_MTIME + 2)
        .file("full/a.txt", "a\n", 0o644, DEFAULT_MTIME + 3)
        .build(&src);
    for (name, flags) in [
        ("incremental", osv!["-g", t.join("snapshot")]),
        ("labelled", osv!["-V", "backup of src"]),
    ] {
        let archive = std::path::absolute(t.join(format!("{name}.tar"))).unwrap();
        let mut args = osv!["-C", &src, "--format=gnu"];
        args.extend(flags);
        args.extend(osv!["-cf", &archive, "."]);
        run_tool("tar", &args, None);
        let out = t.join(format!("out-{name}"));
        let r = extract(&archive, &out, &[]);
        r.assert_success();
        assert!(!r.stderr.contains("warning"), "{}", r.dump());
        let reference = t.join(format!("gnu-{name}"));
        gnu_tar_extract(&archive, &reference);
        assert_same_tree(&reference, &out, &vs_reference(), name);
        assert!(out.join("empty").is_dir());
    }
}

/// Python that makes a tree deeper than `PATH_MAX` (through folder handles, as nothing else
/// can) or lists one: every entry's path length, type, mode, mtime (with `mtimes`) and content
/// or link target.
#[cfg(unix)]
const DEEP_TREE_PY: &str = r#"
import os, stat, sys
def make(root):
    fd = os.open(root, os.O_RDONLY)
    for level in range(26):
        name = f"level{level:02}-" + "x" * 192
        os.mkdir(name, 0o750 if level % 2 else 0o755, dir_fd=fd)
        f = os.open(f"file{level}", os.O_WRONLY | os.O_CREAT, 0o640, dir_fd=fd)
        os.write(f, f"at depth {level}\n".encode()); os.close(f)
        os.utime(f"file{level}", (0, 1_500_000_000 + level), dir_fd=fd)
        sub = os.open(name, os.O_RDONLY, dir_fd=fd)
        fd = sub
    os.symlink("../file24", "link", dir_fd=fd)
    os.utime("link", (0, 1_400_000_000), dir_fd=fd, follow_symlinks=False)
    f = os.open("deepest", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd); os.write(f, b"bottom\n"); os.close(f)
    os.utime("deepest", (0, 1_450_000_000), dir_fd=fd)
def stamp(root):
    # Folder mtimes last, deepest first: making their content changed them.
    fds = [os.open(root, os.O_RDONLY)]
    names = []
    while True:
        subs = [n for n in os.listdir(fds[-1]) if n.startswith("level")]
        if not subs: break
        names.append(subs[0]); fds.append(os.open(subs[0], os.O_RDONLY, dir_fd=fds[-1]))
    for depth in reversed(range(len(names))):
        os.utime(names[depth], (0, 1_300_000_000 + depth), dir_fd=fds[depth], follow_symlinks=False)
def walk(fd, prefix, mtimes, out):
    for n in sorted(os.listdir(fd)):
        st = os.stat(n, dir_fd=fd, follow_symlinks=False)
        p = prefix + n
        link = stat.S_ISLNK(st.st_mode)
        kind = "l" if link else "d" if stat.S_ISDIR(st.st_mode) else "f"
        if kind == "f":
            f = os.open(n, os.O_RDONLY, dir_fd=fd); what = os.read(f, 4096).decode(); os.close(f)
        else:
            what = os.readlink(n, dir_fd=fd) if link else ""
        mode = "" if link else oct(stat.S_IMODE(st.st_mode))
        when = st.st_mtime_ns if mtimes else ""
        out.append(f"{len(p)} {kind} {mode} {when} {what!r}")
        if kind == "d":
            sub = os.open(n, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            walk(sub, p + "/", mtimes, out); os.close(sub)
if sys.argv[1] == "make":
    make(sys.argv[2]); stamp(sys.argv[2])
else:
    out = []
    walk(os.open(sys.argv[2], os.O_RDONLY), "", sys.argv[1] == "list-mtimes", out)
    print("\n".join(out))
"#;

#[cfg(unix)]
fn deep_tree(action: &str, root: &Path) -> String {
    run_tool("python3", &osv!["-c", DEEP_TREE_PY, action, root], None).stdout
}

/// Paths longer than `PATH_MAX` (5,200 bytes here, 26 folders deep): GNU tar archives them and
/// cannot extract them ("File name too long"); bsdtar extracts them but cannot set their times
/// (exit 1). fastwrite works relative to folder handles and restores everything: the same tree
/// as bsdtar's, and the mtimes too, exactly as archived.
#[cfg(unix)] // python3, GNU tar and bsdtar, which a Windows build under Wine cannot start
#[test]
fn paths_longer_than_path_max_are_extracted() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    deep_tree("make", &src);
    let archive = t.join("deep.tar");
    gnu_tar_create(&src, &archive, &[]);

    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    assert_eq!(r.code(), 0, "{}", r.dump());
    let bsd = t.join("bsd");
    fs::create_dir(&bsd).unwrap();
    require_tool("bsdtar");
    let mut cmd = std::process::Command::new("bsdtar");
    cmd.arg("-xpf").arg(&archive).arg("-C").arg(&bsd);
    // bsdtar exits 1 here ("Can't restore time"): what it did write is compared.
    let _ = run_command(cmd);

    let ours = deep_tree("list-mtimes", &out);
    assert_eq!(
        ours,
        deep_tree("list-mtimes", &src),
        "fastwrite vs the source"
    );
    assert!(
        ours.lines()
            .any(|l| l.starts_with("52") && l.contains("bottom")),
        "{ours}"
    );
    assert_eq!(
        deep_tree("list", &out),
        deep_tree("list", &bsd),
        "fastwrite vs bsdtar (without mtimes, which bsdtar cannot set this deep)"
    );
}

/// Patterns, `--exclude` and `--strip-components` against GNU tar and bsdtar given the same
/// options on the same archive (made by GNU tar): the trees are compared in full (content,
/// modes, mtimes, symlinks, hard links), but for the mtimes of folders made only because
/// something inside them was chosen, which each tool gives its own time.
#[cfg(unix)] // GNU tar and bsdtar, which a Windows build under Wine cannot start
#[test]
fn patterns_exclude_and_strip_components_match_gnu_tar_and_bsdtar() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    project_tree(&src);
    let archive = t.join("project.tar");
    gnu_tar_create(&src, &archive, &[]);

    struct Case {
        label: &'static str,
        ours: &'static [&'static str],
        gnu: &'static [&'static str],
        bsd: &'static [&'static str],
        /// Every folder comes from the archive (none is made only for what is inside).
        whole: bool,
    }
    let cases = [
        Case {
            label: "strip 1",
            ours: &["--strip-components", "1"],
            gnu: &["--strip-components=1"],
            bsd: &["--strip-components", "1"],
            whole: true,
        },
        Case {
            label: "strip 2 (the hard link's target is stripped too)",
            ours: &["--strip-components", "2"],
            gnu: &["--strip-components=2"],
            bsd: &["--strip-components", "2"],
            whole: true,
        },
        Case {
            label: "a folder and a file by name",
            ours: &["project-1.2/docs", "project-1.2/README.md"],
            gnu: &["project-1.2/docs", "project-1.2/README.md"],
            bsd: &["project-1.2/docs", "project-1.2/README.md"],
            whole: false,
        },
        Case {
            label: "exclude by name at any depth, a folder with its content",
            ours: &["--exclude", "*.bak", "--exclude", "old"],
            gnu: &["--exclude=*.bak", "--exclude=old"],
            bsd: &["--exclude", "*.bak", "--exclude", "old"],
            whole: true,
        },
        Case {
            label: "a pattern, an exclude and strip 2 together",
            ours: &[
                "project-1.2/src",
                "--exclude",
                "*.bak",
                "--strip-components",
                "2",
            ],
            gnu: &["project-1.2/src", "--exclude=*.bak", "--strip-components=2"],
            // bsdtar takes its options before the patterns.
            bsd: &[
                "--exclude",
                "*.bak",
                "--strip-components",
                "2",
                "project-1.2/src",
            ],
            whole: true,
        },
    ];
    for (n, case) in cases.iter().enumerate() {
        let out = t.join(format!("ours-{n}"));
        let r = extract(&archive, &out, case.ours);
        assert_eq!(r.code(), 0, "{}: {}", case.label, r.dump());
        let compare = Compare {
            dir_mtimes: case.whole,
            hardlinks: true,
            ..Compare::strict()
        };
        for (tool, args) in [("tar", case.gnu), ("bsdtar", case.bsd)] {
            let reference = t.join(format!("{tool}-{n}"));
            fs::create_dir(&reference).unwrap();
            let mut a = osv!["-xpf", &archive, "-C", &reference];
            if tool == "tar" {
                a.push("--delay-directory-restore".into());
            }
            a.extend(args.iter().map(OsString::from));
            run_tool(tool, &a, None);
            assert_same_tree(
                &reference,
                &out,
                &compare,
                &format!("{}: fastwrite vs {tool}", case.label),
            );
        }
    }
}

/// A hard link whose target has nothing left after stripping is refused, by name, as GNU tar
/// does ("Cannot hard link to ''"); bsdtar drops it without a word. The rest is extracted.
#[cfg(unix)] // GNU tar makes the archive
#[test]
fn a_hard_link_whose_target_is_stripped_away_is_refused() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir_all(src.join("p/s")).unwrap();
    fs::write(src.join("p/a"), "data").unwrap();
    fs::hard_link(src.join("p/a"), src.join("p/s/b")).unwrap();
    fs::write(src.join("p/s/c"), "c").unwrap();
    let archive = t.join("links.tar");
    gnu_tar_create(&src, &archive, &[]);
    let out = t.join("out");
    let r = extract(&archive, &out, &["--strip-components", "2"]);
    assert_eq!(r.code(), 1, "{}", r.dump());
    assert!(
        r.stderr
            .contains("hard link target 'p/a' has no name left after --strip-components"),
        "{}",
        r.dump()
    );
    assert_eq!(fs::read_to_string(out.join("c")).unwrap(), "c");
    assert!(!out.join("b").exists());
}

/// A hard link, then a later copy of its target: GNU tar and bsdtar break the link (it keeps
/// the old content, the path gets the new), and a link after the later copy names the new
/// one. fastwrite made every link at the end of the run, to the last copy.
#[cfg(unix)] // GNU tar and bsdtar, the references, and python3, which writes the archive
#[test]
fn a_later_copy_of_a_hard_links_target_breaks_the_link() {
    let t = tempdir();
    let archive = t.join("relink.tar");
    make_tar(
        &archive,
        "gnu",
        &[
            TarEntry::file("d/a.txt", "old content", 0o644),
            TarEntry::hardlink("d/l.txt", "d/a.txt"),
            TarEntry::file("d/a.txt", "new content", 0o644),
            TarEntry::hardlink("m.txt", "d/a.txt"),
        ],
    );
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert_eq!(
        fs::read_to_string(out.join("d/l.txt")).unwrap(),
        "old content"
    );
    assert_eq!(
        fs::read_to_string(out.join("d/a.txt")).unwrap(),
        "new content"
    );
    assert_eq!(
        fs::read_to_string(out.join("m.txt")).unwrap(),
        "new content"
    );
    for reference in ["tar", "bsdtar"] {
        let want = t.join(reference);
        fs::create_dir(&want).unwrap();
        run_tool(reference, &osv!["-xpf", &archive, "-C", &want], None);
        let strict = Compare {
            hardlinks: true,
            ..Compare::content_only()
        };
        assert_same_tree(&want, &out, &strict, reference);
    }
}

/// A pattern that matches nothing is an error naming it, after the rest is written (GNU tar:
/// "Not found in archive"); a pattern that matches is not named.
#[cfg(unix)] // GNU tar makes the archive
#[test]
fn a_pattern_matching_nothing_is_named_after_the_rest_is_written() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    project_tree(&src);
    let archive = t.join("project.tar");
    gnu_tar_create(&src, &archive, &[]);
    let out = t.join("out");
    let r = extract(&archive, &out, &["README.md", "nothing/*.c"]);
    assert_eq!(r.code(), 1, "{}", r.dump());
    assert!(
        r.stderr
            .contains("'nothing/*.c': no entry of the archive matches this pattern"),
        "{}",
        r.dump()
    );
    assert!(!r.stderr.contains("'README.md'"), "{}", r.dump());
    assert_eq!(
        fs::read_to_string(out.join("project-1.2/README.md")).unwrap(),
        "readme"
    );
    assert!(!out.join("project-1.2/docs").exists());
}

/// Stripping never lets a name out of OUT: what is left is checked as any name is, and a `..`
/// among the components stripped off refuses the entry.
#[test]
fn stripping_lets_nothing_escape() {
    let t = tempdir();
    let archive = t.join("evil.tar");
    let mut raw = RawTar::new("gnu");
    for (name, data) in [
        ("a/../../escape", "x"),
        ("../b/escape2", "x"),
        ("ok/fine", "fine"),
    ] {
        raw.append(&TarEntry::new('f', name, "", 0o644, data.into()));
    }
    fs::write(&archive, raw.finish()).unwrap();
    let out = t.join("out");
    let r = extract(&archive, &out, &["--strip-components", "1"]);
    assert_eq!(r.code(), 1, "{}", r.dump());
    assert!(r.stderr.contains("'..'"), "{}", r.dump());
    assert_eq!(fs::read_to_string(out.join("fine")).unwrap(), "fine");
    assert!(!t.join("escape").exists() && !t.join("escape2").exists());
    assert!(!out.join("escape2").exists() && !out.join("b").exists());
}

/// Patterns as users type them (issue 26): `*` crosses `/` (`proj/*.md` takes
/// `proj/docs/deep/d.md`, as GNU tar, bsdtar and unzip take it), and a name archived as
/// `./proj/x` matches `./proj/x` (as `list` shows it) and `proj/x` alike, as patterns and as
/// `--exclude`. Compared with bsdtar, which takes both spellings in both archives.
#[cfg(unix)] // GNU tar makes the archives, bsdtar and unzip are the references
#[test]
fn patterns_as_users_type_them() {
    let t = tempdir();
    let src = t.join("src");
    for f in [
        "proj/a.md",
        "proj/b.md",
        "proj/docs/c.md",
        "proj/docs/deep/d.md",
        "proj/e.md",
        "proj/x.txt",
    ] {
        let p = src.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, f).unwrap();
    }
    let dotted = t.join("dot.tar");
    run_tool("tar", &osv!["-cf", &dotted, "./proj"], Some(&src));
    let plain = t.join("plain.tar");
    run_tool("tar", &osv!["-cf", &plain, "proj"], Some(&src));
    let count = |dir: &Path| {
        fs::read_dir(dir).map_or(0, |_| {
            all_paths(dir)
                .iter()
                .filter(|p| p.ends_with(".md") || p.ends_with(".txt"))
                .count()
        })
    };
    for (a, archive) in [&dotted, &plain].into_iter().enumerate() {
        for (p, pattern) in ["proj/*.md", "./proj/*.md"].into_iter().enumerate() {
            let out = t.join(format!("fastwrite-{a}-{p}"));
            extract(archive, &out, &[pattern]).assert_success();
            let want = t.join(format!("bsdtar-{a}-{p}"));
            fs::create_dir(&want).unwrap();
            run_tool("bsdtar", &osv!["-xf", archive, "-C", &want, pattern], None);
            assert_eq!(count(&out), 5, "{} {pattern}", archive.display());
            assert_same_tree(&want, &out, &Compare::content_only(), pattern);
        }
        let out = t.join(format!("excluded-{a}"));
        extract(archive, &out, &["--exclude", "./proj/x.txt"]).assert_success();
        assert_eq!(
            count(&out),
            5,
            "--exclude ./proj/x.txt: {}",
            archive.display()
        );
    }
    // A zip made by Info-ZIP, against unzip.
    let zip = t.join("p.zip");
    infozip_dir(&src, &zip, &[]);
    let out = t.join("zip");
    extract(&zip, &out, &["proj/*.md"]).assert_success();
    let want = t.join("unzip");
    run_tool("unzip", &osv!["-q", &zip, "proj/*.md", "-d", &want], None);
    assert_eq!(count(&out), 5);
    assert_same_tree(&want, &out, &Compare::content_only(), "unzip proj/*.md");
}

/// Issue 26, item 10: a hard link whose target is in the archive but not selected says so
/// (it said the target "is not a file earlier in this archive"), in extract and list; with the
/// target selected too, the link is made. A target truly absent keeps the old message.
#[test]
fn a_hard_link_to_a_file_not_selected_says_so() {
    let t = tempdir();
    let mut builder = tar::Builder::new(Vec::new());
    let mut add = |path: &str, kind: tar::EntryType, link: Option<&str>, data: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_path(path).unwrap();
        header.set_entry_type(kind);
        if let Some(link) = link {
            header.set_link_name(link).unwrap();
        }
        header.set_mode(0o644);
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder.append(&header, data).unwrap();
    };
    add("d/a", tar::EntryType::Regular, None, b"content");
    add("b", tar::EntryType::Link, Some("d/a"), b"");
    add("c", tar::EntryType::Link, Some("d/nothing"), b"");
    let archive = t.join("links.tar");
    fs::write(&archive, builder.into_inner().unwrap()).unwrap();
    let not_selected = "hard link target 'd/a' is in the archive, but not selected";
    let r = extract(&archive, &t.join("one"), &["b"]);
    r.assert_code(1);
    assert!(r.stderr.contains(not_selected), "{}", r.dump());
    let listed = run_fastwrite(&osv!["list", &archive, "b"]);
    assert!(listed.stdout.contains(not_selected), "{}", listed.dump());
    let r = extract(&archive, &t.join("both"), &["b", "d"]);
    r.assert_code(0);
    assert_eq!(fs::read(t.join("both/b")).unwrap(), b"content");
    let r = extract(&archive, &t.join("none"), &["c"]);
    r.assert_code(1);
    assert!(
        r.stderr
            .contains("hard link target 'd/nothing' is not a file earlier in this archive"),
        "{}",
        r.dump()
    );
}

/// Issue 26, item 14: `extract -t` reads every file with every check extraction makes and
/// writes nothing, as `unzip -t` and `gzip -t` do: exit 0 for a whole archive (nothing made in
/// the current folder), 1 naming the damage for one flipped byte, in a tar of each compressor
/// (its checksum) and in a zip (the entry's CRC-32).
#[test]
fn test_mode_checks_everything_and_writes_nothing() {
    let t = tempdir();
    let (tar, _, _) = damaged_sample();
    let here = t.join("here");
    fs::create_dir(&here).unwrap();
    let test = |archive: &Path| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(osv!["extract", archive, "-t"]).current_dir(&here);
        run_command(cmd)
    };
    for comp in [Comp::None, Comp::Gzip, Comp::Zstd, Comp::Xz, Comp::Bzip2] {
        let whole = comp.compress(&tar);
        let archive = t.join(format!("whole.tar{}", comp.suffix()));
        fs::write(&archive, &whole).unwrap();
        let r = test(&archive);
        r.assert_code(0);
        assert!(
            r.stderr.contains("4 files tested"),
            "{comp:?}\n{}",
            r.dump()
        );
        if comp == Comp::None {
            continue;
        }
        let mut bad = whole.clone();
        let i = bad.len() / 2;
        bad[i] ^= 0x10;
        let archive = t.join(format!("bad.tar{}", comp.suffix()));
        fs::write(&archive, &bad).unwrap();
        let r = test(&archive);
        r.assert_code(1);
        assert!(r.stderr.contains("corrupt"), "{comp:?}\n{}", r.dump());
    }
    let zip = t.join("a.zip");
    crate_zip(
        &zip,
        &[
            Z::File("a.txt", b"some text to check".to_vec(), 0o644, STORED),
            Z::File("b.txt", b"more".to_vec(), 0o644, STORED),
        ],
    );
    test(&zip).assert_code(0);
    let mut bytes = fs::read(&zip).unwrap();
    let at = bytes.windows(4).position(|w| w == b"text").unwrap();
    bytes[at] ^= 1;
    fs::write(&zip, bytes).unwrap();
    let r = test(&zip);
    r.assert_code(1);
    r.assert_stderr_names("'a.txt'", &["checksum"]);
    assert_eq!(all_paths(&here), Vec::<String>::new(), "-t wrote something");
}

/// Issue 26, item 13: `extract -O` writes each selected file's content to stdout in the
/// archive's order, byte for byte what `tar -xO` and `unzip -p` write, and nothing to disk.
#[cfg(unix)] // GNU tar and Info-ZIP unzip
#[test]
fn to_stdout_writes_what_tar_and_unzip_write() {
    let t = tempdir();
    let files: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| {
            (
                format!("d{}/f{i:02}.txt", i % 2),
                text(850 + i, 100 + 300 * i as usize),
            )
        })
        .collect();
    let src = t.join("src");
    for (name, data) in &files {
        fs::create_dir_all(src.join(name).parent().unwrap()).unwrap();
        fs::write(src.join(name), data).unwrap();
    }
    let archive = t.join("a.tar.gz");
    run_tool(
        "tar",
        &osv!["-C", &src, "--sort=name", "-czf", &archive, "d0", "d1"],
        None,
    )
    .assert_success();
    let ours = run_fastwrite(&osv!["extract", &archive, "-O", "d1"]);
    ours.assert_code(0);
    let gnu = run_tool("tar", &osv!["-xzOf", &archive, "d1"], None);
    assert_eq!(ours.stdout, gnu.stdout);
    assert!(ours.stdout.contains(&*String::from_utf8_lossy(&files[1].1)));
    let zip = t.join("a.zip");
    infozip_dir(&src, &zip, &[]);
    let ours = run_fastwrite(&osv!["extract", &zip, "--to-stdout"]);
    ours.assert_code(0);
    let unzip = run_tool("unzip", &osv!["-p", &zip], None);
    assert_eq!(ours.stdout, unzip.stdout);
    assert_eq!(
        ours.stdout.len(),
        files.iter().map(|(_, d)| d.len()).sum::<usize>()
    );
}

/// Issue 26, item 17: `-T FILE` (`--files-from`) reads patterns from FILE, one a line (CRLF
/// lines too, empty ones left out), as `tar -T` does: the same files as GNU tar takes, in
/// extract and list; a FILE that cannot be read is exit 2, named.
#[cfg(unix)] // GNU tar
#[test]
fn patterns_from_a_file_take_what_tar_takes() {
    let t = tempdir();
    let src = t.join("src");
    for name in ["a/one.txt", "a/two.txt", "b/three.txt", "c.txt"] {
        fs::create_dir_all(src.join(name).parent().unwrap()).unwrap();
        fs::write(src.join(name), name).unwrap();
    }
    let archive = t.join("a.tar");
    run_tool(
        "tar",
        &osv!["-C", &src, "-cf", &archive, "a", "b", "c.txt"],
        None,
    )
    .assert_success();
    let list = t.join("wanted");
    fs::write(&list, "a/two.txt\r\n\nb\n").unwrap();
    let ours = t.join("ours");
    run_fastwrite(&osv!["extract", &archive, "-o", &ours, "-T", &list]).assert_code(0);
    let gnu = t.join("gnu");
    fs::create_dir(&gnu).unwrap();
    fs::write(list.with_extension("unix"), "a/two.txt\nb\n").unwrap();
    run_tool(
        "tar",
        &osv![
            "-C",
            &gnu,
            "-xf",
            &archive,
            "-T",
            list.with_extension("unix")
        ],
        None,
    )
    .assert_success();
    assert_eq!(all_paths(&ours), all_paths(&gnu));
    assert_eq!(all_paths(&ours), ["a", "a/two.txt", "b", "b/three.txt"]);
    let listed = run_fastwrite(&osv!["list", &archive, "--files-from", &list]);
    assert_eq!(
        listed.stdout.lines().count(),
        3,
        "a/two.txt, b/ and b/three.txt\n{}",
        listed.dump()
    );
    let r = run_fastwrite(&osv![
        "extract",
        &archive,
        "-o",
        t.join("x"),
        "-T",
        t.join("missing")
    ]);
    r.assert_code(2);
    assert!(r.stderr.contains("--files-from"), "{}", r.dump());
}

/// Issue 26, item 17: `-u` (`--keep-newer-files`) replaces an existing file only where it is
/// older than the archive's copy, as `unzip -u` and GNU tar's --keep-newer-files; a newer one
/// and one of the same age are kept (unzip's rule; GNU tar replaces the same age), and
/// counted skipped; a new name is written. For a tar, a compressed tar and a zip.
#[test]
fn update_replaces_only_older_files() {
    let t = tempdir();
    let archived = 1_600_000_000i64; // 2020-09-13
    let mut builder = tar::Builder::new(Vec::new());
    for name in ["old.txt", "new.txt", "same.txt", "fresh.txt"] {
        let mut header = tar::Header::new_gnu();
        header.set_size(7);
        header.set_mode(0o644);
        header.set_mtime(archived as u64);
        builder
            .append_data(&mut header, name, &b"archive"[..])
            .unwrap();
    }
    let tar = builder.into_inner().unwrap();
    let zip = t.join("a.zip");
    {
        let mut w = zip::ZipWriter::new(fs::File::create(&zip).unwrap());
        for name in ["old.txt", "new.txt", "same.txt", "fresh.txt"] {
            let mut ut = vec![1u8];
            ut.extend_from_slice(&(archived as i32).to_le_bytes());
            let mut opts = zip::write::FullFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored);
            opts.add_extra_field(0x5455, ut, false).unwrap();
            w.start_file(name, opts).unwrap();
            w.write_all(b"archive").unwrap();
        }
        w.finish().unwrap();
    }
    let plain = t.join("a.tar");
    fs::write(&plain, &tar).unwrap();
    let gz = t.join("a.tar.gz");
    fs::write(&gz, Comp::Gzip.compress(&tar)).unwrap();
    for archive in [&plain, &gz, &zip] {
        let out = t.join(format!(
            "out-{}",
            archive.file_name().unwrap().to_string_lossy()
        ));
        fs::create_dir(&out).unwrap();
        for (name, mtime) in [
            ("old.txt", archived - 86_400),
            ("new.txt", archived + 86_400),
            ("same.txt", archived),
        ] {
            fs::write(out.join(name), "mine").unwrap();
            let time = filetime::FileTime::from_unix_time(mtime, 0);
            filetime::set_file_mtime(out.join(name), time).unwrap();
        }
        let r = run_fastwrite(&osv!["extract", archive, "-o", &out, "-u", "--json"]);
        r.assert_code(0);
        let report: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
        assert_eq!(report["skipped"], 2, "{}", r.dump());
        for (name, content) in [
            ("old.txt", "archive"),
            ("new.txt", "mine"),
            ("same.txt", "mine"),
            ("fresh.txt", "archive"),
        ] {
            assert_eq!(
                fs::read_to_string(out.join(name)).unwrap(),
                content,
                "{name} from {}",
                archive.display()
            );
        }
    }
}

/// Issue 35, item 6: a tar's `./` entry gives the output folder its mode and mtime, as GNU tar
/// gives them to `.`: into a new folder, an empty one, one that holds files, and from a pipe.
#[cfg(unix)] // GNU tar, the reference
#[test]
fn the_dot_entry_gives_the_output_folder_its_mode_and_mtime() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir_all(src.join("x")).unwrap();
    fs::write(src.join("x/f"), "f").unwrap();
    set_mode(&src, 0o750);
    let then = filetime::FileTime::from_unix_time(946_684_800, 0); // 2000-01-01
    filetime::set_file_mtime(
        src.join("x"),
        filetime::FileTime::from_unix_time(978_307_200, 0),
    )
    .unwrap();
    filetime::set_file_mtime(&src, then).unwrap();
    let archive = t.join("dot.tar");
    run_tool("tar", &osv!["-C", &src, "-cf", &archive, "."], None);

    let reference = t.join("gnu");
    fs::create_dir(&reference).unwrap();
    run_tool("tar", &osv!["-xpf", &archive, "-C", &reference], None);
    let want = (mode_of(&reference) & 0o7777, mtime_of(&reference));
    assert_eq!(want, (0o750, 946_684_800), "GNU tar");

    let new = t.join("new");
    let empty = t.join("empty");
    let holding = t.join("holding");
    fs::create_dir(&empty).unwrap();
    fs::create_dir(&holding).unwrap();
    fs::write(holding.join("mine"), "mine").unwrap();
    for out in [&new, &empty, &holding] {
        extract(&archive, out, &[]).assert_success();
        let got = (mode_of(out) & 0o7777, mtime_of(out));
        assert_eq!(got, want, "{}", out.display());
        assert_eq!(fs::read(out.join("x/f")).unwrap(), b"f");
    }
    let piped = t.join("piped");
    run_fastwrite_piped(&osv!["extract", "-", "-o", &piped], &archive).assert_success();
    assert_eq!((mode_of(&piped) & 0o7777, mtime_of(&piped)), want);
}
