//! What happened in a run: counts, bytes, time per phase, and every entry that failed.
//!
//! A failure is data: it travels with its entry's name from wherever it happened (validation,
//! the write stage, a close thread) to here, is counted, and sets the exit code.

use crate::error::{Error, ErrorKind};

use std::fmt::Write as _;
use std::time::Duration;

/// Exit codes, as documented in the README.
pub mod exit {
    /// Everything was written.
    pub const SUCCESS: i32 = 0;
    /// The run finished, but some entries failed (each one is reported).
    pub const SOME_FAILED: i32 = 1;
    /// The run could not start: bad arguments, an unreadable or unrecognised archive.
    pub const CANNOT_START: i32 = 2;
}

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
    /// Bytes of file content written.
    pub bytes: u64,
    /// Existing files kept because of [`Overwrite::Skip`](crate::Overwrite::Skip).
    pub skipped: u64,
    /// Every entry that failed, with its path and kind.
    pub failures: Vec<Error>,
    /// Things worth telling that are not failures (an entry type skipped, duplicate names).
    pub warnings: Vec<String>,
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
    /// The command line's exit code for this report: [`exit::SUCCESS`] or
    /// [`exit::SOME_FAILED`].
    pub fn exit_code(&self) -> i32 {
        if self.failures.is_empty() {
            exit::SUCCESS
        } else {
            exit::SOME_FAILED
        }
    }

    /// One line per failure, in a stable order (by path).
    pub fn failure_lines(&mut self) -> Vec<String> {
        self.sort_failures();
        self.failures.iter().map(Error::to_string).collect()
    }

    /// The failures for a person to read: in path order, at most `per_kind` of each kind, then
    /// for each kind with more, how many more and what flag resolves them. (Extracting a wheel
    /// twice into one folder fails 2,000 files the same way: 2,000 lines help nobody.) Every
    /// failure stays in [`Report::failures`] and in [`Report::json`].
    pub fn failure_summary(&mut self, per_kind: usize) -> Vec<String> {
        self.sort_failures();
        let mut shown: Vec<(ErrorKind, usize)> = Vec::new();
        let mut lines = Vec::new();
        for failure in &self.failures {
            let count = match shown.iter_mut().find(|(kind, _)| *kind == failure.kind()) {
                Some((_, count)) => count,
                None => {
                    shown.push((failure.kind(), 0));
                    &mut shown.last_mut().expect("just pushed").1
                }
            };
            *count += 1;
            if *count <= per_kind {
                lines.push(failure.to_string());
            }
        }
        for (kind, count) in shown {
            if count > per_kind {
                let more = count - per_kind;
                let mut line = format!("... and {more} more failed the same way ({})", kind.name());
                if let Some(remedy) = kind.remedy() {
                    line.push_str(&format!(": {remedy}"));
                }
                lines.push(line);
            }
        }
        lines
    }

    fn sort_failures(&mut self) {
        self.failures
            .sort_by(|a, b| a.path().as_os_str().cmp(b.path().as_os_str()));
    }

    /// The whole report as one JSON object, for scripts (`--json`): counts, bytes, time per
    /// phase in seconds, the close stage's figures, a mirror's counts, every warning, and every
    /// failure with its `path`, `kind` ([`ErrorKind::name`]) and `reason`.
    pub fn json(&self) -> String {
        let failures: Vec<serde_json::Value> = self
            .failures
            .iter()
            .map(|f| {
                serde_json::json!({
                    "path": f.path().to_string_lossy(),
                    "kind": f.kind().name(),
                    "reason": f.message(),
                })
            })
            .collect();
        let mirror = self.mirror.as_ref().map(|m| {
            serde_json::json!({
                "unchanged": m.unchanged,
                "updated": m.updated,
                "deleted": m.deleted,
                "actions": m.actions,
            })
        });
        serde_json::json!({
            "files": self.files,
            "dirs": self.dirs,
            "symlinks": self.symlinks,
            "hardlinks": self.hardlinks,
            "bytes": self.bytes,
            "skipped": self.skipped,
            "reflinked": self.reflinked,
            "failed": self.failures.len(),
            "seconds": {
                "wall": self.wall.as_secs_f64(),
                "dirs": self.dir_time.as_secs_f64(),
                "write": self.write_time.as_secs_f64(),
                "close": self.close_time.as_secs_f64(),
            },
            "close": {
                "threads": self.close_threads,
                "peak_queue": self.peak_close_queue,
            },
            "mirror": mirror,
            "warnings": self.warnings,
            "failures": failures,
        })
        .to_string()
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
        if let Some(m) = &self.mirror {
            let _ = writeln!(s, "unchanged:         {}", m.unchanged);
            let _ = writeln!(s, "updated:           {}", m.updated);
            let _ = writeln!(s, "deleted:           {}", m.deleted);
            let _ = writeln!(s, "reflinked:         {}", self.reflinked);
        } else {
            let _ = writeln!(s, "skipped:           {}", self.skipped);
        }
        let _ = writeln!(s, "failed:            {}", self.failures.len());
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
    fn exit_code_follows_failures() {
        let mut report = Report::default();
        assert_eq!(report.exit_code(), exit::SUCCESS);
        let kind = crate::ErrorKind::Write;
        report
            .failures
            .push(Error::new("b", kind, anyhow::anyhow!("second")));
        report
            .failures
            .push(Error::new("a", kind, anyhow::anyhow!("first")));
        assert_eq!(report.exit_code(), exit::SOME_FAILED);
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
