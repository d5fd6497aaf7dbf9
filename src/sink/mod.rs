//! The write stage: turns validated entries into files under the output folder.
//!
//! A run goes through it in one direction:
//! 1. Directories first: a source registers each entry before its data is written
//!    ([`Sink::prepare`] for a whole plan, or [`Sink::add_dir`], [`Sink::add_link`] and
//!    [`Sink::prepare_file`] one entry at a time for a stream). Every directory is created once,
//!    parents first, before any file in it; one that exists as a symlink or a file blocks
//!    everything below it, and existing files conflict according to the overwrite policy.
//! 2. [`Writer::write_file`] is called from many writer threads at once: create, write, set
//!    mtime and mode on the open handle, then hand the handle to the close stage (the
//!    [`ClosePool`], or an inline close with `--no-defer-close`).
//! 3. [`Sink::finish`] waits for every close, creates hard links and symlinks (last, so nothing
//!    is ever written through one), applies directory modes and mtimes deepest first, and
//!    builds the report.
//!
//! Files are created with `O_CREAT | O_EXCL` (`create_new`): that never follows a symlink, never
//! truncates anything, and costs nothing over a plain create, so an empty output folder needs no
//! other check. Replacing (`--overwrite`) writes to a temporary name and renames it into place
//! after a good close.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rayon::prelude::*;

use crate::close_pool::{
    CLOSE_BATCH, CloseJob, ClosePool, CloseTally, Closer, Finalize, SLOW_CLOSE, complete,
    threads_for,
};
use crate::interrupt;
use crate::options::{CloseMode, Options, Overwrite, default_close_threads};
use crate::plan::{Entry, EntryKind, Plan};
use crate::platform;
use crate::progress::Reporter;
use crate::report::{Failure, Report};

mod copy;

/// The write stage's threads: a rayon pool of its own (`-j`), named for profilers.
pub fn writer_pool(opts: &Options) -> anyhow::Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.max(1))
        .thread_name(|i| format!("fastwrite-write-{i}"))
        .build()
        .context("cannot start the writer threads")
}

/// Files are copied through a per-writer buffer of this size: a smaller file takes one read and
/// one write; a larger one is streamed in chunks of this size and never held whole.
pub const CHUNK: usize = 1 << 20;

pub struct Sink<'a> {
    root: PathBuf,
    opts: &'a Options,
    reporter: &'a dyn Reporter,
    umask: u32,
    /// Whether the output folder was missing or empty at the start: then nothing can be in the
    /// way, and no file needs checking before it is written.
    fresh: bool,
    closer: Arc<dyn Closer>,
    /// The close pool: started with the sink, or by `--defer-close auto` once closes prove
    /// slow (`None` inside: it could not be started, so closes stay inline). Unset: inline.
    pool: OnceLock<Option<ClosePool>>,
    /// `--defer-close auto`: the most close threads, and the inline closes measured since the
    /// last look (count, nanoseconds).
    auto: Option<usize>,
    window: CloseWindow,
    /// Files written since the pool's size was last checked against its measured closes.
    since_sized: AtomicU64,
    failures: Mutex<Vec<Failure>>,
    dirs: Mutex<Dirs>,
    /// Entries whose work waits until every file is closed: links, and directory metadata.
    deferred: Mutex<Deferred>,
    files: AtomicU64,
    bytes: AtomicU64,
    skipped: AtomicU64,
    write_nanos: AtomicU64,
    inline_close_nanos: AtomicU64,
    inline_close_failures: AtomicU64,
    temp_counter: AtomicU64,
    copier: copy::Copier,
    /// New directories get exactly 0o777 less the umask: not so under a setgid directory,
    /// whose new subdirectories inherit the bit.
    plain_mkdir: bool,
}

/// What the directory stage knows about directories under the output folder.
#[derive(Default)]
struct Dirs {
    /// Real directories (created now, or found), never symlinks.
    ready: HashSet<PathBuf>,
    /// Directories that cannot be used, with why.
    blocked: HashMap<PathBuf, String>,
    created: u64,
    /// Directories this run created (with mode 0o777 less the umask).
    made_here: HashSet<PathBuf>,
    /// Time spent creating (or inspecting) directories.
    busy: Duration,
    /// Every ready directory, parents first (for `--fsync`).
    order: Vec<PathBuf>,
}

#[derive(Default)]
struct Deferred {
    /// Symlinks and hard links, in the source's order.
    links: Vec<Entry>,
    /// Directories with a mode or mtime to apply once their content is complete.
    dirs: Vec<Entry>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its data consistent, so a panic elsewhere does not taint it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<'a> Sink<'a> {
    /// Opens the output folder (creating it if needed) and starts the close stage.
    pub fn new(
        root: &Path,
        opts: &'a Options,
        reporter: &'a dyn Reporter,
        closer: Arc<dyn Closer>,
    ) -> anyhow::Result<Sink<'a>> {
        let fresh = match std::fs::read_dir(root) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(root)
                    .with_context(|| format!("cannot create output folder '{}'", root.display()))?;
                true
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot use output folder '{}'", root.display()));
            }
        };
        // Closes take milliseconds on Windows and with --fsync: auto defers from the start
        // there, and sizes the pool from what it measures.
        let (start, threads, auto) = match opts.close {
            CloseMode::Deferred { threads } => (true, threads, None),
            CloseMode::Auto { max_threads } => {
                let max_threads = within_open_file_limit(max_threads, opts.threads);
                (
                    cfg!(windows) || opts.fsync,
                    default_close_threads().min(max_threads),
                    Some(max_threads),
                )
            }
            CloseMode::Inline => (false, 0, None),
        };
        let pool = OnceLock::new();
        if start {
            let started = ClosePool::new(threads, opts.close_queue_bound(), Arc::clone(&closer))
                .context("cannot start the close threads")?;
            let _ = pool.set(Some(started));
        }
        Ok(Sink {
            root: root.to_path_buf(),
            opts,
            reporter,
            umask: platform::current_umask(),
            fresh,
            closer,
            pool,
            auto,
            window: CloseWindow::default(),
            since_sized: AtomicU64::new(0),
            failures: Mutex::new(Vec::new()),
            dirs: Mutex::default(),
            deferred: Mutex::default(),
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            write_nanos: AtomicU64::new(0),
            inline_close_nanos: AtomicU64::new(0),
            inline_close_failures: AtomicU64::new(0),
            temp_counter: AtomicU64::new(0),
            copier: copy::Copier::default(),
            plain_mkdir: !platform::is_setgid_dir(root),
        })
    }

    /// Whether the output folder was missing or empty at the start.
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// Records a failed entry. Any thread may call this.
    pub fn fail(&self, entry: &Entry, error: anyhow::Error) {
        self.fail_named(&entry.name, error);
    }

    /// Records a failure for an entry the source could not even turn into an [`Entry`].
    pub fn fail_named(&self, name: &str, error: anyhow::Error) {
        lock(&self.failures).push(Failure {
            name: name.to_string(),
            error,
        });
    }

    /// Registers a whole plan before any file is written: links and directory metadata are
    /// deferred, and conflicts with existing files said up front. Leaves in the plan only the
    /// files to write; a writer calls [`Sink::ensure_parents`] before each.
    ///
    /// Into a missing or empty output folder nothing can be in the way, so nothing is checked
    /// and no directory made here: the writers make each file's parents as they go (see
    /// [`Sink::ensure_parents`]), which overlaps directory creation with writing. Otherwise
    /// every directory is made first and every file checked, so conflicts are said before
    /// anything is written.
    pub fn prepare(&mut self, plan: &mut Plan) {
        if !self.fresh {
            self.create_dirs(plan.entries.iter().map(|e| match e.kind {
                EntryKind::Dir => e.path.as_path(),
                _ => e.path.parent().unwrap_or(Path::new("")),
            }));
        }
        let mut files = Vec::with_capacity(plan.entries.len());
        for entry in std::mem::take(&mut plan.entries) {
            match entry.kind {
                EntryKind::Dir => self.add_dir(entry),
                EntryKind::File => {
                    if self.fresh || self.prepare_file(&entry) {
                        files.push(entry);
                    }
                }
                EntryKind::Symlink { .. } | EntryKind::Hardlink { .. } => self.add_link(entry),
            }
        }
        plan.entries = files;
    }

    /// Creates these directories and their parents, one level of depth at a time (every parent
    /// before its children), each level in parallel on the current rayon pool: a `mkdir` costs
    /// tens of microseconds, and a wheel or a source tree has thousands of directories.
    pub fn create_dirs<'p>(&self, wanted: impl IntoIterator<Item = &'p Path>) {
        let start = Instant::now();
        let mut all = HashSet::new();
        for dir in wanted {
            for a in dir.ancestors().filter(|a| !a.as_os_str().is_empty()) {
                if !all.insert(a.to_path_buf()) {
                    break;
                }
            }
        }
        let mut levels: Vec<Vec<PathBuf>> = Vec::new();
        for dir in all {
            let depth = dir.components().count();
            if levels.len() < depth {
                levels.resize_with(depth, Vec::new);
            }
            levels[depth - 1].push(dir);
        }
        for level in levels {
            let todo: Vec<PathBuf> = {
                let mut dirs = lock(&self.dirs);
                let mut todo = Vec::with_capacity(level.len());
                for dir in level {
                    if dirs.ready.contains(&dir) {
                        continue;
                    }
                    // Below a directory that could not be made: blocked for the same reason
                    // (trying would only say "No such file or directory").
                    let parent = dir.parent().and_then(|p| dirs.blocked.get(p)).cloned();
                    match parent {
                        Some(reason) => {
                            dirs.blocked.insert(dir, reason);
                        }
                        None => todo.push(dir),
                    }
                }
                todo
            };
            let made: Vec<(PathBuf, anyhow::Result<bool>)> = todo
                .into_par_iter()
                .map(|d| {
                    let made = self.create_dir(&d);
                    (d, made)
                })
                .collect();
            let mut dirs = lock(&self.dirs);
            for (dir, made) in made {
                match made {
                    Ok(created) => {
                        dirs.created += u64::from(created);
                        if created {
                            dirs.made_here.insert(dir.clone());
                        }
                        dirs.ready.insert(dir.clone());
                        dirs.order.push(dir);
                    }
                    Err(e) => {
                        dirs.blocked.insert(dir, format!("{e:#}"));
                    }
                }
            }
        }
        lock(&self.dirs).busy += start.elapsed();
    }

    /// Makes sure `rel`'s parent directories exist, creating them parents first. Any writer
    /// may call it: no lock is held during a system call, so writers never wait for each
    /// other's `mkdir` (two racing for the same directory both find it a real directory).
    pub fn ensure_parents(&self, rel: &Path) -> anyhow::Result<()> {
        match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => self.make_dir(parent),
            None => Ok(()),
        }
    }

    fn make_dir(&self, dir: &Path) -> anyhow::Result<()> {
        {
            let dirs = lock(&self.dirs);
            if dirs.ready.contains(dir) {
                return Ok(());
            }
            if let Some(reason) = dirs.blocked.get(dir) {
                bail!("cannot create directory '{}': {reason}", dir.display());
            }
        }
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.make_dir(parent)?;
        }
        let start = Instant::now();
        let made = self.create_dir(dir);
        let mut dirs = lock(&self.dirs);
        dirs.busy += start.elapsed();
        match made {
            Ok(created) => {
                // Two writers may race for one directory: the one whose mkdir made it counts it,
                // whichever of them gets here first.
                dirs.created += u64::from(created);
                if created {
                    dirs.made_here.insert(dir.to_path_buf());
                }
                if dirs.ready.insert(dir.to_path_buf()) {
                    dirs.order.push(dir.to_path_buf());
                }
                Ok(())
            }
            Err(e) => {
                let reason = format!("{e:#}");
                dirs.blocked.insert(dir.to_path_buf(), reason.clone());
                bail!("cannot create directory '{}': {reason}", dir.display());
            }
        }
    }

    /// Registers a directory entry. The directory is created before anything inside it (by
    /// [`Sink::create_dirs`] or [`Sink::ensure_parents`]), or at the end if it stays empty; its
    /// mode and mtime are applied last.
    pub fn add_dir(&self, entry: Entry) {
        lock(&self.deferred).dirs.push(entry);
    }

    /// Registers a symlink or hard link, created after every file is closed.
    pub fn add_link(&self, entry: Entry) {
        if let Err(error) = self.ensure_parents(&entry.path) {
            return self.fail(&entry, error);
        }
        if self.conflicts(&entry) {
            return;
        }
        lock(&self.deferred).links.push(entry);
    }

    /// Makes an entry's parent directories, recording the failure if it cannot. What a writer
    /// calls right before writing: the O_EXCL create then settles any conflict.
    pub fn make_parents(&self, entry: &Entry) -> bool {
        match self.ensure_parents(&entry.path) {
            Ok(()) => true,
            Err(error) => {
                self.fail(entry, error);
                false
            }
        }
    }

    /// Gets ready to write a file ahead of time: its parents exist, and nothing is in its way
    /// (or the overwrite policy says what to do). False: the entry was skipped or has failed.
    pub fn prepare_file(&self, entry: &Entry) -> bool {
        self.make_parents(entry) && !self.conflicts(entry)
    }

    /// Says before anything is written whether an entry would hit an existing file: only
    /// needed when the output folder was not empty (the O_EXCL create still guards against
    /// anything that appears meanwhile). True: skipped or failed.
    fn conflicts(&self, entry: &Entry) -> bool {
        if self.fresh || self.opts.overwrite == Overwrite::Replace {
            return false;
        }
        let dest = self.root.join(&entry.path);
        if dest.symlink_metadata().is_err() {
            return false;
        }
        if self.opts.overwrite == Overwrite::Skip {
            self.skipped.fetch_add(1, Ordering::Relaxed);
        } else {
            self.fail(entry, already_exists(&dest));
        }
        true
    }

    /// Creates one directory whose parent exists. Ok(false) if a real directory is already there.
    fn create_dir(&self, rel: &Path) -> anyhow::Result<bool> {
        let path = self.root.join(rel);
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(e).with_context(|| format!("creating directory '{}'", path.display()));
            }
            Err(_) => {}
        }
        let meta = path
            .symlink_metadata()
            .with_context(|| format!("inspecting '{}'", path.display()))?;
        if meta.is_dir() {
            return Ok(false);
        }
        let what = if meta.file_type().is_symlink() {
            "a symlink"
        } else {
            "a file"
        };
        if self.opts.overwrite != Overwrite::Replace {
            bail!(
                "'{}' is {what}, not a directory (it is never followed; use --overwrite to replace it)",
                path.display()
            );
        }
        // Removing a symlink removes the link itself, never what it points to.
        std::fs::remove_file(&path)
            .with_context(|| format!("removing {what} '{}' to replace it", path.display()))?;
        std::fs::create_dir(&path)
            .with_context(|| format!("creating directory '{}'", path.display()))?;
        Ok(true)
    }

    /// A writer thread's handle on the sink. Create one per worker (for instance in rayon's
    /// `for_each_init`); dropping it hands over the closes it still holds.
    pub fn writer(&self) -> Writer<'_, 'a> {
        Writer {
            sink: self,
            // Allocated on first use: a mirror makes a writer per directory, and copies in the
            // kernel, where the buffer is only a fallback.
            buf: Vec::new(),
            batch: Vec::new(),
        }
    }

    /// The close pool, if closes go there now.
    fn running_pool(&self) -> Option<&ClosePool> {
        self.pool.get().and_then(Option::as_ref)
    }

    /// Hands a written file to the close stage: the writer's batch for the pool, or closed
    /// here and now (which `--defer-close auto` measures).
    fn hand_over(&self, batch: &mut Vec<CloseJob>, job: CloseJob) {
        match self.running_pool() {
            Some(pool) => {
                batch.push(job);
                if batch.len() >= CLOSE_BATCH {
                    pool.submit(batch);
                }
                self.resize_auto_pool(pool);
            }
            None => {
                let took = self.close_inline(job);
                self.measure_inline_close(took);
            }
        }
    }

    /// `--defer-close auto`, closing inline: every 4 closes, looks at how long they took, and
    /// starts the pool if each took `SLOW_CLOSE` (50 us) or more, when handing a handle over costs a
    /// few (a local disk closes in 2-10 us; Windows, NFS and FUSE take milliseconds). Whatever
    /// the write time, a slow close overlapped with the next write is time saved.
    fn measure_inline_close(&self, took: Duration) {
        const WINDOW: u64 = 4;
        let Some(max_threads) = self.auto else {
            return;
        };
        let w = &self.window;
        w.total.fetch_add(nanos(took), Ordering::Relaxed);
        w.fastest.fetch_min(nanos(took), Ordering::Relaxed);
        if w.count.fetch_add(1, Ordering::Relaxed) + 1 < WINDOW {
            return;
        }
        let seen = w.count.swap(0, Ordering::Relaxed);
        let close = Duration::from_nanos(w.total.swap(0, Ordering::Relaxed) / seen.max(1));
        let fastest = Duration::from_nanos(w.fastest.swap(u64::MAX, Ordering::Relaxed));
        // Slow means every close of the window was: one slow close among fast ones (a journal
        // commit on a local disk) is not a slow filesystem.
        if fastest >= SLOW_CLOSE && self.pool.get().is_none() {
            let threads = threads_for(self.opts.threads, self.mean_write(), close, max_threads);
            // A few threads first, so the other writers can hand over at once; then the rest,
            // which takes a while when it is hundreds.
            let pool = self.pool.get_or_init(|| {
                ClosePool::new(
                    threads.min(8),
                    self.opts.close_queue_bound(),
                    Arc::clone(&self.closer),
                )
                .ok()
            });
            if let Some(pool) = pool {
                // A thread that cannot be started leaves the pool as it is: it still works.
                let _ = pool.grow_to(threads);
            }
        }
    }

    /// `--defer-close auto`, closing in the pool: every 32 files, grows the pool to what the
    /// closes measured there and the write rate need (Little's law).
    fn resize_auto_pool(&self, pool: &ClosePool) {
        let Some(max_threads) = self.auto else {
            return;
        };
        if self.since_sized.fetch_add(1, Ordering::Relaxed) % 32 != 31 {
            return;
        }
        if let Some(close) = pool.mean_close(16) {
            let threads = threads_for(self.opts.threads, self.mean_write(), close, max_threads);
            // A thread that cannot be started leaves the pool as it is: it still works.
            let _ = pool.grow_to(threads);
        }
    }

    /// The mean time a writer takes to write one file (without closing it).
    fn mean_write(&self) -> Duration {
        let files = self.files.load(Ordering::Relaxed).max(1);
        Duration::from_nanos(self.write_nanos.load(Ordering::Relaxed) / files)
    }

    fn close_inline(&self, job: CloseJob) -> Duration {
        let start = Instant::now();
        let result = complete(job, self.closer.as_ref());
        let took = start.elapsed();
        self.inline_close_nanos
            .fetch_add(nanos(took), Ordering::Relaxed);
        if let Err(failure) = result {
            self.inline_close_failures.fetch_add(1, Ordering::Relaxed);
            self.failures
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(failure);
        }
        took
    }

    /// The file's mode as it will be on disk.
    fn file_mode(&self, entry: &Entry) -> u32 {
        match entry.mode {
            Some(mode) => self.opts.mode_bits(mode),
            None => 0o666 & !self.umask,
        }
    }

    fn temp_path(&self, dest: &Path) -> PathBuf {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let name = dest.file_name().unwrap_or_default().to_string_lossy();
        dest.with_file_name(format!(".{name}.fastwrite-{}-{n}", std::process::id()))
    }

    /// Creates the file (honouring the overwrite policy). None: skipped.
    fn create(
        &self,
        dest: PathBuf,
        mode: u32,
    ) -> anyhow::Result<Option<(File, PathBuf, Finalize)>> {
        let err = match platform::create_new(&dest, mode) {
            Ok(file) => return Ok(Some((file, dest, Finalize::Keep))),
            Err(err) => err,
        };
        if err.kind() != io::ErrorKind::AlreadyExists {
            return Err(err).with_context(|| format!("creating '{}'", dest.display()));
        }
        let is_dir = dest.symlink_metadata().is_ok_and(|m| m.is_dir());
        match self.opts.overwrite {
            Overwrite::Skip => Ok(None),
            _ if is_dir => bail!("a directory is in the way at '{}'", dest.display()),
            Overwrite::Refuse => Err(already_exists(&dest)),
            Overwrite::Replace => {
                let temp = self.temp_path(&dest);
                let file = platform::create_new(&temp, mode)
                    .with_context(|| format!("creating '{}'", temp.display()))?;
                Ok(Some((file, temp, Finalize::RenameTo(dest))))
            }
        }
    }

    fn write_file_inner(
        &self,
        entry: &Entry,
        content: Content<'_>,
        buf: &mut Vec<u8>,
    ) -> anyhow::Result<Option<(CloseJob, u64)>> {
        let mode = self.file_mode(entry);
        let Some((file, path, finalize)) = self.create(self.root.join(&entry.path), mode)? else {
            return Ok(None);
        };
        match self.fill(&file, &path, entry, content, buf, mode) {
            Ok(bytes) => {
                let job = CloseJob {
                    file,
                    path,
                    name: entry.name.clone(),
                    finalize,
                };
                Ok(Some((job, bytes)))
            }
            Err(error) => {
                // Nothing half-written stays behind, under any name.
                drop(file);
                let _ = std::fs::remove_file(&path);
                Err(error)
            }
        }
    }

    /// Copies the content, then sets mtime and mode on the open handle (no second open).
    fn fill(
        &self,
        mut file: &File,
        path: &Path,
        entry: &Entry,
        content: Content<'_>,
        buf: &mut Vec<u8>,
        mode: u32,
    ) -> anyhow::Result<u64> {
        let mut out = ChunkWriter {
            file: &mut file,
            sparse: entry.sparse,
            pending_hole: false,
        };
        let written = match content {
            Content::Bytes(data) => {
                if data.len() as u64 != entry.size {
                    bail!(
                        "the entry holds {} bytes, not its declared {}",
                        data.len(),
                        entry.size
                    );
                }
                out.write(data)
                    .with_context(|| format!("writing '{}'", path.display()))?;
                self.reporter.bytes_written(entry.size);
                entry.size
            }
            Content::Reader(src) => self.pump(&mut out, src, path, entry, buf)?,
            Content::File(mut src) => {
                let fast = self
                    .copier
                    .copy(src, out.file, entry.size, entry.sparse)
                    .with_context(|| format!("copying into '{}'", path.display()))?;
                if fast {
                    self.reporter.bytes_written(entry.size);
                    entry.size
                } else {
                    self.pump(&mut out, &mut src, path, entry, buf)?
                }
            }
        };
        out.finish(written)
            .with_context(|| format!("writing '{}'", path.display()))?;
        if let Some(mtime) = entry.mtime {
            file.set_modified(mtime)
                .with_context(|| format!("setting the mtime of '{}'", path.display()))?;
        }
        platform::fix_mode(file, mode, self.umask)
            .with_context(|| format!("setting the mode of '{}'", path.display()))?;
        Ok(written)
    }

    /// Copies the entry's content from `src` through the buffer, checking it against the declared
    /// size.
    fn pump(
        &self,
        out: &mut ChunkWriter<'_, '_>,
        src: &mut dyn Read,
        path: &Path,
        entry: &Entry,
        buf: &mut Vec<u8>,
    ) -> anyhow::Result<u64> {
        let mut written = 0u64;
        buf.clear();
        buf.reserve(CHUNK);
        loop {
            if interrupt::interrupted() {
                return Err(interrupt::Interrupted.into());
            }
            buf.clear();
            let n = src
                .take(CHUNK as u64)
                .read_to_end(buf)
                .context("reading the entry's data")?;
            if n == 0 {
                break;
            }
            written += n as u64;
            if written > entry.size {
                bail!(
                    "the entry holds more data than its declared size of {} bytes",
                    entry.size
                );
            }
            out.write(buf)
                .with_context(|| format!("writing '{}'", path.display()))?;
            self.reporter.bytes_written(n as u64);
        }
        if written != entry.size {
            bail!(
                "the entry is truncated: {written} of its {} bytes",
                entry.size
            );
        }
        Ok(written)
    }

    /// Creates a link at the entry's path with `make`, honouring the overwrite policy (a
    /// replacement is made under a temporary name and renamed over). False: skipped.
    fn place_link(
        &self,
        entry: &Entry,
        make: impl Fn(&Path) -> io::Result<()>,
    ) -> anyhow::Result<bool> {
        let dest = self.root.join(&entry.path);
        let err = match make(&dest) {
            Ok(()) => return Ok(true),
            Err(err) => err,
        };
        if err.kind() != io::ErrorKind::AlreadyExists {
            return Err(err).with_context(|| format!("creating '{}'", dest.display()));
        }
        match self.opts.overwrite {
            Overwrite::Refuse => Err(already_exists(&dest)),
            Overwrite::Skip => Ok(false),
            Overwrite::Replace => {
                let temp = self.temp_path(&dest);
                make(&temp).with_context(|| format!("creating '{}'", temp.display()))?;
                platform::replace(&temp, &dest).map_err(|e| {
                    let _ = std::fs::remove_file(&temp);
                    anyhow::Error::new(e).context(format!("replacing '{}'", dest.display()))
                })?;
                Ok(true)
            }
        }
    }

    fn create_symlink(&self, entry: &Entry, target: &Path) -> anyhow::Result<bool> {
        if !self.place_link(entry, |at| platform::symlink(target, at))? {
            return Ok(false);
        }
        if let Some(mtime) = entry.mtime {
            let dest = self.root.join(&entry.path);
            platform::set_path_mtime(&dest, mtime)
                .with_context(|| format!("setting the mtime of symlink '{}'", dest.display()))?;
        }
        Ok(true)
    }

    /// A hard link may only name a regular file under the output folder, reached through
    /// directories this run has checked are real (never through a symlink: `link(2)` follows
    /// symlinks in the middle of a path).
    fn create_hardlink(&self, entry: &Entry, target: &Path) -> anyhow::Result<bool> {
        let refuse = || {
            anyhow::anyhow!(
                "refused: hard link target '{}' is not a regular file written into the output folder",
                target.display()
            )
        };
        let through_real_dirs = match target.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => lock(&self.dirs).ready.contains(parent),
            None => true,
        };
        if !through_real_dirs {
            return Err(refuse());
        }
        let original = self.root.join(target);
        match original.symlink_metadata() {
            Ok(meta) if meta.is_file() => {}
            _ => return Err(refuse()),
        }
        self.place_link(entry, |at| std::fs::hard_link(&original, at))
    }

    fn apply_dir_metadata(&self, entry: &Entry) -> anyhow::Result<()> {
        let path = self.root.join(&entry.path);
        // A directory this run made already has the usual mode (0o777 less the umask): most
        // do, and a chmod per directory is worth saving.
        let made_with = |mode: u32| {
            self.plain_mkdir
                && mode == 0o777 & !self.umask
                && lock(&self.dirs).made_here.contains(&entry.path)
        };
        let mode = entry
            .mode
            .map(|m| self.opts.mode_bits(m))
            .filter(|&m| !made_with(m));
        set_path_metadata(&path, mode, entry.mtime)
    }

    /// Waits for every close, then creates the remaining (empty) directories and the links,
    /// and applies directory metadata, deepest first. Returns the report of everything the sink
    /// did. Call it on the writers' rayon pool (`install`): empty directories are created on it.
    pub fn finish(mut self) -> Report {
        let mut closes = match self.pool.take().flatten() {
            Some(pool) => pool.finish(),
            None => CloseTally::default(),
        };
        // Auto closes inline until it defers: both count.
        closes.busy += Duration::from_nanos(*self.inline_close_nanos.get_mut());
        let mut failures =
            std::mem::take(self.failures.get_mut().unwrap_or_else(|e| e.into_inner()));
        let close_failures = closes.failures.len() as u64 + *self.inline_close_failures.get_mut();
        failures.append(&mut closes.failures);
        let mut deferred =
            std::mem::take(self.deferred.get_mut().unwrap_or_else(|e| e.into_inner()));
        if interrupt::interrupted() {
            // Stop here: what was written is complete and closed; links, empty directories
            // and directory metadata for the rest would only be work the user cancelled.
            deferred = Deferred::default();
        }

        // Directories that are still empty are made now, before links may go into them.
        self.create_dirs(deferred.dirs.iter().map(|e| e.path.as_path()));
        let mut dirs = Vec::with_capacity(deferred.dirs.len());
        {
            let made = lock(&self.dirs);
            for entry in deferred.dirs {
                if made.ready.contains(&entry.path) {
                    dirs.push(entry);
                    continue;
                }
                let (at, reason) = entry
                    .path
                    .ancestors()
                    .find_map(|a| made.blocked.get(a).map(|r| (a, r)))
                    .map_or((entry.path.as_path(), "not created"), |(a, r)| {
                        (a, r.as_str())
                    });
                failures.push(Failure {
                    error: anyhow::anyhow!("cannot create directory '{}': {reason}", at.display()),
                    name: entry.name,
                });
            }
        }

        let (mut symlinks, mut hardlinks) = (0, 0);
        for entry in &deferred.links {
            let made = match &entry.kind {
                EntryKind::Symlink { target } => self.create_symlink(entry, target),
                EntryKind::Hardlink { target } => self.create_hardlink(entry, target),
                _ => continue,
            };
            match made {
                Ok(true) if matches!(entry.kind, EntryKind::Symlink { .. }) => symlinks += 1,
                Ok(true) => hardlinks += 1,
                Ok(false) => *self.skipped.get_mut() += 1,
                Err(error) => failures.push(Failure {
                    name: entry.name.clone(),
                    error,
                }),
            }
        }

        dirs.retain(|e| e.mode.is_some() || e.mtime.is_some());
        dirs.sort_by_key(|e| std::cmp::Reverse(e.path.components().count()));
        for entry in &dirs {
            if let Err(error) = self.apply_dir_metadata(entry) {
                failures.push(Failure {
                    name: entry.name.clone(),
                    error,
                });
            }
        }

        let made_dirs = std::mem::take(self.dirs.get_mut().unwrap_or_else(|e| e.into_inner()));
        // A file is durable only once the directory entry naming it is: with --fsync, every
        // directory written into is synced after its files, deepest first, the root last.
        if self.opts.fsync {
            let root = PathBuf::new();
            for dir in made_dirs.order.iter().rev().chain(std::iter::once(&root)) {
                let path = self.root.join(dir);
                if let Err(error) = platform::sync_dir(&path) {
                    failures.push(Failure {
                        name: dir.display().to_string(),
                        error: anyhow::Error::new(error)
                            .context(format!("syncing directory '{}'", path.display())),
                    });
                }
            }
        }

        self.reporter.finished();
        Report {
            files: self.files.get_mut().saturating_sub(close_failures),
            dirs: made_dirs.created,
            dir_time: made_dirs.busy,
            symlinks,
            hardlinks,
            bytes: *self.bytes.get_mut(),
            skipped: *self.skipped.get_mut(),
            failures,
            warnings: Vec::new(),
            wall: Duration::ZERO,
            write_time: Duration::from_nanos(*self.write_nanos.get_mut()),
            close_time: closes.busy,
            peak_close_queue: closes.peak_queue,
            close_threads: closes.threads,
            reflinked: *self.copier.reflinked.get_mut(),
            ..Report::default()
        }
    }
}

/// Where a file's content comes from.
pub enum Content<'a> {
    /// Read (and checked against the declared size) in chunks.
    Reader(&'a mut dyn Read),
    /// Already in memory.
    Bytes(&'a [u8]),
    /// A file of a source tree, copied in the kernel where it can be (see `copy.rs`).
    File(&'a File),
}

/// Writes a file's content; for a sparse entry, blocks of zeros become holes (skipped with a
/// seek, the file's length set at the end), as GNU tar restores them.
struct ChunkWriter<'f, 'a> {
    file: &'f mut &'a File,
    sparse: bool,
    /// The last bytes were skipped, so the file must be extended to its length at the end.
    pending_hole: bool,
}

impl ChunkWriter<'_, '_> {
    const BLOCK: usize = 4096;

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if !self.sparse {
            return self.file.write_all(data);
        }
        let mut rest = data;
        while !rest.is_empty() {
            let zeros = rest
                .chunks(Self::BLOCK)
                .take_while(|b| b.iter().all(|&x| x == 0))
                .map(<[u8]>::len)
                .sum::<usize>();
            if zeros > 0 {
                self.file.seek(SeekFrom::Current(zeros as i64))?;
                self.pending_hole = true;
                rest = &rest[zeros..];
                continue;
            }
            let data_len = rest
                .chunks(Self::BLOCK)
                .take_while(|b| b.iter().any(|&x| x != 0))
                .map(<[u8]>::len)
                .sum::<usize>();
            self.file.write_all(&rest[..data_len])?;
            self.pending_hole = false;
            rest = &rest[data_len..];
        }
        Ok(())
    }

    fn finish(self, len: u64) -> io::Result<()> {
        if self.pending_hole {
            self.file.set_len(len)?;
        }
        Ok(())
    }
}

/// Inline closes measured since `auto` last looked: how many, their total and the fastest
/// (nanoseconds).
struct CloseWindow {
    count: AtomicU64,
    total: AtomicU64,
    fastest: AtomicU64,
}

impl Default for CloseWindow {
    fn default() -> Self {
        CloseWindow {
            count: AtomicU64::new(0),
            total: AtomicU64::new(0),
            fastest: AtomicU64::new(u64::MAX),
        }
    }
}

/// The most close threads `auto` may start within the open-file limit: each has a handle in
/// its hands and one waiting in the queue (the queue's bound is the thread count); each writer
/// holds a source, its unsent batch, and may take the queue past its bound by a batch less one;
/// with room for everything else the process has open.
fn within_open_file_limit(max_threads: usize, writers: usize) -> usize {
    match platform::open_file_limit() {
        Some(limit) => {
            let per_writer = 1 + 2 * CLOSE_BATCH;
            let spare = (limit as usize).saturating_sub(64 + per_writer * writers) / 2;
            max_threads.min(spare).max(1)
        }
        None => max_threads,
    }
}

/// One writer thread's state: its copy buffer, and written files not yet handed over for closing.
pub struct Writer<'s, 'a> {
    sink: &'s Sink<'a>,
    buf: Vec<u8>,
    batch: Vec<CloseJob>,
}

impl Writer<'_, '_> {
    /// Writes one file entry from `src`, then hands it to the close stage. Failures are
    /// recorded in the sink (the other entries go on); false says this one failed.
    pub fn write_file(&mut self, entry: &Entry, src: &mut dyn Read) -> bool {
        self.write(entry, Content::Reader(src))
    }

    /// Writes one file entry as a copy of `src` (opened for reading, at its start); false if
    /// it failed.
    pub fn copy_file(&mut self, entry: &Entry, src: &File) -> bool {
        self.write(entry, Content::File(src))
    }

    /// Writes one file entry whose content is already in memory; false if it failed.
    pub fn write_bytes(&mut self, entry: &Entry, data: &[u8]) -> bool {
        self.write(entry, Content::Bytes(data))
    }

    fn write(&mut self, entry: &Entry, content: Content<'_>) -> bool {
        let sink = self.sink;
        if interrupt::interrupted() {
            // Not started, so nothing to undo; not a failure of the entry.
            return true;
        }
        let start = Instant::now();
        let written = sink.write_file_inner(entry, content, &mut self.buf);
        sink.write_nanos
            .fetch_add(nanos(start.elapsed()), Ordering::Relaxed);
        match written {
            Ok(Some((job, bytes))) => {
                sink.files.fetch_add(1, Ordering::Relaxed);
                sink.bytes.fetch_add(bytes, Ordering::Relaxed);
                sink.reporter.file_written();
                sink.hand_over(&mut self.batch, job);
            }
            Ok(None) => {
                sink.skipped.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) if interrupt::is_interruption(&error) => {}
            Err(error) => {
                sink.fail(entry, error);
                return false;
            }
        }
        true
    }
}

impl Drop for Writer<'_, '_> {
    fn drop(&mut self) {
        if !self.batch.is_empty() {
            match self.sink.running_pool() {
                Some(pool) => pool.submit(&mut self.batch),
                None => self.batch.drain(..).for_each(|job| {
                    self.sink.close_inline(job);
                }),
            }
        }
    }
}

/// Sets a mode and an mtime on an existing path, by path, never following a final symlink's
/// mtime (directories, symlinks, and files a mirror updates in place).
pub fn set_path_metadata(
    path: &Path,
    mode: Option<u32>,
    mtime: Option<std::time::SystemTime>,
) -> anyhow::Result<()> {
    if let Some(mode) = mode {
        platform::set_path_mode(path, mode)
            .with_context(|| format!("setting the mode of '{}'", path.display()))?;
    }
    if let Some(mtime) = mtime {
        platform::set_path_mtime(path, mtime)
            .with_context(|| format!("setting the mtime of '{}'", path.display()))?;
    }
    Ok(())
}

fn already_exists(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "'{}' already exists (use --overwrite or --skip-existing)",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;
    use std::io::Cursor;

    /// Fails the close of every file whose name starts with "bad".
    struct FailingCloser;

    impl Closer for FailingCloser {
        fn close(&self, file: File, path: &Path) -> io::Result<()> {
            drop(file);
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.starts_with("bad") {
                Err(io::Error::other("injected EIO"))
            } else {
                Ok(())
            }
        }
    }

    fn file_entry(name: &str, content: &[u8]) -> Entry {
        Entry {
            name: name.to_string(),
            path: PathBuf::from(name),
            kind: EntryKind::File,
            mode: Some(0o640),
            mtime: None,
            size: content.len() as u64,
            index: 0,
            sparse: false,
        }
    }

    #[test]
    fn a_failed_close_is_reported_with_its_name_in_both_close_modes() {
        for close in [
            CloseMode::Deferred { threads: 2 },
            CloseMode::Inline,
            CloseMode::Auto { max_threads: 4 },
        ] {
            let dir = tempfile::tempdir().unwrap();
            let opts = Options {
                close,
                ..Options::default()
            };
            let mut plan = Plan::default();
            let files = [("good1", &b"one"[..]), ("bad", b"two"), ("good2", b"three")];
            for (name, content) in files {
                plan.entries.push(file_entry(name, content));
            }
            let mut sink = Sink::new(dir.path(), &opts, &Silent, Arc::new(FailingCloser)).unwrap();
            sink.prepare(&mut plan);
            {
                let mut writer = sink.writer();
                for ((_, content), entry) in files.iter().zip(&plan.entries) {
                    writer.write_file(entry, &mut Cursor::new(content));
                }
            }
            let report = sink.finish();
            assert_eq!(
                report.exit_code(),
                crate::report::exit::SOME_FAILED,
                "{close:?}"
            );
            assert_eq!(report.failures.len(), 1);
            assert_eq!(report.failures[0].name, "bad");
            let message = format!("{:#}", report.failures[0].error);
            assert!(
                message.contains("injected EIO") && message.contains("bad"),
                "{message}"
            );
            assert!(
                !dir.path().join("bad").exists(),
                "the file of a failed close is removed"
            );
            assert_eq!(std::fs::read(dir.path().join("good2")).unwrap(), b"three");
            assert_eq!(report.files, 2);
        }
    }

    /// Takes `0` to close, like a local disk, or milliseconds, like Windows or NFS.
    struct TimedCloser(Duration);

    impl Closer for TimedCloser {
        fn close(&self, file: File, _path: &Path) -> io::Result<()> {
            drop(file);
            std::thread::sleep(self.0);
            Ok(())
        }
    }

    /// Writes `n` small files with one writer and says how many close threads were used.
    fn close_threads_after(n: usize, close: CloseMode, closer: TimedCloser) -> (usize, u64) {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            close,
            threads: 2,
            ..Options::default()
        };
        let mut plan = Plan::default();
        for i in 0..n {
            plan.entries.push(file_entry(&format!("f{i}"), b"x"));
        }
        let mut sink = Sink::new(dir.path(), &opts, &Silent, Arc::new(closer)).unwrap();
        sink.prepare(&mut plan);
        {
            let mut writer = sink.writer();
            for entry in &plan.entries {
                writer.write_file(entry, &mut Cursor::new(b"x"));
            }
        }
        let report = sink.finish();
        assert!(report.failures.is_empty());
        (report.close_threads, report.files)
    }

    #[test]
    fn auto_defers_only_once_closes_are_slow() {
        let auto = CloseMode::Auto { max_threads: 16 };
        // Fast closes: the writer keeps closing (not on Windows, where auto always defers).
        let (threads, files) = close_threads_after(64, auto, TimedCloser(Duration::ZERO));
        assert_eq!(files, 64);
        assert_eq!(
            threads,
            if cfg!(windows) {
                default_close_threads()
            } else {
                0
            }
        );
        // 3 ms closes: a pool (how big depends on the write time measured, so only its
        // bounds are checked: at least Little's law's "+1", at most the bound), and every
        // file still closed.
        let (threads, files) =
            close_threads_after(200, auto, TimedCloser(Duration::from_millis(3)));
        assert_eq!(files, 200);
        assert!((2..=16).contains(&threads), "{threads} close threads");
        // Never and always do what they say, whatever the closes cost.
        let slow = || TimedCloser(Duration::from_millis(1));
        assert_eq!(close_threads_after(16, CloseMode::Inline, slow()).0, 0);
        assert_eq!(
            close_threads_after(16, CloseMode::Deferred { threads: 3 }, slow()).0,
            3
        );
    }

    #[test]
    fn data_beyond_or_short_of_the_declared_size_fails_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default();
        let mut plan = Plan::default();
        let mut long = file_entry("long", b"12");
        long.size = 1;
        let mut short = file_entry("short", b"12");
        short.size = 3;
        plan.entries.extend([long, short]);
        let mut sink = Sink::new(
            dir.path(),
            &opts,
            &Silent,
            Arc::new(crate::close_pool::SystemCloser { fsync: false }),
        )
        .unwrap();
        sink.prepare(&mut plan);
        {
            let mut writer = sink.writer();
            for entry in &plan.entries {
                writer.write_file(entry, &mut Cursor::new(b"12"));
            }
        }
        let mut report = sink.finish();
        let lines = report.failure_lines();
        assert!(
            lines[0].contains("'long'") && lines[0].contains("more data"),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("'short'") && lines[1].contains("truncated"),
            "{lines:?}"
        );
        assert!(!dir.path().join("long").exists() && !dir.path().join("short").exists());
    }
}
