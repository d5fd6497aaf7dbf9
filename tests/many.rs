//! Runs of many archives into a folder (issue 43): globs fastwrite expands, `--from-list`,
//! `--per-archive`, completion records and the plain rerun, `--report`, `--shard`, and two
//! archives that write one path. (Into a bucket: tests/s3.rs.) The globs here are Unix paths:
//! a glob of Windows paths (`C:\\dir\\*.zip`) is not yet tested under Wine.

#[macro_use]
mod common;

use common::*;

/// `n` tars under `dir/shards/` (every other one in `sub/`), each with two files of its own.
#[cfg(unix)]
fn shards(t: &TestDir, n: usize) -> std::path::PathBuf {
    let dir = t.join("shards");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for i in 0..n {
        let own = format!("own-{i}.txt");
        let body = format!("shard {i}\n");
        let deep = format!("dir-{i}/deep.txt");
        let tar = crate_tar(&[(&own, body.as_bytes()), (&deep, b"deep\n")]);
        let at = if i % 2 == 0 { "" } else { "sub/" };
        std::fs::write(dir.join(format!("{at}shard-{i:03}.tar")), tar).unwrap();
    }
    dir
}

fn report_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[cfg(unix)]
fn statuses(lines: &[serde_json::Value]) -> Vec<String> {
    let mut found: Vec<String> = lines
        .iter()
        .map(|l| {
            format!(
                "{} {}",
                l["status"].as_str().unwrap(),
                l["source"].as_str().unwrap()
            )
        })
        .collect();
    found.sort();
    found
}

/// A glob fastwrite expands (`**` across folders), each archive into a folder of its own, a
/// report line for each; the same command again skips every one from the records.
#[cfg(unix)]
#[test]
fn a_glob_per_archive_is_done_once_and_the_rerun_skips_it() {
    let t = tempdir();
    let dir = shards(&t, 6);
    let out = t.join("out");
    let report = t.join("report.jsonl");
    let glob = format!("{}/**/*.tar", dir.display());
    let args = osv![
        "extract",
        &glob,
        "-o",
        &out,
        "--per-archive",
        "--report",
        &report
    ];
    let r = run_fastwrite(&args);
    r.assert_code(0);
    let lines = report_lines(&report);
    assert_eq!(lines.len(), 6, "{}", r.dump());
    for line in &lines {
        assert_eq!(line["status"], "done", "{line}");
        assert_eq!(line["files"], 2, "{line}");
        assert!(
            line["identity"].as_str().unwrap().starts_with("size "),
            "{line}"
        );
    }
    for i in 0..6 {
        let own = out.join(format!("shard-{i:03}/own-{i}.txt"));
        assert_eq!(
            std::fs::read_to_string(&own).unwrap(),
            format!("shard {i}\n")
        );
    }
    let done = std::fs::read_dir(out.join(".fastwrite/done"))
        .unwrap()
        .count();
    assert_eq!(done, 6);
    // The plain rerun: nothing written, each said as done before.
    let r = run_fastwrite(&args);
    r.assert_code(0);
    let lines = report_lines(&report);
    assert!(
        lines.iter().all(|l| l["status"] == "skipped-done"),
        "{}",
        r.dump()
    );
    assert!(r.stderr.contains("6 done before"), "{}", r.dump());
}

/// Two archives writing one path into one OUT: the second is refused by name, never a silent
/// last-wins; the one that failed is tried again by the rerun and fails again.
#[test]
fn two_archives_writing_one_path_conflict() {
    let t = tempdir();
    let a = t.join("a.tar");
    let b = t.join("b.tar");
    std::fs::write(&a, crate_tar(&[("x.txt", b"from a")])).unwrap();
    // (Of another size: into a folder, a file of the entry's size and mtime left by an
    // unfinished attempt is taken as that attempt's; docs/many-archives.md.)
    std::fs::write(&b, crate_tar(&[("x.txt", b"from bb")])).unwrap();
    let list = t.join("list.txt");
    std::fs::write(&list, format!("{}\n\n{}\n", a.display(), b.display())).unwrap();
    let out = t.join("out");
    let report = t.join("r.jsonl");
    let args = osv![
        "extract",
        "--from-list",
        &list,
        "-o",
        &out,
        "--report",
        &report
    ];
    for round in 0..2 {
        let r = run_fastwrite(&args);
        r.assert_code(1);
        let lines = report_lines(&report);
        let failed: Vec<_> = lines.iter().filter(|l| l["status"] == "failed").collect();
        assert_eq!(failed.len(), 1, "{}", r.dump());
        assert_eq!(failed[0]["failures"][0]["path"], "x.txt", "{}", r.dump());
        assert_eq!(failed[0]["failures"][0]["kind"], "already-exists");
        let content = std::fs::read_to_string(out.join("x.txt")).unwrap();
        let winner = if content == "from a" { &a } else { &b };
        if round == 0 {
            // Both in one run: the failure names the archive that wrote the path first.
            let reason = failed[0]["failures"][0]["reason"].as_str().unwrap();
            assert!(
                reason.contains(&format!("'{}' of this run holds it too", winner.display()))
                    && reason.contains("--per-archive"),
                "{reason}"
            );
        }
        assert!(
            lines
                .iter()
                .any(|l| l["source"] == winner.display().to_string()
                    && (l["status"] == "done" || l["status"] == "skipped-done")),
            "{}",
            r.dump()
        );
    }
}

/// A kill in the middle of a run of many: the plain rerun finishes what was left, with the
/// files the killed attempt wrote kept as its own, every archive's record made once.
#[cfg(unix)]
#[test]
fn a_killed_run_is_finished_by_the_rerun() {
    let t = tempdir();
    let dir = shards(&t, 40);
    let out = t.join("out");
    let glob = format!("{}/**/*.tar", dir.display());
    let report = t.join("r.jsonl");
    let args = osv![
        "extract",
        &glob,
        "-o",
        &out,
        "--report",
        &report,
        "--archives-at-once",
        "2"
    ];
    // Killed at several points (some before it began, some after it ended).
    for delay_ms in [5u64, 20, 60] {
        let mut child = fastwrite_command(&args).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
    }
    let r = run_fastwrite(&args);
    r.assert_code(0);
    let mut want: Vec<String> = (0..40)
        .flat_map(|i| {
            [
                format!("own-{i}.txt"),
                format!("dir-{i}"),
                format!("dir-{i}/deep.txt"),
            ]
        })
        .collect();
    want.sort();
    let mut found: Vec<String> = all_paths(&out)
        .into_iter()
        .filter(|p| !p.starts_with(".fastwrite"))
        .collect();
    found.sort();
    assert_eq!(found, want, "{}", r.dump());
    assert_eq!(
        std::fs::read_dir(out.join(".fastwrite/done"))
            .unwrap()
            .count(),
        40
    );
    let lines = report_lines(&report);
    assert!(
        lines.iter().all(|l| l["status"] != "changed"),
        "{}",
        statuses(&lines).join("\n")
    );
}

/// `--shard I/N` in N processes: every archive in exactly one share.
#[cfg(unix)]
#[test]
fn shards_split_the_work_with_no_overlap() {
    let t = tempdir();
    let dir = shards(&t, 12);
    let out = t.join("out");
    let glob = format!("{}/**/*.tar", dir.display());
    let mut taken = Vec::new();
    for i in 0..3 {
        let report = t.join(format!("r{i}.jsonl"));
        let shard = format!("{i}/3");
        let r = run_fastwrite(&osv![
            "extract",
            &glob,
            "-o",
            &out,
            "--per-archive",
            "--shard",
            &shard,
            "--report",
            &report
        ]);
        r.assert_code(0);
        taken.extend(statuses(&report_lines(&report)));
    }
    taken.sort();
    assert_eq!(taken.len(), 12, "{taken:?}");
    taken.dedup();
    assert_eq!(taken.len(), 12, "{taken:?}");
    assert!(taken.iter().all(|s| s.starts_with("done ")), "{taken:?}");
    let r = run_fastwrite(&osv!["extract", &glob, "-o", &out, "--shard", "3/3"]);
    r.assert_code(2);
}

/// Two archives that would share a folder are refused before anything is written; a glob that
/// matches nothing, too.
#[cfg(unix)]
#[test]
fn what_cannot_be_done_is_refused_before_anything_is_written() {
    let t = tempdir();
    std::fs::create_dir_all(t.join("x")).unwrap();
    std::fs::write(t.join("a.tar"), crate_tar(&[("1.txt", b"1")])).unwrap();
    std::fs::write(t.join("x/a.tar.gz"), b"not used").unwrap();
    let out = t.join("out");
    let list = t.join("list");
    std::fs::write(
        &list,
        format!(
            "{}\n{}\n",
            t.join("a.tar").display(),
            t.join("x/a.tar.gz").display()
        ),
    )
    .unwrap();
    let r = run_fastwrite(&osv![
        "extract",
        "--from-list",
        &list,
        "-o",
        &out,
        "--per-archive"
    ]);
    r.assert_code(2);
    assert!(
        r.stderr.contains("would both be extracted into 'a'"),
        "{}",
        r.dump()
    );
    assert!(!out.exists());
    let glob = format!("{}/*.rar", t.path().display());
    let r = run_fastwrite(&osv!["extract", &glob, "-o", &out]);
    r.assert_code(2);
    assert!(r.stderr.contains("matches no archive"), "{}", r.dump());
    assert!(!out.exists());
}
