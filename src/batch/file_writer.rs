//! A file of a batch written through [`std::io::Write`], for serializers.

use std::fmt;
use std::io::{self, Write};
use std::path::Path;

use super::Batch;
use crate::engine::Streamed;
use crate::error::Error;

/// A file being written through [`io::Write`]; made by [`Batch::create`].
///
/// Writes are collected in a buffer and written in large pieces (64 KiB), so a serializer's
/// many small writes cost few system calls. Call [`FileWriter::finish`] at the end: only then
/// is the file kept (mode and mtime set, handed to the close stage). Dropped without it (a `?`
/// on a serializer's error, a panic), the file is removed and an error comes back from
/// [`Batch::finish`]: [`ErrorKind::Write`](crate::ErrorKind::Write) with the OS's error if a write to it failed,
/// [`ErrorKind::Unfinished`](crate::ErrorKind::Unfinished) otherwise.
pub struct FileWriter<'b> {
    pub(super) batch: &'b Batch,
    pub(super) file: Streamed<'b>,
}

impl FileWriter<'_> {
    /// The path this file was created for, as given.
    pub fn path(&self) -> &Path {
        self.file.name()
    }

    /// Writes what is buffered, sets the mode and mtime, and hands the file to the close stage.
    ///
    /// # Errors
    /// [`ErrorKind::Write`](crate::ErrorKind::Write) (including a write that already failed), [`ErrorKind::Metadata`](crate::ErrorKind::Metadata),
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) (the batch was cancelled meanwhile). The file is then removed.
    pub fn finish(self) -> Result<(), Error> {
        let FileWriter { batch, file } = self;
        let result = batch.with_state(|_, state| file.seal(state));
        batch.counted(result)
    }
}

impl Write for FileWriter<'_> {
    /// The error is the OS's own (`raw_os_error` works on it); the file's path and the whole
    /// story come back from [`FileWriter::finish`], or from the batch if it is dropped.
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.file.write(data).map(|()| data.len())
    }

    /// Writes what is buffered to the file (it is still not kept until `finish`).
    fn flush(&mut self) -> io::Result<()> {
        self.file.drain()
    }
}

impl fmt::Debug for FileWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileWriter")
            .field("path", &self.file.name())
            .field("written", &self.file.len())
            .finish_non_exhaustive()
    }
}
