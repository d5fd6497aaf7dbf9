//! Completion records: one small file (or object) per source done, under the output,
//! `OUT/.fastwrite/done/`, created with the never-replace condition every file and object
//! gets. Its name is two stable hashes, of the source's name and of its identity, so one
//! listing tells a rerun every source done and every source changed since, without a request
//! per source; its content names them in full for a person.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Context;

use super::sources::Source;

/// Where the records are, under the output.
pub(crate) const DONE: &str = ".fastwrite/done";

/// Beside [`DONE`]: the attempts begun (into a folder).
const STARTED: &str = "started";

/// A stable 64-bit hash (FNV-1a): the same on every machine and in every release, which
/// `std`'s hasher does not promise. Names records and picks shards.
pub(crate) fn stable_hash(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// A record's name for `source`.
pub(crate) fn record_name(source: &Source) -> String {
    format!(
        "{:016x}-{:016x}",
        stable_hash(&source.name),
        stable_hash(&source.identity)
    )
}

/// The tag an attempt at `source` marks what it writes with (`Options::resume_tag`).
pub(crate) fn resume_tag(source: &Source) -> String {
    record_name(source)
}

/// What the records say of a source.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// A record with its identity: done.
    Done,
    /// Records of it, none with its identity now: it changed since.
    Changed,
    /// No record.
    New,
}

/// The records of one output: the names listed at the start, and where new ones go.
pub(crate) struct Records {
    place: Place,
    /// Source hash -> identity hashes recorded.
    listed: HashMap<u64, Vec<u64>>,
}

enum Place {
    Folder(PathBuf),
    Bucket(crate::store::Source),
}

impl Records {
    /// The records under `out`, listed once (a folder's made if missing).
    pub(crate) fn open(
        out: &crate::place::Place,
        opts: &crate::Options,
    ) -> anyhow::Result<Records> {
        if let Some(url) = out.store() {
            let url = url.with_prefix(&format!("{}{DONE}/", url.prefix));
            let bucket = crate::store::Source::open(url, opts)?;
            let names = bucket
                .listing()?
                .into_keys()
                .filter_map(|key| key.rsplit('/').next().map(str::to_string))
                .collect::<Vec<_>>();
            return Ok(Records::from_names(Place::Bucket(bucket), names));
        }
        let dir = out.named().join(DONE);
        for folder in [&dir, &dir.with_file_name(STARTED)] {
            std::fs::create_dir_all(folder).with_context(|| {
                format!("cannot create the records' folder '{}'", folder.display())
            })?;
        }
        let names = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot read the records' folder '{}'", dir.display()))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect::<Vec<_>>();
        Ok(Records::from_names(Place::Folder(dir), names))
    }

    fn from_names(place: Place, names: Vec<String>) -> Records {
        let mut listed: HashMap<u64, Vec<u64>> = HashMap::new();
        for name in names {
            let Some((source, identity)) = name.split_once('-') else {
                continue;
            };
            let (Ok(source), Ok(identity)) = (
                u64::from_str_radix(source, 16),
                u64::from_str_radix(identity, 16),
            ) else {
                continue;
            };
            listed.entry(source).or_default().push(identity);
        }
        Records { place, listed }
    }

    /// What the records listed at the start say of `source`.
    pub(crate) fn find(&self, source: &Source) -> Found {
        match self.listed.get(&stable_hash(&source.name)) {
            None => Found::New,
            Some(identities) if identities.contains(&stable_hash(&source.identity)) => Found::Done,
            Some(_) => Found::Changed,
        }
    }

    /// Notes that an attempt at `source` begins, and says whether an earlier one began before
    /// (and was not recorded done: it was killed, or failed). Into a folder, a file under
    /// `.fastwrite/started/`: only after such an attempt is a file found in the way taken as
    /// the source's own (by its size and mtime), so two sources writing one path in a first
    /// run are always a conflict. A bucket's objects carry their source's tag, which tells
    /// without this.
    pub(crate) fn begin(&self, source: &Source) -> anyhow::Result<bool> {
        match &self.place {
            Place::Folder(dir) => {
                let path = dir.with_file_name(STARTED).join(record_name(source));
                match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                {
                    Ok(_) => Ok(false),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(true),
                    Err(e) => Err(anyhow::Error::new(e))
                        .with_context(|| format!("cannot write the record '{}'", path.display())),
                }
            }
            Place::Bucket(_) => Ok(true),
        }
    }

    /// Records `source` as done, its content `text`; never replaces a record (one already
    /// there, another worker's, is the same news).
    pub(crate) fn add(&self, source: &Source, text: &str) -> anyhow::Result<()> {
        let name = record_name(source);
        match &self.place {
            Place::Folder(dir) => {
                let path = dir.join(&name);
                let made = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .and_then(|mut file| {
                        use std::io::Write;
                        file.write_all(text.as_bytes())?;
                        file.sync_all()
                    });
                match made {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                    Err(e) => Err(anyhow::Error::new(e))
                        .with_context(|| format!("cannot write the record '{}'", path.display())),
                }
            }
            Place::Bucket(bucket) => bucket
                .create(&name, text.as_bytes().to_vec())
                .with_context(|| format!("cannot write the record '{}{name}'", bucket.url())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_the_same_everywhere() {
        // FNV-1a's published values.
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_record_tells_done_changed_and_new() {
        let dir = tempfile::tempdir().unwrap();
        let source = Source {
            name: "a.zip".into(),
            identity: "size 1".into(),
        };
        let records = Records::open(
            &crate::place::Place::folder(dir.path()),
            &crate::Options::default(),
        )
        .unwrap();
        assert_eq!(records.find(&source), Found::New);
        records.add(&source, "a").unwrap();
        records.add(&source, "again").unwrap();
        let records = Records::open(
            &crate::place::Place::folder(dir.path()),
            &crate::Options::default(),
        )
        .unwrap();
        assert_eq!(records.find(&source), Found::Done);
        let changed = Source {
            identity: "size 2".into(),
            ..source
        };
        assert_eq!(records.find(&changed), Found::Changed);
    }
}
