//! Cancellation that belongs to a run: a shared flag, checked before every file and between
//! the chunks of a big one.
//!
//! No process-wide state: two batches in one program cancel independently, and a cancelled
//! batch leaves the next one untouched. The command line sets its run's flag from Ctrl-C.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[doc = concat!("Stops a run (an ", extract_fn!(), ", a ", mirror_fn!(), " or a")]
/// [`Batch`](crate::Batch)) from any thread.
///
/// Clones share one flag. Once cancelled, no new file is started; a file being written is
/// removed; every file already written is still closed and checked, and its errors still come
/// back. Setting the flag is one atomic store, so even a signal handler may call
/// [`Cancel::cancel`].
///
/// ```
/// let cancel = fastwrite::Cancel::new();
/// let other_thread = cancel.clone();
/// other_thread.cancel();
/// assert!(cancel.is_cancelled());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks the run to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Cancel::cancel`] was called on this flag or a clone of it.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
