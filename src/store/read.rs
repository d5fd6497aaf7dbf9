//! One object read: an archive in a bucket (`s3://BUCKET/KEY`, `az://`, `gs://`) or at an
//! `https://` URL (feature `http`), or an image's layout under a prefix there. What reads it
//! (`extract/remote.rs`, the image's layouts) sees [`Object`] and [`Answers`] only: no client,
//! no runtime, no stream.
//!
//! - The first requests, side by side ([`Object::first_answers`]), ask for the object's last
//!   bytes (a zip keeps the end of its central directory there) and for the whole object. The
//!   reader then takes the whole object as one stream ([`Answers::into_reader`]), or has every
//!   byte fetched into a place of its own ([`Answers::fetch`]): the whole object's GET read on;
//!   a range asked for at once where the caller needs it first; and ranges from the end
//!   backwards while that one connection alone would take more than two round trips to get
//!   where they begin, up to [`IN_FLIGHT`] requests in flight; and, at once, a range of its
//!   own for each part the caller needs before the rest.
//! - The two first answers must agree (ETag, else Last-Modified, and size), and every request
//!   after them carries the object's ETag (`If-Match`), or is compared the same way: an object
//!   replaced while it is read is an error that says so, never a mix of two. The client
//!   resumes a response that breaks off with a ranged request from where it stopped, under
//!   the same condition.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use bytes::Bytes;
use futures_util::stream::{self, BoxStream, SelectAll, StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{GetOptions, GetRange, GetResult, ObjectMeta, ObjectStore, ObjectStoreExt};

use super::said::{explain, says_bucket_missing};
use super::source::{body_reader, read_body};
use crate::place::Origin;

/// Requests of one object in flight at once, the GET from the start among them. What they
/// fetch lands where the caller puts it as it comes, so this bounds connections, not memory.
const IN_FLIGHT: usize = 16;

/// One object (or a prefix of objects: a layout's), and the runtime its requests run on.
pub(crate) struct Object {
    store: Arc<dyn ObjectStore>,
    key: Key,
    runtime: tokio::runtime::Runtime,
    /// What the object is called in messages.
    label: String,
    /// "no such object", or the server's words for it.
    missing: &'static str,
}

/// The object's first two answers ([`Object::first_answers`]): its last bytes, where the
/// server gives ranges, and the GET of the whole object from its start, not read yet.
pub(crate) struct Answers {
    object: Object,
    whole: GetResult,
    /// Where the last bytes begin, and what they are, with what every later answer must say
    /// of the object.
    tail: Option<(u64, Bytes, Expected)>,
    /// The server answered the range request with the whole object, or refused it.
    unranged: bool,
    /// How long the first answers took.
    round_trip: Duration,
}

/// What arrives while an object is fetched: a piece of the GET from the start, or of a range,
/// and where it goes; or the end of a range (`true`: the one asked for first).
enum Arrived {
    Front(u64, Bytes),
    Range(u64, Bytes),
    RangeDone(bool),
}

impl Object {
    /// The object `origin` names (a store's, or with feature `http` a web server's); `None`
    /// for anything else. A name that ends in `/`, or a whole bucket, names no object. Its
    /// requests run on the thread that waits for them, or, where several threads read at once
    /// (`shared`), on threads of their own named so.
    pub(crate) fn locate(
        origin: &Origin,
        shared: Option<&str>,
        opts: &crate::Options,
    ) -> anyhow::Result<Option<Object>> {
        let label = origin.named().display().to_string();
        let (store, key, missing): (_, _, &'static str) = match origin {
            #[cfg(feature = "http")]
            Origin::Web(url) => {
                let (store, key) = web(url, super::Retries::of_web(opts))?;
                (store, key, "the server has no such file (404)")
            }
            Origin::Store { url, .. } => {
                let key = url.prefix.trim_end_matches('/');
                if key.is_empty() || label.ends_with('/') {
                    let (word, scheme) = (url.store.bucket_word(), url.store.scheme());
                    let upper = word.to_ascii_uppercase();
                    anyhow::bail!(
                        "'{label}' names a {word} or a prefix, not an archive ({scheme}://{upper}/KEY)"
                    );
                }
                let (store, key) = super::connect::object(
                    &url.with_prefix(""),
                    key,
                    super::Retries::of(opts, url)?,
                )?;
                (store, key, "no such object")
            }
            _ => return Ok(None),
        };
        let runtime = match shared {
            Some(name) => super::connect::client_runtime(name)?,
            None => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the download's thread")?,
        };
        Ok(Some(Object {
            store,
            key,
            runtime,
            label,
            missing,
        }))
    }

    /// Asks for the object's last `tail` bytes and, at once, for the whole object from its
    /// start: one round trip either way.
    pub(crate) fn first_answers(self, tail: u64) -> anyhow::Result<Answers> {
        let asked = GetOptions {
            range: Some(GetRange::Suffix(tail)),
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
        let (tail, unranged) = match tail {
            Ok((meta, at, tail)) => {
                let expected = Expected::of(&meta);
                expected.check(&whole.meta).map_err(|e| self.failed(e))?;
                (Some((at, tail, expected)), false)
            }
            Err(object_store::Error::NotSupported { .. }) => (None, true),
            // An empty object has no last bytes to give (416): its stream says what it is.
            Err(_) => (None, false),
        };
        Ok(Answers {
            object: self,
            whole,
            tail,
            unranged,
            round_trip: asked_at.elapsed(),
        })
    }

    /// The object `path` under this one taken as a prefix (a layout's `index.json`, its
    /// blobs), as a stream.
    pub(crate) fn get(&self, path: &str) -> anyhow::Result<impl Read + Send + '_> {
        let key = path
            .split('/')
            .fold(self.key.clone(), |key, part| key.join(part));
        let got = self
            .runtime
            .block_on(self.store.get(&key))
            .map_err(|e| match e {
                object_store::Error::NotFound { .. } => {
                    anyhow!("'{}' has no {path} ({})", self.label, self.missing)
                }
                e => anyhow!("cannot read {path} of '{}': {}", self.label, explain(&e)),
            })?;
        Ok(body_reader(&self.runtime, key.as_ref(), got.into_stream()))
    }

    /// Copies the whole object into `file`, from where `file` stands.
    pub(crate) fn download(&self, file: &mut File) -> anyhow::Result<()> {
        let label = &self.label;
        let got = self
            .runtime
            .block_on(self.store.get(&self.key))
            .map_err(|e| match e {
                object_store::Error::NotFound { .. } => anyhow!("'{label}': {}", self.missing),
                e => anyhow!("cannot read '{label}': {}", explain(&e)),
            })?;
        let body = body_reader(&self.runtime, self.key.as_ref(), got.into_stream());
        // (Copied through the reader's own megabyte, not 8 KiB at a time.)
        io::copy(&mut io::BufReader::with_capacity(1 << 20, body), file)
            .with_context(|| format!("cannot fetch '{label}'"))?;
        Ok(())
    }

    /// A request's failure, said for this object.
    fn failed(&self, error: object_store::Error) -> anyhow::Error {
        match error {
            object_store::Error::NotFound { .. } => {
                // A missing bucket answers 404 too: said as the bucket, not the object.
                let said = explain(&error);
                let why = match says_bucket_missing(&said) {
                    true => said,
                    false => self.missing.to_string(),
                };
                io::Error::new(io::ErrorKind::NotFound, why).into()
            }
            object_store::Error::Precondition { .. } => anyhow!(
                "it changed while it was read (another ETag or Last-Modified than its first answer's): read it again once it stays the same"
            ),
            e => anyhow!(explain(&e)),
        }
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
}

impl Answers {
    /// The object's last bytes, and where they begin; `None` where the server gave none.
    pub(crate) fn tail(&self) -> Option<(u64, &[u8])> {
        self.tail.as_ref().map(|(at, tail, _)| (*at, &tail[..]))
    }

    /// The object's size, as its first answers say it.
    pub(crate) fn size(&self) -> u64 {
        self.whole.meta.size
    }

    /// The server does not answer requests for byte ranges.
    pub(crate) fn unranged(&self) -> bool {
        self.unranged
    }

    /// What messages call the object.
    pub(crate) fn label(&self) -> &str {
        &self.object.label
    }

    /// The object as one stream from its start.
    pub(crate) fn into_reader(self) -> Box<dyn Read + Send> {
        Box::new(Remote {
            stream: self.whole.into_stream(),
            chunk: Bytes::new(),
            object: self.object,
        })
    }

    /// Fetches the whole object, handing each piece to `land` with where it goes (`land` is
    /// also called with nothing at least every round trip, to say whether to go on): the GET
    /// from the start read on; the range from `first` to where the last bytes begin, asked
    /// for at once; and, while the GET alone would take more than two round trips (the first
    /// answers' time) to get where the ranges begin, ranges asked for from there backwards,
    /// up to [`IN_FLIGHT`] in flight. The front stops where the ranges begin. On a link where
    /// one connection is fast, that is one GET, as `curl -o` makes; where each connection is
    /// slow (a long, lossy way), as many as keep it busy. What `wanted` says the caller needs
    /// before the rest (asked each time something lands) is asked for at once, a range each,
    /// whatever is in flight; and whether it wants the rest at all (a listing does not: then
    /// no range from the end is asked for). Only with last bytes ([`Answers::tail`]).
    pub(crate) fn fetch(
        self,
        first: u64,
        mut land: impl FnMut(u64, &[u8]) -> anyhow::Result<()>,
        mut wanted: impl FnMut() -> (Vec<Range<u64>>, bool),
    ) -> anyhow::Result<()> {
        let Answers {
            object,
            whole,
            tail,
            round_trip,
            ..
        } = self;
        let (tail_at, _, expected) = tail.context("the server gave no part of the object")?;
        let first = first.min(tail_at);
        let chunk = chunk_size(tail_at);
        // Where the ranges asked for begin: the front reads up to there.
        let low = Arc::new(AtomicU64::new(first));
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
        let done = |first| stream::once(std::future::ready(Ok(Arrived::RangeDone(first))));
        let mut in_flight = 0usize;
        // Nothing else shares the link with the range asked for first (the GET from the start
        // does).
        let mut first_coming = first < tail_at;
        if first_coming {
            let range = object.range(first..tail_at, &expected);
            let range = range.map_ok(|(at, p)| Arrived::Range(at, p));
            all.push(range.chain(done(true)).boxed());
            in_flight += 1;
        }
        let began = Instant::now();
        let (mut front_at, mut front_began) = (0u64, None::<Instant>);
        object.runtime.block_on(async {
            loop {
                let (first_ranges, rest) = wanted();
                for range in first_ranges {
                    let range = object.range(range, &expected);
                    let range = range.map_ok(|(at, p)| Arrived::Range(at, p));
                    all.push(range.chain(done(false)).boxed());
                    in_flight += 1;
                }
                while rest && in_flight < IN_FLIGHT - 1 && !first_coming {
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
                    let range = object.range(start..below, &expected);
                    let range = range.map_ok(|(at, p)| Arrived::Range(at, p));
                    all.push(range.chain(done(false)).boxed());
                    in_flight += 1;
                }
                // Looked at again at least every round trip, so that a front that stalls
                // brings ranges in.
                let wait = round_trip.max(Duration::from_millis(10));
                let next = match tokio::time::timeout(wait, all.try_next()).await {
                    Ok(next) => next.map_err(|e| object.failed(e))?,
                    Err(_) => {
                        // Nothing came: `land` is asked whether to go on all the same.
                        land(0, &[])?;
                        continue;
                    }
                };
                let (at, piece) = match next {
                    None => break,
                    Some(Arrived::RangeDone(first)) => {
                        first_coming &= !first;
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
                land(at, &piece)?;
            }
            anyhow::Ok(())
        })
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

/// The size of a range: a 64th of the object, between 1 and 16 MiB, so that a small object
/// comes in a few round trips and a large one in ranges that each keep a connection busy.
fn chunk_size(size: u64) -> u64 {
    (size / 64).clamp(1 << 20, 16 << 20)
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
        read_body(
            &object.runtime,
            &mut self.stream,
            &mut self.chunk,
            buf,
            |e| format!("reading '{}': {}", object.label, object.failed(e)),
        )
    }
}

/// The store and path of an `https://` (or `http://`) URL, the path's percent-escapes read as
/// the URL has them.
#[cfg(feature = "http")]
fn web(text: &str, retries: super::Retries) -> anyhow::Result<(Arc<dyn ObjectStore>, Key)> {
    let (scheme, rest) = text.split_once("://").unwrap_or(("https", text));
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
    let plain_http = scheme.eq_ignore_ascii_case("http");
    // Metered as a store's client is (the process's cap on requests; a certificate that is not
    // trusted said at once, not tried again).
    let meter = Arc::new(super::client::Meter::new(retries));
    let store = object_store::http::HttpBuilder::new()
        .with_url(format!("{scheme}://{host}"))
        .with_retry(retries.config())
        .with_client_options(super::client::options(
            plain_http,
            &super::tls::roots(None)?,
        )?)
        .with_http_connector(super::client::MeteredConnector(meter))
        .build()?;
    Ok((Arc::new(store), Key::from_url_path(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_a_64th_of_the_object_within_bounds() {
        assert_eq!(chunk_size(0), 1 << 20);
        assert_eq!(chunk_size(256 << 20), 4 << 20);
        assert_eq!(chunk_size(10 << 30), 16 << 20);
    }
}
