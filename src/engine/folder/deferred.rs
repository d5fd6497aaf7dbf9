//! What a folder's run keeps until its end: the links to make, the later copies and held
//! replacements waiting under temporary names, the directories whose metadata is applied last,
//! and the entries a failed check takes back. Below the files that fill it and the end that
//! empties it (`finish.rs`).

use std::collections::HashMap;
use std::path::PathBuf;

use crate::engine::unverified::Unverified;
use crate::plan::Entry;

#[derive(Default)]
pub(super) struct Deferred {
    /// Symlinks and hard links, in the source's order: the run's (`Run::take_links`), taken
    /// at the end.
    pub(super) links: Vec<Entry>,
    /// Later copies of paths this run already wrote, under temporary names: moved into place
    /// after every close, in the source's order (see [`Entry::replaces`]).
    pub(super) renames: Vec<Rename>,
    /// Directories with a mode or mtime to apply once their content is complete.
    pub(super) dirs: Vec<Entry>,
    /// Entries written from data that failed its check, taken back after every close.
    pub(super) unverified: Option<Pending>,
}

/// A later copy of a path, or a held replacement of an existing file (see
/// [`Disk::hold_replaced`](super::disk::Disk::hold_replaced)), waiting under a temporary name.
pub(super) struct Rename {
    /// The entry's place in the source (its `index`): the last one wins.
    pub(super) order: usize,
    /// Both relative to the output folder: the temporary name, and the entry's path.
    pub(super) temp: PathBuf,
    /// The entry's relative path and name, to check and to report it.
    pub(super) path: PathBuf,
    pub(super) name: String,
    /// It replaces a file that was there before the run (`Overwrite::Replace`), not one this
    /// run wrote: always the first of its path in the source.
    pub(super) held: bool,
}

/// What the links stage made.
#[derive(Default)]
pub(super) struct Links {
    pub(super) symlinks: u64,
    pub(super) hardlinks: u64,
    /// Device nodes and FIFOs.
    pub(super) specials: u64,
}

impl Links {
    /// Both counts together.
    pub(super) fn plus(self, other: Links) -> Links {
        Links {
            symlinks: self.symlinks + other.symlinks,
            hardlinks: self.hardlinks + other.hardlinks,
            specials: self.specials + other.specials,
        }
    }
}

/// The unverified entries of a run, by index, and what their check said.
pub(super) struct Pending {
    pub(super) entries: HashMap<usize, Unverified>,
    pub(super) why: String,
}
