//! Everything that differs between operating systems, behind one set of functions.
//!
//! The engine calls these and never uses `cfg` itself; `unix.rs` and `windows.rs` each provide
//! the same functions.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;
#[cfg(unix)]
mod unix_root;
#[cfg(unix)]
pub use unix_root::{OpenDir, Root};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;

/// What tells hard-linked files apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    /// How many names the file has.
    pub links: u64,
}

/// What a path names, its last name not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Dir,
    File,
    Symlink,
    Other,
}
