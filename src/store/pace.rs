//! The process's cap on requests to object stores ([`set_max_requests_per_second`]): every
//! request of every run in the process (uploads, parts, listings, HEADs, downloads, retries)
//! takes the next free slot of one schedule, a slot every `1/N` s, before it is sent, so a
//! fleet of N-capped processes stays under a store's per-prefix limit (S3: about 3,500 PUT/s
//! and 5,500 GET/s per partitioned prefix) whatever each run's uploads in flight.
//!
//! Slots are handed out strictly in turn, without a burst: the cap holds over any window, and a
//! request waits no longer than the ones before it need.

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::Unpoisoned;

/// The cap (the gap between two slots) and the next free slot.
static PACE: Mutex<Option<(Duration, Instant)>> = Mutex::new(None);

/// Caps the requests this process makes to object stores at `per_second`, every run's
/// together (`None`: no cap, the default). Runs under way take the new cap from their next
/// request. The command line's `--max-requests-per-second`; docs/many-archives.md has what
/// to set for a fleet.
///
/// ```
/// # #[cfg(feature = "s3")] {
/// use std::num::NonZeroU32;
/// fastwrite::set_max_requests_per_second(NonZeroU32::new(500));
/// # fastwrite::set_max_requests_per_second(None);
/// # }
/// ```
pub fn set_max_requests_per_second(per_second: Option<NonZeroU32>) {
    let gap = per_second.map(|n| Duration::from_secs(1) / n.get());
    *PACE.lock().unpoisoned() = gap.map(|gap| (gap, Instant::now()));
}

/// The slot a request about to be sent may go at (`None`: now, there is no cap).
fn take_slot() -> Option<Instant> {
    let mut pace = PACE.lock().unpoisoned();
    let (gap, next) = pace.as_mut()?;
    let now = Instant::now();
    let slot = (*next).max(now);
    *next = slot + *gap;
    Some(slot)
}

/// Waits for this request's turn under the cap.
pub(crate) async fn wait_turn() {
    if let Some(slot) = take_slot()
        && slot > Instant::now()
    {
        tokio::time::sleep_until(slot.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_a_gap_apart_in_turn_and_none_without_a_cap() {
        // One test touches the process's cap, so that no other sees it set.
        assert_eq!(take_slot(), None);
        set_max_requests_per_second(NonZeroU32::new(100));
        let slots: Vec<Instant> = (0..5).map(|_| take_slot().unwrap()).collect();
        for pair in slots.windows(2) {
            assert_eq!(pair[1] - pair[0], Duration::from_millis(10));
        }
        set_max_requests_per_second(None);
        assert_eq!(take_slot(), None);
    }
}
