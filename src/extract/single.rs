//! A single compressed file (`notes.txt.gz`, `dump.sql.zst`, `image.raw.xz`, `data.bz2`): what
//! `gzip -d`, `zstd -d`, `xz -d` and `bzip2 -d` do, written into OUT as one file through the
//! library's own door (a [`Batch`](crate::Batch)), streamed, never held whole.
//!
//! Its name: `--name`; else the one in the gzip header (as `gzip -dN`); else the input's name
//! without its suffix. Its mtime: the gzip header's; else the input file's (as the tools keep
//! it); from standard input with neither, the time of writing.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail};

use super::Format;
use crate::batch::BatchBuilder;
use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::report::Report;
use crate::{Batch, FileMeta};

/// What the start of a gzip stream says of the file inside: its name and mtime, when given.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct GzipHeader {
    pub name: Option<Vec<u8>>,
    pub mtime: Option<SystemTime>,
}

/// Reads a gzip member's header (RFC 1952) from the stream's first bytes: `FNAME` and `MTIME`
/// (0 means none). Anything it cannot read is simply not given.
pub(super) fn gzip_header(head: &[u8]) -> GzipHeader {
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    let mut header = GzipHeader::default();
    if head.len() < 10 || head[..3] != [0x1f, 0x8b, 8] {
        return header;
    }
    let mtime = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if mtime != 0 {
        header.mtime = Some(UNIX_EPOCH + Duration::from_secs(u64::from(mtime)));
    }
    let flags = head[3];
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let Some(len) = head.get(10..12) else {
            return header;
        };
        at += 2 + usize::from(u16::from_le_bytes([len[0], len[1]]));
    }
    if flags & FNAME != 0
        && let Some(rest) = head.get(at..)
        && let Some(end) = rest.iter().position(|&b| b == 0)
    {
        header.name = Some(rest[..end].to_vec());
    }
    header
}

/// The name to write a single compressed file under: `--name`, the gzip header's (its last
/// component), or the input's name without its compressor's suffix.
pub(super) fn file_name(
    given: Option<&str>,
    gzip: &GzipHeader,
    input: Option<&Path>,
    format: Format,
) -> anyhow::Result<PathBuf> {
    if let Some(name) = given {
        return Ok(PathBuf::from(name));
    }
    if let Some(stored) = &gzip.name {
        // Latin-1 in the format's words; what a writer puts there is the file's own name,
        // perhaps with a path, of which only the last part is used (as gzip -N does).
        let last = stored
            .rsplit(|&b| b == b'/' || b == b'\\')
            .next()
            .unwrap_or_default();
        if !last.is_empty() && last != b"." && last != b".." {
            return crate::plan::path_from_bytes(last)
                .map_err(|r| anyhow!("the name in the gzip header: {r}"));
        }
    }
    let Some(input) = input else {
        bail!(
            "standard input holds a single compressed file with no name inside: give it one with --name"
        );
    };
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suffixes: &[&str] = match format {
        Format::Gzip => &[".gz", ".z", ".gzip"],
        Format::Zstd => &[".zst", ".zstd"],
        Format::Xz => &[".xz"],
        Format::Bzip2 => &[".bz2", ".bz"],
        Format::Zip | Format::Tar => &[],
    };
    let lower = name.to_ascii_lowercase();
    match suffixes
        .iter()
        .find(|s| lower.ends_with(*s) && lower.len() > s.len())
    {
        Some(suffix) => Ok(PathBuf::from(&name[..name.len() - suffix.len()])),
        None => bail!(
            "'{name}' holds a single compressed file, and its name has no suffix to take off ({}): give it a name with --name",
            suffixes.join(", ")
        ),
    }
}

/// Writes the decoded stream into `out` as the file `name`, with `mtime`.
pub(super) fn extract(
    mut decoded: Box<dyn Read + Send + '_>,
    name: &Path,
    mtime: Option<SystemTime>,
    out: &Path,
    opts: &Options,
) -> anyhow::Result<Report> {
    let batch = BatchBuilder::with_options(out, opts.clone())
        .build()
        .map_err(|e| anyhow!("cannot use output folder '{}': {e}", out.display()))?;
    let mut meta = FileMeta::new();
    if let Some(mtime) = mtime {
        meta = meta.mtime(mtime);
    }
    // Our own failure for the file, where dropping its writer would only say "unfinished".
    let failure = write(&batch, &mut *decoded, name, meta, opts.max_output).err();
    let mut report = match batch.finish() {
        Ok(report) => report,
        Err(failed) => failed.into_report(),
    };
    if let Some(failure) = failure {
        report
            .failures
            .retain(|f| !(f.kind() == ErrorKind::Unfinished && f.path() == failure.path()));
        report.failures.push(failure);
    }
    Ok(report)
}

fn write(
    batch: &Batch,
    decoded: &mut dyn Read,
    name: &Path,
    meta: FileMeta,
    max_output: Option<u64>,
) -> Result<(), Error> {
    write_streamed(batch, name, meta, decoded, &mut 0, max_output)
}

/// Writes `data`, whose size is not known up front, as the file `path` of `batch`, counting
/// its bytes into `total` against `max_output`. On a read error or past the cap, nothing of
/// the file is kept (the failure says why; the writer's "unfinished" is the caller's to drop).
pub(super) fn write_streamed(
    batch: &Batch,
    path: &Path,
    meta: FileMeta,
    data: &mut dyn Read,
    total: &mut u64,
    max_output: Option<u64>,
) -> Result<(), Error> {
    use std::io::Write;
    let mut file = batch.create_with(path, meta)?;
    let mut buf = vec![0u8; crate::engine::CHUNK];
    loop {
        let n = match data.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                drop(file);
                let error = anyhow::Error::new(e)
                    .context("the compressed data is corrupt or truncated; nothing of it was kept");
                return Err(Error::new(path, ErrorKind::Source, error));
            }
        };
        *total += n as u64;
        if let Some(max) = max_output.filter(|&max| *total > max) {
            drop(file);
            let error = anyhow!(
                "refused: it would take the output past the cap of {} (--max-output); nothing of it was kept",
                crate::report::human_bytes(max)
            );
            return Err(Error::new(path, ErrorKind::Limit, error));
        }
        if file.write_all(&buf[..n]).is_err() {
            // The writer keeps what failed, with its path: `finish` says it.
            break;
        }
    }
    file.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gzip_header_gives_its_name_and_mtime() {
        // gzip -N's header for "notes.txt", mtime 1600000000, with an FEXTRA field first.
        let mut head = vec![0x1f, 0x8b, 8, 4 | 8];
        head.extend_from_slice(&1_600_000_000u32.to_le_bytes());
        head.extend_from_slice(&[0, 3, 2, 0, b'x', b'y']);
        head.extend_from_slice(b"notes.txt\0rest");
        let h = gzip_header(&head);
        assert_eq!(h.name.as_deref(), Some(&b"notes.txt"[..]));
        assert_eq!(
            h.mtime,
            Some(UNIX_EPOCH + Duration::from_secs(1_600_000_000))
        );
        assert_eq!(
            gzip_header(&[0x1f, 0x8b, 8, 8, 0, 0, 0, 0, 0, 3]),
            GzipHeader::default()
        );
        assert_eq!(gzip_header(b"not gzip at all"), GzipHeader::default());
    }

    #[test]
    fn names_come_from_the_flag_the_header_or_the_input() {
        let none = GzipHeader::default();
        let named = |n: &[u8]| GzipHeader {
            name: Some(n.to_vec()),
            mtime: None,
        };
        let input = Some(Path::new("dir/notes.txt.gz"));
        assert_eq!(
            file_name(None, &none, input, Format::Gzip).unwrap(),
            Path::new("notes.txt")
        );
        assert_eq!(
            file_name(Some("x"), &none, input, Format::Gzip).unwrap(),
            Path::new("x")
        );
        assert_eq!(
            file_name(None, &named(b"/etc/../evil/a.sql"), input, Format::Gzip).unwrap(),
            Path::new("a.sql")
        );
        assert_eq!(
            file_name(None, &named(b".."), input, Format::Gzip).unwrap(),
            Path::new("notes.txt")
        );
        let zst = Some(Path::new("dump.SQL.ZST"));
        assert_eq!(
            file_name(None, &none, zst, Format::Zstd).unwrap(),
            Path::new("dump.SQL")
        );
        let err = file_name(None, &none, Some(Path::new("data")), Format::Xz).unwrap_err();
        assert!(err.to_string().contains("--name"), "{err}");
        let err = file_name(None, &none, None, Format::Bzip2).unwrap_err();
        assert!(err.to_string().contains("--name"), "{err}");
    }
}
