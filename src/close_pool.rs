//! The close pool: dedicated threads that close written files while the writers go on.
//!
//! Closing a written file can take milliseconds (Windows Defender scans inside CloseHandle; NFS
//! and FUSE flush on close; `--fsync` waits for the disk). Writers hand open handles over a
//! bounded queue to these threads, so that latency overlaps with writing. The bound gives
//! backpressure and caps open handles, so no run can hit the descriptor limit.
//!
//! Writers hand handles over in batches of [`CLOSE_BATCH`]: waking a sleeping thread costs a
//! system call (and on a virtual machine an interrupt to another processor), and where closes
//! are fast the pool is always idle, so one wake-up per file would cost more than the close
//! itself. A batch wakes one thread; each thread takes one handle and wakes the next if more are
//! waiting (see `queue.rs`), so the handles of a batch are still closed side by side.
//!
//! Unlike std's `File` drop, close_already, rustup and xcp, nothing here drops the result of a
//! close: every failure comes back with its path, the file is removed so nothing half-written
//! stays under a final name, and the failure is counted in the report. The threads are plain
//! `std` threads, not rayon's, because they block in the kernel and must not starve the writers.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::platform;
use crate::queue::Queue;
use crate::report::Failure;

/// Closes one handle and says whether that worked: the seam where tests make closing slow or
/// failing.
pub trait Closer: Send + Sync {
    fn close(&self, file: File, path: &Path) -> io::Result<()>;
}

/// The real thing: optionally fsync, then close, reporting the first error.
#[derive(Debug, Clone, Copy)]
pub struct SystemCloser {
    pub fsync: bool,
}

impl Closer for SystemCloser {
    fn close(&self, file: File, _path: &Path) -> io::Result<()> {
        let synced = if self.fsync {
            file.sync_all().context("fsync")
        } else {
            Ok(())
        };
        let closed = platform::close(file).context("close");
        // The handle is closed either way; the first failure is the one worth reporting.
        synced.and(closed).map_err(io::Error::other)
    }
}

/// What happens to a file once it is closed successfully.
#[derive(Debug)]
pub enum Finalize {
    /// It was written under its final name.
    Keep,
    /// It was written under a temporary name (in the same directory) to be renamed into place.
    RenameTo(PathBuf),
}

/// A written file waiting to be closed.
#[derive(Debug)]
pub struct CloseJob {
    pub file: File,
    /// Where the handle's file is on disk now.
    pub path: PathBuf,
    /// The entry's name, for messages.
    pub name: String,
    pub finalize: Finalize,
}

/// Closes the job's handle and completes its file. On failure the file is removed, so a file
/// whose content may not have reached the disk never stays under its final name.
pub fn complete(job: CloseJob, closer: &dyn Closer) -> Result<(), Failure> {
    let CloseJob {
        file,
        path,
        name,
        finalize,
    } = job;
    let result = closer
        .close(file, &path)
        .with_context(|| format!("closing '{}'", path.display()))
        .and_then(|()| match &finalize {
            Finalize::Keep => Ok(()),
            Finalize::RenameTo(dest) => crate::platform::replace(&path, dest).with_context(|| {
                format!(
                    "renaming '{}' into place as '{}'",
                    path.display(),
                    dest.display()
                )
            }),
        });
    result.map_err(|error| {
        // Best effort: the failure is what gets reported, whether or not the removal works.
        let _ = std::fs::remove_file(&path);
        Failure { name, error }
    })
}

/// What the close threads did, summed over all of them.
#[derive(Debug, Default)]
pub struct CloseTally {
    pub closed: u64,
    /// Time spent inside closes, summed over threads.
    pub busy: Duration,
    pub failures: Vec<Failure>,
    /// The most handles that were ever waiting in the queue.
    pub peak_queue: usize,
    /// Threads the pool had (0: none, closed inline).
    pub threads: usize,
}

impl CloseTally {
    fn merge(&mut self, other: CloseTally) {
        self.closed += other.closed;
        self.busy += other.busy;
        self.failures.extend(other.failures);
    }

    /// Closes one job on the calling thread, counting it like a pool thread would.
    pub fn close_inline(&mut self, job: CloseJob, closer: &dyn Closer) {
        let start = Instant::now();
        let result = complete(job, closer);
        self.busy += start.elapsed();
        self.closed += 1;
        if let Err(failure) = result {
            self.failures.push(failure);
        }
    }
}

/// How many close threads keep up: by Little's law the closes in flight are the rate files
/// arrive times how long each close takes. `writers` threads each finish a file every
/// `write` (measured without closing), so files arrive at `writers / write` per second. One
/// thread more than that, so the pool is not the bottleneck, within `1..=max`.
pub fn threads_for(writers: usize, write: Duration, close: Duration, max: usize) -> usize {
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
pub const SLOW_CLOSE: Duration = Duration::from_micros(50);

/// Closes done by the pool so far and the time they took, shared with whoever sizes the pool.
#[derive(Debug, Default)]
struct Measured {
    closes: AtomicU64,
    nanos: AtomicU64,
}

impl Measured {
    /// The mean time of the closes done so far, once there are `at_least` of them.
    fn mean(&self, at_least: u64) -> Option<Duration> {
        let closes = self.closes.load(Ordering::Relaxed);
        (closes >= at_least.max(1))
            .then(|| Duration::from_nanos(self.nanos.load(Ordering::Relaxed) / closes))
    }
}

/// Handles a writer collects before handing them to the close pool in one go.
pub const CLOSE_BATCH: usize = 8;

pub struct ClosePool {
    queue: Arc<Queue<CloseJob>>,
    threads: Mutex<Vec<JoinHandle<CloseTally>>>,
    /// Threads started, for `grow_to` (a lock-free read on the writers' path).
    started: AtomicUsize,
    closer: Arc<dyn Closer>,
    measured: Arc<Measured>,
    /// Closes that had to be done by the submitter because every pool thread had gone.
    orphans: Mutex<CloseTally>,
}

impl ClosePool {
    /// Starts `threads` close threads behind a queue of `bound` handles (a batch may take it
    /// past the bound by less than a batch).
    pub fn new(threads: usize, bound: usize, closer: Arc<dyn Closer>) -> io::Result<ClosePool> {
        let pool = ClosePool {
            queue: Arc::new(Queue::new(bound, 0, |_| 1)),
            threads: Mutex::new(Vec::new()),
            started: AtomicUsize::new(0),
            closer,
            measured: Arc::default(),
            orphans: Default::default(),
        };
        if let Err(e) = pool.grow_to(threads.max(1)) {
            // Stop the threads already started before giving up.
            pool.finish();
            return Err(e);
        }
        Ok(pool)
    }

    /// Starts threads until there are `threads` (never fewer than now). Any thread may call
    /// this while the pool runs.
    pub fn grow_to(&self, threads: usize) -> io::Result<()> {
        if self.started.load(Ordering::Relaxed) >= threads {
            return Ok(());
        }
        let mut handles = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        while handles.len() < threads {
            let (q, closer, measured) = (
                Arc::clone(&self.queue),
                Arc::clone(&self.closer),
                Arc::clone(&self.measured),
            );
            self.queue.add_receiver();
            let spawned = std::thread::Builder::new()
                .name(format!("fastwrite-close-{}", handles.len()))
                // A close, a rename, an error message: a small stack is plenty, and hundreds
                // of these threads may run where closes are slow.
                .stack_size(256 << 10)
                .spawn(move || {
                    // Tells the queue when this thread stops, even by panicking, so that no
                    // writer waits for it.
                    let _gone = ReceiverGuard(&q);
                    let mut tally = CloseTally::default();
                    // Slow closes (or none measured yet): wake the next thread for what is
                    // left of the batch, so the closes overlap. Fast ones: this thread takes
                    // the rest itself, sooner than another could be woken.
                    let next = || match measured.mean(1) {
                        Some(mean) if mean < SLOW_CLOSE => q.pop_unspread(),
                        _ => q.pop(),
                    };
                    while let Some(job) = next() {
                        let before = tally.busy;
                        tally.close_inline(job, closer.as_ref());
                        let took = (tally.busy - before).as_nanos() as u64;
                        measured.nanos.fetch_add(took, Ordering::Relaxed);
                        measured.closes.fetch_add(1, Ordering::Relaxed);
                    }
                    tally
                });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    self.queue.receiver_gone();
                    return Err(e);
                }
            }
            self.started.store(handles.len(), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Threads running now.
    pub fn threads(&self) -> usize {
        self.started.load(Ordering::Relaxed)
    }

    /// The mean time of the closes done so far, once there are `at_least` of them.
    pub fn mean_close(&self, at_least: u64) -> Option<Duration> {
        self.measured.mean(at_least)
    }

    /// Queues handles for closing, emptying `batch` (its allocation stays with the caller);
    /// blocks while the queue is full.
    pub fn submit(&self, batch: &mut Vec<CloseJob>) {
        if !self.queue.push_all(batch) {
            // Only possible if every close thread died; the closes must still happen and count.
            let mut orphans = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
            for job in batch.drain(..) {
                orphans.close_inline(job, self.closer.as_ref());
            }
        }
    }

    /// Waits for every queued close and returns what happened to all of them.
    pub fn finish(self) -> CloseTally {
        let ClosePool {
            queue,
            threads,
            orphans,
            ..
        } = self;
        queue.close();
        let mut total = orphans.into_inner().unwrap_or_else(|e| e.into_inner());
        let threads = threads.into_inner().unwrap_or_else(|e| e.into_inner());
        total.threads = threads.len();
        for handle in threads {
            match handle.join() {
                Ok(tally) => total.merge(tally),
                Err(_) => total.failures.push(Failure {
                    name: "(close pool)".into(),
                    error: anyhow::anyhow!(
                        "a close thread panicked; the files it was closing are unaccounted for"
                    ),
                }),
            }
        }
        total.peak_queue = queue.peak_weight();
        total
    }
}

struct ReceiverGuard<'q>(&'q Queue<CloseJob>);

impl Drop for ReceiverGuard<'_> {
    fn drop(&mut self) {
        self.0.receiver_gone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A closer that takes its time, fails the closes it is told to, and records the order.
    struct FakeCloser {
        delay: Duration,
        fail_names: Vec<String>,
        closed: Mutex<Vec<PathBuf>>,
        in_flight: AtomicU64,
        max_in_flight: AtomicU64,
    }

    impl FakeCloser {
        fn new(delay_ms: u64, fail_names: &[&str]) -> Arc<FakeCloser> {
            Arc::new(FakeCloser {
                delay: Duration::from_millis(delay_ms),
                fail_names: fail_names.iter().map(|s| s.to_string()).collect(),
                closed: Mutex::new(Vec::new()),
                in_flight: AtomicU64::new(0),
                max_in_flight: AtomicU64::new(0),
            })
        }
    }

    impl Closer for FakeCloser {
        fn close(&self, file: File, path: &Path) -> io::Result<()> {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(self.delay);
            drop(file);
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.closed.lock().unwrap().push(path.to_path_buf());
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if self.fail_names.contains(&name) {
                Err(io::Error::other("injected close failure"))
            } else {
                Ok(())
            }
        }
    }

    fn job(dir: &std::path::Path, name: &str) -> CloseJob {
        let path = dir.join(name);
        let file = File::create(&path).unwrap();
        CloseJob {
            file,
            path,
            name: name.to_string(),
            finalize: Finalize::Keep,
        }
    }

    #[test]
    fn every_close_result_comes_back_and_failed_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let closer = FakeCloser::new(1, &["f3", "f7"]);
        let pool = ClosePool::new(3, 4, closer.clone()).unwrap();
        for i in 0..5 {
            let batch = (0..2).map(|j| job(dir.path(), &format!("f{}", i * 2 + j)));
            pool.submit(&mut batch.collect());
        }
        let tally = pool.finish();
        assert_eq!(tally.closed, 10);
        assert_eq!(closer.closed.lock().unwrap().len(), 10);
        let mut failed: Vec<_> = tally.failures.iter().map(|f| f.name.clone()).collect();
        failed.sort();
        assert_eq!(failed, ["f3", "f7"]);
        assert!(format!("{:#}", tally.failures[0].error).contains("injected close failure"));
        assert!(
            !dir.path().join("f3").exists(),
            "a file whose close failed must be removed"
        );
        assert!(dir.path().join("f4").exists());
    }

    #[test]
    fn the_queue_bound_holds_back_writers() {
        let dir = tempfile::tempdir().unwrap();
        let closer = FakeCloser::new(5, &[]);
        let (bound, batch) = (2, 3);
        let pool = ClosePool::new(2, bound, closer.clone()).unwrap();
        for i in 0..20 {
            pool.submit(
                &mut (0..batch)
                    .map(|j| job(dir.path(), &format!("f{i}-{j}")))
                    .collect(),
            );
        }
        let tally = pool.finish();
        assert_eq!(tally.closed, 20 * batch as u64);
        // Waiting: at most the bound, and what the last batch let in took it past.
        let most = bound + batch - 1;
        assert!(
            tally.peak_queue <= most,
            "queue held {} > {most}",
            tally.peak_queue
        );
        assert!(tally.peak_queue >= batch);
        assert!(closer.max_in_flight.load(Ordering::SeqCst) <= 2);
    }

    #[test]
    fn closes_overlap_across_threads() {
        let dir = tempfile::tempdir().unwrap();
        let closer = FakeCloser::new(20, &[]);
        let pool = ClosePool::new(4, 16, closer.clone()).unwrap();
        for i in 0..8 {
            pool.submit(&mut vec![job(dir.path(), &format!("f{i}"))]);
        }
        pool.finish();
        // Several closes were in flight at once: the point of the pool. (A count, not a time.)
        assert!(closer.max_in_flight.load(Ordering::SeqCst) >= 2);
    }

    #[test]
    fn the_handles_of_one_batch_close_side_by_side() {
        let dir = tempfile::tempdir().unwrap();
        let closer = FakeCloser::new(20, &[]);
        let pool = ClosePool::new(4, 16, closer.clone()).unwrap();
        pool.submit(&mut (0..4).map(|i| job(dir.path(), &format!("f{i}"))).collect());
        let tally = pool.finish();
        assert_eq!(tally.closed, 4);
        // A batch is not one thread's work: each thread takes a handle and wakes the next.
        assert!(closer.max_in_flight.load(Ordering::SeqCst) >= 2);
    }

    #[test]
    fn a_temporary_is_renamed_into_place_only_after_a_good_close() {
        let dir = tempfile::tempdir().unwrap();
        let closer = FakeCloser::new(0, &["bad.tmp"]);
        let mut tally = CloseTally::default();
        for (tmp, dest) in [("good.tmp", "good"), ("bad.tmp", "bad")] {
            let mut j = job(dir.path(), tmp);
            j.finalize = Finalize::RenameTo(dir.path().join(dest));
            tally.close_inline(j, closer.as_ref());
        }
        assert!(dir.path().join("good").exists());
        assert!(!dir.path().join("good.tmp").exists());
        assert!(!dir.path().join("bad").exists());
        assert!(!dir.path().join("bad.tmp").exists());
        assert_eq!(tally.failures.len(), 1);
        assert_eq!(tally.failures[0].name, "bad.tmp");
    }

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
    fn a_running_pool_grows_and_still_closes_everything() {
        let dir = tempfile::tempdir().unwrap();
        let closer = FakeCloser::new(2, &["f7"]);
        let pool = ClosePool::new(1, 8, closer.clone()).unwrap();
        for i in 0..6 {
            pool.submit(&mut vec![job(dir.path(), &format!("f{i}"))]);
        }
        pool.grow_to(4).unwrap();
        pool.grow_to(2).unwrap(); // never shrinks
        assert_eq!(pool.threads(), 4);
        for i in 6..12 {
            pool.submit(&mut vec![job(dir.path(), &format!("f{i}"))]);
        }
        let mut mean = pool.mean_close(1);
        for _ in 0..500 {
            if mean.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            mean = pool.mean_close(1);
        }
        let mean = mean.expect("closes were measured");
        assert!(mean >= Duration::from_millis(2), "{mean:?}");
        let tally = pool.finish();
        assert_eq!(tally.closed, 12);
        assert_eq!(tally.failures.len(), 1);
        assert_eq!(tally.failures[0].name, "f7");
        assert!(closer.max_in_flight.load(Ordering::SeqCst) <= 4);
    }

    #[test]
    fn system_closer_closes_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let mut tally = CloseTally::default();
        for fsync in [false, true] {
            tally.close_inline(
                job(dir.path(), &format!("f{fsync}")),
                &SystemCloser { fsync },
            );
        }
        assert_eq!(tally.closed, 2);
        assert!(tally.failures.is_empty());
    }
}
