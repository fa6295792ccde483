//! What one simulated run is: the path (both directions, validated by pantheon-emu's own option
//! code, so the simulator accepts and rejects exactly what the emulator does), the senders (each a
//! crates/cc controller spec with its start and end, a bulk flow or one finite transfer), and how
//! long the run lasts — the harness's run (docs/harness.md: flows start at their times and stop
//! at theirs, all within the runtime).
//!
//! A flow (the records' `flow`, numbered from 0) is one tunnel pair of the real experiment. A bulk
//! flow has one sender; a flow with transfers (a Poisson workload's arrivals) has one sender per
//! transfer, all of one spec and one extra delay, sharing the flow's records
//! (docs/sim.md, "Transfers").
//!
//! The network is one path (a run's `--delay`, `--uplink-rate`, ...), or a topology of several
//! links with a route per flow (topology.rs); the first is a topology of one link.
//!
//! Times on the command line and in jobs are seconds; inside, microseconds from the run's start,
//! the link model's unit (`seconds_to_us`).

use pantheon_cli::path_options::PathPair;

use crate::host;
use crate::link_clock::link_phase_us;
use crate::topology::Topology;

/// One sender: which controller, when it runs (`start_us` ≤ t < `end_us`), which flow's
/// records it belongs to, and whether it carries a finite transfer.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowPlan {
    /// The flow (records' number, from 0) it belongs to; senders of one flow are adjacent.
    pub flow: usize,
    /// A crates/cc spec (`copa:delta=0.5`); the sender adds `mss_bytes=1464` as pantheon-udp does.
    pub cc: String,
    /// The spec's `ecn=1`: the flow's datagrams are ECN-capable (flow/controller.rs).
    pub ecn: bool,
    pub start_us: u64,
    pub end_us: u64,
    /// A finite transfer of this many bytes: the sender stops once ⌈bytes / 1464⌉ datagrams are
    /// acknowledged (`pantheon_cc::flow::Flow::with_budget_packets`); `None`: bulk.
    pub bytes: Option<u64>,
    /// Extra one-way propagation delay in each direction for this flow alone, µs, outside the
    /// shared bottleneck (simulation.rs).
    pub extra_delay_us: u64,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    /// The senders, in flow order.
    pub flows: Vec<FlowPlan>,
    /// How many flows (records' flows) the senders make up.
    pub flow_count: usize,
    pub runtime_us: u64,
    /// The links and each flow's route: one link crossed by every flow unless the run has a
    /// topology.
    pub topology: Topology,
    /// How far the links' clock runs ahead of the run's, µs (link_clock.rs): drawn from the
    /// run's seed unless given.
    pub link_phase_us: u64,
    /// When each sender (in `flows`' order) starts, µs: its plan, a bulk flow's as late as the
    /// hosts start it (host.rs), or exactly its plan (`with_exact_starts`).
    pub starts_us: Vec<u64>,
}

/// Longest run: one day of simulated time (Pantheon's runs last 30 s; a longer one is a typo,
/// and `inf` or `1e300` would run until killed).
pub const MAX_RUNTIME_S: f64 = 86_400.0;

/// Most flows in one run: every flow number fits the records' `flow` column (uint16).
pub const MAX_FLOWS: usize = 1 << 16;
/// Most senders in one run (a flows file's rows): the senders not yet started or finished cost
/// nothing (simulation.rs's heap of wake-ups), but each holds its bookkeeping until the end.
pub const MAX_SENDERS: usize = 100_000;

/// Largest extra delay of a flow: an hour, as for the emulator's --delay.
pub const MAX_EXTRA_DELAY_MS: f64 = 3_600_000.0;

/// Seconds (validated: finite, not negative) to whole microseconds, to the nearest.
pub fn seconds_to_us(seconds: f64) -> u64 {
    (seconds * 1e6).round() as u64
}

/// A number for a message: as written for everyday magnitudes, in exponent form beyond (Rust
/// writes 1e300 with all 301 digits).
pub fn shown(value: f64) -> String {
    if value == 0.0 || !value.is_finite() || (1e-3..1e9).contains(&value.abs()) {
        value.to_string()
    } else {
        format!("{value:e}")
    }
}

/// A run's length, `name` being how the input called it, in µs: finite, > 0, at most a day.
pub fn runtime_us(name: &str, runtime_s: f64) -> Result<u64, String> {
    if !(runtime_s.is_finite() && runtime_s > 0.0 && runtime_s <= MAX_RUNTIME_S) {
        return Err(format!(
            "{name}: expected a positive number of seconds up to {MAX_RUNTIME_S} (one day), got {}",
            shown(runtime_s)
        ));
    }
    Ok(seconds_to_us(runtime_s))
}

fn seconds(what: &str, value: f64, allow_zero: bool) -> Result<u64, String> {
    let fits = value.is_finite() && (value > 0.0 || (allow_zero && value == 0.0));
    if !fits {
        let bound = if allow_zero { "≥ 0" } else { "> 0" };
        return Err(format!("{what} must be a number of seconds {bound}, got {}", shown(value)));
    }
    Ok(seconds_to_us(value))
}

/// A sender's start (a transfer's planned start) in µs: `start_s` ≥ 0, before the run's end.
/// `given` is the value as its input wrote it, for the message (a flows file's field, a job's
/// number); a flows file's text that is no number arrives as NaN.
pub fn sender_start_us(start_s: f64, given: &str, runtime_us: u64) -> Result<u64, String> {
    if !(start_s.is_finite() && start_s >= 0.0) {
        return Err(format!("expected a start in seconds ≥ 0, got '{given}'"));
    }
    let start_us = seconds_to_us(start_s);
    if start_us >= runtime_us {
        return Err(format!(
            "a start at {given} s is not before the run's end at {} s: start it earlier or lengthen the run",
            runtime_us as f64 / 1e6
        ));
    }
    Ok(start_us)
}

/// A flow's extra one-way delay each way, `delay_ms` from 0 to MAX_EXTRA_DELAY_MS, in µs;
/// `given` as for `sender_start_us`.
pub fn extra_delay_us(delay_ms: f64, given: &str) -> Result<u64, String> {
    if !(0.0..=MAX_EXTRA_DELAY_MS).contains(&delay_ms) {
        return Err(format!("expected an extra delay in ms from 0 to {MAX_EXTRA_DELAY_MS} (one hour), got '{given}'"));
    }
    Ok((delay_ms * 1e3).round() as u64)
}

/// Parses a run's length in seconds as given on the command line, into µs.
pub fn parse_runtime_s(text: &str) -> Result<u64, String> {
    let runtime_s = text
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("--runtime-s: expected a positive number of seconds, got '{text}'"))?;
    runtime_us("--runtime-s", runtime_s)
}

impl FlowPlan {
    /// Flow `number` (from 1) of a run of `runtime_us`: it starts at `start_s` and lasts
    /// `duration_s`, or to the end of the run. The spec is checked by building its controller, so
    /// a mistake is the registry's own one-line message.
    pub fn new(
        number: usize,
        cc: &str,
        start_s: f64,
        duration_s: Option<f64>,
        runtime_us: u64,
    ) -> Result<FlowPlan, String> {
        let name = format!("flow {number}");
        pantheon_cc::flow::controller::build(cc).map_err(|e| format!("{name} ({cc}): {e}"))?;
        let ecn = pantheon_cc::flow::controller::ecn(cc).map_err(|e| format!("{name} ({cc}): {e}"))?;
        let start_us = seconds(&format!("{name}: the start"), start_s, true)?;
        if start_us >= runtime_us {
            return Err(format!(
                "{name} starts at {} s, not before the run ends at {} s: start it earlier or lengthen the run",
                shown(start_s),
                runtime_us as f64 / 1e6
            ));
        }
        let end_us = match duration_s {
            Some(d) => start_us.saturating_add(seconds(&format!("{name}: the duration"), d, false)?).min(runtime_us),
            None => runtime_us,
        };
        Ok(FlowPlan {
            flow: number - 1,
            cc: cc.trim().to_string(),
            ecn,
            start_us,
            end_us,
            bytes: None,
            extra_delay_us: 0,
        })
    }

    /// The same sender carrying a finite transfer of `bytes` (> 0) rather than a bulk flow.
    pub fn with_bytes(self, bytes: u64) -> FlowPlan {
        FlowPlan { bytes: Some(bytes), ..self }
    }

    /// The same sender with `extra_delay_us` of extra one-way delay each way.
    pub fn with_extra_delay_us(self, extra_delay_us: u64) -> FlowPlan {
        FlowPlan { extra_delay_us, ..self }
    }

    /// The same sender as part of flow `flow` (from 0).
    pub fn in_flow(self, flow: usize) -> FlowPlan {
        FlowPlan { flow, ..self }
    }

    /// The datagrams its transfer needs acknowledged: ⌈bytes / 1464⌉ (the contract's byte
    /// budget); `None` for a bulk flow.
    pub fn budget_packets(&self) -> Option<u64> {
        self.bytes.map(|bytes| bytes.div_ceil(pantheon_cc::flow::datagram::PACKET_BYTES))
    }

    /// A `--flow SPEC[@START_S[+DURATION_S]]` argument. A controller spec never holds '@'.
    pub fn parse(number: usize, text: &str, runtime_us: u64) -> Result<FlowPlan, String> {
        let (cc, timing) = match text.rsplit_once('@') {
            Some((cc, timing)) => (cc, Some(timing)),
            None => (text, None),
        };
        let number_of = |what: &str, t: &str| {
            t.trim()
                .parse::<f64>()
                .map_err(|_| format!("--flow {text}: expected {what} in seconds after the spec, got '{t}'"))
        };
        let (start_s, duration_s) = match timing {
            None => (0.0, None),
            Some(timing) => match timing.split_once('+') {
                Some((start, duration)) => (number_of("a start", start)?, Some(number_of("a duration", duration)?)),
                None => (number_of("a start", timing)?, None),
            },
        };
        FlowPlan::new(number, cc, start_s, duration_s, runtime_us).map_err(|e| format!("--flow {text}: {e}"))
    }
}

impl Scenario {
    /// The run of `flows` (senders; their flow numbers from 0, each the previous one's or the
    /// next) over `paths` for `runtime_us`.
    pub fn new(flows: Vec<FlowPlan>, runtime_us: u64, paths: PathPair) -> Result<Scenario, String> {
        let flow_count = flows.last().map_or(0, |plan| plan.flow + 1);
        Scenario::over(flows, runtime_us, Topology::single(paths, flow_count))
    }

    /// The run of `flows` over `topology`, whose routes must cover every flow.
    pub fn over(flows: Vec<FlowPlan>, runtime_us: u64, topology: Topology) -> Result<Scenario, String> {
        if flows.is_empty() {
            return Err("no flows: give at least one --flow SPEC[@START_S[+DURATION_S]]".into());
        }
        if flows.len() > MAX_SENDERS {
            return Err(format!("{} senders, more than the {MAX_SENDERS} a run may have", flows.len()));
        }
        let mut flow_count = 0;
        for plan in &flows {
            // Each sender's flow is the previous sender's or the next one (the first's is 0).
            if plan.flow != flow_count && plan.flow + 1 != flow_count {
                return Err(format!(
                    "a sender of flow {} after {} flows: flows are numbered from 0 in order, without gaps",
                    plan.flow, flow_count
                ));
            }
            flow_count = plan.flow + 1;
        }
        if flow_count > MAX_FLOWS {
            return Err(format!("{flow_count} flows, more than the {MAX_FLOWS} a run may have"));
        }
        if flow_count > topology.routes.len() {
            return Err(format!(
                "{flow_count} flows, but the topology has routes for {}: give each flow a route",
                topology.routes.len()
            ));
        }
        let link_phase_us = link_phase_us(topology.seed());
        let starts_us = harness_starts_us(&flows, topology.seed());
        Ok(Scenario { flows, flow_count, runtime_us, topology, link_phase_us, starts_us })
    }

    /// Whether any sender carries a finite transfer (the run then has transfers.parquet).
    pub fn has_transfers(&self) -> bool {
        self.flows.iter().any(|plan| plan.bytes.is_some())
    }

    /// The same run with the link's clock `phase_us` ahead of the run's: 0 for a replay of an
    /// emulated run whose flow's start is known on the link's clock.
    pub fn with_link_phase_us(self, phase_us: u64) -> Scenario {
        Scenario { link_phase_us: phase_us, ..self }
    }

    /// The same run with every sender started exactly at its plan: a replay of an emulated run,
    /// whose flows' starts are read off its logs (host.rs).
    pub fn with_exact_starts(self) -> Scenario {
        let starts_us = self.flows.iter().map(|plan| plan.start_us).collect();
        Scenario { starts_us, ..self }
    }
}

/// The instant each of `flows` (senders) starts in a run seeded `seed`, µs: a bulk flow's plan
/// plus its start lateness (host.rs), all moved earlier by as much as the first of them started
/// late; a transfer's plan.
fn harness_starts_us(flows: &[FlowPlan], seed: u64) -> Vec<u64> {
    // A bulk flow's start with its lateness; None for a transfer's sender.
    let late_us: Vec<Option<u64>> = flows
        .iter()
        .map(|plan| plan.bytes.is_none().then(|| plan.start_us + host::start_lateness_us(seed, plan.flow)))
        .collect();
    let planned_first_us = flows.iter().filter(|plan| plan.bytes.is_none()).map(|plan| plan.start_us).min();
    let shift_us = late_us.iter().flatten().min().zip(planned_first_us).map_or(0, |(late, planned)| late - planned);
    flows.iter().zip(&late_us).map(|(plan, late)| late.map_or(plan.start_us, |t_us| t_us - shift_us)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN_US: u64 = 30_000_000;

    fn bulk(flow: usize, start_us: u64) -> FlowPlan {
        FlowPlan::new(flow + 1, "cubic", start_us as f64 / 1e6, None, 30_000_000).unwrap()
    }

    #[test]
    fn one_flow_starts_as_planned() {
        for seed in 0..50 {
            assert_eq!(harness_starts_us(&[bulk(0, 0)], seed), [0]);
            assert_eq!(harness_starts_us(&[bulk(0, 2_000_000)], seed), [2_000_000]);
        }
    }

    #[test]
    fn flows_start_apart_as_the_harness_starts_them() {
        // Two flows planned together: the first at the run's start, the other the difference of
        // their latenesses later, as in the emulated runs (module header: median 1.22 ms apart).
        let mut gaps_us: Vec<u64> = (0..2000)
            .map(|seed| {
                let starts = harness_starts_us(&[bulk(0, 0), bulk(1, 0)], seed);
                assert_eq!(starts.iter().min(), Some(&0));
                let d = starts[0].abs_diff(starts[1]);
                assert_eq!(d, host::start_lateness_us(seed, 0).abs_diff(host::start_lateness_us(seed, 1)));
                d
            })
            .collect();
        gaps_us.sort_unstable();
        let median_us = gaps_us[gaps_us.len() / 2];
        assert!((1_200..=1_450).contains(&median_us), "median gap {median_us} µs");
        assert!(gaps_us[gaps_us.len() * 95 / 100] < 5_000);
        // A flow planned later keeps its plan, less the first flow's lateness, plus its own.
        let seed = 7;
        let starts = harness_starts_us(&[bulk(0, 0), bulk(1, 5_000_000)], seed);
        assert_eq!(starts[0], 0);
        assert_eq!(starts[1], 5_000_000 + host::start_lateness_us(seed, 1) - host::start_lateness_us(seed, 0));
        // Transfers start as planned, and do not move the bulk flows.
        let transfer = bulk(1, 1_000).with_bytes(30_000);
        let starts = harness_starts_us(&[bulk(0, 0), transfer.clone(), transfer.clone()], seed);
        assert_eq!(starts, [0, 1_000, 1_000]);
        assert_eq!(harness_starts_us(&[transfer], seed), [1_000]);
    }

    #[test]
    fn timing_defaults_to_the_whole_run() {
        let f = FlowPlan::parse(1, "copa:delta=0.5", RUN_US).unwrap();
        assert_eq!((f.cc.as_str(), f.start_us, f.end_us), ("copa:delta=0.5", 0, RUN_US));
        let f = FlowPlan::parse(2, "cubic@10", RUN_US).unwrap();
        assert_eq!((f.start_us, f.end_us), (10_000_000, RUN_US));
        let f = FlowPlan::parse(3, "vegas@2.5+5", RUN_US).unwrap();
        assert_eq!((f.start_us, f.end_us), (2_500_000, 7_500_000));
        // A duration past the end of the run ends with the run.
        let f = FlowPlan::parse(4, "bbr@20+60", RUN_US).unwrap();
        assert_eq!(f.end_us, RUN_US);
    }

    #[test]
    fn mistakes_are_one_line_naming_the_flow() {
        let e = FlowPlan::parse(1, "copa:delta=-1", RUN_US).unwrap_err();
        assert_eq!(e, "--flow copa:delta=-1: flow 1 (copa:delta=-1): copa: delta must be > 0, got -1");
        let e = FlowPlan::parse(2, "cubic@soon", RUN_US).unwrap_err();
        assert_eq!(e, "--flow cubic@soon: expected a start in seconds after the spec, got 'soon'");
        let e = FlowPlan::parse(2, "cubic@40", RUN_US).unwrap_err();
        assert!(e.contains("flow 2 starts at 40 s, not before the run ends at 30 s"), "{e}");
        let e = FlowPlan::parse(1, "cubic@1+0", RUN_US).unwrap_err();
        assert!(e.ends_with("flow 1: the duration must be a number of seconds > 0, got 0"), "{e}");
        assert!(parse_runtime_s("0").is_err() && parse_runtime_s("x").is_err());
    }

    #[test]
    fn flows_fit_the_records_uint16_and_senders_a_hundred_thousand() {
        let paths = pantheon_cli::path_options::PathArgs::validate_words(&[]).unwrap();
        let flow = FlowPlan::parse(1, "cubic", RUN_US).unwrap();
        let numbered = |n: usize| (0..n).map(|i| flow.clone().in_flow(i)).collect::<Vec<_>>();
        let s = Scenario::new(numbered(MAX_FLOWS), RUN_US, paths.clone()).unwrap();
        assert_eq!(s.flow_count, 65_536);
        let e = Scenario::new(numbered(MAX_FLOWS + 1), RUN_US, paths.clone()).unwrap_err();
        assert_eq!(e, "65537 flows, more than the 65536 a run may have");
        let transfer = flow.with_bytes(1000);
        let s = Scenario::new(vec![transfer.clone(); MAX_SENDERS], RUN_US, paths.clone()).unwrap();
        assert_eq!((s.flow_count, s.flows.len()), (1, 100_000));
        let e = Scenario::new(vec![transfer; MAX_SENDERS + 1], RUN_US, paths).unwrap_err();
        assert_eq!(e, "100001 senders, more than the 100000 a run may have");
    }

    #[test]
    fn a_budget_is_whole_datagrams_of_1464_bytes() {
        let flow = FlowPlan::parse(1, "cubic", RUN_US).unwrap();
        assert_eq!(flow.budget_packets(), None);
        let budgets: Vec<_> = [1, 1464, 1465, 14_640].map(|b| flow.clone().with_bytes(b).budget_packets()).to_vec();
        assert_eq!(budgets, [Some(1), Some(1), Some(2), Some(10)]);
    }

    #[test]
    fn a_runtime_is_finite_and_at_most_a_day() {
        assert_eq!(parse_runtime_s("86400"), Ok(86_400_000_000));
        for text in ["nan", "inf", "-inf", "1e300", "86400.5"] {
            let e = parse_runtime_s(text).unwrap_err();
            assert!(e.starts_with("--runtime-s: expected a positive number of seconds"), "{text}: {e}");
        }
        assert!(parse_runtime_s("1e300").unwrap_err().contains("up to 86400 (one day), got 1e300"));
        // A start as far out as a float goes is still before no run's end.
        let e = FlowPlan::parse(1, "cubic@1e300", RUN_US).unwrap_err();
        assert!(
            e.ends_with(
                "flow 1 starts at 1e300 s, not before the run ends at 30 s: start it earlier or lengthen the run"
            ),
            "{e}"
        );
        let e = FlowPlan::parse(1, "cubic@nan", RUN_US).unwrap_err();
        assert!(e.contains("the start must be a number of seconds ≥ 0, got NaN"), "{e}");
        let e = FlowPlan::parse(1, "cubic@1+inf", RUN_US).unwrap_err();
        assert!(e.contains("the duration must be a number of seconds > 0, got inf"), "{e}");
    }
}
