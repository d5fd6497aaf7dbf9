//! An OCI image layout on disk (`oci:DIR[:REF]`), as skopeo, umoci, buildah and crane write
//! one: `oci-layout`, `index.json` (its manifests, each tag an
//! `org.opencontainers.image.ref.name` annotation) and `blobs/sha256/HEX`.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};

use super::blobs::Blobs;
use super::manifest::{self, Descriptor, Document};

/// A layout's folder.
pub(super) struct Layout {
    dir: PathBuf,
}

impl Layout {
    /// The layout at `dir`, and the descriptor of the manifest (or index) `tag` names in it:
    /// with no tag, its only one.
    pub(super) fn open(dir: &Path, tag: Option<&str>) -> anyhow::Result<(Layout, Descriptor)> {
        let marker = dir.join("oci-layout");
        let index = dir.join("index.json");
        if !marker.is_file() || !index.is_file() {
            bail!(
                "'{}' is no OCI image layout: it has no oci-layout and index.json (skopeo copy docker://... oci:DIR:TAG makes one)",
                dir.display()
            );
        }
        let file =
            File::open(&index).with_context(|| format!("cannot read '{}'", index.display()))?;
        let what = format!("'{}'", index.display());
        let bytes = super::blobs::read_capped(file, super::blobs::MAX_MANIFEST, &what)?;
        let chosen = chosen(&bytes, tag, &dir.display().to_string())?;
        let layout = Layout {
            dir: dir.to_path_buf(),
        };
        Ok((layout, chosen))
    }

    fn path_of(&self, digest: &str) -> anyhow::Result<PathBuf> {
        Ok(self.dir.join(blob_path(digest)?))
    }
}

/// The descriptor of the manifest (or index) `tag` names in a layout's `index.json` (`bytes`):
/// with no tag, its only one. `layout` names the layout in messages.
pub(super) fn chosen(bytes: &[u8], tag: Option<&str>, layout: &str) -> anyhow::Result<Descriptor> {
    let Document::Index(manifests) = manifest::parse(bytes, Some(manifest::OCI_INDEX))
        .with_context(|| format!("cannot read the index.json of '{layout}'"))?
    else {
        bail!("the index.json of '{layout}' is not an image index");
    };
    let tags = || {
        let names: Vec<&str> = manifests
            .iter()
            .filter_map(|m| m.ref_name.as_deref())
            .collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    let chosen = match tag {
        Some(tag) => manifests
            .iter()
            .find(|m| m.ref_name.as_deref() == Some(tag))
            .ok_or_else(|| {
                anyhow!(
                    "the layout '{layout}' has no image tagged '{tag}' (its tags: {})",
                    tags()
                )
            })?,
        None => match manifests.as_slice() {
            [only] => only,
            [] => bail!("the layout '{layout}' holds no image"),
            _ => bail!(
                "the layout '{layout}' holds {} images: name one as oci:DIR:TAG (its tags: {})",
                manifests.len(),
                tags()
            ),
        },
    };
    Ok(chosen.clone())
}

/// A blob's place under a layout's root: `blobs/ALGORITHM/HEX`.
pub(super) fn blob_path(digest: &str) -> anyhow::Result<String> {
    super::digest::checkable(digest)?;
    let (algorithm, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
    Ok(format!("blobs/{algorithm}/{hex}"))
}

impl Blobs for Layout {
    fn open(&self, descriptor: &Descriptor) -> anyhow::Result<Box<dyn Read + Send + '_>> {
        let path = self.path_of(&descriptor.digest)?;
        let file = File::open(&path)
            .with_context(|| format!("cannot open the blob '{}'", path.display()))?;
        Ok(Box::new(file))
    }
}
