//! An archive in a bucket (`s3://BUCKET/KEY`) or at an `https://` URL (feature `http`), read
//! through the store client's object reader (`store/read.rs`: the first answers, the ranges,
//! the object kept the same from the first byte to the last).
//!
//! - The first requests, side by side, ask for the object's last 65 KiB, where a zip keeps the
//!   end of its central directory, and for the whole object. A zip is then fetched into an
//!   unnamed temporary file of its full size, on a thread of its own ([`Arriving`]), its
//!   central directory asked for at once where it begins before the last 65 KiB. Each piece is
//!   said to [`Arrivals`] as it lands, so that extraction plans and checks the zip from its
//!   central directory as soon as that is in, before anything is written, then writes each
//!   entry as soon as its bytes are all there (its local header checked against its record
//!   then). `list`, and a zip whose entries need more than their own bytes before planning
//!   (encrypted ones, symlinks), wait for the last byte and read the file as a local zip.
//! - Anything else (a tar, plain or compressed; a single compressed file) is the whole
//!   object's GET, handed to the readers a pipe uses, so writing begins with its first bytes.
//! - From a server that ignores ranges, a zip is read from that GET too, by its local headers,
//!   as from a pipe; the run says so.

use std::fs::File;
use std::io::{self, Read, Seek};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use anyhow::Context;

use super::arriving::Arrivals;
use crate::Options;
use crate::place::Origin;
use crate::store::{Answers, Object};

/// How much of the object's end the first request asks for: a zip's end of central directory
/// record with the longest comment it can have (22 + 65,535 bytes), and the zip64 locator.
const TAIL: u64 = 65 * 1024;

/// A remote archive, opened.
pub(super) enum Opened {
    /// A zip, arriving in a temporary file.
    Zip(Arriving),
    /// Read once from its start. `unranged`: the server ignored a range request, so a zip in
    /// it is read by its local headers.
    Stream {
        reader: Box<dyn Read + Send>,
        unranged: bool,
    },
}

/// The object `origin` names (a store's, or with feature `http` a web server's), opened;
/// `None` for anything else.
pub(super) fn open(origin: &Origin, opts: &Options) -> anyhow::Result<Option<Opened>> {
    let Some(object) = Object::locate(origin, None, opts)? else {
        return Ok(None);
    };
    let opened = object.first_answers(TAIL).and_then(|answers| {
        match answers
            .tail()
            .is_some_and(|(_, tail)| ends_like_a_zip(tail))
        {
            true => arrive(answers),
            false => {
                let unranged = answers.unranged();
                let reader = answers.into_reader();
                Ok(Opened::Stream { reader, unranged })
            }
        }
    });
    opened
        .map(Some)
        .with_context(|| format!("cannot open archive '{}'", origin.named().display()))
}

/// Begins fetching the zip into an unnamed temporary file of its full size, on a thread of its
/// own; the last bytes the first answers gave are its first part.
fn arrive(answers: Answers) -> anyhow::Result<Opened> {
    let held = |e: io::Error| {
        anyhow::Error::new(e).context("cannot write the archive to a temporary file")
    };
    let file = tempfile::tempfile()
        .context("cannot make a temporary file to hold the archive while it is read")?;
    let size = answers.size();
    let (tail_at, tail) = answers
        .tail()
        .context("the server gave no part of the archive")?;
    file.set_len(size)
        .and_then(|_| crate::platform::write_at(&file, tail, tail_at))
        .map_err(held)?;
    let arrivals = Arc::new(Arrivals::default());
    arrivals.add(tail_at..tail_at + tail.len() as u64);
    let directory = directory_of(tail, tail_at, size);
    let first = directory.as_ref().map_or(tail_at, |d| d.start);
    let sink = file.try_clone().map_err(held)?;
    let stop = Arc::new(AtomicBool::new(false));
    let label = answers.label().to_string();
    let download = {
        let (arrivals, stop) = (arrivals.clone(), stop.clone());
        std::thread::Builder::new()
            .name("fastwrite-download".into())
            .spawn(move || {
                let land = |at, piece: &[u8]| {
                    if stop.load(Ordering::Relaxed) {
                        anyhow::bail!("stopped");
                    }
                    crate::platform::write_at(&sink, piece, at).map_err(held)?;
                    arrivals.add(at..at + piece.len() as u64);
                    Ok(())
                };
                let fetched = answers.fetch(first, land, || arrivals.wanted());
                arrivals.end(fetched);
            })
            .context("cannot start the download's thread")?
    };
    Ok(Opened::Zip(Arriving {
        file,
        size,
        arrivals,
        directory,
        label,
        stop,
        download: Some(download),
    }))
}

/// A zip arriving in a temporary file of its full size, fetched by a thread of its own, which
/// stops when this is dropped.
pub(super) struct Arriving {
    file: File,
    size: u64,
    arrivals: Arc<Arrivals>,
    /// Where its central directory begins, to its end; `None` where the end records do not
    /// say so plainly (then nothing is planned before the last byte).
    directory: Option<Range<u64>>,
    label: String,
    stop: Arc<AtomicBool>,
    download: Option<JoinHandle<()>>,
}

impl Arriving {
    /// What has arrived, and who waits for what.
    pub fn arrivals(&self) -> &Arrivals {
        &self.arrivals
    }

    /// The temporary file (another handle to it): what has not arrived yet reads as zeros.
    pub fn file(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Where the central directory and the end records lie, when the end says so plainly.
    pub fn directory(&self) -> Option<Range<u64>> {
        self.directory.clone()
    }

    /// The file at its start once every byte has arrived; `Err` if the download broke off.
    pub fn finish(mut self) -> anyhow::Result<File> {
        let whole = self.arrivals.wait_for(0..self.size, &|| false);
        whole.with_context(|| format!("cannot read archive '{}'", self.label))?;
        let mut file = self.file.try_clone()?;
        file.rewind()?;
        if let Some(download) = self.download.take() {
            let _ = download.join();
        }
        Ok(file)
    }
}

impl Drop for Arriving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(download) = self.download.take() {
            let _ = download.join();
        }
    }
}

/// Where a zip's central directory begins, to the object's end (`size`), from its last bytes
/// (`tail`, from `tail_at` on): the end of central directory record (and zip64's, when the
/// first says to look there) read as the zip crate reads it. `None` unless the directory ends
/// exactly where those records begin, as every writer leaves it: a zip behind a prefix that
/// its offsets do not count, or any oddity, waits for its last byte and is read as a local
/// zip is.
fn directory_of(tail: &[u8], tail_at: u64, size: u64) -> Option<Range<u64>> {
    let comment = |at: usize| {
        tail.get(at + 20..at + 22)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let end = tail
        .windows(4)
        .rposition(|w| w == b"PK\x05\x06")
        .filter(|&at| at + 22 + usize::from(comment(at).unwrap_or(0)) == tail.len())?;
    let said = super::end_records::read(tail, tail_at, end)?;
    let ends = said.start.checked_add(said.length)? == said.records;
    (ends && said.records <= size).then_some(said.start..size)
}

/// Whether `tail`, the object's last bytes, holds a zip's end of central directory record.
/// Any other object is read as a stream, where what it is is told from its first bytes; a
/// false match is fetched whole and told the same way, from the temporary file.
fn ends_like_a_zip(tail: &[u8]) -> bool {
    tail.windows(4).rev().any(|w| w == b"PK\x05\x06")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_central_directory_is_found_from_the_end_records() {
        // A directory of 46 bytes at 100, then its end record with a 3-byte comment.
        let mut tail = vec![0u8; 146];
        tail.extend_from_slice(b"PK\x05\x06\0\0\0\0\x01\0\x01\0");
        tail.extend_from_slice(&46u32.to_le_bytes());
        tail.extend_from_slice(&100u32.to_le_bytes());
        tail.extend_from_slice(&3u16.to_le_bytes());
        tail.extend_from_slice(b"abc");
        let size = 1000 + tail.len() as u64;
        // The same bytes as the object's end, from 1,000 on: the offsets no longer add up.
        assert_eq!(directory_of(&tail, 0, tail.len() as u64), Some(100..171));
        assert_eq!(directory_of(&tail, 1000, size), None);
        // A comment whose length does not end the object: not read.
        tail.push(0);
        assert_eq!(directory_of(&tail, 0, tail.len() as u64), None);
    }

    #[test]
    fn a_zip64_directory_ends_where_its_end_record_begins() {
        // 70,000 entries: a directory of 5,000 bytes at 100, the zip64 end record (56
        // bytes) at 5,100, its locator, then the end record, whose count says "see zip64".
        let mut tail = vec![0u8; 5_100];
        tail.extend_from_slice(b"PK\x06\x06");
        tail.extend_from_slice(&44u64.to_le_bytes());
        // Versions made by and needed, this disk, the directory's disk.
        tail.extend_from_slice(&[0; 2 + 2 + 4 + 4]);
        tail.extend_from_slice(&70_000u64.to_le_bytes());
        tail.extend_from_slice(&70_000u64.to_le_bytes());
        tail.extend_from_slice(&5_000u64.to_le_bytes());
        tail.extend_from_slice(&100u64.to_le_bytes());
        assert_eq!(tail.len(), 5_156);
        tail.extend_from_slice(b"PK\x06\x07\0\0\0\0");
        tail.extend_from_slice(&5_100u64.to_le_bytes());
        tail.extend_from_slice(&1u32.to_le_bytes());
        tail.extend_from_slice(b"PK\x05\x06\0\0\0\0\xff\xff\xff\xff");
        tail.extend_from_slice(&5_000u32.to_le_bytes());
        tail.extend_from_slice(&100u32.to_le_bytes());
        tail.extend_from_slice(&0u16.to_le_bytes());
        let size = tail.len() as u64;
        assert_eq!(directory_of(&tail, 0, size), Some(100..size));
    }

    #[test]
    fn a_zip_is_told_by_its_end_record() {
        assert!(ends_like_a_zip(b"...PK\x05\x06\0\0\0\0"));
        assert!(!ends_like_a_zip(b"\x1f\x8b\x08 a gzip stream"));
    }
}
