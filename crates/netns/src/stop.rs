//! Telling I/O threads to finish: an eventfd that becomes readable, so a thread sleeping in
//! poll(2) on its packet descriptors wakes at once and a busy one sees it at its next poll.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::sys::check;

pub struct StopSignal(OwnedFd);

impl StopSignal {
    pub fn new() -> io::Result<StopSignal> {
        // SAFETY: plain eventfd(2).
        let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) })?;
        // SAFETY: fd is fresh and ours.
        Ok(StopSignal(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The descriptor to poll for POLLIN.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    pub fn raise(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to an eventfd.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}
