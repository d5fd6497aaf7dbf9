//! How many requests to keep in flight, uploads and downloads alike: sized by Little's law
//! from what the run measures. To keep up with a side that takes an item every `P` (writers
//! making files for uploads; the caller writing what was fetched, for downloads), with requests
//! that take `W`, `parties * W / P` requests must be in flight. Both are measured as the run
//! goes (every request is timed by the client's meter; the other side's time by its caller),
//! and the limit is computed again every few completions, with half again for the spread of
//! request times. When the store throttles (503 `SlowDown`, 429) the limit halves and its
//! ceiling with it; the ceiling then grows back a tenth at a time while no throttling is met.
//!
//! Little's law takes the request time as the store's, but a store that is itself the limit
//! (its CPU, its disk) answers later the more it is asked at once: more in flight then only
//! lengthens its queue. Downloads, whose other side (handing a body to the writers) takes
//! microseconds, would be sized to the ceiling by the law alone, so their sizer also watches
//! the queue ([`Sizer::watching_the_queue`]): it keeps the best request time seen over a
//! window of completions; while the last window's is within half again of it, the limit may
//! grow by a quarter, else it holds where it is (never cut: a way that queues, such as the
//! lab's Python proxy, makes every request slower as more are asked, and a limit cut in
//! proportion fell to a handful and took 1.6 times as long at 20 ms). Through 20 ms of
//! latency the request time holds while the limit grows to the ceiling; against a server on
//! this machine's own 2 cores it does not, and the limit stays near where it began.
//!
//! The uploads' gate is the engine's (`engine/bucket/flight.rs`); the downloads' is a
//! prefix's (`source.rs`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::client::Meter;

/// The fewest requests kept in flight, and the most: past a few hundred a store gains nothing,
/// and each one holds its object in memory (within the memory budget besides).
pub(crate) const MIN_IN_FLIGHT: usize = 4;
pub(crate) const MAX_IN_FLIGHT: usize = 256;
/// The limit is sized again after this many completions.
pub(crate) const EVERY: u64 = 16;

/// The limit on requests in flight, and why it is what it is.
#[derive(Debug)]
pub(crate) struct Sizer {
    pub limit: usize,
    ceiling: usize,
    /// Throttling answers seen when last sized.
    throttled: u64,
    /// Held where it was asked to be (`Options::uploads`): never resized.
    fixed: bool,
    /// The most in flight at once so far (kept by the caller).
    pub peak: usize,
    /// The limit after its last change, and why, for the report.
    pub why: String,
    /// Whether the store's queue is watched (see the module header): the best request time
    /// of a window so far, and the meter's counts when the window began.
    queue: Option<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    best: Option<Duration>,
    requests: u64,
    micros: u64,
}

impl Sizer {
    /// A limit of `start` until something is measured, or held at `fixed`.
    pub(crate) fn new(start: usize, fixed: Option<usize>) -> Sizer {
        let (limit, why) = match fixed {
            Some(n) => (n.max(1), format!("{} as asked", n.max(1))),
            None => (
                start,
                format!("{start} at the start, before any request was timed"),
            ),
        };
        Sizer {
            limit,
            ceiling: MAX_IN_FLIGHT,
            throttled: 0,
            fixed: fixed.is_some(),
            peak: 0,
            why,
            queue: None,
        }
    }

    /// The same, watching the store's queue as well (see the module header).
    pub(crate) fn watching_the_queue(self) -> Sizer {
        Sizer {
            queue: Some(Queue::default()),
            ..self
        }
    }

    /// Sized again from the meter's request times and `per_item`, the time each of `parties`
    /// on the other side takes an item (`None`: nothing measured yet); halved instead if the
    /// store asked to slow down since the last time. `side` names the other side for the
    /// report ("each of 2 writers made a file", "the writer took an object").
    pub(crate) fn resize(
        &mut self,
        meter: &Meter,
        parties: usize,
        per_item: Option<Duration>,
        side: &str,
    ) {
        if self.fixed {
            return;
        }
        let throttled = meter.throttled.load(Ordering::Relaxed);
        if throttled > self.throttled {
            self.throttled = throttled;
            self.limit = (self.limit / 2).max(MIN_IN_FLIGHT);
            self.ceiling = self.limit;
            self.why = format!(
                "{}: halved when the store asked to slow down ({throttled} times so far)",
                self.limit
            );
            return;
        }
        self.ceiling = (self.ceiling + self.ceiling.div_ceil(10)).min(MAX_IN_FLIGHT);
        let (Some(request), Some(per_item)) = (meter.mean(), per_item) else {
            return;
        };
        let per_item = per_item.max(Duration::from_micros(1));
        // Little's law, with half again for the spread of request times.
        let law = parties.max(1) as f64 * request.as_secs_f64() / per_item.as_secs_f64() * 1.5;
        let mut limit = (law.ceil() as usize + 1).clamp(MIN_IN_FLIGHT, self.ceiling);
        let mut why = format!(
            "{limit}: requests took {:.1} ms, and {side} every {:.2} ms",
            request.as_secs_f64() * 1e3,
            per_item.as_secs_f64() * 1e3
        );
        let mut held = false;
        if let Some((cap, queued)) = self.queue_cap(meter)
            && cap < limit
        {
            held = cap == self.limit;
            limit = cap.max(MIN_IN_FLIGHT);
            why = queued;
        }
        if limit != self.limit || held {
            self.limit = limit;
            self.why = why;
        }
    }

    /// The most the store's queue allows now (watching it): a quarter more than the limit
    /// while the last window's requests were within half again of the best window's, else the
    /// limit as it is, and why. `None` when not watching, or too few requests came since the
    /// last window.
    fn queue_cap(&mut self, meter: &Meter) -> Option<(usize, String)> {
        let queue = self.queue.as_mut()?;
        let requests = meter.requests.load(Ordering::Relaxed);
        let micros = meter.micros.load(Ordering::Relaxed);
        let (n, spent) = (
            requests.checked_sub(queue.requests)?,
            micros.checked_sub(queue.micros)?,
        );
        if n < EVERY / 2 {
            return None;
        }
        (queue.requests, queue.micros) = (requests, micros);
        let window = Duration::from_micros(spent / n);
        let best = *queue.best.get_or_insert(window);
        let best = best.min(window);
        queue.best = Some(best);
        let ratio = best.as_secs_f64() / window.as_secs_f64().max(1e-9);
        if ratio >= 1.0 / 1.5 {
            let cap = self.limit + self.limit.div_ceil(4);
            let why = format!(
                "{cap}: requests took {:.1} ms, within half again of the best, {:.1} ms",
                window.as_secs_f64() * 1e3,
                best.as_secs_f64() * 1e3
            );
            return Some((cap, why));
        }
        let why = format!(
            "{}: held, requests took {:.1} ms against {:.1} ms at best: the store (or the way to it) queues them",
            self.limit,
            window.as_secs_f64() * 1e3,
            best.as_secs_f64() * 1e3
        );
        Some((self.limit, why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_follows_littles_law_and_halves_when_throttled() {
        let meter = Meter::default();
        let mut sizer = Sizer::new(32, None);
        // Requests of 20 ms; each of 2 parties takes an item every 1 ms: 2 * 20 / 1 * 1.5 + 1.
        meter.requests.store(10, Ordering::Relaxed);
        meter.micros.store(200_000, Ordering::Relaxed);
        sizer.resize(&meter, 2, Some(Duration::from_millis(1)), "x");
        assert_eq!(sizer.limit, 61);
        assert!(sizer.why.contains("20.0 ms"), "{}", sizer.why);
        // Items far faster than requests: the ceiling, which grows back a tenth at a time.
        sizer.resize(&meter, 1, Some(Duration::from_micros(10)), "x");
        assert_eq!(sizer.limit, MAX_IN_FLIGHT);
        meter.throttled.store(1, Ordering::Relaxed);
        sizer.resize(&meter, 1, Some(Duration::from_micros(10)), "x");
        assert_eq!((sizer.limit, sizer.ceiling), (128, 128));
        assert!(sizer.why.contains("slow down"), "{}", sizer.why);
        sizer.resize(&meter, 1, Some(Duration::from_micros(10)), "x");
        assert_eq!(sizer.limit, 141);
        // Watching the queue: requests that slow down as the limit grows hold it there.
        let meter = Meter::default();
        let mut watching = Sizer::new(64, None).watching_the_queue();
        let window = |n: u64, ms: u64| {
            meter.requests.fetch_add(n, Ordering::Relaxed);
            meter.micros.fetch_add(n * ms * 1000, Ordering::Relaxed);
        };
        window(16, 2);
        watching.resize(&meter, 1, Some(Duration::from_micros(10)), "x");
        assert_eq!(watching.limit, 80, "{}", watching.why);
        window(16, 8);
        watching.resize(&meter, 1, Some(Duration::from_micros(10)), "x");
        assert_eq!(watching.limit, 80, "{}", watching.why);
        assert!(watching.why.contains("queues"), "{}", watching.why);
        // Held where asked.
        let mut fixed = Sizer::new(32, Some(8));
        fixed.resize(&meter, 1, Some(Duration::from_micros(10)), "x");
        assert_eq!(fixed.limit, 8);
    }
}
