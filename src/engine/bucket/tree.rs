//! A store's prefix as a side of a mirror: listed once (its top level, then every folder below
//! it in parallel, 1,000 keys a request), the listing then served a folder at a time. Each key
//! becomes a path, checked as an archive's names are: as a source, a key that would leave the
//! destination (`../x`, `/etc/x`), or an object that is also the folder of other keys, is
//! refused by its key and nothing is written for it; as a destination such keys are no part of
//! the tree, and `--delete` deletes them with the rest. Folders are `dir/` markers or only the
//! keys below them.
//!
//! As a source its objects are fetched many at once on the client's runtime and written as
//! they arrive (as a tar's files are, `engine/feed.rs`), with the mtime and mode their metadata
//! records (rclone's and s3fs's `mtime` and `mode`), an object whose mode says symlink becoming
//! a symlink to what it holds; what a listing cannot tell (that metadata) is a HEAD each, many
//! at once. As a destination its keys are deleted 1,000 a request, and from a prefix of the
//! same store objects are copied server-side (CopyObject, Copy Blob: the bytes never leave the
//! store, and the metadata goes with them).

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::anyhow;

use crate::engine::feed::{self, Job};
use crate::engine::pump::Content;
use crate::engine::target::Engine;
use crate::engine::tree::{Is, Node, Tree};
use crate::error::{Error, ErrorKind};
use crate::options::{MirrorOptions, Options};
use crate::place::BucketUrl;
use crate::plan::{Entry, EntryKind};
use crate::store::{Body, Source, md5_of};
use crate::sync::Unpoisoned;

pub(crate) struct Prefix {
    named: PathBuf,
    source: Source,
    /// Each folder's entries, by its path (the root's under the empty path).
    dirs: HashMap<PathBuf, Vec<Node>>,
    /// Keys no folder can hold: refused (a source's), or deleted with `--delete` (a
    /// destination's), by key.
    odd: Vec<String>,
    refused: Mutex<Vec<Error>>,
}

impl Prefix {
    pub(crate) fn open(
        named: &Path,
        url: &BucketUrl,
        destination: bool,
        opts: &crate::Options,
    ) -> anyhow::Result<Prefix> {
        let kind = match destination {
            true => ErrorKind::Directory,
            false => ErrorKind::Source,
        };
        let failed = |e: anyhow::Error| {
            let why = e.context(format!("cannot list '{}'", named.display()));
            Error::named(named, kind, why)
        };
        let source = Source::open(url.clone(), opts).map_err(|e| Error::start(named, kind, e))?;
        let listed = source.listing().map_err(failed)?;
        let mut prefix = Prefix {
            named: named.to_path_buf(),
            source,
            dirs: HashMap::from([(PathBuf::new(), Vec::new())]),
            odd: Vec::new(),
            refused: Mutex::default(),
        };
        let mut refused = Vec::new();
        let mut files = Vec::new();
        let mut markers = BTreeSet::new();
        for (key, object) in listed {
            let Some(rel) = key.strip_prefix(&url.prefix) else {
                continue;
            };
            let marker = rel.ends_with('/');
            let rel = rel.trim_end_matches('/');
            if rel.is_empty() {
                // The prefix's own marker.
                continue;
            }
            let path = match Entry::for_path(Path::new(rel), EntryKind::File, None, None, 0) {
                Ok(entry) => entry.path,
                Err(error) => {
                    refused.push(error.with_key(url.key_url(&key)));
                    prefix.odd.push(key);
                    continue;
                }
            };
            if marker {
                markers.insert(path);
                continue;
            }
            let mut node = Node::new(OsString::new(), Is::Object);
            (node.size, node.stored, node.etag) = (object.size, Some(object.modified), object.etag);
            files.push((path, key, node));
        }
        // Every folder a key is in is a folder; a key that is both an object and a folder of
        // others keeps the folder.
        let folders: BTreeSet<PathBuf> = files
            .iter()
            .map(|(path, ..)| path)
            .chain(&markers)
            .flat_map(|p| p.ancestors().skip(1).map(Path::to_path_buf))
            .filter(|a| !a.as_os_str().is_empty())
            .chain(markers.iter().cloned())
            .collect();
        for (path, key, node) in files {
            if folders.contains(&path) {
                let why = anyhow!(
                    "'{key}' is an object and also the folder of other keys ('{key}/...'): the folder was mirrored, not the object"
                );
                refused
                    .push(Error::new(&path, ErrorKind::Refused, why).with_key(url.key_url(&key)));
                prefix.odd.push(key);
                continue;
            }
            prefix.add(&path, node);
        }
        for folder in folders {
            let mut node = Node::new(OsString::new(), Is::Dir);
            node.marked = markers.contains(&folder);
            prefix.dirs.entry(folder.clone()).or_default();
            prefix.add(&folder, node);
        }
        if !destination {
            *prefix.refused.get_mut().unpoisoned() = refused;
        }
        Ok(prefix)
    }

    fn add(&mut self, path: &Path, mut node: Node) {
        node.name = path.file_name().unwrap_or_default().to_os_string();
        let parent = path.parent().unwrap_or(Path::new("")).to_path_buf();
        self.dirs.entry(parent).or_default().push(node);
    }

    /// The key of `rel` (a folder's marker ends in `/`).
    fn key(&self, rel: &Path, dir: bool) -> String {
        let path = rel.to_string_lossy().replace('\\', "/");
        let slash = if dir { "/" } else { "" };
        format!("{}{path}{slash}", self.source.url().prefix)
    }

    /// Every key at `rel` or below it (a folder's).
    fn keys_under(&self, rel: &Path, out: &mut Vec<String>) {
        for node in self.dirs.get(rel).into_iter().flatten() {
            let path = rel.join(&node.name);
            match node.is {
                Is::Dir => {
                    if node.marked {
                        out.push(self.key(&path, true));
                    }
                    self.keys_under(&path, out);
                }
                _ => out.push(self.key(&path, false)),
            }
        }
    }

    fn url(&self) -> &BucketUrl {
        self.source.url()
    }
}

impl Tree for Prefix {
    fn named(&self) -> &Path {
        &self.named
    }

    fn is_empty(&self) -> bool {
        self.odd.is_empty() && self.dirs[Path::new("")].is_empty()
    }

    fn list(
        &self,
        dir: &Path,
        _: &mut Vec<(OsString, anyhow::Error)>,
    ) -> anyhow::Result<Vec<Node>> {
        Ok(self.dirs.get(dir).cloned().unwrap_or_default())
    }

    fn refused(&self) -> Vec<Error> {
        std::mem::take(&mut *self.refused.lock().unpoisoned())
    }

    fn digest(&self, _: &Path, node: &Node) -> Option<String> {
        node.etag.clone()
    }

    /// An ETag that is no MD5 (a multipart upload's) compares as different.
    fn holds_same(&self, node: &Node, local: &Path, theirs: &Node) -> bool {
        let Some(etag) = node.etag.as_deref().filter(|e| !e.contains('-')) else {
            return false;
        };
        let md5 = match theirs.is {
            Is::Symlink => std::fs::read_link(local)
                .and_then(|t| md5_of(&mut t.as_os_str().as_encoded_bytes())),
            _ => std::fs::File::open(local).and_then(|mut f| md5_of(&mut f)),
        };
        md5.is_ok_and(|md5| md5.eq_ignore_ascii_case(etag))
    }

    fn look(&self, nodes: &mut [(PathBuf, Node)]) {
        let keys = nodes
            .iter()
            .map(|(rel, n)| self.key(rel, n.is_dir()))
            .collect();
        let recorded: HashMap<String, _> = self.source.recorded(keys).into_iter().collect();
        for (rel, node) in nodes {
            let Some(Ok(recorded)) = recorded.get(&self.key(rel, node.is_dir())) else {
                continue;
            };
            node.mtime = recorded.mtime.or(node.stored);
            node.mode = recorded.permissions();
            node.looked = Some(recorded.is_symlink());
        }
    }

    fn marks_folders(&self) -> bool {
        true
    }

    fn deliver(
        &self,
        engine: &Engine,
        writers: &rayon::ThreadPool,
        entries: Vec<Entry>,
        opts: &Options,
    ) {
        let source = &self.source;
        let by_key: HashMap<String, Entry> = entries
            .into_iter()
            .map(|e| (self.key(&e.path, false), e))
            .collect();
        feed::fed(engine, writers, opts.memory_budget, |feed, writer| {
            let whole_up_to = feed.buffer_limit.min(8 << 20);
            let all = by_key
                .iter()
                .map(|(key, e)| (key.clone(), e.size))
                .collect();
            for (index, (key, fetched)) in source
                .fetch(all, whole_up_to, opts.memory_budget)
                .enumerate()
            {
                if engine.run().cancelled() {
                    break;
                }
                let mut entry = by_key[&key].clone();
                let fail = |e: anyhow::Error| {
                    let why = e.context(format!("fetching '{key}'"));
                    Error::new(&entry.path, ErrorKind::Source, why)
                        .with_key(source.url().key_url(&key))
                };
                let fetched = match fetched {
                    Ok(fetched) => fetched,
                    Err(e) => {
                        engine.run().record(fail(e));
                        continue;
                    }
                };
                let recorded = fetched.recorded;
                entry.index = index;
                entry.mode = recorded.permissions();
                entry.mtime = recorded.mtime.or(entry.mtime);
                if recorded.is_symlink() {
                    let target = match fetched.body {
                        Body::Whole(bytes, _) => Ok(bytes.to_vec()),
                        Body::Stream(stream) => {
                            let mut target = Vec::new();
                            io::Read::read_to_end(
                                &mut io::Read::take(source.reader(&key, stream), 4096),
                                &mut target,
                            )
                            .map(|_| target)
                        }
                    };
                    match target {
                        Ok(target) => {
                            let target = PathBuf::from(crate::plan::display_bytes(&target));
                            (entry.kind, entry.size, entry.mode) =
                                (EntryKind::Symlink { target }, 0, None);
                            engine.add_link(entry);
                        }
                        Err(e) => engine.run().record(fail(e.into())),
                    }
                    continue;
                }
                match fetched.body {
                    Body::Whole(bytes, held) => {
                        let data = bytes.to_vec();
                        drop(held);
                        feed.room(data.len() as u64, writer);
                        feed.push(Job { entry, data }, writer);
                    }
                    Body::Stream(stream) => {
                        let mut reader = source.reader(&key, stream);
                        writer.write(&entry, Content::Reader(&mut reader));
                    }
                }
            }
        });
    }

    fn delete(&self, paths: &[(PathBuf, bool)], opts: &MirrorOptions) -> (u64, Vec<Error>) {
        let mut keys = Vec::new();
        for (rel, dir) in paths {
            match dir {
                true => {
                    keys.push(self.key(rel, true));
                    self.keys_under(rel, &mut keys);
                }
                false => keys.push(self.key(rel, false)),
            }
        }
        if opts.delete {
            keys.extend(self.odd.iter().cloned());
        }
        let failed = self.source.delete_keys(keys);
        let deleted = paths.len().saturating_sub(failed.len()) as u64;
        let failures = failed
            .into_iter()
            .map(|(key, why)| {
                let rel = key
                    .strip_prefix(&self.url().prefix)
                    .unwrap_or(&key)
                    .to_string();
                Error::new(rel, ErrorKind::Delete, why.context("deleting it"))
                    .with_key(self.url().key_url(&key))
            })
            .collect();
        (deleted, failures)
    }

    fn copy_from(&self, from: &dyn Tree, entries: &[Entry]) -> Option<(u64, u64, Vec<Error>)> {
        let from = from.bucket().filter(|f| f.store == self.url().store)?;
        let key = |prefix: &str, e: &Entry| {
            format!("{prefix}{}", e.path.to_string_lossy().replace('\\', "/"))
        };
        let pairs = entries
            .iter()
            .map(|e| (key(&from.prefix, e), key(&self.url().prefix, e)))
            .collect();
        let failed = self.source.copy_keys(&from.bucket, pairs);
        let files = entries.len().saturating_sub(failed.len()) as u64;
        let bytes = entries.iter().map(|e| e.size).sum();
        let failures = failed
            .into_iter()
            .map(|(key, e)| {
                let url = self.url().key_url(&key);
                let error = e.context(format!("copying to '{url}'"));
                Error::new(&key, ErrorKind::Write, error).with_key(url)
            })
            .collect();
        Some((files, bytes, failures))
    }

    fn said(&self) -> Option<String> {
        let (peak, why) = self.source.in_flight();
        (peak > 0).then(|| format!("downloads in flight: up to {peak}, the limit last {why}"))
    }

    fn warnings(&self) -> Vec<String> {
        self.source.waits()
    }

    fn bucket(&self) -> Option<&BucketUrl> {
        Some(self.url())
    }
}
