//! The store client: what fastwrite knows of an object store, below the write engine and the
//! sources alike. The bucket target (`engine/bucket`) writes through it; the sources that read
//! a store (an archive in a bucket, `extract/remote.rs`; a prefix mirrored down,
//! `mirror/from_bucket.rs`) and the records of a run of many (`jobs/records.rs`) read through
//! it. Nothing here knows of entries being written, failures being counted or a run's state.
//!
//! - `client.rs`: what every store's client shares: the HTTP client and its meter (requests in
//!   flight, answers lost, throttling), how it retries; `pace.rs` the process's cap on
//!   requests a second.
//! - `requests.rs`: the requests a store makes its own way beside its client (keys as they
//!   are, writes that never replace, server-side copy, the open uploads of a key).
//! - `said.rs`: a store's error in one line a person can read.
//! - `s3/`: S3, its settings and credentials (as the AWS CLI reads them) and its requests;
//!   `azure/`: Azure Blob Storage, the same (as the Azure CLI and azcopy read them); `gcs/`:
//!   Google Cloud Storage (as gcloud's client libraries find them).
//! - `looked.rs`: the first look at a bucket (can it be used, are conditional writes
//!   honoured), once a process.
//! - `stale.rs`: the marks of multipart uploads, and what killed runs left.
//! - `object.rs`: what a file becomes as an object (its metadata, as rclone and s3fs read it).
//! - `source.rs`: a prefix read, never written.
//! - `flight.rs`: how many requests to keep in flight (Little's law), uploads and downloads.

mod client;
mod flight;
mod looked;
pub(crate) mod object;
mod pace;
pub use pace::set_max_requests_per_second;
#[cfg(feature = "azure")]
mod azure;
#[cfg(feature = "gcp")]
mod gcs;
pub(crate) mod requests;
mod s3;
mod said;
mod source;
pub(crate) mod stale;
mod wire;

pub(crate) use crate::place::{BucketUrl, StoreKind};
pub(crate) use client::Meter;
pub(crate) use flight::{EVERY, Sizer};
pub(crate) use looked::first_look;
pub(crate) use requests::{Made, Requests};
pub(crate) use said::{readable, says_bucket_missing};
pub(crate) use source::{Body, Source, body_reader, read_body};

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use futures_util::StreamExt;
use object_store::multipart::MultipartStore;
use object_store::path::Path as Key;
use object_store::{GetOptions, ObjectStore};

/// What fastwrite asks of a store's client: `object_store`'s operations, and multipart
/// uploads by their id (to complete one part by part, and to abort what a killed run left).
/// The clients of S3, Azure Blob Storage and Google Cloud Storage give both.
pub(crate) trait Store: ObjectStore + MultipartStore {}

impl<T: ObjectStore + MultipartStore> Store for T {}

/// The object `key` in `url`'s bucket, for reading: the store (with the settings a run's
/// target is found with) and the key as the store has it.
pub(crate) fn object(
    url: &BucketUrl,
    key: &str,
) -> anyhow::Result<(Arc<dyn ObjectStore>, object_store::path::Path)> {
    let (store, _, _) = connect(url)?;
    let path = parse_key(key).map_err(|e| anyhow!(explain(&e)))?;
    Ok((store, path))
}

/// An object as a listing shows it.
pub(crate) struct Listed {
    pub size: u64,
    pub modified: std::time::SystemTime,
    /// Its ETag, unquoted: a single PUT's is its content's MD5; a multipart upload's has a `-`.
    pub etag: Option<String>,
}

/// The MD5 of `data`, in hex (a single PUT's ETag).
pub(crate) fn md5_of(file: &mut dyn std::io::Read) -> std::io::Result<String> {
    use md5::{Digest, Md5};
    let mut hasher = Md5::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// A store's client: the store, the requests it makes its own way beside it, and the meter
/// that times them all.
pub(crate) type Client = (Arc<dyn Store>, Arc<dyn Requests>, Arc<Meter>);

/// The client of `url`'s store.
pub(crate) fn connect(url: &BucketUrl) -> anyhow::Result<Client> {
    let meter = Arc::new(Meter::default());
    let (store, requests) = match url.store {
        StoreKind::S3 => s3::connect(url, &meter)?,
        #[cfg(feature = "azure")]
        StoreKind::Azure => azure::connect(url, &meter)?,
        #[cfg(not(feature = "azure"))]
        StoreKind::Azure => anyhow::bail!(
            "'{url}' is in Azure Blob Storage, and this build of fastwrite has no Azure client (cargo feature `azure`)"
        ),
        #[cfg(feature = "gcp")]
        StoreKind::Gcs => gcs::connect(url, &meter)?,
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

/// Every object under `url`'s prefix but fastwrite's own marks, by key as it is (a folder
/// marker's `/` kept): the top level in one request, then each folder below it listed in
/// parallel (ListObjectsV2, 1,000 keys a request).
pub(crate) async fn list_prefix(
    requests: &dyn Requests,
    url: &BucketUrl,
) -> anyhow::Result<HashMap<String, Listed>> {
    let (top, folders) = requests.list(&url.prefix, true).await?;
    let mut found = HashMap::new();
    let mut add = |object: requests::ListedObject| {
        if !stale::is_mark(url, &object.key) {
            let listed = Listed {
                size: object.size,
                modified: object.modified,
                etag: object.etag,
            };
            found.insert(object.key, listed);
        }
    };
    top.into_iter().for_each(&mut add);
    let lists = folders.iter().map(|folder| requests.list(folder, false));
    let mut lists = futures_util::stream::iter(lists).buffer_unordered(16);
    while let Some(listed) = lists.next().await {
        listed?.0.into_iter().for_each(&mut add);
    }
    Ok(found)
}

/// A key as the client takes it, unchanged (`Path::from` would percent-encode every byte past
/// ASCII: `café` would become `caf%C3%A9`). A name holding a control character is refused by
/// the client.
pub(crate) fn parse_key(key: &str) -> Result<Key, object_store::Error> {
    Key::parse(key).map_err(|source| object_store::Error::InvalidPath { source })
}

pub(crate) fn md5_hex(data: &[u8]) -> String {
    use md5::{Digest, Md5};
    let digest = Md5::digest(data);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a create met a key already there: `AlreadyExists`, or a failed precondition
/// (`If-None-Match: *`), as stores answer it.
pub(crate) fn taken(e: &object_store::Error) -> bool {
    matches!(
        e,
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }
    )
}

/// A HEAD that brings the object's attributes (its user metadata) with it.
pub(crate) fn head_with_metadata() -> GetOptions {
    GetOptions {
        head: true,
        ..GetOptions::default()
    }
}

/// The store's error in a line a person can read (`said.rs`): the store's code and what to do,
/// without the client's layers of request detail, URLs or XML.
pub(crate) fn explain(e: &object_store::Error) -> String {
    use std::error::Error as _;
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    said::readable(&text)
}
