//! The zip source: a plan from the central directory, then files decompressed in parallel.
//!
//! The archive is memory-mapped, so every writer thread reads it through its own cursor with no
//! shared position, no lock and no read or seek system calls (ripunzip measured threads sharing
//! one file behind a mutex blocked over 80% of the time). The trade-off, as in ripgrep: if
//! another process truncates the archive while it is mapped, the process can be killed by
//! SIGBUS. An input that cannot be mapped (a pipe) is read into memory instead.
//!
//! Writers take the biggest entries first, one each, then the rest in archive order a short
//! run at a time (`schedule.rs`), so one huge entry never becomes the tail of the run and each
//! writer reads a contiguous region of the archive. Big stored entries and deflated entries up
//! to 16 MiB are read straight from the mapping (`direct.rs`: one `write`, or libdeflate's
//! whole-buffer inflate); the rest through the `zip` crate. Every entry's CRC-32 is checked
//! before anything of it is written (direct) or by reading it to its end (the rest).

mod direct;
mod planning;
mod schedule;
pub(super) mod stream;

use std::collections::HashMap;
use std::fs::File;
use std::io::{Cursor, Read};
use std::ops::{Deref, Range};
use std::path::Path;

use anyhow::Context;
use zip::ZipArchive;

use crate::engine::{self, Content};
use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::place::Place;
use crate::plan::{self, Entry, EntryKind};
use crate::report::Report;

use super::arriving::{Arrivals, Span};
use super::listed::{Listed, ListedKind};
use super::select::Chooser;
use direct::Direct;
use schedule::Schedule;

mod integrity;
mod mended;

pub(super) use planning::build_plan;
use planning::{entry_name, unix_mode};

/// The archive's bytes: mapped when possible.
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(map) => map,
            Bytes::Owned(vec) => vec,
        }
    }
}

/// The archive's bytes, and what mending them said: where the end record or the central
/// directory holds what the `zip` crate refuses and unzip and 7-Zip read past (`mended.rs`),
/// the bytes are a mended copy.
fn load(path: &Path, file: File) -> anyhow::Result<(Bytes, Vec<String>)> {
    let bytes = map(path, file)?;
    let Some(mends) = mended::find(&bytes) else {
        return Ok((bytes, Vec::new()));
    };
    let copy = mended::apply(&bytes, &mends)
        .with_context(|| format!("cannot make a mended copy of '{}'", path.display()))?;
    Ok((Bytes::Mapped(copy), mends.said))
}

/// The archive mapped; else read into memory.
fn map(path: &Path, mut file: File) -> anyhow::Result<Bytes> {
    if let Some(map) = mapped(&file) {
        return Ok(Bytes::Mapped(map));
    }
    let mut bytes = Vec::new();
    std::io::Seek::rewind(&mut file)
        .and_then(|_| file.read_to_end(&mut bytes))
        .with_context(|| format!("cannot read archive '{}'", path.display()))?;
    Ok(Bytes::Owned(bytes))
}

/// The one unsafe call outside the platform layer: mapping the archive. `None`: it cannot be
/// mapped (a pipe).
#[allow(unsafe_code)]
fn mapped(file: &File) -> Option<memmap2::Mmap> {
    // SAFETY: see the module header: the mapping is read-only, and the one hazard (another
    // process truncating the archive meanwhile) is the accepted trade-off of every mmap reader.
    // A remote zip's temporary file is the run's own, unlinked, its length set once before it
    // is mapped: nothing truncates it.
    unsafe { memmap2::Mmap::map(file) }.ok()
}

pub(super) type Archive<'a> = ZipArchive<Cursor<&'a [u8]>>;

/// Why a zip's central directory cannot be read: what it is instead.
enum Unreadable {
    /// Not a zip fastwrite reads (another format; a directory encrypted with PKWARE's strong
    /// encryption).
    Unsupported(anyhow::Error),
    /// A zip cut short or damaged.
    Damaged(anyhow::Error),
}

impl Unreadable {
    /// The failure of the run on the zip at `path`: "'PATH' is WHAT".
    fn of(self, path: &Path) -> anyhow::Error {
        let (kind, what) = match self {
            Unreadable::Unsupported(what) => (ErrorKind::Unsupported, what),
            Unreadable::Damaged(what) => (ErrorKind::Source, what),
        };
        let why = anyhow::anyhow!("'{}' is {what}", path.display());
        Error::named(path, kind, why).into()
    }
}

/// Reads the zip's central directory, or says what the input is instead, as a noun phrase
/// ("a 7z archive, which fastwrite does not read"): `extract` says "'PATH' is ...", `list`
/// names the path itself.
fn open_archive(bytes: &[u8]) -> Result<Archive<'_>, Unreadable> {
    ZipArchive::new(Cursor::new(bytes)).map_err(|error| {
        // PKWARE's strong encryption of the central directory (a local header's flag bits 6
        // and 13, a version needed of 5.0 to 6.3) hides the directory itself: the zip reader
        // sees nonsense and says so in its terms.
        const STRONG_AND_DIRECTORY_ENCRYPTED: u16 =
            integrity::STRONG_ENCRYPTION | integrity::DIRECTORY_ENCRYPTED;
        let header = |at: usize| {
            bytes
                .get(at..at + 2)
                .filter(|_| bytes.starts_with(b"PK\x03\x04"))
                .map(|f| u16::from_le_bytes([f[0], f[1]]))
        };
        let strong = header(6).is_some_and(|flags| {
            flags & STRONG_AND_DIRECTORY_ENCRYPTED == STRONG_AND_DIRECTORY_ENCRYPTED
        }) && header(4).is_some_and(|version| (50..=63).contains(&(version & 0xff)));
        if strong {
            Unreadable::Unsupported(anyhow::anyhow!(
                "a zip whose central directory is encrypted with PKWARE's strong encryption, which fastwrite does not read (nor does Info-ZIP's unzip; 7-Zip does)"
            ))
        } else if bytes.starts_with(b"PK") {
            Unreadable::Damaged(anyhow::anyhow!(
                "a zip that cannot be read (cut short, or damaged): {error}"
            ))
        } else {
            Unreadable::Unsupported(anyhow::anyhow!(super::format::not_readable(
                &bytes[..bytes.len().min(512)]
            )))
        }
    })
}

/// A zip in a file, opened: read from its end.
pub(super) struct InFile(pub File);

impl super::source::Source for InFile {
    fn kind(&self) -> &'static str {
        "a zip archive"
    }

    fn extract(
        self: Box<Self>,
        archive: &Path,
        out: &Place,
        opts: &Options,
        chooser: &Chooser,
    ) -> anyhow::Result<Report> {
        extract(archive, self.0, out, opts, chooser)
    }

    fn list(
        self: Box<Self>,
        archive: &Path,
        _: &crate::options::Options,
        chooser: &Chooser,
        each: &mut dyn FnMut(&Listed),
        listing: &mut Report,
    ) -> anyhow::Result<()> {
        list(archive, self.0, chooser, each, listing)
    }

    fn read(
        self: Box<Self>,
        archive: &Path,
        opts: &Options,
        chooser: &Chooser,
        each: &mut super::give::Each<'_>,
    ) -> anyhow::Result<Report> {
        read_files(archive, self.0, opts, chooser, each)
    }
}

/// A zip in a bucket or at a URL, still arriving: extraction plans it from its central
/// directory and writes each entry as its bytes come ([`extract_arriving`]); listing reads its
/// central directory alone, and its symlinks' targets by their own ranges ([`list_arriving`]);
/// reading waits for its last byte and reads it as a zip in a file.
pub(super) struct Arriving(pub super::remote::Arriving);

impl super::source::Source for Arriving {
    fn kind(&self) -> &'static str {
        "a zip archive"
    }

    fn extract(
        self: Box<Self>,
        archive: &Path,
        out: &Place,
        opts: &Options,
        chooser: &Chooser,
    ) -> anyhow::Result<Report> {
        extract_arriving(archive, self.0, out, opts, chooser)
    }

    fn list(
        self: Box<Self>,
        archive: &Path,
        opts: &crate::options::Options,
        chooser: &Chooser,
        each: &mut dyn FnMut(&Listed),
        listing: &mut Report,
    ) -> anyhow::Result<()> {
        list_arriving(archive, self.0, opts, chooser, each, listing)
    }

    fn read(
        self: Box<Self>,
        archive: &Path,
        opts: &Options,
        chooser: &Chooser,
        each: &mut super::give::Each<'_>,
    ) -> anyhow::Result<Report> {
        read_files(archive, self.0.finish()?, opts, chooser, each)
    }
}

/// Extracts the zip `file` (named `path` in messages) into `out`.
fn extract(
    path: &Path,
    file: File,
    out: &Place,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    let (bytes, mended) = load(path, file)?;
    let archive = open_archive(&bytes).map_err(|what| what.of(path))?;
    write_zip(path, &bytes, archive, mended, None, out, opts, chooser)
}

/// Extracts a zip that is still arriving (a remote one, `remote.rs`): planned and checked from
/// its central directory as soon as that is in, before anything is written (its symlinks'
/// bytes fetched first, a range each: a target is data, checked before anything is written;
/// and the first encrypted entry's, against which the password is checked); then each entry
/// written once its bytes are all there, its local header checked then. A zip whose end
/// records do not say plainly where its directory is, or whose comment is cut short, waits
/// for its last byte and is extracted as a local one.
fn extract_arriving(
    path: &Path,
    arriving: super::remote::Arriving,
    out: &Place,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    let stop = || opts.cancel.is_cancelled();
    let written = when_planned(path, &arriving, &stop, |bytes, archive, fetching| {
        write_zip(
            path,
            bytes,
            archive,
            Vec::new(),
            Some(fetching),
            out,
            opts,
            chooser,
        )
    })?;
    let Some(mut report) = written else {
        return extract(path, arriving.finish()?, out, opts, chooser);
    };
    if let Some((error, left)) = arriving.arrivals().failure() {
        let files = if left == 1 { "file was" } else { "files were" };
        let why = error.context(format!(
            "the download broke off: {left} {files} not written (those written before are whole and checked)"
        ));
        report
            .failures
            .push(Error::new(path, ErrorKind::Source, why));
    }
    Ok(report)
}

/// Waits for the arriving zip's central directory; then the zip's bytes, its file mapped. `None`
/// where it must wait for its last byte: its end records do not say plainly where its directory
/// is, or they or the directory need mending (`mended.rs`).
fn directory_in(
    path: &Path,
    arriving: &super::remote::Arriving,
    file: &File,
    stop: &dyn Fn() -> bool,
) -> anyhow::Result<Option<memmap2::Mmap>> {
    let Some(directory) = arriving.directory() else {
        return Ok(None);
    };
    arriving
        .arrivals()
        .wait_for(directory, stop)
        .with_context(|| format!("cannot read archive '{}'", path.display()))?;
    Ok(mapped(file).filter(|bytes| mended::find(bytes).is_none()))
}

/// A zip being fetched, entry by entry: what has arrived, where each entry's bytes lie, and
/// how to ask for an entry's before the rest ([`planning::Arrived`]).
struct Fetching<'a> {
    arrivals: &'a Arrivals,
    /// Each entry's span, by index ([`spans`]).
    spans: Vec<Range<u64>>,
    stop: &'a dyn Fn() -> bool,
}

impl<'a> Fetching<'a> {
    fn new(arrivals: &'a Arrivals, archive: &Archive<'_>, stop: &'a dyn Fn() -> bool) -> Self {
        Fetching {
            arrivals,
            spans: spans(archive),
            stop,
        }
    }

    /// Brings every symlink's bytes (its target is its data), each by a range of its own, all
    /// asked for at once.
    fn bring_symlinks(&self, archive: &Archive<'_>, path: &Path) -> anyhow::Result<()> {
        let links: Vec<&Range<u64>> = (0..archive.len())
            .filter(|&i| {
                archive
                    .by_index_data(i)
                    .is_ok_and(|zf| planning::kind_of(&zf) == planning::ZipKind::Symlink)
            })
            .filter_map(|i| self.spans.get(i))
            .collect();
        for span in &links {
            self.arrivals.want((*span).clone());
        }
        for span in links {
            self.arrivals
                .wait_for(span.clone(), self.stop)
                .with_context(|| format!("cannot read archive '{}'", path.display()))?;
        }
        Ok(())
    }
}

impl planning::Arrived for Fetching<'_> {
    fn has(&self, index: usize) -> bool {
        self.spans
            .get(index)
            .is_some_and(|span| self.arrivals.has(span))
    }

    fn bring(&self, index: usize) -> anyhow::Result<()> {
        let span = self.spans.get(index).cloned().unwrap_or_default();
        self.arrivals.want(span.clone());
        self.arrivals.wait_for(span, self.stop)
    }
}

/// Plans the zip `archive`, whose bytes are `bytes` (`mended`: what mending them said), and
/// writes its files: in the schedule's order, or, for one still arriving
/// (`fetching`), as their bytes come.
#[allow(clippy::too_many_arguments)]
fn write_zip(
    path: &Path,
    bytes: &[u8],
    archive: Archive<'_>,
    mended: Vec<String>,
    fetching: Option<&Fetching<'_>>,
    out: &Place,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    let mut password = Password::new(opts);
    let locals = match fetching {
        Some(fetching) => planning::Locals::Later(fetching),
        None => planning::Locals::Here,
    };
    let mut plan = planning::plan_with(&mut archive.clone(), bytes, chooser, &mut password, locals)
        .with_context(|| format!("refused '{}': nothing was extracted", path.display()))?;
    plan.warnings.extend(mended);
    super::limits::check_declared(&plan, out, opts)?;

    let (mut report, ()) = engine::run(out, Some(path), opts, |engine, writers| {
        engine.prepare_planned(writers, &mut plan, true);
        let files: Vec<&Entry> = plan.entries.iter().collect();
        let costs: Vec<u64> = files.iter().map(|e| e.size).collect();
        let work = Work::new(&files, &costs, writers.current_num_threads(), fetching);
        writers.broadcast(|_| {
            let (mut archive, mut writer) = (archive.clone(), engine.writer());
            let mut direct = Direct::new();
            let mut taken = Vec::new();
            while work.take(&mut taken, opts) {
                for &i in &taken {
                    let entry = files[i];
                    let written = work.check(&archive, bytes, entry, i).and_then(|()| {
                        write_entry(
                            &mut archive,
                            bytes,
                            &password,
                            &mut writer,
                            &mut direct,
                            entry,
                        )
                        .map_err(|error| Error::new(&entry.name, ErrorKind::Source, error))
                    });
                    if let Err(error) = written {
                        engine.run().record(error);
                    }
                }
            }
        });
    })?;
    engine::add_plan(&mut report, &mut plan);
    Ok(report)
}

/// Where each entry's bytes lie in the archive, by its index: from its local header to where
/// the next entry begins (or the central directory), whatever order the entries are in.
fn spans(archive: &Archive<'_>) -> Vec<Range<u64>> {
    let directory = archive.central_directory_start();
    let start_of = |index| {
        archive
            .by_index_data(index)
            .map_or(directory, |zf| zf.header_start())
    };
    // Every entry's start, to find where each one's span ends.
    let mut starts: Vec<u64> = (0..archive.len()).map(start_of).collect();
    starts.sort_unstable();
    (0..archive.len())
        .map(|index| {
            let start = start_of(index);
            let next = starts.partition_point(|&s| s <= start);
            start..starts.get(next).copied().unwrap_or(directory).max(start)
        })
        .collect()
}

/// How the writers take the files: by the [`Schedule`], or, for a zip still arriving, as the
/// bytes of each come, each local header checked before its entry is written.
enum Work<'a> {
    Planned(Schedule),
    Arriving {
        arrivals: &'a Arrivals,
        /// Where each file's bytes must end: where the next entry of the archive begins (or
        /// the central directory).
        limits: Vec<u64>,
    },
}

impl<'a> Work<'a> {
    fn new(
        files: &[&Entry],
        costs: &[u64],
        writers: usize,
        fetching: Option<&Fetching<'a>>,
    ) -> Work<'a> {
        let Some(fetching) = fetching else {
            return Work::Planned(Schedule::new(costs, writers));
        };
        let arrivals = fetching.arrivals;
        let big = schedule::big_enough(costs, writers);
        let mut limits = Vec::with_capacity(files.len());
        let spans: Vec<Span> = files
            .iter()
            .enumerate()
            .map(|(item, entry)| {
                let range = fetching.spans.get(entry.index).cloned().unwrap_or_default();
                limits.push(range.end);
                Span {
                    range,
                    item,
                    cost: costs[item],
                    first: costs[item] >= big,
                }
            })
            .collect();
        arrivals.watch(spans, writers);
        Work::Arriving { arrivals, limits }
    }

    /// The next files for a writer (positions in the caller's list) into `taken`; `false`
    /// when there are none left.
    fn take(&self, taken: &mut Vec<usize>, opts: &Options) -> bool {
        match self {
            Work::Planned(schedule) => {
                taken.clear();
                let Some(range) = schedule.take() else {
                    return false;
                };
                taken.extend_from_slice(schedule.items(range));
                true
            }
            Work::Arriving { arrivals, .. } => arrivals.take(taken, &|| opts.cancel.is_cancelled()),
        }
    }

    /// The checks of the file `entry` (the caller's `item`) that wait for its bytes: for a zip
    /// still arriving, those its plan made of every local header where the zip is whole
    /// ([`planning::check_local`]), and that its data ends before the next entry begins.
    fn check(
        &self,
        archive: &Archive<'_>,
        bytes: &[u8],
        entry: &Entry,
        item: usize,
    ) -> Result<(), Error> {
        match self {
            Work::Planned(_) => Ok(()),
            Work::Arriving { limits, .. } => {
                let refused = |kind, error| Err(Error::new(&entry.name, kind, error));
                let Ok(zf) = archive.by_index_data(entry.index) else {
                    return refused(
                        ErrorKind::Source,
                        anyhow::anyhow!("unreadable entry header"),
                    );
                };
                let local = planning::central_record(bytes, &zf)
                    .map_or(planning::Local::Damaged, |central| {
                        planning::check_local(bytes, &zf, &central)
                    });
                match local {
                    planning::Local::Damaged => {
                        refused(ErrorKind::Source, anyhow::anyhow!(planning::DAMAGED))
                    }
                    planning::Local::Disagrees { error, .. } => refused(ErrorKind::Refused, error),
                    planning::Local::Agrees { end } if end > limits[item] => refused(
                        ErrorKind::Refused,
                        anyhow::anyhow!(
                            "refused: its local header puts its data past where the next entry begins: {}",
                            planning::OVERLAPS_ARE_BOMBS
                        ),
                    ),
                    planning::Local::Agrees { .. } => Ok(()),
                }
            }
        }
    }
}

/// Reads the zip `file`'s files in the archive's order without writing them (see
/// [`crate::extract::read::read_files`]): the same plan and checks as [`extract`], each file's
/// content to `each`, then read to its end so that its CRC-32 is checked whatever `each` read.
fn read_files(
    path: &Path,
    file: File,
    opts: &Options,
    chooser: &Chooser,
    each: &mut super::give::Each<'_>,
) -> anyhow::Result<Report> {
    let (bytes, mended) = load(path, file)?;
    let mut archive = open_archive(&bytes).map_err(|what| what.of(path))?;
    let mut password = Password::new(opts);
    let mut plan = build_plan(&mut archive.clone(), &bytes, chooser, &mut password)
        .with_context(|| format!("refused '{}': nothing was read", path.display()))?;
    plan.warnings.extend(mended);
    let mut report = Report::default();
    let mut direct = Direct::new();
    plan.entries.sort_by_key(|e| e.index);
    for entry in plan.entries.iter().filter(|e| e.kind == EntryKind::File) {
        if opts.cancel.is_cancelled() {
            break;
        }
        let read = match direct.data(&mut archive, &bytes, entry.index) {
            Some(data) => data.and_then(|data| super::give::give(entry, &mut &data[..], each)),
            None => open_entry(&mut archive, entry.index, &password)
                .and_then(|mut reader| super::give::give(entry, &mut reader, each)),
        };
        match read {
            Ok(n) => {
                report.files += 1;
                report.bytes += n;
            }
            Err(error) if super::give::is_output(&error) => return Err(error),
            Err(error) => report
                .failures
                .push(Error::new(&entry.name, ErrorKind::Source, error)),
        }
    }
    engine::add_plan(&mut report, &mut plan);
    Ok(report)
}

/// Writes one file of the zip; `Err` when its data cannot be read (the writer reports its own
/// failures).
fn write_entry(
    archive: &mut Archive<'_>,
    bytes: &[u8],
    password: &Password<'_>,
    writer: &mut engine::Writer<'_>,
    direct: &mut Direct,
    entry: &Entry,
) -> anyhow::Result<()> {
    if let Some(data) = direct.data(archive, bytes, entry.index) {
        writer.write(entry, Content::Bytes(data?));
        return Ok(());
    }
    let mut reader = open_entry(archive, entry.index, password)?;
    writer.write(entry, Content::Reader(&mut reader));
    Ok(())
}

/// The entry `index`'s data through the `zip` crate, decrypted where it is encrypted (the
/// password is used only for those); a wrong password is said as such.
fn open_entry<'b, 'a>(
    archive: &'b mut Archive<'a>,
    index: usize,
    password: &Password<'_>,
) -> anyhow::Result<zip::read::ZipFile<'b, Cursor<&'a [u8]>>> {
    let opened = match &password.known {
        Some(password) => archive.by_index_decrypt(index, password),
        None => archive.by_index(index),
    };
    opened.map_err(|e| match e {
        zip::result::ZipError::InvalidPassword => {
            anyhow::anyhow!("wrong password: the entry cannot be decrypted with it")
        }
        e => anyhow::Error::new(e).context("cannot read the entry"),
    })
}

/// Lists a zip from its central directory: every entry the selection takes, with what
/// extracting it would do (the same plan and checks as [`extract`]); each entry extract would
/// refuse is also a failure in `report`, and what extract would warn of (a mended directory,
/// the plan's notes) a warning. `Err` for a zip refused whole (overlapping entries, an
/// unreadable central directory) is an `anyhow` error: nothing is listed then.
fn list(
    path: &Path,
    file: File,
    chooser: &Chooser,
    each: &mut dyn FnMut(&Listed),
    report: &mut Report,
) -> anyhow::Result<()> {
    // What extract refuses before writing anything, list refuses the same way (exit 2).
    let (bytes, mended) = load(path, file)?;
    let archive = open_archive(&bytes).map_err(|what| what.of(path))?;
    let listing = Listing {
        path,
        bytes: &bytes,
        locals: planning::Locals::Here,
    };
    report.warnings.extend(mended);
    listing.list(archive, chooser, each, report)
}

/// Lists a zip still arriving from its central directory alone, as soon as that is in: the
/// checks its records allow (those of the local headers wait for their entries' bytes, which
/// a listing never reads), each symlink's target fetched by a range of its own; then the
/// download stops. A zip whose directory cannot be read so (see [`directory_in`]) waits for
/// its last byte and is listed as a zip in a file.
fn list_arriving(
    path: &Path,
    arriving: super::remote::Arriving,
    opts: &Options,
    chooser: &Chooser,
    each: &mut dyn FnMut(&Listed),
    report: &mut Report,
) -> anyhow::Result<()> {
    let stop = || opts.cancel.is_cancelled();
    // A listing needs the central directory and the symlinks alone, asked for by their ranges.
    arriving.arrivals().only_wanted(true);
    let listed = when_planned(path, &arriving, &stop, |bytes, archive, fetching| {
        let listing = Listing {
            path,
            bytes,
            locals: planning::Locals::Later(fetching),
        };
        listing.list(archive, chooser, each, report)
    })?;
    if listed.is_none() {
        arriving.arrivals().only_wanted(false);
        return list(path, arriving.finish()?, chooser, each, report);
    }
    Ok(())
}

/// Reads an arriving zip as far as planning it needs, as soon as that is in: its central
/// directory, then its symlinks' bytes (a target is data, checked before anything is written),
/// each by a range of its own; then `then` is given the zip's bytes (mapped: what is still to
/// come is seen as it lands), its directory and how to ask for more. `None` where it must wait
/// for its last byte ([`directory_in`]; or a directory the crate cannot read from what has
/// come).
fn when_planned<T>(
    path: &Path,
    arriving: &super::remote::Arriving,
    stop: &dyn Fn() -> bool,
    then: impl FnOnce(&[u8], Archive<'_>, &Fetching<'_>) -> anyhow::Result<T>,
) -> anyhow::Result<Option<T>> {
    let file = arriving.file().context("cannot read the temporary file")?;
    let Some(bytes) = directory_in(path, arriving, &file, stop)? else {
        return Ok(None);
    };
    let Ok(archive) = open_archive(&bytes) else {
        return Ok(None);
    };
    let fetching = Fetching::new(arriving.arrivals(), &archive, stop);
    fetching.bring_symlinks(&archive, path)?;
    then(&bytes, archive, &fetching).map(Some)
}

/// A zip's listing from its central directory: its bytes, and whether the local headers are
/// among them.
struct Listing<'b> {
    path: &'b Path,
    bytes: &'b [u8],
    locals: planning::Locals<'b>,
}

impl Listing<'_> {
    fn list(
        &self,
        archive: Archive<'_>,
        chooser: &Chooser,
        each: &mut dyn FnMut(&Listed),
        report: &mut Report,
    ) -> anyhow::Result<()> {
        let (path, bytes) = (self.path, self.bytes);
        // Listing reads no data: encrypted entries are listed as they are, password or not.
        let mut password = Password::for_listing();
        let plan = planning::plan_with(
            &mut archive.clone(),
            bytes,
            chooser,
            &mut password,
            self.locals,
        )
        .with_context(|| format!("refused '{}': extract would write nothing", path.display()))?;
        let planned: HashMap<usize, &Entry> = plan.entries.iter().map(|e| (e.index, e)).collect();
        let problems: HashMap<&Path, String> = plan
            .rejected
            .iter()
            .map(|e| (e.path(), e.message()))
            .collect();
        let mut clock = planning::DosClock::default();
        let mut archive = archive;
        for index in 0..archive.len() {
            let name = entry_name(&archive, index);
            let entry = planned.get(&index);
            let problem = problems.get(Path::new(&name)).cloned();
            if entry.is_none() && problem.is_none() {
                // Not selected, or the output folder itself (`./`).
                continue;
            }
            // (An entry whose local header cannot be read is left out where it is here.)
            if matches!(self.locals, planning::Locals::Here) && archive.by_index_raw(index).is_err()
            {
                continue;
            }
            let Ok(record) = archive.by_index_data(index) else {
                continue;
            };
            let extra = integrity::central_extra(bytes, record.central_header_start());
            let owner = planning::unix_owner(extra);
            // Read here, not from the plan: a refused entry has its time too.
            let mtime = planning::mtime_of(&record, extra, &mut clock);
            let kind = match planning::kind_of(&record) {
                planning::ZipKind::Symlink => ListedKind::Symlink,
                planning::ZipKind::Dir => ListedKind::Dir,
                planning::ZipKind::File => ListedKind::File,
            };
            let mode = unix_mode(&record);
            let size = if kind == ListedKind::File {
                record.size()
            } else {
                0
            };
            drop(record);
            let target = (kind == ListedKind::Symlink)
                .then(|| symlink_target(&mut archive, index))
                .flatten();
            each(&Listed {
                kind,
                mode,
                size,
                mtime,
                uid: owner.map(|(uid, _)| uid),
                gid: owner.map(|(_, gid)| gid),
                user: String::new(),
                group: String::new(),
                name,
                path: entry.map(|e| e.path.clone()),
                target,
                fails: problem.is_some(),
                problem,
            });
        }
        report.failures.extend(plan.rejected);
        report.warnings.extend(plan.warnings);
        Ok(())
    }
}

/// A symlink's target: its data, a short path (at most 4 KiB is read).
fn symlink_target(archive: &mut Archive<'_>, index: usize) -> Option<String> {
    let mut target = Vec::new();
    archive
        .by_index(index)
        .ok()?
        .take(4096)
        .read_to_end(&mut target)
        .ok()?;
    Some(plan::display_bytes(&target))
}

/// The password for a zip's encrypted entries: the one given, or the prompt's answer, asked
/// the first time an encrypted entry is met (so a zip with none never asks, and costs nothing
/// more); checked once against that entry, and asked again where the prompt gave it wrong.
pub(super) struct Password<'a> {
    known: Option<Vec<u8>>,
    prompt: Option<&'a (dyn Fn() -> Option<Vec<u8>> + Send + Sync)>,
    asked: bool,
    /// Whether `known` opened the entry it was checked against (`None`: not checked yet).
    checked: Option<bool>,
}

/// A password that opens no encrypted entry (its check value, or AES's verifier, disagrees).
#[derive(Debug)]
pub(super) struct WrongPassword;

/// How many answers the prompt gets for a wrong password, as unzip and sudo give.
const TRIES: u32 = 3;

impl<'a> Password<'a> {
    pub fn new(opts: &'a Options) -> Password<'a> {
        Password {
            known: opts.password.clone(),
            prompt: opts.password_prompt.as_deref(),
            asked: false,
            checked: None,
        }
    }

    /// For listing, which reads no data: encrypted entries are listed as they are, password
    /// or not, and nothing is checked.
    fn for_listing() -> Password<'static> {
        Password {
            known: Some(Vec::new()),
            prompt: None,
            asked: true,
            checked: Some(true),
        }
    }

    /// No password, and none to ask for.
    #[cfg(fuzzing)]
    pub fn none() -> Password<'static> {
        Password {
            known: None,
            prompt: None,
            asked: true,
            checked: None,
        }
    }

    /// The password for an encrypted entry, checked the first time against it (`opens` says
    /// whether a password does): a wrong one from the prompt is asked again, [`TRIES`] times
    /// in all. `Ok(None)`: no password was given. `Err`: the password is wrong.
    pub(super) fn checked(
        &mut self,
        mut opens: impl FnMut(&[u8]) -> bool,
    ) -> Result<Option<&[u8]>, WrongPassword> {
        let mut tries = 1;
        while self.checked.is_none() {
            let from_prompt = self.known.is_none() || self.asked;
            let Some(password) = self.get() else {
                return Ok(None);
            };
            if opens(password) {
                self.checked = Some(true);
            } else if from_prompt && self.prompt.is_some() && tries < TRIES {
                tries += 1;
                self.known = self.prompt.and_then(|ask| ask());
            } else {
                self.checked = Some(false);
            }
        }
        match self.checked {
            Some(false) => Err(WrongPassword),
            _ => Ok(self.known.as_deref()),
        }
    }

    /// Whether the password was checked against an entry already (right or wrong).
    pub(super) fn is_checked(&self) -> bool {
        self.checked.is_some()
    }

    /// The password, asking for it if it is not known yet.
    fn get(&mut self) -> Option<&[u8]> {
        if self.known.is_none() && !self.asked {
            self.asked = true;
            self.known = self.prompt.and_then(|ask| ask());
        }
        self.known.as_deref()
    }
}
