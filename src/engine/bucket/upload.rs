//! One object's upload: a PUT that never replaces unless asked (and what it does where the
//! store ignores the condition, or an attempt's answer was lost), the claim of an object an
//! earlier attempt of the same source left, and the server-side copy of a hard link.

use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::{Job, Shared};
use crate::options::Overwrite;
use crate::store::object;
use crate::store::{head_with_metadata, md5_hex, parse_key, taken};

/// One PUT (or, where the store ignores conditions and the key may not be replaced, a look at
/// the key first). `Ok(None)`: the key exists and the policy keeps it.
pub(super) async fn upload(
    shared: &Shared,
    job: &Job,
    data: Vec<u8>,
) -> Result<Outcome, object_store::Error> {
    let key = parse_key(&job.key)?;
    let mut mode = job.mode.clone();
    if !shared.conditional
        && shared.overwrite != Overwrite::Replace
        && matches!(mode, PutMode::Create)
    {
        match shared.store.head(&key).await {
            Ok(_) => return Ok(Outcome::Exists),
            Err(object_store::Error::NotFound { .. }) => mode = PutMode::Overwrite,
            Err(e) => return Err(e),
        }
    }
    let digest = md5_hex(&data);
    let size = data.len() as u64;
    let payload = PutPayload::from(data);
    let opts = |mode| PutOptions {
        mode,
        attributes: object::attributes(&job.meta),
        ..PutOptions::default()
    };
    // What is at the key: `None` for nothing, else whether it is this upload's content (the
    // same size and MD5).
    let look = || async {
        let found = shared.requests.content(&job.key).await?;
        anyhow::Ok(found.map(|(there, md5)| there == size && md5.as_deref() == Some(&digest)))
    };
    // Whether an attempt of this PUT went unanswered (no answer, a 5xx, a 429: the meter saw
    // it); forgotten once asked.
    let uncertain = || async {
        shared.meter.any_uncertain()
            && shared
                .requests
                .url(&key)
                .await
                .is_ok_and(|url| shared.meter.was_uncertain(&url))
    };
    let mut tries = 0;
    let put = loop {
        let put = shared
            .store
            .put_opts(&key, payload.clone(), opts(mode.clone()))
            .await;
        let Err(e) = &put else {
            // An attempt that went unanswered, then one that landed: nothing left to tell.
            uncertain().await;
            break put;
        };
        if taken(e) || tries >= shared.resends || !uncertain().await {
            break put;
        }
        // Its answer was lost: the PUT may have landed all the same. Look before sending it
        // again (a create sent again would meet its own object as someone's).
        tries += 1;
        match look().await {
            Ok(Some(true)) => return Ok(Outcome::Written),
            Ok(Some(false)) if matches!(mode, PutMode::Create) => return Ok(Outcome::Exists),
            Ok(_) => {}
            Err(_) => break put,
        }
        tokio::time::sleep(std::time::Duration::from_millis(200 << tries)).await;
    };
    match put {
        Ok(_) => Ok(Outcome::Written),
        Err(e) if taken(&e) && shared.overwrite == Overwrite::Update => {
            // Replaced only if what is there is older (its `mtime`, else its upload time).
            if older(shared, &key, job.mtime).await? {
                shared
                    .store
                    .put_opts(&key, payload, opts(PutMode::Overwrite))
                    .await?;
                Ok(Outcome::Written)
            } else {
                Ok(Outcome::Exists)
            }
        }
        Err(e) if taken(&e) => {
            // The client's own retry can meet its first attempt's object, which landed though
            // its answer was lost: only then (an attempt went unanswered, as the meter saw), the
            // same size and content (a single PUT's ETag is its MD5 on S3; Azure keeps a
            // Content-MD5) is this upload's own.
            // Anything else is someone's key.
            if !uncertain().await {
                return Ok(Outcome::Exists);
            }
            match look().await {
                Ok(Some(true)) => Ok(Outcome::Written),
                _ => Ok(Outcome::Exists),
            }
        }
        Err(e) => Err(e),
    }
}

/// An upload that met an existing key: the run's own (an earlier attempt at the same source
/// of a run of many left it, `Options::resume_tag`) where the object carries the run's tag,
/// then counted as written; anyone else's otherwise.
pub(super) async fn claim(
    shared: &Shared,
    job: &Job,
    result: Result<Outcome, object_store::Error>,
) -> Result<Outcome, object_store::Error> {
    let (Ok(Outcome::Exists), Some(tag)) = (&result, &shared.tag) else {
        return result;
    };
    // A folder marker's key ends in `/`, which the client's keys cannot hold: never claimed.
    let Ok(key) = parse_key(&job.key) else {
        return result;
    };
    match shared.store.get_opts(&key, head_with_metadata()).await {
        Ok(found) if carries(shared.url.store, tag, &found.attributes) => Ok(Outcome::Written),
        _ => result,
    }
}

/// Whether an object's attributes carry the resume tag `tag` (`claim`).
pub(super) fn carries(
    store: crate::place::StoreKind,
    tag: &str,
    attributes: &object_store::Attributes,
) -> bool {
    attributes
        .get(&object_store::Attribute::Metadata(
            object::source_tag(store).into(),
        ))
        .is_some_and(|value| value.as_ref() == tag)
}

/// Whether the object at `key` is older than `mtime`: by its `mtime` metadata where it has
/// one (rclone's, s3fs's, fastwrite's), else by when it was uploaded.
pub(super) async fn older(
    shared: &Shared,
    key: &Key,
    mtime: Option<std::time::SystemTime>,
) -> Result<bool, object_store::Error> {
    if mtime.is_none() {
        return Ok(false);
    }
    let found = shared.store.get_opts(key, head_with_metadata()).await?;
    Ok(older_than(&found, mtime))
}

/// Whether the object `found` (a HEAD's answer, its metadata asked for) is older than `mtime`:
/// its recorded `mtime`, else its upload time. An entry with no time is never newer.
pub(super) fn older_than(
    found: &object_store::GetResult,
    mtime: Option<std::time::SystemTime>,
) -> bool {
    let Some(mtime) = mtime else {
        return false;
    };
    let recorded = found
        .attributes
        .get(&object_store::Attribute::Metadata("mtime".into()))
        .and_then(|value| object::parse_mtime(value));
    let theirs = recorded.unwrap_or_else(|| found.meta.last_modified.into());
    theirs < mtime
}

/// A server-side copy for a hard link.
pub(super) async fn copy(
    shared: &Shared,
    from: &str,
    to: &str,
    mode: PutMode,
) -> Result<Outcome, object_store::Error> {
    let (from, to) = (parse_key(from)?, parse_key(to)?);
    if matches!(mode, PutMode::Create) {
        match shared.store.head(&to).await {
            Ok(_) => return Ok(Outcome::Exists),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    shared
        .store
        .copy(&from, &to)
        .await
        .map(|()| Outcome::Written)
}

pub(super) enum Outcome {
    Written,
    /// The key exists (a create met it).
    Exists,
}
