//! Thin: parse arguments, run, print what happened, map it to an exit code.

// Unsafe only to install the signal handlers, each block's safety argument written down.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod cli;
#[allow(unsafe_code)]
mod interrupt;
mod many;
mod show;

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use crate::cli::{Cli, Command};
use crate::show::{Bar, exit, for_terminal, say};

/// Failures of one kind printed on stderr before the rest are counted (all are in `--json`).
const FAILURES_SHOWN_PER_KIND: usize = 10;

fn main() {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches();
    if let Some(refusal) = crate::cli::unused_flag(&matches) {
        say!("fastwrite: {refusal}");
        std::process::exit(exit::CANNOT_START);
    }
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    if let Err(error) = cli.read_files_from() {
        std::process::exit(cannot_start(&format!("{error:#}"), cli.global.json));
    }
    std::process::exit(run(cli));
}

fn run(cli: Cli) -> i32 {
    match &cli.command {
        Command::Completions { shell } => return print_completions(*shell),
        Command::Man { command } => return print_man_page(command.as_deref()),
        Command::List(args) => return list(args, &cli.global),
        Command::Extract(args) => {
            if let Some(refusal) = refuse_extract(args, &cli.global) {
                return cannot_start(refusal, cli.global.json);
            }
        }
        Command::Mirror(args) if args.dry_run && cli.global.atomic => {
            return cannot_start(
                "--atomic does nothing with --dry-run, which changes nothing: refused",
                cli.global.json,
            );
        }
        _ => {}
    }
    let mut opts = cli.options();
    fastwrite::set_max_requests_per_second(
        cli.global
            .max_requests_per_second
            .and_then(std::num::NonZeroU32::new),
    );
    fastwrite::raise_open_file_limit();
    if let Err(error) = interrupt::install(&opts.cancel) {
        // Still safe to go on: Ctrl-C then stops the process the default way.
        say!("fastwrite: warning: cannot catch Ctrl-C: {error}");
    }
    if let Command::Extract(args) = &cli.command {
        let archives = args.archives();
        // (-t and -O with a run of many were refused above.)
        if args.is_many() {
            if archives.len() > 1 {
                // The patterns were archives.
                opts.select.patterns.clear();
            }
            if cli.global.verbose {
                opts.progress = Some(Arc::new(show::Verbose::default()));
            }
            return many::extract(&cli, args, &opts);
        }
        if archives.len() > 1 {
            // Several archives, each in turn into OUT; the patterns were archives.
            opts.select.patterns.clear();
            let mut code = exit::SUCCESS;
            for archive in &archives {
                if interrupt::signal().is_some() {
                    break;
                }
                show::about(Some(archive));
                let done = if args.test || args.to_stdout {
                    read_files(&cli, args, archive, &opts)
                } else {
                    set_progress(&cli, &mut opts);
                    match ran(fastwrite::extract(archive, &args.output, &opts)) {
                        Ok(report) => told(&cli, report, Some(archive), "written"),
                        Err(error) => cannot_start(&error.to_string(), cli.global.json),
                    }
                };
                code = code.max(done);
            }
            show::about(None);
            return code;
        }
        if args.test || args.to_stdout {
            return read_files(&cli, args, args.archive(), &opts);
        }
    }
    set_progress(&cli, &mut opts);
    let result = match &cli.command {
        Command::Extract(args) => ran(fastwrite::extract(args.archive(), &args.output, &opts)),
        Command::Mirror(args) => ran(fastwrite::mirror(
            &args.src,
            &args.dst,
            &opts,
            &args.options(),
        )),
        Command::List(_) | Command::Completions { .. } | Command::Man { .. } => {
            unreachable!("answered above")
        }
    };
    match result {
        Ok(report) => told(&cli, report, None, "written"),
        Err(error) => {
            if let Some(bar) = &opts.progress {
                bar.finished();
            }
            cannot_start(&error.to_string(), cli.global.json)
        }
    }
}

/// A run's report, whether entries failed or not (`told` says which, and the exit code); `Err`
/// only for a run that could not start, or whose output stopped.
fn ran(
    result: Result<fastwrite::Report, fastwrite::RunError>,
) -> Result<fastwrite::Report, fastwrite::RunError> {
    match result {
        Err(fastwrite::RunError::Failed(report)) => Ok(*report),
        other => other,
    }
}

/// A line per file and link with `-v`, else a bar on a terminal (a new one for each run).
fn set_progress(cli: &Cli, opts: &mut fastwrite::Options) {
    opts.progress = if cli.global.verbose {
        Some(Arc::new(show::Verbose::default()))
    } else if !cli.global.quiet && std::io::stderr().is_terminal() {
        Some(Arc::new(Bar::new()))
    } else {
        None
    };
}

/// Tells a finished run's report (warnings, a mirror's actions, failures, the JSON, the stats)
/// and returns its exit code. `archive`: which one, where a run reads several; `done`: what
/// became of the files ("written", or "tested" and "read" by `-t` and `-O`).
fn told(
    cli: &Cli,
    mut report: fastwrite::Report,
    archive: Option<&std::path::Path>,
    done: &str,
) -> i32 {
    warn(&report.warnings, cli.global.quiet);
    if let Some(mirror) = report.mirror.as_ref().filter(|_| !cli.global.json) {
        let mut out = std::io::stdout().lock();
        for line in &mirror.actions {
            if writeln!(out, "{}", show::terminal_safe(line)).is_err() {
                break;
            }
        }
    }
    let failed = report.failures.len();
    // A person reads stderr: a few of each kind, and how many more; `--json` has them all.
    for line in show::failure_summary(&mut report, FAILURES_SHOWN_PER_KIND) {
        say!("fastwrite: {line}");
    }
    if cli.global.json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", show::report_json(&report, archive)).and_then(|()| out.flush());
    }
    if failed > 0 {
        say!(
            "fastwrite: {} failed; {} {done}",
            show::count(failed as u64, "entry", "entries"),
            show::count(report.files, "file", "files")
        );
    }
    if cli.global.stats {
        say!("{}", report.stats());
    }
    if let Some(signal) = interrupt::signal() {
        if done == "written" {
            say!(
                "fastwrite: interrupted: {} files written and closed; the rest left out, and no file left half-written",
                report.files
            );
        }
        return 128 + signal;
    }
    show::exit_code(&report)
}

/// `extract -t` (every file read and checked, nothing written) and `extract -O` (every file's
/// content to standard output, in order).
fn read_files(
    cli: &Cli,
    args: &crate::cli::ExtractArgs,
    archive: &std::path::Path,
    opts: &fastwrite::Options,
) -> i32 {
    let verbose = cli.global.verbose;
    let read = if args.to_stdout {
        let mut out = std::io::stdout().lock();
        ran(fastwrite::read_files(archive, opts, &mut |_, data| {
            std::io::copy(data, &mut out).map(drop)
        }))
        .and_then(|report| match out.flush() {
            Ok(()) => Ok(report),
            Err(error) => Err(fastwrite::RunError::Output(error)),
        })
    } else {
        ran(fastwrite::read_files(archive, opts, &mut |name, data| {
            std::io::copy(data, &mut std::io::sink())?;
            if verbose {
                // `-tv | head`: the names stop; the test goes on, as `tar -tvf` goes on.
                let _ = writeln!(std::io::stdout().lock(), "{}", show::terminal_safe(name));
            }
            Ok(())
        }))
    };
    let report = match read {
        Ok(report) => report,
        // `-O | head`: the reader stopped; nothing to say, as tar says nothing.
        Err(error)
            if fastwrite::output_error(&error)
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            return exit::SUCCESS;
        }
        Err(error) => return cannot_start(&error.to_string(), cli.global.json),
    };
    let tested = format!(
        "fastwrite: {} tested ({}): no errors",
        show::count(report.files, "file", "files"),
        indicatif::BinaryBytes(report.bytes)
    );
    let code = told(
        cli,
        report,
        Some(archive),
        if args.test { "tested" } else { "read" },
    );
    if args.test && code == exit::SUCCESS && !cli.global.quiet && !cli.global.json {
        say!("{tested}");
    }
    code
}

/// What `extract` refuses before it starts, as tar does: an archive to be read from a terminal
/// (it would wait for a person to type one), and `-o -`, which looks like standard output but
/// would make a folder named `-`.
fn refuse_extract(args: &crate::cli::ExtractArgs, g: &crate::cli::Global) -> Option<&'static str> {
    if g.atomic && (args.test || args.to_stdout) {
        return Some("--atomic does nothing with -t or -O, which write no files: refused");
    }
    if g.verbose && args.to_stdout {
        return Some(
            "-v does nothing with -O, whose output is the files' content: refused (-O writes no names)",
        );
    }
    if (args.test || args.to_stdout) && args.is_many() {
        return Some(
            "-t and -O read archives named one by one: a glob, --from-list, --per-archive, --report, --shard and --archives-at-once are for runs that write (refused)",
        );
    }
    if g.json && args.report.as_ref().is_some_and(|r| r.as_os_str() == "-") {
        return Some(
            "--json and --report - would both write JSON to standard output: give --report a file, or leave out --json",
        );
    }
    if g.atomic && (args.is_many() || args.archives().len() > 1) {
        return Some(
            "--atomic puts one archive's tree in place whole: give one archive (several would each need OUT empty)",
        );
    }
    if args.output.as_os_str() == "-" {
        return Some(
            "'-o -' would make a folder named '-' (writing to standard output is not offered): give './-' if that is the folder you mean",
        );
    }
    if args.archive().as_os_str() == "-" && !args.is_many() && std::io::stdin().is_terminal() {
        return Some(
            "standard input is a terminal, not an archive: pipe one in (curl ... | fastwrite extract - -o OUT)",
        );
    }
    None
}

/// `fastwrite completions SHELL`: the script, from the same definitions as `--help`.
fn print_completions(shell: clap_complete::Shell) -> i32 {
    use clap::CommandFactory;
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "fastwrite", &mut out);
    write_out(&out)
}

/// `fastwrite man [COMMAND]`: a manual page (`fastwrite(1)`, `fastwrite-extract(1)`...), from
/// the same definitions as `--help`.
fn print_man_page(command: Option<&str>) -> i32 {
    use clap::CommandFactory;
    // Every page the top page names under SEE ALSO is one `man` prints (clap's own `help`
    // command, which has none, is left out of the list).
    let mut page = Cli::command().disable_help_subcommand(true);
    if let Some(name) = command {
        // The command's own page names itself as git's do (`git-commit(1)`).
        let title = match name {
            "extract" => "fastwrite-extract",
            "mirror" => "fastwrite-mirror",
            "list" => "fastwrite-list",
            "man" => "fastwrite-man",
            _ => "fastwrite-completions",
        };
        let Some(sub) = page.find_subcommand(name).cloned() else {
            say!(
                "fastwrite: no command '{}'",
                crate::show::terminal_safe(name)
            );
            return exit::CANNOT_START;
        };
        page = sub.name(title).bin_name(format!("fastwrite {name}"));
    }
    let mut out = Vec::new();
    let written = clap_mangen::Man::new(page).render(&mut out);
    match written {
        Ok(()) => write_out(&out),
        Err(error) => {
            say!("fastwrite: cannot render the manual page: {error}");
            exit::CANNOT_START
        }
    }
}

fn write_out(bytes: &[u8]) -> i32 {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => exit::SUCCESS,
        // `fastwrite man | head`: the reader has what it wanted.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => exit::SUCCESS,
        Err(error) => {
            say!("fastwrite: cannot write to standard output: {error}");
            exit::CANNOT_START
        }
    }
}

/// `fastwrite list`: a line per entry as it is read (a tar is never held whole); after them,
/// what extract would warn of (unless `quiet`), then failures.
fn list(args: &crate::cli::ListArgs, global: &crate::cli::Global) -> i32 {
    let (json, quiet) = (global.json, global.quiet);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut broken_pipe = false;
    let listed = fastwrite::list(&args.archive, &args.options(global), &mut |entry| {
        let text = if json {
            show::listed_json(entry)
        } else {
            show::listed_line(entry)
        };
        if !broken_pipe && writeln!(out, "{text}").is_err() {
            // `fastwrite list big.tar | head`: stop writing, as tar does.
            broken_pipe = true;
        }
    });
    let _ = out.flush();
    match ran(listed) {
        Ok(mut report) => {
            warn(&report.warnings, quiet);
            // As extract tells them (entries it would refuse among them): a few of each kind.
            for line in show::failure_summary(&mut report, FAILURES_SHOWN_PER_KIND) {
                say!("fastwrite: {line}");
            }
            show::exit_code(&report)
        }
        Err(error) => cannot_start(&error.to_string(), json),
    }
}

/// A run's warnings on stderr, one line each, unless `quiet` (`-q`).
fn warn(warnings: &[String], quiet: bool) {
    if !quiet {
        for warning in warnings {
            say!("fastwrite: warning: {}", for_terminal(warning));
        }
    }
}

/// A run that cannot start: the reason on stderr, and with `--json` as `{"error": ...}` on
/// stdout too. Exit 2.
fn cannot_start(message: &str, json: bool) -> i32 {
    // A library message names settings as a program sets them: here, as flags.
    let message = &show::for_people(message);
    say!("fastwrite: {}", for_terminal(message));
    if json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", show::error_json(message)).and_then(|()| out.flush());
    }
    exit::CANNOT_START
}
