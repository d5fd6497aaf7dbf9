//! The tar source: one thread reads and decodes the stream; writers and closers work behind it.
//!
//! A tar stream (plain, or inside gzip, zstd, xz or bzip2) can only be read in order, so this
//! thread decodes it and parses its headers, creates directories as they come (parents before
//! children, before any file in them), and hands each small file's content, read into memory,
//! to the writer threads (`engine/feed.rs`). Memory is bounded by a budget: a file is buffered
//! only while the bytes in flight stay under it, and a file too large to buffer is streamed by
//! this thread itself, in 1 MiB chunks, while the writers drain the queue. Peak memory is the
//! budget plus one chunk per writer, however large the archive or its entries.
//!
//! Names and link targets get the same checks as zip entries; in addition an entry below a
//! symlink seen earlier in the stream is refused, and a hard link may only name a file that came
//! earlier in this archive. Device nodes and FIFOs are skipped with a warning.

use std::collections::HashSet;
use std::io::Read;

use anyhow::{Context, anyhow};

use crate::engine::{self, Content, Engine, HoleRead, Unverified, UnverifiedKind, Writer};
use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::place::Place;
use crate::plan::{self, Entry, EntryKind, path_key};
use crate::report::Report;

use super::codec;
use super::select::Chooser;
use super::source::Counted;
use crate::engine::feed::{self, Feed, Job};

mod checks;
mod list;
mod pax;
mod reader;

use checks::{Checker, Owners};
use list::list;
#[cfg(feature = "image")]
pub(super) use reader::Kind;
pub(super) use reader::Reader;

/// A tar, opened: `decoded` is its stream (decompressed if it was compressed), `label` names
/// it in messages, `verified` follows the decompressor's checks (`None`: a plain tar).
pub(super) struct Archive {
    pub decoded: Box<dyn Read + Send>,
    pub label: String,
    pub verified: Option<codec::Verified>,
}

impl super::source::Source for Archive {
    fn kind(&self) -> &'static str {
        "a tar archive"
    }

    fn extract(
        self: Box<Self>,
        _: &std::path::Path,
        out: &Place,
        opts: &Options,
        chooser: &Chooser,
    ) -> anyhow::Result<Report> {
        extract(self.decoded, &self.label, self.verified, out, opts, chooser)
    }

    fn list(
        self: Box<Self>,
        _: &std::path::Path,
        _: &crate::options::Options,
        chooser: &Chooser,
        each: &mut dyn FnMut(&super::listed::Listed),
        listing: &mut Report,
    ) -> anyhow::Result<()> {
        if let Err(error) = list(self.decoded, &self.label, chooser, each, listing) {
            listing.failures.push(error);
        }
        Ok(())
    }

    fn read(
        self: Box<Self>,
        _: &std::path::Path,
        opts: &Options,
        chooser: &Chooser,
        each: &mut super::give::Each<'_>,
    ) -> anyhow::Result<Report> {
        read_files(self.decoded, &self.label, opts, chooser, each)
    }
}

/// Extracts the tar stream `decoded` (`label` names it in messages) into `out`. `verified`
/// follows the decompressor's checks, for a compressed tar: what was written from data that
/// then fails its check is taken back (see [`Stream::settle`]).
fn extract(
    decoded: Box<dyn Read + Send + '_>,
    label: &str,
    verified: Option<codec::Verified>,
    out: &Place,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    let (mut report, (outcome, warnings, skipped, last_name)) =
        engine::run(out, None, opts, |engine, writers| {
            // A stream's size is not known up front: a bar of what is done so far.
            engine.run().reporter().planned(0, 0);
            // The last copy of a path wins: the engine must know which paths are this run's.
            engine.track_created();
            if verified.is_some() {
                engine.hold_replacements();
            }
            let (outcome, check, last_name) =
                feed::fed(engine, writers, opts.memory_budget, |feed, writer| {
                    let mut stream = Stream {
                        engine,
                        check: Checker::new(chooser, opts.devices, Owners::new(opts)),
                        feed,
                        links: HashSet::new(),
                        last_name: None,
                        verified,
                        handed: Handed::default(),
                    };
                    let outcome = stream.walk(decoded, writer);
                    (outcome, stream.check, stream.last_name)
                });
            (outcome, check.warnings, check.skipped, last_name)
        })?;
    if let Err(error) = outcome {
        let failure = broken(
            label,
            last_name,
            error,
            "; the entries after it were not extracted",
        );
        report.failures.push(failure);
    }
    report.warnings.extend(warnings);
    report.skipped += skipped;
    Ok(report)
}

/// The failure of the archive `label` whose stream broke after the entry `last_name` (`None`:
/// before its first), saying `then` of what follows.
fn broken(label: &str, last_name: Option<String>, error: anyhow::Error, then: &str) -> Error {
    let place = match last_name {
        Some(name) => format!("after entry '{name}'"),
        None => "before its first entry".to_string(),
    };
    Error::new(
        label,
        ErrorKind::Source,
        error.context(format!("the archive is corrupt or truncated {place}{then}")),
    )
}

/// Reads the tar stream's files in order without writing them (see
/// [`crate::extract::read::read_files`]): the same checks as extraction, each file's content to
/// `each`. A broken stream is a failure of the archive (`label`), after the files before it.
fn read_files(
    decoded: Box<dyn Read + Send + '_>,
    label: &str,
    opts: &Options,
    chooser: &Chooser,
    each: &mut super::give::Each<'_>,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let mut archive = Reader::new(decoded);
    let mut check = Checker::new(chooser, opts.devices, Owners::off());
    let mut members = 0u64;
    let mut last_name = None;
    let broke = loop {
        if opts.cancel.is_cancelled() {
            return Ok(report);
        }
        let member = match archive.next() {
            Ok(Some(member)) => member,
            Ok(None) => break None,
            Err(error) => break Some(error.context("cannot read the next header")),
        };
        members += 1;
        let name = plan::display_bytes(&member.name);
        match check.entry(&member, &name) {
            Ok(Some(entry)) if entry.kind == EntryKind::File => {
                check.files.insert(path_key(&entry.path));
                match super::give::give(&entry, &mut archive.data(), each) {
                    Ok(n) => {
                        report.files += 1;
                        report.bytes += n;
                    }
                    Err(error) if super::give::is_output(&error) => return Err(error),
                    Err(error) => {
                        report
                            .failures
                            .push(Error::new(&entry.name, ErrorKind::Source, error));
                        break Some(anyhow!("the stream broke inside '{}'", entry.name));
                    }
                }
            }
            Ok(_) => {}
            Err(error) => report.failures.push(error),
        }
        last_name = Some(name);
    };
    let end = match broke {
        Some(error) => Err(error),
        None => after_the_end(archive.into_inner(), members),
    };
    match end {
        Ok(warning) => report.warnings.extend(warning),
        Err(error) => report.failures.push(broken(label, last_name, error, "")),
    }
    report.warnings.append(&mut check.warnings);
    report.skipped += check.skipped;
    Ok(report)
}

/// Reads what follows a tar's end-of-archive blocks, for extraction and listing alike. A
/// compressor's checksum (gzip's CRC, zstd's and xz's checks) comes after them: read to the end
/// so that it is verified. Bytes after the compressed data end are only worth a warning
/// (returned): nothing is missing. `members`: how many the tar held; with none, zeros followed
/// by other data is another format that starts with zeros (an ISO 9660 image's first 32 KiB
/// are), not an empty tar (blocks of zeros alone).
fn after_the_end(mut input: impl Read, members: u64) -> anyhow::Result<Option<String>> {
    let mut after = AfterEnd::default();
    let mut warning = None;
    if let Err(error) = std::io::copy(&mut input, &mut after) {
        match codec::trailing_data(&error) {
            Some(trailing) => warning = Some(trailing),
            None => return Err(error).context("the data after the last entry is corrupt"),
        }
    }
    if members == 0 && after.other {
        anyhow::bail!(
            "it starts with blocks of zeros, as an empty tar ends, and goes on with other data: not a tar (an ISO image starts so)"
        );
    }
    Ok(warning)
}

/// What follows a tar's end-of-archive blocks, counted as it is read: whether any of it is not
/// zero (tape blocking pads with zeros).
#[derive(Default)]
struct AfterEnd {
    other: bool,
}

impl std::io::Write for AfterEnd {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.other |= buf.iter().any(|&b| b != 0);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The reader's state while it walks the stream.
struct Stream<'s, 'f, 'q> {
    engine: &'s Engine,
    /// Where small files go to the writers.
    feed: &'f mut Feed<'q>,
    /// What decides what each member becomes.
    check: Checker<'s>,
    /// Paths of links registered and not yet replaced by a later entry.
    links: HashSet<u64>,
    /// The last entry read whole, to say where a broken stream broke.
    last_name: Option<String>,
    /// The decompressor's checks, for a compressed tar.
    verified: Option<codec::Verified>,
    /// With checks: the entries handed to the engine since the last passed check.
    handed: Handed,
}

/// The entries handed to the engine since the last passed check, kept compactly: their paths
/// in one buffer (a copy each, no allocation of their own), the rest in a small record. A
/// single gzip member holds every entry of its archive until its end.
#[derive(Default)]
struct Handed {
    entries: Vec<HandedEntry>,
    /// The entries' paths (`Path::as_os_str`'s bytes), one after the other.
    paths: Vec<u8>,
}

struct HandedEntry {
    /// Where its data ended in the decoded stream: a check passed at or past it verifies it
    /// (`u64::MAX`: its data was not read whole).
    end: u64,
    index: usize,
    size: u64,
    kind: UnverifiedKind,
    /// Where its path ends in [`Handed::paths`].
    path_end: usize,
}

impl Handed {
    fn push(&mut self, end: u64, entry: &Entry, kind: UnverifiedKind) {
        self.paths
            .extend_from_slice(entry.path.as_os_str().as_encoded_bytes());
        self.entries.push(HandedEntry {
            end,
            index: entry.index,
            size: entry.size,
            kind,
            path_end: self.paths.len(),
        });
    }

    /// Forgets the entries whose data ended at or before `good`, which a check has passed.
    fn passed(&mut self, good: u64) {
        let passed = self.entries.partition_point(|e| e.end <= good);
        if passed == self.entries.len() {
            self.entries.clear();
            self.paths.clear();
        } else if passed > 0 {
            let cut = self.entries[passed - 1].path_end;
            self.entries.drain(..passed);
            self.paths.drain(..cut);
            for entry in &mut self.entries {
                entry.path_end -= cut;
            }
        }
    }

    /// Whether an entry's data ended past `good`.
    fn any_past(&self, good: u64) -> bool {
        self.entries.last().is_some_and(|e| e.end > good)
    }

    /// The entries whose data ended past `good`, for the engine to take back (named by their
    /// paths); with `whole`, only those whose data was read whole.
    fn past(self, good: u64, whole: bool) -> Vec<Unverified> {
        let mut start = 0;
        let mut past = Vec::new();
        for entry in self.entries {
            let bytes = &self.paths[start..entry.path_end];
            start = entry.path_end;
            if entry.end <= good || (whole && entry.end == u64::MAX) {
                continue;
            }
            let path = path_of(bytes);
            past.push(Unverified {
                index: entry.index,
                name: path.to_string_lossy().into_owned(),
                path,
                size: entry.size,
                kind: entry.kind,
            });
        }
        past
    }
}

/// A path from the bytes [`Handed::push`] kept (a validated relative path: UTF-8 on Windows).
#[cfg(unix)]
fn path_of(bytes: &[u8]) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(bytes).into()
}

#[cfg(not(unix))]
fn path_of(bytes: &[u8]) -> std::path::PathBuf {
    String::from_utf8_lossy(bytes).into_owned().into()
}

impl Stream<'_, '_, '_> {
    /// Reads every entry. An `Err` means the stream itself is broken (corrupt or truncated);
    /// problems with single entries are recorded in the run and the walk goes on.
    fn walk(
        &mut self,
        input: Box<dyn Read + Send + '_>,
        writer: &mut Writer<'_>,
    ) -> anyhow::Result<()> {
        let mut archive = Reader::new(Counted {
            inner: input,
            read: 0,
        })
        .with_owners(self.check.restores_owners());
        let outcome = self.entries(&mut archive, writer);
        if outcome.is_err() {
            self.settle(archive.into_inner());
        }
        outcome
    }

    /// With a compressor's checks, after the stream broke: the entries handed over from data
    /// no check has passed are taken back by the engine at the end of the run (removed, or not
    /// made), each named. If the break is in the tar itself and the compressed data has not
    /// failed, the rest is read (up to [`codec::READ_ON_LIMIT`]) so that its check decides: a tar
    /// damaged before it was compressed keeps what was extracted, as GNU tar does.
    ///
    /// An archive cut short (its compressed data ends inside a member: a download that
    /// stopped) is not damaged: what came before the cut is what was compressed, and the
    /// entries it held whole are kept, as GNU tar and bsdtar keep them, with a warning naming
    /// them, since the check that would have confirmed them never came. The entry the cut fell
    /// in has failed already; `--atomic` keeps nothing of a run that fails.
    fn settle(&mut self, mut rest: Counted<Box<dyn Read + Send + '_>>) {
        let Some(verified) = &self.verified else {
            return;
        };
        if !verified.failed() && self.handed.any_past(verified.bytes()) {
            // Reaching the end marks it all verified (`codec::Watched`); a failure, none.
            let _ = std::io::copy(
                &mut (&mut rest).take(codec::READ_ON_LIMIT),
                &mut std::io::sink(),
            );
        }
        let handed = std::mem::take(&mut self.handed);
        if verified.cut() {
            // (The entry the cut fell in has failed, and left nothing.)
            let failed = handed.past(verified.bytes(), true);
            if !failed.is_empty() {
                let names = crate::report::some_names(failed.into_iter().map(|e| e.name));
                self.check.warnings.push(format!(
                    "the archive is cut short: {names} were written whole before the cut and are kept (as GNU tar keeps them), though the check at the end of the compressed data, which would have confirmed them, never came ({} keeps nothing of a run that fails)",
                    crate::error::Setting::Atomic
                ));
            }
            return;
        }
        let failed = handed.past(verified.bytes(), false);
        let why = if verified.failed() {
            "its check (the compressed data is damaged or cut short)"
        } else {
            "to reach its check (the compressed data goes on past what fastwrite reads after a break)"
        };
        self.engine.unverified(failed, why.to_string());
    }

    /// The walk itself, entry after entry (see [`Stream::walk`]).
    fn entries(
        &mut self,
        archive: &mut Reader<Counted<Box<dyn Read + Send + '_>>>,
        writer: &mut Writer<'_>,
    ) -> anyhow::Result<()> {
        let mut members = 0u64;
        loop {
            if self.engine.run().stopped() {
                // The rest of the stream is neither read nor checked: not even the rest of the
                // member in hand, which may be a bomb's gigabytes (`--max-output`).
                return Ok(());
            }
            let Some(member) = archive.next().context("cannot read the next header")? else {
                break;
            };
            members += 1;
            let name = plan::display_bytes(&member.name);
            let complete = match self.check.entry(&member, &name) {
                Ok(Some(entry)) => {
                    // The path's key, once: whether it is a later copy, and the sets.
                    let key = path_key(&entry.path);
                    // Kept until a check passes past its data (its end is known once read;
                    // until then, none passes it).
                    let handed = match &self.verified {
                        Some(_) => self.handed_kind(&entry, key),
                        None => None,
                    };
                    if let Some(kind) = handed {
                        self.handed.push(u64::MAX, &entry, kind);
                    }
                    let complete = self.dispatch(entry, key, &mut archive.data(), writer)?;
                    if handed.is_some() {
                        // An entry whose data was not read whole never passes a check.
                        self.note_handed(if complete {
                            archive.get_ref().read
                        } else {
                            u64::MAX
                        });
                    }
                    complete
                }
                Ok(None) => true,
                Err(error) => {
                    self.engine.run().record(error);
                    true
                }
            };
            if complete {
                self.last_name = Some(name);
            }
        }
        self.check
            .warnings
            .extend(after_the_end(archive.get_mut(), members)?);
        Ok(())
    }

    /// What the engine would take back of `entry` if its data fails its check: a file or a
    /// link (a folder stays).
    fn handed_kind(&self, entry: &Entry, key: u64) -> Option<UnverifiedKind> {
        match entry.kind {
            EntryKind::Dir => None,
            // As `dispatch` tells a later copy of a path.
            EntryKind::File if self.check.files.contains(&key) => Some(UnverifiedKind::LaterCopy),
            EntryKind::File => Some(UnverifiedKind::File),
            _ => Some(UnverifiedKind::Link),
        }
    }

    /// The entry handed last ended `end` bytes into the decoded stream; forgets those a check
    /// has passed.
    fn note_handed(&mut self, end: u64) {
        if let Some(last) = self.handed.entries.last_mut() {
            last.end = end;
        }
        let good = self.verified.as_ref().map_or(0, codec::Verified::bytes);
        self.handed.passed(good);
    }

    /// Hands an entry to the engine: directories and links now, file content to a writer (or,
    /// for a file too large to buffer, written here). `Ok(false)`: the entry's data may not
    /// have been read whole (a failed streamed write); `Err`: the stream broke.
    fn dispatch(
        &mut self,
        mut entry: Entry,
        key: u64,
        raw: &mut dyn HoleRead,
        writer: &mut Writer<'_>,
    ) -> anyhow::Result<bool> {
        // The last copy of a path wins, as with GNU tar and bsdtar (`tar -r` and `tar -u`
        // append newer copies): an earlier link at the path is forgotten, and an earlier file
        // is replaced at the end of the run. (`key` is the path's.)
        if entry.kind != EntryKind::Dir {
            if self.links.remove(&key) {
                self.engine.run().forget_links(&entry.path, entry.index);
            }
            entry.replaces = self.check.files.contains(&key);
        }
        match entry.kind {
            EntryKind::Dir => self.engine.add_dir(entry),
            EntryKind::Symlink { .. } | EntryKind::Hardlink { .. } | EntryKind::Special { .. } => {
                self.links.insert(key);
                self.engine.add_link(entry);
            }
            EntryKind::File => {
                self.check.files.insert(key);
                // Past the output cap, the run stops here without reading the data.
                if let Err(error) = self.engine.run().within_limit(&entry) {
                    self.engine.run().record(error);
                    return Ok(true);
                }
                if entry.size > self.feed.buffer_limit {
                    // Give the writers what is pending before this thread gets busy.
                    self.feed.flush(writer);
                    // If the stream broke inside this file, the next header read says so.
                    let content = if entry.sparse {
                        Content::Sparse(raw)
                    } else {
                        Content::Reader(raw)
                    };
                    return Ok(writer.write(&entry, content));
                }
                self.feed.room(entry.size, writer);
                let mut data = Vec::with_capacity(entry.size as usize);
                let read = raw.read_to_end(&mut data);
                if read.is_err() || data.len() as u64 != entry.size {
                    self.feed.give_back(entry.size);
                    let error = match read {
                        Err(e) => anyhow::Error::new(e).context("reading the entry's data"),
                        Ok(n) => engine::truncated(n as u64, entry.size),
                    };
                    self.engine
                        .run()
                        .record(Error::new(&entry.name, ErrorKind::Source, error));
                    return Err(anyhow!("the stream broke inside '{}'", entry.name));
                }
                self.feed.push(Job { entry, data }, writer);
            }
        }
        Ok(true)
    }
}
