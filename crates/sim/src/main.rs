//! `pantheon-sim`: see the library documentation and docs/sim.md.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use pantheon_cc::tao::{Body, Node, Tree};
use pantheon_cli::path_options::PathArgs;
use pantheon_cli::usage;
use pantheon_sim::scenario::{parse_runtime_s, FlowPlan, Scenario};
use pantheon_sim::topology::Topology;
use pantheon_sim::{batch, flows_file, gym, outcome, tree_json};

const NAME: &str = "pantheon-sim";
/// Most worker threads `batch --jobs` starts: each holds one run in memory, and more threads than
/// cores only share them.
const MAX_JOBS: usize = 1024;

#[derive(Debug, Parser)]
#[command(
    name = "pantheon-sim",
    about = "Simulate Pantheon runs in virtual time: the emulator's link model and pantheon-udp's congestion control.",
    after_help = "Example: pantheon-sim run --out sim/run1 --flow cubic --flow copa@10+20 --delay 20 --uplink-queue-bytes 60000"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// One run, writing its records and merged link logs (and with --text-logs the tunnel's and the
    /// emulator's own logs) and printing a JSON summary.
    Run(Box<RunArgs>),
    /// Many runs: JSON-line jobs on standard input, JSON-line results on standard output.
    Batch(BatchArgs),
    /// Reinforcement-learning environments stepped over standard input and output, for
    /// python/pantheon/gym (docs/gym.md gives the protocol).
    Gym,
    /// Tao's rule trees (RemyCC files): print one, or convert it to and from JSON (docs/cc.md).
    #[command(subcommand)]
    Tree(TreeCommand),
}

#[derive(Debug, Subcommand)]
enum TreeCommand {
    /// A readable dump: the tree's totals, then one line per rule (its number, box, action and
    /// generation), rules numbered depth-first, children in file order.
    Show {
        /// A rule-tree file (a WhiskerTree protobuf, as remy's *.dna files).
        file: PathBuf,
    },
    /// The tree as JSON on standard output (the form `tree write` reads; docs/cc.md).
    Json {
        /// A rule-tree file.
        file: PathBuf,
    },
    /// A tree's JSON on standard input, checked and written to OUT as a rule-tree file.
    Write {
        /// The file to write (replaced if it exists).
        out: PathBuf,
    },
}

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
struct RunArgs {
    /// Directory for the run's files (created if missing): records.parquet, datalink.log,
    /// acklink.log, and with transfers transfers.parquet, as the harness writes them for
    /// `pantheon analyze` (flows numbered from 0).
    #[arg(long, value_name = "RUN_DIR")]
    out: PathBuf,
    /// Also write the text logs of the real experiment: the tunnel's four per flow,
    /// flowI.{sender,receiver}.{ingress,egress}.log, and the emulator's uplink.log, downlink.log
    /// (about 220 bytes per data packet).
    #[arg(long)]
    text_logs: bool,
    /// Length of the run in seconds of simulated time.
    #[arg(long, value_name = "S", default_value = "30")]
    runtime_s: String,
    /// A flow: a crates/cc spec (sized for 1464-byte datagrams, as pantheon-udp), from START_S
    /// (default 0) for DURATION_S (default: to the end). Repeat for more flows.
    #[arg(
        long = "flow",
        value_name = "SPEC[@START_S[+DURATION_S]]",
        required_unless_present = "flows_file",
        conflicts_with = "flows_file"
    )]
    flows: Vec<String>,
    /// The run's senders as CSV instead of --flow: header flow,cc,start_s,duration_s,bytes,
    /// extra_delay_ms, one row per sender (a bulk flow: one row without bytes; a flow with
    /// transfers: one row per transfer, sizes in bytes); times in seconds, extra delay in ms each
    /// way. Writes transfers.parquet when a row has bytes (docs/sim.md).
    #[arg(long, value_name = "FILE")]
    flows_file: Option<PathBuf>,
    /// Microseconds the link's delivery schedule runs ahead of the run's clock, as pantheon-emu's
    /// link clock runs ahead of the flows the harness starts [default: the emulator's lead, drawn
    /// from --seed, 1 130 000 to 1 239 999]. 0 puts the flows' starts on the link's own clock (a
    /// replay of an emulated run, whose flow start is read off the link's log).
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(0..=60_000_000))]
    link_phase_us: Option<u64>,
    /// Start every flow exactly at its planned instant, rather than as late as the hosts start
    /// them (a few ms, drawn from --seed: with several flows they never start together): a
    /// replay of an emulated run, whose flows' starts are read off its logs.
    #[arg(long)]
    exact_starts: bool,
    /// The network as a topology file instead of the path options: links (each with the path
    /// options of its own) and each flow's route over them (TOML; docs/sim.md, "Topologies";
    /// examples in data/topologies/). --seed still seeds the run.
    #[arg(long, value_name = "FILE.toml", conflicts_with_all = PATH_OPTIONS)]
    topology: Option<PathBuf>,
    #[command(flatten)]
    path: PathArgs,
}

/// The path options a topology file replaces: every one but --seed, which seeds the run.
const PATH_OPTIONS: [&str; 20] = [
    "delay",
    "uplink_rate",
    "uplink_trace",
    "uplink_poisson",
    "downlink_rate",
    "downlink_trace",
    "downlink_poisson",
    "uplink_queue",
    "uplink_queue_args",
    "uplink_queue_packets",
    "uplink_queue_bytes",
    "downlink_queue",
    "downlink_queue_args",
    "downlink_queue_packets",
    "downlink_queue_bytes",
    "uplink_loss",
    "downlink_loss",
    "uplink_policer",
    "downlink_policer",
    "timing",
];

#[derive(Debug, Args)]
struct BatchArgs {
    /// Runs at a time [default: the number of CPUs].
    #[arg(long, value_name = "N")]
    jobs: Option<String>,
}

fn run(args: &RunArgs) -> Result<i32, String> {
    let paths = args.path.to_paths().map_err(|e| e.to_string())?;
    let runtime_us = parse_runtime_s(&args.runtime_s)?;
    let flows = match &args.flows_file {
        Some(path) => flows_file::read(path, runtime_us)?,
        None => args
            .flows
            .iter()
            .enumerate()
            .map(|(i, text)| FlowPlan::parse(i + 1, text, runtime_us))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let mut scenario = match &args.topology {
        Some(file) => Scenario::over(flows, runtime_us, Topology::read(file, paths.seed)?)?,
        None => Scenario::new(flows, runtime_us, paths)?,
    };
    if let Some(phase_us) = args.link_phase_us {
        scenario = scenario.with_link_phase_us(phase_us);
    }
    if args.exact_starts {
        scenario = scenario.with_exact_starts();
    }
    let summary = outcome::with_files(&scenario, &args.out, args.text_logs)?;
    println!("{}", serde_json::to_string(&summary).expect("plain data serialises"));
    Ok(0)
}

fn batch(args: &BatchArgs) -> Result<i32, String> {
    let jobs = match &args.jobs {
        Some(text) => match text.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_JOBS).contains(&n) => n,
            _ => return Err(format!("--jobs: expected a whole number from 1 to {MAX_JOBS}, got '{text}'")),
        },
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    batch::run(BufReader::new(io::stdin()), io::stdout(), jobs).map_err(|e| format!("batch: {e}"))?;
    Ok(0)
}

/// `pantheon-sim gym` on standard input and output. Its output goes through its own buffer to
/// the descriptor, not through `Stdout`'s line buffering, which would split a reply of binary
/// records at every newline byte into several writes.
fn gym_serve() -> io::Result<()> {
    let stdout = File::from(io::stdout().as_fd().try_clone_to_owned()?);
    gym::protocol::serve(io::stdin().lock(), BufWriter::with_capacity(1 << 16, stdout))
}

fn tree(command: &TreeCommand) -> Result<i32, String> {
    match command {
        TreeCommand::Show { file } => {
            let tree = Tree::load(file).map_err(|e| e.0)?;
            print!("{}", tree_show(&file.display().to_string(), &tree));
        }
        TreeCommand::Json { file } => {
            let tree = Tree::load(file).map_err(|e| e.0)?;
            println!("{}", tree_json::to_json(&tree));
        }
        TreeCommand::Write { out } => {
            let mut text = String::new();
            io::stdin().read_to_string(&mut text).map_err(|e| format!("tree write: reading standard input: {e}"))?;
            let value: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| format!("tree write: the input is not valid JSON: {e}"))?;
            let tree = tree_json::from_json(&value).map_err(|e| format!("tree write: {e}"))?;
            std::fs::write(out, tree.to_bytes())
                .map_err(|e| format!("tree write {}: cannot write: {e}", out.display()))?;
        }
    }
    Ok(0)
}

/// `tree show`'s text: a header with the totals, then one line per rule.
fn tree_show(name: &str, tree: &Tree) -> String {
    fn depth(node: &Node) -> usize {
        match &node.body {
            Body::Leaf(_) => 0,
            Body::Children(children) => 1 + children.iter().map(depth).max().unwrap_or(0),
        }
    }
    let rules = tree.rules();
    let extras = tree.extras();
    let has = |x: &Option<Vec<u8>>| if x.is_some() { "yes" } else { "no" };
    let mut out = format!(
        "{name}: {} rules, {} levels below the root, generations {}..{}; config: {}, optimizer: {}, configvector: {}\n",
        rules.len(),
        depth(tree.root()),
        rules.iter().map(|(_, r)| r.generation).min().unwrap_or(0),
        rules.iter().map(|(_, r)| r.generation).max().unwrap_or(0),
        has(&extras.config),
        has(&extras.optimizer),
        has(&extras.configvector),
    );
    out.push_str(
        "rule: box [lower, upper) per axis (ms; rtt_ratio a ratio) => action (window in packets), generation\n",
    );
    for (i, (domain, rule)) in rules.iter().enumerate() {
        out.push_str(&format!(
            "{i}: {domain} => cwnd = {} * cwnd {} {}, intersend {} ms, generation {}\n",
            rule.window_multiple,
            if rule.window_increment < 0 { '-' } else { '+' },
            rule.window_increment.unsigned_abs(),
            rule.intersend_ms,
            rule.generation
        ));
    }
    out
}

fn main() -> ExitCode {
    match usage::parse::<Cli>(NAME) {
        Ok(cli) => usage::exit(
            NAME,
            match &cli.command {
                Command::Run(args) => run(args),
                Command::Batch(args) => batch(args),
                Command::Gym => gym_serve().map(|()| 0).map_err(|e| format!("gym: {e}")),
                Command::Tree(command) => tree(command),
            },
        ),
        Err(code) => code,
    }
}
