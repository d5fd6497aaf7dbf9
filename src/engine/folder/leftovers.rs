//! What a run killed without warning (SIGKILL, the OOM killer, a crash) leaves in its output
//! folder, and how the next run knows it.
//!
//! Every run marks the folder while it works: a file `.fastwrite-run-PID` at its root, held
//! locked until the run ends, and removed then. The kernel drops a process's locks when it dies,
//! however it dies, so a marker that can be locked is a killed run's. A run that finds one:
//! - removes the temporary files the killed run left (`.NAME.fastwrite-PID-N`: a file that
//!   took more than one write, or a replacement, not yet moved into place; a folder of that
//!   name goes whole: an image's files parked before their path was known, `park.rs`), and
//!   says so;
//! - treats every file made or changed since the killed run began (its ctime is not older than
//!   the marker's) as that run's: kept if it is complete (the entry's size and mtime, set last),
//!   written again if not, whatever the overwrite policy. A file written with one write can be
//!   under its final name without its content only in that moment; this is how the next run
//!   still never keeps it (docs/design.md, "What a kill leaves");
//! - removes the killed run's marker when it ends itself.
//!
//! A marker still locked is a run going on now: its files are left alone, and a warning says
//! that two runs write into one folder.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::options::Overwrite;
use crate::plan::Entry;
use crate::platform::{self, FileKind, OutDir, Status};

/// The staging folder's name inside an empty output folder, and the end of its name beside one.
pub(super) const STAGING: &str = ".fastwrite-staging";

/// The marker's name, less the process id.
pub(crate) const MARK_PREFIX: &str = ".fastwrite-run-";

/// The end of a marker's name while it is made. A marker is created under it, locked, then
/// renamed to its own name, so that no run ever finds a marker by its own name not yet locked
/// (and takes it for a killed run's, in the moment between `open` and the lock).
const MAKING: &str = ".making";

/// The line of a marker that says since when its run's files were made, if not since the
/// marker itself (seconds and nanoseconds since the Unix epoch).
const SINCE: &str = "since: ";

/// When the run a marker marks began making files: the time its content gives, else the
/// marker's own.
fn began(path: &Path, status: &Status) -> SystemTime {
    let given = std::fs::read_to_string(path).ok().and_then(|text| {
        let line = text.lines().find_map(|l| l.strip_prefix(SINCE))?;
        let (secs, nanos) = line.split_once('.')?;
        let at = Duration::new(secs.parse().ok()?, nanos.parse().ok()?);
        UNIX_EPOCH.checked_add(at)
    });
    given.unwrap_or(status.changed)
}

/// The marker of a run in progress.
pub(super) struct RunMark {
    /// Held open, locked, for the run's life.
    _file: File,
    name: PathBuf,
    /// The folder's mtime before the marker was made, and just after: if nothing else changed
    /// the folder's own entries meanwhile, its mtime is put back when the marker goes.
    mtimes: Option<(SystemTime, SystemTime)>,
}

/// What killed runs left in the output folder.
#[derive(Default)]
pub(super) struct Leftovers {
    /// When the earliest killed run began, as the folder's filesystem tells time.
    pub since: Option<SystemTime>,
    /// The killed runs' markers, removed when this run ends.
    marks: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// Whether the marker at `path` is a killed run's: its lock can be taken (`Ok(false)`: a run
/// holds it now; an error: this filesystem cannot say).
pub(super) fn is_dead(path: &Path) -> std::io::Result<bool> {
    let file = File::options().read(true).write(true).open(path)?;
    platform::try_lock(&file)
}

/// A marker in the making that another run finds at `path`: removed if its lock can be taken
/// (its maker was killed before renaming it, or is between creating and locking it: its
/// rename then fails, and it makes another), `false` if it is locked (a run about to begin).
pub(super) fn clear_making(path: &Path) -> bool {
    let Ok(file) = File::options().read(true).write(true).open(path) else {
        return true;
    };
    match platform::try_lock(&file) {
        Ok(true) => {
            let _ = std::fs::remove_file(path);
            true
        }
        Ok(false) => false,
        // This filesystem cannot lock: as for a marker, left alone and taken for a live run.
        Err(_) => false,
    }
}

/// Whether `name` is a marker in the making (`MAKING`).
pub(super) fn is_making(name: &str) -> bool {
    name.starts_with(MARK_PREFIX) && name.ends_with(MAKING)
}

/// Whether `name` is a temporary name of one of `pids`' runs (`.NAME.fastwrite-PID-N`), or
/// the probe a run makes to time its folder (`.fastwrite-probe-PID`).
fn is_temporary(name: &str, pids: &[u32]) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    if let Some(pid) = rest.strip_prefix("fastwrite-probe-") {
        return pid.parse().is_ok_and(|pid| pids.contains(&pid));
    }
    let Some((_, tail)) = rest.rsplit_once(".fastwrite-") else {
        return false;
    };
    let Some((pid, n)) = tail.split_once('-') else {
        return false;
    };
    !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
        && pid.parse().is_ok_and(|pid| pids.contains(&pid))
}

impl Leftovers {
    /// Looks for killed runs' markers at the root of a folder that was not empty, and removes
    /// the temporary files they left (anywhere below; symlinks are never followed).
    pub fn find(root: &Path, out_dir: &OutDir) -> Leftovers {
        let mut found = Leftovers::default();
        let Ok(entries) = std::fs::read_dir(root) else {
            return found;
        };
        let mut pids = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(MARK_PREFIX))
                .and_then(|rest| rest.split('-').next()?.parse::<u32>().ok())
            else {
                continue;
            };
            // Another lane of this process's run of many sources, into the same folder: alive,
            // whatever its lock says (it may be made and not yet locked; and a look at its lock
            // from here would take it, in that moment, from under its own run).
            if pid == std::process::id() {
                continue;
            }
            let rel = PathBuf::from(&name);
            if name.to_str().is_some_and(is_making) {
                if !clear_making(&root.join(&rel)) {
                    found.warnings.push(format!(
                        "another fastwrite run (process {pid}) is beginning to write into '{}' now: where both write the same path, one of them fails or replaces the other's file",
                        root.display()
                    ));
                }
                continue;
            }
            match is_dead(&root.join(&rel)) {
                Ok(true) => {
                    if let Ok(status) = out_dir.status(&rel) {
                        let began = began(&root.join(&rel), &status);
                        let since = found.since.get_or_insert(began);
                        *since = (*since).min(began);
                    }
                    pids.push(pid);
                    found.marks.push(rel);
                }
                Ok(false) => found.warnings.push(format!(
                    "another fastwrite run (process {pid}) is writing into '{}' now: where both write the same path, one of them fails or replaces the other's file",
                    root.display()
                )),
                Err(error) => found.warnings.push(format!(
                    "'{}' marks a fastwrite run, but whether it still runs cannot be told here ({error}): what it may have left is not touched",
                    root.join(&rel).display()
                )),
            }
        }
        if pids.is_empty() {
            return found;
        }
        let mut removed = Vec::new();
        remove_temporaries(root, Path::new(""), &pids, out_dir, &mut removed);
        let at = found.since.map_or(String::new(), |since| {
            let ago = SystemTime::now()
                .duration_since(since)
                .unwrap_or(Duration::ZERO);
            format!(", which began writing {} ago", roughly(ago))
        });
        let runs = pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let mut warning = format!(
            "a fastwrite run into this folder was killed (process {runs}{at}): files it made are kept where complete and written again where not"
        );
        if !removed.is_empty() {
            let shown: Vec<String> = removed
                .iter()
                .take(10)
                .map(|p| format!("'{}'", p.display()))
                .collect();
            let more = removed.len().saturating_sub(shown.len());
            warning.push_str(&format!(
                "; removed {} unfinished temporary file{} it left: {}{}",
                removed.len(),
                if removed.len() == 1 { "" } else { "s" },
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        found.warnings.push(warning);
        found
    }

    /// Whether `entry`, over `status` found at its path, is a killed run's file: `Some` of
    /// the policy that applies to it then (kept if complete, else replaced).
    pub fn policy(&self, entry: &Entry, status: &Status, asked: Overwrite) -> Option<Overwrite> {
        let since = self.since?;
        if status.changed < since {
            return None;
        }
        match status.kind {
            FileKind::File => Some(if complete(entry, status) && asked != Overwrite::Replace {
                Overwrite::Skip
            } else {
                Overwrite::Replace
            }),
            FileKind::Symlink => Some(Overwrite::Replace),
            FileKind::Dir | FileKind::Other => None,
        }
    }

    /// Removes the killed runs' markers: this run has dealt with what they left.
    pub fn clear(&mut self, out_dir: &OutDir) {
        for mark in self.marks.drain(..) {
            let _ = out_dir.remove_file(&mark);
        }
    }
}

/// Whether the file `status` found at `entry`'s path is the entry written whole: its size,
/// and its mtime (set last).
pub(super) fn complete(entry: &Entry, status: &Status) -> bool {
    status.kind == FileKind::File
        && status.size == entry.size
        && entry
            .mtime
            .is_some_and(|mtime| same_time(mtime, status.modified))
}

/// A duration for a message: seconds, minutes, hours or days.
fn roughly(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..120 => format!("{s} s"),
        120..7200 => format!("{} min", s / 60),
        7200..172_800 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86_400),
    }
}

/// Whether a name at the root of a folder is a run's own: its marker, or its staging folder
/// (`stage.rs`). Never part of the tree.
pub(crate) fn is_run_mark(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.starts_with(MARK_PREFIX) || n == STAGING)
}

/// Two times equal as a filesystem stores them: some keep only whole seconds (or two).
fn same_time(a: SystemTime, b: SystemTime) -> bool {
    let gap = a.duration_since(b).or_else(|e| Ok::<_, ()>(e.duration()));
    gap.is_ok_and(|gap| gap < Duration::from_secs(2))
}

/// Removes, under `rel`, every temporary file of `pids`' runs, noting each.
fn remove_temporaries(
    root: &Path,
    rel: &Path,
    pids: &[u32],
    out_dir: &OutDir,
    removed: &mut Vec<PathBuf>,
) {
    let mut stack = vec![rel.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = dir.join(entry.file_name());
            let temporary = entry
                .file_name()
                .to_str()
                .is_some_and(|n| is_temporary(n, pids));
            if kind.is_dir() && temporary {
                // A folder of files not yet in place (`park.rs`): it goes whole.
                if out_dir.remove_tree(&path).is_ok() {
                    removed.push(path);
                }
            } else if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && temporary && out_dir.remove_file(&path).is_ok() {
                removed.push(path);
            }
        }
    }
    removed.sort();
}

/// Creates the marker at `making`, locks it, writes `text` and renames it to `to`. `None`: another
/// run took it from under this one meanwhile (its lock, or the file itself), to make again.
fn make_locked(making: &Path, to: &Path, text: &str, fsync: bool) -> std::io::Result<Option<File>> {
    let mut file = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(making)?;
    let made = (|| {
        if !platform::try_lock(&file)? {
            return Ok(false);
        }
        file.write_all(text.as_bytes())?;
        if fsync {
            file.sync_all()?;
        }
        match std::fs::rename(making, to) {
            Ok(()) => Ok(true),
            // Removed by another run (Windows: removed, or pending removal, and so denied).
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::PermissionDenied) => {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    })();
    match made {
        Ok(true) => Ok(Some(file)),
        Ok(false) => {
            drop(file);
            let _ = std::fs::remove_file(making);
            Ok(None)
        }
        Err(error) => {
            drop(file);
            let _ = std::fs::remove_file(making);
            Err(error)
        }
    }
}

impl RunMark {
    /// Marks the folder: this run is writing into it.
    pub fn new(root: &Path, fsync: bool) -> std::io::Result<RunMark> {
        RunMark::since(root, fsync, None)
    }

    /// Marks the folder for files made since `since` (by the folder's filesystem's clock), not
    /// since the marker itself: files that were made elsewhere and are moved in (a staging
    /// folder's entries, `stage.rs`) keep the time they were made.
    pub fn since(root: &Path, fsync: bool, since: Option<SystemTime>) -> std::io::Result<RunMark> {
        let before = std::fs::metadata(root).and_then(|m| m.modified());
        static RUNS: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let text = {
            let mut text = format!(
                "fastwrite (process {pid}) is writing into this folder.\nIf no such process runs, it was killed: the next fastwrite run into this folder cleans up after it, and removes this file.\n"
            );
            if let Some(nanos) = since.and_then(|t| t.duration_since(UNIX_EPOCH).ok()) {
                text.push_str(&format!(
                    "{SINCE}{}.{:09}\n",
                    nanos.as_secs(),
                    nanos.subsec_nanos()
                ));
            }
            text
        };
        // Made under a name of its own and locked before it takes its name (`MAKING`). Another
        // run that takes the lock of the one in the making in between removes it: then it is
        // made again, a few times.
        let mut tries = 0;
        let (file, name) = loop {
            tries += 1;
            let n = RUNS.fetch_add(1, Ordering::Relaxed);
            let name = PathBuf::from(format!("{MARK_PREFIX}{pid}-{n}"));
            let making = root.join(format!("{MARK_PREFIX}{pid}-{n}{MAKING}"));
            match make_locked(&making, &root.join(&name), &text, fsync) {
                Ok(Some(file)) => break (file, name),
                Ok(None) if tries < 5 => continue,
                Ok(None) => {
                    return Err(std::io::Error::other(
                        "another run kept taking this run's marker as it was made",
                    ));
                }
                Err(error) => return Err(error),
            }
        };
        if fsync {
            platform::sync_path_dir(root)?;
        }
        let after = std::fs::metadata(root).and_then(|m| m.modified());
        Ok(RunMark {
            _file: file,
            name,
            mtimes: before.ok().zip(after.ok()),
        })
    }

    /// The run is over: the marker goes, and the folder keeps the mtime it has now (the run's
    /// own, or the archive's for its root), or the one it had before the marker if the marker
    /// was all that changed it.
    pub fn remove(self, out_dir: &OutDir) {
        let RunMark {
            _file: file,
            name,
            mtimes,
        } = self;
        drop(file);
        let root = Path::new("");
        let now = out_dir.modified(root);
        if out_dir.remove_file(&name).is_err() {
            return;
        }
        let keep = match (now, mtimes) {
            (Ok(now), Some((before, after))) if now == after => Some(before),
            (Ok(now), _) => Some(now),
            (Err(_), _) => None,
        };
        if let Some(mtime) = keep {
            let _ = out_dir.set_metadata(root, None, Some(mtime));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_told_by_their_run() {
        assert!(is_temporary(".lib.so.fastwrite-41-7", &[41]));
        assert!(is_temporary(".a.b.fastwrite-41-0", &[41]));
        assert!(is_temporary(".fastwrite-probe-41", &[41]));
        assert!(!is_temporary(".lib.so.fastwrite-41-7", &[42]));
        assert!(!is_temporary("lib.so.fastwrite-41-7", &[41]));
        assert!(!is_temporary(".lib.so.fastwrite-41-", &[41]));
        assert!(!is_temporary(".lib.so.fastwrite-41-x", &[41]));
        assert!(!is_temporary(".fastwrite-run-41-0", &[41]));
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_marker_is_locked_before_it_has_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let mark = RunMark::new(dir.path(), false).unwrap();
        let found = names(dir.path());
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with(MARK_PREFIX) && !is_making(&found[0]));
        // Another run's look at it (a lock of its own) finds it held.
        assert!(!is_dead(&dir.path().join(&found[0])).unwrap());
        mark.remove(&OutDir::open(dir.path()).unwrap());
        assert_eq!(names(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn a_marker_in_the_making_is_never_a_killed_run() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // A run of process 4194400 (above any pid) making its marker: not locked yet, and a
        // temporary name of its that must not be taken for a killed run's.
        std::fs::write(root.join(".fastwrite-run-4194400-0.making"), "").unwrap();
        std::fs::write(root.join(".a.fastwrite-4194400-1"), "x").unwrap();
        let out = OutDir::open(root).unwrap();
        let found = Leftovers::find(root, &out);
        assert_eq!(found.since, None);
        assert_eq!(found.warnings, Vec::<String>::new());
        // Removed (its maker makes another), and nothing of the run's touched.
        assert_eq!(names(root), [".a.fastwrite-4194400-1"]);
        // Locked: a run about to begin, said as one that runs.
        let making = root.join(".fastwrite-run-4194401-0.making");
        let held = File::create(&making).unwrap();
        assert!(platform::try_lock(&held).unwrap());
        let found = Leftovers::find(root, &out);
        assert_eq!(found.since, None);
        assert_eq!(found.warnings.len(), 1, "{:?}", found.warnings);
        assert!(found.warnings[0].contains("beginning to write"));
        assert!(making.exists());
    }

    #[test]
    fn times_a_filesystem_rounds_are_the_same() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert!(same_time(t, t + Duration::from_millis(999)));
        assert!(same_time(t + Duration::from_millis(999), t));
        assert!(!same_time(t, t + Duration::from_secs(3)));
    }
}
