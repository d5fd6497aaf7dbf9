//! Locks that outlive a panic. Every critical section in fastwrite leaves its data whole, so a
//! panic on another thread (a program's own, inside a `Batch`) does not taint what the lock
//! guards: a poisoned lock is taken as it is, and the run goes on to report what it did.

use std::sync::PoisonError;

/// Takes the value of a lock operation whether or not another thread panicked while holding
/// it: `mutex.lock().unpoisoned()`, `condvar.wait(guard).unpoisoned()`, `get_mut`,
/// `into_inner`.
pub(crate) trait Unpoisoned<T> {
    fn unpoisoned(self) -> T;
}

impl<T> Unpoisoned<T> for Result<T, PoisonError<T>> {
    fn unpoisoned(self) -> T {
        self.unwrap_or_else(PoisonError::into_inner)
    }
}
