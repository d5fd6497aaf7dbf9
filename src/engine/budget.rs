//! The memory budget between a streamed source's reader and the writers (`feed.rs`): bytes of
//! file content in flight, at most a limit. The reader waits for room; writers free what they
//! wrote.

use std::sync::{Condvar, Mutex};

use crate::sync::Unpoisoned;

/// Bytes of file content in flight between the reader and the writers, at most `limit`.
pub(super) struct Budget {
    pub(super) limit: u64,
    state: Mutex<BudgetState>,
    freed: Condvar,
}

#[derive(Default)]
struct BudgetState {
    used: u64,
    /// The reader is asleep waiting for room: only then is a release worth a wake-up call.
    reader_waiting: bool,
}

impl Budget {
    pub(super) fn new(limit: u64) -> Budget {
        Budget {
            limit,
            state: Mutex::default(),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BudgetState> {
        self.state.lock().unpoisoned()
    }

    /// Takes `n` bytes if they fit now.
    pub(super) fn try_acquire(&self, n: u64) -> bool {
        let mut state = self.lock();
        let fits = state.used + n <= self.limit;
        if fits {
            state.used += n;
        }
        fits
    }

    /// Waits until `n` more bytes fit (`n` is never more than the limit).
    pub(super) fn acquire(&self, n: u64) {
        let mut state = self.lock();
        while state.used + n > self.limit {
            state.reader_waiting = true;
            state = self.freed.wait(state).unpoisoned();
        }
        state.reader_waiting = false;
        state.used += n;
    }

    pub(super) fn release(&self, n: u64) {
        let mut state = self.lock();
        state.used -= n;
        if state.reader_waiting {
            self.freed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_budget_holds_a_reader_back_until_writers_free_memory() {
        let budget = Arc::new(Budget::new(10));
        budget.acquire(8);
        let waiter = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || budget.acquire(5))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished(), "8 + 5 bytes must not fit in 10");
        budget.release(8);
        waiter.join().unwrap();
        assert_eq!(budget.lock().used, 5);
        assert!(!budget.try_acquire(6));
        assert!(budget.try_acquire(5));
    }
}
