//! The central directory of a zip stream, read when the stream reaches it, after every entry:
//! its records (each entry's name, host, attributes, CRC-32, sizes and local header's offset,
//! zip64 fields included) and the end records after them.
//!
//! By then every entry was written and checked, so damage here loses nothing that was
//! written: a directory cut short, a record whose zip64 field lacks a value, a comment longer
//! or shorter than its end record says, bytes after the end. Each is said in a warning that
//! names it, and the records that were read are still applied; `bsdtar -xf -` stops reading at
//! the first central record and says nothing of what follows.

use std::collections::HashMap;
use std::io::{self, BufRead, Read};

use super::descriptor::Ahead;
use super::{CENTRAL_HEADER, END_OF_CENTRAL, ZIP64_END};

/// The zip64 end record's locator, between it and the end record.
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
/// The most of a zip64 end record read (its fixed part is 56 bytes; the rest, an extensible
/// data sector no writer fills, is passed over).
const ZIP64_END_MAX: u64 = 1 << 20;

/// One record of the central directory.
pub(super) struct Record {
    /// The host that made the entry ("version made by", upper byte): 0 MS-DOS, 3 Unix.
    pub host: u8,
    pub flags: u16,
    pub method: u16,
    pub crc: u32,
    /// `None`: marked as zip64 with no zip64 value for it.
    pub compressed: Option<u64>,
    pub uncompressed: Option<u64>,
    /// The external attributes: MS-DOS's in the low byte, a Unix mode in the high 16 bits.
    pub external: u32,
    pub name: Vec<u8>,
    pub extra: Vec<u8>,
    /// Where its local header is, from the start of the zip (`None`: marked as zip64 with no
    /// zip64 value for it).
    pub offset: Option<u64>,
}

impl Record {
    /// The name, shown as every message shows a zip entry's.
    pub(super) fn display(&self) -> String {
        crate::plan::display_bytes(&self.name)
    }
}

/// What the stream's central directory said, and what was wrong with it.
#[derive(Default)]
pub(super) struct Directory {
    pub records: Vec<Record>,
    /// Where its first record is in the stream.
    pub start: u64,
    /// Where its end record says it starts, from the start of the zip.
    pub stated_start: Option<u64>,
    /// Each damage met, in words that name it, for a warning.
    pub damage: Vec<String>,
}

impl Directory {
    /// Which record speaks for the local header at each stream offset in `seen`. A record's
    /// offset counts from the start of the zip, which is not the stream's where bytes come
    /// before it (a self-extractor's program, padding) and its writer did not count them:
    /// the reading under which most records find a local header is taken.
    pub(super) fn by_stream_offset(
        &self,
        seen: &HashMap<u64, Vec<u8>>,
        prefix: u64,
    ) -> HashMap<u64, usize> {
        let mut shifts = vec![0, prefix];
        if let Some(stated) = self.stated_start {
            shifts.extend(self.start.checked_sub(stated));
        }
        // (Most streams have no prefix: each reading is tried once.)
        shifts.sort_unstable();
        shifts.dedup();
        let place = |shift: u64| -> HashMap<u64, usize> {
            self.records
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let at = r.offset?.checked_add(shift)?;
                    seen.contains_key(&at).then_some((at, i))
                })
                .collect()
        };
        shifts
            .into_iter()
            .map(place)
            .fold(HashMap::new(), |best, placed| {
                if placed.len() > best.len() {
                    placed
                } else {
                    best
                }
            })
    }
}

/// Reads the central directory, whose first signature (`first`: a central record's, or an end
/// record's for an empty zip) was just read, and the end records after it, to the end of the
/// stream (so that a pipe's writer is not cut off). Damage is recorded, never returned: what
/// was read is what there is. Another directory after the first's end record (Go's
/// `comment-truncated.zip` hides a zip's real one behind a decoy) is read instead of it, as a
/// zip read from a file reads the last end record. At most `most` records are kept (a few more
/// than the stream had entries: a directory of millions of tiny records costs no more memory).
pub(super) fn read(input: &mut Ahead<'_>, first: u32, most: usize) -> Directory {
    let (mut directory, mut next) = read_one(input, first, most);
    while let Some(signature) = next {
        let (mut later, after) = read_one(input, signature, most);
        later.damage.insert(
            0,
            format!(
                "another central directory follows the end record of one of {} records: the last was read, as from a file",
                directory.records.len()
            ),
        );
        directory = later;
        next = after;
    }
    directory
}

/// One central directory and its end records; with it, the signature of another directory
/// that follows them, if one does.
fn read_one(input: &mut Ahead<'_>, first: u32, most: usize) -> (Directory, Option<u32>) {
    let mut directory = Directory {
        start: input.offset.saturating_sub(4),
        ..Directory::default()
    };
    let mut signature = Some(first);
    while signature == Some(CENTRAL_HEADER) {
        if directory.records.len() == most {
            let after = drain(input);
            directory.damage.push(format!(
                "it has more records than the stream had entries: {after} bytes from its record #{} on were passed over",
                most + 1
            ));
            return (directory, None);
        }
        match record(input) {
            Some((record, lacks)) => {
                if let Some(what) = lacks {
                    directory.damage.push(format!(
                        "the central directory's record of '{}' is marked zip64 and has no zip64 value for its {what}",
                        record.display()
                    ));
                }
                directory.records.push(record);
            }
            None => {
                directory.damage.push(format!(
                    "the central directory is cut short in its record #{}",
                    directory.records.len() + 1
                ));
                return (directory, None);
            }
        }
        signature = next_signature(input);
    }
    let next = match signature {
        None => {
            directory.damage.push(format!(
                "the stream ends after the central directory's {} records, with no end record",
                directory.records.len()
            ));
            None
        }
        Some(ZIP64_END) => zip64_end(input, &mut directory),
        Some(END_OF_CENTRAL) => end_record(input, &mut directory),
        Some(_) => {
            let after = drain(input);
            directory.damage.push(format!(
                "the central directory is followed by {} bytes that are no end record, passed over",
                after + 4
            ));
            None
        }
    };
    (directory, next)
}

/// The next 4 bytes as a signature; `None` at the end of the stream.
fn next_signature(input: &mut Ahead<'_>) -> Option<u32> {
    let mut b = [0u8; 4];
    input.read_exact(&mut b).ok()?;
    Some(u32::from_le_bytes(b))
}

/// Reads the rest of the stream; how many bytes it had.
fn drain(input: &mut Ahead<'_>) -> u64 {
    io::copy(input, &mut io::sink()).unwrap_or(0)
}

/// One central record, its signature read. `None`: the stream ends inside it. With it, the
/// value its zip64 field should have given and did not, if any.
fn record(input: &mut Ahead<'_>) -> Option<(Record, Option<&'static str>)> {
    let mut fixed = [0u8; 42];
    input.read_exact(&mut fixed).ok()?;
    let u16_at = |i: usize| u16::from_le_bytes([fixed[i], fixed[i + 1]]);
    let u32_at =
        |i: usize| u32::from_le_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
    let (name_len, extra_len, comment_len) = (
        usize::from(u16_at(24)),
        usize::from(u16_at(26)),
        usize::from(u16_at(28)),
    );
    let mut rest = vec![0u8; name_len + extra_len + comment_len];
    input.read_exact(&mut rest).ok()?;
    rest.truncate(name_len + extra_len);
    let extra = rest.split_off(name_len);
    // The zip64 field holds, in this order, each value whose own field is all ones.
    let mut wide = zip64_values(&extra)
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
    let mut lacks = None;
    let mut value = |narrow: u32, what: &'static str| match narrow {
        u32::MAX => {
            let value = wide.next();
            if value.is_none() {
                lacks = lacks.or(Some(what));
            }
            value
        }
        n => Some(u64::from(n)),
    };
    let uncompressed = value(u32_at(20), "uncompressed size");
    let compressed = value(u32_at(16), "compressed size");
    let offset = value(u32_at(38), "local header's offset");
    let record = Record {
        host: fixed[1],
        flags: u16_at(4),
        method: u16_at(6),
        crc: u32_at(12),
        compressed,
        uncompressed,
        external: u32_at(34),
        name: rest,
        extra,
        offset,
    };
    Some((record, lacks))
}

/// The bytes a central record's zip64 field (0x0001) holds its values in, read as unzip reads
/// them: from the field's data on to the end of the extra area, so that a field that declares
/// fewer bytes than its record's saturated sizes and offset need gives them from the bytes
/// that follow (yauzl's "zip64 extended information extra field does not include ..." zips;
/// a zip from a file is mended so, `mended.rs`). Empty: no such field.
fn zip64_values(extra: &[u8]) -> &[u8] {
    let mut at = 0;
    while let Some(header) = extra.get(at..at + 4) {
        let id = u16::from_le_bytes([header[0], header[1]]);
        let len = usize::from(u16::from_le_bytes([header[2], header[3]]));
        if id == 0x0001 {
            return &extra[at + 4..];
        }
        at += 4 + len;
    }
    &[]
}

/// A zip64 end record (its signature read), its locator, then the end record; the signature
/// of another directory after them, if one follows.
fn zip64_end(input: &mut Ahead<'_>, directory: &mut Directory) -> Option<u32> {
    let mut size = [0u8; 8];
    if input.read_exact(&mut size).is_err() {
        directory
            .damage
            .push("the stream ends inside the zip64 end record".into());
        return None;
    }
    let size = u64::from_le_bytes(size);
    let mut record = Vec::new();
    let read = (&mut *input)
        .take(size.min(ZIP64_END_MAX))
        .read_to_end(&mut record);
    if read.is_err() || (record.len() as u64) < size.min(ZIP64_END_MAX) {
        directory
            .damage
            .push("the stream ends inside the zip64 end record".into());
        return None;
    }
    if size > ZIP64_END_MAX {
        let _ = io::copy(
            &mut (&mut *input).take(size - ZIP64_END_MAX),
            &mut io::sink(),
        );
    }
    // After the size: versions (4), disks (8), entries (16), the directory's size (8), then
    // its offset.
    if let Some(field) = record.get(36..44) {
        let mut offset = [0u8; 8];
        offset.copy_from_slice(field);
        directory.stated_start = Some(u64::from_le_bytes(offset));
    }
    let mut signature = next_signature(input);
    if signature == Some(ZIP64_LOCATOR) {
        let mut locator = [0u8; 16];
        if input.read_exact(&mut locator).is_err() {
            directory
                .damage
                .push("the stream ends inside the zip64 end record's locator".into());
            return None;
        }
        signature = next_signature(input);
    }
    match signature {
        Some(END_OF_CENTRAL) => end_record(input, directory),
        None => {
            directory
                .damage
                .push("the stream ends after the zip64 end record, with no end record".into());
            None
        }
        Some(_) => {
            let after = drain(input);
            directory.damage.push(format!(
                "the zip64 end record is followed by {} bytes that are no end record, passed over",
                after + 4
            ));
            None
        }
    }
}

/// The end record (its signature read), its comment, and what follows it: the signature of
/// another central directory, if one does.
fn end_record(input: &mut Ahead<'_>, directory: &mut Directory) -> Option<u32> {
    let mut fixed = [0u8; 18];
    if input.read_exact(&mut fixed).is_err() {
        directory
            .damage
            .push("the stream ends inside the end record".into());
        return None;
    }
    let offset = u32::from_le_bytes([fixed[12], fixed[13], fixed[14], fixed[15]]);
    if directory.stated_start.is_none() && offset != u32::MAX {
        directory.stated_start = Some(u64::from(offset));
    }
    let comment = u64::from(u16::from_le_bytes([fixed[16], fixed[17]]));
    let there = io::copy(&mut (&mut *input).take(comment), &mut io::sink()).unwrap_or(0);
    if there < comment {
        directory.damage.push(format!(
            "the end record's comment is cut short ({there} of its {comment} bytes are there)"
        ));
        return None;
    }
    let next = match input.peek(4) {
        Ok([]) => return None,
        Ok(&[a, b, c, d, ..]) => Some(u32::from_le_bytes([a, b, c, d])),
        _ => None,
    };
    if let Some(next @ (CENTRAL_HEADER | ZIP64_END | END_OF_CENTRAL)) = next {
        input.consume(4);
        return Some(next);
    }
    let after = drain(input);
    directory.damage.push(format!(
        "{after} bytes follow the end record and its {comment}-byte comment, passed over"
    ));
    None
}
