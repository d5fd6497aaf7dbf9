//! The requests a store's `object_store` client does not make, or not as fastwrite needs them,
//! which each store makes its own way (`s3/requests.rs` for S3): what a new store provides
//! beside its client.
//!
//! - Keys as they are: a folder marker's key ends in `/`, which `object_store`'s paths drop (a
//!   listing shows `dir/` as `dir`, and nothing can be made, read or deleted under `dir/`).
//! - Writes that never replace: a marker, and a multipart upload's completion, each only if
//!   the key is free (`object_store` completes an upload unconditionally).
//! - Server-side copy from another bucket of the same store.
//! - The open multipart uploads of one key, for what a killed run began (`stale.rs`).
//! - Multipart uploads begun and completed with the object's metadata (Azure takes it only at
//!   the end, S3 only at the beginning).

use std::time::SystemTime;

use object_store::ObjectStore;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as Key;

/// What fastwrite asks of a store's client: `object_store`'s operations, and multipart
/// uploads by their id (to complete one part by part, and to abort what a killed run left).
/// The clients of S3, Azure Blob Storage and Google Cloud Storage give both.
pub(crate) trait Store: ObjectStore + MultipartStore {}

impl<T: ObjectStore + MultipartStore> Store for T {}

/// An object as a listing shows it.
pub(crate) struct ListedObject {
    pub key: String,
    pub size: u64,
    pub modified: SystemTime,
    pub etag: Option<String>,
}

/// What a write that may not replace came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Made {
    /// Written.
    Done,
    /// Not written: the key was taken (an upload so refused stays open: abort it, or complete
    /// it again without the condition).
    Taken,
}

/// The requests of a store's own, each retried as its client retries its own.
#[async_trait::async_trait]
pub(crate) trait Requests: Send + Sync {
    /// The URL of `key` (no query), as the store's client addresses it: how the meter knows a
    /// PUT whose answer was lost.
    async fn url(&self, key: &Key) -> anyhow::Result<String>;

    /// Every object under `prefix`, keys as they are; with `delimiter`, only the top level and
    /// the folders below it (common prefixes).
    async fn list(
        &self,
        prefix: &str,
        delimiter: bool,
    ) -> anyhow::Result<(Vec<ListedObject>, Vec<String>)>;

    /// Deletes the object `key` as it is (a marker's `/` kept); one not there is no error.
    async fn delete(&self, key: &str) -> anyhow::Result<()>;

    /// The user metadata of the object `key` as it is (a marker's `/` kept), by name; `None`
    /// if there is no such object.
    async fn head(&self, key: &str) -> anyhow::Result<Option<Vec<(String, String)>>>;

    /// The size of the object `key` (as it is) and its content's MD5 in hex where the store
    /// knows it (a single PUT's ETag on S3, `Content-MD5` on Azure); `None` if there is no
    /// such object. How a PUT whose answer was lost knows its own object.
    async fn content(&self, key: &str) -> anyhow::Result<Option<(u64, Option<String>)>>;

    /// A server-side copy of `from_key` in this store's bucket `from_bucket` to `key` here,
    /// keys as they are, the metadata with the object.
    async fn copy_from(&self, from_bucket: &str, from_key: &str, key: &str) -> anyhow::Result<()>;

    /// An empty object named `dir` + `/`, with `meta` as its user metadata; with `create`,
    /// only if the key is free.
    async fn put_marker(
        &self,
        dir: &Key,
        meta: &[(&str, &str)],
        create: bool,
    ) -> anyhow::Result<Made>;

    /// Begins a multipart upload of `key`, whose object gets `meta` as its user metadata;
    /// returns its id (the parts are sent by the client, `MultipartStore::put_part`).
    async fn begin(&self, key: &Key, meta: &[(&str, &str)]) -> anyhow::Result<String>;

    /// Completes the multipart upload `upload` of `key` from `parts`, the object with `meta`
    /// (the same as `begin` was given: a store takes it at one end or the other); with
    /// `create`, only if the key is free.
    async fn complete(
        &self,
        key: &Key,
        upload: &str,
        parts: &[PartId],
        meta: &[(&str, &str)],
        create: bool,
    ) -> anyhow::Result<Made>;

    /// Whether an upload begun and never completed stays in the store (its parts kept, and
    /// billed) until it is aborted: S3's do, and are marked so that a later run aborts what a
    /// killed one left (`stale.rs`). Azure drops uncommitted blocks itself after a week, and
    /// has no request to drop them sooner.
    fn leaves_uploads(&self) -> bool {
        true
    }

    /// The open multipart uploads of exactly `key`: each one's id, and when it began by the
    /// store's clock.
    async fn uploads(&self, key: &str) -> anyhow::Result<Vec<(String, SystemTime)>>;
}

/// Begins a multipart upload of `key` through `object_store`'s own request, which carries the
/// metadata where a store takes it at the beginning (S3's CreateMultipartUpload, Google Cloud
/// Storage's XML API).
pub(crate) async fn begin_with_metadata(
    store: &dyn object_store::multipart::MultipartStore,
    key: &Key,
    meta: &[(&str, &str)],
) -> anyhow::Result<String> {
    let mut attributes = object_store::Attributes::new();
    for (name, value) in meta {
        attributes.insert(
            object_store::Attribute::Metadata(name.to_string().into()),
            value.to_string().into(),
        );
    }
    let opts = object_store::PutMultipartOptions {
        attributes,
        ..Default::default()
    };
    store
        .create_multipart_opts(key, opts)
        .await
        .map_err(|e| anyhow::anyhow!(super::said::explain(&e)))
}
