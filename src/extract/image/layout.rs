//! An OCI image layout on disk (`oci:DIR[:REF]`), as skopeo, umoci, buildah and crane write
//! one: `oci-layout`, `index.json` (its manifests, each tag an
//! `org.opencontainers.image.ref.name` annotation) and `blobs/sha256/HEX`.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};

use super::Blobs;
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
        let bytes =
            std::fs::read(&index).with_context(|| format!("cannot read '{}'", index.display()))?;
        let Document::Index(manifests) = manifest::parse(&bytes, Some(manifest::OCI_INDEX))
            .with_context(|| format!("cannot read '{}'", index.display()))?
        else {
            bail!("'{}' is not an image index", index.display());
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
                        "the layout '{}' has no image tagged '{tag}' (its tags: {})",
                        dir.display(),
                        tags()
                    )
                })?,
            None => match manifests.as_slice() {
                [only] => only,
                [] => bail!("the layout '{}' holds no image", dir.display()),
                _ => bail!(
                    "the layout '{}' holds {} images: name one as oci:DIR:TAG (its tags: {})",
                    dir.display(),
                    manifests.len(),
                    tags()
                ),
            },
        };
        let layout = Layout {
            dir: dir.to_path_buf(),
        };
        Ok((layout, chosen.clone()))
    }

    fn path_of(&self, digest: &str) -> anyhow::Result<PathBuf> {
        super::layers::checkable(digest)?;
        let (algorithm, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
        Ok(self.dir.join("blobs").join(algorithm).join(hex))
    }
}

impl Blobs for Layout {
    fn open(&self, descriptor: &Descriptor) -> anyhow::Result<Box<dyn Read + Send + '_>> {
        let path = self.path_of(&descriptor.digest)?;
        let file = File::open(&path)
            .with_context(|| format!("cannot open the blob '{}'", path.display()))?;
        Ok(Box::new(file))
    }
}
