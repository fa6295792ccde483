//! Independent (Bernoulli) per-packet loss, as in Mahimahi's `mm-loss` and the Pantheon paper's
//! five-parameter emulator (§4: "a stochastic loss rate"). Seeded, so a run can be reproduced.

use crate::rng::Rng;

#[derive(Debug, Clone)]
pub struct Loss {
    /// Probability that any one packet is dropped, in [0, 1].
    probability: f64,
    rng: Rng,
}

impl Loss {
    pub fn new(probability: f64, seed: u64) -> Self {
        assert!((0.0..=1.0).contains(&probability), "loss probability {probability} outside [0, 1]");
        Loss { probability, rng: Rng::new(seed) }
    }

    /// Decides the fate of the next packet: `true` if it is dropped.
    pub fn drops_next(&mut self) -> bool {
        // Draw even when p is 0 or 1 so that the random stream does not depend on p's value.
        self.rng.next_f64() < self.probability
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extremes_are_exact() {
        let mut never = Loss::new(0.0, 1);
        let mut always = Loss::new(1.0, 1);
        assert!((0..10_000).all(|_| !never.drops_next()));
        assert!((0..10_000).all(|_| always.drops_next()));
    }

    #[test]
    fn rate_is_within_binomial_bounds() {
        let mut loss = Loss::new(0.1, 42);
        let n = 100_000;
        let dropped = (0..n).filter(|_| loss.drops_next()).count() as f64;
        // 99.9% interval: p ± 3.3·sqrt(p(1-p)/n) = 0.1 ± 0.0031.
        assert!((dropped / n as f64 - 0.1).abs() < 0.0031, "dropped {dropped}");
    }
}
