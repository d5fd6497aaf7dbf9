//! The tar source: one thread reads and decodes the stream; writers and closers work behind it.
//!
//! A tar stream (plain, or inside gzip, zstd, xz or bzip2) can only be read in order, so this
//! thread decodes it and parses its headers, creates directories as they come (parents before
//! children, before any file in them), and hands each small file's content, read into memory,
//! to the writer threads over a bounded queue. Memory is bounded by a budget: a file is buffered
//! only while the bytes in flight stay under it, and a file too large to buffer is streamed by
//! this thread itself, in 1 MiB chunks, while the writers drain the queue. Peak memory is the
//! budget plus one chunk per writer, however large the archive or its entries.
//!
//! Names and link targets get the same checks as zip entries; in addition an entry below a
//! symlink seen earlier in the stream is refused, and a hard link may only name a file that came
//! earlier in this archive. Device nodes and FIFOs are skipped with a warning.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, anyhow};

use crate::engine::{self, CHUNK, Content, Engine, Writer, path_key};
use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::plan::{self, Entry, EntryKind};
use crate::queue::Queue;
use crate::report::Report;

use super::select::Chooser;

mod budget;
mod checks;
mod list;
mod reader;

use budget::Budget;
use checks::Checker;
pub(super) use list::list;
pub(super) use reader::Reader;

/// A file read into memory, waiting for a writer.
struct Job {
    entry: Entry,
    data: Vec<u8>,
}

/// Files travel to the writers in batches: a hand-over that wakes a sleeping writer costs
/// system calls, and writers mostly wait for the decoder, so one wake-up per file would cost
/// more than writing a small file.
const BATCH_FILES: usize = 32;
const BATCH_BYTES: u64 = 4 << 20;

/// Extracts the tar stream `input` (in `format`; `label` names it in messages) into `out`.
pub(super) fn extract(
    decoded: Box<dyn Read + Send + '_>,
    label: &str,
    out: &Path,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    // A file is buffered only if it takes at most a quarter of the budget, so several are
    // always in flight; a larger one is streamed by the reader.
    let budget = Budget::new(opts.memory_budget.max(4 * CHUNK as u64));
    let buffer_limit = budget.limit / 4;

    let (mut report, (outcome, warnings, last_name)) =
        engine::run(out, None, opts, |engine, writers| {
            // As many writers as the run has (sized for the output's filesystem), sharing the
            // one budget.
            let threads = writers.current_num_threads();
            let queue: Queue<Vec<Job>> = Queue::new(threads * 4, threads, Vec::len);
            let queue = &queue;
            // The last copy of a path wins: the engine must know which paths are this run's.
            engine.track_created();
            let mut stream = Stream {
                engine,
                check: Checker::new(chooser),
                queue,
                budget: &budget,
                buffer_limit,
                links: HashSet::new(),
                last_name: None,
                pending: Vec::new(),
                pending_bytes: 0,
            };
            let outcome = writers.in_place_scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(|_| {
                        let _gone = ReceiverGuard(queue);
                        let mut writer = engine.writer();
                        while let Some(batch) = queue.pop() {
                            let mut bytes = 0;
                            for job in batch {
                                // Directories are made here, by the writers, off the reader's path.
                                writer.write(&job.entry, Content::Bytes(&job.data));
                                // What the reader took: the declared size (a short read is an error).
                                bytes += job.entry.size;
                            }
                            budget.release(bytes);
                        }
                    });
                }
                // Closed however the reader ends (even by unwinding), so the writers always stop.
                let _close = CloseOnDrop(queue);
                stream.read_all(decoded)
            });
            (outcome, stream.check.warnings, stream.last_name)
        })?;
    if let Err(error) = outcome {
        let place = match last_name {
            Some(name) => format!("after entry '{name}'"),
            None => "before its first entry".to_string(),
        };
        report.failures.push(Error::new(
            label,
            ErrorKind::Source,
            error.context(format!("the archive is corrupt or truncated {place}; the entries after it were not extracted")),
        ));
    }
    report.warnings.extend(warnings);
    Ok(report)
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

/// The reader's state while it walks the stream.
struct Stream<'s> {
    engine: &'s Engine,
    queue: &'s Queue<Vec<Job>>,
    budget: &'s Budget,
    /// What decides what each member becomes.
    check: Checker<'s>,
    buffer_limit: u64,
    /// Paths of links registered and not yet replaced by a later entry.
    links: HashSet<u64>,
    /// The last entry read whole, to say where a broken stream broke.
    last_name: Option<String>,
    /// Files read but not yet handed to the writers, and their bytes.
    pending: Vec<Job>,
    pending_bytes: u64,
}

impl Stream<'_> {
    /// Reads every entry. An `Err` means the stream itself is broken (corrupt or truncated);
    /// problems with single entries are recorded in the run and the walk goes on.
    fn read_all(&mut self, input: Box<dyn Read + Send + '_>) -> anyhow::Result<()> {
        let mut writer = self.engine.writer();
        let outcome = self.walk(input, &mut writer);
        self.flush(&mut writer);
        outcome
    }

    fn walk(
        &mut self,
        input: Box<dyn Read + Send + '_>,
        writer: &mut Writer<'_>,
    ) -> anyhow::Result<()> {
        let mut archive = Reader::new(input);
        loop {
            if self.engine.stopped() {
                // The rest of the stream is neither read nor checked: not even the rest of the
                // member in hand, which may be a bomb's gigabytes (`--max-output`).
                return Ok(());
            }
            let Some(member) = archive.next().context("cannot read the next header")? else {
                break;
            };
            let name = plan::display_bytes(&member.name);
            let complete = match self.check.entry(&member, &name) {
                Ok(Some(entry)) => self.dispatch(entry, &mut archive.data(), writer)?,
                Ok(None) => true,
                Err(error) => {
                    self.engine.record(error);
                    true
                }
            };
            if complete {
                self.last_name = Some(name);
            }
        }
        // The tar ends at its end-of-archive blocks, but a compressor's checksum (gzip's CRC,
        // zstd's and xz's checks) comes after them: read to the end so that it is verified.
        std::io::copy(&mut archive.into_inner(), &mut std::io::sink())
            .context("the data after the last entry is corrupt")?;
        Ok(())
    }

    /// Hands an entry to the engine: directories and links now, file content to a writer (or,
    /// for a file too large to buffer, written here). `Ok(false)`: the entry's data may not
    /// have been read whole (a failed streamed write); `Err`: the stream broke.
    fn dispatch(
        &mut self,
        mut entry: Entry,
        raw: &mut dyn Read,
        writer: &mut Writer<'_>,
    ) -> anyhow::Result<bool> {
        // The last copy of a path wins, as with GNU tar and bsdtar (`tar -r` and `tar -u`
        // append newer copies): an earlier link at the path is forgotten, and an earlier file
        // is replaced at the end of the run.
        let key = path_key(&entry.path);
        if entry.kind != EntryKind::Dir {
            if self.links.remove(&key) {
                self.engine.forget_links(&entry.path, entry.index);
            }
            entry.replaces = self.check.files.contains(&key);
        }
        match entry.kind {
            EntryKind::Dir => self.engine.add_dir(entry),
            EntryKind::Symlink { .. } | EntryKind::Hardlink { .. } => {
                self.links.insert(key);
                self.engine.add_link(entry);
            }
            EntryKind::File => {
                self.check.files.insert(key);
                // Past the output cap, the run stops here without reading the data.
                if let Err(error) = self.engine.within_limit(&entry) {
                    self.engine.record(error);
                    return Ok(true);
                }
                if entry.size > self.buffer_limit {
                    // Give the writers what is pending before this thread gets busy.
                    self.flush(writer);
                    // If the stream broke inside this file, the next header read says so.
                    return Ok(writer.write(&entry, Content::Reader(raw)));
                }
                if !self.budget.try_acquire(entry.size) {
                    // What this thread holds must reach the writers before it waits for them.
                    self.flush(writer);
                    self.budget.acquire(entry.size);
                }
                let mut data = Vec::with_capacity(entry.size as usize);
                let read = raw.read_to_end(&mut data);
                if read.is_err() || data.len() as u64 != entry.size {
                    self.budget.release(entry.size);
                    let error = match read {
                        Err(e) => anyhow::Error::new(e).context("reading the entry's data"),
                        Ok(n) => anyhow!("the entry is truncated: {n} of its {} bytes", entry.size),
                    };
                    self.engine
                        .record(Error::new(&entry.name, ErrorKind::Source, error));
                    return Err(anyhow!("the stream broke inside '{}'", entry.name));
                }
                self.pending_bytes += entry.size;
                self.pending.push(Job { entry, data });
                if self.pending.len() >= BATCH_FILES || self.pending_bytes >= BATCH_BYTES {
                    self.flush(writer);
                }
            }
        }
        Ok(true)
    }
}

impl Stream<'_> {
    /// Hands the pending files to the writers (or, if none is left, writes them here).
    fn flush(&mut self, writer: &mut Writer<'_>) {
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
