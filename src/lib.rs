//! fastwrite writes many files fast: it extracts archives into a folder, and mirrors folders.
//!
//! The data goes one way: a source (`extract::*`, or the walk of `mirror`) turns its input into a validated
//! [`plan::Plan`] -> the write stage ([`sink::Sink`]) creates directories, then writes files on
//! a rayon pool -> a separate [`close_pool::ClosePool`] closes the handles so slow closes
//! overlap with writing -> every result, close results included, ends up in a
//! [`report::Report`].

pub mod close_pool;
pub mod extract;
pub mod interrupt;
pub mod mirror;
pub mod options;
pub mod plan;
mod platform;
pub mod progress;
mod queue;
pub mod report;
pub mod sink;

pub use extract::extract;
pub use mirror::mirror;
pub use options::{CloseMode, MirrorOptions, Options, Overwrite};
/// Raises this process's soft limit on open files as far as the hard limit allows (Unix; a
/// no-op on Windows). The command line calls it at start; the close pool sizes itself within
/// whatever limit it finds.
pub use platform::raise_open_file_limit;
pub use progress::Reporter;
pub use report::Report;
