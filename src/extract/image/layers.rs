//! Each layer read once: its bytes checked against their digest (and size) as they pass, decoded
//! by what its bytes are (gzip, zstd, or a plain tar), its tar checked against the config's
//! `diff_id`, its headers kept and its files' data spooled into an unnamed temporary file of
//! its own, from which the writers read what the merged tree keeps.
//!
//! Why spool: the tree an image makes is known only once every layer's headers are read (a
//! later layer may delete or replace anything, and a lower layer's symlink decides where an
//! upper layer's name lands), and each final path is written once. Decoding every layer twice
//! (headers, then data) would double the CPU of the slowest stage; holding the data in memory
//! would not bound memory. The spool is written in order, in big chunks, to a local temporary
//! folder (`TMPDIR`), and read back by position, so the writers work in parallel whatever the
//! layer's order.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::time::SystemTime;

use anyhow::{Context, anyhow, bail};
use sha2::{Digest, Sha256};

use super::manifest::Descriptor;
use crate::extract::codec::{Codec, Verified};
use crate::extract::tar::{Kind, Reader};

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
    /// A file's data: where it starts in the layer's spool, and its length.
    pub offset: u64,
    pub size: u64,
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
            offset: 0,
            size: 0,
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
}

/// A reader that hashes (SHA-256) and counts what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    read: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

impl<R> Hashing<R> {
    fn new(inner: R) -> Hashing<R> {
        Hashing {
            inner,
            hasher: Sha256::new(),
            read: 0,
        }
    }

    fn digest(&self) -> String {
        let digest = self.hasher.clone().finalize();
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }
}

/// The SHA-256 digest of `bytes`, as a descriptor writes it (`sha256:` and hex).
pub(super) fn digest_of(bytes: &[u8]) -> String {
    let mut hashing = Hashing::new(bytes);
    // (Reading a slice cannot fail.)
    let _ = io::copy(&mut hashing, &mut io::sink());
    hashing.digest()
}

/// Refuses a digest fastwrite cannot check: only `sha256:` (what every registry and tool
/// writes) is known.
pub(super) fn checkable(digest: &str) -> anyhow::Result<()> {
    match digest.split_once(':') {
        Some(("sha256", hex)) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(())
        }
        Some(("sha256", _)) => bail!("the digest '{digest}' is not 64 hex digits"),
        _ => bail!("the digest '{digest}' is not sha256, the only algorithm fastwrite checks"),
    }
}

/// Checks bytes read whole against their descriptor.
pub(super) fn check_blob(bytes: &[u8], descriptor: &Descriptor) -> anyhow::Result<()> {
    checkable(&descriptor.digest)?;
    if bytes.len() as u64 != descriptor.size {
        bail!(
            "its size is {} bytes, and its descriptor says {}",
            bytes.len(),
            descriptor.size
        );
    }
    let digest = digest_of(bytes);
    if digest != descriptor.digest {
        bail!(
            "its bytes' digest is {digest}, and its descriptor says {}: the blob is not what the manifest names",
            descriptor.digest
        );
    }
    Ok(())
}

/// Reads the layer `blob` whose descriptor is `descriptor` and whose tar's digest the config
/// says is `diff_id`; `label` names it. An error refuses the image: nothing of a layer that
/// fails its digest is trusted.
pub(super) fn read(
    blob: Box<dyn Read + Send + '_>,
    descriptor: &Descriptor,
    diff_id: Option<&str>,
    label: String,
) -> anyhow::Result<Layer> {
    let wrap = |e: anyhow::Error| e.context(format!("{label} cannot be applied"));
    read_checked(blob, descriptor, diff_id, label.clone()).map_err(wrap)
}

fn read_checked(
    blob: Box<dyn Read + Send + '_>,
    descriptor: &Descriptor,
    diff_id: Option<&str>,
    label: String,
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
    let mut blob = Hashing::new(blob);
    let mut buffered = BufReader::with_capacity(1 << 20, &mut blob);
    let head = buffered.fill_buf().context("reading it")?;
    let verified = Verified::default();
    let decoded: Box<dyn Read + Send + '_> = match Codec::detect(head) {
        None => Box::new(buffered),
        Some(codec @ (Codec::Gzip | Codec::Zstd)) => codec
            .decoder(Box::new(buffered) as Box<dyn BufRead + Send>, &verified)
            .map_err(|_| anyhow!("this build has no {} decoder", codec.name()))?,
        Some(codec) => bail!(
            "it is {} data, and a layer is a tar, plain, gzip or zstd (the image spec's media types)",
            codec.name()
        ),
    };
    let mut tar = Hashing::new(decoded);
    let (members, spool) = {
        let mut reader = Reader::new(&mut tar).with_owners(true);
        let spooled = spool_members(&mut reader)?;
        // The rest of the tar (its end blocks, tape padding), for its digest; then the rest of
        // the blob, for the decoder's own check and the blob's digest.
        io::copy(&mut reader.into_inner(), &mut io::sink()).context("reading its end")?;
        spooled
    };
    let tar_digest = tar.digest();
    drop(tar);
    io::copy(&mut blob, &mut io::sink()).context("reading its end")?;
    if blob.read != descriptor.size {
        bail!(
            "it is {} bytes long, and the manifest says {}",
            blob.read,
            descriptor.size
        );
    }
    let digest = blob.digest();
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
        spool: Some(spool),
        label,
    })
}

/// Reads every member's header, and copies each file's data into a new spool.
fn spool_members<R: Read>(reader: &mut Reader<R>) -> anyhow::Result<(Vec<Member>, File)> {
    let spool = tempfile::tempfile().context("cannot make a temporary file to hold its data")?;
    let mut out = BufWriter::with_capacity(1 << 20, spool);
    let mut at = 0u64;
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
            offset: at,
            size: 0,
        };
        if kept.kind == Kind::File {
            let copied = io::copy(&mut reader.data(), &mut out).with_context(|| {
                format!(
                    "reading the data of '{}'",
                    String::from_utf8_lossy(&kept.name)
                )
            })?;
            if copied != member.size {
                bail!(
                    "the data of '{}' ends after {copied} of its {} bytes",
                    String::from_utf8_lossy(&kept.name),
                    member.size
                );
            }
            kept.size = copied;
            at += copied;
        }
        members.push(kept);
    }
    out.flush()
        .context("writing its data to a temporary file")?;
    let spool = out
        .into_inner()
        .map_err(|e| e.into_error())
        .context("writing its data to a temporary file")?;
    Ok((members, spool))
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
