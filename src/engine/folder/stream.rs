//! A file whose content comes in pieces of unknown number: a program's `FileWriter`, a single
//! compressed file, a zip entry read from a pipe. The same door as a whole file
//! ([`Disk::write_entry`]): started like one (parents, the overwrite policy, `O_EXCL`), sealed
//! like one (mtime and mode on the handle, the hand-over to the close stage), removed if it is
//! abandoned, so nothing half-written stays under a name.
//!
//! Writes are gathered into pieces of [`PIECE`] bytes, so a serializer's many small writes cost
//! few system calls. A failed write is kept (its kind and the OS's error number) so that the
//! file cannot be sealed, and what abandoning it reports says why.

use std::io::{self, Write};
use std::path::Path;

use anyhow::anyhow;

use super::disk::Disk;
use super::files::OpenFile;
use crate::engine::run::cancelled;
use crate::engine::state::WriterState;
use crate::engine::target::{StreamedFile, Target};
use crate::error::{Error, ErrorKind};
use crate::plan::Entry;

/// Writes are gathered into pieces of this size: 64 KiB holds a typical small file whole.
pub(crate) const PIECE: usize = 64 << 10;

/// A streamed file being written. Finish it with [`DiskStreamed::seal`]; dropped unsealed, it is
/// removed and the run records why ([`DiskStreamed::abandon_for`] gives the reason instead).
pub(crate) struct DiskStreamed<'e> {
    engine: &'e Disk,
    entry: Entry,
    /// `None`: the existing file is kept ([`Overwrite::Skip`](crate::Overwrite::Skip)), and
    /// what is written is discarded; also once sealed or abandoned.
    open: Option<OpenFile>,
    buf: Vec<u8>,
    written: u64,
    /// A write that failed (its kind, and the OS's error number).
    failed: Option<(io::ErrorKind, Option<i32>)>,
}

impl Disk {
    /// Starts a streamed file for `entry`, as [`Disk::write_entry`] starts a whole one.
    pub(super) fn open_streamed(
        &self,
        state: &mut WriterState,
        entry: Entry,
    ) -> Result<DiskStreamed<'_>, Error> {
        let open = self.begin(state, &entry)?;
        Ok(DiskStreamed {
            engine: self,
            entry,
            open,
            buf: Vec::new(),
            written: 0,
            failed: None,
        })
    }
}

impl DiskStreamed<'_> {
    /// Writes `data` to the file (or discards it, for a skipped file).
    fn put(&mut self, data: &[u8]) -> io::Result<()> {
        if self.engine.run().cancelled() {
            // Not `Interrupted`, which `write_all` would retry for ever.
            return Err(io::Error::other("the run was cancelled"));
        }
        let Some(open) = &self.open else {
            return Ok(());
        };
        let result = (&open.file).write_all(data);
        match &result {
            Ok(()) => {
                self.written += data.len() as u64;
                self.engine
                    .run()
                    .reporter()
                    .bytes_written(data.len() as u64);
            }
            Err(e) => self.failed = Some((e.kind(), e.raw_os_error())),
        }
        result
    }

    /// Gives the file up: removed, and the error to report for it, if it is still open:
    /// [`ErrorKind::Write`] with the OS's error when a write failed (the usual reason to stop
    /// early), [`ErrorKind::Unfinished`] otherwise.
    fn abandon(&mut self) -> Option<Error> {
        let open = self.open.take()?;
        let error = match self.failed {
            Some(failed) => self.write_failure(&open, failed, "failed; the file was removed"),
            None => Error::new(
                &self.entry.name,
                ErrorKind::Unfinished,
                anyhow!("dropped before it was finished: the file was removed"),
            ),
        };
        self.engine.discard(open);
        Some(error)
    }

    fn write_failure(
        &self,
        open: &OpenFile,
        (kind, os): (io::ErrorKind, Option<i32>),
        what: &str,
    ) -> Error {
        let cause = match os {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::from(kind),
        };
        let error = anyhow!(cause).context(format!("writing '{}' {what}", open.path.display()));
        Error::new(&self.entry.name, ErrorKind::Write, error)
    }
}

impl StreamedFile for DiskStreamed<'_> {
    /// The entry's name, as the caller or the archive spelled it.
    fn name(&self) -> &Path {
        Path::new(&self.entry.name)
    }

    /// Bytes accepted so far (written or buffered).
    fn len(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    /// Takes `data`, writing whole pieces as they fill. The error is the OS's own
    /// (`raw_os_error` works on it); the file's path and the whole story come from
    /// [`DiskStreamed::seal`] or [`DiskStreamed::abandon`].
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if let Some((kind, _)) = self.failed {
            return Err(io::Error::new(kind, "an earlier write to this file failed"));
        }
        if self.buf.len() + data.len() > PIECE {
            self.drain()?;
            if data.len() >= PIECE {
                return self.put(data);
            }
        }
        if self.buf.capacity() == 0 {
            self.buf.reserve(PIECE);
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// Writes what is buffered to the file (it is still not kept until sealed).
    fn drain(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut buf = std::mem::take(&mut self.buf);
        let result = self.put(&buf);
        buf.clear();
        self.buf = buf;
        result
    }

    /// Writes what is buffered, sets the mode and mtime, and hands the file to the close stage.
    /// On failure (a write that failed now or before, the run cancelled meanwhile) the file is
    /// removed and the error says why.
    fn seal(mut self: Box<Self>, state: &mut WriterState) -> Result<(), Error> {
        let engine = self.engine;
        let drained = self.drain();
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let failed = if engine.run().cancelled() {
            Some(cancelled(&self.entry))
        } else if let Err(e) = drained {
            Some(Error::new(&self.entry.name, ErrorKind::Write, e))
        } else {
            self.failed.map(|failed| {
                self.write_failure(&open, failed, "failed earlier; the file is incomplete")
            })
        };
        if let Some(error) = failed {
            engine.discard(open);
            return Err(error);
        }
        self.entry.size = self.written;
        engine.seal(state, open, &self.entry, self.written)
    }

    /// Gives the file up, for a failure the source met itself (its data could not be read, or
    /// would pass the output cap): the file is removed and that failure is the one returned,
    /// for the source to report.
    fn abandon_for(mut self: Box<Self>, error: Error) -> Error {
        drop(self.abandon());
        error
    }
}

impl Drop for DiskStreamed<'_> {
    /// Unsealed (an early return, a panic): removed, and the run records why.
    fn drop(&mut self) {
        if let Some(error) = self.abandon() {
            self.engine.run().record(error);
        }
    }
}
