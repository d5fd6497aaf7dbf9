//! Files written from data that then failed its check. A compressed tar's checksum (a gzip
//! member's CRC, an xz stream's checks, a zstd stream's) comes after the data it covers, and
//! the files of that data are written before it is read: when the check then fails, the
//! source names those entries to its target ([`Target::unverified`](super::Target::unverified)),
//! and at the end of the run, after every close, each is taken back (a folder's in
//! `folder/unverified.rs`, a bucket's in `bucket/`):
//! - a file this run created is removed;
//! - a file that was to replace another (a later copy of a path, or an existing file with
//!   `Overwrite::Replace`, which a source with checks holds under a temporary name until the
//!   end) is removed from its temporary name, and what was there stays;
//! - a link is not made.
//!
//! Each is a failure of its own ([`ErrorKind::Unverified`](crate::ErrorKind::Unverified)), so
//! the user knows which files to fetch again; nothing unverified stays under a file's name.

use std::path::PathBuf;

/// An entry a source handed to the engine from data whose check failed (or never came).
#[derive(Debug)]
pub(crate) struct Unverified {
    /// The entry's place in the source ([`Entry::index`](crate::plan::Entry::index)).
    pub index: usize,
    pub path: PathBuf,
    pub name: String,
    /// Its declared size (a file's), taken off the run's count of bytes if it is removed.
    pub size: u64,
    pub kind: UnverifiedKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnverifiedKind {
    /// A file at a path this run had not written before in its source.
    File,
    /// A later copy of a path ([`Entry::replaces`](crate::plan::Entry::replaces)): it waits
    /// under a temporary name.
    LaterCopy,
    /// A symlink, a hard link or a special file: made at the end, so simply not made.
    Link,
}
