//! S3's requests of our own (`store/requests.rs`: the ones `object_store` 0.14 does not make), signed with its own signer
//! (`AwsAuthorizer`) and sent through the run's metered HTTP client:
//! - a folder marker, an empty object whose key ends in `/` (`object_store`'s paths drop a
//!   last `/`);
//! - CompleteMultipartUpload with `If-None-Match: *`, so a large file never replaces a key
//!   either (`object_store` completes without it);
//! - ListObjectsV2 and DeleteObject for keys as they are (`object_store` lists a marker
//!   `dir/` as `dir`, and could not delete it);
//! - ListMultipartUploads of one key, for the uploads a killed run began (`stale.rs`).
//!
//! Each is retried as `object_store` retries its own: on a dropped connection, a 5xx and
//! 429, with backoff, a few times.

use std::time::Duration;

use object_store::aws::{AmazonS3, AwsAuthorizer};
use object_store::client::HttpRequest;
use object_store::multipart::PartId;
use object_store::path::Path as Key;
use object_store::signer::Signer;

use crate::store::requests::{ListedObject, Made, Requests};
use crate::store::wire::{self, Answer, elements, query_escape, xml_unescape};

#[derive(Clone)]
pub(super) struct S3Requests {
    store: AmazonS3,
    client: wire::Client,
    region: String,
}

impl S3Requests {
    pub(super) fn new(store: AmazonS3, client: wire::Client, region: String) -> S3Requests {
        S3Requests {
            store,
            client,
            region,
        }
    }

    /// The bucket's own URL (ends in `/`).
    async fn bucket_url(&self) -> anyhow::Result<String> {
        let probe = self.url(&Key::from("x")).await?;
        Ok(probe[..probe.len() - 1].to_string())
    }

    /// The URL of the object `key` as it is (a marker's `/` kept), each name escaped.
    async fn key_url(&self, key: &str) -> anyhow::Result<String> {
        Ok(format!("{}{}", self.bucket_url().await?, key_path(key)))
    }

    /// A page of a listing (GET `url`), which must answer 200.
    async fn get_listing(&self, url: &str, what: &str) -> anyhow::Result<Answer> {
        let answer = self.send(http::Method::GET, url, &[], "").await?;
        if answer.status != 200 {
            anyhow::bail!("{what}: {}", answer.said());
        }
        Ok(answer)
    }

    /// Sends one signed request, retried on a dropped connection, 5xx and 429.
    async fn send(
        &self,
        method: http::Method,
        url: &str,
        headers: &[(String, String)],
        body: &str,
    ) -> anyhow::Result<Answer> {
        let credential = self.store.credentials().get_credential().await?;
        let sign = |request: &mut HttpRequest| -> anyhow::Result<()> {
            AwsAuthorizer::new(&credential, "s3", &self.region).try_authorize(request, None)?;
            Ok(())
        };
        wire::send(&self.client, method, url, headers, body, &sign).await
    }
}

#[async_trait::async_trait]
impl Requests for S3Requests {
    /// The URL of `key` (no query), as the store addresses it: its own signed URL, unsigned.
    async fn url(&self, key: &Key) -> anyhow::Result<String> {
        let signed = self
            .store
            .signed_url(http::Method::PUT, key, Duration::from_secs(60))
            .await?;
        let text = signed.to_string();
        Ok(text.split('?').next().unwrap_or(&text).to_string())
    }

    /// ListObjectsV2 of `prefix`, every page: the objects, and with `delimiter` the folders
    /// below (common prefixes).
    async fn list(
        &self,
        prefix: &str,
        delimiter: bool,
    ) -> anyhow::Result<(Vec<ListedObject>, Vec<String>)> {
        let base = self.bucket_url().await?;
        wire::every_page(|token| {
            let mut url = format!("{base}?list-type=2&prefix={}", query_escape(prefix));
            if delimiter {
                url.push_str("&delimiter=%2F");
            }
            if let Some(token) = &token {
                url.push_str(&format!("&continuation-token={}", query_escape(token)));
            }
            async move {
                let answer = self
                    .get_listing(&url, &format!("listing '{prefix}'"))
                    .await?;
                let objects = elements(&answer.body, "Contents")
                    .filter_map(|object| {
                        let field = |name| elements(object, name).next().map(xml_unescape);
                        Some(ListedObject {
                            key: field("Key")?,
                            size: field("Size")?.parse().unwrap_or(0),
                            modified: wire::rfc3339_or_epoch(field("LastModified")),
                            etag: field("ETag").map(|t| t.trim_matches('"').to_string()),
                        })
                    })
                    .collect();
                let folders = elements(&answer.body, "CommonPrefixes")
                    .filter_map(|folder| elements(folder, "Prefix").next().map(xml_unescape))
                    .collect();
                let truncated = elements(&answer.body, "IsTruncated").next() == Some("true");
                let next = elements(&answer.body, "NextContinuationToken")
                    .next()
                    .map(xml_unescape)
                    .filter(|_| truncated);
                Ok(wire::Page {
                    objects,
                    folders,
                    next,
                })
            }
        })
        .await
    }

    /// Deletes the object `key` as it is (a marker's `/` kept).
    async fn delete(&self, key: &str) -> anyhow::Result<()> {
        let url = self.key_url(key).await?;
        let answer = self.send(http::Method::DELETE, &url, &[], "").await?;
        match answer.status {
            200 | 204 | 404 => Ok(()),
            _ => anyhow::bail!("{}", answer.said()),
        }
    }

    /// The user metadata of the object `key`, as it is (a folder marker's `/` kept): HEAD.
    async fn head(&self, key: &str) -> anyhow::Result<Option<Vec<(String, String)>>> {
        let url = self.key_url(key).await?;
        let answer = self.send(http::Method::HEAD, &url, &[], "").await?;
        match answer.status {
            200 => Ok(Some(answer.meta("x-amz-meta-"))),
            404 => Ok(None),
            _ => anyhow::bail!("HEAD '{key}': {}", answer.said()),
        }
    }

    /// HEAD: the size, and the ETag where it is an MD5 (a single PUT's: no `-`).
    async fn content(&self, key: &str) -> anyhow::Result<Option<(u64, Option<String>)>> {
        let url = self.key_url(key).await?;
        let answer = self.send(http::Method::HEAD, &url, &[], "").await?;
        match answer.status {
            200 => {
                let size = answer.header("content-length").and_then(|s| s.parse().ok());
                let etag = answer
                    .header("etag")
                    .map(|t| t.trim_matches('"').to_string())
                    .filter(|t| !t.contains('-'));
                Ok(size.map(|size| (size, etag)))
            }
            404 => Ok(None),
            _ => anyhow::bail!("HEAD '{key}': {}", answer.said()),
        }
    }

    /// A server-side copy (CopyObject) of `from_key` in bucket `from_bucket` to `key` in this
    /// bucket, keys as they are (a marker's `/` kept), the metadata copied with the object.
    async fn copy_from(&self, from_bucket: &str, from_key: &str, key: &str) -> anyhow::Result<()> {
        let source = format!("{}/{}", path_escape(from_bucket), key_path(from_key));
        let headers = [("x-amz-copy-source".to_string(), source)];
        let url = self.key_url(key).await?;
        let answer = self.send(http::Method::PUT, &url, &headers, "").await?;
        // S3 can answer 200 with an error in the body, when the copy failed late.
        match answer.status {
            200 if !answer.body.contains("<Error>") => Ok(()),
            _ => anyhow::bail!("CopyObject: {}", answer.said()),
        }
    }

    /// The open multipart uploads of exactly `key` (ListMultipartUploads of the prefix
    /// `key`, every page): each one's id and when it began, by the store's clock.
    async fn uploads(&self, key: &str) -> anyhow::Result<Vec<(String, std::time::SystemTime)>> {
        let base = self.bucket_url().await?;
        let what = format!("listing the uploads of '{key}'");
        let what = &what;
        wire::open_uploads(&base, key, |url| async move {
            self.get_listing(&url, what).await
        })
        .await
    }

    async fn put_marker(
        &self,
        dir: &Key,
        meta: &[(&str, &str)],
        create: bool,
    ) -> anyhow::Result<Made> {
        let url = format!("{}/", self.url(dir).await?);
        let mut headers: Vec<(String, String)> = meta
            .iter()
            .map(|(name, value)| (format!("x-amz-meta-{name}"), value.to_string()))
            .collect();
        if create {
            headers.push(("if-none-match".into(), "*".into()));
        }
        let answer = self.send(http::Method::PUT, &url, &headers, "").await?;
        wire::made(&answer, "PUT", &[412])
    }

    /// CreateMultipartUpload, the metadata with it.
    async fn begin(&self, key: &Key, meta: &[(&str, &str)]) -> anyhow::Result<String> {
        crate::store::requests::begin_with_metadata(&self.store, key, meta).await
    }

    /// CompleteMultipartUpload (the metadata was given when it began).
    async fn complete(
        &self,
        key: &Key,
        upload: &str,
        parts: &[PartId],
        _meta: &[(&str, &str)],
        create: bool,
    ) -> anyhow::Result<Made> {
        let url = format!("{}?uploadId={}", self.url(key).await?, query_escape(upload));
        let condition = create.then_some(("if-none-match", "*"));
        wire::complete(parts, condition, |headers, body| async move {
            self.send(http::Method::POST, &url, &headers, &body).await
        })
        .await
    }
}

/// `key` as a URL path: each name between `/` escaped.
fn key_path(key: &str) -> String {
    key.split('/')
        .map(path_escape)
        .collect::<Vec<_>>()
        .join("/")
}

/// A name in a URL's path, as SigV4 expects it (every byte but `A-Za-z0-9-_.~`).
fn path_escape(text: &str) -> String {
    query_escape(text)
}
