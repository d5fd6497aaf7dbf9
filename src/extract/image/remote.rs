//! An image where fastwrite reads archives (feature `s3`; without it, such a name is refused
//! saying so, never looked for as a local path): an OCI layout under a prefix of a
//! bucket or a URL (`oci:s3://BUCKET/PREFIX[:TAG]`, `oci:https://HOST/PATH[:TAG]`, `az://`,
//! `gs://`), or a `docker save` tar there (`docker-archive:s3://BUCKET/KEY[:NAME:TAG]`).
//!
//! A layout's `index.json`, manifests, config and blobs are each one GET of its key under the
//! prefix, through the same store client as every archive; each layer's blob is streamed to its
//! layer's threads as it arrives, so the layers come side by side as from a registry, and are
//! kept by `--layers-cache` as a registry's are. A `docker save` tar is fetched whole into an
//! unnamed temporary file and then read as a local one: `docker save` writes its
//! `manifest.json` last, so nothing of it can be used before its end.

#[cfg(feature = "s3")]
pub(super) use in_store::{RemoteLayout, fetched};
#[cfg(not(feature = "s3"))]
pub(super) use without_stores::{RemoteLayout, fetched};

#[cfg(feature = "s3")]
mod in_store {
    use std::fs::File;
    use std::io::{self, Read, Seek};
    use std::path::Path;
    use std::sync::Arc;

    use anyhow::{Context, anyhow};
    use object_store::path::Path as Key;
    use object_store::{ObjectStore, ObjectStoreExt};

    use super::super::blobs::Blobs;
    use super::super::manifest::Descriptor;
    use crate::extract::remote::Located;
    use crate::store::{body_reader, explain};

    /// An OCI layout under a prefix of a store.
    pub(in super::super) struct RemoteLayout {
        store: Arc<dyn ObjectStore>,
        root: Key,
        /// How messages name the layout.
        label: String,
        /// The store's words for a missing object.
        missing: &'static str,
        runtime: tokio::runtime::Runtime,
    }

    /// The store and key `location` names, if it names one (`None`: a local path).
    fn locate(location: &Path) -> anyhow::Result<Option<Located>> {
        // (A prefix is named with or without its trailing `/`.)
        let text = location.to_str().unwrap_or_default();
        let trimmed = Path::new(text.trim_end_matches('/'));
        crate::extract::remote::located(trimmed)
    }

    impl RemoteLayout {
        /// The layout under `location`, and the descriptor of the manifest (or index) `tag` names
        /// in its `index.json`; `None` when `location` is a local path.
        pub(in super::super) fn open(
            location: &Path,
            tag: Option<&str>,
        ) -> anyhow::Result<Option<(RemoteLayout, Descriptor)>> {
            let Some(Located {
                store,
                key: root,
                missing,
            }) = locate(location)?
            else {
                return Ok(None);
            };
            let layout = RemoteLayout {
                store,
                root,
                label: location.display().to_string(),
                missing,
                runtime: crate::store::client_runtime("fastwrite-layout")?,
            };
            let mut index = Vec::new();
            layout
                .get("index.json")
                .and_then(|mut body| {
                    body.by_ref()
                        .take(super::super::blobs::MAX_DOCUMENT + 1)
                        .read_to_end(&mut index)
                        .map_err(anyhow::Error::from)
                })
                .with_context(|| {
                    format!(
                        "'{}' is no OCI image layout: cannot read its index.json (skopeo copy docker://... oci:DIR:TAG makes one, to copy there)",
                        layout.label
                    )
                })?;
            let chosen = super::super::layout::chosen(&index, tag, &layout.label)?;
            Ok(Some((layout, chosen)))
        }

        /// The object at `path` under the layout's root, as a stream.
        fn get(&self, path: &str) -> anyhow::Result<impl Read + Send + '_> {
            let key = path
                .split('/')
                .fold(self.root.clone(), |key, part| key.join(part));
            let got = self
                .runtime
                .block_on(self.store.get(&key))
                .map_err(|e| match e {
                    object_store::Error::NotFound { .. } => {
                        anyhow!("'{}' has no {path} ({})", self.label, self.missing)
                    }
                    e => anyhow!("cannot read {path} of '{}': {}", self.label, explain(&e)),
                })?;
            Ok(body_reader(&self.runtime, key.as_ref(), got.into_stream()))
        }
    }

    impl Blobs for RemoteLayout {
        fn remote(&self) -> bool {
            true
        }

        fn open(&self, descriptor: &Descriptor) -> anyhow::Result<Box<dyn Read + Send + '_>> {
            let path = super::super::layout::blob_path(&descriptor.digest)?;
            Ok(Box::new(self.get(&path)?))
        }
    }

    /// The `docker save` tar at `location`, fetched whole into an unnamed temporary file; `None`
    /// when `location` is a local path.
    pub(in super::super) fn fetched(location: &Path) -> anyhow::Result<Option<File>> {
        let Some(Located {
            store,
            key,
            missing,
        }) = locate(location)?
        else {
            return Ok(None);
        };
        let label = location.display();
        let runtime = crate::store::client_runtime("fastwrite-download")?;
        let got = runtime.block_on(store.get(&key)).map_err(|e| match e {
            object_store::Error::NotFound { .. } => anyhow!("'{label}': {missing}"),
            e => anyhow!("cannot read '{label}': {}", explain(&e)),
        })?;
        let body = body_reader(&runtime, key.as_ref(), got.into_stream());
        let mut file = tempfile::tempfile().context("cannot make a temporary file")?;
        // (Copied through the reader's own megabyte, not 8 KiB at a time.)
        io::copy(&mut io::BufReader::with_capacity(1 << 20, body), &mut file)
            .with_context(|| format!("cannot fetch '{label}'"))?;
        file.rewind()?;
        Ok(Some(file))
    }
}

/// A build without stores: a name of one is refused, saying which feature reads it.
#[cfg(not(feature = "s3"))]
mod without_stores {
    use std::fs::File;
    use std::path::Path;

    use super::super::blobs::Blobs;
    use super::super::manifest::Descriptor;

    /// Never made: a build without stores has no layout in one.
    pub(in super::super) enum RemoteLayout {}

    impl RemoteLayout {
        pub(in super::super) fn open(
            location: &Path,
            _: Option<&str>,
        ) -> anyhow::Result<Option<(RemoteLayout, Descriptor)>> {
            refuse(location)?;
            Ok(None)
        }
    }

    impl Blobs for RemoteLayout {
        fn open(&self, _: &Descriptor) -> anyhow::Result<Box<dyn std::io::Read + Send + '_>> {
            match *self {}
        }
    }

    pub(in super::super) fn fetched(location: &Path) -> anyhow::Result<Option<File>> {
        refuse(location)?;
        Ok(None)
    }

    fn refuse(location: &Path) -> anyhow::Result<()> {
        if let Some(scheme) = crate::place::url_scheme(location) {
            return Err(crate::extract::format::not_built(
                &format!("'{}'", location.display()),
                &format!("an image at a {scheme}:// URL"),
                "images from buckets and URLs",
                "s3",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_local_path_is_no_store() {
        assert!(
            RemoteLayout::open(Path::new("layouts/app"), None)
                .unwrap()
                .is_none()
        );
        assert!(fetched(Path::new("saved.tar")).unwrap().is_none());
    }

    #[cfg(not(feature = "s3"))]
    #[test]
    fn a_store_is_refused_by_a_build_without_stores() {
        let refused = fetched(Path::new("s3://bucket/saved.tar")).unwrap_err();
        assert!(
            format!("{refused:#}").contains("cargo feature `s3`"),
            "{refused:#}"
        );
    }
}
