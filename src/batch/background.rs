//! The writers behind [`Batch::spawn_write`](super::Batch::spawn_write): a pool of the batch's
//! own, sized by the output's filesystem, with the content handed to it bounded so a caller
//! that gets ahead waits.

use crate::place::Place;
use std::sync::{Arc, Condvar, Mutex};

use anyhow::anyhow;

use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::sync::Unpoisoned;

/// The writers behind [`Batch::spawn_write`](super::Batch::spawn_write): threads of the batch's own, as many as the
/// output's filesystem asks for (one per core on a local disk; on a network or FUSE
/// filesystem, by Little's law), and the bytes handed to them and not yet written, bounded.
pub(super) struct Background {
    pub(super) pool: rayon::ThreadPool,
    /// The pool's threads, and why that many (for the report).
    pub(super) writers: (usize, String),
    /// Bytes of content waiting or being written, and tasks not yet done.
    pub(super) state: Arc<(Mutex<InFlight>, Condvar)>,
}

#[derive(Default)]
pub(super) struct InFlight {
    bytes: u64,
    tasks: usize,
}

/// Content handed to the background writers and not yet written, at most: a caller that gets
/// ahead of them waits (a file larger than this goes alone).
const BACKGROUND_BYTES: u64 = 64 << 20;

impl Background {
    pub(super) fn start(dest: &Place, opts: &Options) -> Result<Background, Error> {
        let root = dest.named();
        let (count, why) = crate::engine::size_writers(dest, opts);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(count)
            .thread_name(|i| format!("fastwrite-batch-{i}"))
            .build()
            .map_err(|e| {
                Error::new(
                    root,
                    ErrorKind::Write,
                    anyhow!(e).context("cannot start the batch's writer threads"),
                )
            })?;
        Ok(Background {
            pool,
            writers: (count, why),
            state: Arc::default(),
        })
    }

    /// Waits for room for `bytes` more, then counts them and a task in.
    pub(super) fn admit(&self, bytes: u64) {
        let (lock, freed) = &*self.state;
        let mut flight = lock.lock().unpoisoned();
        while flight.bytes > 0 && flight.bytes + bytes > BACKGROUND_BYTES {
            flight = freed.wait(flight).unpoisoned();
        }
        flight.bytes += bytes;
        flight.tasks += 1;
    }

    /// Waits until every task is done.
    pub(super) fn finish(self) {
        let (lock, done) = &*self.state;
        let mut flight = lock.lock().unpoisoned();
        while flight.tasks > 0 {
            flight = done.wait(flight).unpoisoned();
        }
    }
}

/// Counts a background task out when it ends, however it ends (a panic included).
pub(super) struct TaskDone {
    pub(super) state: Arc<(Mutex<InFlight>, Condvar)>,
    pub(super) bytes: u64,
}

impl Drop for TaskDone {
    fn drop(&mut self) {
        let (lock, changed) = &*self.state;
        let mut flight = lock.lock().unpoisoned();
        flight.bytes -= self.bytes;
        flight.tasks -= 1;
        changed.notify_all();
    }
}
