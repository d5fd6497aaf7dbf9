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
mod schedule;
pub(super) mod stream;

use std::collections::HashMap;
use std::fs::File;
use std::io::{Cursor, Read};
use std::ops::Deref;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use zip::ExtraField;
use zip::ZipArchive;

use crate::engine::{self, Content};
use crate::error::{Error, ErrorKind, Tag};
use crate::options::Options;
use crate::plan::{self, Entry, EntryKind, Plan};
use crate::platform;
use crate::report::Report;

use super::list::{Listed, ListedKind};
use super::select::{Choice, Chooser};
use direct::Direct;
use schedule::Schedule;

mod integrity;

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

fn load(path: &Path, mut file: File) -> anyhow::Result<Bytes> {
    // SAFETY: see the module header: the mapping is read-only, and the one hazard (another
    // process truncating the archive meanwhile) is the accepted trade-off of every mmap reader.
    if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
        return Ok(Bytes::Mapped(map));
    }
    let mut bytes = Vec::new();
    std::io::Seek::rewind(&mut file)
        .and_then(|_| file.read_to_end(&mut bytes))
        .with_context(|| format!("cannot read archive '{}'", path.display()))?;
    Ok(Bytes::Owned(bytes))
}

pub(super) type Archive<'a> = ZipArchive<Cursor<&'a [u8]>>;

/// Extracts the zip `file` (named `path` in messages) into `out`.
pub(super) fn extract(
    path: &Path,
    file: File,
    out: &Path,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    let bytes = load(path, file)?;
    let archive = ZipArchive::new(Cursor::new(&bytes[..]))
        .with_context(|| format!("'{}' is not a readable zip archive", path.display()))?;
    let mut password = Password::new(opts);
    let mut plan = build_plan(&mut archive.clone(), &bytes, chooser, &mut password)
        .with_context(|| format!("refused '{}': nothing was extracted", path.display()))?;
    super::limits::check_declared(&plan, out, opts)?;

    let (mut report, ()) = engine::run(out, opts, |engine, writers| {
        writers.install(|| engine.prepare(&mut plan));
        let files: Vec<&Entry> = plan
            .entries
            .iter()
            .filter(|e| e.kind == EntryKind::File)
            .collect();
        let costs: Vec<u64> = files.iter().map(|e| e.size).collect();
        engine
            .reporter()
            .planned(files.len() as u64, costs.iter().sum());
        let schedule = Schedule::new(&costs, writers.current_num_threads());
        writers.broadcast(|_| {
            let (mut archive, mut writer) = (archive.clone(), engine.writer());
            let mut direct = Direct::new();
            while let Some(taken) = schedule.take() {
                for &i in schedule.items(taken) {
                    let entry = files[i];
                    let written = write_entry(
                        &mut archive,
                        &bytes,
                        &password,
                        &mut writer,
                        &mut direct,
                        entry,
                    );
                    if let Err(error) = written {
                        engine.record(Error::new(&entry.name, ErrorKind::Source, error));
                    }
                }
            }
        });
    })?;
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
    // The password is used only for the entries that are encrypted.
    let opened = match &password.known {
        Some(password) => archive.by_index_decrypt(entry.index, password),
        None => archive.by_index(entry.index),
    };
    match opened {
        Ok(mut reader) => {
            writer.write(entry, Content::Reader(&mut reader));
            Ok(())
        }
        Err(zip::result::ZipError::InvalidPassword) => Err(anyhow::anyhow!(
            "wrong password: the entry cannot be decrypted with it"
        )),
        Err(e) => Err(anyhow::Error::new(e).context("cannot read the entry")),
    }
}

/// Lists a zip from its central directory: every entry the selection takes, with what
/// extracting it would do (the same plan and checks as [`extract`]). `Err` for a zip refused
/// whole (overlapping entries, an unreadable central directory) is an `anyhow` error: nothing
/// is listed then.
pub(super) fn list(
    path: &Path,
    file: File,
    chooser: &Chooser,
    each: &mut dyn FnMut(&Listed),
) -> Result<(), Error> {
    let not_listed =
        |error: anyhow::Error| Error::new(path.display().to_string(), ErrorKind::Source, error);
    let bytes = load(path, file).map_err(not_listed)?;
    let archive = ZipArchive::new(Cursor::new(&bytes[..]))
        .with_context(|| format!("'{}' is not a readable zip archive", path.display()))
        .map_err(not_listed)?;
    // Listing reads no data: encrypted entries are listed as they are, password or not.
    let mut password = Password {
        known: Some(Vec::new()),
        prompt: None,
        asked: true,
    };
    let plan = build_plan(&mut archive.clone(), &bytes, chooser, &mut password)
        .context("refused whole: extract would write nothing")
        .map_err(not_listed)?;
    let planned: HashMap<usize, &Entry> = plan.entries.iter().map(|e| (e.index, e)).collect();
    let refused: HashMap<&Path, String> = plan
        .rejected
        .iter()
        .map(|e| (e.path(), e.message()))
        .collect();
    let mut archive = archive;
    for index in 0..archive.len() {
        let name = entry_name(&archive, index);
        let entry = planned.get(&index);
        let problem = refused.get(Path::new(&name)).cloned();
        if entry.is_none() && problem.is_none() {
            // Not selected, or the output folder itself (`./`).
            continue;
        }
        let Ok(zf) = archive.by_index_raw(index) else {
            continue;
        };
        let kind = if zf.is_symlink() {
            ListedKind::Symlink
        } else if zf.is_dir() {
            ListedKind::Dir
        } else {
            ListedKind::File
        };
        let mode = unix_mode(&zf);
        let size = if kind == ListedKind::File {
            zf.size()
        } else {
            0
        };
        drop(zf);
        let target = (kind == ListedKind::Symlink)
            .then(|| symlink_target(&mut archive, index))
            .flatten();
        each(&Listed {
            kind,
            mode,
            size,
            mtime: entry.and_then(|e| e.mtime),
            name,
            path: entry.map(|e| e.path.clone()),
            target,
            problem,
        });
    }
    Ok(())
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

/// Reads the central directory (and local headers) into a validated plan. Nothing is written.
/// An `Err`: the archive as a whole is refused (its entries overlap: a zip bomb).
/// The password for a zip's encrypted entries: the one given, or the prompt's answer, asked
/// the first time an encrypted entry is met (so a zip with none never asks, and costs nothing
/// more).
pub(super) struct Password<'a> {
    known: Option<Vec<u8>>,
    prompt: Option<&'a (dyn Fn() -> Option<Vec<u8>> + Send + Sync)>,
    asked: bool,
}

impl<'a> Password<'a> {
    pub fn new(opts: &'a Options) -> Password<'a> {
        Password {
            known: opts.password.clone(),
            prompt: opts.password_prompt.as_deref(),
            asked: false,
        }
    }

    /// No password, and none to ask for.
    #[cfg(fuzzing)]
    pub fn none() -> Password<'static> {
        Password {
            known: None,
            prompt: None,
            asked: true,
        }
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

pub(super) fn build_plan(
    archive: &mut Archive<'_>,
    bytes: &[u8],
    chooser: &Chooser,
    password: &mut Password<'_>,
) -> anyhow::Result<Plan> {
    let mut plan = Plan::default();
    let mut spans = Vec::with_capacity(archive.len());
    let mut unreadable = Vec::new();
    let mut clock = DosClock::default();
    let mut case = plan::CaseGuard::new();
    for index in 0..archive.len() {
        let zf = match archive.by_index_raw(index) {
            Ok(zf) => zf,
            Err(e) => {
                unreadable.push((index, e));
                continue;
            }
        };
        let lossy = || String::from_utf8_lossy(zf.name_raw()).into_owned();
        let local = integrity::local_header(bytes, zf.header_start());
        let central = integrity::Central::read(
            bytes,
            zf.central_header_start(),
            zf.crc32(),
            zf.compressed_size(),
            zf.size(),
        );
        let (Some(local), Some(central)) = (local, central) else {
            let error = anyhow::anyhow!("its local header or central directory record is damaged");
            plan.reject(lossy(), ErrorKind::Source, error);
            continue;
        };
        spans.push(integrity::Span {
            entry: index,
            start: zf.header_start(),
            end: local.data_start.saturating_add(zf.compressed_size()),
        });
        if let Some(disagreement) = integrity::disagreement(&local, &central) {
            let error = anyhow::anyhow!(
                "refused: {disagreement}: readers of local headers and of the central directory would extract different things"
            );
            plan.reject(lossy(), ErrorKind::Refused, error);
            continue;
        }
        let name = match zf.name() {
            Ok(name) => name.into_owned(),
            Err(e) => {
                let error = anyhow::Error::new(e).context("undecodable name");
                plan.reject(lossy(), ErrorKind::Source, error);
                continue;
            }
        };
        let chosen = match chooser.choose(name.as_bytes(), zf.is_dir()) {
            Choice::Take(chosen) => chosen,
            Choice::Skip => continue,
            Choice::Refuse(why) => {
                plan.reject(name, ErrorKind::Refused, anyhow::anyhow!("refused: {why}"));
                continue;
            }
        };
        // What is left of a UTF-8 name after whole components is UTF-8 (and most names are
        // taken whole: not checked again).
        let chosen = if chosen.len() == name.len() {
            std::borrow::Cow::Borrowed(name.as_str())
        } else {
            String::from_utf8_lossy(&chosen)
        };
        if zf.is_dir() && plan::is_root(&chosen) {
            continue;
        }
        let path = match plan::safe_relative_path(&chosen).and_then(|path| {
            case.check(&path)?;
            Ok(path)
        }) {
            Ok(path) => path,
            Err(refusal) => {
                plan.reject(
                    name,
                    ErrorKind::Refused,
                    anyhow::anyhow!("refused: {refusal}"),
                );
                continue;
            }
        };
        if zf.encrypted() && password.get().is_none() {
            let error = anyhow::anyhow!(
                "encrypted: give its password with --password, the FASTWRITE_PASSWORD environment variable, or at the prompt"
            );
            plan.reject(name, ErrorKind::Source, error);
            continue;
        }
        let kind = if zf.is_symlink() {
            EntryKind::Symlink {
                target: Default::default(),
            }
        } else if zf.is_dir() {
            EntryKind::Dir
        } else {
            EntryKind::File
        };
        let dos = zf.last_modified().and_then(|t| clock.convert(t));
        let mtime = zf
            .extra_data_fields()
            .find_map(|field| match field {
                ExtraField::ExtendedTimestamp(ts) => ts.mod_time(),
                _ => None,
            })
            .map(|secs| extended_time(secs, dos))
            .or(dos);
        plan.entries.push(Entry {
            name,
            path,
            kind,
            mode: unix_mode(&zf),
            mtime,
            size: zf.size(),
            index,
            sparse: false,
            replaces: false,
        });
    }
    for (index, e) in unreadable {
        let name = entry_name(archive, index);
        let error = anyhow::Error::new(e).context("unreadable entry header");
        plan.reject(name, ErrorKind::Source, error);
    }
    if archive.has_duplicate_names() {
        plan.warnings.push(
            "the archive names some entries more than once; one entry of each name was extracted"
                .into(),
        );
    }

    // Nothing below a symlink of the archive, even one refused below (as for a tar).
    plan.refuse_paths_through_symlinks();
    let symlinks: Vec<usize> = (0..plan.entries.len())
        .filter(|&i| matches!(plan.entries[i].kind, EntryKind::Symlink { .. }))
        .collect();
    // A symlink's target is its content; read and check it now, before anything is written.
    let mut refused = Vec::new();
    for &i in &symlinks {
        let entry = &mut plan.entries[i];
        match read_link_target(archive, entry, password.known.as_deref()) {
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
    if let Some(overlap) = integrity::find_overlap(&mut spans, archive.central_directory_start()) {
        let overlap = overlap.describe(|index| entry_name(archive, index));
        anyhow::bail!(
            "{overlap}: overlapping entries are how a zip bomb multiplies a small file into gigabytes, and no zip writer makes them (Info-ZIP's unzip refuses them too)"
        );
    }
    Ok(plan)
}

/// An entry's name for a message, by its index in the central directory.
fn entry_name(archive: &Archive<'_>, index: usize) -> String {
    archive
        .name_for_index(index)
        .and_then(Result::ok)
        .map_or_else(|| format!("entry #{index}"), |n| n.into_owned())
}

/// The entry's permission bits. The zip crate's `unix_mode` clears setuid, setgid and sticky;
/// they are taken back from the raw attributes here, and `--keep-setid` decides later.
fn unix_mode<R: Read>(zf: &zip::read::ZipFile<'_, R>) -> Option<u32> {
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

/// Reads the extended-timestamp field's 32-bit time. Writers store the low 32 bits of a signed
/// time, so a value of 2^31 or more is either before 1970 or after 2038; the DOS time, which
/// every entry also has, says which (as Info-ZIP's unzip decides it).
fn extended_time(secs: u32, dos: Option<SystemTime>) -> SystemTime {
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
struct DosClock {
    hours: HashMap<(u16, u8), Option<SystemTime>>,
}

impl DosClock {
    fn convert(&mut self, t: zip::DateTime) -> Option<SystemTime> {
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
