//! Progress is injected: the engine calls a [`Reporter`] whose methods do nothing by default.
//!
//! The command line's terminal bar is one implementation, in the binary (the library carries no
//! terminal code): writers only bump two relaxed atomic counters, and a separate thread redraws
//! the bar ten times a second, so progress costs the hot path nothing measurable however many
//! files there are.

/// Told what the engine is doing. Called from many threads at once, so an implementation
/// should only bump counters and draw elsewhere (as the command line's bar does).
pub trait Reporter: Send + Sync {
    /// The plan is known: this many files and bytes will be written (0 and 0: not known up
    /// front).
    fn planned(&self, _files: u64, _bytes: u64) {}
    /// Some of a file's content is written (called per chunk, so big files show progress).
    fn bytes_written(&self, _bytes: u64) {}
    /// One file is written.
    fn file_written(&self) {}
    /// A file (written, its close under way) or a link (made) is in place, by its name in the
    /// source: what `tar -xv` and `unzip` list. Called from many threads, in the order the
    /// work completes.
    fn entry_written(&self, _name: &str) {}
    /// The run is over (successfully or not).
    fn finished(&self) {}
}

/// Reports nothing.
pub struct Silent;

impl Reporter for Silent {}
