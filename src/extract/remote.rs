//! An archive in a bucket (`s3://BUCKET/KEY`) or at an `https://` URL (feature `http`), read as
//! one streamed GET and handed to the same readers as a pipe: a tar (plain or compressed), a
//! zip by its local headers, a single compressed file. The client resumes a GET that breaks
//! off from where it stopped, and only while the object's ETag is the one it began with: an
//! archive replaced while it is read is an error, never a mix of two.

use std::io::{self, Read};
use std::path::Path;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use crate::engine::bucket::BucketUrl;

/// The object `archive` names (`s3://BUCKET/KEY`, or with feature `http` an `https://` or
/// `http://` URL), opened for reading from its start; `None` for anything else.
pub(super) fn open(archive: &Path) -> anyhow::Result<Option<Box<dyn Read + Send>>> {
    #[cfg(feature = "http")]
    if let Some(scheme) = crate::plan::url_scheme(archive)
        && (scheme.eq_ignore_ascii_case("https") || scheme.eq_ignore_ascii_case("http"))
    {
        return reader(archive, web(archive));
    }
    let Some(url) = BucketUrl::parse(archive)? else {
        return Ok(None);
    };
    let key = url.prefix.trim_end_matches('/').to_string();
    if key.is_empty() || archive.to_string_lossy().ends_with('/') {
        anyhow::bail!(
            "'{}' names a bucket or a prefix, not an archive (s3://BUCKET/KEY)",
            archive.display()
        );
    }
    let bucket = BucketUrl {
        bucket: url.bucket,
        prefix: String::new(),
    };
    reader(archive, crate::engine::bucket::get(&bucket, &key))
}

/// The reader of a GET begun for `archive`, or why it could not begin.
fn reader(
    archive: &Path,
    got: anyhow::Result<(
        tokio::runtime::Runtime,
        BoxStream<'static, object_store::Result<Bytes>>,
    )>,
) -> anyhow::Result<Option<Box<dyn Read + Send>>> {
    let (runtime, stream) =
        got.map_err(|e| e.context(format!("cannot open archive '{}'", archive.display())))?;
    Ok(Some(Box::new(Remote {
        runtime,
        stream,
        chunk: Bytes::new(),
        label: archive.display().to_string(),
    })))
}

/// A GET of an `https://` (or `http://`) URL: the server and the path apart, the path's
/// percent-escapes read as the URL has them.
#[cfg(feature = "http")]
fn web(
    url: &Path,
) -> anyhow::Result<(
    tokio::runtime::Runtime,
    BoxStream<'static, object_store::Result<Bytes>>,
)> {
    use object_store::ObjectStoreExt;
    let text = url.to_str().unwrap_or_default();
    let (scheme, rest) = text.split_once("://").unwrap_or(("https", text));
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.split(['?', '#']).next().unwrap_or_default();
    if host.is_empty() || path.is_empty() || path.ends_with('/') {
        anyhow::bail!("'{text}' names no file ({scheme}://HOST/PATH)");
    }
    let store = object_store::http::HttpBuilder::new()
        .with_url(format!("{scheme}://{host}"))
        .with_client_options(
            object_store::ClientOptions::new()
                .with_allow_http(scheme.eq_ignore_ascii_case("http"))
                .with_connect_timeout(std::time::Duration::from_secs(10))
                .with_timeout(std::time::Duration::from_secs(300)),
        )
        .build()?;
    let key = object_store::path::Path::from_url_path(path)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let got = runtime.block_on(store.get(&key));
    match got {
        Ok(result) => Ok((runtime, result.into_stream())),
        Err(object_store::Error::NotFound { .. }) => Err(anyhow::Error::new(io::Error::new(
            io::ErrorKind::NotFound,
            "the server has no such file (404)",
        ))),
        Err(e) => Err(e.into()),
    }
}

/// A GET's body as a reader.
struct Remote {
    runtime: tokio::runtime::Runtime,
    stream: BoxStream<'static, object_store::Result<Bytes>>,
    chunk: Bytes,
    label: String,
}

impl Read for Remote {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            match self.runtime.block_on(self.stream.next()) {
                None => return Ok(0),
                Some(Ok(chunk)) => self.chunk = chunk,
                Some(Err(e)) => {
                    return Err(io::Error::other(format!("reading '{}': {e}", self.label)));
                }
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}
