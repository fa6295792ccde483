//! PCC Vivace (Dong, Meng, Zarchy, Arslan, Gilad, Godfrey & Schapira, "PCC Vivace:
//! Online-Learning Congestion Control", NSDI 2018).
//!
//! The idea: PCC's framework (monitor intervals, `monitor.rs`; utilities instead of hard-wired
//! reactions) with two changes over Allegro (`allegro.rs`). The utility also punishes a rising
//! RTT, so a Vivace sender stops before it fills the buffer; and the rate follows the utility's
//! gradient (online gradient ascent), so it moves fast when far from the optimum and gently near
//! it, with the guarantees of online convex optimisation.
//!
//! Sections implemented:
//! - §3 the utility of an MI with sending rate x (Mbit/s), RTT gradient dRTT/dT and loss rate L:
//!   u = x^t − b·x·dRTT/dT − c·x·L, with t = 0.9, b = 900, c = 11.35. dRTT/dT is the slope of
//!   the least-squares line through the MI's (send time, RTT) samples (`monitor.rs`); as a
//!   filter of noise, a slope counts as 0 if it is smaller in magnitude than 0.01 (10 ms of
//!   RTT per second) or than two standard errors of the fit, so RTT jitter alone — a few
//!   late packets, which b = 900 would otherwise turn into a penalty hundreds of times the
//!   throughput term — does not read as congestion.
//! - §4 rate control by gradient ascent: around the current rate r the sender runs pairs of
//!   MIs at r(1 + ε) and r(1 − ε), ε = 0.05, each pair in random order, and estimates the
//!   gradient γ = (u(r(1 + ε)) − u(r(1 − ε))) / (2εr) (two pairs: deviation 3). The rate then changes by Δr = m(τ)·θ0·γ, where
//!   - m(τ), the confidence amplifier, grows with τ, the number of consecutive decisions in the
//!     same direction: m(τ) = τ (τ = 1 for the first decision in a direction), so a rate far
//!     from the optimum gets there in steps that grow, and one decision against the trend
//!     resets it;
//!   - the dynamic change boundary ω caps the change at |Δr| ≤ ω·r, with ω = ω0 + k·δ,
//!     ω0 = 0.05, δ = 0.1: each decision whose change was capped raises k by one; a change
//!     within the boundary sets k to the smallest value whose boundary still contains it; a
//!     change of direction resets k to 0 (with τ).
//! - §4's starting phase as in Allegro: double the rate every MI until the utility falls, then
//!   return to the previous rate and begin gradient ascent.
//! - MIs are pipelined as in Allegro §3; after the probes the sender holds r until their
//!   results are in, then moves and probes around the new rate at once.
//!
//! Constants: t = 0.9, b = 900, c = 11.35 (§3, the values used in the paper's evaluation; c is
//! chosen there so that random loss up to about 5% does not make the sender back off), ε = 0.05,
//! ω0 = 0.05, δ = 0.1 (§4). θ0 = 1 (Mbit/s)² per unit of utility: our choice of the conversion
//! from a utility gradient to a rate step (on an idle path at 10 Mbit/s, γ ≈ 0.7, so the first
//! step is ω0-capped and the steps then grow by δ per decision).
//!
//! Deviations and choices, with reasons:
//! 1. Starting rate, x as the MI's target rate, utility −∞ for an MI with no resolved packet,
//!    the 4 × rate × min-RTT safety window, the 20 packets/s floor: as in `allegro.rs`
//!    (deviations 1–5 there), for the same reasons.
//! 2. The noise filter of the RTT gradient is our reading of the paper's: the 0.01 tolerance
//!    and the two-standard-error test are our choices. Over the real emulator on a shared
//!    machine, single packets delayed by several ms of scheduling made the bare slope swing by
//!    ±0.02, enough to drive the rate at random.
//! 3. Two pairs of probes per decision, as in Allegro's randomized trials: γ is the mean of
//!    the two pairs' gradients, and if the pairs disagree on its sign the rate holds and the
//!    probes repeat. With one pair, 1% random loss over MIs of ~80 packets made γ's noise
//!    several times its signal (one loss more or less moves c·x·L by 1.4 at 10 Mbit/s) and the
//!    rate wandered down to ~75% of the link; with two, it stays above 80%.
//! 4. The safety window must not bind in normal operation: at 2 × rate × min RTT it bound
//!    whenever a one-BDP buffer was full, the sender went ack-clocked, the MIs' RTT slopes
//!    then favoured the higher probe, and over 1% random loss the rate settled at twice the
//!    link's with half its packets dropped (tests/pcc_random_loss.rs). At 4 × it does not.
//! 5. When the pairs' gradients are equal to 0 or not finite (probes with no resolved packet),
//!    the rate holds and the probes repeat; τ and k are unchanged.
//!
//! Driver: pacing rate and safety window; `wake_at_us` is the end of the current MI.

use crate::monitor::{Interval, Monitor, INITIAL_RTT_US};
use crate::spec::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_MSS_BYTES};

/// §3: the exponent t of the throughput reward.
const THROUGHPUT_EXPONENT: f64 = 0.9;
/// §3: b, the weight of the RTT gradient.
const LATENCY_COEFFICIENT: f64 = 900.0;
/// §3: c, the weight of the loss rate.
const LOSS_COEFFICIENT: f64 = 11.35;
/// An RTT gradient smaller than this in magnitude is noise (deviation 2).
const RTT_GRADIENT_TOLERANCE: f64 = 0.01;
/// … and so is one less than this many standard errors from 0 (deviation 2).
const RTT_GRADIENT_MIN_STDERRS: f64 = 2.0;

/// The MI's RTT gradient after the noise filter: 0 unless it is at least 0.01 in magnitude and
/// at least two standard errors away from 0.
fn filtered_rtt_gradient<R>(mi: &Interval<R>) -> f64 {
    let gradient = mi.rtt_gradient();
    let noise = RTT_GRADIENT_MIN_STDERRS * mi.rtt_gradient_stderr();
    if gradient.abs() < RTT_GRADIENT_TOLERANCE || gradient.abs() < noise {
        0.0
    } else {
        gradient
    }
}
/// §4: probes at r(1 ± ε).
pub const EPSILON: f64 = 0.05;
/// Pairs of probes per decision (deviation 3).
const PAIRS: usize = 2;
/// §4: the change boundary starts at ω0 and grows by δ per capped decision.
pub const OMEGA0: f64 = 0.05;
pub const OMEGA_STEP: f64 = 0.1;
/// Our choice: Mbit/s of rate change per unit of utility gradient (utility per Mbit/s).
pub const THETA0: f64 = 1.0;
/// As in `allegro.rs`: the starting rate sends this many packets per `INITIAL_RTT_US`.
const INITIAL_PACKETS_PER_RTT: f64 = 10.0;
const SAFETY_WINDOW_RTTS: f64 = 4.0;
const MIN_SAFETY_WINDOW_PACKETS: f64 = 4.0;
const MIN_RATE_PACKETS_PER_S: f64 = 20.0;
const MAX_RATE_BPS: f64 = 1e11;

/// §3's utility of an MI sent at `rate_mbps` whose RTT rose by `rtt_gradient` seconds per second
/// and which lost the fraction `loss_rate` of its packets.
pub fn utility(rate_mbps: f64, rtt_gradient: f64, loss_rate: f64) -> f64 {
    rate_mbps.powf(THROUGHPUT_EXPONENT)
        - LATENCY_COEFFICIENT * rate_mbps * rtt_gradient
        - LOSS_COEFFICIENT * rate_mbps * loss_rate
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VivaceConfig {
    pub mss_bytes: u64,
    /// Seeds the probe orders and MI lengths.
    pub seed: u64,
}

impl Default for VivaceConfig {
    fn default() -> Self {
        VivaceConfig { mss_bytes: DEFAULT_MSS_BYTES, seed: 1 }
    }
}

impl VivaceConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = VivaceConfig::default();
        Ok(VivaceConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            seed: p.u64_at_least("seed", 0, d.seed)?,
        })
    }
}

/// What an MI was sent for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Role {
    #[default]
    Starting,
    /// Probe `i`: pair i / 2, position i % 2 in the pair.
    Probe(u8),
    /// Sent at r while the probes' results are awaited; its results are not used.
    Hold,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum State {
    Starting {
        /// (rate in bit/s, utility) of the last MI whose results came in.
        last: Option<(f64, f64)>,
    },
    Probing {
        /// Per pair: whether its r(1 + ε) probe goes first.
        upper_first: [bool; PAIRS],
        /// Probes launched so far (0..=2·PAIRS).
        launched: u8,
        utilities: [Option<f64>; 2 * PAIRS],
    },
}

/// §4's step-size state: the confidence amplifier and the dynamic change boundary.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stepper {
    /// Direction of the last rate change: +1, −1, or 0 before the first.
    direction: f64,
    /// τ: consecutive decisions in `direction`.
    tau: u32,
    /// k: the boundary is ω0 + k·δ.
    k: u32,
}

impl Stepper {
    /// The boundary ω the next change is held to.
    pub fn omega(&self) -> f64 {
        OMEGA0 + f64::from(self.k) * OMEGA_STEP
    }

    /// The rate change in Mbit/s for the utility gradient `gamma` (utility per Mbit/s) around
    /// `rate_mbps`: m(τ)·θ0·γ, capped at ω·r.
    pub fn change_mbps(&mut self, gamma: f64, rate_mbps: f64) -> f64 {
        if gamma == 0.0 || !gamma.is_finite() {
            return 0.0;
        }
        let direction = gamma.signum();
        if direction == self.direction {
            self.tau += 1;
        } else {
            self.direction = direction;
            self.tau = 1;
            self.k = 0;
        }
        let change = f64::from(self.tau) * THETA0 * gamma;
        let bound = self.omega() * rate_mbps;
        if change.abs() > bound {
            self.k += 1;
            direction * bound
        } else {
            self.k = ((change.abs() / rate_mbps - OMEGA0) / OMEGA_STEP).ceil().max(0.0) as u32;
            change
        }
    }
}

#[derive(Debug, Clone)]
pub struct Vivace {
    config: VivaceConfig,
    monitor: Monitor<Role>,
    state: State,
    stepper: Stepper,
    /// r: the rate probes are made around; in Starting, the rate of the last MI launched.
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
}

impl Vivace {
    pub fn new(config: VivaceConfig) -> Self {
        let initial_bps = INITIAL_PACKETS_PER_RTT * (config.mss_bytes * 8) as f64 * 1e6 / INITIAL_RTT_US as f64;
        Vivace {
            config,
            monitor: Monitor::new(config.mss_bytes, config.seed),
            state: State::Starting { last: None },
            stepper: Stepper::default(),
            base_bps: initial_bps,
            rate_bps: initial_bps,
            epoch_id: 0,
            interval_end_us: None,
            srtt_us: None,
            min_rtt_us: None,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// The rate probes are made around, bit/s.
    pub fn base_rate_bps(&self) -> f64 {
        self.base_bps
    }

    fn clamp_rate(&self, rate_bps: f64) -> f64 {
        let min_bps = MIN_RATE_PACKETS_PER_S * (self.config.mss_bytes * 8) as f64;
        rate_bps.clamp(min_bps, MAX_RATE_BPS)
    }

    fn begin_interval(&mut self, now_us: u64) {
        let first_of_state = self.monitor.next_id() == self.epoch_id;
        let (rate_bps, role) = match &mut self.state {
            State::Starting { .. } => {
                let rate = if first_of_state { self.base_bps } else { 2.0 * self.base_bps };
                (rate, Role::Starting)
            }
            State::Probing { upper_first, launched, .. } if usize::from(*launched) < 2 * PAIRS => {
                let i = *launched;
                *launched += 1;
                let upper = (i % 2 == 0) == upper_first[usize::from(i / 2)];
                let factor = if upper { 1.0 + EPSILON } else { 1.0 - EPSILON };
                (self.base_bps * factor, Role::Probe(i))
            }
            State::Probing { .. } => (self.base_bps, Role::Hold),
        };
        let rate_bps = self.clamp_rate(rate_bps);
        if role == Role::Starting {
            self.base_bps = rate_bps;
        }
        self.rate_bps = rate_bps;
        let length_us = self.monitor.draw_length_us(rate_bps, self.srtt_us);
        self.monitor.start(now_us, length_us, rate_bps, role);
        self.interval_end_us = Some(now_us + length_us);
    }

    /// Probes around `base_bps`, starting now and abandoning the MI under way.
    fn enter_probing(&mut self, now_us: u64, base_bps: f64) {
        let upper_first = [self.monitor.rng.coin(), self.monitor.rng.coin()];
        self.state = State::Probing { upper_first, launched: 0, utilities: [None; 2 * PAIRS] };
        self.base_bps = self.clamp_rate(base_bps);
        self.epoch_id = self.monitor.next_id();
        self.begin_interval(now_us);
    }

    fn advance(&mut self, now_us: u64) {
        if self.interval_end_us.map_or(true, |end_us| now_us >= end_us) {
            self.begin_interval(now_us);
        }
    }

    fn process_results(&mut self, now_us: u64) {
        while let Some(mi) = self.monitor.pop_complete() {
            if mi.id >= self.epoch_id {
                self.on_result(now_us, &mi);
            }
        }
    }

    fn on_result(&mut self, now_us: u64, mi: &Interval<Role>) {
        let u = if mi.resolved_packets() == 0 {
            f64::NEG_INFINITY
        } else {
            utility(mi.rate_mbps(), filtered_rtt_gradient(mi), mi.loss_rate())
        };
        match (&mut self.state, mi.role) {
            (State::Starting { last }, Role::Starting) => match *last {
                Some((previous_bps, previous_u)) if u < previous_u => self.enter_probing(now_us, previous_bps),
                _ => *last = Some((mi.rate_bps, u)),
            },
            (State::Probing { utilities, .. }, Role::Probe(i)) => {
                utilities[usize::from(i)] = Some(u);
                self.step(now_us);
            }
            _ => {}
        }
    }

    /// Once every probe is in: move along the utility gradient if the pairs agree on its sign,
    /// and probe around the new rate.
    fn step(&mut self, now_us: u64) {
        let State::Probing { upper_first, utilities, .. } = self.state else { return };
        let [Some(u0), Some(u1), Some(u2), Some(u3)] = utilities else { return };
        let rate_mbps = self.base_bps / 1e6;
        let gradient = |p: usize, first: f64, second: f64| {
            let (upper, lower) = if upper_first[p] { (first, second) } else { (second, first) };
            (upper - lower) / (2.0 * EPSILON * rate_mbps)
        };
        let gammas = [gradient(0, u0, u1), gradient(1, u2, u3)];
        let gamma = if gammas[0].signum() == gammas[1].signum() { (gammas[0] + gammas[1]) / 2.0 } else { 0.0 };
        let change_mbps = self.stepper.change_mbps(gamma, rate_mbps);
        self.enter_probing(now_us, self.base_bps + change_mbps * 1e6);
    }
}

impl CongestionControl for Vivace {
    fn name(&self) -> &'static str {
        "vivace"
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

    fn on_timer(&mut self, now_us: u64) {
        self.advance(now_us);
    }

    fn decision(&self) -> Decision {
        let min_rtt_s = self.min_rtt_us.unwrap_or(INITIAL_RTT_US) as f64 / 1e6;
        let mss = self.config.mss_bytes as f64;
        let window_bytes = (SAFETY_WINDOW_RTTS * self.rate_bps / 8.0 * min_rtt_s).max(MIN_SAFETY_WINDOW_PACKETS * mss);
        Decision {
            cwnd_bytes: Some(window_bytes as u64),
            pacing_rate_bps: Some(self.rate_bps as u64),
            wake_at_us: self.interval_end_us,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::tests::run_scripted;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn utility_rewards_rate_and_punishes_a_rising_rtt_and_loss() {
        // 10^0.9 = 7.943282.
        assert!((utility(10.0, 0.0, 0.0) - 7.943_282).abs() < 1e-6);
        // RTT rising 20 ms per second and 1% loss: 7.943282 − 900·10·0.02 − 11.35·10·0.01.
        assert!((utility(10.0, 0.02, 0.01) - (7.943_282 - 180.0 - 1.135)).abs() < 1e-6);
        // A draining queue is rewarded: 7.943282 + 900·10·0.02.
        assert!((utility(10.0, -0.02, 0.0) - 187.943_282).abs() < 1e-6);
    }

    #[test]
    fn rtt_gradients_below_the_tolerance_or_within_their_noise_count_as_zero() {
        use crate::reno::tests::ack;
        let mi_with = |rtt_us: &dyn Fn(u64) -> u64| {
            let mut m: Monitor<u8> = Monitor::new(1500, 1);
            m.start(0, 100_000, 12e6, 0);
            for i in 0..20u64 {
                let sent_us = i * 5000;
                m.on_sent(&Sent { now_us: sent_us, seq: i, bytes: 1500, inflight_bytes: 0 });
                m.on_ack(&ack(sent_us + rtt_us(i), i, sent_us, 1500));
            }
            *m.current().unwrap()
        };
        // A queue growing at 5% of the link rate: a clean slope of 0.05 passes.
        let growing = mi_with(&|i| 40_000 + i * 250);
        assert!((filtered_rtt_gradient(&growing) - 0.05).abs() < 1e-9);
        // 5 ms per second is below the 0.01 tolerance.
        let slow = mi_with(&|i| 40_000 + i * 25);
        assert_eq!(filtered_rtt_gradient(&slow), 0.0);
        // Flat RTT but the last packet 20 ms late (a scheduling hiccup): the fit's slope is
        // 0.02·(t₁₉ − t̄)/S_tt = 0.02·0.0475/0.016625 = 0.0571, far past the tolerance, and
        // would cost 900·12·0.057 = 617 of utility. But the spike is the whole scatter: the
        // slope is only √3 = 1.73 standard errors from 0 (for any spike size), so it is noise.
        let spike = mi_with(&|i| if i == 19 { 60_000 } else { 40_000 });
        assert!((spike.rtt_gradient() - 0.02 * 0.0475 / 0.016625).abs() < 1e-9);
        assert!((spike.rtt_gradient() / spike.rtt_gradient_stderr() - 3f64.sqrt()).abs() < 1e-6);
        assert_eq!(filtered_rtt_gradient(&spike), 0.0);
    }

    #[test]
    fn step_is_amplified_theta_gamma_within_the_boundary_and_capped_by_omega() {
        let mut s = Stepper::default();
        // τ = 1: 1·θ0·0.4 = 0.4 Mbit/s, within ω0·r = 0.05·10 = 0.5.
        assert!(close(s.change_mbps(0.4, 10.0), 0.4));
        assert!(close(s.omega(), 0.05));
        // τ = 2: 0.8 > 0.5: capped at 0.5, and the boundary grows to 0.05 + 0.1 = 0.15.
        assert!(close(s.change_mbps(0.4, 10.0), 0.5));
        assert!(close(s.omega(), 0.15));
        // τ = 3: 1.2 ≤ 0.15·10: not capped; k stays at the smallest boundary holding 12%.
        assert!(close(s.change_mbps(0.4, 10.0), 1.2));
        assert!(close(s.omega(), 0.15));
        // τ = 4: 1.6 > 1.5: capped at 1.5, boundary 0.25.
        assert!(close(s.change_mbps(0.4, 10.0), 1.5));
        assert!(close(s.omega(), 0.25));
        // A change of direction resets τ and the boundary: −0.3, within 0.5.
        assert!(close(s.change_mbps(-0.3, 10.0), -0.3));
        assert!(close(s.omega(), 0.05));
        // … and a large gradient in the same direction (τ = 2, k = 0) is held to ω0·r.
        assert!(close(s.change_mbps(-50.0, 10.0), -0.5));
    }

    fn probing_at(rate_bps: f64) -> Vivace {
        let mut v = Vivace::new(VivaceConfig::default());
        v.srtt_us = Some(40_000);
        v.enter_probing(0, rate_bps);
        v
    }

    /// Runs until the first step has been taken and returns the new base rate, Mbit/s.
    fn first_step_mbps(v: &mut Vivace, capacity_mbps: f64) -> f64 {
        let start_id = v.epoch_id;
        run_scripted(
            v,
            40_000,
            10_000_000,
            |rate_mbps| (1.0 - capacity_mbps / rate_mbps).max(0.0),
            |_, v| v.epoch_id == start_id,
        );
        v.base_rate_bps() / 1e6
    }

    #[test]
    fn on_an_idle_path_the_step_is_theta_times_the_measured_gradient() {
        // At 40 Mbit/s on an idle 1 Gbit/s path (flat RTT, no loss) both pairs measure
        // γ = (42^0.9 − 38^0.9)/(2·0.05·40) = 0.62238 per Mbit/s; 0.622 < ω0·40 = 2, so the
        // rate moves by exactly θ0·γ.
        let mut v = probing_at(40e6);
        let gamma = (42f64.powf(0.9) - 38f64.powf(0.9)) / 4.0;
        assert!((first_step_mbps(&mut v, 1000.0) - (40.0 + gamma)).abs() < 1e-6);
        assert!((gamma - 0.622_38).abs() < 1e-5);
    }

    #[test]
    fn at_a_low_rate_the_step_is_capped_by_the_change_boundary() {
        // At 5 Mbit/s, γ ≈ 0.73 per Mbit/s exceeds ω0·5 = 0.25: the rate moves by 5% exactly.
        let mut v = probing_at(5e6);
        assert!(close(first_step_mbps(&mut v, 1000.0), 5.25));
        assert!(close(v.stepper.omega(), 0.15));
    }

    #[test]
    fn above_the_bottleneck_rate_the_loss_term_turns_the_rate_down() {
        // On a 4 Mbit/s bottleneck at 5 Mbit/s, 20% is lost: the loss term's gradient −11.35·…
        // swamps 0.9·x^−0.1, and the rate falls by the ω0 = 5% boundary.
        let mut v = probing_at(5e6);
        assert!(close(first_step_mbps(&mut v, 4.0), 4.75));
    }

    #[test]
    fn starting_doubles_the_rate_until_the_utility_falls_then_probes_around_the_last_good_rate() {
        let mut v = Vivace::new(VivaceConfig::default());
        let mut starting = Vec::new();
        let mut last_id = None;
        run_scripted(
            &mut v,
            40_000,
            10_000_000,
            |rate_mbps| (1.0 - 10.0 / rate_mbps).max(0.0),
            |_, v| {
                let id = v.monitor.current().map(|mi| mi.id);
                if id != last_id && matches!(v.state, State::Starting { .. }) {
                    starting.push(v.rate_bps / 1e6);
                }
                last_id = id;
                matches!(v.state, State::Starting { .. })
            },
        );
        assert!(starting.len() >= 5 && starting.len() <= 6, "{starting:?}");
        for (i, rate) in starting.iter().enumerate() {
            assert!(close(*rate, 1.2 * f64::from(1 << i)), "{starting:?}");
        }
        assert!(matches!(v.state, State::Probing { .. }));
        assert!(close(v.base_rate_bps(), 9.6e6));
    }
}
