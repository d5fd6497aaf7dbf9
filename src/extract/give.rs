//! How a reader hands each file's content to its caller (`read.rs`, and each format's reader
//! under it): counted, checked against the declared size, and read to its end after the
//! caller, so that every check on the content runs; the caller's own failure told apart from
//! the content's.

use std::fmt;
use std::io::{self, Read};

use crate::engine::{too_long, truncated};
use crate::plan::Entry;

/// What gets each file's name and content.
pub(super) type Each<'a> = dyn FnMut(&str, &mut dyn Read) -> io::Result<()> + 'a;

/// `each`'s own failure: reading stops (see [`read_files`](super::read::read_files)).
#[derive(Debug)]
pub(super) struct Output(pub(super) io::Error);

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write the content out: {}", self.0)
    }
}

impl std::error::Error for Output {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Whether the error is `each`'s (reading stops), not the entry's.
pub(super) fn is_output(error: &anyhow::Error) -> bool {
    error.downcast_ref::<Output>().is_some()
}

/// Gives `entry`'s content to `each`, then reads what it left, so that every check on the
/// content runs; the content must be exactly the declared size. Returns the bytes read.
pub(super) fn give(entry: &Entry, data: &mut dyn Read, each: &mut Each<'_>) -> anyhow::Result<u64> {
    let n = give_unsized(
        &entry.name,
        &mut data.take(entry.size.saturating_add(1)),
        each,
    )?;
    if n > entry.size {
        return Err(too_long(entry.size));
    }
    if n < entry.size {
        return Err(truncated(n, entry.size));
    }
    Ok(n)
}

/// Gives `name`'s content to `each`, then reads what it left; returns the bytes read.
pub(super) fn give_unsized(
    name: &str,
    data: &mut dyn Read,
    each: &mut Each<'_>,
) -> anyhow::Result<u64> {
    let mut counted = Counted {
        inner: data,
        read: 0,
        failed: None,
    };
    if let Err(error) = each(name, &mut counted) {
        // The content's own failure, met while `each` read it, is the entry's.
        if let Some(failed) = counted.failed.take() {
            return Err(anyhow::Error::new(failed).context("reading the entry's data"));
        }
        return Err(anyhow::Error::new(Output(error)));
    }
    if let Some(failed) = counted.failed.take() {
        return Err(anyhow::Error::new(failed).context("reading the entry's data"));
    }
    io::copy(&mut counted, &mut io::sink())
        .map_err(|e| anyhow::Error::new(e).context("reading the entry's data"))?;
    Ok(counted.read)
}

/// Counts what is read through it, and keeps the content's own error (told apart from the
/// caller's).
struct Counted<'a> {
    inner: &'a mut dyn Read,
    read: u64,
    failed: Option<io::Error>,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.read += n as u64;
                Ok(n)
            }
            Err(error) => {
                let again = io::Error::new(error.kind(), error.to_string());
                self.failed = Some(error);
                Err(again)
            }
        }
    }
}
