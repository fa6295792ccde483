//! SCReAM, Self-Clocked Rate Adaptation for Multimedia (Johansson & Sarker, RFC 8298, December
//! 2017), as a full-throttle media-like flow.
//!
//! The idea: a conversational video sender whose encoder is told a target bitrate. A LEDBAT-like
//! window (RFC 6817) steered by one-way queueing delay bounds the bytes in flight (the
//! self-clocking); the media rate control raises the encoder's target at a bounded ramp-up speed
//! and lowers it when packets wait in the sender's RTP queue (the window is holding them back) or
//! are lost. The flow therefore never probes the way TCP does: it climbs at most RAMP_UP_SPEED
//! and backs off on queueing before the bottleneck buffer fills.
//!
//! Sections implemented (RFC 8298; docs/cc.md, "SCReAM", spells out each formula):
//! - §4.1.2 qdelay: one-way delay above its base (RFC 6817 §2.4.2: the minimum of per-minute
//!   minima over BASE_HISTORY = 10 minutes), unsmoothed; update_variables every 50 ms
//!   (qdelay_fraction, its EWMA, qdelay_trend from the autocorrelation of the last 20 fractions,
//!   its peak-hold qdelay_trend_mem).
//! - §4.1.2.1 update_cwnd per acknowledgement: fast increase (cwnd += bytes newly acked) until
//!   qdelay_trend ≥ QDELAY_TREND_TH, else the LEDBAT rule GAIN·off_target·bytes·MSS/cwnd, capped
//!   by the largest flight of the last 5 s × 1.1 and floored at MIN_CWND; a loss event (one per
//!   s_rtt) scales cwnd by BETA_LOSS and the target by BETA_R.
//! - §4.1.2.2 competing flows: qdelay_target between QDELAY_TARGET_LO and _HI from the average
//!   and variance of qdelay samples and the loss event rate.
//! - §4.1.2.3 lost packet detection is the shared `SentPackets` bookkeeping (RFC 9002 §6.1: packet
//!   and time thresholds), which plays the part of the RFC's RACK-like reordering window.
//! - §4.1.2.4 send window (cwnd + MSS while qdelay ≤ qdelay_target, else cwnd), §4.1.2.5 pacing
//!   at max(RATE_PACE_MIN, cwnd·8/s_rtt) while the RTP queue holds a backlog, §4.1.2.6 fast
//!   increase resumes after T_RESUME_FAST_INCREASE with qdelay_trend below QDELAY_TREND_LO.
//! - §4.1.3 media rate control every RATE_ADJUST_INTERVAL: a scaled, capped ramp up in fast
//!   increase; otherwise a delta from current_rate, qdelay_trend and the RTP queue; ×0.95 when
//!   the RTP queue delay exceeds RTP_QDELAY_TH; bounded by the media rate and the target range.
//!
//! Constants: RFC 8298 §4.1.1.1's values, each cited where it is declared below. Ours where the
//! RFC leaves a range or a choice: PRE_CONGESTION_GUARD 0.1 (RFC: 0.0..1.0), TX_QUEUE_SIZE_FACTOR
//! 1.0 (0.0..2.0), TARGET_BITRATE_MIN 0.1 Mbit/s and TARGET_BITRATE_MAX 100 Mbit/s
//! (deployment-specific); MSS is the driver's packet (`mss_bytes`, 1464 in pantheon-udp; the
//! RFC's 1000 bytes is "max RTP packet size"). Configurable: `qdelay_target_ms`
//! (QDELAY_TARGET_LO), `min_rate_mbps`, `max_rate_mbps`, `ramp_up_kbps` (RAMP_UP_SPEED, kbit/s
//! per second), `competing_flows`.
//!
//! Deviations (docs/cc.md gives each its reason): the media source is a fluid encoder that
//! always has content and produces exactly target_bitrate into an RTP queue counted in bits (no
//! RTP, frames, rate_media_median or frame skipping); the pacing rate is the target while that
//! queue is empty and pace_bitrate while a backlog waits. (1) Every packet is acknowledged, so
//! cwnd updates per acknowledgement. (2) §4.1.2.2 runs on the 50 ms samples, all 100 for the
//! variance. (3) loss_event_rate is an EWMA over 500 round trips. (4) The fast-increase calm
//! period also counts from leaving fast increase. (5) target_bitrate_last_max is set at loss
//! events and on leaving fast increase. (6) target_bitrate starts at TARGET_BITRATE_MIN.
//! (7) max_bytes_in_flight spans five 1-second buckets. (8) A CE mark is answered as a loss
//! (the trait's default; RFC 8298's own BETA_ECN is not modelled); no cwnd_i, no pacing headroom
//! (earlier drafts and SCReAMv2). (9) Outside fast increase the target changes by
//! delta_rate = current_rate·(1 − PRE_CONGESTION_GUARD·qdelay_trend) − TX_QUEUE_SIZE_FACTOR·
//! tx_queue_size − target_bitrate, as Ericsson's implementation does (github.com/
//! EricssonResearch/scream, code/ScreamTx.cpp, ScreamTx::Stream::updateTargetBitrate, as of
//! commit d881890, December 2017, the version Pantheon ran; still so in 2026): §4.1.3's text
//! leaves out "− target_bitrate", which makes delta_rate the whole current rate, so the target
//! rose by the full ramp every 200 ms whenever the link, not the ramp, was the bottleneck
//! (tests/scream_link.rs `where_the_link_is_the_bottleneck_the_target_tracks_it`).
//!
//! Expected (worked out in docs/cc.md and checked by tests/scream_link.rs over the link model):
//! on 12 Mbit/s, 20 ms each way, the ramp reaches 5.8 Mbit/s at 30 s (28% of the link over
//! 5–30 s, 80% after about 49 s) with no standing queue; on a link slower than the ramp the target
//! follows the link and queueing stays below qdelay_target (2 Mbit/s, 300-packet buffer: 96% of
//! the link, p95 queue 36 ms).
//!
//! Driver: window (the send window) and pacing rate, and a timer for the 200 ms rate control.

use crate::filter::{Buckets, Extremum};
use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_MSS_BYTES};

/// §4.1.1.1 QDELAY_TARGET_HI, s.
const QDELAY_TARGET_HI_S: f64 = 0.4;
/// §4.1.1.1 QDELAY_WEIGHT: EWMA weight of qdelay_fraction_avg.
const QDELAY_WEIGHT: f64 = 0.1;
/// §4.1.1.1 QDELAY_TREND_TH: qdelay_trend at which fast increase mode ends.
const QDELAY_TREND_TH: f64 = 0.2;
/// §4.1.1.1 QDELAY_TREND_LO: qdelay_trend below which fast increase may resume.
const QDELAY_TREND_LO: f64 = 0.2;
/// §4.1.1.1 T_RESUME_FAST_INCREASE.
const T_RESUME_FAST_INCREASE_US: u64 = 5_000_000;
/// §4.1.1.1 MIN_CWND, bytes.
const MIN_CWND_BYTES: f64 = 3000.0;
/// §4.1.1.1 MAX_BYTES_IN_FLIGHT_HEAD_ROOM.
const MAX_BYTES_IN_FLIGHT_HEAD_ROOM: f64 = 1.1;
/// §4.1.1.1 GAIN.
const GAIN: f64 = 1.0;
/// §4.1.1.1 BETA_LOSS: cwnd scale at a loss event.
const BETA_LOSS: f64 = 0.8;
/// §4.1.1.1 BETA_R: target bitrate scale at a loss event.
const BETA_R: f64 = 0.9;
/// §4.1.1.1 RATE_ADJUST_INTERVAL.
const RATE_ADJUST_INTERVAL_US: u64 = 200_000;
/// §4.1.1.1 PRE_CONGESTION_GUARD (RFC range 0.0..1.0; our choice).
const PRE_CONGESTION_GUARD: f64 = 0.1;
/// §4.1.1.1 TX_QUEUE_SIZE_FACTOR (RFC range 0.0..2.0; our choice).
const TX_QUEUE_SIZE_FACTOR: f64 = 1.0;
/// §4.1.1.1 RTP_QDELAY_TH, s.
const RTP_QDELAY_TH_S: f64 = 0.02;
/// §4.1.1.1 TARGET_RATE_SCALE_RTP_QDELAY.
const TARGET_RATE_SCALE_RTP_QDELAY: f64 = 0.95;
/// §4.1.1.1 RATE_PACE_MIN, bit/s.
const RATE_PACE_MIN_BPS: f64 = 50_000.0;
/// §4.1.2: qdelay_fraction is sampled this often; §4.1.2.2 uses the same samples.
const SAMPLE_INTERVAL_US: u64 = 50_000;
/// §4.1.2: qdelay_fraction_hist holds the last 20 samples.
const FRACTION_HISTORY: usize = 20;
/// §4.1.2.2: qdelay_norm_hist holds the last 100 samples; the average uses the last 50.
const NORM_HISTORY: usize = 100;
const NORM_AVERAGE_SAMPLES: usize = 50;
/// §4.1.2.2: loss_event_rate above which a competing flow is assumed.
const LOSS_EVENT_RATE_TH: f64 = 0.002;
/// Round trips the loss_event_rate EWMA spans (deviation 3 in the header).
const LOSS_EVENT_RATE_ROUNDS: f64 = 500.0;
/// RFC 6817 §2.5 BASE_HISTORY, minutes (RFC 8298 §4.1.2 computes qdelay as RFC 6817 does).
const BASE_HISTORY: usize = 10;
const MINUTE_US: u64 = 60_000_000;
/// §4.1.2.1: max_bytes_in_flight spans about 5 s (deviation 7).
const FLIGHT_BUCKETS: usize = 5;
const FLIGHT_BUCKET_US: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScreamConfig {
    pub mss_bytes: u64,
    /// QDELAY_TARGET_LO, µs.
    pub qdelay_target_lo_us: u64,
    /// TARGET_BITRATE_MIN and TARGET_BITRATE_MAX, bit/s.
    pub min_rate_bps: f64,
    pub max_rate_bps: f64,
    /// RAMP_UP_SPEED, bit/s per second.
    pub ramp_up_bps_per_s: f64,
    /// §4.1.2.2 qdelay_target adjustment for competing flows ("MAY be turned off").
    pub competing_flows: bool,
}

impl Default for ScreamConfig {
    fn default() -> Self {
        ScreamConfig {
            mss_bytes: DEFAULT_MSS_BYTES,
            qdelay_target_lo_us: 100_000,
            min_rate_bps: 100_000.0,
            max_rate_bps: 100_000_000.0,
            ramp_up_bps_per_s: 200_000.0,
            competing_flows: true,
        }
    }
}

impl ScreamConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = ScreamConfig::default();
        let config = ScreamConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            qdelay_target_lo_us: (p.positive_f64("qdelay_target_ms", d.qdelay_target_lo_us as f64 / 1e3)? * 1e3) as u64,
            min_rate_bps: p.positive_f64("min_rate_mbps", d.min_rate_bps / 1e6)? * 1e6,
            max_rate_bps: p.positive_f64("max_rate_mbps", d.max_rate_bps / 1e6)? * 1e6,
            ramp_up_bps_per_s: p.positive_f64("ramp_up_kbps", d.ramp_up_bps_per_s / 1e3)? * 1e3,
            competing_flows: p.bool("competing_flows", d.competing_flows)?,
        };
        if config.min_rate_bps > config.max_rate_bps {
            return Err(SpecError(format!(
                "scream: min_rate_mbps ({}) must not exceed max_rate_mbps ({})",
                config.min_rate_bps / 1e6,
                config.max_rate_bps / 1e6
            )));
        }
        if config.qdelay_target_lo_us as f64 > QDELAY_TARGET_HI_S * 1e6 {
            return Err(SpecError(format!(
                "scream: qdelay_target_ms must be <= {} (QDELAY_TARGET_HI), got {}",
                QDELAY_TARGET_HI_S * 1e3,
                config.qdelay_target_lo_us as f64 / 1e3
            )));
        }
        Ok(config)
    }
}

/// A fixed-size ring of the newest samples.
#[derive(Debug, Clone)]
struct History<const N: usize> {
    values: [f64; N],
    len: usize,
    next: usize,
}

impl<const N: usize> History<N> {
    fn new() -> Self {
        History { values: [0.0; N], len: 0, next: 0 }
    }

    fn push(&mut self, value: f64) {
        self.values[self.next] = value;
        self.next = (self.next + 1) % N;
        self.len = (self.len + 1).min(N);
    }

    /// The `k`-th newest sample (0 = newest).
    fn newest(&self, k: usize) -> f64 {
        self.values[(self.next + N - 1 - k) % N]
    }

    /// Autocorrelation at `lag` over the samples held: Σ x(i)·x(i+lag).
    fn autocorrelation(&self, lag: usize) -> f64 {
        (0..self.len.saturating_sub(lag)).map(|k| self.newest(k) * self.newest(k + lag)).sum()
    }

    fn mean_of_newest(&self, count: usize) -> f64 {
        let n = count.min(self.len);
        if n == 0 {
            return 0.0;
        }
        (0..n).map(|k| self.newest(k)).sum::<f64>() / n as f64
    }

    fn variance(&self) -> f64 {
        let mean = self.mean_of_newest(self.len);
        if self.len == 0 {
            return 0.0;
        }
        (0..self.len).map(|k| (self.newest(k) - mean).powi(2)).sum::<f64>() / self.len as f64
    }
}

#[derive(Debug, Clone)]
pub struct Scream {
    config: ScreamConfig,
    // One-way delay (§4.1.2 via RFC 6817): i64 because the clock offset may make it negative.
    base_owd: Buckets<BASE_HISTORY>,
    qdelay_us: u64,
    srtt_us: Option<u64>,
    // Network congestion control (§4.1.2).
    cwnd_bytes: f64,
    in_fast_increase: bool,
    max_flight: Buckets<FLIGHT_BUCKETS>,
    /// Bytes of lost packets not yet counted in a bytes_newly_acked.
    lost_bytes_pending: u64,
    last_loss_event_us: Option<u64>,
    // qdelay trend (§4.1.2), sampled every SAMPLE_INTERVAL_US.
    next_sample_us: u64,
    qdelay_fraction_avg: f64,
    qdelay_fraction_hist: History<FRACTION_HISTORY>,
    qdelay_trend: f64,
    qdelay_trend_mem: f64,
    /// Start of the current calm period for resuming fast increase (deviation 4).
    calm_since_us: u64,
    // Competing flows (§4.1.2.2).
    qdelay_target_s: f64,
    qdelay_norm_hist: History<NORM_HISTORY>,
    loss_event_rate: f64,
    round_end_us: u64,
    loss_in_round: bool,
    // Media rate control (§4.1.3).
    target_bitrate_bps: f64,
    target_bitrate_last_max_bps: f64,
    next_rate_adjust_us: u64,
    sent_bits_interval: f64,
    acked_bits_interval: f64,
    media_bits_interval: f64,
    rate_transmit_bps: f64,
    rate_ack_bps: f64,
    rate_media_bps: f64,
    // The modelled encoder and RTP queue.
    rtp_queue_bits: f64,
    encoder_clock_us: Option<u64>,
}

impl Scream {
    pub fn new(config: ScreamConfig) -> Self {
        Scream {
            config,
            base_owd: Buckets::new(Extremum::Min),
            qdelay_us: 0,
            srtt_us: None,
            cwnd_bytes: MIN_CWND_BYTES,
            in_fast_increase: true,
            max_flight: Buckets::new(Extremum::Max),
            lost_bytes_pending: 0,
            last_loss_event_us: None,
            next_sample_us: 0,
            qdelay_fraction_avg: 0.0,
            qdelay_fraction_hist: History::new(),
            qdelay_trend: 0.0,
            qdelay_trend_mem: 0.0,
            calm_since_us: 0,
            qdelay_target_s: config.qdelay_target_lo_us as f64 / 1e6,
            qdelay_norm_hist: History::new(),
            loss_event_rate: 0.0,
            round_end_us: 0,
            loss_in_round: false,
            target_bitrate_bps: config.min_rate_bps,
            target_bitrate_last_max_bps: 1.0,
            next_rate_adjust_us: RATE_ADJUST_INTERVAL_US,
            sent_bits_interval: 0.0,
            acked_bits_interval: 0.0,
            media_bits_interval: 0.0,
            rate_transmit_bps: 0.0,
            rate_ack_bps: 0.0,
            rate_media_bps: 0.0,
            rtp_queue_bits: 0.0,
            encoder_clock_us: None,
        }
    }

    pub fn cwnd_bytes(&self) -> f64 {
        self.cwnd_bytes
    }

    pub fn target_bitrate_bps(&self) -> f64 {
        self.target_bitrate_bps
    }

    pub fn qdelay_us(&self) -> u64 {
        self.qdelay_us
    }

    pub fn qdelay_target_s(&self) -> f64 {
        self.qdelay_target_s
    }

    pub fn qdelay_trend(&self) -> f64 {
        self.qdelay_trend
    }

    pub fn in_fast_increase(&self) -> bool {
        self.in_fast_increase
    }

    pub fn rtp_queue_bits(&self) -> f64 {
        self.rtp_queue_bits
    }

    fn mss(&self) -> f64 {
        self.config.mss_bytes as f64
    }

    fn qdelay_target_lo_s(&self) -> f64 {
        self.config.qdelay_target_lo_us as f64 / 1e6
    }

    /// Runs the encoder up to `now_us` and the media rate control at every interval boundary
    /// passed on the way.
    fn advance(&mut self, now_us: u64) {
        if self.encoder_clock_us.is_none() {
            // The flow starts now: the first rate adjustment is one interval later.
            self.next_rate_adjust_us = now_us + RATE_ADJUST_INTERVAL_US;
        }
        let mut clock_us = self.encoder_clock_us.unwrap_or(now_us);
        while self.next_rate_adjust_us <= now_us {
            self.produce_media(clock_us, self.next_rate_adjust_us.max(clock_us));
            clock_us = self.next_rate_adjust_us.max(clock_us);
            self.adjust_bitrate();
            self.next_rate_adjust_us += RATE_ADJUST_INTERVAL_US;
        }
        self.produce_media(clock_us, now_us);
        self.encoder_clock_us = Some(now_us);
    }

    fn produce_media(&mut self, from_us: u64, to_us: u64) {
        let bits = self.target_bitrate_bps * to_us.saturating_sub(from_us) as f64 / 1e6;
        self.rtp_queue_bits += bits;
        self.media_bits_interval += bits;
    }

    /// §4.1.3, once per RATE_ADJUST_INTERVAL.
    fn adjust_bitrate(&mut self) {
        let interval_s = RATE_ADJUST_INTERVAL_US as f64 / 1e6;
        self.rate_transmit_bps = self.sent_bits_interval / interval_s;
        self.rate_ack_bps = self.acked_bits_interval / interval_s;
        self.rate_media_bps = self.media_bits_interval / interval_s;
        self.sent_bits_interval = 0.0;
        self.acked_bits_interval = 0.0;
        self.media_bits_interval = 0.0;

        let target = self.target_bitrate_bps;
        let ramp_up_speed = self.config.ramp_up_bps_per_s.min(target / 2.0);
        let last_max = self.target_bitrate_last_max_bps;
        let scale = ((target - last_max) / last_max * 4.0).powi(2).clamp(0.2, 1.0);
        let current_rate = self.rate_transmit_bps.max(self.rate_ack_bps);
        let mut target = target;
        if self.in_fast_increase {
            target += ramp_up_speed * interval_s * scale;
        } else {
            // The change toward what the path carries now (deviation 9): the RFC's text adds
            // that rate itself, so a target the link holds back would keep climbing.
            let mut delta = current_rate * (1.0 - PRE_CONGESTION_GUARD * self.qdelay_trend)
                - TX_QUEUE_SIZE_FACTOR * self.rtp_queue_bits
                - target;
            if delta > 0.0 {
                delta = (delta * scale).min(ramp_up_speed * interval_s);
            }
            target += delta;
            if current_rate > 0.0 && self.rtp_queue_bits / current_rate > RTP_QDELAY_TH_S {
                target *= TARGET_RATE_SCALE_RTP_QDELAY;
            }
        }
        let rate_media_limit = current_rate.max(self.rate_media_bps) * (2.0 - self.qdelay_trend_mem);
        self.target_bitrate_bps =
            target.min(rate_media_limit).clamp(self.config.min_rate_bps, self.config.max_rate_bps);
    }

    /// §4.1.2 update_variables and §4.1.2.2 adjust_qdelay_target, every SAMPLE_INTERVAL_US.
    fn sample_qdelay(&mut self, now_us: u64) {
        let qdelay_s = self.qdelay_us as f64 / 1e6;
        let fraction = qdelay_s / self.qdelay_target_s;
        self.qdelay_fraction_avg = (1.0 - QDELAY_WEIGHT) * self.qdelay_fraction_avg + QDELAY_WEIGHT * fraction;
        self.qdelay_fraction_hist.push(fraction);
        let r0 = self.qdelay_fraction_hist.autocorrelation(0);
        let a = if r0 > 0.0 { self.qdelay_fraction_hist.autocorrelation(1) / r0 } else { 0.0 };
        self.qdelay_trend = (a * self.qdelay_fraction_avg).clamp(0.0, 1.0);
        self.qdelay_trend_mem = (0.99 * self.qdelay_trend_mem).max(self.qdelay_trend);
        if self.qdelay_trend >= QDELAY_TREND_LO {
            self.calm_since_us = now_us;
        }
        if self.config.competing_flows {
            self.adjust_qdelay_target(qdelay_s);
        }
    }

    fn adjust_qdelay_target(&mut self, qdelay_s: f64) {
        let lo_s = self.qdelay_target_lo_s();
        self.qdelay_norm_hist.push(qdelay_s / lo_s);
        let norm_var = self.qdelay_norm_hist.variance();
        let norm_avg = self.qdelay_norm_hist.mean_of_newest(NORM_AVERAGE_SAMPLES);
        let new_target_s = (norm_avg + norm_var.sqrt()) * lo_s;
        self.qdelay_target_s = if self.loss_event_rate > LOSS_EVENT_RATE_TH {
            1.5 * new_target_s
        } else if norm_var < 0.2 {
            new_target_s
        } else if new_target_s < lo_s {
            (self.qdelay_target_s * 0.5).max(new_target_s)
        } else {
            self.qdelay_target_s * 0.9
        };
        self.qdelay_target_s = self.qdelay_target_s.clamp(lo_s, QDELAY_TARGET_HI_S);
    }

    /// §4.1.2.1 update_cwnd.
    fn update_cwnd(&mut self, bytes_newly_acked: f64, bytes_in_flight: f64) {
        if self.in_fast_increase {
            if self.qdelay_trend >= QDELAY_TREND_TH {
                self.leave_fast_increase();
            } else {
                if bytes_in_flight * 1.5 + bytes_newly_acked > self.cwnd_bytes {
                    self.cwnd_bytes += bytes_newly_acked;
                }
                return;
            }
        }
        let off_target = (self.qdelay_target_s - self.qdelay_us as f64 / 1e6) / self.qdelay_target_s;
        let mut delta = GAIN * off_target * bytes_newly_acked * self.mss() / self.cwnd_bytes;
        if off_target > 0.0 && bytes_in_flight * 1.25 + bytes_newly_acked <= self.cwnd_bytes {
            delta = 0.0;
        }
        let max_flight = self.max_flight.get().unwrap_or(0) as f64;
        self.cwnd_bytes = (self.cwnd_bytes + delta).min(max_flight * MAX_BYTES_IN_FLIGHT_HEAD_ROOM).max(MIN_CWND_BYTES);
    }

    fn leave_fast_increase(&mut self) {
        self.in_fast_increase = false;
        self.target_bitrate_last_max_bps = self.target_bitrate_bps;
    }

    fn now_calm_since(&mut self, now_us: u64) {
        self.calm_since_us = self.calm_since_us.max(now_us);
    }
}

impl CongestionControl for Scream {
    fn name(&self) -> &'static str {
        "scream"
    }

    fn on_sent(&mut self, e: &Sent) {
        self.advance(e.now_us);
        let bits = e.bytes as f64 * 8.0;
        self.rtp_queue_bits = (self.rtp_queue_bits - bits).max(0.0);
        self.sent_bits_interval += bits;
        self.max_flight.update(e.now_us / FLIGHT_BUCKET_US, e.inflight_bytes as i64);
    }

    fn on_ack(&mut self, e: &Acked) {
        self.advance(e.now_us);
        self.srtt_us = Some(e.srtt_us);
        self.acked_bits_interval += e.bytes as f64 * 8.0;

        let owd_us = e.peer_recv_us.wrapping_sub(e.sent_us) as i64;
        let base_us = self.base_owd.update(e.now_us / MINUTE_US, owd_us);
        self.qdelay_us = (owd_us - base_us) as u64;

        if e.now_us >= self.round_end_us {
            let sample = if self.loss_in_round { 1.0 } else { 0.0 };
            self.loss_event_rate += (sample - self.loss_event_rate) / LOSS_EVENT_RATE_ROUNDS;
            self.loss_in_round = false;
            self.round_end_us = e.now_us + e.srtt_us;
        }
        if e.now_us >= self.next_sample_us {
            self.sample_qdelay(e.now_us);
            self.next_sample_us = e.now_us + SAMPLE_INTERVAL_US;
        }

        let bytes_newly_acked = (e.bytes + std::mem::take(&mut self.lost_bytes_pending)) as f64;
        let was_fast = self.in_fast_increase;
        self.update_cwnd(bytes_newly_acked, e.inflight_bytes as f64);
        if was_fast && !self.in_fast_increase {
            self.now_calm_since(e.now_us);
        }
        if !self.in_fast_increase && e.now_us.saturating_sub(self.calm_since_us) >= T_RESUME_FAST_INCREASE_US {
            self.in_fast_increase = true;
        }
    }

    fn on_loss(&mut self, e: &Lost) {
        self.advance(e.now_us);
        self.lost_bytes_pending += e.bytes;
        let new_event = match (self.last_loss_event_us, self.srtt_us) {
            (Some(last_us), Some(srtt_us)) => e.now_us.saturating_sub(last_us) >= srtt_us,
            _ => true,
        };
        if !new_event {
            return;
        }
        self.last_loss_event_us = Some(e.now_us);
        self.loss_in_round = true;
        self.cwnd_bytes = (self.cwnd_bytes * BETA_LOSS).max(MIN_CWND_BYTES);
        self.in_fast_increase = false;
        self.target_bitrate_last_max_bps = self.target_bitrate_bps;
        self.target_bitrate_bps = (BETA_R * self.target_bitrate_bps).max(self.config.min_rate_bps);
        self.now_calm_since(e.now_us);
    }

    fn on_timer(&mut self, now_us: u64) {
        self.advance(now_us);
    }

    fn decision(&self) -> Decision {
        let qdelay_s = self.qdelay_us as f64 / 1e6;
        let send_window = if qdelay_s <= self.qdelay_target_s { self.cwnd_bytes + self.mss() } else { self.cwnd_bytes };
        let backlogged = self.rtp_queue_bits >= self.mss() * 8.0;
        let pacing_bps = match self.srtt_us {
            Some(srtt_us) if backlogged && srtt_us > 0 => {
                let pace_bitrate = RATE_PACE_MIN_BPS.max(self.cwnd_bytes * 8.0 * 1e6 / srtt_us as f64);
                pace_bitrate.max(self.target_bitrate_bps)
            }
            _ => self.target_bitrate_bps,
        };
        Decision {
            cwnd_bytes: Some(send_window as u64),
            pacing_rate_bps: Some(pacing_bps as u64),
            wake_at_us: Some(self.next_rate_adjust_us),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MSS;
    use crate::testing::{ack, loss};

    /// An acknowledgement at `now_us` of a packet sent 40 ms earlier whose one-way delay is
    /// `owd_us`, stamped on a receiver clock 7 s behind ours.
    fn ack_owd(now_us: u64, seq: u64, owd_us: u64, inflight_bytes: u64) -> Acked {
        let sent_us = now_us.checked_sub(40_000).expect("acknowledgements come 40 ms after the send");
        let mut a = ack(now_us, seq, sent_us, MSS);
        a.peer_recv_us = (sent_us + owd_us).wrapping_sub(7_000_000);
        a.srtt_us = 40_000;
        a.inflight_bytes = inflight_bytes;
        a
    }

    fn sent(now_us: u64, seq: u64, inflight_bytes: u64) -> Sent {
        Sent { now_us, seq, bytes: MSS, inflight_bytes }
    }

    /// Out of fast increase mode, with a window of `cwnd` bytes and 100 packets' worth of
    /// recent flight (so the max_bytes_in_flight cap does not bind).
    fn avoiding_congestion(cwnd_bytes: f64) -> Scream {
        let mut s = Scream::new(ScreamConfig::default());
        s.on_sent(&sent(0, 0, 100 * MSS));
        s.in_fast_increase = false;
        s.cwnd_bytes = cwnd_bytes;
        s
    }

    #[test]
    fn qdelay_is_the_one_way_delay_above_its_minimum_whatever_the_clock_offset() {
        let mut s = Scream::new(ScreamConfig::default());
        s.on_ack(&ack_owd(1_000_000, 0, 20_000, 0));
        assert_eq!(s.qdelay_us(), 0);
        s.on_ack(&ack_owd(1_001_000, 1, 55_000, 0));
        assert_eq!(s.qdelay_us(), 35_000);
        // No smoothing (§4.1.2): one low sample is the new qdelay at once.
        s.on_ack(&ack_owd(1_002_000, 2, 21_000, 0));
        assert_eq!(s.qdelay_us(), 1_000);
    }

    #[test]
    fn fast_increase_adds_bytes_newly_acked_while_the_window_is_used() {
        let mut s = Scream::new(ScreamConfig::default());
        assert!(s.in_fast_increase());
        assert_eq!(s.cwnd_bytes(), 3000.0);
        // 1500·1.5 + 1500 = 3750 > 3000: the window is used, it grows by the acknowledged bytes.
        s.on_ack(&ack_owd(1_000_000, 0, 20_000, MSS));
        assert_eq!(s.cwnd_bytes(), 4500.0);
        // Nothing left in flight: 0·1.5 + 1500 ≤ 4500, no growth.
        s.on_ack(&ack_owd(1_001_000, 1, 20_000, 0));
        assert_eq!(s.cwnd_bytes(), 4500.0);
        // A lost packet counts in the next bytes_newly_acked (§4.1.2).
        s.on_loss(&loss(1_001_500, 2, 960_000));
        let after_loss = s.cwnd_bytes();
        assert_eq!(after_loss, 4500.0 * 0.8);
    }

    #[test]
    fn at_zero_qdelay_the_window_grows_by_gain_times_mss_squared_over_cwnd() {
        let mut s = avoiding_congestion(30_000.0);
        // 30 packets in flight: 45 000 · 1.25 + 1500 > 30 000, the window is used.
        s.on_ack(&ack_owd(1_000_000, 0, 20_000, 30 * MSS));
        assert_eq!(s.qdelay_us(), 0);
        // off_target = 1: cwnd += 1·1·1500·1500/30 000 = 75 bytes.
        assert!((s.cwnd_bytes() - 30_075.0).abs() < 1e-9, "{}", s.cwnd_bytes());
        // Two acknowledgements' worth (a loss before the second) give twice the bytes.
        s.on_loss(&loss(1_000_100, 5, 900_000));
        let before = s.cwnd_bytes();
        assert_eq!(before, 30_075.0 * 0.8);
        s.on_ack(&ack_owd(1_000_200, 1, 20_000, 30 * MSS));
        assert!((s.cwnd_bytes() - (before + 3000.0 * 1500.0 / before)).abs() < 1e-9);
        // An underused window does not grow: 10 packets · 1.25 + 1 ≤ 20 packets of cwnd.
        let mut idle = avoiding_congestion(30_000.0);
        idle.on_ack(&ack_owd(1_000_000, 0, 20_000, 10 * MSS));
        assert_eq!(idle.cwnd_bytes(), 30_000.0);
    }

    #[test]
    fn above_the_target_the_window_shrinks_by_off_target() {
        let mut s = avoiding_congestion(30_000.0);
        s.on_ack(&ack_owd(1_000_000, 0, 20_000, 30 * MSS));
        let before = s.cwnd_bytes();
        // qdelay 150 ms against 100 ms: off_target = −0.5, whatever the window's use.
        s.on_ack(&ack_owd(1_001_000, 1, 170_000, 5 * MSS));
        assert_eq!(s.qdelay_us(), 150_000);
        let expected = before - 0.5 * 1500.0 * 1500.0 / before;
        assert!((s.cwnd_bytes() - expected).abs() < 1e-9, "{} vs {expected}", s.cwnd_bytes());
        // Above target the send window loses its MSS of slack (§4.1.2.4).
        assert_eq!(s.decision().cwnd_bytes, Some(s.cwnd_bytes() as u64));
        s.on_ack(&ack_owd(1_002_000, 2, 60_000, 30 * MSS));
        assert_eq!(s.decision().cwnd_bytes, Some((s.cwnd_bytes() + 1500.0) as u64));
    }

    #[test]
    fn the_window_never_exceeds_the_recent_flight_plus_headroom() {
        let mut s = Scream::new(ScreamConfig::default());
        s.on_sent(&sent(0, 0, 20 * MSS));
        s.in_fast_increase = false;
        s.cwnd_bytes = 40_000.0;
        s.on_ack(&ack_owd(1_000_000, 0, 20_000, 30 * MSS));
        // max_bytes_in_flight = 20 packets: cwnd ≤ 1.1 · 30 000.
        assert!((s.cwnd_bytes() - 33_000.0).abs() < 1e-9);
    }

    #[test]
    fn a_loss_event_scales_cwnd_by_beta_loss_once_per_rtt_and_the_target_by_beta_r() {
        let mut s = avoiding_congestion(30_000.0);
        s.on_ack(&ack_owd(1_000_000, 0, 20_000, 30 * MSS));
        s.target_bitrate_bps = 2_000_000.0;
        let cwnd_bytes = s.cwnd_bytes();
        s.on_loss(&loss(1_000_000, 10, 960_000));
        assert_eq!(s.cwnd_bytes(), cwnd_bytes * 0.8);
        assert_eq!(s.target_bitrate_bps(), 1_800_000.0);
        // Within one srtt (40 ms) of that event: the same loss event.
        s.on_loss(&loss(1_039_000, 11, 999_000));
        assert_eq!(s.cwnd_bytes(), cwnd_bytes * 0.8);
        assert_eq!(s.target_bitrate_bps(), 1_800_000.0);
        // One srtt later: a new event.
        s.on_loss(&loss(1_040_000, 12, 1_000_000));
        assert_eq!(s.cwnd_bytes(), cwnd_bytes * 0.64);
        assert_eq!(s.target_bitrate_bps(), 1_620_000.0);
        // Never below MIN_CWND.
        for k in 0..20 {
            s.on_loss(&loss(2_000_000 + k * 100_000, 20 + k, 1_900_000 + k * 100_000));
        }
        assert_eq!(s.cwnd_bytes(), 3000.0);
        assert!(!s.in_fast_increase());
    }

    #[test]
    fn the_target_bitrate_never_ramps_faster_than_ramp_up_speed() {
        let mut s = Scream::new(ScreamConfig::default());
        s.on_timer(0);
        let mut previous = s.target_bitrate_bps();
        assert_eq!(previous, 100_000.0);
        for k in 1..=150u64 {
            s.on_timer(k * 200_000);
            let now = s.target_bitrate_bps();
            // ramp_up_speed = min(RAMP_UP_SPEED, target/2), applied for 0.2 s.
            let allowed = (200_000f64).min(previous / 2.0) * 0.2;
            assert!(now - previous <= allowed + 1e-6, "interval {k}: {previous} -> {now}");
            previous = now;
        }
        // ×1.1 per interval up to 100k·1.1^15 = 417.7 kbit/s (3 s), then +40 kbit/s per
        // interval: 417.7k + 135·40k at 30 s.
        let expected = 100_000.0 * 1.1f64.powi(15) + 135.0 * 40_000.0;
        assert!((s.target_bitrate_bps() - expected).abs() < 1.0, "{} vs {expected}", s.target_bitrate_bps());
        // And the ramp can be configured.
        let mut fast = Scream::new(ScreamConfig { ramp_up_bps_per_s: 1e6, ..ScreamConfig::default() });
        fast.on_timer(0);
        fast.on_timer(20_000_000);
        assert!(fast.target_bitrate_bps() > 15e6);
    }

    #[test]
    fn the_encoder_paces_at_the_target_and_a_backlog_at_cwnd_over_srtt() {
        let mut s = Scream::new(ScreamConfig::default());
        s.target_bitrate_bps = 1_000_000.0;
        s.on_ack(&ack_owd(40_000, 0, 20_000, 0));
        assert_eq!(s.decision().pacing_rate_bps, Some(1_000_000));
        // 50 ms with nothing sent: 50 000 bits wait, more than one packet.
        s.on_timer(90_000);
        assert_eq!(s.rtp_queue_bits(), 50_000.0);
        // pace_bitrate = cwnd·8/s_rtt = 3000·8/0.04 = 600 kbit/s, below the target: the target.
        assert_eq!(s.decision().pacing_rate_bps, Some(1_000_000));
        s.cwnd_bytes = 10_000.0;
        assert_eq!(s.decision().pacing_rate_bps, Some(2_000_000));
    }

    #[test]
    fn a_steady_queue_raises_qdelay_target_unless_competing_flows_is_off() {
        // §4.1.2.2: 100 samples of a stable 250 ms: average 2.5, variance 0 → target 0.25 s.
        for (competing_flows, expected_s) in [(true, 0.25), (false, 0.1)] {
            let mut s = Scream::new(ScreamConfig { competing_flows, ..ScreamConfig::default() });
            s.on_ack(&ack_owd(40_000, 0, 20_000, 0));
            // 120 acknowledgements 50 ms apart: the last 100 samples are all 250 ms.
            for k in 1..=120u64 {
                s.on_ack(&ack_owd(40_000 + k * 50_000, k, 270_000, 0));
            }
            assert!((s.qdelay_target_s() - expected_s).abs() < 1e-9, "{}", s.qdelay_target_s());
        }
        // Bounded by QDELAY_TARGET_HI = 0.4 s.
        let mut s = Scream::new(ScreamConfig::default());
        s.on_ack(&ack_owd(40_000, 0, 20_000, 0));
        for k in 1..=120u64 {
            s.on_ack(&ack_owd(40_000 + k * 50_000, k, 920_000, 0));
        }
        assert_eq!(s.qdelay_target_s(), 0.4);
    }

    #[test]
    fn a_growing_queue_ends_fast_increase_and_a_calm_one_resumes_it() {
        let mut s = Scream::new(ScreamConfig { competing_flows: false, ..ScreamConfig::default() });
        s.on_ack(&ack_owd(40_000, 0, 20_000, 0));
        // qdelay rising 2 ms per 50 ms sample: correlated, and its average grows past
        // QDELAY_TREND_TH · qdelay_target.
        let mut k = 1;
        while s.in_fast_increase() {
            s.on_ack(&ack_owd(k * 50_000, k, 20_000 + 2_000 * k, 0));
            k += 1;
            assert!(k < 200, "never left fast increase");
        }
        assert!(s.qdelay_trend() >= 0.2);
        // The queue empties; fast increase comes back 5 s after the last sample with
        // qdelay_trend ≥ QDELAY_TREND_LO.
        let mut last_high_us = (k - 1) * 50_000;
        while !s.in_fast_increase() {
            s.on_ack(&ack_owd(k * 50_000, k, 20_000, 0));
            if s.qdelay_trend() >= 0.2 {
                last_high_us = k * 50_000;
            }
            k += 1;
            assert!(k < 1000, "never resumed fast increase");
        }
        assert_eq!((k - 1) * 50_000 - last_high_us, 5_000_000);
    }

    #[test]
    fn mistakes_in_the_spec_are_one_line() {
        let err = |spec: &str| crate::build(spec).err().expect("rejected").0;
        assert_eq!(
            err("scream:min_rate_mbps=5,max_rate_mbps=1"),
            "scream: min_rate_mbps (5) must not exceed max_rate_mbps (1)"
        );
        assert_eq!(
            err("scream:qdelay_target_ms=500"),
            "scream: qdelay_target_ms must be <= 400 (QDELAY_TARGET_HI), got 500"
        );
        assert_eq!(err("scream:ramp_up_kbps=0"), "scream: ramp_up_kbps must be > 0, got 0");
        assert!(crate::build("scream:ramp_up_kbps=1000,competing_flows=false,mss_bytes=1464").is_ok());
    }
}
