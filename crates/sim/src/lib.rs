//! `pantheon-sim`: Pantheon's discrete-event simulator (docs/architecture.md: the virtual-time
//! driver of the two sans-IO cores). It runs the harness's experiment — flows of crates/cc controllers through
//! the instrumented tunnel over one emulated bottleneck (docs/harness.md) or a topology of several
//! links — with the emulator's link model (`pantheon_link::Path`, configured by the emulator's own option code,
//! `pantheon_cli::path_options`) and pantheon-udp's send rule (`pantheon_cc::flow`, the one both
//! drivers share), in virtual time: deterministic, single-threaded per run, and thousands of times
//! faster than real time at modest rates. It depends on sans-IO crates only: the formats of the
//! files it writes are the emulator's and the tunnel's own code (`pantheon_format`).
//!
//! - [`scenario`]: the run (path, flows, runtime) and its validation; [`flows_file`]: the flows
//!   of `pantheon-sim run --flows-file`, transfers and extra delays included; [`topology`]: the
//!   links of `pantheon-sim run --topology` and each flow's route over them;
//! - [`simulation`]: the event loop; [`host`]: the hosts' wake-up latencies around it;
//!   [`link_clock`]: where the link's schedule stands when the run begins;
//! - [`observer`]: what the simulation reports; [`records`] (records.parquet, each row a
//!   [`crossing`], through the [`spill`] file that bounds its memory, and from it
//!   [`merged_logs`]: datalink.log, acklink.log), [`logs`] (the tunnel's and emulator's own text
//!   logs, on request), [`metrics`] (`pantheon analyze`'s per-flow numbers) and [`transfers`]
//!   (transfers.parquet: each transfer's completion) observe it;
//! - [`outcome`]: one run to its summary; [`batch`]: many runs from JSON lines, in parallel;
//!   [`gym`]: a run stepped by a learning agent, one decision interval at a time;
//! - [`tree_json`]: Tao's rule tree as JSON, for `pantheon-sim tree` and the rule optimiser.
//!
//! docs/sim.md describes the model, how it differs from the emulator, and the command line.

pub mod batch;
pub mod crossing;
pub mod flows_file;
pub mod gym;
pub mod host;
pub mod link_clock;
pub mod logs;
pub mod merged_logs;
pub mod metrics;
pub mod observer;
pub mod outcome;
pub mod records;
pub mod scenario;
pub mod simulation;
pub mod spill;
pub mod topology;
pub mod transfers;
pub mod tree_json;
