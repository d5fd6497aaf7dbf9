//! The zstd decoder, one frame at a time: each frame's end (its content checksum, when it has
//! one, verified) is noted in [`Verified`], so that what a damaged later frame, or bytes after
//! the last one, cannot take back what earlier frames verified. `zstd -T0`, `pzstd` and
//! `cat a.zst b.zst` make several frames; skippable frames (pzstd starts with one) are frames
//! too, with no output. As `zstd -d`, anything after the last frame that is not a frame is an
//! error.

use std::io::{self, BufRead, Read};

use super::Verified;

type Input<'a> = Box<dyn BufRead + Send + 'a>;
type Frame<'a> = zstd::stream::read::Decoder<'static, Input<'a>>;

/// Reads the decoded bytes of every frame in its input, in order.
pub(super) struct Decoder<'a> {
    state: State<'a>,
    /// Bytes decoded so far.
    out: u64,
    verified: Verified,
}

enum State<'a> {
    Frame(Frame<'a>),
    /// A frame has ended: the end of the input, or another frame.
    Between(Input<'a>),
    Done,
}

fn frame(input: Input<'_>) -> io::Result<Frame<'_>> {
    Ok(zstd::stream::read::Decoder::with_buffer(input)?.single_frame())
}

impl<'a> Decoder<'a> {
    pub(super) fn new(input: Input<'a>, verified: Verified) -> io::Result<Decoder<'a>> {
        Ok(Decoder {
            state: State::Frame(frame(input)?),
            out: 0,
            verified,
        })
    }
}

impl Read for Decoder<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Frame(mut decoder) => match decoder.read(buf) {
                    Ok(0) => {
                        // The frame's end: its checksum, if it has one, matched.
                        self.verified.up_to(self.out);
                        self.state = State::Between(decoder.into_inner());
                    }
                    Ok(n) => {
                        self.out += n as u64;
                        self.state = State::Frame(decoder);
                        return Ok(n);
                    }
                    Err(e) => return Err(e),
                },
                State::Between(mut input) => {
                    if input.fill_buf()?.is_empty() {
                        return Ok(0);
                    }
                    self.state = State::Frame(frame(input)?);
                }
                State::Done => return Ok(0),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame with a content checksum, as the `zstd` tool writes them.
    fn zstd(data: &[u8]) -> Vec<u8> {
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        encoder.include_checksum(true).unwrap();
        io::Write::write_all(&mut encoder, data).unwrap();
        encoder.finish().unwrap()
    }

    fn decode(input: &[u8], verified: &Verified) -> (Vec<u8>, io::Result<usize>) {
        let mut out = Vec::new();
        let result = Decoder::new(Box::new(input), verified.clone())
            .and_then(|mut d| d.read_to_end(&mut out));
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
