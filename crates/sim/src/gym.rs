//! The simulator as a reinforcement-learning environment (issue 19 §4; docs/gym.md): one flow over
//! an emulated path, whose window an agent outside sets once per decision interval — the shape of
//! Indigo's control loop (Yan et al., USENIX ATC 2018, §6: every 10 ms, one of five actions on
//! the window) with the network replaced by whoever is learning. Python drives it through
//! `pantheon-sim gym` (protocol.rs; python/pantheon/gym/) as Gymnasium's `Env.reset`/`Env.step`.
//!
//! - The path is the emulator's, from its own options (`batch::parse_path`), and the flow is
//!   simulated as every run is (simulation.rs): the gym only stops the run at each interval's end.
//! - Observation: Indigo's 9 network inputs (`pantheon_cc::indigo::Features::take_input`: the
//!   averages of queueing delay, delivery rate and sending rate over the interval, the window, the
//!   previous action one-hot), made by the same code Indigo runs (steered.rs).
//! - Action: one of Indigo's five (`pantheon_cc::indigo::apply_action`: ÷2, −10, +0, +10, ×2
//!   packets, floor 2), or a window multiplier for a continuous policy (the observation then
//!   carries the last multiplier where Indigo's carries its previous action one-hot), applied at
//!   the interval's start. Unlike Indigo's, the intervals are
//!   clocked by simulated time rather than by the first acknowledgement after 10 ms, so an agent
//!   gets a decision on a path that has gone silent too.
//! - A ceiling on the window (`max_cwnd_packets`) that Indigo does not have: a policy exploring
//!   ×2 every interval would otherwise reach windows of 2^k packets, all sent in one instant.
//! - Per interval, beside the observation: the data direction's throughput, mean one-way delay
//!   and loss (meter.rs), the window and the counts, from which the Python side computes the
//!   reward.
//!
//! Before the first step (at reset) nothing has been measured: the observation is the initial
//! window of 10 packets and, as Indigo's first decision sees, a previous action of ×2.

mod meter;
pub mod protocol;
mod steered;

use pantheon_cc::indigo::{apply_action, ACTIONS, INPUTS, MIN_CWND_PACKETS};
use pantheon_cli::path_options::PathPair;

use crate::batch::parse_path;
use crate::scenario::{runtime_us, FlowPlan, Scenario};
use crate::simulation::Simulation;
use meter::Meter;
use steered::Steer;

/// What the agent does to the window at an interval's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// One of Indigo's five, an index into `ACTION_NAMES`.
    Indigo(usize),
    /// Multiply the window by this factor (> 0), within the floor and the ceiling.
    Scale(f64),
}

/// Indigo's inputs before the previous action's one-hot: queueing delay, delivery rate, sending
/// rate, window (state.rs).
pub const MEASUREMENTS: usize = 4;

/// f64 values per interval record: the observation, then `THROUGHPUT_MBPS` ... `SENT_PACKETS`.
/// After a `Scale` action the observation is the 4 measurements, the multiplier, and 4 zeros.
pub const RECORD_VALUES: usize = INPUTS + 6;
/// Data delivered in the interval, Mbit/s of inner datagrams.
pub const THROUGHPUT_MBPS: usize = INPUTS;
/// Mean one-way delay of the data delivered in the interval, ms; an interval that delivered
/// nothing repeats the last one that did (0 before any).
pub const DELAY_MS: usize = INPUTS + 1;
/// Datagrams dropped on the uplink over those dropped or delivered in the interval (0 if none).
pub const LOSS_RATE: usize = INPUTS + 2;
/// The window the interval ran under, packets.
pub const CWND_PACKETS: usize = INPUTS + 3;
pub const DELIVERED_PACKETS: usize = INPUTS + 4;
pub const SENT_PACKETS: usize = INPUTS + 5;

pub type Record = [f64; RECORD_VALUES];

/// Shortest and longest decision interval, ms, bounds against a unit mistake (µs or s given as
/// ms): 0.1 ms still holds 8 datagrams at 1 Gbit/s, and 10 s is a third of a Pantheon run.
const STEP_MS_RANGE: (f64, f64) = (0.1, 10_000.0);

/// One episode's settings (the `reset` request, protocol.rs).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvConfig {
    /// pantheon-emu's path options.
    pub path: Vec<String>,
    /// The path's and hosts' seed (pantheon-emu's `--seed`).
    pub seed: u64,
    /// The decision interval, ms.
    pub step_ms: f64,
    /// Intervals per episode.
    pub steps: u64,
    /// The window's ceiling, packets.
    pub max_cwnd_packets: f64,
}

/// One environment in an episode.
pub struct Env {
    sim: Simulation<Meter>,
    steer: Steer,
    /// The decision interval, µs.
    step_us: u64,
    /// Where the run stands, µs: the current interval's start.
    now_us: u64,
    /// The episode's end, µs.
    end_us: u64,
    max_cwnd_packets: f64,
    /// The last action.
    prev_action: Action,
    /// The last interval's mean delay that had deliveries, ms (0 before any).
    last_delay_ms: f64,
    /// The record of the last step, or of the reset.
    record: Record,
    /// The simulation failed in the last step (its error was returned): only a reset helps.
    failed: bool,
}

impl Env {
    /// A new episode: the path built and the flow at its start. A mistake in `config` is a
    /// one-line error naming the setting.
    pub fn reset(config: &EnvConfig) -> Result<Env, String> {
        let (low_ms, high_ms) = STEP_MS_RANGE;
        if !(config.step_ms >= low_ms && config.step_ms <= high_ms) {
            return Err(format!(
                "step_ms: expected a decision interval from {low_ms} to {high_ms} ms, got {}",
                config.step_ms
            ));
        }
        if config.steps == 0 {
            return Err("steps: an episode needs at least one step".into());
        }
        if !(config.max_cwnd_packets >= 2.0 && config.max_cwnd_packets.is_finite()) {
            return Err(format!("max_cwnd_packets: expected at least 2 packets, got {}", config.max_cwnd_packets));
        }
        let step_us = (config.step_ms * 1e3).round() as u64;
        let run_us = runtime_us("steps × step_ms", config.steps as f64 * step_us as f64 / 1e6)?;
        let paths: PathPair = parse_path(&config.path, Some(config.seed))?;
        let plan = FlowPlan {
            flow: 0,
            cc: "gym".into(),
            ecn: false,
            start_us: 0,
            end_us: run_us,
            bytes: None,
            extra_delay_us: 0,
        };
        let scenario = Scenario::new(vec![plan], run_us, paths)?;
        let (controller, steer) = steered::steered();
        let sim = Simulation::new(&scenario, vec![controller], Meter::default());
        let mut env = Env {
            sim,
            steer,
            step_us,
            now_us: 0,
            end_us: run_us,
            max_cwnd_packets: config.max_cwnd_packets,
            prev_action: Action::Indigo(ACTIONS - 1),
            last_delay_ms: 0.0,
            record: [0.0; RECORD_VALUES],
            failed: false,
        };
        env.record = env.observe();
        Ok(env)
    }

    /// Whether the episode has run all its intervals.
    pub fn done(&self) -> bool {
        self.now_us >= self.end_us
    }

    pub fn record(&self) -> &Record {
        &self.record
    }

    /// Takes `action` and simulates one interval.
    pub fn step(&mut self, action: Action) -> Result<&Record, String> {
        let cwnd_packets = self.steer.cwnd_packets();
        let next_packets = match action {
            Action::Indigo(index) if index < ACTIONS => apply_action(cwnd_packets, index),
            Action::Indigo(index) => return Err(format!("action: expected 0 to {}, got {index}", ACTIONS - 1)),
            Action::Scale(factor) if factor.is_finite() && factor > 0.0 => {
                (cwnd_packets * factor).max(MIN_CWND_PACKETS)
            }
            Action::Scale(factor) => {
                return Err(format!("action: expected a positive window multiplier, got {factor}"))
            }
        };
        if self.done() {
            return Err("the episode is over: reset the environment".into());
        }
        if self.failed {
            return Err("its last step failed: reset the environment".into());
        }
        self.steer.set_cwnd_packets(next_packets.min(self.max_cwnd_packets));
        self.prev_action = action;
        self.sim.wake_sender(0, self.now_us);
        *self.sim.observer_mut() = Meter::default();
        let until_us = (self.now_us + self.step_us).min(self.end_us);
        if let Err(e) = self.sim.advance_until(until_us) {
            self.failed = true;
            return Err(e);
        }
        self.now_us = until_us;
        self.record = self.observe();
        Ok(&self.record)
    }

    /// The record of the interval just simulated (its meter), with the observation for the next
    /// decision.
    fn observe(&mut self) -> Record {
        let meter = *self.sim.observer_mut();
        if let Some(delay_ms) = meter.delay_ms() {
            self.last_delay_ms = delay_ms;
        }
        let cwnd_packets = self.steer.cwnd_packets();
        let mut record = [0.0; RECORD_VALUES];
        let mut features = self.steer.features();
        match self.prev_action {
            Action::Indigo(index) => {
                let input = features.take_input(cwnd_packets, index);
                for (r, x) in record.iter_mut().zip(input) {
                    *r = f64::from(x);
                }
            }
            Action::Scale(factor) => {
                // The measurements as Indigo scales them; where its one-hot goes, the multiplier.
                let input = features.take_input(cwnd_packets, 0);
                for (r, x) in record.iter_mut().zip(&input[..MEASUREMENTS]) {
                    *r = f64::from(*x);
                }
                record[MEASUREMENTS] = factor;
            }
        }
        drop(features);
        record[THROUGHPUT_MBPS] = meter.throughput_mbps(self.step_us);
        record[DELAY_MS] = self.last_delay_ms;
        record[LOSS_RATE] = meter.loss_rate();
        record[CWND_PACKETS] = cwnd_packets;
        record[DELIVERED_PACKETS] = meter.delivered_packets as f64;
        record[SENT_PACKETS] = meter.sent_packets as f64;
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 12 Mbit/s each way, 20 ms one way, a DropTail buffer of one BDP (60 000 bytes, 40 datagrams).
    fn one_bdp(steps: u64) -> Env {
        let path = "--delay 20 --uplink-rate 12 --downlink-rate 12 --uplink-queue droptail --uplink-queue-bytes 60000";
        let config = EnvConfig {
            path: path.split(' ').map(String::from).collect(),
            seed: 1,
            step_ms: 10.0,
            steps,
            max_cwnd_packets: 1000.0,
        };
        Env::reset(&config).unwrap()
    }

    /// The means of the records of `steps` steps of `action` after `warm_up` more.
    fn mean_after(env: &mut Env, warm_up: usize, steps: usize, action: usize) -> Record {
        let records: Vec<Record> = (0..warm_up + steps).map(|_| *env.step(Action::Indigo(action)).unwrap()).collect();
        let mut mean = [0.0; RECORD_VALUES];
        for r in &records[warm_up..] {
            for (m, v) in mean.iter_mut().zip(r) {
                *m += v / steps as f64;
            }
        }
        mean
    }

    #[test]
    fn a_window_of_one_bdp_fills_the_link_without_a_queue() {
        let mut env = one_bdp(200);
        // 10 + 10 × 3 = 40 packets: the BDP of the propagation delay alone.
        for _ in 0..3 {
            env.step(Action::Indigo(3)).unwrap();
        }
        assert_eq!(env.record()[CWND_PACKETS], 40.0);
        let mean = mean_after(&mut env, 50, 100, 2);
        // 40 datagrams of 1464 inner bytes per round trip of 40 ms of propagation, 1 ms of
        // transmission and the hosts' wake-ups (~1 ms): ~11.2 Mbit/s, under the link's 11.712.
        assert!((11.0..11.712).contains(&mean[THROUGHPUT_MBPS]), "{}", mean[THROUGHPUT_MBPS]);
        // 20 ms of propagation and up to 1 ms of transmission (1500 bytes at 12 Mbit/s): no queue.
        assert!((20.5..21.5).contains(&mean[DELAY_MS]), "{}", mean[DELAY_MS]);
        assert_eq!(mean[LOSS_RATE], 0.0);
    }

    #[test]
    fn doubling_to_the_ceiling_fills_the_buffer() {
        let mut env = one_bdp(200);
        let mean = mean_after(&mut env, 100, 100, 4);
        assert_eq!(env.record()[CWND_PACKETS], 1000.0);
        assert!((11.6..11.8).contains(&mean[THROUGHPUT_MBPS]), "{}", mean[THROUGHPUT_MBPS]);
        // Past 20 ms of propagation and 1 of transmission, a full buffer adds 40 ms of queue.
        assert!((59.0..63.0).contains(&mean[DELAY_MS]), "{}", mean[DELAY_MS]);
        // The window far past what the buffer holds: most of what is sent is dropped.
        assert!(mean[LOSS_RATE] > 0.5, "{}", mean[LOSS_RATE]);
        // Indigo's queueing-delay input sees the queue: ~40 ms / 200 ms.
        assert!((0.15..0.25).contains(&mean[0]), "{}", mean[0]);
    }

    #[test]
    fn an_episode_ends_after_its_steps_and_settings_are_checked() {
        let mut env = one_bdp(2);
        env.step(Action::Indigo(2)).unwrap();
        env.step(Action::Indigo(2)).unwrap();
        assert!(env.done());
        assert_eq!(env.step(Action::Indigo(2)).unwrap_err(), "the episode is over: reset the environment");
        let bad = EnvConfig { path: vec![], seed: 0, step_ms: 0.0, steps: 1, max_cwnd_packets: 10.0 };
        assert_eq!(
            Env::reset(&bad).err().unwrap(),
            "step_ms: expected a decision interval from 0.1 to 10000 ms, got 0"
        );
        let bad = EnvConfig { step_ms: 10.0, steps: 10_000_000_000, ..bad };
        assert!(Env::reset(&bad).err().unwrap().starts_with("steps × step_ms: expected a positive number of seconds"));
    }
}
