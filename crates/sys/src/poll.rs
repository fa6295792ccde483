//! Sleeping until a descriptor is ready, a stop is requested, or a timeout passes: one ppoll(2),
//! whose timeout is in nanoseconds (poll(2)'s is in milliseconds, too coarse for pacing or an
//! emulated link). How precisely a timeout ends depends on the thread's timer slack
//! ([`crate::clock::tighten_timer_slack`]) and on how a driver spins through the last
//! microseconds before a deadline, which each driver decides for itself.

use std::io;
use std::os::fd::RawFd;

/// How a wait ended; all false when a signal interrupted it or its timeout passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready {
    /// The descriptor has something to read, or a pending error (an ICMP error for an earlier
    /// datagram) that the next receive consumes.
    pub readable: bool,
    pub writable: bool,
    /// The stop descriptor ([`crate::stop::StopSignal::fd`]) is readable.
    pub stop: bool,
}

/// Waits until `fd` is readable (or writable, if `want_writable`), `stop` is readable, or
/// `timeout_ns` has passed (`None`: no timeout; `Some(0)`: only look). A negative descriptor is
/// not waited for.
pub fn wait(fd: RawFd, want_writable: bool, stop: RawFd, timeout_ns: Option<u64>) -> io::Result<Ready> {
    let events = if want_writable { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN };
    let mut fds =
        [libc::pollfd { fd, events, revents: 0 }, libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 }];
    let timeout = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let timeout_ptr = timeout.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: fds and the timeout outlive the call; a null sigmask keeps the thread's mask.
    let ret = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ptr, std::ptr::null()) };
    if ret < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted { Ok(Ready::default()) } else { Err(err) };
    }
    let events = fds[0].revents;
    Ok(Ready {
        readable: events & (libc::POLLIN | libc::POLLERR) != 0,
        writable: events & libc::POLLOUT != 0,
        stop: fds[1].revents != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::monotonic_ns;

    #[test]
    fn a_wait_with_nothing_ready_lasts_its_timeout() {
        let start = monotonic_ns();
        assert_eq!(wait(-1, false, -1, Some(2_000_000)).unwrap(), Ready::default());
        let waited_ns = monotonic_ns() - start;
        assert!(waited_ns >= 2_000_000, "woke after {waited_ns} ns");
    }
}
