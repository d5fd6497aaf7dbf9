//! What happened in a run: counts, bytes, time per phase, and every entry that failed.
//!
//! A failure is data: it travels with its entry's name from wherever it happened (validation,
//! the write stage, a close thread) to here, is counted, and sets the exit code.

use crate::error::Error;

use std::fmt;
use std::io;

use std::fmt::Write as _;

/// How many `names` there are and the first ten of them in path order, for a warning that
/// names what a run did to many files at once: `3 files ('a', 'b', 'c')`, `25 files ('a', ...,
/// 'j' and 15 more)`.
pub(crate) fn some_names(names: impl IntoIterator<Item = String>) -> String {
    const SHOWN: usize = 10;
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort_unstable();
    let count = names.len();
    let mut shown = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    if count > SHOWN {
        let _ = write!(shown, " and {} more", count - SHOWN);
    }
    let files = if count == 1 { "file" } else { "files" };
    format!("{count} {files} ({shown})")
}
use std::time::Duration;

/// What a run did: counts, bytes, time per phase, and every failure. (More figures may come:
/// read the fields, don't build one.)
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Report {
    /// Files written and closed successfully.
    pub files: u64,
    /// Directories created.
    pub dirs: u64,
    /// Symlinks created.
    pub symlinks: u64,
    /// Hard links created.
    pub hardlinks: u64,
    /// Device nodes and FIFOs created ([`Options::devices`](crate::Options::devices)).
    pub specials: u64,
    /// Bytes of file content written.
    pub bytes: u64,
    /// Entries not written on purpose, each said: existing files kept because of
    /// [`Overwrite::Skip`](crate::Overwrite::Skip), and entries of a kind not written (device
    /// nodes and FIFOs without [`Options::devices`](crate::Options::devices), unsupported tar
    /// entry types, a mirror's sockets), each also a warning.
    pub skipped: u64,
    /// Every entry that failed, with its path and kind (for a batch: those not returned
    /// before by [`Batch::take_errors`](crate::Batch::take_errors)).
    pub failures: Vec<Error>,
    /// Writer threads the run had (for a [`Batch`](crate::Batch): its background writers, started
    /// by [`Batch::spawn_write`](crate::Batch::spawn_write); 0 if its callers wrote every file).
    pub writers: usize,
    /// Why that many: asked for (`Options::threads`), one per core on a local disk, or sized by
    /// what a file's create and write took on a network or FUSE filesystem.
    pub writers_why: String,
    /// Failures a batch's [`take_errors`](crate::Batch::take_errors) returned before the end:
    /// failures of the run all the same, not repeated in `failures`.
    pub failures_taken: usize,
    /// Things worth telling that are not failures (an entry type skipped, duplicate names).
    pub warnings: Vec<String>,
    /// For an image from a registry: where it was pulled from (`docker://NAME`, and why there
    /// where registries.conf chose it: a mirror, a search registry, an alias).
    pub pulled_from: Option<String>,
    /// Wall-clock time of the whole run.
    pub wall: Duration,
    /// Time spent creating directories.
    pub dir_time: Duration,
    /// Time spent creating and writing files, summed over writer threads.
    pub write_time: Duration,
    /// Time spent closing files, summed over the threads that closed them.
    pub close_time: Duration,
    /// The most written files that were ever waiting in the close queue.
    pub peak_close_queue: usize,
    /// Threads the close pool had at the end; 0: every file was closed by its writer.
    pub close_threads: usize,
    /// Files copied as reflinks (sharing the source's blocks).
    pub reflinked: u64,
    /// What a mirror found already in place, or changed without writing files.
    pub mirror: Option<MirrorCounts>,
}

/// The part of a mirror's report that an extraction has no use for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MirrorCounts {
    /// Files already as in the source: left alone.
    pub unchanged: u64,
    /// Entries whose content was right, but whose mode or mtime was set.
    pub updated: u64,
    /// Entries removed from the destination (`--delete`, or replaced by another kind); a
    /// directory counts once with everything in it.
    pub deleted: u64,
    /// With `--dry-run`: what would be done, one line each, in path order.
    pub actions: Vec<String>,
}

impl Report {
    /// One line per failure, in a stable order (by path).
    pub fn failure_lines(&mut self) -> Vec<String> {
        self.sort_failures();
        self.failures.iter().map(Error::to_string).collect()
    }

    fn sort_failures(&mut self) {
        self.failures
            .sort_by(|a, b| a.path().as_os_str().cmp(b.path().as_os_str()));
    }

    /// The `--stats` block: what someone timing A/B runs needs.
    pub fn stats(&self) -> String {
        let secs = self.wall.as_secs_f64();
        let rate = if secs > 0.0 {
            self.files as f64 / secs
        } else {
            0.0
        };
        let mut s = String::new();
        let _ = writeln!(s, "files:             {}", self.files);
        let _ = writeln!(s, "directories:       {}", self.dirs);
        let _ = writeln!(s, "symlinks:          {}", self.symlinks);
        let _ = writeln!(s, "hard links:        {}", self.hardlinks);
        if self.specials > 0 {
            let _ = writeln!(s, "devices and FIFOs: {}", self.specials);
        }
        if let Some(m) = &self.mirror {
            let _ = writeln!(s, "unchanged:         {}", m.unchanged);
            let _ = writeln!(s, "updated:           {}", m.updated);
            let _ = writeln!(s, "deleted:           {}", m.deleted);
            let _ = writeln!(s, "reflinked:         {}", self.reflinked);
        } else {
            let _ = writeln!(s, "skipped:           {}", self.skipped);
        }
        let _ = writeln!(s, "failed:            {}", self.failures.len());
        if self.writers > 0 {
            let _ = writeln!(
                s,
                "writers:           {} ({})",
                self.writers, self.writers_why
            );
        }
        let _ = writeln!(
            s,
            "bytes:             {} ({:.1} MiB)",
            self.bytes,
            self.bytes as f64 / (1024.0 * 1024.0)
        );
        let _ = writeln!(s, "wall time:         {:.3} s ({rate:.0} files/s)", secs);
        let _ = writeln!(s, "directory time:    {:.3} s", self.dir_time.as_secs_f64());
        let _ = writeln!(
            s,
            "write time:        {:.3} s (summed over writer threads)",
            self.write_time.as_secs_f64()
        );
        let _ = writeln!(
            s,
            "close time:        {:.3} s (summed over closing threads)",
            self.close_time.as_secs_f64()
        );
        let _ = writeln!(
            s,
            "close threads:     {}",
            match self.close_threads {
                0 => "none (closed by the writers)".to_string(),
                n => n.to_string(),
            }
        );
        let _ = write!(s, "peak close queue:  {}", self.peak_close_queue);
        s
    }
}

/// A size for people: `512 bytes`, `1.5 MiB`, `2.0 GiB` (binary units, as `--max-output` reads
/// them).
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(0), "0 bytes");
        assert_eq!(human_bytes(1023), "1023 bytes");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 << 30), "5.0 GiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn failure_lines_are_sorted_by_path() {
        let mut report = Report::default();
        let kind = crate::ErrorKind::Write;
        report
            .failures
            .push(Error::new("b", kind, anyhow::anyhow!("second")));
        report
            .failures
            .push(Error::new("a", kind, anyhow::anyhow!("first")));
        assert_eq!(report.failure_lines(), ["'a': first", "'b': second"]);
    }

    #[test]
    fn stats_name_every_figure() {
        let stats = Report::default().stats();
        for word in [
            "files:",
            "directories:",
            "bytes:",
            "wall time:",
            "write time:",
            "close time:",
            "close threads:",
            "peak close queue:",
        ] {
            assert!(stats.contains(word), "missing {word}");
        }
    }
}

#[doc = concat!("Why a run of ", extract_fn!(), ", ", list_fn!(), ",")]
#[doc = concat!(mirror_fn!(), " or ", read_files_fn!(), " did not succeed. `Ok` means")]
/// every entry was done; a run with any failure is an `Err` that carries its report, as
/// [`Batch::scope`](crate::Batch::scope) returns one: a failure cannot pass unseen.
///
/// ```
/// use fastwrite::{ErrorKind, Report, RunError};
///
/// // What `fastwrite::extract` (or `list`, `mirror`, `read_files`) returned:
/// fn tell(result: Result<Report, RunError>) {
///     match result {
///         Ok(report) => println!("{} files", report.files),
///         // Nothing was written: the archive is missing, unreadable or not one fastwrite reads.
///         Err(RunError::Start(error)) if error.kind() == ErrorKind::Unsupported => {
///             eprintln!("not an archive: {error}")
///         }
///         Err(RunError::Start(error)) => eprintln!("cannot start: {error}"),
///         // Some entries failed, each with its path and kind; the others were written.
///         Err(RunError::Failed(report)) => {
///             for failure in &report.failures {
///                 eprintln!("{failure}");
///             }
///         }
///         Err(other) => eprintln!("{other}"),
///     }
/// }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// The run could not start, and wrote nothing (the command line's exit code 2): the input
    /// is missing, unreadable or not one fastwrite reads ([`ErrorKind::Source`](crate::ErrorKind::Source),
    /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported); [`Error::io_error`] gives the OS error, such as
    /// [`io::ErrorKind::NotFound`]), an option does not apply ([`ErrorKind::Invalid`](crate::ErrorKind::Invalid)), the output
    /// folder cannot be made or written in ([`ErrorKind::Directory`](crate::ErrorKind::Directory)), a zip is refused whole
    /// (overlapping entries: [`ErrorKind::Refused`](crate::ErrorKind::Refused)), or it would not fit on the disk
    /// ([`ErrorKind::Limit`](crate::ErrorKind::Limit)). Its [`path`](Error::path) is the one concerned.
    Start(Error),
    /// The run ended, and some entries failed (the command line's exit code 1): each is in the
    /// report's [`failures`](Report::failures), with its path and kind; the rest were done.
    Failed(Box<Report>),
    #[doc = concat!(read_files_fn!(), "'s `each` failed (a closed pipe, say): reading")]
    /// stopped there.
    Output(io::Error),
}

impl RunError {
    /// The report of what the run did, if it ran.
    pub fn report(&self) -> Option<&Report> {
        match self {
            RunError::Failed(report) => Some(report),
            _ => None,
        }
    }

    /// The report of what the run did, if it ran.
    pub fn into_report(self) -> Option<Report> {
        match self {
            RunError::Failed(report) => Some(*report),
            _ => None,
        }
    }

    /// Every failure: the one that stopped the start, or those of the run.
    pub fn errors(&self) -> &[Error] {
        match self {
            RunError::Start(error) => std::slice::from_ref(error),
            RunError::Failed(report) => &report.failures,
            RunError::Output(_) => &[],
        }
    }

    /// A finished run's report: `Ok` if nothing failed.
    pub(crate) fn check(report: Report) -> Result<Report, RunError> {
        if report.failures.is_empty() {
            Ok(report)
        } else {
            Err(RunError::Failed(Box::new(report)))
        }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Start(error) => error.fmt(f),
            RunError::Failed(report) => {
                let failures = &report.failures;
                let first = failures
                    .first()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                match failures.len() {
                    1 => write!(f, "1 entry failed: {first}"),
                    n => write!(f, "{n} entries failed; the first: {first}"),
                }
            }
            RunError::Output(error) => write!(f, "cannot write the content out: {error}"),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Start(error) => Some(error),
            RunError::Failed(report) => report
                .failures
                .first()
                .map(|e| e as &(dyn std::error::Error + 'static)),
            RunError::Output(error) => Some(error),
        }
    }
}

/// For work that returns `io::Result`: the first failure's OS error kind (where it has one),
/// with the [`RunError`] inside.
impl From<RunError> for io::Error {
    fn from(error: RunError) -> io::Error {
        let kind = match &error {
            RunError::Output(e) => e.kind(),
            other => other
                .errors()
                .iter()
                .find_map(Error::io_error)
                .map_or(io::ErrorKind::Other, io::Error::kind),
        };
        io::Error::new(kind, error)
    }
}
