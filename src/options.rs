//! Options for a run: everything the engine needs to know, and nothing about how it was asked.
//!
//! `cli.rs` is the one place that builds these from arguments; tests and library users build
//! them directly.

use crate::close_pool::CLOSE_BATCH;

/// How file handles are closed once their content is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseMode {
    /// Deferred where it pays: from the start on Windows and with `--fsync` (closes there
    /// take milliseconds), elsewhere once the closes measured so far are slow; inline while
    /// they are fast (a local Linux disk closes in microseconds, less than a hand-over costs).
    /// The pool is sized by Little's law from the measured close time and write rate, and
    /// grows as they change, up to `max_threads`.
    Auto { max_threads: usize },
    /// Closed by a dedicated pool of this many threads, overlapping with writing.
    Deferred { threads: usize },
    /// Closed by the writer right after writing (for A/B timing).
    Inline,
}

/// What to do when a file to be written already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overwrite {
    /// The entry fails and the existing file is left untouched.
    #[default]
    Refuse,
    /// The new file replaces it (written under a temporary name, then renamed over it).
    Replace,
    /// The existing file is kept and the entry skipped.
    Skip,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// Threads in the write stage.
    pub threads: usize,
    pub close: CloseMode,
    /// Make every file durable (fsync) before closing it.
    pub fsync: bool,
    pub overwrite: Overwrite,
    /// Keep setuid, setgid and sticky bits from the source (dropped by default).
    pub keep_setid: bool,
    /// Bytes of file content a streamed archive may hold in memory between its reader and the
    /// writers.
    pub memory_budget: u64,
}

/// 64 MiB holds hundreds of typical small files in flight, on any machine.
pub const DEFAULT_MEMORY_BUDGET: u64 = 64 << 20;

impl Options {
    /// Handles in the close queue at most: enough to keep every close thread busy while writers
    /// run ahead, few enough that open handles stay far below any descriptor limit (see
    /// `docs/design.md` for the count).
    pub fn close_queue_bound(&self) -> usize {
        match self.close {
            // As many as the threads: with those in their hands, 2 x threads.
            CloseMode::Auto { max_threads } => max_threads,
            // Two batches a thread: it never waits for a writer's next batch.
            CloseMode::Deferred { threads } => threads * 2 * CLOSE_BATCH,
            CloseMode::Inline => 0,
        }
    }

    /// The permission bits to apply, given what the source records.
    pub fn mode_bits(&self, mode: u32) -> u32 {
        if self.keep_setid {
            mode & 0o7777
        } else {
            mode & 0o777
        }
    }
}

/// Close threads of `--defer-close always` by default: closes are cheap on a local Linux or
/// macOS disk, and a few threads keep up with any writer there; on Windows a close costs
/// milliseconds, so more of them overlap.
pub fn default_close_threads() -> usize {
    if cfg!(windows) { 16 } else { 4 }
}

/// The most close threads `--defer-close auto` starts (fewer where the open-file limit is
/// low). A close thread mostly sleeps in the kernel on a small stack; two writers that each
/// write a small file every 30 us, behind 5 ms closes, need 2 x 5 ms / 30 us = 333 in flight
/// never to wait (Little's law), so there the bound is what limits.
pub const AUTO_MAX_CLOSE_THREADS: usize = 256;

pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: default_threads(),
            close: CloseMode::Auto {
                max_threads: AUTO_MAX_CLOSE_THREADS,
            },
            fsync: false,
            overwrite: Overwrite::Refuse,
            keep_setid: false,
            memory_budget: DEFAULT_MEMORY_BUDGET,
        }
    }
}

/// What `mirror` does beyond copying (the engine's [`Options`] still apply).
#[derive(Debug, Clone, Default)]
pub struct MirrorOptions {
    /// Remove from the destination what the source does not have (never excluded paths).
    pub delete: bool,
    /// Say what would be done, and do nothing.
    pub dry_run: bool,
    /// Compare the content of same-size files instead of trusting size and mtime.
    pub checksum: bool,
    /// Files hard-linked together in the source are hard-linked together in the copy.
    pub hard_links: bool,
    /// Follow symlinks in the source and copy what they point to.
    pub copy_links: bool,
    /// Glob patterns of paths left out (see `mirror::exclude`).
    pub excludes: Vec<String>,
}
