//! BBR v1 (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue 14(5), 2016;
//! draft-cardwell-iccrg-bbr-congestion-control-00, 2017).
//!
//! The idea: model the path by two numbers — the bottleneck bandwidth BtlBw (the largest recent
//! delivery rate) and the round-trip propagation time RTprop (the smallest recent RTT) — and send
//! at BtlBw with about one BDP = BtlBw·RTprop in flight, Kleinrock's optimal operating point, where
//! loss-based schemes sit at the far end of a full buffer. The two cannot be measured at the same
//! time (a queue hides RTprop, no queue hides BtlBw), so BBR cycles through states that probe one
//! and then the other.
//!
//! Sections implemented (draft-00):
//! - §4.1.1 BtlBw: maximum of the delivery-rate samples (draft-cheng-iccrg-delivery-rate-
//!   estimation, computed by `Acked::delivery_rate_bps`) over the last 10 round trips; round trips
//!   are counted by delivered data (§4.1.1): a round ends when a packet sent after the previous
//!   round's end is acknowledged. Application-limited samples only count if they raise the max.
//! - §4.1.2 RTprop: the smallest RTT, replaced by any sample once 10 s old.
//! - §4.2 control parameters: pacing rate = pacing_gain·BtlBw (§4.2.1; from the first RTT sample
//!   until that is more, high_gain·initial window/SRTT; before it, over a nominal 1 ms), less
//!   Linux's 1% margin (below), and in Startup it never falls; cwnd target = cwnd_gain·BDP +
//!   3·send_quantum (§4.2.3, as Linux sizes it: below), growing toward it by the bytes
//!   delivered; at least 4 packets (§4.2.3).
//! - §4.2.3 loss recovery: on the first loss the window is cut to what is in flight plus one
//!   packet and the prior window saved; for one round trip the window is held at least at
//!   in-flight + delivered (packet conservation); losses shrink it by the bytes lost; the prior
//!   window returns when recovery ends. TCP's recovery ends when everything in flight at its
//!   start is acknowledged, retransmissions of its lost packets included (Linux: snd_una passes
//!   high_seq); this flow does not retransmit, so recovery ends on the acknowledgement of a
//!   packet sent after the last loss from that flight was declared, when TCP would have
//!   retransmitted it. (Ending it at the first packet sent after recovery began, as this twin
//!   once did, re-cut the window every round trip at 20% loss.)
//! - §4.3 state machine: Startup (pacing and cwnd gain 2/ln 2 ≈ 2.885) until BtlBw grew less than
//!   25% over 3 rounds (§4.3.2); Drain (pacing gain 1/2.885) until in flight ≤ BDP (§4.3.3);
//!   ProbeBW cycling pacing gains [5/4, 3/4, 1, 1, 1, 1, 1, 1], each phase one RTprop long (the
//!   5/4 phase also until in flight reaches 5/4·BDP or a loss, the 3/4 phase ending early once
//!   in flight ≤ BDP) with cwnd gain 2 (§4.3.4); ProbeRTT when RTprop is 10 s old: cwnd 4 packets
//!   for max(200 ms, one round trip) after in flight first reaches 4 packets, then back to
//!   ProbeBW (or Startup if the pipe was never filled) (§4.3.5).
//!
//! Constants (draft-00 §4): high_gain = 2/ln 2, drain gain = ln 2/2, cwnd gain 2, gain cycle as
//! above, BtlBw window 10 round trips, RTprop window 10 s, ProbeRTT 200 ms, min pipe cwnd 4
//! packets, full-pipe growth 25% over 3 rounds, initial window 10 packets; MSS 1500 bytes.
//!
//! From Linux's net/ipv4/tcp_bbr.c, which is what Pantheon's `bbr` (and this twin's reference,
//! the 6.18 kernel here) runs, where draft-00 is silent or differs:
//! - every pacing rate is 1% below gain·BtlBw (`bbr_pacing_margin_percent`, since Linux 4.20).
//!   The max filter keeps the highest of ten rounds of noisy delivery-rate samples, so BtlBw sits
//!   a little above the link; paced at exactly BtlBw in the gain-1 phases, bbr-user's queue grew
//!   ~2 ms a second through every run on a 12 Mbit/s, 30 ms, 1-BDP path, where the kernel's
//!   drained between probes.
//! - in ProbeRTT every acknowledgement marks what is in flight application-limited
//!   (`bbr_update_min_rtt`), so the 4-packet rounds' low rates do not enter the max filter unless
//!   they raise it; at a 5 ms RTT its 200 ms span 40 rounds, four filter windows, and without the
//!   mark BtlBw fell from 12 to 7.8 Mbit/s (unit test `probe_rtt_at_a_short_rtt_keeps_btlbw`).
//! - once the pipe is full the cwnd target adds an allowance for ACK aggregation (`extra_acked`,
//!   since 5.1): the most that acknowledgements ran ahead of BtlBw·elapsed within an epoch, over
//!   5–10 round trips, at most 100 ms at BtlBw, so that bursts of ACKs (cellular and Wi-Fi links)
//!   do not leave the flow window-limited. It is a packet at most on evenly clocked paths (the
//!   simulator's 1-BDP and 5-BDP runs are unchanged to the packet). On the TMobile LTE trace
//!   (30 ms, 150 kB) over the emulator it took bbr-user from 3.45 Mbit/s and a p95 one-way delay
//!   of 322 ms to 3.74 Mbit/s and 548 ms; the kernel's bbr gave 3.72–3.79 Mbit/s, 490–525 ms
//!   (means of 2 runs of 30 s each).
//! - policer detection (`lt_bw`, since 4.9; bbr/long_term_bw.rs): after two round-trip intervals
//!   that each lost a fifth of what they delivered, at one delivery rate, that rate replaces
//!   BtlBw for pacing and the window, at pacing gain 1, for 48 round trips.
//!
//! - every in-flight target (the window's, the 5/4 phase's end, Drain's and the 3/4 phase's
//!   early exit) is Linux's `bbr_inflight`: gain·BDP rounded up to whole packets, plus three TSO
//!   bursts (`bbr_tso_segs_goal`: about 1 ms at the pacing rate, at least 2 segments above 1.2
//!   Mbit/s), rounded up to even, plus 2 packets in the 5/4 phase (`bbr_quantization_budget`,
//!   4.20); the 5/4 phase and Drain compare it with what will be in flight once the next burst
//!   has left (`bbr_packets_in_net_at_edt`). The driver sends packet by packet, so the bursts
//!   are only budgeted for, as the kernel's BBR budgets for them over any device; at 12 Mbit/s
//!   and a 27-packet BDP the 5/4 phase lasts until 40 packets are in flight (42 with the next
//!   burst), not 34.
//!
//! Deviations: (1) The ProbeBW phase to start in is drawn from a seeded generator (`seed`,
//! default 1) rather than at random, so runs are reproducible; as in §4.3.4 it is never the 3/4
//! phase. (2) There is no restart from idle (§4.3.4): Pantheon's flows never go idle. (3) On the
//! sender's timeout nothing special happens (§4.2.3 sets cwnd to one
//! packet on RTO; that serves retransmission, which this flow does not do).
//!
//! ECN: a CE mark changes nothing. Draft-00 does not mention ECN, and in Linux an ECE only moves
//! the socket into CWR, whose window reduction (PRR) the kernel skips for a module with its own
//! `cong_control`, as tcp_bbr.c is; its `bbr_set_cwnd_to_recover_or_restore` acts on Recovery
//! (loss) alone. So the twin overrides the default (a mark as a loss) with nothing.
//!
//! Driver: window and pacing rate; no timer (ProbeRTT ends on an acknowledgement, which its
//! 4-packet window keeps coming).

mod long_term_bw;

use std::ops::RangeInclusive;

use long_term_bw::{Change, LongTermBw, Sample};

use crate::filter::{Buckets, Extremum};
use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS, DEFAULT_MSS_BYTES};

/// §4.3.2: 2/ln 2, the smallest gain that doubles the sending rate every round trip.
pub const HIGH_GAIN: f64 = 2.885_390_081_777_926_8;
/// §4.3.4: the ProbeBW pacing-gain cycle.
pub const GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// §4.3.4: cwnd gain in ProbeBW.
const PROBE_BW_CWND_GAIN: f64 = 2.0;
/// §4.1.1: BtlBw is the maximum over this many round trips.
const BTLBW_FILTER_ROUNDS: usize = 10;
/// §4.1.2: RTprop expires after this long.
pub const RTPROP_FILTER_US: u64 = 10_000_000;
/// §4.3.5: time spent at the minimal window in ProbeRTT.
pub const PROBE_RTT_DURATION_US: u64 = 200_000;
/// §4.2.3: the smallest window (BBRMinPipeCwnd), packets.
const MIN_PIPE_CWND_PACKETS: u64 = 4;
/// §4.3.2: Startup ends when BtlBw grew less than this factor for `FULL_BW_ROUNDS` rounds.
const FULL_BW_GROWTH: f64 = 1.25;
const FULL_BW_ROUNDS: u32 = 3;
/// Linux's `bbr_quantization_budget` adds this many TSO bursts (`bbr_tso_segs_goal`) to every
/// in-flight target: §4.2.3's 3·send_quantum.
const QUANTA_BURSTS: u64 = 3;
/// Below this pacing rate a TSO burst is one segment, above it at least two (`bbr_min_tso_rate`).
const MIN_TSO_RATE_BPS: u64 = 1_200_000;
/// A TSO burst carries about 2^-10 s at the pacing rate (`sk_pacing_shift`, ~1 ms)...
const PACING_SHIFT: u32 = 10;
/// ...and at most this much (`GSO_LEGACY_MAX_SIZE`; Linux subtracts its header room, a few hundred
/// bytes) or this many segments.
const TSO_MAX_BYTES: u64 = 65_536;
const TSO_MAX_SEGS: u64 = 127;
/// Linux tcp_bbr.c since 4.20 (`bbr_pacing_margin_percent` = 1): every pacing rate is 1% below
/// gain·BtlBw, so that a BtlBw estimate a little above the link (delivery-rate samples taken over
/// a compressed ACK interval) does not keep a standing queue growing at gain 1.
const PACING_MARGIN: f64 = 0.99;
/// Linux tcp_bbr.c since 5.1: the ACK-aggregation estimate is the largest of two windows of this
/// many round trips (`bbr_extra_acked_win_rtts`).
const EXTRA_ACKED_WINDOW_ROUNDS: u32 = 5;
/// The aggregation allowance is at most this long at BtlBw (`bbr_extra_acked_max_us`).
const EXTRA_ACKED_MAX_US: u64 = 100_000;
/// An aggregation epoch restarts after this many bytes (`bbr_ack_epoch_acked_reset_thresh`, 2^20).
const ACK_EPOCH_RESET_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BbrConfig {
    pub mss_bytes: u64,
    pub initial_cwnd_packets: u64,
    /// Seeds the choice of the first ProbeBW phase.
    pub seed: u64,
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig { mss_bytes: DEFAULT_MSS_BYTES, initial_cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS, seed: 1 }
    }
}

impl BbrConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = BbrConfig::default();
        Ok(BbrConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            initial_cwnd_packets: p.u64_at_least(
                "initial_cwnd_packets",
                MIN_PIPE_CWND_PACKETS,
                d.initial_cwnd_packets,
            )?,
            seed: p.u64_at_least("seed", 0, d.seed)?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

#[derive(Debug, Clone)]
pub struct Bbr {
    config: BbrConfig,
    state: State,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// BtlBw samples per round trip, bits per second.
    btlbw: Buckets<BTLBW_FILTER_ROUNDS>,
    btlbw_bps: u64,
    /// RTprop and when it was last set, µs; `None` before the first sample.
    rtprop_us: Option<u64>,
    rtprop_stamp_us: u64,
    /// Round counting by delivered bytes (§4.1.1).
    round_count: u64,
    next_round_delivered_bytes: u64,
    round_start: bool,
    /// Startup's full-pipe detector.
    filled_pipe: bool,
    full_bw_bps: u64,
    full_bw_rounds: u32,
    /// ProbeBW phase and when it began.
    cycle_index: usize,
    cycle_stamp_us: u64,
    /// ProbeRTT: when it may end (`None` until in flight first fell to 4 packets), and whether a
    /// round trip has passed since.
    probe_rtt_done_us: Option<u64>,
    probe_rtt_round_done: bool,
    /// Packets sent while delivered bytes were in this range, set during ProbeRTT, are
    /// application-limited (Linux tcp_bbr.c `bbr_update_min_rtt`): their rate shows the 4-packet
    /// window, not the path. `None` before the first ProbeRTT.
    probe_rtt_app_limited_bytes: Option<RangeInclusive<u64>>,
    /// The window saved when entering recovery or ProbeRTT.
    prior_cwnd_bytes: u64,
    cwnd_bytes: u64,
    pacing_rate_bps: u64,
    /// Recovery: when it began (packets sent up to then are in it), when it can end (below),
    /// and the round in which packet conservation ends.
    recovery_start_us: Option<u64>,
    recovery_repair_us: u64,
    conservation_until_round: Option<u64>,
    /// Bytes declared lost since the last acknowledgement, and since the flow began.
    lost_bytes_since_ack: u64,
    lost_bytes: u64,
    /// Linux's policer detection: the bandwidth to use instead of BtlBw while policed.
    long_term: LongTermBw,
    /// ACK aggregation (Linux 5.1): the largest excess of bytes acknowledged in an epoch over what
    /// BtlBw would have delivered in it, per window of `EXTRA_ACKED_WINDOW_ROUNDS` round trips
    /// (the current one at `extra_acked_window`, and the previous).
    extra_acked_bytes: [u64; 2],
    extra_acked_window: usize,
    /// Round trips into the current window.
    extra_acked_window_rounds: u32,
    /// When the current aggregation epoch began (an ACK that came no earlier than BtlBw
    /// predicted), µs, and the bytes acknowledged since.
    ack_epoch_start_us: u64,
    ack_epoch_acked_bytes: u64,
    rng_state: u64,
}

impl Bbr {
    pub fn new(config: BbrConfig) -> Self {
        let cwnd_bytes = config.initial_cwnd_packets * config.mss_bytes;
        Bbr {
            config,
            state: State::Startup,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            btlbw: Buckets::new(Extremum::Max),
            btlbw_bps: 0,
            rtprop_us: None,
            rtprop_stamp_us: 0,
            round_count: 0,
            next_round_delivered_bytes: 0,
            round_start: false,
            filled_pipe: false,
            full_bw_bps: 0,
            full_bw_rounds: 0,
            cycle_index: 0,
            cycle_stamp_us: 0,
            probe_rtt_done_us: None,
            probe_rtt_round_done: false,
            probe_rtt_app_limited_bytes: None,
            prior_cwnd_bytes: cwnd_bytes,
            cwnd_bytes,
            // §4.2.1: before any RTT sample, high_gain·initial window over a nominal 1 ms.
            pacing_rate_bps: crate::rate_bps(PACING_MARGIN * HIGH_GAIN * cwnd_bytes as f64, 1_000.0),
            recovery_start_us: None,
            recovery_repair_us: 0,
            conservation_until_round: None,
            lost_bytes_since_ack: 0,
            lost_bytes: 0,
            long_term: LongTermBw::default(),
            extra_acked_bytes: [0; 2],
            extra_acked_window: 0,
            extra_acked_window_rounds: 0,
            ack_epoch_start_us: 0,
            ack_epoch_acked_bytes: 0,
            rng_state: config.seed,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }

    pub fn btlbw_bps(&self) -> u64 {
        self.btlbw_bps
    }

    pub fn rtprop_us(&self) -> Option<u64> {
        self.rtprop_us
    }

    /// The bandwidth the flow paces at and sizes its window by (Linux's `bbr_bw`): the policed
    /// rate while one is detected, BtlBw otherwise.
    pub fn bw_bps(&self) -> u64 {
        self.long_term.bw_bps().unwrap_or(self.btlbw_bps)
    }

    /// gain·BDP at `bw_bps` in whole packets, rounded up (Linux's `bbr_bdp`); the initial window
    /// before any RTT sample.
    fn bdp_packets(&self, bw_bps: u64, gain: f64) -> u64 {
        match self.rtprop_us {
            None => self.config.initial_cwnd_packets,
            Some(rtprop_us) => {
                ((gain * bw_bps as f64 / 8.0 * rtprop_us as f64 / 1e6) as u64).div_ceil(self.config.mss_bytes)
            }
        }
    }

    /// Segments per TSO burst at the current pacing rate (Linux's `bbr_tso_segs_goal`): about a
    /// millisecond's worth, at least 2 above 1.2 Mbit/s.
    fn tso_segs_goal(&self) -> u64 {
        let min_segs = if self.pacing_rate_bps < MIN_TSO_RATE_BPS { 1 } else { 2 };
        let burst_bytes = ((self.pacing_rate_bps / 8) >> PACING_SHIFT).min(TSO_MAX_BYTES);
        (burst_bytes / self.config.mss_bytes).max(min_segs).min(TSO_MAX_SEGS)
    }

    /// Linux's `bbr_quantization_budget`: room for three bursts in flight, rounded up to an even
    /// number (fewer delayed ACKs), and 2 more in the 5/4 phase so that it gets above a small BDP.
    fn quantization_budget_packets(&self, packets: u64) -> u64 {
        let budget = (packets + QUANTA_BURSTS * self.tso_segs_goal()).next_multiple_of(2);
        if self.state == State::ProbeBw && self.cycle_index == 0 {
            budget + 2
        } else {
            budget
        }
    }

    /// The in-flight target at `bw_bps` and `gain`, in bytes: gain·BDP with the quantization
    /// budget (Linux's `bbr_inflight`; §4.2.3 BBRInflight).
    fn inflight_bytes_for(&self, bw_bps: u64, gain: f64) -> u64 {
        self.quantization_budget_packets(self.bdp_packets(bw_bps, gain)) * self.config.mss_bytes
    }

    /// What will be in flight when the next packet leaves (Linux's `bbr_packets_in_net_at_edt`):
    /// while probing up, the next burst counts. Linux also subtracts what BtlBw delivers until
    /// that departure; paced packet by packet that is under a packet, which its integer
    /// arithmetic rounds to none, and is left out.
    fn inflight_at_departure_bytes(&self, inflight_bytes: u64) -> u64 {
        if self.pacing_gain > 1.0 {
            inflight_bytes + self.tso_segs_goal() * self.config.mss_bytes
        } else {
            inflight_bytes
        }
    }

    /// ProbeBW's pacing gain in phase `cycle_index`: 1 throughout while policed.
    fn probe_bw_gain(&self) -> f64 {
        if self.long_term.bw_bps().is_some() {
            1.0
        } else {
            GAIN_CYCLE[self.cycle_index]
        }
    }

    /// A number in 0..n from a 64-bit linear congruential generator (Knuth's MMIX constants).
    fn random_below(&mut self, n: u64) -> u64 {
        self.rng_state = self.rng_state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.rng_state >> 33) % n
    }

    fn enter_probe_bw(&mut self, now_us: u64) {
        self.state = State::ProbeBw;
        self.cwnd_gain = PROBE_BW_CWND_GAIN;
        // §4.3.4: any phase but the 3/4 one; index 1 is skipped by drawing from 7 and shifting.
        let draw = self.random_below(GAIN_CYCLE.len() as u64 - 1) as usize;
        self.cycle_index = if draw == 0 { 0 } else { draw + 1 };
        self.pacing_gain = self.probe_bw_gain();
        self.cycle_stamp_us = now_us;
    }

    fn update_round(&mut self, e: &Acked) {
        self.round_start = e.delivered_bytes_at_send >= self.next_round_delivered_bytes;
        if self.round_start {
            self.next_round_delivered_bytes = e.delivered_bytes;
            self.round_count += 1;
        }
    }

    /// Whether the sample's packet left while the flow sent less than the model allowed: the
    /// driver's mark, or ProbeRTT's.
    fn app_limited(&self, e: &Acked) -> bool {
        e.app_limited
            || self.probe_rtt_app_limited_bytes.as_ref().is_some_and(|r| r.contains(&e.delivered_bytes_at_send))
    }

    fn update_btlbw(&mut self, e: &Acked) {
        let Some(rate_bps) = e.delivery_rate_bps() else { return };
        if rate_bps >= self.btlbw_bps || !self.app_limited(e) {
            self.btlbw_bps = self.btlbw.update(self.round_count, rate_bps as i64) as u64;
        }
    }

    /// Linux's `bbr_lt_bw_sampling`, on each acknowledgement that gives a rate sample.
    fn update_long_term(&mut self, e: &Acked) {
        if e.delivery_rate_bps().is_none() {
            return;
        }
        let change = self.long_term.on_ack(&Sample {
            now_us: e.now_us,
            round_start: self.round_start,
            in_probe_bw: self.state == State::ProbeBw,
            app_limited: self.app_limited(e),
            lost_bytes: self.lost_bytes_since_ack,
            delivered_total_bytes: e.delivered_bytes,
            lost_total_bytes: self.lost_bytes,
        });
        match change {
            Some(Change::Policed) if self.state == State::ProbeBw => self.pacing_gain = self.probe_bw_gain(),
            Some(Change::Policed) | None => {}
            // Probe the path afresh (`bbr_reset_probe_bw_mode`).
            Some(Change::Expired) => self.enter_probe_bw(e.now_us),
        }
    }

    /// §4.3.4 BBRIsNextCyclePhase (in flight at the next departure against BtlBw, not the
    /// policed rate, as Linux's).
    fn is_next_cycle_phase(&self, e: &Acked, prior_inflight_bytes: u64) -> bool {
        let is_full_length = e.now_us - self.cycle_stamp_us > self.rtprop_us.unwrap_or(0);
        let prior_inflight_bytes = self.inflight_at_departure_bytes(prior_inflight_bytes);
        if self.pacing_gain > 1.0 {
            is_full_length
                && (self.lost_bytes_since_ack > 0
                    || prior_inflight_bytes >= self.inflight_bytes_for(self.btlbw_bps, self.pacing_gain))
        } else if self.pacing_gain < 1.0 {
            is_full_length || prior_inflight_bytes <= self.inflight_bytes_for(self.btlbw_bps, 1.0)
        } else {
            is_full_length
        }
    }

    fn check_full_pipe(&mut self, e: &Acked) {
        if self.filled_pipe || !self.round_start || self.app_limited(e) {
            return;
        }
        if self.btlbw_bps as f64 >= self.full_bw_bps as f64 * FULL_BW_GROWTH {
            self.full_bw_bps = self.btlbw_bps;
            self.full_bw_rounds = 0;
            return;
        }
        self.full_bw_rounds += 1;
        if self.full_bw_rounds >= FULL_BW_ROUNDS {
            self.filled_pipe = true;
        }
    }

    fn save_cwnd(&mut self) {
        self.prior_cwnd_bytes = if self.recovery_start_us.is_none() && self.state != State::ProbeRtt {
            self.cwnd_bytes
        } else {
            self.prior_cwnd_bytes.max(self.cwnd_bytes)
        };
    }

    /// §4.2.3: on the first loss, save the window and cut it to what is in flight plus a packet,
    /// conserving packets for a round trip.
    fn start_recovery(&mut self, e: &Lost) {
        self.save_cwnd();
        self.recovery_start_us = Some(e.now_us);
        self.recovery_repair_us = e.now_us;
        self.conservation_until_round = Some(self.round_count + 1);
        self.cwnd_bytes = (e.inflight_bytes + self.config.mss_bytes).max(MIN_PIPE_CWND_PACKETS * self.config.mss_bytes);
    }

    fn handle_probe_rtt(&mut self, e: &Acked) {
        // Everything sent until what is in flight now is delivered is marked, as Linux does on
        // each ACK in ProbeRTT; without it, at a short RTT the 200 ms of 4-packet rounds fill the
        // 10-round max filter with low rates and BtlBw collapses when ProbeRTT ends.
        let until_bytes = e.delivered_bytes + e.inflight_bytes;
        let from_bytes = match &self.probe_rtt_app_limited_bytes {
            Some(marked) if marked.contains(&e.delivered_bytes) => *marked.start(),
            _ => e.delivered_bytes,
        };
        self.probe_rtt_app_limited_bytes = Some(from_bytes..=until_bytes);
        match self.probe_rtt_done_us {
            None if e.inflight_bytes <= MIN_PIPE_CWND_PACKETS * self.config.mss_bytes => {
                self.probe_rtt_done_us = Some(e.now_us + PROBE_RTT_DURATION_US);
                self.probe_rtt_round_done = false;
                self.next_round_delivered_bytes = e.delivered_bytes;
            }
            None => {}
            Some(done_us) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && e.now_us > done_us {
                    self.rtprop_stamp_us = e.now_us;
                    self.cwnd_bytes = self.cwnd_bytes.max(self.prior_cwnd_bytes);
                    if self.filled_pipe {
                        self.enter_probe_bw(e.now_us);
                    } else {
                        self.state = State::Startup;
                        self.pacing_gain = HIGH_GAIN;
                        self.cwnd_gain = HIGH_GAIN;
                    }
                }
            }
        }
    }

    /// Linux's `bbr_update_ack_aggregation`: how far acknowledgements ran ahead of BtlBw since
    /// the current epoch began.
    fn update_ack_aggregation(&mut self, e: &Acked) {
        if self.round_start {
            self.extra_acked_window_rounds += 1;
            if self.extra_acked_window_rounds >= EXTRA_ACKED_WINDOW_ROUNDS {
                self.extra_acked_window ^= 1;
                self.extra_acked_bytes[self.extra_acked_window] = 0;
                self.extra_acked_window_rounds = 0;
            }
        }
        let elapsed_us = e.now_us.saturating_sub(self.ack_epoch_start_us);
        let mut expected_bytes = (self.bw_bps() as f64 / 8.0 * elapsed_us as f64 / 1e6) as u64;
        if self.ack_epoch_acked_bytes <= expected_bytes || self.ack_epoch_acked_bytes + e.bytes >= ACK_EPOCH_RESET_BYTES
        {
            self.ack_epoch_acked_bytes = 0;
            self.ack_epoch_start_us = e.now_us;
            expected_bytes = 0;
        }
        self.ack_epoch_acked_bytes += e.bytes;
        let extra_bytes =
            (self.ack_epoch_acked_bytes - expected_bytes.min(self.ack_epoch_acked_bytes)).min(self.cwnd_bytes);
        let slot = &mut self.extra_acked_bytes[self.extra_acked_window];
        *slot = (*slot).max(extra_bytes);
    }

    /// The cwnd allowance for ACK aggregation (Linux's `bbr_ack_aggregation_cwnd`), once the pipe
    /// is full: the larger window's estimate, at most `EXTRA_ACKED_MAX_US` at BtlBw.
    fn aggregation_allowance_bytes(&self) -> u64 {
        if !self.filled_pipe {
            return 0;
        }
        let cap_bytes = (self.bw_bps() as f64 / 8.0 * EXTRA_ACKED_MAX_US as f64 / 1e6) as u64;
        self.extra_acked_bytes[0].max(self.extra_acked_bytes[1]).min(cap_bytes)
    }

    fn set_cwnd(&mut self, e: &Acked) {
        let mss = self.config.mss_bytes;
        let target_bytes = self.quantization_budget_packets(
            self.bdp_packets(self.bw_bps(), self.cwnd_gain) + self.aggregation_allowance_bytes().div_ceil(mss),
        ) * mss;
        let mut cwnd_bytes = self.cwnd_bytes;
        if self.lost_bytes_since_ack > 0 {
            cwnd_bytes = cwnd_bytes.saturating_sub(self.lost_bytes_since_ack).max(mss);
        }
        let conserving = self.conservation_until_round.is_some_and(|r| self.round_count < r);
        if conserving {
            cwnd_bytes = cwnd_bytes.max(e.inflight_bytes + e.bytes);
        } else if self.filled_pipe {
            cwnd_bytes = (cwnd_bytes + e.bytes).min(target_bytes);
        } else if cwnd_bytes < target_bytes || e.delivered_bytes < self.config.initial_cwnd_packets * mss {
            cwnd_bytes += e.bytes;
        }
        cwnd_bytes = cwnd_bytes.max(MIN_PIPE_CWND_PACKETS * mss);
        if self.state == State::ProbeRtt {
            cwnd_bytes = cwnd_bytes.min(MIN_PIPE_CWND_PACKETS * mss);
        }
        self.cwnd_bytes = cwnd_bytes;
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    fn on_sent(&mut self, _e: &Sent) {}

    fn on_ack(&mut self, e: &Acked) {
        let prior_inflight_bytes = e.inflight_bytes + e.bytes;
        let first_rtt = self.rtprop_us.is_none();
        if self.recovery_start_us.is_some() && e.sent_us > self.recovery_repair_us {
            // What was in flight when recovery began is delivered or repaired: recovery is over
            // (§4.2.3; TCP's snd_una passing high_seq).
            self.recovery_start_us = None;
            self.conservation_until_round = None;
            self.cwnd_bytes = self.cwnd_bytes.max(self.prior_cwnd_bytes);
        }

        // §4.1: the model.
        self.update_round(e);
        self.update_long_term(e);
        self.update_btlbw(e);
        self.update_ack_aggregation(e);
        if self.state == State::ProbeBw && self.is_next_cycle_phase(e, prior_inflight_bytes) {
            self.cycle_index = (self.cycle_index + 1) % GAIN_CYCLE.len();
            self.pacing_gain = self.probe_bw_gain();
            self.cycle_stamp_us = e.now_us;
        }
        self.check_full_pipe(e);
        if self.state == State::Startup && self.filled_pipe {
            self.state = State::Drain;
            self.pacing_gain = 1.0 / HIGH_GAIN;
            self.cwnd_gain = HIGH_GAIN;
        }
        if self.state == State::Drain
            && self.inflight_at_departure_bytes(e.inflight_bytes) <= self.inflight_bytes_for(self.btlbw_bps, 1.0)
        {
            self.enter_probe_bw(e.now_us);
        }
        // The filter can only expire once it holds a sample: the driver's clock need not start at 0.
        let rtprop_expired = self.rtprop_us.is_some() && e.now_us > self.rtprop_stamp_us + RTPROP_FILTER_US;
        if self.rtprop_us.is_none_or(|r| e.rtt_us <= r) || rtprop_expired {
            self.rtprop_us = Some(e.rtt_us);
            self.rtprop_stamp_us = e.now_us;
        }
        if self.state != State::ProbeRtt && rtprop_expired {
            self.state = State::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = 1.0;
            self.save_cwnd();
            self.probe_rtt_done_us = None;
        }
        if self.state == State::ProbeRtt {
            self.handle_probe_rtt(e);
        }

        // §4.2: the control parameters.
        if first_rtt {
            // The first RTT replaces the initial rate's 1 ms (`bbr_init_pacing_rate_from_rtt`).
            self.pacing_rate_bps =
                crate::rate_bps(PACING_MARGIN * HIGH_GAIN * self.cwnd_bytes as f64, e.srtt_us.max(1) as f64);
        }
        let rate_bps = (PACING_MARGIN * self.pacing_gain * self.bw_bps() as f64) as u64;
        if self.filled_pipe || rate_bps > self.pacing_rate_bps {
            self.pacing_rate_bps = rate_bps;
        }
        self.set_cwnd(e);
        self.lost_bytes_since_ack = 0;
    }

    fn on_loss(&mut self, e: &Lost) {
        self.lost_bytes_since_ack += e.bytes;
        self.lost_bytes += e.bytes;
        match self.recovery_start_us {
            // TCP retransmits a packet of the recovery's flight when it is declared lost, and the
            // recovery lasts until that retransmission is acknowledged: about until a packet
            // sent now is. Packets sent after recovery began are not its to repair.
            Some(start_us) if e.sent_us <= start_us => self.recovery_repair_us = e.now_us,
            Some(_) => {}
            None => self.start_recovery(e),
        }
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: Some(self.cwnd_bytes), pacing_rate_bps: Some(self.pacing_rate_bps), wake_at_us: None }
    }

    /// BBR v1 ignores ECN, as Linux's does (the header says why).
    fn on_congestion_mark(&mut self, _e: &Acked) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::datagram::PACKET_BYTES;
    use crate::flow::Flow;
    use crate::testing::FixedPath;

    /// The flow's datagram, which the flow builds BBR to count as its packet: the hand-made
    /// events that continue a traced run are in the same packets.
    const MSS: u64 = PACKET_BYTES;

    /// Runs BBR, as the flow builds and drives it, on one 1464-byte datagram per ms (11.712
    /// Mbit/s) behind 40 ms (growing by `rtt_drift_us_per_s` per second) and records each change
    /// of state or ProbeBW phase with its time.
    fn trace(rtt_drift_us_per_s: u64, until_us: u64) -> (Flow, Vec<(u64, State, usize)>) {
        trace_on(FixedPath { service_us: 1000, base_rtt_us: 40_000, rtt_drift_us_per_s }, until_us)
    }

    fn trace_on(path: FixedPath, until_us: u64) -> (Flow, Vec<(u64, State, usize)>) {
        let mut changes: Vec<(u64, State, usize)> = Vec::new();
        let (flow, _) = path.run("bbr", until_us, |a, b: &Bbr| {
            let now = (b.state(), b.cycle_index);
            if changes.last().is_none_or(|&(_, s, i)| (s, i) != now) {
                changes.push((a.now_us, now.0, now.1));
            }
        });
        (flow, changes)
    }

    #[test]
    fn startup_drain_probe_bw_with_the_eight_phase_cycle() {
        let (flow, changes) = trace(0, 5_000_000);
        let bbr = flow.controller::<Bbr>().unwrap();
        let states: Vec<State> = changes.iter().map(|c| c.1).collect();
        assert_eq!(&states[..3], &[State::Startup, State::Drain, State::ProbeBw], "{changes:?}");
        // BtlBw: the bottleneck's 11.712 Mbit/s; RTprop: the 40 ms base RTT plus at most one
        // service.
        assert!(bbr.btlbw_bps().abs_diff(11_712_000) <= 100_000, "{}", bbr.btlbw_bps());
        assert!(bbr.rtprop_us().unwrap() <= 41_000);
        // ProbeBW steps through the phases in order; each lasts at least one RTprop, except
        // that the 3/4 phase may end as soon as in flight is down to one BDP.
        let probe_bw: Vec<(u64, usize)> =
            changes.iter().filter(|c| c.1 == State::ProbeBw).map(|c| (c.0, c.2)).collect();
        assert!(probe_bw.len() > 16, "{changes:?}");
        for w in probe_bw.windows(2) {
            assert_eq!(w[1].1, (w[0].1 + 1) % 8, "{probe_bw:?}");
            let length_us = w[1].0 - w[0].0;
            if w[0].1 != 1 {
                assert!(length_us > 40_000, "phase {} lasted {length_us} us", w[0].1);
            }
        }
        // A full cycle: 6 phases of one RTprop at gain 1, one of 5/4, one of at most 3/4.
        let starts: Vec<u64> = probe_bw.iter().filter(|p| p.1 == 0).map(|p| p.0).collect();
        let cycle_us = starts[2] - starts[1];
        assert!(cycle_us > 7 * 40_000 && cycle_us < 8 * 45_000, "cycle {cycle_us} us");
    }

    #[test]
    fn a_clock_that_starts_late_does_not_begin_in_probe_rtt() {
        // The driver's clock is arbitrary (the transport's is the flow's, a host's may be its
        // uptime): the RTprop filter must not count as expired before its first sample.
        let mut bbr = Bbr::new(BbrConfig::default());
        let t0_us = 3_600_000_000;
        bbr.on_sent(&Sent { now_us: t0_us, seq: 0, bytes: 1500, inflight_bytes: 1500 });
        bbr.on_ack(&Acked {
            now_us: t0_us + 40_000,
            seq: 0,
            bytes: 1500,
            sent_us: t0_us,
            peer_recv_us: 20_000,
            rtt_us: 40_000,
            srtt_us: 40_000,
            min_rtt_us: 40_000,
            delivered_bytes: 1500,
            delivered_bytes_at_send: 0,
            delivered_time_at_send_us: t0_us,
            first_sent_time_at_send_us: t0_us,
            inflight_bytes: 0,
            app_limited: false,
            ce_marks: 0,
        });
        assert_eq!(bbr.state(), State::Startup);
        assert_eq!(bbr.rtprop_us(), Some(40_000));
    }

    #[test]
    fn probe_rtt_only_when_rtprop_goes_ten_seconds_unconfirmed() {
        // On a fixed path the quantization budget keeps a few packets queued after Drain (RTT
        // samples ≥ 43 ms against the 40 ms minimum, as with Linux's BBR v1), so only ProbeRTT
        // confirms RTprop: it comes ~10 s after Startup's last minimum and ~10 s after the
        // minimum samples that follow each ProbeRTT, never sooner.
        let (_, changes) = trace(0, 25_000_000);
        let entries: Vec<u64> = changes.iter().filter(|c| c.1 == State::ProbeRtt).map(|c| c.0).collect();
        assert_eq!(entries.len(), 2, "{changes:?}");
        assert!(entries[0] > 10_000_000 && entries[0] < 10_500_000, "{entries:?}");
        assert!(entries[1] - entries[0] > 10_200_000 && entries[1] - entries[0] < 10_800_000, "{entries:?}");
        // With a propagation RTT that grows 1 ms per second, no sample ever matches the minimum:
        // ProbeRTT comes 10 s after the last RTprop update — at ~10 s, then 10 s after the
        // first ProbeRTT ended.
        let (_, changes) = trace(1_000, 25_000_000);
        let entries: Vec<usize> = (0..changes.len()).filter(|&i| changes[i].1 == State::ProbeRtt).collect();
        assert_eq!(entries.len(), 2, "{changes:?}");
        let (first_us, first_exit_us) = (changes[entries[0]].0, changes[entries[0] + 1].0);
        let second_us = changes[entries[1]].0;
        assert!(first_us > 10_000_000 && first_us < 10_100_000, "{first_us}");
        assert!(second_us - first_exit_us > 10_000_000 && second_us - first_exit_us < 10_100_000);
        // It lasts 200 ms at the 4-packet window after the time to drain to it (< 2 RTTs).
        let stay_us = first_exit_us - first_us;
        assert!(stay_us > PROBE_RTT_DURATION_US && stay_us < PROBE_RTT_DURATION_US + 120_000, "{stay_us}");
        assert_eq!(changes[entries[0] + 1].1, State::ProbeBw);
    }

    #[test]
    fn probe_rtt_at_a_short_rtt_keeps_btlbw() {
        // 5 ms RTT: ProbeRTT's 200 ms at 4 packets span ~40 rounds, four times the max filter's
        // 10. Its samples (4 packets per 5 ms, 9.4 Mbit/s) are application-limited, so BtlBw
        // stays at the link's 11.712 Mbit/s through it and after.
        let path = FixedPath { service_us: 1000, base_rtt_us: 5_000, rtt_drift_us_per_s: 100 };
        let mut in_probe_rtt_s = 0.0;
        let mut lowest_bps = u64::MAX;
        path.run("bbr", 12_000_000, |a, b: &Bbr| {
            if b.state() == State::ProbeRtt {
                in_probe_rtt_s = a.now_us as f64 / 1e6;
            }
            if a.now_us > 2_000_000 {
                lowest_bps = lowest_bps.min(b.btlbw_bps());
            }
        });
        assert!(in_probe_rtt_s > 10.0, "ProbeRTT last seen at {in_probe_rtt_s} s");
        assert!(lowest_bps.abs_diff(11_712_000) <= 200_000, "BtlBw fell to {lowest_bps} bit/s");
    }

    #[test]
    fn a_policed_flow_paces_at_the_policed_rate_at_gain_1_for_48_rounds() {
        // ProbeBW at 11.712 Mbit/s, 40 ms; then a policer: every other packet dropped, one
        // acknowledgement every 2 ms, 5.856 Mbit/s delivered, a round trip every 20
        // acknowledgements.
        let (mut flow, _) = trace(0, 3_000_000);
        let bbr = flow.controller_mut::<Bbr>().unwrap();
        assert_eq!(bbr.state(), State::ProbeBw);
        let start_us = 3_000_000;
        let mut delivered_bytes = 100_000_000;
        let mut in_use: Vec<(u64, f64, u64, u64)> = Vec::new();
        let mut probed_after_us = None;
        for i in 0..2_000u64 {
            let now_us = start_us + 2_000 * i;
            bbr.on_loss(&Lost { bytes: MSS, ..crate::testing::loss(now_us, 2 * i, now_us - 40_000) });
            delivered_bytes += MSS;
            let mut a = crate::testing::ack(now_us, 2 * i + 1, now_us - 40_000, MSS);
            a.delivered_bytes = delivered_bytes;
            a.delivered_bytes_at_send = delivered_bytes - 20 * MSS;
            a.delivered_time_at_send_us = now_us - 40_000;
            a.first_sent_time_at_send_us = now_us - 80_000;
            a.inflight_bytes = 30_000;
            bbr.on_ack(&a);
            match bbr.long_term.bw_bps() {
                Some(bw_bps) => {
                    in_use.push((now_us, bbr.pacing_gain(), bw_bps, bbr.decision().pacing_rate_bps.unwrap()))
                }
                None if !in_use.is_empty() && probed_after_us.is_none() => probed_after_us = Some(now_us),
                None => {}
            }
        }
        let (first_us, _, bw_bps, _) = in_use[0];
        // Two intervals of 4 round trips each from the first loss.
        assert!((first_us - start_us).abs_diff(320_000) <= 40_000, "detected at {first_us}");
        assert!(bw_bps.abs_diff(5_856_000) < 60_000, "{bw_bps}");
        // Paced at the policed rate, less Linux's 1% margin, with no 5/4 probes.
        for &(t_us, gain, _, pacing_rate_bps) in &in_use {
            assert_eq!(gain, 1.0, "at {t_us}");
            assert!(pacing_rate_bps.abs_diff(5_797_440) < 60_000, "{pacing_rate_bps} at {t_us}");
        }
        // 48 round trips of 40 ms, then the path is probed afresh.
        let used_us = probed_after_us.expect("the estimate expired") - first_us;
        assert!(used_us.abs_diff(48 * 40_000) <= 40_000, "used for {used_us} us");
    }

    #[test]
    fn a_burst_of_acknowledgements_widens_the_window_by_its_excess() {
        // Steady state on 11.712 Mbit/s, 40 ms: BtlBw one packet per ms, cwnd 2·BDP (80 packets)
        // + at most a packet's allowance + three 2-packet TSO bursts, rounded up to even: 88
        // packets.
        let (mut flow, _) = trace(0, 3_000_000);
        let bbr = flow.controller_mut::<Bbr>().unwrap();
        let before_bytes = bbr.decision().cwnd_bytes.unwrap();
        assert_eq!(before_bytes, 88 * MSS);
        let even_bytes = bbr.aggregation_allowance_bytes();
        assert!(even_bytes <= MSS, "evenly spaced ACKs aggregate at most a packet: {even_bytes}");
        // 20 packets acknowledged at one instant, 2 ms after the last: the first of them finds the
        // epoch behind BtlBw (1 packet acknowledged where 2 ms predict 2 packets) and starts a
        // new one, in which all 20 arrive with no time elapsed: 20 packets ahead.
        let t_us = 3_002_000;
        for i in 0..20 {
            let mut a = crate::testing::ack(t_us, 1_000_000 + i, t_us - 40_000, MSS);
            a.delivered_bytes = 10_000_000 + MSS * (i + 1);
            a.delivered_bytes_at_send = 9_000_000;
            a.inflight_bytes = before_bytes;
            bbr.on_ack(&a);
        }
        let allowance_bytes = bbr.aggregation_allowance_bytes();
        assert_eq!(allowance_bytes, 20 * MSS);
        // The window grows to the larger target, one packet per acknowledgement: 2·BDP (80
        // packets) + the allowance's 20 + three 2-packet bursts = 106 packets.
        assert_eq!(bbr.decision().cwnd_bytes.unwrap(), 106 * MSS);
    }

    #[test]
    fn recovery_lasts_until_the_losses_of_its_flight_are_repaired() {
        // Steady state on 11.712 Mbit/s, 40 ms (cwnd 88 packets, above), then a packet sent at 2.96 s
        // is declared lost at 3.0 s: the window is cut to the flight plus one packet.
        let (mut flow, _) = trace(0, 3_000_000);
        let bbr = flow.controller_mut::<Bbr>().unwrap();
        let before_bytes = bbr.decision().cwnd_bytes.unwrap();
        let lost =
            |now_us, sent_us| Lost { bytes: MSS, inflight_bytes: 40 * MSS, ..crate::testing::loss(now_us, 0, sent_us) };
        bbr.on_loss(&lost(3_000_000, 2_960_000));
        assert_eq!(bbr.decision().cwnd_bytes.unwrap(), 41 * MSS);
        // Another packet of that flight is declared lost at 3.02 s (TCP retransmits it then), and
        // one sent after recovery began at 3.03 s (not this recovery's to repair).
        bbr.on_loss(&lost(3_020_000, 2_990_000));
        bbr.on_loss(&lost(3_030_000, 3_010_000));
        let ack = |now_us: u64, sent_us: u64| {
            let mut a = crate::testing::ack(now_us, 10_000_000 + now_us, sent_us, MSS);
            (a.delivered_bytes, a.delivered_bytes_at_send, a.inflight_bytes) = (50_000_000, 49_950_000, 40 * MSS);
            a
        };
        // A packet sent at 3.01 s, after the first loss but before the second's repair: recovery
        // goes on, the window stays cut.
        bbr.on_ack(&ack(3_050_000, 3_010_000));
        assert!(bbr.decision().cwnd_bytes.unwrap() < before_bytes);
        // A packet sent after 3.02 s: both losses would be repaired; the window comes back.
        bbr.on_ack(&ack(3_065_000, 3_025_000));
        assert!(bbr.recovery_start_us.is_none());
        assert!(bbr.decision().cwnd_bytes.unwrap() >= before_bytes);
    }
}
