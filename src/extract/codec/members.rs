//! Concatenated gzip members and bzip2 streams (pigz, pbzip2, `cat a.gz b.gz`), read to the
//! end, and what may follow the last one: a tape's padding of zeros (ignored, as `gzip -d`
//! ignores it), or other bytes, which end the data with [`TrailingData`] (gzip and bzip2 say
//! "trailing garbage ignored" and keep what they decoded).
//!
//! flate2's and bzip2's own multi-member decoders take any bytes after a member for the start
//! of the next one and fail on them, so a complete archive followed by garbage read as corrupt.

use std::fmt;
use std::io::{self, BufRead};

use super::Codec;
use super::units::Unit;

/// Bytes after the end of the compressed data that are not more of it. Carried inside the
/// `io::Error` a decoder returns at that point: a reader that has all it needs (a tar past its
/// end-of-archive blocks, a single file) takes it for a warning; one that needed more data
/// reports it as the damage it is.
#[derive(Debug)]
pub(crate) struct TrailingData {
    pub codec: Codec,
    /// How many bytes followed the compressed data.
    pub bytes: u64,
}

impl TrailingData {
    /// The trailing data an I/O error carries, if that is what it is.
    pub(crate) fn of(error: &io::Error) -> Option<&TrailingData> {
        error.get_ref()?.downcast_ref()
    }
}

impl fmt::Display for TrailingData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.codec.name();
        write!(
            f,
            "{} byte(s) after the end of the {name} data are not {name} data: ignored, as `{name} -d` ignores them",
            self.bytes
        )
    }
}

impl std::error::Error for TrailingData {}

/// After a gzip member or a bzip2 stream: another, if the input goes on with the codec's
/// magic bytes; else the end, where zeros (a tape's padding) are passed over and other bytes
/// are [`TrailingData`].
fn another<R: BufRead>(input: &mut R, codec: Codec) -> io::Result<bool> {
    let head = input.fill_buf()?;
    let magic = codec.magic();
    let more = if head.len() >= magic.len() {
        head.starts_with(magic)
    } else {
        // A member's start split at the buffer's end: the decoder reads on.
        !head.is_empty() && magic.starts_with(head)
    };
    if more {
        return Ok(true);
    }
    let (mut bytes, mut zeros) = (0u64, true);
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        zeros &= chunk.iter().all(|&b| b == 0);
        bytes += chunk.len() as u64;
        let n = chunk.len();
        input.consume(n);
    }
    if bytes == 0 || zeros {
        return Ok(false);
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        TrailingData { codec, bytes },
    ))
}

#[cfg(feature = "gzip")]
impl<R: BufRead> Unit<R> for flate2::bufread::GzDecoder<R> {
    fn start(input: R) -> io::Result<Self> {
        Ok(flate2::bufread::GzDecoder::new(input))
    }
    fn into_input(self) -> R {
        self.into_inner()
    }
    fn another(input: &mut R, codec: Codec) -> io::Result<bool> {
        another(input, codec)
    }
}

#[cfg(feature = "bzip2")]
impl<R: BufRead> Unit<R> for bzip2::bufread::BzDecoder<R> {
    fn start(input: R) -> io::Result<Self> {
        Ok(bzip2::bufread::BzDecoder::new(input))
    }
    fn into_input(self) -> R {
        self.into_inner()
    }
    fn another(input: &mut R, codec: Codec) -> io::Result<bool> {
        another(input, codec)
    }
}

#[cfg(all(test, feature = "gzip"))]
mod tests {
    use super::*;
    use flate2::bufread::GzDecoder;
    use std::io::Read;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        io::Write::write_all(&mut encoder, data).unwrap();
        encoder.finish().unwrap()
    }

    fn decode(input: &[u8]) -> (Vec<u8>, io::Result<usize>) {
        let mut members = super::super::units::Units::<_, GzDecoder<_>>::new(
            input,
            Codec::Gzip,
            super::super::Verified::default(),
        );
        let mut out = Vec::new();
        let result = members.read_to_end(&mut out);
        (out, result)
    }

    #[test]
    fn members_are_read_to_the_end() {
        let input = [gzip(b"one "), gzip(b"two")].concat();
        let (out, result) = decode(&input);
        assert_eq!(out, b"one two");
        assert_eq!(result.unwrap(), 7);
    }

    #[test]
    fn zeros_after_the_last_member_are_ignored() {
        let input = [gzip(b"data"), vec![0; 3000]].concat();
        let (out, result) = decode(&input);
        assert_eq!(out, b"data");
        assert!(result.is_ok());
    }

    #[test]
    fn other_bytes_after_the_last_member_are_trailing_data() {
        let input = [gzip(b"data"), b"garbage!".to_vec()].concat();
        let (out, result) = decode(&input);
        assert_eq!(out, b"data", "what was decoded is kept");
        let error = result.unwrap_err();
        let trailing = TrailingData::of(&error).expect("trailing data");
        assert_eq!(trailing.bytes, 8);
        assert!(
            error
                .to_string()
                .contains("8 byte(s) after the end of the gzip data")
        );
    }

    #[test]
    fn a_corrupt_member_is_not_trailing_data() {
        let mut input = gzip(b"some data that is long enough to be compressed");
        let n = input.len();
        input[n - 6] ^= 0xff; // the CRC
        let (_, result) = decode(&input);
        let error = result.unwrap_err();
        assert!(TrailingData::of(&error).is_none(), "{error}");
    }
}
