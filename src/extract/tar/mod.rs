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
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use anyhow::{Context, anyhow};

use super::Format;
use crate::engine::{self, CHUNK, Content, Engine, Writer, path_key};
use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::plan::{self, Entry, EntryKind};
use crate::queue::Queue;
use crate::report::Report;

use super::list::{Listed, ListedKind};
use super::select::{Choice, Chooser};

mod reader;
mod xz;

pub(super) use reader::Reader;
pub(crate) use reader::checksum_ok;
use reader::{Kind, Member};

/// Wraps the input in the decoder its format needs. Every decoder reads concatenated members
/// or frames (pigz and `cat a.gz b.gz` make them) to the end.
pub(super) fn decoder<'a>(
    format: Format,
    input: Box<dyn BufRead + Send + 'a>,
) -> Box<dyn Read + Send + 'a> {
    match format {
        Format::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        Format::Zstd => match zstd::stream::read::Decoder::with_buffer(input) {
            Ok(decoder) => Box::new(decoder),
            Err(e) => Box::new(FailingReader(Some(e))),
        },
        Format::Xz => Box::new(xz::Decoder::new(input)),
        Format::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(input)),
        Format::Tar | Format::Zip => input,
    }
}

/// A reader that reports why its decoder could not be made, on first use.
struct FailingReader(Option<io::Error>);

impl Read for FailingReader {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(self
            .0
            .take()
            .unwrap_or_else(|| io::Error::other("decoder unavailable")))
    }
}

/// Bytes of file content in flight between the reader and the writers, at most `limit`.
struct Budget {
    limit: u64,
    state: Mutex<BudgetState>,
    freed: Condvar,
}

#[derive(Default)]
struct BudgetState {
    used: u64,
    /// The reader is asleep waiting for room: only then is a release worth a wake-up call.
    reader_waiting: bool,
}

impl Budget {
    fn new(limit: u64) -> Budget {
        Budget {
            limit,
            state: Mutex::default(),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BudgetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes `n` bytes if they fit now.
    fn try_acquire(&self, n: u64) -> bool {
        let mut state = self.lock();
        let fits = state.used + n <= self.limit;
        if fits {
            state.used += n;
        }
        fits
    }

    /// Waits until `n` more bytes fit (`n` is never more than the limit).
    fn acquire(&self, n: u64) {
        let mut state = self.lock();
        while state.used + n > self.limit {
            state.reader_waiting = true;
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.reader_waiting = false;
        state.used += n;
    }

    fn release(&self, n: u64) {
        let mut state = self.lock();
        state.used -= n;
        if state.reader_waiting {
            self.freed.notify_one();
        }
    }
}

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
    let threads = opts.threads.max(1);
    // A file is buffered only if it takes at most a quarter of the budget, so several are
    // always in flight; a larger one is streamed by the reader.
    let budget = Budget::new(opts.memory_budget.max(4 * CHUNK as u64));
    let buffer_limit = budget.limit / 4;
    let queue: Queue<Vec<Job>> = Queue::new(threads * 4, threads, Vec::len);

    let (mut report, (outcome, warnings, last_name)) =
        engine::run(out, opts, |engine, writers| {
            // The last copy of a path wins: the engine must know which paths are this run's.
            engine.track_created();
            let mut stream = Stream {
                engine,
                check: Checker::new(chooser),
                queue: &queue,
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
                        let _gone = ReceiverGuard(&queue);
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
                let _close = CloseOnDrop(&queue);
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
    report.warnings = warnings;
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

/// Lists a tar stream as it is read: every member the selection takes, with what extracting
/// it would do. `Err`: the stream broke (the members before it were listed).
pub(super) fn list(
    decoded: Box<dyn Read + Send + '_>,
    label: &str,
    chooser: &Chooser,
    each: &mut dyn FnMut(&Listed),
) -> Result<(), Error> {
    let mut archive = Reader::new(decoded);
    let mut check = Checker::new(chooser);
    let broke = |error: anyhow::Error| Error::new(label, ErrorKind::Source, error);
    while let Some(member) = archive
        .next()
        .context("the archive is corrupt or truncated")
        .map_err(broke)?
    {
        if chooser.choose(&member.name, member.kind == Kind::Dir) == Choice::Skip {
            continue;
        }
        let name = plan::display_bytes(&member.name);
        let warned = check.warnings.len();
        let (path, problem) = match check.entry(&member, &name) {
            Ok(Some(entry)) => {
                if entry.kind == EntryKind::File {
                    check.files.insert(path_key(&entry.path));
                }
                (Some(entry.path), None)
            }
            // Skipped with a warning (a device, a FIFO), or the output folder itself.
            Ok(None) => (None, check.warnings.drain(warned..).next()),
            Err(error) => (None, Some(error.message())),
        };
        let kind = match member.kind {
            Kind::File => ListedKind::File,
            Kind::Dir => ListedKind::Dir,
            Kind::Symlink => ListedKind::Symlink,
            Kind::HardLink => ListedKind::Hardlink,
            Kind::CharDevice => ListedKind::CharDevice,
            Kind::BlockDevice => ListedKind::BlockDevice,
            Kind::Fifo => ListedKind::Fifo,
            Kind::Other(_) => ListedKind::Other,
        };
        let links = matches!(member.kind, Kind::Symlink | Kind::HardLink);
        each(&Listed {
            kind,
            mode: member.mode,
            size: if kind == ListedKind::File {
                member.size
            } else {
                0
            },
            mtime: member.mtime,
            name,
            path,
            target: links.then(|| plan::display_bytes(&member.link)),
            problem,
        });
    }
    // As extraction does: the compressor's own check comes after the end-of-archive blocks.
    std::io::copy(&mut archive.into_inner(), &mut std::io::sink())
        .context("the data after the last entry is corrupt")
        .map_err(broke)?;
    Ok(())
}

/// Decides what each member of a tar becomes, in archive order: taken or not (the
/// selection), under what path, and whether it is refused. Extraction and listing share it, so
/// `list` says exactly what `extract` would do.
pub(crate) struct Checker<'s> {
    /// Which entries are extracted, under what name.
    chooser: &'s Chooser,
    /// Paths of files seen so far (their 64-bit hashes, so that memory grows by a few bytes
    /// per entry, not by its path): a hard link may only name one of these, and a later copy
    /// of one replaces it.
    pub files: HashSet<u64>,
    /// Entries seen so far: each entry's place in the archive.
    order: usize,
    /// Symlinks seen so far: nothing may be extracted below one.
    symlinks: HashSet<PathBuf>,
    /// Paths that differ only by case, where names ignore case.
    case: plan::CaseGuard,
    pub warnings: Vec<String>,
}

impl<'s> Checker<'s> {
    pub fn new(chooser: &'s Chooser) -> Checker<'s> {
        Checker {
            chooser,
            files: HashSet::new(),
            order: 0,
            symlinks: HashSet::new(),
            case: plan::CaseGuard::new(),
            warnings: Vec::new(),
        }
    }

    /// Validates one member into an entry. `Ok(None)`: nothing to extract (skipped).
    pub fn entry(&mut self, member: &Member, name: &str) -> Result<Option<Entry>, Error> {
        let refused = |error: anyhow::Error| Error::new(name, ErrorKind::Refused, error);
        let stored = match self.chooser.choose(&member.name, member.kind == Kind::Dir) {
            Choice::Take(stored) => stored,
            // Its data is skipped in the stream, unwritten.
            Choice::Skip => return Ok(None),
            Choice::Refuse(why) => return Err(refused(anyhow!("refused: {why}"))),
        };
        let kind = match member.kind {
            Kind::File => EntryKind::File,
            // `./` is the output folder itself: nothing to create.
            Kind::Dir if plan::is_root(&String::from_utf8_lossy(&stored)) => return Ok(None),
            Kind::Dir => EntryKind::Dir,
            Kind::Symlink => EntryKind::Symlink {
                target: plan::path_from_bytes(&member.link)
                    .map_err(|r| refused(anyhow!("refused: the link target: {r}")))?,
            },
            Kind::HardLink => {
                let target = match self.chooser.link_target(&member.link) {
                    Choice::Take(target) => target,
                    // Nothing is left of what it names: its content is in an entry that was
                    // not extracted. Said, as GNU tar does (bsdtar drops it without a word).
                    Choice::Skip => {
                        let target = plan::display_bytes(&member.link);
                        return Err(refused(anyhow!(
                            "refused: hard link target '{target}' has no name left after --strip-components"
                        )));
                    }
                    Choice::Refuse(why) => {
                        return Err(refused(anyhow!("refused: hard link target: {why}")));
                    }
                };
                EntryKind::Hardlink {
                    target: plan::safe_relative_bytes(&target).map_err(|r| {
                        let target = plan::display_bytes(&member.link);
                        refused(anyhow!("refused: hard link target '{target}': {r}"))
                    })?,
                }
            }
            Kind::CharDevice | Kind::BlockDevice | Kind::Fifo => {
                let what = match member.kind {
                    Kind::CharDevice => "character device",
                    Kind::BlockDevice => "block device",
                    _ => "FIFO",
                };
                self.warnings.push(format!("skipped '{name}': a {what}"));
                return Ok(None);
            }
            // A volume label (`tar -V`) names the archive, not a file.
            Kind::Other(b'V') => return Ok(None),
            Kind::Other(flag) => {
                self.warnings.push(format!(
                    "skipped '{name}': unsupported entry type '{}'",
                    (flag as char).escape_default()
                ));
                return Ok(None);
            }
        };
        let path =
            plan::safe_relative_bytes(&stored).map_err(|r| refused(anyhow!("refused: {r}")))?;
        self.case
            .check(&path)
            .map_err(|r| refused(anyhow!("refused: {r}")))?;
        if let Some(link) = path
            .ancestors()
            .skip(1)
            .find(|a| self.symlinks.contains(*a))
        {
            return Err(refused(anyhow!(
                "refused: its parent '{}' is a symlink in this archive",
                link.display()
            )));
        }
        match &kind {
            EntryKind::Symlink { target } => {
                // Recorded even if refused: what the archive puts below it is refused too.
                self.symlinks.insert(path.clone());
                plan::check_symlink_target(&path, &target.to_string_lossy())
                    .map_err(|r| refused(anyhow!("refused: {r}")))?;
            }
            EntryKind::Hardlink { target } if !self.files.contains(&path_key(target)) => {
                return Err(refused(anyhow!(
                    "refused: hard link target '{}' is not a file earlier in this archive",
                    target.display()
                )));
            }
            _ => {}
        }
        self.order += 1;
        Ok(Some(Entry {
            name: name.to_string(),
            sparse: member.sparse.is_some(),
            path,
            kind,
            mode: member.mode,
            mtime: member.mtime,
            size: member.size,
            index: self.order,
            replaces: false,
        }))
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_budget_holds_a_reader_back_until_writers_free_memory() {
        let budget = Arc::new(Budget::new(10));
        budget.acquire(8);
        let waiter = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || budget.acquire(5))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished(), "8 + 5 bytes must not fit in 10");
        budget.release(8);
        waiter.join().unwrap();
        assert_eq!(budget.lock().used, 5);
        assert!(!budget.try_acquire(6));
        assert!(budget.try_acquire(5));
    }
}
