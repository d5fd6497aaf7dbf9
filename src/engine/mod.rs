//! The engine: the one door through which everything is written, whoever the source is (zip,
//! tar, a mirrored tree, or a program through [`Batch`](crate::Batch)).
//!
//! A source speaks to its target ([`Target`]: a local folder, [`Disk`], or a bucket's prefix)
//! in entries ([`Entry`](crate::plan::Entry): a validated relative path, a kind, a mode, an
//! mtime, a size) and in four calls:
//! - [`Target::prepare`] registers a whole plan up front, or [`Target::add_dir`] and
//!   [`Target::add_link`] register entries one at a time (a stream);
//! - [`Target::write_file`] (through a [`Writer`] per thread) writes a file, from many threads
//!   at once, making its parents as needed;
//! - [`Run::record`](run::Run::record) records what a source itself failed to read;
//! - [`Target::finish`] waits for every close, makes the links and empty directories, applies
//!   directory metadata deepest first, and returns the [`Report`].
//!
//! This file is the index and the run's skeleton (`run`; `open` and `tree`: the one choice of a
//! place's code, a target to write or a mirror's side, by where the place is). Beside it what
//! every target shares: `target.rs` (the trait), `writer.rs` and `state.rs` (a writer thread's
//! handle and state), `run.rs` (the run's own state), `pump.rs` (content as it comes), `feed.rs`
//! and `budget.rs` (writers fed by one reading thread), `writers.rs` (how many), `spread.rs`
//! (a plan's files a folder at a time, where creates in one folder wait), `kept.rs` and
//! `unverified.rs`; `tree.rs`, a place as a mirror's side. Each place is a module of its own,
//! its target and its side: `folder/` (directories, files, links, a kill's leftovers and
//! staging, the end of the run, a file per job, the side) and `bucket/`; the close stage
//! (`crate::close`) decides where every handle is closed. Data goes one way: source -> entries
//! -> directories -> files -> close stage -> report.

#[cfg(feature = "s3")]
pub(crate) mod bucket;
// Writers fed by one reading thread: a tar or a zip stream, a bucket's downloads.
#[cfg(any(
    feature = "tar",
    feature = "zip",
    all(feature = "mirror", feature = "s3")
))]
mod budget;
#[cfg(any(
    feature = "tar",
    feature = "zip",
    all(feature = "mirror", feature = "s3")
))]
pub(crate) mod feed;
mod folder;
mod kept;
mod pump;
mod run;
pub(crate) mod spread;
mod state;
mod target;
#[cfg(feature = "mirror")]
pub(crate) mod tree;
mod unverified;
mod writer;
mod writers;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

use crate::close::{Closer, SystemCloser};
use crate::options::Options;
use crate::place::{Place, Where};
use crate::plan::Plan;
use crate::report::Report;

pub(crate) use folder::{Disk, Staging, deepest_first, staged};
pub(crate) use pump::{CHUNK, Content, HoleRead};
pub(crate) use pump::{read_full, too_long, truncated};
pub(crate) use state::WriterState;
pub(crate) use target::{Engine, Streamed, Target};
pub(crate) use unverified::{Unverified, UnverifiedKind};
pub(crate) use writer::Writer;
pub(crate) use writers::MAX_WRITERS;

/// How many writers a run into `dest` gets, and why (see `writers.rs`).
pub(crate) fn size_writers(dest: &Place, opts: &Options) -> (usize, String) {
    let sized = writers::size(dest, None, opts);
    (sized.count, sized.why)
}
/// The write stage's threads for a source: a rayon pool of its own (`-j`), named for profilers.
pub(crate) fn writer_pool(opts: &Options) -> anyhow::Result<rayon::ThreadPool> {
    let threads = opts.threads.unwrap_or_else(crate::options::default_threads);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(|i| format!("fastwrite-write-{i}"))
        .build()
        .context("cannot start the writer threads")
}

/// One run of a source: the writer threads (sized by `root`'s filesystem and, where the writers
/// read it, `source`'s), the engine rooted at `root` (a folder, or a bucket prefix), the
/// source's `body` (called on this thread, with the pool to run its writers on), and the end of
/// the run. Returns the report and what `body` returned.
pub(crate) fn run<T>(
    dest: &Place,
    source: Option<&Path>,
    opts: &Options,
    body: impl FnOnce(&Engine, &rayon::ThreadPool) -> T,
) -> anyhow::Result<(Report, T)> {
    run_on(dest, source, opts, open, body)
}

fn run_on<E: Target + ?Sized, T>(
    dest: &Place,
    source: Option<&Path>,
    opts: &Options,
    new: impl FnOnce(&Place, &Options, Arc<dyn Closer>) -> anyhow::Result<Box<E>>,
    body: impl FnOnce(&E, &rayon::ThreadPool) -> T,
) -> anyhow::Result<(Report, T)> {
    let sized = writers::size(dest, source, opts);
    let opts = &Options {
        threads: Some(sized.count),
        ..opts.clone()
    };
    let engine = new(dest, opts, Arc::new(SystemCloser { fsync: opts.fsync }))?;
    let writers = writer_pool(opts)?;
    let out = body(&engine, &writers);
    // Empty directories are created on the pool.
    let mut report = writers.install(|| engine.finish());
    report.writers = sized.count;
    report.writers_why = if report.writers_why.is_empty() {
        sized.why
    } else {
        // A bucket's uploads in flight, sized apart.
        format!("{}; {}", sized.why, report.writers_why)
    };
    Ok((report, out))
}

/// The target `dest` names: a bucket prefix, or a local folder (opened, and created if
/// needed).
pub(crate) fn open(
    dest: &Place,
    opts: &Options,
    closer: Arc<dyn Closer>,
) -> anyhow::Result<Box<Engine>> {
    match dest.at() {
        Where::Folder(work) => Ok(Box::new(Disk::new((dest.named(), work), opts, closer)?)),
        #[cfg(feature = "s3")]
        Where::Store(url) => Ok(Box::new(bucket::Bucket::new((dest, url), opts, true)?)),
        #[cfg(not(feature = "s3"))]
        Where::Store(url) => anyhow::bail!(
            "'{url}' is a store's, and this build has no store client (cargo feature `s3`)"
        ),
    }
}

/// The side of a mirror `place` names: its source, or (with `destination`) its destination.
#[cfg(feature = "mirror")]
pub(crate) fn tree(
    place: &Place,
    destination: bool,
    (opts, mopts): (&Options, &crate::options::MirrorOptions),
) -> anyhow::Result<Box<dyn tree::Tree>> {
    let named = place.named();
    Ok(match place.at() {
        Where::Folder(_) => Box::new(folder::Folder::open(named, destination, mopts)?),
        #[cfg(feature = "s3")]
        Where::Store(url) => Box::new(bucket::Prefix::open(named, url, destination, opts)?),
        #[cfg(not(feature = "s3"))]
        Where::Store(url) => {
            let _ = opts; // (what a store's listing tries again by)
            anyhow::bail!(
                "'{url}' is a store's, and this build has no store client (cargo feature `s3`)"
            )
        }
    })
}

/// Adds what a source found itself (entries refused before writing, warnings) to the report.
pub(crate) fn add_plan(report: &mut Report, plan: &mut Plan) {
    report.failures.append(&mut plan.rejected);
    report.warnings.append(&mut plan.warnings);
}
