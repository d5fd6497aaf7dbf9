//! The layers cache (`--layers-cache DIR`, [`Options::layers_cache`]): each layer blob a
//! registry served, kept once by its digest, so that a second image sharing a base downloads
//! nothing twice (the `docker pull` of a CI fleet, the base under many images).
//!
//! The folder is laid out as an OCI image layout's blobs are (`DIR/blobs/sha256/HEX`), so its
//! files are what skopeo and umoci would keep. A blob enters it only whole and checked: it is
//! written beside its final name while it is fetched (`.HEX.PID.N.partial`), and renamed to its
//! digest once the layer has passed both its digests; a failed or killed fetch leaves no file
//! under a digest's name, and two runs that fetch the same blob at once each rename a whole
//! copy. A blob taken from the cache is read and checked as a fetched one is; one that fails
//! its digest (a disk that changed it) refuses the image as any lying layer does, and is
//! deleted so that the next run fetches it anew. Nothing is ever evicted: the folder is the
//! user's, to delete as they delete any cache.
//!
//! [`Options::layers_cache`]: crate::Options::layers_cache

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;

use super::blobs::{Blobs, ReadLayer};
use super::layers::{self, Layer};
use super::manifest::Descriptor;
use crate::error::ErrorKind;

/// The layers cache's folder of blobs.
pub(super) struct Cache {
    blobs: PathBuf,
}

/// Where an image's blobs come from, with the layers cache before it: a layer it holds is read
/// from there, and one it does not is kept there as it is fetched.
pub(super) struct Cached {
    pub inner: Box<dyn Blobs>,
    pub cache: Cache,
}

impl Blobs for Cached {
    fn remote(&self) -> bool {
        self.inner.remote()
    }

    fn said(&self) -> Vec<String> {
        self.inner.said()
    }

    fn open(&self, descriptor: &Descriptor) -> anyhow::Result<Box<dyn Read + Send + '_>> {
        self.inner.open(descriptor)
    }

    fn manifest(&self, descriptor: &Descriptor) -> anyhow::Result<Vec<u8>> {
        self.inner.manifest(descriptor)
    }

    fn fetch(&self, descriptor: &Descriptor) -> anyhow::Result<Vec<u8>> {
        self.inner.fetch(descriptor)
    }

    fn layer(
        &self,
        descriptor: &Descriptor,
        label: &str,
        read: &mut ReadLayer<'_>,
    ) -> anyhow::Result<Layer> {
        if let Some((file, path)) = self.cache.get(descriptor) {
            return read(Box::new(file)).map_err(|error| {
                // (The output cap, or a stop because another layer failed: the run's, not the
                // blob's fault.)
                let the_runs = [ErrorKind::Limit, ErrorKind::Cancelled];
                if the_runs.iter().any(|&kind| layers::is_of(&error, kind)) {
                    return error;
                }
                // (Fetched anew by the next run: a blob is kept only once it passed.)
                let _ = std::fs::remove_file(&path);
                error.context(format!(
                    "{label} was read from the layers cache ('{}'), which no longer holds it: run again to fetch it anew",
                    path.display()
                ))
            });
        }
        // (From where the blobs come, as without a cache: through the inner source's own
        // `layer`, the bytes written to the keeper as they pass.)
        let (mut layer, kept) = match self.cache.keeper(descriptor) {
            Ok(mut keeper) => {
                let layer = self.inner.layer(descriptor, label, &mut |blob| {
                    read(Box::new(Tee {
                        inner: blob,
                        keeper: &mut keeper,
                    }))
                })?;
                (layer, keeper.keep())
            }
            Err(why) => (self.inner.layer(descriptor, label, read)?, Err(why)),
        };
        if let Err(why) = kept {
            layer
                .warnings
                .push(format!("{label} was not kept in the layers cache: {why}"));
        }
        Ok(layer)
    }
}

/// A blob being kept: written as it is fetched, renamed to its digest once checked.
pub(super) struct Keeper {
    file: Option<File>,
    partial: PathBuf,
    fin: PathBuf,
    /// Why the blob could not be kept (a full disk): said once the layer is read.
    failed: Option<String>,
}

/// Numbers the partial files of one process.
static PARTIALS: AtomicU64 = AtomicU64::new(0);

impl Cache {
    /// The cache in `dir`, made if it is not there yet.
    pub(super) fn open(dir: &Path) -> anyhow::Result<Cache> {
        let blobs = dir.join("blobs").join("sha256");
        std::fs::create_dir_all(&blobs).with_context(|| {
            format!(
                "cannot make the layers cache '{}' (--layers-cache)",
                dir.display()
            )
        })?;
        Ok(Cache { blobs })
    }

    /// Where the blob `descriptor` names is kept; `None` for a digest that is not sha256 hex
    /// (it would not name a file safely).
    fn path(&self, descriptor: &Descriptor) -> Option<PathBuf> {
        super::digest::checkable(&descriptor.digest).ok()?;
        let hex = descriptor.digest.strip_prefix("sha256:")?;
        Some(self.blobs.join(hex))
    }

    /// The kept blob `descriptor` names, if the cache holds one of its size: opened, and its
    /// path (to delete it if it fails its digest).
    pub(super) fn get(&self, descriptor: &Descriptor) -> Option<(File, PathBuf)> {
        let path = self.path(descriptor)?;
        let file = File::open(&path).ok()?;
        let len = file.metadata().ok()?.len();
        (len == descriptor.size).then_some((file, path))
    }

    /// A keeper for the blob `descriptor` names, about to be fetched; `Err`: why it cannot be
    /// kept (said as a warning, the image applied all the same).
    pub(super) fn keeper(&self, descriptor: &Descriptor) -> Result<Keeper, String> {
        let fin = self
            .path(descriptor)
            .ok_or_else(|| format!("'{}' names no file", descriptor.digest))?;
        let n = PARTIALS.fetch_add(1, Ordering::Relaxed);
        let hex = descriptor.digest.trim_start_matches("sha256:");
        let partial = self
            .blobs
            .join(format!(".{hex}.{}.{n}.partial", std::process::id()));
        let file = File::create(&partial)
            .map_err(|e| format!("cannot write '{}': {e}", partial.display()))?;
        Ok(Keeper {
            file: Some(file),
            partial,
            fin,
            failed: None,
        })
    }
}

impl Keeper {
    /// Writes the next bytes of the blob; an error stops the keeping, never the fetch.
    fn write(&mut self, bytes: &[u8]) {
        if let Some(file) = &mut self.file
            && let Err(e) = file.write_all(bytes)
        {
            self.failed = Some(format!("cannot write '{}': {e}", self.partial.display()));
            self.file = None;
        }
    }

    /// The blob was read whole and passed its digests: it takes its digest's name. `Err`: why
    /// it was not kept.
    pub(super) fn keep(mut self) -> Result<(), String> {
        if let Some(failed) = self.failed.take() {
            return Err(failed);
        }
        let Some(file) = self.file.take() else {
            return Err("it was not written".into());
        };
        drop(file);
        std::fs::rename(&self.partial, &self.fin).map_err(|e| {
            format!(
                "cannot rename '{}' to '{}': {e}",
                self.partial.display(),
                self.fin.display()
            )
        })
    }
}

impl Drop for Keeper {
    /// A blob not kept leaves nothing behind (once renamed, its partial name is gone).
    fn drop(&mut self) {
        self.file = None;
        let _ = std::fs::remove_file(&self.partial);
    }
}

/// A blob's reader that writes what it reads into a [`Keeper`].
pub(super) struct Tee<'k, R> {
    pub inner: R,
    pub keeper: &'k mut Keeper,
}

impl<R: Read> Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.keeper.write(&buf[..n]);
        Ok(n)
    }
}
