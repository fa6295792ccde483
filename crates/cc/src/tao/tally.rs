//! What the rule optimiser needs from a flow (issue 37 §2; Remy's training, Winstein &
//! Balakrishnan, SIGCOMM 2013, §4.3–4.4: the most-used rule is improved first, and a rule is split
//! at the median of the memories that used it): per rule, in THE numbering (tree.rs), how many
//! acknowledgements used it, and a bounded sample of their memories. Kept only when asked
//! (`record=1`).
//!
//! The sample: at most `SAMPLES_PER_RULE` memories per rule per flow, thinned deterministically —
//! a rule keeps the uses numbered 0, k, 2k, … (counted from 0 within the flow), k starting at 1
//! and doubling (every other kept memory dropped) each time the sample is full. So the sample
//! is always every k-th use, evenly spread over the flow, whatever its length, and the same run
//! gives the same sample.

use super::tree::Memory;

/// Most memories kept per rule per flow.
pub const SAMPLES_PER_RULE: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct RuleTally {
    /// Per rule, the acknowledgements whose lookup landed in it.
    pub uses: Vec<u64>,
    /// Per rule, the memories of every `strides[rule]`-th use (at most `SAMPLES_PER_RULE`),
    /// `[rec_send_ewma, rec_rec_ewma, rtt_ratio, slow_rec_rec_ewma]`.
    pub memories: Vec<Vec<Memory>>,
    /// Per rule, the k of the header: the uses between two kept memories.
    strides: Vec<u64>,
}

impl RuleTally {
    /// An empty tally for `rules` rules; all the room it will use is taken here, so that
    /// recording allocates nothing per packet.
    pub fn new(rules: usize) -> Self {
        RuleTally {
            uses: vec![0; rules],
            memories: (0..rules).map(|_| Vec::with_capacity(SAMPLES_PER_RULE)).collect(),
            strides: vec![1; rules],
        }
    }

    /// Acknowledgements counted over all rules.
    pub fn total_uses(&self) -> u64 {
        self.uses.iter().sum()
    }

    pub(super) fn record(&mut self, rule: usize, memory: &Memory) {
        let n = self.uses[rule];
        self.uses[rule] += 1;
        let stride = &mut self.strides[rule];
        if !n.is_multiple_of(*stride) {
            return;
        }
        let kept = &mut self.memories[rule];
        if kept.len() == SAMPLES_PER_RULE {
            let mut i = 0;
            kept.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            *stride *= 2;
            if !n.is_multiple_of(*stride) {
                return;
            }
        }
        kept.push(*memory);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_every_kth_use_with_k_doubling_when_full() {
        let mut tally = RuleTally::new(2);
        for n in 0..300u64 {
            tally.record(1, &[n as f64, 0.0, 0.0, 0.0]);
        }
        assert_eq!(tally.uses, [0, 300]);
        // 300 uses: k = 1 held uses 0..63; at use 64 k = 2, at 128 k = 4, at 256 k = 8 (uses 0,
        // 8, …, 296: 38 memories).
        let kept: Vec<f64> = tally.memories[1].iter().map(|m| m[0]).collect();
        assert_eq!(kept, (0..300).step_by(8).map(|n| n as f64).collect::<Vec<_>>());
        assert!(tally.memories[0].is_empty());
        assert_eq!(tally.total_uses(), 300);
        // Exactly full before the first thinning.
        let mut full = RuleTally::new(1);
        (0..64).for_each(|n| full.record(0, &[n as f64; 4]));
        assert_eq!(full.memories[0].len(), SAMPLES_PER_RULE);
        full.record(0, &[64.0; 4]);
        assert_eq!(full.memories[0].len(), 33);
        assert_eq!(full.memories[0][32], [64.0; 4]);
    }
}
