//! `pantheon-udp`: see the library documentation.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pantheon_cc::flow::controller;
use pantheon_cli::usage;
use pantheon_sys::clock::process_cpu_s;
use pantheon_sys::signal::Signals;
use pantheon_sys::udp::{self, UdpSocket};
use pantheon_transport::log::AckLog;
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
the totals so far).",
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
        /// UDP port to listen on.
        #[arg(value_parser = clap::value_parser!(u16).range(1..))]
        port: u16,
    },
    /// Send to PEER:PORT as fast as the congestion controller allows, until stopped.
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
        /// The receiver's IPv4 address.
        peer: Ipv4Addr,
        /// The receiver's UDP port.
        #[arg(value_parser = clap::value_parser!(u16).range(1..))]
        port: u16,
    },
}

fn main() -> ExitCode {
    match usage::parse::<Cli>(NAME) {
        Ok(cli) => usage::exit(NAME, run(cli.command)),
        Err(code) => code,
    }
}

fn run(command: Command) -> Result<i32, String> {
    match command {
        Command::Recv { bind, port } => recv(SocketAddrV4::new(bind, port)),
        Command::Send { cc, bind, log, peer, port } => send(&cc, bind, log, SocketAddrV4::new(peer, port)),
    }
}

fn recv(local: SocketAddrV4) -> Result<i32, String> {
    let signals = Signals::install().map_err(|e| format!("cannot take over signals: {e}"))?;
    // The kernel's receive times are what the acknowledgements report, and CE marks are counted
    // from each datagram's TOS.
    let options = udp::Options { timestamps: true, receive_tos: true, ..SOCKET };
    let socket = UdpSocket::bind(local, options).map_err(|e| format!("cannot listen on {local}: {e}"))?;
    let mut report = |totals: &receiver::Totals| eprintln!("{NAME}: {totals}; {:.3} s of CPU", process_cpu_s());
    let totals = receiver::run(&socket, &signals, &mut report).map_err(|e| format!("receiving on {local}: {e}"))?;
    report(&totals);
    Ok(0)
}

fn send(spec: &str, bind: Ipv4Addr, log: Option<PathBuf>, peer: SocketAddrV4) -> Result<i32, String> {
    // Everything that can be wrong with the command line is found before anything is opened.
    let cc = controller::build(spec).map_err(|e| format!("--cc: {e}"))?;
    let ecn = controller::ecn(spec).map_err(|e| format!("--cc: {e}"))?;
    let name = cc.name();
    let log = match log {
        Some(path) => {
            let file = File::create(&path).map_err(|e| format!("--log {}: cannot create it: {e}", path.display()))?;
            Some(AckLog::new(file).map_err(|e| format!("--log {}: {e}", path.display()))?)
        }
        None => None,
    };
    let signals = Signals::install().map_err(|e| format!("cannot take over signals: {e}"))?;
    let local = SocketAddrV4::new(bind, 0);
    // Each acknowledgement is taken at its own arrival time (sender.rs).
    let options = udp::Options { timestamps: true, ..SOCKET };
    let socket = UdpSocket::bind(local, options).map_err(|e| format!("--bind {bind}: cannot bind there: {e}"))?;
    socket.connect(peer).map_err(|e| format!("{peer}: cannot send there: {e}"))?;
    let mut report = |totals: &sender::Totals| eprintln!("{NAME}: {name}: {totals}; {:.3} s of CPU", process_cpu_s());
    let totals =
        sender::run(cc, ecn, &socket, &signals, log, &mut report).map_err(|e| format!("sending to {peer}: {e}"))?;
    report(&totals);
    Ok(0)
}
