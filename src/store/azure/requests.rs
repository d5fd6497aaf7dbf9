//! Azure Blob Storage's requests of our own (`store/requests.rs`), signed with the client's
//! own signer (`AzureAuthorizer`: a shared key, a SAS token or a bearer token, as the client
//! was given) and sent through the run's metered HTTP client:
//! - List Blobs, Delete Blob and Get Blob Properties for names as they are (`object_store`
//!   cannot name a blob `dir/`, a folder marker);
//! - Put Blob of a marker, and Put Block List with the metadata and `If-None-Match: *`
//!   (`object_store` takes no metadata for a multipart upload, and completes it
//!   unconditionally);
//! - Copy Blob, within the storage account.
//!
//! Azure keeps no list of uploads begun: a block never committed is dropped by the store a
//! week after it was sent, and nothing can drop it sooner, so a killed run's blocks are
//! neither marked nor aborted (`leaves_uploads`).

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use object_store::azure::{AzureAuthorizer, MicrosoftAzure};
use object_store::client::HttpRequest;
use object_store::multipart::PartId;
use object_store::path::Path as Key;

use crate::place::BucketUrl;
use crate::store::requests::{ListedObject, Made, Requests};
use crate::store::wire::{self, Answer, elements, query_escape, xml_unescape};

/// What each blob's user metadata is sent as.
const META: &str = "x-ms-meta-";

pub(super) struct AzureRequests {
    store: MicrosoftAzure,
    client: wire::Client,
    account: String,
    /// The container's URL, as the client forms it.
    container: url::Url,
}

impl AzureRequests {
    pub(super) fn new(
        store: MicrosoftAzure,
        client: wire::Client,
        account: String,
        service: url::Url,
        url: &BucketUrl,
    ) -> AzureRequests {
        AzureRequests {
            store,
            client,
            account,
            container: container_url(&service, &url.bucket),
        }
    }

    /// The URL of the blob named `key` as it is (a marker's `/` kept).
    fn blob_url(&self, key: &str) -> url::Url {
        let mut url = self.container.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.extend(key.split('/'));
        }
        url
    }

    /// Sends one signed request, retried on a dropped connection, 5xx and 429. A body's length
    /// is signed with it, as Azure's shared key wants.
    async fn send(
        &self,
        method: http::Method,
        url: &str,
        headers: &[(String, String)],
        body: &str,
    ) -> anyhow::Result<Answer> {
        let credential = self.store.credentials().get_credential().await?;
        let mut headers = headers.to_vec();
        if matches!(method, http::Method::PUT) {
            headers.push(("content-length".into(), body.len().to_string()));
        }
        let sign = |request: &mut HttpRequest| -> anyhow::Result<()> {
            AzureAuthorizer::new(&credential, &self.account).try_authorize(request)?;
            Ok(())
        };
        wire::send(&self.client, method, url, &headers, body, &sign).await
    }

    /// Whether the copy into `url` is done, waiting while the store says it is pending (a
    /// copy within an account is usually done when its request returns).
    async fn copied(&self, url: &str, answer: Answer) -> anyhow::Result<()> {
        let mut status = answer.header("x-ms-copy-status").map(str::to_string);
        let mut wait = Duration::from_millis(50);
        for _ in 0..40 {
            match status.as_deref() {
                Some("success") | None => return Ok(()),
                Some("pending") => {}
                Some(other) => anyhow::bail!("the store's copy ended '{other}'"),
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(2));
            let props = self.send(http::Method::HEAD, url, &[], "").await?;
            status = props.header("x-ms-copy-status").map(str::to_string);
        }
        anyhow::bail!("the store's copy was still pending after a minute")
    }
}

/// The container's URL under the service's: `object_store` pushes the container as a name of
/// the path, and the blob's names after it.
fn container_url(service: &url::Url, container: &str) -> url::Url {
    let mut url = service.clone();
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().push(container);
    }
    url
}

fn meta_headers(meta: &[(&str, &str)]) -> Vec<(String, String)> {
    meta.iter()
        .map(|(name, value)| (format!("{META}{name}"), value.to_string()))
        .collect()
}

/// A time as Azure's listings give it (RFC 1123); the epoch if there is none.
fn time_of(text: Option<String>) -> SystemTime {
    text.and_then(|t| chrono::DateTime::parse_from_rfc2822(&t).ok())
        .map(|t| SystemTime::from(t.with_timezone(&chrono::Utc)))
        .unwrap_or(std::time::UNIX_EPOCH)
}

/// The content's MD5 in hex, from a listing's base64 `Content-MD5` (what S3's single PUT gives
/// as its ETag); else the blob's ETag with a `-`, as S3 marks an ETag that is no MD5.
fn etag_of(md5: Option<String>, etag: Option<String>) -> Option<String> {
    let hex = md5
        .filter(|m| !m.is_empty())
        .and_then(|m| BASE64.decode(m).ok())
        .filter(|bytes| bytes.len() == 16)
        .map(|bytes| bytes.iter().map(|b| format!("{b:02x}")).collect());
    hex.or_else(|| etag.map(|e| format!("{}-", e.trim_matches('"'))))
}

#[async_trait::async_trait]
impl Requests for AzureRequests {
    async fn url(&self, key: &Key) -> anyhow::Result<String> {
        let mut url = self.container.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.extend(key.parts());
        }
        Ok(url.to_string())
    }

    /// List Blobs of `prefix`, every page.
    async fn list(
        &self,
        prefix: &str,
        delimiter: bool,
    ) -> anyhow::Result<(Vec<ListedObject>, Vec<String>)> {
        wire::every_page(|marker| {
            let mut url = format!(
                "{}?restype=container&comp=list&prefix={}",
                self.container,
                query_escape(prefix)
            );
            if delimiter {
                url.push_str("&delimiter=%2F");
            }
            if let Some(marker) = &marker {
                url.push_str(&format!("&marker={}", query_escape(marker)));
            }
            async move {
                let answer = self.send(http::Method::GET, &url, &[], "").await?;
                if answer.status != 200 {
                    anyhow::bail!("listing '{prefix}': {}", answer.said());
                }
                let objects = elements(&answer.body, "Blob")
                    .filter_map(|blob| {
                        let field = |name| elements(blob, name).next().map(xml_unescape);
                        Some(ListedObject {
                            key: field("Name")?,
                            size: field("Content-Length")?.parse().unwrap_or(0),
                            modified: time_of(field("Last-Modified")),
                            etag: etag_of(field("Content-MD5"), field("Etag")),
                        })
                    })
                    .collect();
                let folders = elements(&answer.body, "BlobPrefix")
                    .filter_map(|folder| elements(folder, "Name").next().map(xml_unescape))
                    .collect();
                let next = elements(&answer.body, "NextMarker")
                    .next()
                    .map(xml_unescape);
                Ok(wire::Page {
                    objects,
                    folders,
                    next,
                })
            }
        })
        .await
    }

    /// Delete Blob of `key` as it is.
    async fn delete(&self, key: &str) -> anyhow::Result<()> {
        let url = self.blob_url(key);
        let answer = self
            .send(http::Method::DELETE, url.as_str(), &[], "")
            .await?;
        match answer.status {
            200 | 202 | 404 => Ok(()),
            _ => anyhow::bail!("{}", answer.said()),
        }
    }

    /// Get Blob Properties of `key` as it is: its user metadata.
    async fn head(&self, key: &str) -> anyhow::Result<Option<Vec<(String, String)>>> {
        let url = self.blob_url(key);
        let answer = self.send(http::Method::HEAD, url.as_str(), &[], "").await?;
        match answer.status {
            200 => Ok(Some(answer.meta(META))),
            404 => Ok(None),
            _ => anyhow::bail!("HEAD '{key}': {}", answer.said()),
        }
    }

    /// Get Blob Properties: the size, and the `Content-MD5` (which Azure keeps for a single Put
    /// Blob) in hex.
    async fn content(&self, key: &str) -> anyhow::Result<Option<(u64, Option<String>)>> {
        let url = self.blob_url(key);
        let answer = self.send(http::Method::HEAD, url.as_str(), &[], "").await?;
        match answer.status {
            200 => {
                let size = answer.header("content-length").and_then(|s| s.parse().ok());
                let md5 = etag_of(answer.header("content-md5").map(str::to_string), None);
                Ok(size.map(|size| (size, md5)))
            }
            404 => Ok(None),
            _ => anyhow::bail!("HEAD '{key}': {}", answer.said()),
        }
    }

    /// Copy Blob from the container `from_bucket` of the same account, the metadata with it.
    async fn copy_from(&self, from_bucket: &str, from_key: &str, key: &str) -> anyhow::Result<()> {
        let mut source = self.container.clone();
        if let Ok(mut path) = source.path_segments_mut() {
            path.pop().push(from_bucket).extend(from_key.split('/'));
        }
        let headers = [("x-ms-copy-source".to_string(), source.to_string())];
        let url = self.blob_url(key);
        let answer = self
            .send(http::Method::PUT, url.as_str(), &headers, "")
            .await?;
        match answer.status {
            200..=202 => self.copied(url.as_str(), answer).await,
            _ => anyhow::bail!("Copy Blob: {}", answer.said()),
        }
    }

    async fn put_marker(
        &self,
        dir: &Key,
        meta: &[(&str, &str)],
        create: bool,
    ) -> anyhow::Result<Made> {
        let url = self.blob_url(&format!("{dir}/"));
        let mut headers = meta_headers(meta);
        headers.push(("x-ms-blob-type".into(), "BlockBlob".into()));
        if create {
            headers.push(("if-none-match".into(), "*".into()));
        }
        let answer = self
            .send(http::Method::PUT, url.as_str(), &headers, "")
            .await?;
        wire::made(&answer, "PUT", &[409, 412])
    }

    /// Nothing to ask the store: the blocks are sent by name, and committed at the end.
    async fn begin(&self, _key: &Key, _meta: &[(&str, &str)]) -> anyhow::Result<String> {
        Ok(String::new())
    }

    /// Put Block List of `parts`, with the metadata.
    async fn complete(
        &self,
        key: &Key,
        _upload: &str,
        parts: &[PartId],
        meta: &[(&str, &str)],
        create: bool,
    ) -> anyhow::Result<Made> {
        let url = format!("{}?comp=blocklist", self.url(key).await?);
        let mut body = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
        for part in parts {
            let id = BASE64.encode(&part.content_id);
            body.push_str(&format!("<Latest>{id}</Latest>"));
        }
        body.push_str("</BlockList>");
        let mut headers = meta_headers(meta);
        headers.push(("content-type".into(), "application/xml".into()));
        if create {
            headers.push(("if-none-match".into(), "*".into()));
        }
        let answer = self.send(http::Method::PUT, &url, &headers, &body).await?;
        wire::made(
            &answer,
            "completing the upload (Put Block List)",
            &[409, 412],
        )
    }

    /// Azure lists no uploads: a blob's uncommitted blocks are dropped by the store.
    async fn uploads(&self, _key: &str) -> anyhow::Result<Vec<(String, SystemTime)>> {
        Ok(Vec::new())
    }

    fn leaves_uploads(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_formed_as_the_client_forms_them() {
        let service = url::Url::parse("http://127.0.0.1:10000/devstoreaccount1").unwrap();
        let container = container_url(&service, "cont");
        assert_eq!(
            container.as_str(),
            "http://127.0.0.1:10000/devstoreaccount1/cont"
        );
        let service = url::Url::parse("https://acct.blob.core.windows.net/").unwrap();
        assert_eq!(
            container_url(&service, "c").as_str(),
            "https://acct.blob.core.windows.net/c"
        );
    }

    #[test]
    fn a_content_md5_is_given_as_s3_gives_an_etag() {
        let md5 = Some("dk76iD3aHhHbR2ccSju9ng==".to_string());
        assert_eq!(
            etag_of(md5, Some("0x1".into())).unwrap(),
            "764efa883dda1e11db47671c4a3bbd9e"
        );
        assert_eq!(etag_of(None, Some("0x1".into())).unwrap(), "0x1-");
    }
}
