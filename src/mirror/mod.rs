//! `mirror`: makes a destination folder an exact copy of a source folder's contents, on the same
//! write stage, close pool and report as an extraction.
//!
//! A run goes one way:
//! 1. The roots are checked before anything is touched: the source must be a directory, and
//!    neither folder may contain the other (a copy into itself never ends; a `--delete` of a
//!    folder holding the source would eat it).
//! 2. One parallel walk over both trees ([`walk`]) decides per path: copy, replace, update mode
//!    or mtime in place, link, delete, or leave alone (rsync's quick check: same size and mtime;
//!    `--checksum` compares contents).
//! 3. Deletions (`--delete`, or a directory standing where the source has a file), then the
//!    write stage: each file copied by reflink, `copy_file_range` or a buffer, written under a
//!    temporary name and renamed into place when it replaces something, so no reader ever sees
//!    half a file and an interrupted run leaves the old one intact. Its handle is closed by the
//!    close pool like any other.
//! 4. Links, then directory modes and mtimes, deepest first; the destination root last.
//!
//! Ownership is not copied (the copy belongs to whoever runs it); permission bits are, setuid
//! and setgid included, as `cp -a` and `rsync -a` do for a tree one owns.

#[cfg(feature = "s3")]
mod bucket;
mod compare;
#[cfg(feature = "s3")]
mod fetched;
#[cfg(feature = "s3")]
mod from_bucket;
mod walk;

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, anyhow, bail};
use rayon::prelude::*;

use crate::engine::{self, Content, Disk, Target, Writer};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::{MirrorOptions, Options};
use crate::place::Place;
use crate::plan::{Entry, EntryKind, Plan};
use crate::platform;
use crate::report::RunError;
use crate::report::{MirrorCounts, Report};

use crate::patterns::{Patterns, Slash};
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
    let from = Place::side(src, "source")?;
    let to = Place::side(dst, "destination")?;
    let (src, dst) = (from.named(), to.named());
    #[cfg(feature = "s3")]
    if let Some(url) = from.store().cloned() {
        if to.store().is_some() {
            return from_bucket::between_buckets(src, url, &to, (opts, mopts));
        }
        if mopts.dry_run {
            return from_bucket::mirror(src, url, &to, (opts, mopts));
        }
        // Staged as any run into a new or empty folder: a kill leaves nothing under a final
        // name, and `--atomic` puts the whole tree in place or nothing.
        return engine::staged(&to, opts, |dest| {
            from_bucket::mirror(src, url, dest, (opts, mopts))
        });
    }
    #[cfg(feature = "s3")]
    if to.store().is_some() {
        let root_meta = check_source(src)?;
        return bucket::mirror(src, &to, root_meta, (opts, mopts));
    }
    let (root_meta, dst_exists) = check_roots(src, dst)?;
    if mopts.hard_links && platform::file_identity(&root_meta).is_none() {
        let why = anyhow!(
            "{} is not supported on this platform (no file identities)",
            Setting::HardLinks
        );
        return Err(Error::named(src, ErrorKind::Unsupported, why).into());
    }
    let exclude = excludes(mopts)?;
    let walk = || Walk::new(src, dst, mopts, &exclude, &opts.cancel);
    let report = if mopts.dry_run {
        let walk = walk();
        engine::writer_pool(opts)?.install(|| walk.run(root_meta, dst_exists));
        let mut found = walked(walk, src);
        let mut report = dry_run(&mut found);
        add_found(&mut report, found);
        report
    } else {
        engine::staged(&to, opts, |dest| {
            mirror_into(src, dest, (opts, mopts), root_meta, dst_exists, walk)
        })?
    };
    Ok(report)
}

/// The mirror itself (not a dry run), into `dst` or, for an atomic run, the folder beside it.
fn mirror_into<'a>(
    src: &Path,
    dest: &Place,
    (opts, mopts): (&Options, &MirrorOptions),
    root_meta: fs::Metadata,
    dst_exists: bool,
    walk: impl Fn() -> Walk<'a>,
) -> anyhow::Result<Report> {
    let dst = dest.named();
    {
        let (mut report, (found, applied)) =
            engine::run_disk(dest, Some(src), opts, |engine, writers| {
                // Into an empty destination nothing needs comparing or deleting first, so each
                // directory's files are copied as soon as it is read: walking overlaps with
                // writing.
                let stream = engine.is_fresh();
                if stream {
                    engine.run().reporter().planned(0, 0);
                }
                let mut walk = walk();
                walk.stream = stream.then_some(engine);
                writers.install(|| walk.run(root_meta, dst_exists));
                let mut found = walked(walk, src);
                let applied =
                    writers.install(|| apply(src, opts, mopts, engine, stream, &mut found));
                (found, applied)
            })?;
        // The root's mode and mtime last: making links and directories at the end of the run
        // changes its mtime.
        if let Some(root) = applied.root
            && let Err(error) = platform::OutDir::open(dest.work().unwrap_or(dst))
                .and_then(|tree| {
                    tree.set_metadata(
                        Path::new(""),
                        root.mode.map(|m| opts.mode_bits(m)),
                        root.mtime,
                    )
                })
                .with_context(|| format!("setting the mode and mtime of '{}'", dst.display()))
        {
            report
                .failures
                .push(Error::new(".", ErrorKind::Metadata, error));
        }
        report.failures.extend(applied.failures);
        report.mirror = Some(MirrorCounts {
            updated: applied.updated,
            deleted: applied.deleted,
            ..MirrorCounts::default()
        });
        add_found(&mut report, found);
        Ok(report)
    }
}

/// What the walk decided, with its links settled and its actions in path order.
/// The patterns of `--exclude`, as every mirror reads them.
fn excludes(mopts: &MirrorOptions) -> anyhow::Result<Patterns> {
    Patterns::new(&mopts.excludes, Setting::Exclude.name(), Slash::Stops)
}

fn walked(walk: Walk<'_>, src: &Path) -> Found {
    let mut found = walk.found.into_inner().unpoisoned();
    walk::settle_links(&mut found, src);
    found.actions.sort_by(|a, b| a.path().cmp(b.path()));
    found
}

/// Adds what the walk found itself (unreadable sources, warnings, unchanged files).
fn add_found(report: &mut Report, mut found: Found) {
    report.failures.append(&mut found.failures);
    report.warnings.append(&mut found.warnings);
    report.skipped += found.skipped;
    if let Some(m) = &mut report.mirror {
        m.unchanged = found.unchanged;
    }
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
/// source root's metadata, and whether the destination exists.
fn check_roots(src: &Path, dst: &Path) -> anyhow::Result<(fs::Metadata, bool)> {
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
    let (dst_real, dst_exists) = match fs::metadata(dst) {
        Ok(m) if m.is_dir() => (fs::canonicalize(dst).map_err(resolve_dst)?, true),
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
            (resolve_missing(dst).map_err(destination)?, false)
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
    Ok((src_meta, dst_exists))
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

/// A dry run: what would be done, one line each, in path order.
fn dry_run(found: &mut Found) -> Report {
    let actions = found.actions.iter().filter_map(Action::describe).collect();
    Report {
        mirror: Some(MirrorCounts {
            actions,
            ..MirrorCounts::default()
        }),
        ..Report::default()
    }
}

/// Copies one file of the source with a writer of the engine; failures are recorded there.
pub(crate) fn copy_file(
    engine: &Disk,
    writer: &mut Writer<'_>,
    src: &Path,
    entry: &Entry,
    follow: bool,
) {
    if let Err(error) = engine.run().within_limit(entry) {
        if !error.is_cancelled() {
            engine.run().record(error);
        }
        return;
    }
    let path = src.join(&entry.path);
    match platform::open_source(&path, follow) {
        Ok(file) => {
            writer.write(entry, Content::File(&file));
        }
        Err(e) => {
            let error = walk::source_context(&path)(e);
            engine
                .run()
                .record(Error::new(&entry.name, ErrorKind::Source, error));
        }
    }
}

/// Renames `from` to `to` (under the destination), which differ only in case, through a
/// temporary name: a direct rename is a no-op on some systems (Wine, some network file
/// systems), which see one name.
fn rename_case(tree: &platform::OutDir, from: &Path, to: &Path) -> io::Result<()> {
    let mut temp = to.as_os_str().to_owned();
    temp.push(format!(".fastwrite-case-{}", std::process::id()));
    let temp = PathBuf::from(temp);
    tree.rename(from, &temp)?;
    tree.rename(&temp, to).inspect_err(|_| {
        let _ = tree.rename(&temp, from);
    })
}

/// What [`apply`] did besides writing: the root's entry (its metadata is set after the run),
/// failures to delete or rename, and counts.
struct Applied {
    root: Option<Entry>,
    failures: Vec<Error>,
    updated: u64,
    deleted: u64,
}

/// Carries out the decided actions (what the walk has not already copied). Runs on the
/// writers' pool.
fn apply(
    src: &Path,
    opts: &Options,
    mopts: &MirrorOptions,
    engine: &Disk,
    streamed: bool,
    found: &mut Found,
) -> Applied {
    let dst = engine.run().root();
    let mut deletes = Vec::new();
    let mut renames = Vec::new();
    let mut updates = Vec::new();
    let mut plan = Plan::default();
    let mut root = None;
    for action in std::mem::take(&mut found.actions) {
        match action {
            Action::Delete { path, dir, .. } => deletes.push((path, dir)),
            Action::Rename { from, to } => renames.push((from, to)),
            Action::Update { entry } => updates.push(entry),
            Action::Dir { entry, .. } if entry.path.as_os_str().is_empty() => root = Some(entry),
            Action::Dir { entry, .. } | Action::Copy { entry, .. } | Action::Link { entry, .. } => {
                plan.entries.push(entry)
            }
        }
    }

    // Names spelled otherwise than in the source (only where names ignore case), parents
    // first, before anything else uses the new spelling.
    let updated = AtomicU64::new(0);
    let mut failures = Vec::new();
    for (from, to) in renames {
        match rename_case(engine.out_dir(), &from, &to) {
            Ok(()) => {
                updated.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => failures.push(Error::new(
                &to,
                ErrorKind::Delete,
                anyhow!(e).context(format!(
                    "renaming '{}' to the source's spelling",
                    dst.join(&from).display()
                )),
            )),
        }
    }

    // Deletions come first: they make way for what replaces them, and free space.
    let deleted = AtomicU64::new(0);
    let delete_failures: Vec<Error> = deletes
        .par_iter()
        .filter_map(|(rel, dir)| {
            if engine.run().cancelled() {
                return None;
            }
            let path = dst.join(rel);
            // Symlinks are removed as links, never followed, on the way or inside.
            let removed = if *dir {
                engine.out_dir().remove_tree(rel)
            } else {
                engine.out_dir().remove_file(rel)
            };
            match removed {
                Ok(()) => {
                    deleted.fetch_add(1, Ordering::Relaxed);
                    None
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => Some(Error::new(
                    rel,
                    ErrorKind::Delete,
                    anyhow!(e).context(format!("deleting '{}'", path.display())),
                )),
            }
        })
        .collect();
    failures.extend(delete_failures);

    engine.prepare(&mut plan);
    let files: Vec<&Entry> = plan
        .entries
        .iter()
        .filter(|e| e.kind == EntryKind::File)
        .collect();
    if !streamed {
        engine
            .run()
            .reporter()
            .planned(files.len() as u64, files.iter().map(|e| e.size).sum());
    }
    files.par_iter().for_each_init(
        || Writer::new(engine),
        |writer, entry| copy_file(engine, writer, src, entry, mopts.copy_links),
    );

    updates.par_iter().for_each(|entry| {
        let mode = entry.mode.map(|m| opts.mode_bits(m));
        match engine.set_metadata(&entry.path, mode, entry.mtime) {
            Ok(()) => {
                updated.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => engine
                .run()
                .record(Error::new(&entry.name, ErrorKind::Metadata, error)),
        }
    });

    Applied {
        root,
        failures,
        updated: updated.into_inner(),
        deleted: deleted.into_inner(),
    }
}
