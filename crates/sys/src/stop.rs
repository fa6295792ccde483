//! Telling a driver's threads to finish. A stop request is a flag, which a busy loop reads once per
//! iteration (a relaxed load: free while data flows), and an eventfd that becomes readable, which a
//! thread asleep in poll(2) polls beside its packet descriptors and so wakes at once. The flag is
//! set before the eventfd is written, so a thread that saw neither goes to sleep on a descriptor
//! that is already (or will soon be) readable: a request is never missed. Raising is
//! async-signal-safe (an atomic store and write(2), signal-safety(7)), so a signal handler may
//! raise it ([`crate::signal`]).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::errno::check;

pub struct StopSignal {
    /// Set once the stop was requested; never cleared.
    raised: AtomicBool,
    /// An eventfd, readable once the stop was requested.
    wake: OwnedFd,
}

impl StopSignal {
    pub fn new() -> io::Result<StopSignal> {
        // SAFETY: plain eventfd(2). Non-blocking, so that raising never waits (not even a
        // 2^64-th time).
        let fd = check(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: fd is fresh and ours.
        Ok(StopSignal { raised: AtomicBool::new(false), wake: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Requests the stop; async-signal-safe.
    pub fn raise(&self) {
        self.raised.store(true, Ordering::Relaxed);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to an eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Relaxed)
    }

    /// The descriptor to poll for POLLIN.
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poll::wait;

    #[test]
    fn a_raised_signal_wakes_a_wait_and_stays_raised() {
        let stop = StopSignal::new().unwrap();
        assert!(!stop.is_raised());
        assert!(!wait(-1, false, stop.fd(), Some(0)).unwrap().stop);
        stop.raise();
        assert!(stop.is_raised());
        assert!(wait(-1, false, stop.fd(), None).unwrap().stop);
        assert!(wait(-1, false, stop.fd(), None).unwrap().stop);
    }
}
