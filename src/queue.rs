//! A bounded multi-producer, multi-consumer queue that sleeps without spinning.
//!
//! General-purpose channels (crossbeam, std's mpsc) spin and call `sched_yield` a few times
//! before a receiver sleeps. That is right for latency-sensitive messaging, but here a close
//! thread (or a writer waiting for a streamed archive) is idle most of the time, and every
//! yield is a system call paid per hand-over. This queue puts a waiting thread to sleep at once, and wakes one only
//! when somebody is actually asleep, so a hand-over costs no system call when nobody waits.

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
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an item, waiting while the queue is full. Gives the item back if no receiver is
    /// left to take it.
    pub fn push(&self, item: T) -> Result<(), T> {
        let mut state = self.lock();
        while state.items.len() >= self.bound && state.receivers > 0 {
            state.sleeping_senders += 1;
            state = self.not_full.wait(state).unwrap_or_else(|e| e.into_inner());
            state.sleeping_senders -= 1;
        }
        if state.receivers == 0 {
            return Err(item);
        }
        state.weight += (self.weigh)(&item);
        state.peak_weight = state.peak_weight.max(state.weight);
        state.items.push_back(item);
        if state.sleeping_receivers > 0 {
            self.not_empty.notify_one();
        }
        Ok(())
    }

    /// Takes the oldest item, waiting for one; `None` once the queue is closed and empty.
    pub fn pop(&self) -> Option<T> {
        let mut state = self.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                state.weight -= (self.weigh)(&item);
                if state.sleeping_senders > 0 {
                    self.not_full.notify_one();
                }
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state.sleeping_receivers += 1;
            state = self
                .not_empty
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
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
    use std::sync::Arc;

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
        assert_eq!(total, (0..4000).sum());
    }
}
