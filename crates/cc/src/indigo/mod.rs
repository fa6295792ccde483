//! Indigo (Yan et al., "Pantheon: the training ground for Internet congestion-control research",
//! USENIX ATC 2018, §6): a congestion controller "extracted from data" — an LSTM trained by
//! imitation learning (DAgger) to move the window the way an oracle that knows the path would.
//! This module is the controller at run time; training it is issue 19 §2.
//!
//! The rules (the paper's §6, with the details the paper leaves to its released code,
//! StanfordSNR/indigo env/sender.py and dagger/run_sender.py, named as such):
//! - On every acknowledgement the observed state is updated (state.rs): averages of queueing
//!   delay, delivery rate and sending rate.
//! - Every 10 ms — on the first acknowledgement at least 10 ms after the step began; the first
//!   step begins at the first acknowledgement (released code) — the network (lstm.rs) reads the
//!   averages, the window and its previous action (one-hot; before the first decision the last
//!   action, ×2, as in the released code), and its highest-scoring action moves the window:
//!   ÷2, −10, +0, +10, ×2 packets (`ACTION_NAMES`), never below 2 packets. The LSTM's state is
//!   carried from decision to decision and zero at the flow's start.
//! - Loss is no signal to Indigo (the released sender has none): a loss only updates the
//!   book-keeping of what is in flight.
//! - The window starts at 10 packets (the released code's and RFC 6928's) and is a number of
//!   packets that ÷2 can make fractional; the driver gets it rounded up to whole packets, which is
//!   what the released sender's test "packets in flight < cwnd" allows.
//!
//! Built from a spec (registry.rs) as `indigo[:weights=PATH|model=NAME][,policy=...]
//! [,oracle_cwnd_packets=X][,seed=S][,record=1][,halve_at_decision=K]` (docs/cc.md); trained
//! weights committed in data/indigo/ are built into the binary (build.rs) and `indigo` alone runs
//! the model `indigo`. Besides the network's policy, two more pick the actions
//! for training and baselines — `expert`, the action that brings the window closest to an oracle's
//! (`expert_action`; the expert DAgger imitates), and `random`, uniform from a seeded generator —
//! while the network still steps on every decision, so its state is what it would be. With
//! `record=1` the controller keeps one record per decision (records.rs), for the trainer;
//! `halve_at_decision=K` makes decision K a ÷2 whatever the policy (training's recovery episodes,
//! docs/indigo.md).
//!
//! Cost (`flock /work/bench.lock cargo test --release -p pantheon-cc --test indigo -- --ignored
//! --nocapture decision_cost`: medians of 31 timings of 10 000 calls, 3 runs, on this project's
//! shared 2-core build machine): a decision takes 2.7–3.1 µs with 32 units (the sigmoids and
//! tanhs dominate) and 16–19 µs with 128; a packet's send and acknowledgement add 10–11 ns of
//! state update. At 100 Mbit/s (100 decisions and ~8 300 acknowledgements of 1500-byte packets
//! per second) that is 0.04% of a core with 32 units, 0.2% with 128.

mod lstm;
mod records;
mod state;
mod weights;

pub use lstm::Lstm;
pub use records::Records;
pub use state::{Features, INPUTS};
pub use weights::{Weights, WeightsError, TENSOR_NAMES};

use crate::params::{Params, SpecError};
use crate::pcc::monitor::SplitMix64;
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS, DEFAULT_MSS_BYTES};

/// The actions, in the order of the network's scores.
pub const ACTIONS: usize = 5;
pub const ACTION_NAMES: [&str; ACTIONS] = ["/2", "-10", "+0", "+10", "*2"];
/// The index of "+0" in `ACTION_NAMES`.
pub const KEEP_ACTION: usize = 2;
/// The smallest window, packets.
pub const MIN_CWND_PACKETS: f64 = 2.0;

/// The window after `action` (an index into `ACTION_NAMES`) on `cwnd_packets`.
pub fn apply_action(cwnd_packets: f64, action: usize) -> f64 {
    let next = match action {
        0 => cwnd_packets / 2.0,
        1 => cwnd_packets - 10.0,
        2 => cwnd_packets,
        3 => cwnd_packets + 10.0,
        _ => cwnd_packets * 2.0,
    };
    next.max(MIN_CWND_PACKETS)
}

/// The expert's action (the paper's §6 oracle, as its released code's expert picks it): the one
/// that brings `cwnd_packets` closest to `oracle_cwnd_packets`; of those equally close, the one
/// that changes the window least, then "+0", then the first in `ACTION_NAMES` (equal results
/// only happen at the floor).
pub fn expert_action(cwnd_packets: f64, oracle_cwnd_packets: f64) -> usize {
    let cost = |action: usize| {
        let next = apply_action(cwnd_packets, action);
        ((next - oracle_cwnd_packets).abs(), (next - cwnd_packets).abs(), action != KEEP_ACTION)
    };
    (0..ACTIONS).min_by(|&a, &b| cost(a).partial_cmp(&cost(b)).expect("windows are finite")).expect("five actions")
}

/// Who picks each decision's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The network's highest score.
    Network,
    /// `expert_action` towards `IndigoConfig::oracle_cwnd_packets` (which it requires).
    Expert,
    /// Uniform over the actions, from a generator seeded with `IndigoConfig::seed`.
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IndigoConfig {
    pub mss_bytes: u64,
    pub initial_cwnd_packets: u64,
    /// Time between decisions, µs.
    pub step_us: u64,
    pub policy: Policy,
    /// The oracle's window, packets: labels every decision with the expert's action.
    pub oracle_cwnd_packets: Option<f64>,
    /// Seed of `Policy::Random`'s generator.
    pub seed: u64,
    /// Keep one record per decision (`Indigo::take_records`).
    pub record: bool,
    /// The decision (counted from 0) whose action is ÷2 whatever the policy picks: training's
    /// rollouts (docs/indigo.md, "DAgger") put the network below the oracle's window after it has
    /// seen the path, a state its own start-up may reach but a rollout from it rarely does.
    pub halve_at_decision: Option<u64>,
}

impl Default for IndigoConfig {
    fn default() -> Self {
        IndigoConfig {
            mss_bytes: DEFAULT_MSS_BYTES,
            initial_cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS,
            step_us: 10_000,
            policy: Policy::Network,
            oracle_cwnd_packets: None,
            seed: 1,
            record: false,
            halve_at_decision: None,
        }
    }
}

impl IndigoConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = IndigoConfig::default();
        let policy = match p.text("policy") {
            None | Some("network") => Policy::Network,
            Some("expert") => Policy::Expert,
            Some("random") => Policy::Random,
            Some(other) => return Err(p.error(format!("policy must be network, expert or random, got '{other}'"))),
        };
        let oracle_cwnd_packets = p.optional_positive_f64("oracle_cwnd_packets")?;
        if policy == Policy::Expert && oracle_cwnd_packets.is_none() {
            return Err(p.error("policy=expert needs oracle_cwnd_packets=X (the oracle's window, packets)"));
        }
        Ok(IndigoConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            initial_cwnd_packets: p.u64_at_least("initial_cwnd_packets", 2, d.initial_cwnd_packets)?,
            step_us: d.step_us,
            policy,
            oracle_cwnd_packets,
            seed: p.u64_at_least("seed", 0, d.seed)?,
            record: p.bool("record", d.record)?,
            halve_at_decision: match p.text("halve_at_decision") {
                None => None,
                Some(_) => Some(p.u64_at_least("halve_at_decision", 0, 0)?),
            },
        })
    }
}

/// The trained weights built into this binary (build.rs: data/indigo/NAME.safetensors).
mod built_in {
    include!(concat!(env!("OUT_DIR"), "/indigo_models.rs"));
}

/// The model `indigo` alone runs.
pub const DEFAULT_MODEL: &str = "indigo";

/// The names of the models built in, sorted.
pub fn built_in_models() -> impl Iterator<Item = &'static str> {
    built_in::MODELS.iter().map(|&(name, _)| name)
}

/// The weights a spec names: `weights=PATH` (a safetensors file, weights.rs), `model=NAME` (one
/// built in), or neither (the model `DEFAULT_MODEL`, when it is built in).
pub fn weights_from_params(p: &mut Params) -> Result<Weights, SpecError> {
    weights_among(p, built_in::MODELS)
}

fn weights_among(p: &mut Params, models: &[(&str, &[u8])]) -> Result<Weights, SpecError> {
    let (path, model) = (p.text("weights"), p.text("model"));
    let name = match (path, model) {
        (Some(_), Some(_)) => return Err(p.error("give weights=PATH or model=NAME, not both")),
        (Some(path), None) => return Weights::load(std::path::Path::new(path)).map_err(|e| SpecError(e.0)),
        (None, Some(name)) => name,
        (None, None) if models.iter().any(|&(n, _)| n == DEFAULT_MODEL) => DEFAULT_MODEL,
        (None, None) => {
            return Err(p.error("give weights=PATH (a safetensors file; pantheon indigo train makes one)"));
        }
    };
    let Some(&(_, bytes)) = models.iter().find(|&&(n, _)| n == name) else {
        let names: Vec<&str> = models.iter().map(|&(n, _)| n).collect();
        let known = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        return Err(p.error(format!("no built-in model '{name}' (built in: {known}); give weights=PATH")));
    };
    // A bug rather than a user's mistake (the file was committed), but still one line.
    Weights::from_bytes(bytes).map_err(|e| p.error(format!("built-in model '{name}': {e}")))
}

#[derive(Debug, Clone)]
pub struct Indigo {
    config: IndigoConfig,
    net: Lstm,
    features: Features,
    /// The window, packets (may be fractional).
    cwnd_packets: f64,
    /// The last action taken, index into `ACTION_NAMES`.
    prev_action: usize,
    /// When the current step began, µs; `None` before the first acknowledgement.
    step_start_us: Option<u64>,
    /// The network input of the last decision (zeros before the first).
    last_input: [f32; INPUTS],
    /// Decisions taken so far.
    decisions: u64,
    /// `Policy::Random`'s generator.
    rng: SplitMix64,
    /// One record per decision since the last `take_records`, when the config asks for them.
    records: Option<Records>,
}

impl Indigo {
    /// # Panics
    /// With `Policy::Expert` and no oracle window (`IndigoConfig::from_params` refuses it).
    pub fn new(config: IndigoConfig, weights: Weights) -> Self {
        assert!(
            config.policy != Policy::Expert || config.oracle_cwnd_packets.is_some(),
            "the expert policy needs an oracle window"
        );
        Indigo {
            config,
            net: Lstm::new(weights),
            features: Features::new(),
            cwnd_packets: config.initial_cwnd_packets as f64,
            prev_action: ACTIONS - 1,
            step_start_us: None,
            last_input: [0.0; INPUTS],
            decisions: 0,
            rng: SplitMix64::new(config.seed),
            records: config.record.then(|| Records::new(config.oracle_cwnd_packets.is_some())),
        }
    }

    pub fn cwnd_packets(&self) -> f64 {
        self.cwnd_packets
    }

    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    /// The last action taken, index into `ACTION_NAMES`.
    pub fn last_action(&self) -> usize {
        self.prev_action
    }

    /// The network's input at the last decision (what a trainer labels).
    pub fn last_input(&self) -> &[f32; INPUTS] {
        &self.last_input
    }

    pub fn network(&self) -> &Lstm {
        &self.net
    }

    /// The records kept since the last call (`record=1`); `None` when the config keeps none.
    pub fn records(&self) -> Option<&Records> {
        self.records.as_ref()
    }

    /// The records kept since the last call, handed over and started afresh (`record=1`); `None`
    /// when the config keeps none.
    pub fn take_records(&mut self) -> Option<Records> {
        let with_expert = self.config.oracle_cwnd_packets.is_some();
        self.records.as_mut().map(|kept| std::mem::replace(kept, Records::new(with_expert)))
    }

    fn decide(&mut self) {
        self.last_input = self.features.take_input(self.cwnd_packets, self.prev_action);
        let chosen = self.net.step(&self.last_input);
        let expert = self.config.oracle_cwnd_packets.map(|oracle| expert_action(self.cwnd_packets, oracle));
        let action = match self.config.policy {
            _ if self.config.halve_at_decision == Some(self.decisions) => 0,
            Policy::Network => chosen,
            Policy::Expert => expert.expect("checked when built"),
            Policy::Random => (self.rng.next_u64() % ACTIONS as u64) as usize,
        };
        if let Some(records) = &mut self.records {
            records.push(self.last_input, self.cwnd_packets, action, expert);
        }
        self.cwnd_packets = apply_action(self.cwnd_packets, action);
        self.prev_action = action;
        self.decisions += 1;
    }
}

impl CongestionControl for Indigo {
    fn name(&self) -> &'static str {
        "indigo"
    }

    fn on_sent(&mut self, e: &Sent) {
        self.features.on_sent(e.seq, e.bytes);
    }

    fn on_ack(&mut self, e: &Acked) {
        self.features.on_ack(e);
        match self.step_start_us {
            None => self.step_start_us = Some(e.now_us),
            Some(start_us) if e.now_us >= start_us + self.config.step_us => {
                self.decide();
                self.step_start_us = Some(e.now_us);
            }
            Some(_) => {}
        }
    }

    fn on_loss(&mut self, e: &Lost) {
        self.features.on_loss(e.seq);
    }

    /// Loss is not Indigo's signal, and neither is a mark: its packet is acknowledged next.
    fn on_congestion_mark(&mut self, _e: &Acked) {}

    fn decision(&self) -> Decision {
        let packets = self.cwnd_packets.ceil() as u64;
        Decision { cwnd_bytes: Some(packets * self.config.mss_bytes), pacing_rate_bps: None, wake_at_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &[u8] = include_bytes!("../../tests/fixtures/indigo/lstm32.safetensors");

    fn weights(params: &str, models: &[(&str, &[u8])]) -> Result<Weights, String> {
        let mut p = Params::parse("indigo", params).unwrap();
        weights_among(&mut p, models).map_err(|e| e.0)
    }

    #[test]
    fn a_built_in_model_is_chosen_by_name_and_indigo_is_the_default() {
        let models: &[(&str, &[u8])] = &[("indigo", FIXTURE), ("indigo-synthetic", FIXTURE)];
        let fixture = Weights::from_bytes(FIXTURE).unwrap();
        assert_eq!(weights("", models), Ok(fixture.clone()));
        assert_eq!(weights("model=indigo-synthetic", models), Ok(fixture));
        assert_eq!(
            weights("model=indigo-calibrated", models),
            Err(
                "indigo: no built-in model 'indigo-calibrated' (built in: indigo, indigo-synthetic); give weights=PATH"
                    .to_string()
            )
        );
        assert_eq!(
            weights("model=indigo,weights=x", models),
            Err("indigo: give weights=PATH or model=NAME, not both".into())
        );
        let broken: &[(&str, &[u8])] = &[("indigo", b"not weights")];
        assert!(weights("", broken)
            .unwrap_err()
            .starts_with("indigo: built-in model 'indigo': not a safetensors file"));
    }

    #[test]
    fn without_built_in_models_weights_are_required() {
        assert_eq!(
            weights("", &[]),
            Err("indigo: give weights=PATH (a safetensors file; pantheon indigo train makes one)".to_string())
        );
        assert_eq!(
            weights("model=indigo", &[]),
            Err("indigo: no built-in model 'indigo' (built in: none); give weights=PATH".to_string())
        );
        // Only the model named `indigo` is a default.
        assert!(weights("", &[("indigo-synthetic", FIXTURE)]).unwrap_err().starts_with("indigo: give weights=PATH"));
    }

    #[test]
    fn every_built_in_model_loads() {
        for &(name, bytes) in built_in::MODELS {
            assert!(Weights::from_bytes(bytes).is_ok(), "data/indigo/{name}.safetensors does not load");
        }
    }
}
