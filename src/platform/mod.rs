//! Everything that differs between operating systems, behind one set of functions.
//!
//! The engine calls these and never uses `cfg` itself; `unix.rs` and `windows.rs` each provide
//! the same functions.

mod portable;
pub(crate) use portable::unix_time;
#[cfg(windows)]
pub(crate) use portable::windows_name_problem;

#[cfg(unix)]
#[allow(unsafe_code)]
mod unix;
#[cfg(unix)]
pub use unix::*;
#[cfg(unix)]
#[allow(unsafe_code)]
mod unix_out_dir;
#[cfg(unix)]
pub use unix_out_dir::{OpenDir, OutDir};

#[cfg(windows)]
#[allow(unsafe_code)]
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
