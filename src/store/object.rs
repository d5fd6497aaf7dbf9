//! What a file becomes in a bucket: its key, the metadata that rclone and s3fs read back, and
//! the part sizes of a large one.
//!
//! - **Key**: the prefix, then the entry's path with `/` between its names.
//! - **Metadata** (`x-amz-meta-*` on S3, `x-ms-meta-*` on Azure, `x-goog-meta-*` on GCS), in
//!   the convention both readers share: `mtime` in seconds since the epoch with the fraction
//!   after a point (`1700000000.25`: rclone's on S3, which s3fs reads too; on Azure and GCS
//!   rclone writes and reads RFC 3339, `2023-11-14T22:13:20.25Z`, and so does fastwrite there;
//!   on GCS also gsutil's `goog-reserved-file-mtime` in seconds), `mode` as the decimal
//!   `st_mode` with the file's type bits (`33188` is a regular file, 0644: s3fs's), and `uid`,
//!   `gid` in decimal when owners are kept. Azure takes only C# identifiers as names: a `-`
//!   becomes `_` there (`fastwrite_source`).
//! - **A folder that would be empty** is an empty object named `dir/`, as s3fs and the consoles
//!   make them (`s3/requests.rs` names it); **a symlink** is an object holding its target, with a `mode` of a link (s3fs's
//!   convention, which `s3fs` mounts back as a symlink).

use std::borrow::Cow;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use object_store::{Attribute, AttributeValue, Attributes};

use crate::place::StoreKind;
use crate::plan::Entry;

/// File type bits of `st_mode`, as s3fs keeps them in `mode`.
pub(crate) const S_IFREG: u32 = 0o100000;
pub(crate) const S_IFLNK: u32 = 0o120000;
pub(crate) const S_IFDIR: u32 = 0o040000;

/// A file at most this large is one PUT; a larger one a multipart upload (as the aws CLI's
/// 8 MB threshold, rounded to a part).
pub(crate) const SINGLE_PUT_MAX: u64 = 16 << 20;

/// The size of every part of a multipart upload but the last: parts grow with the file so that
/// S3's limit of 10,000 parts is never reached (5 TiB, S3's largest object, takes 8,544 parts, the last
/// of 2 GiB at most). The first thousand parts are 16 MiB, the next 32 MiB, and so on.
pub(crate) fn part_size(part: usize) -> usize {
    let doublings = (part / 1000).min(7) as u32;
    (16usize << 20) << doublings
}

/// The key of `path` (relative, validated) under `prefix` (empty, or ending in `/`).
pub(crate) fn key(prefix: &str, path: &Path) -> String {
    let mut key = String::from(prefix);
    for (i, part) in path.iter().enumerate() {
        if i > 0 {
            key.push('/');
        }
        key.push_str(&part.to_string_lossy());
    }
    key
}

/// `mtime` as rclone writes it: seconds, and the fraction when there is one.
pub(crate) fn mtime_value(time: SystemTime) -> Option<String> {
    let since = time.duration_since(UNIX_EPOCH).ok()?;
    let nanos = since.subsec_nanos();
    Some(if nanos == 0 {
        since.as_secs().to_string()
    } else {
        let fraction = format!("{nanos:09}");
        format!("{}.{}", since.as_secs(), fraction.trim_end_matches('0'))
    })
}

/// `mtime` as rclone writes it on `store`: seconds on S3, RFC 3339 to the nanosecond on Azure
/// and Google Cloud Storage (rclone's `azureblob` and `gcs` read no other form).
pub(crate) fn mtime_of(store: StoreKind, time: SystemTime) -> Option<String> {
    match store {
        StoreKind::S3 => mtime_value(time),
        StoreKind::Azure | StoreKind::Gcs => {
            time.duration_since(UNIX_EPOCH).ok()?;
            let time = chrono::DateTime::<chrono::Utc>::from(time);
            Some(time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        }
    }
}

/// The names under which other tools keep a file's mtime, read when rclone's `mtime` is not
/// there: gsutil's and Storage Transfer Service's `goog-reserved-file-mtime` (seconds),
/// gcsfuse's `gcsfuse_mtime` (RFC 3339) and azcopy's `modtime` (`--preserve-posix-properties`:
/// nanoseconds, or `2006-01-02 15:04:05 +0000` in its AMLFS style).
pub(crate) const OTHER_MTIMES: [&str; 3] = [GSUTIL_MTIME, "gcsfuse_mtime", "modtime"];

/// gsutil's mtime, in whole seconds, which fastwrite writes on Google Cloud Storage beside
/// rclone's.
pub(crate) const GSUTIL_MTIME: &str = "goog-reserved-file-mtime";

/// Reads an mtime kept under `name` (one of `OTHER_MTIMES`).
pub(crate) fn parse_other_mtime(name: &str, text: &str) -> Option<SystemTime> {
    let text = text.trim();
    if name == "modtime" {
        if let Ok(time) = chrono::DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f %z") {
            return Some(SystemTime::from(time.with_timezone(&chrono::Utc)));
        }
        let nanos: u64 = text.parse().ok()?;
        return UNIX_EPOCH.checked_add(std::time::Duration::from_nanos(nanos));
    }
    parse_mtime(text)
}

/// Reads `mtime` back, in either form rclone writes (seconds since the epoch, as s3fs reads
/// them too; RFC 3339, as on Azure).
pub(crate) fn parse_mtime(text: &str) -> Option<SystemTime> {
    if text.contains('T')
        && let Ok(time) = chrono::DateTime::parse_from_rfc3339(text.trim())
    {
        return Some(SystemTime::from(time.with_timezone(&chrono::Utc)));
    }
    let (secs, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    let secs: u64 = secs.parse().ok()?;
    let digits: String = fraction.chars().take(9).collect();
    let nanos = if digits.is_empty() {
        0
    } else {
        let n: u32 = digits.parse().ok()?;
        n * 10u32.pow(9 - digits.len() as u32)
    };
    UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

/// The user metadata naming the source of a run of many that wrote an object
/// (`Options::resume_tag`), as `store` names it (Azure's names are C# identifiers).
pub(crate) fn source_tag(store: StoreKind) -> &'static str {
    match store {
        StoreKind::S3 | StoreKind::Gcs => "fastwrite-source",
        StoreKind::Azure => "fastwrite_source",
    }
}

/// An object's user metadata: (name, value) pairs, sent as `x-amz-meta-NAME`.
pub(crate) type Meta = Vec<(&'static str, String)>;

/// The user metadata of an object made for `entry` on `store`, of type `file_type` (`S_IF*`),
/// with `mode` the permission bits it gets (`None`: none recorded) and the owner if kept.
pub(crate) fn metadata(
    store: StoreKind,
    entry: &Entry,
    file_type: u32,
    mode: Option<u32>,
    owner: Option<(u32, u32)>,
) -> Meta {
    let mut meta = Meta::new();
    if let Some(mtime) = entry.mtime.and_then(|t| mtime_of(store, t)) {
        meta.push(("mtime", mtime));
    }
    if store == StoreKind::Gcs
        && let Some(since) = entry.mtime.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
    {
        meta.push((GSUTIL_MTIME, since.as_secs().to_string()));
    }
    if let Some(mode) = mode {
        meta.push(("mode", (file_type | (mode & 0o7777)).to_string()));
    }
    if let Some((uid, gid)) = owner {
        meta.push(("uid", uid.to_string()));
        meta.push(("gid", gid.to_string()));
    }
    meta
}

/// The metadata as the requests of a store's own take it.
pub(crate) fn pairs(meta: &Meta) -> Vec<(&str, &str)> {
    meta.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

/// The metadata as `object_store` takes it.
pub(crate) fn attributes(meta: &Meta) -> Attributes {
    let mut attributes = Attributes::new();
    for (name, value) in meta {
        attributes.insert(
            Attribute::Metadata(Cow::Borrowed(name)),
            AttributeValue::from(value.clone()),
        );
    }
    attributes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn mtime_goes_there_and_back() {
        for (time, text) in [
            (UNIX_EPOCH + Duration::new(1_700_000_000, 0), "1700000000"),
            (
                UNIX_EPOCH + Duration::new(1_700_000_000, 250_000_000),
                "1700000000.25",
            ),
            // 100 ns: the finest a Windows time holds.
            (UNIX_EPOCH + Duration::new(5, 100), "5.0000001"),
        ] {
            assert_eq!(mtime_value(time).unwrap(), text);
            assert_eq!(parse_mtime(text).unwrap(), time);
        }
        assert_eq!(parse_mtime("x"), None);
        let time = UNIX_EPOCH + Duration::new(1_700_000_000, 250_000_000);
        let azure = mtime_of(StoreKind::Azure, time).unwrap();
        assert_eq!(azure, "2023-11-14T22:13:20.250Z");
        assert_eq!(parse_mtime(&azure).unwrap(), time);
        // rclone's own form on Azure and GCS, nine digits.
        assert_eq!(parse_mtime("2023-11-14T22:13:20.250000000Z").unwrap(), time);
        assert_eq!(mtime_of(StoreKind::Gcs, time).unwrap(), azure);
        // Other tools' names.
        let whole = UNIX_EPOCH + Duration::new(1_700_000_000, 0);
        assert_eq!(
            parse_other_mtime(GSUTIL_MTIME, "1700000000").unwrap(),
            whole
        );
        assert_eq!(
            parse_other_mtime("gcsfuse_mtime", "2023-11-14T22:13:20.25Z").unwrap(),
            time
        );
        assert_eq!(
            parse_other_mtime("modtime", "1700000000250000000").unwrap(),
            time
        );
        assert_eq!(
            parse_other_mtime("modtime", "2023-11-14 22:13:20 +0000").unwrap(),
            whole
        );
    }

    #[test]
    fn parts_stay_within_ten_thousand_for_five_tebibytes() {
        let mut total = 0u64;
        let mut parts = 0;
        while total < 5 << 40 {
            total += part_size(parts) as u64;
            parts += 1;
        }
        assert!(parts <= 10_000, "{parts} parts");
        assert!(part_size(0) >= 5 << 20);
    }

    #[test]
    fn keys_join_names_with_slashes() {
        assert_eq!(key("p/", Path::new("a/b.txt")), "p/a/b.txt");
        assert_eq!(key("", Path::new("a")), "a");
    }
}
