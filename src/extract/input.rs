//! Opening an input and telling what it is, once, for `extract`, `list` and `read` alike: a
//! zip from a file (read from its end) or still arriving from a bucket or URL, a tar plain or
//! decompressed (a stream), a zip from a pipe (read by its local headers, found behind a
//! self-extractor's program or padding within a bound), an image, or a single compressed file.
//! [`open`] is the only place a kind is chosen: what it returns is a [`Source`](super::source::Source), which each
//! kind's module implements, and the three operations ask it rather than match on its kind.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{Context, bail};

use super::codec;
#[cfg(not(all(feature = "zip", feature = "tar")))]
use super::format::NotBuilt;
use super::format::{Format, checksum_ok, detect, named_like_a_tar};
pub(super) use super::source::Input;
use crate::Options;
use crate::place::Origin;

/// A zip in the file `file` (named `archive`), read from its end.
#[cfg(feature = "zip")]
fn zip_file(_: &Path, file: File) -> Input {
    Box::new(super::zip::InFile(file))
}

#[cfg(not(feature = "zip"))]
fn zip_file(archive: &Path, _: File) -> Input {
    Box::new(NotBuilt::zip(format!("'{}'", archive.display())))
}

/// A zip read once, from its start, by its local headers; `note` goes to the run's report.
#[cfg(feature = "zip")]
fn zip_piped(input: Box<dyn BufRead + Send>, label: String, note: Option<String>) -> Input {
    Box::new(super::zip::stream::Piped { input, label, note })
}

#[cfg(not(feature = "zip"))]
fn zip_piped(_: Box<dyn BufRead + Send>, label: String, _: Option<String>) -> Input {
    Box::new(NotBuilt::zip(label))
}

/// A tar stream, decoded; `verified` follows the decompressor's checks (`None`: plain).
#[cfg(feature = "tar")]
fn tar_stream(
    decoded: Box<dyn Read + Send>,
    label: String,
    verified: Option<codec::Verified>,
) -> Input {
    Box::new(super::tar::Archive {
        decoded,
        label,
        verified,
    })
}

#[cfg(not(feature = "tar"))]
fn tar_stream(_: Box<dyn Read + Send>, label: String, _: Option<codec::Verified>) -> Input {
    Box::new(NotBuilt::tar(label))
}

/// Opens `archive` (`-`: standard input) and tells what it is by its content.
pub(super) fn open(archive: &Path, opts: &Options) -> anyhow::Result<Input> {
    #[cfg(feature = "image")]
    if let Some(reference) = super::image::Reference::parse(archive)? {
        return Ok(Box::new(super::image::Image(reference)));
    }
    let origin = Origin::of(archive)?;
    let archive = match &origin {
        Origin::Stdin => {
            return open_stream(std::io::stdin(), "standard input".to_string(), None, None);
        }
        Origin::Local(path) => path,
        _ => return open_remote(&origin, opts),
    };
    let file = File::open(archive)
        .with_context(|| format!("cannot open archive '{}'", archive.display()))?;
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    if !regular && !archive.is_dir() {
        // A pipe (`<(curl ...)`, a FIFO) cannot be rewound after its format is told, nor read
        // from its end: it is read as a stream, like standard input.
        let label = format!("'{}'", archive.display());
        return open_stream(file, label, Some(archive), None);
    }
    open_file(archive, file)
}

/// An archive in a bucket or on a web server: a zip as it arrives, anything else as a stream.
fn open_remote(origin: &Origin, opts: &Options) -> anyhow::Result<Input> {
    let archive = origin.named();
    match super::remote::open(origin, opts)? {
        #[cfg(feature = "zip")]
        Some(super::remote::Opened::Zip(arriving)) => Ok(Box::new(super::zip::Arriving(arriving))),
        #[cfg(not(feature = "zip"))]
        Some(super::remote::Opened::Zip(arriving)) => open_file(archive, arriving.finish()?),
        Some(super::remote::Opened::Stream { reader, unranged }) => {
            let note = unranged.then(|| {
                "the server does not answer requests for byte ranges: the zip was read as one stream, by its local headers, as from a pipe (docs/security.md says how that differs from a zip read whole)"
                    .to_string()
            });
            let label = format!("'{}'", archive.display());
            open_stream(reader, label, None, note)
        }
        None => {
            let why = anyhow::anyhow!(
                "'{}' names nothing fastwrite reads archives from (files, standard input and {})",
                archive.display(),
                crate::place::stores_named(),
            );
            Err(super::format::unsupported(&archive.to_string_lossy(), why))
        }
    }
}

/// The regular file `file` (named `archive`), told what it is by its first bytes.
fn open_file(archive: &Path, mut file: File) -> anyhow::Result<Input> {
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
        Some(Format::Zip) | None => Ok(zip_file(archive, file)),
        Some(_) => {
            std::io::Seek::rewind(&mut file)
                .with_context(|| format!("cannot read archive '{}'", archive.display()))?;
            open_stream(file, archive.display().to_string(), Some(archive), None)
        }
    }
}

/// A stream a program hands over (`extract_reader`, `list_reader`), told what it is by its
/// content as standard input is; `label` names it in messages.
pub(super) fn open_reader(reader: Box<dyn Read + Send>, label: &str) -> anyhow::Result<Input> {
    open_stream(reader, label.to_string(), None, None)
}

/// A stream (plain or compressed) read once, from its start: a tar, or a single compressed
/// file. `label` names it in messages; `path` is the input's, if it has one; `note`, for the
/// run's report if it is a zip (why one that has a central directory is read without it).
fn open_stream(
    input: impl Read + Send + 'static,
    label: String,
    path: Option<&Path>,
    note: Option<String>,
) -> anyhow::Result<Input> {
    let mut input = BufReader::with_capacity(INPUT_BUFFER, input);
    let head = input
        .fill_buf()
        .with_context(|| format!("cannot read {label}"))?;
    let codec = match detect(head) {
        _ if head.is_empty() => bail!("{label} is empty, not an archive"),
        Some(Format::Zip) => return Ok(zip_piped(Box::new(input), label, note)),
        Some(Format::Tar) => return Ok(tar_stream(Box::new(input), label, None)),
        Some(Format::Compressed(codec)) => codec,
        None => return zip_behind_a_prefix(input, label, note),
    };
    let gzip = codec::gzip_header(head);
    let verified = codec::Verified::default();
    let named_tar = path.is_some_and(named_like_a_tar);
    // (A decoder is missing only where its cargo feature is off.)
    let Ok(mut decoded) = codec.decoder(Box::new(input), &verified) else {
        return Err(super::format::codec_not_built(&label, codec, named_tar));
    };
    // The first block of what is inside tells a tar (its header's checksum) from a single
    // file.
    let archive_path = path.unwrap_or(Path::new("-"));
    let mut start = Vec::with_capacity(512);
    // An error met here is returned in its place in the data: bytes after the end of a short
    // compressed file are said where its data ends, and damage in a file named as a tar is
    // reported as a damaged archive.
    let mut peeked = None;
    if let Err(error) = (&mut decoded).take(512).read_to_end(&mut start) {
        if !named_tar && codec::trailing_data(&error).is_none() {
            return Err(error).with_context(|| format!("cannot decompress {label}"));
        }
        peeked = Some(error);
    }
    let tar = match start.get(..512) {
        // A block of zeros: an empty tar from a pipe, a file of zeros by its name.
        Some(block) if block.iter().all(|&b| b == 0) => path.is_none() || named_tar,
        Some(block) if checksum_ok(block) => true,
        // Named as a tar, and a whole first block that is no tar header: damaged compressed
        // data (a bzip2 block decodes to garbage before its CRC is checked), which its check
        // tells, read on to; or not a tar, where GNU tar says "This does not look like a tar
        // archive" (exit 2), and so does fastwrite, for extract and list alike.
        Some(_) if named_tar => {
            let read_on = (&mut decoded).take(codec::READ_ON_LIMIT);
            match std::io::copy(&mut { read_on }, &mut std::io::sink()) {
                Err(error) if codec::trailing_data(&error).is_none() => {
                    peeked = Some(error);
                    true
                }
                _ => bail!(
                    "'{}' is {} data, and what it holds is not a tar: its first block is no tar header",
                    archive_path.display(),
                    codec.name()
                ),
            }
        }
        Some(_) => false,
        // Whole compressed data that holds less than a block, named as a tar: not one (a tar
        // is made of 512-byte blocks).
        None if named_tar && peeked.is_none() && !start.iter().all(|&b| b == 0) => bail!(
            "'{}' is {} data, and what it holds is not a tar: {} bytes, less than a tar's first block",
            archive_path.display(),
            codec.name(),
            start.len()
        ),
        // Cut short inside the first block: damage, reported by the tar reader.
        None => named_tar,
    };
    let decoded: Box<dyn Read + Send> = Box::new(
        std::io::Cursor::new(start)
            .chain(FailOnce(peeked))
            .chain(decoded),
    );
    Ok(if tar {
        tar_stream(decoded, label, Some(verified))
    } else {
        Box::new(super::single::Single {
            decoded,
            codec,
            gzip,
            path: path.map(Path::to_path_buf),
        })
    })
}

/// A stream that no format's magic starts: a zip if its first local header comes within
/// [`ZIP_SEARCH`](super::format::ZIP_SEARCH) bytes (after a self-extractor's program, padding:
/// the zip reader passes over them and says so), else refused for what it is. What was read
/// to look is given back in front of the rest.
fn zip_behind_a_prefix(
    mut input: BufReader<impl Read + Send + 'static>,
    label: String,
    note: Option<String>,
) -> anyhow::Result<Input> {
    use super::format::{ZIP_LOOK as MOST, ZipStart, zip_start};
    let mut ahead = Vec::new();
    // Looked at again each 64 KiB more (a pipe's reads can be small).
    let mut next_look = 0;
    let found = loop {
        let buf = input
            .fill_buf()
            .with_context(|| format!("cannot read {label}"))?;
        let take = buf.len().min(MOST - ahead.len());
        ahead.extend_from_slice(&buf[..take]);
        input.consume(take);
        let complete = take == 0 || ahead.len() == MOST;
        if !complete && ahead.len() < next_look {
            continue;
        }
        next_look = ahead.len() + (64 << 10);
        match zip_start(&ahead, complete) {
            ZipStart::Unknown if !complete => {}
            ZipStart::At(_) => break true,
            _ => break false,
        }
    };
    if !found {
        let why = anyhow::anyhow!("{label} is {}", super::format::not_readable(&ahead));
        return Err(super::format::unsupported(&label, why));
    }
    let input = Box::new(std::io::Cursor::new(ahead).chain(input));
    Ok(zip_piped(input, label, note))
}

/// Returns its error once, then the end: an error met while peeking, in its place in the data.
struct FailOnce(Option<std::io::Error>);

impl Read for FailOnce {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        self.0.take().map_or(Ok(0), Err)
    }
}

/// Reads of a streamed archive are this large: one system call per MiB.
const INPUT_BUFFER: usize = 1 << 20;
