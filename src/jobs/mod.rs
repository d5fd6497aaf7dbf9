//! Many sources in one run, each exactly once: the step a shell loop, `xargs -P`, a
//! Kubernetes Indexed Job, a Slurm array or a Dask map runs (docs/many-archives.md).
//!
//! - The sources ([`expand`]: paths, globs expanded here, a list) are taken in order by a few
//!   lanes at once, each source one run of the engine ([`extract`](crate::extract())), so a
//!   large archive and many small ones mix, and one archive's start-up overlaps another's
//!   work.
//! - Each source done gets a completion record under the output (`records.rs`); a rerun of the
//!   same command lists them once and skips what is done, finishes what a killed run left
//!   half-done (what that attempt wrote carries its tag, [`Options::resume_tag`], and is taken
//!   as its own), and says which sources changed since their record.
//! - [`Shard`] splits the sources between processes by a stable hash of their names, with
//!   nothing shared but the output.
//! - Every source ends in a [`SourceReport`], handed over as it ends (the command line's
//!   `--report` writes each as a JSON line then, so a killed run's report is valid up to the
//!   kill).
//!
//! The trade-off: each source is its own run of the engine (its writers, its close stage, and
//! into a bucket its client and first look), so per-source start-up is paid by each source,
//! overlapped across lanes, rather than shared.

mod records;
mod sources;

pub use sources::{Source, expand, is_glob};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, ErrorKind};
use crate::options::{Options, Overwrite};
use crate::place::Place;
use crate::progress::Reporter;
use crate::report::RunError;
use crate::sync::Unpoisoned;
use records::{Found, Records};

/// One share of the sources of a run split between processes: the sources whose name hashes
/// (a stable hash, the same on every machine) to `index` modulo `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which share, from 0.
    pub index: u32,
    /// How many shares.
    pub count: u32,
}

impl Shard {
    /// Whether `source` is in this share.
    pub fn takes(&self, source: &Source) -> bool {
        records::stable_hash(&source.name) % u64::from(self.count.max(1)) == u64::from(self.index)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `I/N`, with `I` from 0 to N-1 (`$JOB_COMPLETION_INDEX/N`, `$SLURM_ARRAY_TASK_ID/N`).
    fn from_str(text: &str) -> Result<Shard, String> {
        let (index, count) = text
            .split_once('/')
            .ok_or_else(|| format!("'{text}' is not I/N (for example 0/4)"))?;
        let parse = |t: &str| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| format!("'{text}' is not I/N"))
        };
        let (index, count) = (parse(index)?, parse(count)?);
        if count == 0 || index >= count {
            return Err(format!(
                "'{text}': I must be from 0 to N-1, and N at least 1"
            ));
        }
        Ok(Shard { index, count })
    }
}

/// How a run of many sources goes, beyond the [`Options`] each source's run gets.
#[derive(Debug, Clone, Default)]
pub struct ManyOptions {
    /// Each source into a folder (or prefix) of its own under the output, named after it
    /// without its archive suffixes (`shard-000123.tar.gz` into `OUT/shard-000123/`; an image
    /// by its name and tag, `docker://ghcr.io/team/app:1.4` into `OUT/app_1.4/`). Two sources
    /// that would share one are refused before anything is written.
    pub per_archive: bool,
    /// Only this share of the sources.
    pub shard: Option<Shard>,
    /// Sources extracted at once. `None`: two per core into a folder; into a bucket, or from
    /// one, eight per core (each mostly waits for round trips).
    pub at_once: Option<usize>,
}

/// What became of one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Every file written and closed, and its record made.
    Done,
    /// A record says it was done before, and it has not changed since: left alone.
    SkippedDone,
    /// Some entries failed, or it could not be read: no record, so a rerun tries it again.
    Failed,
    /// Its record names another identity (another ETag, size or mtime): it changed since it
    /// was done. Left alone; extracted again with [`Overwrite::Replace`] or
    /// [`Overwrite::Update`].
    Changed,
}

impl Status {
    /// As the report names it: `done`, `skipped-done`, `failed`, `changed`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Done => "done",
            Status::SkippedDone => "skipped-done",
            Status::Failed => "failed",
            Status::Changed => "changed",
        }
    }
}

/// One source's line of the report.
#[derive(Debug)]
#[non_exhaustive]
pub struct SourceReport {
    /// The source, as given or listed.
    pub source: String,
    /// Its identity ([`Source::identity`]).
    pub identity: String,
    /// Where it was extracted.
    pub destination: PathBuf,
    /// What became of it.
    pub status: Status,
    /// Files written and closed by this run.
    pub files: u64,
    /// Bytes of file content written.
    pub bytes: u64,
    /// How long it took.
    pub seconds: Duration,
    /// Each entry that failed, with its path (and key, into a bucket).
    pub failures: Vec<Error>,
    /// Why the source as a whole failed or was left alone, if it was.
    pub reason: Option<String>,
    /// Things worth telling that are not failures.
    pub warnings: Vec<String>,
    /// For an image from a registry: where it was pulled from ([`Report::pulled_from`](crate::Report::pulled_from)).
    pub pulled_from: Option<String>,
}

/// What a run of many sources did, counted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManySummary {
    /// Sources extracted and recorded.
    pub done: u64,
    /// Sources done before, left alone.
    pub skipped_done: u64,
    /// Sources that failed.
    pub failed: u64,
    /// Sources changed since their record, left alone.
    pub changed: u64,
    /// Sources another share takes ([`ManyOptions::shard`]).
    pub other_shards: u64,
    /// Files written, over every source.
    pub files: u64,
}

impl ManySummary {
    /// Whether every source this run took ended done (or was done before).
    pub fn all_done(&self) -> bool {
        self.failed == 0 && self.changed == 0
    }
}

/// Extracts each of `sources` into `out` (a folder, or a bucket prefix with feature `s3`),
/// each exactly once across reruns: see the module's docs and docs/many-archives.md.
/// `each` is handed every source's report as it ends, on the lane that ran it.
///
/// `Err` only when the run cannot start (the output cannot hold records, two sources would
/// share a folder): nothing was written then. A source that fails is a [`Status::Failed`]
/// report, and the rest go on.
///
/// ```
/// # #[cfg(feature = "tar")] {
/// use fastwrite::jobs::{ManyOptions, Source, Status, extract_all};
/// let dir = tempfile::tempdir()?;
/// # for name in ["a", "b"] {
/// #     let mut builder = tar::Builder::new(std::fs::File::create(dir.path().join(format!("{name}.tar")))?);
/// #     let mut header = tar::Header::new_gnu();
/// #     header.set_size(2);
/// #     header.set_mode(0o644);
/// #     builder.append_data(&mut header, "f.txt", &b"hi"[..])?;
/// #     builder.finish()?;
/// # }
/// let sources: Vec<Source> = ["a.tar", "b.tar"]
///     .iter()
///     .map(|name| Source::new(dir.path().join(name).to_string_lossy()))
///     .collect();
/// let many = ManyOptions { per_archive: true, ..Default::default() };
/// let out = dir.path().join("out");
/// let summary = extract_all(&sources, &out, &Default::default(), &many, &|report| {
///     println!("{} {}", report.status.name(), report.source);
/// })?;
/// assert_eq!(summary.done, 2);
/// assert!(out.join("a/f.txt").exists() && out.join("b/f.txt").exists());
/// // The same again: nothing to do.
/// let again = extract_all(&sources, &out, &Default::default(), &many, &|_| {})?;
/// assert_eq!((again.done, again.skipped_done), (0, 2));
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn extract_all(
    sources: &[Source],
    out: &Path,
    opts: &Options,
    many: &ManyOptions,
    each: &(dyn Fn(SourceReport) + Sync),
) -> Result<ManySummary, Error> {
    let start_error = |e: anyhow::Error| Error::start(out, ErrorKind::Directory, e);
    let mut summary = ManySummary::default();
    let taken: Vec<&Source> = sources
        .iter()
        .filter(|s| many.shard.is_none_or(|shard| shard.takes(s)))
        .collect();
    summary.other_shards = (sources.len() - taken.len()) as u64;
    let out = output(out)?;
    let destinations = destinations(&taken, &out, many.per_archive)?;
    let records = Records::open(&out, opts).map_err(start_error)?;
    let remote = out.can().each_a_request || taken.iter().any(|s| s.is_remote());
    let cores = crate::options::default_threads();
    let lanes = many
        .at_once
        .unwrap_or(if remote { 8 * cores } else { 2 * cores })
        .clamp(1, taken.len().max(1));
    let next = AtomicUsize::new(0);
    let summary_lock = Mutex::new(summary);
    // Into one OUT, who wrote each path, so that a second archive meeting it names the first.
    let writers = (!many.per_archive).then(|| Arc::new(Writers::default()));
    std::thread::scope(|scope| {
        for lane in 0..lanes {
            let (next, taken, destinations) = (&next, &taken, &destinations);
            let (records, summary, writers) = (&records, &summary_lock, &writers);
            std::thread::Builder::new()
                .name(format!("fastwrite-source-{lane}"))
                .spawn_scoped(scope, move || {
                    loop {
                        if opts.cancel.is_cancelled() {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(source) = taken.get(i) else {
                            break;
                        };
                        let noting = writers
                            .as_ref()
                            .map(|w| (Arc::clone(w), i, taken.as_slice()));
                        let report = run_one(source, &destinations[i], opts, records, noting);
                        {
                            let mut summary = summary.lock().unpoisoned();
                            summary.files += report.files;
                            *match report.status {
                                Status::Done => &mut summary.done,
                                Status::SkippedDone => &mut summary.skipped_done,
                                Status::Failed => &mut summary.failed,
                                Status::Changed => &mut summary.changed,
                            } += 1;
                        }
                        each(report);
                    }
                })
                .expect("a thread for a lane of sources");
        }
    });
    Ok(summary_lock.into_inner().unpoisoned())
}

/// The one-archive step of [`extract_all`], for a scheduler that hands out the sources itself
/// (a Dask or Ray task, a queue's worker): `source` extracted into `out` (into its own folder
/// under `out` with `per_archive`), exactly once across every call, whatever machine makes
/// it: a record under `out` says it is done, so a retried task skips it, and what an attempt
/// that died wrote is taken as its own by the next.
///
/// `Err` only when the step cannot start (the output cannot hold records, the source has no
/// name for its own folder); a source that fails is a [`Status::Failed`] report.
///
/// ```
/// # #[cfg(feature = "tar")] {
/// use fastwrite::jobs::{Source, Status, extract_one};
/// let dir = tempfile::tempdir()?;
/// # let mut builder = tar::Builder::new(std::fs::File::create(dir.path().join("a.tar"))?);
/// # let mut header = tar::Header::new_gnu();
/// # header.set_size(2);
/// # header.set_mode(0o644);
/// # builder.append_data(&mut header, "f.txt", &b"hi"[..])?;
/// # builder.finish()?;
/// // A task retried runs the same step again: the second time, nothing to do.
/// let source = Source::new(dir.path().join("a.tar").to_string_lossy());
/// let out = dir.path().join("out");
/// let first = extract_one(&source, &out, &Default::default(), true)?;
/// let again = extract_one(&source, &out, &Default::default(), true)?;
/// assert_eq!((first.status, again.status), (Status::Done, Status::SkippedDone));
/// assert_eq!(std::fs::read(out.join("a/f.txt"))?, b"hi");
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn extract_one(
    source: &Source,
    out: &Path,
    opts: &Options,
    per_archive: bool,
) -> Result<SourceReport, Error> {
    let out = output(out)?;
    let destination = destinations(&[source], &out, per_archive)?.remove(0);
    let records = Records::open(&out, opts)
        .map_err(|e| Error::start(out.named(), ErrorKind::Directory, e))?;
    Ok(run_one(source, &destination, opts, &records, None))
}

/// Where each of `sources` goes: `out` itself, or with `per_archive` a folder (or prefix) of
/// its own under `out`; `Err` for two sources that would share one (or a source with no name
/// to give it). [`extract_all`] checks this before anything is written; a scheduler that
/// hands the sources to [`extract_one`] in many places calls it once, first.
pub fn destinations_of(
    sources: &[Source],
    out: &Path,
    per_archive: bool,
) -> Result<Vec<PathBuf>, Error> {
    let out = output(out)?;
    let places = destinations(&sources.iter().collect::<Vec<_>>(), &out, per_archive)?;
    Ok(places.iter().map(|p| p.named().to_path_buf()).collect())
}

/// Where a run of many writes, decided once for all its sources.
fn output(out: &Path) -> Result<Place, Error> {
    Place::output(out).map_err(|e| Error::start(out, ErrorKind::Directory, e))
}

/// Where each source goes: all into `out`, or each into a folder of its own under it, two
/// sources sharing one refused.
fn destinations(sources: &[&Source], out: &Place, per_archive: bool) -> Result<Vec<Place>, Error> {
    if !per_archive {
        return Ok(vec![out.clone(); sources.len()]);
    }
    let mut taken: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    let mut found = Vec::with_capacity(sources.len());
    for source in sources {
        let Some(name) = sources::folder_name(&source.name) else {
            let why = anyhow::anyhow!(
                "'{}' has no name to give its own folder (ManyOptions::per_archive)",
                source.name
            );
            return Err(Error::named(
                Path::new(&source.name),
                ErrorKind::Invalid,
                why,
            ));
        };
        // Folders that differ only in case are one folder on Windows and macOS.
        if let Some(other) = taken.insert(name.to_lowercase(), &source.name) {
            let why = anyhow::anyhow!(
                "'{}' and '{other}' would both be extracted into '{name}' (ManyOptions::per_archive names each folder after its archive): refused before anything is written",
                source.name
            );
            return Err(Error::named(
                Path::new(&source.name),
                ErrorKind::AlreadyExists,
                why,
            ));
        }
        found.push(out.join(&name));
    }
    Ok(found)
}

/// Who wrote each path in a run of many into one OUT (a hash of the path's name: about 40 bytes a
/// file), and the [`Reporter`] that notes it on the way to the caller's own.
#[derive(Default)]
struct Writers {
    /// The first source that wrote a path, and another, if one did. (Noted as each file is
    /// sealed, before it is moved into place: the first noted is not always the one in place,
    /// so the one that failed is named with the other, whichever came first.)
    paths: Mutex<HashMap<u64, (usize, Option<usize>)>>,
}

struct Noting {
    writers: Arc<Writers>,
    source: usize,
    inner: Option<Arc<dyn Reporter>>,
}

impl Reporter for Noting {
    fn planned(&self, files: u64, bytes: u64) {
        self.inner.iter().for_each(|r| r.planned(files, bytes));
    }
    fn bytes_written(&self, bytes: u64) {
        self.inner.iter().for_each(|r| r.bytes_written(bytes));
    }
    fn file_written(&self) {
        self.inner.iter().for_each(|r| r.file_written());
    }
    fn entry_written(&self, name: &str) {
        let key = records::stable_hash(name);
        self.writers
            .paths
            .lock()
            .unpoisoned()
            .entry(key)
            .and_modify(|(first, other)| {
                if *first != self.source && other.is_none() {
                    *other = Some(self.source);
                }
            })
            .or_insert((self.source, None));
        self.inner.iter().for_each(|r| r.entry_written(name));
    }
    fn finished(&self) {
        self.inner.iter().for_each(|r| r.finished());
    }
}

/// A path `source` met already there, which another source of this run wrote: named with it.
fn name_the_other(failure: Error, writers: &Writers, source: usize, sources: &[&Source]) -> Error {
    if failure.kind() != ErrorKind::AlreadyExists {
        return failure;
    }
    let key = records::stable_hash(&failure.path().to_string_lossy());
    let noted = writers.paths.lock().unpoisoned().get(&key).copied();
    let other = noted.and_then(|(first, other)| match first == source {
        true => other,
        false => Some(first),
    });
    match other.and_then(|o| sources.get(o)) {
        Some(other) => failure.context(format!(
            "'{}' of this run holds it too, and wrote it first: two archives, one path (ManyOptions::per_archive gives each its own folder)",
            other.name
        )),
        None => failure,
    }
}

fn run_one(
    source: &Source,
    dest: &Place,
    opts: &Options,
    records: &Records,
    noting: Option<(Arc<Writers>, usize, &[&Source])>,
) -> SourceReport {
    let start = Instant::now();
    let mut report = SourceReport {
        source: source.name.clone(),
        identity: source.identity.clone(),
        destination: dest.named().to_path_buf(),
        status: Status::Failed,
        files: 0,
        bytes: 0,
        seconds: Duration::ZERO,
        failures: Vec::new(),
        reason: None,
        warnings: Vec::new(),
        pulled_from: None,
    };
    let redo = matches!(opts.overwrite, Overwrite::Replace | Overwrite::Update);
    match records.find(source) {
        Found::Done => {
            report.status = Status::SkippedDone;
            return report;
        }
        Found::Changed if !redo => {
            report.status = Status::Changed;
            report.reason = Some(format!(
                "'{}' changed since it was extracted (now: {}): left alone (Overwrite::Replace or Overwrite::Update extracts it again)",
                source.name,
                if source.identity.is_empty() {
                    "unknown"
                } else {
                    &source.identity
                }
            ));
            return report;
        }
        Found::Changed | Found::New => {}
    }
    let earlier = match records.begin(source) {
        Ok(earlier) => earlier,
        Err(error) => {
            report.reason = Some(format!("{error:#}"));
            return report;
        }
    };
    let progress = match &noting {
        Some((writers, index, _)) => Some(Arc::new(Noting {
            writers: Arc::clone(writers),
            source: *index,
            inner: opts.progress.clone(),
        }) as Arc<dyn Reporter>),
        None => opts.progress.clone(),
    };
    let opts = Options {
        resume_tag: earlier.then(|| records::resume_tag(source)),
        progress,
        ..opts.clone()
    };
    let result = crate::extract::extract_to(Path::new(&source.name), dest, &opts);
    report.seconds = start.elapsed();
    let run = match result {
        Ok(run) => run,
        Err(RunError::Failed(run)) => *run,
        Err(error) => {
            report.reason = Some(error.to_string());
            return report;
        }
    };
    report.files = run.files;
    report.bytes = run.bytes;
    report.warnings = run.warnings;
    report.pulled_from = run.pulled_from;
    report.failures = match &noting {
        Some((writers, index, sources)) => run
            .failures
            .into_iter()
            .map(|f| name_the_other(f, writers, *index, sources))
            .collect(),
        None => run.failures,
    };
    if !report.failures.is_empty() {
        report.reason = Some(format!("{} entries failed", report.failures.len()));
        return report;
    }
    if opts.cancel.is_cancelled() {
        report.reason = Some("interrupted".to_string());
        return report;
    }
    let finished = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let text = format!(
        "source: {}\nidentity: {}\ndestination: {}\nfiles: {}\nbytes: {}\nfinished: {finished}\n",
        source.name,
        source.identity,
        dest.named().display(),
        run.files,
        run.bytes
    );
    match records.add(source, &text) {
        Ok(()) => report.status = Status::Done,
        Err(error) => report.reason = Some(format!("{error:#}")),
    }
    report
}
