//! Google Cloud Storage's requests of our own (`store/requests.rs`), with the client's own
//! bearer token, sent through the run's metered HTTP client:
//! - the JSON API's list, get, delete and rewrite for names as they are (`object_store`
//!   cannot name an object `dir/`, a folder marker), a marker's upload with its metadata and
//!   `ifGenerationMatch=0`;
//! - the XML API's multipart completion with `x-goog-if-generation-match: 0` (`object_store`
//!   completes unconditionally), and its list of the uploads begun on a key, which stay (and
//!   are billed) until aborted, as S3's.
//!
//! Errors from the JSON API are said with the XML API's codes (`NoSuchBucket`, `NoSuchKey`,
//! `AccessDenied`...: `said.rs`), the ones `object_store`'s own requests meet, so that a
//! store's error reads the same whichever request met it.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use object_store::client::HttpRequest;
use object_store::gcp::GoogleCloudStorage;
use object_store::multipart::PartId;
use object_store::path::Path as Key;

use crate::place::BucketUrl;
use crate::store::requests::{ListedObject, Made, Requests};
use crate::store::wire::{self, Answer, query_escape};

/// The boundary between the parts of a marker's upload (its metadata, its empty body).
const BOUNDARY: &str = "fastwrite-marker-boundary";

pub(super) struct GcsRequests {
    store: GoogleCloudStorage,
    client: wire::Client,
    /// Where the store answers (no `/` at the end).
    base: String,
    /// Whether no token is sent (an emulator; `GOOGLE_SKIP_SIGNATURE`).
    unsigned: bool,
    bucket: String,
}

impl GcsRequests {
    pub(super) fn new(
        store: GoogleCloudStorage,
        client: wire::Client,
        base: String,
        unsigned: bool,
        url: &BucketUrl,
    ) -> GcsRequests {
        GcsRequests {
            store,
            client,
            base,
            unsigned,
            bucket: url.bucket.clone(),
        }
    }

    /// The JSON API's URL of the object `key` (as it is) in `bucket`.
    fn object_url(&self, bucket: &str, key: &str) -> String {
        format!(
            "{}/storage/v1/b/{}/o/{}",
            self.base,
            every_byte_escaped(bucket),
            every_byte_escaped(key)
        )
    }

    /// Sends one request with the client's bearer token, retried on a dropped connection, 5xx
    /// and 429.
    async fn send(
        &self,
        method: http::Method,
        url: &str,
        headers: &[(String, String)],
        body: &str,
    ) -> anyhow::Result<Answer> {
        let token = if self.unsigned {
            None
        } else {
            Some(self.store.credentials().get_credential().await?)
        };
        let sign = |request: &mut HttpRequest| -> anyhow::Result<()> {
            if let Some(token) = token.as_ref().filter(|t| !t.bearer.is_empty()) {
                let value = format!("Bearer {}", token.bearer).parse()?;
                request
                    .headers_mut()
                    .insert(http::header::AUTHORIZATION, value);
            }
            Ok(())
        };
        wire::send(&self.client, method, url, headers, body, &sign).await
    }

    /// The JSON resource of the object `key` as it is; `None` if there is none.
    async fn resource(&self, key: &str) -> anyhow::Result<Option<serde_json::Value>> {
        let url = self.object_url(&self.bucket, key);
        let answer = self.send(http::Method::GET, &url, &[], "").await?;
        match answer.status {
            200 => Ok(Some(serde_json::from_str(&answer.body)?)),
            404 if !crate::store::said::says_bucket_missing(&answer.said()) => Ok(None),
            _ => anyhow::bail!("'{key}': {}", answer.said()),
        }
    }
}

/// Every byte but an ASCII letter or digit percent-encoded, as `object_store` forms an
/// object's URL (and the JSON API wants a name, `/` included).
fn every_byte_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// What a listing's answer says: a 404 there can only mean that the bucket is missing,
/// whatever its message.
fn said_of_listing(answer: &Answer, bucket: &str) -> String {
    match answer.status {
        404 => format!("bucket '{bucket}' does not exist (NoSuchBucket)"),
        _ => answer.said(),
    }
}

/// A field of a JSON resource as text (the JSON API gives sizes as strings).
fn text_of(value: &serde_json::Value, name: &str) -> Option<String> {
    match value.get(name)? {
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The content's MD5 in hex, from the resource's base64 `md5Hash` (what S3's single PUT gives
/// as its ETag); else the object's ETag with a `-`, as S3 marks an ETag that is no MD5 (a
/// composed or multipart object has no MD5).
fn etag_of(resource: &serde_json::Value) -> Option<String> {
    let hex = text_of(resource, "md5Hash")
        .and_then(|m| BASE64.decode(m).ok())
        .filter(|bytes| bytes.len() == 16)
        .map(|bytes| bytes.iter().map(|b| format!("{b:02x}")).collect());
    hex.or_else(|| text_of(resource, "etag").map(|e| format!("{e}-")))
}

#[async_trait::async_trait]
impl Requests for GcsRequests {
    /// The XML API's URL of `key`, as `object_store` sends a PUT to it.
    async fn url(&self, key: &Key) -> anyhow::Result<String> {
        Ok(format!(
            "{}/{}/{}",
            self.base,
            every_byte_escaped(&self.bucket),
            every_byte_escaped(key.as_ref())
        ))
    }

    /// The JSON API's list of `prefix`, every page.
    async fn list(
        &self,
        prefix: &str,
        delimiter: bool,
    ) -> anyhow::Result<(Vec<ListedObject>, Vec<String>)> {
        wire::every_page(|token| {
            let mut url = format!(
                "{}/storage/v1/b/{}/o?prefix={}&maxResults=1000&fields={}",
                self.base,
                every_byte_escaped(&self.bucket),
                query_escape(prefix),
                query_escape("items(name,size,updated,md5Hash,etag),prefixes,nextPageToken")
            );
            if delimiter {
                url.push_str("&delimiter=%2F");
            }
            if let Some(token) = &token {
                url.push_str(&format!("&pageToken={}", query_escape(token)));
            }
            async move {
                let answer = self.send(http::Method::GET, &url, &[], "").await?;
                if answer.status != 200 {
                    let said = said_of_listing(&answer, &self.bucket);
                    anyhow::bail!("listing '{prefix}': {said}");
                }
                let page: serde_json::Value = serde_json::from_str(&answer.body)?;
                let objects = page["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|item| {
                        Some(ListedObject {
                            key: text_of(item, "name")?,
                            size: text_of(item, "size")?.parse().unwrap_or(0),
                            modified: wire::rfc3339_or_epoch(text_of(item, "updated")),
                            etag: etag_of(item),
                        })
                    })
                    .collect();
                let folders = page["prefixes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|folder| Some(folder.as_str()?.to_string()))
                    .collect();
                let next = text_of(&page, "nextPageToken");
                Ok(wire::Page {
                    objects,
                    folders,
                    next,
                })
            }
        })
        .await
    }

    async fn delete(&self, key: &str) -> anyhow::Result<()> {
        let url = self.object_url(&self.bucket, key);
        let answer = self.send(http::Method::DELETE, &url, &[], "").await?;
        match answer.status {
            200 | 204 | 404 => Ok(()),
            _ => anyhow::bail!("{}", answer.said()),
        }
    }

    /// The object's user metadata, from its JSON resource.
    async fn head(&self, key: &str) -> anyhow::Result<Option<Vec<(String, String)>>> {
        let Some(resource) = self.resource(key).await? else {
            return Ok(None);
        };
        let meta = resource["metadata"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_string())))
            .collect();
        Ok(Some(meta))
    }

    /// The size and the `md5Hash` (which GCS keeps for a single upload) in hex.
    async fn content(&self, key: &str) -> anyhow::Result<Option<(u64, Option<String>)>> {
        let Some(resource) = self.resource(key).await? else {
            return Ok(None);
        };
        let size = text_of(&resource, "size").and_then(|s| s.parse().ok());
        let md5 = etag_of(&resource).filter(|e| !e.ends_with('-'));
        Ok(size.map(|size| (size, md5)))
    }

    /// The JSON API's rewrite from the bucket `from_bucket` (the metadata with the object),
    /// called again with its token until the store says it is done (a large object, or one
    /// moving between locations or storage classes, takes more than one call).
    async fn copy_from(&self, from_bucket: &str, from_key: &str, key: &str) -> anyhow::Result<()> {
        let url = format!(
            "{}/rewriteTo/b/{}/o/{}",
            self.object_url(from_bucket, from_key),
            every_byte_escaped(&self.bucket),
            every_byte_escaped(key)
        );
        let headers = [("content-type".to_string(), "application/json".to_string())];
        let mut token: Option<String> = None;
        for _ in 0..1000 {
            let url = match &token {
                Some(token) => format!("{url}?rewriteToken={}", query_escape(token)),
                None => url.clone(),
            };
            let answer = self.send(http::Method::POST, &url, &headers, "").await?;
            if answer.status != 200 {
                anyhow::bail!("rewriting '{from_key}': {}", answer.said());
            }
            let progress: serde_json::Value = serde_json::from_str(&answer.body)?;
            if progress["done"].as_bool().unwrap_or(true) {
                return Ok(());
            }
            token = text_of(&progress, "rewriteToken");
            if token.is_none() {
                anyhow::bail!("rewriting '{from_key}': the store gave no token to go on with");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("rewriting '{from_key}': not done after 1,000 calls")
    }

    /// An upload of the JSON API (its metadata and its empty body in one request), with
    /// `ifGenerationMatch=0` when it may not replace.
    async fn put_marker(
        &self,
        dir: &Key,
        meta: &[(&str, &str)],
        create: bool,
    ) -> anyhow::Result<Made> {
        let mut url = format!(
            "{}/upload/storage/v1/b/{}/o?uploadType=multipart",
            self.base,
            every_byte_escaped(&self.bucket)
        );
        if create {
            url.push_str("&ifGenerationMatch=0");
        }
        let metadata: serde_json::Map<String, serde_json::Value> = meta
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string().into()))
            .collect();
        let resource = serde_json::json!({ "name": format!("{dir}/"), "metadata": metadata });
        let body = format!(
            "--{BOUNDARY}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n{resource}\r\n\
             --{BOUNDARY}\r\ncontent-type: application/octet-stream\r\n\r\n\r\n--{BOUNDARY}--\r\n"
        );
        let headers = [(
            "content-type".to_string(),
            format!("multipart/related; boundary={BOUNDARY}"),
        )];
        let answer = self.send(http::Method::POST, &url, &headers, &body).await?;
        wire::made(&answer, "uploading", &[412])
    }

    /// The XML API's multipart upload, begun with the metadata.
    async fn begin(&self, key: &Key, meta: &[(&str, &str)]) -> anyhow::Result<String> {
        crate::store::requests::begin_with_metadata(&self.store, key, meta).await
    }

    /// The XML API's completion, with `x-goog-if-generation-match: 0` when it may not
    /// replace.
    async fn complete(
        &self,
        key: &Key,
        upload: &str,
        parts: &[PartId],
        _meta: &[(&str, &str)],
        create: bool,
    ) -> anyhow::Result<Made> {
        let url = format!("{}?uploadId={}", self.url(key).await?, query_escape(upload));
        let condition = create.then_some(("x-goog-if-generation-match", "0"));
        wire::complete(parts, condition, |headers, body| async move {
            self.send(http::Method::POST, &url, &headers, &body).await
        })
        .await
    }

    /// The XML API's list of the multipart uploads begun on `key`.
    async fn uploads(&self, key: &str) -> anyhow::Result<Vec<(String, SystemTime)>> {
        let base = format!("{}/{}", self.base, every_byte_escaped(&self.bucket));
        let what = &format!("listing the uploads of '{key}'");
        wire::open_uploads(&base, key, |url| async move {
            let answer = self.send(http::Method::GET, &url, &[], "").await?;
            if answer.status != 200 {
                anyhow::bail!("{what}: {}", answer.said());
            }
            Ok(answer)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listings_404_is_the_buckets() {
        let answer = Answer {
            status: 404,
            body: r#"{"error":{"code":404,"message":"Not Found"}}"#.to_string(),
            headers: Vec::new(),
        };
        assert_eq!(
            said_of_listing(&answer, "bk"),
            "bucket 'bk' does not exist (NoSuchBucket)"
        );
    }

    #[test]
    fn names_are_escaped_as_the_client_escapes_them() {
        assert_eq!(
            every_byte_escaped("d/a b-é.txt"),
            "d%2Fa%20b%2D%C3%A9%2Etxt"
        );
        let resource = serde_json::json!({"md5Hash": "XUFAKrxLKna5cZ2REBfFkg==", "etag": "x"});
        assert_eq!(
            etag_of(&resource).unwrap(),
            "5d41402abc4b2a76b9719d911017c592"
        );
        assert_eq!(
            etag_of(&serde_json::json!({"etag": "CJ4="})).unwrap(),
            "CJ4=-"
        );
    }
}
