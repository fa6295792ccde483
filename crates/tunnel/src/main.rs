//! `pantheon-tunnel`: see the library documentation.

use std::fs::File;
use std::io::Write;
use std::net::SocketAddrV4;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread::JoinHandle;

use pantheon_cli::usage;
use pantheon_format::tunnel_log::{Context, Side};
use pantheon_format::tunnel_wire::{inner_mtu_bytes, Control};
use pantheon_sys::child;
use pantheon_sys::clock::{epoch_us, monotonic_us};
use pantheon_sys::poll::wait;
use pantheon_sys::privileges::{self, Scope};
use pantheon_sys::stop::StopSignal;
use pantheon_sys::udp::UdpSocket;
use pantheon_tunnel::args::{CommonArgs, Endpoint, TunnelArgs};
use pantheon_tunnel::auth::{direction_keys, read_key_file, ControlSender, DirectionKey};
use pantheon_tunnel::endpoint::{inner_addresses, InnerEnd};
use pantheon_tunnel::log::{ClockLog, Log};
use pantheon_tunnel::relay::{
    DropCounts, Inbound, InboundTotals, Outbound, OutboundTotals, PeerSlot, Prober, CONTROL_TOS, SOCKET,
};
use pantheon_tunnel::role::Role;
use pantheon_tunnel::session::{Admission, Connecting, Handshake, Keepalive, Verdict, CONNECT_TIMEOUT_US};

const NAME: &str = "pantheon-tunnel";

fn main() -> ExitCode {
    match usage::parse::<TunnelArgs>(NAME) {
        Ok(args) => usage::exit(NAME, run(args)),
        Err(code) => code,
    }
}

/// The endpoint's socket and who it talks to, before anything else is set up.
struct Outer {
    role: Role,
    socket: UdpSocket,
    admission: Admission,
    /// The key of what this endpoint sends.
    key: DirectionKey,
    /// Seals this endpoint's control messages, from any of its threads.
    control: Arc<ControlSender>,
    /// For the logs' headers.
    description: String,
    /// What a server prints for its client.
    invitation: Option<String>,
}

fn open_outer(endpoint: &Endpoint, common: &CommonArgs) -> Result<Outer, String> {
    let session_key = read_key_file(&common.key_file)?;
    let role = match endpoint {
        Endpoint::Server { .. } => Role::Server,
        Endpoint::Client { .. } => Role::Client,
    };
    let (key, peer_key) = direction_keys(&session_key, role);
    let control = Arc::new(ControlSender::new(key));
    let (_, peer_inner_addr) = inner_addresses(role);
    match endpoint {
        Endpoint::Server { listen, .. } => {
            let socket =
                UdpSocket::bind(*listen, SOCKET).map_err(|e| format!("--listen {listen}: cannot listen there: {e}"))?;
            let local = socket.local_addr().map_err(|e| e.to_string())?;
            Ok(Outer {
                role,
                admission: Admission::server(peer_key, Arc::clone(&control), peer_inner_addr),
                key,
                control,
                socket,
                description: format!("server listening on {local}"),
                invitation: Some(format!("{NAME} client {local}")),
            })
        }
        Endpoint::Client { server, .. } => {
            let socket = UdpSocket::bind(SocketAddrV4::new(0.into(), 0), SOCKET)
                .map_err(|e| format!("cannot open a UDP socket: {e}"))?;
            socket.connect(*server).map_err(|e| format!("{server}: cannot reach the server: {e}"))?;
            let local = socket.local_addr().map_err(|e| e.to_string())?;
            Ok(Outer {
                role,
                admission: Admission::client(peer_key, Arc::clone(&control), *server, peer_inner_addr),
                key,
                control,
                socket,
                description: format!("client of {server}, from {local}"),
                invitation: None,
            })
        }
    }
}

/// Opens the log files asked for (ingress, egress, clock); called before anything is set up so a
/// bad path leaves nothing.
fn open_logs(common: &CommonArgs, context: &Context) -> Result<(Log, Log, ClockLog), String> {
    let open = |flag: &str, path: &Option<PathBuf>| -> Result<Option<File>, String> {
        path.as_ref()
            .map(|p| File::create(p).map_err(|e| format!("--{flag} {}: cannot create the log: {e}", p.display())))
            .transpose()
    };
    let ingress = Log::new(
        Side::Ingress,
        open("ingress-log", &common.ingress_log)?,
        open("ingress-text-log", &common.ingress_text_log)?,
        context,
    );
    let egress = Log::new(
        Side::Egress,
        open("egress-log", &common.egress_log)?,
        open("egress-text-log", &common.egress_text_log)?,
        context,
    );
    let clock = ClockLog::new(open("clock-log", &common.clock_log)?, context);
    Ok((ingress, egress, clock))
}

/// The client's handshake: hello until the server's welcome, or give up.
fn connect(
    socket: &UdpSocket,
    admission: &mut Admission,
    control: &ControlSender,
    server: SocketAddrV4,
) -> Result<(), String> {
    let mut handshake = Handshake::new(monotonic_us());
    let mut buffer = [0u8; 256];
    loop {
        match handshake.next(monotonic_us()) {
            // Refusals (nobody listening yet) look like silence: try again.
            Connecting::SendHello => drop(socket.send_to(&control.message(Control::Hello, &[]), server, CONTROL_TOS)),
            Connecting::Wait { timeout_us } => {
                wait(socket.fd(), false, -1, Some(timeout_us * 1000)).map_err(|e| e.to_string())?;
                while let Some(n) = socket.try_recv(&mut buffer).map_err(|e| e.to_string())? {
                    if admission.on_datagram(server, &buffer[..n]) == Verdict::Welcomed {
                        return Ok(());
                    }
                }
            }
            Connecting::GiveUp => {
                return Err(format!(
                    "no answer from a server at {server} in {} s: is it running there, reachable from here, and is --key-file the same key as its?",
                    CONNECT_TIMEOUT_US / 1_000_000
                ))
            }
        }
    }
}

fn run(args: TunnelArgs) -> Result<i32, String> {
    let common = match &args.endpoint {
        Endpoint::Server { common, .. } | Endpoint::Client { common, .. } => common,
    };
    let command = child::resolve(&common.command)?;
    let command_line: Vec<String> = std::env::args().collect();
    let inner_mtu = inner_mtu_bytes(usize::from(common.path_mtu));
    let base_epoch_us = epoch_us();

    let Outer { role, socket, mut admission, key, control, description, invitation } =
        open_outer(&args.endpoint, common)?;
    let context = Context { endpoint: &description, base_epoch_us, command_line: &command_line };
    let (ingress_log, egress_log, clock_log) = open_logs(common, &context)?;

    privileges::ensure_net_admin(Scope::NewNamespacesOnly).map_err(|e| e.to_string())?;
    // Before signals are taken over, so that Ctrl-C ends a client that cannot connect at once.
    if let Endpoint::Client { server, .. } = &args.endpoint {
        connect(&socket, &mut admission, &control, *server)?;
    }
    child::block_handled_signals().map_err(|e| format!("cannot take over signals: {e}"))?;
    let inner = InnerEnd::create(role, inner_mtu).map_err(|e| format!("cannot set up the tunnel's namespace: {e}"))?;
    let stop = StopSignal::new().map_err(|e| e.to_string())?;

    let socket = Arc::new(socket);
    let peer = Arc::new(PeerSlot::default());
    if let Some(server) = admission.peer() {
        peer.set(server);
    }
    let extra_delay_us = match &args.endpoint {
        Endpoint::Client { extra_delay_ms, .. } => extra_delay_ms.0,
        Endpoint::Server { .. } => 0,
    };
    let keepalive = (role == Role::Client).then(|| Keepalive::new(monotonic_us()));
    let prober = common.clock_log.is_some().then(|| Prober {
        socket: Arc::clone(&socket),
        peer: Arc::clone(&peer),
        control: Arc::clone(&control),
        stop: stop.fd(),
    });
    let outbound = Outbound {
        tun: inner.tun.fd(),
        socket: Arc::clone(&socket),
        peer: Arc::clone(&peer),
        connected_socket: role == Role::Client,
        key,
        control: Arc::clone(&control),
        keepalive,
        log: ingress_log,
        base_epoch_us,
        inner_mtu_bytes: inner_mtu,
        extra_delay_us,
        stop: stop.fd(),
    };
    let inbound = Inbound {
        tun: inner.tun.fd(),
        socket,
        admission,
        peer,
        log: egress_log,
        control,
        clock_log,
        base_epoch_us,
        extra_delay_us,
        stop: stop.fd(),
    };
    let outbound_thread = std::thread::Builder::new().name("outbound".into()).spawn(move || outbound.run());
    let inbound_thread = std::thread::Builder::new().name("inbound".into()).spawn(move || inbound.run());
    let prober_thread =
        prober.map(|prober| std::thread::Builder::new().name("prober".into()).spawn(move || prober.run()));

    if let Some(line) = invitation {
        let mut stdout = std::io::stdout().lock();
        // The caller may have closed stdout; the client can still be told the port another way.
        let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
    }
    let (local, remote) = inner_addresses(role);
    let env = [
        ("PANTHEON_TUNNEL_LOCAL", local.to_string()),
        ("PANTHEON_TUNNEL_PEER", remote.to_string()),
        ("PANTHEON_TUNNEL_MTU", inner_mtu.to_string()),
        ("PANTHEON_PEER", remote.to_string()),
        ("MAHIMAHI_BASE", remote.to_string()),
    ];
    let outcome = child::run(&command, inner.namespace.as_raw_fd(), &env);

    stop.raise();
    let mut problems = Vec::new();
    let mut log_failures = Vec::new();
    if let Some((totals, log)) = join("outbound relay", outbound_thread, &mut problems) {
        if let Err(e) = log {
            log_failures.push(format!("the ingress log could not be written completely: {e}"));
        }
        outbound_problems(totals, &mut problems);
    }
    let mut dropped = DropCounts::default();
    if let Some((totals, log)) = join("inbound relay", inbound_thread, &mut problems) {
        if let Err(e) = log {
            log_failures.push(format!("the egress or clock log could not be written completely: {e}"));
        }
        dropped = totals.dropped;
        inbound_problems(totals, &mut problems);
    }
    if let Some(thread) = prober_thread {
        join("clock prober", thread, &mut problems);
    }
    // The caller may have closed stdout; the counts are then lost, not the run.
    let _ = writeln!(std::io::stdout(), "{}", dropped.exit_line());
    drop(inner);
    for problem in &problems {
        eprintln!("{NAME}: warning: {problem}");
    }
    // A run whose log is cut short failed whatever its command said.
    match (outcome, log_failures.is_empty()) {
        (Ok(_), false) => Err(log_failures.join("; ")),
        (outcome, _) => outcome,
    }
}

/// What a thread returned; its failure, if it failed, goes into `problems`.
fn join<T>(
    name: &str,
    thread: std::io::Result<JoinHandle<std::io::Result<T>>>,
    problems: &mut Vec<String>,
) -> Option<T> {
    match thread.map_err(|e| e.to_string()).and_then(|h| h.join().map_err(|_| "panicked".to_string())) {
        Ok(Ok(value)) => Some(value),
        Ok(Err(e)) => {
            problems.push(format!("{name} failed: {e}"));
            None
        }
        Err(e) => {
            problems.push(format!("{name}: {e}"));
            None
        }
    }
}

fn outbound_problems(totals: OutboundTotals, problems: &mut Vec<String>) {
    if totals.refused > 0 {
        problems
            .push(format!("{} datagrams were logged at ingress but the kernel refused to send them", totals.refused));
    }
    if totals.malformed > 0 {
        problems.push(format!(
            "{} packets from the command could not be segmented or checksummed and were dropped",
            totals.malformed
        ));
    }
    if totals.before_connection > 0 {
        problems.push(format!(
            "{} datagrams the command sent before the client connected were dropped (not logged)",
            totals.before_connection
        ));
    }
}

fn inbound_problems(totals: InboundTotals, problems: &mut Vec<String>) {
    if totals.write_errors > 0 {
        problems
            .push(format!("{} datagrams were logged at egress but the TUN device refused them", totals.write_errors));
    }
    if totals.ce_drops > 0 {
        problems.push(format!(
            "{} datagrams arrived marked CE around a Not-ECT datagram and were dropped, not logged (RFC 6040 §4.2: the path marked a datagram that was not ECN-capable)",
            totals.ce_drops
        ));
    }
    if totals.ecn_alarms > 0 {
        problems.push(format!(
            "{} datagrams arrived with an outer ECN codepoint that no compliant path makes from their inner one (RFC 6040 §4.2's \"(!!!)\" combinations)",
            totals.ecn_alarms
        ));
    }
    if totals.overflow_drops > 0 {
        problems.push(format!(
            "{} datagrams from the peer were dropped by the kernel before they reached the tunnel (receive buffer full)",
            totals.overflow_drops
        ));
    }
}
