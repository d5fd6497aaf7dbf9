//! Writing one file: create it (honouring the overwrite policy), fill it, set its mtime and mode
//! on the open handle, and hand the handle to the close stage.
//!
//! Files are created with `O_CREAT | O_EXCL` (`create_new`): that never follows a symlink, never
//! truncates anything, and costs nothing over a plain create, so an empty output folder needs no
//! other check. Replacing writes to a temporary name that is renamed into place after a good
//! close. A file that fails half-way is removed: nothing half-written stays under any name.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{Context, anyhow};

use super::disk::{Disk, nanos};
use crate::close::{CloseJob, Finalize};
use crate::engine::kept::already_exists;
use crate::engine::pump::{Content, Piece, pump};
use crate::engine::run::cancelled;
use crate::engine::state::{Counts, WriterState};
use crate::error::{Error, ErrorKind, Tag};
use crate::options::Overwrite;
use crate::plan::Entry;
use crate::platform::{self, FileKind};

/// How many files a writer counts before adding them to the engine's totals.
const PUBLISH_EVERY: u64 = 16;

/// A file created for an entry and not yet handed over.
pub(crate) struct OpenFile {
    pub file: File,
    /// Where it is on disk now, under the output folder (a temporary name when it replaces
    /// something).
    pub path: PathBuf,
    pub(super) finalize: Finalize,
    pub(super) mode: u32,
    pub(super) started: Instant,
}

impl Disk {
    /// Writes one file entry from `content`, then hands it to the close stage. Parents are
    /// made as needed. A close failure comes later, through the run's failures.
    pub(crate) fn write_entry(
        &self,
        state: &mut WriterState,
        entry: &Entry,
        content: Content<'_>,
    ) -> Result<(), Error> {
        let Some(open) = self.begin(state, entry)? else {
            // An existing file kept (`Overwrite::Skip`), and counted.
            return Ok(());
        };
        match self.fill(&open, entry, content, &mut state.buf) {
            Ok(bytes) => self.seal(state, open, entry, bytes),
            Err(error) => {
                self.discard(open);
                Err(error)
            }
        }
    }

    /// Starts a file: nothing if the run is cancelled, its parents made (unless they are the
    /// writer's last), then created as [`Disk::open`] does. `None`: an existing file is kept.
    pub(crate) fn begin(
        &self,
        state: &mut WriterState,
        entry: &Entry,
    ) -> Result<Option<OpenFile>, Error> {
        self.ready_for(state, entry)?;
        self.open(entry)
    }

    /// Before a file is made at the entry's path: nothing if the run is cancelled (not
    /// started, so nothing to undo), else its parents made (unless they are the writer's
    /// last).
    pub(super) fn ready_for(&self, state: &mut WriterState, entry: &Entry) -> Result<(), Error> {
        if self.run.cancelled() {
            return Err(cancelled(entry));
        }
        let parent = parent_bytes(&entry.path);
        if state.ready_dir.as_deref() != Some(parent) {
            self.make_parents(entry)?;
            state.ready_dir = Some(parent.to_vec());
        }
        Ok(())
    }

    /// Creates the entry's file (its parents must exist), honouring the overwrite policy.
    /// `None`: an existing file is kept, and counted as skipped.
    ///
    /// Into a staging folder (which a killed run leaves out of place, `stage.rs`) a file is
    /// created under its final name there (`O_EXCL`). Anywhere else it is written under a
    /// temporary name and moved into place after its close succeeded, never over anything
    /// (`Finalize::MoveTo`), so that a kill during its writing leaves nothing under the final
    /// name. See docs/design.md, "What a kill leaves".
    fn open(&self, entry: &Entry) -> Result<Option<OpenFile>, Error> {
        self.mark();
        let started = Instant::now();
        let mode = self.file_mode(entry);
        let dest = &entry.path;
        if entry.replaces {
            return self.open_later_copy(entry, mode, started, false).map(Some);
        }
        if !self.staged {
            // Into a fresh folder nothing is in the way, nor where the plan's check found
            // nothing (the move still never replaces).
            if self.fresh || entry.absent || self.out_dir.kind(dest).is_err() {
                self.note_created(&entry.path);
                let finalize = Finalize::MoveTo(dest.clone());
                return self.open_beside(entry, mode, started, finalize).map(Some);
            }
            return self.open_existing(entry, mode, started);
        }
        let err = match self.out_dir.create_new(dest, mode) {
            Ok(file) => {
                self.note_created(&entry.path);
                return Ok(Some(OpenFile {
                    file,
                    path: dest.clone(),
                    finalize: Finalize::Keep,
                    mode,
                    started,
                }));
            }
            Err(err) => err,
        };
        if err.kind() != io::ErrorKind::AlreadyExists {
            let error = anyhow!(err).context(format!("creating '{}'", self.full(dest).display()));
            return Err(Error::new(&entry.name, ErrorKind::Write, error));
        }
        self.open_existing(entry, mode, started)
    }

    /// Where something is at the entry's path already: the overwrite policy decides.
    fn open_existing(
        &self,
        entry: &Entry,
        mode: u32,
        started: Instant,
    ) -> Result<Option<OpenFile>, Error> {
        let dest = &entry.path;
        let fail = |kind, error: anyhow::Error| Err(Error::new(&entry.name, kind, error));
        let is_dir = self.out_dir.kind(dest).is_ok_and(|k| k == FileKind::Dir);
        match self.policy_for(entry) {
            // (`Update` is resolved into one of the others by `policy_for`.)
            Overwrite::Skip | Overwrite::Update => {
                self.keep(&entry.name);
                Ok(None)
            }
            _ if is_dir => fail(
                ErrorKind::AlreadyExists,
                anyhow!(
                    "a directory is in the way at '{}'",
                    self.full(dest).display()
                ),
            ),
            Overwrite::Refuse => fail(ErrorKind::AlreadyExists, already_exists()),
            // Held under a temporary name until the source's data is verified: the old file
            // stays if it is not.
            Overwrite::Replace if self.holds_replacements() => {
                self.open_later_copy(entry, mode, started, true).map(Some)
            }
            Overwrite::Replace => {
                self.note_created(&entry.path);
                let finalize = Finalize::RenameTo(dest.clone());
                self.open_beside(entry, mode, started, finalize).map(Some)
            }
        }
    }

    /// Creates the entry's file under a temporary name beside its path, to be completed by
    /// `finalize` (a replacement renamed over the old file after a good close; a later copy
    /// moved into place at the end of the run).
    pub(super) fn open_beside(
        &self,
        entry: &Entry,
        mode: u32,
        started: Instant,
        finalize: Finalize,
    ) -> Result<OpenFile, Error> {
        self.mark();
        let temp = self.temp_path(&entry.path);
        let file = self
            .out_dir
            .create_new(&temp, mode)
            .with_context(|| format!("creating '{}'", self.full(&temp).display()))
            .tag(&entry.name, ErrorKind::Write)?;
        Ok(OpenFile {
            file,
            path: temp,
            finalize,
            mode,
            started,
        })
    }

    /// Finishes a filled file: mtime and mode on the open handle (no second open), then the
    /// hand-over to the close stage. On failure the file is removed.
    pub(crate) fn seal(
        &self,
        state: &mut WriterState,
        open: OpenFile,
        entry: &Entry,
        bytes: u64,
    ) -> Result<(), Error> {
        let open = self.dress(open, entry)?;
        let counts = &mut state.counts;
        counts.files += 1;
        counts.bytes += bytes;
        self.run.reporter.file_written();
        self.run.reporter.entry_written(&entry.name);
        self.close_later(state, open, entry);
        Ok(())
    }

    /// Gives a filled file the entry's metadata on its open handle: mtime, owner, extended
    /// attributes, mode. On failure the file is removed.
    pub(super) fn dress(&self, open: OpenFile, entry: &Entry) -> Result<OpenFile, Error> {
        let set = || -> anyhow::Result<()> {
            if let Some(mtime) = entry.mtime {
                open.file.set_modified(mtime).with_context(|| {
                    format!("setting the mtime of '{}'", self.full(&open.path).display())
                })?;
            }
            // The owner before the mode: a change of owner clears setuid and setgid, and so
            // does writing the file without CAP_FSETID (any user but root): they count among
            // the bits the mode may lack, with the umask's, so a file that keeps them
            // (`--keep-setid`, an image) gets its mode again after its data.
            let lacking = self.umask | 0o6000;
            if let Some((uid, gid)) = self.owner_to_give(entry) {
                platform::chown_file(&open.file, uid, gid).with_context(|| {
                    let dest = self.full(&entry.path);
                    format!("giving '{}' the owner {uid}:{gid}", dest.display())
                })?;
            }
            // After the owner (a change of owner clears `security.capability`).
            for (name, value) in &entry.xattrs {
                platform::set_xattr(&open.file, name, value).with_context(|| {
                    let dest = self.full(&entry.path);
                    let name = String::from_utf8_lossy(name);
                    format!(
                        "setting the extended attribute '{name}' of '{}'",
                        dest.display()
                    )
                })?;
            }
            platform::fix_mode(&open.file, open.mode, lacking).with_context(|| {
                format!("setting the mode of '{}'", self.full(&open.path).display())
            })
        };
        if let Err(error) = set() {
            let error = Error::new(&entry.name, ErrorKind::Metadata, error);
            self.discard(open);
            return Err(error);
        }
        Ok(open)
    }

    /// Hands a finished file to the close stage.
    pub(super) fn close_later(&self, state: &mut WriterState, open: OpenFile, entry: &Entry) {
        state.counts.write_nanos += nanos(open.started.elapsed());
        let job = CloseJob {
            file: open.file,
            path: open.path,
            name: entry.name.clone().into(),
            finalize: open.finalize,
        };
        let mine = state.counts;
        self.close
            .hand_over(&mut state.close, job, || self.mean_write(&mine));
        self.publish_now_and_then(state);
    }

    /// Adds a writer's counts to the engine's every [`PUBLISH_EVERY`] files.
    pub(super) fn publish_now_and_then(&self, state: &mut WriterState) {
        if state.counts.files >= PUBLISH_EVERY {
            self.publish(&mut state.counts);
        }
    }

    /// Gives up on a file: closed and removed, so nothing half-written stays under any name.
    pub(crate) fn discard(&self, open: OpenFile) {
        self.write_nanos
            .fetch_add(nanos(open.started.elapsed()), Ordering::Relaxed);
        drop(open.file);
        let _ = self.out_dir.remove_file(&open.path);
    }

    /// Hands the closes a writer still holds to the close stage, and adds its counts to the
    /// engine's.
    pub(crate) fn flush_state(&self, state: &mut WriterState) {
        self.publish(&mut state.counts);
        self.close.flush(&mut state.close);
    }

    fn publish(&self, counts: &mut Counts) {
        let Counts {
            files,
            bytes,
            write_nanos,
        } = std::mem::take(counts);
        self.files.fetch_add(files, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.write_nanos.fetch_add(write_nanos, Ordering::Relaxed);
    }

    /// Copies the content into the file, checked against the declared size.
    pub(super) fn fill(
        &self,
        open: &OpenFile,
        entry: &Entry,
        content: Content<'_>,
        buf: &mut Vec<u8>,
    ) -> Result<u64, Error> {
        let path = &open.path;
        let mut file = &open.file;
        let mut out = ChunkWriter {
            file: &mut file,
            sparse: entry.sparse,
            pending_hole: false,
        };
        // A source file is copied in the kernel where it can be; else it is pumped as the
        // rest are.
        let mut copied = false;
        if let Content::File(src) = content {
            copied = self
                .copier
                .copy(src, out.file, entry.size, entry.sparse)
                .with_context(|| format!("copying into '{}'", self.full(path).display()))
                .tag(&entry.name, ErrorKind::Write)?;
        }
        let written = if copied {
            self.run.reporter.bytes_written(entry.size);
            entry.size
        } else {
            let reporter = &self.run.reporter;
            let mut sink = |piece: Piece<'_>| {
                let n = match piece {
                    Piece::Data(data) => out.write(data).map(|()| data.len() as u64),
                    Piece::Hole(n) => out.skip(n).map(|()| n),
                }
                .with_context(|| format!("writing '{}'", self.full(path).display()))?;
                reporter.bytes_written(n);
                Ok(())
            };
            pump(entry, content, buf, &|| self.run.cancelled(), &mut sink)?
        };
        out.finish(written)
            .with_context(|| format!("writing '{}'", self.full(path).display()))
            .tag(&entry.name, ErrorKind::Write)?;
        Ok(written)
    }
}

/// The bytes of a validated relative path's parent: what comes before its last separator
/// (`Path::parent` parses every component, and this runs for every file).
pub(super) fn parent_bytes(path: &Path) -> &[u8] {
    let bytes = path.as_os_str().as_encoded_bytes();
    let last = bytes
        .iter()
        .rposition(|&b| b.is_ascii() && std::path::is_separator(char::from(b)));
    last.map_or(&[], |i| &bytes[..i])
}

/// Writes a file's content; for a sparse entry, blocks of zeros become holes (skipped with a
/// seek, the file's length set at the end), as GNU tar restores them.
pub(crate) struct ChunkWriter<'f, 'a> {
    file: &'f mut &'a File,
    sparse: bool,
    /// The last bytes were skipped, so the file must be extended to its length at the end.
    pending_hole: bool,
}

impl ChunkWriter<'_, '_> {
    const BLOCK: usize = 4096;

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if !self.sparse {
            return self.file.write_all(data);
        }
        let mut rest = data;
        while !rest.is_empty() {
            let zeros = rest
                .chunks(Self::BLOCK)
                .take_while(|b| b.iter().all(|&x| x == 0))
                .map(<[u8]>::len)
                .sum::<usize>();
            if zeros > 0 {
                self.file.seek(SeekFrom::Current(zeros as i64))?;
                self.pending_hole = true;
                rest = &rest[zeros..];
                continue;
            }
            let data_len = rest
                .chunks(Self::BLOCK)
                .take_while(|b| b.iter().any(|&x| x != 0))
                .map(<[u8]>::len)
                .sum::<usize>();
            self.file.write_all(&rest[..data_len])?;
            self.pending_hole = false;
            rest = &rest[data_len..];
        }
        Ok(())
    }

    /// Leaves a hole of `len` bytes: the file's length is set at the end.
    fn skip(&mut self, len: u64) -> io::Result<()> {
        let len = i64::try_from(len).map_err(|_| io::Error::other("a hole past 2^63 bytes"))?;
        self.file.seek(SeekFrom::Current(len))?;
        self.pending_hole = true;
        Ok(())
    }

    fn finish(self, len: u64) -> io::Result<()> {
        if self.pending_hole {
            self.file.set_len(len)?;
        }
        Ok(())
    }
}
