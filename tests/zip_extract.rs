//! Integration tests for `fastwrite extract` on zip archives.
//!
//! Reference results come from the tools users already trust: Info-ZIP `zip`/`unzip`, 7-Zip and
//! Python's zipfile. Archives that need exact control (hostile names, corrupt data, zstd/xz
//! methods) are written by Python or by the `zip` crate inside the test.

#[macro_use]
mod common;

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use common::*;
use zip::write::FullFileOptions;
use zip::{CompressionMethod, ZipWriter};

// -------------------------------------------------------------------------------------------
// Helpers local to the zip tests
// -------------------------------------------------------------------------------------------

/// The DOS time above, read as UTC.
#[cfg_attr(not(unix), allow(dead_code))] // used by unix-only tests
fn dos_time_as_utc() -> i64 {
    civil_to_unix(
        DOS_Y as i64,
        DOS_MO as i64,
        DOS_D as i64,
        DOS_H as i64,
        DOS_MI as i64,
        DOS_S as i64,
    )
}

/// Flags bit 3 (data descriptor) of every local header in a zip.
#[cfg_attr(not(unix), allow(dead_code))] // used by unix-only tests
fn local_header_flags(zip: &[u8]) -> Vec<(String, u16)> {
    let mut v = Vec::new();
    let mut i = 0;
    while i + 30 <= zip.len() {
        if zip[i..i + 4] == *b"PK\x03\x04" {
            let flags = u16::from_le_bytes([zip[i + 6], zip[i + 7]]);
            let n = u16::from_le_bytes([zip[i + 26], zip[i + 27]]) as usize;
            if let Some(name) = zip.get(i + 30..i + 30 + n) {
                v.push((String::from_utf8_lossy(name).into_owned(), flags));
            }
            i += 30;
        } else {
            i += 1;
        }
    }
    v
}

// -------------------------------------------------------------------------------------------
// Round trips: seeded tree -> Info-ZIP zip -> fastwrite, compared with the source and unzip
// -------------------------------------------------------------------------------------------

/// Generate a tree, zip it with `zip -qry` (UT mtimes, unix modes, symlinks), extract it with
/// fastwrite using `globals` before the subcommand and `flags` after it, and require the result
/// to equal both the source tree and unzip's extraction of the same archive.
#[cfg(unix)] // Info-ZIP tools, unix modes and symlinks
fn roundtrip(seed: u64, files: usize, globals: &[&str], flags: &[&str]) {
    let t = tempdir();
    let src = t.join("src");
    let spec = generate_tree(seed, &GenOptions::new(files));
    spec.build(&src);
    let archive = t.join("tree.zip");
    infozip_dir(&src, &archive, &[]);

    let reference = t.join("unzip");
    unzip_to(&archive, &reference);
    // If this fails the reference tool disagrees with the source: an environment problem.
    assert_same_tree(
        &src,
        &reference,
        &Compare::exact(),
        "sanity: unzip vs source",
    );

    let out = t.join("out");
    let mut args: Vec<OsString> = globals.iter().map(OsString::from).collect();
    args.extend(osv!["extract", &archive, "-o", &out]);
    args.extend(flags.iter().map(OsString::from));
    let r = run_fastwrite(&args);
    r.assert_success();
    let ctx = format!("seed {seed}, {}", r.cmdline);
    assert_same_tree(
        &src,
        &out,
        &Compare::exact(),
        &format!("fastwrite vs source ({ctx})"),
    );
    assert_same_tree(
        &reference,
        &out,
        &Compare::exact(),
        &format!("fastwrite vs unzip ({ctx})"),
    );
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_default_flags() {
    roundtrip(1, 300, &[], &[]);
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_defer_threads_1() {
    roundtrip(11, 250, &["-j", "1"], &[]);
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_defer_threads_2() {
    roundtrip(12, 250, &["--threads", "2"], &[]);
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_defer_threads_8() {
    roundtrip(13, 400, &["-j", "8"], &[]);
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_no_defer_threads_1() {
    roundtrip(21, 250, &[], &["--no-defer-close", "-j", "1"]);
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_no_defer_threads_2() {
    roundtrip(22, 250, &["--no-defer-close"], &["--threads", "2"]);
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_no_defer_threads_8() {
    roundtrip(23, 400, &["--no-defer-close", "-j", "8"], &[]);
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_close_threads_1() {
    roundtrip(31, 300, &["--close-threads", "1"], &["-j", "8"]);
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_close_threads_16() {
    roundtrip(32, 300, &[], &["--close-threads", "16", "-j", "2"]);
}

#[cfg(unix)] // Info-ZIP zip makes the archive (Wine cannot wait for a Unix process)
#[test]
fn roundtrip_fsync_deferred_and_inline() {
    roundtrip(41, 120, &["--fsync"], &[]);
    roundtrip(42, 120, &["--fsync", "--no-defer-close"], &["-j", "2"]);
}

/// Zip64 records forced with `zip -fz` (zip64 local extra fields and end records).
#[cfg(unix)] // Info-ZIP tools, unix modes and symlinks
#[test]
fn zip64_archive_forced_with_fz() {
    let t = tempdir();
    let src = t.join("src");
    generate_tree(51, &GenOptions::new(60)).build(&src);
    let archive = t.join("z64.zip");
    infozip_dir(&src, &archive, &["-fz"]);
    let bytes = fs::read(&archive).unwrap();
    assert!(
        bytes.windows(4).any(|w| w == b"PK\x06\x06"),
        "test setup: zip -fz wrote no zip64 end record"
    );
    for flags in [&[][..], &["--no-defer-close", "-j", "1"][..]] {
        let out = t.join(format!("out{}", flags.len()));
        extract(&archive, &out, flags).assert_success();
        assert_same_tree(&src, &out, &Compare::exact(), "zip64 archive vs source");
    }
}

/// Info-ZIP writing to a pipe: every file entry has a data descriptor (flag bit 3) and zero
/// sizes/CRC in its local header, so the extractor must trust the central directory.
#[cfg(unix)] // Info-ZIP tools, sh, unix modes and symlinks
#[test]
fn infozip_streamed_archive_with_data_descriptors() {
    let t = tempdir();
    let src = t.join("src");
    // No symlinks: Info-ZIP cannot store them when writing to a pipe ("zip -0 not supported").
    generate_tree(52, &GenOptions::new(80).no_symlinks()).build(&src);
    let archive = t.join("streamed.zip");
    require_tool("zip");
    run_tool(
        "bash",
        &osv![
            "-c",
            "set -o pipefail; zip -qry - . | cat > \"$1\"",
            "bash",
            &archive
        ],
        Some(&src),
    );
    let flags = local_header_flags(&fs::read(&archive).unwrap());
    assert!(
        flags.iter().any(|(n, f)| !n.ends_with('/') && f & 8 != 0),
        "test setup: streamed zip has no data-descriptor entries: {flags:?}"
    );
    let out = t.join("out");
    extract(&archive, &out, &["-j", "4"]).assert_success();
    let reference = t.join("unzip");
    unzip_to(&archive, &reference);
    assert_same_tree(&src, &out, &Compare::exact(), "streamed zip vs source");
    assert_same_tree(&reference, &out, &Compare::exact(), "streamed zip vs unzip");
}

/// Archives without directory entries (`zip -D`): parents must be created implicitly.
#[cfg(unix)] // Info-ZIP tools, unix modes and symlinks
#[test]
fn archive_without_directory_entries() {
    let t = tempdir();
    let src = t.join("src");
    generate_tree(53, &GenOptions::new(100).no_big_files()).build(&src);
    let archive = t.join("nodirs.zip");
    infozip_dir(&src, &archive, &["-D"]);
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    let reference = t.join("unzip");
    unzip_to(&archive, &reference);
    // Implied directories have no archived mode or mtime: only files are held to them.
    assert_same_tree(
        &reference,
        &out,
        &Compare::exact().files_metadata_only(),
        "zip -D: fastwrite vs unzip",
    );
}

/// Extracting the same archive twice: the default refuses the existing files (exit 1) and
/// leaves them as they were; --skip-existing succeeds without change; --overwrite rewrites
/// everything and the tree is still identical to the source.
#[cfg(unix)] // Info-ZIP tools, unix modes and symlinks
#[test]
fn extract_twice_into_same_output() {
    let t = tempdir();
    let src = t.join("src");
    generate_tree(61, &GenOptions::new(150)).build(&src);
    let archive = t.join("tree.zip");
    infozip_dir(&src, &archive, &[]);
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert_same_tree(&src, &out, &Compare::exact(), "first extraction");

    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    assert!(
        r.stderr.to_lowercase().contains("exist"),
        "second extraction should report existing files\n{}",
        r.dump()
    );
    assert_same_tree(
        &src,
        &out,
        &Compare::exact(),
        "after refused second extraction",
    );

    extract(&archive, &out, &["--skip-existing"]).assert_success();
    assert_same_tree(&src, &out, &Compare::exact(), "after --skip-existing");

    extract(&archive, &out, &["--overwrite", "-j", "8"]).assert_success();
    assert_same_tree(&src, &out, &Compare::exact(), "after --overwrite");
    extract(&archive, &out, &["--overwrite", "--no-defer-close"]).assert_success();
    assert_same_tree(&src, &out, &Compare::exact(), "after second --overwrite");
}

// -------------------------------------------------------------------------------------------
// Other producers and methods
// -------------------------------------------------------------------------------------------

/// Python zipfile, one archive per method; DOS timestamps only (2 s granularity, local time).
#[cfg(unix)] // python3, unzip, unix modes and symlinks
fn python_method(method: &'static str, seed: u64, unzip_can_read: bool, stream: bool) {
    let t = tempdir();
    let src = t.join("src");
    let spec = generate_tree(seed, &GenOptions::new(40).no_big_files());
    spec.build(&src);
    let archive = t.join(format!("{method}.zip"));
    python_zip(&archive, &py_entries_from_spec(&spec, method), stream);
    if stream {
        let flags = local_header_flags(&fs::read(&archive).unwrap());
        assert!(
            flags.iter().any(|(_, f)| f & 8 != 0),
            "test setup: no data descriptors in streamed python zip"
        );
    }
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert_same_tree(
        &src,
        &out,
        &Compare::exact().tolerance(2),
        &format!("python {method} vs source"),
    );
    if unzip_can_read {
        let reference = t.join("unzip");
        unzip_to(&archive, &reference);
        assert_same_tree(
            &reference,
            &out,
            &Compare::exact(),
            &format!("python {method} vs unzip"),
        );
    }
}

#[cfg(unix)] // python3 makes the archive (Wine cannot wait for a Unix process)
#[test]
fn python_zipfile_stored() {
    python_method("stored", 71, true, false);
}

#[cfg(unix)] // python3 makes the archive (Wine cannot wait for a Unix process)
#[test]
fn python_zipfile_deflated() {
    python_method("deflated", 72, true, false);
}

#[cfg(unix)] // python3 makes the archive (Wine cannot wait for a Unix process)
#[test]
fn python_zipfile_bzip2() {
    python_method("bzip2", 73, true, false);
}

#[cfg(unix)] // python3 makes the archive (Wine cannot wait for a Unix process)
#[test]
fn python_zipfile_lzma() {
    // Debian's unzip 6.0 has no LZMA: compare with the source only.
    python_method("lzma", 74, false, false);
}

/// Python writing to a non-seekable stream: data descriptors on every entry.
#[cfg(unix)] // python3 makes the archive (Wine cannot wait for a Unix process)
#[test]
fn python_zipfile_streamed_data_descriptors() {
    python_method("deflated", 75, true, true);
}

/// 7-Zip's zip methods that Info-ZIP does not write. 7-Zip stores unix modes and DOS times
/// (plus an NTFS time field, which the contract does not use): 2 s tolerance.
#[cfg(unix)] // 7z, unix modes
fn sevenzip_method(method: &str, seed: u64) {
    let t = tempdir();
    let src = t.join("src");
    let spec = generate_tree(seed, &GenOptions::new(40).no_symlinks().no_big_files());
    spec.build(&src);
    let archive = std::path::absolute(t.join("7z.zip")).unwrap();
    run_tool(
        "7z",
        &osv!["a", "-tzip", format!("-mm={method}"), &archive, "."],
        Some(&src),
    );
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert_same_tree(
        &src,
        &out,
        &Compare::exact().tolerance(2),
        &format!("7z {method} vs source"),
    );
}

#[cfg(unix)] // 7z makes the archive (Wine cannot wait for a Unix process)
#[test]
fn sevenzip_deflate64() {
    sevenzip_method("Deflate64", 81);
}

#[cfg(unix)] // 7z makes the archive (Wine cannot wait for a Unix process)
#[test]
fn sevenzip_ppmd() {
    sevenzip_method("PPMd", 82);
}

#[cfg(unix)] // 7z makes the archive (Wine cannot wait for a Unix process)
#[test]
fn sevenzip_bzip2() {
    sevenzip_method("BZip2", 83);
}

#[cfg(unix)] // 7z makes the archive (Wine cannot wait for a Unix process)
#[test]
fn sevenzip_lzma() {
    sevenzip_method("LZMA", 84);
}

/// zstd and xz entries written by the zip crate: contents, modes and DOS mtimes.
fn crate_method(method: CompressionMethod) {
    let t = tempdir();
    let archive = t.join("m.zip");
    let entries = vec![
        Z::Dir("d/", 0o750),
        Z::File("d/empty", Vec::new(), 0o644, method),
        Z::File(
            "d/small.txt",
            b"hello zstd and xz\n".to_vec(),
            0o600,
            method,
        ),
        Z::File("text.txt", text(1, 1_500_000), 0o644, method),
        Z::File("d/random.bin", random(2, 300_000), 0o755, method),
        Z::File("d/e/nested.txt", text(3, 5000), 0o444, method),
    ];
    crate_zip(&archive, &entries);
    let out = t.join("out");
    extract(&archive, &out, &["-j", "4"]).assert_success();
    assert_eq!(
        all_paths(&out),
        [
            "d",
            "d/e",
            "d/e/nested.txt",
            "d/empty",
            "d/random.bin",
            "d/small.txt",
            "text.txt"
        ]
    );
    for e in &entries {
        if let Z::File(name, data, mode, _) = e {
            let p = out.join(name);
            let got = fs::read(&p)
                .unwrap_or_else(|err| panic!("{method:?}: read {}: {err}", p.display()));
            assert!(
                got == *data,
                "{method:?}: content of {name} differs ({} vs {} bytes)",
                got.len(),
                data.len()
            );
            #[cfg(unix)] // Unix modes; Windows keeps only a read-only attribute
            assert_eq!(mode_of(&p), *mode, "{method:?}: mode of {name}");
            #[cfg(not(unix))]
            let _ = mode;
        }
    }
    #[cfg(unix)] // Unix modes; Windows keeps only a read-only attribute
    assert_eq!(
        mode_of(&out.join("d")),
        0o750,
        "{method:?}: mode of directory d"
    );
}

#[test]
fn zip_crate_zstd_entries() {
    crate_method(CompressionMethod::Zstd);
}

#[test]
fn zip_crate_xz_entries() {
    crate_method(CompressionMethod::Xz);
}

/// A file of several MiB, stored and deflated, to exercise chunked writes.
#[test]
fn large_files_stored_and_deflated() {
    let t = tempdir();
    let archive = t.join("big.zip");
    let a = text(5, 6 * 1024 * 1024 + 123);
    let b = random(6, 5 * 1024 * 1024 + 7);
    crate_zip(
        &archive,
        &[
            Z::File(
                "big-deflated.txt",
                a.clone(),
                0o644,
                CompressionMethod::Deflated,
            ),
            Z::File(
                "big-stored.bin",
                b.clone(),
                0o644,
                CompressionMethod::Stored,
            ),
        ],
    );
    for flags in [&["-j", "8"][..], &["--no-defer-close", "-j", "1"][..]] {
        let out = t.join(format!("out-{}", flags.len()));
        extract(&archive, &out, flags).assert_success();
        assert!(
            fs::read(out.join("big-deflated.txt")).unwrap() == a,
            "big-deflated.txt differs ({flags:?})"
        );
        assert!(
            fs::read(out.join("big-stored.bin")).unwrap() == b,
            "big-stored.bin differs ({flags:?})"
        );
    }
}

/// UTF-8 names (general purpose bit 11, set by Python for non-ASCII names).
#[cfg(unix)] // python3
#[test]
fn utf8_entry_names() {
    let t = tempdir();
    let archive = t.join("utf8.zip");
    python_zip(
        &archive,
        &[
            PyEntry::dir("ünïcødé", 0o755),
            PyEntry::file("ünïcødé/日本語.txt", "konnichiwa", 0o644),
            PyEntry::file("emoji 🎉.txt", "party", 0o600),
        ],
        false,
    );
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert_eq!(
        fs::read_to_string(out.join("ünïcødé/日本語.txt")).unwrap(),
        "konnichiwa"
    );
    assert_eq!(
        fs::read_to_string(out.join("emoji 🎉.txt")).unwrap(),
        "party"
    );
    assert_eq!(mode_of(&out.join("emoji 🎉.txt")), 0o600);
}

// -------------------------------------------------------------------------------------------
// Timestamps
// -------------------------------------------------------------------------------------------

/// Without an extended-timestamp field, the DOS time is local time: the same archive gives
/// mtimes 5 hours apart under TZ=UTC0 and TZ=EST5 (UTC-5, no DST rules).
#[cfg(unix)] // TZ semantics of the C library
#[test]
fn dos_time_is_local_time() {
    let t = tempdir();
    let archive = t.join("dos.zip");
    crate_zip(
        &archive,
        &[
            Z::File("f.txt", b"x".to_vec(), 0o644, CompressionMethod::Deflated),
            Z::Dir("d/", 0o755),
        ],
    );
    for (tz, offset) in [("UTC0", 0), ("EST5", 5 * 3600)] {
        let out = t.join(format!("out-{tz}"));
        run_fastwrite_env(&osv!["extract", &archive, "-o", &out], &[("TZ", tz)]).assert_success();
        let expected = dos_time_as_utc() + offset;
        assert_eq!(
            mtime_of(&out.join("f.txt")),
            expected,
            "file mtime under TZ={tz}"
        );
        assert_eq!(
            mtime_of(&out.join("d")),
            expected,
            "dir mtime under TZ={tz}"
        );
    }
}

/// An Info-ZIP extended-timestamp field (0x5455) wins over the DOS time and is exact to the
/// second (odd seconds too), whatever the time zone.
#[test]
fn extended_timestamp_field_wins() {
    let t = tempdir();
    let archive = t.join("ut.zip");
    let ut: i64 = 1_234_567_891; // 2009-02-13 23:31:31 UTC, odd second
    {
        let mut w = ZipWriter::new(fs::File::create(&archive).unwrap());
        let mut data = vec![1u8]; // flags: mtime present
        data.extend_from_slice(&(ut as i32).to_le_bytes());
        let mut opts = FullFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .unix_permissions(0o644)
            .last_modified_time(dos_time());
        opts.add_extra_field(0x5455, data, false).unwrap();
        w.start_file("ut.txt", opts).unwrap();
        w.write_all(b"timestamped").unwrap();
        w.finish().unwrap();
    }
    for tz in ["UTC0", "EST5"] {
        let out = t.join(format!("out-{tz}"));
        run_fastwrite_env(&osv!["extract", &archive, "-o", &out], &[("TZ", tz)]).assert_success();
        assert_eq!(mtime_of(&out.join("ut.txt")), ut, "UT mtime under TZ={tz}");
    }
}

/// Issue 26, item 17: the NTFS extra field's time (100 ns units, as 7-Zip and Windows tools
/// write it) is the file's mtime, to the 100 ns, before the extended timestamp's whole second
/// (it was off by up to 1 s; 7-Zip keeps it exact). A time before 1970 too.
#[test]
fn ntfs_times_are_kept_to_the_100_ns() {
    let t = tempdir();
    let archive = t.join("ntfs.zip");
    // 2021-05-06 07:08:09.1234567 UTC and 1960-01-01 00:00:00.5 UTC, in FILETIME ticks.
    let cases: [(&str, i64, u32); 2] = [
        ("new.txt", 1_620_284_889, 123_456_700),
        ("old.txt", -315_619_200, 500_000_000),
    ];
    {
        let mut w = ZipWriter::new(fs::File::create(&archive).unwrap());
        for (name, secs, nanos) in cases {
            let ticks = ((secs + 11_644_473_600) as u64) * 10_000_000 + u64::from(nanos / 100);
            let mut ntfs = vec![0u8; 4];
            ntfs.extend_from_slice(&1u16.to_le_bytes());
            ntfs.extend_from_slice(&24u16.to_le_bytes());
            for _ in 0..3 {
                ntfs.extend_from_slice(&ticks.to_le_bytes());
            }
            let mut ut = vec![1u8];
            ut.extend_from_slice(&(secs as i32).to_le_bytes());
            let mut opts = FullFileOptions::default()
                .compression_method(CompressionMethod::Stored)
                .unix_permissions(0o644)
                .last_modified_time(dos_time());
            opts.add_extra_field(0x000a, ntfs, false).unwrap();
            opts.add_extra_field(0x5455, ut, false).unwrap();
            w.start_file(name, opts).unwrap();
            w.write_all(b"timed").unwrap();
        }
        w.finish().unwrap();
    }
    let out = t.join("out");
    run_fastwrite(&osv!["extract", &archive, "-o", &out]).assert_success();
    // And from a pipe, by the local headers.
    let piped = t.join("piped");
    run_fastwrite_piped(&osv!["extract", "-", "-o", &piped], &archive).assert_success();
    for dir in [&out, &piped] {
        for (name, secs, nanos) in cases {
            let modified = fs::metadata(dir.join(name)).unwrap().modified().unwrap();
            let expected = if secs >= 0 {
                std::time::UNIX_EPOCH + std::time::Duration::new(secs as u64, nanos)
            } else {
                std::time::UNIX_EPOCH - std::time::Duration::from_secs(secs.unsigned_abs())
                    + std::time::Duration::from_nanos(u64::from(nanos))
            };
            assert_eq!(modified, expected, "{}", dir.join(name).display());
        }
    }
}

// -------------------------------------------------------------------------------------------
// Hostile archives
// -------------------------------------------------------------------------------------------

fn zip_slip_case(archive_name: &str, evil_entry_tail: &str, outside_probes: &[&str]) {
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
    // The entry is named as written in the archive (the full ../../ or ..\..\ form).
    let evil = zip::ZipArchive::new(fs::File::open(&archive).unwrap())
        .unwrap()
        .file_names()
        .filter_map(Result::ok)
        .find(|n| n.ends_with(evil_entry_tail))
        .unwrap()
        .to_string();
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
fn zip_slip_sample_refused() {
    zip_slip_case("zip-slip.zip", "tmp/evil.txt", &["/tmp/evil.txt"]);
}

#[test]
fn zip_slip_windows_sample_refused() {
    zip_slip_case(
        "zip-slip-win.zip",
        "Temp\\evil.txt",
        &["/Temp/evil.txt", "/tmp/evil.txt"],
    );
}

// `\` as a separator: tests/portable.rs (backslash_in_a_zip_name_is_a_separator).

/// Even a symlink that stays inside OUT is never written through: `alias -> sub` plus
/// `alias/x.txt` must not put x.txt in sub/, in whatever order the entries are processed.
#[cfg(unix)] // python3, symlinks
#[test]
fn file_entry_never_written_through_archived_symlink() {
    for flags in [&["-j", "1"][..], &["-j", "8"][..], &["--overwrite"][..]] {
        let t = tempdir();
        let archive = t.join("alias.zip");
        python_zip(
            &archive,
            &[
                PyEntry::dir("sub", 0o755),
                PyEntry::symlink("alias", "sub"),
                PyEntry::file("alias/x.txt", "through", 0o644),
                PyEntry::file("good.txt", "good", 0o644),
            ],
            false,
        );
        let out = t.join("out");
        let r = extract(&archive, &out, flags);
        assert!(
            !out.join("sub/x.txt").exists(),
            "alias/x.txt was written through the symlink ({flags:?})\n{}",
            r.dump()
        );
        r.assert_code(1);
        assert_eq!(fs::read_to_string(out.join("good.txt")).unwrap(), "good");
    }
}

// -------------------------------------------------------------------------------------------
// Overwrite policy
// -------------------------------------------------------------------------------------------

fn policy_setup(t: &TestDir) -> (PathBuf, PathBuf) {
    let archive = t.join("p.zip");
    crate_zip(
        &archive,
        &[
            Z::File("a.txt", b"new".to_vec(), 0o640, CompressionMethod::Deflated),
            Z::File("b.txt", b"bee".to_vec(), 0o644, CompressionMethod::Deflated),
        ],
    );
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
    assert_eq!(
        fs::read_to_string(out.join("a.txt")).unwrap(),
        "old",
        "existing file was modified"
    );
    assert_eq!(
        mtime_of(&out.join("a.txt")),
        1_000_000_000,
        "existing file's mtime was touched"
    );
    #[cfg(unix)] // Unix modes; Windows keeps only a read-only attribute
    assert_eq!(
        mode_of(&out.join("a.txt")),
        0o600,
        "existing file's mode was touched"
    );
    assert_eq!(
        fs::read_to_string(out.join("b.txt")).unwrap(),
        "bee",
        "other entries must still be extracted"
    );
    assert!(
        r.stderr_lines_with("b.txt").is_empty(),
        "b.txt reported as failed\n{}",
        r.dump()
    );
}

#[test]
fn overwrite_replaces_existing_file() {
    let t = tempdir();
    let (archive, out) = policy_setup(&t);
    extract(&archive, &out, &["--overwrite"]).assert_success();
    assert_eq!(fs::read_to_string(out.join("a.txt")).unwrap(), "new");
    // Both entries carry the same DOS time, whatever the local time zone makes of it.
    assert_eq!(
        mtime_of(&out.join("a.txt")),
        mtime_of(&out.join("b.txt")),
        "--overwrite must apply the archived mtime"
    );
    assert_ne!(mtime_of(&out.join("a.txt")), 1_000_000_000);
    #[cfg(unix)] // Unix modes; Windows keeps only a read-only attribute
    assert_eq!(
        mode_of(&out.join("a.txt")),
        0o640,
        "--overwrite must apply the archived mode"
    );
    assert_eq!(fs::read_to_string(out.join("b.txt")).unwrap(), "bee");
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

#[test]
fn overwrite_and_skip_existing_conflict() {
    let t = tempdir();
    let (archive, out) = policy_setup(&t);
    let r = extract(&archive, &out, &["--overwrite", "--skip-existing"]);
    r.assert_code(2);
    assert_eq!(fs::read_to_string(out.join("a.txt")).unwrap(), "old");
    assert!(
        !out.join("b.txt").exists(),
        "a run with bad arguments must not extract anything"
    );
}

/// Directory entries merge into existing directories without error.
#[test]
fn existing_directories_are_merged() {
    let t = tempdir();
    let archive = t.join("d.zip");
    crate_zip(
        &archive,
        &[
            Z::Dir("d/", 0o755),
            Z::File(
                "d/new.txt",
                b"n".to_vec(),
                0o644,
                CompressionMethod::Deflated,
            ),
        ],
    );
    let out = t.join("out");
    fs::create_dir_all(out.join("d")).unwrap();
    fs::write(out.join("d/keep.txt"), "k").unwrap();
    extract(&archive, &out, &[]).assert_success();
    assert_eq!(all_paths(&out), ["d", "d/keep.txt", "d/new.txt"]);
    assert_eq!(fs::read_to_string(out.join("d/keep.txt")).unwrap(), "k");
}

// -------------------------------------------------------------------------------------------
// Corrupt and unusable input
// -------------------------------------------------------------------------------------------

/// An archive that cannot be used: exit 2, a message naming the archive, nothing extracted.
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
    assert!(
        all_paths(&out).is_empty(),
        "files were extracted from an unusable archive: {:?}",
        all_paths(&out)
    );
}

#[test]
fn not_a_zip_file() {
    let t = tempdir();
    let p = t.join("notzip.bin");
    fs::write(&p, "this is plain text, not a zip archive\n".repeat(50)).unwrap();
    assert_unusable(&p, &t);
}

#[test]
fn empty_file() {
    let t = tempdir();
    let p = t.join("empty.zip");
    fs::write(&p, "").unwrap();
    assert_unusable(&p, &t);
}

#[test]
fn nonexistent_archive() {
    let t = tempdir();
    assert_unusable(&t.join("does-not-exist.zip"), &t);
}

#[test]
fn archive_is_a_directory() {
    let t = tempdir();
    let p = t.join("dir.zip");
    fs::create_dir(&p).unwrap();
    assert_unusable(&p, &t);
}

fn sample_archive(path: &Path) {
    crate_zip(
        path,
        &[
            Z::Dir("d/", 0o755),
            Z::File(
                "d/a.txt",
                text(7, 40_000),
                0o644,
                CompressionMethod::Deflated,
            ),
            Z::File(
                "d/b.bin",
                random(8, 60_000),
                0o644,
                CompressionMethod::Stored,
            ),
            Z::File("c.txt", text(9, 30_000), 0o644, CompressionMethod::Deflated),
        ],
    );
}

#[test]
fn truncated_in_half() {
    let t = tempdir();
    let full = t.join("full.zip");
    sample_archive(&full);
    let bytes = fs::read(&full).unwrap();
    let p = t.join("half.zip");
    fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    assert_unusable(&p, &t);
}

#[test]
fn truncated_end_record() {
    let t = tempdir();
    let full = t.join("full.zip");
    sample_archive(&full);
    let bytes = fs::read(&full).unwrap();
    let p = t.join("cut.zip");
    fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
    assert_unusable(&p, &t);
}

/// A flipped byte in a stored entry's data: the CRC check fails. Exit 1, that file absent
/// (not left half-written, not under a temp name either), the others extracted. Both ways a
/// stored entry is read: through the zip crate (300 KB), and straight from the mapped archive
/// (3 MiB: 1 MiB and more).
#[test]
fn crc_mismatch_in_stored_entry() {
    for size in [300_000, 3 << 20] {
        crc_mismatch_in_stored_entry_of(size);
    }
}

fn crc_mismatch_in_stored_entry_of(size: usize) {
    let t = tempdir();
    let archive = t.join("crc.zip");
    let bad = random(10, size);
    crate_zip(
        &archive,
        &[
            Z::File(
                "good1.txt",
                text(11, 10_000),
                0o644,
                CompressionMethod::Deflated,
            ),
            Z::File("bad.bin", bad, 0o644, CompressionMethod::Stored),
            Z::File(
                "good2.txt",
                text(12, 10_000),
                0o644,
                CompressionMethod::Stored,
            ),
        ],
    );
    let mut bytes = fs::read(&archive).unwrap();
    let off = local_data_offset(&bytes, "bad.bin") + size * 5 / 6;
    bytes[off] ^= 0x55;
    fs::write(&archive, &bytes).unwrap();
    for flags in [
        &["-j", "1"][..],
        &["-j", "8"][..],
        &["--no-defer-close", "-j", "2"][..],
    ] {
        let out = t.join(format!("out{}", flags.join("")));
        let r = extract(&archive, &out, flags);
        r.assert_code(1);
        r.assert_stderr_names("bad.bin", &["crc", "checksum"]);
        assert_eq!(
            r.stderr_lines_with("bad.bin").len(),
            1,
            "one line per failed entry\n{}",
            r.dump()
        );
        assert_eq!(
            all_paths(&out),
            ["good1.txt", "good2.txt"],
            "{flags:?}\n{}",
            r.dump()
        );
        assert_eq!(fs::read(out.join("good1.txt")).unwrap(), text(11, 10_000));
        assert_eq!(fs::read(out.join("good2.txt")).unwrap(), text(12, 10_000));
    }
}

/// With --overwrite, an entry that fails its CRC check must not leave its bad data under the
/// final name: the old file stays (or is gone), it is never replaced by corrupt content.
#[test]
fn crc_failure_with_overwrite_keeps_old_file() {
    // Through the zip crate, and straight from the mapped archive (see above).
    for size in [200_000, 2 << 20] {
        crc_failure_with_overwrite_keeps_old_file_of(size);
    }
}

fn crc_failure_with_overwrite_keeps_old_file_of(size: usize) {
    let t = tempdir();
    let archive = t.join("crc.zip");
    crate_zip(
        &archive,
        &[
            Z::File(
                "bad.bin",
                random(15, size),
                0o644,
                CompressionMethod::Stored,
            ),
            Z::File(
                "fine.txt",
                b"fine".to_vec(),
                0o644,
                CompressionMethod::Stored,
            ),
        ],
    );
    let mut bytes = fs::read(&archive).unwrap();
    let off = local_data_offset(&bytes, "bad.bin") + size * 3 / 4;
    bytes[off] ^= 0x01;
    fs::write(&archive, &bytes).unwrap();
    for flags in [
        &["--overwrite"][..],
        &["--overwrite", "--no-defer-close"][..],
    ] {
        let out = t.join(format!("out{}", flags.len()));
        fs::create_dir(&out).unwrap();
        fs::write(out.join("bad.bin"), "OLD").unwrap();
        fs::write(out.join("fine.txt"), "OLD").unwrap();
        let r = extract(&archive, &out, flags);
        r.assert_code(1);
        r.assert_stderr_names("bad.bin", &["crc", "checksum"]);
        match fs::read(out.join("bad.bin")) {
            Ok(d) => assert_eq!(
                d,
                b"OLD",
                "bad.bin holds new (corrupt) data after a CRC failure\n{}",
                r.dump()
            ),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
        }
        assert_eq!(fs::read_to_string(out.join("fine.txt")).unwrap(), "fine");
        let mut names = all_paths(&out);
        names.retain(|n| n != "bad.bin");
        assert_eq!(
            names,
            ["fine.txt"],
            "leftover temporary files\n{}",
            r.dump()
        );
    }
}

/// Damaged deflate data (the decoder fails or the CRC does): exit 1, the entry named, its file
/// absent, the other entries extracted. Both ways a deflated entry is read: inflated whole by
/// libdeflate (16 MiB and less), and streamed through the zip crate (17 MiB).
#[test]
fn corrupt_deflate_stream() {
    for size in [2_000_000, 17 << 20] {
        corrupt_deflate_stream_of(size);
    }
}

fn corrupt_deflate_stream_of(size: usize) {
    let t = tempdir();
    let archive = t.join("deflate.zip");
    crate_zip(
        &archive,
        &[
            Z::File(
                "ok.txt",
                text(13, 5_000),
                0o644,
                CompressionMethod::Deflated,
            ),
            Z::File(
                "broken.txt",
                text(14, size),
                0o644,
                CompressionMethod::Deflated,
            ),
        ],
    );
    let mut bytes = fs::read(&archive).unwrap();
    let start = local_data_offset(&bytes, "broken.txt");
    for i in 0..64 {
        bytes[start + 2_000 + i * 7] ^= 0xA5;
    }
    fs::write(&archive, &bytes).unwrap();
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    r.assert_stderr_names(
        "broken.txt",
        &[
            "crc",
            "checksum",
            "corrupt",
            "invalid",
            "inflate",
            "deflate",
            "decompress",
            "data",
            "error",
        ],
    );
    assert_eq!(all_paths(&out), ["ok.txt"], "{size}\n{}", r.dump());
}

/// A valid deflate stream under a wrong CRC-32 (in both headers): the check fails whichever way
/// the entry is read (inflated whole, 300 KB; streamed, 17 MiB). Exit 1, the entry named with
/// the checksum, its file absent, the other entry extracted.
#[test]
fn crc_mismatch_in_deflated_entry() {
    for size in [300_000, 17 << 20] {
        let t = tempdir();
        let archive = t.join("crc.zip");
        crate_zip(
            &archive,
            &[
                Z::File(
                    "bad.txt",
                    text(21, size),
                    0o644,
                    CompressionMethod::Deflated,
                ),
                Z::File(
                    "good.txt",
                    text(22, 5_000),
                    0o644,
                    CompressionMethod::Deflated,
                ),
            ],
        );
        let mut bytes = fs::read(&archive).unwrap();
        let lh = local_header_offset(&bytes, "bad.txt");
        let cd = bytes.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
        assert_eq!(
            &bytes[cd + 46..cd + 46 + 7],
            b"bad.txt",
            "setup: first CD record"
        );
        for at in [lh + 14, cd + 16] {
            bytes[at] ^= 0x01;
        }
        fs::write(&archive, &bytes).unwrap();
        let out = t.join("out");
        let r = extract(&archive, &out, &[]);
        r.assert_code(1);
        r.assert_stderr_names("bad.txt", &["crc", "checksum"]);
        assert_eq!(all_paths(&out), ["good.txt"], "{size}\n{}", r.dump());
        assert_eq!(fs::read(out.join("good.txt")).unwrap(), text(22, 5_000));
    }
}

/// A damaged local header with an intact central directory: that entry fails (exit 1, named),
/// the others are extracted.
#[test]
fn damaged_local_header_fails_only_that_entry() {
    let t = tempdir();
    let archive = t.join("lh.zip");
    crate_zip(
        &archive,
        &[
            Z::File("a.txt", text(30, 3000), 0o644, CompressionMethod::Deflated),
            Z::File("b.txt", text(31, 3000), 0o644, CompressionMethod::Deflated),
            Z::File("c.txt", text(32, 3000), 0o644, CompressionMethod::Stored),
        ],
    );
    let mut bytes = fs::read(&archive).unwrap();
    let data = local_data_offset(&bytes, "b.txt");
    let header = data - 30 - "b.txt".len();
    assert_eq!(&bytes[header..header + 4], b"PK\x03\x04");
    bytes[header..header + 4].copy_from_slice(b"XXXX");
    fs::write(&archive, &bytes).unwrap();
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    assert_eq!(
        r.stderr_lines_with("b.txt").len(),
        1,
        "one line naming b.txt\n{}",
        r.dump()
    );
    assert_eq!(all_paths(&out), ["a.txt", "c.txt"], "{}", r.dump());
    assert_eq!(fs::read(out.join("c.txt")).unwrap(), text(32, 3000));
}

/// An entry with a compression method nobody implements (97): exit 1, named, others extracted.
#[test]
fn unsupported_method_fails_only_that_entry() {
    let t = tempdir();
    let archive = t.join("m97.zip");
    crate_zip(
        &archive,
        &[
            Z::File(
                "weird.bin",
                b"abc".repeat(100),
                0o644,
                CompressionMethod::Stored,
            ),
            Z::File("ok.txt", b"ok".to_vec(), 0o644, CompressionMethod::Stored),
        ],
    );
    let mut bytes = fs::read(&archive).unwrap();
    // Method field: offset 8 in the local header, 10 in the central header (weird.bin is first).
    let lh = bytes.windows(4).position(|w| w == b"PK\x03\x04").unwrap();
    bytes[lh + 8..lh + 10].copy_from_slice(&97u16.to_le_bytes());
    let ch = bytes.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    bytes[ch + 10..ch + 12].copy_from_slice(&97u16.to_le_bytes());
    fs::write(&archive, &bytes).unwrap();
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    r.assert_stderr_names("weird.bin", &["method", "unsupported", "not supported"]);
    assert_eq!(all_paths(&out), ["ok.txt"], "{}", r.dump());
}

/// Encrypted entries (Info-ZIP `-P`): refused with a message, the rest extracted.
#[cfg(unix)] // Info-ZIP zip
#[test]
fn encrypted_entry_fails_only_that_entry() {
    let t = tempdir();
    let src = t.join("src");
    TreeSpec::new()
        .file("secret.txt", "secret\n", 0o644, DEFAULT_MTIME)
        .file("open.txt", "open\n", 0o644, DEFAULT_MTIME)
        .build(&src);
    let archive = std::path::absolute(t.join("enc.zip")).unwrap();
    run_tool(
        "zip",
        &osv!["-q", "-P", "pw", &archive, "secret.txt"],
        Some(&src),
    );
    run_tool("zip", &osv!["-q", &archive, "open.txt"], Some(&src));
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    r.assert_stderr_names("secret.txt", &["encrypt", "password"]);
    assert_eq!(all_paths(&out), ["open.txt"], "{}", r.dump());
}

/// OUT exists but is a regular file: the run cannot start (exit 2), the file is untouched.
#[test]
fn output_path_is_a_file() {
    let t = tempdir();
    let archive = small_archive(&t);
    let out = t.join("out");
    fs::write(&out, "i am a file").unwrap();
    let r = extract(&archive, &out, &[]);
    r.assert_code(2);
    assert!(
        r.stderr.contains("out"),
        "stderr does not name the output path\n{}",
        r.dump()
    );
    assert_eq!(fs::read_to_string(&out).unwrap(), "i am a file");
}

/// An empty (but valid) archive: nothing to do, success, OUT created.
#[test]
fn empty_archive_succeeds() {
    let t = tempdir();
    let archive = t.join("none.zip");
    let mut eocd = b"PK\x05\x06".to_vec();
    eocd.extend([0u8; 18]);
    fs::write(&archive, eocd).unwrap();
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert!(out.is_dir(), "OUT was not created");
    assert!(all_paths(&out).is_empty());
}

// -------------------------------------------------------------------------------------------
// setuid/setgid/sticky
// -------------------------------------------------------------------------------------------

#[cfg(unix)] // unix modes, python3
#[test]
fn setid_bits_cleared_unless_keep_setid() {
    let t = tempdir();
    let archive = t.join("suid.zip");
    python_zip(
        &archive,
        &[
            PyEntry::file("suid", "#!/bin/sh\n", 0o4755),
            PyEntry::file("sgid", "#!/bin/sh\n", 0o2750),
            PyEntry::file("plain", "x", 0o751),
            PyEntry::dir("sticky", 0o1777),
            PyEntry::file("sticky/inner", "y", 0o644),
        ],
        false,
    );
    let out = t.join("default");
    extract(&archive, &out, &[]).assert_success();
    assert_eq!(
        mode_of(&out.join("suid")),
        0o755,
        "setuid must be cleared by default"
    );
    assert_eq!(
        mode_of(&out.join("sgid")),
        0o750,
        "setgid must be cleared by default"
    );
    assert_eq!(mode_of(&out.join("plain")), 0o751);
    assert_eq!(
        mode_of(&out.join("sticky")),
        0o777,
        "sticky must be cleared by default"
    );

    let keep = t.join("keep");
    extract(&archive, &keep, &["--keep-setid"]).assert_success();
    assert_eq!(
        mode_of(&keep.join("suid")),
        0o4755,
        "--keep-setid keeps setuid"
    );
    assert_eq!(
        mode_of(&keep.join("sgid")),
        0o2750,
        "--keep-setid keeps setgid"
    );
    assert_eq!(mode_of(&keep.join("plain")), 0o751);
    assert_eq!(
        mode_of(&keep.join("sticky")),
        0o1777,
        "--keep-setid keeps sticky"
    );
    assert_eq!(fs::read_to_string(keep.join("sticky/inner")).unwrap(), "y");
}

// -------------------------------------------------------------------------------------------
// Output and arguments
// -------------------------------------------------------------------------------------------

fn small_archive(t: &TestDir) -> PathBuf {
    let archive = t.join("s.zip");
    crate_zip(
        &archive,
        &[
            Z::Dir("d1/", 0o755),
            Z::Dir("d1/d2/", 0o755),
            Z::Dir("empty/", 0o700),
            Z::File(
                "d1/a.txt",
                text(20, 1000),
                0o644,
                CompressionMethod::Deflated,
            ),
            Z::File(
                "d1/d2/b.txt",
                text(21, 2000),
                0o644,
                CompressionMethod::Deflated,
            ),
            Z::File("c.bin", random(22, 3000), 0o644, CompressionMethod::Stored),
            Z::File("e.txt", Vec::new(), 0o644, CompressionMethod::Stored),
            Z::File("f.txt", b"f".to_vec(), 0o644, CompressionMethod::Deflated),
            Z::File(
                "d1/g.txt",
                b"g".to_vec(),
                0o644,
                CompressionMethod::Deflated,
            ),
            Z::File("h.txt", b"h".to_vec(), 0o644, CompressionMethod::Deflated),
        ],
    );
    archive
}

/// Whole-number tokens of a line ("files: 7, 1,234 bytes" -> [7, 1, 234]).
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

#[test]
fn stats_reports_counts_and_timings() {
    let t = tempdir();
    let archive = small_archive(&t);
    for (i, before) in [true, false].into_iter().enumerate() {
        let out = t.join(format!("out{i}"));
        let r = if before {
            extract_globals_first(&["--stats"], &archive, &out)
        } else {
            extract(&archive, &out, &["--stats"])
        };
        r.assert_success();
        let err = r.stderr.to_lowercase();
        for word in [
            "files", "director", "bytes", "wall", "write", "close", "peak",
        ] {
            assert!(
                err.contains(word),
                "--stats output lacks {word:?}\n{}",
                r.dump()
            );
        }
        // 7 files, 3 directories in the archive.
        let file_lines = r.stderr_lines_with("files");
        assert!(
            file_lines.iter().any(|l| numbers(l).contains(&7)),
            "--stats does not report 7 files\n{}",
            r.dump()
        );
        let dir_lines = r.stderr_lines_with("director");
        assert!(
            dir_lines.iter().any(|l| numbers(l).contains(&3)),
            "--stats does not report 3 directories\n{}",
            r.dump()
        );
        assert_eq!(fs::read(out.join("d1/d2/b.txt")).unwrap(), text(21, 2000));
    }
}

#[test]
fn quiet_prints_nothing_on_success() {
    let t = tempdir();
    let archive = small_archive(&t);
    let r = extract_globals_first(&["-q"], &archive, &t.join("out1"));
    r.assert_success();
    assert!(
        r.stdout.is_empty() && r.stderr.is_empty(),
        "-q printed output\n{}",
        r.dump()
    );
    let r = extract(&archive, &t.join("out2"), &["--quiet"]);
    r.assert_success();
    assert!(
        r.stdout.is_empty() && r.stderr.is_empty(),
        "--quiet printed output\n{}",
        r.dump()
    );
    assert_eq!(fs::read(t.join("out2/c.bin")).unwrap(), random(22, 3000));
}

/// -q silences progress and summaries, not errors: a failed entry is still named.
#[test]
fn quiet_still_reports_failed_entries() {
    let t = tempdir();
    let archive = small_archive(&t);
    let out = t.join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("h.txt"), "mine").unwrap();
    let r = extract(&archive, &out, &["-q"]);
    r.assert_code(1);
    r.assert_stderr_names("h.txt", &["exist"]);
    assert!(r.stdout.is_empty(), "-q printed to stdout\n{}", r.dump());
    assert_eq!(fs::read_to_string(out.join("h.txt")).unwrap(), "mine");
}

#[test]
fn output_folder_created_with_missing_parents() {
    let t = tempdir();
    let archive = small_archive(&t);
    let out = t.join("a/b/c/out");
    extract(&archive, &out, &[]).assert_success();
    assert_eq!(fs::read_to_string(out.join("h.txt")).unwrap(), "h");
    assert!(
        out.join("empty").is_dir(),
        "empty directory entry not created"
    );
    #[cfg(unix)] // Unix modes; Windows keeps only a read-only attribute
    assert_eq!(mode_of(&out.join("empty")), 0o700);
}

#[test]
fn bad_arguments_exit_2() {
    let t = tempdir();
    let archive = small_archive(&t);
    let out = t.join("out");
    let cases: Vec<Vec<OsString>> = vec![
        osv![],
        osv!["extract"],
        osv!["extract", &archive, "-o", &out, "--no-such-flag"],
        osv!["-j", "lots", "extract", &archive, "-o", &out],
        osv!["extract", &archive, "-o", &out, "--close-threads", "-3"],
        osv!["no-such-subcommand", &archive],
    ];
    for args in cases {
        let r = run_fastwrite(&args);
        r.assert_code(2);
        assert!(
            !r.stderr.trim().is_empty(),
            "no message for bad arguments\n{}",
            r.dump()
        );
    }
    assert!(
        all_paths(&out).is_empty(),
        "bad arguments still extracted files"
    );
}

// -------------------------------------------------------------------------------------------
// Harness self-checks: a comparator that saw nothing would make every test above pass
// -------------------------------------------------------------------------------------------

#[cfg(unix)] // modes and symlinks
#[test]
fn harness_generator_is_deterministic_and_varied() {
    let opts = GenOptions::new(300);
    let a = generate_tree(7, &opts);
    assert!(
        a == generate_tree(7, &opts),
        "same seed must give the same tree"
    );
    assert!(
        a != generate_tree(8, &opts),
        "different seeds must give different trees"
    );
    assert_eq!(a.count_files(), 300);
    assert!(a.count_symlinks() >= 2, "no symlinks generated");
    let sizes: Vec<usize> = a
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::File(d) => Some(d.len()),
            _ => None,
        })
        .collect();
    assert!(sizes.contains(&0), "no empty files");
    assert!(
        sizes.iter().any(|&s| (1..200).contains(&s)),
        "no tiny files"
    );
    assert!(
        sizes.iter().any(|&s| (1024..96 * 1024).contains(&s)),
        "no KiB-sized files"
    );
    assert!(sizes.iter().any(|&s| s >= 1 << 20), "no ~1 MiB files");
    let file_modes: std::collections::BTreeSet<u32> = a
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::File(_)))
        .map(|n| n.mode)
        .collect();
    assert!(file_modes.len() >= 5, "too few file modes: {file_modes:?}");
    assert!(
        a.nodes.iter().any(|n| n.mtime % 2 == 1),
        "no odd-second mtimes"
    );

    let t = tempdir();
    a.build(&t.join("tree"));
    let scanned = scan_tree(&t.join("tree"));
    let empty_dirs = scanned
        .iter()
        .filter(|(p, m)| {
            m.kind == Kind::Dir
                && fs::read_dir(t.join("tree").join(p))
                    .unwrap()
                    .next()
                    .is_none()
        })
        .count();
    assert!(
        empty_dirs >= 4,
        "expected empty directories, found {empty_dirs}"
    );
    for n in &a.nodes {
        let m = &scanned[Path::new(&n.path)];
        match &n.kind {
            NodeKind::Symlink(t) => assert_eq!(m.target.as_deref(), Some(Path::new(t))),
            _ => {
                assert_eq!(m.perm, n.mode, "mode of {}", n.path);
                assert_eq!(m.mtime, n.mtime, "mtime of {}", n.path);
            }
        }
    }
}

#[cfg(unix)] // modes and symlinks
#[test]
fn harness_comparator_reports_each_kind_of_difference() {
    let spec = TreeSpec::new()
        .dir("d", 0o755, 1_500_000_000)
        .dir("d/e", 0o700, 1_500_000_001)
        .file("d/content.txt", "abcdef", 0o644, 1_500_000_002)
        .file("mode.txt", "m", 0o644, 1_500_000_003)
        .file("time1.txt", "t", 0o644, 1_500_000_004)
        .file("gone.txt", "g", 0o644, 1_500_000_005)
        .file("kind", "k", 0o644, 1_500_000_006)
        .symlink("link", "d/content.txt");
    let t = tempdir();
    let (a, b) = (t.join("a"), t.join("b"));
    spec.build(&a);
    spec.build(&b);
    assert!(
        diff_trees(&a, &b, &Compare::exact()).is_empty(),
        "identical trees reported different"
    );

    fs::write(b.join("d/content.txt"), "abcXef").unwrap();
    set_mtime(&b.join("d/content.txt"), 1_500_000_002);
    set_mode(&b.join("mode.txt"), 0o600);
    set_mtime(&b.join("time1.txt"), 1_500_000_005);
    fs::remove_file(b.join("gone.txt")).unwrap();
    fs::write(b.join("extra.txt"), "x").unwrap();
    fs::remove_file(b.join("kind")).unwrap();
    fs::create_dir(b.join("kind")).unwrap();
    fs::remove_file(b.join("link")).unwrap();
    make_symlink("mode.txt", &b.join("link"));
    set_mtime(&b.join("d/e"), 1_500_000_011);
    set_mtime(&b.join("d"), 1_500_000_000);
    set_mtime(&b, 0);

    let d = diff_trees(&a, &b, &Compare::exact()).join("\n");
    for want in [
        "content differs: d/content.txt",
        "mode differs: mode.txt",
        "mtime differs: time1.txt",
        "missing: gone.txt",
        "extra: extra.txt",
        "kind differs: kind",
        "symlink target differs: link",
        "mtime differs: d/e",
    ] {
        assert!(
            d.contains(want),
            "comparator missed {want:?}; it reported:\n{d}"
        );
    }
    let tol = diff_trees(&a, &b, &Compare::exact().tolerance(2)).join("\n");
    assert!(
        !tol.contains("time1.txt"),
        "1 s difference reported despite 2 s tolerance:\n{tol}"
    );
    assert!(
        tol.contains("mtime differs: d/e"),
        "10 s difference hidden by 2 s tolerance:\n{tol}"
    );
    let content = diff_trees(&a, &b, &Compare::content_only()).join("\n");
    assert!(
        !content.contains("mode differs") && !content.contains("mtime differs"),
        "{content}"
    );
    assert!(content.contains("content differs: d/content.txt"));
}

// -------------------------------------------------------------------------------------------
// Zip bombs and header tricks
// -------------------------------------------------------------------------------------------

fn u16_at(b: &[u8], i: usize) -> usize {
    u16::from_le_bytes([b[i], b[i + 1]]) as usize
}

/// Adds central directory records named `names` that point at the local header (and so the
/// data) of the archive's first entry, as an overlapping zip bomb does. Names must have the
/// first entry's name length, so the records keep their size.
fn add_overlapping_records(zip: &[u8], names: &[&str]) -> Vec<u8> {
    let eocd = zip.windows(4).rposition(|w| w == b"PK\x05\x06").unwrap();
    let cd_size = u32::from_le_bytes(zip[eocd + 12..eocd + 16].try_into().unwrap()) as usize;
    let cd_start = u32::from_le_bytes(zip[eocd + 16..eocd + 20].try_into().unwrap()) as usize;
    let first = &zip[cd_start..];
    let record_len = 46 + u16_at(first, 28) + u16_at(first, 30) + u16_at(first, 32);
    let record = &first[..record_len];
    let mut out = zip[..cd_start + cd_size].to_vec();
    for name in names {
        let mut copy = record.to_vec();
        assert_eq!(name.len(), u16_at(record, 28), "same name length");
        copy[46..46 + name.len()].copy_from_slice(name.as_bytes());
        out.extend(copy);
    }
    let mut end = zip[eocd..].to_vec();
    let count = (u16_at(&end, 10) + names.len()) as u16;
    end[8..10].copy_from_slice(&count.to_le_bytes());
    end[10..12].copy_from_slice(&count.to_le_bytes());
    let size = (cd_size + names.len() * record_len) as u32;
    end[12..16].copy_from_slice(&size.to_le_bytes());
    out.extend(end);
    out
}

/// The classic overlapping bomb: many central directory entries share one entry's compressed
/// data (10 MiB of zeros in 10 KB, so 8 entries would write 80 MiB). Refused whole before
/// anything is written (exit 2), naming two of the entries, as Info-ZIP's unzip refuses it.
#[test]
fn overlapping_entries_are_refused_as_a_zip_bomb() {
    let t = tempdir();
    let seed = t.join("seed.zip");
    crate_zip(
        &seed,
        &[Z::File(
            "zeros0.bin",
            vec![0; 10 << 20],
            0o644,
            CompressionMethod::Deflated,
        )],
    );
    let names: Vec<String> = (1..8).map(|i| format!("zeros{i}.bin")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let bomb = t.join("bomb.zip");
    fs::write(
        &bomb,
        add_overlapping_records(&fs::read(&seed).unwrap(), &names),
    )
    .unwrap();
    assert!(fs::metadata(&bomb).unwrap().len() < 100_000);

    let out = t.join("out");
    let r = extract(&bomb, &out, &[]);
    r.assert_code(2);
    assert!(
        r.stderr.contains("zeros0.bin") && r.stderr.contains("zeros1.bin"),
        "names both entries\n{}",
        r.dump()
    );
    assert!(r.stderr.contains("zip bomb"), "{}", r.dump());
    assert!(all_paths(&out).is_empty(), "nothing written\n{}", r.dump());

    // The reference: Info-ZIP's unzip refuses the same archive.
    #[cfg(unix)]
    {
        require_tool("unzip");
        let mut cmd = std::process::Command::new("unzip");
        cmd.arg("-qo").arg(&bomb).arg("-d").arg(t.join("unzip"));
        // (A reference that gives no verdict says nothing about fastwrite, checked above.)
        if let Some(u) = run_reference(cmd) {
            assert!(!u.status.success(), "{}", u.dump());
            assert!(
                u.stdout.contains("overlap") || u.stderr.contains("overlap"),
                "{}",
                u.dump()
            );
        }
    }
}

/// An entry whose compressed data runs into the central directory is part of the same trick.
#[test]
fn an_entry_running_into_the_central_directory_is_refused() {
    let t = tempdir();
    let archive = t.join("into-cd.zip");
    crate_zip(&archive, &[Z::File("a.txt", text(5, 4000), 0o644, STORED)]);
    let mut bytes = fs::read(&archive).unwrap();
    // Grow the entry's compressed size in both headers by 40 bytes: still inside the file, so
    // only the central directory's start shows the overlap.
    let lh = bytes.windows(4).position(|w| w == b"PK\x03\x04").unwrap();
    let cd = bytes.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    for at in [lh + 18, lh + 22, cd + 20, cd + 24] {
        let v = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) + 40;
        bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fs::write(&archive, &bytes).unwrap();
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_code(2);
    assert!(r.stderr.contains("central directory"), "{}", r.dump());
    assert!(all_paths(&out).is_empty(), "{}", r.dump());
}

/// A local header that disagrees with the central directory (another name, another size):
/// that entry is refused and named, with what differs; the others are extracted.
#[test]
fn local_headers_that_disagree_with_the_central_directory_are_refused() {
    let t = tempdir();
    let archive = t.join("two-faced.zip");
    crate_zip(
        &archive,
        &[
            Z::File("a.txt", text(1, 3000), 0o644, STORED),
            Z::File("b.txt", text(2, 3000), 0o644, CompressionMethod::Deflated),
            Z::File("c.txt", text(3, 3000), 0o644, STORED),
            Z::File("d.txt", text(4, 3000), 0o644, STORED),
        ],
    );
    let mut bytes = fs::read(&archive).unwrap();
    // b.txt's local header says x.txt; c.txt's says one byte less data.
    let b = local_data_offset(&bytes, "b.txt") - "b.txt".len();
    bytes[b..b + 5].copy_from_slice(b"x.txt");
    let c = local_header_offset(&bytes, "c.txt");
    let size = u32::from_le_bytes(bytes[c + 22..c + 26].try_into().unwrap()) - 1;
    bytes[c + 22..c + 26].copy_from_slice(&size.to_le_bytes());
    fs::write(&archive, &bytes).unwrap();

    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    r.assert_stderr_names("b.txt", &["local header names 'x.txt'"]);
    r.assert_stderr_names("c.txt", &["uncompressed size 2999"]);
    assert_eq!(all_paths(&out), ["a.txt", "d.txt"], "{}", r.dump());
}

/// An entry whose data holds more than its declared size (both headers say 100 bytes, the
/// deflate stream makes 64 KiB): never more than the declared size is written, and the entry
/// fails with nothing left of it.
#[test]
fn an_entry_never_writes_more_than_its_declared_size() {
    let t = tempdir();
    let archive = t.join("liar.zip");
    crate_zip(
        &archive,
        &[
            Z::File(
                "big.bin",
                vec![7; 64 << 10],
                0o644,
                CompressionMethod::Deflated,
            ),
            Z::File("ok.txt", b"ok".to_vec(), 0o644, STORED),
        ],
    );
    let mut bytes = fs::read(&archive).unwrap();
    let lh = local_header_offset(&bytes, "big.bin");
    let cd = bytes.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    for at in [lh + 22, cd + 24] {
        bytes[at..at + 4].copy_from_slice(&100u32.to_le_bytes());
    }
    fs::write(&archive, &bytes).unwrap();
    let out = t.join("out");
    let r = extract(&archive, &out, &[]);
    r.assert_code(1);
    assert_eq!(r.stderr_lines_with("big.bin").len(), 1, "{}", r.dump());
    assert_eq!(all_paths(&out), ["ok.txt"], "{}", r.dump());
}

/// `--max-output`: a zip declaring more than the cap is refused before anything is written;
/// under the cap it extracts normally.
#[test]
fn max_output_refuses_a_zip_that_declares_more() {
    let t = tempdir();
    let archive = t.join("three.zip");
    let files: Vec<(String, Vec<u8>)> = (0..3)
        .map(|i| (format!("f{i}.bin"), vec![i as u8; 1 << 20]))
        .collect();
    let entries: Vec<Z> = files
        .iter()
        .map(|(n, d)| Z::File(n, d.clone(), 0o644, CompressionMethod::Deflated))
        .collect();
    crate_zip(&archive, &entries);

    let out = t.join("capped");
    let r = extract(&archive, &out, &["--max-output", "2.5M"]);
    r.assert_code(2);
    assert!(
        r.stderr.contains("3.0 MiB") && r.stderr.contains("2.5 MiB"),
        "says both sizes\n{}",
        r.dump()
    );
    assert!(all_paths(&out).is_empty(), "{}", r.dump());

    let out = t.join("roomy");
    extract(&archive, &out, &["--max-output", "3M"]).assert_success();
    assert_eq!(all_paths(&out).len(), 3);
}

/// Names without the UTF-8 flag: valid UTF-8 is read as UTF-8 (what writers that forget the
/// flag mean, and what Info-ZIP's unzip shows in a UTF-8 locale). Anything else depends on
/// where the zip was made: on Unix (the zip crate's host, 3), byte for byte, as Info-ZIP's
/// unzip, bsdtar and 7-Zip keep it (Windows: CP437, its names being Unicode); on MS-DOS (host
/// 0), as CP437, the zip format's own default (as 7-Zip, Python's zipfile and Windows read it).
#[test]
fn names_without_the_utf8_flag_are_utf8_when_valid_else_by_their_host() {
    let t = tempdir();
    let archive = t.join("names.zip");
    // Placeholders of the final names' byte lengths, patched in both headers.
    crate_zip(
        &archive,
        &[
            Z::File("cafX-cp437", b"1".to_vec(), 0o644, STORED),
            Z::File("cafXX-utf8", b"2".to_vec(), 0o644, STORED),
            Z::File("cafX-latin1", b"3".to_vec(), 0o644, STORED),
        ],
    );
    let mut bytes = fs::read(&archive).unwrap();
    let patch = |bytes: &mut Vec<u8>, from: &[u8], to: &[u8]| {
        let mut found = 0;
        let mut i = 0;
        while let Some(at) = bytes[i..].windows(from.len()).position(|w| w == from) {
            bytes[i + at..i + at + to.len()].copy_from_slice(to);
            i += at + 1;
            found += 1;
        }
        assert_eq!(found, 2, "setup: the name is in both headers");
    };
    patch(&mut bytes, b"cafX-cp437", b"caf\x82-cp437");
    patch(&mut bytes, b"cafXX-utf8", "café-utf8".as_bytes());
    patch(&mut bytes, b"cafX-latin1", b"caf\xe9-latin1");
    // The crate set no UTF-8 flag for these ASCII placeholders.
    assert!(
        local_header_flags(&bytes)
            .iter()
            .all(|(_, f)| f & 0x800 == 0)
    );
    fs::write(&archive, &bytes).unwrap();
    let out = t.join("out");
    extract(&archive, &out, &[]).assert_success();
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let mut names: Vec<Vec<u8>> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                b"caf\x82-cp437".to_vec(),
                "café-utf8".as_bytes().to_vec(),
                b"caf\xe9-latin1".to_vec()
            ],
            "made on Unix: the raw bytes"
        );
        // Info-ZIP's unzip and bsdtar agree, byte for byte.
        let u = t.join("unzip");
        unzip_to(&archive, &u);
        assert_same_tree(&u, &out, &Compare::content_only(), "unzip");
    }
    #[cfg(not(unix))]
    assert_eq!(
        children(&out),
        ["café-cp437", "café-utf8", "cafΘ-latin1"],
        "Windows: CP437"
    );

    // The same zip said to be made on MS-DOS (host 0 in each central record's "made by"):
    // CP437 on every system, 0x82 and 0xE9 being é and Θ there.
    let mut i = 0;
    while let Some(at) = bytes[i..].windows(4).position(|w| w == b"PK\x01\x02") {
        bytes[i + at + 5] = 0;
        i += at + 1;
    }
    let dos = t.join("dos.zip");
    fs::write(&dos, &bytes).unwrap();
    let out = t.join("out-dos");
    extract(&dos, &out, &[]).assert_success();
    assert_eq!(
        children(&out),
        ["café-cp437", "café-utf8", "cafΘ-latin1"],
        "0x82 and 0xE9 are é and Θ in CP437"
    );
}

/// Patterns, `--exclude` and `--strip-components` on a zip made by Info-ZIP, against bsdtar
/// given the same options (GNU tar reads no zip): the same trees, content, modes, mtimes and
/// symlinks.
#[cfg(unix)] // Info-ZIP and bsdtar, which a Windows build under Wine cannot start
#[test]
fn patterns_exclude_and_strip_components_match_bsdtar() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    project_tree(&src);
    let archive = t.join("project.zip");
    infozip_dir(&src, &archive, &[]);
    let cases: [(&[&str], &[&str]); 3] = [
        (&["--strip-components", "1"], &["--strip-components", "1"]),
        (
            &["project-1.2/docs", "--exclude", "*.bak", "--exclude", "old"],
            &["--exclude", "*.bak", "--exclude", "old", "project-1.2/docs"],
        ),
        (
            &["project-1.2/src", "--strip-components", "2"],
            &["--strip-components", "2", "project-1.2/src"],
        ),
    ];
    for (n, (ours, bsd)) in cases.into_iter().enumerate() {
        let out = t.join(format!("ours-{n}"));
        let r = extract(&archive, &out, ours);
        assert_eq!(r.code(), 0, "{ours:?}: {}", r.dump());
        let reference = t.join(format!("bsdtar-{n}"));
        fs::create_dir(&reference).unwrap();
        let mut a = osv!["-xpf", &archive, "-C", &reference];
        a.extend(bsd.iter().map(OsString::from));
        run_tool("bsdtar", &a, None);
        let compare = Compare {
            // Folders made only for what is inside them get each tool's own time.
            dir_mtimes: n != 1,
            ..Compare::strict()
        };
        assert_same_tree(
            &reference,
            &out,
            &compare,
            &format!("{ours:?}: fastwrite vs bsdtar"),
        );
    }
}

/// Encrypted zips made by 7-Zip (`7z a -p -mem=AES256`) and Info-ZIP (`zip -P`, traditional
/// ZipCrypto): the right password, given by `--password` or by `FASTWRITE_PASSWORD`, extracts
/// the tree; a wrong one fails each entry by name and leaves nothing under any name; none says
/// how to give one.
#[cfg(unix)] // 7z and Info-ZIP, which a Windows build under Wine cannot start
#[test]
fn encrypted_zips_from_7zip_and_infozip() {
    let t = tempdir();
    let src = t.join("src");
    for (name, data) in [("b.txt", "two"), ("d/a.txt", "secret"), ("d/e/c.bin", "x")] {
        fs::create_dir_all(src.join(name).parent().unwrap()).unwrap();
        fs::write(src.join(name), data.repeat(1000)).unwrap();
    }
    let aes = t.join("aes.zip");
    let mut a = osv!["a", "-tzip", "-phunter2", "-mem=AES256", &aes];
    a.push(".".into());
    run_tool("7z", &a, Some(&src));
    let legacy = t.join("zipcrypto.zip");
    run_tool(
        "zip",
        &osv!["-qr", "-P", "hunter2", &legacy, "."],
        Some(&src),
    );
    let names = ["b.txt", "d/a.txt", "d/e/c.bin"];
    for archive in [&aes, &legacy] {
        let what = archive.file_name().unwrap().to_string_lossy().into_owned();
        let out = t.join(format!("{what}-flag"));
        let r = extract(archive, &out, &["--password", "hunter2"]);
        assert_eq!(r.code(), 0, "{what}: {}", r.dump());
        assert_same_tree(&src, &out, &Compare::content_only(), &what);

        let out = t.join(format!("{what}-env"));
        let r = run_fastwrite_env(
            &osv!["extract", archive, "-o", &out],
            &[("FASTWRITE_PASSWORD", "hunter2")],
        );
        assert_eq!(r.code(), 0, "{what}: {}", r.dump());
        assert_same_tree(&src, &out, &Compare::content_only(), &what);

        // A wrong password, or none, opens none of the files: refused whole, nothing made
        // (not even the folders: issue 26, item 8).
        let out = t.join(format!("{what}-wrong"));
        let r = extract(archive, &out, &["--password", "wrong horse"]);
        assert_eq!(r.code(), 2, "{what}: {}", r.dump());
        assert!(
            r.stderr
                .contains("wrong password: it opens none of the 3 encrypted entries"),
            "{what}: {}",
            r.dump()
        );
        assert!(!out.exists(), "{what}: {:?} left", scan_tree(&out));

        let out = t.join(format!("{what}-none"));
        let r = extract(archive, &out, &[]);
        assert_eq!(r.code(), 2, "{what}: {}", r.dump());
        assert!(
            r.stderr
                .contains("its 3 files are encrypted: give the password with --password"),
            "{}",
            r.dump()
        );
        assert!(!out.exists(), "{what}: {:?} left", scan_tree(&out));

        // Through a pipe, read by its local headers: the same (7-Zip's AES entries have their
        // sizes in their local headers), and without the password each entry fails and is
        // passed over. Info-ZIP puts ZipCrypto entries' sizes after their data, which a stream
        // reader cannot follow for encrypted data: refused, asking for a file.
        let piped = t.join(format!("{what}-pipe"));
        let args = osv!["extract", "-", "-o", &piped, "--password", "hunter2"];
        let r = run_fastwrite_piped(&args, archive);
        if archive == &legacy {
            assert_eq!(r.code(), 1, "{what}: {}", r.dump());
            assert!(
                r.stderr.contains("save the zip to a file first"),
                "{}",
                r.dump()
            );
            continue;
        }
        assert_eq!(r.code(), 0, "{what}: {}", r.dump());
        assert_same_tree(
            &src,
            &piped,
            &Compare::content_only(),
            &format!("{what} piped"),
        );
        let piped = t.join(format!("{what}-pipe-none"));
        let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &piped], archive);
        assert_eq!(r.code(), 1, "{what}: {}", r.dump());
        for name in names {
            assert!(
                r.stderr
                    .contains(&format!("'{name}': encrypted: give its password")),
                "{what}: {name}\n{}",
                r.dump()
            );
        }
    }
}

/// bsdtar reading `archive` from its standard input, as from a pipe, into the new folder `into`.
#[cfg(unix)]
fn bsdtar_from_stdin(archive: &Path, into: &Path) {
    fs::create_dir(into).unwrap();
    let mut cmd = std::process::Command::new("bsdtar");
    cmd.args(["-xpf", "-", "-C"]).arg(into);
    let stdin = std::process::Stdio::from(fs::File::open(archive).unwrap());
    let r = run_command_with_stdin(cmd, stdin);
    assert!(r.status.success(), "{}", r.dump());
}

/// A zip from a pipe whose data descriptor disagrees with the data before it (a CRC flipped):
/// that entry fails, named, and nothing of it is written; the others are.
#[cfg(unix)] // python3, which a Windows build under Wine cannot start
#[test]
fn a_piped_entry_that_fails_its_descriptor_is_not_written() {
    let t = tempdir();
    let archive = t.join("streamed.zip");
    let script = "import io, sys, zipfile\nclass Pipe(io.RawIOBase):\n def __init__(s, f): s.f = f\n def writable(s): return True\n def write(s, b): return s.f.write(b)\nwith open(sys.argv[1], 'wb') as raw, zipfile.ZipFile(Pipe(raw), 'w', zipfile.ZIP_DEFLATED) as z:\n for n in ['a.txt', 'b.txt', 'c.txt']:\n  with z.open(n, 'w') as f: f.write(n.encode() * 100)";
    run_tool("python3", &osv!["-c", script, &archive], None);
    let mut bytes = fs::read(&archive).unwrap();
    let at = bytes
        .windows(4)
        .position(|w| w == b"PK\x07\x08")
        .expect("a data descriptor");
    bytes[at + 4] ^= 0xff;
    fs::write(&archive, &bytes).unwrap();
    let out = t.join("out");
    let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &archive);
    assert_eq!(r.code(), 1, "{}", r.dump());
    r.assert_stderr_names("a.txt", &["does not match its descriptor"]);
    assert!(!out.join("a.txt").exists());
    assert_eq!(fs::read(out.join("c.txt")).unwrap(), b"c.txt".repeat(100));
    assert_eq!(all_paths(&out), ["b.txt", "c.txt"]);
}

/// A zip from a pipe that stores a name twice, far apart (the copies go to different writers):
/// the last copy wins, as bsdtar reading the same stream decides, whichever writer is first.
#[cfg(unix)] // python3 and bsdtar, which a Windows build under Wine cannot start
#[test]
fn a_piped_zip_storing_a_name_twice_keeps_the_last_copy() {
    let t = tempdir();
    let archive = t.join("twice.zip");
    let script = "import sys, warnings, zipfile\nwarnings.simplefilter('ignore')\nwith zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n z.writestr('d/twice.txt', 'first copy')\n for i in range(200): z.writestr(f'd/f{i}', bytes(range(256)) * 32)\n z.writestr('d/twice.txt', 'last copy')";
    run_tool("python3", &osv!["-c", script, &archive], None);
    let out = t.join("out");
    let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &archive);
    assert_eq!(r.code(), 0, "{}", r.dump());
    assert_eq!(
        fs::read_to_string(out.join("d/twice.txt")).unwrap(),
        "last copy"
    );
    assert_eq!(all_paths(&out.join("d")).len(), 201);
    let bsd = t.join("bsdtar");
    bsdtar_from_stdin(&archive, &bsd);
    assert_eq!(
        fs::read_to_string(bsd.join("d/twice.txt")).unwrap(),
        "last copy"
    );
}

/// A zip through a pipe (`curl ... | fastwrite extract - -o out`), read by its local headers:
/// the same tree as from the file, Unix modes and symlinks included (from the central
/// directory, applied at the end), and the same as `bsdtar -xf -`. Made by Info-ZIP (sizes in
/// the local headers) and by Python writing to a stream it cannot seek (data descriptors).
#[cfg(unix)] // Info-ZIP, python3 and bsdtar, which a Windows build under Wine cannot start
#[test]
fn a_zip_through_a_pipe_is_the_zip_from_its_file() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    project_tree(&src);
    let info = t.join("info.zip");
    infozip_dir(&src, &info, &[]);
    let streamed = t.join("streamed.zip");
    let script = "import io, os, sys, zipfile\nclass Pipe(io.RawIOBase):\n def __init__(s, f): s.f = f\n def writable(s): return True\n def write(s, b): return s.f.write(b)\nwith open(sys.argv[1], 'wb') as raw, zipfile.ZipFile(Pipe(raw), 'w', zipfile.ZIP_DEFLATED) as z:\n for d, ds, fs in sorted(os.walk(sys.argv[2])):\n  ds.sort()\n  for f in sorted(fs):\n   p = os.path.join(d, f)\n   if not os.path.islink(p): z.write(p, os.path.relpath(p, sys.argv[2]))";
    run_tool("python3", &osv!["-c", script, &streamed, &src], None);
    let descriptors = fs::read(&streamed).unwrap();
    assert_eq!(descriptors[6] & 8, 8, "Python wrote data descriptors");
    for archive in [&info, &streamed] {
        let what = archive.file_name().unwrap().to_string_lossy().into_owned();
        let from_file = t.join(format!("{what}-file"));
        assert_eq!(extract(archive, &from_file, &[]).code(), 0);
        let piped = t.join(format!("{what}-pipe"));
        let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &piped], archive);
        assert_eq!(r.code(), 0, "{what}: {}", r.dump());
        let compare = Compare {
            hardlinks: false,
            // Python stores no folders: each run makes them, at its own time.
            dir_mtimes: what == "info.zip",
            ..Compare::strict()
        };
        assert_same_tree(
            &from_file,
            &piped,
            &compare,
            &format!("{what}: pipe vs file"),
        );
        let bsd = t.join(format!("{what}-bsdtar"));
        bsdtar_from_stdin(archive, &bsd);
        assert_same_tree(
            &bsd,
            &piped,
            &compare,
            &format!("{what}: pipe vs bsdtar -xf -"),
        );
    }
    // Selection and stripping work on a pipe too.
    let some = t.join("some");
    let r = run_fastwrite_piped(
        &osv![
            "extract",
            "-",
            "-o",
            &some,
            "project-1.2/docs",
            "--strip-components",
            "1"
        ],
        &info,
    );
    assert_eq!(r.code(), 0, "{}", r.dump());
    assert_eq!(fs::read_to_string(some.join("docs/a.md")).unwrap(), "a");
    assert!(!some.join("README.md").exists() && !some.join("src").exists());
}

/// A symlink in a piped zip is a file until the central directory says it is a link; one
/// pointing out of OUT is then refused, and nothing of it is left.
#[cfg(unix)] // python3
#[test]
fn a_piped_zip_symlink_out_of_the_output_is_refused() {
    let t = tempdir();
    let archive = t.join("evil.zip");
    let script = "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n i = zipfile.ZipInfo('escape'); i.create_system = 3; i.external_attr = 0o120777 << 16\n z.writestr(i, '../../outside')\n j = zipfile.ZipInfo('fine'); j.create_system = 3; j.external_attr = 0o120777 << 16\n z.writestr(j, 'ok.txt')\n z.writestr('ok.txt', 'ok')";
    run_tool("python3", &osv!["-c", script, &archive], None);
    let out = t.join("out");
    let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &archive);
    assert_eq!(r.code(), 1, "{}", r.dump());
    assert!(r.stderr.contains("'escape': refused"), "{}", r.dump());
    assert!(
        fs::symlink_metadata(out.join("escape")).is_err(),
        "nothing left of it"
    );
    assert_eq!(
        fs::read_link(out.join("fine")).unwrap(),
        Path::new("ok.txt")
    );
    assert_eq!(fs::read_to_string(out.join("fine")).unwrap(), "ok");
}

/// On a terminal, an encrypted zip without a password asks for one, without echo (through a
/// pseudo-terminal made by Python's `pty`): the right answer extracts it.
#[cfg(unix)] // python3's pty, and zip
#[test]
fn the_password_prompt_asks_on_a_terminal() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("secret.txt"), "inside").unwrap();
    let archive = t.join("secret.zip");
    run_tool(
        "zip",
        &osv!["-q", "-P", "hunter2", &archive, "secret.txt"],
        Some(&src),
    );
    let out = t.join("out");
    // Runs fastwrite on a pty, answers the prompt once it shows, prints what the pty showed.
    let script = r#"
import os, pty, sys, termios, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:2] + ["extract", sys.argv[2], "-o", sys.argv[3], "-q"])
seen, answered, deadline = b"", False, time.time() + 30
while time.time() < deadline:
    try:
        chunk = os.read(fd, 1024)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
    if not answered and b"password:" in seen:
        # Typed once the terminal stops echoing, as a person would be slower than that.
        while termios.tcgetattr(fd)[3] & termios.ECHO and time.time() < deadline:
            time.sleep(0.01)
        os.write(fd, b"hunter2\n"); answered = True
_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let r = run_tool("python3", &osv!["-c", script, BIN, &archive, &out], None);
    assert!(
        r.stdout.contains("the zip is encrypted; password:"),
        "{}",
        r.dump()
    );
    assert!(
        !r.stdout.contains("hunter2"),
        "the password was echoed\n{}",
        r.dump()
    );
    assert_eq!(
        fs::read_to_string(out.join("secret.txt")).unwrap(),
        "inside"
    );
}

/// Issue 26, item 10: a name stored twice is named in the warning (it said "some entries"),
/// and the last entry of the name is the one extracted, as unzip and bsdtar extract it.
#[test]
fn names_stored_twice_are_named_and_the_last_wins() {
    let t = tempdir();
    let archive = t.join("twice.zip");
    crate_zip(
        &archive,
        &[
            Z::File("a.txt", b"first".to_vec(), 0o644, STORED),
            Z::File("c.txt", b"cee".to_vec(), 0o644, STORED),
            Z::File("b.txt", b"second".to_vec(), 0o644, STORED),
        ],
    );
    // The zip crate writes no name twice: b.txt becomes a.txt in its local header and its
    // central directory record (same length; no checksum covers names).
    let bytes = fs::read(&archive).unwrap();
    let mut patched = Vec::with_capacity(bytes.len());
    let mut rest = &bytes[..];
    while let Some(at) = rest.windows(5).position(|w| w == b"b.txt") {
        patched.extend_from_slice(&rest[..at]);
        patched.extend_from_slice(b"a.txt");
        rest = &rest[at + 5..];
    }
    patched.extend_from_slice(rest);
    fs::write(&archive, patched).unwrap();
    let out = t.join("out");
    let r = run_fastwrite(&osv!["extract", &archive, "-o", &out]);
    r.assert_code(0);
    assert!(
        r.stderr
            .contains("names some entries more than once ('a.txt')"),
        "{}",
        r.dump()
    );
    assert_eq!(fs::read(out.join("a.txt")).unwrap(), b"second");
    assert_eq!(fs::read(out.join("c.txt")).unwrap(), b"cee");
}

// -------------------------------------------------------------------------------------------
// A zip from a pipe that loses nothing a file keeps (issue 35, items 16-19)
// -------------------------------------------------------------------------------------------

/// An archive of the differential corpus (`tests/data/corpus`, sources in SOURCE.md there).
#[cfg(unix)] // used by unix-only tests
#[track_caller]
fn corpus(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/corpus")
        .join(name);
    assert!(p.is_file(), "corpus archive {} is missing", p.display());
    p
}

/// Extracts `archive` from its file and through a pipe into `t`; returns both runs and their
/// folders.
#[cfg(unix)] // used by unix-only tests
#[track_caller]
fn file_and_pipe(t: &Path, archive: &Path) -> (Output, PathBuf, Output, PathBuf) {
    let what = archive.file_name().unwrap().to_string_lossy().into_owned();
    let from_file = t.join(format!("{what}-file"));
    let file = extract(archive, &from_file, &[]);
    let from_pipe = t.join(format!("{what}-pipe"));
    let pipe = run_fastwrite_piped(&osv!["extract", "-", "-o", &from_pipe], archive);
    (file, from_file, pipe, from_pipe)
}

/// One stored entry of a zip built byte by byte ([`hand_zip`]): what its local header and its
/// central record say, each free to differ from the other.
#[cfg_attr(not(unix), allow(dead_code))] // used by unix-only tests
struct Hand<'a> {
    local_name: &'a [u8],
    central_name: &'a [u8],
    data: &'a [u8],
    /// "Version made by"'s host: 0 MS-DOS, 3 Unix.
    host: u8,
    external: u32,
    central_extra: Vec<u8>,
}

#[cfg_attr(not(unix), allow(dead_code))] // used by unix-only tests
impl<'a> Hand<'a> {
    /// A file made on Unix, mode 0644, the same name in both headers.
    fn file(name: &'a [u8], data: &'a [u8]) -> Self {
        Hand {
            local_name: name,
            central_name: name,
            data,
            host: 3,
            external: 0o100_644 << 16,
            central_extra: Vec::new(),
        }
    }
}

/// A zip of stored entries, each local header then its data, then the central directory and
/// its end record, as `entries` say (2021-03-04 05:06:08, DOS time).
#[cfg_attr(not(unix), allow(dead_code))] // used by unix-only tests
fn hand_zip(entries: &[Hand]) -> Vec<u8> {
    const TIME: u16 = 5 << 11 | 6 << 5 | 4;
    const DATE: u16 = 41 << 9 | 3 << 5 | 4;
    let mut zip = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let crc = crc32fast::hash(e.data);
        let size = e.data.len() as u32;
        let offset = zip.len() as u32;
        zip.extend(b"PK\x03\x04");
        for n in [20u16, 0, 0, TIME, DATE] {
            zip.extend(n.to_le_bytes());
        }
        for n in [crc, size, size] {
            zip.extend(n.to_le_bytes());
        }
        zip.extend((e.local_name.len() as u16).to_le_bytes());
        zip.extend(0u16.to_le_bytes());
        zip.extend(e.local_name);
        zip.extend(e.data);
        central.extend(b"PK\x01\x02");
        for n in [u16::from(e.host) << 8 | 20, 20, 0, 0, TIME, DATE] {
            central.extend(n.to_le_bytes());
        }
        for n in [crc, size, size] {
            central.extend(n.to_le_bytes());
        }
        let lengths = [e.central_name.len(), e.central_extra.len(), 0, 0, 0];
        for n in lengths {
            central.extend((n as u16).to_le_bytes());
        }
        central.extend(e.external.to_le_bytes());
        central.extend(offset.to_le_bytes());
        central.extend(e.central_name);
        central.extend(&e.central_extra);
    }
    let start = zip.len() as u32;
    zip.extend(&central);
    zip.extend(b"PK\x05\x06");
    zip.extend([0; 4]);
    let count = entries.len() as u16;
    zip.extend(count.to_le_bytes());
    zip.extend(count.to_le_bytes());
    zip.extend((central.len() as u32).to_le_bytes());
    zip.extend(start.to_le_bytes());
    zip.extend(0u16.to_le_bytes());
    zip
}

/// Item 16: stored entries whose size follows their data (what Python writes to a stream it
/// cannot seek) end at the descriptor that states their CRC-32 and size: a descriptor's
/// signature inside the data, stating something else, is data. A large one is written as it
/// is scanned (past the memory a small file may take), and one whose descriptor never comes
/// leaves nothing behind.
#[cfg(unix)] // python3
#[test]
fn a_piped_stored_entry_ends_at_the_descriptor_that_states_it() {
    let t = tempdir();
    let archive = t.join("stored-dd.zip");
    let mut tricky = b"before ".to_vec();
    // A descriptor's signature and a plausible one, of 3 bytes with a wrong CRC.
    tricky.extend(b"PK\x07\x08\x01\x02\x03\x04\x03\0\0\0\x03\0\0\0PK\x03\x04 after");
    let big: Vec<u8> = (0..3u32 << 20)
        .map(|i| if i % 4099 == 0 { b'P' } else { (i % 251) as u8 })
        .collect();
    let entries = [
        PyEntry::file("first.txt", b"first".to_vec(), 0o644).method("stored"),
        PyEntry::file("tricky.bin", tricky.clone(), 0o644).method("stored"),
        PyEntry::file("dir/big.bin", big.clone(), 0o644).method("stored"),
        PyEntry::file("empty", Vec::new(), 0o644).method("stored"),
        PyEntry::file("last.txt", b"last".to_vec(), 0o600).method("stored"),
    ];
    python_zip(&archive, &entries, true);
    let bytes = fs::read(&archive).unwrap();
    for entry in &entries {
        let at = local_header_offset(&bytes, &entry.name);
        assert_eq!(bytes[at + 6] & 8, 8, "a data descriptor for {}", entry.name);
    }
    let (file, from_file, pipe, from_pipe) = file_and_pipe(t.path(), &archive);
    file.assert_success();
    assert_eq!(pipe.code(), 0, "{}", pipe.dump());
    assert_same_tree(
        &from_file,
        &from_pipe,
        &Compare::exact().files_metadata_only(),
        "stored entries with descriptors: pipe vs file",
    );
    assert_eq!(fs::read(from_pipe.join("tricky.bin")).unwrap(), tricky);
    assert_eq!(fs::read(from_pipe.join("dir/big.bin")).unwrap(), big);

    // The big entry's descriptor no longer states its data: the stream cannot tell where it
    // ends, so it fails, named, nothing of it is left (through the small memory budget, it
    // was being written as it was scanned), and what came before it stays.
    let mut broken = bytes.clone();
    let data = local_data_offset(&broken, "dir/big.bin");
    let descriptor = data + big.len();
    assert_eq!(&broken[descriptor..descriptor + 4], b"PK\x07\x08");
    broken[descriptor + 4] ^= 0xff;
    let archive = t.join("broken.zip");
    fs::write(&archive, &broken).unwrap();
    let out = t.join("broken-pipe");
    let r = run_fastwrite_piped(
        &osv!["extract", "-", "-o", &out, "--memory-budget", "4"],
        &archive,
    );
    assert_eq!(r.code(), 1, "{}", r.dump());
    r.assert_stderr_names("dir/big.bin", &["no data descriptor stating"]);
    assert!(!out.join("dir/big.bin").exists(), "{:?}", all_paths(&out));
    assert_eq!(fs::read(out.join("tricky.bin")).unwrap(), tricky);

    // The peers' own: libarchive's unzip test zips, commons-compress's (whose local header
    // disagrees with its central record on the sizes, so no reference reads it from a file).
    for name in [
        "la__unzip__test__test_f_new.zip",
        "la__unzip__test__test_u_old.zip",
        "la__unzip__test__test_symlink_2.zip",
    ] {
        let (file, from_file, pipe, from_pipe) = file_and_pipe(t.path(), &corpus(name));
        assert_eq!((pipe.code(), file.code()), (0, 0), "{}", pipe.dump());
        assert_same_tree(&from_file, &from_pipe, &Compare::content_only(), name);
    }
    let out = t.join("bla");
    let r = run_fastwrite_piped(
        &osv!["extract", "-", "-o", &out],
        &corpus("cc__src__test__resources__bla-stored-dd.zip"),
    );
    assert_eq!(r.code(), 0, "{}", r.dump());
    assert_eq!(fs::read(out.join("test1.xml")).unwrap().len(), 610);
    assert_eq!(fs::read(out.join("test2.xml")).unwrap().len(), 82);
}

/// Item 17: what only the central directory knows puts right what a pipe wrote by the local
/// headers: names that are not UTF-8 (cp866, koi8-r, Shift-JIS with its `\` bytes) end as the
/// same zip from its file has them, byte for byte, folders and all; a folder marked only by its
/// MS-DOS attribute is a folder, with what is below it.
#[cfg(unix)] // names that are not UTF-8
#[test]
fn a_piped_zip_takes_the_names_and_folders_its_central_directory_gives() {
    let t = tempdir();
    for name in [
        "la__libarchive__test__test_read_format_zip_filename_cp866.zip",
        "la__libarchive__test__test_read_format_zip_filename_koi8r.zip",
        "la__libarchive__test__test_read_format_zip_filename_cp932.zip",
        "la__libarchive__test__test_read_format_zip_filename_utf8_ru2.zip",
        "la__libarchive__test__test_read_format_zip_msdos.zip",
        "cc__src__test__resources__utf8-winzip-test.zip",
    ] {
        let (file, from_file, pipe, from_pipe) = file_and_pipe(t.path(), &corpus(name));
        assert_eq!((pipe.code(), file.code()), (0, 0), "{}", pipe.dump());
        assert_same_tree(&from_file, &from_pipe, &Compare::content_only(), name);
    }
    // Made here: a Unix zip's cp866 name in a folder of the same, MS-DOS folders without `/`
    // (one with a file below it, one empty), as unzip, bsdtar and 7-Zip read them.
    let archive = t.join("legacy.zip");
    let folder = |name: &'static [u8]| Hand {
        host: 0,
        external: 0x10,
        ..Hand::file(name, b"")
    };
    let zip = hand_zip(&[
        Hand::file(b"\x8f\xa0\xaf\xaa\xa0/\x94\xa0\xa9\xab.txt", b"cp866"),
        folder(b"dos"),
        Hand::file(b"dos/inside.txt", b"inside"),
        folder(b"empty"),
        Hand::file(b"plain.txt", b"plain"),
    ]);
    fs::write(&archive, zip).unwrap();
    let (file, from_file, pipe, from_pipe) = file_and_pipe(t.path(), &archive);
    assert_eq!((pipe.code(), file.code()), (0, 0), "{}", pipe.dump());
    assert_same_tree(
        &from_file,
        &from_pipe,
        &Compare::content_only(),
        "made here",
    );
    use std::os::unix::ffi::OsStrExt;
    let raw = std::ffi::OsStr::from_bytes(b"\x8f\xa0\xaf\xaa\xa0/\x94\xa0\xa9\xab.txt");
    assert_eq!(fs::read(from_pipe.join(raw)).unwrap(), b"cp866");
    assert!(from_pipe.join("empty").is_dir() && from_pipe.join("dos").is_dir());
    assert_eq!(children(&from_pipe).len(), 4, "{:?}", all_paths(&from_pipe));
}

/// Item 17, the same checks as every name: a central record that names its entry otherwise
/// than the local header (other bytes) is refused, as from a file, and so is one whose name
/// (here from a Unicode Path field only the central record has) leaves OUT; what the pipe wrote
/// under the local name is removed in both cases, and nothing is written outside.
#[cfg(unix)] // checks outside OUT by path
#[test]
fn a_piped_entry_its_central_record_names_otherwise_is_refused_and_removed() {
    let t = tempdir();
    let archive = t.join("two-faced.zip");
    // A Unicode Path field: version 1, the CRC-32 of the name it replaces, the name.
    let mut escape = vec![0x75, 0x70];
    let unicode = b"../escape.txt";
    escape.extend(((5 + unicode.len()) as u16).to_le_bytes());
    escape.push(1);
    escape.extend(crc32fast::hash(b"safe.txt").to_le_bytes());
    escape.extend(unicode);
    let zip = hand_zip(&[
        Hand {
            central_name: b"other.txt",
            ..Hand::file(b"local.txt", b"two faces")
        },
        Hand {
            central_extra: escape,
            ..Hand::file(b"safe.txt", b"escaping")
        },
        Hand::file(b"kept.txt", b"kept"),
    ]);
    fs::write(&archive, zip).unwrap();
    let (file, from_file, pipe, from_pipe) = file_and_pipe(t.path(), &archive);
    assert_eq!((pipe.code(), file.code()), (1, 1), "{}", pipe.dump());
    file.assert_stderr_names("other.txt", &["local header names 'local.txt'"]);
    pipe.assert_stderr_names("other.txt", &["local header names 'local.txt'"]);
    assert!(
        pipe.stderr_lines_with("escape.txt")
            .iter()
            .any(|l| l.contains("refused") && l.contains("escapes")),
        "{}",
        pipe.dump()
    );
    assert_eq!(children(&from_pipe), ["kept.txt"]);
    assert_same_tree(&from_file, &from_pipe, &Compare::content_only(), "refused");
    assert!(!t.join("escape.txt").exists());
}

/// Item 18: a zip behind a self-extractor's program or padding, read from a pipe, is found by
/// its first local header, as from its file (where the central directory finds it), with a
/// warning saying how much was passed over; a split archive's marker says nothing.
#[cfg(unix)] // used by unix-only tests
#[test]
fn a_piped_zip_behind_a_self_extractor_or_padding_is_read() {
    let t = tempdir();
    for (name, skipped) in [
        ("la__libarchive__test__test_read_format_zip_sfx", Some(1024)),
        (
            "la__libarchive__test__test_read_format_zip_padded1.zip",
            Some(89),
        ),
        ("la__libarchive__test__test_compat_zip_4.zip", Some(511)),
        ("z2__tests__data__zip64_demo.zip", Some(14)),
        ("cc__src__test__resources__COMPRESS-208.zip", None),
    ] {
        let (file, from_file, pipe, from_pipe) = file_and_pipe(t.path(), &corpus(name));
        assert_eq!((pipe.code(), file.code()), (0, 0), "{}", pipe.dump());
        assert_same_tree(&from_file, &from_pipe, &Compare::content_only(), name);
        let said = pipe.stderr_lines_with("before the zip's first local header");
        match skipped {
            Some(n) => assert!(
                said.iter().any(|l| l.contains(&format!("{n} bytes"))),
                "{name}\n{}",
                pipe.dump()
            ),
            None => assert!(said.is_empty(), "{name}\n{}", pipe.dump()),
        }
    }
}

/// Item 18, bounded: a zip whose first local header comes after more than 512 KiB is not
/// looked for (from its file, the central directory still finds it), and bytes that merely
/// hold a local header's signature are not taken for a zip: both are refused for what they
/// are, as before.
#[cfg(unix)] // used by unix-only tests
#[test]
fn a_piped_input_is_taken_for_a_zip_only_within_the_bound() {
    let t = tempdir();
    let zip = hand_zip(&[Hand::file(b"a.txt", b"a")]);
    let mut far = vec![0xa5u8; 600 << 10];
    far.extend(&zip);
    let archive = t.join("far.zip");
    fs::write(&archive, &far).unwrap();
    let (file, _, pipe, _) = file_and_pipe(t.path(), &archive);
    file.assert_success();
    assert_eq!(pipe.code(), 2, "{}", pipe.dump());
    assert!(
        pipe.stderr.contains("not an archive fastwrite knows"),
        "{}",
        pipe.dump()
    );
    // A signature with no header a writer makes after it (a reserved flag, an odd method).
    let mut junk = b"\x01\x02\x03 some program PK\x03\x04\x14\0\xff\xff\x63\x00".to_vec();
    junk.extend([0x11u8; 4096]);
    let archive = t.join("junk.bin");
    fs::write(&archive, &junk).unwrap();
    let out = t.join("junk-out");
    let pipe = run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &archive);
    assert_eq!(pipe.code(), 2, "{}", pipe.dump());
    assert!(
        pipe.stderr.contains("not an archive fastwrite knows"),
        "{}",
        pipe.dump()
    );
}

/// Item 19: zip64 in a stream (8-byte sizes in a descriptor that no zip64 field announces;
/// sizes in a local header's zip64 field) gives what the file gives; a zip64 field shorter
/// than its record needs is read as unzip reads it, from a file and a pipe alike; a central
/// directory a stream reaches damaged (bytes after the end record) leaves every entry written
/// and checked, exit 0, with a warning naming the damage, as `bsdtar -xf -` keeps them.
#[cfg(unix)] // used by unix-only tests
#[test]
fn a_piped_zip64_zip_or_damaged_central_directory_keeps_its_entries() {
    let t = tempdir();
    let (file, from_file, pipe, from_pipe) =
        file_and_pipe(t.path(), &corpus("yz__test__success__zip64.zip"));
    assert_eq!((pipe.code(), file.code()), (0, 0), "{}", pipe.dump());
    assert_same_tree(&from_file, &from_pipe, &Compare::content_only(), "zip64");
    assert_eq!(fs::read(from_pipe.join("test1.txt")).unwrap(), b"foo");
    // A zip64 field that declares fewer bytes than its record needs: its values read from the
    // bytes that follow it, as unzip reads them, from a file (a mended copy, said) and a pipe.
    for (name, declared) in [
        (
            "yz__test__failure__zip64 extended information extra field does not include compressed size.zip",
            15,
        ),
        (
            "yz__test__failure__zip64 extended information extra field does not include relative header offset.zip",
            23,
        ),
        (
            "yz__test__failure__zip64 extended information extra field does not include uncompressed size.zip",
            7,
        ),
    ] {
        let (file, from_file, pipe, from_pipe) = file_and_pipe(t.path(), &corpus(name));
        assert_eq!((pipe.code(), file.code()), (0, 0), "{}", file.dump());
        assert_eq!(all_paths(&from_pipe), ["empty.txt"]);
        assert_same_tree(&from_file, &from_pipe, &Compare::content_only(), name);
        let said = format!("'empty.txt' ({declared} of its 24 bytes)");
        assert_eq!(file.stderr_lines_with(&said).len(), 1, "{}", file.dump());
        assert!(
            pipe.stderr_lines_with("damaged").is_empty(),
            "{}",
            pipe.dump()
        );
    }
    for (name, after) in [
        ("z2__tests__data__comment_garbage.zip", 18),
        ("z2__tests__data__misaligned_comment.zip", 485),
    ] {
        let (file, from_file, pipe, from_pipe) = file_and_pipe(t.path(), &corpus(name));
        assert_eq!((pipe.code(), file.code()), (0, 0), "{}", pipe.dump());
        assert_same_tree(&from_file, &from_pipe, &Compare::content_only(), name);
        assert!(
            pipe.stderr
                .contains(&format!("{after} bytes follow the end record")),
            "{name}\n{}",
            pipe.dump()
        );
    }
}

/// Item 19: a stream cut inside its central directory keeps every entry (written and checked
/// before it), exit 0 with a warning, as `bsdtar -xf -` does (from its file the zip is refused
/// whole: no end record); an entry whose local header was damaged, passed over as bytes that
/// were no header, is lost, and the central directory names it: exit 1.
#[cfg(unix)] // used by unix-only tests
#[test]
fn a_piped_zip_cut_in_its_central_directory_keeps_its_entries_and_names_a_lost_one() {
    let t = tempdir();
    let zip = hand_zip(&[
        Hand::file(b"a.txt", b"a"),
        Hand::file(b"b.txt", b"b"),
        Hand::file(b"c.txt", b"c"),
    ]);
    let second_record = zip
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"PK\x01\x02")
        .nth(1)
        .unwrap()
        .0;
    let archive = t.join("cut.zip");
    fs::write(&archive, &zip[..second_record + 20]).unwrap();
    let out = t.join("cut");
    let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &archive);
    assert_eq!(r.code(), 0, "{}", r.dump());
    assert_eq!(all_paths(&out), ["a.txt", "b.txt", "c.txt"]);
    assert!(
        r.stderr
            .contains("the central directory is cut short in its record #2"),
        "{}",
        r.dump()
    );

    let mut lost = zip.clone();
    let at = local_header_offset(&lost, "b.txt");
    lost[at + 1] = b'X';
    let archive = t.join("lost.zip");
    fs::write(&archive, &lost).unwrap();
    let out = t.join("lost");
    let r = run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &archive);
    assert_eq!(r.code(), 1, "{}", r.dump());
    r.assert_stderr_names("b.txt", &["no local header"]);
    assert_eq!(all_paths(&out), ["a.txt", "c.txt"]);
}
