//! The PCC family (Performance-oriented Congestion Control): senders that run experiments instead
//! of reacting to packet-level events. Each tries a rate for a monitor interval, scores what it
//! earned with a utility function, and moves toward the rate that scored best.
//!
//! Both papers describe one sender with two parts that vary (Dong et al., NSDI 2015, §2; Vivace,
//! NSDI 2018, §2): the utility function and the rate-control rules. So the family is one
//! controller, [`Pcc`], generic over a [`RateControl`] that holds both:
//! - [`monitor`]: the monitor intervals (NSDI 2015, §2.1 and §3; reused unchanged by Vivace, §2);
//! - this module: the sender around them. It launches MIs back to back (pipelined, NSDI 2015 §3)
//!   at the rate the rate control asks for, hands each completed MI to it, abandons the MIs of a
//!   state it has left, and asks the driver to pace at the MI's rate (within a safety window where
//!   the sender has one);
//! - [`trials`]: the randomized pairs of MIs at r(1 ± ε) both rate controls compare rates with;
//! - [`allegro`]: PCC Allegro (NSDI 2015): a loss-based utility, rate changes by fixed steps;
//! - [`vivace`]: PCC Vivace (NSDI 2018): a latency-aware utility, rate changes by online
//!   gradient ascent.
//!
//! ECN (neither paper has it): with ECN on, a CE mark counts as a loss in its packet's MI's loss
//! rate (RFC 3168 §5), every mark, read from `Acked::ce_marks`.

pub mod allegro;
pub mod monitor;
pub mod trials;
pub mod vivace;

use monitor::{Interval, Monitor, SplitMix64, INITIAL_RTT_US};

use crate::{Acked, CongestionControl, Decision, Lost, Sent};

/// Both senders' deviation 1: the starting rate sends this many packets per `INITIAL_RTT_US`
/// (RFC 6928's initial window), not the papers' 2·MSS/RTT: there is no RTT before the first ack.
const INITIAL_PACKETS_PER_RTT: f64 = 10.0;
/// The rate never goes below this, so that an MI keeps producing results (Allegro's deviation 5).
const MIN_RATE_PACKETS_PER_S: f64 = 20.0;
/// A ceiling that keeps the arithmetic finite (100 Gbit/s).
const MAX_RATE_BPS: f64 = 1e11;
/// The safety window, in minimum RTTs of flight at the MI's rate, for a sender that has one
/// (Vivace; Allegro's `safety_window` option): PCC is rate-based and its authors' senders have no
/// window, but a driver that never hears back must stop somewhere. Two RTTs bound the flow as
/// soon as a one-BDP buffer filled (Vivace then became ack-clocked at twice the link rate with
/// half its packets dropped); four do not.
const SAFETY_WINDOW_RTTS: f64 = 4.0;
const MIN_SAFETY_WINDOW_PACKETS: f64 = 4.0;

/// What sets one PCC sender apart: its utility function and its rate-control state machine, both
/// applied to completed MIs. Everything else is `Pcc`'s.
pub trait RateControl {
    /// The registry name of the sender.
    const NAME: &'static str;
    /// An MI's length is drawn uniformly from this range of RTTs (and lasts at least
    /// `monitor::MIN_PACKETS_PER_INTERVAL` packets) …
    const INTERVAL_RTTS: (f64, f64);
    /// … of the flow's minimum RTT if true, else of its smoothed RTT.
    const INTERVAL_ON_MIN_RTT: bool;

    /// The rate in bit/s (before the sender's floor and ceiling) and the role of the MI starting
    /// now, around the base rate r = `base_bps`; `first_of_state` for the first MI since the last
    /// `Step::Enter`.
    fn next_interval(&mut self, base_bps: f64, first_of_state: bool) -> (f64, Role);

    /// Scores `mi`, a completed MI of the current state, and says what the sender does next;
    /// `rng` is the sender's seeded generator, for random MI orders.
    fn on_result(&mut self, mi: &Interval<Role>, base_bps: f64, rng: &mut SplitMix64) -> Step;
}

/// What an MI was sent for; it comes back with the MI's results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Role {
    /// The starting phase (both papers): each MI at twice the last.
    #[default]
    Starting,
    /// Trial `i` of a decision's randomized pairs (`trials`; Vivace's probes): pair i / 2,
    /// position i % 2 in the pair.
    Trial(u8),
    /// Sent at r while a decision's trial results are awaited; its results are not used.
    Hold,
    /// Allegro's rate adjusting (§2.3): each MI one step further in the decided direction.
    Adjusting,
}

/// The rate of a starting MI, the phase both papers open with (Allegro §2.3, Vivace §4): the
/// state's first MI at r = `base_bps`, each later one at twice the last (r follows each MI).
fn starting_rate_bps(base_bps: f64, first_of_state: bool) -> f64 {
    if first_of_state {
        base_bps
    } else {
        2.0 * base_bps
    }
}

/// What the sender does after a result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Nothing: the next MI starts when the one under way ends.
    Continue,
    /// Start the next MI now, cutting the one under way short.
    StartNext,
    /// The rate control has entered a new state around r = `base_bps`: abandon the MIs under
    /// way (their results will be ignored) and start the new state's first MI now.
    Enter { base_bps: f64 },
}

/// A PCC sender: monitor intervals around the rate control `C`.
#[derive(Debug, Clone)]
pub struct Pcc<C: RateControl> {
    /// The utility and the rate-control state machine.
    control: C,
    monitor: Monitor<Role>,
    mss_bytes: u64,
    /// r: the rate the rate control works around, bit/s; while climbing, the rate of the last MI
    /// launched.
    base_bps: f64,
    /// The pacing rate of the MI under way, bit/s.
    rate_bps: f64,
    /// MIs with a smaller id belong to an abandoned state; their results are ignored.
    epoch_id: u64,
    /// When the MI under way ends; `None` before the first packet.
    interval_end_us: Option<u64>,
    /// Latest smoothed RTT (RFC 6298, from the driver); `None` before the first sample.
    srtt_us: Option<u64>,
    /// Smallest RTT sample of the flow; `None` before the first.
    min_rtt_us: Option<u64>,
    /// Whether the flight is capped at `SAFETY_WINDOW_RTTS` × rate × min RTT.
    safety_window: bool,
}

impl<C: RateControl> Pcc<C> {
    /// A sender of `mss_bytes` packets whose random choices are seeded by `seed`, with or without
    /// the safety window.
    fn with_control(control: C, mss_bytes: u64, seed: u64, safety_window: bool) -> Self {
        let initial_bps = INITIAL_PACKETS_PER_RTT * (mss_bytes * 8) as f64 * 1e6 / INITIAL_RTT_US as f64;
        Pcc {
            control,
            monitor: Monitor::new(mss_bytes, seed),
            mss_bytes,
            base_bps: initial_bps,
            rate_bps: initial_bps,
            epoch_id: 0,
            interval_end_us: None,
            srtt_us: None,
            min_rtt_us: None,
            safety_window,
        }
    }

    /// The sender with MIs of at least `packets` packets (`Monitor::with_min_packets`).
    fn with_min_interval_packets(mut self, packets: f64) -> Self {
        self.monitor = self.monitor.with_min_packets(packets);
        self
    }

    /// r, the rate the rate control works around, bit/s.
    pub fn base_rate_bps(&self) -> f64 {
        self.base_bps
    }

    fn clamp_rate(&self, rate_bps: f64) -> f64 {
        let min_bps = MIN_RATE_PACKETS_PER_S * (self.mss_bytes * 8) as f64;
        rate_bps.clamp(min_bps, MAX_RATE_BPS)
    }

    /// Starts the next MI at `now_us`, at the rate the rate control calls for.
    fn begin_interval(&mut self, now_us: u64) {
        let first_of_state = self.monitor.next_id() == self.epoch_id;
        let (rate_bps, role) = self.control.next_interval(self.base_bps, first_of_state);
        let rate_bps = self.clamp_rate(rate_bps);
        // The climbing MIs carry r with them; the others are measured around it.
        if matches!(role, Role::Starting | Role::Adjusting) {
            self.base_bps = rate_bps;
        }
        self.rate_bps = rate_bps;
        let rtt_us = if C::INTERVAL_ON_MIN_RTT { self.min_rtt_us } else { self.srtt_us };
        let length_us = self.monitor.draw_length_us(rate_bps, rtt_us, C::INTERVAL_RTTS);
        self.monitor.start(now_us, length_us, rate_bps, role);
        self.interval_end_us = Some(now_us + length_us);
    }

    /// Does what the rate control asked for at `now_us`.
    fn take(&mut self, now_us: u64, step: Step) {
        match step {
            Step::Continue => {}
            Step::StartNext => self.begin_interval(now_us),
            Step::Enter { base_bps } => {
                self.base_bps = self.clamp_rate(base_bps);
                self.epoch_id = self.monitor.next_id();
                self.begin_interval(now_us);
            }
        }
    }

    /// Starts the next MI if the one under way has ended.
    fn advance(&mut self, now_us: u64) {
        if self.interval_end_us.is_none_or(|end_us| now_us >= end_us) {
            self.begin_interval(now_us);
        }
    }

    fn process_results(&mut self, now_us: u64) {
        while let Some(mi) = self.monitor.pop_complete() {
            if mi.id >= self.epoch_id {
                let step = self.control.on_result(&mi, self.base_bps, &mut self.monitor.rng);
                self.take(now_us, step);
            }
        }
    }
}

impl<C: RateControl + 'static> CongestionControl for Pcc<C> {
    fn name(&self) -> &'static str {
        C::NAME
    }

    fn on_sent(&mut self, e: &Sent) {
        self.advance(e.now_us);
        self.monitor.on_sent(e);
    }

    fn on_ack(&mut self, e: &Acked) {
        self.srtt_us = Some(e.srtt_us);
        self.min_rtt_us = Some(e.min_rtt_us);
        self.monitor.on_ack(e);
        self.process_results(e.now_us);
        self.advance(e.now_us);
    }

    fn on_loss(&mut self, e: &Lost) {
        self.monitor.on_loss(e);
        self.process_results(e.now_us);
        self.advance(e.now_us);
    }

    /// Neither paper uses ECN. A mark stands for a loss (RFC 3168 §5) in the loss rate of its
    /// packet's monitor interval: every mark, taken from `Acked::ce_marks` in `on_ack` (the
    /// default, the loss of a packet whose acknowledgement follows, would resolve it twice and
    /// leave its interval never complete; the flow's once-per-RTT hold would undercount).
    fn on_congestion_mark(&mut self, _e: &Acked) {}

    fn on_timer(&mut self, now_us: u64) {
        self.advance(now_us);
    }

    /// Pace at the MI's rate, within the safety window if there is one, and wake at the end of
    /// the MI.
    fn decision(&self) -> Decision {
        let min_rtt_s = self.min_rtt_us.unwrap_or(INITIAL_RTT_US) as f64 / 1e6;
        let window_bytes = (SAFETY_WINDOW_RTTS * self.rate_bps / 8.0 * min_rtt_s)
            .max(MIN_SAFETY_WINDOW_PACKETS * self.mss_bytes as f64);
        Decision {
            cwnd_bytes: self.safety_window.then_some(window_bytes as u64),
            pacing_rate_bps: Some(self.rate_bps as u64),
            wake_at_us: self.interval_end_us,
        }
    }
}
