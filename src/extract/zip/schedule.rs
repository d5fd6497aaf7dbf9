//! The order in which a zip's writers take its files: the longest work first.
//!
//! A wheel such as torch's holds one entry of 900 MB among 11,000 small ones. Taken in archive
//! order, whichever writer reaches it late inflates it alone while the others have nothing left
//! (one deflate stream decodes on one core). Longest-processing-time-first (Graham's greedy
//! rule) bounds that tail: the entries big enough to matter start first, each taken by the next
//! free writer, and the rest follow in archive order, which keeps each writer's reads of the
//! mapped archive close together and its files in the same folders.
//!
//! Writers take work from one shared cursor, not from rayon's split ranges: rayon processes a
//! range's leaf in sequence, so two big entries in one leaf would run one after the other on
//! the same thread while another thread idled.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// An entry this large or larger is never worth ordering by size.
const BIG_ENOUGH_TO_ORDER: u64 = 1 << 20;

/// The most small entries a writer takes at once (fewer near the end, so the work stays even).
const MOST_PER_TAKE: usize = 32;

/// The order of the work, and how far the writers have got into it.
#[derive(Debug)]
pub(super) struct Schedule {
    /// Indices into the caller's list, in the order they are to be taken.
    order: Vec<usize>,
    /// How many of `order` come first because they are big: taken one at a time.
    big: usize,
    writers: usize,
    next: AtomicUsize,
}

/// The cost from which an item is big: one that could on its own leave the other writers idle
/// for a noticeable part of the run (an eighth of one writer's fair share).
pub(super) fn big_enough(costs: &[u64], writers: usize) -> u64 {
    let total: u64 = costs.iter().sum();
    (total / (8 * writers.max(1) as u64)).max(BIG_ENOUGH_TO_ORDER)
}

impl Schedule {
    /// Orders work items of the given costs (a file's size) for `writers` threads.
    pub fn new(costs: &[u64], writers: usize) -> Schedule {
        let writers = writers.max(1);
        let threshold = big_enough(costs, writers);
        let (mut big, small): (Vec<usize>, Vec<usize>) =
            (0..costs.len()).partition(|&i| costs[i] >= threshold);
        // Stable: equal sizes keep their archive order.
        big.sort_by_key(|&i| std::cmp::Reverse(costs[i]));
        let big_len = big.len();
        big.extend(small);
        Schedule {
            order: big,
            big: big_len,
            writers,
            next: AtomicUsize::new(0),
        }
    }

    /// The next positions of [`Schedule::order`] for a writer to do, or `None` when all are
    /// taken. Every position is given out exactly once, whichever threads ask.
    pub fn take(&self) -> Option<Range<usize>> {
        let len = self.order.len();
        let mut start = self.next.load(Ordering::Relaxed);
        loop {
            if start >= len {
                return None;
            }
            let count = if start < self.big {
                1
            } else {
                ((len - start) / (self.writers * 4)).clamp(1, MOST_PER_TAKE)
            };
            let end = start + count;
            match self
                .next
                .compare_exchange_weak(start, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(start..end),
                Err(now) => start = now,
            }
        }
    }

    /// The caller's indices for positions taken with [`Schedule::take`].
    pub fn items(&self, taken: Range<usize>) -> &[usize] {
        &self.order[taken]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_taken(schedule: &Schedule) -> Vec<usize> {
        let mut seen = Vec::new();
        while let Some(range) = schedule.take() {
            seen.extend_from_slice(schedule.items(range));
        }
        seen
    }

    #[test]
    fn big_entries_come_first_largest_first_one_at_a_time_then_the_rest_in_order() {
        let mb = 1 << 20;
        // Total about 1,000 MB: a 900 MB entry and a 100 MB one are big for 2 writers.
        let mut costs = vec![1000u64; 100];
        costs[40] = 100 * mb;
        costs[70] = 900 * mb;
        costs[10] = 2 * mb; // under 1,000 MB / 16: stays in archive order
        let schedule = Schedule::new(&costs, 2);
        assert_eq!(
            schedule.take().map(|r| schedule.items(r).to_vec()),
            Some(vec![70])
        );
        assert_eq!(
            schedule.take().map(|r| schedule.items(r).to_vec()),
            Some(vec![40])
        );
        let rest = all_taken(&schedule);
        let expected: Vec<usize> = (0..100).filter(|&i| i != 40 && i != 70).collect();
        assert_eq!(rest, expected);
    }

    #[test]
    fn small_archives_keep_archive_order_and_every_entry_is_taken_once_across_threads() {
        let costs: Vec<u64> = (0..10_000).map(|i| (i % 97) * 100).collect();
        let schedule = Schedule::new(&costs, 4);
        let mut seen: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4).map(|_| s.spawn(|| all_taken(&schedule))).collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("no panic"))
                .collect()
        });
        seen.sort_unstable();
        assert_eq!(seen, (0..10_000).collect::<Vec<_>>());
        let fresh = Schedule::new(&costs, 4);
        assert_eq!(
            all_taken(&fresh),
            (0..10_000).collect::<Vec<_>>(),
            "no reordering"
        );
    }

    #[test]
    fn takes_shrink_toward_the_end_and_nothing_is_empty() {
        let schedule = Schedule::new(&[5; 1000], 2);
        let sizes: Vec<usize> = std::iter::from_fn(|| schedule.take().map(|r| r.len())).collect();
        assert_eq!(sizes[0], MOST_PER_TAKE);
        assert_eq!(*sizes.last().expect("some takes"), 1);
        assert!(sizes.iter().all(|&n| n >= 1));
        assert_eq!(sizes.iter().sum::<usize>(), 1000);
        assert!(Schedule::new(&[], 2).take().is_none());
    }
}
