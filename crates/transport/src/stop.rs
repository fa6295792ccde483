//! Being told to stop. Pantheon ends a scheme with SIGTERM to its process group (SIGKILL 2 s
//! later, docs/harness.md); a person at a terminal uses Ctrl-C (SIGINT) or hangs up (SIGHUP).
//! Either end of `pantheon-udp` then finishes its loop and exits with status 0. SIGUSR1 asks for
//! the totals so far (as dd(1) does), which is how a benchmark leaves out a flow's ramp.
//!
//! The handler sets a flag, which the loops read once per iteration (a relaxed load: free while
//! data flows), and writes to an eventfd that every wait polls, so a thread asleep in ppoll(2)
//! wakes at once. A signal arriving between the flag's check and the ppoll is therefore never
//! missed (the self-pipe trick); only async-signal-safe calls happen in the handler
//! (signal-safety(7): write(2)).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

const SIGNALS: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR1];

static REQUESTED: AtomicBool = AtomicBool::new(false);
static REPORT: AtomicBool = AtomicBool::new(false);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    if signal == libc::SIGUSR1 {
        // The interrupted wait returns EINTR; nothing needs waking.
        REPORT.store(true, Ordering::Relaxed);
        return;
    }
    REQUESTED.store(true, Ordering::Relaxed);
    let fd = WAKE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: write(2) of 8 bytes to an eventfd is async-signal-safe.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
}

/// The process's stop request; one per process.
pub struct Stop {
    wake: OwnedFd,
}

impl Stop {
    /// Takes over SIGTERM, SIGINT, SIGHUP and SIGUSR1 (unblocking them, in case the parent left
    /// them blocked or ignored across exec).
    pub fn install() -> io::Result<Stop> {
        // SAFETY: plain eventfd(2).
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is fresh and ours.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        WAKE_FD.store(fd, Ordering::Relaxed);
        // SAFETY: sigaction with a handler that only does async-signal-safe work; no SA_RESTART,
        // so a blocking call returns EINTR and the loop sees the flag.
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
        Ok(Stop { wake })
    }

    pub fn requested(&self) -> bool {
        REQUESTED.load(Ordering::Relaxed)
    }

    /// Whether the totals so far were asked for since the last call.
    pub fn take_report_request(&self) -> bool {
        REPORT.load(Ordering::Relaxed) && REPORT.swap(false, Ordering::Relaxed)
    }

    /// Readable once a stop was requested: poll it beside the socket.
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }
}

impl Drop for Stop {
    /// A late signal must not write to whatever reuses the descriptor's number.
    fn drop(&mut self) {
        WAKE_FD.store(-1, Ordering::Relaxed);
    }
}
