//! What the requests of a store's own share (`requests.rs`): sending one, signed afresh and
//! retried as the client retries its own, and reading the XML of its answer.

use std::future::Future;
use std::time::SystemTime;

use object_store::RetryConfig;
use object_store::client::{HttpClient, HttpRequest};
use object_store::multipart::PartId;

use super::requests::{ListedObject, Made};

/// What a request came back with.
pub(crate) struct Answer {
    pub status: u16,
    pub body: String,
    /// Its headers, names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Answer {
    /// What the answer says, in a line (`said.rs`).
    pub(crate) fn said(&self) -> String {
        super::said::readable(&format!("HTTP {}: {}", self.status, self.body))
    }

    /// The user metadata it carries (headers named `prefix` + NAME), by NAME.
    pub(crate) fn meta(&self, prefix: &str) -> Vec<(String, String)> {
        self.headers
            .iter()
            .filter_map(|(name, value)| {
                Some((name.strip_prefix(prefix)?.to_string(), value.clone()))
            })
            .collect()
    }

    /// The header `name` (lower case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A request's signer: adds what the store checks (headers, a query) to the request.
pub(crate) type Sign<'a> = &'a (dyn Fn(&mut HttpRequest) -> anyhow::Result<()> + Send + Sync);

/// The run's metered HTTP client, and how the store's own client retries, which its requests
/// of our own retry alike.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub http: HttpClient,
    pub retry: RetryConfig,
}

/// Sends one request, signed by `sign` on each try, retried on a dropped connection, 5xx and
/// 429 with backoff, as often and for as long as `client.retry` says.
pub(crate) async fn send(
    client: &Client,
    method: http::Method,
    url: &str,
    headers: &[(String, String)],
    body: &str,
    sign: Sign<'_>,
) -> anyhow::Result<Answer> {
    let Client { http, retry } = client;
    let mut backoff = retry.backoff.init_backoff;
    let mut tries = 0;
    let start = std::time::Instant::now();
    loop {
        tries += 1;
        let mut request = http::Request::builder().method(method.clone()).uri(url);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let mut request: HttpRequest = request.body(body.to_string().into())?;
        sign(&mut request)?;
        let answer = match http.execute(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let headers = response
                    .headers()
                    .iter()
                    .filter_map(|(name, value)| {
                        Some((name.as_str().to_string(), value.to_str().ok()?.to_string()))
                    })
                    .collect();
                let body = response.into_body().bytes().await.unwrap_or_default();
                Ok(Answer {
                    status,
                    body: String::from_utf8_lossy(&body).into_owned(),
                    headers,
                })
            }
            Err(e) => Err(anyhow::Error::new(e)),
        };
        let again_asked = match &answer {
            Ok(a) => a.status >= 500 || a.status == 429,
            Err(_) => true,
        };
        let again = tries <= retry.max_retries && start.elapsed() + backoff <= retry.retry_timeout;
        if !again_asked || !again {
            return answer;
        }
        tokio::time::sleep(backoff).await;
        backoff = backoff
            .mul_f64(retry.backoff.base)
            .min(retry.backoff.max_backoff);
    }
}

/// CompleteMultipartUpload's body (S3's, and Google Cloud Storage's XML API's): the parts in
/// order, each by its number and ETag.
fn completion_body(parts: &[PartId]) -> String {
    let mut body = String::from("<CompleteMultipartUpload>");
    for (i, part) in parts.iter().enumerate() {
        body.push_str(&format!(
            "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
            i + 1,
            xml_escape(&part.content_id)
        ));
    }
    body.push_str("</CompleteMultipartUpload>");
    body
}

/// One page of a listing: what it held, and the token the next page is asked for with (`None`:
/// this was the last).
pub(crate) struct Page {
    pub objects: Vec<ListedObject>,
    pub folders: Vec<String>,
    pub next: Option<String>,
}

/// Every page of a listing, in order: each asked for by `page` with the token the page before
/// it gave (`None` for the first); what they held, objects and folders.
pub(crate) async fn every_page<F, Fut>(
    mut page: F,
) -> anyhow::Result<(Vec<ListedObject>, Vec<String>)>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = anyhow::Result<Page>>,
{
    let (mut objects, mut folders, mut token) = (Vec::new(), Vec::new(), None);
    loop {
        let mut got = page(token.take()).await?;
        objects.append(&mut got.objects);
        folders.append(&mut got.folders);
        match got.next.filter(|t| !t.is_empty()) {
            Some(next) => token = Some(next),
            None => return Ok((objects, folders)),
        }
    }
}

/// A write that may not replace, as its answer says: made (200, 201), the key taken (one of
/// `taken`: a failed precondition's 412, Azure's 409 `BlobAlreadyExists`), else an error with
/// what the store said.
pub(crate) fn made(answer: &Answer, what: &str, taken: &[u16]) -> anyhow::Result<Made> {
    match answer.status {
        200 | 201 => Ok(Made::Done),
        status if taken.contains(&status) => Ok(Made::Taken),
        _ => anyhow::bail!("{what}: {}", answer.said()),
    }
}

/// CompleteMultipartUpload, as S3 and Google Cloud Storage's XML API take it: `send` posts the
/// parts' list with the headers given, `condition` among them where it may not replace (the
/// header that makes it fail with 412 on a key taken). S3 can answer 200 with an error in the
/// body, when the completion failed late.
pub(crate) async fn complete<Fut>(
    parts: &[PartId],
    condition: Option<(&str, &str)>,
    send: impl FnOnce(Vec<(String, String)>, String) -> Fut,
) -> anyhow::Result<Made>
where
    Fut: Future<Output = anyhow::Result<Answer>>,
{
    let what = "completing the multipart upload";
    let mut headers = vec![("content-type".to_string(), "application/xml".to_string())];
    headers.extend(condition.map(|(name, value)| (name.to_string(), value.to_string())));
    let answer = send(headers, completion_body(parts)).await?;
    if answer.status == 200 && answer.body.contains("<Error>") {
        anyhow::bail!("{what}: {}", answer.said());
    }
    made(&answer, what, &[412])
}

/// The open multipart uploads of exactly `key` in the bucket at `base` (ListMultipartUploads
/// of the prefix `key`, as S3 and Google Cloud Storage's XML API answer it, every page, each
/// page fetched by `get`, which answers 200 or fails): each one's id and when it began, by the
/// store's clock.
pub(crate) async fn open_uploads<F, A>(
    base: &str,
    key: &str,
    get: F,
) -> anyhow::Result<Vec<(String, SystemTime)>>
where
    F: Fn(String) -> A,
    A: Future<Output = anyhow::Result<Answer>>,
{
    let mut found = Vec::new();
    let mut after: Option<(String, String)> = None;
    loop {
        let mut url = format!("{base}?uploads&prefix={}", query_escape(key));
        if let Some((key, id)) = &after {
            url.push_str(&format!(
                "&key-marker={}&upload-id-marker={}",
                query_escape(key),
                query_escape(id)
            ));
        }
        let answer = get(url).await?;
        for upload in elements(&answer.body, "Upload") {
            let field = |name| elements(upload, name).next().map(xml_unescape);
            let (Some(their_key), Some(id)) = (field("Key"), field("UploadId")) else {
                continue;
            };
            if their_key == key {
                found.push((id, rfc3339_or_epoch(field("Initiated"))));
            }
        }
        let truncated = elements(&answer.body, "IsTruncated").next() == Some("true");
        let next = (
            elements(&answer.body, "NextKeyMarker").next(),
            elements(&answer.body, "NextUploadIdMarker").next(),
        );
        match next {
            (Some(key), Some(id)) if truncated => {
                let next = (xml_unescape(key), xml_unescape(id));
                if after.as_ref() == Some(&next) {
                    return Ok(found);
                }
                after = Some(next);
            }
            _ => return Ok(found),
        }
    }
}

/// A time as S3's and GCS's listings give it (RFC 3339); the epoch if there is none.
pub(crate) fn rfc3339_or_epoch(text: Option<String>) -> SystemTime {
    text.and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
        .map(|t| SystemTime::from(t.with_timezone(&chrono::Utc)))
        .unwrap_or(std::time::UNIX_EPOCH)
}

/// The contents of each `<name>...</name>` in `xml`, in order (the stores' answers have no
/// attributes on these elements, and no nesting of one name).
pub(crate) fn elements<'x>(xml: &'x str, name: &str) -> impl Iterator<Item = &'x str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let mut rest = xml;
    std::iter::from_fn(move || {
        let start = rest.find(&open)? + open.len();
        let end = start + rest[start..].find(&close)?;
        let found = &rest[start..end];
        rest = &rest[end + close.len()..];
        Some(found)
    })
}

pub(crate) fn xml_unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#34;", "\"")
        .replace("&amp;", "&")
}

pub(crate) fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A query value, percent-encoded as SigV4 expects (every byte but `A-Za-z0-9-_.~`).
pub(crate) fn query_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_read() {
        let xml = "<ListBucketResult><Contents><Key>p/a&amp;b</Key><Size>3</Size><LastModified>2026-01-02T03:04:05.000Z</LastModified><ETag>&quot;abc&quot;</ETag></Contents><CommonPrefixes><Prefix>p/d/</Prefix></CommonPrefixes><IsTruncated>false</IsTruncated></ListBucketResult>";
        let keys: Vec<_> = elements(xml, "Contents")
            .map(|c| xml_unescape(elements(c, "Key").next().unwrap()))
            .collect();
        assert_eq!(keys, ["p/a&b"]);
        let etag = xml_unescape(elements(xml, "ETag").next().unwrap());
        assert_eq!(etag.trim_matches('"'), "abc");
        assert_eq!(elements(xml, "Prefix").collect::<Vec<_>>(), ["p/d/"]);
    }

    #[test]
    fn query_values_and_xml_are_escaped() {
        assert_eq!(query_escape("a b/\u{e9}"), "a%20b%2F%C3%A9");
        assert_eq!(xml_escape("\"a&b\""), "&quot;a&amp;b&quot;");
    }
}
