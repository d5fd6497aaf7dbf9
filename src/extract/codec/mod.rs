//! Every compression fastwrite reads, in one place: how it is recognised (its magic bytes),
//! its decoder, the suffixes its files carry, what its header says of the file inside, and the
//! cargo feature that builds it. A tar stream and a single compressed file both go through
//! here; a build without a codec still recognises it and says which feature reads it.

#[cfg(any(feature = "gzip", feature = "bzip2"))]
mod members;
#[cfg(any(feature = "gzip", feature = "bzip2", feature = "xz", feature = "zstd"))]
mod units;
#[cfg(feature = "xz")]
mod xz;
#[cfg(feature = "zstd")]
mod zstd;

/// What an error of a decoder says of bytes after the end of its compressed data (see
/// `members.rs`), if that is what it is: a warning for a reader that has all it needs.
pub(crate) fn trailing_data(error: &std::io::Error) -> Option<String> {
    #[cfg(any(feature = "gzip", feature = "bzip2"))]
    if let Some(trailing) = members::TrailingData::of(error) {
        return Some(trailing.to_string());
    }
    let _ = error;
    None
}

use std::io::{BufRead, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far a stream is read on, past a break or a first block that is no tar header, to
/// reach the compressor's check: what it takes to tell a tar damaged before it was compressed,
/// or data that is no tar, from damaged compressed data (its check fails), without
/// decompressing a bomb's terabytes.
pub(crate) const READ_ON_LIMIT: u64 = 1 << 30;

/// How much of a decoder's output its checks have passed. A compressor's check comes after
/// the data it covers: a gzip or bzip2 member's CRC at the member's end, an xz stream's
/// checks by its end, a zstd frame's checksum at the frame's end (see `units.rs`, which notes
/// them). What a reader took from the
/// decoder past [`Verified::bytes`] is not yet known to be what was compressed; the tar source
/// keeps track of the files written from it (see `tar/mod.rs`).
#[derive(Clone, Default, Debug)]
pub(crate) struct Verified(Arc<VerifiedState>);

#[derive(Default, Debug)]
struct VerifiedState {
    bytes: AtomicU64,
    /// The decoder has returned an error other than trailing data: what it gave after
    /// `bytes` will never be verified.
    failed: AtomicBool,
    /// The compressed input has ended (a read of it gave nothing more).
    ended: AtomicBool,
}

impl Verified {
    /// The decoded bytes, from the start, that every check has passed for.
    pub(crate) fn bytes(&self) -> u64 {
        self.0.bytes.load(Ordering::Acquire)
    }

    /// Whether the decoder failed (a check, corrupt or truncated data).
    pub(crate) fn failed(&self) -> bool {
        self.0.failed.load(Ordering::Acquire)
    }

    /// Whether the decoder failed because its input ended inside a unit: the archive is cut
    /// short (a download that stopped), not damaged. What it gave before the cut is exactly
    /// what was compressed (a prefix of a stream decodes to a prefix of its data); only the
    /// check at the unit's end, which would have confirmed it, never came.
    pub(crate) fn cut(&self) -> bool {
        self.failed() && self.0.ended.load(Ordering::Acquire)
    }

    /// A member, stream or frame ended after `bytes` decoded bytes: its checks passed.
    fn up_to(&self, bytes: u64) {
        self.0.bytes.fetch_max(bytes, Ordering::AcqRel);
    }

    /// The decoder failed: what it gave after [`Verified::bytes`] will never be verified.
    fn fail(&self) {
        self.0.failed.store(true, Ordering::Release);
    }
}

/// A compression around a tar stream or a single file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    Gzip,
    Zstd,
    Xz,
    Bzip2,
}

impl Codec {
    /// Every codec, in the order detection tries them.
    pub(crate) const ALL: [Codec; 4] = [Codec::Gzip, Codec::Zstd, Codec::Xz, Codec::Bzip2];

    /// The codec whose magic bytes `head` starts with.
    pub(crate) fn detect(head: &[u8]) -> Option<Codec> {
        let codec = Codec::ALL
            .into_iter()
            .find(|codec| head.starts_with(codec.magic()));
        codec.or_else(|| after_skippable_frames(head))
    }

    fn magic(self) -> &'static [u8] {
        match self {
            Codec::Gzip => b"\x1f\x8b",
            Codec::Zstd => b"\x28\xb5\x2f\xfd",
            Codec::Xz => b"\xfd7zXZ\x00",
            Codec::Bzip2 => b"BZh",
        }
    }

    /// Its name, as its tool is called.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
            Codec::Xz => "xz",
            Codec::Bzip2 => "bzip2",
        }
    }

    /// The suffixes a file compressed with it carries (lower case), which `gzip -d` and the
    /// others take off to name what they write.
    pub(crate) fn suffixes(self) -> &'static [&'static str] {
        match self {
            Codec::Gzip => &[".gz", ".z", ".gzip"],
            Codec::Zstd => &[".zst", ".zstd"],
            Codec::Xz => &[".xz"],
            Codec::Bzip2 => &[".bz2", ".bz"],
        }
    }

    /// The short suffixes that say "a tar compressed with it" (`.tgz`), besides `.tar.*`.
    pub(crate) fn tar_suffixes(self) -> &'static [&'static str] {
        match self {
            Codec::Gzip => &[".tgz", ".taz"],
            Codec::Zstd => &[".tzst"],
            Codec::Xz => &[".txz"],
            Codec::Bzip2 => &[".tbz", ".tbz2"],
        }
    }

    /// Wraps `input` in this codec's decoder, which reads concatenated members or frames
    /// (pigz and `cat a.gz b.gz` make them) to the end; after the last gzip or bzip2 member,
    /// other bytes end the data with `members::TrailingData`. `verified` follows what its
    /// checks have passed. An error means this build has no decoder for it: the message names
    /// the cargo feature that adds one.
    pub(crate) fn decoder<'a>(
        self,
        input: Box<dyn BufRead + Send + 'a>,
        verified: &Verified,
    ) -> anyhow::Result<Box<dyn Read + Send + 'a>> {
        let input = Box::new(EndWatch {
            inner: input,
            verified: verified.clone(),
        });
        match self {
            #[cfg(feature = "gzip")]
            Codec::Gzip => Ok(Box::new(
                units::Units::<_, flate2::bufread::GzDecoder<_>>::new(
                    input,
                    self,
                    verified.clone(),
                ),
            )),
            #[cfg(feature = "zstd")]
            Codec::Zstd => Ok(Box::new(units::Units::<_, zstd::Frame<_>>::new(
                input,
                self,
                verified.clone(),
            ))),
            #[cfg(feature = "xz")]
            Codec::Xz => Ok(Box::new(units::Units::<_, xz::XzDecoder<_>>::new(
                input,
                self,
                verified.clone(),
            ))),
            #[cfg(feature = "bzip2")]
            Codec::Bzip2 => Ok(Box::new(
                units::Units::<_, bzip2::bufread::BzDecoder<_>>::new(input, self, verified.clone()),
            )),
            #[allow(unreachable_patterns)]
            _ => {
                drop((input, verified));
                anyhow::bail!(
                    "{} data, and this build of fastwrite has no {} decoder (cargo feature `{}`)",
                    self.name(),
                    self.name(),
                    self.name()
                )
            }
        }
    }
}

/// A decoder's input, which notes in [`Verified`] when it has ended (see [`Verified::cut`]).
struct EndWatch<'a> {
    inner: Box<dyn BufRead + Send + 'a>,
    verified: Verified,
}

impl Read for EndWatch<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.verified.0.ended.store(true, Ordering::Release);
        }
        Ok(n)
    }
}

impl BufRead for EndWatch<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        let ended = &self.verified.0.ended;
        let buf = self.inner.fill_buf()?;
        if buf.is_empty() {
            ended.store(true, Ordering::Release);
        }
        Ok(buf)
    }

    fn consume(&mut self, amount: usize) {
        self.inner.consume(amount);
    }
}

/// A zstd stream may start with skippable frames (every `pzstd` output does one): magic
/// 0x184D2A50 to 0x184D2A5F, little-endian, then the frame's length. LZ4's frame format has the
/// very same skippable frames, so what follows them decides: zstd's magic, or one beyond what
/// `head` holds (taken for zstd, whose tools write them; an LZ4 file is then refused by the
/// decoder, not misnamed).
fn after_skippable_frames(mut head: &[u8]) -> Option<Codec> {
    let mut frames = 0;
    while let [first, 0x2a, 0x4d, 0x18, a, b, c, d, rest @ ..] = head
        && first & 0xf0 == 0x50
    {
        frames += 1;
        let len = u32::from_le_bytes([*a, *b, *c, *d]);
        match usize::try_from(len).ok().and_then(|len| rest.get(len..)) {
            Some(next) => head = next,
            None => return Some(Codec::Zstd),
        }
    }
    (frames > 0 && head.starts_with(Codec::Zstd.magic())).then_some(Codec::Zstd)
}

/// What the start of a gzip stream says of the file inside: its name and mtime, when given.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct GzipHeader {
    pub name: Option<Vec<u8>>,
    pub mtime: Option<SystemTime>,
}

/// Reads a gzip member's header (RFC 1952) from the stream's first bytes: `FNAME` and `MTIME`
/// (0 means none). Anything it cannot read is simply not given.
pub(crate) fn gzip_header(head: &[u8]) -> GzipHeader {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_are_recognised_by_their_magic() {
        assert_eq!(Codec::detect(b"\x1f\x8b\x08"), Some(Codec::Gzip));
        assert_eq!(Codec::detect(b"\x28\xb5\x2f\xfd"), Some(Codec::Zstd));
        assert_eq!(Codec::detect(b"\xfd7zXZ\x00\x00"), Some(Codec::Xz));
        assert_eq!(Codec::detect(b"BZh91AY"), Some(Codec::Bzip2));
        assert_eq!(Codec::detect(b"PK\x03\x04"), None);
        // pzstd's output starts with a skippable frame (a 4-byte one), then zstd's magic.
        let pzstd = b"\x50\x2a\x4d\x18\x04\0\0\0\x11\0\0\0\x28\xb5\x2f\xfd";
        assert_eq!(Codec::detect(pzstd), Some(Codec::Zstd));
        // Two, the second of the last magic; one longer than what was read.
        let two = b"\x50\x2a\x4d\x18\0\0\0\0\x5f\x2a\x4d\x18\x01\0\0\0x\x28\xb5\x2f\xfd";
        assert_eq!(Codec::detect(two), Some(Codec::Zstd));
        assert_eq!(
            Codec::detect(b"\x5f\x2a\x4d\x18\xff\0\0\0ab"),
            Some(Codec::Zstd)
        );
        // LZ4's skippable frames look the same: its own magic after them is not zstd
        // (libarchive's test_compat_lz4_skippable_frames).
        let lz4 = b"\x50\x2a\x4d\x18\0\0\0\0\x04\x22\x4d\x18\x64\x40";
        assert_eq!(Codec::detect(lz4), None);
        assert_eq!(Codec::detect(b"\x60\x2a\x4d\x18\0\0\0\0"), None);
    }

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
}
