//! fastwrite writes many files fast, and returns every error: extracting archives, mirroring
//! folders, and, for programs, writing thousands of files of their own.
//!
//! ```
//! use rayon::prelude::*;
//!
//! let out = tempfile::tempdir()?;
//! let report = fastwrite::Batch::new(out.path().join("MyFont.ufo"))?.scope(|batch| {
//!     batch.write("metainfo.plist", "<plist/>")?;
//!     (0..2300).into_par_iter().try_for_each(|i| {
//!         batch.write(format!("glyphs/g{i}.glif"), format!("<glyph name='g{i}'/>"))
//!     })
//! })?; // waits for every close; the work's error and every failure of the batch are the Err
//! assert_eq!(report.files, 2301);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Batch`] replaces `std::fs::write` in a loop: files are written from any number of threads,
//! and closed where the measured close policy says — inline on a fast local disk, on a pool of
//! close threads where closing is slow (Windows Defender scans inside CloseHandle; NFS and FUSE
//! flush on close; `fsync` waits for the disk) — so close latency overlaps with writing. Unlike
//! `File`'s drop (and close_already, which defers closes on Windows only), every close result
//! comes back: an [`Error`] with the path and an [`ErrorKind`] to match on.
//!
#![cfg_attr(
    all(feature = "extract", feature = "mirror"),
    doc = "[`extract()`] unpacks a zip or tar archive (plain, gzip, zstd, xz, bzip2) into a folder and
[`mirror()`] makes a folder an exact copy of another; both are what the `fastwrite` command
runs, on the same engine, and return a [`Report`]."
)]
#![cfg_attr(
    not(all(feature = "extract", feature = "mirror")),
    doc = "`extract()` unpacks a zip or tar archive (plain, gzip, zstd, xz, bzip2) into a folder and
`mirror()` makes a folder an exact copy of another (with the cargo features `zip` or `tar`, and
`mirror`, which this build of the documentation leaves out); both are what the `fastwrite`
command runs, on the same engine, and return a [`Report`]."
)]
//!
//! Inside, data goes one way: a source (the zip or tar reader, the mirror's walk, or a
//! [`Batch`]) turns its input into validated entries; the engine makes directories and writes
//! files (on a rayon pool for the command line, on the caller's threads for a batch); the close
//! stage closes every handle, inline or on its own threads; every result ends up in the report.
//! `docs/library.md` has the guarantees and the cost model, `docs/design.md` the layout.

#![warn(missing_docs)]
// Unsafe code lives only where the OS needs it: the platform layer (`src/platform/`) and the
// zip's memory map, each allowing it locally, with every block's safety argument written down.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]
// The engine serves every source and every place; a build with some left out (features) leaves
// parts of it unused there. The full build (default features, the one CI lints) still flags dead code.
#![cfg_attr(
    not(all(feature = "zip", feature = "tar", feature = "mirror", feature = "s3")),
    allow(dead_code, unused_imports)
)]

// Links to functions a build may leave out with their cargo features: such a build names them
// as code instead, so that the documentation of every feature set has no broken link.
#[cfg(feature = "extract")]
macro_rules! extract_fn {
    () => {
        "[`extract`](crate::extract())"
    };
}
#[cfg(not(feature = "extract"))]
macro_rules! extract_fn {
    () => {
        "`extract`"
    };
}
#[cfg(feature = "extract")]
macro_rules! list_fn {
    () => {
        "[`list`](crate::list())"
    };
}
#[cfg(not(feature = "extract"))]
macro_rules! list_fn {
    () => {
        "`list`"
    };
}
#[cfg(feature = "extract")]
macro_rules! read_files_fn {
    () => {
        "[`read_files`](crate::read_files())"
    };
}
#[cfg(not(feature = "extract"))]
macro_rules! read_files_fn {
    () => {
        "`read_files`"
    };
}
#[cfg(feature = "mirror")]
macro_rules! mirror_fn {
    () => {
        "[`mirror`](crate::mirror())"
    };
}
#[cfg(not(feature = "mirror"))]
macro_rules! mirror_fn {
    () => {
        "`mirror`"
    };
}

mod batch;
mod cancel;
mod close;
mod engine;
mod error;
#[cfg(feature = "extract")]
mod extract;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzz;
#[cfg(feature = "extract")]
pub mod jobs;
#[cfg(feature = "mirror")]
mod mirror;
mod options;
#[cfg(any(feature = "extract", feature = "mirror"))]
mod patterns;
mod place;
mod plan;
mod platform;
pub mod progress;
mod queue;
mod report;
#[cfg(feature = "s3")]
mod store;
// A build without stores has their names, none of which can be made (store/absent.rs): the
// sources that read a store are written once, for every build.
#[cfg(not(feature = "s3"))]
#[path = "store/absent.rs"]
mod store;
mod sync;

pub use batch::{Batch, BatchBuilder, FileMeta, FileWriter, FinishError};
pub use cancel::Cancel;
pub use error::{Error, ErrorKind, Setting, store_code};
#[cfg(feature = "extract")]
pub use extract::format::recognised;
#[cfg(feature = "extract")]
pub use extract::list::{list, list_reader};
#[cfg(feature = "extract")]
pub use extract::listed::{Listed, ListedKind};
#[cfg(feature = "extract")]
pub use extract::read::{output_error, read_files};
#[cfg(feature = "extract")]
pub use extract::{extract, extract_reader};
#[cfg(feature = "mirror")]
pub use mirror::mirror;
pub use options::described;
pub use options::{CloseMode, MirrorOptions, Options, Overwrite, Selection};
pub use progress::Reporter;
pub use report::{MirrorCounts, Report, RunError};
#[cfg(feature = "s3")]
pub use store::set_max_requests_per_second;

/// Raises this process's soft limit on open files as far as the hard limit allows (Unix; a
/// no-op on Windows). The command line calls it at start; a program writing through a
/// [`Batch`] with slow closes may too. The close pool sizes itself within whatever limit it
/// finds.
pub fn raise_open_file_limit() {
    platform::raise_open_file_limit();
}

// The code blocks of the README and of docs/library.md run as doctests, so what they teach
// compiles and returns every error.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/library.md")]
struct LibraryDocDoctests;
