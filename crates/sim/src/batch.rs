//! `pantheon-sim batch`: many runs for programs that need many (calibration, Indigo training),
//! without files. Jobs are JSON lines on standard input, results JSON lines on standard output in
//! the order they finish (docs/sim.md):
//!
//! ```text
//! {"id": 7, "flows": [{"cc": "copa:delta=0.5", "start_s": 0, "duration_s": 30}],
//!  "path": ["--delay", "20", "--uplink-queue-bytes", "60000"], "runtime_s": 30, "seed": 1}
//! {"id": 7, "ok": true, "flows": [{"throughput_mbps": ..., ...}], "events": N, "wall_s": x}
//! {"id": 9, "ok": true, "flows": [{"throughput_mbps": ..., "decisions": {"inputs": [[...]],
//!  "cwnd_packets": [...], "actions": [...], "expert_actions": [...]}}], ...}
//! {"id": 10, "ok": true, "flows": [{"throughput_mbps": ..., "rules": {"uses": [...],
//!  "memories": [[[rec_send_ewma, rec_rec_ewma, rtt_ratio, slow_rec_rec_ewma], ...], ...]}}], ...}
//! {"id": 8, "ok": false, "error": "--uplink-rate: rate must be positive, got '0'"}
//! ```
//!
//! A job with `"window_s": W` gets each flow's throughput and delay p95 per window of W seconds
//! of the run too, as `windows` (metrics.rs's `Windows`).
//!
//! A flow is bulk (`start_s`, `duration_s`) or made of finite transfers, each by a sender of its
//! own with the flow's cc, from its start until its bytes are acknowledged or the run ends: the
//! flows file's flow of transfers (flows_file.rs), whose start and extra delay checks it shares
//! (scenario.rs). Either may have an extra one-way delay each way. A flow with transfers returns,
//! beside its metrics over all its datagrams, each transfer in plan order with `end_us` when its
//! receiver had the last datagram (transfers.rs; `null`: not by the run's end):
//!
//! ```text
//! {"id": 11, "flows": [{"cc": "cubic", "extra_delay_ms": 10,
//!  "transfers": [{"start_s": 0.1, "bytes": 150000}, {"start_s": 0.5, "bytes": 2000}]}], ...}
//! {"id": 11, "ok": true, "flows": [{"throughput_mbps": ..., "transfers": [{"bytes": 150000,
//!  "start_us": 100000, "end_us": ...}, {"bytes": 2000, "start_us": 500000, "end_us": null}]}], ...}
//! ```
//!
//! `path` holds the emulator's path options, parsed by the code every driver shares
//! (`pantheon_cli::path_options`), so a job's mistake reads as the emulator's message. A bad job
//! — malformed JSON, an unknown field, a bad option, even a bug that panics — is answered with
//! its error and never stops the others. A flow whose controller keeps records for its trainer
//! returns them (`observer::Kept`): Indigo's `record=1` as `decisions` (issue 19 §2), Tao's
//! `record=1` as `rules`, per rule in THE numbering (crates/cc/src/tao/tree.rs) its uses and a
//! sample of its memories (issue 37).
//! Worker threads (`std::thread::scope`) take the next line from the shared input as they
//! become free; each run is single-threaded and deterministic, so a job's result does not
//! depend on how many run beside it.

use std::io::{self, BufRead, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use pantheon_cc::indigo::{Records, INPUTS};
use pantheon_cc::tao::Memory;
use pantheon_cli::path_options::{PathArgs, PathPair};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::metrics::FlowMetrics;
use crate::observer::Kept;
use crate::outcome;
use crate::scenario::{extra_delay_us, runtime_us, seconds_to_us, sender_start_us, shown, FlowPlan, Scenario};
use crate::topology::TopologySpec;
use crate::transfers::Transfer;

const DEFAULT_RUNTIME_S: f64 = 30.0;
/// Most windows a job may cut its run into: 100 000 (10 ms windows over 1000 s), each some 60
/// bytes of its result line per flow and 24 of memory until the run ends.
const MAX_WINDOWS: u64 = 100_000;
/// Most windows of all its flows together a job may ask for: a result line up to some 60 MB.
const MAX_FLOW_WINDOWS: u64 = 1_000_000;
/// Longest job line: 1 MiB (a job with 1000 flows and its path is a few tens of kB; without a
/// bound a line with no newline would be read until memory ran out).
const MAX_JOB_BYTES: u64 = 1 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Job {
    flows: Vec<JobFlow>,
    #[serde(default)]
    path: Vec<String>,
    runtime_s: Option<f64>,
    seed: Option<u64>,
    /// Cut the run into windows of this many seconds, each with its own metrics (metrics.rs).
    window_s: Option<f64>,
    /// Links and a route per flow instead of `path` (topology.rs: the topology file's fields).
    topology: Option<TopologySpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFlow {
    cc: String,
    /// A bulk flow's start (default 0) and how long it runs (default: to the run's end); a flow
    /// with transfers has neither.
    start_s: Option<f64>,
    duration_s: Option<f64>,
    /// The flow's extra one-way propagation delay each way, ms (scenario.rs's `FlowPlan`).
    #[serde(default)]
    extra_delay_ms: f64,
    /// Finite transfers instead of a bulk sender, in plan order.
    transfers: Option<Vec<JobTransfer>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobTransfer {
    start_s: f64,
    bytes: u64,
}

#[derive(Serialize)]
struct Done<'a> {
    id: &'a Value,
    ok: bool,
    flows: Vec<DoneFlow<'a>>,
    events: u64,
    wall_s: f64,
}

/// A flow's metrics, and what its controller kept for its trainer, when it kept anything.
#[derive(Serialize)]
struct DoneFlow<'a> {
    #[serde(flatten)]
    metrics: &'a FlowMetrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    decisions: Option<DoneDecisions<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rules: Option<DoneRules<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    transfers: Option<Vec<DoneTransfer>>,
}

impl<'a> DoneFlow<'a> {
    /// `transfers`: the flow's rows of transfers.rs, empty for a bulk flow.
    fn new(metrics: &'a FlowMetrics, kept: Option<&'a Kept>, transfers: &[Transfer]) -> Self {
        let (decisions, rules) = match kept {
            Some(Kept::Decisions(records)) => (Some(DoneDecisions::of(records)), None),
            Some(Kept::Rules(tally)) => (None, Some(DoneRules { uses: &tally.uses, memories: &tally.memories })),
            None => (None, None),
        };
        let transfers = (!transfers.is_empty()).then(|| {
            transfers.iter().map(|t| DoneTransfer { bytes: t.bytes, start_us: t.start_us, end_us: t.end_us }).collect()
        });
        DoneFlow { metrics, decisions, rules, transfers }
    }
}

/// A transfer of a flow, as docs/sim.md gives it: transfers.parquet's row less the flow, its
/// index (the list's order) and `began_us` (a simulated sender starts on time).
#[derive(Serialize)]
struct DoneTransfer {
    bytes: u64,
    start_us: u64,
    /// When its receiver had the last datagram; `null`: not by the run's end.
    end_us: Option<u64>,
}

/// crates/cc/src/tao/tally.rs's lists, one entry per rule, as docs/sim.md gives them.
#[derive(Serialize)]
struct DoneRules<'a> {
    uses: &'a [u64],
    memories: &'a [Vec<Memory>],
}

/// crates/cc/src/indigo/records.rs's columns, as docs/sim.md gives them.
#[derive(Serialize)]
struct DoneDecisions<'a> {
    inputs: &'a [[f32; INPUTS]],
    cwnd_packets: &'a [f64],
    actions: &'a [usize],
    #[serde(skip_serializing_if = "Option::is_none")]
    expert_actions: Option<&'a [usize]>,
}

impl<'a> DoneDecisions<'a> {
    fn of(records: &'a Records) -> Self {
        DoneDecisions {
            inputs: &records.inputs,
            cwnd_packets: &records.cwnd_packets,
            actions: &records.actions,
            expert_actions: records.expert_actions.as_deref(),
        }
    }
}

#[derive(Serialize)]
struct Failed<'a> {
    id: &'a Value,
    ok: bool,
    error: &'a str,
}

/// Validates a job's path options as pantheon-emu does; `seed`, if given, is its `--seed`.
pub fn parse_path(options: &[String], seed: Option<u64>) -> Result<PathPair, String> {
    let mut argv = options.to_vec();
    if let Some(seed) = seed {
        argv.extend(["--seed".to_string(), seed.to_string()]);
    }
    PathArgs::validate_words(&argv)
}

/// The senders of flow `number` (from 1): one for a bulk flow, one per transfer otherwise.
fn senders(number: usize, flow: &JobFlow, runtime_us: u64) -> Result<Vec<FlowPlan>, String> {
    let name = format!("flow {number}");
    let extra_delay_us = extra_delay_us(flow.extra_delay_ms, &shown(flow.extra_delay_ms))
        .map_err(|e| format!("{name}: extra_delay_ms: {e}"))?;
    let Some(transfers) = &flow.transfers else {
        let plan = FlowPlan::new(number, &flow.cc, flow.start_s.unwrap_or(0.0), flow.duration_s, runtime_us)?;
        return Ok(vec![plan.with_extra_delay_us(extra_delay_us)]);
    };
    if flow.start_s.is_some() || flow.duration_s.is_some() {
        return Err(format!(
            "{name}: a flow with transfers takes no start_s or duration_s: each transfer starts at its own start_s and runs until its bytes are acknowledged or the run ends"
        ));
    }
    if transfers.is_empty() {
        return Err(format!(
            "{name}: transfers is empty: give at least one {{\"start_s\": s, \"bytes\": n}}, or leave transfers out for a bulk flow"
        ));
    }
    // The spec is checked (its controller built) once per flow, as a flows file's.
    let head = FlowPlan::new(number, &flow.cc, 0.0, None, runtime_us)?.with_extra_delay_us(extra_delay_us);
    transfers
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let start_us = sender_start_us(t.start_s, &shown(t.start_s), runtime_us)
                .map_err(|e| format!("{name}, transfer {}: {e}", i + 1))?;
            if t.bytes == 0 {
                return Err(format!("{name}, transfer {}: bytes must be a whole number > 0, got 0", i + 1));
            }
            Ok(FlowPlan { start_us, ..head.clone() }.with_bytes(t.bytes))
        })
        .collect()
}

fn scenario(job: &Job) -> Result<Scenario, String> {
    let runtime_us = runtime_us("runtime_s", runtime_s(job))?;
    let mut flows = Vec::with_capacity(job.flows.len());
    for (i, flow) in job.flows.iter().enumerate() {
        flows.extend(senders(i + 1, flow, runtime_us)?);
    }
    match &job.topology {
        None => Scenario::new(flows, runtime_us, parse_path(&job.path, job.seed)?),
        Some(_) if !job.path.is_empty() => {
            Err("give path or topology, not both (a topology's links carry their own path options)".into())
        }
        Some(spec) => Scenario::over(flows, runtime_us, spec.build(job.seed.unwrap_or(0), None)?),
    }
}

fn runtime_s(job: &Job) -> f64 {
    job.runtime_s.unwrap_or(DEFAULT_RUNTIME_S)
}

/// The job's window in µs, if it asks for windows: at least 1 µs, at most the run, and no more
/// than MAX_WINDOWS of them, MAX_FLOW_WINDOWS over its `flows` flows.
fn window_us(job: &Job, flows: usize) -> Result<Option<u64>, String> {
    let Some(window_s) = job.window_s else {
        return Ok(None);
    };
    let runtime_s = runtime_s(job);
    if !(window_s.is_finite() && window_s > 0.0 && window_s <= runtime_s) {
        return Err(format!(
            "window_s: expected a positive number of seconds up to runtime_s ({}), got {}",
            shown(runtime_s),
            shown(window_s)
        ));
    }
    let window_us = seconds_to_us(window_s);
    if window_us == 0 {
        return Err(format!("window_s: expected at least a microsecond (1e-6), got {}", shown(window_s)));
    }
    let windows = seconds_to_us(runtime_s).div_ceil(window_us);
    if windows > MAX_WINDOWS {
        return Err(format!(
            "window_s: {} s cuts the {} s run into more than {MAX_WINDOWS} windows; give a longer window",
            shown(window_s),
            shown(runtime_s)
        ));
    }
    if windows * flows as u64 > MAX_FLOW_WINDOWS {
        return Err(format!(
            "window_s: {windows} windows for each of {flows} flows make more than {MAX_FLOW_WINDOWS}; give a longer window"
        ));
    }
    Ok(Some(window_us))
}

/// The reply to one input line (without its newline).
pub fn answer(line: &[u8]) -> String {
    let mut id = Value::Null;
    let result = (|| {
        let text = std::str::from_utf8(line).map_err(|_| "the job is not UTF-8 text".to_string())?;
        let mut raw: Value = serde_json::from_str(text).map_err(|e| format!("the job is not valid JSON: {e}"))?;
        let Some(object) = raw.as_object_mut() else {
            return Err("a job must be a JSON object: {\"id\": ..., \"flows\": [{\"cc\": ...}], ...}".to_string());
        };
        if let Some(given) = object.remove("id") {
            id = given;
        }
        let job: Job = serde_json::from_value(raw).map_err(|e| format!("bad job: {e}"))?;
        let scenario = scenario(&job)?;
        let window_us = window_us(&job, scenario.flow_count)?;
        catch_unwind(AssertUnwindSafe(|| outcome::metrics_in_windows(&scenario, window_us)))
            .map_err(|_| "internal error: the simulation panicked (a bug; please report the job)".to_string())?
    })();
    let text = match &result {
        Ok(s) => {
            // Each flow's transfers: the rows come flows in order, a flow's together.
            let mut transfers: Vec<&[Transfer]> = vec![&[]; s.flows.len()];
            for rows in s.transfers.chunk_by(|a, b| a.flow == b.flow) {
                transfers[usize::from(rows[0].flow)] = rows;
            }
            let flows = s
                .flows
                .iter()
                .enumerate()
                .map(|(i, metrics)| DoneFlow::new(metrics, s.kept.get(i).and_then(Option::as_ref), transfers[i]))
                .collect();
            serde_json::to_string(&Done { id: &id, ok: true, flows, events: s.events, wall_s: s.wall_s })
        }
        Err(error) => serde_json::to_string(&Failed { id: &id, ok: false, error }),
    };
    text.expect("plain data serialises")
}

/// Answers every job of `input` on `output`, `jobs` at a time.
pub fn run<R: BufRead + Send, W: Write + Send>(input: R, output: W, jobs: usize) -> io::Result<()> {
    let input = Mutex::new(input);
    let output = Mutex::new(output);
    let worker = || -> io::Result<()> {
        let mut line = Vec::new();
        loop {
            line.clear();
            let mut reader = input.lock().expect("no worker panics holding the input");
            if (&mut *reader).take(MAX_JOB_BYTES + 1).read_until(b'\n', &mut line)? == 0 {
                return Ok(());
            }
            let too_long = line.len() as u64 > MAX_JOB_BYTES;
            if too_long {
                reader.skip_until(b'\n')?;
            }
            drop(reader);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let reply = if too_long {
                let error = format!("the job is longer than {MAX_JOB_BYTES} bytes (1 MiB)");
                serde_json::to_string(&Failed { id: &Value::Null, ok: false, error: &error })
                    .expect("plain data serialises")
            } else {
                answer(line.trim_ascii())
            };
            let mut out = output.lock().expect("no worker panics holding the output");
            writeln!(out, "{reply}")?;
            out.flush()?;
        }
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs.max(1)).map(|_| scope.spawn(worker)).collect();
        workers.into_iter().try_for_each(|w| w.join().expect("workers catch panics"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(job: &str) -> String {
        let reply: Value = serde_json::from_str(&answer(job.as_bytes())).unwrap();
        assert_eq!(reply["ok"], Value::Bool(false), "{reply}");
        reply["error"].as_str().unwrap().to_string()
    }

    #[test]
    fn numbers_out_of_range_are_the_jobs_error() {
        let flows = r#""flows": [{"cc": "cubic"}]"#;
        let e = error_of(&format!(r#"{{"id": 1, {flows}, "runtime_s": 1e300}}"#));
        assert_eq!(e, "runtime_s: expected a positive number of seconds up to 86400 (one day), got 1e300");
        // JSON has no NaN or infinity; a number past f64's range is malformed JSON.
        assert!(error_of(&format!(r#"{{{flows}, "runtime_s": 1e400}}"#))
            .starts_with("the job is not valid JSON: number out of range"));
        assert!(error_of(&format!(r#"{{{flows}, "runtime_s": NaN}}"#)).starts_with("the job is not valid JSON"));
        let e = error_of(&format!(r#"{{{flows}, "path": ["--delay", "1e17"], "runtime_s": 1}}"#));
        assert_eq!(e, "--delay: delay must be at most 3600000 ms (one hour), got '1e17'");
        let e = error_of(r#"{"flows": [{"cc": "cubic", "start_s": 1e300}], "runtime_s": 1}"#);
        assert!(e.contains("not before the run ends"), "{e}");
    }

    #[test]
    fn a_window_must_be_a_microsecond_to_the_run_and_few_enough() {
        let job = |rest: &str| format!(r#"{{"flows": [{{"cc": "cubic"}}], {rest}}}"#);
        let e = error_of(&job(r#""runtime_s": 10, "window_s": 0"#));
        assert_eq!(e, "window_s: expected a positive number of seconds up to runtime_s (10), got 0");
        let e = error_of(&job(r#""runtime_s": 10, "window_s": 10.5"#));
        assert_eq!(e, "window_s: expected a positive number of seconds up to runtime_s (10), got 10.5");
        // runtime_s's default, 30 s.
        let e = error_of(&job(r#""window_s": -1"#));
        assert_eq!(e, "window_s: expected a positive number of seconds up to runtime_s (30), got -1");
        let e = error_of(&job(r#""runtime_s": 1e-6, "window_s": 1e-7"#));
        assert_eq!(e, "window_s: expected at least a microsecond (1e-6), got 1e-7");
        let e = error_of(&job(r#""window_s": 1e-4"#));
        assert_eq!(e, "window_s: 1e-4 s cuts the 30 s run into more than 100000 windows; give a longer window");
        let flows = [r#"{"cc": "cubic"}"#; 11].join(", ");
        let e = error_of(&format!(r#"{{"flows": [{flows}], "runtime_s": 100, "window_s": 0.001}}"#));
        assert_eq!(e, "window_s: 100000 windows for each of 11 flows make more than 1000000; give a longer window");
    }

    #[test]
    fn windows_hold_the_flows_bits_and_a_late_flow_has_empty_ones_before_its_start() {
        // Two Cubic flows over 12 Mbit/s, the second from 5 s, 8 s in windows of 1 s.
        let job = |windows: &str| {
            format!(
                r#"{{"flows": [{{"cc": "cubic"}}, {{"cc": "cubic", "start_s": 5}}],
                   "path": ["--delay", "10", "--uplink-queue-bytes", "60000"], "runtime_s": 8{windows}}}"#
            )
            .replace('\n', " ")
        };
        let without_wall_s = |reply: &str| {
            let mut reply: Value = serde_json::from_str(reply).unwrap();
            reply.as_object_mut().unwrap().remove("wall_s");
            reply
        };
        let plain = without_wall_s(&answer(job("").as_bytes()));
        let mut windowed = without_wall_s(&answer(job(r#", "window_s": 1"#).as_bytes()));
        assert_eq!(windowed["ok"], Value::Bool(true), "{windowed}");
        assert!(plain["flows"][0].get("windows").is_none());
        for (i, flow) in windowed["flows"].as_array().unwrap().iter().enumerate() {
            let windows = flow["windows"].as_array().unwrap();
            assert_eq!(windows.len(), 8);
            // Mbit/s over 1 s windows: their sum is the Mbit delivered.
            let mbit: f64 = windows.iter().map(|w| w["throughput_mbps"].as_f64().unwrap()).sum();
            let delivered_mbit = flow["delivered_packets"].as_f64().unwrap() * 1464.0 * 8.0 / 1e6;
            assert!((mbit - delivered_mbit).abs() < 1e-9 * delivered_mbit, "flow {i}: {mbit} against {delivered_mbit}");
        }
        let late = windowed["flows"][1]["windows"].as_array().unwrap();
        for w in &late[..5] {
            assert_eq!((w["throughput_mbps"].as_f64(), &w["delay_p95_ms"]), (Some(0.0), &Value::Null));
        }
        // The second flow's windows fill from its start; the two never deliver more than the link
        // (1464 of each 1500 bytes are the datagram's), give or take the 0.0117 Mbit of a datagram
        // on a window's edge.
        let first = windowed["flows"][0]["windows"].as_array().unwrap();
        for (a, b) in first.iter().zip(late).skip(5) {
            let (a, b) = (a["throughput_mbps"].as_f64().unwrap(), b["throughput_mbps"].as_f64().unwrap());
            assert!(b > 0.0 && a + b <= 12.0 * 1464.0 / 1500.0 + 0.02, "{a} + {b} Mbit/s");
        }
        // Without their windows, the flows are as a job without window_s gives them.
        for flow in windowed["flows"].as_array_mut().unwrap() {
            flow.as_object_mut().unwrap().remove("windows");
        }
        assert_eq!(windowed, plain);
    }

    #[test]
    fn a_topology_job_runs_its_routes_and_a_one_link_topology_is_the_path() {
        let path =
            r#"["--delay", "10", "--uplink-rate", "12", "--downlink-rate", "12", "--uplink-queue-bytes", "30000"]"#;
        let plain = answer(
            format!(r#"{{"flows": [{{"cc": "cubic"}}], "path": {path}, "runtime_s": 3, "seed": 4}}"#).as_bytes(),
        );
        let one = answer(
            format!(
                r#"{{"flows": [{{"cc": "cubic"}}], "runtime_s": 3, "seed": 4,
                    "topology": {{"routes": [["a"]], "link": [{{"name": "a", "path": {path}}}]}}}}"#
            )
            .as_bytes(),
        );
        let flows = |text: &str| serde_json::from_str::<Value>(text).unwrap()["flows"].clone();
        assert_eq!(flows(&plain), flows(&one));
        // Two hops of 12 and 6 Mbit/s: the long flow crosses both, the second only the first.
        let slow = r#"["--delay", "5", "--uplink-rate", "6", "--downlink-rate", "6"]"#;
        let two: Value = serde_json::from_str(&answer(
            format!(
                r#"{{"flows": [{{"cc": "cubic"}}], "runtime_s": 3,
                    "topology": {{"routes": [["a", "b"]], "link": [{{"name": "a", "path": {path}}}, {{"name": "b", "path": {slow}}}]}}}}"#
            )
            .as_bytes(),
        ))
        .unwrap();
        let throughput = two["flows"][0]["throughput_mbps"].as_f64().unwrap();
        assert!(throughput > 4.0 && throughput <= 6.0, "{two}");
        let both = format!(
            r#"{{"flows": [{{"cc": "cubic"}}], "path": {path}, "topology": {{"routes": [["a"]], "link": [{{"name": "a", "path": {path}}}]}}}}"#
        );
        assert!(error_of(&both).contains("give path or topology, not both"));
    }

    #[test]
    fn a_flow_that_records_returns_its_decisions_and_one_that_does_not_has_none() {
        let weights = format!("{}/../cc/tests/fixtures/indigo/lstm32.safetensors", env!("CARGO_MANIFEST_DIR"));
        let job = format!(
            r#"{{"id": 3, "flows": [{{"cc": "indigo:weights={weights},policy=expert,oracle_cwnd_packets=30,record=1"}},
                {{"cc": "indigo:weights={weights}"}}, {{"cc": "fixed:cwnd_packets=20"}}],
              "path": ["--delay", "10", "--uplink-rate", "24", "--downlink-rate", "24"], "runtime_s": 2}}"#
        );
        let reply: Value = serde_json::from_str(&answer(job.replace('\n', " ").as_bytes())).unwrap();
        assert_eq!(reply["ok"], Value::Bool(true), "{reply}");
        let flows = reply["flows"].as_array().unwrap();
        let decisions = &flows[0]["decisions"];
        let n = decisions["actions"].as_array().unwrap().len();
        // At most one decision per 10 ms over the 2 s after the first acknowledgement (20 ms).
        assert!((100..=198).contains(&n), "{n} decisions");
        for column in ["inputs", "cwnd_packets", "expert_actions"] {
            assert_eq!(decisions[column].as_array().unwrap().len(), n, "{column}");
        }
        assert_eq!(decisions["inputs"][0].as_array().unwrap().len(), INPUTS);
        assert_eq!(decisions["actions"], decisions["expert_actions"]);
        assert_eq!(decisions["cwnd_packets"][n - 1], 30.0);
        assert!(flows[0]["throughput_mbps"].as_f64().unwrap() > 0.0);
        for flow in &flows[1..] {
            assert!(flow.get("decisions").is_none() && flow["throughput_mbps"].as_f64().unwrap() > 0.0, "{flow}");
        }
    }

    #[test]
    fn a_tao_flow_that_records_returns_its_rules_and_their_uses_sum_to_its_acks() {
        let tree = format!("{}/../cc/tests/fixtures/tao/three_rules.pb", env!("CARGO_MANIFEST_DIR"));
        // No loss and a short path, so that nearly every delivered datagram's ack is read
        // before the end: the uses (one per ack the controller processed) are the delivered
        // datagrams less at most the last round trip's.
        let job = format!(
            r#"{{"id": 4, "flows": [{{"cc": "tao:tree={tree},record=1"}}, {{"cc": "tao:tree={tree}"}}],
              "path": ["--delay", "5", "--uplink-rate", "12", "--downlink-rate", "12"], "runtime_s": 3}}"#
        );
        let reply: Value = serde_json::from_str(&answer(job.replace('\n', " ").as_bytes())).unwrap();
        assert_eq!(reply["ok"], Value::Bool(true), "{reply}");
        let flow = &reply["flows"][0];
        let rules = &flow["rules"];
        let uses: Vec<u64> = rules["uses"].as_array().unwrap().iter().map(|u| u.as_u64().unwrap()).collect();
        let memories = rules["memories"].as_array().unwrap();
        assert_eq!((uses.len(), memories.len()), (3, 3));
        let total: u64 = uses.iter().sum();
        let delivered = flow["delivered_packets"].as_u64().unwrap();
        assert!(total <= delivered && total + 20 >= delivered, "{total} uses, {delivered} delivered");
        for (rule, kept) in memories.iter().enumerate() {
            let kept = kept.as_array().unwrap();
            // Every k-th use, k the least power of two that keeps at most 64.
            let k = (0..).map(|p| 1u64 << p).find(|k| uses[rule].div_ceil(*k) <= 64).unwrap();
            assert_eq!(kept.len() as u64, uses[rule].div_ceil(k), "rule {rule}");
            assert!(kept.iter().all(|m| m.as_array().unwrap().len() == 4));
        }
        // The first ack's memory is all zero: rule 0's first sample.
        assert_eq!(memories[0][0], serde_json::json!([0.0, 0.0, 0.0, 0.0]));
        assert!(flow.get("decisions").is_none());
        assert!(reply["flows"][1].get("rules").is_none());
    }

    #[test]
    fn a_flow_of_transfers_is_the_flows_files_and_returns_each_transfer_in_plan_order() {
        // A bulk Cubic flow 5 ms further away, and a flow of three transfers 10 ms further, over
        // 12 Mbit/s (1 ms a 1500-byte datagram) and 10 ms each way: the same senders as the
        // flows file's rows.
        let fixed = "fixed:cwnd_packets=10";
        let job = format!(
            r#"{{"flows": [{{"cc": "cubic", "extra_delay_ms": 5, "duration_s": 0.05}},
                {{"cc": "{fixed}", "extra_delay_ms": 10, "transfers": [{{"start_s": 0.1, "bytes": 14640}},
                 {{"start_s": 0.05, "bytes": 1}}, {{"start_s": 0.2, "bytes": 100000000}}]}}],
              "path": ["--delay", "10"], "runtime_s": 1}}"#
        )
        .replace('\n', " ");
        let csv = format!(
            "flow,cc,start_s,duration_s,bytes,extra_delay_ms\n0,cubic,0,0.05,,5\n\
             1,{fixed},0.1,,14640,10\n1,{fixed},0.05,,1,10\n1,{fixed},0.2,,100000000,10\n"
        );
        let plans = crate::flows_file::parse("f.csv", &csv, 1_000_000).unwrap();
        assert_eq!(scenario(&serde_json::from_str(&job).unwrap()).unwrap().flows, plans);
        let reply: Value = serde_json::from_str(&answer(job.as_bytes())).unwrap();
        assert_eq!(reply["ok"], Value::Bool(true), "{reply}");
        let (bulk, flow) = (&reply["flows"][0], &reply["flows"][1]);
        assert!(bulk.get("transfers").is_none() && bulk["delay_mean_ms"].as_f64().unwrap() >= 15.0, "{bulk}");
        let transfers = flow["transfers"].as_array().unwrap();
        let fields = |t: &Value| (t["bytes"].as_u64().unwrap(), t["start_us"].as_u64().unwrap(), t["end_us"].as_u64());
        let [ten, one, huge] = [0, 1, 2].map(|i| fields(&transfers[i]));
        // Ten datagrams sent at once: the first leaves the link at its next delivery opportunity
        // (within 1 ms), the last 9 ms after it (one opportunity a ms), and each arrives 20 ms
        // (one way, the extra delay included) after it left: 29 to 30 ms after the start.
        assert_eq!((ten.0, ten.1), (14_640, 100_000));
        let fct_us = ten.2.unwrap() - ten.1;
        assert!((29_000..=30_000).contains(&fct_us), "{fct_us} µs");
        // One datagram: 20 ms and the wait for an opportunity.
        assert_eq!((one.0, one.1), (1, 50_000));
        let fct_us = one.2.unwrap() - one.1;
        assert!((20_000..=21_000).contains(&fct_us), "{fct_us} µs");
        // 100 MB need 67 s at 12 Mbit/s: not done by the end of the run.
        assert_eq!(huge, (100_000_000, 200_000, None));
        assert!(transfers[2].as_object().unwrap().contains_key("end_us"), "null, not left out");
        // The flow's metrics are over all its transfers' datagrams: 1 + 10 + the large one's, at
        // most a window of 10 per 40 ms round trip over the 0.8 s left (200).
        let delivered = flow["delivered_packets"].as_u64().unwrap();
        assert!((11 + 150..=11 + 200).contains(&delivered), "{flow}");
    }

    #[test]
    fn a_bad_transfer_or_extra_delay_is_the_jobs_one_line_error() {
        let job =
            |flow: &str| format!(r#"{{"flows": [{{"cc": "cubic"}}, {{"cc": "cubic", {flow}}}], "runtime_s": 1}}"#);
        let transfers = |list: &str| job(&format!(r#""transfers": [{list}]"#));
        let ok = r#"{"start_s": 0, "bytes": 1000}"#;
        let cases = [
            (transfers(&format!(r#"{ok}, {{"start_s": 0.5, "bytes": 0}}"#)), "flow 2, transfer 2: bytes must be a whole number > 0, got 0"),
            (transfers(r#"{"start_s": -1, "bytes": 10}"#), "flow 2, transfer 1: expected a start in seconds ≥ 0, got '-1'"),
            (transfers(r#"{"start_s": 1, "bytes": 10}"#), "flow 2, transfer 1: a start at 1 s is not before the run's end at 1 s: start it earlier or lengthen the run"),
            (transfers(r#"{"start_s": 1e300, "bytes": 10}"#), "flow 2, transfer 1: a start at 1e300 s is not before the run's end at 1 s: start it earlier or lengthen the run"),
            (transfers(""), "flow 2: transfers is empty: give at least one {\"start_s\": s, \"bytes\": n}, or leave transfers out for a bulk flow"),
            (job(&format!(r#""duration_s": 1, "transfers": [{ok}]"#)), "flow 2: a flow with transfers takes no start_s or duration_s: each transfer starts at its own start_s and runs until its bytes are acknowledged or the run ends"),
            (job(&format!(r#""start_s": 0, "transfers": [{ok}]"#)), "flow 2: a flow with transfers takes no start_s or duration_s: each transfer starts at its own start_s and runs until its bytes are acknowledged or the run ends"),
            (job(r#""extra_delay_ms": -5"#), "flow 2: extra_delay_ms: expected an extra delay in ms from 0 to 3600000 (one hour), got '-5'"),
            (job(&format!(r#""extra_delay_ms": 4e6, "transfers": [{ok}]"#)), "flow 2: extra_delay_ms: expected an extra delay in ms from 0 to 3600000 (one hour), got '4000000'"),
        ];
        for (job, expected) in cases {
            assert_eq!(error_of(&job), expected, "{job}");
        }
        // What JSON's types already say: a size that is no whole number, a field unknown.
        assert!(error_of(&transfers(r#"{"start_s": 0, "bytes": 1.5}"#))
            .starts_with("bad job: invalid type: floating point `1.5`, expected u64"));
        assert!(error_of(&transfers(r#"{"start_s": 0, "bytes": -3}"#))
            .starts_with("bad job: invalid value: integer `-3`, expected u64"));
        assert!(error_of(&transfers(r#"{"start_s": 0, "size": 3}"#))
            .starts_with("bad job: unknown field `size`, expected `start_s` or `bytes`"));
        assert!(error_of(&transfers(r#"{"bytes": 3}"#)).starts_with("bad job: missing field `start_s`"));
    }

    #[test]
    fn a_job_line_past_a_mebibyte_is_refused_unread_and_the_next_job_runs() {
        let huge = format!("{{\"id\": 1, \"flows\": [{}]}}", "{\"cc\": \"cubic\"},".repeat(100_000));
        let input = format!("{huge}\n{{\"id\": 2, \"flows\": [{{\"cc\": \"cubic\"}}], \"runtime_s\": 0.1}}\n");
        let mut output = Vec::new();
        run(input.as_bytes(), &mut output, 1).unwrap();
        let replies: Vec<Value> = output
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(replies[0]["error"], "the job is longer than 1048576 bytes (1 MiB)");
        assert_eq!((&replies[1]["id"], &replies[1]["ok"]), (&Value::from(2), &Value::Bool(true)));
    }
}
