//! A local folder as a run's target ([`Disk`]): the output folder held open, everything made
//! relative to it; what is the folder's own state beside the run's (its directories, its close
//! stage, what waits until the end, what killed runs left). The work is split by job in this
//! folder: `dirs.rs` directories, `files.rs` whole files, `stream.rs` streamed ones, `copy.rs`
//! copies in the kernel, `later.rs` a tar's last copy of a path, `unverified.rs` what a failed
//! check takes back, `links.rs` links, `finish.rs` the end of the run, `leftovers.rs` and
//! `stage.rs` what a kill leaves.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::deferred::Deferred;
use super::dirs::{self, OPEN_DIRS};
use super::{copy, leftovers};
use crate::close::{CloseStage, Closer};
use crate::engine::kept::{self, already_exists};
use crate::engine::pump::Content;
use crate::engine::run::Run;
use crate::engine::state::WriterState;
use crate::engine::target::{Streamed, Target};
use crate::engine::unverified::Unverified;
use crate::error::{Error, ErrorKind, Tag};
use crate::options::{Options, Overwrite};
use crate::plan::{Entry, EntryKind, Plan};
use crate::platform;
use crate::report::Report;
use crate::sync::Unpoisoned;

pub(crate) struct Disk {
    /// The run's own state (`run.rs`).
    pub(super) run: Run,
    /// The output folder, held open: everything under it is made through this (see
    /// `platform::OutDir`).
    pub(super) out_dir: Arc<platform::OutDir>,
    pub(super) umask: u32,
    /// Whether the output folder was missing or empty at the start: then nothing can be in the
    /// way, and no file needs checking before it is written.
    pub(super) fresh: bool,
    /// Whether the run writes into a staging folder (`stage.rs`), put in place at the end: then
    /// every file is written under its name there; else under a temporary name beside it,
    /// moved into place after its close.
    pub(super) staged: bool,
    /// New directories get exactly 0o777 less the umask: not so under a setgid directory,
    /// whose new subdirectories inherit the bit.
    pub(super) plain_mkdir: bool,
    /// Whether a symlink's own mtime can be set here. Not on FUSE: there the daemon gets the
    /// link's path, and sshfs (SFTP's SETSTAT follows links) would set the target's time, or
    /// fail on a dangling link. `symlink_times_left` counts the symlinks that kept the time
    /// they were made, for a warning.
    pub(super) symlink_times: bool,
    pub(super) symlink_times_left: AtomicU64,
    pub(super) dirs: dirs::Dirs,
    pub(super) close: CloseStage,
    /// Entries whose work waits until every file is closed: links, and directory metadata.
    pub(super) deferred: Mutex<Deferred>,
    pub(super) files: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) skipped: AtomicU64,
    /// Existing files kept on purpose (counted in `skipped` too), for a warning.
    pub(super) kept: kept::Kept,
    pub(super) write_nanos: AtomicU64,
    pub(super) copier: copy::Copier,
    /// For a source whose later entries may replace earlier ones (a tar), into an output
    /// folder that was not empty: the paths this run created or replaced (by hash), so that a
    /// later copy replaces only what this run wrote, never a file that was there before. Unset
    /// for every other run, which then pays nothing per file. (Into an empty folder
    /// everything is this run's.)
    pub(super) created: std::sync::OnceLock<Mutex<std::collections::HashSet<u64>>>,
    /// Replacements of existing files wait under temporary names until the end of the run
    /// (see [`Disk::hold_replaced`]).
    pub(super) hold_replacements: AtomicBool,
    /// This process's user and group ids, which what it creates has already (asked once: each
    /// asking is a system call).
    pub(super) own_ids: (u32, u32),
    /// What runs killed in this folder left (see `leftovers.rs`).
    pub(super) leftovers: leftovers::Leftovers,
    /// Files a killed run left complete, kept; and those it left unfinished, written again.
    pub(super) resumed: AtomicU64,
    pub(super) redone: AtomicU64,
    /// This run's marker in the folder, made before its first file (a run that makes no file
    /// leaves the folder untouched), removed when it ends; or why it could not be made.
    pub(super) mark: std::sync::OnceLock<Result<leftovers::RunMark, String>>,
    /// Whether files are parked here (`park.rs`): on a local disk. On a network or FUSE
    /// filesystem each create is a round trip, and the one thread that reads a layer would
    /// make them one after another: there the source keeps the data itself, and the writers
    /// write in parallel.
    pub(super) parks: bool,
    /// The folder of files written before their path was known (`park.rs`), once made; or
    /// why it could not be.
    pub(super) parked: std::sync::OnceLock<Result<(PathBuf, platform::OpenDir), String>>,
}

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Disk {
    /// Opens the output folder (creating it if needed) and starts the close stage. (A store's
    /// destination is refused: it is not a folder.)
    pub(crate) fn new(
        (root, work): (&Path, &Path),
        opts: &Options,
        closer: Arc<dyn Closer>,
    ) -> anyhow::Result<Disk> {
        // What stops it is about the output folder.
        let folder = |error: std::io::Error, what: &str| {
            let why = anyhow::Error::new(error).context(format!("{what} '{}'", root.display()));
            Error::named(root, ErrorKind::Directory, why)
        };
        let fresh = match std::fs::read_dir(work) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(work)
                    .map_err(|e| folder(e, "cannot create output folder"))?;
                true
            }
            Err(e) => return Err(folder(e, "cannot use output folder").into()),
        };
        let out_dir =
            platform::OutDir::open(work).map_err(|e| folder(e, "cannot use output folder"))?;
        // Killed runs' leftovers are dealt with before this run marks the folder itself.
        let leftovers = if fresh {
            leftovers::Leftovers::default()
        } else {
            leftovers::Leftovers::find(work, &out_dir)
        };
        let out_dir = Arc::new(out_dir);
        let run = Run::new(root, opts);
        let close = CloseStage::new(
            opts,
            closer,
            Arc::clone(&out_dir),
            Arc::clone(&run.failures),
            OPEN_DIRS,
        )?;
        let engine = Disk {
            run,
            umask: platform::current_umask(),
            fresh,
            staged: work != root,
            plain_mkdir: !out_dir.is_setgid(),
            symlink_times: platform::remote_filesystem(work) != Some("FUSE"),
            parks: platform::remote_filesystem(work).is_none(),
            symlink_times_left: AtomicU64::new(0),
            dirs: dirs::Dirs::new(Arc::clone(&out_dir), opts.overwrite),
            out_dir,
            close,
            deferred: Mutex::default(),
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            kept: kept::Kept::default(),
            write_nanos: AtomicU64::new(0),
            copier: copy::Copier::default(),
            created: std::sync::OnceLock::new(),
            hold_replacements: AtomicBool::new(false),
            own_ids: platform::effective_ids(),
            leftovers,
            resumed: AtomicU64::new(0),
            redone: AtomicU64::new(0),
            mark: std::sync::OnceLock::new(),
            parked: std::sync::OnceLock::new(),
        };
        if engine.staged {
            // A staging folder is marked at once, so that another run never takes it for a
            // killed one's (an unstaged run marks its folder only before its first file: a
            // run that writes nothing touches nothing).
            engine.mark();
        }
        Ok(engine)
    }

    /// Makes an entry's parent directories now.
    pub(crate) fn make_parents(&self, entry: &Entry) -> Result<(), Error> {
        self.dirs
            .ensure_parents(&entry.path)
            .tag(&entry.name, ErrorKind::Directory)
    }

    /// Says before anything is written whether an entry would hit an existing file: only
    /// needed when the output folder was not empty (the O_EXCL create, or the move into place
    /// that never replaces, still guards against anything that appears meanwhile). True:
    /// skipped or failed. Notes an entry found absent.
    pub(super) fn conflicts(&self, entry: &mut Entry) -> bool {
        if self.fresh || self.run.opts.overwrite == Overwrite::Replace || entry.replaces {
            return false;
        }
        if self.out_dir.kind(&entry.path).is_err() {
            entry.absent = true;
            return false;
        }
        let policy = self.policy_for(entry);
        if policy == Overwrite::Replace {
            return false;
        }
        if policy == Overwrite::Skip {
            self.keep(&entry.name);
        } else {
            let error = already_exists();
            self.run
                .record(Error::new(&entry.name, ErrorKind::AlreadyExists, error));
        }
        true
    }

    /// What exists at `name`'s path is kept ([`Overwrite::Skip`]): counted, and named in the
    /// run's warning.
    pub(super) fn keep(&self, name: &str) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
        self.kept.note(name);
    }

    /// The overwrite policy for `entry` over what exists at its path: `Update` becomes
    /// `Replace` where what exists is older than the entry, else `Skip`. A file a killed run
    /// made or changed is that run's: kept if complete, else written again, whatever the
    /// policy (see `leftovers.rs`).
    pub(super) fn policy_for(&self, entry: &Entry) -> Overwrite {
        if self.leftovers.since.is_some()
            && let Ok(status) = self.out_dir.status(&entry.path)
            && let Some(policy) = self
                .leftovers
                .policy(entry, &status, self.run.opts.overwrite)
        {
            let counter = match policy {
                Overwrite::Skip => &self.resumed,
                _ => &self.redone,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            return policy;
        }
        // An earlier attempt at the same source of a run of many (`Options::resume_tag`)
        // left this file complete: it is this run's own.
        if self.run.opts.resume_tag.is_some()
            && self.run.opts.overwrite != Overwrite::Replace
            && let Ok(status) = self.out_dir.status(&entry.path)
            && leftovers::complete(entry, &status)
        {
            self.resumed.fetch_add(1, Ordering::Relaxed);
            return Overwrite::Skip;
        }
        if self.run.opts.overwrite != Overwrite::Update {
            return self.run.opts.overwrite;
        }
        let older = match (entry.mtime, self.out_dir.modified(&entry.path)) {
            (Some(new), Ok(old)) => old < new,
            _ => false,
        };
        if older {
            Overwrite::Replace
        } else {
            Overwrite::Skip
        }
    }

    /// The owner to give `entry` (`Options::same_owner`), if it differs from what a new entry
    /// gets here: this process's ids, in an output folder without the setgid bit.
    pub(super) fn owner_to_give(&self, entry: &Entry) -> Option<(u32, u32)> {
        entry
            .owner
            .filter(|&ids| !(self.plain_mkdir && ids == self.own_ids))
    }

    /// The mean time a writer takes to write one file (without closing it), from the engine's
    /// totals and what the asking writer has not added to them yet.
    pub(super) fn mean_write(&self, mine: &crate::engine::state::Counts) -> Duration {
        let files = self.files.load(Ordering::Relaxed) + mine.files;
        let nanos = self.write_nanos.load(Ordering::Relaxed) + mine.write_nanos;
        Duration::from_nanos(nanos / files.max(1))
    }

    /// The file's mode as it will be on disk.
    pub(super) fn file_mode(&self, entry: &Entry) -> u32 {
        match entry.mode {
            Some(mode) => self.run.opts.mode_bits(mode),
            None => 0o666 & !self.umask,
        }
    }

    /// Marks the output folder as being written (see `leftovers.rs`), before the run's first
    /// file is created: a kill from then on leaves something the next run must know of.
    pub(super) fn mark(&self) {
        self.mark.get_or_init(|| {
            leftovers::RunMark::new(self.out_dir.path(), self.run.opts.fsync).map_err(|e| {
                format!(
                    "cannot mark '{}' as being written ({e}): were this run killed, the next could not tell what it left unfinished",
                    self.run.root.display()
                )
            })
        });
    }

    /// Where a path under the output folder is, for messages.
    pub(super) fn full(&self, rel: &Path) -> PathBuf {
        self.run.root.join(rel)
    }

    /// A temporary name beside `dest` (both relative to the output folder).
    pub(super) fn temp_path(&self, dest: &Path) -> PathBuf {
        // One counter for the process: runs of one process into one folder at once (the lanes
        // of a run of many sources) never pick the same name.
        static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = dest.file_name().unwrap_or_default().to_string_lossy();
        dest.with_file_name(format!(".{name}.fastwrite-{}-{n}", std::process::id()))
    }
}

/// A local folder as a run's target: everything in this module and its neighbours (`files.rs`
/// writes files, `stream.rs` streamed ones, `later.rs` and `unverified.rs` what a later entry
/// changes, `finish.rs` the end).
impl Target for Disk {
    /// More threads write than the run was made for (a batch's background writers): the close
    /// pool is sized for them.
    fn writers_at_least(&self, writers: usize) {
        self.close.writers_at_least(writers);
    }

    /// The run's own state: failures, cancelling, the output cap, the reporter.
    fn run(&self) -> &Run {
        &self.run
    }

    /// Registers a whole plan before any file is written: links and directory metadata are
    /// deferred, and conflicts with existing files said up front. Leaves in the plan only the
    /// files to write.
    ///
    /// Into a missing or empty output folder nothing can be in the way, so nothing is checked
    /// and no directory made here: the writers make each file's parents as they go, which
    /// overlaps directory creation with writing. Otherwise every directory is made first and
    /// every file checked, so conflicts are said before anything is written. Call it on the
    /// writers' pool: directories are made in parallel.
    fn prepare(&self, plan: &mut Plan) {
        if !self.fresh {
            self.dirs
                .create_all(plan.entries.iter().map(|e| match e.kind {
                    EntryKind::Dir => e.path.as_path(),
                    _ => e.path.parent().unwrap_or(Path::new("")),
                }));
        }
        let mut files = Vec::with_capacity(plan.entries.len());
        for entry in std::mem::take(&mut plan.entries) {
            match entry.kind {
                EntryKind::Dir => self.add_dir(entry),
                EntryKind::File => files.push(entry),
                EntryKind::Symlink { .. }
                | EntryKind::Hardlink { .. }
                | EntryKind::Special { .. } => self.add_link(entry),
            }
        }
        if !self.fresh {
            // Each check is a look at the path: a round trip on a network filesystem, so they
            // are made in parallel, on the writers' pool.
            use rayon::prelude::*;
            let keep: Vec<bool> = files
                .par_iter_mut()
                .map(|entry| !self.conflicts(entry))
                .collect();
            let mut keep = keep.into_iter();
            files.retain(|_| keep.next().unwrap_or(false));
        }
        plan.entries = files;
    }

    /// Makes a directory entry's directory now, and its parents.
    fn make_dir(&self, entry: &Entry) -> Result<(), Error> {
        self.dirs
            .ensure(&entry.path)
            .tag(&entry.name, ErrorKind::Directory)
    }

    /// Registers a directory entry. The directory is created before anything inside it, or at
    /// the end if it stays empty; its mode and mtime are applied last.
    fn add_dir(&self, entry: Entry) {
        self.deferred.lock().unpoisoned().dirs.push(entry);
    }

    /// Registers a symlink, a hard link or a special file, created after every file is
    /// closed.
    fn add_link(&self, entry: Entry) {
        if let EntryKind::Hardlink { target } = &entry.kind {
            // A hard link is only made through directories checked to be real; its target may
            // be a file this run leaves alone, in a directory it does not otherwise touch. (A
            // failure here is the link's, said when it is made.)
            let _ = self.dirs.ensure_parents(target);
        }
        if let Err(error) = self.dirs.ensure_parents(&entry.path) {
            return self
                .run
                .record(Error::new(&entry.name, ErrorKind::Directory, error));
        }
        let mut entry = entry;
        if self.conflicts(&mut entry) {
            return;
        }
        self.run.defer_link(entry);
    }

    fn track_created(&self) {
        self.start_tracking_created();
    }

    fn hold_replacements(&self) {
        self.hold_replaced();
    }

    fn unverified(&self, entries: Vec<Unverified>, why: String) {
        self.note_unverified(entries, why);
    }

    fn write_file(
        &self,
        state: &mut WriterState,
        entry: &Entry,
        content: Content<'_>,
    ) -> Result<(), Error> {
        self.write_entry(state, entry, content)
    }

    fn held(&self) -> Option<Arc<platform::OutDir>> {
        Some(Arc::clone(&self.out_dir))
    }

    fn parks(&self) -> bool {
        self.parks
    }

    fn folders_wait(&self) -> bool {
        // (Where it does not park: a network or FUSE filesystem.)
        !self.parks
    }

    fn park(
        &self,
        state: &mut WriterState,
        entry: &Entry,
        content: Content<'_>,
    ) -> Result<PathBuf, Error> {
        self.park_file(state, entry, content)
    }

    fn spool(&self) -> std::io::Result<std::fs::File> {
        self.spool_file()
    }

    fn settle(&self) {
        self.close.settle();
    }

    fn place(&self, state: &mut WriterState, parked: &Path, entry: &Entry) -> Result<(), Error> {
        self.place_file(state, parked, entry)
    }

    fn unpark(&self) {
        self.unpark_all();
    }

    fn flush(&self, state: &mut WriterState) {
        self.flush_state(state);
    }

    fn start_streamed<'e>(
        &'e self,
        state: &mut WriterState,
        entry: Entry,
    ) -> Result<Streamed<'e>, Error> {
        Ok(Box::new(self.open_streamed(state, entry)?))
    }

    fn finish(self: Box<Self>) -> Report {
        self.finish_run()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::close::SystemCloser;
    use crate::engine::writer::Writer;
    use crate::options::CloseMode;
    use std::fs::File;
    use std::io;
    use std::io::Cursor;

    /// Fails the close of every file whose name starts with "bad" (under its temporary name,
    /// `.bad.fastwrite-PID-N`, into a folder that is not staged).
    struct FailingCloser;

    impl Closer for FailingCloser {
        fn close(&self, file: File, path: &Path) -> anyhow::Result<()> {
            drop(file);
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.trim_start_matches('.').starts_with("bad") {
                Err(io::Error::other("injected EIO").into())
            } else {
                Ok(())
            }
        }
    }

    fn file_entry(name: &str, content: &[u8]) -> Entry {
        Entry {
            mode: Some(0o640),
            size: content.len() as u64,
            ..Entry::new(name.to_string(), PathBuf::from(name), EntryKind::File)
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
            let sink = Disk::new((dir.path(), dir.path()), &opts, Arc::new(FailingCloser)).unwrap();
            sink.prepare(&mut plan);
            {
                let mut writer = Writer::new(&sink);
                for ((_, content), entry) in files.iter().zip(&plan.entries) {
                    writer.write(entry, Content::Reader(&mut Cursor::new(content)));
                }
            }
            let report = sink.finish_run();
            assert_eq!(report.failures.len(), 1, "{close:?}");
            assert_eq!(report.failures[0].path(), Path::new("bad"));
            assert_eq!(report.failures[0].kind(), ErrorKind::Close);
            let message = report.failures[0].message();
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
        fn close(&self, file: File, _path: &Path) -> anyhow::Result<()> {
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
            threads: Some(2),
            ..Options::default()
        };
        let mut plan = Plan::default();
        for i in 0..n {
            plan.entries.push(file_entry(&format!("f{i}"), b"x"));
        }
        let sink = Disk::new((dir.path(), dir.path()), &opts, Arc::new(closer)).unwrap();
        sink.prepare(&mut plan);
        {
            let mut writer = Writer::new(&sink);
            for entry in &plan.entries {
                writer.write(entry, Content::Reader(&mut Cursor::new(b"x")));
            }
        }
        let report = sink.finish_run();
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
                CloseMode::default_deferred_threads()
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
    fn the_quick_parent_agrees_with_std() {
        for name in [
            "a",
            "a/b",
            "dir/sub/file.txt",
            "x\\y",
            "caf\u{e9}/\u{1f600}.txt",
        ] {
            let rel = crate::plan::safe_relative_path(name).unwrap();
            let parent = rel.parent().unwrap().as_os_str().as_encoded_bytes();
            assert_eq!(super::super::files::parent_bytes(&rel), parent, "{name}");
        }
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
        let sink = Disk::new(
            (dir.path(), dir.path()),
            &opts,
            Arc::new(SystemCloser { fsync: false }),
        )
        .unwrap();
        sink.prepare(&mut plan);
        {
            let mut writer = Writer::new(&sink);
            for entry in &plan.entries {
                writer.write(entry, Content::Reader(&mut Cursor::new(b"12")));
            }
        }
        let mut report = sink.finish_run();
        assert!(
            report
                .failures
                .iter()
                .all(|f| f.kind() == ErrorKind::Source)
        );
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
