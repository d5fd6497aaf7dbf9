//! What every kind of input is to extract, list and read: a [`Source`], which each kind's
//! module implements (a zip in a file, one arriving, one from a pipe, a tar, an image, a single
//! compressed file, a format this build does not read), and the small readers they share.
//! Below every kind and below the door that chooses one (`input.rs`), so that a kind never
//! imports the door.

use std::fs::File;
use std::io::{BufRead, Read};
use std::path::Path;

use super::give::Each;
use super::listed::Listed;
use super::select::Chooser;
use crate::error::{Error, ErrorKind, Setting};
use crate::options::Options;
use crate::place::Place;
use crate::report::Report;

/// An input opened and recognised: `input::open` is the one place its kind is told. Extract, list
/// and read ask it what to do, never what it is; each kind's module owns its answers (a zip in
/// a file, one arriving, one from a pipe, a tar, an image, a single compressed file, or a
/// format this build does not read).
pub(crate) type Input = Box<dyn Source>;

/// What every kind of input does, each in its own way.
pub(crate) trait Source: Send {
    /// What it is, in messages: "a zip archive", "an image".
    fn kind(&self) -> &'static str;

    /// Refuses what applies to other kinds of input only, before anything is written (default:
    /// what chooses an image, and a single compressed file's name).
    fn refuse(&self, archive: &Path, opts: &Options, _: &Chooser) -> anyhow::Result<()> {
        refuse_image_options(self.kind(), archive, opts)?;
        refuse_file_name(self.kind(), archive, opts)
    }

    /// Writes what it holds into `out`.
    fn extract(
        self: Box<Self>,
        archive: &Path,
        out: &Place,
        opts: &Options,
        chooser: &Chooser,
    ) -> anyhow::Result<Report>;

    /// Lists what it holds: each entry to `each`; what extraction would refuse, and a read that
    /// broke part-way, to `listing`'s failures, and what extraction would warn of to its
    /// warnings; `Err` when it cannot be listed at all.
    fn list(
        self: Box<Self>,
        archive: &Path,
        opts: &Options,
        chooser: &Chooser,
        each: &mut dyn FnMut(&Listed),
        listing: &mut Report,
    ) -> anyhow::Result<()>;

    /// Reads its files, each checked, to `each`, writing nothing.
    fn read(
        self: Box<Self>,
        archive: &Path,
        opts: &Options,
        chooser: &Chooser,
        each: &mut Each<'_>,
    ) -> anyhow::Result<Report>;
}

/// `--platform`, `--insecure-registry` and `--layers-cache` choose an image and how it is
/// fetched: with any other `kind` of input they are refused, before anything is written,
/// rather than ignored.
pub(crate) fn refuse_image_options(
    kind: &str,
    archive: &Path,
    opts: &Options,
) -> anyhow::Result<()> {
    if opts.platform.is_some() || opts.insecure_registry || opts.layers_cache.is_some() {
        let why = anyhow::anyhow!(
            "--platform, --insecure-registry and --layers-cache choose an image and how it is fetched, and '{}' is {kind}: refused",
            archive.display()
        );
        return Err(Error::named(archive, ErrorKind::Invalid, why).into());
    }
    Ok(())
}

/// [`Options::file_name`] names what a single compressed file decompresses to: with any other
/// `kind` of input it is refused.
pub(crate) fn refuse_file_name(kind: &str, archive: &Path, opts: &Options) -> anyhow::Result<()> {
    if opts.file_name.is_some() {
        let why = anyhow::anyhow!(
            "{} names the file a single compressed file decompresses to, and '{}' is {kind}: refused",
            Setting::FileName,
            archive.display()
        );
        return Err(Error::named(archive, ErrorKind::Invalid, why).into());
    }
    Ok(())
}

/// Counts the bytes read through it (where a tar entry's data ends in the decoded stream; how
/// much of a piped zip entry was read).
pub(crate) struct Counted<R> {
    pub inner: R,
    pub read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// A stream copied into a new temporary file, which goes when it is closed (it has no name:
/// `O_TMPFILE` on Linux, unlinked at once on other Unix, delete-on-close on Windows, by the
/// `tempfile` crate): the file, at its start. A zip from a pipe is read so where its central directory, at its end, is needed.
pub(crate) fn spooled(mut input: Box<dyn BufRead + Send>) -> std::io::Result<File> {
    use std::io::{Seek, Write};
    let mut file = tempfile::tempfile()?;
    std::io::copy(&mut input, &mut file)?;
    file.flush()?;
    file.rewind()?;
    Ok(file)
}
