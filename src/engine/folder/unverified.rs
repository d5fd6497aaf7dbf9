//! A folder's part in taking back files written from data that then failed its check (see
//! `engine/unverified.rs`): a file this run created is removed, a replacement held under a
//! temporary name is removed from it and what was there stays, a link is not made.

use std::sync::atomic::Ordering;

use super::deferred::{Deferred, Pending};
use super::disk::Disk;
use crate::engine::unverified::{Unverified, UnverifiedKind};
use crate::error::{Error, ErrorKind};
use crate::plan::path_key;
use crate::platform::FileKind;
use crate::sync::Unpoisoned;

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
