//! Ctrl-C and SIGTERM (the command line's, not the library's): the run's [`Cancel`] flag is
//! set, so it stops starting files, removes the one each writer is in the middle of, waits
//! for the closes in flight, and the process reports that it was interrupted.
//!
//! Without this, the default action kills the process at once: files half-written under their
//! final names, handles in the close pool never checked. The handler only stores to atomics
//! (all a signal handler may safely do); the engine looks at the flag.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

use fastwrite::Cancel;

/// The signal that interrupted the run, or 0.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The run's flag, set by the handler.
static RUN: OnceLock<Cancel> = OnceLock::new();

/// SIGINT's number, which Windows' Ctrl-C and Ctrl-Break are reported as.
#[cfg(windows)]
const SIGINT: i32 = 2;

/// Catches Ctrl-C (and SIGTERM on Unix) from now on, cancelling `run`. Call once, at start.
pub fn install(run: &Cancel) -> std::io::Result<()> {
    let _ = RUN.set(run.clone());
    imp::install()
}

/// The signal that interrupted the run.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

/// Marks the run as interrupted by `signal`: what the handler does.
fn raise(signal: i32) {
    SIGNAL.store(signal, Ordering::Relaxed);
    // An atomic load and an atomic store: safe in a signal handler.
    if let Some(run) = RUN.get() {
        run.cancel();
    }
}

#[cfg(unix)]
mod imp {
    extern "C" fn on_signal(signal: libc::c_int) {
        super::raise(signal);
    }

    pub fn install() -> std::io::Result<()> {
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // A signal ignored at the start stays ignored: a shell without job control starts a
            // background job so (`fastwrite extract ... &` in a script), and Ctrl-C at the
            // terminal is then not meant for it. GNU tar, coreutils' `sort` and Python do the
            // same.
            // SAFETY: a null new action only reads the current one into `current`.
            let ignored = unsafe {
                let mut current: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, std::ptr::null(), &mut current) == 0
                    && current.sa_sigaction == libc::SIG_IGN
            };
            if ignored {
                continue;
            }
            // SAFETY: the action is fully initialised; the handler only stores to an atomic,
            // which is async-signal-safe.
            let rc = unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                // Restart interrupted reads and writes: the workers notice the flag themselves.
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut())
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(windows)]
mod imp {
    use windows_sys::Win32::System::Console::{
        CTRL_BREAK_EVENT, CTRL_C_EVENT, SetConsoleCtrlHandler,
    };
    use windows_sys::core::BOOL;

    unsafe extern "system" fn on_ctrl(event: u32) -> BOOL {
        if event == CTRL_C_EVENT || event == CTRL_BREAK_EVENT {
            super::raise(super::SIGINT);
            1
        } else {
            0
        }
    }

    pub fn install() -> std::io::Result<()> {
        // SAFETY: registers a handler that only stores to an atomic.
        if unsafe { SetConsoleCtrlHandler(Some(on_ctrl), 1) } == 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}
