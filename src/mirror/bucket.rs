//! `mirror SRC s3://BUCKET/PREFIX`: the prefix made an exact copy of the folder, incrementally.
//!
//! 1. The source is walked as for a folder (`walk.rs`, with nothing on the other side), and
//!    the prefix is listed (ListObjectsV2: its top level, then every folder below it in
//!    parallel, 1,000 keys a request). A mirror with nothing to do costs those few requests.
//! 2. Each file is compared with its object as `aws s3 sync` does, by what a listing shows:
//!    the same size, and stored since the file last changed (its upload time no earlier than
//!    the file's mtime), is the same file. `--checksum` compares the content instead: the
//!    file's MD5 with a single PUT's ETag (a multipart upload's ETag is no MD5: such an object
//!    is uploaded again). A file replaced by another of the same size with an older mtime is
//!    only seen with `--checksum` (docs/object-storage.md).
//! 3. What differs is uploaded through the bucket's engine, replacing its object, with the
//!    file's mtime and mode as metadata; folders that stay empty become `dir/` markers,
//!    symlinks objects holding their target (s3fs's convention).
//! 4. `--delete`: every other object under the prefix (fastwrite's own marks aside, the
//!    excluded paths kept) is deleted, 1,000 keys a request.

use std::fs;
use std::path::Path;

use rayon::prelude::*;

use super::walk::{Action, Walk};
use super::{add_found, walked};
use crate::engine::bucket::Bucket;
use crate::engine::{Content, Target, Writer};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::{MirrorOptions, Options, Overwrite};
use crate::place::Place;
use crate::plan::{Entry, EntryKind};
use crate::report::{MirrorCounts, Report};
use crate::store::md5_of;

pub(super) fn mirror(
    src: &Path,
    to: &Place,
    root_meta: fs::Metadata,
    (opts, mopts): (&Options, &MirrorOptions),
) -> anyhow::Result<Report> {
    let dst = to.named();
    to.refuse_what_it_cannot(opts)?;
    if mopts.hard_links {
        let why = anyhow::anyhow!(
            "'{}': {} keeps hard links as links, and a bucket has none: refused (without it, each is copied)",
            dst.display(),
            Setting::HardLinks
        );
        return Err(Error::named(dst, ErrorKind::Unsupported, why).into());
    }
    let exclude = super::excludes(mopts)?;
    let walk = Walk::new(src, dst, mopts, &exclude, &opts.cancel);
    let writers = crate::engine::writer_pool(opts)?;
    // A mirror replaces what differs.
    let bopts = Options {
        overwrite: Overwrite::Replace,
        ..opts.clone()
    };
    let bucket = Bucket::new(to, &bopts, !mopts.dry_run)
        .map_err(|e| Error::start(dst, ErrorKind::Directory, e))?;
    // The source is walked while the prefix is listed: the one on the disk, the other a few
    // round trips away.
    let (listed, mut found) = std::thread::scope(|scope| {
        let listing = scope.spawn(|| bucket.listing());
        writers.install(|| walk.run(root_meta, false));
        let found = walked(walk, src);
        let listed = listing
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the listing's thread panicked")));
        (listed, found)
    });
    let mut listed = listed.map_err(|e| Error::start(dst, ErrorKind::Directory, e))?;
    let prefix = bucket.url().prefix.clone();
    let key_of = |path: &Path| {
        let mut key = prefix.clone();
        key.push_str(&path.to_string_lossy().replace('\\', "/"));
        key
    };

    // The walk names every folder: none is only implied (no marker made as files fill one).
    bucket.every_folder_named();
    // What the listing says of each action: unchanged (and its key taken off the listing), or
    // to do.
    let mut todo = Vec::new();
    let mut unchanged_paths = Vec::new();
    for action in std::mem::take(&mut found.actions) {
        match action {
            Action::Copy { entry, .. } | Action::Link { entry, .. } => {
                let key = key_of(&entry.path);
                let same = listed.get(&key).is_some_and(|theirs| match &entry.kind {
                    EntryKind::File => same_file(src, &entry, theirs, mopts.checksum),
                    EntryKind::Symlink { target } => {
                        theirs.size == target.as_os_str().len() as u64
                            && stored_since(theirs, entry.mtime)
                    }
                    _ => false,
                });
                let replaces = listed.remove(&key).is_some();
                if same {
                    bucket.fill_parents(&entry.path);
                    unchanged_paths.push(entry.path);
                } else {
                    todo.push((entry, replaces));
                }
            }
            Action::Dir { entry, .. } => {
                if entry.path.as_os_str().is_empty() {
                    continue;
                }
                let marker = format!("{}/", key_of(&entry.path));
                if listed.remove(&marker).is_none() {
                    todo.push((entry, false));
                }
            }
            // Nothing else comes of a walk with nothing on the other side.
            _ => {}
        }
    }
    // What the report counts as unchanged (`add_found`).
    found.unchanged = unchanged_paths.len() as u64;
    // A folder needs a marker only if nothing lies under it.
    let mut filled = std::collections::HashSet::new();
    for entry in found_paths(&todo).chain(unchanged_paths.iter().map(|p| p.as_path())) {
        for parent in entry.ancestors().skip(1) {
            if parent.as_os_str().is_empty() || !filled.insert(parent.to_path_buf()) {
                break;
            }
        }
    }
    // With --folder-markers every folder gets one (those with one already were taken above).
    if !opts.folder_markers {
        todo.retain(|(entry, _)| entry.kind != EntryKind::Dir || !filled.contains(&entry.path));
    }
    // Everything left in the listing is not in the source.
    let mut extra: Vec<String> = if mopts.delete {
        listed
            .into_keys()
            .filter(|key| {
                let rel = key.strip_prefix(prefix.as_str()).unwrap_or(key);
                let (rel, dir) = match rel.strip_suffix('/') {
                    Some(rel) => (rel, true),
                    None => (rel, false),
                };
                !exclude.matches(Path::new(rel), dir)
            })
            .collect()
    } else {
        Vec::new()
    };
    extra.sort();

    if mopts.dry_run {
        let mut actions: Vec<(String, String)> = todo
            .iter()
            .map(|(entry, replaces)| {
                let path = entry.path.to_string_lossy().replace('\\', "/");
                let line = match (&entry.kind, replaces) {
                    (EntryKind::Dir, _) => format!("mkdir {path}/"),
                    (_, true) => format!("replace {path}"),
                    (_, false) => format!("copy {path}"),
                };
                (path, line)
            })
            .collect();
        for key in &extra {
            let path = key.strip_prefix(prefix.as_str()).unwrap_or(key).to_string();
            actions.push((path.clone(), format!("delete {path}")));
        }
        actions.sort();
        let mut report = Report {
            mirror: Some(MirrorCounts {
                actions: actions.into_iter().map(|(_, line)| line).collect(),
                ..MirrorCounts::default()
            }),
            ..Report::default()
        };
        add_found(&mut report, found);
        return Ok(report);
    }

    // Deletions first, as on disk: a key that goes makes no room needed, but the listing is
    // then what the source says.
    let deleted = extra.len() as u64;
    let failed_deletes = bucket.delete_keys(extra);
    let deleted = deleted - failed_deletes.len() as u64;
    for (key, why) in failed_deletes {
        let rel = key
            .strip_prefix(prefix.as_str())
            .unwrap_or(&key)
            .to_string();
        bucket.run().record(
            Error::new(rel, ErrorKind::Delete, why.context("deleting it"))
                .with_key(bucket.url().key_url(&key)),
        );
    }
    let (files, rest): (Vec<_>, Vec<_>) = todo
        .into_iter()
        .partition(|(entry, _)| entry.kind == EntryKind::File);
    for (entry, _) in rest {
        match entry.kind {
            EntryKind::Dir => bucket.add_dir(entry),
            _ => bucket.add_link(entry),
        }
    }
    writers.install(|| {
        let writer = || Writer::new(&bucket);
        files
            .par_iter()
            .for_each_init(writer, |writer, (entry, _)| {
                if bucket.run().stopped() {
                    return;
                }
                if let Err(error) = bucket.run().within_limit(entry) {
                    if !error.is_cancelled() {
                        bucket.run().record(error);
                    }
                    return;
                }
                let path = src.join(&entry.path);
                match fs::File::open(&path) {
                    // A failure is recorded by the writer.
                    Ok(file) => {
                        writer.write(entry, Content::File(&file));
                    }
                    Err(e) => {
                        let why =
                            anyhow::Error::new(e).context(format!("reading '{}'", path.display()));
                        let error = Error::new(entry.name.clone(), ErrorKind::Source, why);
                        bucket.run().record(error);
                    }
                }
            });
    });
    let mut report = writers.install(|| Box::new(bucket).finish());
    report.writers = writers.current_num_threads();
    report.writers_why = format!(
        "one per core: into a bucket the writers read, and the uploads in flight are sized apart; {}",
        report.writers_why
    );
    report.mirror = Some(MirrorCounts {
        deleted,
        ..MirrorCounts::default()
    });
    add_found(&mut report, found);
    Ok(report)
}

/// The paths of what is to be written but folders.
fn found_paths(todo: &[(Entry, bool)]) -> impl Iterator<Item = &Path> {
    todo.iter()
        .filter(|(entry, _)| entry.kind != EntryKind::Dir)
        .map(|(entry, _)| entry.path.as_path())
}

/// Whether the object `theirs` holds the file `entry` of `src` (see the module's docs).
fn same_file(src: &Path, entry: &Entry, theirs: &crate::store::Listed, checksum: bool) -> bool {
    if theirs.size != entry.size {
        return false;
    }
    if checksum {
        let Some(etag) = theirs.etag.as_deref().filter(|t| !t.contains('-')) else {
            return false;
        };
        return fs::File::open(src.join(&entry.path))
            .and_then(|mut file| md5_of(&mut file))
            .is_ok_and(|md5| md5.eq_ignore_ascii_case(etag));
    }
    stored_since(theirs, entry.mtime)
}

/// Whether the object was stored since `mtime`, to the second (a store keeps whole seconds: a
/// file changed in the second of its upload is taken as unchanged, as `aws s3 sync` takes it).
fn stored_since(theirs: &crate::store::Listed, mtime: Option<std::time::SystemTime>) -> bool {
    let seconds = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    };
    mtime.is_some_and(|mtime| seconds(theirs.modified) >= seconds(mtime))
}
