//! LEDBAT, Low Extra Delay Background Transport (RFC 6817).
//!
//! The idea: a scavenger that uses spare capacity but gets out of the way. It measures one-way
//! queueing delay — the current one-way delay minus the smallest one-way delay seen (the base
//! delay) — and steers the window with a proportional controller so that it adds at most TARGET
//! of queueing delay; any flow that queues more (a loss-based one) makes it back off.
//!
//! Sections implemented (RFC 6817):
//! - §2.3–2.4 one-way delay: the receiver reports when each packet arrived; the sender subtracts
//!   its send time. The clocks are not synchronised; the unknown offset cancels in current − base.
//! - §2.4.2 (the complete sender algorithm) base delay: the minimum of per-minute minima over the
//!   last BASE_HISTORY minutes (minutes on the sender's clock); current delay: a MIN filter over
//!   the last CURRENT_FILTER samples (§3.1 explains why delays are filtered).
//! - §2.4.2 window update per acknowledgement: off_target = (TARGET − queuing_delay)/TARGET;
//!   cwnd += GAIN·off_target·bytes_newly_acked·MSS/cwnd; then cwnd ≤ flightsize +
//!   ALLOWED_INCREASE·MSS and cwnd ≥ MIN_CWND·MSS.
//! - §2.4.2 loss: cwnd = min(cwnd, max(cwnd/2, MIN_CWND·MSS)), at most once per round trip.
//!
//! Constants (§2.5): TARGET = 100 ms (the largest the RFC allows), GAIN = 1, BASE_HISTORY = 10
//! minutes, INIT_CWND = 2 and MIN_CWND = 2 packets, ALLOWED_INCREASE = 1 packet; CURRENT_FILTER
//! = 4 samples (our choice of "a few recent samples"); MSS 1500 bytes. `target_ms` and `gain`
//! are configurable.
//!
//! Deviations: (1) §2.4.2 collapses cwnd to one packet after a retransmission timeout; there is
//! none here, and a loss found by the sender's timeout is an ordinary loss. (2) "once per round
//! trip" for losses means: losses of packets sent before the last reduction do not reduce again.
//! (3) No slow start: growth is the §2.4.2 rule alone, from INIT_CWND, so on a long fat path the
//! window takes one RTT per packet of BDP to fill the pipe (about 40 s at 48 Mbit/s × 100 ms).
//! Deployed LEDBATs (libutp, LEDBAT++) add slow starts of their own; this file models the RFC.
//! (4) flightsize is the data in flight when the sender last sent, not after this
//! acknowledgement: a sender that reads acknowledgements in batches (pantheon-udp reads up to 64
//! per system call) has its flight shrink by one packet per acknowledgement before it can send
//! again, and the cap then cut the window back each batch. Over the emulator at 100 Mbit/s that
//! held the window to 0.4 packets of growth per RTT (2–3 Mbit/s after 10 s, where the simulator,
//! acknowledging one packet at a time, reached 14.6). The cap's purpose — no growth while the
//! sender does not use its window (§2.4.2) — is kept.
//!
//! Driver: window only (no pacing rate, no timer).

use crate::filter::{Buckets, Extremum};
use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_MSS_BYTES};

/// §2.5 BASE_HISTORY: minutes of per-minute base delay minima kept.
const BASE_HISTORY: usize = 10;
const MINUTE_US: u64 = 60_000_000;
/// Samples the current-delay MIN filter spans (see the header).
const CURRENT_FILTER: usize = 4;
/// §2.5: INIT_CWND and MIN_CWND, packets.
const INIT_CWND_PACKETS: f64 = 2.0;
const MIN_CWND_PACKETS: f64 = 2.0;
/// §2.5: ALLOWED_INCREASE, packets.
const ALLOWED_INCREASE_PACKETS: f64 = 1.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LedbatConfig {
    pub mss_bytes: u64,
    /// TARGET: the queueing delay LEDBAT aims to add, µs (RFC 6817 §2.5: at most 100 ms).
    pub target_us: u64,
    /// GAIN (§2.5: at most 1).
    pub gain: f64,
}

impl Default for LedbatConfig {
    fn default() -> Self {
        LedbatConfig { mss_bytes: DEFAULT_MSS_BYTES, target_us: 100_000, gain: 1.0 }
    }
}

impl LedbatConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = LedbatConfig::default();
        let target_ms = p.positive_f64("target_ms", d.target_us as f64 / 1000.0)?;
        Ok(LedbatConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            target_us: (target_ms * 1000.0) as u64,
            gain: p.positive_f64("gain", d.gain)?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Ledbat {
    config: LedbatConfig,
    /// Congestion window in bytes (fractional: growth arrives in fractions of a byte).
    cwnd_bytes: f64,
    /// One-way delays (peer clock − our clock, µs) are i64: the offset may make them negative.
    base_delay: Buckets<BASE_HISTORY>,
    current_delays: [i64; CURRENT_FILTER],
    current_samples: usize,
    /// Bytes in flight right after the latest send: flightsize for the cap (deviation 4).
    flight_at_last_send_bytes: u64,
    recovery_start_us: Option<u64>,
}

impl Ledbat {
    pub fn new(config: LedbatConfig) -> Self {
        Ledbat {
            config,
            cwnd_bytes: INIT_CWND_PACKETS * config.mss_bytes as f64,
            base_delay: Buckets::new(Extremum::Min),
            current_delays: [0; CURRENT_FILTER],
            current_samples: 0,
            flight_at_last_send_bytes: 0,
            recovery_start_us: None,
        }
    }

    pub fn cwnd_bytes(&self) -> f64 {
        self.cwnd_bytes
    }

    /// Current minus base one-way delay, µs.
    pub fn queuing_delay_us(&self) -> i64 {
        let filled = self.current_samples.min(CURRENT_FILTER);
        let current = self.current_delays[..filled].iter().min().copied().unwrap_or(0);
        current - self.base_delay.get().unwrap_or(current)
    }
}

impl CongestionControl for Ledbat {
    fn name(&self) -> &'static str {
        "ledbat"
    }

    fn on_sent(&mut self, e: &Sent) {
        self.flight_at_last_send_bytes = e.inflight_bytes;
    }

    fn on_ack(&mut self, e: &Acked) {
        let one_way_delay_us = e.peer_recv_us.wrapping_sub(e.sent_us) as i64;
        self.base_delay.update(e.now_us / MINUTE_US, one_way_delay_us);
        self.current_delays[self.current_samples % CURRENT_FILTER] = one_way_delay_us;
        self.current_samples += 1;

        let mss = self.config.mss_bytes as f64;
        let target_us = self.config.target_us as f64;
        let off_target = (target_us - self.queuing_delay_us() as f64) / target_us;
        self.cwnd_bytes += self.config.gain * off_target * e.bytes as f64 * mss / self.cwnd_bytes;
        let flightsize_bytes = self.flight_at_last_send_bytes.max(e.inflight_bytes + e.bytes) as f64;
        self.cwnd_bytes =
            self.cwnd_bytes.min(flightsize_bytes + ALLOWED_INCREASE_PACKETS * mss).max(MIN_CWND_PACKETS * mss);
    }

    fn on_loss(&mut self, e: &Lost) {
        if self.recovery_start_us.is_some_and(|start_us| e.sent_us <= start_us) {
            return;
        }
        self.recovery_start_us = Some(e.now_us);
        let mss = self.config.mss_bytes as f64;
        self.cwnd_bytes = self.cwnd_bytes.min((self.cwnd_bytes / 2.0).max(MIN_CWND_PACKETS * mss));
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: Some(self.cwnd_bytes as u64), pacing_rate_bps: None, wake_at_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack, loss};
    use crate::testing::{FixedPath, MSS};

    /// An acknowledgement whose one-way delay is `owd_us` plus a clock offset of −5 s.
    fn ack_owd(now_us: u64, seq: u64, owd_us: u64, inflight_bytes: u64) -> Acked {
        let sent_us = now_us - 2 * owd_us;
        let mut a = ack(now_us, seq, sent_us, MSS);
        a.peer_recv_us = (sent_us + owd_us).wrapping_sub(5_000_000);
        a.inflight_bytes = inflight_bytes;
        a
    }

    fn at_cwnd(packets: f64) -> Ledbat {
        let mut l = Ledbat::new(LedbatConfig::default());
        l.cwnd_bytes = packets * MSS as f64;
        l
    }

    #[test]
    fn cwnd_moves_by_gain_times_off_target() {
        let mut l = at_cwnd(10.0);
        // Base delay 20 ms; then four samples at 45 ms: queuing delay 25 ms, off_target = 0.75.
        l.on_ack(&ack_owd(1_000_000, 0, 20_000, 100 * MSS));
        for seq in 1..=4 {
            l.on_ack(&ack_owd(1_100_000, seq, 45_000, 100 * MSS));
        }
        assert_eq!(l.queuing_delay_us(), 25_000);
        let before = l.cwnd_bytes();
        l.on_ack(&ack_owd(1_200_000, 5, 45_000, 100 * MSS));
        // cwnd += GAIN·off_target·bytes_acked·MSS/cwnd = 0.75·1500·1500/cwnd.
        assert!((l.cwnd_bytes() - (before + 0.75 * 1500.0 * 1500.0 / before)).abs() < 1e-9);
        // Queuing delay 150 ms, above TARGET: off_target = −0.5, the window shrinks.
        for seq in 6..=9 {
            l.on_ack(&ack_owd(1_300_000, seq, 170_000, 100 * MSS));
        }
        let before = l.cwnd_bytes();
        l.on_ack(&ack_owd(1_400_000, 10, 170_000, 100 * MSS));
        assert!((l.cwnd_bytes() - (before - 0.5 * 1500.0 * 1500.0 / before)).abs() < 1e-9);
    }

    #[test]
    fn the_current_filter_ignores_one_delayed_sample() {
        let mut l = at_cwnd(10.0);
        l.on_ack(&ack_owd(1_000_000, 0, 20_000, 0));
        l.on_ack(&ack_owd(1_000_100, 1, 30_000, 0));
        l.on_ack(&ack_owd(1_000_200, 2, 90_000, 0));
        // The minimum of the last 4 samples (20, 30, 90 ms) is 20 ms: no queue.
        assert_eq!(l.queuing_delay_us(), 0);
    }

    #[test]
    fn growth_is_capped_at_flight_plus_one_packet_and_loss_halves() {
        let mut l = at_cwnd(10.0);
        // Only 3 packets were in flight: cwnd may not exceed 3 + 1 packets.
        l.on_ack(&ack_owd(1_000_000, 0, 20_000, 2 * MSS));
        assert_eq!(l.cwnd_bytes(), 4.0 * 1500.0);
        l.on_loss(&loss(2_000_000, 7, 1_900_000));
        assert_eq!(l.cwnd_bytes(), 2.0 * 1500.0);
        // Never below MIN_CWND = 2 packets.
        l.on_loss(&loss(3_000_000, 8, 2_900_000));
        assert_eq!(l.cwnd_bytes(), 2.0 * 1500.0);
    }

    #[test]
    fn a_batch_of_acknowledgements_does_not_shrink_a_used_window() {
        // The sender filled its 20-packet window, then read 10 acknowledgements in one batch
        // before it could send again: in flight falls to 10 packets, yet the window was in use.
        let mut l = at_cwnd(20.0);
        l.on_sent(&Sent { now_us: 0, seq: 19, bytes: MSS, inflight_bytes: 20 * MSS });
        for seq in 0..10 {
            l.on_ack(&ack_owd(40_000, seq, 20_000, (19 - seq) * MSS));
        }
        assert!(l.cwnd_bytes() > 20.0 * 1500.0, "{}", l.cwnd_bytes());
    }

    #[test]
    fn approaches_target_queueing_delay_from_below_on_a_fixed_link() {
        // One packet per ms behind 40 ms. With W = 40 + q packets (q the queueing delay in ms)
        // and one off_target of growth per RTT, dq/dt = 10·(100 − q)/(40 + q) ms per second: q
        // closes on TARGET = 100 ms with a time constant of about 14 s near it.
        let path = FixedPath { service_us: 1000, base_rtt_us: 40_000, rtt_drift_us_per_s: 0 };
        let mut late = Vec::new();
        let mut max_queue_us = 0;
        path.run("ledbat", 60_000_000, |a, _: &Ledbat| {
            max_queue_us = max_queue_us.max(a.rtt_us - 40_000);
            if a.now_us > 55_000_000 {
                late.push(a.rtt_us - 40_000);
            }
        });
        let mean_us = late.iter().sum::<u64>() as f64 / late.len() as f64;
        assert!(mean_us > 96_000.0 && mean_us <= 100_000.0, "mean queueing delay {mean_us} us");
        // A proportional controller: it never overshoots TARGET by more than a packet.
        assert!(max_queue_us <= 101_000, "max queueing delay {max_queue_us} us");
    }
}
