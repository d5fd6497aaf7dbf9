//! A tar reader with GNU tar's and bsdtar's meaning of every header, written for fidelity.
//!
//! Why not the `tar` crate: it refuses archives that GNU tar and bsdtar restore (several GNU
//! long-name headers in a row, where the last counts; two pax headers for one member) and hands
//! pax-format sparse files over as their raw map and chunks. Here every header kind real
//! writers produce is read as GNU tar reads it:
//! - v7, ustar (with its prefix field), GNU and pax headers; numbers in octal (leading spaces
//!   allowed, and one leading NUL, as GNU tar reads them) or GNU's base-256; checksums summed unsigned or
//!   signed (some historic writers summed signed bytes);
//! - GNU long names and link names (`L`, `K`: the last one before a member counts) and pax
//!   records (`path`, `linkpath`, `size`, `mtime`; several pax headers merge, the last record
//!   of a key counts); names end at their first NUL, wherever it is;
//! - sparse files: old GNU (`S`, with extension blocks) and pax 0.0, 0.1 and 1.0, expanded to
//!   their full length with holes (see [`Sparse`]);
//! - names and link targets are bytes: what they mean is the caller's business.
//!
//! Every number from the archive is checked before it is used: sizes, offsets and counts that
//! overflow or contradict each other are errors, not panics or huge allocations.

use std::io::{self, Read};
use std::time::SystemTime;

use anyhow::{Context, anyhow, bail};

use super::pax::{Pax, decimal, leading_number, pax_time};
use crate::engine::HoleRead;
use crate::extract::format::{BLOCK, checksum_ok, number};
/// The most bytes of a GNU long name or pax header kept in memory.
const MAX_EXTENSION: u64 = 8 << 20;

/// The longest comment line a GNU sparse 1.0 map may hold (libarchive reads 100 bytes of one).
const MAX_MAP_COMMENT: usize = 512;

/// What a member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    HardLink,
    CharDevice,
    BlockDevice,
    Fifo,
    /// A type that is not a file system object (a volume label, a multi-volume continuation)
    /// or that this reader does not know: skipped with a warning.
    Other(u8),
}

/// One member's header, with its extension headers applied.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub kind: Kind,
    /// The name's bytes, up to its first NUL.
    pub name: Vec<u8>,
    /// The link target's bytes (links only).
    pub link: Vec<u8>,
    pub mode: Option<u32>,
    pub mtime: Option<SystemTime>,
    /// The file's length once extracted (for a sparse file, with its holes).
    pub size: u64,
    /// For a sparse file, where its data goes.
    pub sparse: Option<Sparse>,
    /// A device's major and minor numbers (character and block devices).
    pub device: Option<(u32, u32)>,
    /// What was odd but readable in its headers (a pax record without its newline, a malformed
    /// mtime): extracted as GNU tar and bsdtar extract it, and said as a warning.
    pub notes: Vec<String>,
    /// Its owner as archived.
    pub owner: Owner,
    /// Its extended attributes as archived (pax `SCHILY.xattr.NAME` records, as GNU tar,
    /// bsdtar and every image builder write them): name and value bytes. Only an image's
    /// entries carry them to the engine (GNU tar restores them only with `--xattrs`).
    #[cfg_attr(not(feature = "image"), allow(dead_code))]
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// An entry's owner as a tar records it: ids, and the names (which GNU tar prefers, where the
/// extracting system knows them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Owner {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub user: Vec<u8>,
    pub group: Vec<u8>,
}

/// A sparse file's map: runs of data at offsets; everything else is a hole. The runs are in
/// order, do not overlap, and end within the file's length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sparse {
    pub runs: Vec<(u64, u64)>,
}

/// Reads members from a tar stream, one at a time.
pub(crate) struct Reader<R> {
    input: R,
    /// Bytes of the current member's data not read yet.
    left: u64,
    /// Padding after the current member's data, up to the next block.
    padding: u64,
    /// Expands a sparse member's data (set by `next` for sparse members).
    sparse: Option<SparseState>,
    /// Whether members' owners are read (only a run that restores them needs them).
    owners: bool,
}

struct SparseState {
    runs: Vec<(u64, u64)>,
    /// The next run.
    next: usize,
    /// Where in the expanded file the reader is.
    at: u64,
    size: u64,
}

impl SparseState {
    /// The run (start, end) the reader is in or before, stepping over those already passed
    /// (zero-length ones included) in a loop: a hostile map may hold millions of them. Past the
    /// last, `(size, size)`.
    fn current_run(&mut self) -> (u64, u64) {
        loop {
            let Some(&(start, len)) = self.runs.get(self.next) else {
                return (self.size, self.size);
            };
            // `checked_runs` made sure no run's end overflows.
            let end = start + len;
            if self.at < start || self.at < end {
                return (start, end);
            }
            self.next += 1;
        }
    }
}

/// The bytes after `size` bytes of data up to the next block (none for any size a tar can
/// hold: a pax `size` record may claim up to 2^64 - 1).
fn padding(size: u64) -> u64 {
    (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64
}

fn unsigned(field: &[u8], what: &str) -> anyhow::Result<u64> {
    let value = number(field).with_context(|| format!("the header's {what}"))?;
    u64::try_from(value).map_err(|_| anyhow!("the header's {what} is negative"))
}

/// A member's name and link target: pax records first, then GNU's long names, then the
/// header's fields (a ustar header's name behind its prefix).
fn names(
    block: &[u8; BLOCK],
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: &Pax,
) -> (Vec<u8>, Vec<u8>) {
    let ustar = &block[257..263] == b"ustar\0";
    let header_name = || {
        let name = until_nul(&block[..100]);
        let prefix = until_nul(&block[345..500]);
        if ustar && !prefix.is_empty() {
            [prefix, b"/", name].concat()
        } else {
            name.to_vec()
        }
    };
    let name = pax
        .get("GNU.sparse.name")
        .or_else(|| pax.get("path"))
        .map(|n| until_nul(n).to_vec())
        .or(long_name)
        .unwrap_or_else(header_name);
    let link = pax
        .get("linkpath")
        .map(|n| until_nul(n).to_vec())
        .or(long_link)
        .unwrap_or_else(|| until_nul(&block[157..257]).to_vec());
    (name, link)
}

/// What a member is, by its type flag (and an old archive's trailing slash).
fn kind_of(typeflag: u8, name: &[u8]) -> Kind {
    match typeflag {
        // Old archives mark directories only by a trailing slash.
        b'0' | b'\0' | b'7' if name.ends_with(b"/") => Kind::Dir,
        b'0' | b'\0' | b'7' | b'S' => Kind::File,
        b'1' => Kind::HardLink,
        b'2' => Kind::Symlink,
        b'3' => Kind::CharDevice,
        b'4' => Kind::BlockDevice,
        // GNU's incremental archives (`tar -g`) store directories as dumpdirs: a
        // directory with a listing of its names as data, which is not needed to extract.
        b'5' | b'D' => Kind::Dir,
        b'6' => Kind::Fifo,
        other => Kind::Other(other),
    }
}

/// A member's mtime: its pax record's (a malformed one taken as GNU tar and bsdtar take it,
/// by the number it starts with, and said in `notes`), else its header's.
fn mtime_of(block: &[u8; BLOCK], pax: &Pax, notes: &mut Vec<String>) -> Option<SystemTime> {
    let header_mtime = || {
        number(&block[136..148])
            .ok()
            .and_then(crate::platform::unix_time)
    };
    let Some(value) = pax.get("mtime") else {
        return header_mtime();
    };
    pax_time(value).or_else(|| {
        let leading = leading_number(value);
        notes.push(format!(
            "its pax mtime '{}' is malformed; {}",
            String::from_utf8_lossy(value).escape_debug(),
            if leading.is_empty() {
                "the header's mtime is used".to_string()
            } else {
                format!("'{}' is used", String::from_utf8_lossy(leading))
            }
        ));
        if leading.is_empty() {
            header_mtime()
        } else {
            pax_time(leading)
        }
    })
}

/// A member's owner: pax records first (they hold ids past the octal fields' reach, and
/// names past 32 bytes), then the header's fields (names in ustar and GNU headers only).
fn owner_of(block: &[u8; BLOCK], pax: &Pax) -> Owner {
    let id = |key: &str, range: std::ops::Range<usize>| match pax.get(key) {
        Some(value) => decimal(value).ok().and_then(|n| u32::try_from(n).ok()),
        None => number(&block[range])
            .ok()
            .and_then(|n| u32::try_from(n).ok()),
    };
    let ustar = block[257..262] == *b"ustar";
    let name_of = |key: &str, range: std::ops::Range<usize>| match pax.get(key) {
        Some(value) => value.to_vec(),
        None if ustar => until_nul(&block[range]).to_vec(),
        None => Vec::new(),
    };
    Owner {
        uid: id("uid", 108..116),
        gid: id("gid", 116..124),
        user: name_of("uname", 265..297),
        group: name_of("gname", 297..329),
    }
}

/// The bytes of a name field, up to its first NUL.
fn until_nul(bytes: &[u8]) -> &[u8] {
    bytes
        .iter()
        .position(|&b| b == 0)
        .map_or(bytes, |end| &bytes[..end])
}

impl<R: Read> Reader<R> {
    pub(crate) fn new(input: R) -> Reader<R> {
        Reader {
            input,
            left: 0,
            padding: 0,
            sparse: None,
            owners: false,
        }
    }

    /// Reads each member's owner too ([`Member::owner`]; left empty otherwise).
    pub(crate) fn with_owners(mut self, owners: bool) -> Self {
        self.owners = owners;
        self
    }

    /// The input, for reading what comes after the archive (a compressor's checksum).
    pub(crate) fn into_inner(self) -> R {
        self.input
    }

    pub(crate) fn get_ref(&self) -> &R {
        &self.input
    }

    pub(crate) fn get_mut(&mut self) -> &mut R {
        &mut self.input
    }

    /// Skips what is left of the current member, then reads the next member's headers.
    /// `None`: the end of the archive (a block of zeros, or the end of the input at a block
    /// boundary).
    pub(crate) fn next(&mut self) -> anyhow::Result<Option<Member>> {
        self.skip_rest()?;
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut pax = Pax::default();
        let mut extensions = false;
        loop {
            let mut block = [0u8; BLOCK];
            if !self.read_block(&mut block)? {
                if extensions {
                    bail!("the archive ends after an extension header, before its member");
                }
                return Ok(None);
            }
            if block.iter().all(|&b| b == 0) {
                if extensions {
                    bail!("an extension header is followed by the end of the archive");
                }
                return Ok(None);
            }
            if !checksum_ok(&block) {
                bail!("a header's checksum is wrong (the archive is corrupt, or not a tar)");
            }
            let typeflag = block[156];
            let stored = self.stored_size(&block, &pax, typeflag)?;
            match typeflag {
                b'L' | b'K' | b'x' => {
                    let data = self.read_extension(stored)?;
                    match typeflag {
                        b'L' => long_name = Some(until_nul(&data).to_vec()),
                        b'K' => long_link = Some(until_nul(&data).to_vec()),
                        _ => pax.parse(&data).context("a pax header is malformed")?,
                    }
                    extensions = true;
                    continue;
                }
                // Global pax records: defaults for the archive (a comment, a charset); none
                // changes what fastwrite extracts.
                b'g' => {
                    self.read_extension(stored)?;
                    continue;
                }
                _ => {}
            }
            return self
                .member(&block, stored, long_name, long_link, &pax)
                .map(Some);
        }
    }

    /// The bytes of data stored after a header (a pax `size` record overrides the field).
    fn stored_size(&self, block: &[u8], pax: &Pax, typeflag: u8) -> anyhow::Result<u64> {
        let field = unsigned(&block[124..136], "size")?;
        // Links, directories, devices and FIFOs store no data whatever the field says (GNU
        // tar, bsdtar and Go read them so: Go's `hdr-only.tar` gives them sizes), except GNU's
        // dumpdir (`D`), which fastwrite skips as data.
        if matches!(typeflag, b'1' | b'2' | b'3' | b'4' | b'5' | b'6') {
            return Ok(0);
        }
        if matches!(typeflag, b'x' | b'g' | b'L' | b'K') {
            return Ok(field);
        }
        Ok(pax.number("size")?.unwrap_or(field))
    }

    fn member(
        &mut self,
        block: &[u8; BLOCK],
        stored: u64,
        long_name: Option<Vec<u8>>,
        long_link: Option<Vec<u8>>,
        pax: &Pax,
    ) -> anyhow::Result<Member> {
        let typeflag = block[156];
        let (name, link) = names(block, long_name, long_link, pax);
        let kind = kind_of(typeflag, &name);
        let mode = number(&block[100..108])
            .ok()
            .and_then(|m| u32::try_from(m & 0o7777).ok());
        let mut notes = pax.notes.clone();
        let mtime = mtime_of(block, pax, &mut notes);
        // An old-style directory (a file type whose name ends in '/') stores no data, whatever
        // its size field says: GNU tar and bsdtar read the next header right after it.
        let stored = if kind == Kind::Dir && typeflag != b'D' {
            0
        } else {
            stored
        };
        let (size, sparse) = self.stored_data(block, (kind, typeflag), stored, pax, &mut notes)?;
        let device = matches!(kind, Kind::CharDevice | Kind::BlockDevice).then(|| {
            let field = |range: std::ops::Range<usize>| {
                number(&block[range])
                    .ok()
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0)
            };
            (field(329..337), field(337..345))
        });
        let owner = match self.owners {
            true => owner_of(block, pax),
            false => Owner::default(),
        };
        Ok(Member {
            kind,
            name,
            link,
            mode,
            mtime,
            size,
            sparse,
            device,
            notes,
            owner,
            xattrs: pax.xattrs(),
        })
    }

    /// Where a member's data is: `stored` bytes follow its header, holding its size (or, for
    /// a sparse file, its runs of data).
    fn stored_data(
        &mut self,
        block: &[u8; BLOCK],
        (kind, typeflag): (Kind, u8),
        stored: u64,
        pax: &Pax,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<(u64, Option<Sparse>)> {
        self.left = stored;
        self.padding = padding(stored);
        let pax_sparse = [
            "GNU.sparse.major",
            "GNU.sparse.size",
            "GNU.sparse.map",
            "GNU.sparse.offset",
        ];
        let (size, sparse) = if typeflag == b'S' {
            self.old_gnu_sparse(block, stored)?
        } else if kind == Kind::File && pax_sparse.iter().any(|key| pax.get(key).is_some()) {
            self.pax_sparse(pax, stored)?
        } else {
            (stored, None)
        };
        if let Some(sparse) = &sparse {
            // A map may claim a little more data than the header stores, into the padding
            // after it (GNU tar reads it from there); `checked_runs` allowed no more than that.
            let data: u64 = sparse.runs.iter().map(|&(_, len)| len).sum();
            if data > self.left {
                let extra = data - self.left;
                notes.push(format!(
                    "its sparse map holds {extra} byte(s) more than the archive stores; read from the padding after it, as GNU tar does"
                ));
                self.padding -= extra;
                self.left = data;
            }
            self.sparse = Some(SparseState {
                runs: sparse.runs.clone(),
                next: 0,
                at: 0,
                size,
            });
        }
        Ok((size, sparse))
    }

    /// An old GNU sparse member: four runs in the header, 21 more in each extension block
    /// that follows while the "is extended" flag is set.
    fn old_gnu_sparse(
        &mut self,
        block: &[u8; BLOCK],
        stored: u64,
    ) -> anyhow::Result<(u64, Option<Sparse>)> {
        let mut runs = Vec::new();
        let mut add = |entries: &[u8]| -> anyhow::Result<()> {
            for entry in entries.chunks_exact(24) {
                if entry.iter().all(|&b| b == 0) {
                    break;
                }
                runs.push((
                    unsigned(&entry[..12], "sparse offset")?,
                    unsigned(&entry[12..], "sparse length")?,
                ));
            }
            Ok(())
        };
        add(&block[386..482])?;
        let mut extended = block[482] != 0;
        while extended {
            let mut ext = [0u8; BLOCK];
            if !self.read_block(&mut ext)? {
                bail!("the archive ends inside a sparse file's map");
            }
            add(&ext[..504])?;
            extended = ext[504] != 0;
        }
        let size = unsigned(&block[483..495], "sparse file's real size")?;
        let runs = checked_runs(runs, size, stored)?;
        Ok((size, Some(runs)))
    }

    /// A pax sparse member, in GNU's format 0.0 (repeated offset and numbytes records), 0.1
    /// (a `GNU.sparse.map` record) or 1.0 (the map at the start of the data).
    fn pax_sparse(&mut self, pax: &Pax, stored: u64) -> anyhow::Result<(u64, Option<Sparse>)> {
        let major = pax.number("GNU.sparse.major")?;
        let size = pax
            .number("GNU.sparse.realsize")?
            .or(pax.number("GNU.sparse.size")?)
            .ok_or_else(|| anyhow!("a pax sparse file does not say its size"))?;
        let pairs = |numbers: Vec<u64>| -> anyhow::Result<Vec<(u64, u64)>> {
            if !numbers.len().is_multiple_of(2) {
                bail!("a sparse map has an offset without a length");
            }
            Ok(numbers.chunks_exact(2).map(|p| (p[0], p[1])).collect())
        };
        let runs = if major == Some(1) {
            self.map_in_data(stored)?
        } else if let Some(map) = pax.get("GNU.sparse.map") {
            let numbers = map
                .split(|&b| b == b',')
                .map(decimal)
                .collect::<anyhow::Result<Vec<_>>>()
                .context("the pax record 'GNU.sparse.map'")?;
            pairs(numbers)?
        } else {
            let offsets = pax.all("GNU.sparse.offset").map(decimal);
            let lengths = pax.all("GNU.sparse.numbytes").map(decimal);
            let runs: anyhow::Result<Vec<_>> =
                offsets.zip(lengths).map(|(o, l)| Ok((o?, l?))).collect();
            let runs = runs.context("the pax records of a sparse map")?;
            if runs.len()
                != pax
                    .all("GNU.sparse.offset")
                    .count()
                    .max(pax.all("GNU.sparse.numbytes").count())
            {
                bail!("a sparse map has an offset without a length");
            }
            runs
        };
        let runs = checked_runs(runs, size, self.left)?;
        Ok((size, Some(runs)))
    }

    /// GNU sparse 1.0: the map is decimal numbers, each ending in a newline (the count of
    /// runs, then an offset and a length per run), padded to a block; the data follows. A line
    /// that begins with `#` is a comment (`#!gnu-sparse-format`, as libarchive writes and
    /// passes over; at most [`MAX_MAP_COMMENT`] bytes).
    fn map_in_data(&mut self, stored: u64) -> anyhow::Result<Vec<(u64, u64)>> {
        let mut numbers = Vec::new();
        let mut count: Option<u64> = None;
        let mut text = Vec::new();
        let mut comment: Option<usize> = None;
        let mut used = 0u64;
        loop {
            if count.is_some_and(|c| numbers.len() as u64 == c.saturating_mul(2)) {
                break;
            }
            let mut block = [0u8; BLOCK];
            if stored.saturating_sub(used) < BLOCK as u64 || !self.read_block(&mut block)? {
                bail!("a sparse file's map runs past its data");
            }
            used += BLOCK as u64;
            for &b in &block {
                if count.is_some_and(|c| numbers.len() as u64 == c.saturating_mul(2)) {
                    // The rest of the block is padding.
                    break;
                }
                if let Some(length) = &mut comment {
                    *length += 1;
                    if b == b'\n' {
                        comment = None;
                    } else if *length > MAX_MAP_COMMENT {
                        bail!("a sparse map's comment line is longer than {MAX_MAP_COMMENT} bytes");
                    }
                    continue;
                }
                if b == b'#' && text.is_empty() {
                    comment = Some(1);
                    continue;
                }
                if b != b'\n' {
                    text.push(b);
                    if text.len() > 20 {
                        bail!("a sparse map number is too long");
                    }
                    continue;
                }
                let n = decimal(&text).context("a sparse map number")?;
                text.clear();
                match count {
                    None => count = Some(n),
                    Some(_) => numbers.push(n),
                }
            }
        }
        // The data is what follows the map's blocks.
        self.left = stored - used;
        Ok(numbers.chunks_exact(2).map(|p| (p[0], p[1])).collect())
    }

    /// Reads one block; false at the end of the input exactly at a block boundary.
    fn read_block(&mut self, block: &mut [u8; BLOCK]) -> anyhow::Result<bool> {
        let mut filled = 0;
        while filled < BLOCK {
            match self.input.read(&mut block[filled..]) {
                Ok(0) if filled == 0 => return Ok(false),
                Ok(0) => bail!("the archive ends inside a header"),
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("reading the archive"),
            }
        }
        Ok(true)
    }

    fn read_extension(&mut self, size: u64) -> anyhow::Result<Vec<u8>> {
        if size > MAX_EXTENSION {
            bail!(
                "an extension header of {size} bytes is larger than the {MAX_EXTENSION} bytes allowed"
            );
        }
        let mut data = Vec::with_capacity(size as usize);
        (&mut self.input)
            .take(size)
            .read_to_end(&mut data)
            .context("reading an extension header")?;
        if data.len() as u64 != size {
            bail!("the archive ends inside an extension header");
        }
        self.left = 0;
        self.padding = padding(size);
        self.skip_rest()?;
        Ok(data)
    }

    /// Skips the current member's unread data and its padding.
    fn skip_rest(&mut self) -> anyhow::Result<()> {
        // At most 511 bytes of padding: a size near 2^64 cannot be skipped anyway (the input
        // ends first), so saturating loses nothing.
        let rest = self.left.saturating_add(self.padding);
        self.left = 0;
        self.padding = 0;
        self.sparse = None;
        if rest == 0 {
            return Ok(());
        }
        let skipped = io::copy(&mut (&mut self.input).take(rest), &mut io::sink())
            .context("reading the archive")?;
        if skipped != rest {
            bail!("the archive ends inside a member's data");
        }
        Ok(())
    }

    /// Reads the current member's data (a sparse member's expanded, holes as zeros).
    fn read_data(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(state) = &mut self.sparse else {
            return self.read_stored(buf);
        };
        if state.at >= state.size || buf.is_empty() {
            return Ok(0);
        }
        let (start, end) = state.current_run();
        if state.at < start {
            // A hole.
            let n = usize::try_from(start - state.at).map_or(buf.len(), |h| h.min(buf.len()));
            buf[..n].fill(0);
            state.at += n as u64;
            return Ok(n);
        }
        let want = usize::try_from(end - state.at).map_or(buf.len(), |r| r.min(buf.len()));
        let n = self.read_stored(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the archive ends inside a sparse file's data",
            ));
        }
        if let Some(state) = &mut self.sparse {
            state.at += n as u64;
        }
        Ok(n)
    }

    fn read_stored(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = usize::try_from(self.left).map_or(buf.len(), |l| l.min(buf.len()));
        let n = self.input.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }

    /// The current member's data, as a reader.
    pub(crate) fn data(&mut self) -> Data<'_, R> {
        Data(self)
    }
}

/// The current member's data (see [`Reader::data`]).
pub(crate) struct Data<'r, R>(&'r mut Reader<R>);

impl<R: Read> Read for Data<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read_data(buf)
    }
}

impl<R: Read> HoleRead for Data<'_, R> {
    fn skip_hole(&mut self) -> u64 {
        let Some(state) = &mut self.0.sparse else {
            return 0;
        };
        // The next run's start, or the file's end, bounds the hole.
        let (next_data, _) = state.current_run();
        let hole = next_data.min(state.size).saturating_sub(state.at);
        state.at += hole;
        hole
    }
}

/// Checks a sparse map against the file's length and the data stored: runs in order, not
/// overlapping, within the length, and adding up to no more than the stored data and its
/// padding.
fn checked_runs(runs: Vec<(u64, u64)>, size: u64, stored: u64) -> anyhow::Result<Sparse> {
    let mut end_of_last = 0u64;
    let mut data = 0u64;
    for &(offset, len) in &runs {
        let end = offset
            .checked_add(len)
            .ok_or_else(|| anyhow!("a sparse run's end overflows"))?;
        if offset < end_of_last || end > size {
            bail!("a sparse file's map is out of order or runs past its length of {size} bytes");
        }
        end_of_last = end;
        data = data
            .checked_add(len)
            .ok_or_else(|| anyhow!("a sparse file's map adds up to more than 2^64 bytes"))?;
    }
    // Less data than stored: the rest is skipped. A little more: it comes from the padding up
    // to the next block, as GNU tar reads it. Past that it would be the next header.
    if data > stored.saturating_add(padding(stored)) {
        bail!("a sparse file's map holds {data} bytes of data, but the archive stores {stored}");
    }
    Ok(Sparse { runs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn numbers_in_octal_and_base_256() {
        assert_eq!(number(b"0000644\0").unwrap(), 0o644);
        // Leading spaces (old writers), a trailing space, an empty field.
        assert_eq!(number(b"   644 \0").unwrap(), 0o644);
        assert_eq!(number(b"\0\0\0\0").unwrap(), 0);
        assert!(number(b"0009\0").is_err());
        assert!(number(b"77777777777777777777777").is_err(), "overflow");
        let mut positive = [0u8; 12];
        positive[0] = 0x80;
        positive[11] = 0x05;
        assert_eq!(number(&positive).unwrap(), 5);
        assert_eq!(number(&[0xff; 12]).unwrap(), -1);
        let mut most_negative = [0u8; 12];
        most_negative[..4].fill(0xff);
        most_negative[4] = 0x80;
        assert_eq!(number(&most_negative).unwrap(), i64::MIN);
        most_negative[3] = 0x7f;
        assert!(number(&most_negative).is_err(), "below i64::MIN");
        assert!(
            number(&[
                0x80, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
            ])
            .is_err()
        );
    }

    /// A header block: `name`, type, size, then the checksum as GNU tar writes it.
    fn header(name: &[u8], typeflag: u8, size: usize) -> Vec<u8> {
        let mut h = vec![0u8; BLOCK];
        h[..name.len()].copy_from_slice(name);
        h[100..108].copy_from_slice(b"0000644\0");
        h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
        h[136..148].copy_from_slice(b"14000000000\0");
        h[156] = typeflag;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        seal(&mut h);
        h
    }

    fn seal(h: &mut [u8]) {
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    }

    fn with_data(mut h: Vec<u8>, data: &[u8]) -> Vec<u8> {
        h.extend(data);
        h.resize(h.len().next_multiple_of(BLOCK), 0);
        h
    }

    fn members(tar: &[u8]) -> anyhow::Result<Vec<(Member, Vec<u8>)>> {
        let mut reader = Reader::new(tar);
        let mut out = Vec::new();
        while let Some(member) = reader.next()? {
            let mut data = Vec::new();
            reader.data().read_to_end(&mut data)?;
            out.push((member, data));
        }
        Ok(out)
    }

    #[test]
    fn the_last_long_name_counts_and_names_end_at_a_nul() {
        let mut tar = Vec::new();
        tar.extend(with_data(header(b"././@LongLink", b'L', 6), b"first\0"));
        tar.extend(with_data(
            header(b"././@LongLink", b'L', 12),
            b"second\0junk",
        ));
        tar.extend(with_data(header(b"short", b'0', 3), b"abc"));
        tar.extend(with_data(header(b"plain", b'0', 1), b"z"));
        tar.extend([0u8; 1024]);
        let found = members(&tar).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0.name, b"second");
        assert_eq!(found[0].1, b"abc");
        assert_eq!(
            found[1].0.name, b"plain",
            "a long name is for one member only"
        );
    }

    #[test]
    fn pax_records_merge_and_override_the_header() {
        let record = |k: &str, v: &str| {
            let body = format!(" {k}={v}\n");
            let mut len = body.len() + 1;
            while len != body.len() + len.to_string().len() {
                len = body.len() + len.to_string().len();
            }
            format!("{len}{body}")
        };
        let first = record("path", "a/wrong");
        let second = format!(
            "{}{}",
            record("path", "a/right\0tail"),
            record("mtime", "1.5")
        );
        let mut tar = Vec::new();
        tar.extend(with_data(
            header(b"PaxHeader", b'x', first.len()),
            first.as_bytes(),
        ));
        tar.extend(with_data(
            header(b"PaxHeader", b'x', second.len()),
            second.as_bytes(),
        ));
        tar.extend(with_data(header(b"header-name", b'0', 2), b"hi"));
        let found = members(&tar).unwrap();
        assert_eq!(found[0].0.name, b"a/right");
        assert_eq!(
            found[0].0.mtime,
            Some(UNIX_EPOCH + Duration::from_millis(1500))
        );
    }

    #[test]
    fn a_v7_header_with_a_space_padded_checksum_is_read() {
        let mut h = vec![0u8; BLOCK];
        h[..5].copy_from_slice(b"old.c");
        h[100..108].copy_from_slice(b"  644 \0\0");
        h[124..136].copy_from_slice(b"          4 ");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..156].copy_from_slice(format!("  {sum:o}\0 ").as_bytes());
        assert!(checksum_ok(&h));
        let found = members(&with_data(h, b"int;")).unwrap();
        assert_eq!(found[0].0.kind, Kind::File);
        assert_eq!(
            (found[0].0.mode, found[0].1.as_slice()),
            (Some(0o644), &b"int;"[..])
        );
    }

    #[test]
    fn sparse_data_is_expanded_with_its_holes() {
        let mut reader = Reader::new(&b"abcdef"[..]);
        reader.left = 6;
        reader.sparse = Some(SparseState {
            runs: vec![(2, 3), (5, 0), (5, 0), (8, 3)],
            next: 0,
            at: 0,
            size: 12,
        });
        let mut out = Vec::new();
        reader.data().read_to_end(&mut out).unwrap();
        assert_eq!(out, b"\0\0abc\0\0\0def\0");
        assert!(
            checked_runs(vec![(0, 4), (2, 4)], 10, 8).is_err(),
            "overlap"
        );
        assert!(checked_runs(vec![(8, 4)], 10, 4).is_err(), "past the end");
        // Less data than stored (the rest is skipped), or more up to the padding, as GNU tar.
        assert!(checked_runs(vec![(0, 4)], 10, 5).is_ok());
        assert!(checked_runs(vec![(0, 6)], 10, 5).is_ok());
        assert!(
            checked_runs(vec![(0, 513)], 600, 5).is_err(),
            "more data than stored, past the padding"
        );
        assert!(
            checked_runs(vec![(u64::MAX, 2)], u64::MAX, 2).is_err(),
            "overflow"
        );
    }

    #[test]
    fn broken_archives_are_errors_not_panics() {
        let good = with_data(header(b"f", b'0', 3), b"abc");
        assert!(members(&good[..100]).is_err(), "inside a header");
        assert!(members(&good[..512]).is_err(), "inside the data");
        let mut bad = good.clone();
        bad[0] = b'g';
        assert!(members(&bad).is_err(), "checksum");
        let huge = header(b"././@LongLink", b'L', (1 << 33) - 1);
        assert!(
            members(&huge).is_err(),
            "an enormous long name is refused, not allocated"
        );
        assert!(
            members(&header(b"x", b'L', 0)).is_err(),
            "ends after an extension"
        );
        // A pax size of 2^64 - 1: an error at the end of the input, never an overflow.
        let record = "29 size=18446744073709551615\n";
        let mut huge = with_data(header(b"PaxHeader", b'x', record.len()), record.as_bytes());
        huge.extend(with_data(header(b"big", b'0', 1), b"z"));
        let mut reader = Reader::new(&huge[..]);
        let member = reader.next().unwrap().unwrap();
        assert_eq!(member.size, u64::MAX);
        let mut data = Vec::new();
        reader.data().read_to_end(&mut data).unwrap();
        assert_eq!(data.len(), 512, "what the input holds, then its end");
        assert!(reader.next().is_err(), "the data runs past the input");
    }
}
