//! pantheon-quic-s2n: one bulk QUIC flow (RFC 9000) for Pantheon, built on s2n-quic, AWS's
//! production QUIC library. The sender opens one unidirectional stream and writes a constant buffer
//! into it as fast as s2n-quic's flow control and congestion controller allow, until it is told to
//! stop: BBRv2 (Cardwell et al., "BBR v2", IETF 104/105 ICCRG; s2n-quic follows
//! draft-cardwell-iccrg-bbr-congestion-control-02) or CUBIC (RFC 9438), both with s2n-quic's pacing.
//! The receiver accepts any number of connections, one after another or at once, and reads every
//! stream to its end, discarding the bytes; a sender that goes away costs it one connection, never
//! the endpoint.
//!
//!   pantheon-quic-s2n recv ADDR PORT
//!   pantheon-quic-s2n send --cc bbr|cubic PEER PORT
//!
//! Why s2n-quic next to quinn (schemes/quic): quinn's BBR is an experimental port of BBRv1 whose
//! bandwidth samples are bytes per ACK interval, and it overruns the emulator's links twofold;
//! s2n-quic's BBR is the one AWS ships, with the delivery-rate samples and loss bounds of BBRv2.
//! TLS 1.3 comes from rustls (RFC 9001) over aws-lc-rs, which builds with only a C compiler.
//!
//! TLS is what QUIC needs, not a security boundary here: this is experiment traffic between two
//! namespaces of one run, so the receiver presents a self-signed certificate made at start and the
//! sender accepts any certificate (it still checks the handshake signatures).
//!
//! The transport is s2n-quic's default except where the experiment needs otherwise: flow-control
//! windows and the stream's send buffer of four bandwidth-delay products of a 1 Gbit/s x 200 ms path,
//! so the congestion controller alone limits the flow; and IP packets of at most 1464 bytes (UDP
//! payload 1436), the Pantheon tunnel's inner MTU, from the first packet on, with MTU probing never
//! going above it (RFC 8899).
//!
//! SIGTERM or SIGINT: close the connections (CONNECTION_CLOSE, RFC 9000 §10.2), exit 0. A bad
//! argument: one line on stderr, exit 2. Any other failure (a lost connection): one line, exit 1.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use s2n_quic::client::Connect;
use s2n_quic::provider::congestion_controller::{self, Bbr, Cubic};
use s2n_quic::provider::io::tokio::Provider as Io;
use s2n_quic::provider::limits::Limits;
use s2n_quic::{Client, Server};
use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str = "usage: pantheon-quic-s2n recv ADDR PORT | pantheon-quic-s2n send --cc bbr|cubic PEER PORT";
/// The tunnel's inner MTU: the largest IP packet it carries (UDP payload 1464 - 20 - 8 = 1436).
const TUNNEL_MTU_BYTES: u16 = 1464;
/// Four bandwidth-delay products of a 1 Gbit/s x 200 ms path (25 MB each): neither the receive
/// windows nor the send buffer ever limit a flow the emulator can carry.
const FLOW_WINDOW_BYTES: u32 = 100_000_000;
/// How much the sender hands s2n-quic per write; one buffer, shared, never copied.
const WRITE_CHUNK_BYTES: usize = 1 << 20;
/// How long a stopping endpoint gives its CONNECTION_CLOSE frames to leave before it exits.
const CLOSE_GRACE: Duration = Duration::from_millis(200);
/// The name in the self-signed certificate, and the one the sender asks for.
const SERVER_NAME: &str = "pantheon-quic";
/// The application protocol both sides name in the handshake (ALPN, RFC 9001 §8.1).
const ALPN: &[u8] = b"pantheon-bulk";

#[derive(Clone, Copy)]
enum Cc {
    Bbr,
    Cubic,
}

enum Command {
    Recv { local: SocketAddr },
    Send { cc: Cc, peer: SocketAddr },
}

fn main() -> ExitCode {
    let command = match parse(std::env::args().skip(1).collect()) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("pantheon-quic-s2n: {message}; {USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let result = runtime.map_err(|e| format!("cannot start the runtime: {e}")).and_then(|rt| {
        rt.block_on(async {
            match command {
                Command::Recv { local } => receive(local).await,
                Command::Send { cc: Cc::Bbr, peer } => send(Bbr::default(), peer).await,
                Command::Send { cc: Cc::Cubic, peer } => send(Cubic::default(), peer).await,
            }
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("pantheon-quic-s2n: {message}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: Vec<String>) -> Result<Command, String> {
    let strs: Vec<&str> = args.iter().map(String::as_str).collect();
    match strs.as_slice() {
        ["recv", addr, port] => Ok(Command::Recv { local: socket_addr(addr, port)? }),
        ["send", "--cc", cc, peer, port] => {
            let cc = match *cc {
                "bbr" => Cc::Bbr,
                "cubic" => Cc::Cubic,
                other => return Err(format!("unknown congestion control '{other}'; choose bbr or cubic")),
            };
            Ok(Command::Send { cc, peer: socket_addr(peer, port)? })
        }
        [] => Err("missing arguments".into()),
        _ => Err(format!("cannot read the arguments '{}'", strs.join(" "))),
    }
}

fn socket_addr(addr: &str, port: &str) -> Result<SocketAddr, String> {
    let ip: IpAddr = addr.parse().map_err(|_| format!("'{addr}' is not an IP address"))?;
    let port: u16 = port.parse().map_err(|_| format!("'{port}' is not a port number (0-65535)"))?;
    Ok(SocketAddr::new(ip, port))
}

fn limits() -> Result<Limits, String> {
    let window = u64::from(FLOW_WINDOW_BYTES);
    Limits::new()
        .with_data_window(window)
        .and_then(|l| l.with_unidirectional_data_window(window))
        .and_then(|l| l.with_max_send_buffer_size(FLOW_WINDOW_BYTES))
        .map_err(|e| format!("cannot set the flow-control windows: {e}"))
}

/// A UDP socket on `local` whose packets fit the tunnel from the handshake on.
fn io(local: SocketAddr) -> Result<Io, String> {
    Io::builder()
        .with_receive_address(local)
        .and_then(|b| b.with_max_mtu(TUNNEL_MTU_BYTES))
        .and_then(|b| b.with_initial_mtu(TUNNEL_MTU_BYTES))
        .and_then(|b| b.build())
        .map_err(|e| format!("cannot open a UDP socket on {local}: {e}"))
}

/// Resolves at the first SIGTERM or SIGINT.
async fn stop_signal() -> Result<(), String> {
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("cannot catch SIGTERM: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("cannot catch SIGINT: {e}"))?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

async fn receive(local: SocketAddr) -> Result<(), String> {
    let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
        .map_err(|e| format!("cannot make a certificate: {e}"))?;
    let tls = s2n_quic::provider::tls::rustls::Server::builder()
        .with_certificate(certified.cert.der().to_vec(), certified.signing_key.serialize_der())
        .and_then(|b| b.with_application_protocols([ALPN].iter()))
        .and_then(|b| b.build())
        .map_err(|e| format!("cannot configure TLS: {e}"))?;
    let mut server = Server::builder()
        .with_tls(tls)
        .map_err(|e| format!("cannot configure TLS: {e}"))?
        .with_io(io(local)?)
        .map_err(|e| format!("cannot listen on {local}: {e}"))?
        .with_limits(limits()?)
        .map_err(|e| format!("cannot set the limits: {e}"))?
        .start()
        .map_err(|e| format!("cannot listen on {local}: {e}"))?;
    // Handles of every connection so far, to close them all on stop (a closed one's is inert).
    let mut connections = Vec::new();
    let accepting = async {
        while let Some(connection) = server.accept().await {
            connections.push(connection.handle());
            tokio::spawn(drain_connection(connection));
        }
    };
    tokio::select! {
        stop = stop_signal() => stop?,
        () = accepting => return Err("the endpoint stopped accepting connections".into()),
    }
    for connection in &connections {
        connection.close(0u32.into());
    }
    tokio::time::sleep(CLOSE_GRACE).await;
    Ok(())
}

/// Reads every stream of one connection to its end; says on stderr when the connection began and
/// how it ended (the harness keeps the receiver's stderr).
async fn drain_connection(mut connection: s2n_quic::Connection) {
    let remote = connection.remote_addr().map_or_else(|e| format!("an unknown address ({e})"), |a| a.to_string());
    eprintln!("pantheon-quic-s2n: connection from {remote}");
    loop {
        match connection.accept_receive_stream().await {
            Ok(Some(mut stream)) => {
                tokio::spawn(async move { while let Ok(Some(_)) = stream.receive().await {} });
            }
            Ok(None) => return eprintln!("pantheon-quic-s2n: connection from {remote} ended"),
            Err(e) => return eprintln!("pantheon-quic-s2n: connection from {remote} ended: {e}"),
        }
    }
}

async fn send<C: congestion_controller::Provider>(cc: C, peer: SocketAddr) -> Result<(), String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("cannot configure TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let unspecified: SocketAddr = match peer {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("a literal address"),
        SocketAddr::V6(_) => "[::]:0".parse().expect("a literal address"),
    };
    let mut client = Client::builder()
        .with_tls(s2n_quic::provider::tls::rustls::Client::from(tls))
        .map_err(|e| format!("cannot configure TLS: {e}"))?
        .with_io(io(unspecified)?)
        .map_err(|e| format!("cannot open a UDP socket: {e}"))?
        .with_limits(limits()?)
        .map_err(|e| format!("cannot set the limits: {e}"))?
        .with_congestion_controller(cc)
        .map_err(|e| format!("cannot set the congestion controller: {e}"))?
        .start()
        .map_err(|e| format!("cannot start the client: {e}"))?;
    let connection = client
        .connect(Connect::new(peer).with_server_name(SERVER_NAME))
        .await
        .map_err(|e| format!("handshake with {peer} failed: {e}"))?;
    let handle = connection.handle();
    let flow = async move {
        let mut connection = connection;
        let mut stream = connection.open_send_stream().await.map_err(|e| format!("cannot open a stream: {e}"))?;
        let chunk = Bytes::from(vec![0u8; WRITE_CHUNK_BYTES]);
        loop {
            stream.send(chunk.clone()).await.map_err(|e| format!("connection to {peer} lost: {e}"))?;
        }
    };
    tokio::select! {
        stop = stop_signal() => stop?,
        failed = flow => return failed,
    }
    handle.close(0u32.into());
    let _ = tokio::time::timeout(CLOSE_GRACE, client.wait_idle()).await;
    Ok(())
}

/// Accepts whatever certificate the receiver presents (see the header: experiment traffic, not
/// security), but verifies the handshake signatures with the provider's algorithms as usual.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
