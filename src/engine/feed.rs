//! Writers fed by one reading thread: a source that can only be read in order (a tar stream, a
//! zip from a pipe) reads each small file into memory on this thread and hands it to the run's
//! writers, which create, write and close it meanwhile. On a local disk that overlaps decoding
//! with writing; on a network filesystem, where every create and write is a round trip, it is
//! what keeps many files in flight behind a single reader.
//!
//! Memory is bounded by a budget (`Options::memory_budget`): bytes of content handed over and
//! not yet written. The reader waits for room; a file larger than a quarter of the budget is not
//! buffered but streamed by the reader itself, once the files before it are handed over. (A tar
//! declares each size, so its reader takes the room first; a zip from a pipe learns a size by
//! reading, so it may hold one more file, of at most a quarter of the budget, while it waits.)

use super::pump::Content;
use super::target::Engine;
use super::writer::Writer;
use crate::plan::Entry;
use crate::queue::Queue;

use super::budget::Budget;

/// A file read into memory, waiting for a writer.
pub(crate) struct Job {
    pub entry: Entry,
    pub data: Vec<u8>,
}

/// Files travel to the writers in batches: a hand-over that wakes a sleeping writer costs
/// system calls, and writers mostly wait for the decoder, so one wake-up per file would cost
/// more than writing a small file.
///
/// Batches help on a network filesystem too, though a wake-up there is small against a file's
/// round trips: a batch's files mostly share a folder, and creates in one folder wait for each
/// other (Linux holds the folder's lock across a create's round trip), so whole batches spread
/// the writers over folders. One file a batch, tried: the botocore wheel piped onto lab/slowfs
/// with every operation 1 ms took 1.99 s against 1.33 s (3 runs each, alternated).
const BATCH_FILES: usize = 32;
const BATCH_BYTES: u64 = 4 << 20;

/// The reader's side: what it holds for the writers and the budget it takes from.
pub(crate) struct Feed<'s> {
    queue: &'s Queue<Vec<Job>>,
    budget: &'s Budget,
    /// Files read but not yet handed over, and their bytes.
    pending: Vec<Job>,
    pending_bytes: u64,
    /// A file larger than this is streamed by the reader, not buffered.
    pub buffer_limit: u64,
}

/// Runs `read` on this thread with a [`Feed`] to hand files to the writers of `pool` (all of
/// its threads), and a [`Writer`] of its own for what it writes itself. Returns what `read`
/// returned, once every file handed over is written (a file that fails is recorded in the run
/// by its writer, with its path, as any other).
pub(crate) fn fed<'e, T>(
    engine: &'e Engine,
    pool: &rayon::ThreadPool,
    memory_budget: u64,
    read: impl for<'q> FnOnce(&mut Feed<'q>, &mut Writer<'e>) -> T,
) -> T {
    let budget = Budget::new(memory_budget.max(4 * super::pump::CHUNK as u64));
    let threads = pool.current_num_threads();
    let queue: Queue<Vec<Job>> = Queue::new(threads * 4, threads, Vec::len);
    let (queue, budget_ref) = (&queue, &budget);
    pool.in_place_scope(|scope| {
        for _ in 0..threads {
            scope.spawn(move |_| {
                let _gone = ReceiverGuard(queue);
                let mut writer = engine.writer();
                while let Some(batch) = queue.pop() {
                    let mut bytes = 0;
                    for job in batch {
                        // Directories are made here, by the writers, off the reader's path.
                        writer.write(&job.entry, Content::Bytes(&job.data));
                        bytes += job.data.len() as u64;
                    }
                    budget_ref.release(bytes);
                }
            });
        }
        // Closed however the reader ends (even by unwinding), so the writers always stop.
        let _close = CloseOnDrop(queue);
        let mut feed = Feed {
            queue,
            budget: budget_ref,
            pending: Vec::new(),
            pending_bytes: 0,
            buffer_limit: budget_ref.limit / 4,
        };
        let mut writer = engine.writer();
        let out = read(&mut feed, &mut writer);
        feed.flush(&mut writer);
        out
    })
}

impl Feed<'_> {
    /// Waits until `n` more bytes fit in the budget (handing over what this thread holds first,
    /// so that the writers can free some). `n` is at most `buffer_limit`.
    pub fn room(&mut self, n: u64, writer: &mut Writer<'_>) {
        if !self.budget.try_acquire(n) {
            self.flush(writer);
            self.budget.acquire(n);
        }
    }

    /// Gives back `n` bytes taken with [`Feed::room`] for a file that will not be handed over.
    pub fn give_back(&self, n: u64) {
        self.budget.release(n);
    }

    /// Hands a file over (its bytes taken with [`Feed::room`]); batches go when full.
    pub fn push(&mut self, job: Job, writer: &mut Writer<'_>) {
        self.pending_bytes += job.data.len() as u64;
        self.pending.push(job);
        if self.pending.len() >= BATCH_FILES || self.pending_bytes >= BATCH_BYTES {
            self.flush(writer);
        }
    }

    /// Hands the pending files to the writers (or, if none is left, writes them here).
    pub fn flush(&mut self, writer: &mut Writer<'_>) {
        if self.pending.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.pending);
        let bytes = std::mem::take(&mut self.pending_bytes);
        if let Err(batch) = self.queue.push(batch) {
            // Every writer is gone (only after a panic): write them here instead.
            for job in batch {
                writer.write(&job.entry, Content::Bytes(&job.data));
            }
            self.budget.release(bytes);
        }
    }
}

struct CloseOnDrop<'q>(&'q Queue<Vec<Job>>);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

struct ReceiverGuard<'q>(&'q Queue<Vec<Job>>);

impl Drop for ReceiverGuard<'_> {
    fn drop(&mut self) {
        self.0.receiver_gone();
    }
}
