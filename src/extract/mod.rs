//! Extraction: recognise the archive by its content, then hand it to that format's source.
//!
//! Each source turns its input into validated entries and feeds them, with their contents, to
//! the engine (`crate::engine`) through the same door a program's [`Batch`](crate::Batch)
//! uses, so every format gets the same safety rules, overwrite policy, close stage and report.

mod limits;
mod tar;
mod zip;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::options::Options;
use crate::report::Report;

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
/// compressed (gzip, zstd, xz, bzip2), recognised by its content; `-` reads a tar stream from
/// standard input.
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
    if archive == Path::new("-") {
        return extract_stream(std::io::stdin(), "standard input", out, opts);
    }

    let mut file = File::open(archive)
        .with_context(|| format!("cannot open archive '{}'", archive.display()))?;
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    if !regular && !archive.is_dir() {
        // A pipe (`<(curl ...)`, a FIFO) cannot be rewound after its format is told, nor read
        // from its end: it is read as a stream, like standard input.
        let label = format!("'{}'", archive.display());
        return extract_stream(file, &label, out, opts);
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
        Some(Format::Zip) | None => zip::extract(archive, file, out, opts),
        Some(format) => {
            std::io::Seek::rewind(&mut file)
                .with_context(|| format!("cannot read archive '{}'", archive.display()))?;
            let input = BufReader::with_capacity(INPUT_BUFFER, file);
            let label = archive.display().to_string();
            tar::extract(Box::new(input), format, &label, out, opts)
        }
    }
}

/// Extracts a tar stream (plain or compressed) that can be read only once, from its start:
/// standard input, a pipe. `label` names it in messages.
fn extract_stream(
    input: impl Read + Send + 'static,
    label: &str,
    out: &Path,
    opts: &Options,
) -> anyhow::Result<Report> {
    let mut input = BufReader::with_capacity(INPUT_BUFFER, input);
    let head = input
        .fill_buf()
        .with_context(|| format!("cannot read {label}"))?;
    match detect(head) {
        _ if head.is_empty() => bail!("{label} is empty, not an archive"),
        Some(Format::Zip) => bail!(
            "{label} holds a zip archive, which must be read from its end: save it to a file first"
        ),
        Some(format) => tar::extract(Box::new(input), format, label, out, opts),
        None => bail!("{label} is not a tar stream (plain, gzip, zstd, xz or bzip2)"),
    }
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
    zip::build_plan(archive, bytes)
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
