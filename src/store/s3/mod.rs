//! Amazon S3 and the servers that speak its API (MinIO, versitygw, Ceph, R2...): the client,
//! found and configured as the aws CLI finds its settings, and the requests of our own
//! (`requests.rs`).
//!
//! Settings, in the aws CLI's order: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION` (or `AWS_DEFAULT_REGION`), `AWS_ENDPOINT_URL` from the
//! environment; else the profile `AWS_PROFILE` names (or `default`) in `~/.aws/credentials`
//! and `~/.aws/config` (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE` move them); else
//! container and instance credentials, which `object_store` asks for itself. An endpoint given
//! as `http://` is allowed plain HTTP: the user named it. A private CA: `AWS_CA_BUNDLE`, else
//! the profile's `ca_bundle` (and what every store takes, `tls.rs`).

mod requests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use object_store::RetryConfig;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};

use super::client::{self, Meter, MeteredConnector, Retries};
use super::requests::{Requests, Store};
use super::tls;
use crate::place::BucketUrl;

/// The client of `url`'s bucket, with the run's meter on every request, and the requests of
/// our own, signed as its are and sent through the same metered client.
pub(super) fn connect(
    url: &BucketUrl,
    meter: &Arc<Meter>,
    retries: Retries,
) -> anyhow::Result<(Arc<dyn Store>, Arc<dyn Requests>)> {
    let (store, region, retry) = store(url, Arc::clone(meter), retries)?;
    let http = meter
        .client
        .get()
        .cloned()
        .context("the store made no HTTP client")?;
    let client = super::wire::Client { http, retry };
    let requests = requests::S3Requests::new(store.clone(), client, region);
    Ok((Arc::new(store), Arc::new(requests)))
}

/// The store for `url`'s bucket, with the run's meter on every request; its region, and how it
/// retries (`retries`, else the aws CLI's `AWS_MAX_ATTEMPTS` or the profile's `max_attempts`).
pub(super) fn store(
    url: &BucketUrl,
    meter: Arc<Meter>,
    retries: Retries,
) -> anyhow::Result<(AmazonS3, String, RetryConfig)> {
    let mut builder = AmazonS3Builder::from_env();
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    // The profile's keys where the environment has none; its CA bundle in any case (as the
    // aws CLI reads it, AWS_CA_BUNDLE first).
    let profile = profile();
    let profile = match env("AWS_ACCESS_KEY_ID") {
        None => {
            let profile = profile?;
            if let Some(missing) = &profile.missing {
                anyhow::bail!(
                    "the profile '{missing}' (AWS_PROFILE) is in neither ~/.aws/credentials nor ~/.aws/config"
                );
            }
            for (key, value) in profile.settings {
                builder = builder.with_config(key, value);
            }
            profile.ca_bundle
        }
        Some(_) => profile.ok().and_then(|profile| profile.ca_bundle),
    };
    let ca_bundle = match env("AWS_CA_BUNDLE") {
        Some(path) => Some(tls::Named {
            setting: "AWS_CA_BUNDLE",
            path: path.into(),
        }),
        None => profile.map(|path| tls::Named {
            setting: "the aws profile's ca_bundle",
            path,
        }),
    };
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
    let retry = retries.config();
    builder
        .with_bucket_name(&url.bucket)
        .with_retry(retry.clone())
        .with_client_options(client::options(plain_http, &tls::roots(ca_bundle)?)?)
        .with_http_connector(MeteredConnector(meter))
        .build()
        .map(|store| (store, region, retry))
        .with_context(|| format!("cannot use bucket '{}'", url.bucket))
}

/// What the aws CLI's profile (`AWS_PROFILE`, else `default`) says.
struct Profile {
    /// Keys and token from the credentials file, region and endpoint from the config file.
    settings: Vec<(AmazonS3ConfigKey, String)>,
    /// Its `ca_bundle`, from the config file.
    ca_bundle: Option<PathBuf>,
    /// Its `max_attempts` (tries, the first included), from the config file.
    max_attempts: Option<String>,
    /// The profile named (`AWS_PROFILE`) where neither file has it: an error where its keys
    /// are needed, as for the aws CLI.
    missing: Option<String>,
}

/// How many times the aws CLI's settings say a request is tried again: `AWS_MAX_ATTEMPTS`, else
/// the profile's `max_attempts` (tries, the first included), less one; `None` where neither is
/// set.
pub(super) fn retries() -> anyhow::Result<Option<u32>> {
    let env = std::env::var("AWS_MAX_ATTEMPTS")
        .ok()
        .filter(|v| !v.is_empty());
    let (setting, value) = match env {
        Some(value) => ("AWS_MAX_ATTEMPTS", value),
        None => match profile().ok().and_then(|p| p.max_attempts) {
            Some(value) => ("the aws profile's max_attempts", value),
            None => return Ok(None),
        },
    };
    match value.parse::<u32>() {
        Ok(tries) if tries >= 1 => Ok(Some(tries - 1)),
        _ => anyhow::bail!(
            "{setting} is '{value}': a number of tries, the first included (at least 1), as the aws CLI takes it"
        ),
    }
}

/// The aws CLI's profile: keys and token from the credentials file, region, endpoint and CA
/// bundle from the config file (where a profile other than `default` is `[profile NAME]`).
/// Missing files give nothing; a file that cannot be read is an error.
fn profile() -> anyhow::Result<Profile> {
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
    let missing = named.filter(|_| from_credentials.is_none() && from_config.is_none());
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
    let ca_bundle = from_config.and_then(|section| section.get("ca_bundle").map(PathBuf::from));
    let max_attempts = from_config.and_then(|section| section.get("max_attempts").cloned());
    Ok(Profile {
        settings,
        ca_bundle,
        max_attempts,
        missing,
    })
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
