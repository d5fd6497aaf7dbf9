//! Progress is injected: the engine calls a [`Reporter`] whose methods do nothing by default.
//!
//! The terminal bar is one implementation. Writers only bump two relaxed atomic counters; a
//! separate thread redraws the bar ten times a second, so progress costs the hot path nothing
//! measurable however many files there are.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Told what the engine is doing. Called from many threads at once, so an implementation
/// should only bump counters and draw elsewhere (as [`Bar`] does).
pub trait Reporter: Send + Sync {
    /// The plan is known: this many files and bytes will be written (0 and 0: not known up
    /// front).
    fn planned(&self, _files: u64, _bytes: u64) {}
    /// Some of a file's content is written (called per chunk, so big files show progress).
    fn bytes_written(&self, _bytes: u64) {}
    /// One file is written.
    fn file_written(&self) {}
    /// The run is over (successfully or not).
    fn finished(&self) {}
}

/// Reports nothing.
pub struct Silent;

impl Reporter for Silent {}

#[derive(Default)]
struct Counters {
    files: AtomicU64,
    bytes: AtomicU64,
    done: AtomicBool,
}

/// A bar of files and bytes on stderr, redrawn by its own thread.
pub struct Bar {
    bar: ProgressBar,
    counters: Arc<Counters>,
    ticker: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Bar {
    /// A bar that draws itself once the run's plan is known.
    pub fn new() -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {msg} ({binary_bytes}/{binary_total_bytes})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Bar {
            bar,
            counters: Arc::default(),
            ticker: std::sync::Mutex::new(None),
        }
    }
}

impl Default for Bar {
    fn default() -> Self {
        Bar::new()
    }
}

impl Reporter for Bar {
    fn planned(&self, files: u64, bytes: u64) {
        self.bar.set_length(bytes);
        let bar = self.bar.clone();
        let counters = Arc::clone(&self.counters);
        let ticker = std::thread::Builder::new()
            .name("fastwrite-progress".into())
            .spawn(move || {
                while !counters.done.load(Ordering::Relaxed) {
                    let done = counters.files.load(Ordering::Relaxed);
                    bar.set_position(counters.bytes.load(Ordering::Relaxed));
                    // Zero: the total is not known up front (a mirror into an empty folder).
                    if files == 0 {
                        bar.set_message(format!("{done} files"));
                    } else {
                        bar.set_message(format!("{done}/{files} files"));
                    }
                    bar.tick();
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        // No ticker thread only means no bar; the run itself is unaffected.
        if let Ok(handle) = ticker {
            *self.ticker.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        }
    }

    fn bytes_written(&self, bytes: u64) {
        self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn file_written(&self) {
        self.counters.files.fetch_add(1, Ordering::Relaxed);
    }

    fn finished(&self) {
        self.counters.done.store(true, Ordering::Relaxed);
        if let Some(handle) = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = handle.join();
        }
        self.bar.finish_and_clear();
    }
}
