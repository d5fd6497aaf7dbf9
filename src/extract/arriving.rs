//! An archive still arriving: which of its bytes have come, and which of the spans its writers
//! wait for are whole.
//!
//! The download (`remote.rs`) writes each piece into the temporary file that holds the archive,
//! then says so here ([`Arrivals::add`]); the zip's writers ([`Arrivals::take`]) get the entries
//! whose bytes are all there, in the order they complete, so that writing goes on while the
//! rest arrives. Which part of the archive comes first is the download's affair: the GET from
//! the start and the ranges from the end fill it in several places at once, and an entry is
//! ready whichever of them brought it. What must be read before anything can be planned (a
//! symlink's target, an encrypted entry's first bytes) is asked for by its span
//! ([`Arrivals::want`]), which the download fetches with a range of its own at once.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::ops::Range;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How often a writer waiting for bytes looks whether the run was cancelled.
const LOOK_AGAIN: Duration = Duration::from_millis(100);

/// What has arrived of one archive, and who waits for what.
#[derive(Default)]
pub(super) struct Arrivals {
    state: Mutex<State>,
    changed: Condvar,
}

/// One span a writer waits for: `item` is the caller's number for it; `first` items are taken
/// before the others (the big entries, as the local schedule starts them), the biggest first.
pub(super) struct Span {
    pub range: Range<u64>,
    pub item: usize,
    pub cost: u64,
    pub first: bool,
}

#[derive(Default)]
struct State {
    /// What has arrived: runs of the archive, start to end, merged, never touching.
    runs: BTreeMap<u64, u64>,
    /// The spans not whole yet, by start: (end, item, cost, first). They do not overlap.
    waiting: BTreeMap<u64, (u64, usize, u64, bool)>,
    /// Whole spans not taken yet: the first ones, biggest first; then the rest in the order
    /// they completed.
    first: BinaryHeap<(u64, Reverse<usize>)>,
    ready: VecDeque<usize>,
    /// The writers sharing the work, to size what each takes at once.
    writers: usize,
    /// Whether the download has ended, and how.
    ended: Option<Ended>,
    /// Spans asked for before the rest (what must be read before anything is planned), not
    /// yet handed to the download.
    wanted: Vec<Range<u64>>,
    /// Only those are wanted (a listing): the download asks for nothing more by ranges.
    only_wanted: bool,
}

enum Ended {
    Whole,
    /// Broken off: why, until someone takes it to report it.
    Failed(Option<anyhow::Error>),
}

impl Arrivals {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A writer that panicked has left nothing half-changed that matters here.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `range` of the archive has arrived (and is in the file).
    pub fn add(&self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let mut state = self.lock();
        let run = state.merge(range);
        if state.settle(run) {
            self.changed.notify_all();
        }
    }

    /// The download has ended: every byte is there (`Ok`), or it broke off.
    pub fn end(&self, result: anyhow::Result<()>) {
        let mut state = self.lock();
        state.ended = Some(match result {
            Ok(()) => Ended::Whole,
            Err(error) => Ended::Failed(Some(error)),
        });
        if let Some(Ended::Whole) = state.ended {
            // Whatever is still waited for is all it will ever be: its writer's checks say
            // what is wrong with it.
            let waiting = std::mem::take(&mut state.waiting);
            for (_, (_, item, cost, first)) in waiting {
                state.push(item, cost, first);
            }
        }
        self.changed.notify_all();
    }

    /// Waits until `range` has arrived whole; `Err` if the download broke off first, or
    /// `stop` says to give up (checked every [`LOOK_AGAIN`]).
    pub fn wait_for(&self, range: Range<u64>, stop: &dyn Fn() -> bool) -> anyhow::Result<()> {
        let mut state = self.lock();
        loop {
            if state.has(&range) {
                return Ok(());
            }
            match &mut state.ended {
                Some(Ended::Failed(error)) => {
                    return Err(error
                        .take()
                        .unwrap_or_else(|| anyhow::anyhow!("the download broke off")));
                }
                Some(Ended::Whole) => {
                    anyhow::bail!("the archive ended before {}..{}", range.start, range.end)
                }
                None if stop() => anyhow::bail!("cancelled"),
                None => {}
            }
            state = self.wait(state);
        }
    }

    /// Asks the download for `range` before the rest, with a range request of its own (what
    /// must be read before anything is planned); [`Arrivals::wait_for`] waits for it.
    pub fn want(&self, range: Range<u64>) {
        let mut state = self.lock();
        if !state.has(&range) && state.ended.is_none() {
            state.wanted.push(range);
        }
    }

    /// Whether `range` has arrived whole.
    pub fn has(&self, range: &Range<u64>) -> bool {
        self.lock().has(range)
    }

    /// From now on only the spans asked for are wanted (`true`: a listing needs nothing else),
    /// and the download asks for no other range; or everything is again (`false`).
    pub fn only_wanted(&self, only: bool) {
        self.lock().only_wanted = only;
    }

    /// The spans asked for before the rest since the download last asked: it fetches each
    /// with a range request of its own, at once; and whether the rest is wanted.
    pub fn wanted(&self) -> (Vec<Range<u64>>, bool) {
        let mut state = self.lock();
        (std::mem::take(&mut state.wanted), !state.only_wanted)
    }

    /// Starts waiting for `spans` on behalf of `writers` writers; those already whole are
    /// ready at once.
    pub fn watch(&self, spans: impl IntoIterator<Item = Span>, writers: usize) {
        let mut state = self.lock();
        state.writers = writers.max(1);
        for span in spans {
            let whole = state.has(&span.range) || matches!(state.ended, Some(Ended::Whole));
            match whole {
                true => state.push(span.item, span.cost, span.first),
                false => {
                    let entry = (span.range.end, span.item, span.cost, span.first);
                    state.waiting.insert(span.range.start, entry);
                }
            }
        }
        self.changed.notify_all();
    }

    /// Puts into `into` (emptied first) the next items whose spans are whole, waiting for
    /// them; `false` when there are no more: all given, the download broken off, or `stop`.
    pub fn take(&self, into: &mut Vec<usize>, stop: &dyn Fn() -> bool) -> bool {
        into.clear();
        let mut state = self.lock();
        loop {
            if let Some((_, Reverse(item))) = state.first.pop() {
                into.push(item);
                return true;
            }
            if !state.ready.is_empty() {
                // A share that leaves the other writers some of what is there.
                let count = (state.ready.len() / (2 * state.writers)).clamp(1, 32);
                into.extend(state.ready.drain(..count));
                return true;
            }
            let over = match state.ended {
                Some(Ended::Failed(_)) => true,
                Some(Ended::Whole) => state.waiting.is_empty(),
                None => false,
            };
            if over || stop() {
                return false;
            }
            state = self.wait(state);
        }
    }

    /// The download's failure, once, for the run to report; and how many watched items it
    /// left unwritten.
    pub fn failure(&self) -> Option<(anyhow::Error, usize)> {
        let mut state = self.lock();
        let left = state.waiting.len() + state.ready.len() + state.first.len();
        match &mut state.ended {
            Some(Ended::Failed(error)) => error.take().map(|e| (e, left)),
            _ => None,
        }
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        match self.changed.wait_timeout(state, LOOK_AGAIN) {
            Ok((state, _)) => state,
            Err(e) => e.into_inner().0,
        }
    }
}

impl State {
    /// Adds `range` to the runs; the run it is now part of.
    fn merge(&mut self, range: Range<u64>) -> Range<u64> {
        let (mut start, mut end) = (range.start, range.end);
        if let Some((&s, &e)) = self.runs.range(..=start).next_back()
            && e >= start
        {
            start = s;
            end = end.max(e);
        }
        // The runs that begin within it, merged into it; the last may end past it, and no
        // other run begins before that end (runs never overlap or touch).
        let touching: Vec<(u64, u64)> = self
            .runs
            .range(start..=end)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.runs.remove(&s);
            end = end.max(e);
        }
        self.runs.insert(start, end);
        start..end
    }

    /// Whether `range` lies in one run.
    fn has(&self, range: &Range<u64>) -> bool {
        range.is_empty()
            || self
                .runs
                .range(..=range.start)
                .next_back()
                .is_some_and(|(_, &e)| e >= range.end)
    }

    /// Makes ready the spans that `run` holds whole; whether there were any.
    fn settle(&mut self, run: Range<u64>) -> bool {
        let whole: Vec<u64> = self
            .waiting
            .range(run.clone())
            .filter(|(_, (end, ..))| *end <= run.end)
            .map(|(&start, _)| start)
            .collect();
        for start in &whole {
            if let Some((_, item, cost, first)) = self.waiting.remove(start) {
                self.push(item, cost, first);
            }
        }
        !whole.is_empty()
    }

    fn push(&mut self, item: usize, cost: u64, first: bool) {
        match first {
            true => self.first.push((cost, Reverse(item))),
            false => self.ready.push_back(item),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(range: Range<u64>, item: usize) -> Span {
        Span {
            range,
            item,
            cost: 1,
            first: false,
        }
    }

    fn taken(arrivals: &Arrivals) -> Vec<usize> {
        let mut into = Vec::new();
        let mut all = Vec::new();
        while arrivals.take(&mut into, &|| true) {
            all.extend(into.iter().copied());
        }
        all.sort();
        all
    }

    #[test]
    fn a_span_is_ready_once_every_byte_of_it_has_come_in_any_order() {
        let arrivals = Arrivals::default();
        arrivals.watch([span(0..10, 0), span(10..30, 1), span(30..40, 2)], 2);
        arrivals.add(25..40);
        assert_eq!(taken(&arrivals), [2]);
        arrivals.add(0..5);
        arrivals.add(12..20);
        assert_eq!(taken(&arrivals), Vec::<usize>::new());
        arrivals.add(5..12);
        assert_eq!(taken(&arrivals), [0]);
        arrivals.add(20..25);
        assert_eq!(taken(&arrivals), [1]);
    }

    #[test]
    fn runs_merge_whatever_order_and_overlap_the_pieces_come_in() {
        let mut state = State::default();
        assert_eq!(state.merge(10..20), 10..20);
        assert_eq!(state.merge(30..40), 30..40);
        assert_eq!(state.merge(0..5), 0..5);
        assert_eq!(state.merge(15..31), 10..40);
        assert_eq!(state.merge(5..10), 0..40);
        assert_eq!(state.runs.len(), 1);
        assert!(state.has(&(3..39)));
        assert!(!state.has(&(3..41)));
    }

    #[test]
    fn big_spans_are_taken_first_and_the_biggest_before_them() {
        let arrivals = Arrivals::default();
        let big = |range, item, cost| Span {
            range,
            item,
            cost,
            first: true,
        };
        arrivals.add(0..100);
        arrivals.watch([span(0..10, 0), big(10..50, 1, 40), big(50..100, 2, 50)], 1);
        let mut into = Vec::new();
        let mut order = Vec::new();
        while arrivals.take(&mut into, &|| true) {
            order.extend(into.iter().copied());
        }
        assert_eq!(order, [2, 1, 0]);
    }

    #[test]
    fn a_broken_download_ends_the_waiting_and_is_reported_once() {
        let arrivals = Arrivals::default();
        arrivals.watch([span(0..10, 0), span(10..20, 1)], 1);
        arrivals.add(0..10);
        arrivals.end(Err(anyhow::anyhow!("connection reset")));
        let mut into = Vec::new();
        assert!(arrivals.take(&mut into, &|| false));
        assert_eq!(into, [0]);
        assert!(!arrivals.take(&mut into, &|| false));
        let (error, left) = arrivals.failure().unwrap();
        assert_eq!((error.to_string().as_str(), left), ("connection reset", 1));
        assert!(arrivals.failure().is_none());
        assert!(arrivals.wait_for(10..20, &|| false).is_err());
    }

    #[test]
    fn a_whole_download_gives_what_was_still_waited_for() {
        let arrivals = Arrivals::default();
        arrivals.watch([span(0..10, 0), span(10..20, 1)], 1);
        arrivals.add(0..15);
        arrivals.end(Ok(()));
        assert_eq!(taken(&arrivals), [0, 1]);
        assert!(arrivals.wait_for(0..15, &|| false).is_ok());
        assert!(arrivals.wait_for(0..20, &|| false).is_err());
    }

    #[test]
    fn a_writer_waits_for_bytes_from_another_thread() {
        let arrivals = std::sync::Arc::new(Arrivals::default());
        arrivals.watch([span(0..10, 7)], 1);
        let download = {
            let arrivals = arrivals.clone();
            std::thread::spawn(move || {
                arrivals.add(0..10);
                arrivals.end(Ok(()));
            })
        };
        let mut into = Vec::new();
        assert!(arrivals.take(&mut into, &|| false));
        assert_eq!(into, [7]);
        assert!(!arrivals.take(&mut into, &|| false));
        download.join().unwrap();
    }
}
