//! A folder as a side of a mirror: listed with `read_dir` and one `lstat` per entry (the
//! target's `stat` with `-L`), its files copied by the engine's writers straight from their
//! handles (a reflink or `copy_file_range` where the filesystems allow), and, as a destination,
//! changed in place through the folder held open: deletions (a symlink removed as a link, never
//! followed), renames of case, modes and mtimes. fastwrite's own working files in a destination
//! (a run's marker, a staging folder, temporary names) are no part of its tree.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use anyhow::anyhow;
use rayon::prelude::*;

use super::leftovers::is_run_mark;
use crate::engine::pump::Content;
use crate::engine::target::Engine;
use crate::engine::tree::{Is, Node, Tree};
use crate::engine::writer::Writer;
use crate::error::{Error, ErrorKind, Setting};
use crate::options::{MirrorOptions, Options};
use crate::plan::Entry;
use crate::platform::{self, OutDir};

pub(crate) struct Folder {
    root: PathBuf,
    /// As a source: its root's metadata.
    meta: Option<fs::Metadata>,
    /// As a destination that exists: the folder held open, for what changes in place.
    held: Option<OutDir>,
    empty: bool,
    destination: bool,
    /// `-L`: a source's symlinks are followed.
    follow: bool,
}

impl Folder {
    pub(crate) fn open(
        root: &Path,
        destination: bool,
        opts: &MirrorOptions,
    ) -> anyhow::Result<Folder> {
        let (meta, empty) = match destination {
            // (A folder that is not there yet is not read.)
            true => (
                None,
                !check_destination(root)?
                    || fs::read_dir(root).map_or(true, |mut d| d.next().is_none()),
            ),
            false => (Some(check_source(root, opts)?), false),
        };
        let held = match destination && !empty {
            true => Some(OutDir::open(root).map_err(|e| {
                let why =
                    anyhow!(e).context(format!("cannot open destination '{}'", root.display()));
                Error::named(root, ErrorKind::Directory, why)
            })?),
            false => None,
        };
        Ok(Folder {
            root: root.to_path_buf(),
            meta,
            held,
            empty,
            destination,
            follow: opts.copy_links && !destination,
        })
    }

    fn held(&self) -> io::Result<&OutDir> {
        self.held
            .as_ref()
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    /// A node for the entry `name` of `dir`, from what `lstat` (or, following, `stat`) says.
    fn node(&self, path: &Path, name: OsString, meta: fs::Metadata) -> anyhow::Result<Node> {
        let meta = if self.follow && meta.file_type().is_symlink() {
            fs::metadata(path).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => {
                    anyhow!("symlink '{}' points to nothing", path.display())
                }
                _ => anyhow!(e).context(format!("following symlink '{}'", path.display())),
            })?
        } else {
            meta
        };
        let t = meta.file_type();
        let is = match () {
            _ if t.is_dir() => Is::Dir,
            _ if t.is_file() => Is::File,
            _ if t.is_symlink() => Is::Symlink,
            _ => Is::Other,
        };
        let mut node = Node::new(name, is);
        if is == Is::Symlink {
            let target = fs::read_link(path)
                .map_err(|e| anyhow!(e).context(format!("reading symlink '{}'", path.display())))?;
            // A symlink's size is its target's length, as a store's object of it holds.
            node.size = target.as_os_str().len() as u64;
            node.link = Some(target);
        } else if is == Is::File {
            node.size = meta.len();
        }
        node.mtime = meta.modified().ok();
        node.mode = Some(platform::mode_of(&meta));
        node.meta = Some(meta);
        Ok(node)
    }
}

/// Whether `name` is one of fastwrite's own working files in a destination (`top`: in its root).
fn working_name(name: &std::ffi::OsStr, top: bool) -> bool {
    (top && is_run_mark(name))
        || name
            .to_str()
            .is_some_and(|n| n.starts_with('.') && n.contains(".fastwrite-"))
}

impl Tree for Folder {
    fn named(&self) -> &Path {
        &self.root
    }

    fn is_empty(&self) -> bool {
        self.empty
    }

    fn root(&self) -> Node {
        let mut root = Node::new(OsString::new(), Is::Dir);
        if let Some(meta) = &self.meta {
            root.mode = Some(platform::mode_of(meta));
            root.mtime = meta.modified().ok();
            root.meta = Some(meta.clone());
        }
        root
    }

    fn list(
        &self,
        dir: &Path,
        failed: &mut Vec<(OsString, anyhow::Error)>,
    ) -> anyhow::Result<Vec<Node>> {
        let path = self.root.join(dir);
        let entries = fs::read_dir(&path).and_then(|rd| rd.collect::<io::Result<Vec<_>>>());
        let what = if self.destination {
            "destination directory"
        } else {
            "directory"
        };
        let entries = entries
            .map_err(|e| anyhow!(e).context(format!("reading {what} '{}'", path.display())))?;
        let mut nodes = Vec::with_capacity(entries.len());
        for e in entries {
            let name = e.file_name();
            if self.destination && working_name(&name, dir.as_os_str().is_empty()) {
                continue;
            }
            let path = e.path();
            let node = e
                .metadata()
                .map_err(|e| match e.kind() {
                    io::ErrorKind::NotFound => anyhow!("'{}' vanished", path.display()),
                    _ => anyhow!(e).context(format!("reading '{}'", path.display())),
                })
                .and_then(|meta| self.node(&path, name.clone(), meta));
            match node {
                Ok(node) => nodes.push(node),
                // What vanished from a destination is simply not there.
                Err(_) if self.destination && !path.exists() => {}
                Err(error) => failed.push((name, error)),
            }
        }
        Ok(nodes)
    }

    fn local(&self, rel: &Path) -> Option<PathBuf> {
        Some(self.root.join(rel))
    }

    fn copy_now(&self, engine: &Engine, files: &[Entry]) -> bool {
        let mut writer = Writer::new(engine);
        for entry in files {
            self.copy(engine, &mut writer, entry);
        }
        true
    }

    fn deliver(
        &self,
        engine: &Engine,
        writers: &rayon::ThreadPool,
        entries: Vec<Entry>,
        _: &Options,
    ) {
        writers.install(|| {
            entries.par_iter().for_each_init(
                || Writer::new(engine),
                |writer, entry| self.copy(engine, writer, entry),
            );
        });
    }

    fn delete(&self, paths: &[(PathBuf, bool)], _: &MirrorOptions) -> (u64, Vec<Error>) {
        let deleted = AtomicU64::new(0);
        let failures = paths
            .par_iter()
            .filter_map(|(rel, dir)| {
                // Symlinks are removed as links, never followed, on the way or inside.
                let removed = self.held().and_then(|held| {
                    if *dir {
                        held.remove_tree(rel)
                    } else {
                        held.remove_file(rel)
                    }
                });
                match removed {
                    Ok(()) => {
                        deleted.fetch_add(1, Ordering::Relaxed);
                        None
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                    Err(e) => Some(Error::new(
                        rel,
                        ErrorKind::Delete,
                        anyhow!(e).context(format!("deleting '{}'", self.root.join(rel).display())),
                    )),
                }
            })
            .collect();
        (deleted.into_inner(), failures)
    }

    fn update(
        &self,
        rel: &Path,
        mode: Option<u32>,
        mtime: Option<SystemTime>,
    ) -> Option<io::Result<()>> {
        Some(
            self.held()
                .and_then(|held| held.set_metadata(rel, mode, mtime)),
        )
    }

    /// Through a temporary name: a direct rename is a no-op on some systems (Wine, some network
    /// file systems), which see one name.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let held = self.held()?;
        let mut temp = to.as_os_str().to_owned();
        temp.push(format!(".fastwrite-case-{}", std::process::id()));
        let temp = PathBuf::from(temp);
        held.rename(from, &temp)?;
        held.rename(&temp, to).inspect_err(|_| {
            let _ = held.rename(&temp, from);
        })
    }
}

impl Folder {
    /// Copies one file with a writer of the engine; failures are recorded there.
    fn copy(&self, engine: &Engine, writer: &mut Writer<'_>, entry: &Entry) {
        if let Err(error) = engine.run().within_limit(entry) {
            if !error.is_cancelled() {
                engine.run().record(error);
            }
            return;
        }
        let path = self.root.join(&entry.path);
        match platform::open_source(&path, self.follow) {
            Ok(file) => {
                writer.write(entry, Content::File(&file));
            }
            Err(e) => {
                let why = match e.kind() {
                    io::ErrorKind::NotFound => {
                        anyhow!("'{}' vanished before it could be copied", path.display())
                    }
                    _ => anyhow!(e).context(format!("opening '{}'", path.display())),
                };
                engine
                    .run()
                    .record(Error::new(&entry.name, ErrorKind::Source, why));
            }
        }
    }
}

/// A destination that exists must be a folder (a symlink to one, not to nothing): whether it
/// exists.
fn check_destination(dst: &Path) -> anyhow::Result<bool> {
    let destination = |why: anyhow::Error| Error::named(dst, ErrorKind::Directory, why);
    match fs::metadata(dst) {
        Ok(m) if m.is_dir() => Ok(true),
        Ok(_) => {
            let not = io::Error::from(io::ErrorKind::NotADirectory);
            let why = format!(
                "destination '{}' exists and is not a directory",
                dst.display()
            );
            Err(destination(anyhow!(not).context(why)).into())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => match dst.symlink_metadata() {
            Ok(_) => {
                let why = format!("destination '{}' is a symlink to nothing", dst.display());
                Err(destination(anyhow!(e).context(why)).into())
            }
            Err(_) => Ok(false),
        },
        Err(e) => {
            let why = format!("cannot read destination '{}'", dst.display());
            Err(destination(anyhow!(e).context(why)).into())
        }
    }
}

/// The source must be a readable directory (with `-H`, on a platform that tells files' identities): its metadata.
fn check_source(src: &Path, opts: &MirrorOptions) -> anyhow::Result<fs::Metadata> {
    let source = |why: anyhow::Error| Error::named(src, ErrorKind::Source, why);
    let src_meta = fs::metadata(src).map_err(|e| {
        source(match e.kind() {
            io::ErrorKind::NotFound => {
                anyhow!(e).context(format!("source '{}' does not exist", src.display()))
            }
            _ => anyhow!(e).context(format!("cannot read source '{}'", src.display())),
        })
    })?;
    if !src_meta.is_dir() {
        let not = io::Error::from(io::ErrorKind::NotADirectory);
        let why = anyhow!(not).context(format!("source '{}' is not a directory", src.display()));
        return Err(source(why).into());
    }
    // A source that cannot be listed gives nothing to copy: said now, before the destination
    // is made (an unreadable directory deeper down fails alone, in the walk).
    fs::read_dir(src).map_err(|e| {
        source(anyhow!(e).context(format!("cannot read source '{}'", src.display())))
    })?;
    if opts.hard_links && platform::file_identity(&src_meta).is_none() {
        let why = anyhow!(
            "{} is not supported on this platform (no file identities)",
            Setting::HardLinks
        );
        return Err(Error::named(src, ErrorKind::Unsupported, why).into());
    }
    Ok(src_meta)
}
