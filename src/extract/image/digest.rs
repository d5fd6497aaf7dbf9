//! Digests: every blob of an image is named by the SHA-256 of its bytes, and nothing is used
//! before its digest is checked. The hashing reader, and the checks of a digest and of a blob
//! read whole.

use std::io::{self, Read};

use anyhow::bail;
use sha2::{Digest, Sha256};

use super::manifest::Descriptor;

/// A reader that hashes (SHA-256) and counts what passes through it.
pub(super) struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    pub(super) read: u64,
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
    pub(super) fn new(inner: R) -> Hashing<R> {
        Hashing {
            inner,
            hasher: Sha256::new(),
            read: 0,
        }
    }

    pub(super) fn digest(&self) -> String {
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
