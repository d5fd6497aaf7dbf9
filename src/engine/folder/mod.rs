//! The folder target: a local folder as a run's target ([`Disk`], `disk.rs`), and the work it
//! does, a file per job (see `disk.rs`); and a folder as a side of a mirror (`tree.rs`: listed,
//! read, and changed in place: deletions, renames, metadata). Only the engine's choice of
//! target and side (`engine::open`, `engine::tree`) names them.

mod copy;
mod deferred;
mod dirs;
mod disk;
mod files;
mod finish;
mod later;
mod leftovers;
mod links;
mod park;
mod stage;
mod stream;
#[cfg(feature = "mirror")]
mod tree;
mod unverified;

pub(crate) use disk::Disk;
pub(crate) use finish::deepest_first;
pub(crate) use stage::{Staging, staged};
#[cfg(feature = "mirror")]
pub(crate) use tree::Folder;
