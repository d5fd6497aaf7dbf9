//! A compressed stream read unit after unit: gzip members, bzip2 streams, xz streams, zstd
//! frames. Each unit carries its own check, verified by its decoder at the unit's end; that end
//! is noted in [`Verified`], so that what a damaged later unit (or bytes after the last one)
//! cannot take back what earlier units verified. What may come between two units (another
//! unit, padding, the end, other bytes) is each format's own rule ([`Unit::another`]).

use std::io::{self, BufRead, Read};

use super::{Codec, Verified};

/// A decoder of one unit over a shared input.
pub(super) trait Unit<R: BufRead>: Read + Sized {
    /// Starts a unit at the input's position.
    fn start(input: R) -> io::Result<Self>;
    /// The input, at the unit's end.
    fn into_input(self) -> R;
    /// After a unit: whether another starts here (`false`: the data has ended), having passed
    /// over what the format allows between units; an error for what it does not.
    fn another(input: &mut R, codec: Codec) -> io::Result<bool>;
}

/// Reads the decoded bytes of every unit of its input, in order.
pub(super) struct Units<R, U> {
    state: State<R, U>,
    codec: Codec,
    /// Bytes decoded so far.
    out: u64,
    verified: Verified,
}

enum State<R, U> {
    /// A unit starts here.
    Start(R),
    Unit(U),
    /// A unit has ended: what comes next decides.
    Between(R),
    /// The end.
    Done,
    /// An error has been returned: the decoder past it may say "the end", which must never be
    /// taken for data that is whole, so every read after it fails too.
    Failed,
}

impl<R: BufRead, U: Unit<R>> Units<R, U> {
    pub(super) fn new(input: R, codec: Codec, verified: Verified) -> Self {
        Units {
            state: State::Start(input),
            codec,
            out: 0,
            verified,
        }
    }
}

impl<R: BufRead, U: Unit<R>> Units<R, U> {
    fn step(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Start(input) => self.state = State::Unit(U::start(input)?),
                State::Unit(mut unit) => match unit.read(buf)? {
                    0 => {
                        // The unit's end: its decoder has checked it.
                        self.verified.up_to(self.out);
                        self.state = State::Between(unit.into_input());
                    }
                    n => {
                        self.out += n as u64;
                        self.state = State::Unit(unit);
                        return Ok(n);
                    }
                },
                State::Between(mut input) => {
                    if !U::another(&mut input, self.codec)? {
                        return Ok(0);
                    }
                    self.state = State::Start(input);
                }
                State::Done => return Ok(0),
                State::Failed => {
                    self.state = State::Failed;
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the compressed data failed already",
                    ));
                }
            }
        }
    }
}

impl<R: BufRead, U: Unit<R>> Read for Units<R, U> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let result = self.step(buf);
        if let Err(error) = &result {
            // Bytes after the last unit end the data, which every check has passed (noted at
            // that unit's end); anything else is a failure.
            if super::trailing_data(error).is_none() {
                self.verified.fail();
                self.state = State::Failed;
            }
        }
        result
    }
}
