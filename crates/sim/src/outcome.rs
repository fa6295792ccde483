//! One run from scenario to summary: with the data dir's files (`pantheon-sim run`: the records,
//! the merged text logs, and on request the tunnel's and emulator's own logs) or with the metrics
//! alone (`pantheon-sim batch`). The summary is the JSON object both print: events simulated,
//! wall-clock seconds (files included), simulated seconds and each flow's metrics.

use std::path::Path as FsPath;
use std::time::Instant;

use serde::Serialize;

use crate::logs::Logs;
use crate::merged_logs;
use crate::metrics::{FlowMetrics, Metrics};
use crate::observer::{Kept, Observer};
use crate::records::{self, Records};
use crate::scenario::Scenario;
use crate::simulation;
use crate::spill::Spilled;
use crate::transfers::{Transfer, Transfers};

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub events: u64,
    pub wall_s: f64,
    pub sim_s: f64,
    pub flows: Vec<FlowMetrics>,
    /// Per flow, what its controller kept for its trainer, where it kept anything (`metrics_only`
    /// only; `pantheon-sim batch` returns it, docs/sim.md).
    #[serde(skip)]
    pub kept: Vec<Option<Kept>>,
    /// Each transfer's row, flows in order and transfers in plan order; empty without transfers
    /// (`metrics_only` only; `pantheon-sim batch` returns them, docs/sim.md).
    #[serde(skip)]
    pub transfers: Vec<Transfer>,
}

/// Keeps what each flow's controller kept.
struct KeptByFlow(Vec<Option<Kept>>);

impl Observer for KeptByFlow {
    fn kept(&mut self, flow: usize, kept: &Kept) {
        self.0[flow] = Some(kept.clone());
    }
}

/// Simulates `scenario` keeping only the metrics (and what learned controllers keep, `Kept`, and
/// when each transfer completed).
pub fn metrics_only(scenario: &Scenario) -> Result<Summary, String> {
    metrics_in_windows(scenario, None)
}

/// As `metrics_only`, and with `window_us` (> 0) each flow's metrics per window of that length
/// too (metrics.rs's `Windows`).
pub fn metrics_in_windows(scenario: &Scenario, window_us: Option<u64>) -> Result<Summary, String> {
    let started = Instant::now();
    let metrics = match window_us {
        Some(window_us) => Metrics::in_windows(scenario.flow_count, window_us, scenario.runtime_us),
        None => Metrics::new(scenario.flow_count),
    };
    let mut observers = (metrics, (KeptByFlow(vec![None; scenario.flow_count]), Transfers::new(scenario)));
    let totals = simulation::run(scenario, &mut observers)?;
    let (metrics, (kept, transfers)) = observers;
    Ok(Summary {
        kept: kept.0,
        transfers: transfers.map_or_else(Vec::new, |t| t.rows),
        ..summary(scenario, totals, started, metrics.finish())
    })
}

/// Simulates `scenario` writing into `dir` (created if missing) `records.parquet`,
/// `datalink.log` and `acklink.log` (and `transfers.parquet` for a run with transfers), and with `text_logs` the tunnel's and the emulator's own logs
/// (logs.rs). A run that fails leaves no files behind. The records go through a spill file in
/// `dir` (spill.rs), which has no name there from its creation on.
pub fn with_files(scenario: &Scenario, dir: &FsPath, text_logs: bool) -> Result<Summary, String> {
    let started = Instant::now();
    let existed = dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| format!("--out {}: cannot create the directory: {e}", dir.display()))?;
    let logs = if text_logs {
        Some(Logs::create(dir, scenario).map_err(|e| format!("--out: cannot create a log: {e}"))?)
    } else {
        None
    };
    let metrics = Metrics::new(scenario.flow_count);
    let records = match Records::spilling(scenario.flow_count, dir) {
        Ok(records) => records,
        Err(e) => {
            if let Some(logs) = logs {
                logs.discard();
            }
            if !existed {
                let _ = std::fs::remove_dir(dir);
            }
            return Err(format!("--out: cannot create the records' spill: {e}"));
        }
    };
    let mut observers = ((records, Transfers::new(scenario)), (logs, metrics));
    let simulated = simulation::run(scenario, &mut observers);
    let ((records, transfers), (logs, metrics)) = observers;
    let totals = match simulated {
        Ok(totals) => totals,
        Err(e) => {
            if let Some(logs) = logs {
                logs.discard();
            }
            if !existed {
                let _ = std::fs::remove_dir(dir);
            }
            return Err(e);
        }
    };
    let failed = |e: std::io::Error| format!("--out {}: writing the run's files failed: {e}", dir.display());
    logs.map_or(Ok(()), Logs::finish).map_err(failed)?;
    let spilled = records.finish().finish().map_err(failed)?;
    // Three files from the same records, each on a core of its own.
    let writers: [fn(&FsPath, &Spilled) -> std::io::Result<()>; 3] =
        [|dir, spilled| records::write_parquet(spilled, dir), merged_logs::write_data, merged_logs::write_acks];
    std::thread::scope(|scope| {
        let running: Vec<_> = writers.iter().map(|write| scope.spawn(|| write(dir, &spilled))).collect();
        running.into_iter().try_for_each(|r| r.join().expect("writing a file does not panic"))
    })
    .map_err(failed)?;
    transfers.map_or(Ok(()), |t| t.write_parquet(dir)).map_err(failed)?;
    Ok(summary(scenario, totals, started, metrics.finish()))
}

fn summary(scenario: &Scenario, totals: simulation::Totals, started: Instant, flows: Vec<FlowMetrics>) -> Summary {
    Summary {
        events: totals.events,
        wall_s: started.elapsed().as_secs_f64(),
        sim_s: scenario.runtime_us as f64 / 1e6,
        flows,
        kept: Vec::new(),
        transfers: Vec::new(),
    }
}
