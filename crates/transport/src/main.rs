//! `pantheon-udp`: see the library documentation.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use pantheon_cc::flow::controller;
use pantheon_cc::flow::datagram::PACKET_BYTES;
use pantheon_cli::usage;
use pantheon_sys::clock::process_cpu_s;
use pantheon_sys::signal::Signals;
use pantheon_sys::udp::{self, UdpSocket};
use pantheon_transport::log::{AckLog, TransferLog};
use pantheon_transport::{receiver, sender};

const NAME: &str = "pantheon-udp";
/// Either end's socket. Non-blocking sends: the sender waits for room in poll(2), beside its
/// timers. 4 MiB buffers hold 30 ms of 1 Gbit/s data, or 130 000 queued 32-byte
/// acknowledgements, so a thread that is descheduled for a while loses nothing.
const SOCKET: udp::Options = udp::Options {
    buffer_bytes: 4 << 20,
    timestamps: false,
    overflow_counts: false,
    blocking_sends: false,
    receive_tos: false,
};

#[derive(Debug, Parser)]
#[command(
    name = NAME,
    about = "A full-throttle UDP flow under one of Pantheon's congestion controllers, and its receiver.",
    long_about = "A full-throttle UDP flow under one of Pantheon's congestion controllers (crates/cc), \
and its receiver. Data datagrams are 1464-byte IP packets (the tunnel's inner MTU); the receiver \
acknowledges each one with the time it arrived. Nothing is retransmitted. Both ends run until \
SIGTERM or SIGINT and then exit with status 0, printing their totals on standard error (SIGUSR1: \
the totals so far); a sender given --bytes N instead exits with status 0 once ceil(N/1464) of its \
datagrams are acknowledged.",
    after_help = "Example: pantheon-udp recv 9000 & pantheon-udp send --cc copa:delta=0.1 127.0.0.1 9000"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Acknowledge every datagram that arrives on PORT, to whoever sent it.
    Recv {
        /// Local address to listen on.
        #[arg(long, value_name = "ADDR", default_value = "0.0.0.0")]
        bind: Ipv4Addr,
        /// Write `transfer_id end_epoch_us` (CLOCK_REALTIME, µs) when a sender's transfer is
        /// complete: ceil(N/1464) distinct datagrams of its `send --bytes N` received.
        #[arg(long, value_name = "FILE")]
        transfers_log: Option<PathBuf>,
        /// UDP port to listen on.
        #[arg(value_parser = clap::value_parser!(u16).range(1..))]
        port: u16,
    },
    /// Send to PEER:PORT as fast as the congestion controller allows, until stopped (or, with
    /// --bytes, until the transfer is acknowledged).
    Send {
        /// Congestion controller NAME[:KEY=VALUE,...], e.g. copa, copa:delta=0.1, cubic, vegas:alpha=2,beta=4;
        /// ecn=1 among the values is the flow's classic ECN (RFC 3168): data datagrams carry ECT(0)
        /// and the controller hears of CE marks (DCTCP and Prague use ECN of their own).
        #[arg(long, value_name = "SPEC")]
        cc: String,
        /// Local address to send from.
        #[arg(long, value_name = "ADDR", default_value = "0.0.0.0")]
        bind: Ipv4Addr,
        /// Write one line per acknowledgement: t_us, cwnd_bytes, pacing_rate_bps, srtt_us, rtt_us, inflight_bytes.
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
        #[command(flatten)]
        transfer: TransferArgs,
        /// The receiver's IPv4 address.
        peer: Ipv4Addr,
        /// The receiver's UDP port.
        #[arg(value_parser = clap::value_parser!(u16).range(1..))]
        port: u16,
    },
}

/// `send`'s options for a finite transfer.
#[derive(Debug, Args)]
struct TransferArgs {
    /// Send a transfer of N bytes, ceil(N/1464) datagrams, and exit once all are acknowledged
    /// (nothing is retransmitted: a lost datagram is replaced by a new one). Without it: bulk.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    bytes: Option<u64>,
    /// The transfer's id, carried by its datagrams and written in the transfers logs.
    #[arg(long, value_name = "K", default_value_t = 0, requires = "bytes")]
    transfer_id: u32,
    /// Write `transfer_id began_epoch_us` (CLOCK_REALTIME, µs) when the first datagram leaves.
    #[arg(long, value_name = "FILE", requires = "bytes")]
    transfers_log: Option<PathBuf>,
}

impl TransferArgs {
    /// The budget in datagrams, `None` for a bulk flow; the one-line error for one too large to
    /// travel in the wire's 32 bits.
    fn budget_packets(&self) -> Result<Option<u32>, String> {
        let Some(bytes) = self.bytes else { return Ok(None) };
        let datagrams = bytes.div_ceil(PACKET_BYTES);
        u32::try_from(datagrams).map(Some).map_err(|_| {
            format!("--bytes: {bytes} bytes are {datagrams} datagrams, more than a transfer can count ({})", u32::MAX)
        })
    }
}

fn main() -> ExitCode {
    match usage::parse::<Cli>(NAME) {
        Ok(cli) => usage::exit(NAME, run(cli.command)),
        Err(code) => code,
    }
}

fn run(command: Command) -> Result<i32, String> {
    match command {
        Command::Recv { bind, transfers_log, port } => recv(SocketAddrV4::new(bind, port), transfers_log),
        Command::Send { cc, bind, log, transfer, peer, port } => {
            send(&cc, bind, log, &transfer, SocketAddrV4::new(peer, port))
        }
    }
}

/// `--transfers-log FILE`, created (emptied if it exists).
fn transfers_log(path: &Path) -> Result<TransferLog, String> {
    let file = File::create(path).map_err(|e| format!("--transfers-log {}: cannot create it: {e}", path.display()))?;
    Ok(TransferLog::new(file))
}

fn recv(local: SocketAddrV4, log: Option<PathBuf>) -> Result<i32, String> {
    let log = log.as_deref().map(transfers_log).transpose()?;
    let signals = Signals::install().map_err(|e| format!("cannot take over signals: {e}"))?;
    // The kernel's receive times are what the acknowledgements report, and CE marks are counted
    // from each datagram's TOS.
    let options = udp::Options { timestamps: true, receive_tos: true, ..SOCKET };
    let socket = UdpSocket::bind(local, options).map_err(|e| format!("cannot listen on {local}: {e}"))?;
    let mut report = |totals: &receiver::Totals| eprintln!("{NAME}: {totals}; {:.3} s of CPU", process_cpu_s());
    let totals =
        receiver::run(&socket, &signals, log, &mut report).map_err(|e| format!("receiving on {local}: {e}"))?;
    report(&totals);
    Ok(0)
}

fn send(
    spec: &str,
    bind: Ipv4Addr,
    log: Option<PathBuf>,
    transfer: &TransferArgs,
    peer: SocketAddrV4,
) -> Result<i32, String> {
    // Everything that can be wrong with the command line is found before anything is opened.
    let cc = controller::build(spec).map_err(|e| format!("--cc: {e}"))?;
    let ecn = controller::ecn(spec).map_err(|e| format!("--cc: {e}"))?;
    let budget_packets = transfer.budget_packets()?;
    let name = cc.name();
    let log = match log {
        Some(path) => {
            let file = File::create(&path).map_err(|e| format!("--log {}: cannot create it: {e}", path.display()))?;
            Some(AckLog::new(file).map_err(|e| format!("--log {}: {e}", path.display()))?)
        }
        None => None,
    };
    let transfer = match budget_packets {
        Some(budget_packets) => Some(sender::Transfer {
            id: transfer.transfer_id,
            budget_packets,
            log: transfer.transfers_log.as_deref().map(transfers_log).transpose()?,
        }),
        None => None,
    };
    let signals = Signals::install().map_err(|e| format!("cannot take over signals: {e}"))?;
    let local = SocketAddrV4::new(bind, 0);
    // Each acknowledgement is taken at its own arrival time (sender.rs).
    let options = udp::Options { timestamps: true, ..SOCKET };
    let socket = UdpSocket::bind(local, options).map_err(|e| format!("--bind {bind}: cannot bind there: {e}"))?;
    socket.connect(peer).map_err(|e| format!("{peer}: cannot send there: {e}"))?;
    let mut report = |totals: &sender::Totals| eprintln!("{NAME}: {name}: {totals}; {:.3} s of CPU", process_cpu_s());
    let totals = sender::run(cc, ecn, &socket, &signals, log, transfer, &mut report)
        .map_err(|e| format!("sending to {peer}: {e}"))?;
    report(&totals);
    Ok(0)
}
