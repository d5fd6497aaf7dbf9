//! What scripts read: `--json` reports (every field checked against `--stats` and the tree),
//! and what people read: failures of one kind summarised on stderr, all of them in the JSON.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::Path;

use common::*;
use zip::write::SimpleFileOptions;

const FILES: usize = 30;

/// A zip of `FILES` files in 3 folders, 100 bytes each, made in-process.
fn archive(path: &Path) -> BTreeSet<String> {
    let mut w = zip::ZipWriter::new(fs::File::create(path).unwrap());
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut names = BTreeSet::new();
    for i in 0..FILES {
        let name = format!("d{}/f{i:02}.txt", i % 3);
        w.start_file(&name, opts).unwrap();
        w.write_all(&[b'x'; 100]).unwrap();
        names.insert(name);
    }
    w.finish().unwrap();
    names
}

fn report(r: &Output) -> serde_json::Value {
    let last = r.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.dump()))
}

/// The `--stats` line that starts with `label`, its first number.
fn stat(r: &Output, label: &str) -> u64 {
    let line = r.stderr.lines().find(|l| l.starts_with(label)).unwrap();
    line[label.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// One run's report: the counts are those of `--stats` and of the tree on disk; times and
/// close figures are there and sane; nothing else is on stdout.
#[test]
fn the_json_report_agrees_with_stats_and_the_tree() {
    let t = tempdir();
    let zip = t.join("a.zip");
    archive(&zip);
    let out = t.join("out");
    let r = run_fastwrite(&osv!["--json", "--stats", "extract", &zip, "-o", &out]);
    assert_eq!(r.code(), 0, "{}", r.dump());
    assert_eq!(
        r.stdout.lines().count(),
        1,
        "stdout is the report alone\n{}",
        r.dump()
    );
    let j = report(&r);
    assert_eq!(j["files"], FILES);
    assert_eq!(j["files"].as_u64().unwrap(), stat(&r, "files:"));
    assert_eq!(j["dirs"].as_u64().unwrap(), stat(&r, "directories:"));
    assert_eq!(j["dirs"], 3);
    assert_eq!(j["bytes"].as_u64().unwrap(), stat(&r, "bytes:"));
    assert_eq!(j["bytes"], (FILES * 100) as u64);
    assert_eq!(j["failed"].as_u64().unwrap(), stat(&r, "failed:"));
    assert_eq!(j["symlinks"], 0);
    assert_eq!(j["skipped"], 0);
    assert_eq!(j["failures"], serde_json::json!([]));
    assert!(j["mirror"].is_null());
    let wall = j["seconds"]["wall"].as_f64().unwrap();
    assert!(wall > 0.0 && wall < 600.0, "{wall}");
    for phase in ["dirs", "write", "close"] {
        assert!(j["seconds"][phase].as_f64().unwrap() >= 0.0, "{phase}");
    }
    assert!(j["close"]["threads"].is_u64() && j["close"]["peak_queue"].is_u64());
    let on_disk = scan_tree(&out);
    assert_eq!(on_disk.len(), FILES + 3, "{on_disk:?}");
}

/// Extracting twice into one folder fails every file the same way: stderr shows ten of them
/// and says how many more and which flags resolve them; the JSON report has every one, with
/// its path, kind and reason.
#[test]
fn many_failures_of_one_kind_are_summarised_and_all_are_in_the_json() {
    let t = tempdir();
    let zip = t.join("a.zip");
    let names = archive(&zip);
    let out = t.join("out");
    assert_eq!(extract(&zip, &out, &[]).code(), 0);
    let r = run_fastwrite(&osv!["extract", &zip, "-o", &out, "--json"]);
    assert_eq!(r.code(), 1, "{}", r.dump());
    let j = report(&r);
    let failures = j["failures"].as_array().unwrap();
    assert_eq!(failures.len(), FILES);
    let paths: BTreeSet<String> = failures
        .iter()
        .map(|f| f["path"].as_str().unwrap().replace('\\', "/"))
        .collect();
    assert_eq!(paths, names);
    for f in failures {
        assert_eq!(f["kind"], "already-exists", "{f}");
        assert!(
            f["reason"].as_str().unwrap().contains("already exists"),
            "{f}"
        );
    }
    let named: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("already exists ("))
        .collect();
    assert_eq!(named.len(), 10, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "... and {} more failed the same way (already there): --overwrite replaces them, --skip-existing keeps them",
            FILES - 10
        )),
        "{}",
        r.stderr
    );
    // The summary is stderr's; without --json stdout is empty.
    let plain = run_fastwrite(&osv!["extract", &zip, "-o", &out]);
    assert!(plain.stdout.is_empty());
    assert_eq!(
        plain
            .stderr
            .lines()
            .filter(|l| l.contains("already exists ("))
            .count(),
        10
    );
}

/// A mirror's report: its counts as `--stats` has them, and `--dry-run`'s actions inside the
/// JSON (stdout stays one object).
#[test]
fn a_mirror_reports_in_json_too() {
    let t = tempdir();
    let src = t.join("src");
    for i in 0..5 {
        fs::create_dir_all(src.join("d")).unwrap();
        fs::write(src.join(format!("d/f{i}")), "data").unwrap();
    }
    let dst = t.join("dst");
    let r = run_fastwrite(&osv!["--json", "--stats", "mirror", &src, &dst]);
    assert_eq!(r.code(), 0, "{}", r.dump());
    let j = report(&r);
    assert_eq!(j["files"], 5);
    assert_eq!(j["files"].as_u64().unwrap(), stat(&r, "files:"));
    assert_eq!(
        j["mirror"]["unchanged"].as_u64().unwrap(),
        stat(&r, "unchanged:")
    );
    fs::write(src.join("d/new"), "new").unwrap();
    let dry = run_fastwrite(&osv!["--json", "mirror", "-n", &src, &dst]);
    assert_eq!(dry.stdout.lines().count(), 1, "{}", dry.dump());
    let actions = report(&dry)["mirror"]["actions"].clone();
    // The new file, and its folder's mtime, which adding it changed.
    assert_eq!(actions, serde_json::json!(["update d/", "copy d/new"]));
}

/// Issue 26, item 10: a run that cannot start still answers a script with `--json`: one
/// object, `{"error": ...}`, on stdout (it printed nothing), exit 2; for extract, list and
/// mirror alike.
#[test]
fn a_run_that_cannot_start_says_so_in_json() {
    let t = tempdir();
    let missing = t.join("missing.zip");
    let not_a_folder = t.join("file.txt");
    fs::write(&not_a_folder, "x").unwrap();
    for args in [
        osv!["extract", &missing, "-o", t.join("out"), "--json"],
        osv!["list", &missing, "--json"],
        osv!["mirror", &not_a_folder, t.join("dst"), "--json"],
    ] {
        let r = run_fastwrite(&args);
        r.assert_code(2);
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}\n{}", r.dump());
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        let error = v["error"].as_str().unwrap_or_default();
        assert!(
            !error.is_empty() && r.stderr.contains(error),
            "{args:?}: the JSON's error is not stderr's\n{}",
            r.dump()
        );
    }
}

/// Issue 26, item 10: `skipped` counts every entry left out on purpose that a warning names
/// (it said 0 while the skips were printed): a FIFO and a character device in a tar without
/// `--devices`, an unsupported entry type, and existing files kept with `--skip-existing`.
#[test]
fn skipped_counts_every_skip_that_is_said() {
    let t = tempdir();
    let archive = t.join("kinds.tar");
    let mut builder = tar::Builder::new(Vec::new());
    for (path, kind, data) in [
        ("a.txt", tar::EntryType::Regular, &b"aaa"[..]),
        ("pipe", tar::EntryType::Fifo, b""),
        ("null", tar::EntryType::Char, b""),
        ("odd", tar::EntryType::new(b'Q'), b""),
        ("b.txt", tar::EntryType::Regular, b"bbb"),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_path(path).unwrap();
        header.set_entry_type(kind);
        header.set_mode(0o644);
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder.append(&header, data).unwrap();
    }
    fs::write(&archive, builder.into_inner().unwrap()).unwrap();
    let out = t.join("out");
    let r = run_fastwrite(&osv!["extract", &archive, "-o", &out, "--json"]);
    r.assert_code(0);
    let said = r.stderr.matches("warning: skipped").count();
    assert_eq!(said, 3, "{}", r.dump());
    assert_eq!(report(&r)["skipped"], 3, "{}", r.dump());
    // Again over itself, keeping what is there: the two files are skipped too.
    let r = run_fastwrite(&osv![
        "extract",
        &archive,
        "-o",
        &out,
        "--json",
        "--skip-existing"
    ]);
    r.assert_code(0);
    assert_eq!(report(&r)["skipped"], 5, "{}", r.dump());
}
