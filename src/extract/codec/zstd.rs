//! The zstd decoder, one frame at a time (see `units.rs`): each frame's end, its content
//! checksum (when it has one) verified, is noted, so that a damaged later frame, or bytes after
//! the last one, cannot take back what earlier frames verified. `zstd -T0`, `pzstd` and
//! `cat a.zst b.zst` make several frames; skippable frames (pzstd starts with one) are frames
//! too, with no output. As `zstd -d`, anything after the last frame that is not a frame is an
//! error.

use std::io::{self, BufRead};

use super::Codec;
use super::units::Unit;

/// One zstd frame (`single_frame`: the decoder stops at its end, its checksum checked).
pub(super) type Frame<R> = zstd::stream::read::Decoder<'static, R>;

impl<R: BufRead> Unit<R> for Frame<R> {
    fn start(input: R) -> io::Result<Self> {
        Ok(zstd::stream::read::Decoder::with_buffer(input)?.single_frame())
    }
    fn into_input(self) -> R {
        self.into_inner()
    }
    /// Another frame wherever the input goes on: bytes that are none fail in its decoder, as
    /// `zstd -d` fails on them.
    fn another(input: &mut R, _: Codec) -> io::Result<bool> {
        Ok(!input.fill_buf()?.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::codec::Verified;
    use std::io::Read;

    /// A frame with a content checksum, as the `zstd` tool writes them.
    fn zstd(data: &[u8]) -> Vec<u8> {
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        encoder.include_checksum(true).unwrap();
        io::Write::write_all(&mut encoder, data).unwrap();
        encoder.finish().unwrap()
    }

    fn decode(input: &[u8], verified: &Verified) -> (Vec<u8>, io::Result<usize>) {
        let mut out = Vec::new();
        let result =
            super::super::units::Units::<_, Frame<_>>::new(input, Codec::Zstd, verified.clone())
                .read_to_end(&mut out);
        (out, result)
    }

    #[test]
    fn frames_are_read_in_order_and_each_end_is_verified() {
        let verified = Verified::default();
        let input = [zstd(b"one "), zstd(b"two")].concat();
        let (out, result) = decode(&input, &verified);
        assert_eq!(out, b"one two");
        assert_eq!(result.unwrap(), 7);
        assert_eq!(verified.bytes(), 7);
    }

    #[test]
    fn a_damaged_second_frame_keeps_the_first_verified() {
        let verified = Verified::default();
        let mut second = zstd(b"the second frame, long enough to be damaged in the middle");
        let n = second.len();
        second[n - 2] ^= 0xff; // its checksum
        let input = [zstd(b"first"), second].concat();
        let (_, result) = decode(&input, &verified);
        assert!(result.is_err());
        assert_eq!(verified.bytes(), 5, "the first frame's end");
    }

    #[test]
    fn bytes_after_the_last_frame_are_an_error_as_with_zstd() {
        let verified = Verified::default();
        let input = [zstd(b"data"), b"garbage!".to_vec()].concat();
        let (out, result) = decode(&input, &verified);
        assert_eq!(out, b"data");
        assert!(result.is_err());
        assert_eq!(verified.bytes(), 4);
    }
}
