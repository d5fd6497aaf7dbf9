//! An archive in a bucket (`s3://BUCKET/KEY`), read as one streamed GET and handed to the same
//! readers as a pipe: a tar (plain or compressed), a zip by its local headers, a single
//! compressed file. The client resumes a GET that breaks off from where it stopped, and only
//! while the object's ETag is the one it began with: an archive replaced while it is read is
//! an error, never a mix of two.

use std::io::{self, Read};
use std::path::Path;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use crate::engine::bucket::BucketUrl;

/// The object `archive` names (`s3://BUCKET/KEY`), opened for reading from its start; `None`
/// for anything else.
pub(super) fn open(archive: &Path) -> anyhow::Result<Option<Box<dyn Read + Send>>> {
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
    let (runtime, stream) = crate::engine::bucket::get(&bucket, &key)
        .map_err(|e| e.context(format!("cannot open archive '{}'", archive.display())))?;
    Ok(Some(Box::new(Remote {
        runtime,
        stream,
        chunk: Bytes::new(),
        label: archive.display().to_string(),
    })))
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
