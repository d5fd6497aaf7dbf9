//! A writer thread's handle on its target ([`Writer`]), the same for every target, and the state
//! it keeps for itself ([`WriterState`]): what a writer does per file touches only this, so
//! writers on a fast disk pass no shared cache lines back and forth.

use super::pump::Content;
use super::state::WriterState;
use super::target::{Engine, Streamed};
use crate::error::Error;
use crate::plan::Entry;

/// A source's writer thread: its own state, with failures recorded in the run (the other
/// entries go on). Dropping it hands over what it still holds.
pub(crate) struct Writer<'e> {
    target: &'e Engine,
    state: WriterState,
}

impl<'e> Writer<'e> {
    /// A writer on `target`. Create one per worker (for instance in rayon's `for_each_init`).
    pub(crate) fn new(target: &'e Engine) -> Writer<'e> {
        Writer {
            target,
            // The buffer is allocated on first use: a mirror makes a writer per directory, and
            // copies in the kernel, where the buffer is only a fallback.
            state: WriterState::default(),
        }
    }

    /// Starts a file whose content comes in pieces; keep it with [`Writer::seal`].
    pub(crate) fn stream(&mut self, entry: Entry) -> Result<Streamed<'e>, Error> {
        self.target.start_streamed(&mut self.state, entry)
    }

    /// Keeps a streamed file: what is buffered written, mode and mtime set, handed over to be
    /// closed (or uploaded).
    pub(crate) fn seal(&mut self, file: Streamed<'_>) -> Result<(), Error> {
        file.seal(&mut self.state)
    }

    /// Writes one file entry; a failure is recorded in the run. False: this one failed (a
    /// cancelled run is not a failure of the entry).
    pub(crate) fn write(&mut self, entry: &Entry, content: Content<'_>) -> bool {
        match self.target.write_file(&mut self.state, entry, content) {
            Ok(()) => true,
            Err(error) if error.is_cancelled() => true,
            Err(error) => {
                self.target.run().record(error);
                false
            }
        }
    }
}

impl Writer<'_> {
    /// Parks a file whose path is not known yet ([`Target::park`](super::Target::park)):
    /// where it is.
    pub(crate) fn park(
        &mut self,
        entry: &Entry,
        content: Content<'_>,
    ) -> Result<std::path::PathBuf, Error> {
        self.target.park(&mut self.state, entry, content)
    }

    /// Places a parked file at `entry`'s path; a failure is recorded in the run.
    pub(crate) fn place(&mut self, parked: &std::path::Path, entry: &Entry) {
        match self.target.place(&mut self.state, parked, entry) {
            Ok(()) => {}
            Err(error) if error.is_cancelled() => {}
            Err(error) => self.target.run().record(error),
        }
    }
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        self.target.flush(&mut self.state);
    }
}

/// What a source asks of the run, the same for every target.
impl Engine {
    /// A writer thread's handle on the target: create one per worker.
    pub(crate) fn writer(&self) -> Writer<'_> {
        Writer::new(self)
    }

    /// The start of writing from a plan, whatever the source: registers `plan` on the writers'
    /// `pool` ([`Target::prepare`](super::Target::prepare): its folders and links; only its
    /// files are left in it) and, with `announce`, tells the reporter how many files and bytes
    /// there are to write.
    pub(crate) fn prepare_planned(
        &self,
        pool: &rayon::ThreadPool,
        plan: &mut crate::plan::Plan,
        announce: bool,
    ) {
        pool.install(|| self.prepare(plan));
        if announce {
            let files = &plan.entries;
            let bytes = files.iter().map(|e| e.size).sum();
            self.run().reporter().planned(files.len() as u64, bytes);
        }
    }
}
