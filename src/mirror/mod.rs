//! `mirror`: makes a destination an exact copy of a source's contents, incrementally, each a
//! folder or a store's prefix, on the same write stage, close pool and report as an
//! extraction.
//!
//! A run goes one way, the same for every pair of sides (`engine/tree.rs`: a folder or a
//! prefix, each beside its target):
//! 1. The sides are checked before anything is touched: a source folder must be a directory,
//!    and neither folder may contain the other (`nested.rs`: a copy into itself never ends; a
//!    `--delete` of a folder holding the source would eat it).
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
mod nested;
mod walk;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::anyhow;

use crate::engine::tree::{Node, Tree};
use crate::engine::{self, Engine};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::{MirrorOptions, Options, Overwrite};
use crate::patterns::{Patterns, Slash};
use crate::place::Place;
use crate::plan::Plan;
use crate::report::{MirrorCounts, Report, RunError};
use crate::sync::Unpoisoned;
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
    refuse(&to, &from, opts, mopts)?;
    let exclude = Patterns::new(&mopts.excludes, Setting::Exclude.name(), Slash::Stops)?;
    // The two sides are read at once: one may be a few round trips away.
    let (source, destination) = std::thread::scope(|scope| {
        let destination = scope.spawn(|| engine::tree(&to, true, (opts, mopts)));
        let source = engine::tree(&from, false, (opts, mopts));
        let destination = destination
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the destination's listing panicked")));
        (source, destination)
    });
    let (source, destination) = (source?, destination?);
    if let (Some(a), Some(b)) = (
        source.local(Path::new("")),
        destination.local(Path::new("")),
    ) {
        nested::refuse_nested(&a, &b)?;
    }
    let sides = Sides {
        src: source.as_ref(),
        dst: destination.as_ref(),
        exclude: &exclude,
        opts,
        mopts,
        root: source.root(),
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
        report.warnings.extend(source.warnings());
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
        engine.prepare_planned(writers, &mut plan, !found.streamed);
        let files = plan.entries;
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

/// Refuses, before anything is touched, what the destination cannot hold.
fn refuse(to: &Place, from: &Place, opts: &Options, mopts: &MirrorOptions) -> anyhow::Result<()> {
    to.refuse_what_it_cannot(opts)?;
    let bucket = [from, to].into_iter().find(|p| !p.can().change_in_place);
    if let Some(bucket) = bucket.filter(|_| mopts.hard_links) {
        let why = anyhow!(
            "'{}': {} keeps hard links as links, and a bucket has none: refused (without it, each is copied)",
            bucket.named().display(),
            Setting::HardLinks
        );
        return Err(Error::named(bucket.named(), ErrorKind::Unsupported, why).into());
    }
    Ok(())
}
