//! An image in a registry (`docker://`), over the OCI distribution API: `GET
//! /v2/NAME/manifests/REF` with every manifest and index type accepted, `GET
//! /v2/NAME/blobs/DIGEST` (redirects followed: registries often send blobs from a bucket).
//!
//! Names resolve as docker resolves them: `ubuntu:24.04` is `docker.io/library/ubuntu:24.04`,
//! a first component with a `.` or a `:` (or `localhost`) is a registry. Authentication as
//! docker, podman and skopeo do it: anonymous first; on a 401, the `WWW-Authenticate`
//! challenge's Bearer token (fetched with the user's credentials, if any, from the files
//! docker, podman and skopeo write or the credential helpers they name: `credentials.rs`) or
//! Basic credentials. A registry on this machine
//! (`localhost`, `127.0.0.1`, `[::1]`) is spoken to over plain HTTP, as docker and crane do;
//! any other over HTTPS only, unless [`Options::insecure_registry`] says otherwise.
//!
//! A blob's download that breaks off is taken up again where it stopped, by a range request,
//! a few times: a layer of gigabytes is not fetched again from its start.
//!
//! Every answer is read within a bound, so that a registry that never ends one costs a few MB:
//! a manifest or an index at most 4 MiB ([`MAX_MANIFEST`], as the distribution spec's registry
//! and containerd cap them), a token's answer 1 MiB, an error's body 64 KiB (what is past it is
//! not read), a blob no more than its descriptor's size (`layers.rs`).

use std::io::{self, Read};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use base64::Engine as _;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, RANGE, WWW_AUTHENTICATE};

use super::blobs::{Blobs, MAX_MANIFEST};
use super::credentials::{CREDENTIAL_FILES, Stored};
use super::manifest::{ACCEPTED, Descriptor};
use crate::options::Options;
use crate::store::Retries;
use crate::store::throttle::{self, Asked};
use crate::sync::Unpoisoned;

/// How often a blob's download that breaks off is taken up again.
const RESUMES: u32 = 5;

/// The most bytes of a token's answer read (real ones are a few KB: a JWT and its expiry).
const MAX_TOKEN: u64 = 1 << 20;

/// The most bytes of an error's answer read, for the registry's own words in the refusal.
const MAX_ERROR: u64 = 64 << 10;

/// An image's name in a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Name {
    /// The registry's host (and port), as the user named it (`docker.io` for Docker Hub).
    pub registry: String,
    /// The repository (`library/ubuntu`).
    pub repository: String,
    /// A tag, or a digest (`sha256:...`).
    pub reference: String,
    /// The name as given, where it names no registry (`ubuntu`, `org/tool`): a short name,
    /// which registries.conf may resolve otherwise (`conf.rs`).
    pub short: Option<String>,
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sep = if self.reference.contains(':') {
            '@'
        } else {
            ':'
        };
        write!(
            f,
            "{}/{}{sep}{}",
            self.registry, self.repository, self.reference
        )
    }
}

impl Name {
    /// `[REGISTRY/]NAME[:TAG|@DIGEST]`, as docker reads it.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Name> {
        let bad = |why: &str| anyhow!("'docker://{text}' is not an image name: {why}");
        let (rest, digest) = match text.split_once('@') {
            Some((rest, digest)) => {
                super::digest::checkable(digest).map_err(|e| bad(&e.to_string()))?;
                (rest, Some(digest.to_string()))
            }
            None => (text, None),
        };
        let (path, tag) = match rest.rsplit_once(':') {
            Some((path, tag)) if !tag.contains('/') => (path, Some(tag.to_string())),
            _ => (rest, None),
        };
        let (registry, repository, short) = match path.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string(), None)
            }
            _ => (
                "docker.io".to_string(),
                path.to_string(),
                Some(path.to_string()),
            ),
        };
        let repository = if registry == "docker.io" && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c);
        if repository.is_empty() || !repository.chars().all(valid) {
            return Err(bad(
                "a repository is lower-case letters, digits, '.', '_', '-' and '/'",
            ));
        }
        let reference = digest.or(tag).unwrap_or_else(|| "latest".to_string());
        Ok(Name {
            registry,
            repository,
            reference,
            short,
        })
    }

    /// Whether the registry is on this machine: plain HTTP, as docker and crane speak to one.
    fn is_local(&self) -> bool {
        let host = match self.registry.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => &self.registry,
        };
        matches!(host, "localhost" | "127.0.0.1" | "[::1]")
    }

    /// The host requests go to (Docker Hub's API is not at `docker.io`).
    fn host(&self) -> &str {
        match self.registry.as_str() {
            "docker.io" | "index.docker.io" => "registry-1.docker.io",
            other => other,
        }
    }
}

/// A registry's client for one repository: its base URL, the credentials for it, and the token
/// its challenge gave (shared by every request of the run).
pub(super) struct Registry {
    name: Name,
    base: String,
    http: reqwest::Client,
    runtime: Arc<tokio::runtime::Runtime>,
    /// What the user's files store for the registry.
    stored: Option<Stored>,
    /// The user name and password, once asked for (a helper is run at most once).
    credentials: tokio::sync::OnceCell<Result<Option<(String, String)>, String>>,
    authorization: Mutex<Option<String>>,
    /// How requests are tried again: the run's (`--retries`, `--retry-timeout`).
    retries: Retries,
    /// The waits the registry asked for, said at the end of the run.
    waits: throttle::Waits,
}

impl Registry {
    /// A client for `name`'s registry: plain HTTP where it is on this machine, `insecure`
    /// (registries.conf) or [`Options::insecure_registry`] says.
    pub(super) fn connect(name: &Name, insecure: bool, opts: &Options) -> anyhow::Result<Registry> {
        let scheme = if name.is_local() || insecure || opts.insecure_registry {
            "http"
        } else {
            "https"
        };
        // The CA certificates users name for their other tools, and the system's (read once a
        // process where `tls::SYSTEM_INCLUDED`; else the system is asked).
        let roots = crate::store::tls::roots(None)?
            .iter()
            .map(|der| reqwest::Certificate::from_der(der))
            .collect::<Result<Vec<_>, _>>()?;
        let builder = reqwest::Client::builder()
            .user_agent(concat!("fastwrite/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(std::time::Duration::from_secs(30));
        let builder = match crate::store::tls::SYSTEM_INCLUDED {
            true => builder.tls_certs_only(roots),
            false => builder.tls_certs_merge(roots),
        };
        let http = builder.build().context("cannot start the HTTP client")?;
        let runtime = crate::store::client_runtime("fastwrite-registry")?;
        Ok(Registry {
            base: format!("{scheme}://{}/v2/{}", name.host(), name.repository),
            name: name.clone(),
            http,
            runtime: Arc::new(runtime),
            stored: Stored::find(&name.registry),
            credentials: tokio::sync::OnceCell::new(),
            authorization: Mutex::new(None),
            retries: Retries::of_web(opts),
            waits: throttle::Waits::default(),
        })
    }

    /// Tries its requests again as `retries` say from now on (the run's, by default).
    pub(super) fn retrying(&mut self, retries: Retries) {
        self.retries = retries;
    }

    /// The image's name at this registry.
    pub(super) fn name(&self) -> &Name {
        &self.name
    }

    /// The document the name's tag or digest names, and its media type.
    pub(super) fn top(&self) -> anyhow::Result<(Vec<u8>, Option<String>)> {
        let reference = self.name.reference.clone();
        let (bytes, media_type) = self.document(&reference)?;
        if reference.contains(':') {
            let digest = super::digest::digest_of(&bytes);
            if digest != reference {
                bail!("the registry sent a manifest whose digest is {digest}, not {reference}");
            }
        }
        Ok((bytes, media_type))
    }

    fn document(&self, reference: &str) -> anyhow::Result<(Vec<u8>, Option<String>)> {
        let url = format!("{}/manifests/{reference}", self.base);
        self.runtime.block_on(async {
            let response = self.get(&url, &[(ACCEPT, ACCEPTED.to_string())]).await?;
            let media_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.split(';').next().unwrap_or(v).trim().to_string());
            let bytes = capped(response, MAX_MANIFEST).await.map_err(|cut| {
                cut.said(
                    &url,
                    "more than a manifest or an index may be (the distribution spec's registries and containerd cap them there)",
                )
            })?;
            Ok((bytes, media_type))
        })
    }

    /// A GET that authenticates as the registry's challenge asks, and fails on anything but
    /// a success (the registry's own words in the error).
    async fn get(
        &self,
        url: &str,
        headers: &[(reqwest::header::HeaderName, String)],
    ) -> anyhow::Result<reqwest::Response> {
        let request = |authorization: Option<String>| {
            let mut request = self.http.get(url);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            if let Some(authorization) = authorization {
                request = request.header(AUTHORIZATION, authorization);
            }
            request
        };
        let known = self.authorization.lock().unpoisoned().clone();
        let (mut response, mut tries) = self.sent(|| request(known.clone())).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            let challenge = response
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let authorization = self.answer(&challenge).await?;
            *self.authorization.lock().unpoisoned() = Some(authorization.clone());
            (response, tries) = self.sent(|| request(Some(authorization.clone()))).await?;
        }
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let asked = throttle::retry_after(response.headers());
        let body = error_body(response).await;
        let refused = Refused {
            url,
            status,
            body: &body,
            credentials: self.stored.is_some(),
            tries,
            asked,
        };
        Err(anyhow!("{}", refused.said(&self.name)))
    }

    /// Sends what `make` builds, tried again as the run's retries say ([`Retries`]): on no
    /// answer (a connection that timed out or broke; not one refused, a name not found or a
    /// certificate not trusted), and on a 5xx, a 408 or a 429, after the wait a
    /// `Retry-After` asks for (counted, and said at the end of the run), else after a
    /// backoff. The last answer comes back whatever it is, with the tries it took.
    async fn sent(
        &self,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> anyhow::Result<(reqwest::Response, u32)> {
        let started = Instant::now();
        let host = &self.name.registry;
        let limit = self.retries.time_limit();
        let mut tries = 0;
        loop {
            tries += 1;
            let again = tries <= self.retries.tries_again();
            let left = limit.saturating_sub(started.elapsed());
            let backoff = Retries::backoff(tries);
            let response = match make().send().await {
                Ok(response) => response,
                Err(error) => {
                    // A certificate not trusted is not trusted the next time either; a
                    // connection refused or a name not found is an answer, which crane and
                    // skopeo give at once too. A connection that timed out or broke is tried
                    // again.
                    let trusted =
                        crate::store::said::certificate_problem(&innermost(&error)).is_none();
                    let answered = error.is_connect() && !error.is_timeout();
                    let said = unreachable(&self.name, error);
                    if !(again && trusted && !answered && backoff <= left) {
                        let tried = if tries > 1 {
                            format!(
                                " after {tries} tries in {:.1} s",
                                started.elapsed().as_secs_f64()
                            )
                        } else {
                            String::new()
                        };
                        bail!("{said}{tried}");
                    }
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            let status = response.status();
            let failed = status.is_server_error()
                || matches!(
                    status,
                    StatusCode::TOO_MANY_REQUESTS | StatusCode::REQUEST_TIMEOUT
                );
            if !(failed && again) {
                return Ok((response, tries));
            }
            let asked = self
                .waits
                .asked(host, status, response.headers(), left, limit);
            let wait = match asked {
                Asked::TooLong => return Ok((response, tries)),
                Asked::Wait(wait) => wait,
                Asked::Nothing if backoff > left => return Ok((response, tries)),
                Asked::Nothing => backoff,
            };
            // (Its body unread: the connection is not kept.)
            drop(response);
            tokio::time::sleep(wait).await;
        }
    }

    /// The user name and password stored for the registry, asked for once (a credential
    /// helper is a program: run off the runtime's threads).
    async fn credentials(&self) -> anyhow::Result<Option<(String, String)>> {
        let stored = self.stored.clone();
        let resolved = self
            .credentials
            .get_or_init(|| async move {
                let Some(stored) = stored else {
                    return Ok(None);
                };
                tokio::task::spawn_blocking(move || stored.resolve())
                    .await
                    .map_err(|e| anyhow!("{e}"))
                    .and_then(|r| r)
                    .map_err(|e| format!("{e:#}"))
            })
            .await;
        resolved.clone().map_err(|why| anyhow!("{why}"))
    }

    /// The `Authorization` that answers a registry's challenge.
    async fn answer(&self, challenge: &str) -> anyhow::Result<String> {
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        let params = parse_challenge(params);
        let param = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let credentials = self.credentials().await?;
        if scheme.eq_ignore_ascii_case("basic") {
            let Some((user, password)) = &credentials else {
                bail!(
                    "{} asks for a user name and password, and none is stored for it ({})",
                    self.name.registry,
                    CREDENTIAL_FILES
                );
            };
            return Ok(basic(user, password));
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            bail!(
                "{} asks for authentication fastwrite does not speak ('{challenge}')",
                self.name.registry
            );
        }
        let realm = param("realm")
            .ok_or_else(|| anyhow!("{}'s Bearer challenge names no realm", self.name.registry))?;
        let scope = param("scope")
            .map(str::to_string)
            .unwrap_or_else(|| format!("repository:{}:pull", self.name.repository));
        let mut url = reqwest::Url::parse(realm).with_context(|| {
            format!(
                "{}'s token realm '{realm}' is not a URL",
                self.name.registry
            )
        })?;
        url.query_pairs_mut().append_pair("scope", &scope);
        if let Some(service) = param("service") {
            url.query_pairs_mut().append_pair("service", service);
        }
        let request = || {
            let request = self.http.get(url.clone());
            match &credentials {
                Some((user, password)) => request.header(AUTHORIZATION, basic(user, password)),
                None => request,
            }
        };
        let (response, _) = self
            .sent(request)
            .await
            .with_context(|| format!("cannot get a token from {realm}"))?;
        let status = response.status();
        if !status.is_success() {
            let body = error_body(response).await;
            let who = if credentials.is_some() {
                "with the credentials stored for it"
            } else {
                "anonymously"
            };
            bail!(
                "{realm} refused a token {who} ({status}){}",
                registry_says(&body)
            );
        }
        let body = capped(response, MAX_TOKEN)
            .await
            .map_err(|cut| cut.said(realm, "more than a token's answer may be"))?;
        let value: serde_json::Value =
            serde_json::from_slice(&body).context("the token's answer is not JSON")?;
        let token = value
            .get("token")
            .or_else(|| value.get("access_token"))
            .and_then(|t| t.as_str())
            .ok_or_else(|| anyhow!("the token's answer from {realm} holds no token"))?;
        Ok(format!("Bearer {token}"))
    }
}

impl Blobs for Registry {
    fn remote(&self) -> bool {
        true
    }

    fn said(&self) -> Vec<String> {
        self.waits.said()
    }

    fn open(&self, descriptor: &Descriptor) -> anyhow::Result<Box<dyn Read + Send + '_>> {
        let url = format!("{}/blobs/{}", self.base, descriptor.digest);
        let response = self.runtime.block_on(self.get(&url, &[]))?;
        Ok(Box::new(Download {
            registry: self,
            url,
            response: Some(response),
            pending: bytes::Bytes::new(),
            read: 0,
            size: descriptor.size,
            resumes: 0,
        }))
    }

    fn manifest(&self, descriptor: &Descriptor) -> anyhow::Result<Vec<u8>> {
        let (bytes, _) = self.document(&descriptor.digest)?;
        super::digest::check_blob(&bytes, descriptor)
            .with_context(|| format!("the manifest {} cannot be used", descriptor.digest))?;
        Ok(bytes)
    }
}

/// A blob as it downloads, read as a stream: a break is taken up again by a range request
/// from where it stopped.
struct Download<'r> {
    registry: &'r Registry,
    url: String,
    response: Option<reqwest::Response>,
    pending: bytes::Bytes,
    read: u64,
    size: u64,
    resumes: u32,
}

impl Download<'_> {
    /// The next piece of the blob (empty: its end).
    fn next_chunk(&mut self) -> anyhow::Result<bytes::Bytes> {
        loop {
            let response = match &mut self.response {
                Some(response) => response,
                None => return Ok(bytes::Bytes::new()),
            };
            let error = match self.registry.runtime.block_on(response.chunk()) {
                Ok(Some(chunk)) => {
                    self.read += chunk.len() as u64;
                    return Ok(chunk);
                }
                Ok(None) if self.read >= self.size => {
                    self.response = None;
                    return Ok(bytes::Bytes::new());
                }
                Ok(None) => anyhow!(
                    "the download ended after {} of {} bytes",
                    self.read,
                    self.size
                ),
                Err(e) => anyhow!("the download broke off after {} bytes: {e}", self.read),
            };
            if self.resumes >= RESUMES {
                return Err(error.context(format!("{} resumed {RESUMES} times", self.url)));
            }
            self.resumes += 1;
            let range = format!("bytes={}-{}", self.read, self.size.saturating_sub(1));
            let resumed = self
                .registry
                .runtime
                .block_on(self.registry.get(&self.url, &[(RANGE, range)]))?;
            if resumed.status() != StatusCode::PARTIAL_CONTENT {
                return Err(error.context(
                    "and the registry does not answer a request for the rest (no range)",
                ));
            }
            self.response = Some(resumed);
        }
    }
}

impl Read for Download<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            self.pending = self.next_chunk().map_err(io::Error::other)?;
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending = self.pending.slice(n..);
        Ok(n)
    }
}

/// How reading an answer whole stopped short.
enum Cut {
    /// It goes on past the cap (or says it would: its `Content-Length`).
    Past(u64),
    /// It broke off.
    Broke(reqwest::Error),
}

impl Cut {
    /// The refusal in one line: the answer to `url`, and `then` (what it is more than, and
    /// what it means for the run).
    fn said(self, url: &str, then: &str) -> anyhow::Error {
        match self {
            Cut::Past(cap) => anyhow!(
                "the answer to {url} goes on past {}, {then}: refused",
                crate::report::human_bytes(cap)
            ),
            Cut::Broke(error) => anyhow!(error).context(format!("the answer to {url} broke off")),
        }
    }
}

/// An answer's body read whole, refused once it goes past `cap` bytes (unread if its
/// `Content-Length` says so): a registry whose answer never ends costs `cap` bytes.
async fn capped(mut response: reqwest::Response, cap: u64) -> Result<Vec<u8>, Cut> {
    if response.content_length().is_some_and(|n| n > cap) {
        return Err(Cut::Past(cap));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Cut::Broke)? {
        if (bytes.len() + chunk.len()) as u64 > cap {
            return Err(Cut::Past(cap));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The first [`MAX_ERROR`] bytes of an error's answer (the registry's own words), the rest not
/// read; what cannot be read is no words.
async fn error_body(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = MAX_ERROR as usize - bytes.len();
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if bytes.len() == MAX_ERROR as usize {
            break;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// A challenge's parameters: `key="value"` pairs, separated by commas (values may hold commas
/// inside their quotes: `scope="repository:a:pull,push"`).
fn parse_challenge(text: &str) -> Vec<(String, String)> {
    let mut params = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.split_once('"') {
                Some((value, after)) => (value.to_string(), after),
                None => (quoted.to_string(), ""),
            },
            None => match after.split_once(',') {
                Some((value, after)) => (value.trim().to_string(), after),
                None => (after.trim().to_string(), ""),
            },
        };
        params.push((key, value));
        rest = after.trim_start_matches([',', ' ']);
    }
    params
}

/// The registry's own words from an error body (`{"errors":[{"code":..,"message":..}]}`).
fn registry_says(body: &str) -> String {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
        return String::new();
    };
    let errors = value.get("errors").and_then(|e| e.as_array());
    let said: Vec<String> = errors
        .into_iter()
        .flatten()
        .map(|e| {
            let field = |k: &str| e.get(k).and_then(|v| v.as_str()).unwrap_or("");
            format!("{} {}", field("code"), field("message"))
                .trim()
                .to_string()
        })
        .collect();
    if said.is_empty() {
        String::new()
    } else {
        format!(": {}", said.join("; "))
    }
}

/// A registry's answer that is not a success, and how it came.
struct Refused<'a> {
    url: &'a str,
    status: StatusCode,
    body: &'a str,
    /// Whether credentials were stored for the registry (and so sent).
    credentials: bool,
    /// The tries it took (a 5xx, a 408 or a 429 is tried again).
    tries: u32,
    /// The wait its `Retry-After` asked for.
    asked: Option<Duration>,
}

impl Refused<'_> {
    /// The refusal in one line: what it means for the user.
    fn said(&self, name: &Name) -> String {
        let Refused { url, status, .. } = *self;
        let says = registry_says(self.body);
        let tries = match self.tries {
            1 => String::new(),
            n => format!(" {n} times"),
        };
        match status {
            StatusCode::NOT_FOUND => {
                format!("docker://{name}: the registry has no such image or blob ({status}{says})")
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN if self.credentials => {
                format!(
                    "docker://{name}: the registry refused the credentials stored for it ({status}{says})"
                )
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => format!(
                "docker://{name}: the registry wants credentials, and none are stored for {} ({status}{says}; looked in {CREDENTIAL_FILES})",
                name.registry
            ),
            StatusCode::TOO_MANY_REQUESTS => {
                let asked = match self.asked {
                    Some(asked) => format!(", asking last to wait {:.1} s", asked.as_secs_f64()),
                    None => String::new(),
                };
                format!(
                    "docker://{name}: {} answered {status}{tries}{asked}: its rate limit outlasted the retries (--retries, --retry-timeout){says}",
                    name.registry
                )
            }
            _ => format!(
                "{url}: {status}{says}{}",
                match self.tries {
                    1 => String::new(),
                    n => format!(" (tried {n} times)"),
                }
            ),
        }
    }
}

/// The innermost cause of a request's failure (the client's own layers say less).
fn innermost(error: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut cause = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        cause = inner.to_string();
        source = inner.source();
    }
    cause
}

/// A request that got no answer, in one line.
fn unreachable(name: &Name, error: reqwest::Error) -> String {
    let cause = innermost(&error);
    if let Some(problem) = crate::store::said::certificate_problem(&cause) {
        return format!(
            "the TLS certificate of the registry {} is not trusted: {problem}",
            name.registry
        );
    }
    format!("cannot reach the registry {} ({cause})", name.registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_as_docker_resolves_them() {
        let name = Name::parse("ubuntu:24.04").unwrap();
        assert_eq!(name.to_string(), "docker.io/library/ubuntu:24.04");
        assert_eq!(name.host(), "registry-1.docker.io");
        let name = Name::parse("localhost:5000/a/b").unwrap();
        assert_eq!(
            (
                name.registry.as_str(),
                name.repository.as_str(),
                name.reference.as_str()
            ),
            ("localhost:5000", "a/b", "latest")
        );
        assert!(name.is_local());
        let digest = format!("sha256:{}", "0".repeat(64));
        let name = Name::parse(&format!("ghcr.io/o/r@{digest}")).unwrap();
        assert_eq!(name.reference, digest);
        assert!(!name.is_local());
        assert!(Name::parse("Upper/Case").is_err());
    }

    #[test]
    fn a_challenge_is_read_with_commas_in_its_quotes() {
        let params = parse_challenge(
            r#"realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(
            params[0],
            ("realm".into(), "https://auth.example/token".into())
        );
        assert_eq!(
            params[2],
            ("scope".into(), "repository:a/b:pull,push".into())
        );
    }
}
