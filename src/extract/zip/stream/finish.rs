//! What the central directory of a zip stream says, applied once every entry is written and
//! closed: a local header has no host, attributes or Unix mode, so the stream wrote each entry
//! as its local header allows, and this puts right what only the central directory knows. Each
//! record speaks for the local header at the offset it gives (its name is only the fallback),
//! so a record can name its entry otherwise than the local header did:
//! - the same bytes, read otherwise: a name that is not UTF-8 is kept byte for byte on Unix
//!   where the zip was not made on MS-DOS, as from a file (the stream wrote it as CP437, since
//!   its local header does not say where it was made): the entry is moved to that name, with
//!   the same checks as every name; one that fails them is refused and what was written under
//!   the local name is removed;
//! - other bytes: the two headers disagree, which a zip read from a file refuses
//!   (`integrity.rs`), and so does this: the entry is refused and what was written removed;
//!   so is one whose method, encryption, CRC-32 or sizes differ;
//! - a folder marked only by its MS-DOS attribute, written as a file, becomes a folder;
//! - a symlink, written as a file holding its target, becomes a symlink (if the target stays
//!   inside OUT, as every symlink's must), and Unix modes are set.
//!
//! A record with no local header where it says (and none of its name) names an entry whose
//! header the stream passed over as bytes that were no header: it failed, and is said.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use anyhow::{Context, anyhow};

use crate::engine;
use crate::error::{Error, ErrorKind};
use crate::extract::select::{Choice, Chooser};
use crate::plan;
use crate::platform::{FileKind, OutDir};
use crate::report::Report;
use crate::sync::Unpoisoned;

use super::super::integrity;
use super::super::planning::{self, ZipKind};
use super::Written;
use super::central::{Directory, Record};

const UNIX_HOST: u8 = 3;

/// What a record says its entry is, as a zip read from a file decides it
/// ([`kind_of`](super::super::planning::kind_of)): a name ending in `/` is a folder; else the
/// Unix file type where it was made on Unix; else the MS-DOS folder attribute.
pub(super) fn kind(record: &Record) -> ZipKind {
    planning::kind_from(
        record.name.ends_with(b"/"),
        zip::System::from(record.host),
        record.external,
    )
}

/// A record's name as a zip read from a file has it ([`planning::name_bytes`], from the raw
/// name the zip crate gives, which is a valid Unicode Path field's where there is one).
fn name_bytes(record: &Record) -> Vec<u8> {
    let raw = super::unicode_path(&record.name, &record.extra)
        .map_or(record.name.as_slice(), str::as_bytes);
    let decoded = || Ok(super::decode_name(raw, &[], record.flags).into());
    match planning::name_bytes(raw, zip::System::from(record.host), decoded) {
        Ok(name) => name.into_owned(),
        Err(_) => raw.to_vec(),
    }
}

/// One entry that was written, and what its record says of it.
struct Settled<'w> {
    /// Its name in messages, as a zip read from a file names it.
    name: String,
    written: &'w Written,
    /// Where it ends (where it was written, or the record's name for it).
    path: PathBuf,
    kind: ZipKind,
    /// Its Unix mode, where it was made on Unix.
    mode: Option<u32>,
}

/// Applies `directory` to what was `written` (each by its local header's offset in the stream;
/// `seen`: every local header's raw name, by offset; `prefix`: bytes before the zip in the
/// stream) in the folder the run's target holds (`root`), whose entries `chooser` chose.
pub(super) fn apply(
    root: Option<&OutDir>,
    written: &HashMap<u64, Written>,
    seen: &HashMap<u64, Vec<u8>>,
    prefix: u64,
    directory: &Directory,
    chooser: &Chooser,
    report: &mut Report,
) {
    // (While the run is staged, its tree is in the staging folder, which the target holds; a
    // store's objects are as their local headers made them.)
    let Some(root) = root else {
        return;
    };
    let records = &directory.records;
    let placed = directory.by_stream_offset(seen, prefix);
    // A record that finds no local header where it says: the last local header of its name.
    let mut last_of_name: HashMap<&[u8], u64> = HashMap::new();
    for (&at, name) in seen {
        let last = last_of_name.entry(name.as_slice()).or_insert(at);
        *last = (*last).max(at);
    }
    let claimed: HashSet<usize> = placed.values().copied().collect();
    let mut pairs: Vec<(usize, u64)> = placed.iter().map(|(&at, &i)| (i, at)).collect();
    for (i, record) in records.iter().enumerate() {
        if claimed.contains(&i) {
            continue;
        }
        match last_of_name.get(record.name.as_slice()) {
            Some(&at) if !placed.contains_key(&at) => pairs.push((i, at)),
            Some(_) => {}
            None => lost(i, record, chooser, report),
        }
    }
    pairs.sort_unstable_by_key(|&(i, _)| i);

    // The last copy of a path is the one the run kept: what the records of earlier copies say
    // is not applied to it.
    // (Keyed by the paths' bytes: they are built in one spelling, and hashing a `Path`
    // walks its components.)
    let mut last_at: HashMap<&OsStr, u64> = HashMap::new();
    for (&at, w) in written {
        let last = last_at.entry(w.path.as_os_str()).or_insert(at);
        *last = (*last).max(at);
    }
    let mut settled = Vec::new();
    for (i, at) in pairs {
        let Some(written) = written.get(&at) else {
            continue; // not chosen, or failed: said when it was read
        };
        if last_at.get(written.path.as_os_str()) != Some(&at) {
            continue;
        }
        let record = &records[i];
        match settle(record, written, chooser) {
            Ok(Some(entry)) => settled.push(entry),
            Ok(None) => remove(root, written, report),
            Err(error) => {
                remove(root, written, report);
                report.failures.push(error);
            }
        }
    }
    // Where a name moved, the folders it left and reached were changed: their mtimes are set
    // again last.
    let mut touched: Vec<PathBuf> = Vec::new();
    rename(root, &mut settled, report, &mut touched);
    make_folders(root, &settled, report, &mut touched);
    links_and_modes(root, &settled, report, &mut touched);
    touched.sort();
    touched.dedup();
    let mtimes: HashMap<&Path, Option<SystemTime>> = settled
        .iter()
        .filter(|s| s.kind == ZipKind::Dir)
        .map(|s| (s.path.as_path(), s.written.mtime))
        .collect();
    for dir in touched {
        if let Some(Some(mtime)) = mtimes.get(dir.as_path())
            && let Err(e) = root.set_metadata(&dir, None, Some(*mtime))
        {
            let error = anyhow::Error::new(e).context("setting its mtime again");
            report
                .failures
                .push(Error::new(&dir, ErrorKind::Metadata, error));
        }
    }
}

/// A record (the directory's `index`th) whose local header the stream never met: said, if it
/// is chosen.
fn lost(index: usize, record: &Record, chooser: &Chooser, report: &mut Report) {
    let name = name_bytes(record);
    if matches!(
        chooser.choose(&name, kind(record) == ZipKind::Dir),
        Choice::Skip
    ) {
        return;
    }
    let error = anyhow!(
        "the central directory lists it, and the stream has no local header for it (bytes that were no header were passed over): nothing of it was written"
    );
    let shown = match plan::display_bytes(&name) {
        shown if shown.is_empty() => format!("entry #{} of the central directory", index + 1),
        shown => shown,
    };
    report
        .failures
        .push(Error::new(shown, ErrorKind::Source, error));
}

/// What `record` makes of what was written of its entry: `Ok(None)` where its name is not
/// chosen, `Err` where it is refused.
fn settle<'w>(
    record: &Record,
    written: &'w Written,
    chooser: &Chooser,
) -> Result<Option<Settled<'w>>, Error> {
    let bytes = name_bytes(record);
    // (A record may name nothing at all: it is then named as the stream read it.)
    let name = match plan::display_bytes(&bytes) {
        name if name.is_empty() => written.name.clone(),
        name => name,
    };
    let refused = |why: String| Error::new(&name, ErrorKind::Refused, anyhow!("refused: {why}"));
    if let Some(disagreement) = disagreement(record, written) {
        return Err(refused(format!(
            "{disagreement}: readers of local headers and of the central directory would extract different things; what was written of it was removed"
        )));
    }
    let kind = kind(record);
    let chosen = match chooser.choose(&bytes, kind == ZipKind::Dir) {
        Choice::Take(chosen) => chosen,
        Choice::Skip => return Ok(None),
        Choice::Refuse(why) => {
            return Err(refused(format!(
                "{why}; what was written of it was removed"
            )));
        }
    };
    let path = if kind == ZipKind::Dir && plan::is_root(&String::from_utf8_lossy(&chosen)) {
        written.path.clone()
    } else {
        plan::safe_relative_bytes(&chosen)
            .map_err(|refusal| refused(format!("{refusal}; what was written of it was removed")))?
    };
    let mode = (record.host == UNIX_HOST)
        .then_some(record.external >> 16)
        .filter(|&mode| mode != 0);
    Ok(Some(Settled {
        name,
        written,
        path,
        kind,
        mode,
    }))
}

/// How the local header the stream read disagrees with its record, in what a zip read from a
/// file compares ([`integrity::disagreement`]); for an entry with a data descriptor, the CRC-32
/// and sizes are those the descriptor confirmed.
fn disagreement(record: &Record, written: &Written) -> Option<String> {
    const DATA_DESCRIPTOR_FLAG: u16 = 1 << 3;
    let mut local = integrity::local_header(&written.header, 0)?;
    if let Some(data) = written.described {
        local.flags &= !DATA_DESCRIPTOR_FLAG;
        local.crc = data.crc;
        local.compressed = data.compressed;
        local.uncompressed = Some(data.len);
    }
    let central = integrity::Central {
        flags: record.flags & !DATA_DESCRIPTOR_FLAG | local.flags & DATA_DESCRIPTOR_FLAG,
        method: record.method,
        crc: record.crc,
        // A value its zip64 field lacks (said as damage) is not compared.
        compressed: record.compressed.or(local.compressed).unwrap_or_default(),
        uncompressed: record
            .uncompressed
            .or(local.uncompressed)
            .unwrap_or_default(),
        name: &record.name,
        extra: &record.extra,
    };
    integrity::disagreement(&local, &central)
}

/// Removes what was written of an entry that is refused or not chosen after all: a file, or a
/// folder that holds nothing.
fn remove(root: &OutDir, written: &Written, report: &mut Report) {
    if written.dir {
        if is_empty_folder(root, &written.path) {
            let _ = root.remove_tree(&written.path);
            report.dirs = report.dirs.saturating_sub(1);
        }
    } else if root.remove_file(&written.path).is_ok() {
        report.files = report.files.saturating_sub(1);
    }
}

/// Whether `path` under `root` is a folder (not a symlink) with nothing in it.
fn is_empty_folder(root: &OutDir, path: &Path) -> bool {
    matches!(root.kind(path), Ok(FileKind::Dir))
        && std::fs::read_dir(root.path().join(path)).is_ok_and(|mut d| d.next().is_none())
}

/// Where `path` is now that the folders in `moved` moved (where each was, where it is).
fn now(moved: &HashMap<PathBuf, PathBuf>, path: &Path) -> PathBuf {
    let mut at = PathBuf::new();
    for part in path.components() {
        at.push(part);
        if let Some(to) = moved.get(&at) {
            at = to.clone();
        }
    }
    at
}

/// Moves each entry whose record names it otherwise to that name, shallowest first: a folder
/// moves with what it holds, and a folder the stream made for an entry's local name (with no
/// entry of its own) moves where the record's name puts it, so none is left behind empty.
fn rename(
    root: &OutDir,
    settled: &mut Vec<Settled<'_>>,
    report: &mut Report,
    touched: &mut Vec<PathBuf>,
) {
    // Folders moved: where each was, where it is.
    let mut moved: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut order: Vec<usize> = (0..settled.len())
        .filter(|&i| settled[i].path != settled[i].written.path)
        .collect();
    if order.is_empty() {
        // Every entry is where the stream wrote it (a zip whose names are UTF-8, or flagged
        // as such: most): nothing moves.
        return;
    }
    order.sort_by_key(|&i| settled[i].path.components().count());
    let mut failed = Vec::new();
    for i in order {
        let (from, to, dir) = {
            let s = &settled[i];
            (now(&moved, &s.written.path), s.path.clone(), s.written.dir)
        };
        if from == to {
            continue;
        }
        if let Err(error) = move_one(root, &mut moved, (&from, &to, dir), touched) {
            let at = now(&moved, &settled[i].written.path);
            let removed = if dir {
                is_empty_folder(root, &at) && root.remove_tree(&at).is_ok()
            } else {
                root.remove_file(&at).is_ok()
            };
            let error = if removed {
                error.context("what was written under its local header's name was removed")
            } else {
                error
            };
            report
                .failures
                .push(Error::new(&settled[i].name, ErrorKind::Write, error));
            failed.push(i);
        }
    }
    // A moved folder carries what is inside it: every entry's path is where it now is.
    for s in settled.iter_mut() {
        let at = now(&moved, &s.path);
        s.path = at;
    }
    remove_left_behind(root, settled, &moved, touched);
    failed.sort_unstable();
    for i in failed.into_iter().rev() {
        settled.remove(i);
    }
}

/// Moves one entry from `from` to `to` (a folder with what it holds), making or moving the
/// folders on the way, shallowest first: one the stream made under another spelling moves
/// there; one that is missing is made.
fn move_one(
    root: &OutDir,
    moved: &mut HashMap<PathBuf, PathBuf>,
    (from, to, dir): (&Path, &Path, bool),
    touched: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let depth = to.components().count();
    for level in 1..depth {
        let want: PathBuf = to.components().take(level).collect();
        match root.kind(&want) {
            Ok(FileKind::Dir) => continue,
            Ok(_) => anyhow::bail!(
                "cannot move it to its name in the central directory: '{}' is in the way, and not a folder",
                want.display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context("cannot move it to its name in the central directory"));
            }
        }
        let was: PathBuf = now(moved, from).components().take(level).collect();
        if was != want && matches!(root.kind(&was), Ok(FileKind::Dir)) {
            root.move_new(&was, &want).with_context(|| {
                format!(
                    "cannot move the folder '{}' to '{}'",
                    was.display(),
                    want.display()
                )
            })?;
            touched.extend(was.parent().map(Path::to_path_buf));
            moved.insert(was, want.clone());
        } else {
            root.create_dir(&want)
                .with_context(|| format!("cannot make the folder '{}'", want.display()))?;
        }
        touched.extend(want.parent().map(Path::to_path_buf));
    }
    let from = now(moved, from);
    root.move_new(&from, to)
        .context("cannot move it to its name in the central directory (something is in the way)")?;
    touched.extend(from.parent().map(Path::to_path_buf));
    touched.extend(to.parent().map(Path::to_path_buf));
    if dir {
        moved.insert(from, to.to_path_buf());
    }
    Ok(())
}

/// The folders the stream made for local names that split otherwise (a CP437 name's `\` is a
/// separator, a Shift-JIS name's byte is not) and that nothing is in now: removed.
fn remove_left_behind(
    root: &OutDir,
    settled: &[Settled<'_>],
    moved: &HashMap<PathBuf, PathBuf>,
    touched: &mut Vec<PathBuf>,
) {
    let kept: HashSet<&Path> = settled.iter().flat_map(|s| s.path.ancestors()).collect();
    let mut left: Vec<PathBuf> = settled
        .iter()
        .filter(|s| s.path != s.written.path)
        .flat_map(|s| s.written.path.ancestors().skip(1))
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| now(moved, p))
        .filter(|p| !kept.contains(p.as_path()))
        .collect();
    left.sort();
    left.dedup();
    left.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for folder in left {
        if is_empty_folder(root, &folder) && root.remove_tree(&folder).is_ok() {
            touched.extend(folder.parent().map(Path::to_path_buf));
        }
    }
}

/// Makes a folder of each entry its record calls one (by its MS-DOS attribute, or its Unix
/// type) and the stream wrote as a file.
fn make_folders(
    root: &OutDir,
    settled: &[Settled<'_>],
    report: &mut Report,
    touched: &mut Vec<PathBuf>,
) {
    for s in settled {
        if s.kind != ZipKind::Dir || s.written.dir {
            continue;
        }
        let made = root
            .remove_file(&s.path)
            .context("making a folder of it, as the central directory says it is")
            .and_then(|()| {
                root.create_dir(&s.path)
                    .context("making a folder of it, as the central directory says it is")
            });
        match made {
            Ok(()) => {
                report.files = report.files.saturating_sub(1);
                report.dirs += 1;
                touched.extend(s.path.parent().map(Path::to_path_buf));
                touched.push(s.path.clone());
            }
            Err(error) => report
                .failures
                .push(Error::new(&s.name, ErrorKind::Write, error)),
        }
    }
}

/// Symlinks made from the files holding their targets, and Unix modes set. A depth level at a
/// time, deepest first (a folder's mode, perhaps read-only, after what is inside it), each
/// level in parallel: on a network filesystem each change is a round trip.
fn links_and_modes(
    root: &OutDir,
    settled: &[Settled<'_>],
    report: &mut Report,
    touched: &mut Vec<PathBuf>,
) {
    let mut todo: Vec<&Settled<'_>> = settled
        .iter()
        .filter(|s| s.mode.is_some() || s.kind == ZipKind::Symlink)
        .collect();
    if todo.is_empty() {
        return;
    }
    let links: Mutex<Vec<PathBuf>> = Mutex::default();
    let failures: Mutex<Vec<Error>> = Mutex::default();
    let symlinks = std::sync::atomic::AtomicU64::new(0);
    let umask = crate::platform::current_umask();
    let apply = |s: &&Settled<'_>| {
        let (path, mtime) = (&s.path, s.written.mtime);
        let result = if s.kind == ZipKind::Symlink && !s.written.dir {
            links
                .lock()
                .unpoisoned()
                .extend(path.parent().map(Path::to_path_buf));
            make_symlink(root, path, mtime).map(|()| {
                symlinks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
        } else if let Some(mode) = s.mode {
            let bits = mode & 0o777;
            let dir = s.kind == ZipKind::Dir;
            let default = if dir { 0o777 } else { 0o666 };
            if bits == default & !umask {
                Ok(())
            } else {
                root.set_metadata(path, Some(bits), None)
                    .map_err(|e| anyhow::Error::new(e).context("setting its mode"))
                    .and_then(|()| restore_mtime(root, path, mtime, dir))
            }
        } else {
            Ok(())
        };
        if let Err(error) = result {
            let kind = if format!("{error}").starts_with("refused") {
                ErrorKind::Refused
            } else {
                ErrorKind::Metadata
            };
            failures
                .lock()
                .unpoisoned()
                .push(Error::new(&s.name, kind, error));
        }
    };
    // On as many threads as the run had writers (sized for the output's filesystem).
    let depth = |s: &&Settled<'_>| s.path.components().count();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(report.writers.max(1))
        .thread_name(|i| format!("fastwrite-modes-{i}"))
        .build();
    match &pool {
        Ok(pool) => pool.install(|| engine::deepest_first(&mut todo, depth, apply)),
        Err(_) => engine::deepest_first(&mut todo, depth, apply),
    }
    report.symlinks += symlinks.into_inner();
    report
        .failures
        .append(&mut failures.into_inner().unpoisoned());
    touched.append(&mut links.into_inner().unpoisoned());
}

/// A folder's mtime, set again after its mode (a file's is unchanged by chmod).
fn restore_mtime(
    root: &OutDir,
    path: &Path,
    mtime: Option<SystemTime>,
    dir: bool,
) -> anyhow::Result<()> {
    match mtime.filter(|_| dir) {
        Some(mtime) => root
            .set_metadata(path, None, Some(mtime))
            .context("setting its mtime"),
        None => Ok(()),
    }
}

/// Turns the file at `path`, which holds a symlink's target, into that symlink (if the target
/// stays inside OUT, as every symlink's must).
fn make_symlink(root: &OutDir, path: &Path, mtime: Option<SystemTime>) -> anyhow::Result<()> {
    let target = std::fs::read(root.path().join(path)).context("reading the symlink's target")?;
    let target = String::from_utf8(target)
        .map_err(|_| anyhow!("refused: the symlink target is not UTF-8"))?;
    let removed = root.remove_file(path).context("replacing it by a symlink");
    plan::check_symlink_target(path, &target).map_err(|r| anyhow!("refused: {r}"))?;
    removed?;
    root.symlink(Path::new(&target), path)
        .context("creating the symlink")?;
    if let Some(mtime) = mtime {
        root.set_metadata(path, None, Some(mtime))
            .context("setting the symlink's mtime")?;
    }
    Ok(())
}
