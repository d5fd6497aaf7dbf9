//! The close pool: dedicated threads that close written files while the writers go on.
//!
//! Writers hand open handles over a bounded queue to these threads, so close latency overlaps
//! with writing. The bound gives backpressure and caps open handles, so no run can hit the
//! descriptor limit.
//!
//! Writers hand handles over in batches of [`CLOSE_BATCH`](super::CLOSE_BATCH): waking a sleeping thread costs a
//! system call (and on a virtual machine an interrupt to another processor), and where closes
//! are fast the pool is always idle, so one wake-up per file would cost more than the close
//! itself. A batch wakes one thread; each thread takes one handle and wakes the next if more are
//! waiting (see `queue.rs`), so the handles of a batch are still closed side by side. The
//! threads are plain `std` threads, not rayon's, because they block in the kernel and must not
//! starve the writers.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{CloseJob, CloseTally, Closer, SLOW_CLOSE};
use crate::error::{Error, ErrorKind, Failures};
use crate::platform::OutDir;
use crate::queue::Queue;
use crate::sync::Unpoisoned;

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

pub(crate) struct ClosePool {
    queue: Arc<Queue<CloseJob>>,
    threads: Mutex<Vec<JoinHandle<CloseTally>>>,
    /// Threads started, for `grow_to` (a lock-free read on the writers' path).
    started: AtomicUsize,
    closer: Arc<dyn Closer>,
    out_dir: Arc<OutDir>,
    measured: Arc<Measured>,
    failures: Arc<Failures>,
    /// Closes that had to be done by the submitter because every pool thread had gone.
    orphans: Mutex<CloseTally>,
    /// Closes handed over and not yet done, for [`ClosePool::settle`].
    pending: Arc<Pending>,
}

/// Closes handed over and not yet done: counted without a lock on the closes' path; the lock
/// and the condition are only for a waiter.
#[derive(Default)]
struct Pending {
    count: AtomicU64,
    lock: Mutex<()>,
    settled: Condvar,
}

impl Pending {
    fn done(&self, n: u64) {
        if self.count.fetch_sub(n, Ordering::AcqRel) == n {
            // (Under the lock: a waiter holds it from its look at the count to its wait.)
            let _held = self.lock.lock().unpoisoned();
            self.settled.notify_all();
        }
    }
}

impl ClosePool {
    /// Starts `threads` close threads behind a queue of `bound` handles (a batch may take it
    /// past the bound by less than a batch).
    pub fn new(
        threads: usize,
        bound: usize,
        closer: Arc<dyn Closer>,
        out_dir: Arc<OutDir>,
        failures: Arc<Failures>,
    ) -> io::Result<ClosePool> {
        let pool = ClosePool {
            queue: Arc::new(Queue::new(bound, 0, |_| 1)),
            threads: Mutex::new(Vec::new()),
            started: AtomicUsize::new(0),
            closer,
            out_dir,
            measured: Arc::default(),
            failures,
            orphans: Default::default(),
            pending: Arc::default(),
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
        let mut handles = self.threads.lock().unpoisoned();
        while handles.len() < threads {
            let (q, closer, out_dir, measured, failures, pending) = (
                Arc::clone(&self.queue),
                Arc::clone(&self.closer),
                Arc::clone(&self.out_dir),
                Arc::clone(&self.measured),
                Arc::clone(&self.failures),
                Arc::clone(&self.pending),
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
                        let took = tally.close(job, closer.as_ref(), &out_dir, &failures);
                        let took = took.as_nanos() as u64;
                        measured.nanos.fetch_add(took, Ordering::Relaxed);
                        measured.closes.fetch_add(1, Ordering::Relaxed);
                        pending.done(1);
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
    #[cfg(test)]
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
        let n = batch.len() as u64;
        self.pending.count.fetch_add(n, Ordering::AcqRel);
        if !self.queue.push_all(batch) {
            // Only possible if every close thread died; the closes must still happen and count.
            let mut orphans = self.orphans.lock().unpoisoned();
            for job in batch.drain(..) {
                orphans.close(job, self.closer.as_ref(), &self.out_dir, &self.failures);
            }
            self.pending.done(n);
        }
    }

    /// Waits until every close submitted so far is done (its file complete, or its failure
    /// recorded): what a source that moves files after their close waits for.
    pub fn settle(&self) {
        let mut held = self.pending.lock.lock().unpoisoned();
        while self.pending.count.load(Ordering::Acquire) != 0 {
            // (Looked at again each second: were every close thread gone, by a panic, what
            // they left would never be counted done; `finish` then says they are missing.)
            if !self.queue.has_receivers() {
                return;
            }
            held = (self.pending.settled)
                .wait_timeout(held, Duration::from_secs(1))
                .unpoisoned()
                .0;
        }
    }

    /// Waits for every queued close and returns what happened to all of them.
    pub fn finish(self) -> CloseTally {
        let ClosePool {
            queue,
            threads,
            orphans,
            failures,
            ..
        } = self;
        queue.close();
        let mut total = orphans.into_inner().unpoisoned();
        let threads = threads.into_inner().unpoisoned();
        total.threads = threads.len();
        for handle in threads {
            match handle.join() {
                Ok(tally) => total.merge(tally),
                Err(_) => failures.push(Error::new(
                    "(close pool)",
                    ErrorKind::Close,
                    anyhow::anyhow!(
                        "a close thread panicked; the files it was closing are unaccounted for"
                    ),
                )),
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
    use crate::close::Finalize;
    use std::fs::File;
    use std::path::{Path, PathBuf};

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
        fn close(&self, file: File, path: &Path) -> anyhow::Result<()> {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(self.delay);
            drop(file);
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.closed.lock().unwrap().push(path.to_path_buf());
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if self.fail_names.contains(&name) {
                Err(io::Error::other("injected close failure").into())
            } else {
                Ok(())
            }
        }
    }

    fn job(dir: &std::path::Path, name: &str) -> CloseJob {
        let file = File::create(dir.join(name)).unwrap();
        CloseJob {
            file,
            path: name.into(),
            name: name.into(),
            finalize: Finalize::Keep,
        }
    }

    fn root(dir: &Path) -> Arc<OutDir> {
        Arc::new(OutDir::open(dir).unwrap())
    }

    #[test]
    fn settle_waits_for_every_close_submitted_and_the_pool_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let failures = Arc::new(Failures::default());
        let closer = FakeCloser::new(5, &["p3"]);
        let pool =
            ClosePool::new(2, 4, closer.clone(), root(dir.path()), failures.clone()).unwrap();
        let parked = |name: &str| CloseJob {
            finalize: Finalize::Parked,
            ..job(dir.path(), name)
        };
        pool.submit(&mut (0..6).map(|i| parked(&format!("p{i}"))).collect());
        pool.settle();
        // Every close done: each file complete, or its failure recorded and the file gone.
        assert_eq!(closer.closed.lock().unwrap().len(), 6);
        assert_eq!(failures.take().len(), 1);
        assert!(!dir.path().join("p3").exists() && dir.path().join("p4").exists());
        // Nothing waits on an idle pool, and it takes more afterwards.
        pool.settle();
        pool.submit(&mut vec![job(dir.path(), "later")]);
        let tally = pool.finish();
        assert_eq!(tally.closed, 7);
        // A parked file's failed close takes nothing back from the files written.
        assert_eq!(tally.failed, 0);
    }

    #[test]
    fn every_close_result_comes_back_and_failed_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let failures = Arc::new(Failures::default());
        let closer = FakeCloser::new(1, &["f3", "f7"]);
        let pool =
            ClosePool::new(3, 4, closer.clone(), root(dir.path()), failures.clone()).unwrap();
        for i in 0..5 {
            let batch = (0..2).map(|j| job(dir.path(), &format!("f{}", i * 2 + j)));
            pool.submit(&mut batch.collect());
        }
        let tally = pool.finish();
        assert_eq!(tally.closed, 10);
        assert_eq!(closer.closed.lock().unwrap().len(), 10);
        let failures = failures.take();
        let mut failed: Vec<_> = failures.iter().map(|f| f.path().to_owned()).collect();
        failed.sort();
        assert_eq!(failed, [Path::new("f3"), Path::new("f7")]);
        assert_eq!(tally.failed, 2);
        assert!(failures[0].message().contains("injected close failure"));
        assert!(
            !dir.path().join("f3").exists(),
            "a file whose close failed must be removed"
        );
        assert!(dir.path().join("f4").exists());
    }

    #[test]
    fn the_queue_bound_holds_back_writers() {
        let dir = tempfile::tempdir().unwrap();
        let failures = Arc::new(Failures::default());
        let closer = FakeCloser::new(5, &[]);
        let (bound, batch) = (2, 3);
        let pool =
            ClosePool::new(2, bound, closer.clone(), root(dir.path()), failures.clone()).unwrap();
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
        let failures = Arc::new(Failures::default());
        let closer = FakeCloser::new(20, &[]);
        let pool =
            ClosePool::new(4, 16, closer.clone(), root(dir.path()), failures.clone()).unwrap();
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
        let failures = Arc::new(Failures::default());
        let closer = FakeCloser::new(20, &[]);
        let pool =
            ClosePool::new(4, 16, closer.clone(), root(dir.path()), failures.clone()).unwrap();
        pool.submit(&mut (0..4).map(|i| job(dir.path(), &format!("f{i}"))).collect());
        let tally = pool.finish();
        assert_eq!(tally.closed, 4);
        // A batch is not one thread's work: each thread takes a handle and wakes the next.
        assert!(closer.max_in_flight.load(Ordering::SeqCst) >= 2);
    }

    #[test]
    fn a_running_pool_grows_and_still_closes_everything() {
        let dir = tempfile::tempdir().unwrap();
        let failures = Arc::new(Failures::default());
        let closer = FakeCloser::new(2, &["f7"]);
        let pool =
            ClosePool::new(1, 8, closer.clone(), root(dir.path()), failures.clone()).unwrap();
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
        let failures = failures.take();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].path(), Path::new("f7"));
        assert!(closer.max_in_flight.load(Ordering::SeqCst) <= 4);
    }
}
