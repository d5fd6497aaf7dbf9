//! Concatenated gzip members and bzip2 streams (pigz, pbzip2, `cat a.gz b.gz`), read to the
//! end, and what may follow the last one: a tape's padding of zeros (ignored, as `gzip -d`
//! ignores it), or other bytes, which end the data with [`TrailingData`] (gzip and bzip2 say
//! "trailing garbage ignored" and keep what they decoded).
//!
//! flate2's and bzip2's own multi-member decoders take any bytes after a member for the start
//! of the next one and fail on them, so a complete archive followed by garbage read as corrupt.

use std::fmt;
use std::io::{self, BufRead, Read};

use super::{Codec, Verified};

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

/// A decoder of one member at a time over a shared input.
pub(super) trait Member<R>: Read {
    fn start(input: R) -> Self;
    fn into_input(self) -> R;
}

/// Reads member after member while the input goes on with the codec's magic bytes.
pub(super) struct Members<R, D> {
    state: State<R, D>,
    codec: Codec,
    /// Bytes decoded so far; each member's end, its CRC passed, is noted in `verified`.
    out: u64,
    verified: Verified,
}

enum State<R, D> {
    Decoding(D),
    /// Between two members: what comes next decides.
    Between(R),
    Done,
}

impl<R: BufRead, D: Member<R>> Members<R, D> {
    pub(super) fn new(input: R, codec: Codec, verified: Verified) -> Self {
        Members {
            state: State::Decoding(D::start(input)),
            codec,
            out: 0,
            verified,
        }
    }

    /// After a member: another one, the end, zeros, or trailing data.
    fn next_member(&mut self, mut input: R) -> io::Result<()> {
        let head = input.fill_buf()?;
        let magic = self.codec.magic();
        let more = if head.len() >= magic.len() {
            head.starts_with(magic)
        } else {
            // A member's start split at the buffer's end: the decoder reads on.
            !head.is_empty() && magic.starts_with(head)
        };
        if more {
            self.state = State::Decoding(D::start(input));
            return Ok(());
        }
        self.state = State::Done;
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
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            TrailingData {
                codec: self.codec,
                bytes,
            },
        ))
    }
}

impl<R: BufRead, D: Member<R>> Read for Members<R, D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Decoding(mut decoder) => {
                    let n = decoder.read(buf);
                    match n {
                        Ok(0) if !buf.is_empty() => {
                            // The member's end: its decoder has checked its CRC and size.
                            self.verified.up_to(self.out);
                            self.state = State::Between(decoder.into_input());
                        }
                        other => {
                            if let Ok(n) = other {
                                self.out += n as u64;
                            }
                            self.state = State::Decoding(decoder);
                            return other;
                        }
                    }
                }
                State::Between(input) => self.next_member(input)?,
                State::Done => return Ok(0),
            }
        }
    }
}

#[cfg(feature = "gzip")]
impl<R: BufRead> Member<R> for flate2::bufread::GzDecoder<R> {
    fn start(input: R) -> Self {
        flate2::bufread::GzDecoder::new(input)
    }
    fn into_input(self) -> R {
        self.into_inner()
    }
}

#[cfg(feature = "bzip2")]
impl<R: BufRead> Member<R> for bzip2::bufread::BzDecoder<R> {
    fn start(input: R) -> Self {
        bzip2::bufread::BzDecoder::new(input)
    }
    fn into_input(self) -> R {
        self.into_inner()
    }
}

#[cfg(all(test, feature = "gzip"))]
mod tests {
    use super::*;
    use flate2::bufread::GzDecoder;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        io::Write::write_all(&mut encoder, data).unwrap();
        encoder.finish().unwrap()
    }

    fn decode(input: &[u8]) -> (Vec<u8>, io::Result<usize>) {
        let mut members = Members::<_, GzDecoder<_>>::new(input, Codec::Gzip, Verified::default());
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
