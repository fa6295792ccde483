//! PCC Vivace (Dong, Meng, Zarchy, Arslan, Gilad, Godfrey & Schapira, "PCC Vivace:
//! Online-Learning Congestion Control", NSDI 2018).
//!
//! The idea: PCC's framework (monitor intervals, `monitor.rs`; utilities instead of hard-wired
//! reactions) with two changes over Allegro (`allegro.rs`). The utility also punishes a rising
//! RTT, so a Vivace sender stops before it fills the buffer; and the rate follows the utility's
//! gradient (online gradient ascent, §2 and §4.1), so it moves fast when far from the optimum and
//! gently near it, with the guarantees of online convex optimisation.
//!
//! Sections implemented:
//! - §3 the utility of an MI with sending rate x (Mbit/s), RTT gradient dRTT/dT and loss rate L:
//!   u = x^t − b·x·dRTT/dT − c·x·L, with t = 0.9, b = 900, c = 11.35 (the values of the paper's
//!   evaluation; c makes the sender tolerate random loss up to about 5%, §3.2).
//! - §4 starting phase: double the rate on each MI's result until the utility falls, then
//!   return to the previous rate and begin online learning (the MIs sent while a result is
//!   awaited hold the rate, as the authors' sender).
//! - §4.2 rate control by gradient ascent, with the authors' rules (github.com/PCCproject/
//!   PCC-Uspace, src/pcc/pcc_vivace_sender.cpp and pcc_sender.cpp, master at 30c2cfe, May
//!   2021): a pair of MIs at r(1 ± ε), ε = 0.05, in random order, gives
//!   γ = (u(r(1 + ε)) − u(r(1 − ε)))/(2εr); three pairs vote on the direction (below); the rate
//!   then moves from the winning probe's rate by θ0·|γ|, and keeps moving
//!   one MI per step, each step's γ measured between its MI and the last step's, by
//!   m(τ)·θ0·|γ| with m(τ) = ⌊(τ + 1)/2⌋^1.2 (τ the steps since the decision), as long as that
//!   γ has the direction's sign; when it does not, the rate steps back by θ0·|γ| and probes
//!   again. Every change is capped at ω·r, ω = ω0 + k·δ, ω0 = δ = 0.05, k up by one when the
//!   cap binds and down by one when it does not, reset at a decision; and is at least 0.5 Mbit/s.
//! - §4.3 unreliable statistics: the RTT gradient is the least-squares slope through the MI's
//!   (send time, RTT) samples (`monitor.rs`); a slope below 0.01 in magnitude counts as 0, and so
//!   does one no larger than the samples' scatter around it over their mean (the authors'
//!   `DetermineToleranceGeneral`, deviation 2); a negative one earns no bonus (clamped at 0 in
//!   the utility, as the authors' `CalculateUtilityProportional`).
//! - The authors' probing (pcc_sender.cpp, `CanMakeDecision`, three pairs for Vivace's utility):
//!   each of three pairs votes for the rate whose utility was higher; two votes up decide an
//!   increase, three down a decrease, anything else probes again; γ is the agreeing pairs' |Δu|
//!   summed over three pairs, over 2εr, and the step starts from the last agreeing pair's winner.
//! - `vote=false`, §4.3's double check instead, the probing the paper describes: one pair, and
//!   when it is counter-intuitive (less loss, or a flatter RTT, at the higher rate) a second,
//!   the direction taken from the mean of the two pairs' gradients (what counts as less:
//!   deviation 4).
//! - MIs last one minimum RTT (the authors' `monitor_duration_ = min_rtt_`) and at least 4
//!   packets (the RTT samples the authors' MI waits for, kMinReliableRtt; `mi_packets`, deviation
//!   3), pipelined as in Allegro §3.
//!
//! Measured against the authors' sender over our emulator (docs/cc.md, "The newcomer"): with
//! their filter, probing and MIs, a flow joining another reaches its share as theirs does
//! (Jain's index 0.97–0.99 against 0.92–1.00), and two flows keep more of the buffer filled,
//! though less than theirs; with `vote=false,mi_packets=40` a newcomer's share random-walked
//! (docs/cc.md, "History", says when those were the defaults).
//!
//! Constants: t = 0.9, b = 900, c = 11.35 (§3); ε = 0.05, θ0 = 1 Mbit/s per unit of utility
//! gradient, ω0 = δ = 0.05, m's exponent 1.2, 0.5 Mbit/s least change (the authors'
//! kProbingStepSize, kUtilityGradientToRateChangeFactor, kInitialMaxStepSize,
//! kIncrementalStepSize, kRateChangeAmplifyExponent, kMinRateChange); RTT-gradient tolerance
//! 0.01 (§4.3). `theta0`, `vote` and `mi_packets` are configurable. Pantheon's
//! `pcc-experimental` built PCC-Uspace's 2018 master (src/pcc/pcc_sender.cpp), whose sender had
//! the same states with a piecewise amplifier, δ = 0.06, MIs of 1.5 smoothed RTTs and a 2 Mbit/s
//! floor; we follow the authors' current Vivace.
//!
//! Deviations and choices (docs/cc.md, "PCC Vivace", gives the older measurements):
//! 1. Starting rate, x as the MI's target rate, utility −∞ for an MI with no resolved packet,
//!    the 20 packets/s floor: as in `allegro.rs` (deviations 1–3 and 5 there), for the same
//!    reasons.
//! 2. The scatter is taken around the fitted line, as the authors' names for it say (a
//!    regression error); their code's residuals come out around the mean (the line it subtracts
//!    has the normalised slope), which agrees for one-RTT MIs but would count a steady trend as
//!    scatter over MIs of many RTTs (a slow flow's with `mi_packets=40`). Their test replaced
//!    ours (a slope within two standard errors of 0), under which a newcomer's share
//!    random-walked (docs/cc.md).
//! 3. `mi_packets=40` gives the least MI `monitor.rs` gives Allegro, for measuring loss rates
//!    at low rates; the authors' Vivace has no such floor.
//! 4. The double check counts a lower loss rate at the higher rate as abnormal only beyond two
//!    standard errors of the difference (pooled binomial). Under `vote=true`, a pair whose
//!    gradient is 0 or not finite votes neither way.
//! 5. The 4 × rate × min-RTT safety window must not bind in normal operation: at 2 × the
//!    sender went ack-clocked on a full buffer and, over 1% loss, settled at twice the link's
//!    rate (tests/pcc_random_loss.rs).
//! 6. A gradient of 0 or not finite holds the rate and probes again.
//! 7. §4.3's MI timeout is left out: the driver declares every unacknowledged packet lost, so
//!    every MI completes, and a dead path shows as MIs with 100% loss.
//! 8. Two probes whose loss rates differ by no more than chance (as in 4) are both scored at
//!    their pooled loss rate.
//! 9. The starting phase ends when the utility falls by more than chance loss explains (two
//!    standard errors of c·x·L).
//!
//! Driver: pacing rate and safety window; `wake_at_us` is the end of the current MI.

use super::monitor::{self, Interval, SplitMix64};
use super::trials::{Trials, MAX_PAIRS};
use super::{Pcc, RateControl, Role, Step};
use crate::params::{Params, SpecError};
use crate::DEFAULT_MSS_BYTES;

/// §3: the exponent t of the throughput reward.
const THROUGHPUT_EXPONENT: f64 = 0.9;
/// §3: b, the weight of the RTT gradient.
const LATENCY_COEFFICIENT: f64 = 900.0;
/// §3: c, the weight of the loss rate.
const LOSS_COEFFICIENT: f64 = 11.35;
/// §4.3: an RTT gradient smaller than this in magnitude is noise.
const RTT_GRADIENT_TOLERANCE: f64 = 0.01;

/// The MI's RTT gradient after the noise filters: 0 unless it is at least 0.01 in magnitude
/// (§4.3) and larger than the scatter of the MI's RTT samples around it (the authors'
/// `DetermineToleranceGeneral`: the RTT must move by more over one RTT than its samples scatter).
fn filtered_rtt_gradient<R>(mi: &Interval<R>) -> f64 {
    let gradient = mi.rtt_gradient();
    if gradient.abs() < RTT_GRADIENT_TOLERANCE || gradient.abs() <= mi.rtt_scatter() {
        0.0
    } else {
        gradient
    }
}
/// Two MIs' loss rates differ by more than chance beyond this many standard errors of their
/// difference (deviations 4, 8 and 9).
const LOSS_DIFFERENCE_MIN_STDERRS: f64 = 2.0;
/// §4.2: probes at r(1 ± ε).
pub const EPSILON: f64 = 0.05;
/// The fewest packets an MI lasts: the RTT samples the authors' MI needs before it may end
/// (kMinReliableRtt, pcc_monitor_interval_queue.cpp).
const AUTHORS_MI_PACKETS: u64 = 4;
/// Pairs of probes a decision runs with `vote=true` (the authors' kNumIntervalGroupsInProbingPrimary).
const VOTING_PAIRS: u8 = 3;
/// Pairs whose order a double-checked decision draws: one runs, a second if it was abnormal.
const CHECKED_PAIRS: u8 = 2;
/// §4.2: the change boundary starts at ω0 and grows by δ per capped step (the authors' code:
/// kInitialMaxStepSize, kIncrementalStepSize).
pub const OMEGA0: f64 = 0.05;
pub const OMEGA_STEP: f64 = 0.05;
/// θ0, Mbit/s of rate change per unit of utility gradient (utility per Mbit/s), before the
/// confidence amplifier (the authors' kUtilityGradientToRateChangeFactor).
pub const DEFAULT_THETA0: f64 = 1.0;
/// The smallest rate change, Mbit/s (the authors' kMinRateChange, 500 kbit/s).
const MIN_CHANGE_MBPS: f64 = 0.5;
/// The confidence amplifier's exponent: m(τ) = ⌊(τ + 1)/2⌋^1.2 (the authors'
/// kRateChangeAmplifyExponent).
const AMPLIFY_EXPONENT: f64 = 1.2;

/// §3's utility of an MI sent at `rate_mbps` whose RTT rose by `rtt_gradient` seconds per second
/// and which lost the fraction `loss_rate` of its packets.
/// A falling RTT earns nothing: the gradient counts from 0, as in the authors' code.
pub fn utility(rate_mbps: f64, rtt_gradient: f64, loss_rate: f64) -> f64 {
    rate_mbps.powf(THROUGHPUT_EXPONENT)
        - LATENCY_COEFFICIENT * rate_mbps * rtt_gradient.max(0.0)
        - LOSS_COEFFICIENT * rate_mbps * loss_rate
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VivaceConfig {
    pub mss_bytes: u64,
    /// Seeds the probe orders and MI lengths.
    pub seed: u64,
    /// θ0, Mbit/s of rate change per unit of utility gradient.
    pub theta0: f64,
    /// Decide by the authors' three-pair vote instead of one pair and §4.3's double check.
    pub vote: bool,
    /// The fewest packets an MI lasts (deviation 3).
    pub mi_packets: u64,
}

impl Default for VivaceConfig {
    fn default() -> Self {
        VivaceConfig {
            mss_bytes: DEFAULT_MSS_BYTES,
            seed: 1,
            theta0: DEFAULT_THETA0,
            vote: true,
            mi_packets: AUTHORS_MI_PACKETS,
        }
    }
}

impl VivaceConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = VivaceConfig::default();
        Ok(VivaceConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            seed: p.u64_at_least("seed", 0, d.seed)?,
            theta0: p.positive_f64("theta0", d.theta0)?,
            vote: p.bool("vote", d.vote)?,
            mi_packets: p.u64_at_least("mi_packets", 1, d.mi_packets)?,
        })
    }
}

/// What an MI measured: its rate and the two signals of its utility, which §4.3's double check
/// also compares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeResult {
    /// The MI's target rate, x in the utility.
    pub rate_mbps: f64,
    pub loss_rate: f64,
    /// After the noise filter.
    pub rtt_gradient: f64,
    /// Packets acknowledged or lost, over which `loss_rate` was measured.
    pub resolved_packets: u64,
}

impl ProbeResult {
    /// §3's utility at the loss rate `loss_rate`; −∞ for an MI with no resolved packet
    /// (deviation 1).
    fn utility_at(&self, loss_rate: f64) -> f64 {
        if self.resolved_packets == 0 {
            f64::NEG_INFINITY
        } else {
            utility(self.rate_mbps, self.rtt_gradient, loss_rate)
        }
    }

    /// §3's utility of the MI as measured.
    pub fn utility(&self) -> f64 {
        self.utility_at(self.loss_rate)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum State {
    Starting {
        /// The rate in bit/s and the measurements of the last MI whose results came in.
        last: Option<(f64, ProbeResult)>,
    },
    Probing {
        /// The probes: pairs of trials at r(1 ± ε).
        trials: Trials,
        results: [Option<ProbeResult>; 2 * MAX_PAIRS],
    },
    /// Moving in one direction, one MI per step, each step's gradient measured against the
    /// last step's MI, until the utility no longer agrees.
    Moving {
        /// +1 or −1.
        direction: f64,
        /// The MI of the last step (or the probe that won the decision).
        last: ProbeResult,
    },
}

/// §4.3's double check: a pair is abnormal when the higher rate saw less loss or a flatter RTT
/// than the lower one — sending faster hardly ever causes either; noise or a change of
/// conditions does. Lower loss counts only beyond chance (deviation 4): by more than
/// `LOSS_DIFFERENCE_MIN_STDERRS` standard errors of the difference of two binomial loss rates
/// (pooled); the RTT gradients have been through their own noise filter.
pub fn abnormal(upper: &ProbeResult, lower: &ProbeResult) -> bool {
    lower.loss_rate - upper.loss_rate > LOSS_DIFFERENCE_MIN_STDERRS * loss_difference_stderr(upper, lower)
        || upper.rtt_gradient < lower.rtt_gradient
}

/// The standard error of the difference of two probes' loss rates, were both drawn from one
/// binomial rate (pooled).
fn loss_difference_stderr(upper: &ProbeResult, lower: &ProbeResult) -> f64 {
    monitor::loss_difference_stderr(
        (upper.loss_rate, upper.resolved_packets),
        (lower.loss_rate, lower.resolved_packets),
    )
}

/// §4's starting phase ends when the utility falls: by more than chance loss explains (deviation
/// 9) — two standard errors of the loss term c·x·L at the newer MI's rate.
fn utility_fell(previous: &ProbeResult, latest: &ProbeResult) -> bool {
    let noise = LOSS_COEFFICIENT * latest.rate_mbps * loss_difference_stderr(latest, previous);
    latest.utility() < previous.utility() - LOSS_DIFFERENCE_MIN_STDERRS * noise
}

/// §4.2: the utility gradient γ = (u(r(1 + ε)) − u(r(1 − ε))) / (2εr), per Mbit/s. When the
/// two probes' loss rates differ by no more than chance, both are scored at their pooled loss rate
/// (deviation 8).
fn gradient(upper: &ProbeResult, lower: &ProbeResult, rate_mbps: f64) -> f64 {
    let chance =
        (upper.loss_rate - lower.loss_rate).abs() <= LOSS_DIFFERENCE_MIN_STDERRS * loss_difference_stderr(upper, lower);
    let (upper_u, lower_u) = if chance {
        let pooled = monitor::pooled_loss_rate(
            (upper.loss_rate, upper.resolved_packets),
            (lower.loss_rate, lower.resolved_packets),
        );
        (upper.utility_at(pooled), lower.utility_at(pooled))
    } else {
        (upper.utility(), lower.utility())
    };
    (upper_u - lower_u) / (2.0 * EPSILON * rate_mbps)
}

/// A pair of probes and its utility gradient.
#[derive(Debug, Clone, Copy)]
struct Pair {
    upper: ProbeResult,
    lower: ProbeResult,
    gamma: f64,
}

/// The decision of double-checked pairs (one, or two after an abnormal first): the direction of
/// their mean gradient, its magnitude and the first pair's winning probe; None for a gradient of
/// 0 or not finite (deviation 6).
fn checked<'p>(pairs: impl Iterator<Item = &'p Pair> + Clone) -> Option<(f64, f64, ProbeResult)> {
    let first = *pairs.clone().next()?;
    let gamma = pairs.clone().map(|p| p.gamma).sum::<f64>() / pairs.count() as f64;
    if gamma == 0.0 || !gamma.is_finite() {
        return None;
    }
    let direction = gamma.signum();
    Some((direction, gamma.abs(), if direction > 0.0 { first.upper } else { first.lower }))
}

/// The decision of the authors' vote: up on a majority, down only when all agree, else None; the
/// agreeing pairs' |γ| summed over all pairs, and the last agreeing pair's winning probe.
fn voted<'p>(pairs: impl Iterator<Item = &'p Pair> + Clone) -> Option<(f64, f64, ProbeResult)> {
    let all = pairs.clone().count();
    let votes_for = |sign: f64| pairs.clone().filter(move |p| p.gamma.is_finite() && p.gamma * sign > 0.0);
    let direction = match (votes_for(1.0).count(), votes_for(-1.0).count()) {
        (up, _) if 2 * up > all => 1.0,
        (_, down) if down == all => -1.0,
        _ => return None,
    };
    let gamma = votes_for(direction).map(|p| p.gamma.abs()).sum::<f64>() / all as f64;
    let last = votes_for(direction).last()?;
    Some((direction, gamma, if direction > 0.0 { last.upper } else { last.lower }))
}

/// §4.2's step-size state: the confidence amplifier and the dynamic change boundary, with the
/// authors' rules for both.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stepper {
    theta0: f64,
    /// τ: steps taken in the current direction since the decision (1 for the decision's own).
    tau: u32,
    /// k: the boundary is ω0 + k·δ.
    k: u32,
}

impl Stepper {
    pub fn new(theta0: f64) -> Self {
        Stepper { theta0, tau: 0, k: 0 }
    }

    /// The boundary ω the next change is held to.
    pub fn omega(&self) -> f64 {
        OMEGA0 + f64::from(self.k) * OMEGA_STEP
    }

    /// m(τ) = ⌊(τ + 1)/2⌋^1.2: 1, 1, 2.30, 2.30, 3.74, …
    fn amplifier(&self) -> f64 {
        f64::from(self.tau.div_ceil(2).max(1)).powf(AMPLIFY_EXPONENT)
    }

    /// The size of the decision's change, Mbit/s, for a gradient of magnitude `gamma` around
    /// `rate_mbps`: θ0·γ capped at ω0·r, and the next steps start from here.
    pub fn decision_mbps(&mut self, gamma: f64, rate_mbps: f64) -> f64 {
        self.tau = 1;
        self.k = 0;
        self.capped(self.theta0 * gamma, rate_mbps)
    }

    /// The size of the next step in the same direction, Mbit/s: m(τ)·θ0·γ capped at ω·r.
    pub fn step_mbps(&mut self, gamma: f64, rate_mbps: f64) -> f64 {
        self.tau += 1;
        self.capped(self.amplifier() * self.theta0 * gamma, rate_mbps)
    }

    /// The size of the step back when the utility stops agreeing, Mbit/s: θ0·γ capped at ω·r.
    pub fn back_mbps(&mut self, gamma: f64, rate_mbps: f64) -> f64 {
        self.tau = 1;
        self.capped(self.theta0 * gamma, rate_mbps)
    }

    /// `change_mbps` (≥ 0) held to ω·r: past it the boundary widens by δ, within it narrows by δ;
    /// and never less than `MIN_CHANGE_MBPS`.
    fn capped(&mut self, change_mbps: f64, rate_mbps: f64) -> f64 {
        let bound = self.omega() * rate_mbps;
        let change_mbps = if change_mbps > bound {
            self.k += 1;
            bound
        } else {
            self.k = self.k.saturating_sub(1);
            change_mbps
        };
        change_mbps.max(MIN_CHANGE_MBPS)
    }
}

/// §4's rate control around Vivace's utility; `Pcc` runs its monitor intervals.
#[derive(Debug, Clone)]
pub struct VivaceControl {
    /// Starting, or probing around r.
    state: State,
    /// The step size across decisions (τ and k).
    stepper: Stepper,
    /// Decide by the three pairs' vote (`VivaceConfig::vote`).
    vote: bool,
}

/// PCC Vivace: the PCC sender with Vivace's utility and rate control.
pub type Vivace = Pcc<VivaceControl>;

impl Vivace {
    pub fn new(config: VivaceConfig) -> Self {
        let control = VivaceControl {
            state: State::Starting { last: None },
            stepper: Stepper::new(config.theta0),
            vote: config.vote,
        };
        Pcc::with_control(control, config.mss_bytes, config.seed, true)
            .with_min_interval_packets(config.mi_packets as f64)
    }

    pub fn state(&self) -> State {
        self.control.state
    }
}

impl VivaceControl {
    /// Probes around `base_bps`, the probe orders drawn from `rng`.
    fn enter_probing(&mut self, rng: &mut SplitMix64, base_bps: f64) -> Step {
        let trials = if self.vote {
            Trials::draw(rng, VOTING_PAIRS)
        } else {
            let mut trials = Trials::draw(rng, CHECKED_PAIRS);
            trials.set_pairs(1);
            trials
        };
        self.state = State::Probing { trials, results: [None; 2 * MAX_PAIRS] };
        Step::Enter { base_bps }
    }

    /// Once the pairs around `base_bps` are in: decide the direction and the gradient (by the
    /// double check or the vote), or run another pair, or probe again; and take the first step
    /// from the winning probe's rate.
    fn step(&mut self, base_bps: f64, rng: &mut SplitMix64) -> Step {
        let State::Probing { mut trials, results } = self.state else { return Step::Continue };
        let rate_mbps = base_bps / 1e6;
        let mut measured = [None; MAX_PAIRS];
        for (p, pair) in measured.iter_mut().enumerate().take(usize::from(trials.pairs())) {
            let Some((upper, lower)) = trials.pair(&results, p) else { return Step::Continue };
            *pair = Some(Pair { upper, lower, gamma: gradient(&upper, &lower, rate_mbps) });
        }
        let pairs = measured.iter().flatten();
        let decision = if self.vote {
            voted(pairs)
        } else {
            if let (1, Some(first)) = (trials.pairs(), measured[0]) {
                if abnormal(&first.upper, &first.lower) {
                    trials.set_pairs(2);
                    self.state = State::Probing { trials, results };
                    return Step::StartNext;
                }
            }
            checked(pairs)
        };
        let Some((direction, gamma, winner)) = decision else { return self.enter_probing(rng, base_bps) };
        let change_mbps = self.stepper.decision_mbps(gamma, rate_mbps);
        self.state = State::Moving { direction, last: winner };
        Step::Enter { base_bps: winner.rate_mbps * 1e6 + direction * change_mbps * 1e6 }
    }

    /// A step's MI is in: keep moving while the utility agrees with the direction (the gradient
    /// from the last step's MI to this one has its sign), else step back and probe.
    fn moved(&mut self, result: ProbeResult, base_bps: f64, rng: &mut SplitMix64) -> Step {
        let State::Moving { direction, last } = self.state else { return Step::Continue };
        let rate_mbps = base_bps / 1e6;
        let gamma = (result.utility() - last.utility()) / (result.rate_mbps - last.rate_mbps);
        if !gamma.is_finite() || gamma == 0.0 {
            return self.enter_probing(rng, base_bps);
        }
        if gamma.signum() == direction {
            let change_mbps = self.stepper.step_mbps(gamma.abs(), rate_mbps);
            self.state = State::Moving { direction, last: result };
            Step::Enter { base_bps: base_bps + direction * change_mbps * 1e6 }
        } else {
            let change_mbps = self.stepper.back_mbps(gamma.abs(), rate_mbps);
            self.enter_probing(rng, base_bps - direction * change_mbps * 1e6)
        }
    }
}

impl RateControl for VivaceControl {
    const NAME: &'static str = "vivace";
    const INTERVAL_RTTS: (f64, f64) = (1.0, 1.0);
    const INTERVAL_ON_MIN_RTT: bool = true;
    fn next_interval(&mut self, base_bps: f64, first_of_state: bool) -> (f64, Role) {
        match &mut self.state {
            // One MI per doubling, as the authors' sender: the rate doubles on a result, and
            // the MIs sent while it is awaited hold the rate (with MIs of one RTT, doubling per
            // MI would double twice or more before the first result could stop it).
            State::Starting { .. } if first_of_state => (base_bps, Role::Starting),
            State::Starting { .. } => (base_bps, Role::Hold),
            State::Probing { trials, .. } => trials.launch(base_bps, EPSILON),
            // One MI measures the step; those after it hold the rate until its result is in.
            State::Moving { .. } if first_of_state => (base_bps, Role::Adjusting),
            State::Moving { .. } => (base_bps, Role::Hold),
        }
    }

    fn on_result(&mut self, mi: &Interval<Role>, base_bps: f64, rng: &mut SplitMix64) -> Step {
        let result = ProbeResult {
            rate_mbps: mi.rate_mbps(),
            loss_rate: mi.loss_rate(),
            rtt_gradient: filtered_rtt_gradient(mi),
            resolved_packets: mi.resolved_packets(),
        };
        match (&mut self.state, mi.role) {
            (State::Starting { last }, Role::Starting) => match *last {
                Some((previous_bps, previous)) if utility_fell(&previous, &result) => {
                    self.enter_probing(rng, previous_bps)
                }
                _ => {
                    *last = Some((mi.rate_bps, result));
                    Step::Enter { base_bps: 2.0 * mi.rate_bps }
                }
            },
            (State::Probing { results, .. }, Role::Trial(i)) => {
                results[usize::from(i)] = Some(result);
                self.step(base_bps, rng)
            }
            (State::Moving { .. }, Role::Adjusting) => self.moved(result, base_bps, rng),
            _ => Step::Continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::monitor::tests::run_scripted;
    use super::monitor::Monitor;
    use super::*;
    use crate::Sent;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn utility_rewards_rate_and_punishes_a_rising_rtt_and_loss() {
        // 10^0.9 = 7.943282.
        assert!((utility(10.0, 0.0, 0.0) - 7.943_282).abs() < 1e-6);
        // RTT rising 20 ms per second and 1% loss: 7.943282 − 900·10·0.02 − 11.35·10·0.01.
        assert!((utility(10.0, 0.02, 0.01) - (7.943_282 - 180.0 - 1.135)).abs() < 1e-6);
        // A draining queue earns nothing (the authors' code clamps the gradient at 0).
        assert!(close(utility(10.0, -0.02, 0.0), utility(10.0, 0.0, 0.0)));
    }

    #[test]
    fn rtt_gradients_below_the_tolerance_or_within_their_noise_count_as_zero() {
        use crate::testing::ack;
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
        // would cost 900·12·0.057 = 617 of utility. But the spike scatters the samples by 4.0 ms
        // around the fit, 0.099 of the 41 ms mean RTT, more than the slope: noise.
        let spike = mi_with(&|i| if i == 19 { 60_000 } else { 40_000 });
        assert!((spike.rtt_gradient() - 0.02 * 0.0475 / 0.016625).abs() < 1e-9);
        assert!((spike.rtt_scatter() - 0.0985).abs() < 1e-3, "{}", spike.rtt_scatter());
        assert_eq!(filtered_rtt_gradient(&spike), 0.0);
        // The clean slope's samples lie on the fit: no scatter.
        assert!(growing.rtt_scatter() < 1e-6);
    }

    #[test]
    fn steps_are_amplified_theta_gamma_within_a_boundary_that_widens_when_it_binds() {
        let mut s = Stepper::new(1.0);
        // The decision: θ0·γ = 2 Mbit/s, within ω0·r = 0.05·100 = 5.
        assert!(close(s.decision_mbps(2.0, 100.0), 2.0));
        // τ = 2: m = ⌊3/2⌋^1.2 = 1: 2 again.
        assert!(close(s.step_mbps(2.0, 100.0), 2.0));
        // τ = 3: m = 2^1.2 = 2.2974: 4.595.
        assert!(close(s.step_mbps(2.0, 100.0), 2f64.powf(1.2) * 2.0));
        // τ = 4: m = 2^1.2 again, γ = 3: 6.89 > 5: capped, and ω grows to 0.10.
        assert!(close(s.step_mbps(3.0, 100.0), 5.0));
        assert!(close(s.omega(), 0.10));
        // τ = 5: m = 3^1.2 = 3.7372, γ = 3: 11.2 > 10: capped at 10, ω 0.15.
        assert!(close(s.step_mbps(3.0, 100.0), 10.0));
        assert!(close(s.omega(), 0.15));
        // Within the boundary it narrows by one δ.
        assert!(close(s.step_mbps(1.0, 100.0), 3f64.powf(1.2)));
        assert!(close(s.omega(), 0.10));
        // The step back is θ0·γ, unamplified; never less than 0.5 Mbit/s; a new decision
        // resets the boundary.
        assert!(close(s.back_mbps(3.0, 100.0), 3.0));
        assert!(close(s.back_mbps(0.1, 100.0), MIN_CHANGE_MBPS));
        assert!(close(s.decision_mbps(1000.0, 100.0), 5.0));
    }

    fn probe(rate_mbps: f64, lost: u64, packets: u64) -> ProbeResult {
        let loss_rate = lost as f64 / packets as f64;
        ProbeResult { rate_mbps, loss_rate, rtt_gradient: 0.0, resolved_packets: packets }
    }

    #[test]
    fn probes_whose_loss_rates_differ_by_chance_are_scored_at_their_pooled_loss_rate() {
        // Around 12 Mbit/s, one loss among the upper probe's 80 packets and none among the lower
        // one's 76: pooled p = 1/156, the difference's standard error √(p(1 − p)(1/80 + 1/76)) =
        // 0.0127, and 0.0125 is 0.98 of them. Scored at its own loss rate the upper probe would
        // lose 11.35·12.6·0.0125 = 1.79 of utility and γ = −0.79; at the pooled rate γ is the
        // signal of an idle path under 1/156 random loss: 0.70 − 11.35/156 = 0.63 per Mbit/s.
        let (upper, lower) = (probe(12.6, 1, 80), probe(11.4, 0, 76));
        let pooled = (12.6f64.powf(0.9) - 11.4f64.powf(0.9)) / 1.2 - LOSS_COEFFICIENT / 156.0;
        assert!(close(gradient(&upper, &lower, 12.0), pooled));
        assert!((pooled - 0.629).abs() < 1e-3);
        assert!(((upper.utility() - lower.utility()) / 1.2 + 0.787).abs() < 1e-3);
        // Five losses in 80 (a link at 11.8 Mbit/s) are 2.2 standard errors more: real, and each
        // probe is scored at its own loss rate.
        let (upper, lower) = (probe(12.6, 5, 80), probe(11.4, 0, 76));
        assert!(close(gradient(&upper, &lower, 12.0), (upper.utility() - lower.utility()) / 1.2));
        assert!(gradient(&upper, &lower, 12.0) < -2.0);
    }

    #[test]
    fn under_random_loss_steps_in_one_direction_are_amplified() {
        // An idle path losing exactly 1% of packets, from 10 Mbit/s: each probe's MI loses 0 or
        // 1 of its ~30 packets. Pooled, every pair measures γ ≈ 0.6, m(τ) = τ grows, and in 3 s
        // (15 decisions) the rate reaches 16.9 Mbit/s. Scored at their own loss rates, one loss
        // swung a pair's γ by ±3.8 and ended the run: 11.6 Mbit/s after 3 s.
        let mut v = probing_at(10e6);
        run_scripted(&mut v, 40_000, 3_000_000, |_| 0.01, |_, _| true);
        assert!(v.base_rate_bps() > 15e6, "{}", v.base_rate_bps());
    }

    #[test]
    fn the_starting_phase_ends_on_a_fall_of_utility_that_chance_loss_does_not_explain() {
        let mi = probe;
        // 1.2 → 2.4 Mbit/s, one loss in the 20 packets of the second MI: u falls from 1.178 to
        // 2.4^0.9 − 11.35·2.4·0.05 = 0.837, and chance loss explains 2 × 11.35·2.4·0.0695 = 3.8
        // (the pooled rate 1/30 over 10 and 20 packets: σ = 0.0695).
        assert!(!utility_fell(&mi(1.2, 0, 10), &mi(2.4, 1, 20)));
        // Without loss the fall of a rising RTT is always real, …
        let mut rising = mi(2.4, 0, 20);
        rising.rtt_gradient = 0.02;
        assert!(utility_fell(&mi(1.2, 0, 10), &rising));
        // … and so is half of 19.2 Mbit/s lost on a 9.6 Mbit/s bottleneck.
        assert!(utility_fell(&mi(9.6, 0, 80), &mi(19.2, 80, 160)));
    }

    #[test]
    fn a_pair_is_abnormal_when_the_higher_rate_loses_less_beyond_chance_or_its_rtt_rises_less() {
        let probe = |lost: u64, rtt_gradient: f64| ProbeResult { rtt_gradient, ..probe(10.0, lost, 80) };
        // One loss in 80 at the lower rate, none at the higher: pooled p = 1/160, the difference's
        // standard error √(p(1 − p)·2/80) = 0.01246; 0.0125 is 1.0 of them: chance.
        assert!(!abnormal(&probe(0, 0.0), &probe(1, 0.0)));
        // Four in 80: p = 0.025, standard error √(0.025·0.975·2/80) = 0.02469; 0.05 is 2.03.
        assert!(abnormal(&probe(0, 0.0), &probe(4, 0.0)));
        // The expected direction is never abnormal, however large.
        assert!(!abnormal(&probe(20, 0.0), &probe(0, 0.0)));
        // The RTT rising (past its noise filter) at the lower rate but not at the higher.
        assert!(abnormal(&probe(0, 0.0), &probe(0, 0.02)));
        assert!(!abnormal(&probe(0, 0.02), &probe(0, 0.0)));
    }

    /// §4.3's probing: one pair, a second when the first was abnormal.
    const DOUBLE_CHECKED: VivaceConfig = VivaceConfig {
        mss_bytes: DEFAULT_MSS_BYTES,
        seed: 1,
        theta0: DEFAULT_THETA0,
        vote: false,
        mi_packets: AUTHORS_MI_PACKETS,
    };

    fn probing_at(rate_bps: f64) -> Vivace {
        probing_with(VivaceConfig::default(), rate_bps)
    }

    fn probing_with(config: VivaceConfig, rate_bps: f64) -> Vivace {
        let mut v = Vivace::new(config);
        v.srtt_us = Some(40_000);
        let step = v.control.enter_probing(&mut v.monitor.rng, rate_bps);
        v.take(0, step);
        v
    }

    /// Runs until the first step has been taken and returns the new base rate, Mbit/s, and the
    /// number of probes the decision ran.
    fn first_step(v: &mut Vivace, loss_of_rate_mbps: impl Fn(f64) -> f64) -> (f64, u8) {
        let start_id = v.epoch_id;
        let mut probes = 0;
        run_scripted(v, 40_000, 10_000_000, loss_of_rate_mbps, |_, v| {
            if let State::Probing { trials, .. } = v.state() {
                if v.epoch_id == start_id {
                    probes = trials.launched();
                }
            }
            v.epoch_id == start_id
        });
        (v.base_rate_bps() / 1e6, probes)
    }

    fn bottleneck(capacity_mbps: f64) -> impl Fn(f64) -> f64 {
        move |rate_mbps| (1.0 - capacity_mbps / rate_mbps).max(0.0)
    }

    #[test]
    fn on_an_idle_path_the_step_is_theta_times_the_measured_gradient() {
        // At 40 Mbit/s on an idle 1 Gbit/s path (flat RTT, no loss) the pair measures
        // γ = (42^0.9 − 38^0.9)/(2·0.05·40) = 0.62238 per Mbit/s; θ0·γ = 0.622 < ω0·40 = 2, so
        // the rate moves from the winning probe's 42 Mbit/s by exactly θ0·γ, after one pair:
        // nothing was abnormal (§4.3's double check, `vote=false`).
        let mut v = probing_with(DOUBLE_CHECKED, 40e6);
        let gamma = (42f64.powf(0.9) - 38f64.powf(0.9)) / 4.0;
        let (rate_mbps, probes) = first_step(&mut v, bottleneck(1000.0));
        assert!((rate_mbps - (42.0 + DEFAULT_THETA0 * gamma)).abs() < 1e-6);
        assert!((gamma - 0.622_38).abs() < 1e-5);
        assert_eq!(probes, 2);
    }

    #[test]
    fn a_pair_whose_higher_rate_lost_less_is_checked_by_a_second_pair() {
        // At 10 Mbit/s, 10% of the 9.5 Mbit/s probe's packets are lost and none of the 10.5
        // Mbit/s probe's: counter-intuitive, so a second pair runs (4 probes). It agrees, and
        // the mean gradient, ≈ (10.5^0.9 − 9.5^0.9 + 11.35·9.5·0.1)/1.0 = 11.6 per Mbit/s,
        // asks for θ0·11.6 Mbit/s: capped at ω0·r = 0.5, from the winning probe's 10.5.
        let mut v = probing_with(DOUBLE_CHECKED, 10e6);
        let (rate_mbps, probes) = first_step(&mut v, |rate_mbps| if rate_mbps < 10.0 { 0.1 } else { 0.0 });
        assert_eq!(probes, 4);
        assert!(close(rate_mbps, 11.0));
    }

    /// The decision of three pairs around 10 Mbit/s (flat RTTs, 80 packets each) whose 10.5 Mbit/s
    /// probe lost, pair by pair, `upper_lost` packets and whose 9.5 Mbit/s probe lost none: the new
    /// base rate, Mbit/s, or None when they decided nothing and probing began again.
    fn decision_of(upper_lost: [u64; 3]) -> Option<f64> {
        let mut v = probing_at(10e6);
        let State::Probing { trials, .. } = v.state() else { unreachable!("probing_with probes") };
        assert_eq!(trials.pairs(), 3);
        let positions = [0, 1, 2, 3, 4, 5].map(Some);
        let mut results = [None; 2 * MAX_PAIRS];
        for (p, lost) in upper_lost.into_iter().enumerate() {
            let (upper_at, lower_at) = trials.pair(&positions, p).expect("every position filled");
            results[upper_at] = Some(probe(10.5, lost, 80));
            results[lower_at] = Some(probe(9.5, 0, 80));
        }
        v.control.state = State::Probing { trials, results };
        match v.control.step(10e6, &mut v.monitor.rng) {
            Step::Enter { base_bps } if matches!(v.state(), State::Moving { .. }) => Some(base_bps / 1e6),
            _ => None,
        }
    }

    #[test]
    fn voting_two_pairs_of_three_decide_an_increase_and_only_all_three_a_decrease() {
        // No loss: the higher rate's utility is higher, an up vote; 8 of 80 lost (10%): far below
        // it (c·x·L = 11.9), a down vote.
        let up = decision_of([0, 0, 8]).expect("two up votes decide");
        // γ: the two agreeing pairs' 10.5^0.9 − 9.5^0.9 = 0.715, summed and over three pairs,
        // per 2εr = 1 Mbit/s: 0.477, so θ0·γ is below the 0.5 Mbit/s least change, the step
        // from the winning 10.5.
        assert!(close(up, 11.0), "{up}");
        assert_eq!(decision_of([8, 0, 8]), None);
        assert_eq!(decision_of([8, 8, 0]), None);
        // Down: γ = −11.2 a pair (the loss term), θ0·|γ| held to ω0·r = 0.5 from 9.5.
        let down = decision_of([8, 8, 8]).expect("three down votes decide");
        assert!(close(down, 9.0), "{down}");
    }

    #[test]
    fn above_the_bottleneck_rate_the_loss_term_turns_the_rate_down() {
        // At 50 Mbit/s on a 40 Mbit/s bottleneck the probes lose 23.8% and 15.8% of their
        // packets, far beyond chance: the loss term's gradient −11.35·d(x·L)/dx = −11.35 swamps
        // 0.9·x^−0.1 = 0.61, and θ0·|γ| = 10.7 Mbit/s is held to ω0·r = 2.5 from the lower probe's
        // 47.5: 45 Mbit/s.
        let mut v = probing_at(50e6);
        assert!(close(first_step(&mut v, bottleneck(40.0)).0, 45.0));
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
                let role = v.monitor.current().map(|mi| mi.role);
                if id != last_id && role == Some(Role::Starting) {
                    starting.push(v.rate_bps / 1e6);
                }
                last_id = id;
                matches!(v.state(), State::Starting { .. })
            },
        );
        assert!(starting.len() >= 5 && starting.len() <= 6, "{starting:?}");
        for (i, rate) in starting.iter().enumerate() {
            assert!(close(*rate, 1.2 * f64::from(1 << i)), "{starting:?}");
        }
        assert!(matches!(v.state(), State::Probing { .. }));
        assert!(close(v.base_rate_bps(), 9.6e6));
    }
}
