//! Token-bucket policer, one of the Pantheon paper's pathological emulators (§4.2): traffic above
//! a contracted rate is dropped at once rather than queued, as ISPs police with a token bucket
//! (Flach et al., "An Internet-wide analysis of traffic policing", SIGCOMM 2016).
//!
//! The bucket holds at most `burst_bytes` tokens and fills at `rate_mbps`; a packet of `n` bytes
//! passes if at least `n` tokens are present (and takes them), otherwise it is dropped. The bucket
//! starts full, so a flow may send one burst at line rate before the policer bites.

#[derive(Debug, Clone)]
pub struct Policer {
    /// Fill rate in bits per microsecond (numerically equal to Mbit/s).
    rate_bits_per_us: f64,
    /// Bucket depth in bits.
    burst_bits: f64,
    /// Tokens currently in the bucket, in bits.
    tokens_bits: f64,
    /// Time of the last refill.
    last_us: u64,
}

impl Policer {
    pub fn new(rate_mbps: f64, burst_bytes: u64) -> Self {
        assert!(rate_mbps > 0.0, "policer rate must be positive");
        let burst_bits = burst_bytes as f64 * 8.0;
        Policer { rate_bits_per_us: rate_mbps, burst_bits, tokens_bits: burst_bits, last_us: 0 }
    }

    /// Whether a packet of `size_bytes` arriving at `now_us` conforms (passes).
    pub fn admits(&mut self, now_us: u64, size_bytes: u32) -> bool {
        let elapsed_us = now_us.saturating_sub(self.last_us) as f64;
        self.last_us = self.last_us.max(now_us);
        self.tokens_bits = (self.tokens_bits + elapsed_us * self.rate_bits_per_us).min(self.burst_bits);
        let need_bits = size_bytes as f64 * 8.0;
        if self.tokens_bits >= need_bits {
            self.tokens_bits -= need_bits;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        // 12 Mbit/s = 1500 bytes per millisecond; bucket of two packets.
        let mut p = Policer::new(12.0, 3000);
        assert!(p.admits(0, 1500));
        assert!(p.admits(0, 1500));
        assert!(!p.admits(0, 1500), "bucket empty after the burst");
        assert!(!p.admits(999, 1500), "999 us refills 1498.5 bytes only");
        assert!(p.admits(1000, 1500), "1 ms refills one packet");
        // Long idle: the bucket caps at the burst size.
        assert!(p.admits(1_000_000, 1500));
        assert!(p.admits(1_000_000, 1500));
        assert!(!p.admits(1_000_000, 1500));
    }

    #[test]
    fn long_run_rate_equals_contract() {
        // Offer 24 Mbit/s for one second: 12 Mbit/s (plus the burst) passes.
        let mut p = Policer::new(12.0, 15_000);
        let passed: u64 = (0..2000u64).filter(|i| p.admits(i * 500, 1500)).count() as u64 * 1500 * 8;
        let expected = 12_000_000 + 15_000 * 8;
        assert!((passed as i64 - expected).abs() <= 1500 * 8, "passed {passed} bits");
    }
}
