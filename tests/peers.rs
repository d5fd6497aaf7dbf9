//! The peers' own test archives (libarchive, Apache commons-compress, Go, node-tar and tar-rs,
//! byte for byte in `tests/data/peers`, each with its source and licence in SOURCE.md there):
//! each one that broke some extractor once, extracted by fastwrite and by the reference tools
//! that agree on it (GNU tar and bsdtar for a tar; Info-ZIP's unzip, bsdtar and 7-Zip for a
//! zip), and the trees compared. Where the references disagree, or fastwrite deliberately
//! differs (docs/security.md), the test says so and checks what fastwrite does instead.
//!
//! Archives that real tools make only with an option (pzstd's skippable frame, garbage after a
//! compressed stream) are made here by those tools.

#[macro_use]
mod common;

#[cfg(unix)] // the reference tools' arguments
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
#[cfg(unix)] // the reference tools
use std::process::Command;

use common::*;

/// A public test archive kept in the repository.
#[track_caller]
fn peer_archive(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/peers")
        .join(name);
    assert!(p.is_file(), "test archive {} is missing", p.display());
    p
}

/// A reference extractor.
#[cfg(unix)] // the reference tools are Unix programs, which a Windows build cannot start
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    GnuTar,
    Bsdtar,
    Unzip,
    SevenZip,
}

#[cfg(unix)] // see Tool
impl Tool {
    /// Extracts `archive` into the new folder `dest` with this tool, whatever its exit code
    /// (unzip and GNU tar exit non-zero on the warnings these archives earn); `None` if it
    /// gives no verdict (out of time or memory: `run_reference`).
    #[track_caller]
    fn extract(self, archive: &Path, dest: &Path) -> Option<Output> {
        fs::create_dir_all(dest).unwrap();
        let (program, args): (&str, Vec<OsString>) = match self {
            Tool::GnuTar => ("tar", osv!["-xpf", archive, "-C", dest]),
            Tool::Bsdtar => ("bsdtar", osv!["-xpf", archive, "-C", dest]),
            Tool::Unzip => ("unzip", osv!["-q", "-o", archive, "-d", dest]),
            Tool::SevenZip => {
                let mut out = OsString::from("-o");
                out.push(dest);
                ("7z", osv!["x", "-y", out, archive])
            }
        };
        require_tool(program);
        let mut cmd = Command::new(program);
        cmd.args(&args).env("TZ", TEST_TZ);
        run_reference(cmd)
    }
}

/// One public archive, what fastwrite must do with it, and the references that agree with it.
#[cfg(unix)] // see Tool
struct Case {
    archive: &'static str,
    /// fastwrite's exit code.
    code: i32,
    /// A warning fastwrite must print (empty: none expected).
    warning: &'static str,
    /// The references whose trees fastwrite's must equal.
    same_as: &'static [Tool],
    /// Compare modes and mtimes too (tars: GNU tar and bsdtar restore both as root).
    metadata: bool,
}

/// Extracts each case with fastwrite and with its references, and compares the trees.
#[cfg(unix)] // the reference tools are Unix programs, which a Windows build cannot start
#[track_caller]
fn check_cases(cases: &[Case]) {
    for case in cases {
        let archive = peer_archive(case.archive);
        let work = tempdir();
        let out = work.join("fastwrite");
        let got = extract(&archive, &out, &[]);
        got.assert_code(case.code);
        if !case.warning.is_empty() {
            assert!(
                !got.stderr_lines_with(case.warning).is_empty(),
                "{}: no warning saying {:?}\n{}",
                case.archive,
                case.warning,
                got.dump()
            );
        }
        for &tool in case.same_as {
            let reference = work.join(format!("{tool:?}"));
            let Some(made) = tool.extract(&archive, &reference) else {
                continue; // no verdict: fastwrite's own checks above still hold
            };
            // Files' modes and mtimes; not folders': a folder the archive implies has the time
            // it was made, which differs between two runs a second apart.
            let cmp = if case.metadata {
                Compare::exact().files_metadata_only()
            } else {
                Compare::content_only()
            };
            let diffs = diff_trees(&reference, &out, &cmp);
            assert!(
                diffs.is_empty(),
                "{}: fastwrite's tree differs from {tool:?}'s:\n{}\n{}\n{}",
                case.archive,
                diffs.join("\n"),
                got.dump(),
                made.dump()
            );
        }
    }
}

#[test]
#[cfg(unix)] // GNU tar and bsdtar, which a Windows build under Wine cannot start
fn tars_of_the_peers_extract_as_gnu_tar_and_bsdtar_extract_them() {
    use Tool::*;
    check_cases(&[
        // An old-style directory: a regular-file type whose name ends in '/', with a size of 1
        // and no data after it. The size used to swallow the next header.
        Case {
            archive: "test_compat_tar_directory_1.tar",
            code: 0,
            warning: "",
            same_as: &[GnuTar, Bsdtar],
            metadata: true,
        },
        // A size field of NULs then digits: 0, not 14.
        Case {
            archive: "test_read_format_tar_timestamp_overflow.tar",
            code: 0,
            warning: "",
            same_as: &[GnuTar, Bsdtar],
            metadata: true,
        },
        // A pax record without its newline: both references extract it, with a warning.
        Case {
            archive: "test_read_pax_empty_val_no_nl.tar",
            code: 0,
            warning: "does not end with a newline",
            same_as: &[GnuTar, Bsdtar],
            metadata: true,
        },
        // A malformed pax mtime: the number it starts with, as both references take it.
        Case {
            archive: "pax-bad-mtime-file.tar",
            code: 0,
            warning: "its pax mtime '999xxx9324.432432444444' is malformed; '999' is used",
            same_as: &[GnuTar, Bsdtar],
            metadata: true,
        },
        // GNU sparse 1.0 maps that begin with comment lines, as libarchive's test modifies
        // them (GNU tar: "malformed sparse archive member").
        Case {
            archive: "test_read_format_gtar_sparse_1_17_posix10_modified.tar",
            code: 0,
            warning: "",
            same_as: &[Bsdtar],
            metadata: true,
        },
        // 51 bytes of garbage after the gzip stream, after a complete tar: every entry, and
        // a warning (GNU tar: "trailing garbage ignored").
        Case {
            archive: "test_compat_gzip_2.tgz",
            code: 0,
            warning: "51 byte(s) after the end of the gzip data",
            same_as: &[GnuTar, Bsdtar],
            metadata: true,
        },
    ]);
}

#[test]
#[cfg(unix)] // unzip, bsdtar and 7z, which a Windows build under Wine cannot start
fn zips_of_the_peers_extract_as_the_references_agree() {
    use Tool::*;
    check_cases(&[
        // `def` and `jkl` carry the MS-DOS directory attribute and no '/': folders for bsdtar
        // and 7-Zip (unzip makes files, then cannot put `def/foo` below one).
        Case {
            archive: "test_read_format_zip_msdos.zip",
            code: 0,
            warning: "",
            same_as: &[Bsdtar, SevenZip],
            metadata: false,
        },
        // `META-INF/maven/` with Unix mode 0o177777: a folder, not a symlink.
        Case {
            archive: "COMPRESS-379.jar",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
        // Legacy methods: imploded (6) and shrunk (1). bsdtar cannot read them.
        Case {
            archive: "imploding-4Kdict-2trees.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, SevenZip],
            metadata: false,
        },
        Case {
            archive: "imploding-8Kdict-3trees.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, SevenZip],
            metadata: false,
        },
        Case {
            archive: "SHRUNK.ZIP",
            code: 0,
            warning: "",
            same_as: &[Unzip, SevenZip],
            metadata: false,
        },
        // Names in legacy encodings without the UTF-8 flag: the raw bytes, as all three keep
        // them (the cp932 one has a 0x5C byte inside a character: not a separator).
        Case {
            archive: "test_read_format_zip_filename_cp866.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
        Case {
            archive: "test_read_format_zip_filename_koi8r.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
        Case {
            archive: "test_read_format_zip_filename_cp932.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
        // A second end record hidden before the last, whose comment runs past the end of the
        // file: the last one is read, and `FILE` extracted (not the hidden archive's `file`).
        Case {
            archive: "comment-truncated.zip",
            code: 0,
            warning: "comment is cut short",
            same_as: &[Unzip, Bsdtar],
            metadata: false,
        },
        // An APK signing block between the entries and the central directory; two stray
        // bytes after each entry's data.
        Case {
            archive: "slice_0.apk",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
        Case {
            archive: "archive_with_bytes_after_data.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, SevenZip],
            metadata: false,
        },
        // Central records the zip crate refuses whole and unzip and 7-Zip read past: an empty
        // extended timestamp, a field longer than what is left of its record (bsdtar refuses
        // both). Read from a mended copy of the directory, the fields passed over, said.
        Case {
            archive: "extended_timestamp_bad.zip",
            code: 0,
            warning: "(an empty extended timestamp)",
            same_as: &[Unzip, SevenZip],
            metadata: false,
        },
        Case {
            archive: "yauzl_extra_field_length_exceeds_extra_field_buffer_size.zip",
            code: 0,
            warning: "(field 0x7875 runs past its record)",
            same_as: &[Unzip, SevenZip],
            metadata: false,
        },
        // A single-disk zip whose end record says disk 1 (7-Zip asks for the missing volume).
        Case {
            archive: "yauzl_multi_disk_found_disk_number_1.zip",
            code: 0,
            warning: "says it is disk 1 of a split archive",
            same_as: &[Bsdtar, Unzip],
            metadata: false,
        },
        // Zip64 extra fields holding only the saturated values (APPNOTE 4.5.3).
        Case {
            archive: "zip64_extra_only_usize.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
        Case {
            archive: "zip64_extra_only_csize.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
        Case {
            archive: "zip64_extra_both_sizes.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
        Case {
            archive: "zip64_extra_only_offset.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
        Case {
            archive: "zip64_local_and_central_both_sizes.zip",
            code: 0,
            warning: "",
            same_as: &[Unzip, Bsdtar, SevenZip],
            metadata: false,
        },
    ]);
}

/// libarchive's `extra_padding` zip has no end record (its signature is damaged): refused from
/// a file, as Info-ZIP's unzip refuses it (a zip cut short has none either, and is better said
/// before anything is written); read by its local headers from a pipe, as bsdtar reads it.
#[test]
#[cfg(unix)] // bsdtar and a shell pipe, which a Windows build under Wine cannot use
fn a_zip_without_its_end_record_is_refused_from_a_file_and_read_from_a_pipe() {
    let archive = peer_archive("test_read_format_zip_extra_padding.zip");
    let work = tempdir();
    let refused = extract(&archive, &work.join("file"), &[]);
    refused.assert_code(2);
    assert!(
        refused
            .stderr
            .contains("cannot be read (cut short, or damaged)"),
        "{}",
        refused.dump()
    );
    let piped = work.join("pipe");
    let cmd = fastwrite_command(&osv!["extract", "-", "-o", &piped]);
    run_command_feeding(cmd, fs::read(&archive).unwrap()).assert_code(0);
    let reference = work.join("bsdtar");
    if Tool::Bsdtar.extract(&archive, &reference).is_some() {
        assert!(diff_trees(&reference, &piped, &Compare::content_only()).is_empty());
    }
}

/// The old Info-ZIP Unix extra field's mtime is a point in time: the same in any time zone,
/// where the DOS time is local (the entry's DOS time is 9 hours off in Tokyo).
#[test]
#[cfg(unix)] // unzip, which a Windows build under Wine cannot start
fn the_old_unix_extra_field_gives_the_mtime_in_any_time_zone() {
    let archive = peer_archive("time-osx.zip");
    let work = tempdir();
    for tz in ["UTC0", "JST-9"] {
        let out = work.join(format!("fastwrite-{tz}"));
        let args = osv!["extract", &archive, "-o", &out];
        run_fastwrite_env(&args, &[("TZ", tz)]).assert_success();
        let reference = work.join(format!("unzip-{tz}"));
        require_tool("unzip");
        let mut unzip = Command::new("unzip");
        unzip
            .args(osv!["-q", &archive, "-d", &reference])
            .env("TZ", tz);
        run_command(unzip);
        assert_eq!(mtime_of(&out.join("test.txt")), 1_509_509_517, "TZ={tz}");
        assert_eq!(
            mtime_of(&out.join("test.txt")),
            mtime_of(&reference.join("test.txt")),
            "TZ={tz}"
        );
    }
}

#[test]
fn strong_encryption_is_named_not_taken_for_a_wrong_password() {
    let work = tempdir();
    // Entries encrypted with PKWARE's strong encryption (flag bit 6), with and without a
    // password given: neither asks for one nor blames it.
    for flags in [&[][..], &["--password", "12345678"]] {
        let out = work.join(format!("data{}", flags.len()));
        let got = extract(
            &peer_archive("test_read_format_zip_encryption_data.zip"),
            &out,
            flags,
        );
        got.assert_code(1);
        for entry in ["foo.txt", "bar.txt"] {
            got.assert_stderr_names(entry, &["PKWARE's strong encryption"]);
        }
        assert!(
            got.stderr_lines_with("password")
                .iter()
                .all(|l| !l.contains("wrong"))
        );
        assert!(all_paths(&out).is_empty(), "{:?}", all_paths(&out));
    }
    // Its central directory encrypted too: the archive is refused whole, and says why.
    let got = extract(
        &peer_archive("test_read_format_zip_encryption_header.zip"),
        &work.join("header"),
        &[],
    );
    got.assert_code(2);
    assert!(
        got.stderr
            .contains("central directory is encrypted with PKWARE's strong encryption"),
        "{}",
        got.dump()
    );
}

/// node-tar's `excessively-deep.tar`: one file 222,370 folders down (a 444 KB path). It
/// overflowed a writer's stack (SIGABRT). Now the entry is refused, said, and nothing is left of
/// it.
#[test]
fn a_path_deeper_than_the_limit_is_refused_not_a_crash() {
    let work = tempdir();
    let out = work.join("out");
    let got = extract(&peer_archive("excessively-deep.tar"), &out, &[]);
    got.assert_code(1);
    assert!(
        got.stderr.contains("longer than 8192 bytes"),
        "{}",
        got.dump()
    );
    // Counted in words a person reads ("1 entries" before).
    assert!(
        got.stderr.contains("1 entry failed; 0 files written"),
        "{}",
        got.dump()
    );
    assert!(all_paths(&out).is_empty(), "{:?}", all_paths(&out));
}

/// A path thousands of folders deep, past PATH_MAX (4,096 bytes), is written, as bsdtar writes
/// it (GNU tar fails: "File name too long"), each folder made from its parent's held open; a
/// sibling longer than 8 KiB is refused (the memory a chain of folders costs is bounded).
#[test]
#[cfg(unix)] // a 6 KB path: past what Windows takes without its long-path prefix
fn a_path_thousands_of_folders_deep_is_extracted() {
    let work = tempdir();
    let at_limit = format!("{}/f.txt", vec!["d"; 3000].join("/"));
    let deeper = format!("{}/g.txt", vec!["e"; 8200].join("/"));
    let archive = work.join("deep.tar");
    fs::write(
        &archive,
        crate_tar(&[(at_limit.as_str(), b"deep"), (deeper.as_str(), b"deeper")]),
    )
    .unwrap();
    let out = work.join("out");
    let got = extract(&archive, &out, &[]);
    got.assert_code(1);
    got.assert_stderr_names(&deeper, &["longer than 8192 bytes"]);
    // Read back a folder at a time: the whole path is more than open(2) takes.
    let mut dir = fs::File::open(&out).unwrap();
    for _ in 0..3000 {
        dir = open_at(&dir, "d");
    }
    let mut deep = String::new();
    std::io::Read::read_to_string(&mut open_at(&dir, "f.txt"), &mut deep).unwrap();
    assert_eq!(deep, "deep");
    assert!(!out.join("e").exists());
}

/// tar-rs's `sparse-large.tar`: a 12.6 GB sparse file holding 1.6 KB of data. Its holes are
/// skipped with a seek, never read as zeros (bsdtar: 0.04 s; fastwrite took 7-10 s of CPU
/// writing zeros before), and the file occupies what its data does.
#[test]
#[cfg(unix)] // GNU tar and python3 (SEEK_DATA), which a Windows build under Wine cannot use
fn a_huge_sparse_file_is_written_as_its_data_and_holes() {
    let archive = peer_archive("sparse-large.tar");
    let work = tempdir();
    let out = work.join("fastwrite");
    extract(&archive, &out, &[]).assert_success();
    let got = out.join("huge");
    let meta = meta_of(&got);
    assert_eq!(meta.len, 12_626_929_280);
    assert!(
        meta.disk_bytes < 1 << 20,
        "{} bytes on disk",
        meta.disk_bytes
    );
    let reference = work.join("tar");
    let Some(made) = Tool::GnuTar.extract(&archive, &reference) else {
        return; // no verdict from GNU tar: fastwrite's own checks above hold
    };
    made.assert_success();
    let want = reference.join("huge");
    assert_eq!(meta.len, meta_of(&want).len);
    assert_eq!(data_regions(&got), data_regions(&want));
}

/// The data of a sparse file, region by region (offset and bytes, hex), as SEEK_DATA finds it.
#[cfg(unix)] // python3
fn data_regions(path: &Path) -> String {
    let script = r#"
import os, sys, hashlib
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
at = 0
while at < size:
    try:
        start = os.lseek(fd, at, os.SEEK_DATA)
    except OSError:
        break
    end = os.lseek(fd, start, os.SEEK_HOLE)
    data = os.pread(fd, end - start, start).rstrip(b"\0")
    if data:
        print(start, hashlib.sha256(data).hexdigest())
    at = end
"#;
    let out = run_tool("python3", &osv!["-c", script, path], None);
    out.stdout
}

/// libarchive's `test_read_format_gtar_sparse_skip_entry` (decompressed from its `.tar.Z`):
/// a pax sparse file whose map holds one byte less than the archive stores. bsdtar refuses
/// the archive; GNU tar extracts both entries, and so does fastwrite (the file's length is its
/// header's real size, one byte past the end of the map's last run, where GNU tar stops).
#[test]
#[cfg(unix)] // gzip -d reads .Z; GNU tar: Unix programs
fn a_sparse_map_shorter_than_its_data_extracts_both_entries() {
    let work = tempdir();
    let archive = work.join("sparse_skip.tar");
    let tar = run_tool(
        "sh",
        &osv![
            "-c",
            "gzip -dc \"$0\" > \"$1\"",
            peer_archive("test_read_format_gtar_sparse_skip_entry.tar.Z"),
            &archive
        ],
        None,
    );
    assert!(tar.status.success());
    let out = work.join("out");
    extract(&archive, &out, &[]).assert_success();
    assert_eq!(fs::read(out.join("b")).unwrap(), b"foo\n");
    let a = meta_of(&out.join("a"));
    assert_eq!(a.len, 10_737_418_244);
    assert!(a.disk_bytes < 1 << 20, "{} bytes on disk", a.disk_bytes);
    let reference = work.join("tar");
    let Some(made) = Tool::GnuTar.extract(&archive, &reference) else {
        return; // no verdict from GNU tar: fastwrite's own checks above hold
    };
    made.assert_success();
    assert_eq!(
        data_regions(&out.join("a")),
        data_regions(&reference.join("a"))
    );
}

/// pzstd's output starts with a skippable frame: still a .tar.zst.
#[test]
#[cfg(unix)] // pzstd and GNU tar
fn a_tar_zst_from_pzstd_is_recognised() {
    let work = tempdir();
    let src = work.join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/a.txt"), b"alpha").unwrap();
    fs::write(src.join("b.txt"), text(1, 100_000)).unwrap();
    let tar = work.join("t.tar");
    run_tool("tar", &osv!["-cf", &tar, "-C", &src, "."], None);
    let zst = work.join("t.tar.zst");
    run_tool("pzstd", &osv!["-q", "-p", "2", &tar, "-o", &zst], None);
    assert_eq!(
        &fs::read(&zst).unwrap()[1..4],
        b"\x2a\x4d\x18",
        "a skippable frame first"
    );
    // Named anything: recognised by its content.
    let renamed = work.join("archive.bin");
    fs::rename(&zst, &renamed).unwrap();
    let out = work.join("out");
    extract(&renamed, &out, &[]).assert_success();
    assert_same_tree(&src, &out, &Compare::content_only(), "pzstd .tar.zst");
}

/// Garbage after a complete compressed tar, and after a single compressed file: everything is
/// written, exit 0, and a warning says how many bytes were ignored (gzip and bzip2 say
/// "trailing garbage ignored"). A corrupt member is still an error.
#[test]
#[cfg(unix)] // gzip, bzip2 and GNU tar
fn bytes_after_the_compressed_data_are_a_warning() {
    let work = tempdir();
    let src = work.join("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..5 {
        fs::write(src.join(format!("f{i}.txt")), text(i, 3000)).unwrap();
    }
    let tar = work.join("t.tar");
    run_tool("tar", &osv!["-cf", &tar, "-C", &src, "."], None);
    for (program, suffix, name) in [("gzip", "tgz", "gzip"), ("bzip2", "tbz2", "bzip2")] {
        let packed = work.join(format!("t.{suffix}"));
        let bytes = tool_stdout(program, &osv!["-c", &tar]);
        fs::write(
            &packed,
            [bytes.as_slice(), b"this is not compressed data\n"].concat(),
        )
        .unwrap();
        let out = work.join(format!("out-{suffix}"));
        let got = extract(&packed, &out, &[]);
        got.assert_success();
        assert!(
            !got.stderr_lines_with(&format!("28 byte(s) after the end of the {name} data"))
                .is_empty(),
            "{}",
            got.dump()
        );
        assert_same_tree(&src, &out, &Compare::content_only(), program);
    }
    // A single compressed file: written whole, with the same warning.
    let single = work.join("notes.txt.gz");
    // -n: no name inside, so the file is named after the archive.
    let gz = tool_stdout("gzip", &osv!["-cn", src.join("f1.txt")]);
    fs::write(&single, [gz.as_slice(), b"junk"].concat()).unwrap();
    let out = work.join("single");
    let got = extract(&single, &out, &[]);
    got.assert_success();
    assert!(
        !got.stderr_lines_with("4 byte(s) after").is_empty(),
        "{}",
        got.dump()
    );
    assert_eq!(fs::read(out.join("notes.txt")).unwrap(), text(1, 3000));
}

/// libarchive's `test_read_format_zip_7075_utf8_paths`: each entry's local header names it
/// `File N - xx.txt`, its central record otherwise (CP437, with a Unicode Path field). The
/// references disagree on it (bsdtar, unzip and 7-Zip extract three different sets of names);
/// fastwrite refuses the three whose two names differ (docs/security.md: two parsers would
/// extract different files). `list` shows all four, says which would fail (it left out those
/// whose name in a message differed from their listed name), and fails as extract does.
#[test]
fn list_shows_every_entry_and_which_would_fail() {
    let archive = peer_archive("test_read_format_zip_7075_utf8_paths.zip");
    let got = run_fastwrite(&osv!["list", &archive]);
    // As extract, which refuses three of them (issue 35, item 3).
    got.assert_code(1);
    let lines: Vec<&str> = got.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", got.dump());
    assert!(lines[0].ends_with("File 1.txt"), "{}", got.dump());
    for (n, (line, letter)) in lines[1..].iter().zip(["ö", "ä", "å"]).enumerate() {
        let name = format!("File {} - {letter}.txt", n + 2);
        assert!(
            line.contains(&name) && line.contains("refused: its local header names"),
            "{line}\n{}",
            got.dump()
        );
    }
    let work = tempdir();
    let out = work.join("out");
    let extracted = extract(&archive, &out, &[]);
    extracted.assert_code(1);
    assert_eq!(children(&out), ["File 1.txt"]);
    for name in ["File 2 - ö.txt", "File 3 - ä.txt", "File 4 - å.txt"] {
        extracted.assert_stderr_names(name, &["local header names"]);
    }
}

/// Each zip of the peers through a pipe gives the tree it gives from a file, and the same exit
/// code: what only the central directory says (here, that local headers and their central
/// records disagree in `7075_utf8_paths`; Go's `comment-truncated.zip` hides its real
/// directory behind a decoy) is applied when the stream reaches it (docs/security.md, "A zip
/// from a pipe"; libarchive's MS-DOS folders and legacy names are in tests/zip_extract.rs). The
/// APK's signing block, between the last entry and the central directory, is passed over with
/// a warning.
#[test]
fn zips_of_the_peers_through_a_pipe_give_the_files_tree() {
    let work = tempdir();
    for name in [
        "COMPRESS-379.jar",
        "COMPRESS-479.zip",
        "SHRUNK.ZIP",
        "archive_with_bytes_after_data.zip",
        "comment-truncated.zip",
        "imploding-4Kdict-2trees.zip",
        "imploding-8Kdict-3trees.zip",
        "slice_0.apk",
        "test_read_format_zip_encryption_data.zip",
        "test_read_format_zip_7075_utf8_paths.zip",
        "time-osx.zip",
    ] {
        let archive = peer_archive(name);
        let from_file = work.join(format!("{name}-file"));
        let file = extract(&archive, &from_file, &[]);
        let from_pipe = work.join(format!("{name}-pipe"));
        let pipe = run_fastwrite_piped(&osv!["extract", "-", "-o", &from_pipe], &archive);
        assert_eq!(
            pipe.code(),
            file.code(),
            "{name}\n{}\n{}",
            file.dump(),
            pipe.dump()
        );
        if from_file.exists() || from_pipe.exists() {
            assert_same_tree(&from_file, &from_pipe, &Compare::content_only(), name);
        }
        if name == "COMPRESS-479.zip" {
            // Named by their Unicode Path fields, one with an odd version byte.
            assert!(
                from_pipe.join("€_for_Dollar.txt").is_file(),
                "{}",
                pipe.dump()
            );
            assert!(from_pipe.join("Ölfässer.txt").is_file(), "{}", pipe.dump());
        }
        if name == "slice_0.apk" {
            assert!(
                !pipe
                    .stderr_lines_with("4096 bytes between entries")
                    .is_empty(),
                "{}",
                pipe.dump()
            );
        }
    }
}

/// A piped zip's local header with Info-ZIP's Unicode Path field (0x7075) is named by it, as
/// the same zip read from a file is (and as bsdtar reads it from a pipe); a field whose CRC-32
/// does not match the name it stands for is stale and ignored.
#[test]
fn a_unicode_path_field_names_a_piped_entry() {
    let work = tempdir();
    let archive = work.join("unicode.zip");
    crate_zip(
        &archive,
        &[
            Z::File("cafX.txt", b"current".to_vec(), 0o644, STORED),
            Z::File("oldX.txt", b"stale".to_vec(), 0o644, STORED),
        ],
    );
    // A Latin-1 name (not UTF-8, no flag) and an ASCII one, each given a Unicode Path field
    // in both headers; the second field's CRC-32 is of another name.
    let bytes = fs::read(&archive).unwrap();
    let with_field = |bytes: &[u8], placeholder: &[u8], raw: &[u8], unicode: &str, crc: u32| {
        let mut field = vec![0x75, 0x70];
        field.extend_from_slice(&u16::try_from(5 + unicode.len()).unwrap().to_le_bytes());
        field.push(1);
        field.extend_from_slice(&crc.to_le_bytes());
        field.extend_from_slice(unicode.as_bytes());
        add_extra_field(bytes, placeholder, raw, &field)
    };
    let bytes = with_field(
        &bytes,
        b"cafX.txt",
        b"caf\xe9.txt",
        "café.txt",
        crc32(b"caf\xe9.txt"),
    );
    let bytes = with_field(&bytes, b"oldX.txt", b"old_.txt", "new.txt", crc32(b"other"));
    fs::write(&archive, &bytes).unwrap();
    let from_file = work.join("file");
    extract(&archive, &from_file, &[]).assert_success();
    let from_pipe = work.join("pipe");
    run_fastwrite_piped(&osv!["extract", "-", "-o", &from_pipe], &archive).assert_success();
    assert!(
        from_pipe.join("café.txt").is_file(),
        "{:?}",
        all_paths(&from_pipe)
    );
    assert_eq!(fs::read(from_pipe.join("café.txt")).unwrap(), b"current");
    assert!(
        !from_pipe.join("new.txt").exists(),
        "a stale field is ignored"
    );
    assert_same_tree(&from_file, &from_pipe, &Compare::content_only(), "0x7075");
}

/// The CRC-32 of `data` (IEEE), for the test's own zip surgery.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Rewrites a zip made by the zip crate: the entry named `placeholder` (in both its headers)
/// gets the name `raw` (of the same length) and the extra field `field` appended to its
/// extra fields in both headers; every offset after it moves along.
fn add_extra_field(zip: &[u8], placeholder: &[u8], raw: &[u8], field: &[u8]) -> Vec<u8> {
    assert_eq!(placeholder.len(), raw.len());
    let u16_at = |b: &[u8], i: usize| usize::from(u16::from_le_bytes([b[i], b[i + 1]]));
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let grow = u32::try_from(field.len()).unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    let mut local_at = None;
    // Local headers and their data.
    while zip[at..].starts_with(b"PK\x03\x04") {
        let (name_len, extra_len) = (u16_at(zip, at + 26), u16_at(zip, at + 28));
        let size = u32_at(zip, at + 18) as usize;
        let end = at + 30 + name_len + extra_len + size;
        let mut header = zip[at..end].to_vec();
        if &header[30..30 + name_len] == placeholder {
            local_at = Some(out.len());
            header[30..30 + name_len].copy_from_slice(raw);
            header[28..30].copy_from_slice(&((extra_len + field.len()) as u16).to_le_bytes());
            let insert = 30 + name_len + extra_len;
            header.splice(insert..insert, field.iter().copied());
        }
        out.extend_from_slice(&header);
        at = end;
    }
    let local_at = u32::try_from(local_at.expect("the placeholder's local header")).unwrap();
    // Central records: the same change, and local offsets after the grown header moved.
    while zip[at..].starts_with(b"PK\x01\x02") {
        let (name_len, extra_len, comment_len) = (
            u16_at(zip, at + 28),
            u16_at(zip, at + 30),
            u16_at(zip, at + 32),
        );
        let end = at + 46 + name_len + extra_len + comment_len;
        let mut record = zip[at..end].to_vec();
        let offset = u32_at(&record, 42);
        if offset > local_at {
            record[42..46].copy_from_slice(&(offset + grow).to_le_bytes());
        }
        if &record[46..46 + name_len] == placeholder {
            record[46..46 + name_len].copy_from_slice(raw);
            record[30..32].copy_from_slice(&((extra_len + field.len()) as u16).to_le_bytes());
            let insert = 46 + name_len + extra_len;
            record.splice(insert..insert, field.iter().copied());
        }
        out.extend_from_slice(&record);
        at = end;
    }
    // The end record: the central directory's size and offset.
    let mut end = zip[at..].to_vec();
    assert!(end.starts_with(b"PK\x05\x06"), "no zip64 here");
    let cd_size = u32_at(&end, 12) + grow;
    let cd_offset = u32_at(&end, 16) + grow;
    end[12..16].copy_from_slice(&cd_size.to_le_bytes());
    end[16..20].copy_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&end);
    out
}

/// A piped zip entry whose data is corrupt fails, named with what the decoder said, and the
/// stream goes on after it (its local header says how long its data is): the entries after it
/// are written, as from a file. It stopped the whole stream, saying the zip library's
/// "failed to initialize or panicked".
#[test]
fn a_corrupt_entry_in_a_piped_zip_does_not_stop_the_stream() {
    let work = tempdir();
    let archive = work.join("corrupt.zip");
    let deflated = zip::CompressionMethod::Deflated;
    crate_zip(
        &archive,
        &[
            Z::File("first.txt", text(1, 20_000), 0o644, deflated),
            Z::File("broken.txt", text(2, 20_000), 0o644, deflated),
            Z::File("last.txt", text(3, 20_000), 0o644, deflated),
        ],
    );
    let mut bytes = fs::read(&archive).unwrap();
    let data = local_data_offset(&bytes, "broken.txt");
    for b in &mut bytes[data + 10..data + 60] {
        *b ^= 0x5a;
    }
    fs::write(&archive, &bytes).unwrap();
    for piped in [false, true] {
        let out = work.join(format!("out-{piped}"));
        let got = if piped {
            run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &archive)
        } else {
            extract(&archive, &out, &[])
        };
        got.assert_code(1);
        got.assert_stderr_names("broken.txt", &["corrupt", "invalid", "crc", "deflate"]);
        assert!(!got.stderr.contains("panicked"), "{}", got.dump());
        assert_eq!(children(&out), ["first.txt", "last.txt"], "piped: {piped}");
        assert_eq!(fs::read(out.join("last.txt")).unwrap(), text(3, 20_000));
    }
}

/// Blocks of zeros then other data is no tar (an ISO 9660 image's first 32 KiB are zeros): it
/// was read as an empty tar, nothing written, exit 0. An empty tar (zeros alone) is still one.
#[test]
fn zeros_then_other_data_is_not_an_empty_tar() {
    let work = tempdir();
    let iso_like = work.join("image.iso");
    let mut bytes = vec![0u8; 32 * 1024];
    bytes.extend_from_slice(b"\x01CD001\x01\0");
    bytes.resize(40 * 1024, b'x');
    fs::write(&iso_like, &bytes).unwrap();
    let got = extract(&iso_like, &work.join("out"), &[]);
    got.assert_code(1);
    assert!(got.stderr.contains("not a tar"), "{}", got.dump());
    let listed = run_fastwrite(&osv!["list", &iso_like]);
    assert_ne!(listed.code(), 0, "{}", listed.dump());
    assert!(listed.stderr.contains("not a tar"), "{}", listed.dump());
    let empty = work.join("empty.tar");
    fs::write(&empty, vec![0u8; 10240]).unwrap();
    extract(&empty, &work.join("empty"), &[]).assert_success();
}

/// LZ4 frames have the same skippable frames as zstd (libarchive's
/// `test_compat_lz4_skippable_frames`): what follows them tells the two apart, so an LZ4 file
/// is refused as unrecognised, from a file and from a pipe alike, not misread as zstd.
#[test]
fn lz4_skippable_frames_are_not_taken_for_zstd() {
    let work = tempdir();
    let lz4 = work.join("a.tar.lz4");
    // Two skippable frames, then LZ4's frame magic and a few bytes of a frame.
    let mut bytes = b"\x50\x2a\x4d\x18\0\0\0\0\x51\x2a\x4d\x18\x02\0\0\0ab".to_vec();
    bytes.extend_from_slice(b"\x04\x22\x4d\x18\x64\x40\xa7\x95\x11\0\0\x6f");
    fs::write(&lz4, &bytes).unwrap();
    let from_file = extract(&lz4, &work.join("file"), &[]);
    from_file.assert_code(2);
    let from_pipe = run_fastwrite_piped(&osv!["extract", "-", "-o", work.join("pipe")], &lz4);
    from_pipe.assert_code(2);
    // Named for what it is, not misread as zstd (whose decoder said "Unknown frame
    // descriptor").
    assert!(
        from_file.stderr.contains("is an LZ4 file"),
        "{}",
        from_file.dump()
    );
    assert!(
        !from_file.stderr.contains("frame descriptor"),
        "{}",
        from_file.dump()
    );
}

/// Android's build tools start an APK with a header that has no name and no data (its extra
/// field pads what follows), which no central record lists: from a pipe it was "refused:
/// empty path", exit 1; it names nothing, and is passed over, as from a file.
#[test]
fn a_nameless_empty_header_in_a_piped_zip_names_nothing() {
    let work = tempdir();
    let zip = work.join("plain.zip");
    crate_zip(&zip, &[Z::File("a.txt", b"alpha".to_vec(), 0o644, STORED)]);
    // A stored, nameless, empty local header with 6 bytes of padding in its extra field.
    let mut apk = b"PK\x03\x04".to_vec();
    apk.extend_from_slice(&[0; 22]);
    apk.extend_from_slice(&0u16.to_le_bytes());
    apk.extend_from_slice(&6u16.to_le_bytes());
    apk.extend_from_slice(&[0xd9, 0xd9, 0x02, 0, 0, 0]);
    apk.extend_from_slice(&fs::read(&zip).unwrap());
    let padded = work.join("padded.apk");
    fs::write(&padded, &apk).unwrap();
    let out = work.join("pipe");
    run_fastwrite_piped(&osv!["extract", "-", "-o", &out], &padded).assert_success();
    assert_eq!(fs::read(out.join("a.txt")).unwrap(), b"alpha");
    assert_eq!(children(&out), ["a.txt"]);
}

/// The file or folder `name` in the folder `dir` held open (openat(2)): one name at a time, where
/// a whole path would be past what open(2) takes.
#[cfg(unix)]
fn open_at(dir: &fs::File, name: &str) -> fs::File {
    use std::os::fd::{AsRawFd, FromRawFd};
    let name = std::ffi::CString::new(name).unwrap();
    // SAFETY: openat(2) on a descriptor this function borrows and a NUL-terminated name; the
    // descriptor it returns is new and owned by the File made from it.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), libc::O_RDONLY) };
    assert!(
        fd >= 0,
        "openat {name:?}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `fd` is a descriptor openat(2) just returned, owned by nothing else.
    unsafe { fs::File::from_raw_fd(fd) }
}
