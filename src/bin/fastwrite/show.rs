//! What a person (or a script) sees: the terminal bar, failure lines with this command line's
//! flags as their remedies, JSON, `list` lines, and the exit codes. Nothing here is in the
//! library: a program that writes files compiles no terminal code.

use std::fmt::Display;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fastwrite::progress::Reporter;
use fastwrite::{ErrorKind, Listed, ListedKind, Report, Setting};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Exit codes, as documented in the README.
pub mod exit {
    /// Everything was written.
    pub const SUCCESS: i32 = 0;
    /// The run finished, but some entries failed (each one is reported).
    pub const SOME_FAILED: i32 = 1;
    /// The run could not start: bad arguments, an unreadable or unrecognised archive.
    pub const CANNOT_START: i32 = 2;
}

/// Writes a line on stderr (what `eprintln!` does, without its panic): a closed stderr
/// (`fastwrite ... 2>&1 | head -1`) is no failure of the run, whose files are still written
/// and whose exit code still tells; the line is dropped, as GNU tar drops it.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::show::say_line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// Where a command reads several archives, the one the next lines on stderr are about. It is
/// said once, before the first of them: of an archive with nothing to say, nothing is said.
static ABOUT: Mutex<Option<String>> = Mutex::new(None);

/// The lines on stderr from now on are about `archive` (`None`: about no one archive).
pub fn about(archive: Option<&Path>) {
    let heading = archive.map(|a| format!("fastwrite: {}:", for_terminal(a.display())));
    *ABOUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = heading;
}

/// One line on stderr; see [`say!`].
pub fn say_line(line: std::fmt::Arguments<'_>) {
    let heading = ABOUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let mut err = std::io::stderr().lock();
    if let Some(heading) = heading {
        let _ = writeln!(err, "{heading}");
    }
    let _ = writeln!(err, "{line}");
}

/// The exit code for a finished run: [`exit::SUCCESS`] or [`exit::SOME_FAILED`].
pub fn exit_code(report: &Report) -> i32 {
    if report.failures.is_empty() {
        exit::SUCCESS
    } else {
        exit::SOME_FAILED
    }
}

/// This command line's words for a library setting that a message names as its remedy.
fn flag(setting: Setting) -> &'static str {
    match setting {
        // The prompt only where there is a terminal to answer it.
        Setting::Password if std::io::IsTerminal::is_terminal(&std::io::stdin()) => {
            "--password, the FASTWRITE_PASSWORD environment variable, or at the prompt"
        }
        Setting::Password => "--password or the FASTWRITE_PASSWORD environment variable",
        _ => fastwrite::described::spelled(setting).0,
    }
}

/// Control characters quoted as GNU tar quotes them (`\n`, `\t`, `\033`...), for every line a
/// person reads: a name from an archive or a tree cannot move the cursor, recolour or retitle
/// the terminal (`ESC ]0;...BEL`), or split its line in two. (`--json` escapes them its own way.)
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let control = |c: char| c.is_control();
    if !text.contains(control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            // C0, DEL and C1 (U+0080-U+009F: some terminals take 0x9B as ESC [).
            c if control(c) => out.push_str(&format!("\\{:03o}", u32::from(c))),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`for_people`], quoted for a terminal ([`terminal_safe`]).
pub fn for_terminal(message: impl Display) -> String {
    terminal_safe(&for_people(message)).into_owned()
}

/// A library message as this command line says it: each library setting it names becomes the
/// flag that sets it.
pub fn for_people(message: impl Display) -> String {
    Setting::spell_in(&message.to_string(), flag)
}

/// A kind of failure in words, for a person (`ErrorKind::name` is for scripts).
fn kind_words(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Refused => "refused",
        ErrorKind::AlreadyExists => "already there",
        ErrorKind::Directory => "no folder could be made for them",
        ErrorKind::Write => "not written",
        ErrorKind::Close => "failed to close",
        ErrorKind::Metadata => "their mode or time not set",
        ErrorKind::Link => "the link not made",
        ErrorKind::Source => "their data unreadable",
        ErrorKind::Delete => "not deleted",
        ErrorKind::Unfinished => "left unfinished",
        ErrorKind::Cancelled => "cancelled",
        ErrorKind::Limit => "past the output cap",
        ErrorKind::Unverified => "written from data that failed its check",
        ErrorKind::NotFound => "matching nothing",
        // A kind newer than this table.
        _ => kind.name(),
    }
}

/// `n` and the noun, singular or plural (`1 entry`, `2 entries`).
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What the command line offers for failures of this kind, where a flag resolves them.
fn remedy(kind: ErrorKind) -> Option<&'static str> {
    match kind {
        ErrorKind::AlreadyExists => Some("--overwrite replaces them, --skip-existing keeps them"),
        ErrorKind::Limit => Some("--max-output sets the cap"),
        _ => None,
    }
}

/// The failures for a person to read: in path order, at most `per_kind` of each kind, then
/// for each kind with more, how many more and what flag resolves them. (Extracting a wheel
/// twice into one folder fails 2,000 files the same way: 2,000 lines help nobody.) Every
/// failure stays in `Report::failures` and in [`report_json`].
pub fn failure_summary(report: &mut Report, per_kind: usize) -> Vec<String> {
    sort_failures(report);
    let mut shown: Vec<(ErrorKind, usize)> = Vec::new();
    let mut lines = Vec::new();
    for failure in &report.failures {
        let count = match shown.iter_mut().find(|(kind, _)| *kind == failure.kind()) {
            Some((_, count)) => count,
            None => {
                shown.push((failure.kind(), 0));
                &mut shown.last_mut().expect("just pushed").1
            }
        };
        *count += 1;
        if *count <= per_kind {
            lines.push(for_terminal(failure));
        }
    }
    for (kind, count) in shown {
        if count > per_kind {
            let more = count - per_kind;
            let mut line = format!(
                "... and {more} more failed the same way ({})",
                kind_words(kind)
            );
            if let Some(remedy) = remedy(kind) {
                line.push_str(&format!(": {remedy}"));
            }
            lines.push(line);
        }
    }
    lines
}

fn sort_failures(report: &mut Report) {
    report
        .failures
        .sort_by(|a, b| a.path().as_os_str().cmp(b.path().as_os_str()));
}

/// The whole report as one JSON object, for scripts (`--json`): counts, bytes, time per
/// phase in seconds, the close stage's figures, a mirror's counts, every warning, and every
/// failure with its `path`, `kind` (`ErrorKind::name`) and `reason`.
/// What `--json` prints when a run cannot start (exit 2): `{"error": MESSAGE}` (and `"code"`,
/// a store's error code, where the message names one: `NoSuchBucket`), so a script reading
/// stdout gets an object whatever happened.
pub fn error_json(message: &str) -> String {
    let mut value = serde_json::json!({ "error": message });
    if let Some(code) = fastwrite::store_code(message) {
        value["code"] = code.into();
    }
    value.to_string()
}

/// The report as one JSON object, naming the archive it is of when a run reads several.
pub fn report_json(report: &Report, archive: Option<&std::path::Path>) -> String {
    let mut value = report_value(report);
    if let (Some(archive), Some(object)) = (archive, value.as_object_mut()) {
        object.insert(
            "archive".into(),
            archive.to_string_lossy().into_owned().into(),
        );
    }
    value.to_string()
}

/// One failure as `--json` and `--report` give it: `path`, `kind`, `reason`, and `key` into a
/// bucket, with `code`, the store's own error code, where the reason names one.
pub fn failure_json(f: &fastwrite::Error) -> serde_json::Value {
    let mut value = serde_json::json!({
        "path": f.path().to_string_lossy(),
        "kind": f.kind().name(),
        "reason": for_people(f.message()),
    });
    if let Some(key) = f.key() {
        value["key"] = key.into();
    }
    if let Some(code) = f.store_code() {
        value["code"] = code.into();
    }
    value
}

fn report_value(report: &Report) -> serde_json::Value {
    let failures: Vec<serde_json::Value> = report.failures.iter().map(failure_json).collect();
    let mirror = report.mirror.as_ref().map(|m| {
        serde_json::json!({
            "unchanged": m.unchanged,
            "updated": m.updated,
            "deleted": m.deleted,
            "actions": m.actions,
        })
    });
    serde_json::json!({
        "files": report.files,
        "dirs": report.dirs,
        "symlinks": report.symlinks,
        "hardlinks": report.hardlinks,
        "specials": report.specials,
        "bytes": report.bytes,
        "skipped": report.skipped,
        "reflinked": report.reflinked,
        "failed": report.failures.len(),
        "seconds": {
            "wall": report.wall.as_secs_f64(),
            "dirs": report.dir_time.as_secs_f64(),
            "write": report.write_time.as_secs_f64(),
            "close": report.close_time.as_secs_f64(),
        },
        "writers": {
            "count": report.writers,
            "why": report.writers_why,
        },
        "close": {
            "threads": report.close_threads,
            "peak_queue": report.peak_close_queue,
        },
        "mirror": mirror,
        "pulled_from": report.pulled_from,
        "warnings": report.warnings,
        "failures": failures,
    })
}

#[derive(Default)]
struct Counters {
    files: AtomicU64,
    bytes: AtomicU64,
    done: AtomicBool,
}

/// A bar of files and bytes on stderr, redrawn by its own thread ten times a second: writers
/// only bump two relaxed atomic counters.
pub struct Bar {
    bar: ProgressBar,
    counters: Arc<Counters>,
    ticker: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Bar {
    /// A bar that draws itself once the run's plan is known.
    pub fn new() -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {msg} ({binary_bytes}/{binary_total_bytes})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Bar {
            bar,
            counters: Arc::default(),
            ticker: std::sync::Mutex::new(None),
        }
    }
}

impl Default for Bar {
    fn default() -> Self {
        Bar::new()
    }
}

impl Reporter for Bar {
    fn planned(&self, files: u64, bytes: u64) {
        if files == 0 && bytes == 0 {
            // Nothing known up front (a tar stream, a mirror into an empty folder): a spinner
            // with what is done so far.
            self.bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {msg} ({binary_bytes})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
        }
        self.bar.set_length(bytes);
        let bar = self.bar.clone();
        let counters = Arc::clone(&self.counters);
        let ticker = std::thread::Builder::new()
            .name("fastwrite-progress".into())
            .spawn(move || {
                while !counters.done.load(Ordering::Relaxed) {
                    let done = counters.files.load(Ordering::Relaxed);
                    bar.set_position(counters.bytes.load(Ordering::Relaxed));
                    // Zero: the total is not known up front (a mirror into an empty folder).
                    if files == 0 {
                        bar.set_message(format!("{done} files"));
                    } else {
                        bar.set_message(format!("{done}/{files} files"));
                    }
                    bar.tick();
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        // No ticker thread only means no bar; the run itself is unaffected.
        if let Ok(handle) = ticker {
            *self.ticker.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        }
    }

    fn bytes_written(&self, bytes: u64) {
        self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn file_written(&self) {
        self.counters.files.fetch_add(1, Ordering::Relaxed);
    }

    fn finished(&self) {
        self.counters.done.store(true, Ordering::Relaxed);
        if let Some(handle) = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = handle.join();
        }
        self.bar.finish_and_clear();
    }
}

/// `-v`: each file and link a line on stdout as it is written, its name made safe for a
/// terminal. Writers take stdout's lock for a line each; output that fails (a closed pipe)
/// stops, the run does not.
#[derive(Default)]
pub struct Verbose {
    broken: AtomicBool,
}

impl Reporter for Verbose {
    fn entry_written(&self, name: &str) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        let mut out = std::io::stdout().lock();
        if std::io::Write::write_fmt(&mut out, format_args!("{}\n", terminal_safe(name))).is_err() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }
}

/// One line of `fastwrite list`: `tar -tv`'s columns (type and mode, size, mtime in UTC,
/// name, `-> target` or `link to target`), then, in brackets, what extracting would do where
/// that is not simply writing it under its name.
pub fn listed_line(entry: &Listed) -> String {
    let mode = entry
        .mode
        .map_or_else(|| "?????????".to_string(), permissions);
    let when = entry
        .mtime
        .map_or_else(|| "????-??-?? ??:??".to_string(), utc_minutes);
    // GNU tar's `user/group` (names where archived, else ids) with the size right-aligned
    // after it, 19 columns at least between them.
    let id = |name: &str, id: Option<u64>| match (name, id) {
        ("", Some(id)) => id.to_string(),
        ("", None) => "?".to_string(),
        (name, _) => name.to_string(),
    };
    let owner = format!(
        "{}/{}",
        id(&entry.user, entry.uid),
        id(&entry.group, entry.gid)
    );
    let width = 18usize.saturating_sub(owner.chars().count()).max(1);
    let mut line = format!(
        "{}{mode} {owner} {:>width$} {when} {}",
        entry.kind.letter(),
        entry.size,
        entry.name
    );
    match (&entry.kind, &entry.target) {
        (ListedKind::Symlink, Some(target)) => line.push_str(&format!(" -> {target}")),
        (ListedKind::Hardlink, Some(target)) => line.push_str(&format!(" link to {target}")),
        _ => {}
    }
    if let Some(problem) = &entry.problem {
        line.push_str(&format!("  [{}]", for_people(problem)));
    } else if let Some(path) = &entry.path {
        let archived = entry.name.trim_start_matches("./").trim_end_matches('/');
        if Path::new(archived) != path.as_path() {
            line.push_str(&format!("  [as {}]", path.display()));
        }
    }
    terminal_safe(&line).into_owned()
}

/// One JSON object, on one line (`fastwrite list --json`): `type`, `mode` (octal string),
/// `size`, `mtime` (seconds since 1970, with a fraction), `uid`, `gid`, `user`, `group` (null
/// where the archive has none), `name`, `path` (where extract would write it, or null),
/// `target`, `problem` (why it would not be, or null), `fails` (whether that problem makes
/// extract fail, not skip the entry with a warning).
pub fn listed_json(entry: &Listed) -> String {
    let mtime = entry.mtime.map(|t| match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    });
    serde_json::json!({
        "type": entry.kind.name(),
        "mode": entry.mode.map(|m| format!("{m:04o}")),
        "size": entry.size,
        "mtime": mtime,
        "uid": entry.uid,
        "gid": entry.gid,
        "user": Some(&entry.user).filter(|u| !u.is_empty()),
        "group": Some(&entry.group).filter(|g| !g.is_empty()),
        "name": entry.name,
        "path": entry.path.as_ref().map(|p| p.to_string_lossy().replace('\\', "/")),
        "target": entry.target,
        "problem": entry.problem.as_deref().map(for_people),
        "fails": entry.fails,
    })
    .to_string()
}

/// `rwxr-xr-x`, with setuid, setgid and sticky as `ls` shows them.
fn permissions(mode: u32) -> String {
    let bit = |mask: u32, c: char| if mode & mask != 0 { c } else { '-' };
    let special = |exec: bool, set: bool, lower: char| match (exec, set) {
        (true, true) => lower,
        (false, true) => lower.to_ascii_uppercase(),
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(mode & 0o100 != 0, mode & 0o4000 != 0, 's'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(mode & 0o010 != 0, mode & 0o2000 != 0, 's'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(mode & 0o001 != 0, mode & 0o1000 != 0, 't'),
    ]
    .into_iter()
    .collect()
}

/// `YYYY-MM-DD HH:MM` in UTC (the same on every machine, unlike `tar -tv`'s local time).
fn utc_minutes(time: SystemTime) -> String {
    let secs: i64 = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    };
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil, in i128 so that no archived time overflows it.
    let z = i128::from(days) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_quoted_as_gnu_tar_quotes_them() {
        assert_eq!(terminal_safe("plain: é ✓"), "plain: é ✓");
        assert!(matches!(
            terminal_safe("plain"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(terminal_safe("a\u{1b}[31mb"), "a\\033[31mb");
        assert_eq!(terminal_safe("t\u{1b}]0;x\u{7}"), "t\\033]0;x\\a");
        assert_eq!(terminal_safe("1\n2\r3\t4\0"), "1\\n2\\r3\\t4\\000");
        assert_eq!(terminal_safe("del\u{7f} c1\u{9b}"), "del\\177 c1\\233");
    }
    use std::time::Duration;

    #[test]
    fn every_library_setting_is_said_as_a_flag() {
        for setting in Setting::ALL {
            assert!(flag(setting).starts_with("--"), "{setting:?} has no flag");
            let message = format!("past the cap ({setting})");
            assert!(!for_people(&message).contains("::"), "{message}");
        }
        assert_eq!(
            for_people("already exists (Overwrite::Replace replaces it, Overwrite::Skip keeps it)"),
            "already exists (--overwrite replaces it, --skip-existing keeps it)"
        );
    }

    #[test]
    fn modes_and_times_read_as_ls_and_tar_show_them() {
        assert_eq!(permissions(0o755), "rwxr-xr-x");
        assert_eq!(permissions(0o4755), "rwsr-xr-x");
        assert_eq!(permissions(0o2644), "rw-r-Sr--");
        assert_eq!(permissions(0o1777), "rwxrwxrwt");
        let at = |secs: u64| UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(utc_minutes(at(0)), "1970-01-01 00:00");
        assert_eq!(utc_minutes(at(1_600_000_000)), "2020-09-13 12:26");
        assert_eq!(utc_minutes(at(951_782_400)), "2000-02-29 00:00");
        let before = UNIX_EPOCH - Duration::from_secs(86_400 + 60);
        assert_eq!(utc_minutes(before), "1969-12-30 23:59");
        // The extremes of a base-256 tar time (where this system's time reaches them): a
        // date, never a panic.
        if let Some(far) = UNIX_EPOCH.checked_add(Duration::from_secs(i64::MAX as u64)) {
            let _ = utc_minutes(far);
        }
    }
}
