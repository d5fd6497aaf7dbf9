//! What a killed run leaves in a bucket: nothing under a key (a PUT and a completed multipart
//! upload appear whole or not at all), but its open multipart uploads, whose parts S3 keeps
//! (and bills) until they are aborted. S3 cannot say which uploads are whose, so each upload
//! fastwrite begins is marked: an object `PREFIX.fastwrite-uploads/ID` holding its key, its
//! upload id, and the run's machine, process and start, deleted when the upload completes or
//! is aborted. The next run into the prefix reads the marks: an upload whose run is gone (the
//! same machine, and its process no longer there; or begun more than a day ago) is aborted
//! and the run says so; one whose run still lives is left alone, and said too.
//!
//! The first look's probe (`looked.rs`) is made among the marks too, as a mark with no key
//! and no upload: a run killed between making it and deleting it leaves it where the next
//! run into the prefix finds it, and deletes it without a word.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload};

use super::Store;
use super::parse_key;
use super::url::BucketUrl;

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

/// Marks the upload `id` of `key` as this run's; returns the mark's key.
pub(crate) async fn mark(
    store: &dyn Store,
    url: &BucketUrl,
    key: &str,
    id: &str,
) -> anyhow::Result<Key> {
    let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
    let mark = parse_key(&format!("{}{MARKS}{hex}", url.prefix))?;
    let text = mark_text(key, id);
    store.put(&mark, PutPayload::from(text)).await?;
    Ok(mark)
}

/// The text of a mark: the key and upload (both empty for a probe), and who made it.
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

/// Aborts the uploads that runs now gone left under `url`'s prefix, and deletes their marks
/// (and the probes they left).
/// Returns what to say: the keys whose uploads were aborted, and those of live runs left
/// alone.
pub(crate) async fn clean(store: &dyn Store, url: &BucketUrl) -> anyhow::Result<Vec<String>> {
    let marks = parse_key(&format!("{}{MARKS}", url.prefix))?;
    let mut listing = store.list(Some(&marks));
    let (mut aborted, mut alive) = (Vec::new(), Vec::new());
    let host = crate::platform::host_name();
    while let Some(found) = listing.next().await {
        let found = found?;
        let text = store.get(&found.location).await?.bytes().await?;
        let text = String::from_utf8_lossy(&text);
        let fields: Vec<&str> = text.lines().collect();
        let [key, id, their_host, pid, started, ..] = fields[..] else {
            // Not a mark of ours (or cut short): left as it is.
            continue;
        };
        let pid: u32 = pid.parse().unwrap_or(0);
        let started: u64 = started.parse().unwrap_or(0);
        let old = now().saturating_sub(started) > GONE_AFTER.as_secs();
        let gone = old || (their_host == host && !crate::platform::process_alive(pid));
        if key.is_empty() {
            // A probe: a live run deletes its own within a round trip.
            if gone {
                store.delete(&found.location).await?;
            }
            continue;
        }
        if !gone {
            alive.push(format!("'{key}' (process {pid} on {their_host})"));
            continue;
        }
        match store
            .abort_multipart(&parse_key(key)?, &id.to_string())
            .await
        {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        store.delete(&found.location).await?;
        aborted.push(format!("'{key}'"));
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
