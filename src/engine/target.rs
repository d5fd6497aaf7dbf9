//! The seam between what is written and where it lands. Every source (zip, tar, a pipe, a
//! program's batch, a mirror) speaks to one [`Engine`]: a [`Target`], which is a local folder
//! (`folder/`) or, with the `s3` feature, a bucket prefix (`bucket/`), and no source knows
//! which. A target does the storage work alone (a file, a folder, a link, a stream, the end);
//! what is the run's (failures, cancelling, the output cap, the reporter, the links to make) is
//! kept once, in its [`Run`], and said once here. A writer thread's handle (`writer.rs`) is the
//! same for every target.
//!
//! A new target implements [`Target`] (and [`StreamedFile`] for its streamed files), holds a
//! [`Run`], and is made by `engine::open` from the place (`crate::place::Place`) that names it.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind};
use crate::plan::{Entry, Plan};
use crate::report::Report;

use super::pump::Content;
use super::run::Run;
use super::state::WriterState;
use super::unverified::Unverified;

/// Where a run's writes land, whatever the target.
pub(crate) type Engine = dyn Target;

/// What a target does: the storage operations alone. Every call may come from any writer
/// thread but [`Target::finish`].
pub(crate) trait Target: Send + Sync {
    /// The run's own state (failures, cancelling, the output cap, the reporter, the links).
    fn run(&self) -> &Run;

    /// More threads write than the run was made for (a batch's background writers).
    fn writers_at_least(&self, _writers: usize) {}

    /// Registers a whole plan before any file is written: folders and links are deferred (or
    /// made), conflicts said up front. Leaves in the plan only the files to write. Called on
    /// the writers' pool.
    fn prepare(&self, plan: &mut Plan);

    /// Makes a folder entry now (a streaming source's), its metadata applied at the end.
    fn make_dir(&self, entry: &Entry) -> Result<(), Error>;

    /// A folder entry made (or its metadata applied) at the end.
    fn add_dir(&self, entry: Entry);

    /// A symlink, hard link or special file, made at the end (refused by name where the
    /// target cannot hold it).
    fn add_link(&self, entry: Entry);

    /// From now on, a later entry at a path this run wrote replaces it (a tar's last copy
    /// wins); what was there before the run is never replaced so (see `later.rs`).
    fn track_created(&self) {}

    /// Replacements of existing files wait under temporary names until the end of the run.
    fn hold_replacements(&self) {}

    /// Entries written from data that then failed its check: taken back at the end.
    fn unverified(&self, entries: Vec<Unverified>, why: String);

    /// Writes one whole file; `state` is the calling writer thread's.
    fn write_file(
        &self,
        state: &mut WriterState,
        entry: &Entry,
        content: Content<'_>,
    ) -> Result<(), Error>;

    /// A mirror's: the source names every folder it has, each with its own entry (a store then
    /// makes no marker for a folder only implied by what is under it).
    fn every_folder_named(&self) {}

    /// A mirror's: the folder `dir` holds something there already, left as it is (a store
    /// makes it no marker).
    fn kept_as_is(&self, _dir: &Path) {}

    /// The folder it holds open (a folder target's), for what a source changes there itself
    /// once every file is closed (a zip from a pipe, what its central directory says); `None`
    /// where its entries are written whole (a bucket's).
    fn held(&self) -> Option<std::sync::Arc<crate::platform::OutDir>> {
        None
    }

    /// Whether creates in one folder wait for each other, so that a source spreads its writers
    /// over folders ([`Spread`](super::spread::Spread)): a folder on a network or FUSE
    /// filesystem, where each create holds its folder's lock across its round trips.
    fn folders_wait(&self) -> bool {
        false
    }

    /// Whether it can park files ([`Target::park`]): a folder can; a bucket, whose objects
    /// are not renamed, cannot, and a source keeps such data itself.
    fn parks(&self) -> bool {
        false
    }

    /// Writes a whole file whose path is not known yet, under a temporary name of the run's,
    /// with `entry`'s content and metadata (mode, mtime, owner, attributes; its path is only
    /// for messages), handed to the close stage; [`Target::place`] moves it to its path once
    /// known. Returns where it is. Counted as written when it is placed.
    fn park(
        &self,
        _state: &mut WriterState,
        entry: &Entry,
        _content: Content<'_>,
    ) -> Result<PathBuf, Error> {
        Err(Error::new(
            &entry.name,
            ErrorKind::Write,
            anyhow::anyhow!("this place cannot hold a file before its path is known"),
        ))
    }

    /// A file in the output's own filesystem, for data a source holds until it knows where it
    /// goes (small parked files' data: `extract/image/layers.rs`), removed with what is parked
    /// ([`Target::unpark`], or by the next run after a kill). Where [`Target::parks`].
    fn spool(&self) -> io::Result<std::fs::File> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this place holds no data before its path is known",
        ))
    }

    /// Waits until every file handed to the close stage so far is closed (complete, or its
    /// failure recorded and the file removed). The writers that wrote them must have flushed.
    fn settle(&self) {}

    /// Moves the parked file `parked` to `entry`'s path (its parents made) as writing it there
    /// would, and counts it written. The closes must be settled first.
    fn place(&self, _state: &mut WriterState, _parked: &Path, entry: &Entry) -> Result<(), Error> {
        Err(Error::new(
            &entry.name,
            ErrorKind::Write,
            anyhow::anyhow!("this place holds no parked files"),
        ))
    }

    /// Removes what is still parked: what no path took.
    fn unpark(&self) {}

    /// Hands over what a writer thread still holds (its closes, its counts).
    fn flush(&self, _state: &mut WriterState) {}

    /// Starts a file whose content comes in pieces, as [`Target::write_file`] writes a whole
    /// one.
    fn start_streamed<'e>(
        &'e self,
        state: &mut WriterState,
        entry: Entry,
    ) -> Result<Streamed<'e>, Error>;

    /// Waits for everything in flight, makes what was deferred, and returns the report.
    fn finish(self: Box<Self>) -> Report;
}

/// A file whose content comes in pieces, on whichever target.
pub(crate) type Streamed<'e> = Box<dyn StreamedFile + 'e>;

/// What a target's streamed file does.
pub(crate) trait StreamedFile: Send {
    /// The entry's name, as the caller or the archive spelled it.
    fn name(&self) -> &Path;
    /// Bytes accepted so far.
    fn len(&self) -> u64;
    /// Takes `data`.
    fn write(&mut self, data: &[u8]) -> io::Result<()>;
    /// Passes on what is buffered (the file is still not kept until sealed).
    fn drain(&mut self) -> io::Result<()>;
    /// Keeps the file: its mode and mtime set, handed over to be closed (or uploaded).
    fn seal(self: Box<Self>, state: &mut WriterState) -> Result<(), Error>;
    /// Gives the file up for a failure the source met itself, which is returned.
    fn abandon_for(self: Box<Self>, error: Error) -> Error;
}
