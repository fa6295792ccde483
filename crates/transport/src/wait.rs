//! Waiting for the next thing to do: a datagram arriving, the socket taking datagrams again, a
//! stop request, or a deadline (the next paced send, a controller's timer, a loss deadline).
//!
//! One ppoll(2) with a nanosecond timeout does it, with the thread's timer slack at 1 ns
//! (clock.rs). No timer wakes a thread precisely — a few µs late at best, tens of µs when the
//! virtual CPU was halted (measured for the emulator, crates/emu/src/relay.rs) — so a wait
//! sleeps only until `SPIN_NS` before its deadline and then polls without sleeping until the
//! deadline has come. That is what gives pacing its sub-millisecond precision.

use std::io;
use std::os::fd::RawFd;

use crate::clock::monotonic_ns;

/// A deadline closer than this is waited for by polling rather than sleeping.
pub const SPIN_NS: u64 = 50_000;

/// How a wait ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready {
    pub readable: bool,
    pub writable: bool,
    pub stop: bool,
}

/// How long to sleep for a deadline `remaining_ns` away: `Some(0)` polls without sleeping,
/// `None` sleeps until a descriptor is ready (no deadline).
pub fn sleep_ns(remaining_ns: Option<u64>) -> Option<u64> {
    remaining_ns.map(|r| r.saturating_sub(SPIN_NS))
}

/// Waits until `socket` is readable (or writable, if `want_writable`), `stop` is readable, or
/// the deadline (CLOCK_MONOTONIC ns) is `SPIN_NS` away; returns at once if it is that close.
pub fn wait(socket: RawFd, want_writable: bool, stop: RawFd, deadline_ns: Option<u64>) -> io::Result<Ready> {
    let events = if want_writable { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN };
    let mut fds = [
        libc::pollfd { fd: socket, events, revents: 0 },
        libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
    ];
    let timeout = sleep_ns(deadline_ns.map(|d| d.saturating_sub(monotonic_ns()))).map(|ns| libc::timespec {
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
    // POLLERR on the socket (a pending ICMP error) counts as readable: the next receive consumes it.
    let socket_events = fds[0].revents;
    Ok(Ready {
        readable: socket_events & (libc::POLLIN | libc::POLLERR) != 0,
        writable: socket_events & libc::POLLOUT != 0,
        stop: fds[1].revents != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_end_fifty_microseconds_before_the_deadline() {
        assert_eq!(sleep_ns(Some(1_000_000)), Some(950_000));
        assert_eq!(sleep_ns(Some(SPIN_NS)), Some(0));
        assert_eq!(sleep_ns(Some(10_000)), Some(0));
        assert_eq!(sleep_ns(None), None);
    }

    #[test]
    fn a_wait_returns_by_its_deadline() {
        let socket = crate::socket::UdpSocket::bind(std::net::SocketAddrV4::new([127, 0, 0, 1].into(), 0), false).unwrap();
        let stop = crate::socket::UdpSocket::bind(std::net::SocketAddrV4::new([127, 0, 0, 1].into(), 0), false).unwrap();
        let start = monotonic_ns();
        let ready = wait(socket.fd(), false, stop.fd(), Some(start + 2_000_000)).unwrap();
        let waited = monotonic_ns() - start;
        assert_eq!(ready, Ready::default());
        // Asleep until 50 µs before the 2 ms deadline; a loaded machine may wake it later.
        assert!(waited >= 1_950_000, "woke after {waited} ns");
    }
}
