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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow};
use tar::EntryType;

use super::Format;
use crate::engine::{self, CHUNK, Content, Engine, Writer};
use crate::error::{Error, ErrorKind, Tag};
use crate::options::Options;
use crate::plan::{self, Entry, EntryKind};
use crate::queue::Queue;
use crate::report::Report;

/// Wraps the input in the decoder its format needs. Every decoder reads concatenated members
/// or frames (pigz and `cat a.gz b.gz` make them) to the end.
fn decoder<'a>(format: Format, input: Box<dyn BufRead + Send + 'a>) -> Box<dyn Read + Send + 'a> {
    match format {
        Format::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        Format::Zstd => match zstd::stream::read::Decoder::with_buffer(input) {
            Ok(decoder) => Box::new(decoder),
            Err(e) => Box::new(FailingReader(Some(e))),
        },
        Format::Xz => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(input)),
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
    input: Box<dyn BufRead + Send + '_>,
    format: Format,
    label: &str,
    out: &Path,
    opts: &Options,
) -> anyhow::Result<Report> {
    let threads = opts.threads.max(1);
    // A file is buffered only if it takes at most a quarter of the budget, so several are
    // always in flight; a larger one is streamed by the reader.
    let budget = Budget::new(opts.memory_budget.max(4 * CHUNK as u64));
    let buffer_limit = budget.limit / 4;
    let queue: Queue<Vec<Job>> = Queue::new(threads * 4, threads, Vec::len);

    let (mut report, (outcome, warnings, last_name)) =
        engine::run(out, opts, |engine, writers| {
            let mut stream = Stream {
                engine,
                queue: &queue,
                budget: &budget,
                buffer_limit,
                files: HashSet::new(),
                symlinks: HashSet::new(),
                case: plan::CaseGuard::new(),
                warnings: Vec::new(),
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
                stream.read_all(decoder(format, input))
            });
            (outcome, stream.warnings, stream.last_name)
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
    buffer_limit: u64,
    /// Files seen so far (their paths' 64-bit hashes, so that memory grows by a few bytes per
    /// entry, not by its path): a hard link may only name one of these, and a second copy of a
    /// path is an error.
    files: HashSet<u64>,
    /// Symlinks seen so far: nothing may be extracted below one.
    symlinks: HashSet<PathBuf>,
    /// Paths that differ only by case, where names ignore case.
    case: plan::CaseGuard,
    warnings: Vec<String>,
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
        let mut archive = tar::Archive::new(input);
        for item in archive.entries().context("cannot read the archive")? {
            if self.engine.cancelled() {
                // The rest of the stream is neither read nor checked.
                return Ok(());
            }
            let mut raw = item.context("cannot read the next header")?;
            let name = String::from_utf8_lossy(&raw.path_bytes()).into_owned();
            let complete = match self.entry(&mut raw, &name) {
                Ok(Some(entry)) => self.dispatch(entry, &mut raw, writer)?,
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

    /// Validates one header into an entry. `Ok(None)`: nothing to extract (skipped).
    fn entry<R: Read>(
        &mut self,
        raw: &mut tar::Entry<'_, R>,
        name: &str,
    ) -> Result<Option<Entry>, Error> {
        let refused = |error: anyhow::Error| Error::new(name, ErrorKind::Refused, error);
        let unreadable = |error: anyhow::Error| Error::new(name, ErrorKind::Source, error);
        let header = raw.header();
        let entry_type = header.entry_type();
        let kind = match entry_type {
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => EntryKind::File,
            // `./` is the output folder itself: nothing to create.
            EntryType::Directory if plan::is_root(name) => return Ok(None),
            EntryType::Directory => EntryKind::Dir,
            EntryType::Symlink | EntryType::Link => {
                let target = raw
                    .link_name_bytes()
                    .ok_or_else(|| unreadable(anyhow!("the link has no target")))?;
                let target = std::str::from_utf8(&target)
                    .context("the link target is not UTF-8")
                    .tag(name, ErrorKind::Source)?
                    .to_string();
                if entry_type == EntryType::Symlink {
                    EntryKind::Symlink {
                        target: target.into(),
                    }
                } else {
                    EntryKind::Hardlink {
                        target: plan::safe_relative_path(&target).map_err(|r| {
                            refused(anyhow!("refused: hard link target '{target}': {r}"))
                        })?,
                    }
                }
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                let what = match entry_type {
                    EntryType::Char => "character device",
                    EntryType::Block => "block device",
                    _ => "FIFO",
                };
                self.warnings.push(format!("skipped '{name}': a {what}"));
                return Ok(None);
            }
            // Global pax headers carry defaults for the whole archive, not a file.
            EntryType::XGlobalHeader => return Ok(None),
            other => {
                self.warnings.push(format!(
                    "skipped '{name}': unsupported entry type {:?}",
                    other.as_byte() as char
                ));
                return Ok(None);
            }
        };
        if kind == EntryKind::File && is_pax_sparse(raw) {
            return Err(unreadable(anyhow!(
                "pax-format sparse files (GNU.sparse.* records, as `tar --format=pax --sparse` makes) are not supported; GNU-format sparse files are"
            )));
        }
        if std::str::from_utf8(&raw.path_bytes()).is_err() {
            return Err(refused(anyhow!("refused: the name is not UTF-8")));
        }
        let path = plan::safe_relative_path(name).map_err(|r| refused(anyhow!("refused: {r}")))?;
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
        let mode = raw.header().mode().ok().map(|m| m & 0o7777);
        let mut mtime = raw.header().mtime().ok().and_then(header_time);
        if let Some(precise) = pax_mtime(raw) {
            mtime = Some(precise);
        }
        Ok(Some(Entry {
            name: name.to_string(),
            sparse: entry_type == EntryType::GNUSparse,
            path,
            kind,
            mode,
            mtime,
            size: raw.size(),
            index: 0,
        }))
    }

    /// Hands an entry to the engine: directories and links now, file content to a writer (or,
    /// for a file too large to buffer, written here). `Ok(false)`: the entry's data may not
    /// have been read whole (a failed streamed write); `Err`: the stream broke.
    fn dispatch<R: Read>(
        &mut self,
        entry: Entry,
        raw: &mut tar::Entry<'_, R>,
        writer: &mut Writer<'_>,
    ) -> anyhow::Result<bool> {
        match entry.kind {
            EntryKind::Dir => self.engine.add_dir(entry),
            EntryKind::Symlink { .. } | EntryKind::Hardlink { .. } => self.engine.add_link(entry),
            EntryKind::File => {
                if !self.files.insert(path_key(&entry.path)) {
                    self.engine.record(Error::new(
                        &entry.name,
                        ErrorKind::AlreadyExists,
                        anyhow!(
                            "the archive holds this path more than once; the first copy was kept"
                        ),
                    ));
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

/// A path's key in the set of files seen. A collision (odds of about 1 in 10^19 per pair) could
/// only wrongly refuse a file or allow a hard link to a file that is in OUT anyway (the engine
/// checks every link target on disk).
fn path_key(path: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    path.hash(&mut hasher);
    hasher.finish()
}

/// A header's mtime: tar stores it as a signed number (GNU's base-256 form can be negative), which
/// the tar crate hands over as its two's-complement `u64`.
fn header_time(raw: u64) -> Option<SystemTime> {
    plan::unix_time(raw as i64)
}

/// Whether a pax header describes a sparse file in GNU's pax encodings (0.x or 1.0), whose data
/// the tar crate would hand over as the raw map and chunks.
fn is_pax_sparse<R: Read>(raw: &mut tar::Entry<'_, R>) -> bool {
    let Ok(Some(extensions)) = raw.pax_extensions() else {
        return false;
    };
    extensions
        .filter_map(Result::ok)
        .any(|ext| ext.key().is_ok_and(|k| k.starts_with("GNU.sparse.")))
}

/// The mtime with its fraction of a second, from a pax header (`mtime=1700000000.25`).
fn pax_mtime<R: Read>(raw: &mut tar::Entry<'_, R>) -> Option<SystemTime> {
    let extensions = raw.pax_extensions().ok()??;
    let value = extensions
        .filter_map(Result::ok)
        .find(|ext| ext.key() == Ok("mtime"))?
        .value()
        .ok()?
        .to_string();
    parse_pax_time(&value)
}

fn parse_pax_time(value: &str) -> Option<SystemTime> {
    let (secs, frac) = value.split_once('.').unwrap_or((value, ""));
    let negative = secs.starts_with('-');
    let whole: u64 = secs.trim_start_matches('-').parse().ok()?;
    let digits: String = frac.chars().take(9).collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let nanos: u64 = if digits.is_empty() {
        0
    } else {
        format!("{digits:0<9}").parse().ok()?
    };
    let offset = Duration::from_secs(whole) + Duration::from_nanos(nanos);
    if negative {
        UNIX_EPOCH.checked_sub(offset)
    } else {
        UNIX_EPOCH.checked_add(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn negative_header_times_are_before_1970() {
        assert_eq!(header_time(60), Some(UNIX_EPOCH + Duration::from_secs(60)));
        assert_eq!(
            header_time((-100i64) as u64),
            Some(UNIX_EPOCH - Duration::from_secs(100))
        );
    }

    #[test]
    fn pax_times_keep_their_fraction() {
        let t = parse_pax_time("1700000000.25").unwrap();
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(1_700_000_000, 250_000_000)
        );
        let t = parse_pax_time("1700000000.123456789123").unwrap();
        // Windows' SystemTime counts 100 ns ticks, so the last two digits cannot be kept there.
        let kept = if cfg!(windows) {
            123_456_700
        } else {
            123_456_789
        };
        assert_eq!(t.duration_since(UNIX_EPOCH).unwrap().subsec_nanos(), kept);
        assert_eq!(
            parse_pax_time("42"),
            Some(UNIX_EPOCH + Duration::from_secs(42))
        );
        let before = parse_pax_time("-1.5").unwrap();
        assert_eq!(
            UNIX_EPOCH.duration_since(before).unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_pax_time("x"), None);
        assert_eq!(parse_pax_time("1.2e3"), None);
    }

    #[test]
    fn the_budget_holds_a_reader_back_until_writers_free_memory() {
        let budget = Arc::new(Budget::new(10));
        budget.acquire(8);
        let waiter = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || budget.acquire(5))
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "8 + 5 bytes must not fit in 10");
        budget.release(8);
        waiter.join().unwrap();
        assert_eq!(budget.lock().used, 5);
        assert!(!budget.try_acquire(6));
        assert!(budget.try_acquire(5));
    }
}
