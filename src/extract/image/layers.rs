//! Each layer read once: its bytes checked against their digest (and size) as they pass, decoded
//! by what its bytes are (gzip, zstd, or a plain tar), its tar checked against the config's
//! `diff_id`, its headers kept, and its files' data kept where [`Keep`] says until the merge.
//!
//! Why the data is kept aside at all: the tree an image makes is known only once every layer's
//! headers are read (a later layer may delete or replace anything, and a lower layer's symlink
//! decides where an upper layer's name lands), and each final path is made once. Decoding every
//! layer twice (headers, then data) would double the CPU of the slowest stage; holding the data
//! in memory would not bound memory. So each file is written whole as it arrives, where the
//! target can hold it before its path is known: into the output's own filesystem under a
//! temporary name (`Keep::Park`, a local folder: `engine/folder/park.rs`), and moved to its
//! path after the merge, its bytes written once. A small file ([`SPOOLED_MAX`]) is instead
//! appended to a spool of the layer's in the output's own filesystem (`Target::spool`), and
//! written to its path from there after the merge: its parking would cost more than its bytes.
//! Where the target cannot (a bucket, whose objects are not renamed; a network filesystem,
//! where one thread's creates would be round trips one after another) and for listing and
//! reading, the data is spooled in order into an unnamed temporary file of the layer's own in
//! `TMPDIR` (`Keep::Spool`), from which the writers read what the merged tree keeps, in
//! parallel.

use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

use anyhow::{Context, anyhow, bail};

use super::digest::{Hashing, checkable};
use super::manifest::Descriptor;
use super::pipe;
use crate::engine::{Content, Engine, Writer, read_full};
use crate::error::{Error, ErrorKind, Setting};
use crate::extract::codec::{Codec, Verified};
use crate::extract::tar::{Kind, Reader};
use crate::plan::Entry;
use crate::report::human_bytes;

/// One member of a layer, as the merge and the writers need it.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub name: Vec<u8>,
    pub kind: Kind,
    pub link: Vec<u8>,
    pub mode: Option<u32>,
    pub mtime: Option<SystemTime>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub device: Option<(u32, u32)>,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// A file's length, and where its data waits until the merge.
    pub size: u64,
    pub data: Data,
}

/// Where a file's data waits until the merge ([`Keep`]).
#[derive(Debug, Clone, Default)]
pub(super) enum Data {
    /// Nowhere: not a file, or a file not kept.
    #[default]
    None,
    /// In the layer's spool, from this offset.
    Spooled(u64),
    /// Parked in the output, at this path ([`Keep::Park`]).
    Parked(PathBuf),
}

impl Default for Member {
    fn default() -> Self {
        Member {
            name: Vec::new(),
            kind: Kind::File,
            link: Vec::new(),
            mode: None,
            mtime: None,
            uid: None,
            gid: None,
            device: None,
            xattrs: Vec::new(),
            size: 0,
            data: Data::None,
        }
    }
}

/// A layer read: its members in archive order, and the spool their data is in.
#[derive(Debug, Default)]
pub(super) struct Layer {
    pub members: Vec<Member>,
    pub spool: Option<File>,
    /// How messages name it: `layer 2 of 4 (sha256:0123456789ab)`.
    pub label: String,
    /// What the run says of it, once (a blob the layers cache could not keep).
    pub warnings: Vec<String>,
}

/// What the layers read at once share: the output cap (`--max-output`), over the files of
/// every layer, each counted by its declared size before a byte of it is written, parked or
/// spooled (the tar reader gives no more than a member declares), so that a layer of one huge
/// file of zeros (a few MB of gzip) is refused at the cap with no more than the cap written;
/// and a stop, once one layer has failed (the image is refused whole).
pub(super) struct Shared {
    max: Option<u64>,
    counted: AtomicU64,
    stopped: AtomicBool,
}

impl Shared {
    pub(super) fn new(max: Option<u64>) -> Shared {
        Shared {
            max,
            counted: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }
    }

    /// A layer failed: the others stop reading.
    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Counts `size` bytes of the member `name`: refused past the cap, or stopped where
    /// another layer failed.
    fn take(&self, size: u64, name: &[u8]) -> anyhow::Result<()> {
        if self.stopped.load(Ordering::Relaxed) {
            let error = anyhow!("stopped: another layer failed");
            let name = String::from_utf8_lossy(name).into_owned();
            return Err(Error::new(name, ErrorKind::Cancelled, error).into());
        }
        let Some(max) = self.max else {
            return Ok(());
        };
        let before = self.counted.fetch_add(size, Ordering::Relaxed);
        let total = before.saturating_add(size);
        if total <= max {
            return Ok(());
        }
        let name = String::from_utf8_lossy(name).into_owned();
        if before > max {
            // Another layer's file took the count past the cap (layers are read at once):
            // that one is the refusal said; this layer only stops.
            let error = anyhow!("stopped: the image's files went past the cap in another layer");
            return Err(Error::new(name, ErrorKind::Cancelled, error).into());
        }
        let error = anyhow!(
            "refused: its {} would take the image's files to {}, past the cap of {} ({})",
            human_bytes(size),
            human_bytes(total),
            human_bytes(max),
            Setting::MaxOutput
        );
        Err(Error::new(name, ErrorKind::Limit, error).into())
    }
}

/// Whether `error` is, or holds, a failure of `kind`: a refusal at the output cap
/// (`ErrorKind::Limit`) or a stop because another layer failed (`ErrorKind::Cancelled`), both
/// [`Shared`]'s, which are the run's and not the layer's blob's.
pub(super) fn is_of(error: &anyhow::Error, kind: ErrorKind) -> bool {
    error
        .chain()
        .any(|e| e.downcast_ref::<Error>().is_some_and(|e| e.kind() == kind))
}

/// How a layer is read: its name in messages (`layer 2 of 4 (sha256:0123456789ab)`), what it
/// shares with the other layers (the output cap, the stop), and where its files' data waits.
#[derive(Clone)]
pub(super) struct Reading<'a> {
    pub label: String,
    pub shared: &'a Shared,
    pub keep: &'a Keep<'a>,
}

/// Reads the layer `blob` whose descriptor is `descriptor` and whose tar's digest the config
/// says is `diff_id`, as `reading` says. An error refuses the image: nothing of a layer that
/// fails its digest is trusted.
pub(super) fn read(
    blob: Box<dyn Read + Send + '_>,
    descriptor: &Descriptor,
    diff_id: Option<&str>,
    reading: Reading<'_>,
) -> anyhow::Result<Layer> {
    let label = reading.label.clone();
    let wrap = |e: anyhow::Error| e.context(format!("{label} cannot be applied"));
    read_checked(blob, descriptor, diff_id, reading).map_err(wrap)
}

fn read_checked(
    blob: Box<dyn Read + Send + '_>,
    descriptor: &Descriptor,
    diff_id: Option<&str>,
    Reading {
        label,
        shared,
        keep,
    }: Reading<'_>,
) -> anyhow::Result<Layer> {
    // (A `docker save` tar names some layers by path alone: their tar's diff_id checks them.)
    let blob_digest = !descriptor.digest.is_empty();
    if blob_digest {
        checkable(&descriptor.digest)?;
    }
    match diff_id {
        Some(diff_id) => checkable(diff_id).context("the config's diff_id")?,
        None if !blob_digest => bail!("neither its digest nor its tar's is known"),
        None => {}
    }
    if descriptor.media_type.contains("+encrypted") {
        bail!(
            "it is encrypted ({}): fastwrite decrypts no layers",
            descriptor.media_type
        );
    }
    // Three threads (pipe.rs says why): one fetches the blob and hashes it, one inflates it,
    // and this one reads the tar (its digest, headers, spool).
    let (blob_maker, blob_taker) = pipe::pipe();
    let (tar_maker, tar_taker) = pipe::pipe();
    let size = descriptor.size;
    let (fetched, inflated, spooled) = std::thread::scope(|scope| {
        let fetching = std::thread::Builder::new()
            .name("fastwrite-fetch".into())
            .spawn_scoped(scope, move || fetch(blob, size, &blob_maker));
        let inflating = std::thread::Builder::new()
            .name("fastwrite-inflate".into())
            .spawn_scoped(scope, move || inflate(blob_taker, &tar_maker));
        let spooled = spool_tar(tar_taker, (shared, keep));
        (joined(fetching), joined(inflating), spooled)
    });
    // The blob's own errors first (its start, its codec, its end); then the tar's, which
    // include the fetching's and the inflating's (with the entry they cut).
    let fetched = fetched?;
    inflated?;
    let (members, spool, tar_digest) = spooled?;
    let Some(blob) = fetched else {
        bail!("its data stopped before its tar was read");
    };
    if blob.read != descriptor.size {
        bail!(
            "it is {} bytes long, and the manifest says {}",
            blob.read,
            descriptor.size
        );
    }
    let digest = blob.digest;
    if blob_digest && digest != descriptor.digest {
        bail!(
            "its digest is {digest}, and the manifest says {}: the layer is not what the image names",
            descriptor.digest
        );
    }
    if let Some(diff_id) = diff_id
        && tar_digest != diff_id
    {
        bail!(
            "its tar's digest is {tar_digest}, and the config's diff_id says {diff_id}: the layer is not what the image names"
        );
    }
    Ok(Layer {
        members,
        spool,
        label,
        warnings: Vec::new(),
    })
}

/// What a thread of a layer's returned (a panic goes on as a panic).
fn joined<T>(
    thread: io::Result<std::thread::ScopedJoinHandle<'_, anyhow::Result<T>>>,
) -> anyhow::Result<T> {
    match thread {
        Ok(thread) => thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        Err(error) => Err(anyhow!(error).context("cannot start a thread to read it")),
    }
}

/// A blob read to its end: how long it is, and its digest.
struct BlobRead {
    read: u64,
    digest: String,
}

/// Reads the blob to its end, hashing it, into `maker`. `None`: its reader stopped, or was
/// given the blob's error, and the tar's reader says why. A blob that goes on past `size` (its
/// descriptor's) is cut there, not read to its end (a source whose answer never ends is refused
/// at once), and that is the error, whatever the readers made of the cut.
fn fetch(
    blob: Box<dyn Read + Send + '_>,
    size: u64,
    maker: &pipe::Maker,
) -> anyhow::Result<Option<BlobRead>> {
    let mut bounded = NoLonger {
        inner: blob,
        left: size,
        past: false,
    };
    let mut blob = Hashing::new(&mut bounded);
    let pumped = maker.pump(&mut blob);
    let (read, digest) = (blob.read, blob.digest());
    if bounded.past {
        bail!("it goes on past the {size} bytes the manifest says: refused");
    }
    Ok(match pumped {
        pipe::Pumped::Ended => Some(BlobRead { read, digest }),
        pipe::Pumped::ReaderGone | pipe::Pumped::Failed => None,
    })
}

/// A blob's reader that fails once its source gives more than it has `left`.
struct NoLonger<R> {
    inner: R,
    left: u64,
    /// It did.
    past: bool,
}

impl<R: Read> Read for NoLonger<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            self.past = true;
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the blob goes on past its size",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Inflates the blob `blob` gives by what its bytes are, pumps the tar into `maker`, and
/// reads what follows the compressed stream (for the blob's digest).
fn inflate(mut blob: pipe::Taker, maker: &pipe::Maker) -> anyhow::Result<()> {
    let pumped = {
        let head = blob.fill_buf().context("reading it")?;
        let verified = Verified::default();
        let mut decoded: Box<dyn Read + Send + '_> = match Codec::detect(head) {
            None => Box::new(&mut blob),
            Some(codec @ (Codec::Gzip | Codec::Zstd)) => codec
                .decoder(Box::new(&mut blob) as Box<dyn BufRead + Send>, &verified)
                .map_err(|_| anyhow!("this build has no {} decoder", codec.name()))?,
            Some(codec) => bail!(
                "it is {} data, and a layer is a tar, plain, gzip or zstd (the image spec's media types)",
                codec.name()
            ),
        };
        maker.pump(&mut decoded)
    };
    if let pipe::Pumped::Ended = pumped {
        io::copy(&mut blob, &mut io::sink()).context("reading its end")?;
    }
    Ok(())
}

/// Reads the tar `taker` gives: its members, the spool of their data (counted against `cap`),
/// and its digest.
fn spool_tar(
    taker: pipe::Taker,
    held: (&Shared, &Keep<'_>),
) -> anyhow::Result<(Vec<Member>, Option<File>, String)> {
    let mut tar = Hashing::new(taker);
    let mut reader = Reader::new(&mut tar).with_owners(true);
    let (members, spool) = hold_members(&mut reader, held)?;
    // The rest of the tar (its end blocks, tape padding), for its digest and the decoder's own
    // check.
    io::copy(&mut reader.into_inner(), &mut io::sink()).context("reading its end")?;
    Ok((members, spool, tar.digest()))
}

/// Reads every member's header, and keeps each file's data as `keep` says.
fn hold_members<R: Read>(
    reader: &mut Reader<R>,
    (shared, keep): (&Shared, &Keep<'_>),
) -> anyhow::Result<(Vec<Member>, Option<File>)> {
    let mut holder = Holder::new(keep);
    let mut members = Vec::new();
    while let Some(member) = reader.next().with_context(|| match members.last() {
        Some(Member { name, .. }) => format!(
            "its tar is corrupt or truncated after entry '{}'",
            String::from_utf8_lossy(name)
        ),
        None => "its tar is corrupt or truncated before its first entry".into(),
    })? {
        let mut kept = Member {
            name: member.name,
            kind: member.kind,
            link: member.link,
            mode: member.mode,
            mtime: member.mtime,
            uid: member.owner.uid,
            gid: member.owner.gid,
            device: member.device,
            xattrs: member.xattrs,
            size: 0,
            data: Data::None,
        };
        if kept.kind == Kind::File {
            shared.take(member.size, &kept.name)?;
            kept.size = member.size;
            holder.hold(&mut kept, &mut reader.data())?;
        }
        members.push(kept);
    }
    Ok((members, holder.finish()?))
}

/// Where a layer's files' data waits until the merge has decided what each becomes.
pub(super) enum Keep<'a> {
    /// In a spool of the layer's own, in `TMPDIR`: for listing and reading an image, and for a
    /// target that cannot park files (a bucket).
    Spool,
    /// In the output itself, each file written whole as it arrives, under a temporary name
    /// (`Target::park`), with the metadata `entry_of` gives it; moved to its path once the
    /// merge has decided (docs/design.md, "Each file written once, as it arrives").
    Park {
        engine: &'a Engine,
        entry_of: &'a EntryOf<'a>,
    },
}

/// The metadata a parked file is given, from its member.
pub(super) type EntryOf<'a> = dyn Fn(&Member) -> Entry + Sync + 'a;

/// The largest file spooled, not parked, where files are parked: a small file's parking (a
/// create in the parking folder, a rename out of it, each a change of two folders' entries)
/// costs more than writing its bytes twice, of which the second time is mostly still in
/// memory.
pub(super) const SPOOLED_MAX: u64 = 32 << 10;

/// A layer's files' data on its way to where it waits ([`Keep`]): parked, or in the layer's
/// spool (made on first use).
struct Holder<'a> {
    /// Where files are parked, and the metadata each is given there.
    park: Option<(Writer<'a>, &'a EntryOf<'a>)>,
    /// Where the spool is made: `TMPDIR`, or the output's own filesystem.
    spool_in: SpoolIn<'a>,
    spool: Option<Spool>,
}

/// Where a layer's spool is made.
#[derive(Clone, Copy)]
enum SpoolIn<'a> {
    TempDir,
    Output(&'a Engine),
}

/// A layer's spool: its files' data one after another.
struct Spool {
    out: SpoolWriter,
    at: u64,
    /// Where the spool is, for its errors (a `TMPDIR` too small for the image).
    spooled_in: String,
}

impl<'a> Holder<'a> {
    fn new(keep: &Keep<'a>) -> Holder<'a> {
        match *keep {
            Keep::Spool => Holder {
                park: None,
                spool_in: SpoolIn::TempDir,
                spool: None,
            },
            Keep::Park { engine, entry_of } => Holder {
                park: Some((engine.writer(), entry_of)),
                spool_in: SpoolIn::Output(engine),
                spool: None,
            },
        }
    }

    /// Keeps the data of the file `kept` (its declared size in `kept.size`), all of it:
    /// where it is goes into `kept`. Where files are parked, a small one ([`SPOOLED_MAX`]) is
    /// spooled in the output's own filesystem instead.
    fn hold(&mut self, kept: &mut Member, data: &mut dyn Read) -> anyhow::Result<()> {
        let name = || String::from_utf8_lossy(&kept.name).into_owned();
        let ends_early = |got: u64| {
            anyhow!(
                "the data of '{}' ends after {got} of its {} bytes",
                name(),
                kept.size
            )
        };
        match &mut self.park {
            Some((writer, entry_of)) if kept.size > SPOOLED_MAX => {
                let entry = entry_of(kept);
                kept.data = Data::Parked(writer.park(&entry, Content::Reader(data))?);
            }
            _ => {
                let spool = match &mut self.spool {
                    Some(spool) => spool,
                    None => self.spool.insert(Spool::new(self.spool_in)?),
                };
                let copied = spool.out.take_from(data).map_err(|error| match error {
                    Failed::Reading(error) => {
                        anyhow!(error).context(format!("reading the data of '{}'", name()))
                    }
                    Failed::Spooling(error) => anyhow!(error).context(format!(
                        "writing the data of '{}' to {}",
                        name(),
                        spool.spooled_in
                    )),
                })?;
                if copied != kept.size {
                    return Err(ends_early(copied));
                }
                kept.data = Data::Spooled(spool.at);
                spool.at += copied;
            }
        }
        Ok(())
    }

    /// The spool, written whole, if there is one. (Dropping the parking writer hands its
    /// closes over.)
    fn finish(self) -> anyhow::Result<Option<File>> {
        let Some(Spool {
            out, spooled_in, ..
        }) = self.spool
        else {
            return Ok(None);
        };
        out.finish()
            .map(Some)
            .with_context(|| format!("writing its data to {spooled_in}"))
    }
}

impl Spool {
    fn new(spool_in: SpoolIn<'_>) -> anyhow::Result<Spool> {
        let (spooled_in, made) = match spool_in {
            SpoolIn::TempDir => (
                format!(
                    "a temporary file in '{}' (TMPDIR)",
                    std::env::temp_dir().display()
                ),
                tempfile::tempfile(),
            ),
            SpoolIn::Output(engine) => (
                format!(
                    "a temporary file in the output '{}'",
                    engine.run().root().display()
                ),
                engine.spool(),
            ),
        };
        let file = made.with_context(|| format!("cannot make {spooled_in} to hold its data"))?;
        Ok(Spool {
            out: SpoolWriter::new(file),
            at: 0,
            spooled_in,
        })
    }
}

/// Writes a spool in big pieces, its data read straight into its buffer: `io::copy` into a
/// `BufWriter` would zero the buffer's free space before every read (a reader of ours cannot
/// say it writes only what it fills), which took a tenth of a large layer's time.
struct SpoolWriter {
    file: File,
    buf: Box<[u8]>,
    filled: usize,
}

/// Which side of a copy into the spool failed.
enum Failed {
    Reading(io::Error),
    Spooling(io::Error),
}

impl SpoolWriter {
    fn new(file: File) -> SpoolWriter {
        SpoolWriter {
            file,
            buf: vec![0; 1 << 20].into_boxed_slice(),
            filled: 0,
        }
    }

    /// Copies everything `from` gives into the spool: how many bytes.
    fn take_from(&mut self, from: &mut dyn Read) -> Result<u64, Failed> {
        let mut copied = 0u64;
        loop {
            if self.filled == self.buf.len() {
                self.flush().map_err(Failed::Spooling)?;
            }
            let room = self.buf.len() - self.filled;
            let (n, failed) = read_full(from, &mut self.buf[self.filled..]);
            self.filled += n;
            copied += n as u64;
            if let Some(error) = failed {
                return Err(Failed::Reading(error));
            }
            if n < room {
                return Ok(copied);
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.write_all(&self.buf[..self.filled])?;
        self.filled = 0;
        Ok(())
    }

    fn finish(mut self) -> io::Result<File> {
        self.flush()?;
        Ok(self.file)
    }
}

/// A file's data in a spool, read by position: many writers read one spool at once.
pub(super) struct Spooled<'a> {
    pub spool: &'a File,
    pub at: u64,
    pub end: u64,
}

impl Read for Spooled<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.end.saturating_sub(self.at);
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = crate::platform::read_at(self.spool, &mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}
