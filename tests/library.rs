//! The library, used as a program would: nothing but `fastwrite::` public items.
//!
//! Close failures come from the lab (lab/slowclose.c, an LD_PRELOAD library): a test that needs
//! them runs this test binary again, itself only, with the library preloaded, and checks that
//! the child says it is done; the child is the same test function, which sees
//! `FASTWRITE_LIBRARY_CHILD` and does the work under the lab. A full disk is a small tmpfs.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use fastwrite::{Batch, CloseMode, ErrorKind, FileMeta, Overwrite};
use rayon::prelude::*;

use common::*;

/// The close modes a program can choose, each with the pool it allows.
fn close_modes() -> [CloseMode; 3] {
    [
        CloseMode::Inline,
        CloseMode::Deferred { threads: 3 },
        CloseMode::Auto { max_threads: 16 },
    ]
}

/// Every path under `root`, relative, files and directories alike.
fn listing(root: &Path) -> BTreeSet<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            out.insert(path.strip_prefix(root).unwrap().to_path_buf());
            if path.symlink_metadata().unwrap().is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, root, &mut out);
    out
}

fn content(i: usize) -> String {
    format!(
        "<glyph name=\"g{i}\" format=\"2\">{}</glyph>\n",
        "x".repeat(i % 97)
    )
}

fn batches_errors_and_flags_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Batch>();
    send_sync::<fastwrite::Error>();
    send_sync::<fastwrite::FinishError>();
    send_sync::<fastwrite::Cancel>();
    fn send<T: Send>() {}
    send::<fastwrite::FileWriter<'static>>();
}

fn many_rayon_tasks_write_and_stream_at_once() {
    let t = tempdir();
    let out = t.join("font.ufo");
    let batch = Batch::new(&out).unwrap();
    (0..3000usize)
        .into_par_iter()
        .try_for_each(|i| {
            let path = format!("glyphs{}/g{i}.glif", i % 30);
            if i % 2 == 0 {
                batch.write(&path, content(i))
            } else {
                let mut file = batch.create(&path)?;
                // Many small writes, as a serializer makes them.
                for piece in content(i).as_bytes().chunks(7) {
                    file.write_all(piece).unwrap();
                }
                file.finish()
            }
        })
        .unwrap();
    let report = batch.finish().unwrap();
    assert_eq!(report.files, 3000);
    assert!(report.failures.is_empty());
    for i in 0..3000 {
        let path = out.join(format!("glyphs{}/g{i}.glif", i % 30));
        assert_eq!(fs::read_to_string(&path).unwrap(), content(i), "{path:?}");
    }
    assert_eq!(
        listing(&out).len(),
        3000 + 30,
        "only the files and their folders"
    );
}

fn paths_leaving_the_root_are_refused_and_nothing_is_written_outside() {
    let t = tempdir();
    let out = t.join("out");
    let batch = Batch::new(&out).unwrap();
    let bad = [
        "../escaped",
        "a/../../escaped",
        "/tmp/fastwrite-library-absolute",
        "..\\escaped",
        "",
        ".",
    ];
    for path in bad {
        let error = batch.write(path, "x").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Refused, "{path:?}: {error}");
        assert_eq!(error.path(), Path::new(path));
        let streamed = batch.create(path).unwrap_err();
        assert_eq!(streamed.kind(), ErrorKind::Refused, "{path:?}");
    }
    for target in ["../outside", "/etc/passwd", "a/../../x"] {
        let error = batch.symlink("link", target).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Refused, "{target}: {error}");
    }
    batch.write("inside/ok", "fine").unwrap();
    batch.finish().unwrap();
    assert_eq!(
        listing(t.path()),
        BTreeSet::from(["out".into(), "out/inside".into(), "out/inside/ok".into()])
    );
    assert!(!Path::new("/tmp/fastwrite-library-absolute").exists());
}

fn existing_files_follow_the_overwrite_policy() {
    let t = tempdir();
    let out = t.join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("kept"), "old").unwrap();

    let refuse = Batch::new(&out).unwrap();
    let error = refuse.write("kept", "new").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::AlreadyExists);
    refuse.finish().unwrap();
    assert_eq!(fs::read_to_string(out.join("kept")).unwrap(), "old");

    let skip = Batch::builder(&out)
        .overwrite(Overwrite::Skip)
        .build()
        .unwrap();
    skip.write("kept", "new").unwrap();
    assert_eq!(skip.finish().unwrap().skipped, 1);
    assert_eq!(fs::read_to_string(out.join("kept")).unwrap(), "old");

    for close in close_modes() {
        let replace = Batch::builder(&out)
            .overwrite(Overwrite::Replace)
            .close(close)
            .build()
            .unwrap();
        replace.write("kept", format!("{close:?}")).unwrap();
        let mut file = replace.create("streamed").unwrap();
        write!(file, "{close:?}").unwrap();
        file.finish().unwrap();
        replace.finish().unwrap();
        assert_eq!(
            fs::read_to_string(out.join("kept")).unwrap(),
            format!("{close:?}")
        );
        assert_eq!(
            fs::read_to_string(out.join("streamed")).unwrap(),
            format!("{close:?}")
        );
        assert_eq!(
            listing(&out).len(),
            2,
            "no temporary left: {:?}",
            listing(&out)
        );
    }
}

fn cancelling_stops_new_files_and_keeps_every_written_one_whole() {
    for close in close_modes() {
        let t = tempdir();
        let out = t.join("out");
        let batch = Batch::builder(&out).close(close).build().unwrap();
        let ok = AtomicUsize::new(0);
        let results: Vec<(usize, Result<(), fastwrite::Error>)> = (0..4000usize)
            .into_par_iter()
            .map(|i| {
                if i == 500 {
                    batch.cancel();
                }
                let result = batch.write(format!("d{}/f{i}", i % 10), content(i));
                if result.is_ok() {
                    ok.fetch_add(1, Ordering::Relaxed);
                }
                (i, result)
            })
            .collect();
        let cancelled = results.iter().filter(|(_, r)| r.is_err()).count();
        assert!(cancelled > 0, "{close:?}: nothing was cancelled");
        for (i, result) in &results {
            if let Err(error) = result {
                assert_eq!(
                    error.kind(),
                    ErrorKind::Cancelled,
                    "{close:?} f{i}: {error}"
                );
            }
        }
        // A stream stops at its next write.
        let mut late = batch.create("late").unwrap_err();
        assert_eq!(late.kind(), ErrorKind::Cancelled);
        late = batch.write("later", "x").unwrap_err();
        assert_eq!(late.kind(), ErrorKind::Cancelled);

        let report = batch.finish().unwrap();
        let written = ok.load(Ordering::Relaxed);
        assert_eq!(report.files as usize, written, "{close:?}");
        let files: Vec<PathBuf> = listing(&out)
            .into_iter()
            .filter(|p| out.join(p).is_file())
            .collect();
        assert_eq!(
            files.len(),
            written,
            "{close:?}: every file written is there, no other"
        );
        for (i, result) in &results {
            let path = out.join(format!("d{}/f{i}", i % 10));
            match result {
                Ok(()) => assert_eq!(fs::read_to_string(&path).unwrap(), content(*i)),
                Err(_) => assert!(!path.exists(), "{path:?}"),
            }
        }
    }
}

fn a_stream_cancelled_midway_leaves_nothing() {
    let t = tempdir();
    let batch = Batch::new(t.join("out")).unwrap();
    let mut file = batch.create("big.bin").unwrap();
    file.write_all(&[1; 100_000]).unwrap();
    batch.cancel();
    let error = file.write_all(&[2; 100_000]).unwrap_err();
    assert!(error.to_string().contains("cancelled"), "{error}");
    assert_eq!(file.finish().unwrap_err().kind(), ErrorKind::Cancelled);
    batch.finish().unwrap();
    assert!(!t.join("out/big.bin").exists());
    assert_eq!(listing(&t.join("out")).len(), 0);
}

fn a_writer_dropped_unfinished_is_removed_and_reported() {
    let t = tempdir();
    let batch = Batch::new(t.join("out")).unwrap();
    batch.write("whole", "all of it").unwrap();
    {
        let mut half = batch.create("dir/half.xml").unwrap();
        writeln!(half, "<start>").unwrap();
        // Dropped here, as by a `?` on a serializer's error.
    }
    let error = batch.finish().unwrap_err();
    let errors = error.errors();
    assert_eq!(errors.len(), 1, "{error}");
    assert_eq!(errors[0].kind(), ErrorKind::Unfinished);
    assert_eq!(errors[0].path(), Path::new("dir/half.xml"));
    assert_eq!(error.report().files, 1);
    assert!(!t.join("out/dir/half.xml").exists());
    assert_eq!(
        fs::read_to_string(t.join("out/whole")).unwrap(),
        "all of it"
    );
}

fn dropping_a_batch_without_finish_still_completes_everything() {
    let t = tempdir();
    let out = t.join("out");
    let mtime = UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    {
        let batch = Batch::builder(&out)
            .close(CloseMode::Deferred { threads: 4 })
            .build()
            .unwrap();
        batch
            .create_dir("glyphs", FileMeta::new().mtime(mtime))
            .unwrap();
        for i in 0..300 {
            batch.write(format!("glyphs/g{i}"), content(i)).unwrap();
        }
        #[cfg(unix)]
        batch.symlink("latest", "glyphs/g7").unwrap();
        // Dropped with closes pending in the pool, a directory mtime and a link to make.
    }
    for i in 0..300 {
        assert_eq!(
            fs::read_to_string(out.join(format!("glyphs/g{i}"))).unwrap(),
            content(i)
        );
    }
    let dir_mtime = fs::metadata(out.join("glyphs"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(dir_mtime, mtime, "directory metadata applied at the end");
    #[cfg(unix)]
    assert_eq!(
        fs::read_link(out.join("latest")).unwrap(),
        Path::new("glyphs/g7")
    );
}

#[cfg(unix)]
fn modes_and_mtimes_are_applied_exactly() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempdir();
    let out = t.join("out");
    let batch = Batch::new(&out).unwrap();
    let when = UNIX_EPOCH + Duration::new(1_234_567_890, 123_456_789);
    batch
        .write_with(
            "script",
            "#!/bin/sh\n",
            FileMeta::new().mode(0o4755).mtime(when),
        )
        .unwrap();
    let mut file = batch
        .create_with("private", FileMeta::new().mode(0o600).mtime(when))
        .unwrap();
    file.write_all(b"secret").unwrap();
    file.finish().unwrap();
    batch
        .create_dir("locked", FileMeta::new().mode(0o555))
        .unwrap();
    batch.write("locked/inside", "x").unwrap();
    batch.finish().unwrap();
    let meta = |p: &str| fs::symlink_metadata(out.join(p)).unwrap();
    assert_eq!(meta("script").permissions().mode() & 0o7777, 0o4755);
    assert_eq!(meta("private").permissions().mode() & 0o7777, 0o600);
    assert_eq!(meta("locked").permissions().mode() & 0o7777, 0o555);
    assert_eq!(meta("script").modified().unwrap(), when);
    assert_eq!(meta("private").modified().unwrap(), when);
    fs::set_permissions(out.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
}

/// A generated tree written by `fastwrite mirror` and through a `Batch` (each file with the
/// source's mode and mtime, each directory with its own) comes out the same.
#[cfg(unix)]
fn the_library_writes_what_the_command_line_writes() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempdir();
    let src = t.join("src");
    generate_tree(12, &GenOptions::new(400).no_symlinks()).build(&src);
    run_fastwrite(&osv!["mirror", &src, t.join("cli")]).assert_success();

    let batch = Batch::new(t.join("lib")).unwrap();
    fn copy(batch: &Batch, src: &Path, rel: &Path) {
        for entry in fs::read_dir(src.join(rel)).unwrap() {
            let entry = entry.unwrap();
            let rel = rel.join(entry.file_name());
            let meta = entry.metadata().unwrap();
            let file_meta = FileMeta::new()
                .mode(meta.permissions().mode())
                .mtime(meta.modified().unwrap());
            if meta.is_dir() {
                batch.create_dir(&rel, file_meta).unwrap();
                copy(batch, src, &rel);
            } else {
                let data = fs::read(src.join(&rel)).unwrap();
                batch.write_with(&rel, data, file_meta).unwrap();
            }
        }
    }
    copy(&batch, &src, Path::new(""));
    batch.finish().unwrap();
    assert_same_tree(
        &t.join("cli"),
        &t.join("lib"),
        &Compare::strict(),
        "library vs CLI",
    );
}

// ---------------------------------------------------------------------------------------------
// Under the lab (Linux): failing closes, in a child process
// ---------------------------------------------------------------------------------------------

#[cfg(target_os = "linux")]
const CHILD: &str = "FASTWRITE_LIBRARY_CHILD";

/// Runs `test` of this binary again in a child with the lab preloaded and `lab` settings, and
/// asserts the child ran it and passed. False: this is the child, which should do the work.
#[cfg(target_os = "linux")]
fn parent_runs_child(test: &str, lab: &[(&str, &str)]) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return false;
    }
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("LD_PRELOAD", lab_library())
        .env(CHILD, "1");
    for (k, v) in lab {
        cmd.env(k, v);
    }
    let out = run_command(cmd);
    let stdout = &out.stdout;
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the child running {test} under the lab failed:\n{}",
        out.dump()
    );
    true
}

/// Writes 40 files, two of them named `bad-*` (whose closes the lab fails), in every close
/// mode; each failure comes back once, with its path, as a close error with the OS's EIO, and
/// its file is gone.
#[cfg(target_os = "linux")]
fn failed_closes_come_back_with_their_paths_in_every_close_mode() {
    let lab = [
        ("FASTWRITE_LAB_FAIL_CLOSE", "bad"),
        ("FASTWRITE_LAB_CLOSE_MS", "1"),
    ];
    if parent_runs_child(
        "failed_closes_come_back_with_their_paths_in_every_close_mode",
        &lab,
    ) {
        return;
    }
    for close in close_modes() {
        let t = tempdir();
        let out = t.join("out");
        let batch = Batch::builder(&out)
            .close(close)
            .writers(2)
            .build()
            .unwrap();
        let name = |i: usize| match i {
            5 | 30 => format!("bad-{i}"),
            _ => format!("good-{i}"),
        };
        for i in 0..40 {
            if i % 2 == 0 {
                batch.write(name(i), content(i)).unwrap();
            } else {
                let mut file = batch.create(name(i)).unwrap();
                file.write_all(content(i).as_bytes()).unwrap();
                file.finish().unwrap();
            }
        }
        // As they happen: the first bad file's close is done by now, or soon.
        let mut seen = Vec::new();
        for _ in 0..1000 {
            seen.extend(batch.take_errors());
            if !seen.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !seen.is_empty(),
            "{close:?}: no close failure came back before finish"
        );
        match batch.finish() {
            Ok(report) => assert_eq!(report.files, 38),
            Err(rest) => {
                assert_eq!(rest.report().files, 38);
                seen.extend(rest.into_report().failures);
            }
        }
        let mut paths: Vec<&Path> = seen.iter().map(|e| e.path()).collect();
        paths.sort();
        assert_eq!(
            paths,
            [Path::new("bad-30"), Path::new("bad-5")],
            "{close:?}: {seen:?}"
        );
        for error in &seen {
            assert_eq!(error.kind(), ErrorKind::Close, "{error}");
            assert_eq!(
                error.io_error().and_then(|e| e.raw_os_error()),
                Some(libc::EIO)
            );
            assert!(error.to_string().contains("closing"), "{error}");
        }
        for i in 0..40 {
            let path = out.join(name(i));
            if name(i).starts_with("bad") {
                assert!(
                    !path.exists(),
                    "{close:?}: {path:?} left after a failed close"
                );
            } else {
                assert_eq!(fs::read_to_string(&path).unwrap(), content(i));
            }
        }
    }
}

/// The UFO case, in `scope`: closes of `bad-*` fail (the lab) while the work is
/// stopped early by an existing file (`?` in the loop). In every close mode the result holds
/// the work's error (that file, `AlreadyExists`) and every failed close, each once, with its
/// path; nothing is lost because the work returned early.
#[cfg(target_os = "linux")]
fn scope_returns_the_work_error_and_every_failed_close() {
    let lab = [
        ("FASTWRITE_LAB_FAIL_CLOSE", "bad"),
        ("FASTWRITE_LAB_CLOSE_MS", "1"),
    ];
    if parent_runs_child("scope_returns_the_work_error_and_every_failed_close", &lab) {
        return;
    }
    for close in close_modes() {
        let t = tempdir();
        let out = t.join("out");
        fs::create_dir_all(&out).unwrap();
        fs::write(out.join("glyph-35"), "mine").unwrap();
        let name = |i: usize| match i {
            5 | 30 => format!("bad-{i}"),
            _ => format!("glyph-{i}"),
        };
        let batch = Batch::builder(&out).close(close).build().unwrap();
        let failed = batch
            .scope(|batch| -> Result<(), fastwrite::Error> {
                for i in 0..40 {
                    let mut file = batch.create(name(i))?;
                    file.write_all(content(i).as_bytes())?;
                    file.finish()?;
                }
                Ok(())
            })
            .unwrap_err();
        let work = failed.work_error().expect("the work's own error");
        assert_eq!(work.kind(), ErrorKind::AlreadyExists, "{close:?}: {failed}");
        assert_eq!(work.path(), Path::new("glyph-35"));
        let mut closes: Vec<&Path> = failed.errors().iter().map(|e| e.path()).collect();
        closes.sort();
        assert_eq!(
            closes,
            [Path::new("bad-30"), Path::new("bad-5")],
            "{close:?}: {failed:?}"
        );
        assert!(failed.errors().iter().all(|e| e.kind() == ErrorKind::Close));
        assert_eq!(failed.report().files, 33, "{close:?}");
        assert_eq!(fs::read_to_string(out.join("glyph-35")).unwrap(), "mine");
        assert!(!out.join("bad-5").exists() && !out.join("bad-30").exists());
        let shown = failed.to_string();
        assert!(
            shown.contains("glyph-35") && shown.contains("bad-") && shown.contains("more"),
            "{shown}"
        );
    }
}

/// A serializer's own `io::Error` converts with `?` in work that returns `fastwrite::Error`,
/// and the file it was writing comes back too, with its path; errors that `take_errors`
/// returned still make `finish` fail, and are counted.
fn a_serializers_error_and_taken_errors_still_come_back() {
    fn serialize(out: &mut impl Write, fail: bool) -> std::io::Result<()> {
        out.write_all(b"<glyph>")?;
        if fail {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "glyph 'b' has no outline",
            ));
        }
        out.write_all(b"</glyph>")
    }
    let t = tempdir();
    let failed = Batch::new(t.join("out"))
        .unwrap()
        .scope(|batch| {
            ["a", "b", "c"].par_iter().try_for_each(|g| {
                let mut file = batch.create(format!("glyphs/{g}.glif"))?;
                serialize(&mut file, *g == "b")?;
                file.finish()
            })
        })
        .unwrap_err();
    let work = failed.work_error().unwrap();
    assert_eq!(work.kind(), ErrorKind::Source);
    assert_eq!(
        work.io_error().map(std::io::Error::kind),
        Some(std::io::ErrorKind::InvalidData)
    );
    assert!(work.to_string().contains("has no outline"), "{work}");
    let errors = failed.errors();
    assert_eq!(errors.len(), 1, "{failed:?}");
    assert_eq!(errors[0].kind(), ErrorKind::Unfinished);
    assert_eq!(errors[0].path(), Path::new("glyphs/b.glif"));
    assert!(!t.join("out/glyphs/b.glif").exists());
    // As a boxed error, the work's error is the source.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(failed);
    assert!(
        boxed
            .source()
            .unwrap()
            .to_string()
            .contains("has no outline")
    );

    // take_errors, then finish: still a failure, counted.
    let batch = Batch::new(t.join("out2")).unwrap();
    batch.write("kept", "x").unwrap();
    drop(batch.create("dropped").unwrap());
    let taken = batch.take_errors();
    assert_eq!(taken.len(), 1);
    let failed = batch.finish().unwrap_err();
    assert!(failed.errors().is_empty());
    assert_eq!(failed.taken(), 1);
    assert_eq!(failed.report().failures_taken, 1);
    assert_eq!(failed.report().files, 1);
    assert!(
        failed
            .to_string()
            .contains("1 error returned earlier by take_errors")
    );

    // Into io::Error and back: the kind is the OS's, the Error rides inside.
    let batch = Batch::new(t.join("out3")).unwrap();
    let refused: std::io::Error = batch.write("../escape", "x").unwrap_err().into();
    let inner = refused
        .get_ref()
        .unwrap()
        .downcast_ref::<fastwrite::Error>()
        .unwrap();
    assert_eq!(inner.kind(), ErrorKind::Refused);
    batch.finish().unwrap();
}

/// One thread handing files to the batch's own writers: each call returns at once; a refused
/// path is refused by the call; what goes wrong later (here an existing file) comes back from
/// `finish` with its path, exactly once; every other file is written whole.
fn spawn_write_returns_at_once_and_every_error_comes_back() {
    let t = tempdir();
    let out = t.join("out");
    fs::create_dir_all(out.join("glyphs")).unwrap();
    fs::write(out.join("glyphs/g7.glif"), "mine").unwrap();
    let batch = Batch::new(&out).unwrap();
    let refused = batch.spawn_write("../escape", "x").unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Refused);
    for i in 0..200 {
        batch
            .spawn_write(format!("glyphs/g{i}.glif"), content(i).into_bytes())
            .unwrap();
    }
    let failed = batch.finish().unwrap_err();
    let errors = failed.errors();
    assert_eq!(errors.len(), 1, "{failed:?}");
    assert_eq!(errors[0].kind(), ErrorKind::AlreadyExists);
    assert_eq!(errors[0].path(), Path::new("glyphs/g7.glif"));
    assert_eq!(failed.report().files, 199);
    assert_eq!(
        fs::read_to_string(out.join("glyphs/g7.glif")).unwrap(),
        "mine"
    );
    for i in (0..200).filter(|&i| i != 7) {
        assert_eq!(
            fs::read_to_string(out.join(format!("glyphs/g{i}.glif"))).unwrap(),
            content(i)
        );
    }
    assert!(!t.join("escape").exists());
}

/// `Options::max_output` caps a mirror as it caps an extraction (tests/zip_extract.rs and
/// tar_extract.rs): past it a file fails with
/// `ErrorKind::Limit` and the run stops, and nothing over the cap is written.
fn the_output_cap_holds_for_a_mirror_too() {
    let t = tempdir();
    let src = t.join("src");
    fs::create_dir(&src).unwrap();
    for name in ["a.bin", "b.bin", "c.bin"] {
        fs::write(src.join(name), vec![1u8; 1 << 20]).unwrap();
    }
    let opts = fastwrite::Options {
        max_output: Some(3 << 19),
        ..Default::default()
    };
    let report = failed(fastwrite::mirror(
        &src,
        &t.join("copy"),
        &opts,
        &Default::default(),
    ));
    assert_eq!(report.files, 1, "{:?}", report.failures);
    assert!(!report.failures.is_empty());
    assert!(
        report.failures.iter().all(|e| e.kind() == ErrorKind::Limit),
        "{:?}",
        report.failures
    );
    assert_eq!(children(&t.join("copy")).len(), 1);
    assert!(report.bytes <= 3 << 19);
}

/// A write refused by the disk quota (EDQUOT, injected by the lab) comes back from the call
/// that wrote, as `ErrorKind::Write` with the OS error, in every close mode, from `write` and
/// from a `FileWriter`; nothing is left of the file, the others are whole.
#[cfg(target_os = "linux")]
fn a_quota_error_comes_back_from_the_call_that_wrote() {
    if parent_runs_child(
        "a_quota_error_comes_back_from_the_call_that_wrote",
        &[("FASTWRITE_LAB_FAIL_WRITE", "over-quota")],
    ) {
        return;
    }
    for close in close_modes() {
        let t = tempdir();
        let out = t.join("out");
        let batch = Batch::builder(&out).close(close).build().unwrap();
        batch.write("fine.txt", "fine").unwrap();
        let error = batch.write("over-quota-1.txt", "data").unwrap_err();
        let mut writer = batch.create("over-quota-2.txt").unwrap();
        // A FileWriter buffers: the quota is met when a piece is written. The `io::Write` error
        // is the OS's own; `finish` gives the whole story.
        let failed = writer.write_all(&[7; 200 << 10]).unwrap_err();
        assert_eq!(
            failed.raw_os_error(),
            Some(libc::EDQUOT),
            "{close:?}: {failed}"
        );
        let error2 = writer.finish().unwrap_err();
        assert!(error2.to_string().contains("over-quota-2.txt"), "{error2}");
        for error in [&error, &error2] {
            assert_eq!(error.kind(), ErrorKind::Write, "{close:?}: {error}");
            assert_eq!(
                error.io_error().and_then(|e| e.raw_os_error()),
                Some(libc::EDQUOT),
                "{close:?}: {error}"
            );
        }
        let report = batch.finish().map_err(|e| e.to_string()).unwrap();
        assert_eq!(report.files, 1);
        assert_eq!(children(&out), ["fine.txt"], "{close:?}");
    }
}

/// Dropped without `finish`, with a failing close among those pending: no panic, the failed
/// file removed, the others whole.
#[cfg(target_os = "linux")]
fn a_dropped_batch_still_removes_what_failed_to_close() {
    let lab = [
        ("FASTWRITE_LAB_FAIL_CLOSE", "bad"),
        ("FASTWRITE_LAB_CLOSE_MS", "2"),
    ];
    if parent_runs_child("a_dropped_batch_still_removes_what_failed_to_close", &lab) {
        return;
    }
    let t = tempdir();
    let out = t.join("out");
    {
        let batch = Batch::builder(&out)
            .close(CloseMode::Deferred { threads: 2 })
            .build()
            .unwrap();
        for i in 0..20 {
            let name = if i == 17 {
                "bad".into()
            } else {
                format!("f{i}")
            };
            batch.write(name, content(i)).unwrap();
        }
    }
    assert!(!out.join("bad").exists());
    assert_eq!(listing(&out).len(), 19);
}

/// A tmpfs mounted at a new folder for one test (root only: the callers check), unmounted
/// when dropped, even when the test panics.
#[cfg(target_os = "linux")]
struct Tmpfs<'a>(&'a Path);

#[cfg(target_os = "linux")]
impl<'a> Tmpfs<'a> {
    fn mount(dir: &'a Path, options: &str) -> Tmpfs<'a> {
        fs::create_dir(dir).unwrap();
        let mut mount = std::process::Command::new("mount");
        mount.args(["-t", "tmpfs", "-o", options, "tmpfs"]).arg(dir);
        run_command(mount).assert_success();
        Tmpfs(dir)
    }
}

#[cfg(target_os = "linux")]
impl Drop for Tmpfs<'_> {
    fn drop(&mut self) {
        unmount(self.0);
    }
}

/// A disk that fills up: the file that did not fit fails with the OS's "no space" and leaves
/// nothing; the files before it are whole.
#[cfg(target_os = "linux")]
fn a_full_disk_fails_the_file_that_did_not_fit() {
    if !is_root() {
        unmet("mounting a small tmpfs needs root (CI and the project's machines run as root)");
    }
    let t = tempdir();
    let disk = t.join("disk");
    let _mounted = Tmpfs::mount(&disk, "size=512k");

    let piece = vec![7u8; 100 << 10];
    for close in close_modes() {
        let out = disk.join(format!("{close:?}").replace([' ', '{', '}', ':'], ""));
        let batch = Batch::builder(&out).close(close).build().unwrap();
        let mut written = 0;
        let error = loop {
            match batch.write(format!("f{written}"), &piece) {
                Ok(()) => written += 1,
                Err(error) => break error,
            }
            assert!(written < 100, "the disk never filled");
        };
        assert_eq!(error.kind(), ErrorKind::Write, "{error}");
        assert_eq!(
            error.io_error().map(|e| e.kind()),
            Some(std::io::ErrorKind::StorageFull),
            "{error}"
        );
        assert_eq!(error.path(), Path::new(&format!("f{written}")));
        let report = batch.finish().unwrap();
        assert_eq!(report.files, written as u64);
        assert!(!out.join(format!("f{written}")).exists());
        for i in 0..written {
            assert_eq!(
                fs::read(out.join(format!("f{i}"))).unwrap().len(),
                piece.len()
            );
        }
        fs::remove_dir_all(&out).unwrap();
    }
}

/// A read-only output (a tmpfs mounted read-only): a batch cannot be started in a folder it
/// would have to create there, and in the folder itself every write fails, from the call that
/// wrote, with the OS's error, in every close mode; nothing is left.
#[cfg(target_os = "linux")]
fn a_read_only_output_fails_each_write_with_the_os_error() {
    if !is_root() {
        unmet("mounting a read-only tmpfs needs root (CI and the project's machines run as root)");
    }
    let t = tempdir();
    let ro = t.join("ro");
    let _mounted = Tmpfs::mount(&ro, "ro,size=64k");
    let erofs = Some(libc::EROFS);

    let missing = Batch::new(ro.join("missing"));
    let Err(error) = missing else {
        panic!("a batch in a folder that cannot be made");
    };
    assert_eq!(
        error.io_error().and_then(|e| e.raw_os_error()),
        erofs,
        "{error}"
    );

    for close in close_modes() {
        let batch = Batch::builder(&ro).close(close).build().unwrap();
        let error = batch.write("a.txt", "a").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Write, "{close:?}: {error}");
        assert_eq!(error.io_error().and_then(|e| e.raw_os_error()), erofs);
        let Err(error) = batch.create("b.txt") else {
            panic!("no file on a read-only disk");
        };
        assert_eq!(error.io_error().and_then(|e| e.raw_os_error()), erofs);
        let report = batch.finish().map_err(|e| e.to_string()).unwrap();
        assert_eq!(report.files, 0);
        assert_eq!(children(&ro), Vec::<String>::new());
    }
}

/// A folder of the output swapped for a symlink to a folder outside between two writes (what a
/// hostile local process could do): the writes after it fail with the reason, whatever the
/// close mode, and nothing reaches the folder outside. Unix only: Windows works by full path
/// (docs/security.md).
#[cfg(unix)]
fn a_folder_swapped_for_a_symlink_is_never_written_through() {
    for close in close_modes() {
        let t = tempdir();
        let (out, outside) = (t.join("out"), t.join("outside"));
        fs::create_dir(&outside).unwrap();
        let batch = Batch::builder(&out).close(close).build().unwrap();
        batch.write("a/x", "before").unwrap();
        // A batch into a new folder writes in its staging folder, put in place by `finish`:
        // that is where the swap is made.
        let staging = t.join(".out.fastwrite-staging");
        fs::rename(staging.join("a"), staging.join("a.moved")).unwrap();
        std::os::unix::fs::symlink(&outside, staging.join("a")).unwrap();
        for (path, kind) in [("a/y", ErrorKind::Write), ("a/new/z", ErrorKind::Directory)] {
            let error = batch.write(path, "after").unwrap_err();
            assert_eq!(error.kind(), kind, "{close:?} {path}: {error}");
            assert!(
                error.to_string().contains("a symlink is in the way"),
                "{close:?} {path}: {error}"
            );
        }
        let Err(error) = batch.create("a/w") else {
            panic!("{close:?}: a file was created through the symlink");
        };
        assert!(
            error.to_string().contains("a symlink is in the way"),
            "{error}"
        );
        batch.write("b/ok", "elsewhere").unwrap();
        let report = batch.finish().map_err(|e| e.to_string()).unwrap();
        assert_eq!(report.files, 2, "{close:?}");
        assert_eq!(children(&outside), Vec::<String>::new(), "{close:?}");
        assert_eq!(fs::read(out.join("a.moved/x")).unwrap(), b"before");
        assert_eq!(fs::read(out.join("b/ok")).unwrap(), b"elsewhere");
    }
}

/// A program gives the password of an encrypted zip up front, or through `password_prompt`,
/// which is asked once, and only for a zip that has encrypted entries (AES-128/192/256 here,
/// made by the `zip` crate).
fn an_encrypted_zip_asks_its_password_once() {
    use zip::AesMode;
    let t = tempdir();
    let archive = t.join("secret.zip");
    let mut w = zip::ZipWriter::new(fs::File::create(&archive).unwrap());
    for (i, mode) in [AesMode::Aes128, AesMode::Aes192, AesMode::Aes256]
        .into_iter()
        .enumerate()
    {
        let opts = zip::write::SimpleFileOptions::default().with_aes_encryption(mode, "pw");
        w.start_file(format!("f{i}.txt"), opts).unwrap();
        w.write_all(format!("secret {i}").as_bytes()).unwrap();
    }
    w.start_file("plain.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    w.write_all(b"plain").unwrap();
    w.finish().unwrap();

    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let prompt = |answer: Option<&'static str>| {
        let asked = std::sync::Arc::clone(&asked);
        let ask: std::sync::Arc<dyn Fn() -> Option<Vec<u8>> + Send + Sync> =
            std::sync::Arc::new(move || {
                asked.fetch_add(1, Ordering::SeqCst);
                answer.map(|a| a.as_bytes().to_vec())
            });
        ask
    };
    let mut opts = fastwrite::Options {
        password_prompt: Some(prompt(Some("pw"))),
        ..Default::default()
    };
    let out = t.join("out");
    let report = fastwrite::extract(&archive, &out, &opts).unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    for i in 0..3 {
        assert_eq!(
            fs::read_to_string(out.join(format!("f{i}.txt"))).unwrap(),
            format!("secret {i}")
        );
    }
    assert_eq!(fs::read_to_string(out.join("plain.txt")).unwrap(), "plain");

    // No answer: the encrypted entries fail, the rest is written.
    opts.password_prompt = Some(prompt(None));
    let report = failed(fastwrite::extract(&archive, &t.join("none"), &opts));
    assert_eq!(report.failures.len(), 3);
    assert!(
        report
            .failures
            .iter()
            .all(|f| f.kind() == ErrorKind::Source)
    );
    assert_eq!(report.files, 1);
    // A wrong password given up front: the prompt is not asked, each entry fails, no file.
    opts.password = Some(b"wrong".to_vec());
    let before = asked.load(Ordering::SeqCst);
    let report = failed(fastwrite::extract(&archive, &t.join("wrong"), &opts));
    assert_eq!(asked.load(Ordering::SeqCst), before);
    assert_eq!(report.failures.len(), 3);
    assert!(
        report.failures[0].message().contains("wrong password"),
        "{:?}",
        report.failures
    );
    assert!(!t.join("wrong/f0.txt").exists());
    // A zip with nothing encrypted never asks.
    let plain = t.join("plain.zip");
    let mut w = zip::ZipWriter::new(fs::File::create(&plain).unwrap());
    w.start_file("a", zip::write::SimpleFileOptions::default())
        .unwrap();
    w.finish().unwrap();
    opts.password = None;
    let before = asked.load(Ordering::SeqCst);
    fastwrite::extract(&plain, &t.join("plain"), &opts).unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), before);
}

/// Issue 35, item 12: `extract`, `list`, `mirror` and `read_files` return the crate's own
/// `RunError`: a run that could not start is `Start`, with the kind a program matches and the
/// path it is about (and the OS error where there is one); a run where entries failed is
/// `Failed`, never `Ok` (it was `Ok` with every entry failed); and with `RUST_BACKTRACE=1`
/// nothing of it carries a backtrace.
fn runs_fail_with_the_crates_own_error_kinds_and_paths() {
    use fastwrite::RunError;
    // SAFETY: the test binary's tests run one at a time (tests/common: run_tests).
    unsafe { std::env::set_var("RUST_BACKTRACE", "1") };
    let t = tempdir();
    let opts = fastwrite::Options::default();
    let start = |result: Result<fastwrite::Report, RunError>| match result {
        Err(RunError::Start(error)) => error,
        other => panic!("expected a start failure: {other:?}"),
    };
    let missing = t.join("missing.zip");
    let error = start(fastwrite::extract(&missing, &t.join("o1"), &opts));
    assert_eq!(error.kind(), ErrorKind::Source);
    assert_eq!(error.path(), missing);
    assert_eq!(
        error.io_error().map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );
    assert!(
        error.to_string().starts_with("cannot open archive"),
        "{error}"
    );
    let text = t.join("notes.txt");
    fs::write(&text, "just some notes\n").unwrap();
    let error = start(fastwrite::extract(&text, &t.join("o2"), &opts));
    assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
    assert_eq!(error.path(), text);
    let archive = t.join("a.tar");
    fs::write(&archive, crate_tar(&[("a.txt", b"a")])).unwrap();
    let error = start(fastwrite::extract(&archive, &text, &opts));
    assert_eq!(error.kind(), ErrorKind::Directory, "{error}");
    assert_eq!(error.path(), text);
    let mut bad = fastwrite::Options::default();
    bad.select.patterns = vec!["[".into()];
    let error = start(fastwrite::extract(&archive, &t.join("o3"), &bad));
    assert_eq!(error.kind(), ErrorKind::Invalid, "{error}");
    let error = start(fastwrite::mirror(
        &t.join("nothing"),
        &t.join("o4"),
        &opts,
        &Default::default(),
    ));
    assert_eq!(error.kind(), ErrorKind::Source);
    assert_eq!(
        error.io_error().map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );
    let error = start(fastwrite::list(&missing, &Default::default(), &mut |_| {}));
    assert_eq!(error.kind(), ErrorKind::Source);

    // Every entry failed: an `Err`, with the report.
    let out = t.join("o5");
    fastwrite::extract(&archive, &out, &opts).unwrap();
    let again = fastwrite::extract(&archive, &out, &opts).unwrap_err();
    let report = again.report().expect("the run's report");
    assert_eq!(report.failures.len(), 1);
    assert_eq!(again.errors()[0].kind(), ErrorKind::AlreadyExists);
    assert!(
        again
            .to_string()
            .starts_with("1 entry failed: 'a.txt': already exists"),
        "{again}"
    );
    // `?` into `io::Error` and `Box<dyn Error>` works, with the OS error's kind where there is one.
    let io: std::io::Error = start_io(&missing, &t.join("o6"));
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    for shown in [format!("{again:?}"), format!("{io:?}")] {
        assert!(!shown.contains("acktrace"), "{shown}");
    }
    // A URL is no folder: refused by name, nothing made.
    let Err(error) = Batch::new("hdfs://bench/prefix") else {
        panic!("a batch rooted at a URL");
    };
    assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
    assert!(!Path::new("s3:").exists());
    // SAFETY: as above.
    unsafe { std::env::remove_var("RUST_BACKTRACE") };
}

/// `extract` through `?` into an `io::Error`.
fn start_io(archive: &Path, out: &Path) -> std::io::Error {
    let run = || -> std::io::Result<fastwrite::Report> {
        Ok(fastwrite::extract(archive, out, &Default::default())?)
    };
    run().unwrap_err()
}

/// The report of a run whose entries failed (`RunError::Failed`); panics on anything else.
#[track_caller]
fn failed(result: Result<fastwrite::Report, fastwrite::RunError>) -> fastwrite::Report {
    match result {
        Err(fastwrite::RunError::Failed(report)) => *report,
        other => panic!("expected failed entries: {other:?}"),
    }
}

/// What the batch reports while it writes, through a program's own `Reporter`.
fn progress_is_told_every_file_and_byte() {
    #[derive(Default)]
    struct Count {
        files: AtomicUsize,
        bytes: AtomicUsize,
        finished: AtomicUsize,
    }
    impl fastwrite::Reporter for Count {
        fn bytes_written(&self, bytes: u64) {
            self.bytes.fetch_add(bytes as usize, Ordering::Relaxed);
        }
        fn file_written(&self) {
            self.files.fetch_add(1, Ordering::Relaxed);
        }
        fn finished(&self) {
            self.finished.fetch_add(1, Ordering::Relaxed);
        }
    }
    let count = std::sync::Arc::new(Count::default());
    let t = tempdir();
    let batch = Batch::builder(t.join("out"))
        .progress(count.clone())
        .build()
        .unwrap();
    (0..100usize)
        .into_par_iter()
        .for_each(|i| batch.write(format!("f{i}"), content(i)).unwrap());
    let report = batch.finish().unwrap();
    assert_eq!(count.files.load(Ordering::Relaxed), 100);
    assert_eq!(count.bytes.load(Ordering::Relaxed) as u64, report.bytes);
    assert_eq!(count.finished.load(Ordering::Relaxed), 1);
}

/// A batch into a new folder writes in a staging folder beside it, put in place by `finish`
/// (a killed process leaves no partial file under a final name: docs/design.md, "What a kill
/// leaves"); into an empty folder, in a staging folder inside it, whose entries move up; into
/// one that holds files, in place.
fn a_batch_into_a_new_folder_appears_whole_at_finish() {
    let t = tempdir();
    let out = t.join("out");
    let batch = Batch::new(&out).unwrap();
    batch.write("a/x.txt", "x").unwrap();
    batch.write("y.txt", "y").unwrap();
    assert!(!out.exists(), "the folder is made at finish");
    let staging = t.join(".out.fastwrite-staging");
    assert_eq!(fs::read(staging.join("a/x.txt")).unwrap(), b"x");
    batch.finish().map_err(|e| e.to_string()).unwrap();
    assert_eq!(fs::read(out.join("a/x.txt")).unwrap(), b"x");
    assert_eq!(fs::read(out.join("y.txt")).unwrap(), b"y");
    assert!(!staging.exists());

    // An empty folder stays the same folder (its mode too).
    let empty = t.join("empty");
    fs::create_dir(&empty).unwrap();
    #[cfg(unix)]
    set_mode(&empty, 0o750);
    let batch = Batch::new(&empty).unwrap();
    batch.write("a/x.txt", "x").unwrap();
    assert_eq!(children(&empty), vec![".fastwrite-staging".to_string()]);
    batch.finish().map_err(|e| e.to_string()).unwrap();
    assert_eq!(children(&empty), vec!["a".to_string()]);
    assert_eq!(fs::read(empty.join("a/x.txt")).unwrap(), b"x");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&empty).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o750);
    }

    // A batch dropped without finish puts what it wrote in place too.
    let dropped = t.join("dropped");
    let batch = Batch::new(&dropped).unwrap();
    batch.write("z.txt", "z").unwrap();
    drop(batch);
    assert_eq!(fs::read(dropped.join("z.txt")).unwrap(), b"z");
}

/// `atomic(true)`: the folder appears with every file only if the batch ends without an error.
fn an_atomic_batch_appears_whole_or_not_at_all() {
    let t = tempdir();
    // An error (a refused path) fails the batch: no folder.
    let out = t.join("failed");
    let batch = Batch::builder(&out).atomic(true).build().unwrap();
    batch.write("good.txt", "good").unwrap();
    assert!(batch.write("../escape.txt", "bad").is_err());
    let error = batch.finish().unwrap_err();
    assert_eq!(error.taken(), 1);
    assert!(!out.exists());
    assert!(!t.join(".failed.fastwrite-staging").exists());
    // So does a batch dropped unfinished, and a scope whose work fails.
    let dropped = t.join("dropped");
    let batch = Batch::builder(&dropped).atomic(true).build().unwrap();
    batch.write("good.txt", "good").unwrap();
    drop(batch);
    assert!(!dropped.exists());
    let scoped = t.join("scoped");
    let batch = Batch::builder(&scoped).atomic(true).build().unwrap();
    let result = batch.scope(|b| {
        b.write("good.txt", "good")?;
        Err::<(), _>(fastwrite::Error::from(std::io::Error::other(
            "the work failed",
        )))
    });
    assert!(result.is_err());
    assert!(!scoped.exists());
    // A whole batch appears whole.
    let whole = t.join("whole");
    let batch = Batch::builder(&whole).atomic(true).build().unwrap();
    batch.write("a/b.txt", "b").unwrap();
    batch.finish().map_err(|e| e.to_string()).unwrap();
    assert_eq!(fs::read(whole.join("a/b.txt")).unwrap(), b"b");
    // A folder that holds files is refused.
    let error = Batch::builder(&whole).atomic(true).build().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Directory, "{error}");
}

/// A folder a killed run wrote in (its marker left, no longer locked): the batch treats what
/// was made since that run began as the killed run's (an unfinished file is written again,
/// whatever the policy), and what is older as the user's (the policy applies); the marker goes.
#[cfg(unix)]
fn a_batch_finishes_what_a_killed_run_left() {
    let t = tempdir();
    let out = t.join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("mine.txt"), "mine").unwrap();
    // Ctimes come from a coarse clock: the killed run began a tick later.
    std::thread::sleep(Duration::from_millis(50));
    let marker = out.join(".fastwrite-run-999999-0");
    fs::write(&marker, "killed").unwrap();
    fs::write(out.join("half.txt"), "ha").unwrap();
    fs::write(out.join(".whole.txt.fastwrite-999999-3"), "who").unwrap();
    let batch = Batch::new(&out).unwrap();
    batch.write("half.txt", "half, whole").unwrap();
    let error = batch.write("mine.txt", "theirs").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::AlreadyExists, "{error}");
    let report = batch.finish().map_err(|e| e.to_string()).unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("was killed") && w.contains(".whole.txt.fastwrite-999999-3")),
        "{:?}",
        report.warnings
    );
    assert_eq!(fs::read(out.join("half.txt")).unwrap(), b"half, whole");
    assert_eq!(fs::read(out.join("mine.txt")).unwrap(), b"mine");
    assert_eq!(
        children(&out),
        vec!["half.txt".to_string(), "mine.txt".to_string()]
    );
}

fn main() {
    run_tests(tests![
        batches_errors_and_flags_cross_threads,
        many_rayon_tasks_write_and_stream_at_once,
        paths_leaving_the_root_are_refused_and_nothing_is_written_outside,
        existing_files_follow_the_overwrite_policy,
        cancelling_stops_new_files_and_keeps_every_written_one_whole,
        a_stream_cancelled_midway_leaves_nothing,
        a_writer_dropped_unfinished_is_removed_and_reported,
        dropping_a_batch_without_finish_still_completes_everything,
        #[cfg(unix)]
        modes_and_mtimes_are_applied_exactly,
        #[cfg(unix)]
        the_library_writes_what_the_command_line_writes,
        #[cfg(target_os = "linux")]
        failed_closes_come_back_with_their_paths_in_every_close_mode,
        #[cfg(target_os = "linux")]
        a_dropped_batch_still_removes_what_failed_to_close,
        #[cfg(target_os = "linux")]
        scope_returns_the_work_error_and_every_failed_close,
        a_serializers_error_and_taken_errors_still_come_back,
        spawn_write_returns_at_once_and_every_error_comes_back,
        #[cfg(target_os = "linux")]
        a_quota_error_comes_back_from_the_call_that_wrote,
        #[cfg(target_os = "linux")]
        a_full_disk_fails_the_file_that_did_not_fit,
        #[cfg(target_os = "linux")]
        a_read_only_output_fails_each_write_with_the_os_error,
        progress_is_told_every_file_and_byte,
        an_encrypted_zip_asks_its_password_once,
        #[cfg(unix)]
        a_folder_swapped_for_a_symlink_is_never_written_through,
        the_output_cap_holds_for_a_mirror_too,
        a_batch_into_a_new_folder_appears_whole_at_finish,
        an_atomic_batch_appears_whole_or_not_at_all,
        #[cfg(unix)]
        a_batch_finishes_what_a_killed_run_left,
        runs_fail_with_the_crates_own_error_kinds_and_paths,
    ])
}
