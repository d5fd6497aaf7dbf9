//! Tar's rule that the last copy of a path wins, as GNU tar applies it: a later entry at a path
//! this run already wrote waits under a temporary name and takes the path after every close, in
//! the archive's order; links registered at a path a later entry takes are not made. Only what
//! this run wrote is ever replaced this way, never a file that was in the output folder before
//! (unless the user asked for replacing). Every other source never sets
//! [`Entry::replaces`], and pays nothing here.

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use super::deferred::{Links, Rename};
use super::disk::Disk;
use super::files::OpenFile;
use crate::close::Finalize;
use crate::engine::kept::already_exists;
use crate::error::{Error, ErrorKind};
use crate::options::Overwrite;
use crate::plan::{Entry, EntryKind, path_key};
use crate::platform;
use crate::sync::Unpoisoned;

impl Disk {
    /// For a source whose later entries may take the path of earlier ones (see
    /// [`Entry::replaces`]): from now on the engine remembers which paths this run created,
    /// when the output folder was not empty.
    pub(crate) fn start_tracking_created(&self) {
        if !self.fresh {
            self.created.get_or_init(Mutex::default);
        }
    }

    /// Notes that this run created (or replaced) the file at `path`, if it keeps track.
    pub(super) fn note_created(&self, path: &Path) {
        if let Some(created) = self.created.get() {
            created.lock().unpoisoned().insert(path_key(path));
        }
    }

    /// Whether what is at `path` may be replaced by a later entry at the same path: this run
    /// wrote it (or the user asked for replacing).
    pub(super) fn ours(&self, path: &Path) -> bool {
        if self.fresh || self.run.opts.overwrite == Overwrite::Replace {
            return true;
        }
        self.created
            .get()
            .is_some_and(|created| created.lock().unpoisoned().contains(&path_key(path)))
    }

    /// Creates a later copy of a path this run wrote (or, `held`, the replacement of a file
    /// that was there) under a temporary name, to take the path after every close (see
    /// [`Disk::move_later_copies`]).
    pub(super) fn open_later_copy(
        &self,
        entry: &Entry,
        mode: u32,
        started: Instant,
        held: bool,
    ) -> Result<OpenFile, Error> {
        let open = self.open_beside(entry, mode, started, Finalize::Keep)?;
        self.deferred.lock().unpoisoned().renames.push(Rename {
            order: entry.index,
            temp: open.path.clone(),
            path: entry.path.clone(),
            name: entry.name.clone(),
            held,
        });
        Ok(open)
    }

    /// Moves held replacements over the files they replace, in parallel (on the writers'
    /// pool): each is the first of its path in the source, so they come before any later copy
    /// and no two share a path. A network mount pays a round trip for each.
    fn move_held_replacements(&self, held: Vec<Rename>) {
        use rayon::prelude::*;
        let cancelled = self.run.cancelled();
        held.into_par_iter().for_each(|rename| {
            if !self.still_waiting(&rename, cancelled) {
                return;
            }
            if self
                .out_dir
                .kind(&rename.path)
                .is_ok_and(|k| k == platform::FileKind::Dir)
            {
                self.directory_in_the_way(&rename);
                return;
            }
            if let Err(e) = self.out_dir.rename(&rename.temp, &rename.path) {
                let _ = self.out_dir.remove_file(&rename.temp);
                let error = anyhow::Error::new(e).context(format!(
                    "renaming '{}' into place as '{}'",
                    self.full(&rename.temp).display(),
                    self.full(&rename.path).display()
                ));
                self.run
                    .failures
                    .push(Error::new(&rename.name, ErrorKind::Close, error));
            }
        });
    }

    /// Whether a file waiting under a temporary name is still to be moved into place: not if
    /// its write failed (the temporary file is gone), nor if the run was cancelled (it is
    /// removed).
    fn still_waiting(&self, rename: &Rename, cancelled: bool) -> bool {
        if self.out_dir.kind(&rename.temp).is_err() {
            return false;
        }
        if cancelled {
            let _ = self.out_dir.remove_file(&rename.temp);
            return false;
        }
        true
    }

    /// A directory stands where a waiting file was to go: the file is removed, and fails.
    fn directory_in_the_way(&self, rename: &Rename) {
        let _ = self.out_dir.remove_file(&rename.temp);
        let dest = self.full(&rename.path);
        let error = anyhow::anyhow!("a directory is in the way at '{}'", dest.display());
        self.run
            .failures
            .push(Error::new(&rename.name, ErrorKind::AlreadyExists, error));
    }

    /// Moves the later copies of paths into place, after every close, in the source's order:
    /// the last copy wins. A copy whose write failed (its temporary file is gone) is passed
    /// over; one that would replace a file this run did not write fails instead.
    ///
    /// A hard link that came before a later copy of its target names the copy it replaces:
    /// GNU tar and bsdtar break the link, which keeps the old content. Such links (taken out
    /// of `links`) are made just before the rename, to the earlier copy.
    pub(super) fn move_later_copies(
        &mut self,
        mut renames: Vec<Rename>,
        links: &mut Vec<Entry>,
        made: &mut Links,
    ) {
        let held = renames.extract_if(.., |r| r.held).collect();
        self.move_held_replacements(held);
        renames.sort_by_key(|r| r.order);
        let cancelled = self.run.cancelled();
        for rename in renames {
            if !cancelled {
                let earlier: Vec<Entry> = links
                    .extract_if(.., |link| {
                        link.index < rename.order
                            && matches!(&link.kind, EntryKind::Hardlink { target } if *target == rename.path)
                    })
                    .collect();
                for link in &earlier {
                    // Its folder is made here, before the stage that makes the rest.
                    let _ = self.dirs.ensure_parents(&link.path);
                    self.make_link(link, made);
                }
            }
            if !self.still_waiting(&rename, cancelled) {
                continue;
            }
            let dest = self.full(&rename.path);
            let in_place = self.out_dir.kind(&rename.path).ok();
            if in_place.is_some() && !self.ours(&rename.path) {
                let _ = self.out_dir.remove_file(&rename.temp);
                // With `Update`, the first copy at the path decided: kept, so are the rest.
                if matches!(self.run.opts.overwrite, Overwrite::Skip | Overwrite::Update) {
                    self.keep(&rename.name);
                    continue;
                }
                let error = already_exists();
                self.run
                    .failures
                    .push(Error::new(&rename.name, ErrorKind::AlreadyExists, error));
                continue;
            }
            if in_place == Some(platform::FileKind::Dir) {
                self.directory_in_the_way(&rename);
                continue;
            }
            match self.out_dir.rename(&rename.temp, &rename.path) {
                // The earlier copy's file is gone: one file fewer in the output.
                Ok(()) if in_place.is_some() => {
                    let files = self.files.get_mut();
                    *files = files.saturating_sub(1);
                }
                Ok(()) => {}
                Err(e) => {
                    let _ = self.out_dir.remove_file(&rename.temp);
                    let error = anyhow::Error::new(e)
                        .context(format!("moving the later copy into '{}'", dest.display()));
                    self.run
                        .failures
                        .push(Error::new(&rename.name, ErrorKind::Write, error));
                }
            }
        }
    }
}
