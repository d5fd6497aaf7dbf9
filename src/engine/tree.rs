//! A place as one side of a mirror, as the mirror's comparison sees it ([`Tree`]): a folder
//! (`folder/tree.rs`) or a store's prefix (`bucket/tree.rs`), each beside its place's target,
//! listed a folder at a time with what each entry is ([`Node`]); as a source, how its files
//! reach the engine; as a destination, what is deleted or changed in place there.
//! [`super::tree()`] is the one place the choice between them is made, by where the place is.

use std::ffi::OsString;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::engine::target::Engine;
use crate::error::Error;
use crate::options::{MirrorOptions, Options};
use crate::place::BucketUrl;
use crate::plan::Entry;

/// What an entry of a side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Is {
    File,
    Dir,
    Symlink,
    /// A store's object: a file, or a symlink's target as s3fs keeps one, which its metadata
    /// says (a look, or the fetch, tells).
    Object,
    /// A socket, FIFO or device: never copied.
    Other,
}

/// One entry of a side's folder, with what the side knows of it without another request.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: OsString,
    pub is: Is,
    /// A file's bytes; a symlink's, its target's length.
    pub size: u64,
    /// Its mtime, where the side keeps one (a folder's; a prefix's after a look).
    pub mtime: Option<SystemTime>,
    /// When a store stored it: what a prefix's listing says instead of an mtime.
    pub stored: Option<SystemTime>,
    /// Its permission bits, where known (a folder's; a prefix's after a look).
    pub mode: Option<u32>,
    /// A store's ETag (a single PUT's is its content's MD5).
    pub etag: Option<String>,
    /// A folder's entry: its metadata (identity, holes, the time's precision).
    pub meta: Option<Metadata>,
    /// A prefix's folder: whether a `dir/` marker stands for it (else only keys below it do).
    pub marked: bool,
    /// A prefix's object looked at (`Tree::look`): whether it holds a symlink's target.
    pub looked: Option<bool>,
    /// A folder's symlink: its target.
    pub link: Option<PathBuf>,
}

impl Node {
    /// A node of `is`, nothing else known yet.
    pub fn new(name: OsString, is: Is) -> Node {
        Node {
            name,
            is,
            size: 0,
            mtime: None,
            stored: None,
            mode: None,
            etag: None,
            meta: None,
            marked: false,
            looked: None,
            link: None,
        }
    }

    pub fn is_dir(&self) -> bool {
        self.is == Is::Dir
    }
}

/// A side of a mirror. Every call may come from any of the walk's threads.
pub(crate) trait Tree: Send + Sync {
    /// As the user named it.
    fn named(&self) -> &Path;

    /// Nothing is there (missing, or empty): everything of the other side is new.
    fn is_empty(&self) -> bool;

    /// Its root, as a folder of the other side's is compared with it.
    fn root(&self) -> Node {
        Node::new(OsString::new(), Is::Dir)
    }

    /// The entries of the folder `dir` (relative; empty: the root), in no order; an entry that
    /// cannot be looked at goes to `failed` with why.
    fn list(
        &self,
        dir: &Path,
        failed: &mut Vec<(OsString, anyhow::Error)>,
    ) -> anyhow::Result<Vec<Node>>;

    /// What listing refused (a key no folder can hold), said with the run's failures.
    fn refused(&self) -> Vec<Error> {
        Vec::new()
    }

    /// A local file's path, where its bytes can be compared with another's directly.
    fn local(&self, _rel: &Path) -> Option<PathBuf> {
        None
    }

    /// What `--checksum` compares between two prefixes: an object's ETag.
    fn digest(&self, _rel: &Path, _node: &Node) -> Option<String> {
        None
    }

    /// Whether its entry `node` holds what the local file `local` (whose node is `theirs`)
    /// holds, by `--checksum`: a single PUT's ETag is its content's MD5.
    fn holds_same(&self, _node: &Node, _local: &Path, _theirs: &Node) -> bool {
        false
    }

    /// Fills in what the listing could not say of `nodes` (a prefix's recorded mtimes and
    /// modes, one HEAD each, many at once). A folder's listing says it all.
    fn look(&self, _nodes: &mut [(PathBuf, Node)]) {}

    /// Copies `files` into `engine` now, with one writer on this thread (a folder's, into an
    /// empty destination, as the walk meets them); `false`: this side copies all at once, at
    /// the end.
    fn copy_now(&self, _engine: &Engine, _files: &[Entry]) -> bool {
        false
    }

    /// Its folders exist only as `dir/` markers or as the keys below them (a prefix): a
    /// folder that holds something needs no marker.
    fn marks_folders(&self) -> bool {
        false
    }

    /// Writes `entries` (files, and whatever else only their content tells) into `engine` on
    /// `writers`; each failure is recorded in the run.
    fn deliver(
        &self,
        engine: &Engine,
        writers: &rayon::ThreadPool,
        entries: Vec<Entry>,
        opts: &Options,
    );

    /// Deletes these paths (a folder with all it holds); how many went, and what failed.
    fn delete(&self, paths: &[(PathBuf, bool)], opts: &MirrorOptions) -> (u64, Vec<Error>);

    /// Sets a path's mode and mtime in place; `None`: this side cannot (its entries are written
    /// whole).
    fn update(
        &self,
        _rel: &Path,
        _mode: Option<u32>,
        _mtime: Option<SystemTime>,
    ) -> Option<std::io::Result<()>> {
        None
    }

    /// Renames `from` to `to`, which differ in case only.
    fn rename(&self, _from: &Path, _to: &Path) -> std::io::Result<()> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    /// Copies `paths` of `from` here without their bytes leaving the store, where `from` is a
    /// prefix of the same store; `None` where no such copy reaches.
    fn copy_from(&self, _from: &dyn Tree, _paths: &[Entry]) -> Option<(u64, u64, Vec<Error>)> {
        None
    }

    /// What it says of its requests, for the report (a prefix's downloads in flight).
    fn said(&self) -> Option<String> {
        None
    }

    /// Things worth telling about its requests that are not failures (the waits a throttling
    /// store asked for), for the report's warnings.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// Its bucket and prefix, where it is a store's (a copy between two of one store).
    fn bucket(&self) -> Option<&BucketUrl> {
        None
    }
}
