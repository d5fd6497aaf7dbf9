//! Reading an archive's files without writing them: what `unzip -t`, `gzip -t` and `7z t` do
//! (every check extraction makes, nothing written), and what `tar -xO` and `unzip -p` do
//! (each file's content, in the archive's order, to one writer).
//!
//! The same inputs, selection and checks as [`extract`](crate::extract()): each zip entry's
//! CRC-32 (the content is read to its end whatever the caller read of it), a compressed tar's
//! checksums, every name's checks. Files only: folders and links hold no data to check.

use std::io;
use std::path::Path;
use std::time::Instant;

use super::give::{Each, Output, give_unsized, is_output};
use super::input::{Input, open};
use super::select::Chooser;
use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::report::Report;
use crate::report::RunError;

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
        #[cfg(all(feature = "s3", feature = "zip"))]
        Input::ZipArriving(arriving) => {
            zip_read(archive, arriving.finish()?, opts, &chooser, each)?
        }
        Input::Tar { decoded, label, .. } => tar_read(decoded, &label, opts, &chooser, each)?,
        #[cfg(feature = "image")]
        Input::Image(reference) => super::image::read_files(&reference, opts, &chooser, each)?,
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

/// The I/O error `each` failed with, if that is what `error` is (a closed pipe, say).
pub fn output_error(error: &RunError) -> Option<&io::Error> {
    match error {
        RunError::Output(error) => Some(error),
        _ => None,
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
    _: Box<dyn io::Read + Send>,
    label: &str,
    _: &Options,
    _: &Chooser,
    _: &mut Each<'_>,
) -> anyhow::Result<Report> {
    Err(super::format::not_built(label, "tar", "tar"))
}
