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
