//! How many uploads are in flight: a bucket's close pool. An upload completing is a file's
//! close; the writers hand each finished file over and go on, and this gate holds them only
//! when as many uploads are in flight as the run can use, or their bytes fill the budget.
//!
//! The number is the store's `Sizer`'s (`store/flight.rs`): Little's law, with the writers as
//! the other side, each timing the work of making a file (reading, decompressing), and halved
//! when the store throttles.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::store::{EVERY, Meter, Sizer};
use crate::sync::Unpoisoned;

/// Before anything is measured.
const START: usize = 32;

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
    completed: u64,
    sizer: Sizer,
}

impl Gate {
    /// A gate sized as the run goes, or held at `fixed` (`Options::uploads`).
    pub(super) fn new(
        meter: Arc<Meter>,
        writers: usize,
        budget: u64,
        fixed: Option<usize>,
    ) -> Gate {
        Gate {
            state: Mutex::new(State {
                in_flight: 0,
                bytes: 0,
                completed: 0,
                sizer: Sizer::new(START, fixed),
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
            && (state.in_flight >= state.sizer.limit
                || state.bytes.saturating_add(bytes) > self.budget)
        {
            state = self.freed.wait(state).unpoisoned();
        }
        state.in_flight += 1;
        state.bytes += bytes;
        state.sizer.peak = state.sizer.peak.max(state.in_flight);
    }

    /// An upload holding `bytes` ended (well or not).
    pub(super) fn leave(&self, bytes: u64) {
        let mut state = self.state.lock().unpoisoned();
        state.in_flight -= 1;
        state.bytes -= bytes;
        state.completed += 1;
        if state.completed.is_multiple_of(EVERY) {
            let produced = self.produced.load(Ordering::Relaxed);
            let per_file = (produced > 0).then(|| {
                Duration::from_nanos(self.produce_nanos.load(Ordering::Relaxed) / produced)
            });
            let side = format!("each of {} writers made a file", self.writers);
            state
                .sizer
                .resize(&self.meter, self.writers, per_file, &side);
        }
        drop(state);
        self.freed.notify_all();
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
        (state.sizer.peak, state.sizer.why.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_follows_the_writers_and_the_requests() {
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
        let (peak, why) = gate.summary();
        assert_eq!(gate.state.lock().unpoisoned().sizer.limit, 61);
        assert_eq!(peak, 1);
        assert!(why.contains("each of 2 writers made a file"), "{why}");
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
