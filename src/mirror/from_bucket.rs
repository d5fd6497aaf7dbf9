//! `mirror s3://BUCKET/PREFIX DIR`: the folder made an exact copy of the prefix, incrementally.
//!
//! 1. The prefix is listed (its top level, then every folder below it in parallel) and the
//!    folder is read, at once. Each key becomes a path below the folder, checked as an
//!    archive's names are: a key that would leave the folder (`../x`, `/etc/x`) is refused by
//!    name and nothing is written for it.
//! 2. A file of another size, or missing, is fetched. One of the same size is looked at (HEAD,
//!    many at once): it is unchanged when its mtime is the one the object's metadata records
//!    (rclone's and s3fs's `mtime`, which fastwrite writes too; else the upload time, which is
//!    what a fetched file without it gets). `--checksum` compares the file's MD5 with a single
//!    PUT's ETag instead, and fetches what it cannot compare (a multipart upload's ETag).
//! 3. The fetches are written as they arrive (`fetched.rs`), with the mtime and mode of the
//!    metadata. A replaced file is written under a temporary name and renamed over the old
//!    one.
//! 4. `--delete`: whatever the folder holds that the prefix does not (the excluded paths kept)
//!    is deleted first. A folder standing where the prefix has a file, and a file where it has
//!    a folder, are replaced whatever the flags, as in a mirror between folders.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::anyhow;

use super::fetched::{self, shown};
use crate::engine::Target;
use crate::error::{Error, ErrorKind, Setting};
use crate::options::{MirrorOptions, Options, Overwrite};
use crate::patterns::Patterns;
use crate::place::Place;
use crate::plan::{Entry, EntryKind};
use crate::platform;
use crate::report::{MirrorCounts, Report};
use crate::store::{BucketUrl, Recorded, Source, md5_of};

/// What the prefix holds at a path.
enum Wanted {
    File {
        key: String,
        size: u64,
        modified: SystemTime,
        etag: Option<String>,
    },
    /// A folder: marked by a `dir/` object (its key), or only holding objects.
    Dir { key: Option<String> },
}

/// What the folder holds at a path.
#[derive(Clone, Copy)]
enum Local {
    File {
        size: u64,
        mtime: Option<SystemTime>,
        mode: u32,
    },
    Dir,
    /// A symlink (its target's length), or anything else.
    Other {
        size: u64,
        symlink: bool,
    },
}

pub(super) fn mirror(
    src: &Path,
    url: BucketUrl,
    dest: &Place,
    (opts, mopts): (&Options, &MirrorOptions),
) -> anyhow::Result<Report> {
    let dst = dest.named();
    let refuse = |why: String| -> anyhow::Result<Report> {
        let why = anyhow!("'{}': {why}", src.display());
        Err(Error::named(src, ErrorKind::Unsupported, why).into())
    };
    if mopts.hard_links {
        return refuse(format!(
            "{} keeps hard links, and a bucket has none: refused",
            Setting::HardLinks
        ));
    }
    if url
        .prefix
        .split('/')
        .any(|part| part == "." || part == "..")
    {
        return refuse("a prefix with a '.' or '..' name: refused".to_string());
    }
    match fs::metadata(dst) {
        Ok(meta) if !meta.is_dir() => {
            let not = io::Error::from(io::ErrorKind::NotADirectory);
            let why = anyhow!(not).context(format!(
                "destination '{}' exists and is not a directory",
                dst.display()
            ));
            return Err(Error::named(dst, ErrorKind::Directory, why).into());
        }
        _ => {}
    }
    let exclude = super::excludes(mopts)?;
    let source = Source::open(url.clone()).map_err(|e| Error::start(src, ErrorKind::Source, e))?;
    let key_url = |key: &str| url.key_url(key);

    // Where the run writes: the folder, or the staging folder beside it that becomes it.
    let work = dest.work().unwrap_or(dst).to_path_buf();
    // The prefix and the folder, read at once.
    let (listed, local) = std::thread::scope(|scope| {
        let local = scope.spawn(|| scan(&work, &exclude));
        let listed = source.listing();
        (listed, local.join().unwrap_or_default())
    });
    let listed = listed.map_err(|e| {
        let why = e.context(format!("cannot list '{}'", src.display()));
        Error::named(src, ErrorKind::Source, why)
    })?;
    let mut failures = Vec::new();
    let wanted = wanted(&url, listed, &exclude, &mut failures, &key_url);

    // What differs, and what only a look at the metadata can tell.
    let mut fetch = Vec::new();
    let mut look = Vec::new();
    let mut make_dirs = Vec::new();
    let mut delete = BTreeSet::new();
    for (path, want) in &wanted {
        let here = local.get(path).copied();
        match (want, here) {
            (Wanted::Dir { .. }, Some(Local::Dir)) => {}
            (Wanted::Dir { key }, here) => {
                if here.is_some() {
                    delete.insert(path.clone());
                }
                make_dirs.push((path.clone(), key.clone()));
            }
            (Wanted::File { size, .. }, Some(Local::File { size: have, .. })) if have == *size => {
                look.push(path.clone())
            }
            (
                Wanted::File { size, .. },
                Some(Local::Other {
                    size: have,
                    symlink: true,
                }),
            ) if have == *size => look.push(path.clone()),
            (Wanted::File { .. }, here) => {
                if matches!(here, Some(Local::Dir)) {
                    delete.insert(path.clone());
                }
                fetch.push(path.clone());
            }
        }
    }
    if mopts.delete {
        for path in local.keys() {
            if !wanted.contains_key(path) {
                delete.insert(path.clone());
            }
        }
    }
    // A folder deleted takes what is below it.
    let deleted_below = |path: &Path| path.ancestors().skip(1).any(|a| delete.contains(a));
    let mut delete: Vec<PathBuf> = delete
        .iter()
        .filter(|p| !deleted_below(p))
        .cloned()
        .collect();

    // Same size: the same file if its mtime is the one recorded (or, with --checksum, its
    // MD5 the ETag's).
    let mut modes = Vec::new();
    let mut unchanged = 0u64;
    let looks: Vec<String> = look
        .iter()
        .filter_map(|p| match &wanted[p] {
            Wanted::File { key, .. } => Some(key.clone()),
            Wanted::Dir { .. } => None,
        })
        .collect();
    let recorded: HashMap<String, anyhow::Result<Recorded>> = if mopts.checksum {
        HashMap::new()
    } else {
        source.recorded(looks).into_iter().collect()
    };
    for path in look {
        let Wanted::File {
            key,
            modified,
            etag,
            ..
        } = &wanted[&path]
        else {
            continue;
        };
        let here = local[&path];
        let same = if mopts.checksum {
            same_content(&work.join(&path), here, etag.as_deref())
        } else {
            match (&recorded[key], here) {
                (Ok(recorded), Local::File { mtime, mode, .. }) if !recorded.is_symlink() => {
                    let stored = recorded.mtime.unwrap_or(*modified);
                    let same = mtime.is_some_and(|m| close_enough(m, stored));
                    if same && recorded.permissions().is_some_and(|p| p != mode & 0o7777) {
                        modes.push((path.clone(), recorded.permissions()));
                    }
                    same
                }
                (Ok(recorded), Local::Other { symlink: true, .. }) => recorded.is_symlink(),
                _ => false,
            }
        };
        if same {
            unchanged += 1;
        } else {
            if matches!(here, Local::Other { .. }) {
                delete.push(path.clone());
            }
            fetch.push(path);
        }
    }

    if mopts.dry_run {
        let mut actions: Vec<String> = Vec::new();
        actions.extend(delete.iter().map(|p| format!("delete {}", shown(p))));
        actions.extend(
            make_dirs
                .iter()
                .map(|(p, _)| format!("mkdir {}/", shown(p))),
        );
        actions.extend(fetch.iter().map(|p| {
            let verb = match local.contains_key(p) {
                true => "replace",
                false => "copy",
            };
            format!("{verb} {}", shown(p))
        }));
        actions.extend(modes.iter().map(|(p, _)| format!("update {}", shown(p))));
        return Ok(dry_run(actions, unchanged, failures));
    }

    // Deletions first: they make way for what replaces them.
    let mut deleted = 0u64;
    if !delete.is_empty() {
        let tree = platform::OutDir::open(&work).map_err(|e| {
            let why = anyhow!(e).context(format!("cannot open destination '{}'", dst.display()));
            Error::named(dst, ErrorKind::Directory, why)
        })?;
        for path in &delete {
            let removed = match local.get(path) {
                Some(Local::Dir) => tree.remove_tree(path),
                _ => tree.remove_file(path),
            };
            match removed {
                Ok(()) => deleted += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => failures.push(Error::new(
                    path,
                    ErrorKind::Delete,
                    anyhow!(e).context(format!("deleting '{}'", dst.join(path).display())),
                )),
            }
        }
    }

    // The fetches, written as they arrive.
    let replace = Options {
        overwrite: Overwrite::Replace,
        ..opts.clone()
    };
    let mut objects: Vec<fetched::Object> = fetch
        .iter()
        .filter_map(|path| match &wanted[path] {
            Wanted::File {
                key,
                size,
                modified,
                ..
            } => Some(fetched::Object {
                key: key.clone(),
                path: path.clone(),
                size: *size,
                modified: Some(*modified),
                marker: false,
            }),
            Wanted::Dir { .. } => None,
        })
        .collect();
    objects.extend(make_dirs.iter().filter_map(|(path, key)| {
        Some(fetched::Object {
            key: key.clone()?,
            path: path.clone(),
            size: 0,
            modified: None,
            marker: true,
        })
    }));
    let dirs: Vec<PathBuf> = make_dirs.iter().map(|(path, _)| path.clone()).collect();
    let mut report = fetched::write(dest, &source, &dirs, &objects, &replace, &key_url)?;

    // Modes that differ on files that did not.
    let mut updated = 0u64;
    if !modes.is_empty()
        && let Ok(tree) = platform::OutDir::open(&work)
    {
        for (path, mode) in modes {
            let mode = mode.map(|m| opts.mode_bits(m));
            match tree.set_metadata(&path, mode, None) {
                Ok(()) => updated += 1,
                Err(e) => failures.push(Error::new(
                    &path,
                    ErrorKind::Metadata,
                    anyhow!(e).context(format!(
                        "setting the mode of '{}'",
                        dst.join(&path).display()
                    )),
                )),
            }
        }
    }
    report.failures.extend(failures);
    report.mirror = Some(MirrorCounts {
        updated,
        deleted,
        unchanged,
        ..MirrorCounts::default()
    });
    Ok(report)
}

/// `mirror s3://A/P s3://B/Q`: the second prefix made an exact copy of the first, by
/// server-side copies (CopyObject, Copy Blob: the bytes never leave the store, and the
/// metadata goes with them). An object is copied when the other prefix lacks it, holds another
/// size, or holds a copy older than it (`--checksum`: another MD5), as `aws s3 sync` judges
/// between buckets; `--delete` deletes the rest. Both prefixes of one kind are in the store
/// the environment names; between kinds (`s3://` and `az://`) each object is fetched and
/// written again (`fetched.rs`), its mtime and mode kept as the other store keeps them.
pub(super) fn between_buckets(
    src: &Path,
    from: BucketUrl,
    to_place: &Place,
    (opts, mopts): (&Options, &MirrorOptions),
) -> anyhow::Result<Report> {
    let dst = to_place.named();
    let Some(to) = to_place.store().cloned() else {
        anyhow::bail!("'{}' is not a bucket's prefix", dst.display());
    };
    use crate::engine::bucket::Bucket;
    if mopts.hard_links {
        let why = anyhow!(
            "{} keeps hard links, and a bucket has none: refused",
            Setting::HardLinks
        );
        return Err(Error::named(src, ErrorKind::Unsupported, why).into());
    }
    let exclude = super::excludes(mopts)?;
    let source = Source::open(from.clone()).map_err(|e| Error::start(src, ErrorKind::Source, e))?;
    let replace = Options {
        overwrite: Overwrite::Replace,
        ..opts.clone()
    };
    let bucket = Bucket::new(to_place, &replace, !mopts.dry_run)
        .map_err(|e| Error::start(dst, ErrorKind::Directory, e))?;
    let (listed, there) = std::thread::scope(|scope| {
        let there = scope.spawn(|| bucket.listing());
        let listed = source.listing();
        let there = there
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the listing's thread panicked")));
        (listed, there)
    });
    let listed = listed.map_err(|e| {
        let why = e.context(format!("cannot list '{}'", src.display()));
        Error::named(src, ErrorKind::Source, why)
    })?;
    let there = there.map_err(|e| {
        let why = e.context(format!("cannot list '{}'", dst.display()));
        Error::named(dst, ErrorKind::Directory, why)
    })?;
    let mut failures = Vec::new();
    let from_url = |key: &str| from.key_url(key);
    let wanted = wanted(&from, listed, &exclude, &mut failures, &from_url);

    let mut copies = Vec::new();
    let (mut bytes, mut files, mut unchanged) = (0u64, 0u64, 0u64);
    let mut kept = BTreeSet::new();
    for (path, want) in &wanted {
        let (Wanted::File { key, .. } | Wanted::Dir { key: Some(key) }) = want else {
            continue;
        };
        let target = target_key(&to, path, want);
        kept.insert(target.clone());
        let same = match (want, there.get(&target)) {
            (_, None) => false,
            (Wanted::Dir { .. }, Some(_)) => true,
            (
                Wanted::File {
                    size,
                    modified,
                    etag,
                    ..
                },
                Some(copy),
            ) => match mopts.checksum {
                true => etag.is_some() && *etag == copy.etag,
                // To the second: a store that keeps whole seconds (S3, Azure) lists a copy made
                // in the same second as its source's upload (kept to the microsecond on GCS)
                // as older.
                false => {
                    copy.size == *size && whole_seconds(copy.modified) >= whole_seconds(*modified)
                }
            },
        };
        if same {
            unchanged += 1;
            continue;
        }
        if let Wanted::File { size, .. } = want {
            bytes += size;
            files += 1;
        }
        let exists = there.contains_key(&target);
        copies.push((key.clone(), target, exists, path));
    }
    let mut deletes: Vec<String> = match mopts.delete {
        true => there
            .keys()
            .filter(|key| !kept.contains(*key))
            .filter(|key| {
                let rel = key.strip_prefix(&to.prefix).unwrap_or(key);
                let dir = rel.ends_with('/');
                !excluded(&exclude, Path::new(rel.trim_end_matches('/')), dir)
            })
            .cloned()
            .collect(),
        false => Vec::new(),
    };
    deletes.sort();

    if mopts.dry_run {
        let shown_key = |key: &str| key.strip_prefix(&to.prefix).unwrap_or(key).to_string();
        let mut actions: Vec<String> = copies
            .iter()
            .map(|(_, target, exists, _)| {
                let verb = if *exists { "replace" } else { "copy" };
                format!("{verb} {}", shown_key(target))
            })
            .collect();
        actions.extend(deletes.iter().map(|k| format!("delete {}", shown_key(k))));
        return Ok(dry_run(actions, unchanged, failures));
    }
    let to_url = |key: &str| to.key_url(key);
    let mut deleted = deletes.len() as u64;
    for (key, error) in bucket.delete_keys(deletes) {
        deleted -= 1;
        let error = error.context(format!("deleting '{}'", to_url(&key)));
        failures.push(Error::new(&key, ErrorKind::Delete, error).with_key(to_url(&key)));
    }
    if from.store != to.store {
        // No server-side copy reaches a store of another kind: through this machine.
        failures.extend(bucket.run().take_failures());
        drop(bucket);
        let objects = copies
            .into_iter()
            .map(|(key, target, _, path)| {
                let (size, modified) = match &wanted[path] {
                    Wanted::File { size, modified, .. } => (*size, Some(*modified)),
                    Wanted::Dir { .. } => (0, None),
                };
                fetched::Object {
                    marker: target.ends_with('/'),
                    key,
                    path: path.clone(),
                    size,
                    modified,
                }
            })
            .collect::<Vec<_>>();
        let mut report = fetched::write(to_place, &source, &[], &objects, &replace, &from_url)?;
        report.failures.extend(failures);
        report.mirror = Some(MirrorCounts {
            deleted,
            unchanged,
            ..MirrorCounts::default()
        });
        return Ok(report);
    }
    let pairs = copies
        .into_iter()
        .map(|(from, to, _, _)| (from, to))
        .collect();
    for (key, error) in bucket.copy_keys(&source, pairs) {
        files = files.saturating_sub(u64::from(!key.ends_with('/')));
        let error = error.context(format!("copying to '{}'", to_url(&key)));
        failures.push(Error::new(&key, ErrorKind::Write, error).with_key(to_url(&key)));
    }
    failures.extend(bucket.run().take_failures());
    Ok(Report {
        files,
        bytes,
        failures,
        mirror: Some(MirrorCounts {
            deleted,
            unchanged,
            ..MirrorCounts::default()
        }),
        ..Report::default()
    })
}

/// A time in whole seconds since the epoch (0 before it).
fn whole_seconds(time: SystemTime) -> u64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A dry run's report: its actions (`VERB PATH`) in path order, as a mirror between folders
/// gives them.
fn dry_run(mut actions: Vec<String>, unchanged: u64, failures: Vec<Error>) -> Report {
    actions.sort_by(|a, b| {
        let path = |s: &str| s.split_once(' ').map(|(_, p)| p.to_string());
        path(a).cmp(&path(b))
    });
    Report {
        failures,
        mirror: Some(MirrorCounts {
            actions,
            unchanged,
            ..MirrorCounts::default()
        }),
        ..Report::default()
    }
}

/// The key in `to` of the source's `path`.
fn target_key(to: &BucketUrl, path: &Path, want: &Wanted) -> String {
    match want {
        Wanted::File { .. } => format!("{}{}", to.prefix, shown(path)),
        Wanted::Dir { .. } => format!("{}{}/", to.prefix, shown(path)),
    }
}

/// Each key under the prefix as a path of the folder: refused keys go to `failures`, named
/// with their key; excluded ones are left out.
fn wanted(
    url: &BucketUrl,
    listed: HashMap<String, crate::store::Listed>,
    exclude: &Patterns,
    failures: &mut Vec<Error>,
    key_url: &dyn Fn(&str) -> String,
) -> BTreeMap<PathBuf, Wanted> {
    let mut wanted = BTreeMap::new();
    let mut files = Vec::new();
    for (key, object) in listed {
        let Some(rel) = key.strip_prefix(&url.prefix) else {
            continue;
        };
        let marker = rel.ends_with('/');
        let rel = rel.trim_end_matches('/');
        if rel.is_empty() {
            // The prefix's own marker.
            continue;
        }
        let kind = match marker {
            true => EntryKind::Dir,
            false => EntryKind::File,
        };
        let path = match Entry::for_path(Path::new(rel), kind, None, None, 0) {
            Ok(entry) => entry.path,
            Err(error) => {
                failures.push(error.with_key(key_url(&key)));
                continue;
            }
        };
        if excluded(exclude, &path, marker) {
            continue;
        }
        if marker {
            wanted.insert(path, Wanted::Dir { key: Some(key) });
        } else {
            files.push((
                path,
                Wanted::File {
                    key,
                    size: object.size,
                    modified: object.modified,
                    etag: object.etag,
                },
            ));
        }
    }
    // Every folder a file is in is a folder; a key that is both an object and a folder of
    // others keeps the folder.
    let folders: BTreeSet<PathBuf> = files
        .iter()
        .flat_map(|(path, _)| path.ancestors().skip(1).map(Path::to_path_buf))
        .filter(|a| !a.as_os_str().is_empty())
        .collect();
    for (path, want) in files {
        if folders.contains(&path) {
            if let Wanted::File { key, .. } = &want {
                let why = anyhow!(
                    "'{key}' is an object and also the folder of other keys ('{key}/...'): the folder was mirrored, not the object"
                );
                failures.push(Error::new(&path, ErrorKind::Refused, why).with_key(key_url(key)));
            }
            continue;
        }
        wanted.insert(path, want);
    }
    for folder in folders {
        wanted.entry(folder).or_insert(Wanted::Dir { key: None });
    }
    wanted
}

/// Whether `path` or a folder above it is excluded.
fn excluded(exclude: &Patterns, path: &Path, is_dir: bool) -> bool {
    !exclude.is_empty()
        && (exclude.matches(path, is_dir)
            || path
                .ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .any(|a| exclude.matches(a, true)))
}

/// What the folder holds, by path below it (nothing if it is not there), excluded paths and
/// fastwrite's own working files (`.fastwrite-run-PID` marks, staging folders, temporary
/// `.NAME.fastwrite-*` files, which the engine sees to) left out. Symlinks are not followed.
fn scan(dst: &Path, exclude: &Patterns) -> HashMap<PathBuf, Local> {
    let mut found = HashMap::new();
    let mut folders = vec![PathBuf::new()];
    while let Some(folder) = folders.pop() {
        let Ok(names) = fs::read_dir(dst.join(&folder)) else {
            continue;
        };
        for item in names.flatten() {
            let name = item.file_name();
            if name.to_string_lossy().contains(".fastwrite-") {
                continue;
            }
            let path = folder.join(name);
            let Ok(meta) = item.path().symlink_metadata() else {
                continue;
            };
            let kind = meta.file_type();
            if excluded(exclude, &path, kind.is_dir()) {
                continue;
            }
            let local = if kind.is_dir() {
                folders.push(path.clone());
                Local::Dir
            } else if kind.is_file() {
                Local::File {
                    size: meta.len(),
                    mtime: meta.modified().ok(),
                    mode: platform::mode_of(&meta),
                }
            } else {
                let symlink = kind.is_symlink();
                let size = match symlink {
                    true => fs::read_link(item.path()).map_or(0, |t| t.as_os_str().len() as u64),
                    false => 0,
                };
                Local::Other { size, symlink }
            };
            found.insert(path, local);
        }
    }
    found
}

/// The same content, by `--checksum`: the file's (or symlink's target's) MD5 is a single
/// PUT's ETag. An ETag that is no MD5 (a multipart upload's) compares as different.
fn same_content(path: &Path, here: Local, etag: Option<&str>) -> bool {
    let Some(etag) = etag.filter(|e| !e.contains('-')) else {
        return false;
    };
    let md5 = match here {
        Local::File { .. } => fs::File::open(path).and_then(|mut f| md5_of(&mut f)),
        Local::Other { symlink: true, .. } => {
            fs::read_link(path).and_then(|t| md5_of(&mut t.as_os_str().as_encoded_bytes()))
        }
        _ => return false,
    };
    md5.is_ok_and(|md5| md5.eq_ignore_ascii_case(etag))
}

/// Two mtimes the same to within a microsecond (what every file system here keeps).
fn close_enough(a: SystemTime, b: SystemTime) -> bool {
    let diff = a.duration_since(b).unwrap_or_else(|e| e.duration());
    diff < Duration::from_micros(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Listed;

    fn listed(keys: &[&str]) -> HashMap<String, Listed> {
        keys.iter()
            .map(|k| {
                let object = Listed {
                    size: 1,
                    modified: SystemTime::UNIX_EPOCH,
                    etag: None,
                };
                (k.to_string(), object)
            })
            .collect()
    }

    fn wanted_of(keys: &[&str], excludes: &[&str]) -> (Vec<String>, Vec<String>) {
        let url = BucketUrl::parse(Path::new("s3://b/p/")).unwrap().unwrap();
        let excludes: Vec<String> = excludes.iter().map(|s| s.to_string()).collect();
        let exclude =
            crate::patterns::Patterns::new(&excludes, "--exclude", crate::patterns::Slash::Stops)
                .unwrap();
        let mut failures = Vec::new();
        let key_url = |key: &str| format!("s3://b/{key}");
        let wanted = wanted(&url, listed(keys), &exclude, &mut failures, &key_url);
        let paths = wanted
            .iter()
            .map(|(path, want)| match want {
                Wanted::File { .. } => shown(path),
                Wanted::Dir { .. } => format!("{}/", shown(path)),
            })
            .collect();
        let failed = failures
            .iter()
            .map(|f| f.key().unwrap_or("").to_string())
            .collect();
        (paths, failed)
    }

    #[test]
    fn keys_that_would_leave_the_folder_are_refused_by_key() {
        let (paths, failed) =
            wanted_of(&["p/a.txt", "p/../up.txt", "p//etc/x", "p/d/../../y"], &[]);
        assert_eq!(paths, ["a.txt"]);
        let mut failed = failed;
        failed.sort();
        assert_eq!(
            failed,
            [
                "s3://b/p/../up.txt",
                "s3://b/p//etc/x",
                "s3://b/p/d/../../y"
            ]
        );
    }

    #[test]
    fn folders_come_from_markers_and_from_keys_below_them() {
        let (paths, failed) = wanted_of(&["p/", "p/d/", "p/e/f/g.txt", "p/x", "p/x/y"], &[]);
        assert_eq!(paths, ["d/", "e/", "e/f/", "e/f/g.txt", "x/", "x/y"]);
        assert_eq!(
            failed,
            ["s3://b/p/x"],
            "an object that is also a folder is named"
        );
    }

    #[test]
    fn excluded_keys_and_what_is_below_excluded_folders_are_left_out() {
        let (paths, _) = wanted_of(
            &["p/a.log", "p/b.txt", "p/cache/c.txt"],
            &["*.log", "cache"],
        );
        assert_eq!(paths, ["b.txt"]);
    }
}
