//! A writer thread's own state ([`WriterState`]), which every target is handed with each call:
//! its copy buffer, its closes not yet handed over, the last directory it knows exists, its
//! counts. Below the targets and the writer handle alike.

use crate::close::WriterClose;

/// A writing thread's own state: its copy buffer, written files not yet handed over for closing
/// (sent to the close pool a batch at a time), the last directory it knows exists, and its
/// counts. What a writer does per file touches only this, so writers on a fast disk do not pass
/// shared cache lines back and forth; the counts join the engine's every 16
/// files and when it flushes.
#[derive(Default)]
pub(crate) struct WriterState {
    pub(crate) buf: Vec<u8>,
    pub(crate) close: WriterClose,
    /// The parent of the last file written (its path's bytes): it exists (directories never
    /// stop existing during a run), so the next file in it needs no look at the shared
    /// directory state.
    pub(crate) ready_dir: Option<Vec<u8>>,
    pub(crate) counts: Counts,
}

impl WriterState {
    /// The writer's copy buffer, which every target's pump reads through (one per writer
    /// thread, never one per file).
    pub(crate) fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

/// Files written, their bytes, and the time writing them took, not yet added to the engine's.
#[derive(Default, Clone, Copy)]
pub(crate) struct Counts {
    pub files: u64,
    pub bytes: u64,
    pub write_nanos: u64,
}
