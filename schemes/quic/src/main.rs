//! pantheon-quic: one bulk QUIC flow (RFC 9000) for Pantheon, built on quinn, a production QUIC
//! library. The sender opens one unidirectional stream and writes a constant buffer into it as fast
//! as quinn's flow control and congestion controller allow (Cubic, RFC 9438; BBR, Cardwell et al.,
//! ACM Queue 2016; or NewReno, RFC 9002 §7), until it is told to stop. The receiver accepts any
//! number of connections, one after another or at once, and reads every stream to its end,
//! discarding the bytes; a sender that goes away costs it one connection, never the endpoint.
//!
//!   pantheon-quic recv ADDR PORT
//!   pantheon-quic send --cc cubic|bbr|newreno PEER PORT
//!
//! TLS 1.3 is what QUIC needs (RFC 9001), not a security boundary here: this is experiment traffic
//! between two namespaces of one run, so the receiver presents a self-signed certificate made at
//! start and the sender accepts any certificate (it still checks the handshake signatures, so the
//! TLS exchange is the full production one).
//!
//! The transport is quinn's default except where the experiment needs otherwise: flow-control
//! windows of four bandwidth-delay products of a 1 Gbit/s x 200 ms path, so the congestion
//! controller alone limits the flow; and UDP payloads of at most 1436 bytes, because the Pantheon
//! tunnel's inner MTU is 1464 bytes (minus 20 bytes IPv4 and 8 bytes UDP headers).
//!
//! SIGTERM or SIGINT: close the connections (CONNECTION_CLOSE, RFC 9000 §10.2), exit 0. A bad
//! argument: one line on stderr, exit 2. Any other failure (a lost connection): one line, exit 1.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use quinn::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use quinn::rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use quinn::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use quinn::rustls::{self, DigitallySignedStruct, SignatureScheme};
use quinn::{Endpoint, MtuDiscoveryConfig, TransportConfig, VarInt};
use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str = "usage: pantheon-quic recv ADDR PORT | pantheon-quic send --cc cubic|bbr|newreno PEER PORT";
/// Largest UDP payload that fits the tunnel's 1464-byte inner MTU: 1464 - 20 (IPv4) - 8 (UDP).
const MAX_UDP_PAYLOAD_BYTES: u16 = 1436;
/// Four bandwidth-delay products of a 1 Gbit/s x 200 ms path (25 MB each): the receive windows
/// never limit a flow the emulator can carry, so what the flow does is its congestion controller's.
const FLOW_WINDOW_BYTES: u32 = 100_000_000;
/// How much the sender hands quinn per write; one buffer, shared, never copied.
const WRITE_CHUNK_BYTES: usize = 1 << 20;
/// How long a stopping endpoint waits for its CONNECTION_CLOSE to leave before it exits anyway.
const CLOSE_GRACE: Duration = Duration::from_millis(200);
/// The name in the self-signed certificate, and the one the sender asks for.
const SERVER_NAME: &str = "pantheon-quic";

enum Command {
    Recv { local: SocketAddr },
    Send { cc: Arc<dyn ControllerFactory + Send + Sync>, peer: SocketAddr },
}

fn main() -> ExitCode {
    let command = match parse(std::env::args().skip(1).collect()) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("pantheon-quic: {message}; {USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let result = runtime.map_err(|e| format!("cannot start the runtime: {e}")).and_then(|rt| {
        rt.block_on(async {
            match command {
                Command::Recv { local } => receive(local).await,
                Command::Send { cc, peer } => send(cc, peer).await,
            }
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("pantheon-quic: {message}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: Vec<String>) -> Result<Command, String> {
    let strs: Vec<&str> = args.iter().map(String::as_str).collect();
    match strs.as_slice() {
        ["recv", addr, port] => Ok(Command::Recv { local: socket_addr(addr, port)? }),
        ["send", "--cc", cc, peer, port] => {
            let cc: Arc<dyn ControllerFactory + Send + Sync> = match *cc {
                "cubic" => Arc::new(CubicConfig::default()),
                "bbr" => Arc::new(BbrConfig::default()),
                "newreno" => Arc::new(NewRenoConfig::default()),
                other => return Err(format!("unknown congestion control '{other}'; choose cubic, bbr or newreno")),
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

fn transport(cc: Option<Arc<dyn ControllerFactory + Send + Sync>>) -> Arc<TransportConfig> {
    let mut config = TransportConfig::default();
    config
        .stream_receive_window(VarInt::from_u32(FLOW_WINDOW_BYTES))
        .receive_window(VarInt::from_u32(FLOW_WINDOW_BYTES))
        .send_window(FLOW_WINDOW_BYTES.into())
        .initial_mtu(MAX_UDP_PAYLOAD_BYTES);
    // Discovery stays on (it also detects black holes, RFC 8899 §4.3) but never probes past the tunnel.
    let mut mtu_discovery = MtuDiscoveryConfig::default();
    mtu_discovery.upper_bound(MAX_UDP_PAYLOAD_BYTES);
    config.mtu_discovery_config(Some(mtu_discovery));
    if let Some(cc) = cc {
        config.congestion_controller_factory(cc);
    }
    Arc::new(config)
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

async fn close(endpoint: &Endpoint) {
    endpoint.close(VarInt::from_u32(0), b"stopped");
    let _ = tokio::time::timeout(CLOSE_GRACE, endpoint.wait_idle()).await;
}

async fn receive(local: SocketAddr) -> Result<(), String> {
    let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
        .map_err(|e| format!("cannot make a certificate: {e}"))?;
    let key = PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der());
    let mut server = quinn::ServerConfig::with_single_cert(vec![certified.cert.der().clone()], key.into())
        .map_err(|e| format!("cannot configure TLS: {e}"))?;
    server.transport_config(transport(None));
    let endpoint = Endpoint::server(server, local).map_err(|e| format!("cannot listen on {local}: {e}"))?;
    let accepting = async {
        while let Some(incoming) = endpoint.accept().await {
            tokio::spawn(drain_connection(incoming));
        }
    };
    tokio::select! {
        stop = stop_signal() => stop?,
        () = accepting => return Err("the endpoint stopped accepting connections".into()),
    }
    close(&endpoint).await;
    Ok(())
}

/// Reads every stream of one connection to its end; says on stderr when the connection began and
/// how it ended (the harness keeps the receiver's stderr).
async fn drain_connection(incoming: quinn::Incoming) {
    let remote = incoming.remote_address();
    let connection = match incoming.await {
        Ok(connection) => connection,
        Err(e) => return eprintln!("pantheon-quic: handshake with {remote} failed: {e}"),
    };
    eprintln!("pantheon-quic: connection from {remote}");
    loop {
        match connection.accept_uni().await {
            Ok(mut stream) => {
                tokio::spawn(async move { while let Ok(Some(_)) = stream.read_chunk(usize::MAX, true).await {} });
            }
            Err(e) => return eprintln!("pantheon-quic: connection from {remote} ended: {e}"),
        }
    }
}

async fn send(cc: Arc<dyn ControllerFactory + Send + Sync>, peer: SocketAddr) -> Result<(), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("cannot configure TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let quic_tls = QuicClientConfig::try_from(tls).map_err(|e| format!("cannot configure TLS: {e}"))?;
    let mut client = quinn::ClientConfig::new(Arc::new(quic_tls));
    client.transport_config(transport(Some(cc)));
    let unspecified: SocketAddr = match peer {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("a literal address"),
        SocketAddr::V6(_) => "[::]:0".parse().expect("a literal address"),
    };
    let mut endpoint = Endpoint::client(unspecified).map_err(|e| format!("cannot open a UDP socket: {e}"))?;
    endpoint.set_default_client_config(client);
    let flow = async {
        let connecting = endpoint.connect(peer, SERVER_NAME).map_err(|e| format!("cannot connect to {peer}: {e}"))?;
        let connection = connecting.await.map_err(|e| format!("handshake with {peer} failed: {e}"))?;
        let mut stream = connection.open_uni().await.map_err(|e| format!("cannot open a stream: {e}"))?;
        let chunk = Bytes::from(vec![0u8; WRITE_CHUNK_BYTES]);
        loop {
            stream.write_chunk(chunk.clone()).await.map_err(|e| format!("connection to {peer} lost: {e}"))?;
        }
    };
    tokio::select! {
        stop = stop_signal() => stop?,
        failed = flow => return failed,
    }
    close(&endpoint).await;
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
