//! Sprout's stochastic model of a cellular link, its Bayesian rate filter and its cautious
//! delivery forecast (Winstein, Sivaraman & Balakrishnan, "Stochastic Forecasts Achieve High
//! Throughput and Low Delay over Cellular Networks", NSDI 2013, §3).
//!
//! The model (§3.1): packets leave the link as a Poisson process of rate λ (packets/s), and λ
//! itself wanders as Brownian motion of volatility σ (packets/s per √s). λ = 0 is an outage and
//! is "sticky": the rate leaves it only at the escape rate λz (per second). The receiver (here,
//! whoever counts the arrivals) keeps a probability distribution over λ, discretized into bins
//! from 0 to a maximum rate, and every tick τ:
//! - evolves it (§3.2): each bin's mass spreads as a Gaussian of standard deviation σ√τ, the
//!   mass that would fall below the first positive bin lands in the outage bin, the mass above the
//!   top bin stays in the top bin; the outage bin keeps its mass with probability e^(−λz·τ) and
//!   otherwise releases it as a diffusion from 0 (a half-Gaussian over the positive bins). All of
//!   it is one transition matrix, computed once in `new`;
//! - observes the number k of packets that arrived in the tick (§3.2): each bin is weighted by
//!   the Poisson likelihood P(k | λτ) and the distribution renormalized. When the link may have
//!   been idle for part of the tick (its queue ran empty), k says only that the link could
//!   deliver at least k packets, and the weight is the tail P(K ≥ k | λτ) instead (a censored
//!   observation; see `mod.rs` for when a tick counts as censored and why);
//! - forecasts (§3.3): for each horizon of 1..8 ticks, the cumulative number of deliveries that
//!   will be exceeded with 95% probability — the 5th percentile of the predictive distribution,
//!   which mixes, over the current distribution of λ, the future evolution of λ and the Poisson
//!   deliveries. As in the paper, the per-rate predictive distributions are precomputed (in
//!   `new`, by a backward recursion over ticks: G_h(λ, c) = Σ_λ' T(λ→λ') Σ_k Pois(k; λ'τ)
//!   G_{h−1}(λ', c−k), G_0 = 1), so a forecast is a weighted sum and a binary search.
//!
//! Constants (§3, "Sprout's parameters"): σ = 200 packets/s per √s, λz = 1 /s, 256 bins from 0
//! to 1000 packets/s, τ = 20 ms, 8-tick (160 ms) forecast, 5th percentile. The normal CDF uses
//! Abramowitz & Stegun 7.1.26 (error below 1.5·10⁻⁷), far finer than the bins.
//!
//! Nothing here allocates after `new`.

/// Ticks the forecast looks ahead (§3.3: 160 ms at τ = 20 ms).
pub const FORECAST_TICKS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkModelConfig {
    /// The largest rate the filter can believe, packets/s (the top bin).
    pub max_rate_pps: f64,
    /// Number of rate bins from 0 to `max_rate_pps`, the first being the outage.
    pub bins: usize,
    pub tick_us: u64,
    /// σ: Brownian-motion volatility of the rate, packets/s per √s.
    pub volatility_pps_per_sqrt_s: f64,
    /// λz: rate of leaving an outage, per second.
    pub outage_escape_per_s: f64,
    /// The forecast's percentile, as a probability (0.05: deliveries exceeded with 95% chance).
    pub quantile: f64,
}

impl Default for LinkModelConfig {
    fn default() -> Self {
        LinkModelConfig {
            max_rate_pps: 1000.0,
            bins: 256,
            tick_us: 20_000,
            volatility_pps_per_sqrt_s: 200.0,
            outage_escape_per_s: 1.0,
            quantile: 0.05,
        }
    }
}

/// The filter's belief about the link rate, and the forecast tables.
#[derive(Debug, Clone)]
pub struct LinkModel {
    config: LinkModelConfig,
    /// λ of each bin, packets/s; bin 0 is the outage (λ = 0).
    rates_pps: Box<[f64]>,
    /// Row-major `bins × bins`: P(λ next tick = bin j | λ now = bin i) at `[i·bins + j]`.
    transition: Box<[f64]>,
    /// Per row, the columns outside `[band_lo, band_hi)` are below 10⁻¹⁵ and skipped.
    band_lo: Box<[usize]>,
    band_hi: Box<[usize]>,
    posterior: Box<[f64]>,
    scratch: Box<[f64]>,
    /// Largest cumulative count tabulated: the mean deliveries of the top bin over the horizon.
    max_count: usize,
    /// `[h][i][c]`, h = 0..FORECAST_TICKS−1 for horizons of h+1 ticks: P(deliveries over the
    /// horizon ≤ c | λ now = bin i), c = 0..=max_count.
    cdf: Box<[f32]>,
    /// `[h][i]`: expected deliveries over h+1 ticks given λ now = bin i.
    mean_deliveries: Box<[f64]>,
}

impl LinkModel {
    pub fn new(config: LinkModelConfig) -> Self {
        let n = config.bins;
        assert!(n >= 2, "the link model needs at least two bins");
        let tau_s = config.tick_us as f64 / 1e6;
        let step_pps = config.max_rate_pps / (n - 1) as f64;
        let rates_pps: Box<[f64]> = (0..n).map(|i| i as f64 * step_pps).collect();
        let transition = transition_matrix(&config, &rates_pps);
        let mut band_lo = vec![0; n].into_boxed_slice();
        let mut band_hi = vec![n; n].into_boxed_slice();
        for i in 0..n {
            let row = &transition[i * n..(i + 1) * n];
            band_lo[i] = row.iter().position(|&p| p > 1e-15).unwrap_or(0);
            band_hi[i] = row.iter().rposition(|&p| p > 1e-15).map_or(n, |j| j + 1);
        }
        let max_count = (config.max_rate_pps * tau_s * FORECAST_TICKS as f64).ceil() as usize + 1;
        let mut model = LinkModel {
            config,
            rates_pps,
            transition,
            band_lo,
            band_hi,
            posterior: vec![1.0 / n as f64; n].into_boxed_slice(),
            scratch: vec![0.0; n].into_boxed_slice(),
            max_count,
            cdf: Vec::new().into_boxed_slice(),
            mean_deliveries: vec![0.0; FORECAST_TICKS * n].into_boxed_slice(),
        };
        model.tabulate_forecasts();
        model
    }

    pub fn config(&self) -> &LinkModelConfig {
        &self.config
    }

    /// The backward recursion of the header: per starting rate, the distribution of cumulative
    /// deliveries over 1..FORECAST_TICKS ticks, and its mean.
    fn tabulate_forecasts(&mut self) {
        let n = self.config.bins;
        let width = self.max_count + 1;
        let tau_s = self.config.tick_us as f64 / 1e6;
        let mut cdf = vec![0.0f32; FORECAST_TICKS * n * width];
        let mut previous = vec![1.0f64; n * width];
        let mut after_count = vec![0.0f64; n * width];
        let mut pmf = vec![0.0f64; width];
        let mut previous_mean = vec![0.0f64; n];
        for h in 0..FORECAST_TICKS {
            // Deliveries in the next tick at rate λ', then the rest of the horizon from λ'.
            for j in 0..n {
                let mu = self.rates_pps[j] * tau_s;
                poisson_pmf(mu, &mut pmf);
                // Counts whose probability is below 10⁻¹⁶ change no tabulated value.
                let k_lo = pmf.iter().position(|&p| p > 1e-16).unwrap_or(0);
                let k_hi = pmf.iter().rposition(|&p| p > 1e-16).map_or(0, |k| k + 1);
                let from = &previous[j * width..(j + 1) * width];
                let to = &mut after_count[j * width..(j + 1) * width];
                for c in 0..width {
                    to[c] = (k_lo..k_hi.min(c + 1)).map(|k| pmf[k] * from[c - k]).sum();
                }
            }
            let mut current = vec![0.0f64; n * width];
            for i in 0..n {
                let mut mean = 0.0;
                for j in self.band_lo[i]..self.band_hi[i] {
                    let p = self.transition[i * n + j];
                    mean += p * (self.rates_pps[j] * tau_s + previous_mean[j]);
                    let src = &after_count[j * width..(j + 1) * width];
                    let dst = &mut current[i * width..(i + 1) * width];
                    for c in 0..width {
                        dst[c] += p * src[c];
                    }
                }
                self.mean_deliveries[h * n + i] = mean;
                for c in 0..width {
                    cdf[(h * n + i) * width + c] = current[i * width + c].min(1.0) as f32;
                }
            }
            previous_mean.copy_from_slice(&self.mean_deliveries[h * n..(h + 1) * n]);
            previous = current;
        }
        self.cdf = cdf.into_boxed_slice();
    }

    /// Spreads the belief over one tick of Brownian motion and outage escape (§3.2).
    pub fn evolve(&mut self) {
        let n = self.config.bins;
        self.scratch.fill(0.0);
        for i in 0..n {
            let p = self.posterior[i];
            if p < 1e-300 {
                continue;
            }
            let (lo, hi) = (self.band_lo[i], self.band_hi[i]);
            let row = &self.transition[i * n + lo..i * n + hi];
            for (slot, t) in self.scratch[lo..hi].iter_mut().zip(row) {
                *slot += p * t;
            }
        }
        self.posterior.copy_from_slice(&self.scratch);
    }

    /// Weighs the belief by the likelihood of `count` arrivals in one tick (§3.2); `censored`:
    /// the link may have idled, so `count` is only a lower bound on what it could deliver.
    pub fn observe(&mut self, count: u64, censored: bool) {
        let tau_s = self.config.tick_us as f64 / 1e6;
        let ln_count_factorial: f64 = (2..=count).map(|j| (j as f64).ln()).sum();
        if censored {
            for i in 0..self.config.bins {
                self.posterior[i] *= poisson_tail(self.rates_pps[i] * tau_s, count, ln_count_factorial);
            }
        } else {
            // Log-likelihoods relative to the largest, so that no observation underflows all bins.
            let mut best = f64::NEG_INFINITY;
            for i in 0..self.config.bins {
                let ll = poisson_ln_pmf(self.rates_pps[i] * tau_s, count, ln_count_factorial);
                self.scratch[i] = ll;
                if self.posterior[i] > 0.0 {
                    best = best.max(ll);
                }
            }
            if best == f64::NEG_INFINITY {
                // The belief ruled out every rate that could explain the count: start from a
                // flat prior rather than from nothing.
                self.posterior.fill(1.0);
                best = self.scratch.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            }
            for i in 0..self.config.bins {
                self.posterior[i] *= (self.scratch[i] - best).exp();
            }
        }
        self.normalize();
    }

    /// One tick: evolve, then observe.
    pub fn tick(&mut self, count: u64, censored: bool) {
        self.evolve();
        self.observe(count, censored);
    }

    fn normalize(&mut self) {
        let total: f64 = self.posterior.iter().sum();
        if total > 0.0 && total.is_finite() {
            self.posterior.iter_mut().for_each(|p| *p /= total);
        } else {
            // Every bin ruled out (only a count far above the model's top rate does this): the
            // top bin is the closest the model can come.
            self.posterior.fill(0.0);
            self.posterior[self.config.bins - 1] = 1.0;
        }
    }

    /// The mean of the belief, packets/s.
    pub fn mean_rate_pps(&self) -> f64 {
        self.posterior.iter().zip(self.rates_pps.iter()).map(|(p, r)| p * r).sum()
    }

    /// The probability the link is in an outage now.
    pub fn outage_probability(&self) -> f64 {
        self.posterior[0]
    }

    /// The cautious forecast (§3.3): `out[h]` = the cumulative deliveries over the next h+1
    /// ticks that are exceeded with probability 1 − quantile.
    pub fn cautious_forecast(&self, out: &mut [f64; FORECAST_TICKS]) {
        for (h, slot) in out.iter_mut().enumerate() {
            *slot = self.quantile_deliveries(h) as f64;
        }
    }

    /// The expected cumulative deliveries over the next h+1 ticks, `out[h]`.
    pub fn mean_forecast(&self, out: &mut [f64; FORECAST_TICKS]) {
        let n = self.config.bins;
        for (h, slot) in out.iter_mut().enumerate() {
            *slot = (0..n).map(|i| self.posterior[i] * self.mean_deliveries[h * n + i]).sum();
        }
    }

    /// The smallest count c whose predictive CDF over h+1 ticks reaches the quantile.
    fn quantile_deliveries(&self, h: usize) -> usize {
        let (n, width) = (self.config.bins, self.max_count + 1);
        let cdf_at = |c: usize| -> f64 {
            (0..n)
                .filter(|&i| self.posterior[i] > 1e-12)
                .map(|i| self.posterior[i] * self.cdf[(h * n + i) * width + c] as f64)
                .sum()
        };
        let (mut lo, mut hi) = (0usize, self.max_count);
        if cdf_at(hi) < self.config.quantile {
            return hi;
        }
        while lo < hi {
            let mid = (lo + hi) / 2;
            if cdf_at(mid) >= self.config.quantile {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }
}

/// The evolution of §3.2 as a matrix (see the header).
fn transition_matrix(config: &LinkModelConfig, rates_pps: &[f64]) -> Box<[f64]> {
    let n = rates_pps.len();
    let tau_s = config.tick_us as f64 / 1e6;
    let sd = config.volatility_pps_per_sqrt_s * tau_s.sqrt();
    let half = rates_pps[1] / 2.0;
    let mut t = vec![0.0; n * n];
    // Where mass starting at `from` lands after one tick of Gaussian diffusion: below the first
    // positive bin into the outage bin, above the top into the top bin.
    let diffuse = |from: f64, row: &mut [f64]| {
        for (j, slot) in row.iter_mut().enumerate() {
            let lower = if j == 0 { f64::NEG_INFINITY } else { rates_pps[j] - half };
            let upper = if j == n - 1 { f64::INFINITY } else { rates_pps[j] + half };
            *slot = normal_cdf((upper - from) / sd) - normal_cdf((lower - from) / sd);
        }
    };
    for i in 1..n {
        diffuse(rates_pps[i], &mut t[i * n..(i + 1) * n]);
    }
    // The outage: stay with e^(−λz·τ), else escape as a diffusion from 0 over the positive bins.
    let stay = (-config.outage_escape_per_s * tau_s).exp();
    let mut escape = vec![0.0; n];
    diffuse(0.0, &mut escape);
    let positive: f64 = escape[1..].iter().sum();
    t[0] = stay;
    for j in 1..n {
        t[j] = (1.0 - stay) * escape[j] / positive;
    }
    // Rows sum to 1 up to the CDF approximation's error; make them exact.
    for i in 0..n {
        let row = &mut t[i * n..(i + 1) * n];
        let sum: f64 = row.iter().sum();
        row.iter_mut().for_each(|p| *p /= sum);
    }
    t.into_boxed_slice()
}

/// Standard normal CDF, Abramowitz & Stegun 7.1.26 for erf.
fn normal_cdf(z: f64) -> f64 {
    if z == f64::INFINITY {
        return 1.0;
    }
    if z == f64::NEG_INFINITY {
        return 0.0;
    }
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

fn poisson_ln_pmf(mu: f64, k: u64, ln_k_factorial: f64) -> f64 {
    if mu == 0.0 {
        return if k == 0 { 0.0 } else { f64::NEG_INFINITY };
    }
    k as f64 * mu.ln() - mu - ln_k_factorial
}

/// P(K ≥ k) for K ~ Poisson(mu).
fn poisson_tail(mu: f64, k: u64, ln_k_factorial: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if mu == 0.0 {
        return 0.0;
    }
    if (k as f64) <= mu {
        // The tail is large: 1 − P(K < k) loses no precision.
        let mut term = (-mu).exp();
        let mut below = 0.0;
        for j in 0..k {
            below += term;
            term *= mu / (j + 1) as f64;
        }
        (1.0 - below).max(0.0)
    } else {
        // The tail is small: sum it from P(K = k) up, each term smaller than the last.
        let mut term = poisson_ln_pmf(mu, k, ln_k_factorial).exp();
        let mut tail = 0.0;
        let mut j = k;
        while term > tail * 1e-16 && term > 0.0 {
            tail += term;
            j += 1;
            term *= mu / j as f64;
        }
        tail
    }
}

/// Fills `out[k]` with P(K = k) for K ~ Poisson(mu), k = 0..out.len().
fn poisson_pmf(mu: f64, out: &mut [f64]) {
    out.fill(0.0);
    if mu == 0.0 {
        out[0] = 1.0;
        return;
    }
    let mut ln_factorial = 0.0;
    for (k, slot) in out.iter_mut().enumerate() {
        if k > 1 {
            ln_factorial += (k as f64).ln();
        }
        *slot = (k as f64 * mu.ln() - mu - ln_factorial).exp();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_rows_are_distributions_and_diffuse_by_sigma_root_tau() {
        let m = LinkModel::new(LinkModelConfig::default());
        let n = 256;
        for i in 0..n {
            let sum: f64 = m.transition[i * n..(i + 1) * n].iter().sum();
            assert!((sum - 1.0).abs() < 1e-12);
        }
        // From 500 packets/s, one tick spreads the rate by σ√τ = 200·√0.02 = 28.3 packets/s.
        let i = 500 * 255 / 1000 + 1; // 501.96 packets/s
        let row = &m.transition[i * n..(i + 1) * n];
        let mean: f64 = row.iter().zip(m.rates_pps.iter()).map(|(p, r)| p * r).sum();
        let var: f64 = row.iter().zip(m.rates_pps.iter()).map(|(p, r)| p * (r - mean).powi(2)).sum();
        assert!((mean - m.rates_pps[i]).abs() < 0.5, "{mean}");
        // Binning adds (bin width)²/12 = 3.92²/12 to the variance.
        assert!((var.sqrt() - (28.28f64.powi(2) + 3.92f64.powi(2) / 12.0).sqrt()).abs() < 0.5, "{}", var.sqrt());
        // The outage keeps e^(−1·0.02) = 98.02% of its mass per tick.
        assert!((m.transition[0] - (-0.02f64).exp()).abs() < 1e-12);
    }

    #[test]
    fn filter_converges_to_a_constant_poisson_rate() {
        // 600 packets/s = 12 per tick. A deterministic sequence whose per-tick counts have mean
        // 12 and Poisson-like spread (9..15).
        let mut m = LinkModel::new(LinkModelConfig::default());
        let counts = [12, 9, 15, 11, 13, 10, 14, 12, 12, 8, 16, 12];
        for t in 0..250 {
            m.tick(counts[t % counts.len()], false);
        }
        let mean = m.mean_rate_pps();
        assert!((mean - 600.0).abs() < 60.0, "posterior mean {mean} packets/s");
        assert!(m.outage_probability() < 1e-6);
    }

    #[test]
    fn ticks_without_arrivals_lead_to_the_outage_state() {
        let mut m = LinkModel::new(LinkModelConfig::default());
        for _ in 0..100 {
            m.tick(10, false);
        }
        // A busy link delivering nothing. The belief cannot jump from 500 packets/s to 0: the
        // zero counts push it down as fast as the diffusion lets it (σ√τ per tick, sharpened by
        // the likelihood), so the outage becomes certain within 8 ticks (160 ms).
        for _ in 0..3 {
            m.tick(0, false);
        }
        assert!(m.outage_probability() < 0.1, "{}", m.outage_probability());
        for _ in 3..8 {
            m.tick(0, false);
        }
        assert!(m.outage_probability() > 0.9, "{}", m.outage_probability());
        let mut f = [0.0; FORECAST_TICKS];
        m.cautious_forecast(&mut f);
        assert_eq!(f, [0.0; FORECAST_TICKS]);
    }

    #[test]
    fn censored_empty_ticks_carry_no_information() {
        let mut m = LinkModel::new(LinkModelConfig::default());
        for _ in 0..100 {
            m.tick(10, false);
        }
        let before = m.mean_rate_pps();
        m.observe(0, true);
        assert!((m.mean_rate_pps() - before).abs() < 1e-9);
        // A censored count rules out the rates that could not deliver it, and nothing above.
        m.observe(20, true);
        assert!(m.mean_rate_pps() > before);
    }

    #[test]
    fn cautious_forecast_is_below_the_mean_and_grows_with_the_horizon() {
        let mut m = LinkModel::new(LinkModelConfig::default());
        for _ in 0..200 {
            m.tick(10, false);
        }
        let (mut cautious, mut mean) = ([0.0; FORECAST_TICKS], [0.0; FORECAST_TICKS]);
        m.cautious_forecast(&mut cautious);
        m.mean_forecast(&mut mean);
        for h in 0..FORECAST_TICKS {
            assert!(cautious[h] <= mean[h], "{cautious:?} vs {mean:?}");
            if h > 0 {
                assert!(cautious[h] >= cautious[h - 1]);
            }
        }
        // 500 packets/s: 80 packets expected in 160 ms (within rounding of the bins), and the
        // 5th percentile of at least Poisson(80) spread lies ≥ 1.645·√80 ≈ 15 below.
        assert!((mean[7] - 80.0).abs() < 3.0, "{mean:?}");
        assert!(cautious[7] <= 80.0 - 14.0 && cautious[7] >= 50.0, "{cautious:?}");
    }

    #[test]
    fn poisson_tails_match_hand_values() {
        // P(K ≥ 1 | mu = 1) = 1 − e^(−1); P(K ≥ 3 | mu = 1) = 1 − 2.5·e^(−1).
        let e = (-1.0f64).exp();
        assert!((poisson_tail(1.0, 1, 0.0) - (1.0 - e)).abs() < 1e-12);
        assert!((poisson_tail(1.0, 3, 6f64.ln()) - (1.0 - 2.5 * e)).abs() < 1e-12);
        assert!((normal_cdf(1.0) - 0.841_344_746).abs() < 2e-7);
    }
}
