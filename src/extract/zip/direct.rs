//! Entries read straight from the mapped archive, without the `zip` crate's reader.
//!
//! - A big stored entry is written from the mapping itself with one `write`, once its CRC-32 is
//!   checked there (reading it through the `zip` crate would copy it into a buffer first).
//! - A deflated entry of up to [`WHOLE_INFLATE_MAX`] is inflated in one call by libdeflate into
//!   the writer's buffer: on the kernel tree's data libdeflate spends about half of zlib-rs's
//!   CPU time (0.81 s of user time against 1.51 s for the 1.3 GB, docs/benchmarks.md), because
//!   it decodes a whole buffer at once instead of a stream. Bigger entries are streamed as
//!   before, so memory stays bounded by [`WHOLE_INFLATE_MAX`] per writer.
//!
//! Anything else (encrypted, another method, sizes that do not add up) is `None`: the caller
//! reads it the usual way, through the `zip` crate. Either way, nothing of an entry whose data
//! is corrupt is written.

use libdeflater::{DecompressionError, Decompressor};
use zip::CompressionMethod;

use super::Archive;

/// A stored (uncompressed) entry this large is written straight from the mapped archive.
const STRAIGHT_FROM_THE_MAP: u64 = 1 << 20;

/// The largest deflated entry inflated whole; each writer's buffer grows to at most this.
const WHOLE_INFLATE_MAX: u64 = 16 << 20;

/// One writer's decoder and output buffer, reused from entry to entry.
pub(super) struct Direct {
    decompressor: Decompressor,
    /// Never shrinks, only grows (up to [`WHOLE_INFLATE_MAX`]): its bytes are overwritten per
    /// entry, so a small entry after a big one costs no zeroing.
    buf: Vec<u8>,
}

impl Direct {
    pub(super) fn new() -> Direct {
        Direct {
            decompressor: Decompressor::new(),
            buf: Vec::new(),
        }
    }

    /// The entry's data, checked against its CRC-32, or `None` when it is not read here.
    pub(super) fn data<'a>(
        &'a mut self,
        archive: &mut Archive<'_>,
        bytes: &'a [u8],
        index: usize,
    ) -> Option<anyhow::Result<&'a [u8]>> {
        let file = archive.by_index_raw(index).ok()?;
        let (method, size, crc) = (file.compression(), file.size(), file.crc32());
        if file.encrypted() {
            return None;
        }
        let start = usize::try_from(file.data_start()?).ok()?;
        let end = start.checked_add(usize::try_from(file.compressed_size()).ok()?)?;
        let raw = bytes.get(start..end)?;
        let data = match method {
            CompressionMethod::Stored if size >= STRAIGHT_FROM_THE_MAP => {
                if raw.len() as u64 != size {
                    return None;
                }
                raw
            }
            CompressionMethod::Deflated if size <= WHOLE_INFLATE_MAX => {
                match self.inflate(raw, size as usize) {
                    Ok(data) => data,
                    Err(e) => return Some(Err(e)),
                }
            }
            _ => return None,
        };
        let actual = crc32fast::hash(data);
        Some(if actual == crc {
            Ok(data)
        } else {
            Err(anyhow::anyhow!(
                "the data is corrupt: its CRC-32 checksum is {actual:08x}, not the {crc:08x} \
                 the archive declares (nothing of it was written)"
            ))
        })
    }

    /// Inflates `raw` into the buffer; exactly `size` bytes or an error.
    fn inflate(&mut self, raw: &[u8], size: usize) -> anyhow::Result<&[u8]> {
        if self.buf.len() < size {
            self.buf.resize(size, 0);
        }
        // libdeflate stops at the end of the room it is given: a stream that would make more
        // than the declared size is `InsufficientSpace`, never a byte past it.
        let made = match self
            .decompressor
            .deflate_decompress(raw, &mut self.buf[..size])
        {
            Ok(made) => made,
            Err(DecompressionError::BadData) => {
                anyhow::bail!("the compressed data is corrupt (deflate: invalid data)")
            }
            Err(DecompressionError::InsufficientSpace) => anyhow::bail!(
                "the compressed data makes more than the {size} bytes the archive declares"
            ),
        };
        if made != size {
            anyhow::bail!(
                "the compressed data makes {made} bytes, not the {size} the archive declares"
            );
        }
        Ok(&self.buf[..size])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deflate(data: &[u8]) -> Vec<u8> {
        let mut c = libdeflater::Compressor::new(libdeflater::CompressionLvl::default());
        let mut out = vec![0; c.deflate_compress_bound(data.len())];
        let n = c.deflate_compress(data, &mut out).unwrap();
        out.truncate(n);
        out
    }

    #[test]
    fn inflates_exactly_the_declared_size() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let raw = deflate(&data);
        let mut d = Direct::new();
        assert_eq!(d.inflate(&raw, data.len()).unwrap(), &data[..]);
        // A smaller entry after it reuses the buffer and gets only its own bytes.
        let small = deflate(b"hello");
        assert_eq!(d.inflate(&small, 5).unwrap(), b"hello");
        assert_eq!(d.inflate(&deflate(b""), 0).unwrap(), b"");
    }

    #[test]
    fn a_size_that_does_not_match_the_data_is_an_error() {
        let data = vec![9u8; 10_000];
        let raw = deflate(&data);
        let mut d = Direct::new();
        let more = d.inflate(&raw, 100).unwrap_err().to_string();
        assert!(more.contains("more than the 100 bytes"), "{more}");
        let fewer = d.inflate(&raw, 20_000).unwrap_err().to_string();
        assert!(
            fewer.contains("makes 10000 bytes, not the 20000"),
            "{fewer}"
        );
        // The buffer, grown to 20,000 bytes, still holds back a stream that overshoots by one.
        let one_more = d.inflate(&raw, 9_999).unwrap_err().to_string();
        assert!(one_more.contains("more than the 9999 bytes"), "{one_more}");
    }

    #[test]
    fn corrupt_data_is_an_error() {
        let mut raw = deflate(&vec![1u8; 50_000]);
        raw[0] = 0xff; // reserved block type 3
        let e = Direct::new().inflate(&raw, 50_000).unwrap_err().to_string();
        assert!(e.contains("corrupt"), "{e}");
    }
}
