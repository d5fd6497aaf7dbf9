//! A zip's end records, read from its last bytes: where its central directory is, as the end
//! of central directory record says, or zip64's end record where a locator ends just where the
//! first begins (more than 65,535 entries, or offsets past 4 GiB). A zip read from a file
//! (`zip/mended.rs`) and one still arriving from a store (`remote.rs`) read them alike.

/// The zip64 end record locator's signature.
const LOCATOR: &[u8] = b"PK\x06\x07";

/// The zip64 end of central directory record's signature.
const ZIP64_END: &[u8] = b"PK\x06\x06";

/// What the end records say of the central directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EndRecords {
    /// Its length, in bytes.
    pub length: u64,
    /// Its offset, as the records give it (a zip behind a prefix its offsets do not count has
    /// it elsewhere).
    pub start: u64,
    /// Where the end records begin (zip64's, if there is one): where every writer ends the
    /// directory.
    pub records: u64,
    /// Whether a zip64 end record was read.
    pub zip64: bool,
}

/// The end records of the zip whose last bytes are `bytes` (from its offset `base` on), its
/// end of central directory record at `end` among them; `None` where they cannot be read
/// there (a locator naming a zip64 record that is not there, or not among `bytes`).
pub(crate) fn read(bytes: &[u8], base: u64, end: usize) -> Option<EndRecords> {
    let locator = end
        .checked_sub(20)
        .filter(|&at| bytes[at..].starts_with(LOCATOR));
    let Some(locator) = locator else {
        return Some(EndRecords {
            length: u64::from(u32_at(bytes, end + 12)?),
            start: u64::from(u32_at(bytes, end + 16)?),
            records: base + end as u64,
            zip64: false,
        });
    };
    let at64 = u64_at(bytes, locator + 8)?;
    let local = usize::try_from(at64.checked_sub(base)?).ok()?;
    if !bytes.get(local..)?.starts_with(ZIP64_END) {
        return None;
    }
    Some(EndRecords {
        length: u64_at(bytes, local + 40)?,
        start: u64_at(bytes, local + 48)?,
        records: at64,
        zip64: true,
    })
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}
