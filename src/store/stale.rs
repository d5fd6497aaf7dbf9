//! What a killed run leaves in a bucket: nothing under a key (a PUT and a completed multipart
//! upload appear whole or not at all), but its open multipart uploads, whose parts S3 keeps
//! (and bills) until they are aborted. S3 cannot say which uploads are whose, so each upload
//! fastwrite begins is marked, before it begins: an object `PREFIX.fastwrite-uploads/NAME`
//! holding its key and the run's machine, process and start, deleted when the upload
//! completes or is aborted. The next run into the prefix reads the marks: the uploads of a
//! marked key whose run is gone (the same machine, and its process no longer there; or begun
//! more than a day ago) are aborted and the run says so; those of a run that still lives are
//! left alone, and said too.
//!
//! The mark comes first because a kill can fall anywhere: between the mark and the upload's
//! start there is a mark of no upload (deleted, nothing said); between the start and the
//! upload's end, an upload the mark names by its key. A mark made after the start, naming the
//! upload by its id, would leave an upload no mark names to a kill in between (CI's kill test
//! found one). So the next run asks the store for the key's open uploads
//! (ListMultipartUploads) and aborts those begun since the mark was made, less a margin for
//! the two clocks, and not the key of a live run's mark. A mark an earlier fastwrite made
//! after the start (its upload id on its second line) is aborted by that id.
//!
//! The first look's probe (`looked.rs`) is made among the marks too, as a mark with no key
//! and no upload: a run killed between making it and deleting it leaves it where the next
//! run into the prefix finds it, and deletes it without a word.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload};

use super::keys::parse_key;
use super::requests::{Requests, Store};
use crate::place::BucketUrl;

/// Where the marks are, under the prefix.
const MARKS: &str = ".fastwrite-uploads/";

/// Past this age an upload's run is taken for gone, wherever it ran.
const GONE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Whether `key` is one of the marks under `url`'s prefix (never the tree's).
pub(crate) fn is_mark(url: &BucketUrl, key: &str) -> bool {
    key.strip_prefix(url.prefix.as_str())
        .is_some_and(|rest| rest.starts_with(MARKS))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// Marks `key` as having an upload of this run's, about to begin; returns the mark's key.
pub(crate) async fn mark(store: &dyn Store, url: &BucketUrl, key: &str) -> anyhow::Result<Key> {
    static MADE: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let name = format!(
        "{}{MARKS}up-{}-{nanos}-{}",
        url.prefix,
        std::process::id(),
        MADE.fetch_add(1, Ordering::Relaxed)
    );
    let mark = parse_key(&name)?;
    store
        .put(&mark, PutPayload::from(mark_text(key, "")))
        .await?;
    Ok(mark)
}

/// The text of a mark: the key and an upload id (both empty for a probe; the id empty for
/// every mark this version makes), and who made it.
fn mark_text(key: &str, id: &str) -> String {
    format!(
        "{key}\n{id}\n{}\n{}\n{}\n",
        crate::platform::host_name(),
        std::process::id(),
        now()
    )
}

/// The key and body of the first look's probe under `url`'s prefix: a mark of no upload, this
/// process's alone (its number and the time in its name).
pub(crate) fn probe(url: &BucketUrl) -> anyhow::Result<(Key, PutPayload)> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let key = format!("{}{MARKS}probe-{}-{nanos}", url.prefix, std::process::id());
    Ok((parse_key(&key)?, PutPayload::from(mark_text("", ""))))
}

/// Leeway between this machine's clock, which dated a mark, and the store's, which dates an
/// upload's start: an upload of a marked key begun this long before its mark is still its.
const CLOCKS: Duration = Duration::from_secs(15 * 60);

/// One mark as read.
struct Mark {
    at: Key,
    key: String,
    /// The upload's id, in a mark an earlier fastwrite made.
    id: String,
    who: String,
    started: u64,
    gone: bool,
}

/// Aborts the uploads that runs now gone left under `url`'s prefix, and deletes their marks
/// (and the probes they left).
/// Returns what to say: the keys whose uploads were aborted, and those of live runs left
/// alone.
pub(crate) async fn clean(
    store: &dyn Store,
    requests: &dyn Requests,
    url: &BucketUrl,
) -> anyhow::Result<Vec<String>> {
    let marks = parse_key(&format!("{}{MARKS}", url.prefix))?;
    let mut listing = store.list(Some(&marks));
    let host = crate::platform::host_name();
    let mut read = Vec::new();
    while let Some(found) = listing.next().await {
        let found = found?;
        // A mark listed can be gone by its GET: its upload completed, or it was this very
        // run's probe (the first look runs beside this).
        let text = match store.get(&found.location).await {
            Ok(got) => got.bytes().await,
            Err(e) => Err(e),
        };
        let text = match text {
            Ok(text) => text,
            Err(object_store::Error::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        let text = String::from_utf8_lossy(&text);
        let fields: Vec<&str> = text.lines().collect();
        let [key, id, their_host, pid, started, ..] = fields[..] else {
            // Not a mark of ours (or cut short): left as it is.
            continue;
        };
        let pid: u32 = pid.parse().unwrap_or(0);
        let started: u64 = started.parse().unwrap_or(0);
        let old = now().saturating_sub(started) > GONE_AFTER.as_secs();
        read.push(Mark {
            at: found.location,
            key: key.to_string(),
            id: id.to_string(),
            who: format!("process {pid} on {their_host}"),
            started,
            gone: old || (their_host == host && !crate::platform::process_alive(pid)),
        });
    }
    let live: std::collections::HashSet<&str> = read
        .iter()
        .filter(|mark| !mark.gone)
        .map(|mark| mark.key.as_str())
        .collect();
    let (mut aborted, mut alive) = (Vec::new(), Vec::new());
    for mark in &read {
        if mark.key.is_empty() {
            // A probe: a live run deletes its own within a round trip.
            if mark.gone {
                store.delete(&mark.at).await?;
            }
            continue;
        }
        if !mark.gone {
            alive.push(format!("'{}' ({})", mark.key, mark.who));
            continue;
        }
        let ids = if !mark.id.is_empty() {
            vec![mark.id.clone()]
        } else if live.contains(mark.key.as_str()) {
            // A live run uploads the same key now: which upload is whose cannot be told. The
            // mark stays for a run after that one.
            continue;
        } else {
            let since = (UNIX_EPOCH + Duration::from_secs(mark.started))
                .checked_sub(CLOCKS)
                .unwrap_or(UNIX_EPOCH);
            requests
                .uploads(&mark.key)
                .await?
                .into_iter()
                .filter(|(_, began)| *began >= since)
                .map(|(id, _)| id)
                .collect()
        };
        let key = parse_key(&mark.key)?;
        for id in &ids {
            match store.abort_multipart(&key, id).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        store.delete(&mark.at).await?;
        aborted.extend(ids.iter().map(|_| format!("'{}'", mark.key)));
    }
    let mut said = Vec::new();
    let list = |keys: &[String]| {
        let shown: Vec<&str> = keys.iter().take(5).map(String::as_str).collect();
        let more = keys.len().saturating_sub(shown.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!("{}{more}", shown.join(", "))
    };
    if !aborted.is_empty() {
        said.push(format!(
            "aborted {} incomplete multipart uploads a killed fastwrite run left in {url}: {}",
            aborted.len(),
            list(&aborted)
        ));
    }
    if !alive.is_empty() {
        said.push(format!(
            "left alone {} multipart uploads of a fastwrite run still running into {url}: {}",
            alive.len(),
            list(&alive)
        ));
    }
    Ok(said)
}
