//! When an endpoint probes its peer's clock (sans-IO). Each endpoint measures the other over the
//! tunnel's own path with NTP's four-timestamp exchange (RFC 5905 §8): it sends a `probe` at t1 on
//! its clock; the peer stamps t2 when the probe arrives and t3 just before it sends its `answer`;
//! the answer arrives at t4. The harness fits offset and drift to many such exchanges, keeping
//! those with the smallest round-trip times (issue 16 §2), so it needs many early on, when the
//! path is idle and a run is about to start, and a steady trickle later to follow the drift:
//! every `DENSE_INTERVAL_US` for `DENSE_SPAN_US` from the connection, then every
//! `SPARSE_INTERVAL_US` until the endpoint exits. A probe that could not go out on time is not
//! sent late in a burst: the schedule skips to its next slot.

/// Probes this often at first.
pub const DENSE_INTERVAL_US: u64 = 50_000;
/// For this long after the connection (40 probes).
pub const DENSE_SPAN_US: u64 = 2_000_000;
/// Then this often.
pub const SPARSE_INTERVAL_US: u64 = 500_000;

#[derive(Debug, Clone)]
pub struct ProbeSchedule {
    /// When the endpoint connected, in µs on the caller's clock.
    connected_us: u64,
    /// The next probe's time, in µs since the connection.
    next_us: u64,
}

impl ProbeSchedule {
    /// The first probe is due at the connection.
    pub fn new(connected_us: u64) -> ProbeSchedule {
        ProbeSchedule { connected_us, next_us: 0 }
    }

    /// How long until the next probe is due (zero: now).
    pub fn due_in_us(&self, now_us: u64) -> u64 {
        (self.connected_us + self.next_us).saturating_sub(now_us)
    }

    /// A probe went out at `now_us`: the next is due at the first slot after it.
    pub fn sent(&mut self, now_us: u64) {
        let since_us = now_us.saturating_sub(self.connected_us);
        self.next_us = if since_us + DENSE_INTERVAL_US < DENSE_SPAN_US {
            (since_us / DENSE_INTERVAL_US + 1) * DENSE_INTERVAL_US
        } else {
            let sparse_us = since_us.saturating_sub(DENSE_SPAN_US);
            let slots = if since_us < DENSE_SPAN_US { 0 } else { sparse_us / SPARSE_INTERVAL_US + 1 };
            DENSE_SPAN_US + slots * SPARSE_INTERVAL_US
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The times a punctual prober sends at, from `start_us`, until `end_us`.
    fn sends(start_us: u64, end_us: u64) -> Vec<u64> {
        let mut schedule = ProbeSchedule::new(start_us);
        let mut now_us = start_us;
        let mut sent = Vec::new();
        while now_us < end_us {
            now_us += schedule.due_in_us(now_us);
            sent.push(now_us - start_us);
            schedule.sent(now_us);
        }
        sent
    }

    #[test]
    fn every_50_ms_for_2_s_then_every_500_ms() {
        let sent = sends(7_000, 4_000_000);
        assert_eq!(sent[..3], [0, 50_000, 100_000]);
        assert_eq!(sent.iter().filter(|&&t| t < DENSE_SPAN_US).count(), 40);
        assert_eq!(sent[39..], [1_950_000, 2_000_000, 2_500_000, 3_000_000, 3_500_000, 4_000_000]);
    }

    #[test]
    fn a_late_probe_skips_to_the_next_slot() {
        let mut schedule = ProbeSchedule::new(0);
        schedule.sent(0);
        assert_eq!(schedule.due_in_us(10_000), 40_000);
        schedule.sent(180_000);
        assert_eq!(schedule.due_in_us(180_000), 20_000);
        schedule.sent(2_700_000);
        assert_eq!(schedule.due_in_us(2_700_000), 300_000);
    }
}
