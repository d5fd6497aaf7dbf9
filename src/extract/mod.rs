//! Extraction: recognise the archive by its content, then hand it to that format's source.
//!
//! Each source turns its input into validated entries and feeds them, with their contents, to
//! the engine (`crate::engine`) through the same door a program's [`Batch`](crate::Batch)
//! uses, so every format gets the same safety rules, overwrite policy, close stage and report.

pub(crate) mod codec;
pub(crate) mod format;
mod limits;
pub(crate) mod list;
pub(crate) mod listed;
mod select;
mod single;
#[cfg(feature = "tar")]
mod tar;
#[cfg(feature = "zip")]
mod zip;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::options::Options;
use crate::report::Report;
use codec::Codec;
use format::{Format, checksum_ok, detect, named_like_a_tar};
use select::Chooser;

/// Extracts `archive` into the folder `out` (created if missing): a zip, or a tar plain or
/// compressed (gzip, zstd, xz, bzip2), recognised by its content, or a single compressed file
/// (written as one file, see [`Options::file_name`]); `-` reads standard input, where a zip
/// is read by its local headers.
///
/// An `Err` means the run could not start (the command line's exit code 2): the archive is
/// missing, unreadable or unrecognised, or `out` cannot be made. Otherwise every entry that
/// failed is in the report's [`failures`](Report::failures), with its path and kind, and the
/// rest were written.
///
/// ```no_run
/// let report = fastwrite::extract("wheel.whl".as_ref(), "site-packages".as_ref(), &Default::default())?;
/// println!("{} files written, {} failed", report.files, report.failures.len());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn extract(archive: &Path, out: &Path, opts: &Options) -> anyhow::Result<Report> {
    let start = Instant::now();
    let mut report = extract_any(archive, out, opts)?;
    report.wall = start.elapsed();
    Ok(report)
}

fn extract_any(archive: &Path, out: &Path, opts: &Options) -> anyhow::Result<Report> {
    let chooser = Chooser::new(&opts.select)?;
    let mut report = read_any(archive, out, opts, &chooser)?;
    if !opts.cancel.is_cancelled() {
        // As GNU tar does: after everything else is written, each pattern that matched
        // nothing is named, and the run fails.
        report.failures.extend(chooser.unmatched());
    }
    Ok(report)
}

fn read_any(
    archive: &Path,
    out: &Path,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    match open(archive)? {
        Input::Zip { file } => zip_extract(archive, file, out, opts, chooser),
        Input::Tar { decoded, label } => tar_extract(decoded, &label, out, opts, chooser),
        Input::ZipStream { input, label } => zip_stream_extract(input, &label, out, opts, chooser),
        Input::Single {
            decoded,
            codec,
            gzip,
            path,
        } => {
            let name = single::file_name(opts.file_name.as_deref(), &gzip, path.as_deref(), codec)?;
            // The gzip header's mtime, else the input file's, as the tools keep it.
            let mtime = gzip.mtime.or_else(|| {
                path.and_then(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            });
            single::extract(decoded, &name, mtime, out, opts)
        }
    }
}

// Each format's source, or the reason this build has none (its cargo feature is off).

#[cfg(feature = "zip")]
use zip::extract as zip_extract;
#[cfg(feature = "zip")]
use zip::stream::extract as zip_stream_extract;

#[cfg(not(feature = "zip"))]
fn zip_extract(
    archive: &Path,
    _: File,
    _: &Path,
    _: &Options,
    _: &Chooser,
) -> anyhow::Result<Report> {
    Err(not_built(
        &format!("'{}'", archive.display()),
        "a zip",
        "zip",
    ))
}

#[cfg(not(feature = "zip"))]
fn zip_stream_extract(
    _: Box<dyn BufRead + Send>,
    label: &str,
    _: &Path,
    _: &Options,
    _: &Chooser,
) -> anyhow::Result<Report> {
    Err(not_built(label, "a zip", "zip"))
}

#[cfg(feature = "tar")]
use tar::extract as tar_extract;

#[cfg(not(feature = "tar"))]
fn tar_extract(
    _: Box<dyn Read + Send>,
    label: &str,
    _: &Path,
    _: &Options,
    _: &Chooser,
) -> anyhow::Result<Report> {
    Err(not_built(label, "a tar", "tar"))
}

/// Why an input this build recognises cannot be read: the feature that reads it is off.
#[cfg(not(all(feature = "zip", feature = "tar")))]
pub(crate) fn not_built(label: &str, what: &str, feature: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{label} is {what} archive, and this build of fastwrite does not read {what} archives (cargo feature `{feature}`)"
    )
}

/// An archive opened and recognised.
enum Input {
    /// A zip, read from its end (so only from a file).
    Zip { file: File },
    /// A tar, decompressed if it was compressed, read as a stream; `label` names it in
    /// messages.
    Tar {
        decoded: Box<dyn Read + Send>,
        label: String,
    },
    /// A zip from a pipe or standard input, read by its local headers.
    ZipStream {
        input: Box<dyn BufRead + Send>,
        label: String,
    },
    /// A single compressed file, not an archive (`notes.txt.gz`).
    Single {
        decoded: Box<dyn Read + Send>,
        codec: Codec,
        gzip: codec::GzipHeader,
        /// The input's path (`None`: standard input).
        path: Option<PathBuf>,
    },
}

/// Opens `archive` (`-`: standard input) and tells what it is by its content.
fn open(archive: &Path) -> anyhow::Result<Input> {
    if archive == Path::new("-") {
        return open_stream(std::io::stdin(), "standard input".to_string(), None);
    }
    let mut file = File::open(archive)
        .with_context(|| format!("cannot open archive '{}'", archive.display()))?;
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    if !regular && !archive.is_dir() {
        // A pipe (`<(curl ...)`, a FIFO) cannot be rewound after its format is told, nor read
        // from its end: it is read as a stream, like standard input.
        let label = format!("'{}'", archive.display());
        return open_stream(file, label, Some(archive));
    }
    let mut head = Vec::with_capacity(512);
    (&mut file)
        .take(512)
        .read_to_end(&mut head)
        .with_context(|| format!("cannot read archive '{}'", archive.display()))?;
    if head.is_empty() {
        bail!("'{}' is empty, not an archive", archive.display());
    }
    match detect(&head) {
        // Anything unrecognised may still be a zip with a prefix (a self-extracting archive):
        // the zip reader finds the central directory from the end, or says it is not a zip.
        Some(Format::Zip) | None => Ok(Input::Zip { file }),
        Some(_) => {
            std::io::Seek::rewind(&mut file)
                .with_context(|| format!("cannot read archive '{}'", archive.display()))?;
            open_stream(file, archive.display().to_string(), Some(archive))
        }
    }
}

/// A stream (plain or compressed) read once, from its start: a tar, or a single compressed
/// file. `label` names it in messages; `path` is the input's, if it has one.
fn open_stream(
    input: impl Read + Send + 'static,
    label: String,
    path: Option<&Path>,
) -> anyhow::Result<Input> {
    let mut input = BufReader::with_capacity(INPUT_BUFFER, input);
    let head = input
        .fill_buf()
        .with_context(|| format!("cannot read {label}"))?;
    let codec = match detect(head) {
        _ if head.is_empty() => bail!("{label} is empty, not an archive"),
        Some(Format::Zip) => {
            return Ok(Input::ZipStream {
                input: Box::new(input),
                label,
            });
        }
        Some(Format::Tar) => {
            return Ok(Input::Tar {
                decoded: Box::new(input),
                label,
            });
        }
        Some(Format::Compressed(codec)) => codec,
        None => bail!("{label} is not a zip or a tar stream (plain, gzip, zstd, xz or bzip2)"),
    };
    let gzip = codec::gzip_header(head);
    let mut decoded = codec
        .decoder(Box::new(input))
        .with_context(|| format!("cannot read {label}"))?;
    if path.is_some_and(named_like_a_tar) {
        // The name says tar: read as one, so that damage is reported as a damaged archive.
        return Ok(Input::Tar { decoded, label });
    }
    // Otherwise the first block of what is inside tells a tar (its header's checksum) from a
    // single file.
    let mut start = Vec::with_capacity(512);
    (&mut decoded)
        .take(512)
        .read_to_end(&mut start)
        .with_context(|| format!("cannot decompress {label}"))?;
    let tar = match start.get(..512) {
        // A block of zeros: an empty tar from a pipe, a file of zeros by its name.
        Some(block) if block.iter().all(|&b| b == 0) => path.is_none(),
        Some(block) => checksum_ok(block),
        None => false,
    };
    let decoded: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(start).chain(decoded));
    Ok(if tar {
        Input::Tar { decoded, label }
    } else {
        Input::Single {
            decoded,
            codec,
            gzip,
            path: path.map(Path::to_path_buf),
        }
    })
}

/// A tar reader over `input`, decoded by `codec` if there is one (for the fuzz targets).
#[cfg(fuzzing)]
pub(crate) fn tar_reader<'a>(
    codec: Option<Codec>,
    input: Box<dyn BufRead + Send + 'a>,
) -> anyhow::Result<tar::Reader<Box<dyn Read + Send + 'a>>> {
    let decoded: Box<dyn Read + Send + 'a> = match codec {
        Some(codec) => codec.decoder(input)?,
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

/// Reads of a streamed archive are this large: one system call per MiB.
const INPUT_BUFFER: usize = 1 << 20;
