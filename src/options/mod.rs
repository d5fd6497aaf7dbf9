//! Options for a run: everything the engine needs to know, and nothing about how it was asked.
//!
//! `cli.rs` is the one place that builds these from arguments; programs build them directly
//! (or through [`Batch::builder`](crate::Batch::builder)).

pub mod described;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::progress::Reporter;

/// How file handles are closed once their content is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseMode {
    /// Deferred where it pays: from the start on Windows and with `fsync` (closes there
    /// take milliseconds), elsewhere once the closes measured so far are slow; inline while
    /// they are fast (a local Linux disk closes in microseconds, less than a hand-over costs).
    /// The pool is sized by Little's law from the measured close time and write rate, and
    /// grows as they change, up to `max_threads`.
    Auto {
        /// The most close threads it may start (fewer where the open-file limit is low).
        max_threads: usize,
    },
    /// Closed by a dedicated pool of this many threads, overlapping with writing.
    Deferred {
        /// Close threads, started with the run.
        threads: usize,
    },
    /// Closed by the thread that wrote the file, right after writing (for A/B timing).
    Inline,
}

impl CloseMode {
    /// The most close threads [`CloseMode::Auto`] starts by default. A close thread mostly
    /// sleeps in the kernel on a small stack; two writers that each write a small file every
    /// 30 us, behind 5 ms closes, need 2 x 5 ms / 30 us = 333 in flight never to wait
    /// (Little's law), so there the bound is what limits.
    pub const AUTO_MAX_THREADS: usize = 256;

    /// Close threads of [`CloseMode::Deferred`] by default: closes are cheap on a local Linux
    /// or macOS disk, and a few threads keep up with any writer there; on Windows a close
    /// costs milliseconds, so more of them overlap.
    pub fn default_deferred_threads() -> usize {
        if cfg!(windows) { 16 } else { 4 }
    }
}

impl Default for CloseMode {
    /// [`CloseMode::Auto`] with [`CloseMode::AUTO_MAX_THREADS`].
    fn default() -> Self {
        CloseMode::Auto {
            max_threads: CloseMode::AUTO_MAX_THREADS,
        }
    }
}

/// What to do when a file to be written already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overwrite {
    /// The entry fails ([`ErrorKind::AlreadyExists`](crate::ErrorKind::AlreadyExists)) and
    /// the existing file is left untouched.
    #[default]
    Refuse,
    /// The new file replaces it: written under a temporary name in the same folder, then
    /// renamed over the old one after a good close, so nobody sees half a file.
    Replace,
    /// The existing file is kept and the entry skipped.
    Skip,
    /// The existing file is replaced (as with `Replace`) only if it is older than the entry,
    /// else kept and the entry skipped: `unzip -u`, GNU tar's `--keep-newer-files`. An entry
    /// without an mtime keeps what exists.
    Update,
}

/// How a run writes: threads, closing, durability, what to do with existing files.
#[derive(Clone)]
pub struct Options {
    #[doc = concat!("Threads in the write stage of ", extract_fn!(), " and ", mirror_fn!(), ".")]
    /// `None` (the default): sized by the run, one per core on a
    /// local disk, more where the output is a network or FUSE filesystem, whose round trips
    /// more files in flight hide ([`Report::writers`](crate::Report::writers) says how many
    /// and why). A [`Batch`](crate::Batch) writes on its callers' threads and uses this only
    /// to size its close pool.
    pub threads: Option<usize>,
    /// Into a bucket (`s3://BUCKET/PREFIX`): the most uploads in flight at once. `None` (the
    /// default): sized by the run from the request times and the writers' pace it measures
    /// (Little's law), halved when the store throttles (docs/object-storage.md).
    pub uploads: Option<usize>,
    /// Into a bucket: an empty `dir/` object for every folder, with its mode and mtime (rclone's
    /// `--s3-directory-markers`), so that s3fs and the consoles show the archive's folders with
    /// their times and a mirror down restores them. Off by default: only a folder that stays
    /// empty gets one, which is all a bucket needs to hold it. A folder only implied by the
    /// files under it (an archive without its entry) gets mode 0755 and the run's time, as a
    /// folder on disk does.
    pub folder_markers: bool,
    /// Into or from a store (a bucket, an `https://` archive): how many times a request that
    /// failed in a way worth trying again (no answer, a 5xx, a 429) is tried again, with
    /// backoff: rclone's `--retries`, s5cmd's `--retry-count` (the aws CLI's `max_attempts`
    /// counts the first try too). `None` (the default): for S3, `AWS_MAX_ATTEMPTS` or the aws
    /// profile's `max_attempts`, less one, as the aws CLI reads them; else 10. `Some(0)`:
    /// every request tried once. A PUT whose answer was lost (it may have landed) is looked
    /// for and sent again at most min(3, N) times more, each with its own retries. An image
    /// registry's requests are not retried.
    pub retries: Option<u32>,
    /// Into or from a store: the longest a request is tried again for, counted from its first
    /// try. `None` (the default): 180 s.
    pub retry_timeout: Option<Duration>,
    /// How written files are closed.
    pub close: CloseMode,
    /// Make every file durable (fsync) before closing it, and every directory written into
    /// at the end: once the run has returned, a power cut loses nothing it wrote.
    pub fsync: bool,
    /// All or nothing: the output folder (which must not exist yet, or be empty) appears with
    /// the whole tree only once every file is written, closed and verified; a run that fails,
    /// is cancelled or is killed leaves it as it was. The tree is written into a folder beside
    /// it, `.NAME.fastwrite-staging`, then renamed, in one step.
    pub atomic: bool,
    /// What to do with files that already exist.
    pub overwrite: Overwrite,
    /// Keep setuid, setgid and sticky bits from the source (dropped by default).
    pub keep_setid: bool,
    /// Create the device nodes and FIFOs a tar holds, as GNU tar and bsdtar do when run as
    /// root (a container's root filesystem needs them). Off by default: they are skipped,
    /// each with a warning, and the run still succeeds. Devices need root (`CAP_MKNOD`);
    /// Windows has neither, and each fails there.
    pub devices: bool,
    /// Give each file, folder and link of a tar the owner and group it records (`tar
    /// --same-owner`, GNU tar's and bsdtar's default as root): by name where this system knows
    /// the name, else by number. Needs root (`CAP_CHOWN`); off by default, for a program. Unix
    /// only: on Windows each entry fails.
    pub same_owner: bool,
    /// With [`Options::same_owner`], take the ids as archived and ignore the names (`tar
    /// --numeric-owner`).
    pub numeric_owner: bool,
    /// The platform of the image to apply from an index of several (`docker://`, `oci:`), as
    /// `OS/ARCH[/VARIANT]` (`linux/arm64/v8`): `None`, this machine's, as docker and crane
    /// choose.
    pub platform: Option<String>,
    /// Speak plain HTTP to an image registry that is not on this machine (docker's
    /// `insecure-registries`; skopeo's `--tls-verify=false`). A registry on `localhost` or
    /// `127.0.0.1` is spoken to so always, as docker and crane do.
    pub insecure_registry: bool,
    /// A folder that keeps each layer blob an image's registry serves, once by its digest
    /// (`--layers-cache`): an image whose layers it holds downloads none of them again. Blobs
    /// enter it whole and checked, and are checked again when read from it.
    pub layers_cache: Option<PathBuf>,
    /// Bytes of file content a streamed archive may hold in memory between its reader and the
    /// writers.
    pub memory_budget: u64,
    /// The most bytes of file content a run may write, or `None` for no cap. An archive that
    /// declares more up front (a zip) is refused before anything is written; otherwise the
    /// first file that would pass the cap fails with
    /// [`ErrorKind::Limit`](crate::ErrorKind::Limit) and the run stops there. A defence
    /// against decompression bombs in any format (a `.tar.gz` of zeros is one too). An image
    /// counts every layer's files as its layers are read, before the merge (docs/images.md).
    pub max_output: Option<u64>,
    /// Before writing an archive whose sizes are known up front (a zip), compare them with the
    /// free space of the output's filesystem and refuse to start if they cannot fit. Turn it
    /// off for filesystems that compress or deduplicate, where more fits than is free.
    pub space_check: bool,
    /// Stops the run when cancelled.
    pub cancel: Cancel,
    /// Told how the run progresses; `None`: nobody.
    pub progress: Option<Arc<dyn Reporter>>,
    /// The password of an encrypted zip's entries (AES-128/192/256 or traditional
    /// ZipCrypto). Without it, encrypted entries fail, named, and the rest is extracted.
    pub password: Option<Vec<u8>>,
    /// Asked, once, for the password when a zip holds encrypted entries and
    /// [`password`](Options::password) is `None` (the command line prompts on a terminal);
    /// `None` from it: no password.
    pub password_prompt: Option<Arc<dyn Fn() -> Option<Vec<u8>> + Send + Sync>>,
    /// The name to write a single compressed file under (`notes.txt.gz` is not an archive):
    /// by default the name in its gzip header, else the input's name without its suffix.
    pub file_name: Option<String>,
    #[doc = concat!("Which entries of an archive ", extract_fn!(), " takes, and under what name")]
    #[doc = concat!("(all of them, as archived, by default). Not used by ", mirror_fn!(), ", which")]
    /// has [`MirrorOptions::excludes`].
    pub select: Selection,
    /// Marks the run as one attempt at one source of a run of many (`jobs::extract_all` sets
    /// it from the source's name and identity): what an earlier attempt of the same source
    /// left, killed before it was recorded as done, is taken as this run's own and kept, where
    /// anything else in the way is still refused. Into a bucket, every object written carries
    /// it as user metadata (`fastwrite-source`), and an existing key that carries the same is
    /// the source's own; into a folder, an existing file with the entry's size and mtime is.
    /// `None` (the default): nothing is anyone's.
    pub resume_tag: Option<String>,
}

impl Options {
    /// 64 MiB holds hundreds of typical small files in flight, on any machine.
    pub const DEFAULT_MEMORY_BUDGET: u64 = 64 << 20;

    /// The permission bits to apply, given what the source records.
    pub(crate) fn mode_bits(&self, mode: u32) -> u32 {
        if self.keep_setid {
            mode & 0o7777
        } else {
            mode & 0o777
        }
    }
}

/// Writer threads by default: one per CPU.
/// One writer per core: what a local disk needs.
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: None,
            uploads: None,
            folder_markers: false,
            retries: None,
            retry_timeout: None,
            close: CloseMode::default(),
            fsync: false,
            atomic: false,
            overwrite: Overwrite::Refuse,
            keep_setid: false,
            devices: false,
            same_owner: false,
            numeric_owner: false,
            platform: None,
            insecure_registry: false,
            layers_cache: None,
            memory_budget: Options::DEFAULT_MEMORY_BUDGET,
            max_output: None,
            space_check: true,
            cancel: Cancel::new(),
            progress: None,
            password: None,
            password_prompt: None,
            file_name: None,
            select: Selection::default(),
            resume_tag: None,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("threads", &self.threads)
            .field("uploads", &self.uploads)
            .field("folder_markers", &self.folder_markers)
            .field("retries", &self.retries)
            .field("retry_timeout", &self.retry_timeout)
            .field("close", &self.close)
            .field("fsync", &self.fsync)
            .field("atomic", &self.atomic)
            .field("overwrite", &self.overwrite)
            .field("keep_setid", &self.keep_setid)
            .field("devices", &self.devices)
            .field("platform", &self.platform)
            .field("insecure_registry", &self.insecure_registry)
            .field("layers_cache", &self.layers_cache)
            .field("memory_budget", &self.memory_budget)
            .field("max_output", &self.max_output)
            .field("space_check", &self.space_check)
            .field("cancel", &self.cancel)
            .field("progress", &self.progress.as_ref().map(|_| "..."))
            .field("password", &self.password.as_ref().map(|_| "(set)"))
            .field(
                "password_prompt",
                &self.password_prompt.as_ref().map(|_| "..."),
            )
            .field("file_name", &self.file_name)
            .field("select", &self.select)
            .field("resume_tag", &self.resume_tag)
            .finish()
    }
}

/// Which entries of an archive to extract, and under what name: what `tar x` and `unzip` take
/// as member names after the archive, `--exclude` and `--strip-components`.
///
/// Patterns follow the rules of `mirror --exclude`: a pattern without `/` matches a name at any
/// depth (`README.md`, `*.txt`), one with a `/` the path from the top (`docs/**`,
/// `/README.md`), a trailing `/` directories only; but here `*` and `?` cross `/`, as in GNU
/// tar, bsdtar and unzip (`docs/*.md` takes `docs/a/b.md`). A pattern that matches a directory
/// takes (or leaves out) everything in it. Patterns are matched against names as archived,
/// before stripping; a leading `./` on either side changes nothing.
///
/// ```
/// let mut opts = fastwrite::Options::default();
/// opts.select.patterns = vec!["docs/**".into(), "/README.md".into()];
/// opts.select.exclude = vec!["*.bak".into()];
/// opts.select.strip_components = 1; // project-1.2/docs/a.md -> docs/a.md
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Only entries matching one of these (every entry if empty). A pattern that matches no
    /// entry is a failure of the run ([`ErrorKind::NotFound`](crate::ErrorKind::NotFound)),
    /// said after everything else is written.
    pub patterns: Vec<String>,
    /// Leave out entries matching any of these, and everything in a directory that does.
    pub exclude: Vec<String>,
    /// Remove this many leading components from every name, as GNU tar's
    /// `--strip-components` does (`./` counts as one); an entry with nothing left is skipped.
    /// Hard link targets are stripped the same way (a link whose target has nothing left is
    /// refused, as GNU tar does); symlink targets are kept as archived.
    pub strip_components: usize,
}

#[doc = concat!("What ", mirror_fn!(), " does beyond copying (the engine's [`Options`] still apply).")]
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
    /// Glob patterns of paths left out: `NAME` at any depth, `a/b` from the source's root,
    /// `dir/` directories only; `*` stops at `/`, `**` does not.
    pub excludes: Vec<String>,
}
