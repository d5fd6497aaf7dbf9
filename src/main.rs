//! Thin: parse arguments, run, print what happened, map it to an exit code.

mod cli;
mod interrupt;

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use clap::Parser;
use fastwrite::exit;
use fastwrite::progress::Bar;

use crate::cli::{Cli, Command};

fn main() {
    std::process::exit(run(Cli::parse()));
}

fn run(cli: Cli) -> i32 {
    let mut opts = cli.options();
    fastwrite::raise_open_file_limit();
    if let Err(error) = interrupt::install(&opts.cancel) {
        // Still safe to go on: Ctrl-C then stops the process the default way.
        eprintln!("fastwrite: warning: cannot catch Ctrl-C: {error}");
    }
    if !cli.global.quiet && std::io::stderr().is_terminal() {
        opts.progress = Some(Arc::new(Bar::new()));
    }
    let result = match &cli.command {
        Command::Extract(args) => fastwrite::extract(&args.archive, &args.output, &opts),
        Command::Mirror(args) => fastwrite::mirror(&args.src, &args.dst, &opts, &args.options()),
    };
    let mut report = match result {
        Ok(report) => report,
        Err(error) => {
            if let Some(bar) = &opts.progress {
                bar.finished();
            }
            eprintln!("fastwrite: {error:#}");
            return exit::CANNOT_START;
        }
    };
    if !cli.global.quiet {
        for warning in &report.warnings {
            eprintln!("fastwrite: warning: {warning}");
        }
    }
    if let Some(mirror) = &report.mirror {
        let mut out = std::io::stdout().lock();
        for line in &mirror.actions {
            if writeln!(out, "{line}").is_err() {
                break;
            }
        }
    }
    let failed = report.failures.len();
    for line in report.failure_lines() {
        eprintln!("fastwrite: {line}");
    }
    if failed > 0 {
        eprintln!(
            "fastwrite: {failed} entries failed; {} files written",
            report.files
        );
    }
    if cli.global.stats {
        eprintln!("{}", report.stats());
    }
    if let Some(signal) = interrupt::signal() {
        eprintln!(
            "fastwrite: interrupted: {} files written and closed; the rest left out, and no file left half-written",
            report.files
        );
        return 128 + signal;
    }
    report.exit_code()
}
