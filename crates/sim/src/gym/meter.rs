//! What one decision interval of a gym environment did, from the data direction, in
//! `pantheon analyze`'s terms (metrics.rs; docs/analysis.md): bytes are the tunnel's inner
//! datagrams, a datagram's delay is its one-way delay (receive − send time), and a datagram counts
//! in the interval in which it is delivered or dropped.

use pantheon_link::{DropCause, Ecn};

use crate::observer::{Direction, Observer};
use crate::simulation::DATA_INNER_BYTES;

/// Counts since the interval began.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meter {
    /// Data datagrams that entered the tunnel at the sender.
    pub sent_packets: u64,
    /// Data datagrams that reached the receiver.
    pub delivered_packets: u64,
    /// The sum of their one-way delays, µs.
    pub delay_sum_us: u64,
    /// Data datagrams the uplink dropped (its queue, its loss, its policer).
    pub dropped_packets: u64,
}

impl Meter {
    /// Throughput over an interval of `interval_us`, Mbit/s (bits per µs).
    pub fn throughput_mbps(&self, interval_us: u64) -> f64 {
        (self.delivered_packets * u64::from(DATA_INNER_BYTES) * 8) as f64 / interval_us as f64
    }

    /// Mean one-way delay of the datagrams delivered, ms; `None` when none was.
    pub fn delay_ms(&self) -> Option<f64> {
        (self.delivered_packets > 0).then(|| self.delay_sum_us as f64 / self.delivered_packets as f64 / 1e3)
    }

    /// Dropped over dropped and delivered (0 when neither happened).
    pub fn loss_rate(&self) -> f64 {
        let ended = self.dropped_packets + self.delivered_packets;
        if ended == 0 {
            0.0
        } else {
            self.dropped_packets as f64 / ended as f64
        }
    }
}

impl Observer for Meter {
    fn data_sent(&mut self, _flow: usize, _uid: u64, _t_us: u64, _ecn: Ecn) {
        self.sent_packets += 1;
    }

    fn data_received(&mut self, _flow: usize, _uid: u64, t_us: u64, sent_us: u64, _ecn: Ecn) {
        self.delivered_packets += 1;
        self.delay_sum_us += t_us - sent_us;
    }

    fn link_drop(&mut self, direction: Direction, _t_us: u64, _link_uid: u64, _bytes: u32, _cause: DropCause) {
        if direction == Direction::Uplink {
            self.dropped_packets += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_by_hand() {
        let mut m = Meter::default();
        m.data_received(0, 0, 30_000, 10_000, Ecn::NotEct);
        m.data_received(0, 1, 31_000, 11_000, Ecn::NotEct);
        m.data_received(0, 2, 36_000, 11_000, Ecn::NotEct);
        m.link_drop(Direction::Uplink, 36_000, 7, 1500, DropCause::Queue);
        m.link_drop(Direction::Downlink, 36_000, 3, 96, DropCause::Queue);
        // 3 datagrams of 1464 bytes in 10 ms: 3.5136 Mbit/s; delays 20, 20, 25 ms.
        assert!((m.throughput_mbps(10_000) - 3.5136).abs() < 1e-12);
        assert!((m.delay_ms().unwrap() - 65.0 / 3.0).abs() < 1e-12);
        assert_eq!(m.loss_rate(), 0.25);
        assert_eq!(Meter::default().delay_ms(), None);
        assert_eq!(Meter::default().loss_rate(), 0.0);
    }
}
