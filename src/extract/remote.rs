//! An archive in a bucket (`s3://BUCKET/KEY`) or at an `https://` URL (feature `http`).
//!
//! - The first requests, side by side, ask for the object's last 65 KiB, where a zip keeps the
//!   end of its central directory, and for the whole object. A zip is then fetched into an
//!   unnamed temporary file of its full size, on a thread of its own ([`Arriving`]): the whole
//!   object's GET read on; the central directory asked for at once where it begins before the
//!   last 65 KiB; and ranges from the end backwards while that one connection alone would take
//!   more than two round trips to get where they begin, up to [`IN_FLIGHT`] requests in flight
//!   ([`Object::fetch`]). Each piece is said to [`Arrivals`] as it lands, so that extraction
//!   plans and checks the zip from its central directory as soon as that is in, before
//!   anything is written, then writes each entry as soon as its bytes are all there (its local
//!   header checked against its record then). `list`, and a zip whose entries need more than
//!   their own bytes before planning (encrypted ones, symlinks), wait for the last byte and
//!   read the file as a local zip.
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
use std::io::{self, Read, Seek};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use futures_util::stream::{self, BoxStream, SelectAll, StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{GetOptions, GetRange, GetResult, ObjectMeta, ObjectStore};

use super::arriving::Arrivals;
use crate::store::{self as bucket, BucketUrl};

/// How much of the object's end the first request asks for: a zip's end of central directory
/// record with the longest comment it can have (22 + 65,535 bytes), and the zip64 locator.
const TAIL: u64 = 65 * 1024;

/// Requests of a zip in flight at once, the GET from the start among them. The temporary file
/// takes them as they come, so this bounds connections, not memory.
const IN_FLIGHT: usize = 16;

/// A remote archive, opened.
pub(super) enum Opened {
    /// A zip, arriving in a temporary file.
    Zip(Arriving),
    /// Read once from its start. `unranged`: the server ignored a range request, so a zip in
    /// it is read by its local headers.
    Stream {
        reader: Box<dyn Read + Send>,
        unranged: bool,
    },
}

/// What arrives while a zip is fetched: a piece of the GET from the start, or of a range, and
/// where it goes; or the end of a range (`true`: the central directory's).
enum Arrived {
    Front(u64, Bytes),
    Range(u64, Bytes),
    RangeDone(bool),
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

/// The store and the key `location` names (`s3://BUCKET/KEY`, `az://`, `gs://`, or with
/// feature `http` an `https://` or `http://` URL), and the store's words for a missing object;
/// `None` for a local path. Where an image's layout or `docker save` tar lies.
#[cfg(feature = "image")]
pub(super) fn located(location: &Path) -> anyhow::Result<Option<Located>> {
    Ok(Object::locate(location)?.map(|object| Located {
        store: object.store,
        key: object.key,
        missing: object.missing,
    }))
}

/// An object (or a prefix) in a store, and the store's words for a missing object.
#[cfg(feature = "image")]
pub(super) struct Located {
    pub store: Arc<dyn ObjectStore>,
    pub key: Key,
    pub missing: &'static str,
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
                    true => self.arrive(whole, &meta, (at, tail), asked_at.elapsed()),
                    false => Ok(self.stream(whole, false)),
                }
            }
            Err(object_store::Error::NotSupported { .. }) => Ok(self.stream(whole, true)),
            // An empty object has no last bytes to give (416): the stream says what it is.
            Err(_) => Ok(self.stream(whole, false)),
        }
    }

    /// Begins fetching the zip into an unnamed temporary file of its full size, on a thread of
    /// its own ([`Object::fetch`]); `tail` is its part from `tail_at` on, already read.
    fn arrive(
        self,
        whole: GetResult,
        meta: &ObjectMeta,
        (tail_at, tail): (u64, Bytes),
        round_trip: Duration,
    ) -> anyhow::Result<Opened> {
        let held = |e: io::Error| {
            anyhow::Error::new(e).context("cannot write the archive to a temporary file")
        };
        let file = tempfile::tempfile()
            .context("cannot make a temporary file to hold the archive while it is read")?;
        file.set_len(meta.size)
            .and_then(|_| crate::platform::write_at(&file, &tail, tail_at))
            .map_err(held)?;
        let arrivals = Arc::new(Arrivals::default());
        arrivals.add(tail_at..tail_at + tail.len() as u64);
        let directory = directory_of(&tail, tail_at, meta.size);
        let sink = file.try_clone().map_err(held)?;
        let stop = Arc::new(AtomicBool::new(false));
        let expected = Expected::of(meta);
        let label = self.label.clone();
        let download = {
            let (arrivals, stop) = (arrivals.clone(), stop.clone());
            let first = directory.as_ref().map_or(tail_at, |d| d.start.min(tail_at));
            std::thread::Builder::new()
                .name("fastwrite-download".into())
                .spawn(move || {
                    let fetched = self.fetch(
                        whole,
                        &expected,
                        (first, tail_at),
                        round_trip,
                        |at, piece| {
                            if stop.load(Ordering::Relaxed) {
                                anyhow::bail!("stopped");
                            }
                            crate::platform::write_at(&sink, piece, at).map_err(held)?;
                            arrivals.add(at..at + piece.len() as u64);
                            Ok(())
                        },
                    );
                    arrivals.end(fetched);
                })
                .context("cannot start the download's thread")?
        };
        Ok(Opened::Zip(Arriving {
            file,
            size: meta.size,
            arrivals,
            directory,
            label,
            stop,
            download: Some(download),
        }))
    }

    /// Fetches the whole object, handing each piece to `land` with where it goes: `whole`
    /// (the GET from the start) read on; the range `first..tail_at` (the central directory,
    /// where it begins before the part already read) asked for at once; and, while the GET
    /// alone would take more than two round trips (`round_trip`, the first answers' time) to
    /// get where the ranges begin, ranges asked for from there backwards, up to [`IN_FLIGHT`]
    /// in flight. The front stops where the ranges begin. On a link where one connection is
    /// fast, that is one GET, as `curl -o` makes; where each connection is slow (a long,
    /// lossy way), as many as keep it busy.
    fn fetch(
        self,
        whole: GetResult,
        expected: &Expected,
        (first, tail_at): (u64, u64),
        round_trip: Duration,
        mut land: impl FnMut(u64, &[u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
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
        let done = |directory| stream::once(std::future::ready(Ok(Arrived::RangeDone(directory))));
        let mut in_flight = 0usize;
        // Nothing is written before the central directory is in: no other range shares the
        // link with it meanwhile (the GET from the start does).
        let mut directory_coming = first < tail_at;
        if directory_coming {
            let directory = self.range(first..tail_at, expected);
            let directory = directory.map_ok(|(at, p)| Arrived::Range(at, p));
            all.push(directory.chain(done(true)).boxed());
            in_flight += 1;
        }
        let began = Instant::now();
        let (mut front_at, mut front_began) = (0u64, None::<Instant>);
        self.runtime.block_on(async {
            loop {
                while in_flight < IN_FLIGHT - 1 && !directory_coming {
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
                    let range = self.range(start..below, expected);
                    let range = range.map_ok(|(at, p)| Arrived::Range(at, p));
                    all.push(range.chain(done(false)).boxed());
                    in_flight += 1;
                }
                // Looked at again at least every round trip, so that a front that stalls
                // brings ranges in.
                let wait = round_trip.max(Duration::from_millis(10));
                let next = match tokio::time::timeout(wait, all.try_next()).await {
                    Ok(next) => next.map_err(|e| self.failed(e))?,
                    Err(_) => {
                        // Nothing came: `land` is asked whether to go on all the same.
                        land(0, &[])?;
                        continue;
                    }
                };
                let (at, piece) = match next {
                    None => break,
                    Some(Arrived::RangeDone(directory)) => {
                        directory_coming &= !directory;
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
                "it changed while it was read (another ETag or Last-Modified than its first answer's): read it again once it stays the same"
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

/// A zip arriving in a temporary file of its full size, fetched by a thread of its own, which
/// stops when this is dropped.
pub(super) struct Arriving {
    file: File,
    size: u64,
    arrivals: Arc<Arrivals>,
    /// Where its central directory begins, to its end; `None` where the end records do not
    /// say so plainly (then nothing is planned before the last byte).
    directory: Option<Range<u64>>,
    label: String,
    stop: Arc<AtomicBool>,
    download: Option<JoinHandle<()>>,
}

impl Arriving {
    /// What has arrived, and who waits for what.
    pub fn arrivals(&self) -> &Arrivals {
        &self.arrivals
    }

    /// The temporary file (another handle to it): what has not arrived yet reads as zeros.
    pub fn file(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Where the central directory and the end records lie, when the end says so plainly.
    pub fn directory(&self) -> Option<Range<u64>> {
        self.directory.clone()
    }

    /// The file at its start once every byte has arrived; `Err` if the download broke off.
    pub fn finish(mut self) -> anyhow::Result<File> {
        let whole = self.arrivals.wait_for(0..self.size, &|| false);
        whole.with_context(|| format!("cannot read archive '{}'", self.label))?;
        let mut file = self.file.try_clone()?;
        file.rewind()?;
        if let Some(download) = self.download.take() {
            let _ = download.join();
        }
        Ok(file)
    }
}

impl Drop for Arriving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(download) = self.download.take() {
            let _ = download.join();
        }
    }
}

/// Where a zip's central directory begins, to the object's end (`size`), from its last bytes
/// (`tail`, from `tail_at` on): the end of central directory record (and zip64's, when the
/// first says to look there) read as the zip crate reads it. `None` unless the directory ends
/// exactly where those records begin, as every writer leaves it: a zip behind a prefix that
/// its offsets do not count, or any oddity, waits for its last byte and is read as a local
/// zip is.
fn directory_of(tail: &[u8], tail_at: u64, size: u64) -> Option<Range<u64>> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(tail.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(tail.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(tail.get(at..at + 8)?.try_into().ok()?));
    let end = tail
        .windows(4)
        .rposition(|w| w == b"PK\x05\x06")
        .filter(|&at| at + 22 + usize::from(u16_at(at + 20).unwrap_or(0)) == tail.len())?;
    let (mut length, mut start) = (u64::from(u32_at(end + 12)?), u64::from(u32_at(end + 16)?));
    let mut records = tail_at + end as u64;
    // A zip64 end record (more than 65,535 entries, or offsets past 4 GiB) lies before the
    // locator that ends just where the end record begins: the directory ends where it begins.
    let locator = end
        .checked_sub(20)
        .filter(|&at| tail[at..].starts_with(b"PK\x06\x07"));
    if let Some(locator) = locator {
        let at64 = u64_at(locator + 8)?;
        let local = usize::try_from(at64.checked_sub(tail_at)?).ok()?;
        if !tail.get(local..)?.starts_with(b"PK\x06\x06") {
            return None;
        }
        (length, start, records) = (u64_at(local + 40)?, u64_at(local + 48)?, at64);
    }
    (start.checked_add(length)? == records && records <= size).then_some(start..size)
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
    let Some(scheme) = crate::place::url_scheme(url)
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
    fn the_central_directory_is_found_from_the_end_records() {
        // A directory of 46 bytes at 100, then its end record with a 3-byte comment.
        let mut tail = vec![0u8; 146];
        tail.extend_from_slice(b"PK\x05\x06\0\0\0\0\x01\0\x01\0");
        tail.extend_from_slice(&46u32.to_le_bytes());
        tail.extend_from_slice(&100u32.to_le_bytes());
        tail.extend_from_slice(&3u16.to_le_bytes());
        tail.extend_from_slice(b"abc");
        let size = 1000 + tail.len() as u64;
        // The same bytes as the object's end, from 1,000 on: the offsets no longer add up.
        assert_eq!(directory_of(&tail, 0, tail.len() as u64), Some(100..171));
        assert_eq!(directory_of(&tail, 1000, size), None);
        // A comment whose length does not end the object: not read.
        tail.push(0);
        assert_eq!(directory_of(&tail, 0, tail.len() as u64), None);
    }

    #[test]
    fn a_zip64_directory_ends_where_its_end_record_begins() {
        // 70,000 entries: a directory of 5,000 bytes at 100, the zip64 end record (56
        // bytes) at 5,100, its locator, then the end record, whose count says "see zip64".
        let mut tail = vec![0u8; 5_100];
        tail.extend_from_slice(b"PK\x06\x06");
        tail.extend_from_slice(&44u64.to_le_bytes());
        // Versions made by and needed, this disk, the directory's disk.
        tail.extend_from_slice(&[0; 2 + 2 + 4 + 4]);
        tail.extend_from_slice(&70_000u64.to_le_bytes());
        tail.extend_from_slice(&70_000u64.to_le_bytes());
        tail.extend_from_slice(&5_000u64.to_le_bytes());
        tail.extend_from_slice(&100u64.to_le_bytes());
        assert_eq!(tail.len(), 5_156);
        tail.extend_from_slice(b"PK\x06\x07\0\0\0\0");
        tail.extend_from_slice(&5_100u64.to_le_bytes());
        tail.extend_from_slice(&1u32.to_le_bytes());
        tail.extend_from_slice(b"PK\x05\x06\0\0\0\0\xff\xff\xff\xff");
        tail.extend_from_slice(&5_000u32.to_le_bytes());
        tail.extend_from_slice(&100u32.to_le_bytes());
        tail.extend_from_slice(&0u16.to_le_bytes());
        let size = tail.len() as u64;
        assert_eq!(directory_of(&tail, 0, size), Some(100..size));
    }

    #[test]
    fn a_zip_is_told_by_its_end_record() {
        assert!(ends_like_a_zip(b"...PK\x05\x06\0\0\0\0"));
        assert!(!ends_like_a_zip(b"\x1f\x8b\x08 a gzip stream"));
    }
}
