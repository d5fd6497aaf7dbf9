//! A run's own state, the same whatever its target: where it was asked to write, its options
//! and reporter, the failures recorded so far (by the writers, the close stage or an upload
//! task, from any thread), cancelling, and the output cap. A target (`Disk`, `Bucket`) holds
//! one and says nothing of it again: [`Engine`](super::Engine) answers these questions from it
//! for every target alike. So is the list of links a source registered, which every target
//! makes at its end.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::anyhow;

use crate::error::{Error, ErrorKind, Failures, Setting};
use crate::options::Options;
use crate::plan::{Entry, path_key};
use crate::progress::{Reporter, Silent};
use crate::sync::Unpoisoned;

pub(crate) struct Run {
    /// The destination as it was named.
    pub(crate) root: PathBuf,
    pub(crate) opts: Options,
    pub(crate) reporter: Arc<dyn Reporter>,
    /// Shared with whatever finishes files apart from the writers (the close stage, uploads).
    pub(crate) failures: Arc<Failures>,
    /// Bytes of file content the run's files declared so far (with a `max_output` cap).
    declared: AtomicU64,
    /// The cap was reached: the source stops (the files admitted before it are written).
    over_limit: AtomicBool,
    /// Symlinks and hard links, made after every file (see [`Run::defer_link`]).
    links: Mutex<LinkList>,
}

#[derive(Default)]
struct LinkList {
    /// In the source's order.
    links: Vec<Entry>,
    /// Paths (by hash) taken by a later entry, with that entry's place in the source: the
    /// links registered there before it are not made.
    forgotten: HashMap<u64, usize>,
}

impl Run {
    pub(crate) fn new(root: &Path, opts: &Options) -> Run {
        Run {
            root: root.to_path_buf(),
            opts: opts.clone(),
            reporter: opts.progress.clone().unwrap_or_else(|| Arc::new(Silent)),
            failures: Arc::new(Failures::default()),
            declared: AtomicU64::new(0),
            over_limit: AtomicBool::new(false),
            links: Mutex::default(),
        }
    }

    /// The destination as it was named.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn reporter(&self) -> &dyn Reporter {
        self.reporter.as_ref()
    }

    /// Whether the run was cancelled: sources stop reading, writers stop starting files.
    pub(crate) fn cancelled(&self) -> bool {
        self.opts.cancel.is_cancelled()
    }

    /// Whether the source should stop: the run was cancelled, or reached its output cap (the
    /// files admitted before the cap are still written).
    pub(crate) fn stopped(&self) -> bool {
        self.cancelled() || self.over_limit.load(Ordering::Relaxed)
    }

    /// Records a failure. Any thread may call this.
    pub(crate) fn record(&self, error: Error) {
        self.failures.push(error);
    }

    /// Every failure recorded so far, leaving none (close failures included, as they happen).
    pub(crate) fn take_failures(&self) -> Vec<Error> {
        self.failures.take()
    }

    /// Counts a file's declared size against the run's output cap (`max_output`), before its
    /// data is read: past the cap the file fails and the run stops. A source calls it once per
    /// file, in its own order (so which file fails does not depend on the writers' timing).
    /// Sizes are enforced as files are written (a file holding more than it declares fails), so
    /// declared sizes bound what is written.
    pub(crate) fn within_limit(&self, entry: &Entry) -> Result<(), Error> {
        let Some(max) = self.opts.max_output else {
            return Ok(());
        };
        if self.over_limit.load(Ordering::Relaxed) {
            // The run stopped at the cap already: this one is simply not started.
            return Err(cancelled(entry));
        }
        let before = self.declared.fetch_add(entry.size, Ordering::Relaxed);
        let total = before.saturating_add(entry.size);
        if total <= max {
            return Ok(());
        }
        self.over_limit.store(true, Ordering::Relaxed);
        Err(Error::new(
            &entry.name,
            ErrorKind::Limit,
            anyhow::anyhow!(
                "refused: its {} would take the output to {}, past the cap of {} ({}); the run stopped here, and the entries after it were not extracted",
                crate::report::human_bytes(entry.size),
                crate::report::human_bytes(total),
                crate::report::human_bytes(max),
                Setting::MaxOutput
            ),
        ))
    }

    /// Registers a link (a symlink or a hard link) to be made at the end, after every file.
    pub(crate) fn defer_link(&self, entry: Entry) {
        self.links.lock().unpoisoned().links.push(entry);
    }

    /// Forgets the links registered at `path` before the source's entry `order`: that entry
    /// takes the path (the last copy of a path in a tar wins). Constant time: an archive that
    /// stores thousands of links again costs no more than one that does not.
    pub(crate) fn forget_links(&self, path: &Path, order: usize) {
        self.links
            .lock()
            .unpoisoned()
            .forgotten
            .insert(path_key(path), order);
    }

    /// The links to make, in the source's order, leaving none: those at a path a later entry
    /// took are left out.
    pub(crate) fn take_links(&self) -> Vec<Entry> {
        let LinkList {
            mut links,
            forgotten,
        } = std::mem::take(&mut *self.links.lock().unpoisoned());
        links.retain(|link| {
            forgotten
                .get(&path_key(&link.path))
                .is_none_or(|&taken| link.index >= taken)
        });
        links
    }
}

/// The error of a file not written because the run was cancelled.
pub(crate) fn cancelled(entry: &Entry) -> Error {
    Error::new(
        &entry.name,
        ErrorKind::Cancelled,
        anyhow!("cancelled before it was written"),
    )
}
