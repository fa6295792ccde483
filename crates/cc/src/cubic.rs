//! CUBIC (Ha, Rhee & Xu, SIGOPS OSR 2008; RFC 8312, updated by RFC 9438).
//!
//! The idea: after a reduction, grow the window as a cubic function of the time since the
//! reduction, W(t) = C·(t − K)³ + W_max, so that it rises fast, flattens out around W_max (the
//! window where the last loss happened) and then probes beyond it — independent of the RTT, so
//! long- and short-RTT flows converge to the same windows. Where Reno would grow faster (short
//! RTTs, small windows), CUBIC grows at least as fast as Reno.
//!
//! Sections implemented (RFC 9438; units are segments = MSS and seconds):
//! - §4.2 window growth: K = ∛((W_max − cwnd_epoch)/C), the epoch starting at the first
//!   acknowledgement after a reduction; per acknowledgement the target is W_cubic(t + RTT)
//!   clamped to [cwnd, 1.5·cwnd], and cwnd grows by (target − cwnd)/cwnd per acknowledged
//!   segment. With cwnd_epoch = β·W_max (no fast convergence) K = ∛(W_max·(1−β)/C), RFC 8312
//!   §4.1's formula.
//! - §4.3 Reno-friendly region: W_est starts at cwnd_epoch and grows by
//!   α_cubic·(segments acknowledged)/cwnd, α_cubic = 3(1−β)/(1+β) until W_est reaches W_max, 1
//!   after; when W_cubic(t) < W_est, cwnd = W_est.
//! - §4.6 multiplicative decrease: cwnd = max(β·cwnd, 2), ssthresh likewise; once per
//!   congestion event (packets sent before the reduction belong to it, as in `reno`).
//! - §4.7 fast convergence: W_max = cwnd·(1+β)/2 when the window is below the previous W_max,
//!   cwnd otherwise.
//! - §4.10 slow start below ssthresh as Reno (RFC 5681 with byte counting); the first epoch after
//!   slow start ends without a loss starts with W_max = cwnd, K = 0.
//! - Slow-start exit by HyStart (Ha & Rhee, "Taming the elephants: New TCP slow start",
//!   Computer Networks 55(9), 2011), as Linux's tcp_cubic.c runs it (on by default since 2.6.29;
//!   the thresholds below are those of 5.6 and later, up to 6.18, the kernel whose `cubic` the
//!   twin is measured against). Pantheon's `cubic` is the kernel's, so the twin leaves slow start
//!   where the kernel does rather than at the first loss: on a 1-BDP path (12 Mbit/s, 30 ms each
//!   way, 90 kB DropTail) the kernel's cubic lost 7–8 packets in its first 3 s in two runs and 56
//!   in two others, the twin without HyStart 178 in all four, its slow start overshooting to
//!   twice the pipe; with HyStart, none (2 runs; first loss at 5.1 s). The kernel's receiver
//!   acknowledges every second segment, 2 ms apart at 12 Mbit/s, exactly `hystart_ack_delta_us`,
//!   so whether its ACK train counts varies with jitter; pantheon-udp acknowledges every datagram.
//!   Per round trip (it ends when a packet sent after the round began is acknowledged), once
//!   cwnd ≥ 16 segments (`hystart_low_window`) and while in slow start, either heuristic sets
//!   ssthresh = cwnd:
//!   - ACK train: acknowledgements arriving at most 2 ms apart (`hystart_ack_delta_us`) from the
//!     round's start for longer than (min RTT + 1 ms)/2 — the time the pipe takes to drain one
//!     BDP, so the window already fills it. Linux halves the threshold when nothing paces the
//!     flow (`SK_PACING_NONE`, the case here) and adds `hystart_ack_delay`, min(1 ms, 4 GSO
//!     segments at the pacing rate), 1 ms below 2 Gbit/s.
//!   - Delay increase: the round's smallest RTT, after its first 8 samples
//!     (`HYSTART_MIN_SAMPLES`), exceeds the flow's min RTT by min RTT/8 clamped to [4, 16] ms.
//!
//! HyStart++ (RFC 9406) is not used: Linux does not run it, and the twin follows the kernel.
//!
//! Constants: C = 0.4 and β_cubic = 0.7 (the values RFC 9438 specifies); initial window 10 packets
//! (RFC 6928); MSS 1500 bytes. The RTT in W_cubic(t + RTT) is the smoothed RTT (§4.2 leaves the
//! estimator open).
//!
//! Deviations: as in `reno`, the reduction is taken from cwnd rather than FlightSize, and a loss
//! found by the sender's timeout is an ordinary congestion event. HyStart's `hystart_ack_delay` is
//! its 1 ms cap: the 4-segment term is larger below 2 Gbit/s.
//!
//! Driver: window only (no pacing rate, no timer).

use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS, DEFAULT_MSS_BYTES};

/// RFC 9438: C = 0.4 (segments per second cubed).
pub const C: f64 = 0.4;
/// RFC 9438 §4.6: β_cubic = 0.7.
pub const BETA: f64 = 0.7;
/// HyStart runs only from this window on, segments (tcp_cubic.c `hystart_low_window`).
const HYSTART_LOW_WINDOW_PACKETS: f64 = 16.0;
/// Two acknowledgements at most this far apart belong to one train (`hystart_ack_delta_us`).
const HYSTART_ACK_DELTA_US: u64 = 2_000;
/// Added to the min RTT before halving it into the train threshold (`hystart_ack_delay`'s cap).
const HYSTART_ACK_DELAY_US: u64 = 1_000;
/// RTT samples of a round before the delay heuristic judges it (`HYSTART_MIN_SAMPLES`).
const HYSTART_MIN_SAMPLES: u32 = 8;
/// Bounds of the delay heuristic's threshold, min RTT/8 (`HYSTART_DELAY_MIN`, `HYSTART_DELAY_MAX`).
const HYSTART_DELAY_MIN_US: u64 = 4_000;
const HYSTART_DELAY_MAX_US: u64 = 16_000;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubicConfig {
    pub mss_bytes: u64,
    pub initial_cwnd_packets: u64,
    /// RFC 9438 §4.7; on by default as the RFC recommends.
    pub fast_convergence: bool,
    /// HyStart's slow-start exit; on by default as in Linux's Cubic.
    pub hystart: bool,
}

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig {
            mss_bytes: DEFAULT_MSS_BYTES,
            initial_cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS,
            fast_convergence: true,
            hystart: true,
        }
    }
}

impl CubicConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = CubicConfig::default();
        Ok(CubicConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            initial_cwnd_packets: p.u64_at_least("initial_cwnd_packets", 2, d.initial_cwnd_packets)?,
            fast_convergence: p.bool("fast_convergence", d.fast_convergence)?,
            hystart: p.bool("hystart", d.hystart)?,
        })
    }
}

/// The cubic window function of RFC 9438 §4.2, eq. (1): segments at `t_s` seconds into the epoch.
pub fn w_cubic(t_s: f64, k_s: f64, w_max: f64) -> f64 {
    C * (t_s - k_s).powi(3) + w_max
}

/// The congestion-avoidance epoch that starts at the first acknowledgement after a reduction.
#[derive(Debug, Clone, Copy)]
struct Epoch {
    start_us: u64,
    /// Seconds W_cubic takes to return to W_max.
    k_s: f64,
    /// Reno-friendly window estimate W_est in segments (§4.3).
    w_est: f64,
}

/// HyStart's view of the current slow-start round trip.
#[derive(Debug, Clone, Copy)]
struct HyStartRound {
    /// The round ends when a packet numbered this or later is acknowledged (the next to be sent
    /// when it began).
    end_seq: u64,
    /// When the round began, µs.
    start_us: u64,
    /// The last acknowledgement of the round's ACK train, µs.
    last_train_ack_us: u64,
    /// Smallest RTT of the round so far, µs.
    min_rtt_us: u64,
    /// RTT samples taken in the round.
    samples: u32,
}

impl HyStartRound {
    fn start(now_us: u64, end_seq: u64) -> Self {
        HyStartRound { end_seq, start_us: now_us, last_train_ack_us: now_us, min_rtt_us: u64::MAX, samples: 0 }
    }

    /// Takes an acknowledgement of the round; whether slow start should end here.
    fn exits_slow_start(&mut self, e: &Acked) -> bool {
        let mut found = false;
        if e.now_us.saturating_sub(self.last_train_ack_us) <= HYSTART_ACK_DELTA_US {
            self.last_train_ack_us = e.now_us;
            found = e.now_us - self.start_us > (e.min_rtt_us + HYSTART_ACK_DELAY_US) / 2;
        }
        self.min_rtt_us = self.min_rtt_us.min(e.rtt_us);
        if self.samples < HYSTART_MIN_SAMPLES {
            self.samples += 1;
        } else {
            let threshold_us = (e.min_rtt_us / 8).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US);
            found |= self.min_rtt_us > e.min_rtt_us + threshold_us;
        }
        found
    }
}

#[derive(Debug, Clone)]
pub struct Cubic {
    config: CubicConfig,
    /// Congestion window in segments (fractional: growth arrives in fractions of a segment).
    cwnd_packets: f64,
    /// Slow-start threshold in segments.
    ssthresh_packets: f64,
    /// Window in segments just before the last reduction (after fast convergence); 0 before any.
    w_max_packets: f64,
    epoch: Option<Epoch>,
    recovery_start_us: Option<u64>,
    /// The next packet number to be sent.
    next_seq: u64,
    /// HyStart's current round; `None` until its first acknowledgement.
    hystart_round: Option<HyStartRound>,
}

impl Cubic {
    pub fn new(config: CubicConfig) -> Self {
        Cubic {
            config,
            cwnd_packets: config.initial_cwnd_packets as f64,
            ssthresh_packets: f64::INFINITY,
            w_max_packets: 0.0,
            epoch: None,
            recovery_start_us: None,
            next_seq: 0,
            hystart_round: None,
        }
    }

    /// Window in segments.
    pub fn cwnd_packets(&self) -> f64 {
        self.cwnd_packets
    }

    pub fn w_max_segments(&self) -> f64 {
        self.w_max_packets
    }

    /// K of the current epoch in seconds, `None` outside an epoch.
    pub fn k_s(&self) -> Option<f64> {
        self.epoch.map(|e| e.k_s)
    }

    fn start_epoch(&mut self, now_us: u64) -> Epoch {
        let k_s = if self.w_max_packets > self.cwnd_packets {
            ((self.w_max_packets - self.cwnd_packets) / C).cbrt()
        } else {
            self.w_max_packets = self.cwnd_packets;
            0.0
        };
        Epoch { start_us: now_us, k_s, w_est: self.cwnd_packets }
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_sent(&mut self, e: &Sent) {
        self.next_seq = e.seq + 1;
    }

    fn on_ack(&mut self, e: &Acked) {
        if self.recovery_start_us.is_some_and(|start_us| e.sent_us <= start_us) {
            return;
        }
        let acked = e.bytes as f64 / self.config.mss_bytes as f64;
        if self.config.hystart
            && self.cwnd_packets < self.ssthresh_packets
            && self.cwnd_packets >= HYSTART_LOW_WINDOW_PACKETS
        {
            // As in Linux, judged on the window before this acknowledgement grows it.
            let round = match self.hystart_round {
                Some(round) if e.seq < round.end_seq => self.hystart_round.insert(round),
                _ => self.hystart_round.insert(HyStartRound::start(e.now_us, self.next_seq)),
            };
            if round.exits_slow_start(e) {
                self.ssthresh_packets = self.cwnd_packets;
            }
        }
        if self.cwnd_packets < self.ssthresh_packets {
            self.cwnd_packets += acked.min(1.0);
            return;
        }
        let mut epoch = match self.epoch {
            Some(epoch) => epoch,
            None => self.start_epoch(e.now_us),
        };
        let t_s = (e.now_us - epoch.start_us) as f64 / 1e6;
        let rtt_s = e.srtt_us as f64 / 1e6;
        let alpha = if epoch.w_est < self.w_max_packets { 3.0 * (1.0 - BETA) / (1.0 + BETA) } else { 1.0 };
        epoch.w_est += alpha * acked / self.cwnd_packets;
        if w_cubic(t_s, epoch.k_s, self.w_max_packets) < epoch.w_est {
            self.cwnd_packets = epoch.w_est;
        } else {
            let target =
                w_cubic(t_s + rtt_s, epoch.k_s, self.w_max_packets).clamp(self.cwnd_packets, 1.5 * self.cwnd_packets);
            self.cwnd_packets += (target - self.cwnd_packets) / self.cwnd_packets * acked;
        }
        self.epoch = Some(epoch);
    }

    fn on_loss(&mut self, e: &Lost) {
        if self.recovery_start_us.is_some_and(|start_us| e.sent_us <= start_us) {
            return;
        }
        self.recovery_start_us = Some(e.now_us);
        self.w_max_packets = if self.config.fast_convergence && self.cwnd_packets < self.w_max_packets {
            self.cwnd_packets * (1.0 + BETA) / 2.0
        } else {
            self.cwnd_packets
        };
        self.ssthresh_packets = (self.cwnd_packets * BETA).max(2.0);
        self.cwnd_packets = self.ssthresh_packets;
        self.epoch = None;
    }

    fn decision(&self) -> Decision {
        let cwnd_bytes = (self.cwnd_packets * self.config.mss_bytes as f64) as u64;
        Decision { cwnd_bytes: Some(cwnd_bytes), pacing_rate_bps: None, wake_at_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack, loss};

    /// A Cubic at `cwnd` segments in congestion avoidance that has just lost a packet at
    /// `now_us`.
    fn after_loss_at(cwnd_packets: u64, now_us: u64) -> Cubic {
        let mut c = Cubic::new(CubicConfig { initial_cwnd_packets: cwnd_packets, ..CubicConfig::default() });
        c.on_loss(&loss(now_us, 0, 0));
        c
    }

    /// Feeds acknowledgements as a window-limited flow with a fixed `rtt_us` receives them:
    /// cwnd of them per RTT, evenly spread, from `from_us` to `to_us`.
    fn run_acks(c: &mut Cubic, from_us: u64, to_us: u64, rtt_us: u64) {
        let mut now_us = from_us as f64;
        let mut seq = 1000;
        while now_us < to_us as f64 {
            let mut a = ack(now_us as u64, seq, now_us as u64 - rtt_us, 1500);
            a.srtt_us = rtt_us;
            c.on_ack(&a);
            seq += 1;
            now_us += rtt_us as f64 / c.cwnd_packets();
        }
    }

    #[test]
    fn reduction_and_k_follow_rfc8312() {
        let c = after_loss_at(100, 1_000_000);
        assert_eq!(c.cwnd_packets(), 70.0);
        assert_eq!(c.w_max_segments(), 100.0);
        let mut c = c;
        let mut a = ack(1_100_000, 5, 1_050_000, 1500);
        a.srtt_us = 50_000;
        c.on_ack(&a);
        // K = ∛(W_max·(1−β)/C) = ∛(100·0.3/0.4) = ∛75 = 4.2172 s.
        assert!((c.k_s().unwrap() - 75f64.cbrt()).abs() < 1e-12);
        assert!((c.k_s().unwrap() - 4.2172).abs() < 1e-4);
    }

    #[test]
    fn window_follows_the_cubic_curve_to_w_max_then_the_reno_friendly_estimate() {
        // 100 ms RTT; the epoch starts at the first acknowledgement, at 0.1 s.
        let mut c = after_loss_at(100, 0);
        run_acks(&mut c, 100_000, 4_217_000, 100_000);
        // At t = K the curve is at W_max; the window, aiming one RTT ahead, is within a segment.
        // The Reno-friendly estimate is far below: 70 + 0.529·41 RTTs ≈ 91.7.
        assert!((c.cwnd_packets() - 100.0).abs() < 1.0, "cwnd {}", c.cwnd_packets());
        assert!((c.epoch.unwrap().w_est - (70.0 + 0.5294 * 41.2)).abs() < 0.3);
        run_acks(&mut c, 4_217_000, 6_217_000, 100_000);
        // W_est reaches W_max after 30/0.529 = 56.7 RTTs (at 5.77 s) and then grows one segment
        // per RTT, faster than the curve's plateau (W_cubic(6.1 s) = 102.7): by 6.217 s it is
        // 100 + 4.5 = 104.5 and the window follows it.
        let t_s = 6.117;
        assert!(w_cubic(t_s, c.k_s().unwrap(), 100.0) < 102.8);
        assert_eq!(c.cwnd_packets(), c.epoch.unwrap().w_est);
        assert!((c.cwnd_packets() - 104.5).abs() < 0.3, "cwnd {}", c.cwnd_packets());
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut c = after_loss_at(100, 0);
        // The window is at 70 < W_max = 100 when the next loss comes.
        c.on_loss(&loss(500_000, 1, 400_000));
        assert!((c.w_max_segments() - 70.0 * 1.7 / 2.0).abs() < 1e-9);
        assert!((c.cwnd_packets() - 49.0).abs() < 1e-9);
        let mut plain =
            Cubic::new(CubicConfig { initial_cwnd_packets: 100, fast_convergence: false, ..CubicConfig::default() });
        plain.on_loss(&loss(0, 0, 0));
        plain.on_loss(&loss(500_000, 1, 400_000));
        assert_eq!(plain.w_max_segments(), 70.0);
    }

    #[test]
    fn short_rtt_follows_the_reno_friendly_estimate() {
        // W_max = 10, cwnd = 7, K = ∛(3/0.4) = 1.96 s. With a 1 ms RTT, 100 ms is 100 round trips:
        // the estimate grows α = 3·0.3/1.7 = 0.529 segments per round trip up to W_max, then 1 —
        // far ahead of the curve, which is still below W_max.
        let mut c = after_loss_at(10, 0);
        run_acks(&mut c, 1_000, 100_000, 1_000);
        let cubic_now = w_cubic(0.1, 7.5f64.cbrt(), 10.0);
        assert!(cubic_now < 10.0);
        // 3 segments at 0.529/RTT take 5.7 RTTs, the remaining 94.3 RTTs add ≈1 each: ≈104.
        assert!((c.cwnd_packets() - 104.3).abs() < 3.0, "cwnd {}", c.cwnd_packets());
    }

    #[test]
    fn hystart_leaves_slow_start_near_the_pipe_size() {
        // One packet per ms behind 60 ms and an infinite buffer: a 60-packet pipe. Slow start
        // doubles the window each round: 10, 20, 40. In the round that begins at 40 the ACK
        // train lasts past (60 + 1)/2 ms after 31 acknowledgements, each adding a segment: slow
        // start ends at 40 + 31 = 71 segments, and the window then grows slowly (K = 0 from
        // W_max = 71, the Reno-friendly segment per round trip).
        let path = crate::testing::FixedPath { service_us: 1000, base_rtt_us: 60_000, rtt_drift_us_per_s: 0 };
        let (flow, _) = path.run("cubic", 1_000_000, |_, _: &Cubic| {});
        let c = flow.controller::<Cubic>().unwrap();
        assert!((c.ssthresh_packets - 71.0).abs() <= 2.0, "ssthresh {}", c.ssthresh_packets);
        assert!(c.cwnd_packets() < 90.0, "cwnd {}", c.cwnd_packets());
        // Without it, slow start goes on doubling into the buffer until a loss stops it.
        let (flow, _) = path.run("cubic:hystart=false", 1_000_000, |_, _: &Cubic| {});
        let plain = flow.controller::<Cubic>().unwrap();
        assert!(plain.cwnd_packets() > 500.0, "cwnd {}", plain.cwnd_packets());
    }
}
