//! Where a run writes, parsed once where the run begins ([`Destination::parse`]) and handed
//! down to the engine: a local folder (and, while the run is staged, the folder it writes in
//! instead, `stage.rs`), or with cargo feature `s3` a store's prefix. Nothing below asks again
//! whether a path is a URL.

use std::path::{Path, PathBuf};

#[cfg(feature = "s3")]
use crate::store::BucketUrl;

#[derive(Clone, Debug)]
pub(crate) struct Destination {
    /// As it was named (what messages say).
    named: PathBuf,
    place: Place,
}

#[derive(Clone, Debug)]
enum Place {
    /// A local folder; `work` is where files are made: the folder itself, or its staging
    /// folder while the run is staged.
    Folder { work: PathBuf },
    /// A bucket's prefix.
    #[cfg(feature = "s3")]
    Store(BucketUrl),
}

impl Destination {
    /// What `named` means: a store's URL (`s3://BUCKET/PREFIX`), else a local folder. A URL of
    /// a scheme this build does not write is refused (see
    /// [`refuse_url`](super::target::refuse_url)), never taken for a folder's name.
    pub(crate) fn parse(named: &Path) -> anyhow::Result<Destination> {
        #[cfg(feature = "s3")]
        if let Some(url) = BucketUrl::parse(named)? {
            return Ok(Destination {
                named: named.to_path_buf(),
                place: Place::Store(url),
            });
        }
        super::target::refuse_url(named)?;
        Ok(Destination::folder(named))
    }

    /// The local folder `path`, never a URL (a mirror's own destination, a test's folder).
    pub(crate) fn folder(path: &Path) -> Destination {
        Destination {
            named: path.to_path_buf(),
            place: Place::Folder {
                work: path.to_path_buf(),
            },
        }
    }

    /// The destination as it was named.
    pub(crate) fn named(&self) -> &Path {
        &self.named
    }

    /// Where a folder's files are made: the folder, or its staging folder while the run is
    /// staged. `None` for a store.
    pub(crate) fn work(&self) -> Option<&Path> {
        match &self.place {
            Place::Folder { work } => Some(work),
            #[cfg(feature = "s3")]
            Place::Store(_) => None,
        }
    }

    /// The store's bucket and prefix, if that is where the run writes.
    #[cfg(feature = "s3")]
    pub(crate) fn store(&self) -> Option<&BucketUrl> {
        match &self.place {
            Place::Store(url) => Some(url),
            Place::Folder { .. } => None,
        }
    }

    /// Whether the run writes into a store (no local folder, no free space of this machine's).
    pub(crate) fn is_store(&self) -> bool {
        self.work().is_none()
    }

    /// The same folder, written in `work` instead (its staging folder).
    pub(crate) fn staged_in(&self, work: &Path) -> Destination {
        Destination {
            named: self.named.clone(),
            place: Place::Folder {
                work: work.to_path_buf(),
            },
        }
    }
}
