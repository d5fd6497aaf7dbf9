//! How many uploads are in flight: a bucket's close pool. An upload completing is a file's
//! close; the writers hand each finished file over and go on, and this gate holds them only
//! when as many uploads are in flight as the run can use, or their bytes fill the budget.
//!
//! The number is sized by Little's law, as the writers on a network filesystem are
//! (`writers.rs`): to keep up with writers that each produce a file every `P`, with requests
//! that take `W`, `writers * W / P` uploads must be in flight. Both are measured as the run
//! goes (every request is timed by the client's meter; the writers time their own work), and
//! the limit is computed again every few completions, with room for the spread. When the
//! store throttles (503 `SlowDown`, 429) the limit halves and its ceiling with it; the
//! ceiling then grows back a tenth at a time while no throttling is met.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::store::Meter;
use crate::sync::Unpoisoned;

/// The fewest uploads kept in flight, and the most: past a few hundred a store gains nothing,
/// and every one holds its file in memory.
pub(super) const MIN_IN_FLIGHT: usize = 4;
pub(super) const MAX_IN_FLIGHT: usize = 256;
/// Before anything is measured.
const START: usize = 32;
/// The limit is sized again after this many completions.
const EVERY: u64 = 16;

pub(super) struct Gate {
    state: Mutex<State>,
    freed: Condvar,
    meter: Arc<Meter>,
    /// The most bytes of file content held by uploads in flight.
    budget: u64,
    writers: usize,
    /// The writers' own time per file (reading, decompressing), summed, and the files.
    produce_nanos: AtomicU64,
    produced: AtomicU64,
}

struct State {
    in_flight: usize,
    bytes: u64,
    limit: usize,
    ceiling: usize,
    peak: usize,
    completed: u64,
    throttled: u64,
    /// Held where it was asked to be (`Options::uploads`): never resized.
    fixed: bool,
    /// The limit after its last change, and why, for the report.
    why: String,
}

impl Gate {
    /// A gate sized as the run goes, or held at `fixed` (`Options::uploads`).
    pub(super) fn new(
        meter: Arc<Meter>,
        writers: usize,
        budget: u64,
        fixed: Option<usize>,
    ) -> Gate {
        let (limit, why) = match fixed {
            Some(n) => (n.max(1), format!("{} as asked", n.max(1))),
            None => (
                START,
                format!("{START} at the start, before any request was timed"),
            ),
        };
        Gate {
            state: Mutex::new(State {
                in_flight: 0,
                bytes: 0,
                limit,
                ceiling: MAX_IN_FLIGHT,
                peak: 0,
                completed: 0,
                throttled: 0,
                fixed: fixed.is_some(),
                why,
            }),
            freed: Condvar::new(),
            meter,
            budget,
            writers: writers.max(1),
            produce_nanos: AtomicU64::new(0),
            produced: AtomicU64::new(0),
        }
    }

    /// A writer spent `took` producing one file.
    pub(super) fn produced(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.produce_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.produced.fetch_add(1, Ordering::Relaxed);
    }

    /// Waits for room for an upload holding `bytes`, and takes it. One upload always fits,
    /// whatever its size.
    pub(super) fn enter(&self, bytes: u64) {
        let mut state = self.state.lock().unpoisoned();
        while state.in_flight > 0
            && (state.in_flight >= state.limit || state.bytes.saturating_add(bytes) > self.budget)
        {
            state = self.freed.wait(state).unpoisoned();
        }
        state.in_flight += 1;
        state.bytes += bytes;
        state.peak = state.peak.max(state.in_flight);
    }

    /// An upload holding `bytes` ended (well or not).
    pub(super) fn leave(&self, bytes: u64) {
        let mut state = self.state.lock().unpoisoned();
        state.in_flight -= 1;
        state.bytes -= bytes;
        state.completed += 1;
        if state.completed % EVERY == 0 && !state.fixed {
            self.resize(&mut state);
        }
        drop(state);
        self.freed.notify_all();
    }

    fn resize(&self, state: &mut State) {
        let throttled = self.meter.throttled.load(Ordering::Relaxed);
        if throttled > state.throttled {
            state.throttled = throttled;
            state.limit = (state.limit / 2).max(MIN_IN_FLIGHT);
            state.ceiling = state.limit;
            state.why = format!(
                "{}: halved when the store asked to slow down ({throttled} times so far)",
                state.limit
            );
            return;
        }
        state.ceiling = (state.ceiling + state.ceiling.div_ceil(10)).min(MAX_IN_FLIGHT);
        let (Some(request), produced) = (self.meter.mean(), self.produced.load(Ordering::Relaxed))
        else {
            return;
        };
        if produced == 0 {
            return;
        }
        let per_file = Duration::from_nanos(self.produce_nanos.load(Ordering::Relaxed) / produced)
            .max(Duration::from_micros(1));
        // Little's law, with half again for the spread of request times.
        let law = self.writers as f64 * request.as_secs_f64() / per_file.as_secs_f64() * 1.5;
        let limit = (law.ceil() as usize + 1).clamp(MIN_IN_FLIGHT, state.ceiling);
        if limit != state.limit {
            state.limit = limit;
            state.why = format!(
                "{limit}: requests took {:.1} ms, and each of {} writers made a file every {:.2} ms",
                request.as_secs_f64() * 1e3,
                self.writers,
                per_file.as_secs_f64() * 1e3
            );
        }
    }

    /// Waits until no upload is in flight.
    pub(super) fn drain(&self) {
        let mut state = self.state.lock().unpoisoned();
        while state.in_flight > 0 {
            state = self.freed.wait(state).unpoisoned();
        }
    }

    /// The most uploads that were in flight at once, and what the limit was last and why.
    pub(super) fn summary(&self) -> (usize, String) {
        let state = self.state.lock().unpoisoned();
        (state.peak, state.why.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_follows_littles_law_and_halves_when_throttled() {
        let meter = Arc::new(Meter::default());
        let gate = Gate::new(Arc::clone(&meter), 2, u64::MAX, None);
        // Requests of 20 ms; each writer makes a file every 1 ms: 2 * 20 / 1 * 1.5 + 1 = 61.
        meter.requests.store(10, Ordering::Relaxed);
        meter.micros.store(200_000, Ordering::Relaxed);
        for _ in 0..10 {
            gate.produced(Duration::from_millis(1));
        }
        for _ in 0..EVERY {
            gate.enter(1);
            gate.leave(1);
        }
        assert_eq!(gate.state.lock().unpoisoned().limit, 61);
        meter.throttled.store(1, Ordering::Relaxed);
        for _ in 0..EVERY {
            gate.enter(1);
            gate.leave(1);
        }
        let state = gate.state.lock().unpoisoned();
        assert_eq!((state.limit, state.ceiling), (30, 30));
        assert!(state.why.contains("slow down"), "{}", state.why);
    }

    #[test]
    fn one_upload_always_fits_the_budget() {
        let gate = Gate::new(Arc::new(Meter::default()), 1, 10, None);
        gate.enter(100);
        gate.leave(100);
        gate.drain();
        assert_eq!(gate.summary().0, 1);
    }
}
