//! How a [`Batch`] is configured and started.

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use super::{Batch, Slot};
use crate::cancel::Cancel;
use crate::close::SystemCloser;
use crate::error::{Error, ErrorKind};
use crate::options::{CloseMode, Options, Overwrite};
use crate::place::Place;
use crate::progress::Reporter;

/// Configures a [`Batch`]; made by [`Batch::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct BatchBuilder {
    pub(super) root: PathBuf,
    pub(super) opts: Options,
}

impl BatchBuilder {
    /// Where and how files are closed (default [`CloseMode::Auto`]: inline while closes are
    /// fast, on a pool sized by Little's law once they are slow).
    pub fn close(mut self, mode: CloseMode) -> BatchBuilder {
        self.opts.close = mode;
        self
    }

    /// Make every file durable (fsync) before closing it, and every directory written into
    /// at [`Batch::finish`] (default: no). Under [`CloseMode::Auto`] the fsyncs are done by
    /// the close pool from the start, so they overlap with writing.
    pub fn fsync(mut self, fsync: bool) -> BatchBuilder {
        self.opts.fsync = fsync;
        self
    }

    /// What to do with a file that already exists (default [`Overwrite::Refuse`]: an
    /// [`ErrorKind::AlreadyExists`] error, the file untouched; `std::fs::write` would replace
    /// it, which is [`Overwrite::Replace`]).
    ///
    /// With `Replace`, writing one path twice in a batch replaces the first version, which
    /// may not be closed yet: fine on Unix and on Windows 10 1607 and later (std renames with
    /// POSIX semantics there), but on older Windows, on filesystems without those semantics
    /// (FAT) and under Wine the rename is refused while the first handle is open, and the
    /// second version fails with [`ErrorKind::Close`] (the first is kept). Write each path once
    /// per batch to be portable.
    pub fn overwrite(mut self, policy: Overwrite) -> BatchBuilder {
        self.opts.overwrite = policy;
        self
    }

    /// How many threads will write at once (default: rayon's thread count; for
    /// [`Batch::spawn_write`]'s own writers, sized by the output's filesystem). Sizes the close
    /// pool (Little's law) and the writers `spawn_write` starts; any number of threads may
    /// call `write`.
    pub fn writers(mut self, threads: usize) -> BatchBuilder {
        self.opts.threads = Some(threads.max(1));
        self
    }

    /// All or nothing (default: no): the folder, which must not exist yet or be empty,
    /// appears with every file only when [`Batch::finish`] (or [`Batch::scope`]) ends
    /// without an error; a batch that fails, is cancelled, is dropped unfinished, or whose
    /// process is killed leaves it as it was. The files are written into a folder beside it,
    /// `.NAME.fastwrite-staging`, renamed into place in one step at the end. For an installer
    /// or a cache that must never be seen half-made. See [`Options::atomic`].
    ///
    /// In an atomic batch an error a call returns (a refused path, an existing file) fails the
    /// batch too: [`Batch::finish`] then fails, counting it in [`FinishError::taken`](super::FinishError::taken).
    ///
    /// # Errors
    /// [`BatchBuilder::build`] fails ([`ErrorKind::Directory`]) if the folder holds files.
    pub fn atomic(mut self, atomic: bool) -> BatchBuilder {
        self.opts.atomic = atomic;
        self
    }

    /// Tells `reporter` about every byte and file written (default: nobody).
    pub fn progress(mut self, reporter: Arc<dyn Reporter>) -> BatchBuilder {
        self.opts.progress = Some(reporter);
        self
    }

    /// Shares a cancellation flag with the caller (default: the batch's own, see
    /// [`Batch::cancel`]).
    pub fn cancel(mut self, cancel: Cancel) -> BatchBuilder {
        self.opts.cancel = cancel;
        self
    }

    /// Opens the folder (creating it and its parents if missing) and starts the close stage; a
    /// bucket prefix (`s3://BUCKET/PREFIX`, feature `s3`) is looked at and written as
    /// `extract` writes one.
    ///
    /// # Errors
    /// [`ErrorKind::Directory`] if the folder cannot be made or read, or the close threads
    /// cannot be started.
    pub fn build(self) -> Result<Batch, Error> {
        let started = Instant::now();
        let closer = Arc::new(SystemCloser {
            fsync: self.opts.fsync,
        });
        // Into a new or empty folder the batch writes in a staging folder, put in place at the
        // end (see `BatchBuilder::atomic`).
        let folder = |e| Error::start(&self.root, ErrorKind::Directory, e);
        let dest = Place::output(&self.root).map_err(folder)?;
        dest.refuse_what_it_cannot(&self.opts).map_err(folder)?;
        // A bucket prefix has no folder to stage in: its objects appear whole, one by one.
        let (staging, warnings) = if dest.can().stage {
            crate::engine::Staging::prepare(&self.root, &self.opts).map_err(folder)?
        } else {
            (None, Vec::new())
        };
        let dest = match &staging {
            Some(staging) => dest.staged_in(&staging.path),
            None => dest,
        };
        let staging = staging.map(|staging| (staging, warnings));
        let engine = crate::engine::open(&dest, &self.opts, closer).map_err(folder);
        let engine = match engine {
            Ok(engine) => engine,
            Err(error) => {
                if let Some((staging, ..)) = &staging {
                    let _ = staging.discard();
                }
                return Err(error);
            }
        };
        engine.run().reporter().planned(0, 0);
        // A state for each calling thread (twice over, so a thread rarely finds its home slot
        // busy), and one for each background writer `spawn_write` may start.
        let callers = self.opts.threads.unwrap_or_else(rayon::current_num_threads);
        let slots = (2 * callers).max(4) + crate::engine::MAX_WRITERS;
        Ok(Batch {
            engine: Some(Arc::new(engine)),
            cancel: self.opts.cancel.clone(),
            slots: (0..slots).map(|_| Slot::default()).collect(),
            background: OnceLock::new(),
            staging,
            dest,
            opts: self.opts,
            started,
            taken: AtomicUsize::new(0),
        })
    }
}
