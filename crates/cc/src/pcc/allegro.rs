//! PCC Allegro (Dong, Li, Zarchy, Godfrey & Schapira, "PCC: Re-architecting Congestion Control
//! for Consistent High Performance", NSDI 2015).
//!
//! The idea: no hard-wired reaction to packet-level events. The sender runs experiments — it
//! sends at a rate for one monitor interval (MI, `monitor.rs`), observes what that rate earned
//! (throughput, loss) as a number, the utility, and moves toward the rates that earned more.
//! Allegro's utility rewards throughput and punishes loss sharply once it passes 5%, so random
//! loss below that does not stop it (where TCP halves its window on every loss).
//!
//! Sections implemented:
//! - §2.2 (and §4's evaluation utility) the utility of an MI with sending rate x, loss rate L and
//!   throughput T = x·(1 − L):  u = T·Sigmoid_α(L − 0.05) − x·L,  Sigmoid_α(y) = 1/(1 + e^(α·y)),
//!   α = 100. Rates in Mbit/s (u is linear in x, so the unit does not change any decision).
//! - §2.3 control algorithm, three states:
//!   - Starting: begin at a low rate and double it every MI until an MI's utility is lower than
//!     the previous one's; then return to that previous rate and decide.
//!   - Decision making: randomized controlled trials — four MIs in two pairs, each pair one MI
//!     at r(1 + ε) and one at r(1 − ε) in random order. If the higher rate earned more in both
//!     pairs, move to r(1 + ε); the lower in both, to r(1 − ε); otherwise stay at r and try again
//!     with ε + ε_min. ε runs from ε_min = 1% to ε_max = 5%.
//!   - Rate adjusting: with the direction dir = ±1 just decided and r_0 the new rate, the n-th
//!     MI runs at r_n = r_(n−1)·(1 + n·ε_min·dir) while each MI's utility is at least the
//!     previous one's; when it falls, go back to r_(n−1) and decide again (ε = ε_min).
//! - §3 MIs are pipelined: the next MI starts without waiting for the results of the last, so
//!   by the time a result arrives one more MI is under way; when a result changes the state,
//!   that MI is abandoned (its results ignored) and the new state starts a fresh MI at once.
//!   After the four trials of a decision, the sender holds r until their results are in.
//!
//! Constants: α = 100 and the 5% loss threshold (§2.2); ε_min = 0.01, ε_max = 0.05 (§2.3);
//! MI length uniform over 1.7–2.2 SRTT, at least 40 packets (see `monitor.rs` for why).
//!
//! Deviations and choices (docs/cc.md, "PCC Allegro", gives each its reasons and figures):
//! 1. Starting rate: RFC 6928's 10 packets per 100 ms (1.2 Mbit/s at 1500 bytes), not the
//!    paper's 2·MSS/RTT: before the first acknowledgement there is no RTT.
//! 2. x in the utility is the MI's target rate (`monitor.rs` says why not a packet count), and
//!    T = x·(1 − L) as in the paper.
//! 3. An MI none of whose packets was acknowledged or lost (a stalled path) has utility −∞.
//! 4. Paced at the MI's rate with no window, as the paper's and the authors' senders (PCC
//!    NSDI 2015 §3; PCC-Uspace's `PccSender::CanSend`, github.com/PCCproject/PCC-Uspace, 2018).
//! 5. The rate never goes below 20 packets per second, so that an MI keeps producing results.
//! 6. Starting ends on a fall of utility that chance loss does not explain (loss rates within
//!    two standard errors are compared pooled): under 2% random loss one 40-packet MI in five
//!    lost 5% and ended the start near 1.2 Mbit/s (`bench/random_loss.py`, 20 seeds: 2% loss
//!    69.0% → 91.8% of the link). Rate adjusting keeps the paper's plain comparison: with the
//!    same rule there two flows converged less (Jain's index 0.97 → 0.90).
//!
//! Options (ours, off by default; docs/cc.md, "PCC Allegro", has their figures):
//! - `delivery_ratio=true`: T = x·(1 − L)·D, with D ≤ 1 the MI's delivery ratio (`monitor.rs`),
//!   so that a rate the bottleneck spreads out earns no more than the rate it delivers. On a
//!   one-BDP buffer it halves the loss at the same throughput (4.4% → 1.8%).
//! - `safety_window=true`: a window of 4 × rate × min RTT (at least 4 packets; 100 ms before the
//!   first RTT sample), binding only once the queue holds three min RTTs of the rate. Behind a
//!   5-BDP buffer it cuts the loss from 16% to 6% at the same throughput and delay, and over an
//!   unbounded buffer with random loss (where no utility term stops the rate) it bounds the
//!   flight that otherwise grows without end.
//!
//! Driver: pacing rate (and the window with `safety_window`); `wake_at_us` is the end of the
//! current MI.

use super::monitor::{self, Interval, SplitMix64};
use super::trials::{Trials, MAX_PAIRS};
use super::{starting_rate_bps, Pcc, RateControl, Role, Step};
use crate::params::{Params, SpecError};
use crate::DEFAULT_MSS_BYTES;

/// §2.2: the sigmoid's steepness α.
const SIGMOID_ALPHA: f64 = 100.0;
/// §2.2: the loss rate past which the utility collapses.
const LOSS_THRESHOLD: f64 = 0.05;
/// §2.3: ε starts here and grows by this much per inconclusive decision.
pub const EPSILON_MIN: f64 = 0.01;
/// §2.3: ε never exceeds this.
pub const EPSILON_MAX: f64 = 0.05;
/// §2.3: a decision runs two pairs of trials.
const PAIRS: u8 = 2;
/// Deviation 6: a loss rate higher by this many standard errors is no longer chance.
const LOSS_RISE_MIN_STDERRS: f64 = 2.0;

/// §2.2's utility of an MI sent at `rate_mbps` that lost the fraction `loss_rate` of its packets,
/// its throughput scaled by `delivery_ratio` (≤ 1; 1 but with the `delivery_ratio` option).
pub fn utility(rate_mbps: f64, loss_rate: f64, delivery_ratio: f64) -> f64 {
    let throughput_mbps = rate_mbps * (1.0 - loss_rate) * delivery_ratio;
    let sigmoid = 1.0 / (1.0 + (SIGMOID_ALPHA * (loss_rate - LOSS_THRESHOLD)).exp());
    throughput_mbps * sigmoid - rate_mbps * loss_rate
}

/// What an MI measured, as the utility sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub rate_bps: f64,
    pub loss_rate: f64,
    pub delivery_ratio: f64,
    /// Packets acknowledged or lost, over which `loss_rate` was measured.
    pub resolved_packets: u64,
}

impl Measured {
    /// What `mi` measured; its delivery ratio counts only `with_delivery_ratio` (option 1), else 1.
    fn of<R>(mi: &Interval<R>, with_delivery_ratio: bool) -> Self {
        Measured {
            rate_bps: mi.rate_bps,
            loss_rate: mi.loss_rate(),
            delivery_ratio: if with_delivery_ratio { mi.delivery_ratio() } else { 1.0 },
            resolved_packets: mi.resolved_packets(),
        }
    }

    /// §2.2's utility at `loss_rate`; −∞ with no packet resolved (deviation 3).
    fn utility_at(&self, loss_rate: f64) -> f64 {
        if self.resolved_packets == 0 {
            f64::NEG_INFINITY
        } else {
            utility(self.rate_bps / 1e6, loss_rate, self.delivery_ratio)
        }
    }

    pub fn utility(&self) -> f64 {
        self.utility_at(self.loss_rate)
    }
}

/// Starting's "the utility fell" (§2.3) from `previous` to `latest`, less what chance loss
/// explains (deviation 6): a rise of the loss rate within two standard errors of the difference
/// (`monitor.rs`) does not count, and both are then compared at their pooled loss rate.
pub fn fell_beyond_chance(previous: &Measured, latest: &Measured) -> bool {
    if latest.utility() >= previous.utility() {
        return false;
    }
    let (a, b) = ((previous.loss_rate, previous.resolved_packets), (latest.loss_rate, latest.resolved_packets));
    if latest.loss_rate - previous.loss_rate > LOSS_RISE_MIN_STDERRS * monitor::loss_difference_stderr(a, b) {
        return true;
    }
    let pooled = monitor::pooled_loss_rate(a, b);
    latest.utility_at(pooled) < previous.utility_at(pooled)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllegroConfig {
    pub mss_bytes: u64,
    /// Seeds the trial orders and MI lengths.
    pub seed: u64,
    /// Option 1: the throughput term carries the MI's delivery ratio D.
    pub delivery_ratio: bool,
    /// Option 2: the flight is capped at 4 × rate × min RTT.
    pub safety_window: bool,
}

impl Default for AllegroConfig {
    fn default() -> Self {
        AllegroConfig { mss_bytes: DEFAULT_MSS_BYTES, seed: 1, delivery_ratio: false, safety_window: false }
    }
}

impl AllegroConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = AllegroConfig::default();
        Ok(AllegroConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            seed: p.u64_at_least("seed", 0, d.seed)?,
            delivery_ratio: p.bool("delivery_ratio", d.delivery_ratio)?,
            safety_window: p.bool("safety_window", d.safety_window)?,
        })
    }
}

/// The state of §2.3's control algorithm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum State {
    Starting {
        /// The last MI whose results came in.
        last: Option<Measured>,
    },
    Deciding {
        epsilon: f64,
        /// Two pairs of trials at r(1 ± ε).
        trials: Trials,
        /// Per trial, its utility once its results are in.
        utilities: [Option<f64>; 2 * MAX_PAIRS],
    },
    Adjusting {
        /// +1 or −1.
        dir: f64,
        /// Index of the next MI to launch: r_n = r_(n−1)·(1 + n·ε_min·dir).
        n: u32,
        last: Option<Measured>,
    },
}

/// §2.3's rate control around Allegro's utility; `Pcc` runs its monitor intervals.
#[derive(Debug, Clone)]
pub struct AllegroControl {
    /// Where §2.3's three-state machine stands.
    state: State,
    /// Option 1: score throughput as x·(1 − L)·D rather than the paper's x·(1 − L).
    delivery_ratio: bool,
}

/// PCC Allegro: the PCC sender with Allegro's utility and rate control.
pub type Allegro = Pcc<AllegroControl>;

impl Allegro {
    pub fn new(config: AllegroConfig) -> Self {
        let control = AllegroControl { state: State::Starting { last: None }, delivery_ratio: config.delivery_ratio };
        Pcc::with_control(control, config.mss_bytes, config.seed, config.safety_window)
    }

    pub fn state(&self) -> State {
        self.control.state
    }
}

impl AllegroControl {
    /// Decides around `base_bps` with step `epsilon`, the trial orders drawn from `rng`.
    fn enter_deciding(&mut self, rng: &mut SplitMix64, base_bps: f64, epsilon: f64) -> Step {
        self.state = State::Deciding { epsilon, trials: Trials::draw(rng, PAIRS), utilities: [None; 2 * MAX_PAIRS] };
        Step::Enter { base_bps }
    }

    /// Once all four trials around `base_bps` are in: move if both pairs agree, else widen ε and
    /// try again.
    fn decide(&mut self, base_bps: f64, rng: &mut SplitMix64) -> Step {
        let State::Deciding { epsilon, trials, utilities } = self.state else { return Step::Continue };
        let (Some(pair0), Some(pair1)) = (trials.pair(&utilities, 0), trials.pair(&utilities, 1)) else {
            return Step::Continue;
        };
        let votes = [pair0, pair1].map(|(up, down)| {
            if up > down {
                1
            } else if up < down {
                -1
            } else {
                0
            }
        });
        match votes {
            [1, 1] => {
                self.state = State::Adjusting { dir: 1.0, n: 0, last: None };
                Step::Enter { base_bps: base_bps * (1.0 + epsilon) }
            }
            [-1, -1] => {
                self.state = State::Adjusting { dir: -1.0, n: 0, last: None };
                Step::Enter { base_bps: base_bps * (1.0 - epsilon) }
            }
            _ => self.enter_deciding(rng, base_bps, (epsilon + EPSILON_MIN).min(EPSILON_MAX)),
        }
    }
}

impl RateControl for AllegroControl {
    const NAME: &'static str = "allegro";
    const INTERVAL_RTTS: (f64, f64) = (monitor::INTERVAL_MIN_RTTS, monitor::INTERVAL_MAX_RTTS);
    const INTERVAL_ON_MIN_RTT: bool = false;
    fn next_interval(&mut self, base_bps: f64, first_of_state: bool) -> (f64, Role) {
        match &mut self.state {
            State::Starting { .. } => (starting_rate_bps(base_bps, first_of_state), Role::Starting),
            State::Deciding { epsilon, trials, .. } => trials.launch(base_bps, *epsilon),
            State::Adjusting { dir, n, .. } => {
                let rate = base_bps * (1.0 + f64::from(*n) * EPSILON_MIN * *dir);
                *n += 1;
                (rate, Role::Adjusting)
            }
        }
    }

    fn on_result(&mut self, mi: &Interval<Role>, base_bps: f64, rng: &mut SplitMix64) -> Step {
        let measured = Measured::of(mi, self.delivery_ratio);
        match (&mut self.state, mi.role) {
            (State::Starting { last }, Role::Starting) | (State::Adjusting { last, .. }, Role::Adjusting) => {
                // Deviation 6: in Starting, a fall that chance loss explains does not count.
                let fell = |previous: &Measured| match mi.role {
                    Role::Starting => fell_beyond_chance(previous, &measured),
                    _ => measured.utility() < previous.utility(),
                };
                match *last {
                    Some(previous) if fell(&previous) => self.enter_deciding(rng, previous.rate_bps, EPSILON_MIN),
                    _ => {
                        *last = Some(measured);
                        Step::Continue
                    }
                }
            }
            (State::Deciding { utilities, .. }, Role::Trial(i)) => {
                utilities[usize::from(i)] = Some(measured.utility());
                self.decide(base_bps, rng)
            }
            _ => Step::Continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::monitor::tests::run_scripted;
    use super::*;

    /// Every MI the controller launches, in order: (rate in Mbit/s, state when it launched).
    fn launched(a: &mut Allegro, capacity_mbps: f64, stop: impl Fn(&Allegro) -> bool) -> Vec<(f64, State)> {
        let mut mis = Vec::new();
        let mut last_id = None;
        run_scripted(
            a,
            40_000,
            60_000_000,
            |rate_mbps| (1.0 - capacity_mbps / rate_mbps).max(0.0),
            |_, a| {
                let id = a.monitor.current().map(|mi| mi.id);
                if id != last_id {
                    last_id = id;
                    mis.push((a.rate_bps / 1e6, a.state()));
                }
                !stop(a)
            },
        );
        mis
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn utility_is_throughput_times_a_sigmoid_of_loss_minus_the_lost_rate() {
        // No loss: 10·1/(1 + e^(−5)) = 9.93307.
        assert!((utility(10.0, 0.0, 1.0) - 9.933_071).abs() < 1e-6);
        // At the 5% threshold the sigmoid is 1/2: 9.5·0.5 − 10·0.05 = 4.25.
        assert!(close(utility(10.0, 0.05, 1.0), 4.25));
        // 10% loss: 9·1/(1 + e^5) − 1 = −0.939764.
        assert!((utility(10.0, 0.1, 1.0) - (-0.939_764)).abs() < 1e-6);
        // 1% random loss costs little: 9.9·1/(1 + e^(−4)) − 0.1 = 9.621937.
        assert!((utility(10.0, 0.01, 1.0) - 9.621_937).abs() < 1e-6);
        // Sending at 10 over a 5 Mbit/s bottleneck that drops nothing (yet): T = 5, u = 4.966536.
        assert!((utility(10.0, 0.0, 0.5) - 4.966_536).abs() < 1e-6);
    }

    #[test]
    fn starting_ignores_a_fall_of_utility_that_chance_loss_explains() {
        let mi = |rate_mbps: f64, lost: u64, packets: u64, delivery_ratio: f64| Measured {
            rate_bps: rate_mbps * 1e6,
            loss_rate: lost as f64 / packets as f64,
            delivery_ratio,
            resolved_packets: packets,
        };
        // 1.2 → 2.4 Mbit/s, 40 packets each, 2 of the second lost: 5%, the sigmoid's midpoint, so
        // u falls from 1.2·0.9933 = 1.192 to 2.4·0.95·0.5 − 0.12 = 1.02. But the pooled rate is
        // 2/80 and the difference's standard error √(0.025·0.975·2/40) = 0.0349: 0.05 is 1.4 of
        // them. At 2.5% both, u rises from 1.051 to 2.102: not a fall.
        let (before, after) = (mi(1.2, 0, 40, 1.0), mi(2.4, 2, 40, 1.0));
        assert!(after.utility() < before.utility());
        assert!(!fell_beyond_chance(&before, &after));
        // Past a 9.6 Mbit/s bottleneck at 19.2, half is lost: far beyond chance.
        assert!(fell_beyond_chance(&mi(9.6, 0, 80, 1.0), &mi(19.2, 40, 80, 1.0)));
        // A queue spreading the packets out (delivery ratio 0.4) is a fall at any loss rate.
        assert!(fell_beyond_chance(&mi(1.2, 0, 40, 1.0), &mi(2.4, 0, 40, 0.4)));
    }

    #[test]
    fn starting_doubles_the_rate_until_the_utility_falls_then_decides_around_the_last_good_rate() {
        let mut a = Allegro::new(AllegroConfig::default());
        // A 10 Mbit/s bottleneck: 1.2, 2.4, 4.8 and 9.6 Mbit/s lose nothing; 19.2 loses 48%.
        let mis = launched(&mut a, 10.0, |a| !matches!(a.state(), State::Starting { .. }));
        let starting: Vec<f64> =
            mis.iter().filter(|(_, s)| matches!(s, State::Starting { .. })).map(|&(r, _)| r).collect();
        assert!(starting.len() >= 5 && starting.len() <= 6, "{starting:?}");
        for (i, rate) in starting.iter().enumerate() {
            assert!(close(*rate, 1.2 * f64::from(1 << i)), "{starting:?}");
        }
        // 19.2's utility is the first to fall: decide around 9.6 Mbit/s with ε = ε_min.
        assert!(
            matches!(a.state(), State::Deciding { epsilon, trials, .. } if epsilon == EPSILON_MIN && trials.launched() == 1)
        );
        assert!(close(a.base_rate_bps(), 9.6e6));
    }

    fn deciding_at(rate_bps: f64) -> Allegro {
        let mut a = Allegro::new(AllegroConfig::default());
        a.srtt_us = Some(40_000);
        let step = a.control.enter_deciding(&mut a.monitor.rng, rate_bps, EPSILON_MIN);
        a.take(0, step);
        a
    }

    #[test]
    fn a_trial_the_higher_rate_wins_twice_moves_the_rate_up_by_epsilon() {
        // An idle 100 Mbit/s path: more rate, more utility.
        let mut a = deciding_at(5e6);
        let mis = launched(&mut a, 100.0, |a| !matches!(a.state(), State::Deciding { .. }));
        let mut trials: Vec<f64> = mis.iter().take(4).map(|&(r, _)| r).collect();
        trials.sort_by(f64::total_cmp);
        assert!(close(trials[0], 4.95) && close(trials[1], 4.95), "{trials:?}");
        assert!(close(trials[2], 5.05) && close(trials[3], 5.05), "{trials:?}");
        assert!(matches!(a.state(), State::Adjusting { dir, .. } if dir == 1.0));
        assert!(close(a.base_rate_bps(), 5.05e6));
    }

    #[test]
    fn a_trial_the_lower_rate_wins_twice_moves_the_rate_down_by_epsilon() {
        // A 40 Mbit/s bottleneck: at 50.5 Mbit/s 20.8% is lost, at 49.5 19.2%; both utilities
        // are negative (−10.5 and −9.5), the lower one less so.
        let mut a = deciding_at(50e6);
        launched(&mut a, 40.0, |a| !matches!(a.state(), State::Deciding { .. }));
        assert!(matches!(a.state(), State::Adjusting { dir, .. } if dir == -1.0));
        assert!(close(a.base_rate_bps(), 49.5e6));
    }

    #[test]
    fn rate_adjusting_grows_its_step_by_epsilon_min_each_interval_until_the_utility_falls() {
        // From 50 Mbit/s on a 52.5 Mbit/s bottleneck: the trials move the rate to r0 = 50.5, then
        // r1 = r0·1.01 = 51.005, r2 = r1·1.02 = 52.0251, r3 = r2·1.03 = 53.5859, which loses 2%
        // (about 7 of its 350 packets): its utility 52.5·0.951 − 1.09 = 48.8 is below r2's
        // 52.0251·0.9933 = 51.7, so the sender returns to r2 and decides again.
        let mut a = deciding_at(50e6);
        let adjusted = std::cell::Cell::new(false);
        let mis = launched(&mut a, 52.5, |a| {
            adjusted.set(adjusted.get() || matches!(a.state(), State::Adjusting { .. }));
            adjusted.get() && matches!(a.state(), State::Deciding { .. })
        });
        let adjusting: Vec<f64> =
            mis.iter().filter(|(_, s)| matches!(s, State::Adjusting { .. })).map(|&(r, _)| r).collect();
        let expected = [50.5, 51.005, 52.0251, 53.585_853];
        assert!(adjusting.len() >= 4, "{adjusting:?}");
        for (got, want) in adjusting.iter().zip(expected) {
            assert!((got - want).abs() < 1e-6, "{adjusting:?}");
        }
        assert!(close(a.base_rate_bps(), 52.0251e6), "{mis:?}");
    }
}
