//! Reno in user space: additive increase, multiplicative decrease (Jacobson, SIGCOMM 1988;
//! RFC 5681).
//!
//! The idea: probe for bandwidth by growing the window one packet per round trip, and halve it
//! when a loss shows the buffer overflowed; below the slow-start threshold, double it every
//! round trip to find the operating point quickly.
//!
//! - Slow start, RFC 5681 §3.1 eq. (2) with Appropriate Byte Counting (RFC 3465 §2.2, L = 1):
//!   each acknowledgement adds min(acknowledged bytes, MSS).
//! - Congestion avoidance, RFC 3465 §2.1 (byte counting): once a full window of bytes has been
//!   acknowledged, add one MSS — exactly one packet per window of acknowledgements, whatever
//!   their size.
//! - On loss, RFC 5681 §3.2 eq. (4) and §3.1 (ssthresh = max(FlightSize/2, 2·MSS); cwnd =
//!   ssthresh), once per congestion event: losses of packets sent before the reduction belong to
//!   the same event (the NewReno recovery period, RFC 6582 §3.2), and their acknowledgements do
//!   not grow the window.
//!
//! Constants: initial window 10 packets (RFC 6928); MSS 1500 bytes (the link model's
//! opportunity); both configurable (`initial_cwnd_packets`, `mss_bytes`).
//!
//! Deviations: (1) the reduction halves cwnd rather than FlightSize — for a full-throttle
//! window-limited flow the two differ by at most the packets already declared lost, and halving
//! the window is what Linux does (tcp_reno_ssthresh); (2) there is no fast retransmit and no
//! window inflation, because nothing is retransmitted; (3) a loss found by the sender's timeout
//! (see `sent_packets`) is treated like any other loss rather than collapsing cwnd to one packet as
//! RFC 5681 §3.1 does after an RTO — that rule exists to restart the ACK clock after
//! retransmission, which this flow never needs.
//!
//! Driver: window only (no pacing rate, no timer): the driver sends whenever the window allows.

use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS, DEFAULT_MSS_BYTES};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenoConfig {
    pub mss_bytes: u64,
    pub initial_cwnd_packets: u64,
}

impl Default for RenoConfig {
    fn default() -> Self {
        RenoConfig { mss_bytes: DEFAULT_MSS_BYTES, initial_cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS }
    }
}

impl RenoConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = RenoConfig::default();
        Ok(RenoConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            initial_cwnd_packets: p.u64_at_least("initial_cwnd_packets", 2, d.initial_cwnd_packets)?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Reno {
    mss_bytes: u64,
    /// Congestion window in bytes.
    cwnd_bytes: u64,
    /// Slow-start threshold in bytes: below it the window doubles per round trip, at or above it
    /// the window grows one MSS per round trip. Unbounded until the first loss.
    ssthresh_bytes: u64,
    /// Bytes acknowledged in congestion avoidance since the window last grew (RFC 3465).
    bytes_acked: u64,
    /// Time of the last reduction: packets sent up to then belong to that congestion event.
    recovery_start_us: Option<u64>,
}

impl Reno {
    pub fn new(config: RenoConfig) -> Self {
        Reno {
            mss_bytes: config.mss_bytes,
            cwnd_bytes: config.initial_cwnd_packets * config.mss_bytes,
            ssthresh_bytes: u64::MAX,
            bytes_acked: 0,
            recovery_start_us: None,
        }
    }

    fn in_recovery(&self, sent_us: u64) -> bool {
        self.recovery_start_us.is_some_and(|start_us| sent_us <= start_us)
    }

    pub fn ssthresh_bytes(&self) -> u64 {
        self.ssthresh_bytes
    }
}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn on_sent(&mut self, _e: &Sent) {}

    fn on_ack(&mut self, e: &Acked) {
        if self.in_recovery(e.sent_us) {
            return;
        }
        if self.cwnd_bytes < self.ssthresh_bytes {
            self.cwnd_bytes += e.bytes.min(self.mss_bytes);
            return;
        }
        self.bytes_acked += e.bytes;
        if self.bytes_acked >= self.cwnd_bytes {
            self.bytes_acked -= self.cwnd_bytes;
            self.cwnd_bytes += self.mss_bytes;
        }
    }

    fn on_loss(&mut self, e: &Lost) {
        if self.in_recovery(e.sent_us) {
            return;
        }
        self.recovery_start_us = Some(e.now_us);
        self.ssthresh_bytes = (self.cwnd_bytes / 2).max(2 * self.mss_bytes);
        self.cwnd_bytes = self.ssthresh_bytes;
        self.bytes_acked = 0;
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: Some(self.cwnd_bytes), pacing_rate_bps: None, wake_at_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack, loss};

    fn cwnd_bytes(r: &Reno) -> u64 {
        r.decision().cwnd_bytes.unwrap()
    }

    #[test]
    fn slow_start_doubles_per_round_trip() {
        let mut r = Reno::new(RenoConfig::default());
        assert_eq!(cwnd_bytes(&r), 15_000);
        // One round trip: the 10 packets of the initial window are acknowledged.
        for seq in 0..10 {
            r.on_ack(&ack(100_000, seq, 0, 1500));
        }
        assert_eq!(cwnd_bytes(&r), 30_000);
    }

    #[test]
    fn loss_halves_once_per_event_then_one_mss_per_window() {
        let mut r = Reno::new(RenoConfig::default());
        for seq in 0..30 {
            r.on_ack(&ack(100_000, seq, 0, 1500));
        }
        assert_eq!(cwnd_bytes(&r), 40 * 1500);
        r.on_loss(&loss(200_000, 30, 100_000));
        assert_eq!((cwnd_bytes(&r), r.ssthresh_bytes()), (20 * 1500, 20 * 1500));
        // Another loss from the same window and acknowledgements of packets sent before the
        // reduction change nothing.
        r.on_loss(&loss(200_100, 31, 100_001));
        r.on_ack(&ack(200_200, 32, 100_002, 1500));
        assert_eq!(cwnd_bytes(&r), 20 * 1500);
        // Congestion avoidance: 20 acknowledgements (one window) add exactly one MSS, the next
        // 21 another one.
        for seq in 0..20 {
            r.on_ack(&ack(300_000, 100 + seq, 250_000, 1500));
        }
        assert_eq!(cwnd_bytes(&r), 21 * 1500);
        for seq in 0..20 {
            r.on_ack(&ack(400_000, 200 + seq, 350_000, 1500));
        }
        assert_eq!(cwnd_bytes(&r), 21 * 1500);
        r.on_ack(&ack(400_000, 300, 350_000, 1500));
        assert_eq!(cwnd_bytes(&r), 22 * 1500);
        // A loss of a packet sent after the reduction is a new event.
        r.on_loss(&loss(500_000, 400, 450_000));
        assert_eq!(cwnd_bytes(&r), 11 * 1500);
    }

    #[test]
    fn the_window_never_falls_below_two_packets() {
        let mut r = Reno::new(RenoConfig { initial_cwnd_packets: 2, ..RenoConfig::default() });
        r.on_loss(&loss(10, 0, 0));
        r.on_loss(&loss(20, 1, 15));
        assert_eq!(cwnd_bytes(&r), 3000);
    }
}
