//! A bounded multi-producer, multi-consumer queue that sleeps without spinning.
//!
//! General-purpose channels (crossbeam, std's mpsc) spin and call `sched_yield` a few times
//! before a receiver sleeps. That is right for latency-sensitive messaging, but here a close
//! thread (or a writer waiting for a streamed archive) is idle most of the time, and every
//! yield is a system call paid per hand-over. This queue puts a waiting thread to sleep at once,
//! and wakes one only when somebody is actually asleep, so a hand-over costs no system call when
//! nobody waits.
//!
//! Wake-ups travel as a chain: a sender that adds a batch wakes one receiver, and a receiver
//! that takes an item and leaves more behind wakes the next one. A sender pays for one wake-up
//! per batch, not one per item, while every item still reaches a thread of its own: on a
//! virtual machine a wake-up is an inter-processor interrupt, which costs the sender tens of
//! microseconds (docs/design.md, "The close queue").

use crate::sync::Unpoisoned;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

struct State<T> {
    items: VecDeque<T>,
    /// No more items will be pushed: receivers drain what is left, then stop.
    closed: bool,
    /// Receivers still running; pushing with none left would wait forever.
    receivers: usize,
    sleeping_receivers: usize,
    sleeping_senders: usize,
    /// The weight of what is queued now, and the most it has been.
    weight: usize,
    peak_weight: usize,
}

impl<T> State<T> {
    fn add(&mut self, item: T, weigh: fn(&T) -> usize) {
        self.weight += weigh(&item);
        self.peak_weight = self.peak_weight.max(self.weight);
        self.items.push_back(item);
    }
}

pub struct Queue<T> {
    state: Mutex<State<T>>,
    not_empty: Condvar,
    not_full: Condvar,
    bound: usize,
    /// How much an item counts towards the peak (a batch of handles counts its handles).
    weigh: fn(&T) -> usize,
}

impl<T> Queue<T> {
    /// A queue of at most `bound` items for `receivers` threads; `weigh` says what an item
    /// counts for in [`Queue::peak_weight`].
    pub fn new(bound: usize, receivers: usize, weigh: fn(&T) -> usize) -> Queue<T> {
        Queue {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(bound),
                closed: false,
                receivers,
                sleeping_receivers: 0,
                sleeping_senders: 0,
                weight: 0,
                peak_weight: 0,
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            bound: bound.max(1),
            weigh,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // The state stays consistent across a panic (every change is a single step).
        self.state.lock().unpoisoned()
    }

    /// Adds an item, waiting while the queue is full. Gives the item back if no receiver is
    /// left to take it.
    pub fn push(&self, item: T) -> Result<(), T> {
        let mut state = self.wait_for_room();
        if state.receivers == 0 {
            return Err(item);
        }
        state.add(item, self.weigh);
        self.wake_receiver(state);
        Ok(())
    }

    /// Adds every item of `items` (emptying it), waiting while the queue is full; the bound
    /// only has to have room for the first, so a batch may take the queue past its bound by
    /// `items.len() - 1`. One receiver is woken; it wakes the next (see `pop`). With no
    /// receiver left, returns false and leaves the items in `items`.
    #[must_use]
    pub fn push_all(&self, items: &mut Vec<T>) -> bool {
        let mut state = self.wait_for_room();
        if state.receivers == 0 {
            return false;
        }
        for item in items.drain(..) {
            state.add(item, self.weigh);
        }
        self.wake_receiver(state);
        true
    }

    /// The state, once the queue has room for an item or no receiver is left.
    fn wait_for_room(&self) -> MutexGuard<'_, State<T>> {
        let mut state = self.lock();
        while state.items.len() >= self.bound && state.receivers > 0 {
            state.sleeping_senders += 1;
            state = self.not_full.wait(state).unpoisoned();
            state.sleeping_senders -= 1;
        }
        state
    }

    /// Wakes one receiver if one is asleep and there is something to take. The lock is let go
    /// first, so that the receiver does not wake only to wait for it.
    fn wake_receiver(&self, state: MutexGuard<'_, State<T>>) {
        let wake = state.sleeping_receivers > 0 && !state.items.is_empty();
        drop(state);
        if wake {
            self.not_empty.notify_one();
        }
    }

    /// Takes the oldest item, waiting for one; `None` once the queue is closed and empty. If
    /// items are left and a receiver sleeps, wakes it: the chain that spreads a batch.
    pub fn pop(&self) -> Option<T> {
        self.take(true)
    }

    /// As `pop`, but leaves the items behind for the receivers already awake, this one's next
    /// turn included: for items done sooner than a sleeping receiver could be woken.
    pub fn pop_unspread(&self) -> Option<T> {
        self.take(false)
    }

    fn take(&self, spread: bool) -> Option<T> {
        let mut state = self.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                state.weight -= (self.weigh)(&item);
                let wake_sender = state.sleeping_senders > 0;
                if spread {
                    self.wake_receiver(state);
                } else {
                    drop(state);
                }
                if wake_sender {
                    self.not_full.notify_one();
                }
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state.sleeping_receivers += 1;
            state = self.not_empty.wait(state).unpoisoned();
            state.sleeping_receivers -= 1;
        }
    }

    /// No more pushes: receivers finish what is queued, then `pop` returns `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.not_empty.notify_all();
    }

    /// One more receiver will take items (a thread added to a running pool).
    pub fn add_receiver(&self) {
        self.lock().receivers += 1;
    }

    /// A receiver has stopped (normally or by panicking); senders must not wait for it.
    pub fn receiver_gone(&self) {
        let mut state = self.lock();
        state.receivers -= 1;
        if state.receivers == 0 {
            self.not_full.notify_all();
        }
    }

    /// Whether any receiver is left to take items.
    pub fn has_receivers(&self) -> bool {
        self.lock().receivers > 0
    }

    /// The most weight that was ever waiting in the queue at once.
    pub fn peak_weight(&self) -> usize {
        self.lock().peak_weight
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    #[test]
    fn items_come_out_in_order_and_close_drains() {
        let q = Queue::new(4, 1, |_| 1);
        for i in 0..3 {
            q.push(i).unwrap();
        }
        q.close();
        assert_eq!(
            (q.pop(), q.pop(), q.pop(), q.pop()),
            (Some(0), Some(1), Some(2), None)
        );
    }

    #[test]
    fn a_full_queue_holds_the_sender_until_an_item_is_taken() {
        let q = Arc::new(Queue::new(2, 1, |_| 1));
        q.push(0).unwrap();
        q.push(1).unwrap();
        let sender = {
            let q = Arc::clone(&q);
            std::thread::spawn(move || q.push(2))
        };
        // The sender is blocked: the queue never grows past its bound.
        while q.lock().sleeping_senders == 0 {
            std::thread::yield_now();
        }
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(), Some(0));
        sender.join().unwrap().unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q.peak_weight(), 2, "never more than the bound waiting");
    }

    #[test]
    fn with_no_receiver_left_a_push_gives_the_item_back() {
        let q = Arc::new(Queue::new(1, 1, |_| 1));
        q.push(0).unwrap();
        let sender = {
            let q = Arc::clone(&q);
            std::thread::spawn(move || q.push(1))
        };
        while q.lock().sleeping_senders == 0 {
            std::thread::yield_now();
        }
        q.receiver_gone();
        assert_eq!(sender.join().unwrap(), Err(1));
    }

    #[test]
    fn a_batch_reaches_a_sleeping_receiver_per_item() {
        // Four receivers asleep; each takes one item and then holds on to it. A batch of four
        // wakes one receiver only: the other three items can go out only if each receiver wakes
        // the next.
        let receivers = 4;
        let q = Arc::new(Queue::new(16, receivers, |_| 1));
        let (taken, release) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(Barrier::new(receivers + 1)),
        );
        let threads: Vec<_> = (0..receivers)
            .map(|_| {
                let (q, taken, release) =
                    (Arc::clone(&q), Arc::clone(&taken), Arc::clone(&release));
                std::thread::spawn(move || {
                    let item = q.pop();
                    taken.fetch_add(1, Ordering::SeqCst);
                    release.wait();
                    item
                })
            })
            .collect();
        while q.lock().sleeping_receivers < receivers {
            std::thread::yield_now();
        }
        let mut batch = vec![0, 1, 2, 3];
        assert!(q.push_all(&mut batch));
        assert!(batch.is_empty(), "the batch was handed over whole");
        // A liveness bound, not a timing: without the chain this never completes.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while taken.load(Ordering::SeqCst) < receivers {
            assert!(
                std::time::Instant::now() < deadline,
                "only {} of {receivers} receivers were woken for the batch",
                taken.load(Ordering::SeqCst)
            );
            std::thread::yield_now();
        }
        release.wait();
        let mut got: Vec<_> = threads
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, [0, 1, 2, 3]);
    }

    #[test]
    fn an_unspread_pop_wakes_nobody_else() {
        // Two receivers asleep, a batch of two: the one woken takes the first item without
        // spreading, so the second is still waiting for it, and the other receiver still sleeps.
        let q = Arc::new(Queue::new(4, 2, |_| 1));
        let sleepers: Vec<_> = (0..2)
            .map(|_| {
                let q = Arc::clone(&q);
                std::thread::spawn(move || {
                    let first = q.pop_unspread();
                    (first, q.pop_unspread())
                })
            })
            .collect();
        while q.lock().sleeping_receivers < 2 {
            std::thread::yield_now();
        }
        assert!(q.push_all(&mut vec![1, 2]));
        // The one woken takes both (its first pop did not pass the second item on) and is
        // done; the other was never woken. Spreading would have given each one item, and both
        // would wait for a second.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !sleepers.iter().any(|t| t.is_finished()) {
            assert!(
                std::time::Instant::now() < deadline,
                "both receivers still wait"
            );
            std::thread::yield_now();
        }
        assert_eq!(q.len(), 0);
        assert_eq!(q.lock().sleeping_receivers, 1);
        q.close();
        let mut got: Vec<_> = sleepers.into_iter().map(|t| t.join().unwrap()).collect();
        got.sort();
        assert_eq!(got, [(None, None), (Some(1), Some(2))]);
    }

    #[test]
    fn a_batch_needs_room_for_its_first_item_only() {
        let q = Queue::new(2, 1, |_| 1);
        q.push(0).unwrap();
        let mut batch = vec![1, 2, 3];
        assert!(q.push_all(&mut batch));
        assert_eq!(q.len(), 4);
        assert_eq!(q.peak_weight(), 4);
        assert_eq!(q.pop(), Some(0));
        assert_eq!(q.pop(), Some(1));
    }

    #[test]
    fn with_no_receiver_left_a_batch_stays_with_the_sender() {
        let q = Queue::new(4, 1, |_| 1);
        q.receiver_gone();
        let mut batch = vec![1, 2];
        assert!(!q.push_all(&mut batch));
        assert_eq!(batch, [1, 2]);
    }

    #[test]
    fn many_producers_and_consumers_lose_nothing() {
        let q = Arc::new(Queue::new(3, 3, |_| 1));
        let consumers: Vec<_> = (0..3)
            .map(|_| {
                let q = Arc::clone(&q);
                std::thread::spawn(move || {
                    let mut sum = 0u64;
                    while let Some(x) = q.pop() {
                        sum += x;
                    }
                    sum
                })
            })
            .collect();
        let producers: Vec<_> = (0..4)
            .map(|p| {
                let q = Arc::clone(&q);
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        q.push(p * 1000 + i).unwrap();
                    }
                })
            })
            .collect();
        producers.into_iter().for_each(|p| p.join().unwrap());
        q.close();
        let total: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(total, (0..4000u64).sum::<u64>());
    }
}
