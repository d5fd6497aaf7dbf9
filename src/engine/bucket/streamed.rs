//! A file whose content comes in pieces (a stream's entry, a program's `FileWriter`): held in
//! memory up to one PUT's size, then a multipart upload whose parts go up as they fill.

use std::path::Path;
use std::sync::Arc;

use anyhow::anyhow;
use object_store::multipart::PartId;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutPayload};

use super::upload::{Outcome, carries, claim, older, older_than};
use super::{Bucket, Job, Shared};
use crate::engine::state::WriterState;
use crate::engine::target::StreamedFile;
use crate::error::{Error, ErrorKind};
use crate::options::Overwrite;
use crate::plan::Entry;
use crate::store::object::{self, S_IFREG, SINGLE_PUT_MAX};
use crate::store::{Made, explain, head_with_metadata, parse_key, stale};

/// A file whose content comes in pieces: held in memory up to [`SINGLE_PUT_MAX`], then sent
/// as the parts of a multipart upload as they fill. Nothing is visible under its key until it
/// is sealed and the upload completes; an abandoned one is aborted.
pub(crate) struct StreamedObject<'e> {
    bucket: &'e Bucket,
    entry: Entry,
    buf: Vec<u8>,
    multipart: Option<Multipart>,
    written: u64,
    done: bool,
    /// The key was found taken before the upload began (and whether by an earlier attempt of
    /// the run's own source: `claim`): what comes is counted and dropped, and sealing counts
    /// it written (its own), or keeps the key or fails as the policy says.
    exists: Option<(Job, bool)>,
}

struct Multipart {
    key: Key,
    id: String,
    /// The parts sent, in order: each one's upload, then its id once it completed.
    parts: Vec<tokio::task::JoinHandle<object_store::Result<PartId>>>,
    done: Vec<PartId>,
    /// The part the buffer fills now.
    next: usize,
    job: Job,
    /// The object that tells a later run this upload is open (see `stale.rs`); none where
    /// the store keeps nothing of an upload never completed to abort (Azure).
    mark: Option<Key>,
}

impl<'e> StreamedObject<'e> {
    /// A file of `bucket`'s, nothing of it sent yet.
    pub(super) fn new(bucket: &'e Bucket, entry: Entry) -> StreamedObject<'e> {
        StreamedObject {
            bucket,
            entry,
            buf: Vec::new(),
            multipart: None,
            written: 0,
            done: false,
            exists: None,
        }
    }
    /// Starts the multipart upload: unless the key may be replaced, a look at it first (an
    /// existing key is not uploaded at all, nor, with `-u`, one no older than the entry; the
    /// completion's `If-None-Match` still guards the time in between), then the upload, marked
    /// as this run's before it begins (`stale.rs`).
    fn begin(&mut self) -> anyhow::Result<()> {
        let bucket = self.bucket;
        let shared = &bucket.shared;
        let name = object::key(&shared.url.prefix, &self.entry.path);
        let key = parse_key(&name).map_err(|e| anyhow!(explain(&e)))?;
        let mode = bucket.put_mode();
        let meta = bucket.meta(
            &self.entry,
            S_IFREG,
            bucket.mode_of(&self.entry),
            bucket.owner_of(&self.entry),
        );
        let job = Job {
            name: self.entry.name.clone(),
            key: name,
            mode: mode.clone(),
            meta,
            size: 0,
            mtime: self.entry.mtime,
        };
        if matches!(mode, PutMode::Create) {
            match bucket
                .runtime
                .block_on(shared.store.get_opts(&key, head_with_metadata()))
            {
                // `-u`: an object as new as the entry is kept, its bytes never sent; an older
                // one is replaced at the completion (which looks again).
                Ok(found)
                    if shared.overwrite == Overwrite::Update
                        && !older_than(&found, self.entry.mtime) =>
                {
                    self.exists = Some((job, false));
                    self.buf = Vec::new();
                    return Ok(());
                }
                Ok(found) if shared.overwrite != Overwrite::Update => {
                    // An earlier attempt at the same source of a run of many left it: its own
                    // (`claim`), counted as written once the content is read past.
                    let own = shared
                        .tag
                        .as_deref()
                        .is_some_and(|tag| carries(shared.url.store, tag, &found.attributes));
                    self.exists = Some((job, own));
                    self.buf = Vec::new();
                    return Ok(());
                }
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(anyhow!(explain(&e))),
            }
        }
        // Marked first: a kill at any moment after leaves nothing no mark names.
        let mark = match shared.requests.leaves_uploads() {
            true => Some(
                bucket
                    .runtime
                    .block_on(stale::mark(shared.store.as_ref(), &shared.url, &job.key))
                    .map_err(|e| e.context("cannot mark the multipart upload as this run's"))?,
            ),
            false => None,
        };
        let id = match bucket
            .runtime
            .block_on(shared.requests.begin(&key, &object::pairs(&job.meta)))
        {
            Ok(id) => id,
            Err(e) => {
                if let Some(mark) = &mark {
                    let _ = bucket.runtime.block_on(shared.store.delete(mark));
                }
                return Err(e);
            }
        };
        self.multipart = Some(Multipart {
            key,
            id,
            parts: Vec::new(),
            done: Vec::new(),
            next: 0,
            job,
            mark,
        });
        Ok(())
    }

    /// Sends the buffer's first part, starting the multipart upload if this is the first.
    fn send_part(&mut self) -> anyhow::Result<()> {
        if self.multipart.is_none() {
            self.begin()?;
        }
        let bucket = self.bucket;
        let Some(multipart) = &mut self.multipart else {
            return Ok(());
        };
        let size = object::part_size(multipart.next).min(self.buf.len());
        let rest = self.buf.split_off(size);
        let part = std::mem::replace(&mut self.buf, rest);
        let sent = put_part(bucket, multipart, part);
        multipart.parts.push(sent);
        // At most four parts of one file in flight.
        if multipart.parts.len() >= 4 {
            let first = multipart.parts.remove(0);
            let id = join(bucket.runtime.block_on(first)).map_err(|e| anyhow!(explain(&e)))?;
            multipart.done.push(id);
        }
        Ok(())
    }

    /// Aborts a multipart upload begun, so that no part stays behind.
    fn abort(&mut self) {
        if let Some(multipart) = self.multipart.take() {
            let shared = &self.bucket.shared;
            self.bucket.runtime.block_on(async {
                for part in &multipart.parts {
                    part.abort();
                }
                let _ = shared
                    .store
                    .abort_multipart(&multipart.key, &multipart.id)
                    .await;
                if let Some(mark) = &multipart.mark {
                    let _ = shared.store.delete(mark).await;
                }
            });
        }
    }
}

/// Sends `data` as the upload's next part, within the gate.
fn put_part(
    bucket: &Bucket,
    multipart: &mut Multipart,
    data: Vec<u8>,
) -> tokio::task::JoinHandle<object_store::Result<PartId>> {
    let shared = Arc::clone(&bucket.shared);
    let size = data.len() as u64;
    let (key, id, index) = (multipart.key.clone(), multipart.id.clone(), multipart.next);
    multipart.next += 1;
    shared.gate.enter(size);
    bucket.runtime.spawn(async move {
        let result = shared
            .store
            .put_part(&key, &id, index, PutPayload::from(data))
            .await;
        shared.gate.leave(size);
        result
    })
}

fn join<T>(
    joined: Result<object_store::Result<T>, tokio::task::JoinError>,
) -> object_store::Result<T> {
    joined.map_err(|source| object_store::Error::JoinError { source })?
}

/// Waits for the parts, then completes the upload: with `If-None-Match: *` unless the key may
/// be replaced (`-u` replaces an older object: the completion is then asked again without the
/// condition). An upload that does not complete is aborted; its mark goes either way.
async fn finish_multipart(
    shared: &Shared,
    multipart: &mut Multipart,
) -> Result<Outcome, object_store::Error> {
    let mut failed = None;
    for part in std::mem::take(&mut multipart.parts) {
        match join(part.await) {
            Ok(id) => multipart.done.push(id),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    let generic = |e: anyhow::Error| object_store::Error::Generic {
        store: shared.url.store.client_name(),
        source: e.into(),
    };
    let result = match failed {
        Some(e) => Err(e),
        None => {
            let create = matches!(multipart.job.mode, PutMode::Create);
            let meta = object::pairs(&multipart.job.meta);
            let complete = |create| {
                let (key, id, parts) = (&multipart.key, &multipart.id, &multipart.done);
                shared.requests.complete(key, id, parts, &meta, create)
            };
            match complete(create).await.map_err(generic)? {
                Made::Done => Ok(Outcome::Written),
                Made::Taken if shared.overwrite == Overwrite::Update => {
                    if older(shared, &multipart.key, multipart.job.mtime).await? {
                        match complete(false).await.map_err(generic)? {
                            Made::Done => Ok(Outcome::Written),
                            Made::Taken => Err(generic(anyhow!(
                                "completing the multipart upload: the key was taken again"
                            ))),
                        }
                    } else {
                        Ok(Outcome::Exists)
                    }
                }
                Made::Taken => Ok(Outcome::Exists),
            }
        }
    };
    if !matches!(result, Ok(Outcome::Written)) {
        let _ = shared
            .store
            .abort_multipart(&multipart.key, &multipart.id)
            .await;
    }
    if let Some(mark) = &multipart.mark {
        let _ = shared.store.delete(mark).await;
    }
    result
}

impl StreamedFile for StreamedObject<'_> {
    fn name(&self) -> &Path {
        Path::new(&self.entry.name)
    }

    fn len(&self) -> u64 {
        self.written
    }

    fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        if self.bucket.run.cancelled() {
            return Err(std::io::Error::other("the run was cancelled"));
        }
        self.written += data.len() as u64;
        if self.exists.is_some() {
            return Ok(());
        }
        self.buf.extend_from_slice(data);
        let threshold = match &self.multipart {
            Some(m) => object::part_size(m.next),
            None => SINGLE_PUT_MAX as usize + 1,
        };
        if self.buf.len() >= threshold {
            self.send_part().map_err(std::io::Error::other)?;
        }
        Ok(())
    }

    fn drain(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn seal(mut self: Box<Self>, _state: &mut WriterState) -> Result<(), Error> {
        self.done = true;
        let bucket = self.bucket;
        if bucket.run.cancelled() {
            self.abort();
            return Err(crate::engine::run::cancelled(&self.entry));
        }
        self.entry.size = self.written;
        if let Some((mut job, own)) = self.exists.take() {
            if own {
                job.size = self.written;
                bucket.shared.settle(&job, Ok(Outcome::Written));
            } else {
                bucket.shared.exists(&job);
            }
            return Ok(());
        }
        let Some(mut multipart) = self.multipart.take() else {
            let data = std::mem::take(&mut self.buf);
            bucket.put(&self.entry, data);
            return Ok(());
        };
        bucket.fill_parents(&self.entry.path);
        let last = std::mem::take(&mut self.buf);
        if !last.is_empty() {
            let part = put_part(bucket, &mut multipart, last);
            multipart.parts.push(part);
        }
        multipart.job.size = self.written;
        let shared = Arc::clone(&bucket.shared);
        shared.gate.enter(0);
        bucket.runtime.spawn(async move {
            let result = finish_multipart(&shared, &mut multipart).await;
            let result = claim(&shared, &multipart.job, result).await;
            shared.settle(&multipart.job, result);
            shared.gate.leave(0);
        });
        Ok(())
    }

    fn abandon_for(mut self: Box<Self>, error: Error) -> Error {
        self.done = true;
        self.abort();
        error
    }
}

impl Drop for StreamedObject<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.abort();
        let error = Error::new(
            &self.entry.name,
            ErrorKind::Unfinished,
            anyhow!("dropped before it was finished: nothing was uploaded"),
        );
        self.bucket.run.record(error);
    }
}
