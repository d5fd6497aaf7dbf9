//! `fastwrite extract` of many archives: the sources expanded, each run once by the library's
//! `jobs`, each told on stderr where it failed or changed, and in `--report` as a JSON line the
//! moment it ends.

use std::io::Write;
use std::sync::Mutex;

use fastwrite::jobs::{SourceReport, Status};

use crate::cli::{Cli, ExtractArgs};
use crate::show::{self, exit, for_terminal, say};

/// Failures of one kind printed per archive before the rest are counted (all are in
/// `--report`).
const FAILURES_SHOWN_PER_KIND: usize = 5;

pub fn extract(cli: &Cli, args: &ExtractArgs, opts: &fastwrite::Options) -> i32 {
    let json = cli.global.json;
    let mut given: Vec<String> = Vec::new();
    for archive in args.archives() {
        match archive.to_str() {
            Some(text) => given.push(text.to_string()),
            None => {
                let why = format!(
                    "'{}' is not UTF-8: name it in a --from-list file",
                    archive.display()
                );
                return crate::cannot_start(&why, json);
            }
        }
    }
    if given.iter().any(|g| g == "-") {
        return crate::cannot_start(
            "'-' (standard input) is one archive: a run of many reads each from a path or URL (--from-list - reads the list from standard input)",
            json,
        );
    }
    let sources = match fastwrite::jobs::expand(&given, args.from_list.as_deref()) {
        Ok(sources) => sources,
        Err(error) => return crate::cannot_start(&format!("{error:#}"), json),
    };
    if sources.is_empty() {
        return crate::cannot_start("no archive to extract: the list is empty", json);
    }
    let report_file: Option<Mutex<Box<dyn Write + Send>>> = match &args.report {
        None => None,
        Some(path) if path.as_os_str() == "-" => Some(Mutex::new(Box::new(std::io::stdout()))),
        Some(path) => match std::fs::File::create(path) {
            Ok(file) => Some(Mutex::new(Box::new(file))),
            Err(error) => {
                let why = format!("cannot create the report '{}': {error}", path.display());
                return crate::cannot_start(&why, json);
            }
        },
    };
    let report_broken = std::sync::atomic::AtomicBool::new(false);
    let quiet = cli.global.quiet;
    let verbose = cli.global.verbose;
    let each = |report: SourceReport| {
        if let Some(out) = &report_file {
            let line = source_json(&report).to_string();
            let mut out = out
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err()
                && !report_broken.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                say!(
                    "fastwrite: cannot write the report: the rest of it is lost (the archives go on)"
                );
            }
        }
        tell(report, quiet, verbose);
    };
    let result = fastwrite::jobs::extract_all(&sources, &args.output, opts, &args.many(), &each);
    let summary = match result {
        Ok(summary) => summary,
        Err(error) => return crate::cannot_start(&error.to_string(), json),
    };
    let interrupted = crate::interrupt::signal();
    if !quiet {
        let mut parts = vec![format!("{} done", summary.done)];
        if summary.skipped_done > 0 {
            parts.push(format!("{} done before", summary.skipped_done));
        }
        if summary.failed > 0 {
            parts.push(format!("{} failed", summary.failed));
        }
        if summary.changed > 0 {
            parts.push(format!("{} changed", summary.changed));
        }
        if summary.other_shards > 0 {
            parts.push(format!("{} left to other shards", summary.other_shards));
        }
        let taken = summary.done + summary.skipped_done + summary.failed + summary.changed;
        let left = (sources.len() as u64).saturating_sub(taken + summary.other_shards);
        if left > 0 {
            parts.push(format!("{left} not started"));
        }
        say!(
            "fastwrite: {}: {}; {} written",
            show::count(sources.len() as u64, "archive", "archives"),
            parts.join(", "),
            show::count(summary.files, "file", "files")
        );
    }
    if json {
        let value = serde_json::json!({
            "archives": sources.len(),
            "done": summary.done,
            "skipped_done": summary.skipped_done,
            "failed": summary.failed,
            "changed": summary.changed,
            "other_shards": summary.other_shards,
            "files": summary.files,
        });
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{value}").and_then(|()| out.flush());
    }
    if let Some(signal) = interrupted {
        return 128 + signal;
    }
    if summary.all_done() {
        exit::SUCCESS
    } else {
        exit::SOME_FAILED
    }
}

/// What a person reads of one archive: nothing when it went well (a line each with -v), its
/// reason and its failures when not.
fn tell(report: SourceReport, quiet: bool, verbose: bool) {
    let source = for_terminal(&report.source);
    match report.status {
        Status::Done | Status::SkippedDone => {
            if verbose {
                say!(
                    "fastwrite: {source}: {} ({})",
                    report.status.name(),
                    show::count(report.files, "file", "files")
                );
            }
            if !quiet {
                for warning in &report.warnings {
                    say!("fastwrite: {source}: warning: {}", for_terminal(warning));
                }
            }
        }
        Status::Failed | Status::Changed => {
            let mut lines = Vec::new();
            if !report.failures.is_empty() {
                let mut run = fastwrite::Report::default();
                run.failures = report.failures;
                lines = show::failure_summary(&mut run, FAILURES_SHOWN_PER_KIND);
            }
            // One write, so that lanes' lines do not interleave.
            let mut text = format!(
                "fastwrite: {source}: {}: {}",
                report.status.name(),
                for_terminal(show::for_people(report.reason.as_deref().unwrap_or("")))
            );
            for line in lines {
                text.push_str(&format!("\nfastwrite: {source}: {line}"));
            }
            say!("{text}");
        }
    }
}

/// One archive's line of `--report`.
fn source_json(report: &SourceReport) -> serde_json::Value {
    let failures: Vec<serde_json::Value> = report.failures.iter().map(show::failure_json).collect();
    serde_json::json!({
        "source": report.source,
        "identity": report.identity,
        "destination": report.destination.to_string_lossy(),
        "status": report.status.name(),
        "files": report.files,
        "bytes": report.bytes,
        "seconds": report.seconds.as_secs_f64(),
        "reason": report.reason.as_deref().map(show::for_people),
        "failures": failures,
        "warnings": report.warnings,
        "pulled_from": report.pulled_from,
    })
}
