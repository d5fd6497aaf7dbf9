//! Where an image's blobs come from, as one trait: a layout's folder (`layout.rs`), a registry
//! (`registry.rs`), a layout in a bucket or at a URL (`remote.rs`), a `docker save` tar
//! (`archive.rs`). The layers are read through it, whatever it is.

use std::io::Read;

use anyhow::{Context, bail};

use super::digest;
use super::layers::Layer;
use super::manifest::Descriptor;

/// What reads a layer's blob whole and checks it against its digests (`layers::read`).
pub(super) type ReadLayer<'r> = dyn FnMut(Box<dyn Read + Send + '_>) -> anyhow::Result<Layer> + 'r;

/// The most bytes a manifest or an index may have: 4 MiB, the cap of the distribution spec's
/// registry and of containerd (real ones are a few KB). A larger one is refused unread, and
/// one that goes on past it refused there: a source that never ends its answer costs 4 MiB.
pub(super) const MAX_MANIFEST: u64 = 4 << 20;

/// The most bytes a config may have (its `history` grows with every build step; real ones are
/// tens of KB).
pub(super) const MAX_DOCUMENT: u64 = 8 << 20;

/// Reads `from` whole, refusing it once it goes past `cap` bytes: `what` names it in the
/// refusal ("the manifest sha256:...", "the index.json of 'DIR'").
pub(super) fn read_capped(from: impl Read, cap: u64, what: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    from.take(cap + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {what}"))?;
    if bytes.len() as u64 > cap {
        bail!(
            "{what} goes on past {}: refused",
            crate::report::human_bytes(cap)
        );
    }
    Ok(bytes)
}

/// Where an image's blobs come from: a layout's folder, a registry.
pub(super) trait Blobs: Sync {
    /// The blobs come over a network (a registry): what the layers cache keeps.
    fn remote(&self) -> bool {
        false
    }

    /// What fetching the blobs met that is worth telling, not a failure (the waits a
    /// registry asked for), for the run's warnings.
    fn said(&self) -> Vec<String> {
        Vec::new()
    }

    /// The blob `descriptor` names, as a stream (its digest is checked by whoever reads it).
    fn open(&self, descriptor: &Descriptor) -> anyhow::Result<Box<dyn Read + Send + '_>>;

    /// The layer `descriptor` names (`label` in messages), its blob given to `read`: where the
    /// blobs come from; the layers cache (`cache.rs`) first looks in its folder, and keeps
    /// what it fetches once `read` has checked it.
    fn layer(
        &self,
        descriptor: &Descriptor,
        label: &str,
        read: &mut ReadLayer<'_>,
    ) -> anyhow::Result<Layer> {
        let blob = self
            .open(descriptor)
            .with_context(|| format!("{label} cannot be read"))?;
        read(blob)
    }

    /// A manifest or an index, by its descriptor (a registry serves them apart from blobs),
    /// read whole (at most [`MAX_MANIFEST`]) and checked against its digest.
    fn manifest(&self, descriptor: &Descriptor) -> anyhow::Result<Vec<u8>> {
        self.read_whole(descriptor, MAX_MANIFEST)
    }

    /// A small blob (a config), read whole (at most [`MAX_DOCUMENT`]) and checked against its
    /// digest.
    fn fetch(&self, descriptor: &Descriptor) -> anyhow::Result<Vec<u8>> {
        self.read_whole(descriptor, MAX_DOCUMENT)
    }

    /// A document's blob read whole, at most `cap` bytes, and checked against its digest.
    fn read_whole(&self, descriptor: &Descriptor, cap: u64) -> anyhow::Result<Vec<u8>> {
        if descriptor.size > cap {
            bail!(
                "{} says it is {} bytes, more than a document of an image may be ({}): refused",
                descriptor.digest,
                descriptor.size,
                crate::report::human_bytes(cap)
            );
        }
        // (No more than its descriptor says: a source whose answer never ends is refused
        // there.)
        let what = format!(
            "{}, which its descriptor says is {} bytes,",
            descriptor.digest, descriptor.size
        );
        let bytes = read_capped(self.open(descriptor)?, descriptor.size, &what)?;
        digest::check_blob(&bytes, descriptor)
            .with_context(|| format!("{} cannot be used", descriptor.digest))?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_past_its_cap_is_refused_and_one_at_it_read() {
        let at_cap = read_capped(&[b'{'; 16][..], 16, "the index").unwrap();
        assert_eq!(at_cap.len(), 16);
        let past = read_capped(std::io::repeat(b' '), 16, "the index").unwrap_err();
        assert_eq!(past.to_string(), "the index goes on past 16 bytes: refused");
    }
}
