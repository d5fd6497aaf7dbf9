//! The close stage, all of its policy in one place: when a written file is closed by its writer
//! and when by the close pool, how big the pool grows, and what happens to each close's result.
//!
//! Closing a written file can take milliseconds (Windows Defender scans inside CloseHandle; NFS
//! and FUSE flush on close; `fsync` waits for the disk), where a local Linux disk closes in
//! microseconds. [`CloseMode::Auto`] therefore closes inline while closes are fast and starts a
//! pool of close threads ([`pool::ClosePool`]) once they prove slow, sized by Little's law from
//! the measured close time and write rate; [`CloseMode::Deferred`] always uses the pool and
//! [`CloseMode::Inline`] never does.
//!
//! Unlike std's `File` drop, close_already, rustup and xcp, nothing here drops the result of a
//! close: every failure is recorded with its path the moment it happens, the file is removed so
//! nothing half-written stays under a final name, and it is counted in the report.

mod pool;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::error::{Error, ErrorKind, Failures};
use crate::options::{CloseMode, Options};
use crate::platform::{self, OutDir};
use pool::ClosePool;

/// Closes one handle and says whether that worked: the seam where tests make closing slow or
/// failing. The error keeps the operating system's (see [`crate::Error::io_error`]).
pub(crate) trait Closer: Send + Sync {
    fn close(&self, file: File, path: &Path) -> anyhow::Result<()>;
}

/// The real thing: optionally fsync, then close, reporting the first error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SystemCloser {
    pub fsync: bool,
}

impl Closer for SystemCloser {
    fn close(&self, file: File, _path: &Path) -> anyhow::Result<()> {
        let synced = if self.fsync {
            file.sync_all().context("fsync")
        } else {
            Ok(())
        };
        let closed = platform::close(file).context("close");
        // The handle is closed either way; the first failure is the one worth reporting.
        synced.and(closed)
    }
}

/// What happens to a file once it is closed successfully.
#[derive(Debug)]
pub(crate) enum Finalize {
    /// It was written under its final name.
    Keep,
    /// It was written under a temporary name of the run's before its path was known, and is
    /// moved there later by its source (`engine/folder/park.rs`); it counts as written only
    /// then, so its failure here takes nothing back from the files written.
    Parked,
    /// It was written under a temporary name (in the same directory) to be renamed into place,
    /// at this path under the output folder.
    RenameTo(PathBuf),
    /// It was written under a temporary name because its writing took long enough for a kill
    /// to land inside it (more than one write): moved to this path after a good close, never
    /// over anything there (see `OutDir::move_new`).
    MoveTo(PathBuf),
}

/// A written file waiting to be closed.
#[derive(Debug)]
pub(crate) struct CloseJob {
    pub file: File,
    /// Where the handle's file is now, under the output folder.
    pub path: PathBuf,
    /// The entry's name, for messages.
    pub name: PathBuf,
    pub finalize: Finalize,
}

/// Whether the job's file counts among the files written already (a failed close takes it
/// back): all but a parked one.
fn counted(job: &CloseJob) -> bool {
    !matches!(job.finalize, Finalize::Parked)
}

/// Closes the job's handle and completes its file under the output folder `root`. On failure
/// the file is removed, so a file whose content may not have reached the disk never stays
/// under its final name.
fn complete(job: CloseJob, closer: &dyn Closer, out_dir: &OutDir) -> Result<(), Error> {
    let CloseJob {
        file,
        path,
        name,
        finalize,
    } = job;
    // A file moved into place that meets a path made while it was written (another run, or
    // another archive of a run of many, writing the same path) is that path's conflict, not a
    // failed close.
    let mut kind = ErrorKind::Close;
    let result = closer
        .close(file, &path)
        .with_context(|| format!("closing '{}'", out_dir.path().join(&path).display()))
        .and_then(|()| match &finalize {
            Finalize::Keep | Finalize::Parked => Ok(()),
            Finalize::RenameTo(dest) => out_dir.rename(&path, dest).with_context(|| {
                format!(
                    "renaming '{}' into place as '{}'",
                    out_dir.path().join(&path).display(),
                    out_dir.path().join(dest).display()
                )
            }),
            Finalize::MoveTo(dest) => out_dir.move_new(&path, dest).map_err(|e| {
                let whole = out_dir.path().join(dest);
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    kind = ErrorKind::AlreadyExists;
                    anyhow::anyhow!("'{}' appeared while it was written", whole.display())
                } else {
                    anyhow::Error::new(e).context(format!(
                        "moving '{}' into place as '{}'",
                        out_dir.path().join(&path).display(),
                        whole.display()
                    ))
                }
            }),
        });
    result.map_err(|error| {
        // Best effort: the failure is what gets reported, whether or not the removal works.
        let _ = out_dir.remove_file(&path);
        Error::new(name, kind, error)
    })
}

/// What the closes of a run came to.
#[derive(Debug, Default)]
pub(crate) struct CloseTally {
    pub closed: u64,
    /// Closes that failed (each recorded as a failure when it happened).
    pub failed: u64,
    /// Time spent inside closes, summed over the threads that closed.
    pub busy: Duration,
    /// The most handles that were ever waiting in the queue.
    pub peak_queue: usize,
    /// Threads the pool had (0: none, closed inline).
    pub threads: usize,
}

impl CloseTally {
    fn merge(&mut self, other: CloseTally) {
        self.closed += other.closed;
        self.failed += other.failed;
        self.busy += other.busy;
    }

    /// Closes one job on the calling thread, counting it; a failure goes to `failures` now.
    fn close(
        &mut self,
        job: CloseJob,
        closer: &dyn Closer,
        out_dir: &OutDir,
        failures: &Failures,
    ) -> Duration {
        let start = Instant::now();
        let counted = counted(&job);
        let result = complete(job, closer, out_dir);
        let took = start.elapsed();
        self.busy += took;
        self.closed += 1;
        if let Err(failure) = result {
            self.failed += u64::from(counted);
            failures.push(failure);
        }
        took
    }
}

/// How many close threads keep up: by Little's law the closes in flight are the rate files
/// arrive times how long each close takes. `writers` threads each finish a file every
/// `write` (measured without closing), so files arrive at `writers / write` per second. One
/// thread more than that, so the pool is not the bottleneck, within `1..=max`.
pub(crate) fn threads_for(writers: usize, write: Duration, close: Duration, max: usize) -> usize {
    let max = max.max(1);
    if write.is_zero() {
        return max;
    }
    let in_flight = writers as f64 * close.as_secs_f64() / write.as_secs_f64();
    (in_flight.ceil() as usize).saturating_add(1).clamp(1, max)
}

/// A close this slow or slower is worth a hand-over to another thread: handing a handle over
/// costs a few microseconds (a queue operation, a futex wake when the thread sleeps), and a
/// local disk closes in 2-10 us, where Windows, NFS and FUSE take milliseconds.
pub(crate) const SLOW_CLOSE: Duration = Duration::from_micros(50);

/// Handles a writer collects before handing them to the close pool in one go.
pub(crate) const CLOSE_BATCH: usize = 8;

/// Handles in the close queue at most: enough to keep every close thread busy while writers
/// run ahead, few enough that open handles stay far below any descriptor limit (see
/// `docs/design.md` for the count).
fn queue_bound(close: CloseMode) -> usize {
    match close {
        // As many as the threads: with those in their hands, 2 x threads.
        CloseMode::Auto { max_threads } => max_threads,
        // Two batches a thread: it never waits for a writer's next batch.
        CloseMode::Deferred { threads } => threads * 2 * CLOSE_BATCH,
        CloseMode::Inline => 0,
    }
}

/// The most close threads `auto` may start within the open-file limit: each has a handle in
/// its hands and one waiting in the queue (the queue's bound is the thread count); each writer
/// holds a source, its unsent batch, and may take the queue past its bound by a batch less one;
/// with room for everything else the process has open (64, and `held_open`: the folders the
/// directory stage holds open).
fn within_open_file_limit(max_threads: usize, writers: usize, held_open: usize) -> usize {
    match platform::open_file_limit() {
        Some(limit) => {
            let per_writer = 1 + 2 * CLOSE_BATCH;
            let others = 64 + held_open;
            let spare = (limit as usize).saturating_sub(others + per_writer * writers) / 2;
            max_threads.min(spare).max(1)
        }
        None => max_threads,
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A writer's own side of the close stage: the handles it has not sent to the pool yet, and the
/// time its inline closes took (added to the stage's total when it flushes). Kept per writer so
/// that on a fast disk a close touches no cache line another writer writes.
#[derive(Default)]
pub(crate) struct WriterClose {
    batch: Vec<CloseJob>,
    inline_nanos: u64,
}

/// Where a run's closes happen: the close stage's state, decided once from its mode.
enum Policy {
    /// Always on the writer's thread ([`CloseMode::Inline`]).
    Inline,
    /// On a pool of a fixed size, started with the stage ([`CloseMode::Deferred`]).
    Pool(ClosePool),
    /// [`CloseMode::Auto`]: inline while closes are fast, on a pool once they prove slow (or
    /// from the start where they are known to be), grown by Little's law.
    Auto(Auto),
}

/// The state of [`CloseMode::Auto`].
struct Auto {
    /// The most close threads (within the open-file limit).
    max_threads: usize,
    /// The pool, once started (`None` inside: it could not be, so closes stay inline).
    pool: OnceLock<Option<ClosePool>>,
    /// Slow inline closes in a row (any writer's), and the time they took.
    slow_run: AtomicU64,
    slow_nanos: AtomicU64,
    /// Files handed to the pool since its size was last checked against its measured closes.
    since_sized: AtomicU64,
}

/// What every close of a run needs, whichever thread closes: how to close, where the files
/// are, where failures go, and the sizes the pool is made with.
struct Shared {
    closer: Arc<dyn Closer>,
    /// The output folder, where closed files are renamed into place or removed.
    out_dir: Arc<OutDir>,
    failures: Arc<Failures>,
    /// Threads that write (and so hand files over): Little's law's arrival side. A batch's
    /// background writers, started by its first `spawn_write`, raise it.
    writers: AtomicUsize,
    /// Handles in the queue at most.
    bound: usize,
}

impl Shared {
    fn writers(&self) -> usize {
        self.writers.load(Ordering::Relaxed)
    }

    fn start_pool(&self, threads: usize) -> std::io::Result<ClosePool> {
        ClosePool::new(
            threads,
            self.bound,
            Arc::clone(&self.closer),
            Arc::clone(&self.out_dir),
            Arc::clone(&self.failures),
        )
    }
}

/// The close stage of one run: decides, per written file, where it is closed, and keeps every
/// result.
pub(crate) struct CloseStage {
    policy: Policy,
    shared: Shared,
    inline_nanos: AtomicU64,
    inline_failed: AtomicU64,
}

impl CloseStage {
    /// The close stage for a run with these options; with `Deferred` (or `auto` where closes
    /// are known to be slow) the pool starts now. Close failures go to `failures` as they
    /// happen. `held_open`: how many folders the directory stage may hold open, left out of
    /// the open-file limit's share for close threads.
    pub(crate) fn new(
        opts: &Options,
        closer: Arc<dyn Closer>,
        out_dir: Arc<OutDir>,
        failures: Arc<Failures>,
        held_open: usize,
    ) -> anyhow::Result<CloseStage> {
        let shared = Shared {
            closer,
            out_dir,
            failures,
            writers: AtomicUsize::new(
                opts.threads
                    .unwrap_or_else(crate::options::default_threads)
                    .max(1),
            ),
            bound: queue_bound(opts.close),
        };
        let policy = match opts.close {
            CloseMode::Inline => Policy::Inline,
            CloseMode::Deferred { threads } => Policy::Pool(
                shared
                    .start_pool(threads)
                    .context("cannot start the close threads")?,
            ),
            CloseMode::Auto { max_threads } => {
                let writers = opts.threads.unwrap_or_else(crate::options::default_threads);
                let max_threads = within_open_file_limit(max_threads, writers, held_open);
                let pool = OnceLock::new();
                // Closes take milliseconds on Windows and with fsync: auto defers from the
                // start there, and sizes the pool from what it measures.
                if cfg!(windows) || opts.fsync {
                    let threads = CloseMode::default_deferred_threads().min(max_threads);
                    let started = shared
                        .start_pool(threads)
                        .context("cannot start the close threads")?;
                    let _ = pool.set(Some(started));
                }
                Policy::Auto(Auto {
                    max_threads,
                    pool,
                    slow_run: AtomicU64::new(0),
                    slow_nanos: AtomicU64::new(0),
                    since_sized: AtomicU64::new(0),
                })
            }
        };
        Ok(CloseStage {
            policy,
            shared,
            inline_nanos: AtomicU64::new(0),
            inline_failed: AtomicU64::new(0),
        })
    }

    /// The close pool, if closes go there now.
    fn running_pool(&self) -> Option<&ClosePool> {
        match &self.policy {
            Policy::Inline => None,
            Policy::Pool(pool) => Some(pool),
            Policy::Auto(auto) => auto.pool.get().and_then(Option::as_ref),
        }
    }

    /// Hands a written file over: into the writer's batch for the pool (sent when full), or
    /// closed here and now (which `auto` measures). `mean_write` is the writers' mean time per
    /// file, for sizing the pool.
    pub(crate) fn hand_over(
        &self,
        local: &mut WriterClose,
        job: CloseJob,
        mean_write: impl Fn() -> Duration,
    ) {
        match self.running_pool() {
            Some(pool) => {
                local.batch.push(job);
                if local.batch.len() >= CLOSE_BATCH {
                    pool.submit(&mut local.batch);
                }
                if let Policy::Auto(auto) = &self.policy {
                    auto.resize(pool, self.shared.writers(), &mean_write);
                }
            }
            None => {
                let took = self.close_inline(job);
                local.inline_nanos += nanos(took);
                if let Policy::Auto(auto) = &self.policy {
                    auto.measure_inline_close(took, &self.shared, &mean_write);
                }
            }
        }
    }

    /// More threads write than the stage was made for (a batch's background writers): `auto`
    /// sizes the pool for that many from now on.
    pub(crate) fn writers_at_least(&self, writers: usize) {
        self.shared.writers.fetch_max(writers, Ordering::Relaxed);
    }

    /// Sends what a writer still holds to the pool (or closes it here if there is none), and
    /// adds its inline close time to the stage's.
    pub(crate) fn flush(&self, local: &mut WriterClose) {
        let mut nanos = std::mem::take(&mut local.inline_nanos);
        if !local.batch.is_empty() {
            match self.running_pool() {
                Some(pool) => pool.submit(&mut local.batch),
                None => {
                    for job in local.batch.drain(..) {
                        nanos += self::nanos(self.close_inline(job));
                    }
                }
            }
        }
        self.inline_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn close_inline(&self, job: CloseJob) -> Duration {
        let start = Instant::now();
        let counted = counted(&job);
        let result = complete(job, self.shared.closer.as_ref(), &self.shared.out_dir);
        let took = start.elapsed();
        if let Err(failure) = result {
            self.inline_failed
                .fetch_add(u64::from(counted), Ordering::Relaxed);
            self.shared.failures.push(failure);
        }
        took
    }

    /// Waits until every close handed over so far is done, and the run goes on: each file
    /// complete (or its failure recorded, and the file removed). Every writer whose files
    /// count must have flushed its batch first.
    pub(crate) fn settle(&self) {
        if let Some(pool) = self.running_pool() {
            pool.settle();
        }
    }

    /// Waits for every close handed over and says what they came to (failures are already
    /// recorded). Every writer must have flushed its batch first.
    pub(crate) fn finish(&mut self) -> CloseTally {
        let pool = match std::mem::replace(&mut self.policy, Policy::Inline) {
            Policy::Inline => None,
            Policy::Pool(pool) => Some(pool),
            Policy::Auto(auto) => auto.pool.into_inner().flatten(),
        };
        let mut tally = pool.map(ClosePool::finish).unwrap_or_default();
        // Auto closes inline until it defers: both count.
        tally.merge(CloseTally {
            failed: std::mem::take(self.inline_failed.get_mut()),
            busy: Duration::from_nanos(std::mem::take(self.inline_nanos.get_mut())),
            ..CloseTally::default()
        });
        tally
    }
}

impl Auto {
    /// Closing inline: starts the pool once 4 closes in a row (any writer's) took
    /// `SLOW_CLOSE` (50 us) or more each, when handing a handle over costs a few (a local disk
    /// closes in 2-10 us; Windows, NFS and FUSE take milliseconds). One slow close among fast
    /// ones (a journal commit on a local disk) is not a slow filesystem. Whatever the write
    /// time, a slow close overlapped with the next write is time saved.
    fn measure_inline_close(
        &self,
        took: Duration,
        shared: &Shared,
        mean_write: &dyn Fn() -> Duration,
    ) {
        const IN_A_ROW: u64 = 4;
        if took < SLOW_CLOSE {
            // Read before writing: on a fast disk every close only reads this line, so the
            // writers never pass it back and forth.
            if self.slow_run.load(Ordering::Relaxed) != 0 {
                self.slow_run.store(0, Ordering::Relaxed);
                self.slow_nanos.store(0, Ordering::Relaxed);
            }
            return;
        }
        let total = self.slow_nanos.fetch_add(nanos(took), Ordering::Relaxed) + nanos(took);
        let run = self.slow_run.fetch_add(1, Ordering::Relaxed) + 1;
        if run < IN_A_ROW || self.pool.get().is_some() {
            return;
        }
        let close = Duration::from_nanos(total / run);
        let threads = threads_for(shared.writers(), mean_write(), close, self.max_threads);
        // A few threads first, so the other writers can hand over at once; then the rest,
        // which takes a while when it is hundreds.
        let pool = self
            .pool
            .get_or_init(|| shared.start_pool(threads.min(8)).ok());
        if let Some(pool) = pool {
            // A thread that cannot be started leaves the pool as it is: it still works.
            let _ = pool.grow_to(threads);
        }
    }

    /// Closing in the pool: every 32 files, grows the pool to what the closes measured there
    /// and the write rate need (Little's law).
    fn resize(&self, pool: &ClosePool, writers: usize, mean_write: &dyn Fn() -> Duration) {
        if self.since_sized.fetch_add(1, Ordering::Relaxed) % 32 != 31 {
            return;
        }
        if let Some(close) = pool.mean_close(16) {
            let threads = threads_for(writers, mean_write(), close, self.max_threads);
            // A thread that cannot be started leaves the pool as it is: it still works.
            let _ = pool.grow_to(threads);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn little_law_sizes_the_pool() {
        let us = Duration::from_micros;
        // Fast closes: one thread (plus one) is plenty.
        assert_eq!(threads_for(2, us(100), us(5), 64), 2);
        // 2 writers x 5 ms / 100 us = 100 in flight: capped.
        assert_eq!(threads_for(2, us(100), us(5000), 64), 64);
        // 2 writers x 1 ms / 200 us = 10 in flight, plus one.
        assert_eq!(threads_for(2, us(200), us(1000), 64), 11);
        assert_eq!(threads_for(2, Duration::ZERO, us(1000), 8), 8);
        assert_eq!(threads_for(1, us(100), us(10), 0), 1);
    }

    #[test]
    fn a_temporary_is_renamed_into_place_only_after_a_good_close() {
        struct FailBad;
        impl Closer for FailBad {
            fn close(&self, file: File, path: &Path) -> anyhow::Result<()> {
                drop(file);
                if path.ends_with("bad.tmp") {
                    Err(io::Error::other("injected close failure").into())
                } else {
                    Ok(())
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let root = OutDir::open(dir.path()).unwrap();
        let failures = Failures::default();
        let mut tally = CloseTally::default();
        for (tmp, dest) in [("good.tmp", "good"), ("bad.tmp", "bad")] {
            let job = CloseJob {
                file: File::create(dir.path().join(tmp)).unwrap(),
                path: tmp.into(),
                name: tmp.into(),
                finalize: Finalize::RenameTo(dest.into()),
            };
            tally.close(job, &FailBad, &root, &failures);
        }
        assert!(dir.path().join("good").exists());
        assert!(!dir.path().join("good.tmp").exists());
        assert!(!dir.path().join("bad").exists());
        assert!(!dir.path().join("bad.tmp").exists());
        let failures = failures.take();
        assert_eq!((tally.closed, tally.failed, failures.len()), (2, 1, 1));
        assert_eq!(failures[0].path(), Path::new("bad.tmp"));
        assert_eq!(failures[0].kind(), ErrorKind::Close);
    }

    #[test]
    fn system_closer_closes_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let root = OutDir::open(dir.path()).unwrap();
        let failures = Failures::default();
        let mut tally = CloseTally::default();
        for fsync in [false, true] {
            let path = PathBuf::from(format!("f{fsync}"));
            let job = CloseJob {
                file: File::create(dir.path().join(&path)).unwrap(),
                name: path.clone(),
                path,
                finalize: Finalize::Keep,
            };
            tally.close(job, &SystemCloser { fsync }, &root, &failures);
        }
        assert_eq!((tally.closed, tally.failed), (2, 0));
        assert!(failures.take().is_empty());
    }
}
