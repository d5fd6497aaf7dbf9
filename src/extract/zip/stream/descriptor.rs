//! Entries of a zip stream whose CRC-32 and sizes come after their data, in a data descriptor
//! (what a writer that cannot seek back makes). Each is read through a reader that ends only
//! where its descriptor confirms what came before it, and fails otherwise: so whatever writes
//! the entry (a buffer handed to the writers, or the engine's streamed write for a large file,
//! which removes what it wrote when its reader fails) never keeps bytes that were not checked.
//!
//! Deflate says where its data ends. Stored data does not: its end is found as bsdtar looks
//! for it, at a descriptor's signature, taken only where the CRC-32 and both sizes it states
//! are those of the bytes before it (bsdtar compares the CRC-32 there and the sizes after). A
//! signature inside the data that states something else is data, and the scan goes on. A
//! descriptor may also come without its signature (the format allows it; Go's
//! `go-no-datadesc-sig.zip`, libarchive's `..._with_invalid_traditional_eocd.zip`): then it is
//! looked for before each local or central header's signature, 12 or 20 bytes ahead of it, and
//! taken on the same terms, and only there (bsdtar fails these). A stream that ends with no such
//! descriptor fails the entry (and the run, which cannot tell where the next entry starts). The
//! data passes through as it is scanned, so an entry of any size costs no more memory than one
//! of known size.
//!
//! A descriptor's sizes are 4 bytes, or 8 in a zip64 archive, and writers do not always say
//! which in the local header (yauzl's `zip64.zip` has 8-byte sizes and no zip64 field): both
//! are tried, preferring the reading after which a header signature follows.

use std::io::{self, BufRead, Read};

use super::{CENTRAL_HEADER, DATA_DESCRIPTOR, END_OF_CENTRAL, LOCAL_HEADER, ZIP64_END};

/// The stream a zip is read from, with what was read ahead given back: where a stored entry
/// ends and which size a descriptor has are told by the bytes that follow. It also counts what
/// was consumed, which is where each local header lies (what the central directory names it
/// by).
pub(super) struct Ahead<'a> {
    inner: &'a mut dyn BufRead,
    /// Bytes read ahead from `inner` and not consumed yet, from `at` on.
    back: Vec<u8>,
    at: usize,
    /// Bytes consumed since the start of the stream.
    pub offset: u64,
}

impl<'a> Ahead<'a> {
    pub(super) fn new(inner: &'a mut dyn BufRead) -> Ahead<'a> {
        Ahead {
            inner,
            back: Vec::new(),
            at: 0,
            offset: 0,
        }
    }

    /// The next `n` bytes, not consumed (fewer only at the end of the stream).
    pub(super) fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        if self.at >= self.back.len() {
            self.back.clear();
            self.at = 0;
            if self.inner.fill_buf()?.len() >= n {
                return self.inner.fill_buf();
            }
        }
        while self.back.len() - self.at < n {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            let take = buf.len().min(n - (self.back.len() - self.at));
            self.back.extend_from_slice(&buf[..take]);
            self.inner.consume(take);
        }
        Ok(&self.back[self.at..])
    }
}

impl Read for Ahead<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let buf = self.fill_buf()?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Ahead<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.at < self.back.len() {
            return Ok(&self.back[self.at..]);
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.offset += n as u64;
        if self.at < self.back.len() {
            self.at = (self.at + n).min(self.back.len());
        } else {
            self.inner.consume(n);
        }
    }
}

/// The most a descriptor and the signature after it take: signature, CRC-32, two 8-byte
/// sizes, the next signature.
const PEEK: usize = 4 + 4 + 16 + 4;

/// What the data before a descriptor was.
#[derive(Clone, Copy)]
pub(super) struct Data {
    pub crc: u32,
    /// Its compressed length (`None`: not compared; deflate's own end is trusted).
    pub compressed: Option<u64>,
    pub len: u64,
}

/// The length of the data descriptor at the start of `bytes` if it states `data` (`signed`:
/// only one that starts with its signature, as a stored entry's must, since that is how it is
/// found). Readings after which a header signature (or the end of the stream) follows come
/// first; then any that states `data` (bytes between entries, which the reader then passes
/// over, can follow the last one).
pub(super) fn descriptor_len(bytes: &[u8], data: Data, signed: bool, zip64: bool) -> Option<usize> {
    let has_signature = bytes.get(..4) == Some(&DATA_DESCRIPTOR.to_le_bytes()[..]);
    let widths: [usize; 2] = if zip64 { [8, 4] } else { [4, 8] };
    let mut readings = Vec::with_capacity(4);
    for start in [4, 0] {
        if start == 4 && !has_signature || start == 0 && signed {
            continue;
        }
        for width in widths {
            readings.push((start, width));
        }
    }
    let followed = |end: usize| match signature_at(bytes, end) {
        None => bytes.len() == end,
        Some(next) => matches!(
            next,
            LOCAL_HEADER | CENTRAL_HEADER | END_OF_CENTRAL | ZIP64_END | DATA_DESCRIPTOR
        ),
    };
    let matching: Vec<usize> = readings
        .iter()
        .filter_map(|&(start, width)| states(bytes, start, width, data))
        .collect();
    matching
        .iter()
        .copied()
        .find(|&end| followed(end))
        .or(matching.first().copied())
}

/// Where a descriptor read at `start` of `bytes` with sizes `width` bytes wide ends, if it
/// states `data`.
fn states(bytes: &[u8], start: usize, width: usize, data: Data) -> Option<usize> {
    let end = start + 4 + 2 * width;
    let field = bytes.get(start..end)?;
    let number = |at: usize| -> u64 {
        field[at..at + width]
            .iter()
            .rev()
            .fold(0u64, |n, &b| n << 8 | u64::from(b))
    };
    let crc = u32::from_le_bytes([field[0], field[1], field[2], field[3]]);
    let (compressed, len) = (number(4), number(4 + width));
    let same =
        crc == data.crc && len == data.len && data.compressed.is_none_or(|c| c == compressed);
    same.then_some(end)
}

/// The signature (a little-endian `u32`) at `at` of `bytes`, if `bytes` hold all of it.
fn signature_at(bytes: &[u8], at: usize) -> Option<u32> {
    let next = bytes.get(at..at + 4)?;
    Some(u32::from_le_bytes([next[0], next[1], next[2], next[3]]))
}

/// What the descriptor at the start of `bytes` says, read as the local header suggests, for a
/// message: its CRC-32, its (uncompressed) size, and its length.
fn descriptor_says(bytes: &[u8], zip64: bool) -> Option<(u32, u64, usize)> {
    let start = if bytes.get(..4) == Some(&DATA_DESCRIPTOR.to_le_bytes()[..]) {
        4
    } else {
        0
    };
    let width = if zip64 { 8 } else { 4 };
    let field = bytes.get(start..start + 4 + 2 * width)?;
    let crc = u32::from_le_bytes([field[0], field[1], field[2], field[3]]);
    let size = field[4 + width..]
        .iter()
        .rev()
        .fold(0u64, |n, &b| n << 8 | u64::from(b));
    Some((crc, size, start + 4 + 2 * width))
}

/// How long an unsigned descriptor is: 4-byte sizes, or 8-byte ones.
const UNSIGNED: [usize; 2] = [12, 20];

/// Where a stored entry's data may end in `buf`: first, at a descriptor's signature, or before
/// a local or central header's signature where a descriptor without its signature would stand
/// ([`UNSIGNED`]); a signature cut by the end of `buf` counts. `None`: not in `buf` (though an
/// unsigned descriptor may start in its last bytes, whose header `buf` does not hold yet).
fn stop(buf: &[u8]) -> Option<usize> {
    let signature = |value: u32| value.to_le_bytes();
    let (dd, local, central) = (
        signature(DATA_DESCRIPTOR),
        signature(LOCAL_HEADER),
        signature(CENTRAL_HEADER),
    );
    let mut first: Option<usize> = None;
    let mut from = 0;
    while let Some(p) = buf[from..].iter().position(|&b| b == b'P') {
        let at = from + p;
        if first.is_some_and(|f| f <= at.saturating_sub(UNSIGNED[1])) {
            break;
        }
        let rest = &buf[at..];
        let n = rest.len().min(4);
        if rest[..n] == dd[..n] {
            first = Some(first.map_or(at, |f| f.min(at)));
        }
        if rest[..n] == local[..n] || rest[..n] == central[..n] {
            for len in UNSIGNED {
                if let Some(start) = at.checked_sub(len) {
                    first = Some(first.map_or(start, |f| f.min(start)));
                }
            }
        }
        from = at + 1;
    }
    first
}

/// The length of the unsigned descriptor at the start of `bytes` if it states `data` and a
/// local or central header's signature follows it (what tells it from data that happens to
/// hold the same twelve or twenty bytes).
fn unsigned_len(bytes: &[u8], data: Data) -> Option<usize> {
    UNSIGNED.into_iter().find(|&len| {
        states(bytes, 0, (len - 4) / 2, data) == Some(len)
            && matches!(
                signature_at(bytes, len),
                Some(LOCAL_HEADER | CENTRAL_HEADER)
            )
    })
}

/// How an entry's data failed its descriptor, kept so that the reader can tell it from
/// corrupt data (after which the stream cannot be followed).
pub(super) const MISMATCH: &str = "the data does not match its descriptor";

/// A stored entry's data, up to the descriptor that states its CRC-32 and size (see the
/// module's header). Reading it to its end consumes that descriptor.
pub(super) struct Stored<'i, 'a> {
    input: &'i mut Ahead<'a>,
    zip64: bool,
    crc: crc32fast::Hasher,
    len: u64,
    ended: bool,
}

impl<'i, 'a> Stored<'i, 'a> {
    pub(super) fn new(input: &'i mut Ahead<'a>, zip64: bool) -> Self {
        Stored {
            input,
            zip64,
            crc: crc32fast::Hasher::new(),
            len: 0,
            ended: false,
        }
    }

    /// Its CRC-32 and length, once read to its end.
    pub(super) fn data(&self) -> Data {
        Data {
            crc: self.crc.clone().finalize(),
            compressed: Some(self.len),
            len: self.len,
        }
    }

    /// At a place where the data may end: it does if a descriptor there states it (signed, or
    /// unsigned and followed by a header); else a byte of data, and on.
    fn at_stop(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let data = self.data();
        let zip64 = self.zip64;
        let ahead = self.input.peek(PEEK)?;
        let len = descriptor_len(ahead, data, true, zip64).or_else(|| unsigned_len(ahead, data));
        if let Some(len) = len {
            self.input.consume(len);
            self.ended = true;
            return Ok(0);
        }
        self.pass(out, 1)
    }

    /// Gives `n` bytes at the start of the input to `out` as data.
    fn pass(&mut self, out: &mut [u8], n: usize) -> io::Result<usize> {
        let buf = self.input.fill_buf()?;
        let n = n.min(out.len()).min(buf.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.crc.update(&out[..n]);
        self.len += n as u64;
        self.input.consume(n);
        Ok(n)
    }
}

impl Read for Stored<'_, '_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.ended || out.is_empty() {
            return Ok(0);
        }
        let buf = self.input.fill_buf()?;
        if buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the stream ends with no data descriptor stating the CRC-32 and size of the data before it",
            ));
        }
        match stop(buf) {
            // The last bytes may be an unsigned descriptor whose header is not read yet: they
            // wait for more (looked at again with what follows them).
            None if buf.len() > UNSIGNED[1] + 3 => {
                let n = buf.len() - (UNSIGNED[1] + 3);
                self.pass(out, n)
            }
            None => {
                let ahead = self.input.peek(2 * (UNSIGNED[1] + 4))?;
                match stop(ahead) {
                    Some(at) if at > 0 => self.pass(out, at),
                    Some(_) => self.at_stop(out),
                    // Nothing can end here: a byte of data (the end of the stream, when it
                    // comes, fails the entry).
                    None => self.pass(out, 1),
                }
            }
            Some(at) if at > 0 => self.pass(out, at),
            Some(_) => self.at_stop(out),
        }
    }
}

/// A deflated entry's data, inflated, and checked against the descriptor after it before its
/// end is given: a mismatch is an error ([`MISMATCH`]), past which the stream goes on (the
/// descriptor is consumed either way).
pub(super) struct Inflated<'i, 'a> {
    inflate: flate2::bufread::DeflateDecoder<&'i mut Ahead<'a>>,
    zip64: bool,
    crc: crc32fast::Hasher,
    len: u64,
    /// Where its compressed data started in the stream.
    start: u64,
    ended: bool,
    /// Its CRC-32 and lengths, once checked.
    checked: Option<Data>,
}

impl<'i, 'a> Inflated<'i, 'a> {
    pub(super) fn new(input: &'i mut Ahead<'a>, zip64: bool) -> Self {
        let start = input.offset;
        Inflated {
            inflate: flate2::bufread::DeflateDecoder::new(input),
            zip64,
            crc: crc32fast::Hasher::new(),
            len: 0,
            start,
            ended: false,
            checked: None,
        }
    }

    /// Its CRC-32 and lengths, once read to its end and checked.
    pub(super) fn checked(&self) -> Option<Data> {
        self.checked
    }

    /// The data has ended: its descriptor is read and compared.
    fn check(&mut self) -> io::Result<()> {
        self.ended = true;
        let input = self.inflate.get_mut();
        let data = Data {
            crc: self.crc.clone().finalize(),
            compressed: None,
            len: self.len,
        };
        let compressed = input.offset - self.start;
        let ahead = input.peek(PEEK)?;
        if let Some(len) = descriptor_len(ahead, data, false, self.zip64) {
            input.consume(len);
            self.checked = Some(Data {
                compressed: Some(compressed),
                ..data
            });
            return Ok(());
        }
        let Some((crc, size, len)) = descriptor_says(ahead, self.zip64) else {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the stream ends inside its data descriptor",
            ));
        };
        input.consume(len);
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{MISMATCH} (CRC-32 {:08x}, {} bytes; the descriptor says {crc:08x}, {size} bytes)",
                data.crc, data.len
            ),
        ))
    }
}

impl Read for Inflated<'_, '_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.ended || out.is_empty() {
            return Ok(0);
        }
        let n = self.inflate.read(out)?;
        if n == 0 {
            self.check()?;
            return Ok(0);
        }
        self.crc.update(&out[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(crc: u32, size: u64, wide: bool) -> Vec<u8> {
        let mut d = DATA_DESCRIPTOR.to_le_bytes().to_vec();
        d.extend(crc.to_le_bytes());
        for _ in 0..2 {
            if wide {
                d.extend(size.to_le_bytes());
            } else {
                d.extend((size as u32).to_le_bytes());
            }
        }
        d
    }

    /// Reads a stored entry from `stream` with reads of `chunk` bytes at most (a pipe's).
    fn stored(stream: &[u8], chunk: usize) -> (io::Result<Vec<u8>>, Vec<u8>) {
        let mut reader = io::BufReader::with_capacity(chunk, stream);
        let mut ahead = Ahead::new(&mut reader);
        let mut data = Stored::new(&mut ahead, false);
        let mut out = Vec::new();
        let read = data.read_to_end(&mut out).map(|_| out);
        let mut rest = Vec::new();
        ahead.read_to_end(&mut rest).unwrap();
        (read, rest)
    }

    #[test]
    fn stored_data_ends_at_the_descriptor_that_states_it() {
        let body = b"PK\x07\x08 is in here, and so is PK\x07\x08 with a wrong CRC".to_vec();
        let mut fake = body.clone();
        // A descriptor inside the data that states other bytes: data.
        fake.extend(descriptor(0x1234_5678, 3, false));
        fake.extend(b"more data");
        for wide in [false, true] {
            let mut stream = fake.clone();
            stream.extend(descriptor(crc32fast::hash(&fake), fake.len() as u64, wide));
            stream.extend(b"PK\x03\x04next");
            for chunk in [1, 3, 7, 64, 4096] {
                let (read, rest) = stored(&stream, chunk);
                assert_eq!(read.unwrap(), fake, "chunk {chunk}, wide {wide}");
                assert_eq!(rest, b"PK\x03\x04next", "chunk {chunk}, wide {wide}");
            }
        }
        // No descriptor that states it: the stream ends, and that is an error.
        let (read, _) = stored(&fake, 5);
        assert_eq!(read.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        // An empty entry, its descriptor first.
        let mut empty = descriptor(0, 0, true);
        empty.extend(b"PK\x01\x02");
        assert_eq!(stored(&empty, 2).0.unwrap(), b"");
    }

    #[test]
    fn stored_data_ends_at_a_descriptor_without_its_signature_before_a_header() {
        // Data that holds a header's signature, and an unsigned descriptor of the data so far
        // that no header follows: both data.
        let mut fake = b"start PK\x03\x04 and PK\x01\x02 inside".to_vec();
        let so_far = fake.clone();
        fake.extend(crc32fast::hash(&so_far).to_le_bytes());
        fake.extend((so_far.len() as u32).to_le_bytes());
        fake.extend((so_far.len() as u32).to_le_bytes());
        fake.extend(b"then more data, long enough to leave the window behind");
        for wide in [false, true] {
            for next in [LOCAL_HEADER, CENTRAL_HEADER] {
                let mut stream = fake.clone();
                let descriptor = descriptor(crc32fast::hash(&fake), fake.len() as u64, wide);
                stream.extend(&descriptor[4..]); // without its signature
                stream.extend(next.to_le_bytes());
                stream.extend(b"next");
                for chunk in [1, 5, 23, 24, 64, 4096] {
                    let (read, rest) = stored(&stream, chunk);
                    let what = format!("chunk {chunk}, wide {wide}, next {next:x}");
                    assert_eq!(read.unwrap(), fake, "{what}");
                    assert_eq!(rest[4..], *b"next", "{what}");
                }
            }
        }
        // Without a header after it, an unsigned descriptor is data: the stream ends unfinished.
        let mut stream = fake.clone();
        stream.extend(&descriptor(crc32fast::hash(&fake), fake.len() as u64, false)[4..]);
        stream.extend(b"no header");
        assert_eq!(
            stored(&stream, 7).0.unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn a_descriptor_is_read_at_the_width_after_which_a_header_follows() {
        let data = Data {
            crc: 0,
            compressed: Some(0),
            len: 0,
        };
        // An empty entry's 8-byte sizes also read as 4-byte ones: what follows decides.
        let mut wide = descriptor(0, 0, true);
        wide.extend(CENTRAL_HEADER.to_le_bytes());
        assert_eq!(descriptor_len(&wide, data, true, false), Some(24));
        let mut narrow = descriptor(0, 0, false);
        narrow.extend(LOCAL_HEADER.to_le_bytes());
        narrow.extend([0; 8]);
        assert_eq!(descriptor_len(&narrow, data, true, true), Some(16));
        // Without its signature (allowed after deflate, whose end is known).
        let unsigned = &narrow[4..];
        assert_eq!(descriptor_len(unsigned, data, false, false), Some(12));
        assert_eq!(descriptor_len(unsigned, data, true, false), None);
        let other = Data { len: 1, ..data };
        assert_eq!(descriptor_len(&wide, other, true, false), None);
    }
}
