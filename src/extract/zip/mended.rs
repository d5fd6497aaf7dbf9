//! A zip's end record and central directory mended where they hold what the `zip` crate refuses
//! whole and Info-ZIP's unzip and 7-Zip read past, in a copy the crate then reads (the archive
//! itself is never changed): an unnamed temporary file, mapped, so a large zip costs disk, not
//! memory. Each mend is said in the run's report, and none changes what any entry holds or where
//! it is written:
//! - a comment cut short: its length is what is there (as unzip, bsdtar and Python read it);
//! - an end record that says "disk N" of a single-disk zip (its directory on disk 0, every entry
//!   on that disk): read as disk 0, as bsdtar and unzip read it;
//! - an extra field in a central record that runs past the record's extra area, or an empty
//!   extended timestamp: passed over (its ID made one nobody reads), as unzip and 7-Zip pass
//!   over it; the entry keeps its DOS time. An AES field is never mended: the encryption it
//!   carries cannot be guessed, and the crate refuses the zip;
//! - a zip64 field that declares fewer bytes than the 8-byte values its record saturates call
//!   for (yauzl's three "zip64 extended information extra field does not include ..." zips):
//!   the values are read from the bytes that follow it in the record's extra area, as unzip
//!   reads them (its length made what is left of the area; 7-Zip and bsdtar refuse such a zip).
//!   Where the area does not hold them, it is not mended, and the crate refuses the zip.
//!
//! Reading ourselves only what the crate refuses, rather than carrying a patched copy of the
//! crate, keeps the crate as published (docs/design.md, "Reading the zip").

use std::io::{Seek, Write};

use super::integrity::{cut_comment, end_record, u16_at, u32_at};

/// The zip64 end record locator's signature.
const LOCATOR: &[u8] = b"PK\x06\x07";

/// The ID a field passed over gets: none of the ones the `zip` crate or fastwrite reads.
const PASSED_OVER: u16 = 0x4e46;

/// The extra fields that are never passed over: zip64's sizes and offset, AES's encryption.
const NEVER_MENDED: [u16; 2] = [ZIP64, 0x9901];

/// The zip64 extra field's ID.
const ZIP64: u16 = 0x0001;

/// What mending a zip changes: bytes put at offsets, and what the report says of it.
#[derive(Debug, Default)]
pub(super) struct Mends {
    patches: Vec<(usize, Vec<u8>)>,
    pub said: Vec<String>,
}

/// What mending `bytes` (a whole zip) would change; `None` when nothing needs it.
pub(super) fn find(bytes: &[u8]) -> Option<Mends> {
    let mut mends = Mends::default();
    let at = end_record(bytes)?;
    if let Some(cut) = cut_comment(bytes) {
        mends
            .patches
            .push((cut.length_at, cut.fits.to_le_bytes().to_vec()));
        mends.said.push(format!(
            "the zip's comment is cut short ({} of its {} bytes are there): read as Info-ZIP's unzip, bsdtar and Python read it",
            cut.fits, cut.declared
        ));
    }
    let (disk, directory_disk) = (u16_at(bytes, at + 4)?, u16_at(bytes, at + 6)?);
    let (on_this_disk, entries) = (u16_at(bytes, at + 8)?, u16_at(bytes, at + 10)?);
    let zip64 = at >= 20 && bytes[at - 20..].starts_with(LOCATOR);
    if disk != 0 && directory_disk == 0 && on_this_disk == entries && !zip64 {
        mends.patches.push((at + 4, vec![0, 0]));
        mends.said.push(format!(
            "the zip's end record says it is disk {disk} of a split archive, but its directory and all its {entries} entries are on disk 0: read as one zip, as bsdtar and unzip read it"
        ));
    }
    if let Some((start, end)) = directory(bytes, at) {
        mend_extras(bytes, start, end, &mut mends);
    }
    (!mends.patches.is_empty()).then_some(mends)
}

/// A copy of `bytes` with `mends` made, in an unnamed temporary file, mapped.
pub(super) fn apply(bytes: &[u8], mends: &Mends) -> std::io::Result<memmap2::Mmap> {
    let mut file = tempfile::tempfile()?;
    file.write_all(bytes)?;
    for (at, patch) in &mends.patches {
        file.seek(std::io::SeekFrom::Start(*at as u64))?;
        file.write_all(patch)?;
    }
    file.flush()?;
    super::mapped(&file).ok_or_else(|| std::io::Error::other("cannot map the mended copy"))
}

/// Where the central directory lies: it ends where the end record (or zip64's, before its
/// locator) begins, as every writer leaves it, and is as long as the record says; `None` where
/// those do not add up.
fn directory(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let said = super::super::end_records::read(bytes, 0, at)?;
    let end = usize::try_from(said.records).ok()?;
    Some((end.checked_sub(usize::try_from(said.length).ok()?)?, end))
}

/// Mends the extra fields of every central record from `start` to `end`: a field that runs
/// past its record's extra area is passed over, and takes what is left of it; an empty
/// extended timestamp is passed over. Stops at anything that is no central record.
fn mend_extras(bytes: &[u8], start: usize, end: usize, mends: &mut Mends) {
    let mut named = Vec::new();
    let mut widened = Vec::new();
    let mut record = start;
    while record + 46 <= end && bytes[record..].starts_with(b"PK\x01\x02") {
        let (Some(name_len), Some(extra_len), Some(comment_len)) = (
            u16_at(bytes, record + 28),
            u16_at(bytes, record + 30),
            u16_at(bytes, record + 32),
        ) else {
            return;
        };
        let name_at = record + 46;
        let extra_at = name_at + usize::from(name_len);
        let extra_end = extra_at + usize::from(extra_len);
        if extra_end > end {
            return;
        }
        let mut field = extra_at;
        while field + 4 <= extra_end {
            let (Some(id), Some(len)) = (u16_at(bytes, field), u16_at(bytes, field + 2)) else {
                break;
            };
            let left = extra_end - field - 4;
            let overruns = usize::from(len) > left;
            // The 8-byte values a zip64 field holds: one for each of the record's uncompressed
            // size, compressed size and local header's offset that is all ones.
            let saturated = [24, 20, 42]
                .iter()
                .filter(|&&at| u32_at(bytes, record + at) == Some(u32::MAX))
                .count();
            let needed = 8 * saturated;
            if id == ZIP64 && !overruns && usize::from(len) < needed && needed <= left {
                let mut patch = ZIP64.to_le_bytes().to_vec();
                patch.extend_from_slice(&(left as u16).to_le_bytes());
                mends.patches.push((field, patch));
                let name = String::from_utf8_lossy(&bytes[name_at..extra_at]).into_owned();
                widened.push(format!("'{name}' ({len} of its {needed} bytes)"));
                break;
            }
            let empty_time = id == 0x5455 && len == 0;
            if NEVER_MENDED.contains(&id) || !(overruns || empty_time) {
                if overruns {
                    break;
                }
                field += 4 + usize::from(len);
                continue;
            }
            let len = if overruns { left as u16 } else { len };
            let mut patch = PASSED_OVER.to_le_bytes().to_vec();
            patch.extend_from_slice(&len.to_le_bytes());
            mends.patches.push((field, patch));
            let name = String::from_utf8_lossy(&bytes[name_at..extra_at]).into_owned();
            named.push(match overruns {
                true => format!("'{name}' (field 0x{id:04x} runs past its record)"),
                false => format!("'{name}' (an empty extended timestamp)"),
            });
            field += 4 + usize::from(len);
        }
        record = extra_end + usize::from(comment_len);
    }
    if !named.is_empty() {
        let shown = listed(named);
        mends.said.push(format!(
            "damaged extra fields in the zip's central directory were passed over, as unzip and 7-Zip pass over them (the entries keep their DOS times): {shown}"
        ));
    }
    if !widened.is_empty() {
        mends.said.push(format!(
            "zip64 fields in the zip's central directory declare fewer bytes than their records' sizes and offset need: their values were read from the bytes that follow, as unzip reads them: {}",
            listed(widened)
        ));
    }
}

/// At most five of `named`, and how many more.
fn listed(named: Vec<String>) -> String {
    let more = named.len().saturating_sub(5);
    let mut shown = named.into_iter().take(5).collect::<Vec<_>>().join(", ");
    if more > 0 {
        shown.push_str(&format!(" and {more} more"));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip of one stored entry `a` whose central record's extra area is `extra`.
    fn zip_with_central_extra(extra: &[u8]) -> Vec<u8> {
        let mut zip = Vec::new();
        zip.extend_from_slice(b"PK\x03\x04\x0a\0\0\0\0\0\0\0\0\0");
        zip.extend_from_slice(&[0; 12]); // crc, sizes
        zip.extend_from_slice(&[1, 0, 0, 0]); // name length 1, no extra
        zip.push(b'a');
        let directory = zip.len();
        zip.extend_from_slice(b"PK\x01\x02\x14\x03\x0a\0\0\0\0\0\0\0\0\0");
        zip.extend_from_slice(&[0; 12]);
        zip.extend_from_slice(&[1, 0]);
        zip.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        zip.extend_from_slice(&[0; 14]); // comment, disk, attributes, offset 0
        zip.push(b'a');
        zip.extend_from_slice(extra);
        let size = (zip.len() - directory) as u32;
        zip.extend_from_slice(b"PK\x05\x06\0\0\0\0\x01\0\x01\0");
        zip.extend_from_slice(&size.to_le_bytes());
        zip.extend_from_slice(&(directory as u32).to_le_bytes());
        zip.extend_from_slice(&[0, 0]);
        zip
    }

    /// `zip` with `mends` made, as `apply` makes them in its copy.
    fn mended(zip: &[u8], mends: &Mends) -> Vec<u8> {
        let mut mended = zip.to_vec();
        for (at, patch) in &mends.patches {
            mended[*at..*at + patch.len()].copy_from_slice(patch);
        }
        mended
    }

    /// The central record's 32-bit fields at `offsets` (sizes 20 and 24, the offset 42) made
    /// all ones: their values are in a zip64 field.
    fn saturate(zip: &mut [u8], offsets: &[usize]) {
        let record = zip.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
        for at in offsets {
            zip[record + at..record + at + 4].copy_from_slice(&[0xff; 4]);
        }
    }

    #[test]
    fn a_field_past_its_record_and_an_empty_timestamp_are_passed_over() {
        // 0x7875 declares 12 bytes; 11 are there.
        let zip = zip_with_central_extra(&[0x75, 0x78, 12, 0, 1, 4, 0, 0, 0, 0, 4, 0, 0, 0, 0]);
        let mends = find(&zip).unwrap();
        assert!(
            mends.said[0].contains("'a' (field 0x7875 runs past"),
            "{:?}",
            mends.said
        );
        assert!(zip::ZipArchive::new(std::io::Cursor::new(&zip)).is_err());
        let mended = mended(&zip, &mends);
        let archive = zip::ZipArchive::new(std::io::Cursor::new(&mended)).unwrap();
        assert_eq!(archive.len(), 1);
        let zip = zip_with_central_extra(&[0x55, 0x54, 0, 0]);
        assert!(find(&zip).unwrap().said[0].contains("an empty extended timestamp"));
        // A sound one needs nothing, nor a zip64 field its record does not need.
        assert!(find(&zip_with_central_extra(&[0x55, 0x54, 5, 0, 1, 0, 0, 0, 0])).is_none());
        assert!(find(&zip_with_central_extra(&[1, 0, 16, 0, 0])).is_none());
    }

    #[test]
    fn a_short_zip64_field_is_read_on_into_the_bytes_that_follow_as_unzip_reads_it() {
        // The record's sizes and offset saturated; its zip64 field declares 7 bytes of the 24
        // they need, and 24 are there.
        let mut extra = vec![1, 0, 7, 0];
        extra.extend([0; 24]);
        let mut zip = zip_with_central_extra(&extra);
        saturate(&mut zip, &[20, 24, 42]);
        assert!(zip::ZipArchive::new(std::io::Cursor::new(&zip)).is_err());
        let mends = find(&zip).unwrap();
        assert!(
            mends.said[0].contains("'a' (7 of its 24 bytes)"),
            "{:?}",
            mends.said
        );
        let mended = mended(&zip, &mends);
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(&mended)).unwrap();
        assert_eq!(archive.by_index(0).unwrap().size(), 0);
        // The values not there at all: not mended.
        let mut cut = zip_with_central_extra(&[1, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0]);
        saturate(&mut cut, &[20, 24]);
        assert!(find(&cut).is_none());
    }

    #[test]
    fn a_single_disk_zip_that_says_disk_one_is_read_as_disk_zero() {
        let mut zip = zip_with_central_extra(&[]);
        let end = zip.len() - super::super::integrity::END_RECORD_LEN;
        zip[end + 4] = 1;
        let mends = find(&zip).unwrap();
        assert!(
            mends.said[0].contains("disk 1 of a split archive"),
            "{:?}",
            mends.said
        );
        // The directory on another disk: a split zip, not mended.
        zip[end + 6] = 1;
        assert!(find(&zip).is_none());
    }
}
