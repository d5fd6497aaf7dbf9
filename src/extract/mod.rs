//! Extraction: recognise the archive by its content, then hand it to that format's source.
//!
//! Each source turns its input into validated entries and feeds them, with their contents, to
//! the engine (`crate::engine`) through the same door a program's [`Batch`](crate::Batch)
//! uses, so every format gets the same safety rules, overwrite policy, close stage and report.

mod limits;
pub(crate) mod list;
mod select;
mod single;
mod tar;
mod zip;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::options::Options;
use crate::report::Report;
use select::Chooser;

/// What the first bytes of an input say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Zip,
    Tar,
    Gzip,
    Zstd,
    Xz,
    Bzip2,
}

/// Recognises a format from an input's first bytes (up to 512, a tar header's size).
pub(crate) fn detect(head: &[u8]) -> Option<Format> {
    let starts = |magic: &[u8]| head.starts_with(magic);
    if starts(b"PK\x03\x04") || starts(b"PK\x05\x06") || starts(b"PK\x07\x08") {
        Some(Format::Zip)
    } else if starts(b"\x1f\x8b") {
        Some(Format::Gzip)
    } else if starts(b"\x28\xb5\x2f\xfd") {
        Some(Format::Zstd)
    } else if starts(b"\xfd7zXZ\x00") {
        Some(Format::Xz)
    } else if starts(b"BZh") {
        Some(Format::Bzip2)
    } else if is_tar_header(head) {
        Some(Format::Tar)
    } else {
        None
    }
}

/// A tar header is recognised by its checksum, which old v7 archives (with no `ustar` magic)
/// have too.
fn is_tar_header(head: &[u8]) -> bool {
    let Some(header) = head.get(..512) else {
        return false;
    };
    // An archive with no entries is just its end-of-archive blocks of zeros.
    header.iter().all(|&b| b == 0) || tar::checksum_ok(header)
}

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
        Input::Zip { file } => zip::extract(archive, file, out, opts, chooser),
        Input::Tar { decoded, label } => tar::extract(decoded, &label, out, opts, chooser),
        Input::ZipStream { input, label } => {
            zip::stream::extract(input, &label, out, opts, chooser)
        }
        Input::Single {
            decoded,
            format,
            gzip,
            path,
        } => {
            let name =
                single::file_name(opts.file_name.as_deref(), &gzip, path.as_deref(), format)?;
            // The gzip header's mtime, else the input file's, as the tools keep it.
            let mtime = gzip.mtime.or_else(|| {
                path.and_then(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            });
            single::extract(decoded, &name, mtime, out, opts)
        }
    }
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
        format: Format,
        gzip: single::GzipHeader,
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
    let format = match detect(head) {
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
        Some(format) => format,
        None => bail!("{label} is not a zip or a tar stream (plain, gzip, zstd, xz or bzip2)"),
    };
    let gzip = single::gzip_header(head);
    let mut decoded = tar::decoder(format, Box::new(input));
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
        Some(block) => tar::checksum_ok(block),
        None => false,
    };
    let decoded: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(start).chain(decoded));
    Ok(if tar {
        Input::Tar { decoded, label }
    } else {
        Input::Single {
            decoded,
            format,
            gzip,
            path: path.map(Path::to_path_buf),
        }
    })
}

/// Whether a name says "compressed tar" (`.tar.gz`, `.tgz`, ...): then a stream that starts
/// with a block of zeros is an empty tar, not a file of zeros.
fn named_like_a_tar(path: &Path) -> bool {
    let name = path.to_string_lossy().to_ascii_lowercase();
    name.contains(".tar.")
        || [".tgz", ".taz", ".tbz", ".tbz2", ".txz", ".tzst"]
            .iter()
            .any(|s| name.ends_with(s))
}

/// A tar reader over `input` decoded as `format` (for the fuzz targets).
#[cfg(fuzzing)]
pub(crate) fn tar_reader<'a>(
    format: Format,
    input: Box<dyn BufRead + Send + 'a>,
) -> tar::Reader<Box<dyn Read + Send + 'a>> {
    tar::Reader::new(tar::decoder(format, input))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_header(magic: &[u8; 6]) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..5].copy_from_slice(b"a.txt");
        h[100..107].copy_from_slice(b"0000644");
        h[257..263].copy_from_slice(magic);
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        h
    }

    #[test]
    fn formats_are_recognised_by_content() {
        assert_eq!(detect(b"PK\x03\x04rest"), Some(Format::Zip));
        assert_eq!(detect(b"PK\x05\x06"), Some(Format::Zip));
        assert_eq!(detect(b"\x1f\x8b\x08"), Some(Format::Gzip));
        assert_eq!(detect(b"\x28\xb5\x2f\xfd"), Some(Format::Zstd));
        assert_eq!(detect(b"\xfd7zXZ\x00\x00"), Some(Format::Xz));
        assert_eq!(detect(b"BZh91AY"), Some(Format::Bzip2));
        assert_eq!(detect(&tar_header(b"ustar\0")), Some(Format::Tar));
        // Old v7 headers have no magic; the checksum gives them away.
        assert_eq!(detect(&tar_header(b"\0\0\0\0\0\0")), Some(Format::Tar));
        let mut bad = tar_header(b"ustar\0");
        bad[0] ^= 1;
        assert_eq!(detect(&bad), None, "a wrong checksum is not a tar header");
        // Old writers pad the checksum with leading spaces.
        let mut padded = tar_header(b"\0\0\0\0\0\0");
        let sum = std::str::from_utf8(&padded[148..154]).unwrap().to_string();
        let digits = sum.trim_start_matches('0').to_string();
        let field = format!("{digits:>6}\0 ");
        padded[148..156].copy_from_slice(field.as_bytes());
        assert_eq!(detect(&padded), Some(Format::Tar), "{field:?}");
        assert_eq!(detect(b"hello world"), None);
        assert_eq!(
            detect(&[0u8; 1024]),
            Some(Format::Tar),
            "an empty tar is its end blocks"
        );
    }
}
