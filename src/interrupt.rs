//! Ctrl-C and SIGTERM: the run stops starting files, removes the one each writer is in the
//! middle of, waits for the closes in flight, and reports that it was interrupted.
//!
//! Without this, the default action kills the process at once: files half-written under their
//! final names, handles in the close pool never checked. The handler only records the signal
//! (all a signal handler may safely do); the writers, the readers and the walk look at it.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that interrupted the run, or 0.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// SIGINT's number, which Windows' Ctrl-C and Ctrl-Break are reported as.
pub const SIGINT: i32 = 2;

/// Catches Ctrl-C (and SIGTERM on Unix) from now on. Call once, at start.
pub fn install() -> std::io::Result<()> {
    imp::install()
}

/// Whether the run was interrupted.
pub fn interrupted() -> bool {
    SIGNAL.load(Ordering::Relaxed) != 0
}

/// The signal that interrupted the run.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

/// Marks the run as interrupted by `signal`, as the handler does (and as tests may).
pub fn raise(signal: i32) {
    SIGNAL.store(signal, Ordering::Relaxed);
}

/// The error of work abandoned because the run was interrupted: not an entry's failure.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Whether an error is (or was caused by) an interruption.
pub fn is_interruption(error: &anyhow::Error) -> bool {
    error.chain().any(|e| e.is::<Interrupted>())
}

#[cfg(unix)]
mod imp {
    extern "C" fn on_signal(signal: libc::c_int) {
        super::raise(signal);
    }

    pub fn install() -> std::io::Result<()> {
        for signal in [libc::SIGINT, libc::SIGTERM] {
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
