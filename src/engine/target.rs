//! The seam between what is written and where it lands. Every source (zip, tar, a pipe, a
//! program's batch) speaks to one [`Engine`]; the engine is a local folder ([`Disk`]) or, with
//! the `s3` feature, a bucket prefix ([`Bucket`](super::bucket::Bucket)), and no source knows
//! which. Each call here forwards to the target's own method of the same name.

use std::path::Path;
use std::sync::Arc;

use crate::close::Closer;
use crate::error::Error;
use crate::options::Options;
use crate::plan::{Entry, Plan};
use crate::progress::Reporter;
use crate::report::Report;

#[cfg(feature = "s3")]
use super::bucket;
use super::{Content, Destination, Disk, DiskStreamed, DiskWriter, Run, Unverified, WriterState};

/// Where a run's writes land. (One per run: the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Engine {
    /// A local folder, held open.
    Disk(Disk),
    /// A bucket prefix (`s3://BUCKET/PREFIX`).
    #[cfg(feature = "s3")]
    Bucket(bucket::Bucket),
}

/// The same call on whichever target this is.
macro_rules! each {
    ($value:expr, $target:ident => $body:expr) => {
        match $value {
            Engine::Disk($target) => $body,
            #[cfg(feature = "s3")]
            Engine::Bucket($target) => $body,
        }
    };
}

impl Engine {
    /// The target `dest` names: a bucket prefix, or a local folder (opened, and created if
    /// needed).
    pub(crate) fn new(
        dest: &Destination,
        opts: &Options,
        closer: Arc<dyn Closer>,
    ) -> anyhow::Result<Engine> {
        #[cfg(feature = "s3")]
        if let Some(url) = dest.store() {
            let bucket = bucket::Bucket::new(url.clone(), dest.named(), opts, true)?;
            return Ok(Engine::Bucket(bucket));
        }
        Ok(Engine::Disk(Disk::new(dest, opts, closer)?))
    }

    /// More threads write than the run was made for (a batch's background writers).
    pub(crate) fn writers_at_least(&self, writers: usize) {
        each!(self, t => t.writers_at_least(writers))
    }
    /// The run's own state, kept once whatever the target.
    pub(crate) fn run(&self) -> &Run {
        each!(self, t => t.run())
    }
    /// The destination as it was named.
    pub(crate) fn root(&self) -> &Path {
        self.run().root()
    }
    pub(crate) fn reporter(&self) -> &dyn Reporter {
        self.run().reporter()
    }
    pub(crate) fn cancelled(&self) -> bool {
        self.run().cancelled()
    }
    pub(crate) fn stopped(&self) -> bool {
        self.run().stopped()
    }
    pub(crate) fn within_limit(&self, entry: &Entry) -> Result<(), Error> {
        self.run().within_limit(entry)
    }
    pub(crate) fn record(&self, error: Error) {
        self.run().record(error)
    }
    pub(crate) fn take_failures(&self) -> Vec<Error> {
        self.run().take_failures()
    }
    pub(crate) fn prepare(&self, plan: &mut Plan) {
        each!(self, t => t.prepare(plan))
    }
    pub(crate) fn make_dir(&self, entry: &Entry) -> Result<(), Error> {
        each!(self, t => t.make_dir(entry))
    }
    pub(crate) fn add_dir(&self, entry: Entry) {
        each!(self, t => t.add_dir(entry))
    }
    pub(crate) fn add_link(&self, entry: Entry) {
        each!(self, t => t.add_link(entry))
    }
    pub(crate) fn track_created(&self) {
        each!(self, t => t.track_created())
    }
    pub(crate) fn hold_replacements(&self) {
        each!(self, t => t.hold_replacements())
    }
    pub(crate) fn forget_links(&self, path: &Path, order: usize) {
        self.run().forget_links(path, order)
    }
    pub(crate) fn unverified(&self, entries: Vec<Unverified>, why: String) {
        each!(self, t => t.unverified(entries, why))
    }
    pub(crate) fn write_file(
        &self,
        state: &mut WriterState,
        entry: &Entry,
        content: Content<'_>,
    ) -> Result<(), Error> {
        each!(self, t => t.write_file(state, entry, content))
    }
    pub(crate) fn flush(&self, state: &mut WriterState) {
        each!(self, t => t.flush(state))
    }
    pub(crate) fn finish(self) -> Report {
        each!(self, t => t.finish())
    }

    /// A writer thread's handle on the target: create one per worker.
    pub(crate) fn writer(&self) -> Writer<'_> {
        match self {
            Engine::Disk(disk) => Writer::Disk(disk.writer()),
            #[cfg(feature = "s3")]
            Engine::Bucket(bucket) => Writer::Bucket(bucket.writer()),
        }
    }

    /// Starts a file whose content comes in pieces, as [`Engine::write_file`] starts a whole
    /// one.
    pub(crate) fn start_streamed(
        &self,
        state: &mut WriterState,
        entry: Entry,
    ) -> Result<Streamed<'_>, Error> {
        Ok(match self {
            Engine::Disk(disk) => Streamed::Disk(disk.start_streamed(state, entry)?),
            #[cfg(feature = "s3")]
            Engine::Bucket(bucket) => Streamed::Bucket(bucket.start_streamed(entry)?),
        })
    }
}

/// A destination shaped like a URL is never taken for a folder's name: a scheme this build
/// cannot write is refused ([`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)), where a
/// path would have made a folder named `s3:`.
pub(crate) fn refuse_url(root: &Path) -> anyhow::Result<()> {
    let Some(scheme) = crate::plan::url_scheme(root) else {
        return Ok(());
    };
    let writes = if cfg!(feature = "s3") {
        "into folders and s3:// buckets only"
    } else {
        "into folders only (this build has no object storage: cargo feature `s3`)"
    };
    let why = anyhow::anyhow!(
        "'{}' is a URL ({scheme}://), and fastwrite writes {writes}: nothing was written (a folder of that name is './{}')",
        root.display(),
        root.display()
    );
    Err(Error::named(root, crate::error::ErrorKind::Unsupported, why).into())
}

/// A source's writer thread, on whichever target.
pub(crate) enum Writer<'e> {
    Disk(DiskWriter<'e>),
    #[cfg(feature = "s3")]
    Bucket(bucket::Writer<'e>),
}

impl<'e> Writer<'e> {
    /// Starts a file whose content comes in pieces; keep it with [`Writer::seal`].
    pub(crate) fn stream(&mut self, entry: Entry) -> Result<Streamed<'e>, Error> {
        Ok(match self {
            Writer::Disk(w) => Streamed::Disk(w.stream(entry)?),
            #[cfg(feature = "s3")]
            Writer::Bucket(w) => Streamed::Bucket(w.stream(entry)?),
        })
    }

    /// Keeps a streamed file.
    pub(crate) fn seal(&mut self, file: Streamed<'_>) -> Result<(), Error> {
        match (self, file) {
            (Writer::Disk(w), Streamed::Disk(file)) => w.seal(file),
            #[cfg(feature = "s3")]
            (_, file) => file.seal(&mut WriterState::default()),
        }
    }

    /// Writes one file entry; a failure is recorded in the run. False: this one failed.
    pub(crate) fn write(&mut self, entry: &Entry, content: Content<'_>) -> bool {
        match self {
            Writer::Disk(w) => w.write(entry, content),
            #[cfg(feature = "s3")]
            Writer::Bucket(w) => w.write(entry, content),
        }
    }
}

/// A file whose content comes in pieces, on whichever target. (A few at a time, each with a
/// buffer of its own far larger than either variant.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Streamed<'e> {
    Disk(DiskStreamed<'e>),
    #[cfg(feature = "s3")]
    Bucket(bucket::Streamed<'e>),
}

/// The same call on whichever target's streamed file.
macro_rules! each_stream {
    ($value:expr, $file:ident => $body:expr) => {
        match $value {
            Streamed::Disk($file) => $body,
            #[cfg(feature = "s3")]
            Streamed::Bucket($file) => $body,
        }
    };
}

impl Streamed<'_> {
    /// The entry's name, as the caller or the archive spelled it.
    pub(crate) fn name(&self) -> &Path {
        each_stream!(self, f => f.name())
    }
    /// Bytes accepted so far.
    pub(crate) fn len(&self) -> u64 {
        each_stream!(self, f => f.len())
    }
    /// Takes `data`.
    pub(crate) fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        each_stream!(self, f => f.write(data))
    }
    /// Passes on what is buffered (the file is still not kept until sealed).
    pub(crate) fn drain(&mut self) -> std::io::Result<()> {
        each_stream!(self, f => f.drain())
    }
    /// Keeps the file: its mode and mtime set, handed over to be closed (or uploaded).
    pub(crate) fn seal(self, state: &mut WriterState) -> Result<(), Error> {
        each_stream!(self, f => f.seal(state))
    }
    /// Gives the file up for a failure the source met itself, which is returned.
    pub(crate) fn abandon_for(self, error: Error) -> Error {
        each_stream!(self, f => f.abandon_for(error))
    }
}
