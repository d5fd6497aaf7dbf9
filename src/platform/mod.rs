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

/// A special file [`OutDir::make_special`] makes: a FIFO, or a device node with its major and
/// minor numbers. (The platform's own word for it: this layer knows no plans.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Fifo,
    CharDevice { major: u32, minor: u32 },
    BlockDevice { major: u32, minor: u32 },
}

/// What [`OutDir::status`] finds at a path.
#[derive(Debug, Clone, Copy)]
pub struct Status {
    pub kind: FileKind,
    pub size: u64,
    pub modified: std::time::SystemTime,
    /// When the file was made or last changed in any way (its ctime; its creation time on
    /// Windows, where nothing else that a program cannot set is at hand). A run killed at a
    /// moment left every file it touched changed after that moment.
    pub changed: std::time::SystemTime,
}
