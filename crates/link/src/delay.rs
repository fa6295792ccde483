//! Propagation delay: every packet leaves exactly `delay_us` after it entered (Mahimahi's
//! `mm-delay`, but at microsecond rather than millisecond resolution). A constant delay keeps
//! packets in order, so a FIFO of release times is all the state there is.

use std::collections::VecDeque;

#[derive(Debug)]
pub struct Delay<P> {
    /// One-way propagation delay in microseconds.
    delay_us: u64,
    /// Packets in flight with the time they leave, in non-decreasing release order.
    in_flight: VecDeque<(u64, P)>,
}

impl<P> Delay<P> {
    pub fn new(delay_us: u64) -> Self {
        Delay { delay_us, in_flight: VecDeque::new() }
    }

    /// A packet enters at `now_us`. Its release time saturates at `u64::MAX` µs rather than wrap
    /// (the delay is at most an hour, `bounds::MAX_DELAY_US`, so only a clock 584 000 years on
    /// could get there).
    pub fn push(&mut self, now_us: u64, packet: P) {
        self.in_flight.push_back((now_us.saturating_add(self.delay_us), packet));
    }

    /// Release time of the oldest packet in flight.
    pub fn next_release_us(&self) -> Option<u64> {
        self.in_flight.front().map(|&(t, _)| t)
    }

    /// The oldest packet if it is due by `now_us`, with its release time.
    pub fn pop_due(&mut self, now_us: u64) -> Option<(u64, P)> {
        match self.in_flight.front() {
            Some(&(t, _)) if t <= now_us => self.in_flight.pop_front(),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_exactly_after_the_delay() {
        let mut d = Delay::new(20_000);
        d.push(5, 'a');
        d.push(7, 'b');
        assert_eq!(d.next_release_us(), Some(20_005));
        assert_eq!(d.pop_due(20_004), None);
        assert_eq!(d.pop_due(20_010), Some((20_005, 'a')));
        assert_eq!(d.pop_due(20_010), Some((20_007, 'b')));
        assert!(d.is_empty());
    }
}
