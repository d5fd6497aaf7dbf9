//! The library's front door: a [`Batch`] of files written under one folder, from any number of
//! threads, through the same engine as `fastwrite extract` and `fastwrite mirror`.
//!
//! It is shaped like `std::fs::write` in a loop, because that is what it replaces: a program
//! that writes thousands of small files (a font's glyphs, an installer's payload, a build's
//! outputs) calls [`Batch::write`] or streams into [`Batch::create`], from rayon tasks if it
//! likes, and calls [`Batch::finish`] at the end. Handles are closed where the measured close
//! policy says (inline on a fast local disk; on a pool of close threads where closes are slow:
//! Windows, NFS, FUSE, `fsync`), and every close result comes back.
//!
//! The batch is this module; its builder (`builder.rs`), the writers behind
//! [`Batch::spawn_write`] (`background.rs`), a streamed file ([`FileWriter`], `file_writer.rs`)
//! and what a failed batch returns ([`FinishError`], `finish_error.rs`) each have a file.

mod background;
mod builder;
mod file_writer;
mod finish_error;

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::time::{Instant, SystemTime};

use anyhow::anyhow;

use crate::cancel::Cancel;
use crate::engine::{Content, Engine, WriterState};
use crate::error::{Error, ErrorKind, Tag};
use crate::options::Options;
use crate::plan::{self, Entry, EntryKind};
use crate::report::Report;
use crate::sync::Unpoisoned;
use background::{Background, TaskDone};
pub use builder::BatchBuilder;
pub use file_writer::FileWriter;
pub use finish_error::FinishError;

/// A file's optional permission bits and modification time.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let meta = fastwrite::FileMeta::new()
///     .mode(0o644)
///     .mtime(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
/// assert_eq!(meta.get_mode(), Some(0o644));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileMeta {
    mode: Option<u32>,
    mtime: Option<SystemTime>,
}

impl FileMeta {
    /// Neither: the file gets `0o666` (a directory `0o777`) less the umask, and the time it
    /// is written.
    pub fn new() -> FileMeta {
        FileMeta::default()
    }

    /// Unix permission bits, applied exactly (setuid, setgid and sticky included), whatever
    /// the umask. Ignored on Windows but for the owner's write bit: without it the file is
    /// made read-only.
    pub fn mode(mut self, mode: u32) -> FileMeta {
        self.mode = Some(mode & 0o7777);
        self
    }

    /// The modification time to set (on the open handle, before the close).
    pub fn mtime(mut self, mtime: SystemTime) -> FileMeta {
        self.mtime = Some(mtime);
        self
    }

    /// The permission bits, if set.
    pub fn get_mode(&self) -> Option<u32> {
        self.mode
    }

    /// The modification time, if set.
    pub fn get_mtime(&self) -> Option<SystemTime> {
        self.mtime
    }
}

/// Files written under one folder, fast, from any number of threads, with every error
/// returned.
///
/// Paths are relative to the folder and checked as extraction checks archive names: an
/// absolute path, a `..` component, a drive letter or a name the system cannot hold is
/// refused ([`ErrorKind::Refused`]) before anything is written. Parent directories are made
/// as needed. Each file is created new, written, given its mode and mtime on the open handle,
/// and handed to the close stage. On Linux and macOS everything is made relative to a handle on
/// the folder, opened when the batch is built, and never through a symlink anywhere in a path:
/// a folder another program swaps for a symlink meanwhile fails the writes below it ("a symlink
/// is in the way"), and paths longer than `PATH_MAX` work.
///
/// **Where errors come back.** A call returns what it met itself: a refused path, an existing
/// file, a full disk. What happens after the call returned comes back from
/// [`Batch::take_errors`] (as it happens) or [`Batch::finish`]: a failed close (the file is
/// then removed: nothing unverified stays under its name), a [`FileWriter`] dropped without
/// [`finish`](FileWriter::finish), a symlink or directory mode that could not be applied at
/// the end. Each error comes back exactly once.
///
/// **Write in [`Batch::scope`]**: the work runs in a closure, and however it ends (an early
/// `?` included) the batch is finished and every error comes back in one `Result`. With
/// [`finish`](Batch::finish) called by hand, an early `?` between creating the batch and
/// finishing it drops the batch: dropping does everything `finish` does — waits for every
/// close, makes the symlinks, applies directory metadata, removes a file whose close failed —
/// and never panics, but the errors of that work have nowhere to go and are lost, as with
/// std's `File`.
///
/// ```
/// use rayon::prelude::*;
///
/// let out = tempfile::tempdir()?;
/// let report = fastwrite::Batch::new(out.path())?.scope(|batch| {
///     (0..1000).into_par_iter().try_for_each(|i| {
///         batch.write(format!("glyphs/g{i}.glif"), format!("<glyph n='{i}'/>"))
///     })
/// })?; // every close checked, every error back
/// assert_eq!(report.files, 1000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Batch {
    /// `None` once finished. Shared with the background writers while they run.
    engine: Option<Arc<Box<Engine>>>,
    cancel: Cancel,
    /// Writer states, each with a copy buffer and closes not yet handed over. A thread uses
    /// the slot of its own index (another if that one is busy), so each state mostly stays
    /// with one thread and its lock with that thread's cache.
    slots: Arc<[Slot]>,
    /// The writers of [`Batch::spawn_write`], started by its first call.
    background: OnceLock<Background>,
    started: Instant,
    /// Errors returned by `take_errors`, which the end still counts.
    taken: AtomicUsize,
    /// The staging folder of a batch into a new or empty folder, and what to warn of at the
    /// end.
    staging: Option<(crate::engine::Staging, Vec<String>)>,
    /// Where the batch writes (its staging folder, while it has one): what the background
    /// writers are sized by.
    dest: crate::place::Place,
    opts: Options,
}

/// A writer state behind a lock of its own, alone on its cache lines.
#[derive(Default)]
#[repr(align(128))]
struct Slot(Mutex<WriterState>);

/// Each thread's index, for its home slot.
fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    INDEX.with(|i| *i)
}

impl Batch {
    /// A batch with the default options (see [`BatchBuilder`]) rooted at `root`, which is
    /// created if missing; or, with the `s3` feature, at a bucket prefix, `s3://BUCKET/PREFIX`
    /// (docs/object-storage.md).
    ///
    /// # Errors
    /// [`ErrorKind::Directory`] if the folder cannot be made or read.
    pub fn new(root: impl AsRef<Path>) -> Result<Batch, Error> {
        Batch::builder(root).build()
    }

    /// A batch rooted at `root`, configured before it starts.
    ///
    /// ```
    /// use fastwrite::{Batch, CloseMode, Overwrite};
    /// let out = tempfile::tempdir()?;
    /// std::fs::write(out.path().join("a.txt"), "old")?;
    /// let batch = Batch::builder(out.path())
    ///     .close(CloseMode::Deferred { threads: 8 })
    ///     .overwrite(Overwrite::Replace)
    ///     .fsync(true)
    ///     .build()?;
    /// batch.write("a.txt", "new")?; // written aside, renamed over "old" after a good close
    /// batch.finish()?;
    /// assert_eq!(std::fs::read(out.path().join("a.txt"))?, b"new");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(root: impl AsRef<Path>) -> BatchBuilder {
        let opts = Options {
            // The callers' threads, unless `writers` says: the background writers are then
            // sized by the output's filesystem.
            threads: None,
            // A program's modes are meant as given.
            keep_setid: true,
            ..Options::default()
        };
        BatchBuilder {
            root: root.as_ref().to_path_buf(),
            opts,
        }
    }

    /// A call's result: in an atomic batch its error is the batch's too (counted as taken, so
    /// that `finish` fails and the folder is not put in place).
    fn counted<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        if result.is_err() && self.opts.atomic {
            self.taken.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn engine(&self) -> &Engine {
        // Only `finish` and `drop` take it, and both consume the batch.
        self.engine
            .as_deref()
            .expect("the engine lives as long as the batch")
            .as_ref()
    }

    /// The folder files are written under.
    pub fn root(&self) -> &Path {
        self.engine().run().root()
    }

    /// Checks `path` as every call checks it, and writes nothing: the way to refuse a name
    /// before making a file's content (a Python program's `Batch.open` does). An error here
    /// is not one of the batch's: an atomic batch still succeeds.
    ///
    /// ```
    /// let out = tempfile::tempdir()?;
    /// let batch = fastwrite::Batch::new(out.path())?;
    /// assert!(batch.check("glyphs/a.glif").is_ok());
    /// let refused = batch.check("../a.glif").unwrap_err();
    /// assert_eq!(refused.kind(), fastwrite::ErrorKind::Refused);
    /// batch.finish()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::Refused`]: the path would leave the root, or is a name this system cannot
    /// hold.
    pub fn check(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        file_entry(path.as_ref(), EntryKind::File, FileMeta::new(), 0).map(drop)
    }

    /// Writes `contents` to the file at `path` (relative to the root), making its parents.
    ///
    /// # Errors
    /// [`ErrorKind::Refused`] (a path leaving the root), [`ErrorKind::AlreadyExists`] (under
    /// [`Overwrite::Refuse`](crate::Overwrite::Refuse)), [`ErrorKind::Directory`], [`ErrorKind::Write`],
    /// [`ErrorKind::Metadata`], [`ErrorKind::Cancelled`]. Nothing is left of a file that
    /// failed. Its close comes later: see [`Batch`] for where those errors come back.
    pub fn write(&self, path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> Result<(), Error> {
        self.write_with(path, contents, FileMeta::new())
    }

    /// [`Batch::write`], with a mode and an mtime.
    ///
    /// # Errors
    /// As [`Batch::write`].
    pub fn write_with(
        &self,
        path: impl AsRef<Path>,
        contents: impl AsRef<[u8]>,
        meta: FileMeta,
    ) -> Result<(), Error> {
        let result = (|| {
            let data = contents.as_ref();
            let entry = file_entry(path.as_ref(), EntryKind::File, meta, data.len() as u64)?;
            self.with_state(|engine, state| engine.write_file(state, &entry, Content::Bytes(data)))
                .map(|_| ())
        })();
        self.counted(result)
    }

    /// Hands the file at `path` with `contents` to the batch's own writers and returns at once:
    /// the way for one thread (a plain loop, a program in a managed runtime) to keep many files
    /// in flight where creates and writes are round trips (NFS, SMB, sshfs, cloud mounts).
    /// The writers are started by the first call, sized like the command line's: one per core
    /// on a local disk, more on a network or FUSE filesystem. At most 64 MiB of content waits
    /// for them; a caller that gets further ahead waits for room.
    ///
    /// ```
    /// let out = tempfile::tempdir()?;
    /// let report = fastwrite::Batch::new(out.path())?.scope(|batch| {
    ///     for i in 0..100 {
    ///         batch.spawn_write(format!("glyphs/g{i}.glif"), format!("<glyph name='g{i}'/>"))?;
    ///     }
    ///     Ok::<(), fastwrite::Error>(())
    /// })?; // waits for every background write and every close
    /// assert_eq!(report.files, 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::Refused`] now (a path leaving the root), or [`ErrorKind::Write`] if the
    /// writer threads cannot be started. What happens to the file later (an existing file, a
    /// full disk, a failed close) comes back from [`Batch::take_errors`] or [`Batch::finish`],
    /// with its path, exactly as a failed close does.
    pub fn spawn_write(
        &self,
        path: impl AsRef<Path>,
        contents: impl Into<Vec<u8>>,
    ) -> Result<(), Error> {
        self.spawn_write_with(path, contents, FileMeta::new())
    }

    /// [`Batch::spawn_write`], with a mode and an mtime.
    ///
    /// # Errors
    /// As [`Batch::spawn_write`].
    pub fn spawn_write_with(
        &self,
        path: impl AsRef<Path>,
        contents: impl Into<Vec<u8>>,
        meta: FileMeta,
    ) -> Result<(), Error> {
        let result = (|| {
            let data: Vec<u8> = contents.into();
            let entry = file_entry(path.as_ref(), EntryKind::File, meta, data.len() as u64)?;
            let background = match self.background.get() {
                Some(background) => background,
                None => {
                    let started = Background::start(&self.dest, &self.opts)?;
                    // The close pool's arrival side: these writers, not the callers.
                    self.engine().writers_at_least(started.writers.0);
                    self.background.get_or_init(|| started)
                }
            };
            let bytes = data.len() as u64;
            background.admit(bytes);
            let done = TaskDone {
                state: Arc::clone(&background.state),
                bytes,
            };
            let engine = Arc::clone(
                self.engine
                    .as_ref()
                    .expect("the engine lives as long as the batch"),
            );
            let slots = Arc::clone(&self.slots);
            background.pool.spawn(move || {
                // The task's shares of the engine and the slots go before it counts itself done, so
                // that the batch's end finds the engine its own.
                let done = done;
                {
                    let (engine, slots) = (engine, slots);
                    let target: &Engine = &**engine;
                    let written = with_state(target, &slots, |engine, state| {
                        engine.write_file(state, &entry, Content::Bytes(&data))
                    });
                    if let Err(error) = written {
                        engine.run().record(error);
                    }
                }
                drop(done);
            });
            Ok(())
        })();
        self.counted(result)
    }

    /// Starts the file at `path`, to be written through [`io::Write`](std::io::Write) (for serializers:
    /// quick-xml, serde writers, `write!`). Writes are buffered; nothing is kept until
    /// [`FileWriter::finish`].
    ///
    ///
    /// ```
    /// use std::io::Write;
    /// let out = tempfile::tempdir()?;
    /// let batch = fastwrite::Batch::new(out.path())?;
    /// let mut file = batch.create("fontinfo.plist")?;
    /// writeln!(file, "<plist version=\"1.0\">")?;
    /// writeln!(file, "</plist>")?;
    /// file.finish()?;
    /// batch.finish()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Batch::write`], for creating the file.
    pub fn create(&self, path: impl AsRef<Path>) -> Result<FileWriter<'_>, Error> {
        self.create_with(path, FileMeta::new())
    }

    /// [`Batch::create`], with a mode and an mtime (set when it is finished).
    ///
    /// # Errors
    /// As [`Batch::create`].
    pub fn create_with(
        &self,
        path: impl AsRef<Path>,
        meta: FileMeta,
    ) -> Result<FileWriter<'_>, Error> {
        let result = (|| {
            let entry = file_entry(path.as_ref(), EntryKind::File, meta, 0)?;
            let file = self.with_state(|engine, state| engine.start_streamed(state, entry))?;
            Ok(FileWriter { batch: self, file })
        })();
        self.counted(result)
    }

    /// Creates the directory at `path` now (and its parents); its mode and mtime, if given,
    /// are applied at [`Batch::finish`], once everything inside it is written.
    ///
    /// # Errors
    /// [`ErrorKind::Refused`], or [`ErrorKind::Directory`] if it cannot be made (or something
    /// that is not a directory is there).
    pub fn create_dir(&self, path: impl AsRef<Path>, meta: FileMeta) -> Result<(), Error> {
        let result = (|| {
            let entry = file_entry(path.as_ref(), EntryKind::Dir, meta, 0)?;
            let engine = self.engine();
            engine.make_dir(&entry)?;
            if meta != FileMeta::new() {
                engine.add_dir(entry);
            }
            Ok(())
        })();
        self.counted(result)
    }

    /// Makes a symlink at `path` pointing to `target`, at [`Batch::finish`] (after every file
    /// is written, so nothing is ever written through it). The target must stay inside the
    /// root, as for an extracted archive.
    ///
    /// # Errors
    /// [`ErrorKind::Refused`] now; what happens at the end (an existing file, the system's
    /// refusal) comes back from [`Batch::finish`].
    pub fn symlink(&self, path: impl AsRef<Path>, target: impl AsRef<Path>) -> Result<(), Error> {
        let result = (|| {
            let path = path.as_ref();
            let target = target.as_ref();
            let kind = EntryKind::Symlink {
                target: target.to_path_buf(),
            };
            let entry = file_entry(path, kind, FileMeta::new(), 0)?;
            let spelled = target.to_str().ok_or_else(|| {
                let error = anyhow!("refused: the symlink target is not valid Unicode");
                Error::new(path, ErrorKind::Refused, error)
            })?;
            plan::check_symlink_target(&entry.path, spelled)
                .map_err(|r| anyhow!("refused: {r}"))
                .tag(path, ErrorKind::Refused)?;
            self.engine().add_link(entry);
            Ok(())
        })();
        self.counted(result)
    }

    /// Stops the batch: every later write fails with [`ErrorKind::Cancelled`], a
    /// [`FileWriter`] stops at its next buffer flush, and [`Batch::finish`] makes no links
    /// and applies no directory metadata. What was written is still closed and checked.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The batch's cancellation flag, to cancel it from elsewhere.
    pub fn cancel_flag(&self) -> Cancel {
        self.cancel.clone()
    }

    /// The errors that happened out of sight since the last call: failed closes (as the
    /// close threads meet them), dropped [`FileWriter`]s. They are not returned again by
    /// [`Batch::finish`], which still fails, and counts them ([`FinishError::taken`]). The
    /// closes of the last few files a thread wrote may still be pending; `finish` waits for
    /// them.
    pub fn take_errors(&self) -> Vec<Error> {
        let errors = self.engine().run().take_failures();
        self.taken.fetch_add(errors.len(), Ordering::Relaxed);
        errors
    }

    /// Waits for every close, makes the symlinks, applies directory metadata (deepest first),
    /// and reports.
    ///
    /// # Errors
    /// A [`FinishError`] holding the report and every error not already returned by a call
    /// or by [`Batch::take_errors`]; errors that `take_errors` returned make it fail too, and
    /// are counted there.
    pub fn finish(mut self) -> Result<Report, FinishError> {
        self.conclude(None)
    }

    /// Runs `work` with this batch, then finishes it: the way to write a batch that cannot lose
    /// an error. Whether `work` returns `Ok` or stops early with `?`, every close is waited
    /// for, and what went wrong comes back together: the work's own error (the first `?` that
    /// fired) and every error of the batch it did not see (failed closes, files dropped
    /// unfinished, links that could not be made).
    ///
    /// ```
    /// use rayon::prelude::*;
    /// use std::io::Write;
    ///
    /// let out = tempfile::tempdir()?;
    /// let report = fastwrite::Batch::new(out.path())?.scope(|batch| {
    ///     batch.write("metainfo.plist", "<plist/>")?;
    ///     (0..100).into_par_iter().try_for_each(|i| {
    ///         let mut file = batch.create(format!("glyphs/g{i}.glif"))?;
    ///         write!(file, "<glyph name='g{i}'/>")?; // an io::Error converts, as from a serializer
    ///         file.finish()
    ///     })
    /// })?;
    /// assert_eq!(report.files, 101);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A [`FinishError`] holding the work's error, if it returned one, the report, and every
    /// error of the batch not returned before.
    pub fn scope<E>(
        mut self,
        work: impl FnOnce(&Batch) -> Result<(), E>,
    ) -> Result<Report, FinishError<E>> {
        let outcome = work(&self);
        self.conclude(outcome.err())
    }

    /// Ends the batch: `Ok` only if neither the work nor the batch failed, counting the errors
    /// `take_errors` returned before.
    fn conclude<E>(&mut self, work: Option<E>) -> Result<Report, FinishError<E>> {
        let mut report = self.end();
        report.failures_taken = self.taken.load(Ordering::Relaxed);
        if let Some((staging, mut warnings)) = self.staging.take() {
            report.warnings.append(&mut warnings);
            // The work's error fails an atomic batch as a failed write does.
            staging.settle(&self.opts, &mut report, work.is_some());
        }
        if work.is_none() && report.failures.is_empty() && report.failures_taken == 0 {
            Ok(report)
        } else {
            Err(FinishError {
                report: Box::new(report),
                work,
            })
        }
    }

    fn end(&mut self) -> Report {
        // The background writers first: every file they were given is written (or failed).
        let writers = self.background.take().map(|background| {
            let writers = background.writers.clone();
            background.finish();
            writers
        });
        let Some(engine) = self.engine.take() else {
            return Report::default();
        };
        for slot in self.slots.iter() {
            engine.flush(&mut slot.0.lock().unpoisoned());
        }
        // Every background task dropped its share of the engine before saying it was done.
        let engine = match Arc::try_unwrap(engine) {
            Ok(engine) => engine,
            Err(_) => unreachable!("no background writer outlives its batch"),
        };
        let mut report = engine.finish();
        report.wall = self.started.elapsed();
        if let Some((count, why)) = writers {
            report.writers = count;
            report.writers_why = why;
        }
        report
    }

    /// Runs `f` with a writer state of its own: the thread's home slot, or the next one free,
    /// or, with every slot busy, the home slot once it is free. A panic in `f` leaves the state
    /// in its slot, pending closes and all (the lock's poison is ignored: the state is whole).
    fn with_state<'s, R>(&'s self, f: impl FnOnce(&'s Engine, &mut WriterState) -> R) -> R {
        with_state(self.engine(), &self.slots, f)
    }
}

/// Runs `f` with a writer state of its own from `slots` (see [`Batch::with_state`]).
fn with_state<'e, R>(
    engine: &'e Engine,
    slots: &[Slot],
    f: impl FnOnce(&'e Engine, &mut WriterState) -> R,
) -> R {
    let n = slots.len();
    let home = thread_index() % n;
    for i in 0..n {
        let slot = &slots[(home + i) % n].0;
        let mut state = match slot.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => continue,
        };
        return f(engine, &mut state);
    }
    let mut state = slots[home].0.lock().unpoisoned();
    f(engine, &mut state)
}

impl Drop for Batch {
    fn drop(&mut self) {
        // Everything `finish` does; its errors have nowhere to go (see the type's docs).
        let mut report = self.end();
        // What was written is put in place, as if each file had been written there; an
        // atomic batch never finished is not.
        if let Some((staging, ..)) = self.staging.take() {
            if self.opts.atomic {
                let _ = staging.discard();
            } else {
                staging.settle(&self.opts, &mut report, false);
            }
        }
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("root", &self.engine.as_deref().map(|e| e.run().root()))
            .finish_non_exhaustive()
    }
}

/// An entry for a path a program gave, checked like an archive's names.
fn file_entry(path: &Path, kind: EntryKind, meta: FileMeta, size: u64) -> Result<Entry, Error> {
    Entry::for_path(path, kind, meta.mode, meta.mtime, size)
}
