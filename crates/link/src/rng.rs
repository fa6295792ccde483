//! A small seeded pseudo-random generator (xoshiro256**, Blackman & Vigna, "Scrambled linear
//! pseudorandom number generators", ACM TOMS 2021), seeded through SplitMix64 as its authors
//! recommend. Written here rather than taken from a crate so that a seed reproduces the same
//! losses and Poisson deliveries across dependency upgrades: runs are part of the research record.

/// Deterministic generator; the same seed always gives the same sequence.
#[derive(Debug, Clone)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let mut next = || {
            sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng { state: [next(), next(), next(), next()] }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1), 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponentially distributed with the given mean (inverse-CDF sampling).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        // 1 - U lies in (0, 1], so the logarithm is finite.
        -mean * (1.0 - self.next_f64()).ln()
    }

    /// Normally distributed with the given mean and standard deviation (Box & Muller, "A note on
    /// the generation of random normal deviates", Ann. Math. Statist. 29(2), 1958: one of the
    /// pair, from two uniforms).
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let radius = (-2.0 * (1.0 - self.next_f64()).ln()).sqrt();
        mean + sd * radius * (std::f64::consts::TAU * self.next_f64()).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
    }

    #[test]
    fn normal_has_its_mean_and_spread() {
        let mut rng = Rng::new(3);
        let v: Vec<f64> = (0..200_000).map(|_| rng.normal(4.7, 1.4)).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        assert!((mean - 4.7).abs() < 0.01, "mean {mean}");
        assert!((sd - 1.4).abs() < 0.01, "sd {sd}");
        // A normal's quartiles lie 0.674 standard deviations either side of its mean.
        let below = v.iter().filter(|&&x| x < 4.7 - 0.674 * 1.4).count() as f64 / v.len() as f64;
        assert!((below - 0.25).abs() < 0.005, "below the first quartile: {below}");
    }

    #[test]
    fn exponential_mean_and_deviation() {
        let mut rng = Rng::new(1);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| rng.exponential(10.0)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 10.0).abs() < 0.1, "mean {mean}");
        assert!((var.sqrt() - 10.0).abs() < 0.15, "sd {}", var.sqrt());
    }
}
