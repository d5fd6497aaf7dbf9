//! Listing an archive: what `tar -tv` and `unzip -Z` show, and what extracting it would do to
//! each entry (the same selection and the same checks as [`extract`](crate::extract), with
//! nothing written). A tar is listed as it streams; a zip from its central directory.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::select::Chooser;
use super::{Input, open, tar, zip};
use crate::error::Error;
use crate::options::Selection;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListedKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A second name for a file earlier in the archive.
    Hardlink,
    /// A character device (never extracted).
    CharDevice,
    /// A block device (never extracted).
    BlockDevice,
    /// A named pipe (never extracted).
    Fifo,
    /// Anything else a tar may hold (a volume label, a type no tool knows).
    Other,
}

impl ListedKind {
    /// The letter `ls -l` and `tar -tv` begin a line with (`h` for a hard link, as bsdtar).
    pub fn letter(self) -> char {
        match self {
            ListedKind::File => '-',
            ListedKind::Dir => 'd',
            ListedKind::Symlink => 'l',
            ListedKind::Hardlink => 'h',
            ListedKind::CharDevice => 'c',
            ListedKind::BlockDevice => 'b',
            ListedKind::Fifo => 'p',
            ListedKind::Other => '?',
        }
    }

    /// Its name in `--json` output.
    pub fn name(self) -> &'static str {
        match self {
            ListedKind::File => "file",
            ListedKind::Dir => "dir",
            ListedKind::Symlink => "symlink",
            ListedKind::Hardlink => "hardlink",
            ListedKind::CharDevice => "char-device",
            ListedKind::BlockDevice => "block-device",
            ListedKind::Fifo => "fifo",
            ListedKind::Other => "other",
        }
    }
}

/// One entry of an archive, as listed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Listed {
    /// What it is.
    pub kind: ListedKind,
    /// Permission bits as archived (with setuid, setgid, sticky), if the archive has them.
    pub mode: Option<u32>,
    /// The file's length once extracted (0 for everything but files).
    pub size: u64,
    /// Its modification time as archived, if the archive has one.
    pub mtime: Option<SystemTime>,
    /// The name as archived; bytes that are not UTF-8 are shown as `\xNN`.
    pub name: String,
    /// Where `extract` would write it, relative to OUT (after `--strip-components`): `None`
    /// when it would not (refused, skipped, or the output folder itself).
    pub path: Option<PathBuf>,
    /// A link's target as archived.
    pub target: Option<String>,
    /// Why `extract` would refuse or skip it.
    pub problem: Option<String>,
}

/// Lists `archive` (`-`: a tar on standard input), calling `each` for every entry `selection`
/// takes, in archive order, as it is read. Returns the failures of the listing itself: a
/// pattern that matched nothing, a stream that broke part-way (after the entries before it
/// were listed). An `Err` means it could not start: the archive is missing, unreadable or
/// unrecognised, a pattern is invalid, or a zip is refused whole (overlapping entries).
///
/// ```no_run
/// let failures = fastwrite::list("wheel.whl".as_ref(), &Default::default(), &mut |entry| {
///     println!("{} {}", entry.size, entry.name);
/// })?;
/// assert!(failures.is_empty());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn list(
    archive: &Path,
    selection: &Selection,
    each: &mut dyn FnMut(&Listed),
) -> anyhow::Result<Vec<Error>> {
    let chooser = Chooser::new(selection)?;
    let mut failures = Vec::new();
    let read = match open(archive)? {
        Input::Zip { file } => zip::list(archive, file, &chooser, each),
        Input::Tar { decoded, label } => tar::list(decoded, &label, &chooser, each),
        Input::ZipStream { label, .. } => Err(Error::new(
            label,
            crate::error::ErrorKind::Source,
            anyhow::anyhow!(
                "a zip is listed from its central directory, at its end: save it to a file first"
            ),
        )),
        Input::Single { .. } => Err(Error::new(
            archive,
            crate::error::ErrorKind::Source,
            anyhow::anyhow!("a single compressed file, not an archive: nothing to list"),
        )),
    };
    if let Err(error) = read {
        failures.push(error);
    }
    failures.extend(chooser.unmatched());
    Ok(failures)
}

impl Listed {
    /// One line of `fastwrite list`: `tar -tv`'s columns (type and mode, size, mtime in UTC,
    /// name, `-> target` or `link to target`), then, in brackets, what extracting would do
    /// where that is not simply writing it under its name.
    pub fn line(&self) -> String {
        line(self)
    }

    /// One JSON object, on one line (`fastwrite list --json`): `type`, `mode` (octal string),
    /// `size`, `mtime` (seconds since 1970, with a fraction), `name`, `path` (where extract
    /// would write it, or null), `target`, `problem` (why it would not be, or null).
    pub fn json(&self) -> String {
        json(self)
    }
}

fn line(entry: &Listed) -> String {
    let mode = entry
        .mode
        .map_or_else(|| "?????????".to_string(), permissions);
    let when = entry
        .mtime
        .map_or_else(|| "????-??-?? ??:??".to_string(), utc_minutes);
    let mut line = format!(
        "{}{mode} {:>12} {when} {}",
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
        line.push_str(&format!("  [{problem}]"));
    } else if let Some(path) = &entry.path {
        let archived = entry.name.trim_start_matches("./").trim_end_matches('/');
        if Path::new(archived) != path.as_path() {
            line.push_str(&format!("  [as {}]", path.display()));
        }
    }
    line
}

fn json(entry: &Listed) -> String {
    let mtime = entry.mtime.map(|t| match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    });
    serde_json::json!({
        "type": entry.kind.name(),
        "mode": entry.mode.map(|m| format!("{m:04o}")),
        "size": entry.size,
        "mtime": mtime,
        "name": entry.name,
        "path": entry.path.as_ref().map(|p| p.to_string_lossy().replace('\\', "/")),
        "target": entry.target,
        "problem": entry.problem,
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
    use std::time::Duration;

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
