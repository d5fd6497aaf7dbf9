//! An archive in a bucket (`s3://BUCKET/KEY`) or at an `https://` URL (feature `http`).
//!
//! - The first requests, side by side, ask for the object's last 65 KiB, where a zip keeps the
//!   end of its central directory, and for the whole object. A zip is then fetched into an
//!   unnamed temporary file: the whole object's GET read on, and ranges from the end
//!   backwards while that one connection alone would take more than two round trips to get
//!   where they begin, up to [`IN_FLIGHT`] requests in flight ([`Object::fetch`]). It is then
//!   read as a local zip is: the same plan from the central
//!   directory and the same checks before anything is written (overlapping entries, local
//!   headers that disagree with it, free space), entries written in parallel. Writing begins
//!   when the last range has arrived, since those checks read every entry's local header, and
//!   the local headers lie all through the archive.
//! - Anything else (a tar, plain or compressed; a single compressed file) is the whole
//!   object's GET, handed to the readers a pipe uses, so writing begins with its first bytes.
//! - From a server that ignores ranges, a zip is read from that GET too, by its local headers,
//!   as from a pipe; the run says so.
//! - The two first answers must agree (ETag, else Last-Modified, and size), and every request
//!   after them carries the object's ETag (`If-Match`), or is compared the same way: an archive
//!   replaced while it is read is an error that says so, never a mix of two. The client
//!   resumes a response that breaks off with a ranged request from where it stopped, under
//!   the same condition.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use futures_util::stream::{self, BoxStream, SelectAll, StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{GetOptions, GetRange, GetResult, ObjectMeta, ObjectStore};

use crate::store::{self as bucket, BucketUrl};

/// How much of the object's end the first request asks for: a zip's end of central directory
/// record with the longest comment it can have (22 + 65,535 bytes), and the zip64 locator.
const TAIL: u64 = 65 * 1024;

/// Requests of a zip in flight at once, the GET from the start among them. The temporary file
/// takes them as they come, so this bounds connections, not memory.
const IN_FLIGHT: usize = 16;

/// A remote archive, opened.
pub(super) enum Opened {
    /// A zip, fetched whole into a temporary file: read as a local file is.
    File(File),
    /// Read once from its start. `unranged`: the server ignored a range request, so a zip in
    /// it is read by its local headers.
    Stream {
        reader: Box<dyn Read + Send>,
        unranged: bool,
    },
}

/// What arrives while a zip is fetched: a piece of the GET from the start, or of a range, and
/// where it goes; or the end of a range.
enum Arrived {
    Front(u64, Bytes),
    Range(u64, Bytes),
    RangeDone,
}

/// The object `archive` names (`s3://BUCKET/KEY`, or with feature `http` an `https://` or
/// `http://` URL), opened; `None` for anything else.
pub(super) fn open(archive: &Path) -> anyhow::Result<Option<Opened>> {
    let Some(object) = Object::locate(archive)? else {
        return Ok(None);
    };
    object
        .open()
        .map(Some)
        .map_err(|e| e.context(format!("cannot open archive '{}'", archive.display())))
}

/// One object, and the runtime its requests run on.
struct Object {
    store: Arc<dyn ObjectStore>,
    key: Key,
    runtime: tokio::runtime::Runtime,
    /// What the object is called in messages.
    label: String,
    /// "no such object", or the server's words for it.
    missing: &'static str,
}

impl Object {
    fn locate(archive: &Path) -> anyhow::Result<Option<Object>> {
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the download's thread")
        };
        let label = archive.display().to_string();
        #[cfg(feature = "http")]
        if let Some((store, key)) = web(archive)? {
            let missing = "the server has no such file (404)";
            let runtime = runtime()?;
            return Ok(Some(Object {
                store,
                key,
                runtime,
                label,
                missing,
            }));
        }
        let Some(url) = BucketUrl::parse(archive)? else {
            return Ok(None);
        };
        let key = url.prefix.trim_end_matches('/').to_string();
        if key.is_empty() || label.ends_with('/') {
            let (word, scheme) = (url.store.bucket_word(), url.store.scheme());
            let upper = word.to_ascii_uppercase();
            anyhow::bail!(
                "'{label}' names a {word} or a prefix, not an archive ({scheme}://{upper}/KEY)"
            );
        }
        let bucket = url.with_prefix("");
        let (store, key) = bucket::object(&bucket, &key)?;
        Ok(Some(Object {
            store,
            key,
            runtime: runtime()?,
            label,
            missing: "no such object",
        }))
    }

    /// Asks for the object's end and, at once, for the whole object from its start: the end
    /// says whether it is a zip (and how large), and the other answer is the stream anything
    /// else is read from, or a zip's first range. One round trip either way.
    fn open(self) -> anyhow::Result<Opened> {
        let asked = GetOptions {
            range: Some(GetRange::Suffix(TAIL)),
            ..GetOptions::default()
        };
        let asked_at = Instant::now();
        let (tail, whole) = self.runtime.block_on(async {
            let tail = async {
                let got = self.store.get_opts(&self.key, asked).await?;
                let (meta, at) = (got.meta.clone(), got.range.start);
                Ok((meta, at, got.bytes().await?))
            };
            futures_util::join!(tail, self.store.get_opts(&self.key, GetOptions::default()))
        });
        let whole = whole.map_err(|e| self.failed(e))?;
        match tail {
            Ok((meta, at, tail)) => {
                Expected::of(&meta)
                    .check(&whole.meta)
                    .map_err(|e| self.failed(e))?;
                match ends_like_a_zip(&tail) {
                    true => self.fetch(whole, &meta, (at, tail), asked_at.elapsed()),
                    false => Ok(self.stream(whole, false)),
                }
            }
            Err(object_store::Error::NotSupported { .. }) => Ok(self.stream(whole, true)),
            // An empty object has no last bytes to give (416): the stream says what it is.
            Err(_) => Ok(self.stream(whole, false)),
        }
    }

    /// The whole object into an unnamed temporary file: `whole` (the GET from the start) read
    /// on, and, while it alone would take more than two round trips (`round_trip`, the first
    /// answers' time) to get where the ranges begin, ranges asked for from the end backwards,
    /// up to [`IN_FLIGHT`] in flight. The front stops where the ranges begin. On a link where
    /// one connection is fast, that is one GET, as `curl -o` makes; where each connection is
    /// slow (a long, lossy way), as many as keep it busy. `tail` is the part from `tail_at` on,
    /// already read.
    fn fetch(
        self,
        whole: GetResult,
        meta: &ObjectMeta,
        (tail_at, tail): (u64, Bytes),
        round_trip: Duration,
    ) -> anyhow::Result<Opened> {
        let mut file = tempfile::tempfile()
            .context("cannot make a temporary file to hold the archive while it is read")?;
        let held = |e: io::Error| {
            anyhow::Error::new(e).context("cannot write the archive to a temporary file")
        };
        let chunk = chunk_size(tail_at);
        // Where the ranges asked for begin: the front reads up to there.
        let low = Arc::new(AtomicU64::new(tail_at));
        let front = {
            let low = Arc::clone(&low);
            stream::try_unfold((whole.into_stream(), 0), move |(mut body, at)| {
                let low = low.load(Ordering::Relaxed);
                async move {
                    if at >= low {
                        // Dropped here: its connection closes at once.
                        return Ok(None);
                    }
                    let piece = body.try_next().await?;
                    Ok(piece.map(|piece| {
                        let next = at + piece.len() as u64;
                        (Arrived::Front(at, piece), (body, next))
                    }))
                }
            })
        };
        let mut all = SelectAll::new();
        all.push(front.boxed());
        let expected = Expected::of(meta);
        let began = Instant::now();
        let (mut front_at, mut front_began, mut in_flight) = (0u64, None::<Instant>, 0usize);
        self.runtime.block_on(async {
            loop {
                while in_flight < IN_FLIGHT - 1 {
                    let below = low.load(Ordering::Relaxed);
                    if below <= front_at + chunk / 4 {
                        break;
                    }
                    // The front's pace, once it has run a little; before then, only a front
                    // that has not begun within a round trip is taken as slow.
                    let pace = front_began
                        .map(|t| t.elapsed())
                        .filter(|d| *d >= Duration::from_millis(5))
                        .map(|d| front_at as f64 / d.as_secs_f64());
                    if pace.is_none() && began.elapsed() < round_trip {
                        break;
                    }
                    let alone = match pace {
                        Some(pace) if pace > 0.0 => (below - front_at) as f64 / pace,
                        _ => f64::INFINITY,
                    };
                    if alone <= 2.0 * round_trip.as_secs_f64() {
                        break;
                    }
                    let start = below.saturating_sub(chunk).max(front_at);
                    low.store(start, Ordering::Relaxed);
                    let done = stream::once(std::future::ready(Ok(Arrived::RangeDone)));
                    let range = self.range(start..below, &expected);
                    all.push(
                        range
                            .map_ok(|(at, p)| Arrived::Range(at, p))
                            .chain(done)
                            .boxed(),
                    );
                    in_flight += 1;
                }
                // Looked at again at least every round trip, so that a front that stalls
                // brings ranges in.
                let wait = round_trip.max(Duration::from_millis(10));
                let next = match tokio::time::timeout(wait, all.try_next()).await {
                    Ok(next) => next.map_err(|e| self.failed(e))?,
                    Err(_) => continue,
                };
                let (at, piece) = match next {
                    None => break,
                    Some(Arrived::RangeDone) => {
                        in_flight -= 1;
                        continue;
                    }
                    Some(Arrived::Front(at, piece)) => {
                        front_began.get_or_insert_with(Instant::now);
                        front_at = at + piece.len() as u64;
                        (at, piece)
                    }
                    Some(Arrived::Range(at, piece)) => (at, piece),
                };
                // (The front's last piece may run past where the ranges begin: the same
                // bytes again.)
                file.seek(SeekFrom::Start(at))
                    .and_then(|_| file.write_all(&piece))
                    .map_err(held)?;
            }
            anyhow::Ok(())
        })?;
        file.seek(SeekFrom::Start(tail_at))
            .and_then(|_| file.write_all(&tail))
            .and_then(|_| file.rewind())
            .map_err(held)?;
        Ok(Opened::File(file))
    }

    /// The pieces of `range` of the object, each with where it goes, as they arrive.
    fn range(
        &self,
        range: Range<u64>,
        expected: &Expected,
    ) -> BoxStream<'static, object_store::Result<(u64, Bytes)>> {
        let (store, key, expected) = (self.store.clone(), self.key.clone(), expected.clone());
        let asked = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            if_match: expected.etag.clone(),
            ..GetOptions::default()
        };
        stream::once(async move {
            let got = store.get_opts(&key, asked).await?;
            expected.check(&got.meta)?;
            let mut at = range.start;
            Ok::<_, object_store::Error>(got.into_stream().map_ok(move |piece| {
                let here = at;
                at += piece.len() as u64;
                (here, piece)
            }))
        })
        .try_flatten()
        .boxed()
    }

    /// The object as one stream from its start: `whole`'s body. `unranged`: the server does
    /// not answer ranges.
    fn stream(self, whole: GetResult, unranged: bool) -> Opened {
        let reader = Box::new(Remote {
            stream: whole.into_stream(),
            chunk: Bytes::new(),
            object: self,
        });
        Opened::Stream { reader, unranged }
    }

    /// A request's failure, said for this object.
    fn failed(&self, error: object_store::Error) -> anyhow::Error {
        match error {
            object_store::Error::NotFound { .. } => {
                // A missing bucket answers 404 too: said as the bucket, not the object.
                let said = bucket::explain(&error);
                let why = match crate::store::says_bucket_missing(&said) {
                    true => said,
                    false => self.missing.to_string(),
                };
                io::Error::new(io::ErrorKind::NotFound, why).into()
            }
            object_store::Error::Precondition { .. } => anyhow::anyhow!(
                "'{}' changed while it was read (another ETag or Last-Modified than its first answer's): read it again once it stays the same",
                self.label
            ),
            e => anyhow::anyhow!(bucket::explain(&e)),
        }
    }
}

/// What every answer must say of the object: the ETag the first one gave (also sent as
/// `If-Match`), else its Last-Modified; and its size.
#[derive(Clone)]
struct Expected {
    etag: Option<String>,
    modified: chrono::DateTime<chrono::Utc>,
    size: u64,
}

impl Expected {
    fn of(meta: &ObjectMeta) -> Expected {
        Expected {
            etag: meta.e_tag.clone(),
            modified: meta.last_modified,
            size: meta.size,
        }
    }

    fn check(&self, meta: &ObjectMeta) -> object_store::Result<()> {
        let same = match (&self.etag, &meta.e_tag) {
            (Some(etag), Some(now)) => etag == now,
            _ => self.modified == meta.last_modified,
        };
        if same && self.size == meta.size {
            return Ok(());
        }
        Err(object_store::Error::Precondition {
            path: meta.location.to_string(),
            source: "the object changed".into(),
        })
    }
}

/// The size of a range: a 64th of the archive, between 1 and 16 MiB, so that a small archive
/// comes in a few round trips and a large one in ranges that each keep a connection busy.
fn chunk_size(size: u64) -> u64 {
    (size / 64).clamp(1 << 20, 16 << 20)
}

/// Whether `tail`, the object's last bytes, holds a zip's end of central directory record.
/// Any other object is read as a stream, where what it is is told from its first bytes; a
/// false match is fetched whole and told the same way, from the temporary file.
fn ends_like_a_zip(tail: &[u8]) -> bool {
    tail.windows(4).rev().any(|w| w == b"PK\x05\x06")
}

/// A GET's body as a reader.
struct Remote {
    stream: BoxStream<'static, object_store::Result<Bytes>>,
    chunk: Bytes,
    object: Object,
}

impl Read for Remote {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let object = &self.object;
        bucket::read_body(
            &object.runtime,
            &mut self.stream,
            &mut self.chunk,
            buf,
            |e| format!("reading '{}': {}", object.label, object.failed(e)),
        )
    }
}

/// The store and path of an `https://` (or `http://`) URL, the path's percent-escapes read as
/// the URL has them; `None` for another scheme.
#[cfg(feature = "http")]
fn web(url: &Path) -> anyhow::Result<Option<(Arc<dyn ObjectStore>, Key)>> {
    let Some(scheme) = crate::plan::url_scheme(url)
        .filter(|s| s.eq_ignore_ascii_case("https") || s.eq_ignore_ascii_case("http"))
    else {
        return Ok(None);
    };
    let text = url.to_str().unwrap_or_default();
    let rest = &text[scheme.len() + 3..];
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.split('#').next().unwrap_or_default();
    if host.is_empty() || path.is_empty() || path.ends_with('/') {
        anyhow::bail!("'{text}' names no file ({scheme}://HOST/PATH)");
    }
    if path.contains('?') {
        anyhow::bail!(
            "'{text}' has a query (?...), which fastwrite does not send: a presigned URL cannot be read this way; give the object as s3://BUCKET/KEY with credentials, or download it first"
        );
    }
    // The environment's proxies (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY) apply, and
    // redirects are followed, as the HTTP client does by default.
    let store = object_store::http::HttpBuilder::new()
        .with_url(format!("{scheme}://{host}"))
        .with_client_options(
            object_store::ClientOptions::new()
                .with_allow_http(scheme.eq_ignore_ascii_case("http"))
                .with_connect_timeout(std::time::Duration::from_secs(10))
                .with_timeout(std::time::Duration::from_secs(300)),
        )
        .build()?;
    Ok(Some((Arc::new(store), Key::from_url_path(path)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_a_64th_of_the_archive_within_bounds() {
        assert_eq!(chunk_size(0), 1 << 20);
        assert_eq!(chunk_size(256 << 20), 4 << 20);
        assert_eq!(chunk_size(10 << 30), 16 << 20);
    }

    #[test]
    fn a_zip_is_told_by_its_end_record() {
        assert!(ends_like_a_zip(b"...PK\x05\x06\0\0\0\0"));
        assert!(!ends_like_a_zip(b"\x1f\x8b\x08 a gzip stream"));
    }
}
