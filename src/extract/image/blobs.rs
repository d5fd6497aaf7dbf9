//! Where an image's blobs come from, as one trait: a layout's folder (`layout.rs`), a registry
//! (`registry.rs`), a layout in a bucket or at a URL (`remote.rs`), a `docker save` tar
//! (`archive.rs`). The layers are read through it, whatever it is.

use std::io::Read;

use anyhow::{Context, bail};

use super::digest;
use super::manifest::Descriptor;

/// The most bytes a manifest, an index or a config may have: real ones are a few KB.
pub(super) const MAX_DOCUMENT: u64 = 8 << 20;

/// Where an image's blobs come from: a layout's folder, a registry.
pub(super) trait Blobs: Sync {
    /// The blobs come over a network (a registry): what the layers cache keeps.
    fn remote(&self) -> bool {
        false
    }

    /// The blob `descriptor` names, as a stream (its digest is checked by whoever reads it).
    fn open(&self, descriptor: &Descriptor) -> anyhow::Result<Box<dyn Read + Send + '_>>;

    /// A manifest or an index, by its descriptor (a registry serves them apart from blobs),
    /// read whole and checked against its digest.
    fn manifest(&self, descriptor: &Descriptor) -> anyhow::Result<Vec<u8>> {
        self.fetch(descriptor)
    }

    /// A small blob (a config), read whole and checked against its digest.
    fn fetch(&self, descriptor: &Descriptor) -> anyhow::Result<Vec<u8>> {
        if descriptor.size > MAX_DOCUMENT {
            bail!(
                "{} says it is {} bytes, more than a document of an image may be ({MAX_DOCUMENT})",
                descriptor.digest,
                descriptor.size
            );
        }
        let mut bytes = Vec::new();
        self.open(descriptor)?
            .take(MAX_DOCUMENT + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read {}", descriptor.digest))?;
        digest::check_blob(&bytes, descriptor)
            .with_context(|| format!("{} cannot be used", descriptor.digest))?;
        Ok(bytes)
    }
}
