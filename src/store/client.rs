//! What every store's client shares: the HTTP client under it, metered on its way through
//! (requests, their time, throttling, PUTs whose answer was lost), and how it retries. Each
//! store's settings are its own module's (`s3/`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
    ReqwestConnector,
};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};

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
    /// The metered client itself, for the requests the store does not make (`requests.rs`).
    pub client: std::sync::OnceLock<HttpClient>,
    /// Objects (by URL) an attempt to PUT got no answer for, or a 5xx or 429: the client
    /// tries again, and a later attempt may meet the first one's object. Forgotten when the
    /// upload ends.
    uncertain: std::sync::Mutex<std::collections::HashSet<String>>,
    /// How the store's client tries again: a `Retry-After` is waited for within it.
    pub retries: Retries,
    /// The waits servers asked for with a `Retry-After`, said at the end of the run.
    pub waits: super::throttle::Waits,
    /// The requests (method and URL) a server asked to wait, and how often in a row: the last
    /// try the client makes is not waited for.
    asked: std::sync::Mutex<std::collections::HashMap<String, u32>>,
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

    /// A meter for a client that tries again as `retries` say.
    pub(crate) fn new(retries: Retries) -> Meter {
        Meter {
            retries,
            ..Meter::default()
        }
    }

    /// How long the request `method` `uri` waits before its client tries it again, as
    /// `response` asks with a `Retry-After`: none unless it asks and the client will try
    /// again, and no longer than the retry time limit (the wait refused then, and said). An
    /// answer that asks nothing costs a look at an empty map, its strings made only when a
    /// server throttles.
    fn asked_wait(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        response: &HttpResponse,
    ) -> Option<Duration> {
        let status = response.status();
        let asks = super::throttle::asks_to_wait(status);
        let mut asked_in_a_row = self.asked.lock().unpoisoned();
        if !asks && asked_in_a_row.is_empty() {
            return None;
        }
        let key = format!("{method} {uri}");
        if !asks {
            asked_in_a_row.remove(&key);
            return None;
        }
        let times = asked_in_a_row.entry(key).or_insert(0);
        *times += 1;
        if *times > self.retries.tries_again() {
            return None;
        }
        let host = uri.authority().map(|a| a.to_string()).unwrap_or_default();
        let limit = self.retries.time_limit();
        let asked = self
            .waits
            .asked(&host, status, response.headers(), limit, limit);
        match asked {
            super::throttle::Asked::Wait(wait) => Some(wait),
            _ => None,
        }
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
        let (method, uri) = (request.method().clone(), request.uri().clone());
        let response = self
            .inner
            .execute(request)
            .await
            .map_err(once_if_certificate);
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
        // What a throttling store asks is waited for here, before the client's own backoff.
        if let Ok(answer) = &response
            && let Some(wait) = meter.asked_wait(&method, &uri, answer)
        {
            drop(meter);
            tokio::time::sleep(wait).await;
        }
        response
    }
}

/// A request's failure, tried again by the client unless it is a server's TLS certificate that
/// is not trusted: no second try trusts it, and the run says so at once.
fn once_if_certificate(error: HttpError) -> HttpError {
    match super::said::certificate_problem(&super::said::chain(&error)) {
        Some(_) => HttpError::new(HttpErrorKind::Unknown, error),
        None => error,
    }
}

/// The connector a store's builder is given: every client it makes is metered by the run's
/// meter.
#[derive(Debug)]
pub(super) struct MeteredConnector(pub Arc<Meter>);

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

/// How often, and for how long, a store's failed request (no answer, a 5xx, a 429) is tried
/// again: [`Options::retries`](crate::Options::retries) and
/// [`Options::retry_timeout`](crate::Options::retry_timeout), `None` each for the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Retries {
    pub times: Option<u32>,
    pub timeout: Option<Duration>,
}

impl Retries {
    /// Tries again by default: a run of many files meets a throttling store more often than
    /// one request does.
    pub const TIMES: u32 = 10;
    /// The longest a request is tried again for, by default.
    pub const TIMEOUT: Duration = Duration::from_secs(180);

    /// A run's, for `url`'s store: where the run sets none, the store's own setting (S3's
    /// `AWS_MAX_ATTEMPTS` or the aws profile's `max_attempts`, less one, as the aws CLI reads
    /// them).
    pub(crate) fn of(
        opts: &crate::Options,
        url: &crate::place::BucketUrl,
    ) -> anyhow::Result<Retries> {
        let times = match (opts.retries, url.store) {
            (Some(times), _) => Some(times),
            (None, crate::place::StoreKind::S3) => super::s3::retries()?,
            (None, _) => None,
        };
        Ok(Retries {
            times,
            timeout: opts.retry_timeout,
        })
    }

    /// A web server's (an `https://` archive): the run's.
    pub(crate) fn of_web(opts: &crate::Options) -> Retries {
        Retries {
            times: opts.retries,
            timeout: opts.retry_timeout,
        }
    }

    /// The first wait before a request is tried again, doubled each time up to [`Retries::MAX_BACKOFF`].
    pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
    /// The longest wait between two tries (unless a server asks for more).
    pub const MAX_BACKOFF: Duration = Duration::from_secs(15);

    /// How often a failed request is tried again: `times`, else [`Retries::TIMES`].
    pub(crate) fn tries_again(self) -> u32 {
        self.times.unwrap_or(Retries::TIMES)
    }

    /// How long a request is tried again for: `timeout`, else [`Retries::TIMEOUT`].
    pub(crate) fn time_limit(self) -> Duration {
        self.timeout.unwrap_or(Retries::TIMEOUT)
    }

    /// The wait before the try after `tried` tries (1: the first retry): the backoff
    /// `object_store` uses too, without its jitter.
    pub(crate) fn backoff(tried: u32) -> Duration {
        let doubled = Retries::FIRST_BACKOFF.saturating_mul(1 << tried.saturating_sub(1).min(16));
        doubled.min(Retries::MAX_BACKOFF)
    }

    /// `object_store`'s retry settings: `times`, else [`Retries::TIMES`]; its backoff longer
    /// than `object_store`'s default.
    pub(super) fn config(self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Retries::FIRST_BACKOFF,
                max_backoff: Retries::MAX_BACKOFF,
                base: 2.0,
            },
            max_retries: self.tries_again() as usize,
            retry_timeout: self.time_limit(),
        }
    }
}

/// Whether a setting's value means yes (`true`, `1`, `yes`, in any case).
pub(super) fn is_true(value: &str) -> bool {
    matches!(value.to_ascii_lowercase().as_str(), "true" | "1" | "yes")
}

/// A store's HTTP settings: plain HTTP only where the user named an `http://` endpoint; the
/// CA certificates a user named trusted beside the system's (`tls.rs`: `roots`).
pub(super) fn options(plain_http: bool, roots: &[Vec<u8>]) -> anyhow::Result<ClientOptions> {
    let mut options = ClientOptions::new()
        .with_allow_http(plain_http)
        .with_connect_timeout(Duration::from_secs(10))
        .with_timeout(Duration::from_secs(300))
        .with_pool_idle_timeout(Duration::from_secs(60))
        .with_no_system_certificates(super::tls::SYSTEM_INCLUDED);
    for der in roots {
        options = options.with_root_certificate(object_store::Certificate::from_der(der)?);
    }
    Ok(options)
}
