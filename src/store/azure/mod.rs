//! Azure Blob Storage (`az://CONTAINER/PREFIX`): the client, found and configured as the Azure
//! CLI and azcopy users set it, and the requests of our own (`requests.rs`).
//!
//! Settings: `AZURE_STORAGE_CONNECTION_STRING` (`AccountName`, `AccountKey`,
//! `SharedAccessSignature`, `BlobEndpoint`, `DefaultEndpointsProtocol`, `EndpointSuffix`,
//! `UseDevelopmentStorage=true` for the emulator), else `AZURE_STORAGE_ACCOUNT` with
//! `AZURE_STORAGE_KEY` or `AZURE_STORAGE_SAS_TOKEN`, as the Azure CLI reads them; besides
//! these, every `AZURE_*` setting `object_store` reads itself (`AZURE_STORAGE_USE_EMULATOR`,
//! `AZURE_STORAGE_ENDPOINT`, a service principal's `AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/
//! `AZURE_TENANT_ID`, workload and managed identities). An endpoint given as `http://` (and
//! the emulator) is allowed plain HTTP: the user named it.

mod requests;

use std::sync::Arc;

use anyhow::Context;
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};

use super::client::{self, Meter, MeteredConnector, Retries};
use super::requests::{Requests, Store};
use crate::place::BucketUrl;

/// The emulator's (Azurite's) storage account, where none is named.
const EMULATOR_ACCOUNT: &str = "devstoreaccount1";

/// The client of `url`'s container, with the run's meter on every request, and the requests
/// of our own, signed as its are and sent through the same metered client.
pub(super) fn connect(
    url: &BucketUrl,
    meter: &Arc<Meter>,
    retries: Retries,
) -> anyhow::Result<(Arc<dyn Store>, Arc<dyn Requests>)> {
    let mut builder = MicrosoftAzureBuilder::from_env();
    for (key, value) in cli_settings()? {
        builder = builder.with_config(key, value);
    }
    let get = |key| builder.get_config_value(&key);
    let emulator = get(AzureConfigKey::UseEmulator).is_some_and(|v| client::is_true(&v));
    let account = get(AzureConfigKey::AccountName)
        .or_else(|| emulator.then(|| EMULATOR_ACCOUNT.to_string()))
        .context(
            "no storage account is named: set AZURE_STORAGE_ACCOUNT (with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN) or AZURE_STORAGE_CONNECTION_STRING",
        )?;
    // The service's URL as the client forms it (`object_store`'s `AzureConfig::path_url`).
    let service = if emulator {
        let base = std::env::var("AZURITE_BLOB_STORAGE_URL")
            .unwrap_or_else(|_| "http://127.0.0.1:10000".to_string());
        let mut base = url::Url::parse(&base).context("AZURITE_BLOB_STORAGE_URL is no URL")?;
        base.path_segments_mut()
            .map_err(|()| anyhow::anyhow!("AZURITE_BLOB_STORAGE_URL cannot hold a path"))?
            .push(&account);
        base
    } else {
        let endpoint = get(AzureConfigKey::Endpoint)
            .unwrap_or_else(|| format!("https://{account}.blob.core.windows.net"));
        url::Url::parse(&endpoint).with_context(|| format!("'{endpoint}' is no URL"))?
    };
    let plain_http = emulator
        || service.scheme() == "http"
        || std::env::var("AZURE_ALLOW_HTTP").is_ok_and(|v| client::is_true(&v));
    let retry = retries.config();
    let store = builder
        .with_account(&account)
        .with_container_name(&url.bucket)
        .with_retry(retry.clone())
        .with_client_options(client::options(plain_http, &super::tls::roots(None)?)?)
        .with_http_connector(MeteredConnector(Arc::clone(meter)))
        .build()
        .with_context(|| format!("cannot use the container '{}'", url.bucket))?;
    let http = meter
        .client
        .get()
        .cloned()
        .context("the store made no HTTP client")?;
    let client = super::wire::Client { http, retry };
    let requests = requests::AzureRequests::new(store.clone(), client, account, service, url);
    Ok((Arc::new(store), Arc::new(requests)))
}

/// The Azure CLI's settings from the environment, as `object_store` keys: a connection string
/// first, else the account with its key or SAS token.
fn cli_settings() -> anyhow::Result<Vec<(AzureConfigKey, String)>> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(text) = env("AZURE_STORAGE_CONNECTION_STRING") {
        return connection_string(&text);
    }
    let mut settings = Vec::new();
    if let Some(account) = env("AZURE_STORAGE_ACCOUNT") {
        settings.push((AzureConfigKey::AccountName, account));
    }
    if let Some(key) = env("AZURE_STORAGE_KEY") {
        settings.push((AzureConfigKey::AccessKey, key));
    } else if let Some(sas) = env("AZURE_STORAGE_SAS_TOKEN") {
        let sas = sas.trim_start_matches('?').to_string();
        settings.push((AzureConfigKey::SasKey, sas));
    }
    Ok(settings)
}

/// A storage account's connection string (`Name=value;...`, as the portal and the Azure CLI
/// give it), as `object_store` keys.
fn connection_string(text: &str) -> anyhow::Result<Vec<(AzureConfigKey, String)>> {
    let mut fields = std::collections::HashMap::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part.split_once('=').with_context(
            || "AZURE_STORAGE_CONNECTION_STRING is not 'Name=value;...' (as the portal gives it)",
        )?;
        fields.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let field = |name: &str| fields.get(name).cloned();
    let mut settings = Vec::new();
    if field("usedevelopmentstorage").is_some_and(|v| client::is_true(&v)) {
        settings.push((AzureConfigKey::UseEmulator, "true".to_string()));
        return Ok(settings);
    }
    let account = field("accountname");
    if let Some(account) = &account {
        settings.push((AzureConfigKey::AccountName, account.clone()));
    }
    if let Some(key) = field("accountkey") {
        settings.push((AzureConfigKey::AccessKey, key));
    }
    if let Some(sas) = field("sharedaccesssignature") {
        let sas = sas.trim_start_matches('?').to_string();
        settings.push((AzureConfigKey::SasKey, sas));
    }
    let endpoint = field("blobendpoint").or_else(|| {
        let account = account.as_ref()?;
        let protocol = field("defaultendpointsprotocol").unwrap_or_else(|| "https".into());
        let suffix = field("endpointsuffix").unwrap_or_else(|| "core.windows.net".into());
        Some(format!("{protocol}://{account}.blob.{suffix}"))
    });
    if let Some(endpoint) = endpoint {
        settings.push((AzureConfigKey::Endpoint, endpoint));
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(settings: &[(AzureConfigKey, String)], key: AzureConfigKey) -> Option<&str> {
        settings
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_connection_string_is_read_as_the_portal_gives_it() {
        let text = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5==;EndpointSuffix=core.chinacloudapi.cn";
        let settings = connection_string(text).unwrap();
        assert_eq!(named(&settings, AzureConfigKey::AccountName), Some("acct"));
        assert_eq!(named(&settings, AzureConfigKey::AccessKey), Some("a2V5=="));
        assert_eq!(
            named(&settings, AzureConfigKey::Endpoint),
            Some("https://acct.blob.core.chinacloudapi.cn")
        );
        let azurite = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=k;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;";
        let settings = connection_string(azurite).unwrap();
        assert_eq!(
            named(&settings, AzureConfigKey::Endpoint),
            Some("http://127.0.0.1:10000/devstoreaccount1")
        );
        let settings = connection_string("UseDevelopmentStorage=true").unwrap();
        assert_eq!(named(&settings, AzureConfigKey::UseEmulator), Some("true"));
        let sas = connection_string(
            "BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=?sv=1&sig=x%3D",
        )
        .unwrap();
        assert_eq!(named(&sas, AzureConfigKey::SasKey), Some("sv=1&sig=x%3D"));
        assert!(connection_string("nonsense").is_err());
    }
}
