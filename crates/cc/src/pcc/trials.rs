//! Randomized controlled trials, PCC's way of comparing two rates under the same conditions
//! (Allegro, NSDI 2015, §2.3; Vivace, NSDI 2018, §4.2 runs the same pairs as its probes): around
//! a rate r, pairs of MIs at r(1 + ε) and r(1 − ε), each pair in an order drawn at random, so
//! that a change of conditions during a pair favours neither rate on average.
//!
//! Kept here: each pair's order and how many trials have been launched. Trial i belongs to pair
//! i / 2, position i % 2; the rate controls keep the results, indexed by trial.

use super::monitor::SplitMix64;
use super::Role;

/// Pairs a decision runs at most: Allegro always two; Vivace one, and a second when the first
/// is abnormal (§4.3).
pub const MAX_PAIRS: usize = 2;

/// The trials of one decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trials {
    /// Per pair: whether its r(1 + ε) trial goes first.
    upper_first: [bool; MAX_PAIRS],
    /// Trials launched so far (0..=2·MAX_PAIRS).
    launched: u8,
}

impl Trials {
    /// New trials, the order of each pair drawn from `rng`.
    pub fn draw(rng: &mut SplitMix64) -> Self {
        Trials { upper_first: [rng.coin(), rng.coin()], launched: 0 }
    }

    pub fn launched(&self) -> u8 {
        self.launched
    }

    /// The rate and role of the next MI around r = `base_bps`: the next trial, at r(1 + ε) or
    /// r(1 − ε) as its pair's order says, or, once `pairs` pairs have been launched, a hold at r.
    pub fn launch(&mut self, pairs: u8, base_bps: f64, epsilon: f64) -> (f64, Role) {
        if self.launched >= 2 * pairs {
            return (base_bps, Role::Hold);
        }
        let i = self.launched;
        self.launched += 1;
        let upper = i.is_multiple_of(2) == self.upper_first[usize::from(i / 2)];
        let factor = if upper { 1.0 + epsilon } else { 1.0 - epsilon };
        (base_bps * factor, Role::Trial(i))
    }

    /// Pair `p`'s results, indexed by trial, as (upper, lower) once both are in.
    pub fn pair<T: Copy>(&self, results: &[Option<T>; 2 * MAX_PAIRS], p: usize) -> Option<(T, T)> {
        match (results[2 * p], results[2 * p + 1]) {
            (Some(first), Some(second)) if self.upper_first[p] => Some((first, second)),
            (Some(first), Some(second)) => Some((second, first)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pair_runs_one_trial_above_and_one_below_r_in_its_drawn_order() {
        let mut trials = Trials { upper_first: [false, true], launched: 0 };
        let expected =
            [(9.5e6, Role::Trial(0)), (10.5e6, Role::Trial(1)), (10.5e6, Role::Trial(2)), (9.5e6, Role::Trial(3))];
        for (want_bps, want_role) in expected {
            let (rate_bps, role) = trials.launch(2, 10e6, 0.05);
            assert_eq!(role, want_role);
            assert!((rate_bps - want_bps).abs() < 1e-6, "{rate_bps}");
        }
        // Then the sender holds r until the results are in.
        assert_eq!(trials.launch(2, 10e6, 0.05), (10e6, Role::Hold));
        // Results are indexed by trial; each pair comes back as (upper, lower) once complete.
        let results = [Some("below"), Some("above"), Some("above"), None];
        assert_eq!(trials.pair(&results, 0), Some(("above", "below")));
        assert_eq!(trials.pair(&results, 1), None);
    }

    #[test]
    fn a_decision_of_one_pair_launches_two_trials() {
        let mut trials = Trials::draw(&mut SplitMix64::new(1));
        let roles = [0, 1, 2].map(|_| trials.launch(1, 10e6, 0.05).1);
        assert_eq!(roles, [Role::Trial(0), Role::Trial(1), Role::Hold]);
        assert_eq!(trials.launched(), 2);
    }
}
