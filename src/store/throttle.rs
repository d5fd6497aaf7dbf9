//! A server that throttles: what its `Retry-After` asks (a 429 Too Many Requests, a 503), how
//! long a request waits before it is tried again, and the waits said once at the end of a run,
//! one line a server ("docker.io answered 429 Too Many Requests 2 times: waited 60.0 s in all,
//! as it asked"). A store's client (`client.rs`) and a registry's (`extract/image/registry.rs`)
//! both wait so, within the run's retries ([`Retries`](super::Retries)): a wait longer than the
//! retry time limit is not made, and said as the cause instead.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode};

use crate::sync::Unpoisoned;

/// Whether `status` is a server asking the client to slow down, whose `Retry-After` is honoured.
pub(crate) fn asks_to_wait(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 503)
}

/// The wait an answer's `Retry-After` asks for: seconds, or an HTTP date (RFC 9110 10.2.3);
/// a date past is no wait. `None`: no such header, or one that is neither.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let at = SystemTime::from(date.with_timezone(&chrono::Utc));
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

/// What an answer asked of the request's next try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Nothing: it does not ask to wait (no throttling status, or no `Retry-After`).
    Nothing,
    /// This wait, counted as made.
    Wait(Duration),
    /// A wait longer than the time the request has left: not made, and said.
    TooLong,
}

/// The waits a run made as servers asked, and the ones it would not make, said at its end.
#[derive(Debug, Default)]
pub(crate) struct Waits(Mutex<BTreeMap<String, Waited>>);

/// One server's waits.
#[derive(Debug)]
struct Waited {
    status: StatusCode,
    times: u32,
    total: Duration,
    /// The longest wait asked that the retry time limit did not allow, and that limit.
    refused: Option<(Duration, Duration)>,
}

impl Waits {
    fn of<'a>(
        map: &'a mut BTreeMap<String, Waited>,
        host: &str,
        status: StatusCode,
    ) -> &'a mut Waited {
        map.entry(host.to_string()).or_insert(Waited {
            status,
            times: 0,
            total: Duration::ZERO,
            refused: None,
        })
    }

    /// What `host`'s answer (`status`, `headers`) asks of a request that has `left` of its
    /// retries' time `limit`: the wait it asks for, counted; or one longer than `left`, said as
    /// refused.
    pub(crate) fn asked(
        &self,
        host: &str,
        status: StatusCode,
        headers: &HeaderMap,
        left: Duration,
        limit: Duration,
    ) -> Asked {
        let Some(wait) = asks_to_wait(status).then(|| retry_after(headers)).flatten() else {
            return Asked::Nothing;
        };
        if wait > left {
            self.refused(host, status, wait, limit);
            return Asked::TooLong;
        }
        self.waited(host, status, wait);
        Asked::Wait(wait)
    }

    /// `host` answered `status`, and the request waited `wait` as it asked.
    fn waited(&self, host: &str, status: StatusCode, wait: Duration) {
        let mut map = self.0.lock().unpoisoned();
        let waited = Self::of(&mut map, host, status);
        waited.status = status;
        waited.times += 1;
        waited.total += wait;
    }

    /// `host` answered `status` and asked for a wait of `asked`, longer than the `limit` the
    /// run's retries have: the request was not tried again after it.
    fn refused(&self, host: &str, status: StatusCode, asked: Duration, limit: Duration) {
        let mut map = self.0.lock().unpoisoned();
        let waited = Self::of(&mut map, host, status);
        waited.status = status;
        if waited.refused.is_none_or(|(longest, _)| asked > longest) {
            waited.refused = Some((asked, limit));
        }
    }

    /// One line a server, in the order of their names.
    pub(crate) fn said(&self) -> Vec<String> {
        let map = self.0.lock().unpoisoned();
        map.iter()
            .map(|(host, w)| {
                let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
                let mut line = match w.times {
                    0 => format!("{host} answered {}", w.status),
                    1 => format!(
                        "{host} answered {}: waited {} as it asked",
                        w.status,
                        secs(w.total)
                    ),
                    n => format!(
                        "{host} answered {} {n} times: waited {} in all, as it asked",
                        w.status,
                        secs(w.total)
                    ),
                };
                if let Some((asked, limit)) = w.refused {
                    line.push_str(&format!(
                        "{}asked to wait {}, longer than what was left of the retry time limit ({}, --retry-timeout): its limit outlasted the retries",
                        if w.times == 0 { " and " } else { "; then " },
                        secs(asked),
                        secs(limit)
                    ));
                }
                line
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(http::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(
            http::header::RETRY_AFTER,
            "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), Some(Duration::ZERO));
        let later = chrono::Utc::now() + chrono::TimeDelta::seconds(30);
        let date = later.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        headers.insert(http::header::RETRY_AFTER, date.parse().unwrap());
        let asked = retry_after(&headers).unwrap();
        assert!(
            asked > Duration::from_secs(28) && asked <= Duration::from_secs(30),
            "{asked:?}"
        );
        headers.insert(http::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn a_wait_is_made_only_where_asked_and_within_the_time_left() {
        let waits = Waits::default();
        let mut headers = HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, "2".parse().unwrap());
        let (left, limit) = (Duration::from_secs(3), Duration::from_secs(180));
        let busy = StatusCode::TOO_MANY_REQUESTS;
        assert_eq!(
            waits.asked("h", StatusCode::OK, &headers, left, limit),
            Asked::Nothing
        );
        assert_eq!(
            waits.asked("h", busy, &HeaderMap::new(), left, limit),
            Asked::Nothing
        );
        let two = Duration::from_secs(2);
        assert_eq!(
            waits.asked("h", busy, &headers, left, limit),
            Asked::Wait(two)
        );
        assert_eq!(
            waits.asked("h", busy, &headers, Duration::from_secs(1), limit),
            Asked::TooLong
        );
        assert_eq!(
            waits.said(),
            [
                "h answered 429 Too Many Requests: waited 2.0 s as it asked; then asked to wait 2.0 s, longer than what was left of the retry time limit (180.0 s, --retry-timeout): its limit outlasted the retries"
            ]
        );
    }

    #[test]
    fn waits_are_said_once_a_server() {
        let waits = Waits::default();
        assert!(waits.said().is_empty());
        let busy = StatusCode::TOO_MANY_REQUESTS;
        waits.waited("docker.io", busy, Duration::from_secs(30));
        assert_eq!(
            waits.said(),
            ["docker.io answered 429 Too Many Requests: waited 30.0 s as it asked"]
        );
        waits.waited("docker.io", busy, Duration::from_secs(30));
        waits.refused(
            "b.example",
            busy,
            Duration::from_secs(3600),
            Duration::from_secs(180),
        );
        assert_eq!(
            waits.said(),
            [
                "b.example answered 429 Too Many Requests and asked to wait 3600.0 s, longer than what was left of the retry time limit (180.0 s, --retry-timeout): its limit outlasted the retries",
                "docker.io answered 429 Too Many Requests 2 times: waited 60.0 s in all, as it asked",
            ]
        );
    }
}
