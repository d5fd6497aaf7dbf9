//! Google Cloud Storage (`gs://BUCKET/PREFIX`): the client, found and configured as gcloud
//! users set it, and the requests of our own (`requests.rs`).
//!
//! Credentials, as Google's client libraries find them: `GOOGLE_APPLICATION_CREDENTIALS` (a
//! service account's key file, or the file `gcloud auth application-default login` writes),
//! else that file where gcloud keeps it (`~/.config/gcloud/application_default_credentials.json`),
//! else the metadata server of the machine it runs on (Compute Engine, GKE, Cloud Run); besides
//! these, every `GOOGLE_*` setting `object_store` reads itself (`GOOGLE_SERVICE_ACCOUNT`,
//! `GOOGLE_SERVICE_ACCOUNT_KEY`, `GOOGLE_BASE_URL`). `STORAGE_EMULATOR_HOST` (`host:port` or a
//! URL), which gcloud's client libraries read, names an emulator: no credentials are sent to
//! it, and plain HTTP is allowed.

mod requests;

use std::sync::Arc;

use anyhow::Context;
use object_store::client::HttpConnector;
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};

use super::client::{self, Meter, MeteredConnector, Retries};
use super::requests::{Requests, Store};
use crate::place::BucketUrl;

/// Where Google Cloud Storage answers, both its XML and its JSON API.
const GCS_URL: &str = "https://storage.googleapis.com";

/// A service account's key that asks `object_store` for no token at all (an emulator takes
/// none).
const NO_CREDENTIALS: &str =
    r#"{"private_key": "", "private_key_id": "", "client_email": "", "disable_oauth": true}"#;

/// The client of `url`'s bucket, with the run's meter on every request, and the requests of
/// our own, sent with the same credentials through a client metered alike.
pub(super) fn connect(
    url: &BucketUrl,
    meter: &Arc<Meter>,
    retries: Retries,
) -> anyhow::Result<(Arc<dyn Store>, Arc<dyn Requests>)> {
    let emulator = emulator_host();
    let builder = match &emulator {
        Some(host) => GoogleCloudStorageBuilder::new()
            .with_base_url(host)
            .with_service_account_key(NO_CREDENTIALS),
        None => GoogleCloudStorageBuilder::from_env(),
    };
    let base = emulator
        .clone()
        .or_else(|| builder.get_config_value(&GoogleConfigKey::BaseUrl))
        .unwrap_or_else(|| GCS_URL.to_string());
    let base = base.trim_end_matches('/').to_string();
    let unsigned = emulator.is_some()
        || builder
            .get_config_value(&GoogleConfigKey::SkipSignature)
            .is_some_and(|v| client::is_true(&v));
    let options = client::options(base.starts_with("http://"), &super::tls::roots(None)?)?;
    let retry = retries.config();
    let store = builder
        .with_bucket_name(&url.bucket)
        .with_retry(retry.clone())
        .with_client_options(options.clone())
        .with_http_connector(MeteredConnector(Arc::clone(meter)))
        .build()
        .with_context(|| format!("cannot use the bucket '{}'", url.bucket))?;
    // A client of our own: the first one the builder made may be its metadata server's, whose
    // connections time out after a second.
    let http = MeteredConnector(Arc::clone(meter)).connect(&options)?;
    let client = super::wire::Client { http, retry };
    let requests = requests::GcsRequests::new(store.clone(), client, base, unsigned, url);
    Ok((Arc::new(store), Arc::new(requests)))
}

/// The emulator's URL, from `STORAGE_EMULATOR_HOST` (`host:port`, as gcloud's libraries take
/// it, or a URL).
fn emulator_host() -> Option<String> {
    let host = std::env::var("STORAGE_EMULATOR_HOST").ok()?;
    let host = host.trim().trim_end_matches('/');
    if host.is_empty() {
        return None;
    }
    Some(if host.contains("://") {
        host.to_string()
    } else {
        format!("http://{host}")
    })
}
