//! Test harness shared by the integration tests, one file per job: temp dirs (`tempdir`), tree
//! specifications and the builder (`tree`), the seeded generator (`generate`), the tree
//! comparator (`compare`), running the binary and the reference tools (`run`), zips written
//! by Python (`python`), raw zip surgery (`zip_bytes`), hostile-archive helpers (`hostile`),
//! the close-latency lab (`lab`), and the harness that reports unmet prerequisites
//! (`prerequisites`).
//!
//! Everything here is deterministic: the generator uses its own splitmix64 PRNG, so a failing
//! seed reproduces exactly on any machine.

// Each test binary uses a part of the harness.
#![allow(dead_code, unused_imports)]

// The macros' files first (`osv!`, `tests!`): the others use them.
#[macro_use]
mod run;
#[macro_use]
mod prerequisites;

mod archives;
mod compare;
mod generate;
mod hostile;
mod lab;
mod python;
pub mod s3;
mod tempdir;
mod tree;
mod zip_bytes;

pub use archives::*;
pub use compare::*;
pub use generate::*;
pub use hostile::*;
pub use lab::*;
pub use prerequisites::*;
pub use python::*;
pub use run::*;
pub use tempdir::*;
pub use tree::*;
pub use zip_bytes::*;
