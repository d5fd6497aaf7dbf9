//! An image where fastwrite reads archives: an OCI layout under a prefix of a bucket or a URL
//! (`oci:s3://BUCKET/PREFIX[:TAG]`, `oci:https://HOST/PATH[:TAG]`, `az://`, `gs://`), or a
//! `docker save` tar there (`docker-archive:s3://BUCKET/KEY[:NAME:TAG]`). A build without
//! stores refuses such a name saying which feature reads it (`place.rs`), never looking for it
//! as a local path.
//!
//! A layout's `index.json`, manifests, config and blobs are each one GET of its key under the
//! prefix, through the same store client as every archive; each layer's blob is streamed to its
//! layer's threads as it arrives, so the layers come side by side as from a registry, and are
//! kept by `--layers-cache` as a registry's are. A `docker save` tar is fetched whole into an
//! unnamed temporary file and then read as a local one: `docker save` writes its
//! `manifest.json` last, so nothing of it can be used before its end.

use std::fs::File;
use std::io::{Read, Seek};

use anyhow::Context;

use super::blobs::{Blobs, MAX_MANIFEST, read_capped};
use super::manifest::Descriptor;
use crate::place::Origin;
use crate::store::Object;

/// An OCI layout under a prefix of a store.
pub(super) struct RemoteLayout {
    root: Object,
    /// How messages name the layout.
    label: String,
}

impl RemoteLayout {
    /// The layout under `location`, and the descriptor of the manifest (or index) `tag` names
    /// in its `index.json`; `None` when `location` is a local path.
    pub(super) fn open(
        location: &Origin,
        tag: Option<&str>,
        opts: &crate::Options,
    ) -> anyhow::Result<Option<(RemoteLayout, Descriptor)>> {
        let Some(root) = Object::locate(location, Some("fastwrite-layout"), opts)? else {
            return Ok(None);
        };
        let layout = RemoteLayout {
            root,
            label: location.named().display().to_string(),
        };
        let what = format!("the index.json of '{}'", layout.label);
        let index = layout
            .root
            .get("index.json")
            .and_then(|body| read_capped(body, MAX_MANIFEST, &what))
            .with_context(|| {
                format!(
                    "'{}' is no OCI image layout: cannot read its index.json (skopeo copy docker://... oci:DIR:TAG makes one, to copy there)",
                    layout.label
                )
            })?;
        let chosen = super::layout::chosen(&index, tag, &layout.label)?;
        Ok(Some((layout, chosen)))
    }
}

impl Blobs for RemoteLayout {
    fn remote(&self) -> bool {
        true
    }

    fn open(&self, descriptor: &Descriptor) -> anyhow::Result<Box<dyn Read + Send + '_>> {
        let path = super::layout::blob_path(&descriptor.digest)?;
        Ok(Box::new(self.root.get(&path)?))
    }
}

/// The `docker save` tar at `location`, fetched whole into an unnamed temporary file; `None`
/// when `location` is a local path.
pub(super) fn fetched(location: &Origin, opts: &crate::Options) -> anyhow::Result<Option<File>> {
    let Some(object) = Object::locate(location, Some("fastwrite-download"), opts)? else {
        return Ok(None);
    };
    let mut file = tempfile::tempfile().context("cannot make a temporary file")?;
    object.download(&mut file)?;
    file.rewind()?;
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_local_path_is_no_store() {
        let local = |name: &str| Origin::of(Path::new(name)).unwrap();
        assert!(
            RemoteLayout::open(&local("layouts/app"), None, &crate::Options::default())
                .unwrap()
                .is_none()
        );
        assert!(
            fetched(&local("saved.tar"), &crate::Options::default())
                .unwrap()
                .is_none()
        );
    }
}
