//! A bucket prefix as a mirror's side (`engine/bucket/tree.rs`): listed, its objects' metadata looked
//! at (HEAD), their bodies fetched (GET), many at once on the client's runtime while the caller
//! writes what has arrived. As a source nothing is written to it (no probe, no marks, so
//! read-only credentials are enough); as a destination a mirror deletes its keys
//! ([`Source::delete_keys`]) and copies into it server-side ([`Source::copy_keys`]); a run of
//! many keeps its completion records in one ([`Source::create`]).
//!
//! - Requests in flight: sized as the uploads are (`flight.rs`), by Little's law from the
//!   request times the run measures and the caller's time per object (what writing it takes),
//!   [`START`] until something is measured, at most `MAX_IN_FLIGHT` (s5cmd's 256 workers), halved
//!   when the store asks to slow down, and held back where the store queues them.
//! - A body up to the caller's size is read whole by its task, within a byte budget (the
//!   caller's memory budget); a larger one is handed over as a stream, read as it is written.

use std::collections::HashMap;
use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::anyhow;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::{BoxStream, FuturesUnordered};
use futures_util::{FutureExt, StreamExt};
use object_store::{
    Attribute, Attributes, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
};
use tokio::sync::{Semaphore, mpsc};

use super::client::Meter;
use super::flight::{EVERY, Sizer};
use super::keys::{head_with_metadata, parse_key, taken};
use super::object::{OTHER_MTIMES, S_IFLNK, parse_mtime, parse_other_mtime};
use super::requests::{self, Requests, Store};
use super::said::explain;
use super::stale;
use crate::place::BucketUrl;
use crate::sync::Unpoisoned;

/// An object as a listing shows it.
pub(crate) struct Listed {
    pub size: u64,
    pub modified: std::time::SystemTime,
    /// Its ETag, unquoted: a single PUT's is its content's MD5; a multipart upload's has a `-`.
    pub etag: Option<String>,
}

/// Every object under `url`'s prefix but fastwrite's own marks, by key as it is (a folder
/// marker's `/` kept): the top level in one request, then each folder below it listed in
/// parallel (ListObjectsV2, 1,000 keys a request).
pub(crate) async fn list_prefix(
    requests: &dyn Requests,
    url: &BucketUrl,
) -> anyhow::Result<HashMap<String, Listed>> {
    let (top, folders) = requests.list(&url.prefix, true).await?;
    let mut found = HashMap::new();
    let mut add = |object: requests::ListedObject| {
        if !stale::is_mark(url, &object.key) {
            let listed = Listed {
                size: object.size,
                modified: object.modified,
                etag: object.etag,
            };
            found.insert(object.key, listed);
        }
    };
    top.into_iter().for_each(&mut add);
    let lists = folders.iter().map(|folder| requests.list(folder, false));
    let mut lists = futures_util::stream::iter(lists).buffer_unordered(16);
    while let Some(listed) = lists.next().await {
        listed?.0.into_iter().for_each(&mut add);
    }
    Ok(found)
}

/// Requests in flight before any was timed.
const START: usize = 64;
/// Objects fetched and not yet taken by the caller, at most.
const WAITING: usize = 64;

/// What an object's user metadata records, in rclone's and s3fs's convention (`object.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Recorded {
    pub mtime: Option<SystemTime>,
    /// `st_mode`, with its type bits where the writer kept them (s3fs, fastwrite).
    pub mode: Option<u32>,
}

impl Recorded {
    fn of(attributes: &Attributes) -> Recorded {
        Recorded::read(|name| {
            attributes
                .get(&Attribute::Metadata(name.into()))
                .map(|v| v.as_ref().to_string())
        })
    }

    /// From metadata as (name, value) pairs.
    fn of_pairs(meta: &[(String, String)]) -> Recorded {
        Recorded::read(|name| {
            meta.iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        })
    }

    /// rclone's `mtime` first, then the names other tools keep it under (`OTHER_MTIMES`).
    fn read(value: impl Fn(&'static str) -> Option<String>) -> Recorded {
        let other = || {
            OTHER_MTIMES
                .iter()
                .find_map(|name| parse_other_mtime(name, &value(name)?))
        };
        Recorded {
            mtime: value("mtime").and_then(|t| parse_mtime(&t)).or_else(other),
            mode: value("mode").and_then(|m| m.trim().parse().ok()),
        }
    }

    /// The object holds a symlink's target (s3fs's convention).
    pub(crate) fn is_symlink(&self) -> bool {
        self.mode.is_some_and(|m| m & 0o170000 == S_IFLNK)
    }

    /// The permission bits recorded, if any.
    pub(crate) fn permissions(&self) -> Option<u32> {
        self.mode.map(|m| m & 0o7777)
    }
}

/// An object's body, as it came.
pub(crate) enum Body {
    /// Read whole; the bytes it holds of the budget go back when it is dropped.
    Whole(
        Bytes,
        #[allow(dead_code)] Option<tokio::sync::OwnedSemaphorePermit>,
    ),
    /// Larger than the caller reads whole: read as it is written.
    Stream(BoxStream<'static, object_store::Result<Bytes>>),
}

/// An object fetched: its metadata and its body.
pub(crate) struct Fetched {
    pub recorded: Recorded,
    pub body: Body,
}

/// A bucket prefix, for reading.
pub(crate) struct Source {
    url: BucketUrl,
    store: Arc<dyn Store>,
    requests: Arc<dyn Requests>,
    flight: Arc<Flight>,
    runtime: tokio::runtime::Runtime,
}

/// The requests in flight, as the run sizes them: the limit, and what the caller takes per
/// object.
struct Flight {
    sizer: Mutex<Sizer>,
    meter: Arc<Meter>,
    /// The caller's time from taking one result to asking for the next, summed, and the
    /// results taken.
    caller_nanos: AtomicU64,
    taken: AtomicU64,
}

impl Flight {
    /// Runs `jobs` as many at once as the limit allows (sized again every few completions),
    /// each result sent to `tx` as it comes, until the jobs end or the receiver is gone.
    async fn run<T>(
        &self,
        mut jobs: impl Iterator<Item = BoxFuture<'static, T>>,
        tx: mpsc::Sender<T>,
    ) {
        let mut running = FuturesUnordered::new();
        let mut done = 0u64;
        loop {
            {
                let mut sizer = self.sizer.lock().unpoisoned();
                while running.len() < sizer.limit {
                    let Some(job) = jobs.next() else { break };
                    running.push(job);
                }
                sizer.peak = sizer.peak.max(running.len());
            }
            let Some(result) = running.next().await else {
                return;
            };
            done += 1;
            if done.is_multiple_of(EVERY) {
                let taken = self.taken.load(Ordering::Relaxed);
                let per_object = (taken > 0).then(|| {
                    Duration::from_nanos(self.caller_nanos.load(Ordering::Relaxed) / taken)
                });
                let side = "the writing took an object";
                self.sizer
                    .lock()
                    .unpoisoned()
                    .resize(&self.meter, 1, per_object, side);
            }
            if tx.send(result).await.is_err() {
                return;
            }
        }
    }

    /// The caller spent `took` on a result before asking for the next.
    fn took(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.caller_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.taken.fetch_add(1, Ordering::Relaxed);
    }
}

impl Source {
    /// The client of `url`'s store. Nothing is asked of the server yet: a missing bucket or
    /// refused credentials are said by the first listing.
    pub(crate) fn open(url: BucketUrl, opts: &crate::Options) -> anyhow::Result<Source> {
        let retries = super::Retries::of(opts, &url)?;
        let (store, requests, meter) = super::connect::connect(&url, retries)?;
        let flight = Flight {
            sizer: Mutex::new(Sizer::new(START, None).watching_the_queue()),
            meter,
            caller_nanos: AtomicU64::new(0),
            taken: AtomicU64::new(0),
        };
        Ok(Source {
            url,
            store,
            requests,
            flight: Arc::new(flight),
            runtime: super::connect::client_runtime("fastwrite-download")?,
        })
    }

    /// The most requests that were in flight at once, and what the limit was last and why.
    pub(crate) fn in_flight(&self) -> (usize, String) {
        let sizer = self.flight.sizer.lock().unpoisoned();
        (sizer.peak, sizer.why.clone())
    }

    /// The waits the store asked for with a `Retry-After`, one line a server.
    pub(crate) fn waits(&self) -> Vec<String> {
        self.flight.meter.waits.said()
    }

    pub(crate) fn url(&self) -> &BucketUrl {
        &self.url
    }

    /// Creates the object `name` under the prefix, holding `data`, never replacing one: one
    /// already there is left as it is, and is no error.
    pub(crate) fn create(&self, name: &str, data: Vec<u8>) -> anyhow::Result<()> {
        let key = format!("{}{name}", self.url.prefix);
        let key = parse_key(&key).map_err(|e| anyhow!(explain(&e)))?;
        let create = PutOptions::from(PutMode::Create);
        self.runtime.block_on(async {
            match self
                .store
                .put_opts(&key, PutPayload::from(data), create)
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if taken(&e) => Ok(()),
                Err(e) => Err(anyhow!(explain(&e))),
            }
        })
    }

    /// Deletes `keys` (batch deletes, 1,000 a request); each failure comes back with its key.
    pub(crate) fn delete_keys(&self, keys: Vec<String>) -> Vec<(String, anyhow::Error)> {
        self.runtime.block_on(async {
            let mut failed = Vec::new();
            let mut paths = Vec::new();
            for key in keys {
                if key.ends_with('/') {
                    // A folder marker, which the store's paths cannot name.
                    if let Err(e) = self.requests.delete(&key).await {
                        failed.push((key, e));
                    }
                    continue;
                }
                match parse_key(&key) {
                    Ok(path) => paths.push(Ok(path)),
                    Err(e) => failed.push((key, anyhow!(explain(&e)))),
                }
            }
            let mut results = self
                .store
                .delete_stream(futures_util::stream::iter(paths).boxed());
            while let Some(result) = results.next().await {
                if let Err(e) = result {
                    let key = match &e {
                        object_store::Error::NotFound { path, .. } => {
                            // Gone already: what a delete wants.
                            let _ = path;
                            continue;
                        }
                        object_store::Error::Generic { .. } => String::new(),
                        other => other.to_string(),
                    };
                    failed.push((key, anyhow!(explain(&e))));
                }
            }
            failed
        })
    }

    /// Copies each (key in the bucket `from`, key here) server-side, 64 at a time (CopyObject,
    /// Copy Blob: the bytes never leave the store, and the metadata goes with them). Each
    /// failure comes back with its key here.
    pub(crate) fn copy_keys(
        &self,
        from: &str,
        pairs: Vec<(String, String)>,
    ) -> Vec<(String, anyhow::Error)> {
        let requests = self.requests.as_ref();
        self.runtime.block_on(
            futures_util::stream::iter(pairs)
                .map(|(key, to)| async move {
                    let copied = requests.copy_from(from, &key, &to).await;
                    copied.err().map(|e| (to, e))
                })
                .buffer_unordered(64)
                .filter_map(|failed| async move { failed })
                .collect(),
        )
    }

    /// Every object under the prefix, by key, within 120 s (the retries of an endpoint that
    /// never answers would take many minutes).
    pub(crate) fn listing(&self) -> anyhow::Result<HashMap<String, Listed>> {
        self.runtime.block_on(async {
            let listing = list_prefix(self.requests.as_ref(), &self.url);
            match tokio::time::timeout(std::time::Duration::from_secs(120), listing).await {
                Ok(listed) => listed,
                Err(_) => Err(anyhow!(
                    "no listing from the store within 120 s (AWS_ENDPOINT_URL, the network?)"
                )),
            }
        })
    }

    /// The metadata of each of `keys` (HEAD), as many at once as the run sizes it, in no
    /// order.
    pub(crate) fn recorded(&self, keys: Vec<String>) -> Vec<(String, anyhow::Result<Recorded>)> {
        let (tx, rx) = mpsc::channel(WAITING);
        let store = Arc::clone(&self.store);
        let requests = Arc::clone(&self.requests);
        let flight = Arc::clone(&self.flight);
        let task = self.runtime.spawn(async move {
            let heads = keys.into_iter().map(move |key| {
                let (store, requests) = (Arc::clone(&store), Arc::clone(&requests));
                async move {
                    if key.ends_with('/') {
                        // A folder marker, whose key `object_store` cannot name.
                        let recorded = match requests.head(&key).await {
                            Ok(Some(meta)) => Ok(Recorded::of_pairs(&meta)),
                            Ok(None) => {
                                Err(anyhow!("no such object (it was deleted since the listing)"))
                            }
                            Err(e) => Err(e),
                        };
                        return (key, recorded);
                    }
                    let got = async {
                        let path = parse_key(&key)?;
                        store.get_opts(&path, head_with_metadata()).await
                    };
                    let recorded = got
                        .await
                        .map(|got| Recorded::of(&got.attributes))
                        .map_err(|e| anyhow!(explain(&e)));
                    (key, recorded)
                }
                .boxed()
            });
            flight.run(heads, tx).await;
        });
        Fetches {
            source: self,
            rx,
            task,
            since: None,
        }
        .collect()
    }

    /// Fetches `objects` (key, and size as listed), as many at once as the run sizes it: each
    /// comes back through the iterator as it arrives, with its key. A body up to `whole_up_to` bytes is
    /// read whole, within `budget` bytes held at once; a larger one comes as a stream.
    pub(crate) fn fetch(
        &self,
        objects: Vec<(String, u64)>,
        whole_up_to: u64,
        budget: u64,
    ) -> Fetches<'_> {
        let (tx, rx) = mpsc::channel(WAITING);
        let store = Arc::clone(&self.store);
        let requests = Arc::clone(&self.requests);
        let flight = Arc::clone(&self.flight);
        let permits = budget.clamp(1, u32::MAX as u64);
        let room = Arc::new(Semaphore::new(permits as usize));
        let task = self.runtime.spawn(async move {
            let fetches = objects.into_iter().map(move |(key, size)| {
                let (store, room, requests) =
                    (Arc::clone(&store), Arc::clone(&room), Arc::clone(&requests));
                async move {
                    if key.ends_with('/') {
                        // A folder marker, whose key `object_store` cannot name: its metadata.
                        let recorded = match requests.head(&key).await {
                            Ok(Some(meta)) => Ok(Fetched {
                                recorded: Recorded::of_pairs(&meta),
                                body: Body::Whole(Bytes::new(), None),
                            }),
                            Ok(None) => {
                                Err(anyhow!("no such object (it was deleted since the listing)"))
                            }
                            Err(e) => Err(e),
                        };
                        return (key, recorded);
                    }
                    let whole = size <= whole_up_to;
                    // A body holds its size of the budget (all of it at most, so that one
                    // larger than the budget still comes, alone).
                    let permit = match whole {
                        true => room
                            .acquire_many_owned(size.clamp(1, permits) as u32)
                            .await
                            .ok(),
                        false => None,
                    };
                    let fetched = async {
                        let got = store.get(&parse_key(&key)?).await?;
                        let recorded = Recorded::of(&got.attributes);
                        let body = match whole {
                            true => Body::Whole(got.bytes().await?, permit),
                            false => Body::Stream(got.into_stream()),
                        };
                        Ok(Fetched { recorded, body })
                    };
                    let fetched: object_store::Result<Fetched> = fetched.await;
                    (key, fetched.map_err(|e| anyhow!(explain(&e))))
                }
                .boxed()
            });
            flight.run(fetches, tx).await;
        });
        Fetches {
            source: self,
            rx,
            task,
            since: None,
        }
    }

    /// A stream's body as a reader, for the caller's writer.
    pub(crate) fn reader(
        &self,
        key: &str,
        stream: BoxStream<'static, object_store::Result<Bytes>>,
    ) -> impl Read + '_ {
        body_reader(&self.runtime, key, stream)
    }
}

/// An object's body, arriving as a stream on `runtime`, as a reader; a failure names `key`.
pub(crate) fn body_reader<'r>(
    runtime: &'r tokio::runtime::Runtime,
    key: &str,
    stream: BoxStream<'static, object_store::Result<Bytes>>,
) -> impl Read + Send + use<'r> {
    StreamReader {
        runtime,
        stream,
        chunk: Bytes::new(),
        key: key.to_string(),
    }
}

/// What [`Source::fetch`] (or [`Source::recorded`]) gives, as it arrives.
pub(crate) struct Fetches<'s, T = (String, anyhow::Result<Fetched>)> {
    source: &'s Source,
    rx: mpsc::Receiver<T>,
    task: tokio::task::JoinHandle<()>,
    /// When the caller took the last result: its time on it is the other side of the sizing.
    since: Option<Instant>,
}

impl<T> Iterator for Fetches<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if let Some(since) = self.since {
            self.source.flight.took(since.elapsed());
        }
        let next = self.source.runtime.block_on(self.rx.recv());
        self.since = Some(Instant::now());
        next
    }
}

impl<T> Drop for Fetches<'_, T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct StreamReader<'r> {
    runtime: &'r tokio::runtime::Runtime,
    stream: BoxStream<'static, object_store::Result<Bytes>>,
    chunk: Bytes,
    key: String,
}

impl Read for StreamReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let key = &self.key;
        read_body(self.runtime, &mut self.stream, &mut self.chunk, buf, |e| {
            format!("reading '{key}': {}", explain(&e))
        })
    }
}

/// One `read` of a body that arrives as a stream of pieces on `runtime`: what is left of the
/// last piece (`chunk`), else the next piece; a failure said by `say`. The bridge from the
/// client's streams to the readers the writers take (here and `read.rs`).
pub(crate) fn read_body(
    runtime: &tokio::runtime::Runtime,
    stream: &mut BoxStream<'static, object_store::Result<Bytes>>,
    chunk: &mut Bytes,
    buf: &mut [u8],
    say: impl FnOnce(object_store::Error) -> String,
) -> io::Result<usize> {
    while chunk.is_empty() {
        match runtime.block_on(stream.next()) {
            None => return Ok(0),
            Some(Ok(piece)) => *chunk = piece,
            Some(Err(e)) => return Err(io::Error::other(say(e))),
        }
    }
    let n = buf.len().min(chunk.len());
    buf[..n].copy_from_slice(&chunk.split_to(n));
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::AttributeValue;

    #[test]
    fn metadata_says_type_mode_and_mtime() {
        let mut attributes = Attributes::new();
        attributes.insert(
            Attribute::Metadata("mtime".into()),
            AttributeValue::from("1700000000.5"),
        );
        attributes.insert(
            Attribute::Metadata("mode".into()),
            AttributeValue::from("41471"),
        );
        let recorded = Recorded::of(&attributes);
        assert!(recorded.is_symlink());
        assert_eq!(recorded.permissions(), Some(0o777));
        assert_eq!(
            recorded.mtime,
            Some(std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_500))
        );
        assert_eq!(Recorded::of(&Attributes::new()), Recorded::default());
    }
}
