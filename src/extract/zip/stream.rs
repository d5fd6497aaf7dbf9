//! A zip read from a pipe or standard input (`curl ... | fastwrite extract - -o out`), as
//! bsdtar reads one: entry by entry from the local headers, data descriptors included
//! (`stream/descriptor.rs`). Each small file is read into memory, checked (its CRC, its
//! descriptor), and handed to the run's writers (`engine/feed.rs`), as a tar stream's are; a
//! large one is written by the reader through the engine's door for streamed files, which
//! keeps it only once its reader has checked it.
//!
//! What only the central directory knows comes at the end of the stream
//! (`stream/central.rs`) and is applied then (`stream/finish.rs`): Unix modes (local headers
//! have none, so files are written with the default mode first), which entries are symlinks
//! (written as small files holding their target), folders marked only by their MS-DOS
//! attribute, and names that are not UTF-8, which a zip from a file keeps byte for byte where
//! it was made on Unix and a local header cannot say so. An empty file with no `/` at the end
//! of its name may be such a folder: it is held until an entry below it shows it is one, or the
//! central directory says, before it is written. The differences from a zip read from a file,
//! which `docs/security.md` lists: local headers are trusted until the central directory
//! comes (nothing can overlap in a stream), sizes are not known before writing (no free-space
//! check), and bytes before the first local header (a self-extractor's program) are passed
//! over only within a bound (`format::ZIP_SEARCH`).

mod central;
mod descriptor;
mod finish;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Cursor, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, anyhow, bail};
use zip::read::{ZipReadOptions, read_zipfile_from_stream_with_options};

use crate::engine::{self, Engine, Writer};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::Options;
use crate::place::Place;
use crate::plan::{self, Entry, EntryKind};
use crate::report::Report;

use super::super::format::{self, ZipStart};
use super::super::select::{Choice, Chooser};
use super::super::single;
use super::super::source::Counted;
use super::integrity;
use super::planning::ZipKind;
use crate::engine::feed::{self, Feed, Job};
use central::Directory;
use descriptor::{Ahead, Data, Inflated, MISMATCH, Stored};

const LOCAL_HEADER: u32 = 0x0403_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const END_OF_CENTRAL: u32 = 0x0605_4b50;
const ZIP64_END: u32 = 0x0606_4b50;
const DATA_DESCRIPTOR: u32 = 0x0807_4b50;

/// Empty files held at most, each waiting to be told a file or a folder: past this many, an
/// empty file is written as one (and made a folder at the end if the central directory says
/// so), so that an archive of millions of them costs no more memory than another.
const MOST_HELD_EMPTY: usize = 4096;

/// Central records kept beyond one for each local header the stream met: enough to name the
/// entries whose local headers were passed over.
const MORE_RECORDS: usize = 1 << 16;

/// A local header, as far as this reader needs it.
struct Local {
    /// Its bytes as read (signature included), handed back to the `zip` crate.
    raw: Vec<u8>,
    flags: u16,
    method: u16,
    /// Its name as the stream reads it ([`decode_name`]), and as it is stored.
    name: String,
    raw_name: Vec<u8>,
    /// The extra field has a zip64 record: the data descriptor's sizes are 8 bytes.
    zip64: bool,
    /// Where it starts in the stream.
    offset: u64,
}

/// What was written of an entry, kept (by its local header's offset) for what the central
/// directory then says of it.
struct Written {
    /// Its name as the stream read it.
    name: String,
    /// Its local header, as read.
    header: Vec<u8>,
    path: PathBuf,
    mtime: Option<SystemTime>,
    dir: bool,
    /// For an entry with a data descriptor: what the descriptor confirmed.
    described: Option<Data>,
}

/// An entry's data, as the reader that checks it: one that follows a data descriptor says
/// what the descriptor confirmed, once read to its end.
trait EntryData: Read {
    fn described(&self) -> Option<Data> {
        None
    }
}

impl<R: Read> EntryData for zip::read::ZipFile<'_, R> {}

impl EntryData for Stored<'_, '_> {
    fn described(&self) -> Option<Data> {
        Some(self.data())
    }
}

impl EntryData for Inflated<'_, '_> {
    fn described(&self) -> Option<Data> {
        self.checked()
    }
}

/// What reading the stream left, for the end of the run.
struct Reading {
    /// `Ok(Some)`: the central directory was reached and read; `Ok(None)`: the run was
    /// cancelled; `Err`: the stream could not be followed to it.
    outcome: anyhow::Result<Option<Directory>>,
    written: HashMap<u64, Written>,
    seen: HashMap<u64, Vec<u8>>,
    failures: Vec<Error>,
    /// Bytes before the zip's first local header, and whether they were a split archive's
    /// marker (which says nothing).
    prefix: u64,
    marker: bool,
    between: u64,
    /// The folder its target holds (`Target::held`), where the central directory's word is
    /// applied once every file is closed.
    held: Option<std::sync::Arc<crate::platform::OutDir>>,
}

/// A zip from a pipe, opened: extracted as it streams, by its local headers; listed and read
/// from its central directory, at its end, kept in a temporary file first (never in memory),
/// as bsdtar reads one that is not seekable. `note` goes to the run's report (why a zip that
/// has a central directory is read without it).
pub(in crate::extract) struct Piped {
    pub input: Box<dyn BufRead + Send>,
    pub label: String,
    pub note: Option<String>,
}

impl Piped {
    /// The stream, kept in a temporary file, and the name messages give it.
    fn spooled(self) -> anyhow::Result<(PathBuf, std::fs::File)> {
        let file = super::super::source::spooled(self.input)
            .with_context(|| format!("cannot read {}", self.label))?;
        Ok((PathBuf::from(self.label.trim_matches('\'')), file))
    }
}

impl super::super::source::Source for Piped {
    fn kind(&self) -> &'static str {
        "a zip archive"
    }

    fn extract(
        self: Box<Self>,
        _: &Path,
        out: &Place,
        opts: &Options,
        chooser: &Chooser,
    ) -> anyhow::Result<Report> {
        let mut report = extract(self.input, &self.label, out, opts, chooser)?;
        report.warnings.extend(self.note);
        Ok(report)
    }

    fn list(
        self: Box<Self>,
        _: &Path,
        _: &crate::options::Options,
        chooser: &Chooser,
        each: &mut dyn FnMut(&super::super::listed::Listed),
        listing: &mut crate::report::Report,
    ) -> anyhow::Result<()> {
        listing.warnings.extend(self.note.clone());
        let (name, file) = self.spooled()?;
        super::list(&name, file, chooser, each, listing)
    }

    fn read(
        self: Box<Self>,
        _: &Path,
        opts: &Options,
        chooser: &Chooser,
        each: &mut super::super::give::Each<'_>,
    ) -> anyhow::Result<Report> {
        let (name, file) = self.spooled()?;
        super::read_files(&name, file, opts, chooser, each)
    }
}

/// Extracts a zip stream into `out`.
fn extract(
    mut input: Box<dyn BufRead + Send + '_>,
    label: &str,
    out: &Place,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    let (mut report, read) = engine::run(out, None, opts, |engine, writers| {
        feed::fed(engine, writers, opts.memory_budget, |feed, writer| {
            // The last copy of a name wins, as in a tar stream (and as bsdtar does from a
            // pipe), whichever writer gets which copy first.
            engine.track_created();
            let mut state = Stream {
                engine,
                writer,
                feed,
                seen_paths: HashSet::new(),
                order: 0,
                chooser,
                password: opts.password.clone(),
                max_output: opts.max_output,
                total: 0,
                written: HashMap::new(),
                seen: HashMap::new(),
                empties: HashMap::new(),
                failures: Vec::new(),
                between: 0,
            };
            let mut ahead = Ahead::new(&mut *input);
            let (prefix, marker) = match skip_prefix(&mut ahead) {
                Ok(skipped) => skipped,
                Err(e) => {
                    let error = anyhow::Error::new(e).context(format!("cannot read {label}"));
                    return state.into_read(Err(error), (0, false));
                }
            };
            let outcome = match state.entries(&mut ahead, label) {
                Ok(Some(signature)) => {
                    let most = state.seen.len() + MORE_RECORDS;
                    let directory = central::read(&mut ahead, signature, most);
                    state.settle_empties(Some(&directory), prefix);
                    Ok(Some(directory))
                }
                Ok(None) => Ok(None),
                Err(error) => {
                    // The empty files held were read and checked: written as files.
                    state.settle_empties(None, prefix);
                    Err(error)
                }
            };
            state.into_read(outcome, (prefix, marker))
        })
    })?;
    let Reading {
        outcome,
        mut written,
        seen,
        mut failures,
        prefix,
        marker,
        between,
        held,
    } = read;
    if prefix > 0 && !marker {
        report.warnings.push(format!(
            "{prefix} bytes before the zip's first local header (a self-extractor's program, padding): passed over"
        ));
    }
    if between > 0 {
        report.warnings.push(format!(
            "{between} bytes between entries were no zip header (an APK's signing block, or junk): passed over"
        ));
    }
    // What failed to be written (a create, a write, a close, a folder) was said by the run:
    // the central directory has nothing to add to it.
    let failed: HashSet<&Path> = report.failures.iter().map(Error::path).collect();
    written.retain(|_, w| !failed.contains(w.path.as_path()));
    report.failures.append(&mut failures);
    match outcome {
        Ok(Some(directory)) => {
            finish::apply(
                held.as_deref(),
                &written,
                &seen,
                prefix,
                &directory,
                chooser,
                &mut report,
            );
            if !directory.damage.is_empty() {
                report.warnings.push(format!(
                    "the central directory of {label} is damaged ({}): every entry before it was written and checked, and what its records that were read say was applied",
                    directory.damage.join("; ")
                ));
            }
        }
        Ok(None) => {}
        Err(error) => report
            .failures
            .push(Error::new(label, ErrorKind::Source, error)),
    }
    Ok(report)
}

/// Passes over what comes before the zip's first header: a self-extractor's program, padding
/// (found as the input was recognised, within the same bound), or a split archive's marker
/// ("PK\x07\x08", "PK00") that starts a zip made as one part, which says nothing. Returns how
/// many bytes, and whether they were such a marker.
fn skip_prefix(input: &mut Ahead<'_>) -> std::io::Result<(u64, bool)> {
    const MARKERS: [&[u8]; 2] = [b"PK\x07\x08", b"PK00"];
    let first = input.peek(4)?;
    if first.len() < 4 {
        return Ok((0, false));
    }
    let word = u32::from_le_bytes([first[0], first[1], first[2], first[3]]);
    if matches!(
        word,
        LOCAL_HEADER | CENTRAL_HEADER | END_OF_CENTRAL | ZIP64_END
    ) {
        return Ok((0, false));
    }
    let head = input.peek(format::ZIP_LOOK)?;
    let ZipStart::At(at) = format::zip_start(head, true) else {
        // The entries' reader finds its way or says why not.
        return Ok((0, false));
    };
    let marker = MARKERS.contains(&&head[..at]);
    std::io::copy(&mut (&mut *input).take(at as u64), &mut std::io::sink())?;
    Ok((at as u64, marker))
}

struct Stream<'a, 'f, 'q> {
    engine: &'a Engine,
    /// This thread's own writer, for large files.
    writer: &'f mut Writer<'a>,
    /// Where small files go to the writers.
    feed: &'f mut Feed<'q>,
    /// The paths of the files met so far (their keys): a later copy replaces an earlier one.
    seen_paths: HashSet<u64>,
    /// The files met so far: each one's place, by which the last copy of a path wins.
    order: usize,
    chooser: &'a Chooser,
    password: Option<Vec<u8>>,
    max_output: Option<u64>,
    total: u64,
    /// What was written, by its local header's offset.
    written: HashMap<u64, Written>,
    /// Every local header's stored name, by its offset: what the central directory's records
    /// point at.
    seen: HashMap<u64, Vec<u8>>,
    /// Empty files not yet written, by path: each may be a folder that only the central
    /// directory (its MS-DOS attribute) or an entry below it tells.
    empties: HashMap<PathBuf, Held>,
    failures: Vec<Error>,
    /// Bytes between entries that were no header, passed over.
    between: u64,
}

/// A file read whole and checked, not yet handed to the writers.
struct Held {
    offset: u64,
    written: Written,
    job: Job,
}

impl Stream<'_, '_, '_> {
    fn into_read(
        self,
        outcome: anyhow::Result<Option<Directory>>,
        (prefix, marker): (u64, bool),
    ) -> Reading {
        Reading {
            outcome,
            written: self.written,
            seen: self.seen,
            failures: self.failures,
            prefix,
            marker,
            between: self.between,
            held: self.engine.held(),
        }
    }

    /// Every entry up to the central directory: the signature it starts with (read), or
    /// `None` if the run was cancelled. `Err`: the stream cannot be followed any further.
    fn entries(&mut self, input: &mut Ahead<'_>, label: &str) -> anyhow::Result<Option<u32>> {
        loop {
            if self.engine.run().cancelled() {
                return Ok(None);
            }
            let mut signature = read_u32(input).with_context(|| format!("{label} ends early"))?;
            if !matches!(
                signature,
                LOCAL_HEADER | CENTRAL_HEADER | END_OF_CENTRAL | ZIP64_END
            ) {
                // Bytes between entries (an APK's signing block before its central directory,
                // junk a tool left): passed over to the next header, as bsdtar does, and
                // said. A zip read from a file never looks at them either.
                let (found, skipped) = resync(input, signature).with_context(|| {
                    format!("{label}: not a zip local header where one must be, and none after it")
                })?;
                self.between += skipped;
                signature = found;
            }
            if signature != LOCAL_HEADER {
                return Ok(Some(signature));
            }
            let offset = input.offset - 4;
            let local = read_local(input, offset)
                .with_context(|| format!("{label}: a local header is cut short"))?;
            // A header with no name and no data names nothing: Android's build tools put one
            // first in an APK, its extra field padding what follows; no central record lists
            // it, so a zip read from a file never sees it.
            if local.name.is_empty() && local.flags & 8 == 0 && compressed_size(&local.raw)? == 0 {
                continue;
            }
            self.seen.insert(offset, local.raw_name.clone());
            // An entry that fails leaves its data to be passed over, by its header's size.
            let skip = if local.flags & integrity::STRONG_ENCRYPTION != 0 {
                // With its central directory encrypted too, the local headers' sizes are
                // masked: nothing says where the next entry starts.
                if local.flags & integrity::DIRECTORY_ENCRYPTED != 0 {
                    bail!(
                        "{label}: entry '{}' is encrypted with PKWARE's strong encryption, and its sizes are hidden with its central directory: nothing more can be read from a stream (nor from a file: fastwrite does not read this encryption)",
                        local.name
                    );
                }
                self.failures.push(Error::new(
                    &local.name,
                    ErrorKind::Source,
                    integrity::strong_encryption(),
                ));
                if local.flags & 8 != 0 {
                    bail!(
                        "{label}: cannot go past entry '{}': its size follows its data",
                        local.name
                    );
                }
                Some(
                    compressed_size(&local.raw).with_context(|| {
                        format!("{label}: cannot go past entry '{}'", local.name)
                    })?,
                )
            } else if local.flags & 8 != 0 {
                self.with_descriptor(input, &local)?;
                None
            } else {
                self.plain(input, &local, label)?
            };
            if let Some(skip) = skip {
                // Its data is still in the stream, of the length its header gives (no
                // descriptor here): passed over, and the next entry read.
                let skipped = std::io::copy(&mut (&mut *input).take(skip), &mut std::io::sink())?;
                if skipped != skip {
                    bail!("{label} ends inside entry '{}'", local.name);
                }
            }
        }
    }

    /// An entry with its sizes in its local header, read by the `zip` crate (every method,
    /// encryption, the CRC check). `Some(n)`: it failed (said), and its last `n` bytes of data
    /// are still to be passed over: the stream goes on after it, as its header says where.
    fn plain(
        &mut self,
        input: &mut Ahead<'_>,
        local: &Local,
        label: &str,
    ) -> anyhow::Result<Option<u64>> {
        let password = self.password.clone();
        // How much of its data the zip reader took, so that the rest can be passed over.
        let mut counted = Counted {
            inner: input,
            read: 0,
        };
        let mut chained = Cursor::new(local.raw.clone()).chain(&mut counted);
        let options = ZipReadOptions::new().password(password.as_deref());
        let failed_before = self.failures.len();
        let read = match read_zipfile_from_stream_with_options(&mut chained, options) {
            Ok(Some(mut file)) => {
                let is_dir = file.is_dir();
                self.entry(local, is_dir, &mut file);
                // Whatever of it was not read (a skipped entry) is skipped now.
                std::io::copy(&mut file, &mut std::io::sink()).map(|_| ())
            }
            Ok(None) => bail!("{label}: a local header the zip reader does not take"),
            Err(e) => {
                let error = if !is_password_error(&e) {
                    anyhow::Error::new(e).context("cannot read the entry")
                } else if self.password.is_some() {
                    anyhow!("wrong password: the entry cannot be decrypted with it")
                } else {
                    anyhow!("encrypted: give its password with {}", Setting::Password)
                };
                self.failures
                    .push(Error::new(&local.name, ErrorKind::Source, error));
                Ok(())
            }
        };
        drop(chained);
        match read {
            // Read whole, its CRC checked by the zip reader (and handed to the writers).
            Ok(()) if self.failures.len() == failed_before => return Ok(None),
            Ok(()) => {}
            // The data is corrupt. The first error the entry met was said already (a later
            // read only says the decompressor "failed before"), unless there was none yet.
            Err(e) if self.failures.len() == failed_before => {
                let error = anyhow::Error::new(e).context("its data is corrupt or cut short");
                self.failures
                    .push(Error::new(&local.name, ErrorKind::Source, error));
            }
            Err(_) => {}
        }
        let size = compressed_size(&local.raw)
            .with_context(|| format!("{label}: cannot go past entry '{}'", local.name))?;
        let left = size.checked_sub(counted.read).with_context(|| {
            format!(
                "{label}: entry '{}' took more than its own data",
                local.name
            )
        })?;
        Ok(Some(left))
    }

    /// One entry read from `data`: a folder registered; a file read into memory and handed
    /// over once checked (an empty one held: it may be a folder) or, if large, written here
    /// (symlinks too, as files, until the central directory says what they are). What fails
    /// is said.
    fn entry(&mut self, local: &Local, is_dir: bool, data: &mut dyn EntryData) {
        let name = local.name.as_str();
        let chosen = match self.chooser.choose(name.as_bytes(), is_dir) {
            Choice::Take(chosen) => String::from_utf8_lossy(&chosen).into_owned(),
            Choice::Skip => return,
            Choice::Refuse(why) => {
                let error = anyhow!("refused: {why}");
                self.failures
                    .push(Error::new(name, ErrorKind::Refused, error));
                return;
            }
        };
        if is_dir && plan::is_root(&chosen) {
            return;
        }
        let path = match plan::safe_relative_path(&chosen) {
            Ok(path) => path,
            Err(refusal) => {
                let error = anyhow!("refused: {refusal}");
                self.failures
                    .push(Error::new(name, ErrorKind::Refused, error));
                return;
            }
        };
        self.release_above(&path);
        if let Some(earlier) = self.empties.remove(&path) {
            // An earlier copy of this path goes to the writers first, so that the last wins.
            self.hand_over(earlier);
        }
        let kind = if is_dir {
            EntryKind::Dir
        } else {
            EntryKind::File
        };
        let mtime = local_mtime(&local.raw);
        let mut entry = match Entry::for_path(&path, kind, None, mtime, 0) {
            Ok(entry) => entry,
            Err(error) => {
                self.failures.push(error);
                return;
            }
        };
        let mut written = Written {
            name: name.to_string(),
            header: local.raw.clone(),
            path: path.clone(),
            mtime,
            dir: is_dir,
            described: None,
        };
        if is_dir {
            // Made by the writers before anything in it, or at the end if it stays empty.
            self.engine.add_dir(entry);
            self.written.insert(local.offset, written);
            return;
        }
        self.order += 1;
        entry.index = self.order;
        entry.replaces = !self.seen_paths.insert(crate::plan::path_key(&path));
        let limit = self.feed.buffer_limit;
        let mut buffer = Vec::new();
        if let Err(e) = (&mut *data).take(limit + 1).read_to_end(&mut buffer) {
            let error = anyhow::Error::new(e)
                .context("the compressed data is corrupt or truncated; nothing of it was kept");
            self.failures
                .push(Error::new(&entry.name, ErrorKind::Source, error));
            return;
        }
        if buffer.len() as u64 > limit {
            // Too large to hold: the files before it go to the writers, and this thread writes
            // it, from what it read and the rest (kept only if its reader checks it whole).
            self.feed.flush(self.writer);
            let mut rest = Cursor::new(buffer).chain(&mut *data);
            let max = self.max_output;
            match single::write_streamed(self.writer, entry, &mut rest, &mut self.total, max) {
                Ok(()) => {
                    written.described = data.described();
                    self.written.insert(local.offset, written);
                }
                Err(error) => self.failures.push(error),
            }
            return;
        }
        self.total += buffer.len() as u64;
        if let Some(max) = self.max_output.filter(|&max| self.total > max) {
            self.failures.push(single::over_the_cap(&entry.name, max));
            return;
        }
        // Its size is now known, and the writer checks that it writes just that.
        entry.size = buffer.len() as u64;
        written.described = data.described();
        let held = Held {
            offset: local.offset,
            written,
            job: Job {
                entry,
                data: buffer,
            },
        };
        if held.job.data.is_empty() && self.empties.len() < MOST_HELD_EMPTY {
            self.empties.insert(path, held);
        } else {
            self.hand_over(held);
        }
    }

    /// A file read whole and checked, to the writers.
    fn hand_over(&mut self, held: Held) {
        let Held {
            offset,
            written,
            job,
        } = held;
        self.written.insert(offset, written);
        self.feed.room(job.data.len() as u64, self.writer);
        self.feed.push(job, self.writer);
    }

    /// An empty file held, made a folder instead.
    fn make_folder(&mut self, held: Held) {
        let Held {
            offset,
            mut written,
            job,
        } = held;
        let mut entry = job.entry;
        entry.kind = EntryKind::Dir;
        entry.size = 0;
        self.engine.add_dir(entry);
        written.dir = true;
        self.written.insert(offset, written);
    }

    /// Empty files held above `path` are folders: an entry is below them.
    fn release_above(&mut self, path: &Path) {
        if self.empties.is_empty() {
            return;
        }
        for above in path.ancestors().skip(1) {
            if let Some(held) = self.empties.remove(above) {
                self.make_folder(held);
            }
        }
    }

    /// The empty files still held, in the stream's order: a folder each where the central
    /// directory (when the stream reached it) says so, else a file.
    fn settle_empties(&mut self, directory: Option<&Directory>, prefix: u64) {
        if self.empties.is_empty() {
            return;
        }
        let placed = directory.map(|d| (d, d.by_stream_offset(&self.seen, prefix)));
        let mut held: Vec<Held> = self.empties.drain().map(|(_, held)| held).collect();
        held.sort_unstable_by_key(|h| h.offset);
        for held in held {
            let folder = placed.as_ref().is_some_and(|(directory, placed)| {
                placed
                    .get(&held.offset)
                    .is_some_and(|&i| finish::kind(&directory.records[i]) == ZipKind::Dir)
            });
            if folder {
                self.make_folder(held);
            } else {
                self.hand_over(held);
            }
        }
    }

    /// An entry whose sizes and CRC follow its data: read through a reader that ends only
    /// where its descriptor confirms it (`stream/descriptor.rs`), so that nothing unchecked is
    /// kept.
    fn with_descriptor(&mut self, input: &mut Ahead<'_>, local: &Local) -> anyhow::Result<()> {
        const STORED: u16 = 0;
        const DEFLATE: u16 = 8;
        if local.flags & 1 != 0 {
            bail!(
                "entry '{}' is encrypted and has its sizes after its data, which a stream cannot follow: save the zip to a file first",
                local.name
            );
        }
        let is_dir = local.name.ends_with('/');
        match local.method {
            STORED => {
                let mut data = Stored::new(input, local.zip64);
                self.entry(local, is_dir, &mut data);
                // What the selection skipped (or a folder's data) is read through too: the
                // next entry comes after its descriptor.
                std::io::copy(&mut data, &mut std::io::sink()).with_context(|| {
                    format!(
                        "cannot go past entry '{}', stored with its size after its data",
                        local.name
                    )
                })?;
            }
            DEFLATE => {
                let mut data = Inflated::new(input, local.zip64);
                let failed_before = self.failures.len();
                self.entry(local, is_dir, &mut data);
                match std::io::copy(&mut data, &mut std::io::sink()) {
                    Ok(_) => {}
                    // Its descriptor is passed over either way: the stream goes on.
                    Err(e) if e.to_string().starts_with(MISMATCH) => {
                        if self.failures.len() == failed_before {
                            let error = anyhow::Error::new(e).context("nothing of it was written");
                            self.failures
                                .push(Error::new(&local.name, ErrorKind::Source, error));
                        }
                    }
                    Err(e) => {
                        return Err(anyhow::Error::new(e)
                            .context(format!("entry '{}' is corrupt or cut short", local.name)));
                    }
                }
            }
            other => bail!(
                "entry '{}' is compressed with method {other} and has its size after its data, which this reader can only follow for deflate and stored entries: save the zip to a file first",
                local.name
            ),
        }
        Ok(())
    }
}

/// Reads on from a word that is no header signature to the next one (a local or central
/// header, an end record). Returns that signature and how many bytes were passed over; the end
/// of the input first is an error.
fn resync(input: &mut dyn BufRead, word: u32) -> std::io::Result<(u32, u64)> {
    let mut window = word.to_le_bytes();
    let mut skipped = 0u64;
    loop {
        let buf = input.fill_buf()?;
        let Some(&byte) = buf.first() else {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        };
        input.consume(1);
        window = [window[1], window[2], window[3], byte];
        skipped += 1;
        let signature = u32::from_le_bytes(window);
        if matches!(
            signature,
            LOCAL_HEADER | CENTRAL_HEADER | END_OF_CENTRAL | ZIP64_END
        ) {
            return Ok((signature, skipped));
        }
    }
}

fn read_u32(input: &mut dyn Read) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    input.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// Reads the rest of a local header (its signature is read): 26 bytes, the name, the extra
/// field. `offset`: where it starts in the stream.
fn read_local(input: &mut dyn Read, offset: u64) -> std::io::Result<Local> {
    let mut fixed = [0u8; 26];
    input.read_exact(&mut fixed)?;
    let u16_at = |i: usize| u16::from_le_bytes([fixed[i], fixed[i + 1]]);
    let (flags, method) = (u16_at(2), u16_at(4));
    let (name_len, extra_len) = (usize::from(u16_at(22)), usize::from(u16_at(24)));
    let mut rest = vec![0u8; name_len + extra_len];
    input.read_exact(&mut rest)?;
    let (name, extra) = rest.split_at(name_len);
    let name = decode_name(name, extra, flags);
    let mut zip64 = false;
    let mut at = 0;
    while at + 4 <= extra.len() {
        let id = u16::from_le_bytes([extra[at], extra[at + 1]]);
        let len = usize::from(u16::from_le_bytes([extra[at + 2], extra[at + 3]]));
        zip64 |= id == 0x0001;
        at += 4 + len;
    }
    let mut raw = LOCAL_HEADER.to_le_bytes().to_vec();
    raw.extend_from_slice(&fixed);
    raw.extend_from_slice(&rest);
    Ok(Local {
        raw,
        flags,
        method,
        name,
        raw_name: rest[..name_len].to_vec(),
        zip64,
        offset,
    })
}

/// Whether the zip reader refused an entry for its password: none given, or a wrong one.
fn is_password_error(e: &zip::result::ZipError) -> bool {
    use zip::result::ZipError;
    match e {
        ZipError::InvalidPassword => true,
        ZipError::UnsupportedArchive(why) => *why == ZipError::PASSWORD_REQUIRED,
        _ => false,
    }
}

/// A local header's compressed size (as read, signature first), from its zip64 field when the
/// 32-bit one says so.
fn compressed_size(raw: &[u8]) -> anyhow::Result<u64> {
    let size = u32::from_le_bytes([raw[18], raw[19], raw[20], raw[21]]);
    if size != u32::MAX {
        return Ok(u64::from(size));
    }
    let u16_at = |i: usize| u16::from_le_bytes([raw[i], raw[i + 1]]);
    let mut at = 30 + usize::from(u16_at(26));
    while at + 4 <= raw.len() {
        let (id, len) = (u16_at(at), usize::from(u16_at(at + 2)));
        // Zip64: the uncompressed size, then the compressed size.
        if id == 0x0001
            && len >= 16
            && let Some(field) = raw.get(at + 12..at + 20)
        {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(field);
            return Ok(u64::from_le_bytes(bytes));
        }
        at += 4 + len;
    }
    bail!("its size is in a zip64 field it does not have")
}

/// A local header's mtime (as read, signature first): its extended-timestamp field's, else its
/// DOS time, as for a zip read from a file.
fn local_mtime(raw: &[u8]) -> Option<SystemTime> {
    let u16_at = |i: usize| u16::from_le_bytes([raw[i], raw[i + 1]]);
    let dos = zip::DateTime::try_from_msdos(u16_at(12), u16_at(10))
        .ok()
        .and_then(|t| super::planning::DosClock::default().convert(t));
    let extra = raw.get(30 + usize::from(u16_at(26))..).unwrap_or_default();
    // As from a file: NTFS's time, then "UT" (a flags byte, then the modification time first
    // if its bit is set), then the DOS time.
    super::planning::ntfs_mtime(extra)
        .or_else(|| {
            let (_, field) = super::planning::extra_fields(extra)
                .find(|(id, f)| *id == 0x5455 && f.len() >= 5 && f[0] & 1 != 0)?;
            let secs = u32::from_le_bytes([field[1], field[2], field[3], field[4]]);
            Some(super::planning::extended_time(secs, dos))
        })
        .or(dos)
}

/// A header's name, as the zip crate reads it from a file: the Info-ZIP Unicode Path field's
/// ([`unicode_path`]); else the name itself, UTF-8 where it is, CP437 where it is not and the
/// UTF-8 flag is not set.
fn decode_name(raw: &[u8], extra: &[u8], flags: u16) -> String {
    if let Some(unicode) = unicode_path(raw, extra) {
        return unicode.to_string();
    }
    match std::str::from_utf8(raw) {
        Ok(name) => name.to_string(),
        Err(_) if flags & (1 << 11) == 0 => raw.iter().map(|&b| cp437(b)).collect(),
        Err(_) => String::from_utf8_lossy(raw).into_owned(),
    }
}

/// The name an Info-ZIP Unicode Path field (0x7075) among `extra` gives a header's `raw` name:
/// the last such field, as the zip crate reads one, where its CRC-32 matches that name (else
/// the field is stale, and ignored, as APPNOTE says).
fn unicode_path<'e>(raw: &[u8], extra: &'e [u8]) -> Option<&'e str> {
    const UNICODE_PATH: u16 = 0x7075;
    let (_, field) = super::planning::extra_fields(extra)
        .filter(|(id, _)| *id == UNICODE_PATH)
        .last()?;
    // A version byte (1, but read whatever it is, as the zip crate reads the central record's:
    // commons-compress's COMPRESS-479 has 0x74 in a local one), the CRC-32 of the name it
    // replaces, the name in UTF-8.
    match field {
        [_version, a, b, c, d, unicode @ ..]
            if u32::from_le_bytes([*a, *b, *c, *d]) == crc32fast::hash(raw) =>
        {
            std::str::from_utf8(unicode).ok()
        }
        _ => None,
    }
}

/// The IBM PC character for a byte of a CP437 name.
fn cp437(b: u8) -> char {
    const HIGH: &str = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u{a0}";
    if b < 0x80 {
        char::from(b)
    } else {
        HIGH.chars()
            .nth(usize::from(b - 0x80))
            .unwrap_or('\u{fffd}')
    }
}
