//! A reader whose bytes another thread makes: a layer is read by three threads, one fetching
//! its blob and checking the blob's digest, one inflating it, and one checking the tar's
//! digest, reading its headers and spooling its files' data. On one thread a large gzip layer
//! took the sum of these; now it takes the longest, inflating (docs/design.md, "Each layer read
//! by three threads"), and a registry's pauses no longer stop the inflating while the pipe
//! holds bytes.
//!
//! The bytes travel in chunks of [`CHUNK`] bytes through a bounded channel, [`DEPTH`] chunks
//! deep, and the chunks go back to the maker to be filled again: no allocation per chunk. An
//! error of the maker's reaches the reader as the error of its next read, so it is reported with
//! the entry it cut, as it was when one thread did both.

use std::io::{self, BufRead, Read};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError, channel, sync_channel};

use crate::engine::read_full;

/// The bytes of one hand-over: large enough that a hand-over costs nothing beside inflating
/// it, small enough that the channel holds a few.
const CHUNK: usize = 256 << 10;

/// The chunks in flight between the two threads.
const DEPTH: usize = 8;

/// What crosses the channel: a chunk and how many of its bytes are filled, or the maker's
/// error.
type Message = io::Result<(Vec<u8>, usize)>;

/// The maker's end: it fills chunks from a reader and sends them.
pub(super) struct Maker {
    full: SyncSender<Message>,
    empty: Receiver<Vec<u8>>,
}

/// How [`Maker::pump`] ended.
pub(super) enum Pumped {
    /// Every byte was sent; the reader sees the end after them.
    Ended,
    /// The reader stopped reading (it failed, and says why itself).
    ReaderGone,
    /// `from` failed; the reader was given its error.
    Failed,
}

impl Maker {
    /// Sends every byte of `from` to the reader.
    pub(super) fn pump(&self, from: &mut dyn Read) -> Pumped {
        loop {
            let mut chunk = match self.empty.try_recv() {
                Ok(chunk) => chunk,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => vec![0; CHUNK],
            };
            // (The bytes before an error are sent first: the reader takes them as before.)
            let (filled, failed) = read_full(from, &mut chunk);
            if filled == 0 && failed.is_none() {
                return Pumped::Ended;
            }
            if filled > 0 && self.full.send(Ok((chunk, filled))).is_err() {
                return Pumped::ReaderGone;
            }
            if let Some(error) = failed {
                return match self.full.send(Err(error)) {
                    Ok(()) => Pumped::Failed,
                    Err(_) => Pumped::ReaderGone,
                };
            }
        }
    }
}

/// The reader's end.
pub(super) struct Taker {
    full: Receiver<Message>,
    empty: Sender<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
    end: usize,
    /// The maker's error, once given: every later read fails the same way.
    failed: Option<(io::ErrorKind, String)>,
}

impl BufRead for Taker {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if let Some((kind, message)) = &self.failed {
            return Err(io::Error::new(*kind, message.clone()));
        }
        while self.at == self.end {
            match self.full.recv() {
                Ok(Ok((chunk, filled))) => {
                    let used = std::mem::replace(&mut self.chunk, chunk);
                    if !used.is_empty() {
                        // (The maker may be gone: then the chunk is simply dropped.)
                        let _ = self.empty.send(used);
                    }
                    self.at = 0;
                    self.end = filled;
                }
                Ok(Err(error)) => {
                    self.failed = Some((error.kind(), error.to_string()));
                    return Err(error);
                }
                // The maker has sent everything: the end.
                Err(_) => return Ok(&[]),
            }
        }
        Ok(&self.chunk[self.at..self.end])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.end);
    }
}

impl Read for Taker {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = buf.len().min(available.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// A pipe: what the maker pumps, the taker reads.
pub(super) fn pipe() -> (Maker, Taker) {
    let (full_tx, full_rx) = sync_channel(DEPTH);
    let (empty_tx, empty_rx) = channel();
    let maker = Maker {
        full: full_tx,
        empty: empty_rx,
    };
    let taker = Taker {
        full: full_rx,
        empty: empty_tx,
        chunk: Vec::new(),
        at: 0,
        end: 0,
        failed: None,
    };
    (maker, taker)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that gives `left` bytes, then fails.
    struct FailsAfter {
        left: usize,
    }

    impl Read for FailsAfter {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.left == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "corrupt deflate",
                ));
            }
            let n = buf.len().min(self.left).min(1000);
            buf[..n].fill(7);
            self.left -= n;
            Ok(n)
        }
    }

    #[test]
    fn every_byte_arrives_in_order() {
        let data: Vec<u8> = (0..3 * CHUNK + 12345).map(|i| (i % 251) as u8).collect();
        let (maker, mut taker) = pipe();
        std::thread::scope(|s| {
            let sent = s.spawn(|| {
                let maker = maker;
                maker.pump(&mut data.as_slice())
            });
            let mut got = Vec::new();
            taker.read_to_end(&mut got).unwrap();
            assert!(matches!(sent.join().unwrap(), Pumped::Ended));
            assert_eq!(got, data);
        });
    }

    #[test]
    fn the_makers_error_is_the_readers_after_the_bytes_before_it() {
        let (maker, mut taker) = pipe();
        std::thread::scope(|s| {
            let sent = s.spawn(move || maker.pump(&mut FailsAfter { left: CHUNK + 10 }));
            let mut got = Vec::new();
            let error = taker.read_to_end(&mut got).unwrap_err();
            assert_eq!(error.to_string(), "corrupt deflate");
            assert_eq!(got.len(), CHUNK + 10);
            // (Read again, it fails again: never an end that looks clean.)
            assert!(taker.read(&mut [0; 10]).is_err());
            assert!(matches!(sent.join().unwrap(), Pumped::Failed));
        });
    }

    #[test]
    fn a_reader_that_stops_stops_the_maker() {
        let (maker, taker) = pipe();
        std::thread::scope(|s| {
            let sent = s.spawn(move || maker.pump(&mut io::repeat(1)));
            drop(taker);
            assert!(matches!(sent.join().unwrap(), Pumped::ReaderGone));
        });
    }
}
