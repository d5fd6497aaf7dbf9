//! Files written from data that then failed its check. A compressed tar's checksum (a gzip
//! member's CRC, an xz stream's checks, a zstd stream's) comes after the data it covers, and
//! the files of that data are written before it is read: when the check then fails, the
//! source names those entries here ([`Disk::note_unverified`]), and at the end of the run, after
//! every close, each is taken back (see [`Disk::take_back_unverified`]):
//! - a file this run created is removed;
//! - a file that was to replace another (a later copy of a path, or an existing file with
//!   `Overwrite::Replace`, which a source with checks holds under a temporary name until the
//!   end: [`Disk::hold_replaced`]) is removed from its temporary name, and what was
//!   there stays;
//! - a link is not made.
//!
//! Each is a failure of its own ([`ErrorKind::Unverified`]), so the user knows which files
//! to fetch again; nothing unverified stays under a file's name.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::{Deferred, Disk};
use crate::error::{Error, ErrorKind};
use crate::plan::path_key;
use crate::platform::FileKind;
use crate::sync::Unpoisoned;

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

/// The unverified entries of a run, by index, and what their check said.
pub(super) struct Pending {
    entries: HashMap<usize, Unverified>,
    why: String,
}

impl Disk {
    /// For a source whose data is verified only after its files are written (a compressed
    /// tar): a file that would replace an existing one (`Overwrite::Replace`) waits under a
    /// temporary name until the end of the run, so that a failed check keeps the old file.
    pub(crate) fn hold_replaced(&self) {
        self.hold_replacements.store(true, Ordering::Relaxed);
    }

    pub(super) fn holds_replacements(&self) -> bool {
        self.hold_replacements.load(Ordering::Relaxed)
    }

    /// Names entries handed over from data that failed its check (`why` says which check, in
    /// words that follow "failed"); they are taken back at the end of the run, after every
    /// close. Call it before [`Disk::finish_run`].
    pub(crate) fn note_unverified(&self, entries: Vec<Unverified>, why: String) {
        if entries.is_empty() {
            return;
        }
        let entries = entries.into_iter().map(|e| (e.index, e)).collect();
        self.deferred.lock().unpoisoned().unverified = Some(Pending { entries, why });
    }

    /// Takes back what [`Disk::note_unverified`] named (see the module's header), each with a
    /// failure of its own. An entry that left nothing (its write failed, or it was skipped)
    /// already has its outcome and is passed over. Called after every close.
    pub(super) fn take_back_unverified(&mut self, deferred: &mut Deferred) {
        let Some(Pending { mut entries, why }) = deferred.unverified.take() else {
            return;
        };
        let failure = |entry: &Unverified, what: &str| {
            Error::new(
                &entry.name,
                ErrorKind::Unverified,
                anyhow::anyhow!(
                    "{what}: its data came from a part of the archive that then failed {why}"
                ),
            )
        };
        // Later copies and held replacements, under their temporary names.
        let renames = std::mem::take(&mut deferred.renames);
        for rename in renames {
            let Some(entry) = entries.remove(&rename.order) else {
                deferred.renames.push(rename);
                continue;
            };
            if self.out_dir.remove_file(&rename.temp).is_ok() {
                self.written_off(&entry);
                self.run.failures.push(failure(&entry, "removed"));
            }
        }
        deferred
            .links
            .retain(|link| match entries.remove(&link.index) {
                Some(entry) => {
                    self.run.failures.push(failure(&entry, "not made"));
                    false
                }
                None => true,
            });
        // What is left are files written under their own names (the others, with nothing of
        // theirs to take back, were held under temporary names or failed).
        for entry in entries.into_values() {
            if entry.kind != UnverifiedKind::File || !self.created_here(&entry.path) {
                continue;
            }
            let is_file = self
                .out_dir
                .kind(&entry.path)
                .is_ok_and(|k| k == FileKind::File);
            if is_file && self.out_dir.remove_file(&entry.path).is_ok() {
                self.written_off(&entry);
                self.run.failures.push(failure(&entry, "removed"));
            }
        }
    }

    /// Takes a removed file off the run's counts.
    fn written_off(&mut self, entry: &Unverified) {
        let files = self.files.get_mut();
        *files = files.saturating_sub(1);
        let bytes = self.bytes.get_mut();
        *bytes = bytes.saturating_sub(entry.size);
    }

    /// Whether what is at `path` was created by this run under that name: everything, in an
    /// output folder that was empty; else what the run noted creating there.
    fn created_here(&self, path: &std::path::Path) -> bool {
        self.fresh
            || self
                .created
                .get()
                .is_some_and(|created| created.lock().unpoisoned().contains(&path_key(path)))
    }
}
