//! Everything that differs between operating systems, behind one set of functions.
//!
//! The engine calls these and never uses `cfg` itself; `unix.rs` and `windows.rs` each provide
//! the same functions.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

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
