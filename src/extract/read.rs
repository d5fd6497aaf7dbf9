//! Reading an archive's files without writing them: what `unzip -t`, `gzip -t` and `7z t` do
//! (every check extraction makes, nothing written), and what `tar -xO` and `unzip -p` do
//! (each file's content, in the archive's order, to one writer).
//!
//! The same inputs, selection and checks as [`extract`](crate::extract()): each zip entry's
//! CRC-32 (the content is read to its end whatever the caller read of it), a compressed tar's
//! checksums, every name's checks. Files only: folders and links hold no data to check.

use std::fmt;
use std::io::{self, Read};
use std::path::Path;
use std::time::Instant;

use anyhow::anyhow;

use super::input::{Input, open};
use super::select::Chooser;
use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::plan::Entry;
use crate::report::Report;
use crate::report::RunError;

/// What gets each file's name and content.
pub(super) type Each<'a> = dyn FnMut(&str, &mut dyn Read) -> io::Result<()> + 'a;

/// Reads every file of `archive` that the selection ([`Options::select`]) takes, in the
/// archive's order, with every check extraction makes, writing nothing to disk: `each` gets
/// the file's name and its content as it is read. A zip entry's CRC-32 is checked once its
/// content is read to the end (by `each`, or after it): content that fails is named in the
/// report's failures, after `each` had it, as `unzip -p` does.
///
/// The report counts the files and bytes read. [`RunError::Failed`] carries it when a file
/// failed or an entry would be refused by extraction; [`RunError::Start`] means it could not
/// start (as for [`extract`](crate::extract())); [`RunError::Output`] that `each` failed, and
/// reading stopped there (a closed pipe, for one). A zip on standard input is kept in a
/// temporary file and read from its central directory.
///
/// ```no_run
/// // `unzip -t`: every file read and checked, nothing kept.
/// let report = fastwrite::read_files("wheel.whl".as_ref(), &Default::default(), &mut |_, data| {
///     std::io::copy(data, &mut std::io::sink()).map(drop)
/// })?;
/// println!("{} files, no errors", report.files);
/// # Ok::<(), fastwrite::RunError>(())
/// ```
pub fn read_files(archive: &Path, opts: &Options, each: &mut Each<'_>) -> Result<Report, RunError> {
    match read_any(archive, opts, each) {
        Ok(report) => RunError::check(report),
        Err(error) => match error.downcast::<Output>() {
            Ok(Output(error)) => Err(RunError::Output(error)),
            Err(error) => Err(RunError::Start(Error::start(
                archive,
                ErrorKind::Source,
                error,
            ))),
        },
    }
}

/// [`read_files`], with its failures as they come.
fn read_any(archive: &Path, opts: &Options, each: &mut Each<'_>) -> anyhow::Result<Report> {
    let start = Instant::now();
    let chooser = Chooser::new(&opts.select)?;
    let input = open(archive)?;
    super::refuse_what_does_not_apply(&input, archive, opts, &chooser)?;
    let mut report = match input {
        Input::Zip { file } => zip_read(archive, file, opts, &chooser, each)?,
        Input::Tar { decoded, label, .. } => tar_read(decoded, &label, opts, &chooser, each)?,
        Input::ZipStream { input, label, .. } => {
            // Read from its central directory, at its end: kept in a temporary file first.
            let file = super::input::spooled(input)
                .map_err(|e| anyhow::Error::new(e).context(format!("cannot read {label}")))?;
            zip_read(
                Path::new(label.trim_matches('\'')),
                file,
                opts,
                &chooser,
                each,
            )?
        }
        Input::Single {
            decoded,
            codec,
            gzip,
            path,
        } => {
            let name =
                super::single::file_name(opts.file_name.as_deref(), &gzip, path.as_deref(), codec)?;
            let name = name.to_string_lossy().into_owned();
            let mut report = Report::default();
            let mut decoded = decoded;
            match give_unsized(&name, &mut decoded, each) {
                Ok(n) => {
                    report.files = 1;
                    report.bytes = n;
                }
                Err(error) if is_output(&error) => return Err(error),
                Err(error) => report
                    .failures
                    .push(Error::new(name, ErrorKind::Source, error)),
            }
            report
        }
    };
    report.warnings.extend(chooser.warnings());
    if !opts.cancel.is_cancelled() {
        report.failures.extend(chooser.unmatched());
    }
    report.wall = start.elapsed();
    Ok(report)
}

/// `each`'s own failure: reading stops (see [`read_files`]).
#[derive(Debug)]
struct Output(io::Error);

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write the content out: {}", self.0)
    }
}

impl std::error::Error for Output {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Whether the error is `each`'s (reading stops), not the entry's.
pub(super) fn is_output(error: &anyhow::Error) -> bool {
    error.downcast_ref::<Output>().is_some()
}

/// The I/O error `each` failed with, if that is what `error` is (a closed pipe, say).
pub fn output_error(error: &RunError) -> Option<&io::Error> {
    match error {
        RunError::Output(error) => Some(error),
        _ => None,
    }
}

/// Gives `entry`'s content to `each`, then reads what it left, so that every check on the
/// content runs; the content must be exactly the declared size. Returns the bytes read.
pub(super) fn give(entry: &Entry, data: &mut dyn Read, each: &mut Each<'_>) -> anyhow::Result<u64> {
    let n = give_unsized(
        &entry.name,
        &mut data.take(entry.size.saturating_add(1)),
        each,
    )?;
    if n > entry.size {
        return Err(anyhow!(
            "the entry holds more data than its declared size of {} bytes",
            entry.size
        ));
    }
    if n < entry.size {
        return Err(anyhow!(
            "the entry is truncated: {n} of its {} bytes",
            entry.size
        ));
    }
    Ok(n)
}

/// Gives `name`'s content to `each`, then reads what it left; returns the bytes read.
fn give_unsized(name: &str, data: &mut dyn Read, each: &mut Each<'_>) -> anyhow::Result<u64> {
    let mut counted = Counted {
        inner: data,
        read: 0,
        failed: None,
    };
    if let Err(error) = each(name, &mut counted) {
        // The content's own failure, met while `each` read it, is the entry's.
        if let Some(failed) = counted.failed.take() {
            return Err(anyhow::Error::new(failed).context("reading the entry's data"));
        }
        return Err(anyhow::Error::new(Output(error)));
    }
    if let Some(failed) = counted.failed.take() {
        return Err(anyhow::Error::new(failed).context("reading the entry's data"));
    }
    io::copy(&mut counted, &mut io::sink())
        .map_err(|e| anyhow::Error::new(e).context("reading the entry's data"))?;
    Ok(counted.read)
}

/// Counts what is read through it, and keeps the content's own error (told apart from the
/// caller's).
struct Counted<'a> {
    inner: &'a mut dyn Read,
    read: u64,
    failed: Option<io::Error>,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.read += n as u64;
                Ok(n)
            }
            Err(error) => {
                let again = io::Error::new(error.kind(), error.to_string());
                self.failed = Some(error);
                Err(again)
            }
        }
    }
}

// Each format's reader, or the reason this build has none.

#[cfg(feature = "zip")]
use super::zip::read_files as zip_read;

#[cfg(not(feature = "zip"))]
fn zip_read(
    archive: &Path,
    _: std::fs::File,
    _: &Options,
    _: &Chooser,
    _: &mut Each<'_>,
) -> anyhow::Result<Report> {
    let label = format!("'{}'", archive.display());
    Err(super::format::not_built(&label, "zip", "zip"))
}

#[cfg(feature = "tar")]
use super::tar::read_files as tar_read;

#[cfg(not(feature = "tar"))]
fn tar_read(
    _: Box<dyn Read + Send>,
    label: &str,
    _: &Options,
    _: &Chooser,
    _: &mut Each<'_>,
) -> anyhow::Result<Report> {
    Err(super::format::not_built(label, "tar", "tar"))
}
