//! Extraction: recognise the archive by its content, then hand it to that format's source.
//!
//! Each source turns its input into a validated [`Plan`](crate::plan::Plan) and feeds file
//! contents to the shared write stage ([`Sink`](crate::sink::Sink)), so every format gets the
//! same safety rules, overwrite policy, close pool and report.

mod zip;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};

use crate::options::Options;
use crate::progress::Reporter;
use crate::report::Report;

/// What the first bytes of an input say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Zip,
    Tar,
    Gzip,
    Zstd,
    Xz,
    Bzip2,
}

impl Format {
    fn describe(self) -> &'static str {
        match self {
            Format::Zip => "zip archive",
            Format::Tar => "tar archive",
            Format::Gzip => "gzip stream",
            Format::Zstd => "zstd stream",
            Format::Xz => "xz stream",
            Format::Bzip2 => "bzip2 stream",
        }
    }
}

/// Recognises a format from an input's first bytes (up to 512, a tar header's size).
pub fn detect(head: &[u8]) -> Option<Format> {
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
    } else if head.len() >= 262 && &head[257..262] == b"ustar" {
        Some(Format::Tar)
    } else {
        None
    }
}

/// Extracts `archive` into `out`. An `Err` means the run could not start (exit code 2); a
/// report with failures means some entries were not written (exit code 1).
pub fn extract(
    archive: &Path,
    out: &Path,
    opts: &Options,
    reporter: &dyn Reporter,
) -> anyhow::Result<Report> {
    if archive == Path::new("-") {
        bail!(
            "reading an archive from standard input needs a tar stream, which this version cannot extract yet"
        );
    }
    let mut file = File::open(archive)
        .with_context(|| format!("cannot open archive '{}'", archive.display()))?;
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
        Some(Format::Zip) | None => zip::extract(archive, file, out, opts, reporter),
        Some(other) => bail!(
            "'{}' is a {}; this version extracts zip archives only",
            archive.display(),
            other.describe()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_recognised_by_content() {
        assert_eq!(detect(b"PK\x03\x04rest"), Some(Format::Zip));
        assert_eq!(detect(b"PK\x05\x06"), Some(Format::Zip));
        assert_eq!(detect(b"\x1f\x8b\x08"), Some(Format::Gzip));
        assert_eq!(detect(b"\x28\xb5\x2f\xfd"), Some(Format::Zstd));
        assert_eq!(detect(b"\xfd7zXZ\x00\x00"), Some(Format::Xz));
        assert_eq!(detect(b"BZh91AY"), Some(Format::Bzip2));
        let mut tar = vec![0u8; 512];
        tar[257..263].copy_from_slice(b"ustar\0");
        assert_eq!(detect(&tar), Some(Format::Tar));
        assert_eq!(detect(b"hello world"), None);
    }
}
