//! Waiting for the next thing to do: a datagram arriving, the socket taking datagrams again, a
//! stop request, or a deadline (the next paced send, a controller's timer, a loss deadline).
//!
//! One ppoll(2) with a nanosecond timeout does it (`pantheon_sys::poll`), with the thread's timer
//! slack at 1 ns (`pantheon_sys::clock`). No timer wakes a thread precisely — a few µs late at
//! best, tens of µs when the virtual CPU was halted (measured for the emulator,
//! crates/emu/src/relay.rs) — so a wait sleeps only until `SPIN_NS` before its deadline and then
//! polls without sleeping until the deadline has come. That is what gives pacing its
//! sub-millisecond precision.
//!
//! Except when datagrams are due closer together than that: at 1 Gbit/s a 1464-byte datagram is
//! due every 11.7 µs, and spinning between them keeps a core busy for the whole flow (it held
//! bbr-user to 325 Mbit/s of a 1 Gbit/s link on this 2-core machine, the emulator starved). Then
//! the sender sleeps to its deadline and, woken some tens of µs late, sends the few datagrams
//! that fell due meanwhile back to back: the pacer lets a late sender catch up by up to
//! `MAX_LAG_NS` (crates/cc/src/flow/pacer.rs), so the rate holds and each burst is a handful of
//! datagrams.

use std::io;
use std::os::fd::RawFd;

use pantheon_sys::clock::monotonic_ns;
pub use pantheon_sys::poll::Ready;

/// A deadline closer than this is waited for by polling rather than sleeping.
pub const SPIN_NS: u64 = 50_000;

/// How long to spin before a deadline when datagrams are paced `gap_ns` apart (`None`: not
/// paced): `SPIN_NS`, or nothing when the gap is shorter than that.
pub fn spin_ns(gap_ns: Option<u64>) -> u64 {
    match gap_ns {
        Some(gap_ns) if gap_ns < SPIN_NS => 0,
        _ => SPIN_NS,
    }
}

/// How long to sleep for a deadline `remaining_ns` away, spinning the last `spin_ns`: `Some(0)`
/// polls without sleeping, `None` sleeps until a descriptor is ready (no deadline).
pub fn sleep_ns(remaining_ns: Option<u64>, spin_ns: u64) -> Option<u64> {
    remaining_ns.map(|r| r.saturating_sub(spin_ns))
}

/// Waits until `socket` is readable (or writable, if `want_writable`), `stop` is readable, or
/// the deadline (CLOCK_MONOTONIC ns) is `spin_ns` away; returns at once if it is that close.
pub fn wait(
    socket: RawFd,
    want_writable: bool,
    stop: RawFd,
    deadline_ns: Option<u64>,
    spin_ns: u64,
) -> io::Result<Ready> {
    let timeout_ns = sleep_ns(deadline_ns.map(|d| d.saturating_sub(monotonic_ns())), spin_ns);
    pantheon_sys::poll::wait(socket, want_writable, stop, timeout_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_end_fifty_microseconds_before_the_deadline() {
        assert_eq!(sleep_ns(Some(1_000_000), SPIN_NS), Some(950_000));
        assert_eq!(sleep_ns(Some(SPIN_NS), SPIN_NS), Some(0));
        assert_eq!(sleep_ns(Some(10_000), SPIN_NS), Some(0));
        assert_eq!(sleep_ns(None, SPIN_NS), None);
    }

    #[test]
    fn datagrams_due_closer_than_the_spin_are_slept_for() {
        // 12 Mbit/s: one datagram per ms, spin the last 50 µs; 1 Gbit/s: one per 11.7 µs, sleep.
        assert_eq!(spin_ns(Some(pantheon_cc::flow::pacer::gap_ns(1464, 12_000_000))), SPIN_NS);
        assert_eq!(spin_ns(Some(pantheon_cc::flow::pacer::gap_ns(1464, 1_000_000_000))), 0);
        assert_eq!(spin_ns(None), SPIN_NS);
        assert_eq!(sleep_ns(Some(10_000), 0), Some(10_000));
    }

    #[test]
    fn a_wait_returns_by_its_deadline() {
        let stop = pantheon_sys::stop::StopSignal::new().unwrap();
        let start = monotonic_ns();
        let ready = wait(-1, false, stop.fd(), Some(start + 2_000_000), SPIN_NS).unwrap();
        let waited = monotonic_ns() - start;
        assert_eq!(ready, Ready::default());
        // Asleep until 50 µs before the 2 ms deadline; a loaded machine may wake it later.
        assert!(waited >= 1_950_000, "woke after {waited} ns");
    }
}
