//! A single compressed file (`notes.txt.gz`, `dump.sql.zst`, `image.raw.xz`, `data.bz2`): what
//! `gzip -d`, `zstd -d`, `xz -d` and `bzip2 -d` do, written into OUT as one file through the
//! engine's door for streamed files, never held whole.
//!
//! Its name: `--name`; else the one in the gzip header (as `gzip -dN`); else the input's name
//! without its suffix. Its mtime: the gzip header's; else the input file's (as the tools keep
//! it); from standard input with neither, the time of writing. Its mode: the input file's, as
//! the tools keep it (from standard input, the default).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{anyhow, bail};

use super::codec::{Codec, GzipHeader};
use super::give::{Each, give_unsized, is_output};
use super::listed::{Listed, ListedKind};
use super::select::Chooser;
use super::source::Source;
use crate::engine::{self, Writer};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::Options;
use crate::place::Place;
use crate::plan::{Entry, EntryKind};
use crate::report::Report;

/// A single compressed file, opened: `decoded` yields what it holds, `gzip` its gzip header's
/// name and mtime (if any), `path` the input's path (`None`: a stream).
pub(super) struct Single {
    pub decoded: Box<dyn Read + Send>,
    pub codec: Codec,
    pub gzip: GzipHeader,
    pub path: Option<PathBuf>,
}

impl Source for Single {
    fn kind(&self) -> &'static str {
        "a single compressed file"
    }

    fn refuse(&self, archive: &Path, opts: &Options, chooser: &Chooser) -> anyhow::Result<()> {
        refuse_choosing(archive, chooser)?;
        super::source::refuse_image_options(self.kind(), archive, opts)
    }

    fn extract(
        self: Box<Self>,
        _: &Path,
        out: &Place,
        opts: &Options,
        _: &Chooser,
    ) -> anyhow::Result<Report> {
        let Single {
            decoded,
            codec,
            gzip,
            path,
        } = *self;
        let name = file_name(opts.file_name.as_deref(), &gzip, path.as_deref(), codec)?;
        // The gzip header's mtime, else the input file's; the input file's mode (`gzip -d`,
        // `zstd -d` and `xz -d` keep both: a `chmod 600` secret stays 0600).
        let meta = path.as_deref().and_then(|p| std::fs::metadata(p).ok());
        let mtime = gzip
            .mtime
            .or_else(|| meta.as_ref().and_then(|m| m.modified().ok()));
        let mode = meta.as_ref().map(crate::platform::mode_of);
        extract(decoded, &name, mtime, mode, out, opts)
    }

    fn list(
        self: Box<Self>,
        archive: &Path,
        _: &crate::options::Options,
        chooser: &Chooser,
        each: &mut dyn FnMut(&Listed),
        listing: &mut Report,
    ) -> anyhow::Result<()> {
        refuse_choosing(archive, chooser)?;
        let Single {
            decoded,
            codec,
            gzip,
            path,
        } = *self;
        if let Err(error) = listed(decoded, codec, &gzip, archive, path.as_deref(), each) {
            listing.failures.push(error);
        }
        Ok(())
    }

    fn read(
        self: Box<Self>,
        _: &Path,
        opts: &Options,
        _: &Chooser,
        each: &mut Each<'_>,
    ) -> anyhow::Result<Report> {
        let Single {
            mut decoded,
            codec,
            gzip,
            path,
        } = *self;
        let name = file_name(opts.file_name.as_deref(), &gzip, path.as_deref(), codec)?;
        let name = name.to_string_lossy().into_owned();
        let mut report = Report::default();
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
        Ok(report)
    }
}

/// A single compressed file holds one file and no entries: patterns, excludes and
/// components to strip do not apply, and are refused rather than ignored.
pub(super) fn refuse_choosing(input: &Path, chooser: &Chooser) -> anyhow::Result<()> {
    if chooser.chooses() {
        let why = anyhow!(
            "'{}' is a single compressed file, which holds one file and no entries to choose from: patterns, {} and {} do not apply (refused)",
            input.display(),
            Setting::Exclude,
            Setting::StripComponents
        );
        return Err(Error::named(input, ErrorKind::Invalid, why).into());
    }
    Ok(())
}

/// The name to write a single compressed file under: `--name`, the gzip header's (its last
/// component), or the input's name without its compressor's suffix.
pub(super) fn file_name(
    given: Option<&str>,
    gzip: &GzipHeader,
    input: Option<&Path>,
    codec: Codec,
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
            "standard input holds a single compressed file with no name inside: give it one with {}",
            Setting::FileName
        );
    };
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suffixes = codec.suffixes();
    let lower = name.to_ascii_lowercase();
    match suffixes
        .iter()
        .find(|s| lower.ends_with(*s) && lower.len() > s.len())
    {
        Some(suffix) => Ok(PathBuf::from(&name[..name.len() - suffix.len()])),
        None => bail!(
            "'{name}' holds a single compressed file, and its name has no suffix to take off ({}): give it a name with {}",
            suffixes.join(", "),
            Setting::FileName
        ),
    }
}

/// Writes the decoded stream into `out` as the file `name`, with `mtime` and `mode`.
pub(super) fn extract(
    decoded: Box<dyn Read + Send + '_>,
    name: &Path,
    mtime: Option<SystemTime>,
    mode: Option<u32>,
    out: &Place,
    opts: &Options,
) -> anyhow::Result<Report> {
    let mut decoded = UntilTrailing {
        inner: decoded,
        trailing: None,
    };
    let (mut report, ()) = engine::run(out, None, opts, |engine, _| {
        // How much the file holds is known only once it is decoded: a bar of what is done.
        engine.run().reporter().planned(0, 0);
        let mut writer = engine.writer();
        let written = Entry::for_path(name, EntryKind::File, mode, mtime, 0).and_then(|entry| {
            write_streamed(&mut writer, entry, &mut decoded, &mut 0, opts.max_output)
        });
        if let Err(error) = written {
            engine.run().record(error);
        }
    })?;
    report.warnings.extend(decoded.trailing);
    Ok(report)
}

/// Ends the decoded data where the compressed data ends, keeping what followed it as a warning
/// (`gzip -d` keeps the file it decoded and says "trailing garbage ignored").
struct UntilTrailing<R> {
    inner: R,
    trailing: Option<String>,
}

impl<R: Read> Read for UntilTrailing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.inner.read(buf) {
            Err(error) => match super::codec::trailing_data(&error) {
                Some(trailing) => {
                    self.trailing = Some(trailing);
                    Ok(0)
                }
                None => Err(error),
            },
            other => other,
        }
    }
}

/// Writes `data`, whose size is not known up front, as the file of `entry`, counting its bytes
/// into `total` against `max_output`. On a read error or past the cap, nothing of the file is
/// kept, and the failure says why.
pub(super) fn write_streamed(
    writer: &mut Writer<'_>,
    entry: Entry,
    data: &mut dyn Read,
    total: &mut u64,
    max_output: Option<u64>,
) -> Result<(), Error> {
    let path = PathBuf::from(&entry.name);
    let mut file = writer.stream(entry)?;
    let mut buf = vec![0u8; crate::engine::CHUNK];
    loop {
        let n = match data.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let error = anyhow::Error::new(e)
                    .context("the compressed data is corrupt or truncated; nothing of it was kept");
                return Err(file.abandon_for(Error::new(path, ErrorKind::Source, error)));
            }
        };
        *total += n as u64;
        if let Some(max) = max_output.filter(|&max| *total > max) {
            return Err(file.abandon_for(over_the_cap(&path, max)));
        }
        if file.write(&buf[..n]).is_err() {
            // The file keeps what failed, with its path: sealing it says it.
            break;
        }
    }
    writer.seal(file)
}

/// The error of a file that would take the output past `Options::max_output`.
pub(super) fn over_the_cap(path: impl Into<PathBuf>, max: u64) -> Error {
    let error = anyhow!(
        "refused: it would take the output past the cap of {} ({}); nothing of it was kept",
        crate::report::human_bytes(max),
        Setting::MaxOutput
    );
    Error::new(path, ErrorKind::Limit, error)
}

/// A single compressed file, listed as `gzip -l` lists it: the one file it decompresses to, its
/// name (as extract names it), the input's mode, the gzip header's mtime (else the input's),
/// and its size, counted by decompressing it whole (gzip's own size field keeps only 32 bits);
/// damage is a failure, after the line.
fn listed(
    mut decoded: Box<dyn Read + Send>,
    codec: Codec,
    gzip: &GzipHeader,
    archive: &Path,
    path: Option<&Path>,
    each: &mut dyn FnMut(&Listed),
) -> Result<(), Error> {
    let name = file_name(None, gzip, path, codec)
        .map_err(|e| Error::new(path.unwrap_or(archive), ErrorKind::Source, e))?;
    let meta = path.and_then(|p| std::fs::metadata(p).ok());
    let counted = std::io::copy(&mut decoded, &mut std::io::sink());
    let (size, problem) = match &counted {
        Ok(n) => (*n, None),
        Err(e) => (0, Some(format!("damaged: {e}"))),
    };
    each(&Listed {
        kind: ListedKind::File,
        mode: meta.as_ref().map(crate::platform::mode_of),
        size,
        mtime: gzip
            .mtime
            .or_else(|| meta.as_ref().and_then(|m| m.modified().ok())),
        uid: None,
        gid: None,
        user: String::new(),
        group: String::new(),
        name: name.to_string_lossy().into_owned(),
        path: problem.is_none().then_some(name.clone()),
        target: None,
        fails: problem.is_some(),
        problem,
    });
    counted.map(drop).map_err(|e| {
        let label = match path {
            Some(path) => path.display().to_string(),
            None if archive == Path::new("-") => "standard input".into(),
            None => archive.display().to_string(),
        };
        Error::new(
            label,
            ErrorKind::Source,
            anyhow::Error::new(e).context(format!("the {} data is damaged", codec.name())),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_flag_the_header_or_the_input() {
        let none = GzipHeader::default();
        let named = |n: &[u8]| GzipHeader {
            name: Some(n.to_vec()),
            mtime: None,
        };
        let input = Some(Path::new("dir/notes.txt.gz"));
        assert_eq!(
            file_name(None, &none, input, Codec::Gzip).unwrap(),
            Path::new("notes.txt")
        );
        assert_eq!(
            file_name(Some("x"), &none, input, Codec::Gzip).unwrap(),
            Path::new("x")
        );
        assert_eq!(
            file_name(None, &named(b"/etc/../evil/a.sql"), input, Codec::Gzip).unwrap(),
            Path::new("a.sql")
        );
        assert_eq!(
            file_name(None, &named(b".."), input, Codec::Gzip).unwrap(),
            Path::new("notes.txt")
        );
        let zst = Some(Path::new("dump.SQL.ZST"));
        assert_eq!(
            file_name(None, &none, zst, Codec::Zstd).unwrap(),
            Path::new("dump.SQL")
        );
        let err = file_name(None, &none, Some(Path::new("data")), Codec::Xz).unwrap_err();
        assert!(err.to_string().contains("Options::file_name"), "{err}");
        let err = file_name(None, &none, None, Codec::Bzip2).unwrap_err();
        assert!(err.to_string().contains("Options::file_name"), "{err}");
    }
}
