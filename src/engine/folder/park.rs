//! Files written before their path is known: parked. A container image's layers are read at
//! once, and where a layer's file ends up (whether a later layer deletes or replaces it, where
//! a lower layer's symlinks take its name) is known only once every layer's headers are read.
//! So each file is written as its layer's bytes arrive, under a temporary name in a folder of
//! the run's (`.parked.fastwrite-PID-N`, at the root of where the run writes), with its own
//! metadata set on the open handle, and closed by the close stage; once the source knows, each
//! final file is moved to its path (one rename, never over anything unasked), and what no path
//! took goes with the folder.
//!
//! So every byte is written once, into the output's own filesystem, and nothing is under a
//! final name before its close succeeded (the source settles the closes before it places).
//! Only on a local disk (`Disk::parks`): on a network or FUSE filesystem
//! each create is a round trip, and the one thread that reads a layer would make them one
//! after another, where writers from a spool make them many at once.
//! After a kill the folder is a killed run's temporary name, which the next run removes
//! (`leftovers.rs`), or it is inside a staging folder that goes whole (`stage.rs`).

use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, anyhow};

use super::disk::Disk;
use super::files::OpenFile;
use crate::close::Finalize;
use crate::engine::kept::already_exists;
use crate::engine::pump::Content;
use crate::engine::run::cancelled;
use crate::engine::state::WriterState;
use crate::error::{Error, ErrorKind, Tag};
use crate::options::Overwrite;
use crate::plan::Entry;
use crate::platform::{FileKind, OpenDir};

impl Disk {
    /// The run's parking folder, made on first use, and held open.
    fn parking(&self) -> Result<&(PathBuf, OpenDir), String> {
        let made = self.parked.get_or_init(|| {
            // (A run that holds a file marks its folder first: see `leftovers.rs`.)
            self.mark();
            let dir = self.temp_path(Path::new("parked"));
            let made = self.out_dir.create_dir(&dir);
            match made.and_then(|()| self.out_dir.open_dir(&dir)) {
                Ok(open) => Ok((dir, open)),
                Err(e) => Err(format!(
                    "cannot make a folder for files not yet in place, '{}': {e}",
                    self.full(&dir).display()
                )),
            }
        });
        made.as_ref().map_err(String::clone)
    }

    /// Writes `content` as a parked file with `entry`'s metadata; returns where it is.
    pub(super) fn park_file(
        &self,
        state: &mut WriterState,
        entry: &Entry,
        content: Content<'_>,
    ) -> Result<PathBuf, Error> {
        if self.run.cancelled() {
            return Err(cancelled(entry));
        }
        let (dir, open_dir) = self
            .parking()
            .map_err(|why| Error::new(&entry.name, ErrorKind::Directory, anyhow!(why)))?;
        let path = self.temp_path(&dir.join("file"));
        let (started, mode) = (Instant::now(), self.file_mode(entry));
        let file = open_dir
            .create_new(path.file_name().unwrap_or_default(), mode)
            .with_context(|| format!("creating '{}'", self.full(&path).display()))
            .tag(&entry.name, ErrorKind::Write)?;
        let open = OpenFile {
            file,
            path: path.clone(),
            finalize: Finalize::Parked,
            mode,
            started,
        };
        if let Err(error) = self.fill(&open, entry, content, &mut state.buf) {
            self.discard(open);
            return Err(error);
        }
        // (Counted as written once it is placed.)
        let open = self.dress(open, entry)?;
        self.close_later(state, open, entry);
        Ok(path)
    }

    /// A file of the run's in the parking folder, for a source's data (`Target::spool`):
    /// it goes with the folder.
    pub(super) fn spool_file(&self) -> io::Result<std::fs::File> {
        let (dir, open_dir) = self.parking().map_err(io::Error::other)?;
        let path = self.temp_path(&dir.join("spool"));
        open_dir.create_scratch(path.file_name().unwrap_or_default())
    }

    /// Moves the parked file `parked` to `entry`'s path, its parents made, as writing it there
    /// would: never over anything unless the overwrite policy says so.
    pub(super) fn place_file(
        &self,
        state: &mut WriterState,
        parked: &Path,
        entry: &Entry,
    ) -> Result<(), Error> {
        self.ready_for(state, entry)?;
        let dest = &entry.path;
        let moving = |e: io::Error| {
            let (from, to) = (self.full(parked), self.full(dest));
            let why = format!(
                "moving '{}' into place as '{}'",
                from.display(),
                to.display()
            );
            Error::new(&entry.name, ErrorKind::Write, anyhow!(e).context(why))
        };
        match self.move_parked(parked, dest) {
            Ok(()) => {}
            // Its close failed, which removed it and was said then.
            Err(e) if e.kind() == io::ErrorKind::NotFound && !self.parked_exists(parked) => {
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if !self.place_over(parked, entry, moving)? {
                    return Ok(());
                }
            }
            Err(e) => return Err(moving(e)),
        }
        self.note_created(dest);
        state.counts.files += 1;
        state.counts.bytes += entry.size;
        self.run.reporter.file_written();
        self.run.reporter.entry_written(&entry.name);
        self.publish_now_and_then(state);
        Ok(())
    }

    /// Moves the parked file `parked` to `dest` (its parent made) through the folders held
    /// open: the parking folder, and the destination's parent (`Dirs::held`), so that a move
    /// looks up two names and nothing else.
    fn move_parked(&self, parked: &Path, dest: &Path) -> io::Result<()> {
        let Some(Ok((_, park))) = self.parked.get() else {
            return self.out_dir.move_new(parked, dest);
        };
        let to = match dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => Some(self.dirs.held(parent)?),
            None => None,
        };
        let (name, to_name) = (
            parked.file_name().unwrap_or_default(),
            dest.file_name().unwrap_or_default(),
        );
        self.out_dir
            .move_new_held((park, name), (to.as_deref(), to_name))
    }

    fn parked_exists(&self, parked: &Path) -> bool {
        self.out_dir.kind(parked).is_ok()
    }

    /// Where something is at the entry's path already: the overwrite policy decides, as for a
    /// file written there (`files.rs`). False: what is there is kept.
    fn place_over(
        &self,
        parked: &Path,
        entry: &Entry,
        moving: impl Fn(io::Error) -> Error,
    ) -> Result<bool, Error> {
        let dest = &entry.path;
        let refused = |why| Err(Error::new(&entry.name, ErrorKind::AlreadyExists, why));
        match self.policy_for(entry) {
            // (`Update` is resolved into one of the others by `policy_for`.)
            Overwrite::Skip | Overwrite::Update => {
                self.keep(&entry.name);
                Ok(false)
            }
            _ if self.out_dir.kind(dest).is_ok_and(|k| k == FileKind::Dir) => refused(anyhow!(
                "a directory is in the way at '{}'",
                self.full(dest).display()
            )),
            Overwrite::Refuse => refused(already_exists()),
            Overwrite::Replace => self
                .out_dir
                .rename(parked, dest)
                .map(|()| true)
                .map_err(moving),
        }
    }

    /// Removes what is still parked: what no path took, and the folder.
    pub(super) fn unpark_all(&self) {
        if let Some(Ok((dir, _))) = self.parked.get() {
            // (Best effort: a folder left is a killed run's leftover to the next run.)
            let _ = self.out_dir.remove_tree(dir);
        }
    }
}
