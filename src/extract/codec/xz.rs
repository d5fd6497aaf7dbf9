//! The xz decoder: liblzma's multithreaded one, over every stream of a concatenation.
//!
//! xz files made by `xz -T0` (5.4 and later, the default since) and Debian's source tarballs
//! hold many independent blocks whose sizes are in their headers: liblzma decodes those on
//! every core, in order. A file of one block (older `xz` without `-T`) decodes on one thread,
//! exactly as before: the multithreaded decoder falls back by itself.
//!
//! liblzma's threaded decoder cannot be told to go on past the end of a stream (the crate's
//! builder has no `LZMA_CONCATENATED`), so the concatenation (`cat a.xz b.xz`) is followed here:
//! when a stream ends, the stream padding (zeros, a multiple of four bytes, as the format says)
//! is skipped, and a new decoder starts on the same input.

use std::io::{self, BufRead};

pub(super) use liblzma::bufread::XzDecoder;
use liblzma::stream::{MtStreamBuilder, Stream};

use super::Codec;
use super::units::Unit;

/// The most memory the decoder may use. `xz -9` needs 65 MiB to decode, and the largest
/// dictionary any preset makes is 64 MiB; only `--lzma2=dict=` beyond 1 GiB goes past it. A
/// header may ask for a 4 GiB dictionary in 15 bytes (found by fuzzing): refused.
const MEMORY_LIMIT: u64 = 1 << 30;

/// A decoder for one stream: the xz format only (not liblzma's automatic choice, which also
/// takes the old .lzma format), on as many threads as there are cores.
fn stream() -> io::Result<Stream> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(64) as u32;
    MtStreamBuilder::new()
        .threads(threads)
        // Past the threading limit liblzma decodes on one thread; past the stop limit it fails.
        .memlimit_threading(MEMORY_LIMIT)
        .memlimit_stop(MEMORY_LIMIT)
        .decoder()
        .or_else(|_| Stream::new_stream_decoder(MEMORY_LIMIT, 0))
        .map_err(io::Error::other)
}

/// One xz stream of a concatenation; between streams, the stream padding.
impl<R: BufRead> Unit<R> for XzDecoder<R> {
    fn start(input: R) -> io::Result<Self> {
        Ok(XzDecoder::new_stream(input, stream()?))
    }
    fn into_input(self) -> R {
        self.into_inner()
    }
    fn another(input: &mut R, _: Codec) -> io::Result<bool> {
        let zeros = skip_zeros(input)?;
        if zeros % 4 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "corrupt xz stream padding (not a multiple of four bytes)",
            ));
        }
        Ok(!input.fill_buf()?.is_empty())
    }
}

/// Consumes the zero bytes at the start of `input`, and says how many there were.
fn skip_zeros(input: &mut impl BufRead) -> io::Result<u64> {
    let mut zeros = 0u64;
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            return Ok(zeros);
        }
        let n = available.iter().take_while(|&&b| b == 0).count();
        let all = n == available.len();
        input.consume(n);
        zeros += n as u64;
        if !all {
            return Ok(zeros);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use liblzma::stream::{Check, MtStreamBuilder};
    use std::io::Read;
    use std::io::Write;

    /// `len` bytes that compress, but not to nothing.
    fn data(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
            .collect()
    }

    /// An xz stream of `data` in blocks of `block` bytes (liblzma's threaded encoder, as
    /// `xz -T2 --block-size` makes).
    fn xz(data: &[u8], block: u64) -> Vec<u8> {
        let stream = MtStreamBuilder::new()
            .threads(2)
            .block_size(block)
            .preset(1)
            .check(Check::Crc64)
            .encoder()
            .unwrap();
        let mut enc = liblzma::write::XzEncoder::new_stream(Vec::new(), stream);
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    fn decode(input: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        super::super::units::Units::<_, XzDecoder<_>>::new(
            input,
            Codec::Xz,
            super::super::Verified::default(),
        )
        .read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn many_blocks_and_concatenated_streams_with_padding_decode_in_order() {
        let (a, b) = (data(3 << 20, 1), data(1 << 20, 2));
        let mut input = xz(&a, 256 << 10);
        input.extend([0u8; 8]);
        input.extend(xz(&b, 0));
        let mut expected = a.clone();
        expected.extend(&b);
        assert_eq!(decode(&input).unwrap(), expected);
        assert_eq!(decode(&xz(&a, 256 << 10)).unwrap(), a);
    }

    #[test]
    fn bad_padding_truncation_and_garbage_after_a_stream_are_errors() {
        let a = data(100_000, 3);
        let mut padded = xz(&a, 0);
        padded.extend([0u8; 3]);
        assert!(decode(&padded).is_err(), "padding of 3 bytes");
        let whole = xz(&a, 0);
        assert!(decode(&whole[..whole.len() - 1]).is_err(), "truncated");
        let mut garbage = whole.clone();
        garbage.extend(b"not xz");
        assert!(decode(&garbage).is_err(), "garbage after a stream");
        assert!(decode(b"").is_err(), "no stream at all");
    }

    /// Reads a variable-length integer of the xz format at `at`; returns it and its length.
    fn vli(bytes: &[u8], at: usize) -> (u64, usize) {
        let (mut value, mut i) = (0u64, 0);
        loop {
            value |= u64::from(bytes[at + i] & 0x7f) << (7 * i);
            i += 1;
            if bytes[at + i - 1] & 0x80 == 0 {
                return (value, i);
            }
        }
    }

    #[test]
    fn a_dictionary_past_the_memory_limit_is_refused_before_it_is_allocated() {
        // A real stream whose first block header is rewritten to ask for a 4 GiB dictionary
        // (LZMA2's largest), its CRC-32 made right again: what a hostile archive can say in
        // a few bytes.
        let mut bytes = xz(&data(1000, 4), 0);
        let start = 12;
        let size = (usize::from(bytes[start]) + 1) * 4;
        let flags = bytes[start + 1];
        let mut at = start + 2;
        for present in [flags & 0x40 != 0, flags & 0x80 != 0] {
            if present {
                at += vli(&bytes, at).1;
            }
        }
        let (filter, len) = vli(&bytes, at);
        assert_eq!(filter, 0x21, "LZMA2 is the first filter");
        at += len;
        assert_eq!(bytes[at], 1, "LZMA2 has one byte of properties");
        bytes[at + 1] = 40;
        let crc = crc32fast::hash(&bytes[start..start + size - 4]);
        bytes[start + size - 4..start + size].copy_from_slice(&crc.to_le_bytes());
        let error = decode(&bytes).unwrap_err();
        assert!(
            error.to_string().to_lowercase().contains("memory"),
            "refused for its memory, not for corruption: {error}"
        );
    }
}
