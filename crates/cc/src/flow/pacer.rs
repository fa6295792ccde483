//! Pacing: packets leave at most at the controller's pacing rate, each `size · 8 / rate` seconds
//! after the previous one (`Decision::pacing_rate_bps`, crates/cc/src/lib.rs), the spacing that
//! BBR (Cardwell et al., ACM Queue 2016) and Copa (Arun & Balakrishnan, NSDI 2018, §2, which
//! paces at twice cwnd per RTT) ask of their sender.
//!
//! The pacer keeps a pacing clock: the time the last packet was due. The next packet is due one
//! gap later, the gap taken at the rate in force now, so a rate change applies from the very next
//! packet. A packet sent late (the thread woke late, a send took long) moves the clock only to its
//! due time, so the next one may leave sooner and the average rate holds — but never more than
//! `MAX_LAG_NS` behind the real clock, which bounds the burst that catching up can make after an
//! idle spell (8 packets at 1 Gbit/s, none at 12 Mbit/s). That bound is the controller's
//! (`CongestionControl::pacing_max_lag_ns`): a congestion controller's rate is a ceiling, and one
//! whose sender was stopped has no claim to the sends it missed; a constant-bit-rate source's rate
//! is what it is (cbr.rs), so it catches up after longer stalls.
//!
//! Times are `Instant`s (instant.rs: nanoseconds, because a gap at 1 Gbit/s is 11.712 µs).

use super::Instant;

/// How far the pacing clock may trail the real clock: the largest wake-up lateness it makes up.
pub const MAX_LAG_NS: u64 = 100_000;

/// Nanoseconds one packet of `bytes` occupies at `rate_bps` (a rate of 0 counts as 1 bit/s).
pub fn gap_ns(bytes: u64, rate_bps: u64) -> u64 {
    (bytes as u128 * 8 * 1_000_000_000 / rate_bps.max(1) as u128).min(u64::MAX as u128) as u64
}

/// The pacing clock of one flow.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pacer {
    /// When the last packet was due (the pacing clock), ns on the flow's clock; `None` before the
    /// first packet.
    last_due_ns: Option<u64>,
    /// Size of the last packet sent, bytes: the next gap is its transmission time.
    last_bytes: u64,
}

impl Pacer {
    /// When the next packet may leave at `rate_bps`.
    pub fn next_due(&self, rate_bps: u64) -> Instant {
        Instant::from_ns(self.last_due_ns.map_or(0, |due| due.saturating_add(gap_ns(self.last_bytes, rate_bps))))
    }

    /// A packet of `bytes` left at `now`; `rate_bps` is the pacing rate it was sent under, if any.
    /// The clock then trails the real one by at most `max_lag_ns`.
    pub fn on_sent(&mut self, now: Instant, bytes: u64, rate_bps: Option<u64>, max_lag_ns: u64) {
        let now_ns = now.as_ns();
        let due_ns = match (rate_bps, self.last_due_ns) {
            (Some(rate), Some(_)) => self.next_due(rate).as_ns(),
            // The first packet, or one sent without pacing, starts the clock where it is sent.
            _ => now_ns,
        };
        self.last_due_ns = Some(due_ns.min(now_ns).max(now_ns.saturating_sub(max_lag_ns)));
        self.last_bytes = bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACKET: u64 = 1464;

    #[test]
    fn gaps_are_exact_in_nanoseconds() {
        // 1464 B · 8 = 11 712 bit: 11.712 µs at 1 Gbit/s, 976 µs at 12 Mbit/s.
        assert_eq!(gap_ns(PACKET, 1_000_000_000), 11_712);
        assert_eq!(gap_ns(PACKET, 12_000_000), 976_000);
        assert_eq!(gap_ns(PACKET, 0), PACKET * 8 * 1_000_000_000);
    }

    #[test]
    fn on_time_packets_are_spaced_by_one_gap() {
        let mut pacer = Pacer::default();
        assert_eq!(pacer.next_due(12_000_000).as_ns(), 0);
        let mut now_ns = 5_000_000;
        for _ in 0..10 {
            pacer.on_sent(Instant::from_ns(now_ns), PACKET, Some(12_000_000), MAX_LAG_NS);
            let next_ns = pacer.next_due(12_000_000).as_ns();
            assert_eq!(next_ns, now_ns + 976_000);
            now_ns = next_ns;
        }
    }

    #[test]
    fn a_late_packet_keeps_the_schedule() {
        let rate = 1_000_000_000;
        let mut pacer = Pacer::default();
        pacer.on_sent(Instant::from_ns(1_000_000), PACKET, Some(rate), MAX_LAG_NS);
        // Due at 1 011 712 ns, sent 30 µs late: the next is due one gap after the due time, so
        // the two leave 11.712 µs apart on average.
        pacer.on_sent(Instant::from_ns(1_041_712), PACKET, Some(rate), MAX_LAG_NS);
        assert_eq!(pacer.next_due(rate).as_ns(), 1_000_000 + 2 * 11_712);
    }

    #[test]
    fn catching_up_after_idle_is_bounded() {
        let rate = 1_000_000_000;
        let mut pacer = Pacer::default();
        pacer.on_sent(Instant::from_ns(0), PACKET, Some(rate), MAX_LAG_NS);
        // One second idle: the clock restarts MAX_LAG_NS behind, so back-to-back sends are
        // allowed only until it has caught up: floor(100 µs / 11.712 µs) + 1 = 9 packets.
        let now_ns = 1_000_000_000;
        let mut burst = 0;
        while pacer.next_due(rate).as_ns() <= now_ns {
            pacer.on_sent(Instant::from_ns(now_ns), PACKET, Some(rate), MAX_LAG_NS);
            burst += 1;
        }
        assert_eq!(burst, 9);
    }

    #[test]
    fn a_rate_change_applies_to_the_next_gap() {
        let mut pacer = Pacer::default();
        pacer.on_sent(Instant::from_ns(0), PACKET, Some(1_000_000), MAX_LAG_NS);
        assert_eq!(pacer.next_due(1_000_000).as_ns(), 11_712_000);
        assert_eq!(pacer.next_due(2_000_000).as_ns(), 5_856_000);
    }

    #[test]
    fn without_a_rate_the_clock_follows_the_sends() {
        let mut pacer = Pacer::default();
        pacer.on_sent(Instant::from_ns(7_000), PACKET, None, MAX_LAG_NS);
        assert_eq!(pacer.next_due(1_000_000_000).as_ns(), 7_000 + 11_712);
    }
}
