//! Percentiles as the analysis defines them (python/pantheon/analysis/metrics.py `nearest_rank`):
//! the p-th percentile of n values is the ⌈p/100 · n⌉-th smallest (at least the first), so a
//! test's "p95 queueing delay" is the figure `pantheon analyze` would report for the same packets.
//! One file for every Rust test: the integration tests reach it as `support::percentile`, the
//! unit tests through src/testing.rs.

/// The `percent`-th percentile of `values` by nearest rank. Panics on an empty slice or a NaN.
pub fn percentile<T: Copy + PartialOrd>(values: &[T], percent: u32) -> T {
    assert!(!values.is_empty(), "the percentile of no values");
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).expect("values are ordered (no NaN)"));
    let n = sorted.len() as u64;
    let rank = (u64::from(percent) * n).div_ceil(100).max(1);
    sorted[rank as usize - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_is_the_ceiling_of_p_n() {
        let values: Vec<u64> = (1..=100).collect();
        // ⌈0.95 · 100⌉ = 95: the 95th smallest.
        assert_eq!(percentile(&values, 95), 95);
        // ⌈0.95 · 10⌉ = 10: the largest of ten.
        assert_eq!(percentile(&[10u64, 9, 8, 7, 6, 5, 4, 3, 2, 1], 95), 10);
        // ⌈0.95 · 21⌉ = 20; order does not matter.
        assert_eq!(percentile(&(1..=21).rev().collect::<Vec<u64>>(), 95), 20);
        assert_eq!(percentile(&[3.5, 1.5], 50), 1.5);
        assert_eq!(percentile(&[7u64], 0), 7);
    }
}
