//! A zip's plan, from its central directory, before anything is written: one function per
//! entry ([`Planner::entry`]) decides what it becomes (taken, skipped, refused, with its path,
//! kind, mode and mtime); then the whole archive's checks: nothing below a symlink, each
//! symlink's target read and checked, and no two entries' data overlapping (a zip bomb's
//! trick). Extraction and listing share it, so `list` says what `extract` would do.

use std::collections::HashMap;
use std::io::Read;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use zip::read::ZipFileEntry;

use super::integrity;
use super::{Archive, Password};
use crate::error::{Error, ErrorKind, Setting, Tag};
use crate::extract::select::{Choice, Chooser};
use crate::plan::{self, Entry, EntryKind, Plan};
use crate::platform;

/// The plan for `archive` (whose bytes are `bytes`): every entry the selection takes, checked.
/// `Err`: the archive is refused whole (overlapping entries).
pub(in crate::extract) fn build_plan(
    archive: &mut Archive<'_>,
    bytes: &[u8],
    chooser: &Chooser,
    password: &mut Password<'_>,
) -> anyhow::Result<Plan> {
    plan_with(archive, bytes, chooser, password, Locals::Here)
}

/// Why an entry whose records cannot be read is refused.
pub(super) const DAMAGED: &str = "its local header or central directory record is damaged";

/// Why entries whose data overlap are refused.
pub(super) const OVERLAPS_ARE_BOMBS: &str = "overlapping entries are how a zip bomb multiplies a small file into gigabytes, and no zip writer makes them (Info-ZIP's unzip refuses them too)";

/// Whether the local headers are in `bytes` when the plan is made.
#[derive(Clone, Copy)]
pub(super) enum Locals<'a> {
    /// They are: each is checked against its record as the plan is made.
    Here,
    /// Only the central directory has arrived (a remote zip, written as it arrives): the plan
    /// is made from the records alone, and each local header is checked as its entry is
    /// written ([`check_local`]); those of the entries already there (the symlinks, whose
    /// targets are data, fetched first) are checked now, as `Here`. The first encrypted entry
    /// planned, against which the password is checked, is brought first.
    Later(&'a dyn Arrived),
}

/// What of a zip still arriving is there, entry by entry.
pub(super) trait Arrived {
    /// Whether all of entry `index`'s bytes are there.
    fn has(&self, index: usize) -> bool;

    /// Brings entry `index`'s bytes before the rest's, and waits for them.
    fn bring(&self, index: usize) -> anyhow::Result<()>;
}

/// [`build_plan`], where the local headers are `locals`.
pub(super) fn plan_with(
    archive: &mut Archive<'_>,
    bytes: &[u8],
    chooser: &Chooser,
    password: &mut Password<'_>,
    locals: Locals<'_>,
) -> anyhow::Result<Plan> {
    let mut plan = Plan::default();
    let mut planner = Planner {
        locals,
        bytes,
        chooser,
        password,
        archive: archive.clone(),
        wrong: 0,
        locked: 0,
        spans: Vec::with_capacity(archive.len()),
        clock: DosClock::default(),
        case: plan::CaseGuard::new(),
    };
    let mut unreadable = Vec::new();
    for index in 0..archive.len() {
        if matches!(locals, Locals::Here)
            && let Err(e) = archive.by_index_raw(index)
        {
            unreadable.push((index, e));
            continue;
        }
        let Ok(zf) = archive.by_index_data(index) else {
            continue;
        };
        match planner.entry(&zf, index) {
            Planned::Take(entry) => plan.entries.push(entry),
            Planned::Skip => {}
            Planned::Reject(name, kind, error) => plan.reject(name, kind, error),
        }
    }
    let Planner {
        password,
        mut spans,
        wrong,
        locked,
        ..
    } = planner;
    // Nothing to write but folders, for a wrong password or for want of one: refused whole,
    // so that not even the folders are made (unzip makes them, empty).
    if !plan.entries.iter().any(|e| e.kind != EntryKind::Dir) {
        if wrong > 0 {
            anyhow::bail!(
                "wrong password: it opens none of the {wrong} encrypted entries ({} gives another)",
                Setting::Password
            );
        }
        if locked > 0 {
            let files = if locked == 1 { "file is" } else { "files are" };
            anyhow::bail!(
                "its {locked} {files} encrypted: give the password with {}",
                Setting::Password
            );
        }
    }
    for (index, e) in unreadable {
        let name = entry_name(archive, index);
        let error = anyhow::Error::new(e).context("unreadable entry header");
        plan.reject(name, ErrorKind::Source, error);
    }
    if archive.has_duplicate_names() {
        let names = integrity::names_stored_twice(bytes, archive.central_directory_start());
        let shown: Vec<String> = names
            .iter()
            .take(5)
            .map(|name| format!("'{}'", plan::display_bytes(name)))
            .collect();
        let more = match names.len().saturating_sub(shown.len()) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        plan.warnings.push(format!(
            "the archive names some entries more than once ({}{more}): the last entry of each name was extracted, as unzip and bsdtar do",
            shown.join(", ")
        ));
    }

    // Nothing below a symlink of the archive, even one refused below (as for a tar).
    plan.refuse_paths_through_symlinks();
    read_link_targets(archive, &mut plan, password.known.as_deref());
    if let Some(overlap) = integrity::find_overlap(&mut spans, archive.central_directory_start()) {
        let overlap = overlap.describe(|index| entry_name(archive, index));
        let why = anyhow::anyhow!("{overlap}: {OVERLAPS_ARE_BOMBS}");
        // The zip's refusal, whole (the run names the zip).
        return Err(crate::error::Error::named("", ErrorKind::Refused, why).into());
    }
    Ok(plan)
}

/// What one entry of the central directory becomes.
enum Planned {
    Take(Entry),
    /// Not chosen, or the output folder itself.
    Skip,
    /// Refused or unreadable: its name, and why.
    Reject(String, ErrorKind, anyhow::Error),
}

/// What planning carries from entry to entry.
struct Planner<'a, 'p> {
    locals: Locals<'a>,
    bytes: &'a [u8],
    chooser: &'a Chooser,
    password: &'a mut Password<'p>,
    /// The archive, to check the password against the first encrypted entry.
    archive: Archive<'a>,
    /// Encrypted entries the password does not open.
    wrong: usize,
    /// Encrypted entries left closed for want of a password.
    locked: usize,
    /// Where each entry's header and data lie, to find overlaps once all are known.
    spans: Vec<integrity::Span>,
    clock: DosClock,
    case: plan::CaseGuard,
}

impl Planner<'_, '_> {
    /// Decides what the central directory's entry `index` becomes: its records checked against
    /// each other, its name chosen and validated, its password at hand, its kind, mode and
    /// mtime read.
    fn entry(&mut self, zf: &ZipFileEntry<'_>, index: usize) -> Planned {
        // The name as `list` and every message give it (`entry_name`), whatever befalls it.
        let decoded = name_bytes(zf.name_raw(), zf.system(), || zf.name());
        let name = match &decoded {
            Ok(bytes) => plan::display_bytes(bytes),
            Err(_) => String::from_utf8_lossy(zf.name_raw()).into_owned(),
        };
        let Some(central) = central_record(self.bytes, zf) else {
            let error = anyhow::anyhow!(DAMAGED);
            return Planned::Reject(name, ErrorKind::Source, error);
        };
        if let Some(refused) = self.span(zf, index, &central, &name) {
            return refused;
        }
        let bytes = match decoded {
            Ok(bytes) => bytes,
            Err(e) => {
                let error = anyhow::Error::new(e).context("undecodable name");
                return Planned::Reject(name, ErrorKind::Source, error);
            }
        };
        let what = kind_of(zf);
        let chosen = match self.chooser.choose(&bytes, what == ZipKind::Dir) {
            Choice::Take(chosen) => chosen,
            Choice::Skip => return Planned::Skip,
            Choice::Refuse(why) => {
                let error = anyhow::anyhow!("refused: {why}");
                return Planned::Reject(name, ErrorKind::Refused, error);
            }
        };
        if what == ZipKind::Dir && plan::is_root(&String::from_utf8_lossy(&chosen)) {
            return Planned::Skip;
        }
        let path = match plan::safe_relative_bytes(&chosen).and_then(|path| {
            self.case.check(&path)?;
            Ok(path)
        }) {
            Ok(path) => path,
            Err(refusal) => {
                let error = anyhow::anyhow!("refused: {refusal}");
                return Planned::Reject(name, ErrorKind::Refused, error);
            }
        };
        if central.flags & integrity::STRONG_ENCRYPTION != 0 {
            return Planned::Reject(name, ErrorKind::Source, integrity::strong_encryption());
        }
        if zf.encrypted()
            && let Some(locked) = self.unlock(index, &name)
        {
            return locked;
        }
        let kind = match what {
            // Its target is its content, read once every entry is planned.
            ZipKind::Symlink => EntryKind::Symlink {
                target: Default::default(),
            },
            ZipKind::Dir => EntryKind::Dir,
            ZipKind::File => EntryKind::File,
        };
        let mtime = mtime_of(zf, central.extra, &mut self.clock);
        Planned::Take(Entry {
            mode: unix_mode(zf),
            mtime,
            size: zf.size(),
            index,
            ..Entry::new(name, path, kind)
        })
    }
    /// Notes where the entry's bytes are (its local header, where the zip is here, is checked
    /// against its record); a refusal where it is damaged or the two disagree.
    fn span(
        &mut self,
        zf: &ZipFileEntry<'_>,
        index: usize,
        central: &integrity::Central<'_>,
        name: &str,
    ) -> Option<Planned> {
        let start = zf.header_start();
        let here = match self.locals {
            Locals::Here => true,
            Locals::Later(arrived) => arrived.has(index),
        };
        match here {
            true => {
                let (end, disagreement) = match check_local(self.bytes, zf, central) {
                    Local::Damaged => {
                        let error = anyhow::anyhow!(DAMAGED);
                        return Some(Planned::Reject(name.to_string(), ErrorKind::Source, error));
                    }
                    Local::Agrees { end } => (end, None),
                    Local::Disagrees { end, error } => (end, Some(error)),
                };
                self.spans.push(integrity::Span {
                    entry: index,
                    start,
                    end,
                });
                if let Some(error) = disagreement {
                    return Some(Planned::Reject(name.to_string(), ErrorKind::Refused, error));
                }
            }
            // The local header's extra field is not known yet: the span is at least the
            // header's fixed part, the name the record gives and the data; the rest is
            // checked as the entry is written.
            false => self.spans.push(integrity::Span {
                entry: index,
                start,
                end: start
                    .saturating_add(30 + zf.name_raw().len() as u64)
                    .saturating_add(zf.compressed_size()),
            }),
        }
        None
    }

    /// An encrypted entry's password, checked once for all entries: a refusal where there is
    /// none, or it does not open this one.
    fn unlock(&mut self, index: usize, name: &str) -> Option<Planned> {
        if let Locals::Later(arrived) = self.locals
            && !self.password.is_checked()
            && let Err(error) = arrived.bring(index)
        {
            let error = error.context("cannot read it to check the password");
            return Some(Planned::Reject(name.to_string(), ErrorKind::Source, error));
        }
        let archive = &mut self.archive;
        let opens = |password: &[u8]| {
            !matches!(
                archive.by_index_decrypt(index, password),
                Err(zip::result::ZipError::InvalidPassword)
            )
        };
        match self.password.checked(opens) {
            Ok(Some(_)) => {}
            Ok(None) => {
                self.locked += 1;
                let error =
                    anyhow::anyhow!("encrypted: give its password with {}", Setting::Password);
                return Some(Planned::Reject(name.to_string(), ErrorKind::Source, error));
            }
            Err(super::WrongPassword) => {
                self.wrong += 1;
                let error = anyhow::anyhow!("wrong password: it does not open this entry");
                return Some(Planned::Reject(name.to_string(), ErrorKind::Source, error));
            }
        }
        None
    }
}

/// An entry's central directory record, read from `bytes`.
pub(super) fn central_record<'b>(
    bytes: &'b [u8],
    zf: &ZipFileEntry<'_>,
) -> Option<integrity::Central<'b>> {
    integrity::Central::read(
        bytes,
        zf.central_header_start(),
        zf.crc32(),
        zf.compressed_size(),
        zf.size(),
    )
}

/// What an entry's local header says against its central directory record.
pub(super) enum Local {
    /// There is no whole local header where the record says.
    Damaged,
    /// It agrees; its data ends at `end`.
    Agrees { end: u64 },
    /// It disagrees (`error` says how, as a refusal); its data ends at `end`.
    Disagrees { end: u64, error: anyhow::Error },
}

/// Reads the local header of `zf` (whose record is `central`) from `bytes` and checks it
/// against the record.
pub(super) fn check_local(
    bytes: &[u8],
    zf: &ZipFileEntry<'_>,
    central: &integrity::Central<'_>,
) -> Local {
    let Some(local) = integrity::local_header(bytes, zf.header_start()) else {
        return Local::Damaged;
    };
    let end = local.data_start.saturating_add(zf.compressed_size());
    match integrity::disagreement(&local, central) {
        None => Local::Agrees { end },
        Some(disagreement) => Local::Disagrees {
            end,
            error: anyhow::anyhow!(
                "refused: {disagreement}: readers of local headers and of the central directory would extract different things"
            ),
        },
    }
}

/// A symlink's target is its content: read and checked for every symlink of the plan now,
/// before anything is written; a symlink whose target cannot be read or leaves the output
/// folder is refused.
fn read_link_targets(archive: &mut Archive<'_>, plan: &mut Plan, password: Option<&[u8]>) {
    let mut refused = Vec::new();
    for (i, entry) in plan.entries.iter_mut().enumerate() {
        if !matches!(entry.kind, EntryKind::Symlink { .. }) {
            continue;
        }
        match read_link_target(archive, entry, password) {
            Ok(target) => {
                entry.kind = EntryKind::Symlink {
                    target: target.into(),
                }
            }
            Err(error) => refused.push((i, error)),
        }
    }
    for (i, error) in refused.into_iter().rev() {
        plan.entries.remove(i);
        plan.rejected.push(error);
    }
}

/// An entry's name for a message, by its index in the central directory.
pub(super) fn entry_name(archive: &Archive<'_>, index: usize) -> String {
    archive
        .by_index_data(index)
        .ok()
        .and_then(|zf| {
            let name = name_bytes(zf.name_raw(), zf.system(), || zf.name()).ok()?;
            Some(plan::display_bytes(&name))
        })
        .unwrap_or_else(|| format!("entry #{index}"))
}

/// An entry's name as the references read it. UTF-8 where it is UTF-8 (whether or not its
/// flag says so). Where it is not: on Unix, the raw bytes, kept as GNU tar keeps a tar's, where
/// the zip was made anywhere but MS-DOS (Info-ZIP's unzip, bsdtar and 7-Zip all keep a Unix
/// zip's cp866, koi8-r or Shift-JIS names so: libarchive's `test_read_format_zip_filename_*`);
/// CP437, the format's own, where it was made on MS-DOS, and on Windows, whose names are
/// Unicode (`decoded`: the zip crate's reading, UTF-8 or CP437).
pub(super) fn name_bytes<'n>(
    raw: &'n [u8],
    system: zip::System,
    decoded: impl FnOnce() -> zip::result::ZipResult<std::borrow::Cow<'n, str>>,
) -> zip::result::ZipResult<std::borrow::Cow<'n, [u8]>> {
    use std::borrow::Cow;
    if cfg!(unix) && system != zip::System::Dos && std::str::from_utf8(raw).is_err() {
        return Ok(Cow::Borrowed(raw));
    }
    Ok(match decoded()? {
        Cow::Borrowed(name) => Cow::Borrowed(name.as_bytes()),
        Cow::Owned(name) => Cow::Owned(name.into_bytes()),
    })
}

/// What a zip entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ZipKind {
    File,
    Dir,
    Symlink,
}

/// What an entry is, as Info-ZIP's unzip, bsdtar and 7-Zip agree: a name ending in `/` is a
/// folder whatever its mode says (commons-compress's COMPRESS-379 has mode `0o177777`, which
/// the zip crate's test of the mode's bits takes for a symlink); else the Unix file type, where
/// the zip was made on Unix; else the MS-DOS directory attribute (0x10), which marks a folder
/// without its `/` for bsdtar and 7-Zip (libarchive's `test_read_format_zip_msdos`).
pub(super) fn kind_of(zf: &ZipFileEntry<'_>) -> ZipKind {
    kind_from(zf.is_dir(), zf.system(), zf.external_attributes())
}

/// [`kind_of`] from a central record's parts (a zip from a pipe reads its own): whether its
/// name ends in `/`, the host that made it, its external attributes.
pub(super) fn kind_from(slash: bool, system: zip::System, external: u32) -> ZipKind {
    const S_IFMT: u32 = 0o170000;
    const S_IFDIR: u32 = 0o040000;
    const S_IFLNK: u32 = 0o120000;
    const DOS_DIRECTORY: u32 = 0x10;
    if slash {
        return ZipKind::Dir;
    }
    if system == zip::System::Unix {
        match (external >> 16) & S_IFMT {
            S_IFLNK => return ZipKind::Symlink,
            S_IFDIR => return ZipKind::Dir,
            _ => {}
        }
    }
    if external & DOS_DIRECTORY != 0 {
        ZipKind::Dir
    } else {
        ZipKind::File
    }
}

/// The entry's permission bits. The zip crate's `unix_mode` clears setuid, setgid and sticky;
/// they are taken back from the raw attributes here, and `--keep-setid` decides later.
pub(super) fn unix_mode(zf: &ZipFileEntry<'_>) -> Option<u32> {
    let mode = zf.unix_mode()?;
    let specials = match zf.system() {
        zip::System::Dos => 0,
        _ => (zf.external_attributes() >> 16) & 0o7000,
    };
    Some((mode | specials) & 0o7777)
}

fn read_link_target(
    archive: &mut Archive<'_>,
    entry: &Entry,
    password: Option<&[u8]>,
) -> Result<String, Error> {
    const MAX_TARGET: u64 = 4096;
    let mut target = Vec::new();
    let opened = match password {
        Some(password) => archive.by_index_decrypt(entry.index, password),
        None => archive.by_index(entry.index),
    };
    opened
        .context("cannot read the symlink")
        .tag(&entry.name, ErrorKind::Source)?
        .take(MAX_TARGET + 1)
        .read_to_end(&mut target)
        .context("cannot read the symlink's target")
        .tag(&entry.name, ErrorKind::Source)?;
    if target.len() as u64 > MAX_TARGET {
        let error = anyhow::anyhow!("symlink target is longer than {MAX_TARGET} bytes");
        return Err(Error::new(&entry.name, ErrorKind::Source, error));
    }
    let target = String::from_utf8(target)
        .context("symlink target is not UTF-8")
        .tag(&entry.name, ErrorKind::Source)?;
    plan::check_symlink_target(&entry.path, &target)
        .map_err(|r| anyhow::anyhow!("refused: {r}"))
        .tag(&entry.name, ErrorKind::Refused)?;
    Ok(target)
}

/// An entry's mtime: NTFS's time first, exact to 100 ns (7-Zip and Windows tools write it;
/// 7-Zip reads it first); then Info-ZIP's, to the second; else the DOS time. `central_extra`:
/// the extra fields of its central directory record.
pub(super) fn mtime_of(
    zf: &ZipFileEntry<'_>,
    central_extra: &[u8],
    clock: &mut DosClock,
) -> Option<SystemTime> {
    let dos = zf.last_modified().and_then(|t| clock.convert(t));
    ntfs_mtime(central_extra).or_else(|| {
        extended_mtime(central_extra)
            .or_else(|| old_unix_mtime(central_extra))
            .map(|secs| extended_time(secs, dos))
            .or(dos)
    })
}

/// The owner's user and group ids of Info-ZIP's Unix extra field ("ux", 0x7875: a version,
/// then each id as a size and that many little-endian bytes), as Info-ZIP's zip writes them
/// on Unix and bsdtar lists them.
pub(super) fn unix_owner(extra: &[u8]) -> Option<(u64, u64)> {
    const UNIX_IDS: u16 = 0x7875;
    let data = extra_fields(extra).find(|(id, _)| *id == UNIX_IDS)?.1;
    let (&version, mut rest) = data.split_first()?;
    if version != 1 {
        return None;
    }
    let mut id = || {
        let (&size, after) = rest.split_first()?;
        let bytes = after.get(..usize::from(size)).filter(|b| b.len() <= 8)?;
        rest = &after[bytes.len()..];
        Some(bytes.iter().rev().fold(0u64, |n, &b| n << 8 | u64::from(b)))
    };
    Some((id()?, id()?))
}

/// The mtime of the NTFS extra field (0x000a: four reserved bytes, then attributes; attribute
/// 1 holds the modification, access and creation times as Windows FILETIMEs, 100 ns units
/// since 1601), as 7-Zip and Windows tools write it.
pub(super) fn ntfs_mtime(extra: &[u8]) -> Option<SystemTime> {
    const NTFS: u16 = 0x000a;
    let data = extra_fields(extra).find(|(id, _)| *id == NTFS)?.1;
    // The attributes are laid out as the fields are: a tag, a length, the data.
    let (_, times) = extra_fields(data.get(4..)?).find(|(tag, v)| *tag == 1 && v.len() >= 8)?;
    let ticks = u64::from_le_bytes(times[..8].try_into().ok()?);
    // From 1601-01-01 to 1970-01-01: 11,644,473,600 s.
    const EPOCH_SECS: u64 = 11_644_473_600;
    let since = std::time::Duration::new(ticks / 10_000_000, (ticks % 10_000_000) as u32 * 100);
    let epoch = std::time::Duration::from_secs(EPOCH_SECS);
    match since.checked_sub(epoch) {
        Some(after) => SystemTime::UNIX_EPOCH.checked_add(after),
        None => SystemTime::UNIX_EPOCH.checked_sub(epoch - since),
    }
}

/// A zip's extra fields, as (id, data), until one runs past the end.
pub(super) fn extra_fields(mut extra: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let [a, b, c, d, rest @ ..] = extra else {
            return None;
        };
        let id = u16::from_le_bytes([*a, *b]);
        let len = usize::from(u16::from_le_bytes([*c, *d]));
        let data = rest.get(..len)?;
        extra = &rest[len..];
        Some((id, data))
    })
}

/// The mtime of the central record's extended timestamp ("UT", 0x5455: in the central
/// directory, flags then the modification time alone), read as the zip crate reads it there:
/// the first such field with its four bytes.
fn extended_mtime(extra: &[u8]) -> Option<u32> {
    const EXTENDED_TIMESTAMP: u16 = 0x5455;
    extra_fields(extra)
        .filter(|(id, _)| *id == EXTENDED_TIMESTAMP)
        .find_map(|(_, data)| data.get(1..5))
        .map(|mtime| u32::from_le_bytes([mtime[0], mtime[1], mtime[2], mtime[3]]))
}

/// The mtime of Info-ZIP's old Unix extra field ("UX", 0x5855: access time, then
/// modification time, each 32 bits), which zips made before the extended timestamp carry
/// (Go's `time-osx.zip`); unzip, bsdtar and 7-Zip read it, so the DOS time's local-time
/// guess is not needed.
fn old_unix_mtime(extra: &[u8]) -> Option<u32> {
    const OLD_UNIX: u16 = 0x5855;
    let data = extra_fields(extra).find(|(id, _)| *id == OLD_UNIX)?.1;
    let mtime = data.get(4..8)?;
    Some(u32::from_le_bytes([mtime[0], mtime[1], mtime[2], mtime[3]]))
}

/// Reads the extended-timestamp field's 32-bit time. Writers store the low 32 bits of a signed
/// time, so a value of 2^31 or more is either before 1970 or after 2038; the DOS time, which
/// every entry also has, says which (as Info-ZIP's unzip decides it).
pub(super) fn extended_time(secs: u32, dos: Option<SystemTime>) -> SystemTime {
    let unsigned = UNIX_EPOCH + Duration::from_secs(u64::from(secs));
    if secs < 1 << 31 {
        return unsigned;
    }
    let Some(before_1970) =
        UNIX_EPOCH.checked_sub(Duration::from_secs((1u64 << 32) - u64::from(secs)))
    else {
        return unsigned;
    };
    let distance =
        |t: SystemTime, d: SystemTime| t.duration_since(d).unwrap_or_else(|e| e.duration());
    match dos {
        Some(d) if distance(before_1970, d) < distance(unsigned, d) => before_1970,
        _ => unsigned,
    }
}

/// Converts DOS timestamps (local calendar times, 2-second resolution) to points in time.
///
/// The conversion asks the C library for the time zone, which re-reads `/etc/localtime` on
/// every call; an archive of thousands of entries has few distinct hours, so each hour of each
/// day is converted once and minutes and seconds are added to it.
#[derive(Default)]
pub(super) struct DosClock {
    hours: HashMap<(u16, u8), Option<SystemTime>>,
}

impl DosClock {
    pub(super) fn convert(&mut self, t: zip::DateTime) -> Option<SystemTime> {
        let hour = *self
            .hours
            .entry((t.datepart(), t.hour()))
            .or_insert_with(|| platform::local_time(t.year(), t.month(), t.day(), t.hour(), 0, 0));
        let within = u64::from(t.minute()) * 60 + u64::from(t.second());
        Some(hour? + Duration::from_secs(within))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_times_past_2038_and_before_1970_are_told_apart_by_the_dos_time() {
        let at = |secs: i64| {
            if secs >= 0 {
                UNIX_EPOCH + Duration::from_secs(secs as u64)
            } else {
                UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
            }
        };
        let dos_1980 = Some(at(315_532_800));
        assert_eq!(extended_time(1_700_000_000, dos_1980), at(1_700_000_000));
        // -86400 stored as u32; DOS time clamps to 1980.
        assert_eq!(extended_time((-86_400i32) as u32, dos_1980), at(-86_400));
        // 2040-01-01, DOS time agrees.
        let y2040 = 2_208_988_800u32;
        assert_eq!(
            extended_time(y2040, Some(at(2_208_988_800))),
            at(2_208_988_800)
        );
        assert_eq!(extended_time(y2040, None), at(2_208_988_800));
    }
}
