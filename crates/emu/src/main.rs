//! `pantheon-emu` (run as `pantheon emulate`): see the library documentation.

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use pantheon_cli::usage;
use pantheon_emu::args::EmulateArgs;
use pantheon_emu::netns;
use pantheon_emu::relay::{Direction, Failure, Totals};
use pantheon_format::link_log::{describe, queue_text, MahimahiLog, NativeLog};
use pantheon_link::stalls::Stalls;
use pantheon_link::{Path, PathConfig};
use pantheon_sys::child;
use pantheon_sys::clock::{epoch_us, monotonic_us};
use pantheon_sys::privileges::{self, Scope};
use pantheon_sys::stop::StopSignal;

const NAME: &str = "pantheon emulate";
/// Mixed into the run's seed for `--stalls`, so they draw apart from the path's streams.
const STALL_STREAM: u64 = 0x7374_616c; // "stal"

fn main() -> ExitCode {
    match usage::parse::<EmulateArgs>(NAME) {
        Ok(args) => usage::exit(NAME, run(&args)),
        Err(code) => code,
    }
}

struct DirectionSpec<'a> {
    name: &'static str,
    config: &'a PathConfig,
    seed: u64,
    log: Option<&'a PathBuf>,
    mm_log: Option<&'a PathBuf>,
}

/// Opens a direction's log files; called before anything is set up so a bad path leaves nothing.
fn open_logs(
    spec: &DirectionSpec,
    command_line: &str,
    epoch_us: u64,
) -> Result<(Option<NativeLog>, Option<MahimahiLog>), String> {
    let open_error = |flag: String, file: &PathBuf, e: std::io::Error| {
        format!("{flag} {}: cannot create the log: {e}", file.display())
    };
    let native = spec
        .log
        .map(|file| {
            let header = [
                format!(
                    "direction: {} ({})",
                    spec.name,
                    if spec.name == "uplink" { "from the command outwards" } else { "towards the command" }
                ),
                format!("path: {}; seed {}", describe(spec.config), spec.seed),
                format!("base: t_us 0 is {epoch_us} us since the Unix epoch"),
                format!("command line: {command_line}"),
            ];
            NativeLog::create(file, &header).map_err(|e| open_error(format!("--{}-log", spec.name), file, e))
        })
        .transpose()?;
    let mahimahi = spec
        .mm_log
        .map(|file| {
            let header = [
                format!("mahimahi mm-link ({}) [{}] > {}", spec.name, describe(spec.config), file.display()),
                format!("command line: {command_line}"),
                format!("queue: {}", queue_text(spec.config.queue, &spec.config.aqm)),
                format!("init timestamp: {}", epoch_us / 1000),
                "base timestamp: 0".to_string(),
            ];
            MahimahiLog::create(file, &header).map_err(|e| open_error(format!("--{}-mm-log", spec.name), file, e))
        })
        .transpose()?;
    Ok((native, mahimahi))
}

fn run(args: &EmulateArgs) -> Result<i32, String> {
    let pair = args.path.to_paths().map_err(|e| e.to_string())?;
    let (uplink, downlink, seed) = (&pair.uplink, &pair.downlink, pair.seed);
    let command = child::resolve(&args.command)?;
    let command_line: String = std::env::args().collect::<Vec<_>>().join(" ");
    // Time zero of the model and the logs, on both clocks at (almost) the same instant, and on a
    // whole millisecond of the wall clock, as Mahimahi's is (its `timestamp()`): with
    // `--timing mahimahi` the model's milliseconds are then the wall clock's.
    let (now_monotonic_us, now_epoch_us) = (monotonic_us(), epoch_us());
    let base_us = now_monotonic_us - now_epoch_us % 1000;
    let epoch = now_epoch_us - now_epoch_us % 1000;
    let up = DirectionSpec {
        name: "uplink",
        config: uplink,
        seed,
        log: args.uplink_log.as_ref(),
        mm_log: args.uplink_mm_log.as_ref(),
    };
    let down = DirectionSpec {
        name: "downlink",
        config: downlink,
        seed,
        log: args.downlink_log.as_ref(),
        mm_log: args.downlink_mm_log.as_ref(),
    };
    let (up_log, up_mm) = open_logs(&up, &command_line, epoch)?;
    let (down_log, down_mm) = open_logs(&down, &command_line, epoch)?;

    privileges::ensure_net_admin(Scope::CallerNamespace).map_err(|e| e.to_string())?;
    child::block_handled_signals().map_err(|e| format!("cannot take over signals: {e}"))?;
    let outer_peer = std::env::var("PANTHEON_PEER").ok().and_then(|p| p.parse::<Ipv4Addr>().ok());
    let (ends, block) = netns::create(outer_peer).map_err(|e| format!("cannot set up the emulated namespace: {e}"))?;
    for tun in [&ends.inner, &ends.outer] {
        tun.set_nonblocking().map_err(|e| format!("cannot configure the TUN device: {e}"))?;
    }
    let stop = Arc::new(StopSignal::new().map_err(|e| e.to_string())?);

    let last_read_us = Arc::new(AtomicU64::new(0));
    // One stream for both directions: one host stalls both ways at once.
    let stalls = || args.stalls.map(|config| Stalls::new(config, seed ^ STALL_STREAM));
    let uplink_dir = Direction {
        path: Path::new(uplink, pair.uplink_seed(), up_mm.is_some() || up_log.is_some()),
        source: ends.inner.fd(),
        sink: ends.outer.fd(),
        stop: Arc::clone(&stop),
        base_us,
        log: up_log,
        mm_log: up_mm,
        last_read_us: Arc::clone(&last_read_us),
        stalls: stalls(),
    };
    let downlink_dir = Direction {
        path: Path::new(downlink, pair.downlink_seed(), down_mm.is_some() || down_log.is_some()),
        source: ends.outer.fd(),
        sink: ends.inner.fd(),
        stop: Arc::clone(&stop),
        base_us,
        log: down_log,
        mm_log: down_mm,
        last_read_us,
        stalls: stalls(),
    };
    let relays = [
        std::thread::Builder::new().name("uplink".into()).spawn(move || uplink_dir.run()),
        std::thread::Builder::new().name("downlink".into()).spawn(move || downlink_dir.run()),
    ];

    // Behind a chain the command's peer is the far end of the first link (netns.rs).
    let peer = match (block, outer_peer) {
        (netns::Block::Nested { .. }, Some(outer)) => outer.to_string(),
        _ => ends.outer_addr.to_string(),
    };
    let env = [("MAHIMAHI_BASE", peer.clone()), ("PANTHEON_PEER", peer)];
    let outcome = child::run(&command, ends.inner_ns.as_raw_fd(), &env);

    stop.raise();
    let mut problems = Vec::new();
    let mut failures = Vec::new();
    for (spec, relay) in [&up, &down].into_iter().zip(relays) {
        let name = spec.name;
        match relay.map_err(|e| e.to_string()).and_then(|h| h.join().map_err(|_| "panicked".to_string())) {
            Ok(Ok(Totals { write_errors, .. })) if write_errors > 0 => {
                problems.push(format!("{name}: {write_errors} datagrams could not be written"))
            }
            Ok(Ok(_)) => {}
            Ok(Err(Failure::Log(e))) => {
                let files: Vec<String> =
                    spec.log.into_iter().chain(spec.mm_log).map(|f| f.display().to_string()).collect();
                failures.push(format!("the {name} log ({}) could not be written completely: {e}", files.join(", ")))
            }
            Ok(Err(Failure::Relay(e))) => failures.push(format!("the {name} relay failed: {e}")),
            Err(e) => failures.push(format!("the {name} relay: {e}")),
        }
    }
    drop(ends);
    for problem in &problems {
        eprintln!("{NAME}: warning: {problem}");
    }
    // A run whose log is cut short, or whose link stopped, failed whatever its command said.
    match (outcome, failures.is_empty()) {
        (Ok(_), false) => Err(failures.join("; ")),
        (outcome, _) => outcome,
    }
}
