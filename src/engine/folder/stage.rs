//! Where a run into a new or empty output folder writes: a staging folder of its own, put in
//! place at the end, so that a run killed without warning (SIGKILL, the OOM killer, a crash)
//! leaves nothing under a final name at all, at the cost of one rename per run instead of one
//! per file (docs/design.md, "What a kill leaves").
//!
//! - The output folder does not exist: the tree is made in `.NAME.fastwrite-staging` beside it
//!   and renamed to `NAME` at the end, in one step.
//! - It is an empty folder (the current one, a mount point, one made for the run): the tree is
//!   made in `NAME/.fastwrite-staging`, whose entries move up at the end (a few renames: an
//!   archive has few top-level entries), so the folder itself, its owner and its mode, stay.
//! - It holds files: no staging; every file is written under a temporary name beside its own
//!   and moved into place after its close (`files.rs`).
//!
//! With [`Options::atomic`](crate::Options::atomic) the run is all or nothing: always staged
//! beside (the output folder, if empty, is replaced by the new one), and put in place only if
//! every file was written, closed and verified; otherwise removed. Without it the staging
//! folder is put in place at the end whatever failed, as the files would have been.
//!
//! A killed run's staging folder is found by the next run into the same output folder (its
//! marker, `leftovers.rs`, is no longer locked), removed, and named in a warning.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, bail};

use super::leftovers::{MARK_PREFIX, RunMark, STAGING, clear_making, is_dead, is_making};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::Options;
use crate::place::Place;
use crate::platform::{self, OutDir};
use crate::report::Report;

/// A staging folder and how it is put in place.
pub(crate) struct Staging {
    /// Where the tree is made.
    pub path: PathBuf,
    /// The output folder.
    root: PathBuf,
    way: Way,
}

enum Way {
    /// Renamed to the output folder's name.
    Beside,
    /// Inside the empty output folder: its entries move up. What it was made with, to tell
    /// whether the run set the folder's own mode and mtime (an archive's `./`, a mirror's
    /// root), which then go to the output folder.
    Inside { made: SystemTime, mode: u32 },
}

/// Runs `run` (a whole extraction or mirror into `dest`) staged where it can be, and puts the
/// tree in place after it (see the module's docs). `run` is handed the destination it writes
/// in: `dest` itself, or its staging folder.
pub(crate) fn staged(
    dest: &Place,
    opts: &Options,
    run: impl FnOnce(&Place) -> anyhow::Result<Report>,
) -> anyhow::Result<Report> {
    dest.refuse_what_it_cannot(opts)?;
    if !dest.can().stage {
        // A bucket has no folder to stage in: each object appears whole (docs/object-storage.md).
        return run(dest);
    }
    let root = dest.named();
    // Whatever stops it is about the output folder.
    let (staging, mut warnings) =
        Staging::prepare(root, opts).map_err(|e| Error::start(root, ErrorKind::Directory, e))?;
    let Some(staging) = staging else {
        let mut report = run(dest)?;
        report.warnings.append(&mut warnings);
        return Ok(report);
    };
    let mut report = match run(&dest.staged_in(&staging.path)) {
        Ok(report) => report,
        Err(error) => {
            let _ = staging.discard();
            return Err(error);
        }
    };
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    staging.settle(opts, &mut report, false);
    Ok(report)
}

impl Staging {
    /// Decides how a run into `root` is staged, clears what a killed run's staging left, and
    /// makes the staging folder. `None`: not staged (the folder holds files, or no staging
    /// folder can be made here, or another run is staging into it now). With what to warn of.
    pub fn prepare(root: &Path, opts: &Options) -> anyhow::Result<(Option<Staging>, Vec<String>)> {
        let mut warnings = Vec::new();
        let absolute = std::path::absolute(root)
            .with_context(|| format!("cannot use output folder '{}'", root.display()))?;
        let beside = absolute.file_name().map(|name| {
            let name = name.to_string_lossy();
            absolute.with_file_name(format!(".{name}{STAGING}"))
        });
        // A killed run's staging folder, beside or inside, goes first.
        for left in [beside.clone(), Some(absolute.join(STAGING))]
            .into_iter()
            .flatten()
        {
            if !clear_killed(&left, root, &mut warnings)? {
                // Another run stages there now.
                if opts.atomic {
                    bail!(
                        "another fastwrite run is writing '{}' now ({} in '{}')",
                        root.display(),
                        Setting::Atomic,
                        left.display()
                    );
                }
                return Ok((None, warnings));
            }
        }
        let state = match std::fs::read_dir(&absolute) {
            Ok(mut entries) => match entries.next() {
                None => State::Empty,
                Some(_) => State::Full,
            },
            // (A dangling symlink is not missing: nothing is renamed over it.)
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match std::fs::symlink_metadata(&absolute) {
                    Err(_) => State::Missing,
                    Ok(_) => State::Full,
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(anyhow::Error::new(e))
                    .with_context(|| format!("'{}' is not a folder", root.display()));
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot use output folder '{}'", root.display()));
            }
        };
        if opts.atomic {
            let beside = beside
                .filter(|_| !std::env::current_dir().is_ok_and(|cwd| same_dir(&cwd, &absolute)));
            let Some(path) = beside else {
                bail!(
                    "{} needs an output folder of its own to put in place at the end, not '{}' (name one with -o)",
                    Setting::Atomic,
                    root.display()
                );
            };
            if state == State::Full {
                bail!(
                    "{} makes '{}' appear whole, so it must not exist yet or be empty, and it holds files (files added to a folder that has some are many renames, which a kill could interrupt)",
                    Setting::Atomic,
                    root.display()
                );
            }
            make(&path).with_context(|| format!("cannot create folder '{}'", path.display()))?;
            let root = absolute;
            return Ok((
                Some(Staging {
                    path,
                    root,
                    way: Way::Beside,
                }),
                warnings,
            ));
        }
        let staging = match (state, beside) {
            (State::Missing, Some(path)) => make(&path).ok().map(|()| Staging {
                path,
                root: absolute,
                way: Way::Beside,
            }),
            (State::Empty, _) => {
                let path = absolute.join(STAGING);
                std::fs::create_dir(&path)
                    .and_then(|()| std::fs::metadata(&path))
                    .ok()
                    .map(|meta| Staging {
                        path,
                        root: absolute,
                        way: Way::Inside {
                            made: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                            mode: platform::mode_of(&meta),
                        },
                    })
            }
            _ => None,
        };
        Ok((staging, warnings))
    }

    /// The end of a staged run: the tree put in place (for an atomic run, only if the run
    /// succeeded whole, and did not fail `elsewhere`, as a program's own work can; else it is
    /// removed); the report says what happened.
    pub fn settle(&self, opts: &Options, report: &mut Report, elsewhere: bool) {
        let whole = !elsewhere
            && report.failures.is_empty()
            && report.failures_taken == 0
            && !opts.cancel.is_cancelled();
        if opts.atomic && !whole {
            return self.give_up(report);
        }
        let put = self
            .commit(opts.fsync)
            .and_then(|()| match (&self.way, opts.fsync) {
                (Way::Beside, true) => {
                    platform::sync_path_dir(self.root.parent().unwrap_or(Path::new(".")))
                }
                (Way::Inside { .. }, true) => platform::sync_path_dir(&self.root),
                (_, false) => Ok(()),
            });
        if let Err(e) = put {
            let error = anyhow::Error::new(e).context(format!(
                "putting the finished tree in place: moving '{}' to '{}'",
                self.path.display(),
                self.root.display()
            ));
            report
                .failures
                .push(Error::new("", ErrorKind::Write, error));
            if opts.atomic {
                return self.give_up(report);
            }
            report.warnings.push(format!(
                "what this run wrote is in '{}' (the next run into '{}' removes it)",
                self.path.display(),
                self.root.display()
            ));
        }
    }

    /// An atomic run that did not succeed whole: nothing of it stays.
    fn give_up(&self, report: &mut Report) {
        let gone = match self.discard() {
            Ok(()) => "is removed".to_string(),
            Err(e) => format!(
                "could not all be removed from '{}' ({e}); the next run into '{}' removes them",
                self.path.display(),
                self.root.display()
            ),
        };
        let wrote = match report.files {
            0 => "nothing".to_string(),
            1 => "the 1 file".to_string(),
            n => format!("the {n} files"),
        };
        report.warnings.push(format!(
            "{}: '{}' is left as it was, as the run did not succeed whole: {wrote} it wrote {gone}",
            Setting::Atomic,
            self.root.display(),
        ));
        report.files = 0;
        report.bytes = 0;
        report.dirs = 0;
        report.symlinks = 0;
        report.hardlinks = 0;
        report.specials = 0;
    }

    /// Puts the finished tree in place.
    fn commit(&self, fsync: bool) -> std::io::Result<()> {
        match self.way {
            Way::Beside => {
                if cfg!(windows) && std::fs::symlink_metadata(&self.root).is_ok() {
                    // Windows renames nothing over a folder, even an empty one.
                    std::fs::remove_dir(&self.root)?;
                }
                retry_while_busy(|| std::fs::rename(&self.path, &self.root))
            }
            Way::Inside { made, mode } => {
                let out = OutDir::open(&self.root)?;
                let staging = Path::new(STAGING);
                // The folder's own mode and mtime, where the run set them (an mtime older than
                // the staging folder is an archived one), read before the moves change them.
                let meta = std::fs::metadata(&self.path)?;
                let set_mode = platform::mode_of(&meta);
                let set_mtime = meta.modified().ok().filter(|&t| t < made);
                // A kill while the entries move up leaves some in place: the folder is marked
                // meanwhile, for files made since the staging folder was, so that the next run
                // takes those for this run's (kept, being whole) rather than the user's.
                let mark = RunMark::since(&self.root, fsync, Some(made))?;
                for entry in std::fs::read_dir(&self.path)? {
                    let name = entry?.file_name();
                    retry_while_busy(|| out.move_new(&staging.join(&name), Path::new(&name)))?;
                }
                std::fs::remove_dir(&self.path)?;
                mark.remove(&out);
                if set_mode != mode || set_mtime.is_some() {
                    let mode = (set_mode != mode).then_some(set_mode);
                    out.set_metadata(Path::new(""), mode, set_mtime)?;
                }
                Ok(())
            }
        }
    }

    /// Gives the run up: the staging folder and everything in it go.
    pub fn discard(&self) -> std::io::Result<()> {
        remove_tree(&self.path)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Missing,
    Empty,
    Full,
}

/// Removes the staging folder at `path` if a killed run left it (its marker not locked, or
/// none), saying so. `false`: a run is staging there now.
fn clear_killed(path: &Path, root: &Path, warnings: &mut Vec<String>) -> anyhow::Result<bool> {
    let Ok(entries) = std::fs::read_dir(path) else {
        return Ok(true);
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with(MARK_PREFIX) {
            continue;
        }
        if is_making(&name) {
            if clear_making(&entry.path()) {
                continue;
            }
            return Ok(false);
        }
        if !matches!(is_dead(&entry.path()), Ok(true)) {
            return Ok(false);
        }
    }
    remove_tree(path).with_context(|| {
        format!(
            "cannot remove '{}', which a killed run into '{}' left",
            path.display(),
            root.display()
        )
    })?;
    warnings.push(format!(
        "a fastwrite run into '{}' was killed: removed what it had written, in '{}'",
        root.display(),
        path.display()
    ));
    Ok(true)
}

/// Runs `op`, again for a while if Windows says a file in the way is busy: a scanner (Defender,
/// the indexer) may hold a new file open for a moment, and a folder with an open file in it
/// cannot be renamed there. Elsewhere `op` runs once.
fn retry_while_busy(op: impl Fn() -> std::io::Result<()>) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match op() {
            Err(e)
                if cfg!(windows)
                    && e.kind() == std::io::ErrorKind::PermissionDenied
                    && tries < 20 =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

/// Makes the staging folder (its parents too).
fn make(path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    std::fs::create_dir(path)
}

/// Removes a folder and everything in it, never following a symlink.
fn remove_tree(path: &Path) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default();
    OutDir::open(parent)?.remove_tree(Path::new(name))
}

/// Whether two paths name one folder.
fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
