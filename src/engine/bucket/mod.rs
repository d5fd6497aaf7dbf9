//! A bucket prefix as the run's target (`s3://BUCKET/PREFIX`): the same calls as a local
//! folder's ([`Disk`](super::Disk)), with objects for files.
//!
//! - A writer reads each file's content (`object.rs` says what a file becomes) and hands it to
//!   an upload on the client's own runtime: an upload completing is the file's close, and its
//!   result comes back with the entry's name and key, as a close's does. How many are in
//!   flight is the gate's (`flight.rs`).
//! - A file of at most [`object::SINGLE_PUT_MAX`] is one PUT with `If-None-Match: *`, so an
//!   existing key is never replaced unless asked; a larger one, and a stream that outgrows it,
//!   a multipart upload whose parts go up as they fill. A PUT and a completed multipart upload
//!   appear whole or not at all: nothing partial is ever visible under a key.
//! - Folders: a bucket has none. A folder that would stay empty becomes an empty `dir/` object
//!   at the end, as s3fs and the consoles make them; symlinks become objects holding their
//!   target (s3fs's convention), hard links copies of their target, made server-side after
//!   every upload; devices and FIFOs are refused by name.
//! - As a side of a mirror (`tree.rs`), the prefix is listed once and served a folder at a
//!   time; its objects are fetched into the engine, its keys deleted, or copied server-side
//!   from another prefix of the same store.

mod flight;
mod streamed;
#[cfg(feature = "mirror")]
mod tree;
mod upload;

#[cfg(feature = "mirror")]
pub(crate) use tree::Prefix;

use streamed::StreamedObject;
use upload::{Outcome, claim, copy, upload};

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::anyhow;
use object_store::{ObjectStoreExt, PutMode};

use super::kept::{Kept, already_exists};
use super::pump::{CHUNK, Content, Piece, pump};
use super::run::Run;
use super::state::WriterState;
use super::target::{Streamed, StreamedFile, Target};
use super::unverified::{Unverified, UnverifiedKind};
use crate::error::{Error, ErrorKind, Failures};
use crate::options::{Options, Overwrite};
use crate::place::Place;
use crate::plan::{Entry, EntryKind, Plan};
use crate::progress::Reporter;
use crate::report::Report;
use crate::sync::Unpoisoned;

use crate::store::object::{self, S_IFDIR, S_IFLNK, S_IFREG, SINGLE_PUT_MAX};
use crate::store::{
    BucketUrl, Made, Meter, Requests, Store, client_runtime, connect, explain, parse_key, stale,
};
use flight::Gate;

/// What every upload task shares with the run.
struct Shared {
    url: BucketUrl,
    store: Arc<dyn Store>,
    requests: Arc<dyn Requests>,
    gate: Gate,
    meter: Arc<Meter>,
    failures: Arc<Failures>,
    reporter: Arc<dyn Reporter>,
    overwrite: Overwrite,
    /// How many times a PUT whose answer was lost (or a 5xx) is looked for and sent again,
    /// each with the client's own retries: three, or fewer where the user asked fewer retries
    /// (`--retries 0`: every request sent once).
    resends: u32,
    /// `Options::resume_tag`: carried by every object, and an existing key that carries it is
    /// this source's own.
    tag: Option<String>,
    /// The store answers `If-None-Match: *` (probed at the start; else every key is looked at
    /// first, see [`Bucket::new`]).
    conditional: bool,
    files: AtomicU64,
    bytes: AtomicU64,
    skipped: AtomicU64,
    /// Folder markers, symlinks and hard links made.
    dirs: AtomicU64,
    symlinks: AtomicU64,
    hardlinks: AtomicU64,
    kept: Mutex<Kept>,
    /// Keys this run wrote: a later copy of a path in the same run replaces its own upload.
    written: Mutex<HashSet<String>>,
}

pub(crate) struct Bucket {
    /// The run's own state (`engine/run.rs`); its failures and reporter are the upload
    /// tasks' too (`Shared`).
    run: Run,
    shared: Arc<Shared>,
    runtime: tokio::runtime::Runtime,
    /// What the start found of killed runs' uploads, for the report.
    stale: Vec<String>,
    deferred: Mutex<Deferred>,
}

#[derive(Default)]
struct Deferred {
    dirs: Vec<Entry>,
    /// The run's links (`Run::take_links`), taken at the end.
    links: Vec<Entry>,
    /// Later copies of a path this run already wrote (a tar's), with their content: uploaded
    /// in the source's order after every other upload, so the last copy wins.
    later: Vec<(Entry, Vec<u8>)>,
    /// Folders that hold something (an object's key goes through them).
    filled: HashSet<PathBuf>,
    /// The source names every folder it has (a mirror's walk): none is only implied by what is
    /// under it (`make_empty_dirs`).
    every_folder_named: bool,
    /// Where each folder the source named is in `dirs`.
    named: HashMap<PathBuf, usize>,
    /// Folders whose marker was sent as they filled (`Options::folder_markers`).
    marked: HashSet<PathBuf>,
    /// Entries uploaded from data whose check then failed: taken back at the end.
    unverified: Vec<(Unverified, String)>,
}

/// An upload's entry, as its task needs it.
struct Job {
    name: String,
    key: String,
    mode: PutMode,
    meta: object::Meta,
    /// The file's bytes, for the count (a skipped file adds none).
    size: u64,
    /// The entry's mtime: with `Overwrite::Update`, an existing object older than this is
    /// replaced.
    mtime: Option<std::time::SystemTime>,
}

impl Bucket {
    /// Opens the bucket prefix `url` (the place `place`): a first look (the bucket is there, the
    /// credentials work, whether conditional writes are honoured) and, with `clean`, the
    /// uploads killed runs left there aborted (`stale.rs`; a dry run changes nothing).
    pub(crate) fn new(
        (place, url): (&Place, &BucketUrl),
        opts: &Options,
        clean: bool,
    ) -> anyhow::Result<Bucket> {
        place.refuse_what_it_cannot(opts)?;
        let root = place.named();
        let url = url.clone();
        let start = |e: anyhow::Error| Error::start(root, ErrorKind::Directory, e);
        let retries = crate::store::Retries::of(opts, &url).map_err(start)?;
        let (store, requests, meter) = connect(&url, retries).map_err(start)?;
        let runtime = client_runtime("fastwrite-upload")?;
        let writers = opts.threads.unwrap_or_else(crate::options::default_threads);
        let budget = opts.memory_budget.max(64 << 20);
        // The retries of an endpoint that never answers would take minutes: the first look
        // gets 30 s.
        // The first look and the search for what killed runs left, at once (one round trip
        // each, side by side).
        let (probe, stale) = runtime.block_on(async {
            let look = async {
                let look = crate::store::first_look(store.as_ref(), &url, opts.overwrite);
                match tokio::time::timeout(std::time::Duration::from_secs(30), look).await {
                    Ok(result) => result,
                    Err(_) => Err(anyhow!(
                        "no answer from the store within 30 s (AWS_ENDPOINT_URL, the network?)"
                    )),
                }
            };
            let stale = async {
                if clean {
                    stale::clean(store.as_ref(), requests.as_ref(), &url).await
                } else {
                    Ok(Vec::new())
                }
            };
            futures_util::join!(look, stale)
        });
        let conditional = probe.map_err(|e| start(e.context(format!("cannot use '{url}'"))))?;
        let stale = stale.map_err(|e| {
            start(e.context(format!(
                "cannot look for uploads killed runs left in '{url}'"
            )))
        })?;
        let run = Run::new(root, opts);
        let shared = Arc::new(Shared {
            url,
            store,
            requests,
            gate: Gate::new(Arc::clone(&meter), writers, budget, opts.uploads),
            meter,
            failures: Arc::clone(&run.failures),
            reporter: Arc::clone(&run.reporter),
            overwrite: opts.overwrite,
            resends: retries.times.map_or(3, |times| times.min(3)),
            tag: opts.resume_tag.clone(),
            conditional,
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            dirs: AtomicU64::new(0),
            symlinks: AtomicU64::new(0),
            hardlinks: AtomicU64::new(0),
            kept: Mutex::default(),
            written: Mutex::default(),
        });
        Ok(Bucket {
            run,
            shared,
            runtime,
            stale,
            deferred: Mutex::default(),
        })
    }

    /// A streamed file of `entry`'s, nothing of it sent yet.
    fn stream_of(&self, entry: Entry) -> Result<StreamedObject<'_>, Error> {
        if self.run.cancelled() {
            return Err(super::run::cancelled(&entry));
        }
        Ok(StreamedObject::new(self, entry))
    }

    /// The permission bits an object records for `entry`.
    fn mode_of(&self, entry: &Entry) -> Option<u32> {
        entry.mode.map(|mode| self.run.opts.mode_bits(mode))
    }

    fn owner_of(&self, entry: &Entry) -> Option<(u32, u32)> {
        entry.owner.filter(|_| self.run.opts.same_owner)
    }

    /// Notes the folders `path` lies in as holding something (no marker is made for them, but
    /// with `Options::folder_markers`, where each gets its marker now: sent beside the files'
    /// uploads, not after them all).
    fn fill_parents(&self, path: &Path) {
        let every = self.run.opts.folder_markers;
        let mut markers = Vec::new();
        {
            let mut deferred = self.deferred.lock().unpoisoned();
            for parent in path.ancestors().skip(1) {
                if parent.as_os_str().is_empty() || !deferred.filled.insert(parent.to_path_buf()) {
                    break;
                }
                if every && !deferred.every_folder_named {
                    markers.extend(self.folder_entry(&deferred, parent));
                    deferred.marked.insert(parent.to_path_buf());
                }
            }
        }
        for entry in &markers {
            self.spawn_marker(entry);
        }
    }

    /// Uploads `data` as `entry`'s object: one PUT, its result recorded when it completes.
    fn put(&self, entry: &Entry, data: Vec<u8>) {
        let key = object::key(&self.shared.url.prefix, &entry.path);
        if entry.replaces {
            // A later copy of a path the archive named before (whose upload may still be in
            // flight): its turn comes after every upload, so the last copy wins.
            self.deferred
                .lock()
                .unpoisoned()
                .later
                .push((entry.clone(), data));
            return;
        }
        self.fill_parents(&entry.path);
        let job = Job {
            name: entry.name.clone(),
            key,
            mode: self.put_mode(),
            meta: self.meta(entry, S_IFREG, self.mode_of(entry), self.owner_of(entry)),
            size: data.len() as u64,
            mtime: entry.mtime,
        };
        self.spawn_put(job, data);
    }

    /// An object's user metadata (`object::metadata`), with the run's resume tag.
    fn meta(
        &self,
        entry: &Entry,
        file_type: u32,
        mode: Option<u32>,
        owner: Option<(u32, u32)>,
    ) -> object::Meta {
        let store = self.shared.url.store;
        let mut meta = object::metadata(store, entry, file_type, mode, owner);
        if let Some(tag) = &self.shared.tag {
            meta.push((object::source_tag(store), tag.clone()));
        }
        meta
    }

    fn put_mode(&self) -> PutMode {
        if self.shared.overwrite == Overwrite::Replace {
            PutMode::Overwrite
        } else {
            PutMode::Create
        }
    }

    fn spawn_put(&self, job: Job, data: Vec<u8>) {
        let shared = Arc::clone(&self.shared);
        shared.gate.enter(job.size);
        self.runtime.spawn(async move {
            let size = job.size;
            let result = upload(&shared, &job, data).await;
            let result = claim(&shared, &job, result).await;
            shared.settle(&job, result);
            shared.gate.leave(size);
        });
    }

    /// Waits for every upload, makes what was deferred, and counts it all.
    fn end(self) -> Report {
        self.shared.gate.drain();
        let mut deferred = std::mem::take(&mut *self.deferred.lock().unpoisoned());
        if !self.run.cancelled() {
            // Later copies, in the source's order, each replacing the one before.
            for (entry, data) in std::mem::take(&mut deferred.later) {
                self.fill_parents(&entry.path);
                let key = object::key(&self.shared.url.prefix, &entry.path);
                // It replaces what this run wrote there; anything else only as asked.
                let ours = self.shared.written.lock().unpoisoned().contains(&key);
                let job = Job {
                    name: entry.name.clone(),
                    key,
                    mode: if ours {
                        PutMode::Overwrite
                    } else {
                        self.put_mode()
                    },
                    meta: self.meta(&entry, S_IFREG, self.mode_of(&entry), self.owner_of(&entry)),
                    size: data.len() as u64,
                    mtime: entry.mtime,
                };
                let result = self.runtime.block_on(async {
                    let result = upload(&self.shared, &job, data).await;
                    claim(&self.shared, &job, result).await
                });
                self.shared.settle(&job, result);
            }
        }
        // Links at a path a later entry took are not made.
        deferred.links = self.run.take_links();
        self.take_back_unverified(&mut deferred);
        if !self.run.cancelled() {
            let links = std::mem::take(&mut deferred.links);
            self.make_links(&links);
            self.make_empty_dirs(&deferred);
            self.shared.gate.drain();
        }
        self.into_report()
    }

    /// Deletes what was uploaded from data whose check failed; each is a failure of its own.
    fn take_back_unverified(&self, deferred: &mut Deferred) {
        for (entry, why) in std::mem::take(&mut deferred.unverified) {
            let key = object::key(&self.shared.url.prefix, &entry.path);
            if entry.kind == UnverifiedKind::File {
                let ours = self.shared.written.lock().unpoisoned().remove(&key);
                if ours {
                    let deleted = self
                        .runtime
                        .block_on(async { self.shared.store.delete(&parse_key(&key)?).await });
                    if let Err(e) = deleted {
                        let error = anyhow!(e).context(format!(
                            "the object was written from data that failed its check ({why}), and could not be deleted: delete '{}' yourself",
                            self.shared.url.key_url(&key)
                        ));
                        self.run
                            .record(Error::new(&entry.name, ErrorKind::Unverified, error));
                        continue;
                    }
                    self.shared.files.fetch_sub(1, Ordering::Relaxed);
                    self.shared.bytes.fetch_sub(entry.size, Ordering::Relaxed);
                }
            }
            deferred
                .later
                .retain(|(later, _)| later.index != entry.index);
            deferred.links.retain(|link| link.index != entry.index);
            let error = anyhow!("{why}: its object was taken back");
            self.run
                .record(Error::new(&entry.name, ErrorKind::Unverified, error));
        }
    }

    /// The links, uploaded side by side within the gate: symlinks first (objects holding their
    /// target, with a link's mode: s3fs's convention), then hard links (server-side copies of
    /// their targets, which may be those symlinks).
    fn make_links(&self, links: &[Entry]) {
        for hard in [false, true] {
            for entry in links {
                if matches!(entry.kind, EntryKind::Hardlink { .. }) == hard {
                    self.make_link(entry);
                }
            }
            self.shared.gate.drain();
        }
    }

    fn make_link(&self, entry: &Entry) {
        self.fill_parents(&entry.path);
        let key = object::key(&self.shared.url.prefix, &entry.path);
        let (target, hard) = match &entry.kind {
            EntryKind::Symlink { target } => (target, false),
            EntryKind::Hardlink { target } => (target, true),
            _ => return,
        };
        let meta = if hard {
            object::Meta::new()
        } else {
            self.meta(entry, S_IFLNK, Some(0o777), self.owner_of(entry))
        };
        let job = Job {
            name: entry.name.clone(),
            key,
            mode: self.put_mode(),
            meta,
            size: 0,
            mtime: None,
        };
        let from = object::key(&self.shared.url.prefix, target);
        let data = target.to_string_lossy().into_owned().into_bytes();
        let shared = Arc::clone(&self.shared);
        shared.gate.enter(0);
        self.runtime.spawn(async move {
            let result = if hard {
                copy(&shared, &from, &job.key, job.mode.clone()).await
            } else {
                upload(&shared, &job, data).await
            };
            let result = claim(&shared, &job, result).await;
            if shared.settle_link(&job, result) {
                let count = if hard {
                    &shared.hardlinks
                } else {
                    &shared.symlinks
                };
                count.fetch_add(1, Ordering::Relaxed);
            }
            shared.gate.leave(0);
        });
    }

    /// Folders that nothing was written under become empty `dir/` objects with their mode and
    /// mtime, as s3fs and the consoles make them (a folder holding anything needs none); with
    /// `Options::folder_markers` every folder does: those the files filled were made as they
    /// filled (`fill_parents`), the rest now. An existing marker is the folder already there.
    fn make_empty_dirs(&self, deferred: &Deferred) {
        let every = self.run.opts.folder_markers;
        for entry in &deferred.dirs {
            if entry.path.as_os_str().is_empty()
                || deferred.marked.contains(&entry.path)
                || (!every && deferred.filled.contains(&entry.path))
            {
                continue;
            }
            self.spawn_marker(entry);
        }
    }

    /// The marker of the folder `path` as the source named it (its entry), else as a folder
    /// only implied by what is under it: mode 0755 and the run's time, as on disk.
    fn folder_entry(&self, deferred: &Deferred, path: &Path) -> Option<Entry> {
        if let Some(&at) = deferred.named.get(path) {
            return Some(deferred.dirs[at].clone());
        }
        let now = Some(std::time::SystemTime::now());
        let mut entry = Entry::for_path(path, EntryKind::Dir, Some(0o755), now, 0).ok()?;
        entry.name = path.to_string_lossy().replace('\\', "/");
        Some(entry)
    }

    /// Sends the empty `dir/` object of the folder `entry`, with its mode and mtime, within the
    /// gate; its result counted, or recorded as the folder's failure.
    fn spawn_marker(&self, entry: &Entry) {
        let key = object::key(&self.shared.url.prefix, &entry.path);
        let mode = self.mode_of(entry).or(Some(0o755));
        let job = Job {
            name: entry.name.clone(),
            key: format!("{key}/"),
            mode: self.put_mode(),
            meta: self.meta(entry, S_IFDIR, mode, self.owner_of(entry)),
            size: 0,
            mtime: entry.mtime,
        };
        let shared = Arc::clone(&self.shared);
        shared.gate.enter(0);
        self.runtime.spawn(async move {
            let create = matches!(job.mode, PutMode::Create);
            let result = match parse_key(&key) {
                // A store that ignores If-None-Match would replace an existing marker's
                // metadata: it is looked at first, as a file's key is (`upload.rs`).
                Ok(_) if create && !shared.conditional => {
                    match shared.requests.head(&job.key).await {
                        Ok(Some(_)) => Ok(Made::Taken),
                        Ok(None) => put_marker(&shared, &key, &job, false).await,
                        Err(e) => Err(e),
                    }
                }
                Ok(_) => put_marker(&shared, &key, &job, create).await,
                Err(e) => Err(e.into()),
            };
            match result {
                // A marker there already is the folder there already.
                Ok(Made::Done | Made::Taken) => {
                    shared.dirs.fetch_add(1, Ordering::Relaxed);
                }
                Err(why) => shared.failed_with(&job, why),
            }
            shared.gate.leave(0);
        });
    }

    fn into_report(self) -> Report {
        let (peak, why) = self.shared.gate.summary();
        let requests = self.shared.meter.requests.load(Ordering::Relaxed);
        let Bucket {
            shared,
            runtime,
            stale,
            ..
        } = self;
        // Every upload has ended (the gate is drained); the runtime's threads stop here.
        drop(runtime);
        let mut warnings = stale;
        if !shared.conditional && shared.overwrite != Overwrite::Replace {
            warnings.push(format!(
                "the store ignores If-None-Match, so each key was looked at before its upload: a key made by someone else in between would have been replaced ({})",
                shared.url
            ));
        }
        let kept = std::mem::take(&mut *shared.kept.lock().unpoisoned());
        warnings.extend(kept.warning(shared.overwrite));
        warnings.extend(shared.meter.waits.said());
        let count = |n: &AtomicU64| n.load(Ordering::Relaxed);
        Report {
            files: count(&shared.files),
            bytes: count(&shared.bytes),
            skipped: count(&shared.skipped),
            dirs: count(&shared.dirs),
            symlinks: count(&shared.symlinks),
            hardlinks: count(&shared.hardlinks),
            failures: shared.failures.take(),
            close_threads: peak,
            peak_close_queue: peak,
            writers_why: format!(
                "uploads in flight: up to {peak}, the limit last {why}; {requests} requests; {}",
                match (shared.overwrite, shared.conditional) {
                    (Overwrite::Replace, _) => "no create-only writes (every key may be replaced)",
                    (_, true) => "the store honours If-None-Match (creates never replace)",
                    (_, false) => "the store ignores If-None-Match (each key looked at first)",
                }
            ),
            warnings,
            ..Report::default()
        }
    }
}

/// A bucket's prefix as a run's target.
impl Target for Bucket {
    /// The run's own state: failures, cancelling, the output cap, the reporter.
    fn run(&self) -> &Run {
        &self.run
    }

    /// Nothing to prepare: a key is checked as it is written (`If-None-Match: *`).
    fn prepare(&self, plan: &mut Plan) {
        let mut files = Vec::with_capacity(plan.entries.len());
        for entry in std::mem::take(&mut plan.entries) {
            match entry.kind {
                EntryKind::Dir => self.add_dir(entry),
                EntryKind::File => files.push(entry),
                _ => self.add_link(entry),
            }
        }
        plan.entries = files;
    }

    /// A folder is made when something is written under it: nothing to do now.
    fn make_dir(&self, entry: &Entry) -> Result<(), Error> {
        self.add_dir(entry.clone());
        Ok(())
    }

    /// The source names every folder it has, each with its own entry (a mirror's walk, which
    /// leaves out a folder whose marker is there already): no marker is made for a folder
    /// only implied by what is under it.
    fn every_folder_named(&self) {
        self.deferred.lock().unpoisoned().every_folder_named = true;
    }

    fn kept_as_is(&self, dir: &Path) {
        self.fill_parents(&dir.join("-"));
    }

    fn add_dir(&self, entry: Entry) {
        let mut deferred = self.deferred.lock().unpoisoned();
        let at = deferred.dirs.len();
        deferred.named.insert(entry.path.clone(), at);
        deferred.dirs.push(entry);
    }

    fn add_link(&self, entry: Entry) {
        if let EntryKind::Special { .. } = entry.kind {
            let why = anyhow!(
                "a device or FIFO cannot be an object: not written (a bucket holds files, folders and, as s3fs keeps them, symlinks)"
            );
            return self
                .run
                .record(Error::new(&entry.name, ErrorKind::Unsupported, why));
        }
        self.run.defer_link(entry);
    }

    // `track_created`: every key written is known to the run, so a later copy of a path
    // replaces only its own; `hold_replacements`: a replaced object keeps its old content
    // until its new one completes, nothing to hold.
    fn unverified(&self, entries: Vec<Unverified>, why: String) {
        let mut deferred = self.deferred.lock().unpoisoned();
        deferred
            .unverified
            .extend(entries.into_iter().map(|e| (e, why.clone())));
    }

    /// Reads a whole file's content and hands it to an upload (a multipart one when large).
    fn write_file(
        &self,
        state: &mut WriterState,
        entry: &Entry,
        content: Content<'_>,
    ) -> Result<(), Error> {
        if self.run.cancelled() {
            return Err(super::run::cancelled(entry));
        }
        let started = Instant::now();
        if entry.size > SINGLE_PUT_MAX {
            let mut file = Box::new(self.stream_of(entry.clone())?);
            let result = read_content(&self.run, entry, content, state.buffer(), &mut |data| {
                file.write(data).map_err(|e| anyhow!(e))
            });
            return match result {
                Ok(_) => file.seal(state),
                Err(error) => Err(file.abandon_for(error)),
            };
        }
        let mut data = Vec::with_capacity(entry.size as usize);
        read_content(&self.run, entry, content, state.buffer(), &mut |chunk| {
            data.extend_from_slice(chunk);
            Ok(())
        })?;
        self.shared.gate.produced(started.elapsed());
        self.put(entry, data);
        Ok(())
    }

    fn start_streamed<'e>(
        &'e self,
        _state: &mut WriterState,
        entry: Entry,
    ) -> Result<Streamed<'e>, Error> {
        Ok(Box::new(self.stream_of(entry)?))
    }

    fn finish(self: Box<Self>) -> Report {
        self.end()
    }
}

/// Hands `content` to `sink` as bytes (a hole as zeros: an object has none), checked against
/// the entry's size (`engine/pump.rs`).
fn read_content(
    run: &Run,
    entry: &Entry,
    content: Content<'_>,
    buf: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8]) -> anyhow::Result<()>,
) -> Result<u64, Error> {
    let zeros = |n: u64, sink: &mut dyn FnMut(&[u8]) -> anyhow::Result<()>| {
        let zeros = vec![0u8; (n as usize).min(CHUNK)];
        let mut left = n;
        while left > 0 {
            let n = left.min(zeros.len() as u64);
            sink(&zeros[..n as usize])?;
            left -= n;
        }
        Ok(())
    };
    pump(
        entry,
        content,
        buf,
        &|| run.cancelled(),
        &mut |piece| match piece {
            Piece::Data(data) => sink(data),
            Piece::Hole(n) => zeros(n, sink),
        },
    )
}

impl Shared {
    /// Records an upload's result: counted, kept by the policy, or a failure with its key.
    fn settle(&self, job: &Job, result: Result<Outcome, object_store::Error>) {
        match result {
            Ok(Outcome::Written) => {
                self.written.lock().unpoisoned().insert(job.key.clone());
                self.files.fetch_add(1, Ordering::Relaxed);
                self.bytes.fetch_add(job.size, Ordering::Relaxed);
                self.reporter.bytes_written(job.size);
                self.reporter.file_written();
                self.reporter.entry_written(&job.name);
            }
            Ok(Outcome::Exists) => self.exists(job),
            Err(e) => self.failed(job, &e),
        }
    }

    /// A link's result; true when it was written (counted apart from files).
    fn settle_link(&self, job: &Job, result: Result<Outcome, object_store::Error>) -> bool {
        match result {
            Ok(Outcome::Written) => {
                self.written.lock().unpoisoned().insert(job.key.clone());
                self.reporter.entry_written(&job.name);
                true
            }
            other => {
                self.settle(job, other);
                false
            }
        }
    }

    fn exists(&self, job: &Job) {
        if self.overwrite == Overwrite::Skip || self.overwrite == Overwrite::Update {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            self.kept.lock().unpoisoned().note(&job.name);
            return;
        }
        let key = self.key_url(&job.key);
        let error = already_exists().context(format!("key '{key}'"));
        self.failures
            .push(Error::new(&job.name, ErrorKind::AlreadyExists, error).with_key(key));
    }

    fn failed(&self, job: &Job, e: &object_store::Error) {
        self.failed_with(job, anyhow!(explain(e)));
    }

    fn failed_with(&self, job: &Job, why: anyhow::Error) {
        let key = self.key_url(&job.key);
        let error = why.context(format!("uploading to '{key}'"));
        self.failures
            .push(Error::new(&job.name, ErrorKind::Write, error).with_key(key));
    }

    /// `s3://BUCKET/KEY`.
    fn key_url(&self, key: &str) -> String {
        self.url.key_url(key)
    }
}

/// The folder marker `dir/` of `job`, with its metadata; with `create`, only if it is not there.
async fn put_marker(shared: &Shared, dir: &str, job: &Job, create: bool) -> anyhow::Result<Made> {
    let meta: Vec<(&str, &str)> = job.meta.iter().map(|(n, v)| (*n, v.as_str())).collect();
    shared
        .requests
        .put_marker(&parse_key(dir)?, &meta, create)
        .await
}
