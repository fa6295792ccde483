//! Tao, a RemyCC: a congestion controller that is a table of rules, each mapping a box of the
//! sender's "memory" to an action, optimised offline by Remy for a model of the networks it will
//! meet (Winstein & Balakrishnan, "TCP ex Machina: computer-generated congestion control",
//! SIGCOMM 2013, §4; Sivaraman, Winstein, Thaker & Balakrishnan, "An experimental study of the
//! learnability of congestion control", SIGCOMM 2014, whose RemyCCs the Pantheon paper ran as
//! "Tao"). This module is the controller at run time and the rule tree's file (issue 37 §1–§2);
//! training it is the Python optimiser's (python/pantheon/remy).
//!
//! The parts, with the details the papers leave to the remy project's published schema
//! (github.com/tcpexmachina/remy, protobufs/dna.proto) and released code, named as such:
//! - Memory (`MemoryTracker`), updated on every acknowledgement, in ms (the released simulator's
//!   tick is a millisecond and the trees' bounds are in its units):
//!   - `rec_send_ewma`: moving average, weight 1/8, of the interval between the send times of
//!     successively acknowledged packets (2013 §4, the memory's "send_ewma", the sender
//!     timestamps the acknowledgements echo; the schema's `Memory.rec_send_ewma`, field 21);
//!   - `rec_rec_ewma`: moving average, weight 1/8, of the interval between acknowledgements'
//!     arrivals at the sender (2013 §4, "ack_ewma"; field 22);
//!   - `rtt_ratio`: this acknowledgement's RTT over the least RTT of the flow so far, this one
//!     included (2013 §4; field 23);
//!   - `slow_rec_rec_ewma`: as `rec_rec_ewma` with weight 1/256 (the fourth signal of the 2014
//!     RemyCCs, a long-run average of the acknowledgement interval; field 24; its weight is the
//!     released code's, memory.cc).
//!
//!   All four are 0 when a flow starts and stay 0 on its first acknowledgement, which only
//!   records its times and RTT (released code, memory.cc): an average starts from 0, not from its
//!   first sample. A memory is always `[rec_send_ewma, rec_rec_ewma, rtt_ratio,
//!   slow_rec_rec_ewma]`, the schema's order (tree.rs's `AXIS_NAMES`).
//! - Lookup (tree.rs): the rule whose box holds the memory, boxes `[lower, upper)` per axis.
//! - Action, on every acknowledgement (2013 §4.2: "m", "b", "r"): the window becomes
//!   `window_multiple × window + window_increment` packets, truncated to a whole number in
//!   [0, 1 000 000] (released code, whisker.hh), and packets leave at least `intersend_ms`
//!   apart, which the driver's pacer enforces as `Decision::pacing_rate_bps` = one `mss_bytes`
//!   packet per `intersend_ms` (no pacing when it is 0).
//! - Start: the rule of the all-zero memory sets the first window (`window_increment`, from a
//!   window of 0) and spacing (released code, rat.cc's reset), before any acknowledgement.
//! - Loss and ECN marks are no signal (a RemyCC's memory has none): they are ignored.
//!
//! Deviations, each for a reason:
//! 1. The window sent to the driver is at least one packet. The original lets it reach 0 and
//!    then, at its next chance to send, looks the rule up again from a window of 0 (so the window
//!    becomes the rule's `window_increment`); here that second lookup is done at once, with the
//!    same memory (so the same rule), and a window still 0 is sent as 1: with nothing in flight
//!    no acknowledgement would ever come to open it.
//! 2. `uses` (`RuleTally`) counts acknowledgements only: the start's lookup is not one, so a
//!    flow's uses sum to its acknowledgements (the original also counts the start).
//! 3. A memory outside the root's box (a negative interval after reordering; an average past
//!    `MEMORY_MAX` ms) is moved to the box's nearest point before the lookup; the original exits
//!    ("No whisker found").
//! 4. The memory is a flow's: it starts afresh when a flow starts (a new controller), and is
//!    never reset on an idle period (Pantheon's flows are full-throttle, never idle).
//!
//! Built from a spec (registry.rs) as `tao[:tree=PATH|model=NAME][,record=1][,mss_bytes=N]`
//! (docs/cc.md); trees committed as data/tao/NAME.pb are built into the binary (build.rs) and
//! `tao` alone runs `tao-100x`. With `record=1` the controller keeps per-rule uses and memories
//! (tally.rs), returned by `pantheon-sim batch` for the optimiser.
//!
//! Cost: an acknowledgement is a multiply-add per average, a division, and a walk down the tree
//! testing each child's box in turn (a median split on four axes makes 16 children); no
//! allocation (records included: their room is taken when the controller is built).

mod tally;
mod tree;
pub mod tree_file;

pub use tally::{RuleTally, SAMPLES_PER_RULE};
pub use tree::{Body, Domain, Extras, Memory, Node, Rule, Tree, TreeError, AXES, AXIS_NAMES, MAX_DEPTH, MEMORY_MAX};

use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_MSS_BYTES};

/// Weight of a new sample in `rec_send_ewma` and `rec_rec_ewma` (2013 §4).
pub const EWMA_WEIGHT: f64 = 1.0 / 8.0;
/// Weight of a new sample in `slow_rec_rec_ewma` (released code, memory.cc).
pub const SLOW_EWMA_WEIGHT: f64 = 1.0 / 256.0;
/// Largest window, packets (released code, whisker.hh).
pub const MAX_WINDOW_PACKETS: u64 = 1_000_000;

/// The memory of one flow, updated by its acknowledgements.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MemoryTracker {
    /// `[rec_send_ewma, rec_rec_ewma, rtt_ratio, slow_rec_rec_ewma]`, ms (the ratio: none).
    memory: Memory,
    /// Send time of the packet acknowledged last, µs; `None` before the first acknowledgement.
    last_sent_us: Option<u64>,
    /// Arrival of the last acknowledgement, µs.
    last_ack_us: u64,
}

impl MemoryTracker {
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The acknowledgement, arrived at `now_us`, of a packet sent at `sent_us` with RTT `rtt_us`;
    /// `min_rtt_us` is the flow's least RTT so far, this one included (the driver's bookkeeping,
    /// `Acked::min_rtt_us`).
    pub fn on_ack(&mut self, now_us: u64, sent_us: u64, rtt_us: u64, min_rtt_us: u64) {
        let Some(last_sent_us) = self.last_sent_us else {
            self.last_sent_us = Some(sent_us);
            self.last_ack_us = now_us;
            return;
        };
        let ms = |later: u64, earlier: u64| (later as f64 - earlier as f64) / 1000.0;
        let send_gap_ms = ms(sent_us, last_sent_us);
        let ack_gap_ms = ms(now_us, self.last_ack_us);
        let m = &mut self.memory;
        m[0] = (1.0 - EWMA_WEIGHT) * m[0] + EWMA_WEIGHT * send_gap_ms;
        m[1] = (1.0 - EWMA_WEIGHT) * m[1] + EWMA_WEIGHT * ack_gap_ms;
        m[3] = (1.0 - SLOW_EWMA_WEIGHT) * m[3] + SLOW_EWMA_WEIGHT * ack_gap_ms;
        m[2] = if min_rtt_us == 0 { 1.0 } else { rtt_us as f64 / min_rtt_us as f64 };
        self.last_sent_us = Some(sent_us);
        self.last_ack_us = now_us;
    }
}

/// The window after `rule` acts on `window_packets` (the action of the header and deviation 1's
/// second lookup; the floor of one packet is the decision's).
pub fn next_window_packets(rule: &Rule, window_packets: u64) -> u64 {
    let act = |window: u64| {
        (window as f64 * rule.window_multiple + f64::from(rule.window_increment))
            .trunc()
            .clamp(0.0, MAX_WINDOW_PACKETS as f64) as u64
    };
    match act(window_packets) {
        0 => act(0),
        next => next,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaoConfig {
    pub mss_bytes: u64,
    /// Keep per-rule uses and memories (`Tao::take_tally`).
    pub record: bool,
}

impl Default for TaoConfig {
    fn default() -> Self {
        TaoConfig { mss_bytes: DEFAULT_MSS_BYTES, record: false }
    }
}

impl TaoConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = TaoConfig::default();
        Ok(TaoConfig { mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?, record: p.bool("record", d.record)? })
    }
}

/// The trees built into this binary (build.rs: data/tao/NAME.pb).
mod built_in {
    include!(concat!(env!("OUT_DIR"), "/tao_trees.rs"));
}

/// The tree `tao` alone runs.
pub const DEFAULT_TREE: &str = "tao-100x";

/// The names of the trees built in, sorted.
pub fn built_in_trees() -> impl Iterator<Item = &'static str> {
    built_in::TREES.iter().map(|&(name, _)| name)
}

/// The tree a spec names: `tree=PATH` (a tree file, tree_file.rs), `model=NAME` (one built in),
/// or neither (`DEFAULT_TREE`, when it is built in).
pub fn tree_from_params(p: &mut Params) -> Result<Tree, SpecError> {
    tree_among(p, built_in::TREES)
}

fn tree_among(p: &mut Params, trees: &[(&str, &[u8])]) -> Result<Tree, SpecError> {
    let name = match (p.text("tree"), p.text("model")) {
        (Some(_), Some(_)) => return Err(p.error("give tree=PATH or model=NAME, not both")),
        (Some(path), None) => return Tree::load(std::path::Path::new(path)).map_err(|e| SpecError(e.0)),
        (None, Some(name)) => name,
        (None, None) if trees.iter().any(|&(n, _)| n == DEFAULT_TREE) => DEFAULT_TREE,
        (None, None) => {
            return Err(p.error(format!(
                "give tree=PATH (a RemyCC rule tree; no built-in tree '{DEFAULT_TREE}' in this build)"
            )));
        }
    };
    let Some(&(_, bytes)) = trees.iter().find(|&&(n, _)| n == name) else {
        let names: Vec<&str> = trees.iter().map(|&(n, _)| n).collect();
        let known = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        return Err(p.error(format!("no built-in tree '{name}' (built in: {known}); give tree=PATH")));
    };
    // A bug rather than a user's mistake (the file was committed), but still one line.
    Tree::from_bytes(bytes).map_err(|e| p.error(format!("built-in tree '{name}': {e}")))
}

#[derive(Debug, Clone)]
pub struct Tao {
    config: TaoConfig,
    tree: Tree,
    memory: MemoryTracker,
    /// The window, whole packets (0 only when the rules make it so; deviation 1).
    window_packets: u64,
    /// Least time between two sends, ms, the current rule's.
    intersend_ms: f64,
    /// The rule of the last lookup, THE numbering.
    rule: usize,
    /// Per-rule uses and memories, when the config asks for them.
    tally: Option<RuleTally>,
}

impl Tao {
    pub fn new(config: TaoConfig, tree: Tree) -> Self {
        let memory = MemoryTracker::default();
        let rule = tree.rule_index(memory.memory());
        let first = tree.rule(rule);
        Tao {
            config,
            window_packets: next_window_packets(first, 0),
            intersend_ms: first.intersend_ms,
            rule,
            tally: config.record.then(|| RuleTally::new(tree.rules().len())),
            memory,
            tree,
        }
    }

    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    pub fn memory(&self) -> &Memory {
        self.memory.memory()
    }

    pub fn window_packets(&self) -> u64 {
        self.window_packets
    }

    pub fn intersend_ms(&self) -> f64 {
        self.intersend_ms
    }

    /// The rule of the last lookup (THE numbering).
    pub fn rule_index(&self) -> usize {
        self.rule
    }

    /// The tally kept (`record=1`); `None` when the config keeps none.
    pub fn tally(&self) -> Option<&RuleTally> {
        self.tally.as_ref()
    }

    /// The tally kept since the last call, handed over and started afresh (`record=1`); `None`
    /// when the config keeps none.
    pub fn take_tally(&mut self) -> Option<RuleTally> {
        let rules = self.tree.rules().len();
        self.tally.as_mut().map(|kept| std::mem::replace(kept, RuleTally::new(rules)))
    }
}

impl CongestionControl for Tao {
    fn name(&self) -> &'static str {
        "tao"
    }

    fn on_sent(&mut self, _e: &Sent) {}

    fn on_ack(&mut self, e: &Acked) {
        self.memory.on_ack(e.now_us, e.sent_us, e.rtt_us, e.min_rtt_us);
        let memory = self.memory.memory();
        self.rule = self.tree.rule_index(memory);
        if let Some(tally) = &mut self.tally {
            tally.record(self.rule, memory);
        }
        let rule = self.tree.rule(self.rule);
        self.window_packets = next_window_packets(rule, self.window_packets);
        self.intersend_ms = rule.intersend_ms;
    }

    fn on_loss(&mut self, _e: &Lost) {}

    fn on_congestion_mark(&mut self, _e: &Acked) {}

    fn decision(&self) -> Decision {
        let cwnd_bytes = self.window_packets.max(1) * self.config.mss_bytes;
        // One packet per intersend: mss × 8 bits over intersend_ms / 1000 s.
        let pacing_rate_bps = (self.intersend_ms > 0.0)
            .then(|| ((self.config.mss_bytes * 8) as f64 * 1000.0 / self.intersend_ms).max(1.0) as u64);
        Decision { cwnd_bytes: Some(cwnd_bytes), pacing_rate_bps, wake_at_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack, tao_fixture, FixedPath};

    fn fixture() -> Tree {
        Tree::load(std::path::Path::new(&tao_fixture())).unwrap()
    }

    /// An acknowledgement at `now_us` of a packet sent at `sent_us` (RTT the difference), in a
    /// flow whose least RTT is the first one's below, 5 ms.
    fn acked(now_us: u64, sent_us: u64) -> Acked {
        Acked { min_rtt_us: 5_000, ..ack(now_us, 0, sent_us, 1000) }
    }

    #[test]
    fn memory_by_hand() {
        let mut m = MemoryTracker::default();
        // The first acknowledgement only records its times and RTT (40 ms).
        m.on_ack(100_000, 60_000, 40_000, 40_000);
        assert_eq!(m.memory(), &[0.0; 4]);
        // Sent 1 ms after the first, arrived 2 ms after it, RTT 41 ms.
        m.on_ack(102_000, 61_000, 41_000, 40_000);
        assert_eq!(m.memory(), &[1.0 / 8.0, 2.0 / 8.0, 41.0 / 40.0, 2.0 / 256.0]);
        // Sent 2 ms later, arrived 1 ms later, RTT 40 ms: the ratio is back to 1.
        m.on_ack(103_000, 63_000, 40_000, 40_000);
        let slow = 255.0 / 256.0 * (2.0 / 256.0) + 1.0 / 256.0;
        assert_eq!(m.memory(), &[0.359375, 0.34375, 1.0, slow]);
        assert_eq!(slow, 0.011688232421875);
        // A smaller RTT is the new minimum at once: ratio 1, and the next ratio is against it.
        m.on_ack(103_000, 63_000, 20_000, 20_000);
        assert_eq!(m.memory()[2], 1.0);
        m.on_ack(104_000, 64_000, 30_000, 20_000);
        assert_eq!(m.memory()[2], 1.5);
    }

    #[test]
    fn lookup_takes_the_box_lower_inclusive_upper_exclusive() {
        let tree = fixture();
        // Rule 0: rtt_ratio in [0, 1.2); rule 1: rtt_ratio >= 1.2 and rec_rec_ewma < 1; rule 2:
        // rtt_ratio >= 1.2 and rec_rec_ewma >= 1.
        assert_eq!(tree.rules().len(), 3);
        assert_eq!(tree.rule_index(&[0.0, 0.0, 0.0, 0.0]), 0);
        assert_eq!(tree.rule_index(&[0.0, 0.0, 1.2f64.next_down(), 0.0]), 0);
        assert_eq!(tree.rule_index(&[0.0, 0.0, 1.2, 0.0]), 1);
        assert_eq!(tree.rule_index(&[5.0, 1.0f64.next_down(), 3.0, 9.0]), 1);
        assert_eq!(tree.rule_index(&[0.0, 1.0, 1.2, 0.0]), 2);
        // Outside the root's box: moved to its nearest point (deviation 3).
        assert_eq!(tree.rule_index(&[-1.0, -1.0, -1.0, -1.0]), 0);
        assert_eq!(tree.rule_index(&[0.0, 0.5, MEMORY_MAX, 0.0]), 1);
        assert_eq!(tree.rule_index(&[1e9, 1e9, 1e9, 1e9]), 2);
        assert_eq!(tree.rule_index(&[f64::NAN, 0.0, 0.0, 0.0]), 0);
        assert_eq!(
            tree.rule(2),
            &Rule { window_increment: -2, window_multiple: 0.5, intersend_ms: 2.0, generation: 2 }
        );
    }

    #[test]
    fn each_ack_moves_the_window_and_the_spacing_by_its_rule() {
        let config = TaoConfig { mss_bytes: 1000, record: true };
        let mut tao = Tao::new(config, fixture());
        // The start: the all-zero memory's rule 0 (1 × 0 + 1), one 1000-byte packet per 0.5 ms.
        let start = Decision { cwnd_bytes: Some(1000), pacing_rate_bps: Some(16_000_000), wake_at_us: None };
        assert_eq!(tao.decision(), start);
        // First ack (RTT 5 ms): the memory is still zero, rule 0: 1 × 1 + 1.
        tao.on_ack(&acked(100_000, 95_000));
        assert_eq!((tao.rule_index(), tao.window_packets()), (0, 2));
        // 2 ms later, sent 0.5 ms after the first, RTT 6.5 ms (ratio 1.3): rule 1,
        // 0.95 × 2 + 1 = 2.9, truncated to 2; one packet per 1 ms.
        tao.on_ack(&acked(102_000, 95_500));
        assert_eq!(tao.memory(), &[0.0625, 0.25, 1.3, 2.0 / 256.0]);
        assert_eq!((tao.rule_index(), tao.window_packets()), (1, 2));
        assert_eq!(tao.decision().pacing_rate_bps, Some(8_000_000));
        // 28 ms later (rec_rec_ewma 0.21875 + 3.5): rule 2, 0.5 × 2 − 2 < 0, so 0, and from 0
        // again −2, so 0: the driver gets one packet (deviation 1), one per 2 ms.
        tao.on_ack(&acked(130_000, 96_000));
        assert_eq!(tao.memory()[1], 3.71875);
        assert_eq!((tao.rule_index(), tao.window_packets()), (2, 0));
        assert_eq!(
            tao.decision(),
            Decision { cwnd_bytes: Some(1000), pacing_rate_bps: Some(4_000_000), wake_at_us: None }
        );
        tao.on_ack(&acked(131_000, 97_000));
        // Loss and marks change nothing.
        let before = tao.decision();
        tao.on_loss(&crate::testing::loss(131_500, 9, 120_000));
        tao.on_congestion_mark(&acked(131_600, 97_100));
        assert_eq!(tao.decision(), before);
        let tally = tao.take_tally().unwrap();
        assert_eq!(tally.uses, [1, 1, 2]);
        assert_eq!(tally.memories[0], [[0.0; 4]]);
        assert_eq!(tally.memories[1], [[0.0625, 0.25, 1.3, 2.0 / 256.0]]);
        assert_eq!(tally.memories[2].len(), 2);
        assert_eq!(tao.tally().unwrap().total_uses(), 0);
    }

    #[test]
    fn the_window_is_truncated_and_bounded_as_the_original_s() {
        let rule = |window_increment, window_multiple| Rule {
            window_increment,
            window_multiple,
            intersend_ms: 0.0,
            generation: 0,
        };
        assert_eq!(next_window_packets(&rule(3, 0.5), 5), 5); // 5.5 truncated
        assert_eq!(next_window_packets(&rule(0, 10.0), 200_000), MAX_WINDOW_PACKETS);
        assert_eq!(next_window_packets(&rule(4, 0.0), 0), 4);
        // From 0 again: the rule's increment, here 3.
        assert_eq!(next_window_packets(&rule(3, -1.0), 10), 3);
        // No spacing: no pacing rate, the window alone.
        let tao = Tao::new(TaoConfig::default(), Tree::single(rule(20, 1.0)));
        assert_eq!(tao.decision(), Decision { cwnd_bytes: Some(20 * 1500), pacing_rate_bps: None, wake_at_us: None });
    }

    #[test]
    fn a_flow_s_uses_sum_to_its_acknowledgements() {
        let path = FixedPath { service_us: 1000, base_rtt_us: 40_000, rtt_drift_us_per_s: 0 };
        let spec = format!("tao:tree={},record=1", tao_fixture());
        let (flow, acked) = path.run::<Tao>(&spec, 3_000_000, |_, _| {});
        let tally = flow.controller::<Tao>().unwrap().tally().unwrap();
        assert!(acked > 500, "{acked} acknowledgements");
        assert_eq!(tally.total_uses(), acked);
        assert!(tally.memories.iter().all(|m| m.len() <= SAMPLES_PER_RULE));
        // Without record=1 nothing is kept.
        let (flow, _) = path.run::<Tao>(&format!("tao:tree={}", tao_fixture()), 100_000, |_, _| {});
        assert!(flow.controller::<Tao>().unwrap().tally().is_none());
    }

    #[test]
    fn a_built_in_tree_is_chosen_by_name_and_tao_100x_is_the_default() {
        let bytes = std::fs::read(tao_fixture()).unwrap();
        let trees: &[(&str, &[u8])] = &[("tao-100x", &bytes), ("tao-other", &bytes)];
        let tree = |params: &str, trees: &[(&str, &[u8])]| {
            let mut p = Params::parse("tao", params).unwrap();
            tree_among(&mut p, trees).map_err(|e| e.0)
        };
        assert_eq!(tree("", trees), Ok(fixture()));
        assert_eq!(tree("model=tao-other", trees), Ok(fixture()));
        assert_eq!(
            tree("model=tao-1x", trees),
            Err("tao: no built-in tree 'tao-1x' (built in: tao-100x, tao-other); give tree=PATH".to_string())
        );
        assert_eq!(
            tree("", &[]),
            Err("tao: give tree=PATH (a RemyCC rule tree; no built-in tree 'tao-100x' in this build)".to_string())
        );
        let broken: &[(&str, &[u8])] = &[("tao-100x", b"")];
        assert!(tree("", broken).unwrap_err().starts_with("tao: built-in tree 'tao-100x': empty file"));
    }

    #[test]
    fn every_built_in_tree_loads() {
        for &(name, bytes) in built_in::TREES {
            assert!(Tree::from_bytes(bytes).is_ok(), "data/tao/{name}.pb does not load");
        }
    }
}
