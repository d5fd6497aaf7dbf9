//! Failures as data: every one names its path and has a kind a program can match.
//!
//! A failure of one entry never stops a run and is never only logged: it travels from wherever
//! it happened (validation, a writer, a close thread, the end of the run) into the
//! [`Report`](crate::Report), or back to the caller of [`Batch`](crate::Batch).

use crate::sync::Unpoisoned;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What went wrong, for a program to act on. The message ([`Error`]'s `Display`) says the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Refused before anything was written: the path would leave the root (absolute, `..`, a
    /// drive letter), is a name this system cannot hold, differs from an earlier one only by
    /// case where names ignore case, lies below a symlink, or is a link pointing outside.
    Refused,
    /// Something already exists at the path and the overwrite policy is
    /// [`Overwrite::Refuse`](crate::Overwrite::Refuse) (or it is a directory, which no policy
    /// replaces with a file).
    AlreadyExists,
    /// A parent directory could not be created, or something that is not a directory stands
    /// where one must go.
    Directory,
    /// Creating or writing the file failed: disk full, quota, permissions, an I/O error
    /// ([`Error::io_error`] tells which).
    Write,
    /// Closing the file failed (with `fsync`, making it durable; with
    /// [`Overwrite::Replace`](crate::Overwrite::Replace), renaming it into place). The file
    /// was removed: nothing unverified stays under its name.
    Close,
    /// Setting a mode or an mtime failed.
    Metadata,
    /// Creating a symlink or a hard link failed.
    Link,
    /// Reading what was to be written failed: a corrupt or truncated archive entry, data longer
    /// or shorter than declared, an unreadable source file, an unsupported entry; or, converted
    /// by `?` from an [`io::Error`] (with no path), a program's own failure to produce a file's
    /// content (a serializer's).
    Source,
    /// Deleting or renaming something in a mirror's destination failed.
    Delete,
    /// A [`FileWriter`](crate::FileWriter) was dropped without
    /// [`finish`](crate::FileWriter::finish) (an early return, a panic): its file was removed.
    Unfinished,
    /// The run or batch was cancelled before this file was written; nothing was left of it.
    Cancelled,
    /// Writing this file would have passed the run's output cap
    /// ([`Options::max_output`](crate::Options::max_output)): it was not written, and the
    /// run stopped there.
    Limit,
    /// Written from a part of a compressed archive whose check (a gzip CRC, an xz or zstd
    /// checksum) then failed: the file was removed (a replaced file keeps its old content),
    /// the link not made. Nothing unverified stays under a file's name.
    Unverified,
    /// A pattern given to choose entries ([`Selection::patterns`](crate::Selection::patterns))
    /// matched none of them. Its path is the pattern.
    NotFound,
    /// A run could not start on an input fastwrite does not read: another format (a 7z, a
    /// RAR), or one this build leaves out (its cargo feature is off; the message names every
    /// feature the input needs).
    Unsupported,
    /// A run could not start with the options it was given: an invalid pattern, a setting
    /// that does not apply to this input ([`Options::file_name`](crate::Options::file_name)
    /// with an archive, patterns with a single compressed file).
    Invalid,
}

impl ErrorKind {
    /// Its name in `--json` output: `refused`, `already-exists`, `directory`, `write`, `close`,
    /// `metadata`, `link`, `source`, `delete`, `unfinished`, `cancelled`, `limit`,
    /// `unverified`, `not-found`, `unsupported`, `invalid`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::AlreadyExists => "already-exists",
            ErrorKind::Directory => "directory",
            ErrorKind::Write => "write",
            ErrorKind::Close => "close",
            ErrorKind::Metadata => "metadata",
            ErrorKind::Link => "link",
            ErrorKind::Source => "source",
            ErrorKind::Delete => "delete",
            ErrorKind::Unfinished => "unfinished",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Limit => "limit",
            ErrorKind::Unverified => "unverified",
            ErrorKind::NotFound => "not-found",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Invalid => "invalid",
        }
    }
}

/// A library setting that an error message names as the way out (`... (Options::max_output
/// sets the cap)`). Messages spell it as [`Setting::name`]; the command line shows its own flag
/// in its place, so one message serves both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Setting {
    /// [`Overwrite::Replace`](crate::Overwrite::Replace): replace what exists.
    Replace,
    /// [`Overwrite::Skip`](crate::Overwrite::Skip): keep what exists.
    Skip,
    /// [`Options::max_output`](crate::Options::max_output): the cap on what a run writes.
    MaxOutput,
    /// [`Options::space_check`](crate::Options::space_check) off: write past the free-space check.
    NoSpaceCheck,
    /// [`Options::password`](crate::Options::password): an encrypted zip's password.
    Password,
    /// [`Options::file_name`](crate::Options::file_name): the name for a single compressed file.
    FileName,
    /// [`Selection::strip_components`](crate::Selection::strip_components).
    StripComponents,
    /// [`Selection::exclude`](crate::Selection::exclude) (and a mirror's excludes).
    Exclude,
    /// [`MirrorOptions::delete`](crate::MirrorOptions::delete).
    Delete,
    /// [`MirrorOptions::hard_links`](crate::MirrorOptions::hard_links).
    HardLinks,
    /// [`Options::devices`](crate::Options::devices): create device nodes and FIFOs.
    Devices,
    /// [`Options::atomic`](crate::Options::atomic): the whole tree or nothing.
    Atomic,
    /// [`Overwrite::Update`](crate::Overwrite::Update): replace what is older.
    Update,
    /// `jobs::ManyOptions::per_archive` (feature `extract`): each archive into a folder of its
    /// own.
    PerArchive,
}

impl Setting {
    /// Every setting, for a front end that maps them to its own words.
    pub const ALL: [Setting; 14] = [
        Setting::Replace,
        Setting::Skip,
        Setting::MaxOutput,
        Setting::NoSpaceCheck,
        Setting::Password,
        Setting::FileName,
        Setting::StripComponents,
        Setting::Exclude,
        Setting::Delete,
        Setting::HardLinks,
        Setting::Devices,
        Setting::Atomic,
        Setting::Update,
        Setting::PerArchive,
    ];

    /// `message` with every setting it names spelled in a front end's own words (`words`
    /// gives them: the command line's flags, the Python package's keywords).
    ///
    /// ```
    /// use fastwrite::Setting;
    /// let said = Setting::spell_in("the cap is 1 GB (Options::max_output sets it)", |s| match s {
    ///     Setting::MaxOutput => "--max-output",
    ///     other => other.name(),
    /// });
    /// assert_eq!(said, "the cap is 1 GB (--max-output sets it)");
    /// ```
    pub fn spell_in(message: &str, words: impl Fn(Setting) -> &'static str) -> String {
        let mut text = message.to_string();
        for setting in Setting::ALL {
            if text.contains(setting.name()) {
                text = text.replace(setting.name(), words(setting));
            }
        }
        text
    }

    /// How messages spell it: its Rust path, as a program sets it.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Replace => "Overwrite::Replace",
            Setting::Skip => "Overwrite::Skip",
            Setting::MaxOutput => "Options::max_output",
            Setting::NoSpaceCheck => "Options::space_check = false",
            Setting::Password => "Options::password",
            Setting::FileName => "Options::file_name",
            Setting::StripComponents => "Selection::strip_components",
            Setting::Exclude => "Selection::exclude",
            Setting::Delete => "MirrorOptions::delete",
            Setting::HardLinks => "MirrorOptions::hard_links",
            Setting::Devices => "Options::devices",
            Setting::Atomic => "Options::atomic",
            Setting::Update => "Overwrite::Update",
            Setting::PerArchive => "ManyOptions::per_archive",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One failure: the path it concerns, its kind, and the whole chain of causes.
///
/// The path is relative to the output folder as the caller (or the archive) spelled it;
/// `Display` shows it quoted, then every cause: `'fonts/a.glif': closing '/out/fonts/a.glif':
/// Input/output error (os error 5)`.
pub struct Error {
    path: PathBuf,
    kind: ErrorKind,
    error: anyhow::Error,
    /// The message names the path itself (a run that could not start: "cannot read
    /// 'x.zip': ..."), so `Display` does not say it again.
    named: bool,
    /// Where the path's object is, in a run into a bucket (`s3://BUCKET/KEY`).
    key: Option<String>,
}

impl Error {
    pub(crate) fn new(
        path: impl Into<PathBuf>,
        kind: ErrorKind,
        error: impl Into<anyhow::Error>,
    ) -> Error {
        Error {
            path: path.into(),
            kind,
            error: error.into(),
            named: false,
            key: None,
        }
    }

    /// Why a run could not start, about `path` (the archive, the source, the output folder),
    /// whose message names it already. An [`Error`] met on the way, outermost (the site knew
    /// its kind, and its path unless it left it empty), is taken as it is; one wrapped in
    /// context gives its kind and path, and the message keeps every layer; else `path` and
    /// `kind`.
    pub(crate) fn start(path: &Path, kind: ErrorKind, error: anyhow::Error) -> Error {
        let outermost = error.chain().next().is_some_and(|e| e.is::<Error>());
        let error = if outermost {
            match error.downcast::<Error>() {
                Ok(mut inner) => {
                    inner.named = true;
                    if inner.path.as_os_str().is_empty() {
                        inner.path = path.to_path_buf();
                    }
                    return inner;
                }
                Err(error) => error,
            }
        } else {
            error
        };
        let inner = error.chain().find_map(|e| e.downcast_ref::<Error>());
        let (path, kind) = match inner {
            Some(e) if !e.path.as_os_str().is_empty() => (e.path.clone(), e.kind),
            Some(e) => (path.to_path_buf(), e.kind),
            None => (path.to_path_buf(), kind),
        };
        Error {
            path,
            kind,
            error,
            named: true,
            key: None,
        }
    }

    /// As [`Error::start`], where the message names the path: for a run's own refusals.
    pub(crate) fn named(path: impl Into<PathBuf>, kind: ErrorKind, error: anyhow::Error) -> Error {
        Error {
            named: true,
            ..Error::new(path, kind, error)
        }
    }

    /// The path the failure concerns, as the caller or the archive named it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// In a run into a bucket, the object the failure concerns: `s3://BUCKET/KEY`.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// This failure concerns the object `key` (`s3://BUCKET/KEY`).
    pub(crate) fn with_key(mut self, key: String) -> Error {
        self.key = Some(key);
        self
    }

    /// The same failure, its message led by `text`.
    #[cfg(feature = "extract")]
    pub(crate) fn context(mut self, text: String) -> Error {
        self.error = self.error.context(text);
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The operating system's error behind this failure, if there is one: for example
    /// [`io::ErrorKind::StorageFull`] for a full disk, whatever the [`ErrorKind`].
    pub fn io_error(&self) -> Option<&io::Error> {
        // (An `Error` among the causes keeps its own: it gives no `source`.)
        self.error.chain().find_map(|e| {
            e.downcast_ref::<io::Error>()
                .or_else(|| e.downcast_ref::<Error>().and_then(Error::io_error))
        })
    }

    /// The message without the path: every cause, outermost first, joined by `: `.
    pub fn message(&self) -> String {
        format!("{:#}", self.error)
    }

    /// The store's own error code this failure's message names (`NoSuchBucket`,
    /// `SignatureDoesNotMatch`, `ContainerNotFound`): see [`store_code`].
    pub fn store_code(&self) -> Option<String> {
        store_code(&self.message()).map(str::to_string)
    }

    /// Whether this is a cancellation rather than a failure of the entry.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.kind == ErrorKind::Cancelled
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.as_os_str().is_empty() || self.named {
            // A program's own I/O error, converted with `?`: no path of the batch's.
            return write!(f, "{:#}", self.error);
        }
        write!(f, "'{}': {:#}", self.path.display(), self.error)
    }
}

/// A program's own I/O error, met while producing a file's content (a serializer writing into
/// a [`FileWriter`](crate::FileWriter)), converted by `?` in work that returns this crate's
/// [`Error`]: kind [`ErrorKind::Source`], no path, the OS error kept
/// ([`io_error`](Error::io_error)). When the failed write was the file's own, the batch also
/// reports that file, with its path, as [`ErrorKind::Write`].
impl From<io::Error> for Error {
    fn from(error: io::Error) -> Error {
        Error::new(PathBuf::new(), ErrorKind::Source, error)
    }
}

/// For work that returns `io::Result`: the error keeps its [`io::ErrorKind`] (the OS's, where
/// there is one) and carries this [`Error`], path and all, inside (`get_ref` and `downcast`
/// give it back).
impl From<Error> for io::Error {
    fn from(error: Error) -> io::Error {
        let kind = error
            .io_error()
            .map_or(io::ErrorKind::Other, io::Error::kind);
        io::Error::new(kind, error)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("message", &self.message())
            .finish()
    }
}

/// The message already holds every cause (`Display` prints the whole chain), so no `source` is
/// given: a reporter that walks sources would print each cause twice.
impl std::error::Error for Error {}

/// Failures recorded by many threads at once: writers, close threads, the end of the run.
#[derive(Default)]
pub(crate) struct Failures(Mutex<Vec<Error>>);

impl Failures {
    pub(crate) fn push(&self, error: Error) {
        self.lock().push(error);
    }

    /// Everything recorded so far, leaving none.
    pub(crate) fn take(&self) -> Vec<Error> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Error>> {
        // Pushing and taking leave the list consistent whatever panics elsewhere.
        self.0.lock().unpoisoned()
    }
}

/// Gives an error its path and kind: `result.tag(&entry.name, ErrorKind::Write)?`.
pub(crate) trait Tag<T> {
    fn tag(self, path: impl Into<PathBuf>, kind: ErrorKind) -> Result<T, Error>;
}

impl<T, E: Into<anyhow::Error>> Tag<T> for Result<T, E> {
    fn tag(self, path: impl Into<PathBuf>, kind: ErrorKind) -> Result<T, Error> {
        self.map_err(|error| Error::new(path, kind, error))
    }
}

/// The store's own error code that `message` (a failure's, or a run's that could not start)
/// names: fastwrite says an object store's error in one line with the store's code in
/// parentheses (`bucket 'b' does not exist (NoSuchBucket)`), and this is the last such code, a
/// word of letters and digits with two capitals or more (`NoSuchBucket`, `AccessDenied`,
/// `ContainerNotFound`). `None` where the message names none (a file's failure, a connection
/// refused).
///
/// ```
/// let said = "cannot use 's3://b/p/': bucket 'b' does not exist (NoSuchBucket)";
/// assert_eq!(fastwrite::store_code(said), Some("NoSuchBucket"));
/// assert_eq!(fastwrite::store_code("cannot connect to http://h:1 (connection refused)"), None);
/// ```
pub fn store_code(message: &str) -> Option<&str> {
    let is_code = |word: &str| {
        let capitals = word.chars().filter(char::is_ascii_uppercase).count();
        word.len() <= 64
            && word.starts_with(|c: char| c.is_ascii_uppercase())
            && word.chars().all(|c| c.is_ascii_alphanumeric())
            && word.chars().any(|c| c.is_ascii_lowercase())
            && capitals >= 2
    };
    message
        .rmatch_indices('(')
        .filter_map(|(at, _)| {
            let rest = &message[at + 1..];
            rest.find(')').map(|end| &rest[..end])
        })
        .find(|word| is_code(word))
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn an_error_shows_its_path_and_every_cause_and_finds_the_os_error() {
        let io = io::Error::from(io::ErrorKind::StorageFull);
        let cause: anyhow::Result<()> = Err(io).context("writing '/out/a'");
        let error = Error::new("a", ErrorKind::Write, cause.unwrap_err());
        assert_eq!(error.path(), Path::new("a"));
        assert_eq!(error.kind(), ErrorKind::Write);
        assert!(error.to_string().starts_with("'a': writing '/out/a': "));
        assert_eq!(
            error.io_error().map(io::Error::kind),
            Some(io::ErrorKind::StorageFull)
        );
        let plain = Error::new("b", ErrorKind::Refused, anyhow::anyhow!("no"));
        assert!(plain.io_error().is_none());
        assert_eq!(plain.message(), "no");
    }
}
