//! A file's content as a source hands it over ([`Content`]: a reader, bytes, a source file,
//! a sparse reader that knows its holes), and one byte pump for every target: the content
//! handed to a sink a chunk at a time (a hole as its length), checked against the size the
//! entry declared, with the same words wherever the check fails (`extract/give.rs` says them
//! too).

use std::fs::File;
use std::io::{self, Read};

use anyhow::{Context, anyhow};

use super::run::cancelled;
use crate::error::{Error, ErrorKind};
use crate::plan::Entry;

/// Files are copied through a per-writer buffer of this size: a smaller file takes one read and
/// one write; a larger one is streamed in chunks of this size and never held whole.
pub(crate) const CHUNK: usize = 1 << 20;

/// Reads from `from` until `buf` is full, the end, or an error: how many bytes it holds, and the
/// error that stopped it (the bytes before an error are kept; an interrupted read is tried
/// again). Fewer bytes than `buf` holds and no error: the end.
pub(crate) fn read_full(from: &mut dyn Read, buf: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut filled = 0;
    while filled < buf.len() {
        match from.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (filled, Some(e)),
        }
    }
    (filled, None)
}

/// Where a file's content comes from.
pub(crate) enum Content<'a> {
    /// Read (and checked against the declared size) in chunks.
    Reader(&'a mut dyn Read),
    /// Already in memory.
    Bytes(&'a [u8]),
    /// A file of a source tree, copied in the kernel where it can be (see `copy.rs`).
    File(&'a File),
    /// A sparse file whose source knows where its holes are: each hole is skipped with a
    /// seek, never read or scanned as zeros (a 12 GB sparse file holding 2 KB of data costs
    /// what 2 KB cost).
    Sparse(&'a mut dyn HoleRead),
}

/// A sparse file's content that knows where its holes are (a tar's sparse map).
pub(crate) trait HoleRead: Read {
    /// If the content goes on with a hole here, steps over it and says how long it is (0: data
    /// comes next, or the end).
    fn skip_hole(&mut self) -> u64;
}

/// Content with no holes known to its source.
pub(crate) struct Dense<'a, R: ?Sized>(pub(crate) &'a mut R);

impl<R: Read + ?Sized> Read for Dense<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R: Read + ?Sized> HoleRead for Dense<'_, R> {
    fn skip_hole(&mut self) -> u64 {
        0
    }
}

/// What the pump hands on: data, or a hole of so many bytes (zeros, which a file on disk
/// skips with a seek and an object is given as bytes).
pub(crate) enum Piece<'a> {
    Data(&'a [u8]),
    Hole(u64),
}

/// The content holds more than its entry declared.
pub(crate) fn too_long(size: u64) -> anyhow::Error {
    anyhow!("the entry holds more data than its declared size of {size} bytes")
}

/// The content ended before its declared size.
pub(crate) fn truncated(got: u64, size: u64) -> anyhow::Error {
    anyhow!("the entry is truncated: {got} of its {size} bytes")
}

/// Hands `content` to `sink` in chunks of at most [`CHUNK`] (through `buf`), and returns the
/// bytes handed on: exactly the entry's declared size, or an error of the source's
/// ([`ErrorKind::Source`]: data past the size is never handed on). A failure of `sink`'s is
/// [`ErrorKind::Write`] (the sink says where). `cancelled` is asked before every chunk.
/// [`Content::File`] is read as a stream here: a target that copies in the kernel tries that
/// first.
pub(crate) fn pump(
    entry: &Entry,
    content: Content<'_>,
    buf: &mut Vec<u8>,
    cancelled_now: &dyn Fn() -> bool,
    sink: &mut dyn FnMut(Piece<'_>) -> anyhow::Result<()>,
) -> Result<u64, Error> {
    match content {
        Content::Bytes(data) => {
            if data.len() as u64 != entry.size {
                return Err(Error::new(
                    &entry.name,
                    ErrorKind::Source,
                    anyhow!(
                        "the entry holds {} bytes, not its declared {}",
                        data.len(),
                        entry.size
                    ),
                ));
            }
            sink(Piece::Data(data)).map_err(|e| Error::new(&entry.name, ErrorKind::Write, e))?;
            Ok(entry.size)
        }
        Content::Reader(src) => pump_from(entry, &mut Dense(src), buf, cancelled_now, sink),
        Content::Sparse(src) => pump_from(entry, src, buf, cancelled_now, sink),
        Content::File(mut file) => {
            pump_from(entry, &mut Dense(&mut file), buf, cancelled_now, sink)
        }
    }
}

fn pump_from(
    entry: &Entry,
    src: &mut dyn HoleRead,
    buf: &mut Vec<u8>,
    cancelled_now: &dyn Fn() -> bool,
    sink: &mut dyn FnMut(Piece<'_>) -> anyhow::Result<()>,
) -> Result<u64, Error> {
    let source = |error: anyhow::Error| Error::new(&entry.name, ErrorKind::Source, error);
    let mut got = 0u64;
    buf.reserve(CHUNK);
    loop {
        if cancelled_now() {
            return Err(cancelled(entry));
        }
        // A hole (of a sparse file whose source knows them) is handed on as its length.
        let hole = src.skip_hole();
        let n = if hole > 0 {
            hole
        } else {
            buf.clear();
            let n = src
                .take(CHUNK as u64)
                .read_to_end(buf)
                .context("reading the entry's data")
                .map_err(source)?;
            if n == 0 {
                break;
            }
            n as u64
        };
        got = got.saturating_add(n);
        if got > entry.size {
            return Err(source(too_long(entry.size)));
        }
        let piece = if hole > 0 {
            Piece::Hole(hole)
        } else {
            Piece::Data(buf)
        };
        sink(piece).map_err(|e| Error::new(&entry.name, ErrorKind::Write, e))?;
    }
    if got != entry.size {
        return Err(source(truncated(got, entry.size)));
    }
    Ok(got)
}
