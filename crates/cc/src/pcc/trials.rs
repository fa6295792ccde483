//! Randomized controlled trials, PCC's way of comparing two rates under the same conditions
//! (Allegro, NSDI 2015, §2.3; Vivace, NSDI 2018, §4.2 runs the same pairs as its probes): around
//! a rate r, pairs of MIs at r(1 + ε) and r(1 − ε), each pair in an order drawn at random, so
//! that a change of conditions during a pair favours neither rate on average.
//!
//! Kept here: each pair's order and how many trials have been launched. Trial i belongs to pair
//! i / 2, position i % 2; the rate controls keep the results, indexed by trial.

use super::monitor::SplitMix64;
use super::Role;

/// Pairs a decision runs at most: Allegro two (§2.3), Vivace three (the authors' sender).
pub const MAX_PAIRS: usize = 3;

/// The trials of one decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trials {
    /// Per pair: whether its r(1 + ε) trial goes first.
    upper_first: [bool; MAX_PAIRS],
    /// Pairs whose order was drawn (1..=MAX_PAIRS).
    drawn: u8,
    /// Pairs this decision runs so far (1..=drawn): Vivace's double check adds one.
    pairs: u8,
    /// Trials launched so far (0..=2·pairs).
    launched: u8,
}

impl Trials {
    /// New trials of `pairs` pairs, the order of each drawn from `rng` (one draw per pair).
    pub fn draw(rng: &mut SplitMix64, pairs: u8) -> Self {
        assert!((1..=MAX_PAIRS).contains(&usize::from(pairs)), "{pairs} pairs");
        let mut upper_first = [false; MAX_PAIRS];
        for first in &mut upper_first[..usize::from(pairs)] {
            *first = rng.coin();
        }
        Trials { upper_first, drawn: pairs, pairs, launched: 0 }
    }

    pub fn pairs(&self) -> u8 {
        self.pairs
    }

    /// Runs `pairs` of the drawn pairs (the rest keep their order for later).
    pub fn set_pairs(&mut self, pairs: u8) {
        assert!((1..=self.drawn).contains(&pairs), "{pairs} of {} pairs", self.drawn);
        self.pairs = pairs;
    }

    pub fn launched(&self) -> u8 {
        self.launched
    }

    /// The rate and role of the next MI around r = `base_bps`: the next trial, at r(1 + ε) or
    /// r(1 − ε) as its pair's order says, or, once every pair has been launched, a hold at r.
    pub fn launch(&mut self, base_bps: f64, epsilon: f64) -> (f64, Role) {
        if self.launched >= 2 * self.pairs {
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
        let mut trials = Trials { upper_first: [false, true, false], drawn: 2, pairs: 2, launched: 0 };
        let expected =
            [(9.5e6, Role::Trial(0)), (10.5e6, Role::Trial(1)), (10.5e6, Role::Trial(2)), (9.5e6, Role::Trial(3))];
        for (want_bps, want_role) in expected {
            let (rate_bps, role) = trials.launch(10e6, 0.05);
            assert_eq!(role, want_role);
            assert!((rate_bps - want_bps).abs() < 1e-6, "{rate_bps}");
        }
        // Then the sender holds r until the results are in.
        assert_eq!(trials.launch(10e6, 0.05), (10e6, Role::Hold));
        // Results are indexed by trial; each pair comes back as (upper, lower) once complete.
        let results = [Some("below"), Some("above"), Some("above"), None, None, None];
        assert_eq!(trials.pair(&results, 0), Some(("above", "below")));
        assert_eq!(trials.pair(&results, 1), None);
    }

    #[test]
    fn a_decision_of_one_pair_launches_two_trials() {
        let mut trials = Trials::draw(&mut SplitMix64::new(1), 1);
        let roles = [0, 1, 2].map(|_| trials.launch(10e6, 0.05).1);
        assert_eq!(roles, [Role::Trial(0), Role::Trial(1), Role::Hold]);
        assert_eq!(trials.launched(), 2);
    }

    #[test]
    fn a_decision_draws_once_per_pair_it_runs() {
        // Allegro's two pairs consume the stream as before Vivace's third existed.
        for pairs in 1..=3u8 {
            let mut drawn = SplitMix64::new(7);
            Trials::draw(&mut drawn, pairs);
            let mut by_hand = SplitMix64::new(7);
            (0..pairs).for_each(|_| {
                by_hand.coin();
            });
            assert_eq!(drawn.next_u64(), by_hand.next_u64(), "{pairs} pairs");
        }
    }
}
