//! Being told to stop by a signal, for a driver that runs no command of its own (`pantheon-udp`;
//! the emulator and the tunnel forward signals to their command instead, [`crate::child`]).
//! Pantheon ends a scheme with SIGTERM to its process group (SIGKILL 2 s later, docs/harness.md); a
//! person at a terminal uses Ctrl-C (SIGINT) or hangs up (SIGHUP): each raises the process's
//! [`StopSignal`], so the loops finish and the process exits with status 0. SIGUSR1 asks for the
//! totals so far (as dd(1) does), which is how a benchmark leaves out a flow's ramp.
//!
//! The handler does only async-signal-safe work (signal-safety(7)): atomic stores and the
//! eventfd's write(2). It is installed without SA_RESTART, so a blocking call it interrupts
//! returns EINTR and the loop around it sees the request.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::stop::StopSignal;

const SIGNALS: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR1];

/// The process's stop signal, which the handler raises; static, so that a late signal never finds
/// it gone.
static STOP: OnceLock<StopSignal> = OnceLock::new();
/// Set by SIGUSR1, cleared when read.
static REPORT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: libc::c_int) {
    if signal == libc::SIGUSR1 {
        // The interrupted wait returns EINTR; nothing needs waking.
        REPORT.store(true, Ordering::Relaxed);
    } else if let Some(stop) = STOP.get() {
        stop.raise();
    }
}

/// The process's signals, taken over; one per process.
pub struct Signals {
    stop: &'static StopSignal,
}

impl Signals {
    /// Takes over SIGTERM, SIGINT, SIGHUP and SIGUSR1 (unblocking them, in case the parent left
    /// them blocked or ignored across exec).
    pub fn install() -> io::Result<Signals> {
        if STOP.get().is_none() {
            // A second install (in a test) keeps the first's signal.
            let _ = STOP.set(StopSignal::new()?);
        }
        let stop = STOP.get().expect("set above");
        // SAFETY: sigaction with a handler that only does async-signal-safe work.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            let mut unblock: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut unblock);
            for signal in SIGNALS {
                if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                libc::sigaddset(&mut unblock, signal);
            }
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &unblock, std::ptr::null_mut());
        }
        Ok(Signals { stop })
    }

    /// Raised by SIGTERM, SIGINT or SIGHUP.
    pub fn stop(&self) -> &StopSignal {
        self.stop
    }

    /// Whether the totals so far were asked for (SIGUSR1) since the last call.
    pub fn take_report_request(&self) -> bool {
        REPORT.load(Ordering::Relaxed) && REPORT.swap(false, Ordering::Relaxed)
    }
}
