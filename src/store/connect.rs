//! Connecting to a store: the client of a URL's store (its own module's settings and
//! credentials, `s3/`, `azure/`, `gcs/`), and the runtime its requests run on.

use std::sync::Arc;

use anyhow::{Context, anyhow};
use object_store::ObjectStore;

use super::client::{Meter, Retries};
use super::keys::parse_key;
use super::requests::{Requests, Store};
use super::said::explain;
use crate::place::{BucketUrl, StoreKind};

/// A store's client: the store, the requests it makes its own way beside it, and the meter
/// that times them all.
pub(crate) type Client = (Arc<dyn Store>, Arc<dyn Requests>, Arc<Meter>);

/// The client of `url`'s store.
pub(crate) fn connect(url: &BucketUrl, retries: Retries) -> anyhow::Result<Client> {
    let meter = Arc::new(Meter::new(retries));
    let (store, requests) = match url.store {
        StoreKind::S3 => super::s3::connect(url, &meter, retries)?,
        #[cfg(feature = "azure")]
        StoreKind::Azure => super::azure::connect(url, &meter, retries)?,
        #[cfg(not(feature = "azure"))]
        StoreKind::Azure => anyhow::bail!(
            "'{url}' is in Azure Blob Storage, and this build of fastwrite has no Azure client (cargo feature `azure`)"
        ),
        #[cfg(feature = "gcp")]
        StoreKind::Gcs => super::gcs::connect(url, &meter, retries)?,
        #[cfg(not(feature = "gcp"))]
        StoreKind::Gcs => anyhow::bail!(
            "'{url}' is in Google Cloud Storage, and this build of fastwrite has no GCS client (cargo feature `gcp`)"
        ),
    };
    Ok((store, requests, meter))
}

/// The runtime the client's requests run on, its threads named `name`.
pub(crate) fn client_runtime(name: &str) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(crate::options::default_threads().max(2))
        .thread_name(name)
        .enable_all()
        .build()
        .context("cannot start the client's threads")
}

/// The object `key` in `url`'s bucket, for reading: the store (with the settings a run's
/// target is found with) and the key as the store has it.
pub(crate) fn object(
    url: &BucketUrl,
    key: &str,
    retries: Retries,
) -> anyhow::Result<(Arc<dyn ObjectStore>, object_store::path::Path)> {
    let (store, _, _) = connect(url, retries)?;
    let path = parse_key(key).map_err(|e| anyhow!(explain(&e)))?;
    Ok((store, path))
}
