//! Directories: each created once, parents first, before any file in it.
//!
//! Two ways in. A whole plan's directories are made a depth level at a time, each level in
//! parallel on the current rayon pool ([`Dirs::create_all`]): a `mkdir` costs tens of
//! microseconds and a source tree has thousands. A writer that meets a file whose parents are
//! not made yet makes them itself ([`Dirs::ensure_parents`]), with no lock held during the
//! system call, so directory creation overlaps with writing. Each directory is made by one
//! thread: another that needs it meanwhile waits for that one's `mkdir` instead of making its
//! own, which would fail with "already exists" and cost a `stat` to check what is there (on a
//! network filesystem, two round trips for each writer that lost the race). A directory that
//! exists as a symlink or a file blocks everything below it, with the reason, and is never
//! followed.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rayon::prelude::*;

use crate::error::Setting;
use crate::options::Overwrite;
use crate::platform::{FileKind, OpenDir, OutDir};
use crate::sync::Unpoisoned;

/// What the directory stage knows about directories under the output folder.
#[derive(Default)]
pub(super) struct DirState {
    /// Real directories (created now, or found), never symlinks.
    pub ready: HashSet<PathBuf>,
    /// Directories that cannot be used, with why.
    pub blocked: HashMap<PathBuf, String>,
    pub created: u64,
    /// Directories this run created (with mode 0o777 less the umask).
    pub made_here: HashSet<PathBuf>,
    /// Time spent creating (or inspecting) directories.
    pub busy: Duration,
    /// Every ready directory, parents first (for `fsync`).
    pub order: Vec<PathBuf>,
    /// Folders held open to make their subfolders in (see [`Dirs::held`]).
    open: HashMap<PathBuf, Arc<OpenDir>>,
    /// Directories a thread is making now: others wait for it (see [`Dirs::make`]).
    making: HashMap<PathBuf, Arc<Making>>,
}

/// One directory being made, for the threads that wait for it.
#[derive(Default)]
struct Making {
    done: Mutex<bool>,
    finished: Condvar,
}

impl Making {
    fn wait(&self) {
        let mut done = self.done.lock().unpoisoned();
        while !*done {
            done = self.finished.wait(done).unpoisoned();
        }
    }

    /// Taken out of [`DirState::making`] (so no thread can start waiting on it any more): wakes
    /// the threads that wait, if any does (each holds a clone), and costs nothing otherwise.
    fn finish(self: Arc<Self>) {
        if Arc::strong_count(&self) > 1 {
            *self.done.lock().unpoisoned() = true;
            self.finished.notify_all();
        }
    }
}

/// The making of one directory by this thread. If it ends without being recorded (a panic
/// unwinding through it), dropping it still takes it out of [`DirState::making`], so the
/// threads waiting for it go on.
struct Maker<'a> {
    dirs: &'a Dirs,
    dir: &'a Path,
    pending: bool,
}

impl Drop for Maker<'_> {
    fn drop(&mut self) {
        if self.pending {
            let making = self.dirs.lock().making.remove(self.dir);
            if let Some(making) = making {
                making.finish();
            }
        }
    }
}

/// Folders held open at most (then all are let go): the subfolders of one folder are usually
/// made close together, and each held folder is a descriptor.
pub(crate) const OPEN_DIRS: usize = 128;

impl DirState {
    /// Why `dir` could not be made: its own reason or an ancestor's, with the one that failed.
    pub fn why_not<'a>(&'a self, dir: &'a Path) -> (&'a Path, &'a str) {
        dir.ancestors()
            .find_map(|a| self.blocked.get(a).map(|r| (a, r.as_str())))
            .unwrap_or((dir, "not created"))
    }

    fn made(&mut self, dir: &Path, created: bool) {
        self.created += u64::from(created);
        if created {
            self.made_here.insert(dir.to_path_buf());
        }
        if self.ready.insert(dir.to_path_buf()) {
            self.order.push(dir.to_path_buf());
        }
    }
}

pub(super) struct Dirs {
    root: Arc<OutDir>,
    overwrite: Overwrite,
    state: Mutex<DirState>,
}

impl Dirs {
    pub fn new(root: Arc<OutDir>, overwrite: Overwrite) -> Dirs {
        Dirs {
            root,
            overwrite,
            state: Mutex::default(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, DirState> {
        // Every critical section leaves the state consistent, so a panic elsewhere does not
        // taint it.
        self.state.lock().unpoisoned()
    }

    pub fn into_state(self) -> DirState {
        self.state.into_inner().unpoisoned()
    }

    /// Creates these directories and their parents, one level of depth at a time (every parent
    /// before its children), each level in parallel on the current rayon pool.
    pub fn create_all<'p>(&self, wanted: impl IntoIterator<Item = &'p Path>) {
        let start = Instant::now();
        let mut all = HashSet::new();
        for dir in wanted {
            for a in dir.ancestors().filter(|a| !a.as_os_str().is_empty()) {
                if !all.insert(a.to_path_buf()) {
                    break;
                }
            }
        }
        let mut levels: Vec<Vec<PathBuf>> = Vec::new();
        for dir in all {
            let depth = dir.components().count();
            if levels.len() < depth {
                levels.resize_with(depth, Vec::new);
            }
            levels[depth - 1].push(dir);
        }
        for level in levels {
            let todo: Vec<PathBuf> = {
                let mut state = self.lock();
                let mut todo = Vec::with_capacity(level.len());
                for dir in level {
                    if state.ready.contains(&dir) {
                        continue;
                    }
                    // Below a directory that could not be made: blocked for the same reason
                    // (trying would only say "No such file or directory").
                    let parent = dir.parent().and_then(|p| state.blocked.get(p)).cloned();
                    match parent {
                        Some(reason) => {
                            state.blocked.insert(dir, reason);
                        }
                        None => todo.push(dir),
                    }
                }
                todo
            };
            // Each is recorded made or blocked, with its reason, by `make`.
            todo.into_par_iter().for_each(|d| {
                let _ = self.make(&d, None);
            });
        }
        self.lock().busy += start.elapsed();
    }

    /// Makes sure `rel`'s parent directories exist, creating them parents first. Any writer
    /// may call it: no lock is held during a system call; a writer waits only for the `mkdir`
    /// of a directory it needs that another is making.
    pub fn ensure_parents(&self, rel: &Path) -> anyhow::Result<()> {
        match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => self.ensure(parent),
            None => Ok(()),
        }
    }

    /// Makes sure `dir` exists as a real directory, creating it and its parents.
    pub fn ensure(&self, dir: &Path) -> anyhow::Result<()> {
        // The folders not ready yet, nearest first, then made from the top down: a loop, not
        // a recursion, since an archive's path may be any number of folders deep.
        let mut missing = Vec::new();
        {
            let state = self.lock();
            let mut at = Some(dir);
            while let Some(d) = at.filter(|d| !d.as_os_str().is_empty()) {
                if state.ready.contains(d) {
                    break;
                }
                missing.push(d);
                at = d.parent();
            }
        }
        for d in missing.into_iter().rev() {
            self.make(d, Some(Instant::now()))?;
        }
        Ok(())
    }

    /// Makes `dir`, whose parent is ready, unless it is ready or blocked already, or waits for
    /// the thread making it now; records what became of it (and, `since` given, the time it
    /// took as the directories' busy time).
    fn make(&self, dir: &Path, since: Option<Instant>) -> anyhow::Result<()> {
        let mut maker = loop {
            let making = {
                let mut state = self.lock();
                if state.ready.contains(dir) {
                    return Ok(());
                }
                if let Some(reason) = state.blocked.get(dir) {
                    bail!("cannot create directory '{}': {reason}", dir.display());
                }
                match state.making.get(dir) {
                    Some(making) => Arc::clone(making),
                    None => {
                        state.making.insert(dir.to_path_buf(), Arc::default());
                        break Maker {
                            dirs: self,
                            dir,
                            pending: true,
                        };
                    }
                }
            };
            making.wait();
        };
        let made = self.create_one(dir);
        // One lock to record it, count its time and end its making.
        let mut state = self.lock();
        if let Some(since) = since {
            state.busy += since.elapsed();
        }
        maker.pending = false;
        let making = state.making.remove(dir);
        let result = match made {
            Ok(created) => {
                state.made(dir, created);
                Ok(())
            }
            Err(e) => {
                let reason = format!("{e:#}");
                state.blocked.insert(dir.to_path_buf(), reason.clone());
                Err(anyhow::anyhow!(
                    "cannot create directory '{}': {reason}",
                    dir.display()
                ))
            }
        };
        drop(state);
        if let Some(making) = making {
            making.finish();
        }
        result
    }

    /// The folder `dir`, held open to make subfolders in: a folder is opened once for all
    /// of its subfolders (while it stays among the last [`OPEN_DIRS`] opened), not once for
    /// each, and never through a symlink. A folder moved elsewhere during the run (by another
    /// program) still gets the subfolders asked for in it, there: never anything through a
    /// symlink, and files go by their whole path from the root (see `platform::OutDir`).
    pub fn held(&self, dir: &Path) -> std::io::Result<Arc<OpenDir>> {
        let above = {
            let state = self.lock();
            if let Some(open) = state.open.get(dir) {
                return Ok(Arc::clone(open));
            }
            dir.parent()
                .and_then(|up| state.open.get(up))
                .map(Arc::clone)
        };
        // Opened with no lock held; two writers racing for the same folder both open it, and
        // one of the two is closed at once. From its parent's open folder when that is held
        // (one name to look up, where a path from the root would be looked up again for each
        // folder of a deep chain), else from the root.
        let opened = Arc::new(match (above, dir.file_name()) {
            (Some(above), Some(name)) => above.open_dir(name)?,
            _ => self.root.open_dir(dir)?,
        });
        let mut state = self.lock();
        if state.open.len() >= OPEN_DIRS {
            state.open.clear();
        }
        Ok(Arc::clone(
            state.open.entry(dir.to_path_buf()).or_insert(opened),
        ))
    }

    /// Creates one directory whose parent exists. Ok(false) if a real directory is already there.
    fn create_one(&self, rel: &Path) -> anyhow::Result<bool> {
        let path = || self.root.path().join(rel);
        let parent = match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => Some(self.held(parent).with_context(|| {
                format!(
                    "opening directory '{}'",
                    self.root.path().join(parent).display()
                )
            })?),
            None => None,
        };
        let name = rel.file_name().unwrap_or_default();
        let made = match &parent {
            Some(dir) => dir.create_dir(name),
            None => self.root.create_dir(rel),
        };
        match made {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(e)
                    .with_context(|| format!("creating directory '{}'", path().display()));
            }
            Err(_) => {}
        }
        let kind = match &parent {
            Some(dir) => dir.kind(name),
            None => self.root.kind(rel),
        };
        let kind = kind.with_context(|| format!("inspecting '{}'", path().display()))?;
        let what = match kind {
            FileKind::Dir => return Ok(false),
            FileKind::Symlink => "a symlink",
            _ => "a file",
        };
        let path = path();
        if self.overwrite != Overwrite::Replace {
            bail!(
                "'{}' is {what}, not a directory (it is never followed; {} replaces it)",
                path.display(),
                Setting::Replace
            );
        }
        // Removing a symlink removes the link itself, never what it points to.
        self.root
            .remove_file(rel)
            .with_context(|| format!("removing {what} '{}' to replace it", path.display()))?;
        self.root
            .create_dir(rel)
            .with_context(|| format!("creating directory '{}'", path.display()))?;
        Ok(true)
    }
}
