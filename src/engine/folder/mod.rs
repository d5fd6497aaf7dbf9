//! The folder target: a local folder as a run's target ([`Disk`], `disk.rs`), and the work it
//! does, a file per job (see `disk.rs`). Only the engine's choice of target (`engine::open`)
//! and the mirror, which deletes and renames in the folder itself, name it.

mod copy;
mod deferred;
mod dirs;
mod disk;
mod files;
mod finish;
mod later;
mod leftovers;
mod links;
mod stage;
mod stream;
mod unverified;

pub(crate) use disk::Disk;
pub(crate) use finish::deepest_first;
pub(crate) use leftovers::is_run_mark;
pub(crate) use stage::{Staging, staged};
