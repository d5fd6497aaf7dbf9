//! The first look at a run's bucket, once per bucket in a process: one list request (a missing
//! bucket or refused credentials stop the run there, before anything is written) and, unless
//! every key may be replaced, whether the store honours `If-None-Match: *` (a probe object
//! made twice, then deleted: three requests; it is made among the marks of `stale.rs`, so
//! that a run killed before deleting it leaves it where the next run finds it). A run of many archives opens the bucket once per
//! archive; what the first of them learnt serves the others for [`FRESH`], so an archive's
//! start-up is its own prefix's search for stale uploads alone (`stale.rs`), not four round
//! trips more.
//!
//! What the look learnt is a bucket's, as the same endpoint and credentials see it: the key
//! names the bucket, the endpoint and the access key (or profile) of the environment.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use futures_util::StreamExt;
use object_store::{ObjectStoreExt, PutMode, PutOptions};

use super::keys::{parse_key, taken};
use super::requests::Store;
use super::said::explain;
use crate::options::Overwrite;
use crate::place::BucketUrl;
use crate::sync::Unpoisoned;

/// How long a look serves later runs of the process: a run of many archives, not a server's
/// lifetime (a bucket's settings may change).
const FRESH: Duration = Duration::from_secs(300);

/// Per bucket: when it was looked at, and whether it honours conditional writes (`None`: not
/// probed, every key might be replaced).
static LOOKED: Mutex<Option<Looks>> = Mutex::new(None);

type Looks = HashMap<String, (Instant, Option<bool>)>;

/// Held while a look is made.
static ONE_LOOK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What a fresh look at the bucket `key` says, if one is known: whether conditional writes
/// are honoured (with `overwrite` replacing every key, that they need not be).
fn known(key: &str, overwrite: Overwrite) -> Option<bool> {
    let looked = LOOKED.lock().unpoisoned();
    let (when, conditional) = looked.as_ref()?.get(key).copied()?;
    if when.elapsed() >= FRESH {
        return None;
    }
    if overwrite == Overwrite::Replace {
        return Some(true);
    }
    conditional
}

fn key_of(url: &BucketUrl) -> String {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    format!(
        "{}\n{}\n{}\n{}",
        url.bucket,
        env("AWS_ENDPOINT_URL"),
        env("AWS_ACCESS_KEY_ID"),
        env("AWS_PROFILE")
    )
}

/// The first look at `url`'s bucket (see the module's docs): whether conditional writes are
/// honoured; `Err` if the bucket cannot be used.
pub(crate) async fn first_look(
    store: &dyn Store,
    url: &BucketUrl,
    overwrite: Overwrite,
) -> anyhow::Result<bool> {
    let key = key_of(url);
    if let Some(conditional) = known(&key, overwrite) {
        return Ok(conditional);
    }
    // One look at a time: the lanes of a run of many start together, and the first to look
    // serves the others (an async lock, so that waiting blocks no runtime's thread).
    let _one = ONE_LOOK.lock().await;
    if let Some(conditional) = known(&key, overwrite) {
        return Ok(conditional);
    }
    let conditional = look(store, url, overwrite).await?;
    let probed = (overwrite != Overwrite::Replace).then_some(conditional);
    LOOKED
        .lock()
        .unpoisoned()
        .get_or_insert_with(HashMap::new)
        .insert(key, (Instant::now(), probed));
    Ok(conditional)
}

/// The look itself: one list request, and unless every key may be replaced the probe (an
/// object made twice, then deleted).
async fn look(store: &dyn Store, url: &BucketUrl, overwrite: Overwrite) -> anyhow::Result<bool> {
    let prefix = parse_key(&url.prefix)?;
    if let Some(Err(e)) = store.list(Some(&prefix)).next().await {
        return Err(anyhow!(explain(&e)));
    }
    if overwrite == Overwrite::Replace {
        return Ok(true);
    }
    let (probe, body) = super::stale::probe(url)?;
    let create = || PutOptions::from(PutMode::Create);
    match store.put_opts(&probe, body.clone(), create()).await {
        // The probe's name is this run's alone: there already, it is a retry meeting its own
        // first attempt.
        Ok(_) => {}
        Err(e) if taken(&e) => {}
        Err(e) => {
            let word = url.store.bucket_word();
            return Err(anyhow!(explain(&e)).context(format!("cannot write in the {word}")));
        }
    }
    let second = store.put_opts(&probe, body, create()).await;
    let _ = store.delete(&probe).await;
    let conditional = second.as_ref().is_err_and(taken);
    Ok(conditional)
}
