//! What the end of a run makes: symlinks and hard links (after every file is closed, so nothing
//! is ever written through a link), and directory modes and mtimes (deepest first, once their
//! content is complete).

use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use anyhow::Context;

use super::disk::Disk;
use crate::engine::kept::already_exists;
use crate::error::{Error, ErrorKind, Tag};
use crate::options::Overwrite;
use crate::plan::{Entry, Special};
use crate::platform::{self, FileKind};

impl Disk {
    /// Creates a link at the entry's path with `make` (given a path relative to the output
    /// folder), honouring the overwrite policy (a replacement is made under a temporary name
    /// and renamed over). False: skipped.
    fn place_link(
        &self,
        entry: &Entry,
        make: impl Fn(&Path) -> io::Result<()>,
    ) -> Result<bool, Error> {
        let err = match make(&entry.path) {
            Ok(()) => return Ok(true),
            Err(err) => err,
        };
        let dest = self.full(&entry.path);
        if err.kind() != io::ErrorKind::AlreadyExists {
            return Err(err)
                .with_context(|| format!("creating '{}'", dest.display()))
                .tag(&entry.name, ErrorKind::Link);
        }
        // A later link at a path this run wrote takes its place, as tar's last copy does.
        let policy = if entry.replaces && self.ours(&entry.path) {
            Overwrite::Replace
        } else {
            self.policy_for(entry)
        };
        match policy {
            Overwrite::Refuse => Err(already_exists()).tag(&entry.name, ErrorKind::AlreadyExists),
            // (`Update` is resolved into one of the others by `policy_for`.)
            Overwrite::Skip | Overwrite::Update => {
                // Counted here; `Ok(false)` counts the other skips (a device not made).
                self.kept.note(&entry.name);
                Ok(false)
            }
            Overwrite::Replace => {
                let temp = self.temp_path(&entry.path);
                make(&temp)
                    .with_context(|| format!("creating '{}'", self.full(&temp).display()))
                    .tag(&entry.name, ErrorKind::Link)?;
                self.out_dir
                    .rename(&temp, &entry.path)
                    .map_err(|e| {
                        let _ = self.out_dir.remove_file(&temp);
                        anyhow::Error::new(e).context(format!("replacing '{}'", dest.display()))
                    })
                    .tag(&entry.name, ErrorKind::Link)?;
                Ok(true)
            }
        }
    }

    /// False: skipped.
    pub(super) fn create_symlink(&self, entry: &Entry, target: &Path) -> Result<bool, Error> {
        if !self.place_link(entry, |at| self.out_dir.symlink(target, at))? {
            return Ok(false);
        }
        self.give_owner(entry)?;
        self.give_xattrs(entry)?;
        if let Some(mtime) = entry.mtime {
            if !self.symlink_times {
                self.symlink_times_left.fetch_add(1, Ordering::Relaxed);
                return Ok(true);
            }
            self.out_dir
                .set_metadata(&entry.path, None, Some(mtime))
                .with_context(|| {
                    let dest = self.full(&entry.path);
                    format!("setting the mtime of symlink '{}'", dest.display())
                })
                .tag(&entry.name, ErrorKind::Metadata)?;
        }
        Ok(true)
    }

    /// A hard link may only name a regular file under the output folder, reached through
    /// directories this run has checked are real (and never through a symlink: every
    /// operation under the output folder refuses one on the way). False: skipped.
    pub(super) fn create_hardlink(&self, entry: &Entry, target: &Path) -> Result<bool, Error> {
        let refuse = || {
            Error::new(
                &entry.name,
                ErrorKind::Refused,
                anyhow::anyhow!(
                    "refused: hard link target '{}' is not a regular file written into the output folder",
                    target.display()
                ),
            )
        };
        let through_real_dirs = match target.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => self.dirs.lock().ready.contains(parent),
            None => true,
        };
        if !through_real_dirs || self.out_dir.kind(target).ok() != Some(FileKind::File) {
            return Err(refuse());
        }
        self.place_link(entry, |at| self.out_dir.hard_link(target, at))
    }

    /// A device node or FIFO, with its mode and mtime. False: skipped.
    pub(super) fn create_special(
        &self,
        entry: &Entry,
        kind: Special,
        device: (u32, u32),
    ) -> Result<bool, Error> {
        let mode = self.run.opts.mode_bits(entry.mode.unwrap_or(0o644));
        let (major, minor) = device;
        let node = match kind {
            Special::Fifo => platform::Node::Fifo,
            Special::CharDevice => platform::Node::CharDevice { major, minor },
            Special::BlockDevice => platform::Node::BlockDevice { major, minor },
        };
        if !self.place_link(entry, |at| self.out_dir.make_special(at, node, mode))? {
            return Ok(false);
        }
        // Made with the umask applied: the owner, then the archived mode (a change of owner
        // clears setuid and setgid), and the mtime, set now.
        self.give_owner(entry)?;
        self.give_xattrs(entry)?;
        self.set_metadata(&entry.path, Some(mode), entry.mtime)
            .tag(&entry.name, ErrorKind::Metadata)?;
        Ok(true)
    }

    /// Gives what is at the entry's path (a link itself, a folder, a device) the owner it
    /// records (`Options::same_owner`), unless it has it already: this process's own ids, in
    /// an output folder whose new entries take them.
    pub(super) fn give_owner(&self, entry: &Entry) -> Result<(), Error> {
        let Some((uid, gid)) = self.owner_to_give(entry) else {
            return Ok(());
        };
        self.out_dir
            .lchown(&entry.path, uid, gid)
            .with_context(|| {
                let dest = self.full(&entry.path);
                format!("giving '{}' the owner {uid}:{gid}", dest.display())
            })
            .tag(&entry.name, ErrorKind::Metadata)
    }

    /// Gives what is at the entry's path the extended attributes it records, after its owner
    /// (a change of owner clears `security.capability`). A symlink takes no `user.` attribute
    /// on Linux: those are left out for one.
    pub(super) fn give_xattrs(&self, entry: &Entry) -> Result<(), Error> {
        let symlink = matches!(entry.kind, crate::plan::EntryKind::Symlink { .. });
        for (name, value) in &entry.xattrs {
            if symlink && name.starts_with(b"user.") {
                continue;
            }
            self.out_dir
                .set_xattr(&entry.path, name, value)
                .with_context(|| {
                    let dest = self.full(&entry.path);
                    let name = String::from_utf8_lossy(name);
                    format!(
                        "setting the extended attribute '{name}' of '{}'",
                        dest.display()
                    )
                })
                .tag(&entry.name, ErrorKind::Metadata)?;
        }
        Ok(())
    }

    pub(super) fn apply_dir_metadata(&self, entry: &Entry) -> Result<(), Error> {
        // A directory this run made already has the usual mode (0o777 less the umask): most
        // do, and a chmod per directory is worth saving.
        let made_with = |mode: u32| {
            self.plain_mkdir
                && mode == 0o777 & !self.umask
                && self.dirs.lock().made_here.contains(&entry.path)
        };
        let mode = entry
            .mode
            .map(|m| self.run.opts.mode_bits(m))
            .filter(|&m| !made_with(m));
        // The owner first: a change of owner may clear a folder's setgid bit.
        self.give_owner(entry)?;
        self.give_xattrs(entry)?;
        self.set_metadata(&entry.path, mode, entry.mtime)
            .tag(&entry.name, ErrorKind::Metadata)
    }

    /// Sets a mode and an mtime on an existing path under the output folder, never following
    /// a symlink (directories, symlinks, and files a mirror updates in place).
    pub(crate) fn set_metadata(
        &self,
        rel: &Path,
        mode: Option<u32>,
        mtime: Option<SystemTime>,
    ) -> anyhow::Result<()> {
        let what = match (mode, mtime) {
            (Some(_), Some(_)) => "the mode and mtime",
            (Some(_), None) => "the mode",
            (None, Some(_)) => "the mtime",
            (None, None) => return Ok(()),
        };
        self.out_dir
            .set_metadata(rel, mode, mtime)
            .with_context(|| format!("setting {what} of '{}'", self.full(rel).display()))
    }
}
