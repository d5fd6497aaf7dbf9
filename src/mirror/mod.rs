//! `mirror`: makes a destination an exact copy of a source's contents, incrementally, each a
//! folder or a store's prefix, on the same write stage, close pool and report as an
//! extraction.
//!
//! A run goes one way, the same for every pair of sides (`tree.rs`):
//! 1. The sides are checked before anything is touched: a source folder must be a directory,
//!    and neither folder may contain the other (a copy into itself never ends; a `--delete` of
//!    a folder holding the source would eat it).
//! 2. One parallel walk over both sides (`walk.rs`) decides per path: copy, replace, update
//!    mode or mtime in place, link, delete, or leave alone, by one comparison
//!    (`compare.rs`: rsync's quick check between folders, `aws s3 sync`'s with a prefix,
//!    `--checksum` the content).
//! 3. Renames of case and deletions (`--delete`, or a folder standing where the source has a
//!    file), then the write stage: into a folder each file is copied by reflink,
//!    `copy_file_range` or a buffer, under a temporary name and renamed into place where it
//!    replaces something, so no reader ever sees half a file and an interrupted run leaves the
//!    old one intact; into a prefix each is an upload, or between prefixes of one store a
//!    server-side copy. Every handle is closed by the close pool like any other.
//! 4. Links, then folder modes and mtimes, deepest first; the destination's root last.
//!
//! Ownership is not copied (the copy belongs to whoever runs it); permission bits are, setuid
//! and setgid included, as `cp -a` and `rsync -a` do for a tree one owns.

mod compare;
mod folder;
#[cfg(feature = "s3")]
mod prefix;
mod tree;
mod walk;

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, anyhow, bail};

use crate::engine::{self, Engine};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::{MirrorOptions, Options, Overwrite};
use crate::patterns::{Patterns, Slash};
use crate::place::Place;
use crate::plan::Plan;
use crate::platform;
use crate::report::{MirrorCounts, Report, RunError};
use crate::sync::Unpoisoned;
use tree::{Is, Node, Tree};
use walk::{Action, Found, Walk};

/// Makes `dst` an exact copy of the contents of `src`, like `rsync -a src/ dst/`: files, modes,
/// mtimes, symlinks, empty directories; a second run copies only what changed. With
/// `mopts.dry_run`, changes nothing and returns what it would do in the report's
/// [`MirrorCounts::actions`]. With cargo feature `s3`, either may be a bucket prefix,
/// `s3://BUCKET/PREFIX`: from a bucket into a folder the metadata's mtimes and modes are
/// restored; between buckets objects are copied server-side (docs/object-storage.md).
///
/// `Ok` when every path was done. [`RunError::Start`] means nothing was done: `src` is missing
/// ([`ErrorKind::Source`], its OS error kept) or not a directory, `dst` is not a directory
/// ([`ErrorKind::Directory`]), one lies inside the other ([`ErrorKind::Invalid`]), or an
/// exclude pattern is invalid. [`RunError::Failed`] carries the report, with every path that
/// failed in its [`failures`](Report::failures).
///
/// ```no_run
/// use fastwrite::{MirrorOptions, Options};
/// let mopts = MirrorOptions { delete: true, ..MirrorOptions::default() };
/// let report = fastwrite::mirror("src".as_ref(), "backup".as_ref(), &Options::default(), &mopts)?;
/// println!("{} files copied", report.files);
/// # Ok::<(), fastwrite::RunError>(())
/// ```
pub fn mirror(
    src: &Path,
    dst: &Path,
    opts: &Options,
    mopts: &MirrorOptions,
) -> Result<Report, RunError> {
    let start = Instant::now();
    let mut report = mirror_any(src, dst, opts, mopts)
        .map_err(|e| RunError::Start(Error::start(src, ErrorKind::Source, e)))?;
    report.wall = start.elapsed();
    RunError::check(report)
}

/// [`mirror`], with its start's failures as they come.
fn mirror_any(
    src: &Path,
    dst: &Path,
    opts: &Options,
    mopts: &MirrorOptions,
) -> anyhow::Result<Report> {
    let (from, to) = (
        Place::side(src, "source")?,
        Place::side(dst, "destination")?,
    );
    let root = check(&from, &to, opts, mopts)?;
    let exclude = Patterns::new(&mopts.excludes, Setting::Exclude.name(), Slash::Stops)?;
    // The two sides are read at once: one may be a few round trips away.
    let (source, destination) = std::thread::scope(|scope| {
        let destination = scope.spawn(|| tree::open(&to, true, mopts));
        let source = tree::open(&from, false, mopts);
        let destination = destination
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the destination's listing panicked")));
        (source, destination)
    });
    let (source, destination) = (source?, destination?);
    let sides = Sides {
        src: source.as_ref(),
        dst: destination.as_ref(),
        exclude: &exclude,
        opts,
        mopts,
        root,
    };
    if mopts.dry_run {
        let mut found = sides.walk(None, &engine::writer_pool(opts)?);
        let actions = found.actions.iter().filter_map(Action::describe).collect();
        let mut report = Report {
            mirror: Some(MirrorCounts {
                actions,
                ..MirrorCounts::default()
            }),
            ..Report::default()
        };
        add_found(&mut report, &mut found);
        return Ok(report);
    }
    // A mirror replaces what differs.
    let replace = Options {
        overwrite: Overwrite::Replace,
        ..opts.clone()
    };
    // Into a new or empty folder staged as any run: a kill leaves nothing under a final name,
    // and `--atomic` puts the whole tree in place or nothing.
    engine::staged(&to, &replace, |dest| {
        let local = source.local(Path::new(""));
        let (mut report, (mut found, counts)) =
            engine::run(dest, local.as_deref(), &replace, |engine, writers| {
                let mut found = sides.walk(Some(engine), writers);
                let counts = sides.apply(&mut found, engine, writers);
                (found, counts)
            })?;
        report.files += counts.files;
        report.bytes += counts.bytes;
        if let Some(said) = source.said() {
            report.writers_why = format!("{}; {said}", report.writers_why);
        }
        report.mirror = Some(MirrorCounts {
            updated: counts.updated,
            deleted: counts.deleted,
            ..MirrorCounts::default()
        });
        add_found(&mut report, &mut found);
        Ok(report)
    })
}

/// The two sides of a run, and what it was asked.
struct Sides<'a> {
    src: &'a dyn Tree,
    dst: &'a dyn Tree,
    exclude: &'a Patterns,
    opts: &'a Options,
    mopts: &'a MirrorOptions,
    /// The source's root.
    root: Node,
}

/// What [`Sides::apply`] did beside the engine's writes.
#[derive(Default)]
struct Counts {
    /// Copied server-side.
    files: u64,
    bytes: u64,
    updated: u64,
    deleted: u64,
}

impl Sides<'_> {
    /// The walk, on the writers' pool (copying into `engine` as it goes where the destination
    /// is empty), and what it leaves to settle: hard links, what only a look at the source
    /// can tell, folders a prefix needs no marker for. Its actions in path order.
    fn walk(&self, engine: Option<&Engine>, writers: &rayon::ThreadPool) -> Found {
        let mut walk = Walk::new(
            (self.src, self.dst),
            self.mopts,
            self.exclude,
            &self.opts.cancel,
        );
        if self.dst.is_empty() {
            walk.stream = engine;
        }
        if let Some(engine) = walk.stream {
            engine.run().reporter().planned(0, 0);
        }
        writers.install(|| walk.run(self.root.clone()));
        let mut found = walk.found.into_inner().unpoisoned();
        found.failures.extend(self.src.refused());
        if let Some(src) = self.src.local(Path::new("")) {
            walk::settle_links(&mut found, &src);
        }
        self.settle_looks(&mut found);
        if self.dst.marks_folders() && !self.opts.folder_markers {
            // A folder that holds something needs no marker.
            let mut filled = HashSet::new();
            let written = found
                .actions
                .iter()
                .filter(|a| !matches!(a, Action::Dir { .. }));
            for path in written
                .filter_map(|a| a.path().parent())
                .chain(found.filled.iter().map(PathBuf::as_path))
            {
                for dir in path.ancestors() {
                    if !filled.insert(dir.to_path_buf()) {
                        break;
                    }
                }
            }
            found
                .actions
                .retain(|a| !matches!(a, Action::Dir { .. }) || !filled.contains(a.path()));
        }
        found.actions.sort_by(|a, b| a.path().cmp(b.path()));
        found
    }

    /// What only a look at the source could tell (a prefix's recorded mtimes and modes): each
    /// same-sized object decided, each folder's marker's metadata given to its folder.
    fn settle_looks(&self, found: &mut Found) {
        let pending = std::mem::take(&mut found.pending);
        let marked = std::mem::take(&mut found.marked);
        let mut nodes: Vec<(PathBuf, Node)> = pending
            .iter()
            .map(|(p, s, _)| (p.clone(), s.clone()))
            .collect();
        nodes.extend(marked);
        if nodes.is_empty() {
            return;
        }
        self.src.look(&mut nodes);
        let looked: std::collections::HashMap<PathBuf, Node> = nodes.into_iter().collect();
        for action in &mut found.actions {
            if let Action::Dir { entry, .. } = action
                && let Some(node) = looked.get(&entry.path)
            {
                (entry.mode, entry.mtime) = (node.mode, node.mtime);
            }
        }
        for (rel, _, d) in pending {
            let s = &looked[&rel];
            let mut entry = walk::entry_of(&rel, s);
            match compare::looked(s, &d) {
                compare::Verdict::Same => {
                    found.unchanged += 1;
                    found
                        .filled
                        .insert(rel.parent().unwrap_or(Path::new("")).to_path_buf());
                }
                compare::Verdict::Update { mode, mtime } => {
                    (entry.mode, entry.mtime) = (mode, mtime);
                    found.unchanged += 1;
                    found.actions.push(Action::Update { entry });
                }
                _ => found.actions.push(Action::Copy {
                    entry,
                    exists: true,
                }),
            }
        }
    }

    /// Carries out the decided actions (what the walk has not already copied), on the
    /// writers' pool.
    fn apply(&self, found: &mut Found, engine: &Engine, writers: &rayon::ThreadPool) -> Counts {
        let mut counts = Counts::default();
        let mut deletes = Vec::new();
        let mut updates = Vec::new();
        let mut plan = Plan::default();
        for action in std::mem::take(&mut found.actions) {
            match action {
                Action::Rename { from, to } => match self.dst.rename(&from, &to) {
                    Ok(()) => counts.updated += 1,
                    Err(e) => found.failures.push(Error::new(
                        &to,
                        ErrorKind::Delete,
                        anyhow!(e).context(format!(
                            "renaming '{}' to the source's spelling",
                            self.dst.named().join(&from).display()
                        )),
                    )),
                },
                Action::Delete { path, dir, .. } => deletes.push((path, dir)),
                Action::Update { entry } => updates.push(entry),
                Action::Dir { entry, .. }
                | Action::Copy { entry, .. }
                | Action::Link { entry, .. } => plan.entries.push(entry),
            }
        }
        // Deletions come first: they make way for what replaces them, and free space.
        if !deletes.is_empty() || (self.mopts.delete && self.dst.marks_folders()) {
            let (deleted, failures) = self.dst.delete(&deletes, self.mopts);
            counts.deleted = deleted;
            found.failures.extend(failures);
        }
        if self.dst.marks_folders() {
            engine.every_folder_named();
            for dir in &found.filled {
                engine.kept_as_is(dir);
            }
        }
        writers.install(|| engine.prepare(&mut plan));
        let files = plan.entries;
        if !found.streamed {
            engine
                .run()
                .reporter()
                .planned(files.len() as u64, files.iter().map(|e| e.size).sum());
        }
        match self.dst.copy_from(self.src, &files) {
            Some((copied, bytes, failures)) => {
                (counts.files, counts.bytes) = (copied, bytes);
                found.failures.extend(failures);
            }
            None => self.src.deliver(engine, writers, files, self.opts),
        }
        for entry in updates {
            let mode = entry.mode.map(|m| self.opts.mode_bits(m));
            match self.dst.update(&entry.path, mode, entry.mtime) {
                Some(Ok(())) => counts.updated += 1,
                Some(Err(e)) => {
                    let why = anyhow!(e).context(format!(
                        "setting the metadata of '{}'",
                        self.dst.named().join(&entry.path).display()
                    ));
                    found
                        .failures
                        .push(Error::new(&entry.name, ErrorKind::Metadata, why));
                }
                None => {}
            }
        }
        counts
    }
}

/// Adds what the walk found itself (unreadable sources, warnings, unchanged files).
fn add_found(report: &mut Report, found: &mut Found) {
    report.failures.append(&mut found.failures);
    report.warnings.append(&mut found.warnings);
    report.skipped += found.skipped;
    if let Some(m) = &mut report.mirror {
        m.unchanged = found.unchanged;
    }
}

/// Refuses, before anything is touched, a pair of sides that cannot be mirrored; the source
/// root's node.
fn check(from: &Place, to: &Place, opts: &Options, mopts: &MirrorOptions) -> anyhow::Result<Node> {
    to.refuse_what_it_cannot(opts)?;
    let (src, dst) = (from.named(), to.named());
    if mopts.hard_links {
        let bucket = [from, to].into_iter().find(|p| !p.can().change_in_place);
        if let Some(bucket) = bucket {
            let why = anyhow!(
                "'{}': {} keeps hard links as links, and a bucket has none: refused (without it, each is copied)",
                bucket.named().display(),
                Setting::HardLinks
            );
            return Err(Error::named(bucket.named(), ErrorKind::Unsupported, why).into());
        }
    }
    let mut root = Node::new(OsString::new(), Is::Dir);
    if from.store().is_some() {
        if let Some(work) = to.work()
            && fs::metadata(work).is_ok_and(|m| !m.is_dir())
        {
            let not = io::Error::from(io::ErrorKind::NotADirectory);
            let why = anyhow!(not).context(format!(
                "destination '{}' exists and is not a directory",
                dst.display()
            ));
            return Err(Error::named(dst, ErrorKind::Directory, why).into());
        }
        return Ok(root);
    }
    let meta = match to.store() {
        Some(_) => check_source(src)?,
        None => check_roots(src, dst)?,
    };
    if mopts.hard_links && platform::file_identity(&meta).is_none() {
        let why = anyhow!(
            "{} is not supported on this platform (no file identities)",
            Setting::HardLinks
        );
        return Err(Error::named(src, ErrorKind::Unsupported, why).into());
    }
    root.mode = Some(platform::mode_of(&meta));
    root.mtime = meta.modified().ok();
    root.meta = Some(meta);
    Ok(root)
}

/// The source must be a readable directory: its metadata.
fn check_source(src: &Path) -> anyhow::Result<fs::Metadata> {
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
    Ok(src_meta)
}

/// Refuses, before anything is written, a pair of folders that cannot be mirrored. Returns the
/// source root's metadata.
fn check_roots(src: &Path, dst: &Path) -> anyhow::Result<fs::Metadata> {
    // Each refusal is about one folder, with its kind, and keeps the OS error where there is
    // one (a program matches `NotFound`).
    let source = |why: anyhow::Error| Error::named(src, ErrorKind::Source, why);
    let destination = |why: anyhow::Error| Error::named(dst, ErrorKind::Directory, why);
    let both = |why: anyhow::Error| Error::named(dst, ErrorKind::Invalid, why);
    let src_meta = check_source(src)?;
    let src_real = fs::canonicalize(src).map_err(|e| {
        source(anyhow!(e).context(format!("cannot resolve source '{}'", src.display())))
    })?;
    let resolve_dst = |e: io::Error| {
        destination(anyhow!(e).context(format!("cannot resolve destination '{}'", dst.display())))
    };
    let dst_real = match fs::metadata(dst) {
        Ok(m) if m.is_dir() => fs::canonicalize(dst).map_err(resolve_dst)?,
        Ok(_) => {
            let not = io::Error::from(io::ErrorKind::NotADirectory);
            let why = anyhow!(not).context(format!(
                "destination '{}' exists and is not a directory",
                dst.display()
            ));
            return Err(destination(why).into());
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if dst.symlink_metadata().is_ok() {
                let why = anyhow!(e).context(format!(
                    "destination '{}' is a symlink to nothing",
                    dst.display()
                ));
                return Err(destination(why).into());
            }
            resolve_missing(dst).map_err(destination)?
        }
        Err(e) => {
            let why = anyhow!(e).context(format!("cannot read destination '{}'", dst.display()));
            return Err(destination(why).into());
        }
    };
    let refuse = |why: String| Err(both(anyhow!(why)).into());
    if dst_real == src_real {
        return refuse(format!(
            "source '{}' and destination '{}' are the same directory",
            src.display(),
            dst.display()
        ));
    }
    if dst_real.starts_with(&src_real) {
        return refuse(format!(
            "destination '{}' is inside source '{}': the copy would copy itself",
            dst.display(),
            src.display()
        ));
    }
    if src_real.starts_with(&dst_real) {
        return refuse(format!(
            "source '{}' is inside destination '{}': mirroring would overwrite or delete it",
            src.display(),
            dst.display()
        ));
    }
    Ok(src_meta)
}

/// Where a destination that does not exist yet will be: its deepest existing ancestor,
/// resolved, with the rest of the path after it.
fn resolve_missing(dst: &Path) -> anyhow::Result<PathBuf> {
    let abs = std::path::absolute(dst)
        .with_context(|| format!("cannot resolve destination '{}'", dst.display()))?;
    let parts: Vec<Component<'_>> = abs.components().collect();
    for known in (1..=parts.len()).rev() {
        let base: PathBuf = parts[..known].iter().collect();
        let Ok(mut real) = fs::canonicalize(&base) else {
            continue;
        };
        for part in &parts[known..] {
            match part {
                Component::ParentDir => {
                    real.pop();
                }
                Component::Normal(name) => real.push(name),
                _ => {}
            }
        }
        return Ok(real);
    }
    bail!("cannot resolve destination '{}'", dst.display())
}
