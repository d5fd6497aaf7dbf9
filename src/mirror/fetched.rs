//! Objects of a prefix fetched and written by the engine as they arrive, through whatever the
//! destination is: a folder (`mirror s3://B/P DIR`, `from_bucket.rs`), or a prefix of a store of
//! another kind (`mirror s3://B/P az://C/Q`), where no server-side copy reaches.
//!
//! The fetches run many at once on the client's runtime ([`Source::fetch`]); what arrives goes
//! to the writers as a tar's files do (`engine/feed.rs`), with the mtime and mode its metadata
//! records, so the destination keeps them as it keeps an archive's (a file's times, or the
//! other store's own form of `mtime`). An object whose `mode` says symlink (s3fs's convention)
//! becomes a symlink to what it holds; a folder marker (`dir/`) a folder.

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::engine::feed::{self, Job};
use crate::engine::{self, Content};
use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::place::Place;
use crate::plan::{Entry, EntryKind};
use crate::report::Report;
use crate::store::{Body, Recorded, Source};

/// An object to fetch, and where it goes.
pub(super) struct Object {
    pub key: String,
    /// Its path below the destination.
    pub path: PathBuf,
    pub size: u64,
    /// When it was uploaded: the mtime of a file whose metadata records none.
    pub modified: Option<SystemTime>,
    /// A folder's marker (`dir/`): its metadata makes the folder's mode and mtime.
    pub marker: bool,
}

/// Makes the folders `dirs`, then fetches `objects` from `source` and writes each into `dest`
/// as it arrives (`opts` as the run has them: replacing, for a mirror). A failure is recorded
/// with its path and its key's URL (`key_url`).
pub(super) fn write(
    dest: &Place,
    source: &Source,
    dirs: &[PathBuf],
    objects: &[Object],
    opts: &Options,
    key_url: &(dyn Fn(&str) -> String + Sync),
) -> anyhow::Result<Report> {
    let files = objects.iter().filter(|o| !o.marker);
    let (mut report, ()) = engine::run(dest, None, opts, |engine, writers| {
        engine
            .run()
            .reporter()
            .planned(files.clone().count() as u64, files.map(|o| o.size).sum());
        for (index, path) in dirs.iter().enumerate() {
            let entry = entry_for(path, EntryKind::Dir, index, 0, Recorded::default(), None);
            if let Err(error) = engine.make_dir(&entry) {
                engine.run().record(error);
            }
        }
        let by_key: std::collections::HashMap<&str, &Object> =
            objects.iter().map(|o| (o.key.as_str(), o)).collect();
        feed::fed(engine, writers, opts.memory_budget, |feed, writer| {
            let whole_up_to = feed.buffer_limit.min(8 << 20);
            let all = objects.iter().map(|o| (o.key.clone(), o.size)).collect();
            for (index, (key, fetched)) in source
                .fetch(all, whole_up_to, opts.memory_budget)
                .enumerate()
            {
                if engine.run().cancelled() {
                    break;
                }
                let object = by_key[key.as_str()];
                let path = &object.path;
                let fail = |e: anyhow::Error| {
                    Error::new(
                        path,
                        ErrorKind::Source,
                        e.context(format!("fetching '{key}'")),
                    )
                    .with_key(key_url(&key))
                };
                let fetched = match fetched {
                    Ok(fetched) => fetched,
                    Err(e) => {
                        engine.run().record(fail(e));
                        continue;
                    }
                };
                let recorded = fetched.recorded;
                if object.marker {
                    // A marker: its folder's mode and mtime, set at the end.
                    let entry = entry_for(path, EntryKind::Dir, index, 0, recorded, None);
                    engine.add_dir(entry);
                    continue;
                }
                if recorded.is_symlink() {
                    let target = match fetched.body {
                        Body::Whole(bytes, _) => bytes.to_vec(),
                        Body::Stream(stream) => {
                            let mut target = Vec::new();
                            let read = io::Read::read_to_end(
                                &mut io::Read::take(source.reader(&key, stream), 4096),
                                &mut target,
                            );
                            if let Err(e) = read {
                                engine.run().record(fail(e.into()));
                                continue;
                            }
                            target
                        }
                    };
                    let target = PathBuf::from(crate::plan::display_bytes(&target));
                    let kind = EntryKind::Symlink { target };
                    let entry = entry_for(path, kind, index, 0, recorded, object.modified);
                    engine.add_link(entry);
                    continue;
                }
                let entry = entry_for(
                    path,
                    EntryKind::File,
                    index,
                    object.size,
                    recorded,
                    object.modified,
                );
                match fetched.body {
                    Body::Whole(bytes, held) => {
                        let data = bytes.to_vec();
                        drop(held);
                        feed.room(data.len() as u64, writer);
                        feed.push(Job { entry, data }, writer);
                    }
                    Body::Stream(stream) => {
                        let mut reader = source.reader(&key, stream);
                        writer.write(&entry, Content::Reader(&mut reader));
                    }
                }
            }
        });
    })?;
    let (peak, why) = source.in_flight();
    report.writers_why = format!(
        "{}; downloads in flight: up to {peak}, the limit last {why}",
        report.writers_why
    );
    Ok(report)
}

/// The entry for `path`, with the metadata's mode and mtime (else `modified`, the upload
/// time).
pub(super) fn entry_for(
    path: &Path,
    kind: EntryKind,
    index: usize,
    size: u64,
    recorded: Recorded,
    modified: Option<SystemTime>,
) -> Entry {
    Entry {
        name: shown(path),
        path: path.to_path_buf(),
        kind,
        mode: recorded.permissions(),
        mtime: recorded.mtime.or(modified),
        size,
        index,
        sparse: false,
        replaces: false,
        owner: None,
        absent: false,
        xattrs: Vec::new(),
    }
}

/// A path as a key's names show it, `/` between them.
pub(super) fn shown(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}
