//! The end of a run, in stages: wait for every close; move tar's later copies into place;
//! make the directories that are still empty; make the links; apply directory metadata,
//! deepest first; with fsync, sync every directory written into; count it all in the report.
//! Each stage runs after the one before is complete, so nothing is written through a link and
//! no directory's mtime is changed by what is made in it afterwards.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rayon::prelude::*;

use super::deferred::{Deferred, Links};
use super::disk::Disk;
use crate::close::CloseTally;
use crate::engine::run::Run;
use crate::error::{Error, ErrorKind};
use crate::plan::{Entry, EntryKind};
use crate::report::Report;
use crate::sync::Unpoisoned;

impl Disk {
    /// Waits for every close, then finishes the run stage by stage (see the module's header)
    /// and returns the report of everything the engine did. Call it on a rayon pool
    /// (`install`): empty directories are created on it.
    pub(crate) fn finish_run(mut self) -> Report {
        let closes = self.close.finish();
        let mut deferred = std::mem::take(self.deferred.get_mut().unpoisoned());
        // Links at a path a later entry took are not made.
        deferred.links = self.run.take_links();
        // What came from data that failed its check is taken back first.
        self.take_back_unverified(&mut deferred);
        let mut made = Links::default();
        self.move_later_copies(
            std::mem::take(&mut deferred.renames),
            &mut deferred.links,
            &mut made,
        );
        if self.run.cancelled() {
            // Stop here: what was written is complete and closed; links, empty directories
            // and directory metadata for the rest would only be work the user cancelled.
            deferred = Deferred::default();
        }
        let dirs = self.make_remaining_dirs(deferred.dirs);
        self.make_links(std::mem::take(&mut deferred.links), &mut made);
        // The output folder's own time (an archive's `./`) is set again at the very end: the
        // run's marker, removed last, changes it.
        let mut dirs = dirs;
        let root_mtime = dirs
            .iter_mut()
            .find(|e| e.path.as_os_str().is_empty())
            .and_then(|e| e.mtime.take());
        self.apply_dirs_metadata(dirs);
        self.into_report(closes, made, root_mtime)
    }

    /// Makes the directories that are still empty, before links may go into them. Returns the
    /// directory entries that exist, for their metadata; the others failed.
    fn make_remaining_dirs(&mut self, wanted: Vec<Entry>) -> Vec<Entry> {
        self.dirs
            .create_all(wanted.iter().map(|e| e.path.as_path()));
        let made = self.dirs.lock();
        let mut dirs = Vec::with_capacity(wanted.len());
        for entry in wanted {
            // (The output folder itself, an archive's `./`, is there.)
            if entry.path.as_os_str().is_empty() || made.ready.contains(&entry.path) {
                dirs.push(entry);
                continue;
            }
            let (at, reason) = made.why_not(&entry.path);
            let error = anyhow::anyhow!("cannot create directory '{}': {reason}", at.display());
            self.run
                .failures
                .push(Error::new(&entry.name, ErrorKind::Directory, error));
        }
        dirs
    }

    /// Makes the links, counted in `made`, many at once on the current rayon pool: on a network
    /// mount each is a round trip or two, and an image's hundreds of symlinks (a Debian base
    /// has 670) took seconds one at a time. The links at one path are made in the source's
    /// order (the last wins, as in tar), those at once first, then every link a hard link
    /// touches, one at a time in the source's order: a hard link may name a link made before
    /// it.
    fn make_links(&self, links: Vec<Entry>, made: &mut Links) {
        let (at_once, in_order) = by_path(links);
        let counts = at_once
            .par_iter()
            .map(|group| {
                let mut made = Links::default();
                for entry in group {
                    self.make_link(entry, &mut made);
                }
                made
            })
            .reduce(Links::default, Links::plus);
        *made = std::mem::take(made).plus(counts);
        for entry in &in_order {
            self.make_link(entry, made);
        }
    }

    /// Makes one link, counted in `made`.
    pub(super) fn make_link(&self, entry: &Entry, made: &mut Links) {
        let result = match &entry.kind {
            EntryKind::Symlink { target } => self.create_symlink(entry, target),
            EntryKind::Hardlink { target } => self.create_hardlink(entry, target),
            EntryKind::Special { kind, major, minor } => {
                self.create_special(entry, *kind, (*major, *minor))
            }
            _ => return,
        };
        match result {
            Ok(true) => {
                self.run.reporter.entry_written(&entry.name);
                match entry.kind {
                    EntryKind::Symlink { .. } => made.symlinks += 1,
                    EntryKind::Hardlink { .. } => made.hardlinks += 1,
                    _ => made.specials += 1,
                }
            }
            Ok(false) => {
                self.skipped.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => self.run.failures.push(error),
        }
    }

    /// Applies directory modes and mtimes, deepest first, once their content is complete. The
    /// folders of one depth go in parallel (on the writers' pool): none contains another, and
    /// setting a folder's time does not change its parent's. On a network mount each is a
    /// round trip or two, and a mirror of a tree of 900 folders waited seconds for them one
    /// at a time.
    fn apply_dirs_metadata(&self, mut dirs: Vec<Entry>) {
        dirs.retain(|e| e.mode.is_some() || e.mtime.is_some() || e.owner.is_some());
        deepest_first(
            &mut dirs,
            |e| e.path.components().count(),
            |entry| {
                if let Err(error) = self.apply_dir_metadata(entry) {
                    self.run.failures.push(error);
                }
            },
        );
    }

    /// With fsync, syncs every directory written into (a file is durable only once the
    /// directory entry naming it is: deepest first, the root last); then counts everything.
    fn into_report(
        self,
        closes: CloseTally,
        links: Links,
        root_mtime: Option<std::time::SystemTime>,
    ) -> Report {
        let Disk {
            run,
            out_dir,
            dirs,
            mut files,
            mut bytes,
            mut skipped,
            kept,
            mut write_nanos,
            mut copier,
            mut symlink_times_left,
            mut leftovers,
            mut resumed,
            mut redone,
            mut mark,
            staged,
            ..
        } = self;
        let Run {
            root,
            opts,
            reporter,
            failures,
            ..
        } = run;
        let mut warnings = std::mem::take(&mut leftovers.warnings);
        warnings.extend(kept.warning(opts.overwrite));
        let (resumed, redone) = (*resumed.get_mut(), *redone.get_mut());
        if resumed + redone > 0 && opts.resume_tag.is_some() && leftovers.since.is_none() {
            warnings.push(format!(
                "{resumed} files an earlier attempt at this archive left complete were kept"
            ));
        } else if resumed + redone > 0 {
            warnings.push(format!(
                "of the files the killed run made, {resumed} were complete and kept, {redone} unfinished and written again"
            ));
        }
        let left = *symlink_times_left.get_mut();
        if left > 0 {
            warnings.push(format!(
                "{left} symlinks keep the time they were made, not the archived one: on a FUSE filesystem setting a symlink's time would set its target's (sshfs: SFTP follows links)"
            ));
        }
        let made_dirs = dirs.into_state();
        if opts.fsync {
            let top = PathBuf::new();
            for dir in made_dirs.order.iter().rev().chain(std::iter::once(&top)) {
                if let Err(error) = out_dir.sync_dir(dir) {
                    let error = anyhow::Error::new(error)
                        .context(format!("syncing directory '{}'", root.join(dir).display()));
                    failures.push(Error::new(dir, ErrorKind::Close, error));
                }
            }
        }
        if opts.fsync && !staged {
            // The output folder's own name, which this run may have made (a staged run's is
            // synced when it is put in place).
            let parent = root.parent().filter(|p| !p.as_os_str().is_empty());
            let parent = parent.unwrap_or(std::path::Path::new("."));
            if let Err(error) = crate::platform::sync_path_dir(parent) {
                let error = anyhow::Error::new(error)
                    .context(format!("syncing directory '{}'", parent.display()));
                failures.push(Error::new(root.as_path(), ErrorKind::Close, error));
            }
        }
        // Everything is done: the run's marker goes last (a kill before this leaves it, and the
        // next run knows), with the markers of the killed runs whose leftovers this one dealt
        // with; the folder keeps the mtime it had.
        match mark.take() {
            Some(Ok(mark)) => mark.remove(&out_dir),
            Some(Err(warning)) => warnings.push(warning),
            None => {}
        }
        leftovers.clear(&out_dir);
        if let Some(mtime) = root_mtime
            && let Err(error) = out_dir.set_metadata(std::path::Path::new(""), None, Some(mtime))
        {
            let error = anyhow::Error::new(error)
                .context(format!("setting the mtime of '{}'", root.display()));
            failures.push(Error::new("./", ErrorKind::Metadata, error));
        }
        reporter.finished();
        Report {
            files: files.get_mut().saturating_sub(closes.failed),
            dirs: made_dirs.created,
            dir_time: made_dirs.busy,
            symlinks: links.symlinks,
            hardlinks: links.hardlinks,
            specials: links.specials,
            bytes: *bytes.get_mut(),
            skipped: *skipped.get_mut(),
            failures: failures.take(),
            warnings,
            wall: Duration::ZERO,
            write_time: Duration::from_nanos(*write_nanos.get_mut()),
            close_time: closes.busy,
            peak_close_queue: closes.peak_queue,
            close_threads: closes.threads,
            reflinked: *copier.reflinked.get_mut(),
            ..Report::default()
        }
    }
}

/// The links to make split by what may be made at once: groups of the links at one path (each
/// in the source's order), and, in the source's order, the hard links and every link at a path
/// a hard link is at.
fn by_path(links: Vec<Entry>) -> (Vec<Vec<Entry>>, Vec<Entry>) {
    let is_hard = |e: &Entry| matches!(e.kind, EntryKind::Hardlink { .. });
    let hard: HashSet<PathBuf> = links
        .iter()
        .filter(|e| is_hard(e))
        .map(|e| e.path.clone())
        .collect();
    let (mut groups, mut in_order) = (Vec::<Vec<Entry>>::new(), Vec::new());
    let mut group_of: HashMap<PathBuf, usize> = HashMap::new();
    for link in links {
        if is_hard(&link) || hard.contains(&link.path) {
            in_order.push(link);
            continue;
        }
        match group_of.get(&link.path) {
            Some(&i) => groups[i].push(link),
            None => {
                group_of.insert(link.path.clone(), groups.len());
                groups.push(vec![link]);
            }
        }
    }
    (groups, in_order)
}

/// Calls `f` on every item, a depth level at a time, deepest first, the items of one level in
/// parallel on the current rayon pool: for what must be done to a folder after what is inside
/// it (a mode that may make it read-only, a time that its content's changes would move).
pub(crate) fn deepest_first<T: Sync>(
    items: &mut [T],
    depth: impl Fn(&T) -> usize,
    f: impl Fn(&T) + Sync + Send,
) {
    items.sort_by_key(|item| std::cmp::Reverse(depth(item)));
    for level in items.chunk_by(|a, b| depth(a) == depth(b)) {
        level.par_iter().for_each(&f);
    }
}
