//! The bucket's client: Apache Arrow's `object_store` (S3 over rustls), found and configured as
//! the aws CLI finds its settings, with every HTTP exchange metered on its way through.
//!
//! Settings, in the aws CLI's order: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION` (or `AWS_DEFAULT_REGION`), `AWS_ENDPOINT_URL` from the
//! environment; else the profile `AWS_PROFILE` names (or `default`) in `~/.aws/credentials`
//! and `~/.aws/config` (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE` move them); else
//! container and instance credentials, which `object_store` asks for itself. An endpoint given
//! as `http://` is allowed plain HTTP: the user named it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};

use super::url::BucketUrl;
use crate::sync::Unpoisoned;

/// What the run's requests met, counted as they return: the gate sizes the uploads in flight
/// from it (`flight.rs`).
#[derive(Debug, Default)]
pub(crate) struct Meter {
    pub requests: AtomicU64,
    /// Answers that asked the client to slow down: 503 (S3's `SlowDown`) and 429.
    pub throttled: AtomicU64,
    /// The sum of every request's time, in microseconds.
    pub micros: AtomicU64,
    /// The metered client itself, for the requests the store does not make (`raw.rs`).
    pub client: std::sync::OnceLock<HttpClient>,
    /// Objects (by URL) an attempt to PUT got no answer for, or a 5xx or 429: the client
    /// tries again, and a later attempt may meet the first one's object. Forgotten when the
    /// upload ends.
    uncertain: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Meter {
    /// Whether any PUT is uncertain now (the usual answer, no: nothing to look up).
    pub(crate) fn any_uncertain(&self) -> bool {
        !self.uncertain.lock().unpoisoned().is_empty()
    }

    /// Whether an attempt to PUT `url` went unanswered (or failed with a 5xx or 429); forgets it.
    pub(crate) fn was_uncertain(&self, url: &str) -> bool {
        self.uncertain.lock().unpoisoned().remove(url)
    }

    /// The mean time a request took so far.
    pub(crate) fn mean(&self) -> Option<Duration> {
        let n = self.requests.load(Ordering::Relaxed);
        (n > 0).then(|| Duration::from_micros(self.micros.load(Ordering::Relaxed) / n))
    }
}

/// The HTTP client under the store, metering what passes. It holds its meter weakly: the meter
/// holds the client (`Meter::client`), and a strong link back would keep both, with the
/// client's connection pool and TLS roots, alive past the run (a run of many archives leaked
/// about 0.8 MiB an archive so).
#[derive(Debug)]
struct Metered {
    inner: HttpClient,
    meter: std::sync::Weak<Meter>,
}

#[async_trait::async_trait]
impl HttpService for Metered {
    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        // The process's cap first: the time measured is the store's, not the wait for a slot.
        super::pace::wait_turn().await;
        let start = Instant::now();
        // A PUT of an object (no query: not a part): its URL, should its answer be lost.
        let put = (request.method() == http::Method::PUT && request.uri().query().is_none())
            .then(|| request.uri().to_string());
        let response = self.inner.execute(request).await;
        // The run that made the client is over: nothing left to meter.
        let Some(meter) = self.meter.upgrade() else {
            return response;
        };
        let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        meter.requests.fetch_add(1, Ordering::Relaxed);
        meter.micros.fetch_add(micros, Ordering::Relaxed);
        if let Ok(response) = &response
            && matches!(response.status().as_u16(), 429 | 503)
        {
            meter.throttled.fetch_add(1, Ordering::Relaxed);
        }
        let unanswered = match &response {
            Ok(response) => {
                response.status().is_server_error() || response.status().as_u16() == 429
            }
            Err(_) => true,
        };
        if let Some(url) = put.filter(|_| unanswered) {
            meter.uncertain.lock().unpoisoned().insert(url);
        }
        response
    }
}

#[derive(Debug)]
struct MeteredConnector(Arc<Meter>);

impl HttpConnector for MeteredConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        let client = HttpClient::new(Metered {
            inner,
            meter: Arc::downgrade(&self.0),
        });
        let _ = self.0.client.set(client.clone());
        Ok(client)
    }
}

/// The store for `url`'s bucket, with the run's meter on every request, and its region.
pub(crate) fn store(url: &BucketUrl, meter: Arc<Meter>) -> anyhow::Result<(AmazonS3, String)> {
    let mut builder = AmazonS3Builder::from_env();
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if env("AWS_ACCESS_KEY_ID").is_none() {
        for (key, value) in profile_settings()? {
            builder = builder.with_config(key, value);
        }
    }
    let plain_http = builder
        .get_config_value(&AmazonS3ConfigKey::Endpoint)
        .is_some_and(|endpoint| endpoint.starts_with("http://"))
        || env("AWS_ALLOW_HTTP").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let region = builder
        .get_config_value(&AmazonS3ConfigKey::Region)
        .or_else(|| builder.get_config_value(&AmazonS3ConfigKey::DefaultRegion))
        // The aws CLI's default, which S3-compatible servers ignore.
        .unwrap_or_else(|| "us-east-1".to_string());
    builder = builder.with_region(&region);
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(15),
            base: 2.0,
        },
        max_retries: 10,
        retry_timeout: Duration::from_secs(180),
    };
    builder
        .with_bucket_name(&url.bucket)
        .with_retry(retry)
        .with_client_options(
            ClientOptions::new()
                .with_allow_http(plain_http)
                .with_connect_timeout(Duration::from_secs(10))
                .with_timeout(Duration::from_secs(300))
                .with_pool_idle_timeout(Duration::from_secs(60)),
        )
        .with_http_connector(MeteredConnector(meter))
        .build()
        .map(|store| (store, region))
        .with_context(|| format!("cannot use bucket '{}'", url.bucket))
}

/// The settings of the aws CLI's profile (`AWS_PROFILE`, else `default`): keys and token from
/// the credentials file, region and endpoint from the config file (where a profile other than
/// `default` is `[profile NAME]`). Missing files give nothing; a profile named and absent is
/// an error, as for the aws CLI.
fn profile_settings() -> anyhow::Result<Vec<(AmazonS3ConfigKey, String)>> {
    let named = std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty());
    let profile = named.clone().unwrap_or_else(|| "default".to_string());
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |var: &str, name: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let credentials = file("AWS_SHARED_CREDENTIALS_FILE", "credentials")
        .map(|path| read_ini(&path))
        .transpose()?
        .unwrap_or_default();
    let config = file("AWS_CONFIG_FILE", "config")
        .map(|path| read_ini(&path))
        .transpose()?
        .unwrap_or_default();
    let in_config = if profile == "default" {
        profile.clone()
    } else {
        format!("profile {profile}")
    };
    let from_credentials = credentials.get(&profile);
    let from_config = config.get(&in_config);
    if named.is_some() && from_credentials.is_none() && from_config.is_none() {
        anyhow::bail!(
            "the profile '{profile}' (AWS_PROFILE) is in neither ~/.aws/credentials nor ~/.aws/config"
        );
    }
    let mut settings = Vec::new();
    for section in [from_config, from_credentials].into_iter().flatten() {
        for (name, key) in [
            ("aws_access_key_id", AmazonS3ConfigKey::AccessKeyId),
            ("aws_secret_access_key", AmazonS3ConfigKey::SecretAccessKey),
            ("aws_session_token", AmazonS3ConfigKey::Token),
            ("region", AmazonS3ConfigKey::Region),
            ("endpoint_url", AmazonS3ConfigKey::Endpoint),
        ] {
            if let Some(value) = section.get(name) {
                let from_env = match key {
                    AmazonS3ConfigKey::Region => std::env::var("AWS_REGION").is_ok(),
                    AmazonS3ConfigKey::Endpoint => std::env::var("AWS_ENDPOINT_URL").is_ok(),
                    _ => false,
                };
                if !from_env {
                    settings.push((key, value.clone()));
                }
            }
        }
    }
    Ok(settings)
}

type Sections = HashMap<String, HashMap<String, String>>;

/// An aws CLI settings file: `[section]` headers and `name = value` lines (`#` and `;` start
/// comments; indented lines belong to a nested setting, which this reads past).
fn read_ini(path: &Path) -> anyhow::Result<Sections> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Sections::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read '{}'", path.display())),
    };
    Ok(parse_ini(&text))
}

fn parse_ini(text: &str) -> Sections {
    let mut sections = Sections::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_string();
            sections.entry(name.clone()).or_default();
            current = Some(name);
        } else if let (Some(section), Some((name, value))) = (&current, line.split_once('=')) {
            sections
                .entry(section.clone())
                .or_default()
                .insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aws_settings_file_is_read_as_the_cli_reads_it() {
        let text = "[default]\naws_access_key_id = AK\n# comment\nregion=eu-west-1\n\n[profile lab]\nendpoint_url = http://127.0.0.1:7070\ns3 =\n  max_concurrent_requests = 20\n";
        let sections = parse_ini(text);
        assert_eq!(sections["default"]["aws_access_key_id"], "AK");
        assert_eq!(sections["default"]["region"], "eu-west-1");
        assert_eq!(
            sections["profile lab"]["endpoint_url"],
            "http://127.0.0.1:7070"
        );
        assert!(!sections["profile lab"].contains_key("max_concurrent_requests"));
    }
}
