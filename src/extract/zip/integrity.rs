//! Checks of a zip's structure against its own bytes, before anything is written.
//!
//! A zip says everything twice: the central directory at the end lists each entry, and a local
//! header before each entry's data says it again. Two attacks live in the gap:
//! - **Overlap** (the "better zip bomb"): many central directory entries point at the same
//!   compressed data, or at data that contains other entries' headers, so a 100 KB archive
//!   expands to gigabytes. Each entry alone is valid; together they are not an archive any
//!   writer makes. Info-ZIP's unzip refuses such an archive whole, and so does fastwrite.
//! - **Disagreement**: a local header that names another file, another method or other sizes
//!   than its central directory entry. A reader that streams local headers (bsdtar, Python's
//!   `zipfile` in places, a scanner) then sees another archive than one that trusts the
//!   central directory. Such an entry is refused; the others are extracted.
//!
//! What real writers do and is accepted: a local header with the data-descriptor flag stores
//! zeros (or anything) for the CRC and sizes, which come after the data; a zip64 local header
//! stores `0xFFFFFFFF` sizes and the real ones in its zip64 extra field (if that field is
//! missing or short, as in some torch wheels, the sizes are not compared); times, extra fields
//! and "version needed" may differ (they change nothing that is extracted).

/// One entry's bytes in the archive: its local header and compressed data.
#[derive(Debug, Clone)]
pub(super) struct Span {
    /// The entry's index in the central directory (its name is looked up only for a message).
    pub entry: usize,
    pub start: u64,
    pub end: u64,
}

/// Two entries whose bytes overlap, or an entry that runs into the central directory (by
/// their indices).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Overlap {
    pub first: usize,
    /// `None`: the first entry's data runs into the central directory.
    pub second: Option<usize>,
}

impl Overlap {
    /// What overlaps, in words, with the entries' names from `name`.
    pub(super) fn describe(&self, name: impl Fn(usize) -> String) -> String {
        match self.second {
            Some(second) => format!(
                "the entries '{}' and '{}' overlap in the archive (their compressed data is shared)",
                name(self.first),
                name(second)
            ),
            None => format!(
                "the entry '{}' overlaps the archive's central directory",
                name(self.first)
            ),
        }
    }
}

/// The first overlap among `spans` (sorted here), or of the last one with the central
/// directory at `directory_start`.
pub(super) fn find_overlap(spans: &mut [Span], directory_start: u64) -> Option<Overlap> {
    spans.sort_unstable_by_key(|s| (s.start, s.end));
    for pair in spans.windows(2) {
        if pair[0].end > pair[1].start {
            return Some(Overlap {
                first: pair[0].entry,
                second: Some(pair[1].entry),
            });
        }
    }
    let last = spans.last()?;
    (last.end > directory_start).then_some(Overlap {
        first: last.entry,
        second: None,
    })
}

/// What a local header says about its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Header<'a> {
    pub flags: u16,
    pub method: u16,
    pub crc: u32,
    /// `None` where the header defers to zip64 and has no usable zip64 field.
    pub compressed: Option<u64>,
    pub uncompressed: Option<u64>,
    pub name: &'a [u8],
    /// Where the entry's compressed data starts (after the name and extra field).
    pub data_start: u64,
}

const LOCAL_SIGNATURE: &[u8; 4] = b"PK\x03\x04";
const CENTRAL_SIGNATURE: &[u8; 4] = b"PK\x01\x02";
const DATA_DESCRIPTOR_FLAG: u16 = 1 << 3;
const ENCRYPTED_FLAG: u16 = 1;
const ZIP64_FIELD: u16 = 0x0001;
const ZIP64_MARK: u32 = u32::MAX;

pub(super) fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

pub(super) fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

pub(super) fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Parses the local header at `start`. `None`: there is no whole local header there.
pub(super) fn local_header(archive: &[u8], start: u64) -> Option<Header<'_>> {
    let start = usize::try_from(start).ok()?;
    let fixed = archive.get(start..start.checked_add(30)?)?;
    if &fixed[..4] != LOCAL_SIGNATURE {
        return None;
    }
    let name_len = usize::from(u16_at(fixed, 26)?);
    let extra_len = usize::from(u16_at(fixed, 28)?);
    let name_start = start + 30;
    let name = archive.get(name_start..name_start + name_len)?;
    let extra = archive.get(name_start + name_len..name_start + name_len + extra_len)?;
    let (crc, compressed, uncompressed) =
        (u32_at(fixed, 14)?, u32_at(fixed, 18)?, u32_at(fixed, 22)?);
    // A zip64 local header's field holds the uncompressed size, then the compressed size,
    // each only if its 32-bit field is the mark.
    let zip64 = extra_field(extra, ZIP64_FIELD).unwrap_or_default();
    let mut wide = zip64.chunks_exact(8).map(|c| u64_at(c, 0));
    let mut size = |narrow: u32| match narrow {
        ZIP64_MARK => wide.next().flatten(),
        n => Some(u64::from(n)),
    };
    let uncompressed = size(uncompressed);
    let compressed = size(compressed);
    Some(Header {
        flags: u16_at(fixed, 6)?,
        method: u16_at(fixed, 8)?,
        crc,
        compressed,
        uncompressed,
        name,
        data_start: (name_start + name_len + extra_len) as u64,
    })
}

/// The data of the first extra field with this id.
fn extra_field(mut extra: &[u8], id: u16) -> Option<&[u8]> {
    while extra.len() >= 4 {
        let (field, len) = (u16_at(extra, 0)?, usize::from(u16_at(extra, 2)?));
        let data = extra.get(4..4 + len)?;
        if field == id {
            return Some(data);
        }
        extra = &extra[4 + len..];
    }
    None
}

/// The extra fields of the central directory record at `record` (empty where the record is
/// damaged or they run past the archive).
pub(super) fn central_extra(archive: &[u8], record: u64) -> &[u8] {
    let extra = || {
        let record = usize::try_from(record).ok()?;
        let fixed = archive.get(record..record.checked_add(46)?)?;
        let start = record + 46 + usize::from(u16_at(fixed, 28)?);
        archive.get(start..start + usize::from(u16_at(fixed, 30)?))
    };
    extra().unwrap_or_default()
}

/// What the central directory says about an entry (its sizes and CRC as the zip crate read
/// them, zip64 included; the raw fields from the record at `record`).
pub(super) struct Central<'a> {
    pub flags: u16,
    pub method: u16,
    pub crc: u32,
    pub compressed: u64,
    pub uncompressed: u64,
    pub name: &'a [u8],
    /// Its extra fields' bytes (empty if they run past the archive).
    pub extra: &'a [u8],
}

impl<'a> Central<'a> {
    /// Reads the flags, method and raw name of the central directory record at `record`;
    /// the rest comes from the parsed entry.
    pub(super) fn read(
        archive: &'a [u8],
        record: u64,
        crc: u32,
        compressed: u64,
        uncompressed: u64,
    ) -> Option<Central<'a>> {
        let record = usize::try_from(record).ok()?;
        let fixed = archive.get(record..record.checked_add(46)?)?;
        if &fixed[..4] != CENTRAL_SIGNATURE {
            return None;
        }
        let name_len = usize::from(u16_at(fixed, 28)?);
        let extra_len = usize::from(u16_at(fixed, 30)?);
        let extra_start = record + 46 + name_len;
        Some(Central {
            extra: archive
                .get(extra_start..extra_start + extra_len)
                .unwrap_or_default(),
            flags: u16_at(fixed, 8)?,
            method: u16_at(fixed, 10)?,
            crc,
            compressed,
            uncompressed,
            name: archive.get(record + 46..record + 46 + name_len)?,
        })
    }
}

/// The names the central directory at `start` holds more than once, in its order, each once.
/// The directory's records are walked as they lie (46 fixed bytes, then the name, the extra
/// fields and the comment) until one is not a record.
pub(super) fn names_stored_twice(archive: &[u8], start: u64) -> Vec<&[u8]> {
    // Each name seen, and whether it is in `twice` already.
    let mut seen = std::collections::HashMap::new();
    let mut twice = Vec::new();
    let Ok(mut at) = usize::try_from(start) else {
        return twice;
    };
    while let Some(fixed) = archive.get(at..at.saturating_add(46))
        && &fixed[..4] == CENTRAL_SIGNATURE
    {
        let lengths = [28, 30, 32].map(|i| usize::from(u16_at(fixed, i).unwrap_or_default()));
        let Some(name) = archive.get(at + 46..at + 46 + lengths[0]) else {
            break;
        };
        let told = seen.entry(name).or_insert(None);
        match told {
            None => *told = Some(false),
            Some(false) => {
                *told = Some(true);
                twice.push(name);
            }
            Some(true) => {}
        }
        at += 46 + lengths.iter().sum::<usize>();
    }
    twice
}

/// A general-purpose flag: PKWARE's strong encryption (certificates or passwords, with RC2,
/// 3DES or AES), not the traditional or WinZip AES a password opens here.
pub(super) const STRONG_ENCRYPTION: u16 = 1 << 6;
/// A general-purpose flag: the central directory is encrypted too, and local headers' sizes
/// are masked.
pub(super) const DIRECTORY_ENCRYPTED: u16 = 1 << 13;

/// Why an entry with [`STRONG_ENCRYPTION`] fails.
pub(super) fn strong_encryption() -> anyhow::Error {
    anyhow::anyhow!(
        "encrypted with PKWARE's strong encryption, which fastwrite does not read (nor does Info-ZIP's unzip; 7-Zip does)"
    )
}

/// The last end-of-central-directory record's comment, where it runs past the end of the file.
pub(super) struct CutComment {
    /// Where its length field is.
    pub length_at: usize,
    pub declared: u16,
    /// The bytes that are there.
    pub fits: u16,
}

/// The end of central directory record's fixed length (its comment follows).
pub(super) const END_RECORD_LEN: usize = 22;

/// Where the last end of central directory record begins, within the longest comment of the
/// zip's end; `None` where there is none, or it is cut short of its fixed fields.
pub(super) fn end_record(bytes: &[u8]) -> Option<usize> {
    let from = bytes
        .len()
        .saturating_sub(END_RECORD_LEN + usize::from(u16::MAX));
    let at = from + bytes[from..].windows(4).rposition(|w| w == b"PK\x05\x06")?;
    (at + END_RECORD_LEN <= bytes.len()).then_some(at)
}

/// Finds the last end-of-central-directory record (searching back from the end, as Info-ZIP's
/// unzip does), and says if its comment runs past the end of the file. The zip crate would
/// then look further back for a record whose comment fits, and may find another archive's
/// (Go's `comment-truncated.zip` hides one there): unzip, bsdtar, 7-Zip and Python read the
/// last record, with its comment cut short, and fastwrite reads what they read.
pub(super) fn cut_comment(bytes: &[u8]) -> Option<CutComment> {
    let at = end_record(bytes)?;
    let after = at + END_RECORD_LEN;
    let declared = u16_at(&bytes[at..after], 20)?;
    let fits = u16::try_from(bytes.len() - after).ok()?;
    (declared > fits).then_some(CutComment {
        length_at: at + 20,
        declared,
        fits,
    })
}

/// How a local header disagrees with its central directory entry in a way that changes what
/// is extracted, or `None`.
pub(super) fn disagreement(local: &Header<'_>, central: &Central<'_>) -> Option<String> {
    if local.name != central.name {
        return Some(format!(
            "its local header names '{}'",
            String::from_utf8_lossy(local.name)
        ));
    }
    if local.method != central.method {
        return Some(format!(
            "its local header says compression method {}, the central directory {}",
            local.method, central.method
        ));
    }
    let flag = |bit: u16| (local.flags & bit != 0, central.flags & bit != 0);
    let (local_encrypted, central_encrypted) = flag(ENCRYPTED_FLAG);
    if local_encrypted != central_encrypted {
        return Some("its local header and the central directory disagree on encryption".into());
    }
    if local.flags & DATA_DESCRIPTOR_FLAG != 0 {
        // The CRC and sizes follow the data; the zip crate checks the CRC the central
        // directory states, and fastwrite the size, as the entry is extracted.
        return None;
    }
    if local.crc != central.crc {
        return Some(format!(
            "its local header says CRC {:08x}, the central directory {:08x}",
            local.crc, central.crc
        ));
    }
    let sizes = [
        ("compressed", local.compressed, central.compressed),
        ("uncompressed", local.uncompressed, central.uncompressed),
    ];
    for (what, local, central) in sizes {
        if let Some(local) = local.filter(|&l| l != central) {
            return Some(format!(
                "its local header says {what} size {local}, the central directory {central}"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(entry: usize, start: u64, end: u64) -> Span {
        Span { entry, start, end }
    }

    #[test]
    fn overlaps_are_found_whatever_the_order() {
        let mut clean = vec![span(1, 40, 80), span(0, 0, 40), span(2, 80, 81)];
        assert_eq!(find_overlap(&mut clean, 81), None);
        let mut shared = vec![span(0, 0, 40), span(1, 80, 120), span(2, 0, 40)];
        let found = find_overlap(&mut shared, 200).unwrap();
        assert_eq!((found.first, found.second), (0, Some(2)));
        let names = |i: usize| ["a", "b", "c"][i].to_string();
        assert_eq!(
            found.describe(names),
            "the entries 'a' and 'c' overlap in the archive (their compressed data is shared)"
        );
        // Data that contains the next entry's header (the "quoted overlap" of a better bomb).
        let mut quoted = vec![span(0, 0, 100), span(1, 50, 100)];
        assert!(find_overlap(&mut quoted, 100).unwrap().second.is_some());
        let mut into_directory = vec![span(0, 0, 101)];
        let found = find_overlap(&mut into_directory, 100);
        assert_eq!(
            found,
            Some(Overlap {
                first: 0,
                second: None
            })
        );
        assert!(found.unwrap().describe(names).contains("central directory"));
        assert_eq!(find_overlap(&mut [], 0), None);
    }

    fn local(extra: &[u8], sizes: (u32, u32)) -> Vec<u8> {
        let mut h = Vec::from(*LOCAL_SIGNATURE);
        h.extend(20u16.to_le_bytes());
        h.extend(0u16.to_le_bytes()); // flags
        h.extend(8u16.to_le_bytes()); // deflate
        h.extend([0; 4]); // time, date
        h.extend(0xdead_beefu32.to_le_bytes());
        h.extend(sizes.0.to_le_bytes());
        h.extend(sizes.1.to_le_bytes());
        h.extend(1u16.to_le_bytes());
        h.extend((extra.len() as u16).to_le_bytes());
        h.push(b'a');
        h.extend(extra);
        h
    }

    #[test]
    fn local_headers_are_read_with_their_zip64_sizes() {
        let plain = local(&[], (10, 20));
        let header = local_header(&plain, 0).unwrap();
        assert_eq!(
            (header.compressed, header.uncompressed, header.name),
            (Some(10), Some(20), &b"a"[..])
        );
        assert_eq!(header.data_start, 31);

        let mut zip64 = Vec::from(ZIP64_FIELD.to_le_bytes());
        zip64.extend(16u16.to_le_bytes());
        zip64.extend((5u64 << 32).to_le_bytes()); // uncompressed first
        zip64.extend((3u64 << 32).to_le_bytes());
        let wide = local(&zip64, (ZIP64_MARK, ZIP64_MARK));
        let header = local_header(&wide, 0).unwrap();
        assert_eq!(
            (header.compressed, header.uncompressed),
            (Some(3 << 32), Some(5 << 32))
        );
        // Marked but without the field: unknown, not compared.
        let missing = local(&[], (ZIP64_MARK, 7));
        assert_eq!(local_header(&missing, 0).unwrap().compressed, None);

        assert_eq!(local_header(&plain[..29], 0), None, "truncated");
        assert_eq!(local_header(&plain, 1), None, "no signature there");
        assert_eq!(local_header(&plain, u64::MAX), None);
    }

    #[test]
    fn a_comment_cut_short_is_found_in_the_last_end_record() {
        let eocd = |comment_len: u16| {
            let mut record = b"PK\x05\x06".to_vec();
            record.extend_from_slice(&[0; 16]);
            record.extend_from_slice(&comment_len.to_le_bytes());
            record
        };
        let whole = [b"data".to_vec(), eocd(3), b"abc".to_vec()].concat();
        assert!(cut_comment(&whole).is_none());
        // An earlier record whose comment fits, then the last one, cut short by 2 bytes.
        let cut = [eocd(0), eocd(3), b"a".to_vec()].concat();
        let found = cut_comment(&cut).expect("cut short");
        assert_eq!(
            (found.length_at, found.declared, found.fits),
            (22 + 20, 3, 1)
        );
        assert!(cut_comment(b"PK\x05\x06 too short").is_none());
        assert!(cut_comment(b"no record at all").is_none());
    }

    #[test]
    fn only_disagreements_that_change_the_extraction_count() {
        let bytes = local(&[], (10, 20));
        let header = local_header(&bytes, 0).unwrap();
        let central = |name: &'static [u8], method, crc, compressed| Central {
            flags: 0,
            method,
            crc,
            compressed,
            uncompressed: 20,
            name,
            extra: &[],
        };
        assert_eq!(
            disagreement(&header, &central(b"a", 8, 0xdead_beef, 10)),
            None
        );
        for (other, says) in [
            (central(b"b", 8, 0xdead_beef, 10), "names 'a'"),
            (central(b"a", 0, 0xdead_beef, 10), "method 8"),
            (central(b"a", 8, 1, 10), "CRC deadbeef"),
            (central(b"a", 8, 0xdead_beef, 11), "compressed size 10"),
        ] {
            let found = disagreement(&header, &other).unwrap();
            assert!(found.contains(says), "{found}");
        }
        // With a data descriptor the header's CRC and sizes mean nothing.
        let mut deferred = header.clone();
        deferred.flags = DATA_DESCRIPTOR_FLAG;
        deferred.crc = 0;
        assert_eq!(disagreement(&deferred, &central(b"a", 8, 7, 99)), None);
    }
}
