//! Extraction: recognise the archive by its content, then hand it to that format's source.
//!
//! Each source turns its input into validated entries and feeds them, with their contents, to
//! the engine (`crate::engine`), the door a program's [`Batch`](crate::Batch) uses too, so
//! every format gets the same safety rules, overwrite policy, close stage and report.

mod arriving;
pub(crate) mod codec;
mod end_records;
pub(crate) mod format;
mod give;
#[cfg(feature = "image")]
mod image;
#[cfg(feature = "image")]
pub(crate) use image::Reference as ImageReference;
mod input;
mod limits;
pub(crate) mod list;
pub(crate) mod listed;
pub(crate) mod read;
mod remote;
mod select;
mod single;
mod source;
#[cfg(feature = "tar")]
mod tar;
#[cfg(feature = "zip")]
mod zip;

use std::path::Path;
use std::time::Instant;

use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::place::Place;
use crate::report::Report;
use crate::report::RunError;
#[cfg(fuzzing)]
use codec::Codec;
use input::{Input, open};
use select::Chooser;

/// Extracts `archive` into the folder `out` (created if missing): a zip, or a tar plain or
/// compressed (gzip, zstd, xz, bzip2), recognised by its content, or a single compressed file
/// (written as one file, see [`Options::file_name`]); `-` reads standard input, where a zip
/// is read by its local headers. With cargo feature `s3`, `archive` may be `s3://BUCKET/KEY`
/// and `out` `s3://BUCKET/PREFIX`; with `http`, `archive` may be an `https://` URL: a remote
/// zip is fetched by ranged requests and read as from a file, anything else is streamed
/// (docs/object-storage.md).
///
/// `Ok` when every entry was written. [`RunError::Start`] when the run could not start (the
/// command line's exit code 2): the archive is missing, unreadable or unrecognised, an option
/// does not apply, or `out` cannot be made; nothing was written. [`RunError::Failed`] when
/// some entries failed: each is in its report's [`failures`](Report::failures), with its path
/// and kind, and the rest were written.
///
/// ```no_run
/// match fastwrite::extract("wheel.whl".as_ref(), "site-packages".as_ref(), &Default::default()) {
///     Ok(report) => println!("{} files written", report.files),
///     Err(fastwrite::RunError::Failed(report)) => {
///         println!("{} files written, {} failed", report.files, report.failures.len())
///     }
///     Err(error) => return Err(error.into()),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn extract(archive: &Path, out: &Path, opts: &Options) -> Result<Report, RunError> {
    extract_to(archive, &output(out, archive)?, opts)
}

/// [`extract`] into a place already decided (a run of many decides its output once).
pub(crate) fn extract_to(archive: &Path, out: &Place, opts: &Options) -> Result<Report, RunError> {
    run(archive, || open(archive, opts), out, opts)
}

/// Where an extraction writes, decided once, as the library is handed it; a refusal is the
/// run's start failing (`archive` names it).
fn output(out: &Path, archive: &Path) -> Result<Place, RunError> {
    Place::output(out).map_err(|e| RunError::Start(Error::start(archive, ErrorKind::Source, e)))
}

/// A whole extraction of what `open` opens (named `archive`) into `out`, staged where it can be.
fn run(
    archive: &Path,
    open: impl FnOnce() -> anyhow::Result<Input>,
    out: &Place,
    opts: &Options,
) -> Result<Report, RunError> {
    let start = Instant::now();
    let mut report =
        crate::engine::staged(out, opts, |dest| extract_any(archive, open, dest, opts))
            .map_err(|e| RunError::Start(Error::start(archive, ErrorKind::Source, e)))?;
    report.wall = start.elapsed();
    RunError::check(report)
}

/// Extracts the archive `reader` yields (a socket, a download, a Python file object) into the
/// folder `out`, as [`extract`] extracts standard input: read once, from its start, without
/// seeking; a tar plain or compressed, a single compressed file, or a zip read by its local
/// headers (as `bsdtar` and `unzip -` read one from a pipe). `label` names the stream in
/// messages (`cannot read LABEL: ...`), and a single compressed file is named by its gzip
/// header or [`Options::file_name`]. Returns as [`extract`] does.
///
/// ```
/// # #[cfg(feature = "tar")] {
/// let out = tempfile::tempdir()?;
/// let mut tar = Vec::new();
/// # let mut builder = tar::Builder::new(&mut tar); // a one-file tar, for the doctest
/// # let mut header = tar::Header::new_gnu();
/// # header.set_size(3);
/// # header.set_mode(0o644);
/// # builder.append_data(&mut header, "a.txt", &b"hi\n"[..])?;
/// # builder.finish()?;
/// # drop(builder);
/// let report = fastwrite::extract_reader(
///     Box::new(std::io::Cursor::new(tar)), // any `Read + Send`: a socket, a child's stdout
///     "the download",
///     out.path(),
///     &Default::default(),
/// )?;
/// assert_eq!(report.files, 1);
/// assert_eq!(std::fs::read(out.path().join("a.txt"))?, b"hi\n");
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn extract_reader(
    reader: Box<dyn std::io::Read + Send>,
    label: &str,
    out: &Path,
    opts: &Options,
) -> Result<Report, RunError> {
    let named = Path::new(label);
    let out = output(out, named)?;
    run(named, || input::open_reader(reader, label), &out, opts)
}

/// `archive` names the input in messages; `open` opens it.
fn extract_any(
    archive: &Path,
    open: impl FnOnce() -> anyhow::Result<Input>,
    out: &Place,
    opts: &Options,
) -> anyhow::Result<Report> {
    let chooser = Chooser::new(&opts.select)?;
    // (A mirror's DST is not checked: a mirror with nothing to change writes nothing.)
    out.check_writable()?;
    let mut report = read_any(archive, open()?, out, opts, &chooser)?;
    report.warnings.extend(chooser.warnings());
    if !opts.cancel.is_cancelled() {
        // As GNU tar does: after everything else is written, each pattern that matched
        // nothing is named, and the run fails.
        report.failures.extend(chooser.unmatched());
    }
    Ok(report)
}

fn read_any(
    archive: &Path,
    input: Input,
    out: &Place,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    input.refuse(archive, opts, chooser)?;
    input.extract(archive, out, opts, chooser)
}

/// A tar reader over `input`, decoded by `codec` if there is one (for the fuzz targets).
#[cfg(fuzzing)]
pub(crate) fn tar_reader<'a>(
    codec: Option<Codec>,
    input: Box<dyn std::io::BufRead + Send + 'a>,
) -> anyhow::Result<tar::Reader<Box<dyn std::io::Read + Send + 'a>>> {
    let decoded: Box<dyn std::io::Read + Send + 'a> = match codec {
        Some(codec) => codec.decoder(input, &codec::Verified::default())?,
        None => input,
    };
    Ok(tar::Reader::new(decoded))
}

/// A zip's plan, with its structure checks (for the fuzz targets).
#[cfg(fuzzing)]
pub(crate) fn zip_plan(
    archive: &mut ::zip::ZipArchive<std::io::Cursor<&[u8]>>,
    bytes: &[u8],
) -> anyhow::Result<crate::plan::Plan> {
    zip::build_plan(
        archive,
        bytes,
        &Chooser::everything(),
        &mut zip::Password::none(),
    )
}

/// A build without a format still recognises it, and says which cargo feature reads it
/// (`cargo test --no-default-features --features tar --lib` runs these).
#[cfg(all(test, not(feature = "zip"), not(feature = "gzip")))]
mod without_a_format {
    use super::*;

    fn extract_bytes(name: &str, bytes: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join(name);
        std::fs::write(&archive, bytes).unwrap();
        let out = dir.path().join("out");
        let error = extract(&archive, &out, &Options::default()).unwrap_err();
        format!("{error:#}")
    }

    #[test]
    fn a_zip_names_the_feature_that_reads_it() {
        // An empty zip: its end-of-central-directory record alone.
        let mut zip = b"PK\x05\x06".to_vec();
        zip.resize(22, 0);
        let message = extract_bytes("empty.zip", &zip);
        assert!(message.contains("cargo feature `zip`"), "{message}");
    }

    #[test]
    fn a_gzip_names_the_feature_that_decodes_it() {
        let message = extract_bytes("a.tar.gz", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03");
        assert!(message.contains("cargo feature `gzip`"), "{message}");
    }
}

/// A build that reads zips only names every feature a compressed tar needs at once (issue 35,
/// item 13: it named `gzip`, then, rebuilt with it, `tar`). `cargo test --no-default-features
/// --features zip --lib` runs these.
#[cfg(all(test, feature = "zip", not(feature = "tar"), not(feature = "gzip")))]
mod with_zip_only {
    use super::*;

    fn start_error(name: &str, bytes: &[u8]) -> Error {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join(name);
        std::fs::write(&archive, bytes).unwrap();
        match extract(&archive, &dir.path().join("out"), &Options::default()) {
            Err(RunError::Start(error)) => error,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_compressed_tar_names_both_features() {
        let gzip = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03";
        let error = start_error("a.tar.gz", gzip);
        assert_eq!(error.kind(), ErrorKind::Unsupported);
        let message = error.to_string();
        assert!(
            message.contains("cargo features `gzip` and `tar`"),
            "{message}"
        );
        // Named otherwise, what it holds is unknown: both said, the second as a condition.
        let message = start_error("download", gzip).to_string();
        assert!(
            message.contains("`gzip`; and `tar`, if it holds"),
            "{message}"
        );
    }
}
