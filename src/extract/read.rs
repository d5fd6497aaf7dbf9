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

use super::give::{Each, Output};
use super::input::open;
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
    let input = open(archive, opts)?;
    input.refuse(archive, opts, &chooser)?;
    let mut report = input.read(archive, opts, &chooser, each)?;
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
