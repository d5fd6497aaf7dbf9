//! The store client: what fastwrite knows of an object store, below the write engine and the
//! sources alike. The bucket target (`engine/bucket`) writes through it; the sources that read
//! a store (an archive or an image in a bucket or at a URL, `extract/remote.rs` and
//! `extract/image/remote.rs`; a prefix mirrored down, `engine/bucket/tree.rs`) and the records
//! of a run of many (`jobs/records.rs`) read through it. A build without stores has
//! `absent.rs` instead: the same names, none of which can be made. Nothing here knows of
//! entries being written, failures being counted or a run's state.
//!
//! - `connect.rs`: the client of a URL's store, and the runtime its requests run on;
//!   `client.rs`: what every store's client shares: the HTTP client and its meter (requests in
//!   flight, answers lost, throttling), how it retries; `pace.rs` the process's cap on
//!   requests a second; `throttle.rs` the waits a throttling server asks for (`Retry-After`);
//!   `keys.rs`: keys and digests as the client takes them.
//! - `requests.rs`: what fastwrite asks of a store's client (`Store`), and the requests a store
//!   makes its own way beside it (keys as they are, writes that never replace, server-side
//!   copy, the open uploads of a key); `wire.rs` sends them and reads their answers.
//! - `said.rs`: a store's error in one line a person can read.
//! - `s3/`: S3, its settings and credentials (as the AWS CLI reads them) and its requests;
//!   `azure/`: Azure Blob Storage, the same (as the Azure CLI and azcopy read them); `gcs/`:
//!   Google Cloud Storage (as gcloud's client libraries find them).
//! - `looked.rs`: the first look at a bucket (can it be used, are conditional writes
//!   honoured), once a process.
//! - `stale.rs`: the marks of multipart uploads, and what killed runs left.
//! - `object.rs`: what a file becomes as an object (its metadata, as rclone and s3fs read it).
//! - `read.rs`: one object read (an archive, an image's layout), by ranges where that pays,
//!   the object kept the same from the first byte to the last.
//! - `source.rs`: a prefix read; for a mirror into one, its keys deleted or copied into it
//!   server-side (never a file written: that is the bucket target's).
//! - `tls.rs`: the CA certificates users name for their other tools (`AWS_CA_BUNDLE`,
//!   `REQUESTS_CA_BUNDLE`, `SSL_CERT_FILE`...), trusted beside the system's.
//! - `flight.rs`: how many requests to keep in flight (Little's law), uploads and downloads.

mod client;
mod connect;
mod flight;
mod looked;
pub(crate) mod object;
mod pace;
mod read;
pub use pace::set_max_requests_per_second;
#[cfg(feature = "azure")]
mod azure;
#[cfg(feature = "gcp")]
mod gcs;
mod keys;
pub(crate) mod requests;
mod s3;
pub(crate) mod said;
mod source;
pub(crate) mod stale;
pub(crate) mod throttle;
pub(crate) mod tls;
mod wire;

pub(crate) use crate::place::BucketUrl;
pub(crate) use client::{Meter, Retries};
pub(crate) use connect::{client_runtime, connect, object};
pub(crate) use flight::{EVERY, Sizer};
pub(crate) use keys::{head_with_metadata, md5_hex, md5_of, parse_key, taken};
pub(crate) use looked::first_look;
pub(crate) use read::{Answers, Object};
pub(crate) use requests::Store;
pub(crate) use requests::{Made, Requests};
pub(crate) use said::explain;
pub(crate) use source::{Body, Source};
