//! What an input is, told by its first bytes: a container (zip, tar) or a compression
//! ([`Codec`]) around a tar or a single file. Tar's header checksum and numeric fields live here
//! because detection needs them in every build, the tar reader or not.

use std::path::Path;

use anyhow::{anyhow, bail};

use super::codec::Codec;

/// A tar block (header or data) is this large.
pub(crate) const BLOCK: usize = 512;

/// What the first bytes of an input say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Zip,
    Tar,
    Compressed(Codec),
}

/// Recognises a format from an input's first bytes (up to 512, a tar header's size).
pub(crate) fn detect(head: &[u8]) -> Option<Format> {
    let starts = |magic: &[u8]| head.starts_with(magic);
    // A split archive's marker ("PK\x07\x08", or "PK00" from PKZIP) may start one that fits in
    // a single part.
    if starts(b"PK\x03\x04")
        || starts(b"PK\x05\x06")
        || starts(b"PK\x07\x08")
        || starts(b"PK00PK\x03\x04")
    {
        Some(Format::Zip)
    } else if let Some(codec) = Codec::detect(head) {
        Some(Format::Compressed(codec))
    } else if is_tar_header(head) {
        Some(Format::Tar)
    } else {
        None
    }
}

/// Whether `path` is a file fastwrite reads, by its first bytes: a zip, a tar, or a file
/// compressed with gzip, zstd, xz or bzip2 (a self-extracting zip, whose start is a program,
/// is not told here). A program can ask it before [`extract`](crate::extract()); the command
/// line asks it to tell several archives from patterns.
pub fn recognised(path: &std::path::Path) -> bool {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::with_capacity(512);
    file.take(512).read_to_end(&mut head).is_ok() && detect(&head).is_some()
}

/// How far into a stream that no format's magic starts a zip's first local header is looked
/// for (a self-extractor's program, padding, a spanning marker before it): as far as the
/// farthest of libarchive's readers that look behind a self-extractor's program (128 KiB for
/// RAR and cab, 384 KiB for 7-Zip, 512 KiB for RAR 5; its zip reader does not look).
pub(crate) const ZIP_SEARCH: usize = 512 << 10;

/// How much of a stream is read to look for a zip behind a prefix: the search, and a local
/// header that starts inside it, its name and extra field whole.
pub(crate) const ZIP_LOOK: usize = ZIP_SEARCH + 3 + 30 + 2 * u16::MAX as usize;

/// Where a zip's first local header is in the first bytes of a stream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ZipStart {
    At(usize),
    /// A candidate runs past what was read: read more (or, at the end of the stream, there
    /// is none).
    Unknown,
    Nowhere,
}

/// Finds a zip's first local header within [`ZIP_SEARCH`] bytes of `head`, the start of a
/// stream (`complete`: all of it, or all that will be looked at). A header is taken where
/// its signature starts 30 bytes whose fields are what a writer puts there (a known method, no
/// reserved flag, a name without NUL) and an extra field made of whole fields: random bytes
/// almost never pass, and a program's own copy of the signature (a self-extractor compares
/// with it) has no such header after it. An input that starts with another format's magic is
/// that format, whatever it holds; but a Windows program may be a self-extractor.
pub(crate) fn zip_start(head: &[u8], complete: bool) -> ZipStart {
    if !head.starts_with(b"MZ") && other_format(head).is_some() {
        return ZipStart::Nowhere;
    }
    let search = &head[..head.len().min(ZIP_SEARCH + 3)];
    let mut from = 0;
    while let Some(p) = search[from..].windows(4).position(|w| w == b"PK\x03\x04") {
        let at = from + p;
        match plausible_local_header(&head[at..]) {
            Some(true) => return ZipStart::At(at),
            None if !complete => return ZipStart::Unknown,
            _ => from = at + 1,
        }
    }
    if !complete && head.len() < ZIP_SEARCH + 3 {
        ZipStart::Unknown
    } else {
        ZipStart::Nowhere
    }
}

/// Whether the local header at the start of `h` is one a writer made; `None`: it runs past
/// the end of `h`.
fn plausible_local_header(h: &[u8]) -> Option<bool> {
    const METHODS: &[u16] = &[
        0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 14, 18, 19, 20, 93, 94, 95, 96, 97, 98, 99,
    ];
    // Bits 7-10, 12, 14 and 15 of the flags are reserved.
    const RESERVED_FLAGS: u16 = 0xd780;
    let fixed = h.get(..30)?;
    let u16_at = |i: usize| u16::from_le_bytes([fixed[i], fixed[i + 1]]);
    let (version, flags, method) = (u16_at(4), u16_at(6), u16_at(8));
    let (name_len, extra_len) = (usize::from(u16_at(26)), usize::from(u16_at(28)));
    if version & 0xff > 63
        || flags & RESERVED_FLAGS != 0
        || !METHODS.contains(&method)
        || name_len == 0
    {
        return Some(false);
    }
    let name = h.get(30..30 + name_len)?;
    let mut extra = h.get(30 + name_len..30 + name_len + extra_len)?;
    if name.contains(&0) {
        return Some(false);
    }
    // Whole fields, but for a few bytes of zeros (an aligner's padding).
    while let [_, _, a, b, rest @ ..] = extra {
        let len = usize::from(u16::from_le_bytes([*a, *b]));
        let Some(after) = rest.get(len..) else {
            return Some(false);
        };
        extra = after;
    }
    Some(extra.iter().all(|&b| b == 0))
}

/// Another format's name, by its magic: what fastwrite does not read (and, but for a Windows
/// program, no self-extracting zip either).
fn other_format(head: &[u8]) -> Option<&'static str> {
    const OTHERS: &[(&[u8], &str)] = &[
        (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
        (b"Rar!\x1a\x07", "a RAR archive"),
        (b"\x04\x22\x4d\x18", "an LZ4 file"),
        (b"LZIP", "an lzip file"),
        (b"\x1f\x9d", "a compress (.Z) file"),
        (b"\x89LZO\0", "an lzop file"),
        (b"MSCF", "a Windows cabinet (.cab)"),
        (b"!<arch>\n", "an ar archive (.a, .deb)"),
        (b"070701", "a cpio archive"),
        (b"070702", "a cpio archive"),
        (b"070707", "a cpio archive"),
        (b"\xc7\x71", "a cpio archive"),
        (b"\x71\xc7", "a cpio archive"),
        (b"xar!", "a xar archive"),
        (b"\xed\xab\xee\xdb", "an RPM package"),
        (
            b"MZ",
            "a Windows program (not a self-extracting zip: no zip was found at its end)",
        ),
    ];
    OTHERS
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|&(_, what)| what)
}

/// What an input fastwrite does not read is, from its first bytes, for the message that
/// refuses it: another format named ("a 7z archive"), text, or neither.
pub(crate) fn not_readable(head: &[u8]) -> String {
    const READ: &str =
        "fastwrite reads zip, tar, and tar or single files compressed with gzip, zstd, xz or bzip2";
    // Past skippable frames (zstd's and LZ4's): what follows says which it is.
    let mut head = head;
    while let [first, 0x2a, 0x4d, 0x18, a, b, c, d, rest @ ..] = head
        && first & 0xf0 == 0x50
        && let Some(next) = usize::try_from(u32::from_le_bytes([*a, *b, *c, *d]))
            .ok()
            .and_then(|len| rest.get(len..))
    {
        head = next;
    }
    if let Some(what) = other_format(head) {
        return format!("{what}, which fastwrite does not read ({READ})");
    }
    let text = std::str::from_utf8(head).is_ok_and(|t| {
        t.chars()
            .all(|c| !c.is_control() || c.is_ascii_whitespace())
    });
    if text {
        return format!("text, not an archive ({READ})");
    }
    format!("not an archive fastwrite knows ({READ})")
}

/// A tar header is recognised by its checksum, which old v7 archives (with no `ustar` magic)
/// have too.
pub(crate) fn is_tar_header(head: &[u8]) -> bool {
    let Some(header) = head.get(..BLOCK) else {
        return false;
    };
    // An archive with no entries is just its end-of-archive blocks of zeros.
    header.iter().all(|&b| b == 0) || checksum_ok(header)
}

/// Whether `block` is a tar header: its checksum field matches the sum of its bytes (with
/// the field itself counted as spaces), summed unsigned or, as some old writers did, signed.
pub(crate) fn checksum_ok(block: &[u8]) -> bool {
    let Some(block) = block.get(..BLOCK) else {
        return false;
    };
    let Ok(stored) = number(&block[148..156]) else {
        return false;
    };
    let (mut unsigned, mut signed) = (0i64, 0i64);
    for (i, &b) in block.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned += i64::from(b);
        signed += i64::from(b as i8);
    }
    stored == unsigned || stored == signed
}

/// A header's numeric field: octal text (one leading NUL and leading spaces skipped, ended by a
/// space or NUL) or GNU's base-256 (first byte 0x80 positive, 0xff negative, then big-endian bytes).
pub(crate) fn number(field: &[u8]) -> anyhow::Result<i64> {
    if let Some(&first) = field.first()
        && first & 0x80 != 0
    {
        let negative = first & 0x40 != 0;
        let mut value: i128 = if negative { -1 } else { 0 };
        for (i, &byte) in field.iter().enumerate() {
            let byte = if i == 0 {
                if negative { byte } else { byte & 0x7f }
            } else {
                byte
            };
            value = value
                .checked_mul(256)
                .map(|v| v | i128::from(byte))
                .filter(|v| v.unsigned_abs() < 1 << 100)
                .ok_or_else(|| anyhow!("a base-256 number is too large"))?;
        }
        return i64::try_from(value).map_err(|_| anyhow!("a base-256 number is too large"));
    }
    // As GNU tar reads it: one leading NUL (a buggy old writer's overflow from the field
    // before), then leading spaces; the number ends at the next space or NUL. So a field of
    // NULs then digits is 0, as GNU tar and bsdtar both read it.
    let field = field.strip_prefix(b"\0").unwrap_or(field);
    let digits: Vec<u8> = field
        .iter()
        .copied()
        .skip_while(|&b| b == b' ')
        .take_while(|&b| b != b' ' && b != 0)
        .collect();
    if digits.is_empty() {
        return Ok(0);
    }
    let mut value: i64 = 0;
    for &digit in &digits {
        if !(b'0'..=b'7').contains(&digit) {
            bail!(
                "'{}' is not an octal number",
                String::from_utf8_lossy(field).trim_matches(['\0', ' '])
            );
        }
        value = value
            .checked_mul(8)
            .and_then(|v| v.checked_add(i64::from(digit - b'0')))
            .ok_or_else(|| anyhow!("an octal number is too large"))?;
    }
    Ok(value)
}

/// Whether a name says "compressed tar" (`.tar.gz`, `.tgz`, ...): then a stream that starts
/// with a block of zeros is an empty tar, not a file of zeros.
pub(crate) fn named_like_a_tar(path: &Path) -> bool {
    let name = path.to_string_lossy().to_ascii_lowercase();
    name.contains(".tar.")
        || Codec::ALL
            .iter()
            .flat_map(|codec| codec.tar_suffixes())
            .any(|suffix| name.ends_with(suffix))
}

/// An input fastwrite does not read ([`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)),
/// about the input `label` names.
pub(super) fn unsupported(label: &str, why: anyhow::Error) -> anyhow::Error {
    let path = Path::new(label.trim_matches('\''));
    crate::error::Error::named(path, crate::error::ErrorKind::Unsupported, why).into()
}

/// Why an input this build recognises cannot be read: the feature that reads it is off
/// ([`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)). `kind` says what it is ("a zip
/// archive"), `kinds` what the build does not read ("zip archives").
#[cfg(any(
    not(all(feature = "zip", feature = "tar")),
    all(feature = "image", not(feature = "http"))
))]
pub(crate) fn not_built(label: &str, kind: &str, kinds: &str, feature: &str) -> anyhow::Error {
    let why = anyhow::anyhow!(
        "{label} is {kind}, and this build of fastwrite does not read {kinds} (cargo feature `{feature}`)"
    );
    unsupported(label, why)
}

/// An input recognised, of a format this build does not read: extracting, listing or reading
/// it says which cargo feature reads it, and nothing is written.
#[cfg(not(all(feature = "zip", feature = "tar")))]
pub(super) struct NotBuilt {
    label: String,
    kind: &'static str,
    kinds: &'static str,
    feature: &'static str,
}

#[cfg(not(all(feature = "zip", feature = "tar")))]
impl NotBuilt {
    /// A zip, `label` naming it.
    #[cfg(not(feature = "zip"))]
    pub(super) fn zip(label: String) -> Self {
        let (kind, kinds, feature) = ("a zip archive", "zip archives", "zip");
        NotBuilt {
            label,
            kind,
            kinds,
            feature,
        }
    }

    /// A tar, `label` naming it.
    #[cfg(not(feature = "tar"))]
    pub(super) fn tar(label: String) -> Self {
        let (kind, kinds, feature) = ("a tar archive", "tar archives", "tar");
        NotBuilt {
            label,
            kind,
            kinds,
            feature,
        }
    }

    fn error(&self) -> anyhow::Error {
        not_built(&self.label, self.kind, self.kinds, self.feature)
    }
}

#[cfg(not(all(feature = "zip", feature = "tar")))]
impl super::source::Source for NotBuilt {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn extract(
        self: Box<Self>,
        _: &Path,
        _: &crate::place::Place,
        _: &crate::options::Options,
        _: &super::select::Chooser,
    ) -> anyhow::Result<crate::report::Report> {
        Err(self.error())
    }

    fn list(
        self: Box<Self>,
        _: &Path,
        _: &crate::options::Options,
        _: &super::select::Chooser,
        _: &mut dyn FnMut(&super::listed::Listed),
        _: &mut crate::report::Report,
    ) -> anyhow::Result<()> {
        Err(self.error())
    }

    fn read(
        self: Box<Self>,
        _: &Path,
        _: &crate::options::Options,
        _: &super::select::Chooser,
        _: &mut super::give::Each<'_>,
    ) -> anyhow::Result<crate::report::Report> {
        Err(self.error())
    }
}

/// Why an input compressed with `codec` cannot be read: this build has no decoder for it. Every
/// cargo feature it needs is named, so that one rebuild reads it: `tar` too, for an input named
/// as a compressed tar where this build has none (what it holds cannot be looked at).
pub(crate) fn codec_not_built(label: &str, codec: Codec, named_tar: bool) -> anyhow::Error {
    let name = codec.name();
    let needs = match (cfg!(feature = "tar"), named_tar) {
        (true, _) => format!("cargo feature `{name}`"),
        (false, true) => format!("cargo features `{name}` and `tar`"),
        (false, false) => format!("cargo feature `{name}`; and `tar`, if it holds a tar archive"),
    };
    let why = anyhow::anyhow!(
        "cannot read {label}: {name} data, and this build of fastwrite has no {name} decoder ({needs})"
    );
    unsupported(label, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_header(magic: &[u8; 6]) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..5].copy_from_slice(b"a.txt");
        h[100..107].copy_from_slice(b"0000644");
        h[257..263].copy_from_slice(magic);
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        h
    }

    #[test]
    fn formats_are_recognised_by_content() {
        assert_eq!(detect(b"PK\x03\x04rest"), Some(Format::Zip));
        assert_eq!(detect(b"PK\x05\x06"), Some(Format::Zip));
        assert_eq!(
            detect(b"\x1f\x8b\x08"),
            Some(Format::Compressed(Codec::Gzip))
        );
        assert_eq!(
            detect(b"\x28\xb5\x2f\xfd"),
            Some(Format::Compressed(Codec::Zstd))
        );
        assert_eq!(
            detect(b"\xfd7zXZ\x00\x00"),
            Some(Format::Compressed(Codec::Xz))
        );
        assert_eq!(detect(b"BZh91AY"), Some(Format::Compressed(Codec::Bzip2)));
        assert_eq!(detect(&tar_header(b"ustar\0")), Some(Format::Tar));
        // Old v7 headers have no magic; the checksum gives them away.
        assert_eq!(detect(&tar_header(b"\0\0\0\0\0\0")), Some(Format::Tar));
        let mut bad = tar_header(b"ustar\0");
        bad[0] ^= 1;
        assert_eq!(detect(&bad), None, "a wrong checksum is not a tar header");
        // Old writers pad the checksum with leading spaces.
        let mut padded = tar_header(b"\0\0\0\0\0\0");
        let sum = std::str::from_utf8(&padded[148..154]).unwrap().to_string();
        let digits = sum.trim_start_matches('0').to_string();
        let field = format!("{digits:>6}\0 ");
        padded[148..156].copy_from_slice(field.as_bytes());
        assert_eq!(detect(&padded), Some(Format::Tar), "{field:?}");
        assert_eq!(detect(b"hello world"), None);
        assert!(not_readable(b"7z\xbc\xaf\x27\x1c\0\x04").starts_with("a 7z archive, which"));
        assert!(not_readable(b"Rar!\x1a\x07\x01\0").starts_with("a RAR archive"));
        assert!(not_readable(b"\x04\x22\x4d\x18\x64").starts_with("an LZ4 file"));
        assert!(not_readable(b"some notes\nand more\n").starts_with("text, not an archive"));
        assert!(not_readable(b"\x01\x02\xff\xfe").starts_with("not an archive fastwrite knows"));
        assert_eq!(
            detect(&[0u8; 1024]),
            Some(Format::Tar),
            "an empty tar is its end blocks"
        );
        assert_eq!(detect(b"PK00PK\x03\x04\x14\0"), Some(Format::Zip));
    }

    /// A local header of a one-byte name, `extra` its extra field.
    fn local_header(extra: &[u8]) -> Vec<u8> {
        let mut h = b"PK\x03\x04\x14\0\0\0\x08\0".to_vec();
        h.extend([0; 16]);
        h.extend(1u16.to_le_bytes());
        h.extend((extra.len() as u16).to_le_bytes());
        h.push(b'a');
        h.extend(extra);
        h
    }

    #[test]
    fn a_zip_is_found_behind_a_prefix_within_a_bound() {
        let header = local_header(&[0x55, 0x54, 1, 0, 0]);
        // A program that holds the signature (a self-extractor compares with it), then the zip.
        let mut sfx = b"MZ\x90\0 cmp eax, PK\x03\x04 and so on".to_vec();
        let at = sfx.len();
        sfx.extend(&header);
        assert_eq!(zip_start(&sfx, true), ZipStart::At(at));
        // Cut inside the header: more must be read to know.
        assert_eq!(zip_start(&sfx[..at + 20], false), ZipStart::Unknown);
        assert_eq!(zip_start(&sfx[..at + 20], true), ZipStart::Nowhere);
        // Another format's magic first: that format, whatever it holds.
        let mut seven = b"7z\xbc\xaf\x27\x1c\0\x04".to_vec();
        seven.extend(&header);
        assert_eq!(zip_start(&seven, true), ZipStart::Nowhere);
        // An extra field that is not made of whole fields: not a header.
        let mut broken = vec![0xff; 100];
        broken.extend(local_header(&[0x55, 0x54, 9, 0, 0]));
        assert_eq!(zip_start(&broken, true), ZipStart::Nowhere);
        // Past the bound: not looked for.
        let mut far = vec![0xffu8; ZIP_SEARCH + 1];
        far.extend(&header);
        assert_eq!(zip_start(&far, true), ZipStart::Nowhere);
        let mut near = vec![0xffu8; ZIP_SEARCH - 1];
        near.extend(&header);
        assert_eq!(zip_start(&near, true), ZipStart::At(ZIP_SEARCH - 1));
    }

    #[test]
    fn random_bytes_are_not_taken_for_a_zip_behind_a_prefix() {
        // Random bytes, each 4 KiB of them given a planted signature: no header behind it.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut bytes = Vec::with_capacity(ZIP_SEARCH);
        while bytes.len() < ZIP_SEARCH {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bytes.extend(state.to_le_bytes());
        }
        for at in (0..ZIP_SEARCH - 4).step_by(4096) {
            bytes[at..at + 4].copy_from_slice(b"PK\x03\x04");
        }
        assert_eq!(zip_start(&bytes, true), ZipStart::Nowhere);
    }
}
