//! Command-line options of `pantheon-tunnel`.

use std::ffi::OsString;
use std::net::SocketAddrV4;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use pantheon_format::tunnel_wire::OVERHEAD_BYTES;

#[derive(Debug, Parser)]
#[command(
    name = "pantheon-tunnel",
    about = "Run CMD behind an instrumented tunnel: every IP datagram it sends gets a unique id, is logged at both ends, and crosses the path in UDP.",
    long_about = "Run CMD in a fresh network namespace whose only way out is a tunnel to the other \
endpoint's namespace: every IP datagram gets a unique id (UID), is logged when it enters the tunnel \
at one end (ingress log) and when it leaves it at the other (egress log), and crosses the path in a \
UDP datagram carrying a tag made with the session key, which both ends read from --key-file (64 \
hexadecimal digits in a file only its owner may read). Start the server first: it prints, as its \
first line, the command that connects a client. CMD finds its own inner address in $PANTHEON_TUNNEL_LOCAL and the peer's in \
$PANTHEON_TUNNEL_PEER (also $PANTHEON_PEER, $MAHIMAHI_BASE); it can reach nothing else. Exit \
status is CMD's.",
    after_help = "Example (a flow from the client to the server, logged where it enters and where it leaves the tunnel):\n  \
(umask 077; openssl rand -hex 32 > session.key)   # and a copy of it at the client, as private\n  \
pantheon-tunnel server --key-file session.key --egress-log data.received.log -- iperf3 -s\n  \
pantheon-tunnel client 192.0.2.1:40123 --key-file session.key --ingress-log data.sent.log -- sh -c 'iperf3 -c $PANTHEON_TUNNEL_PEER'"
)]
pub struct TunnelArgs {
    #[command(subcommand)]
    pub endpoint: Endpoint,
}

#[derive(Debug, Subcommand)]
pub enum Endpoint {
    /// Listen for one client, print how it must connect, and run CMD.
    Server {
        /// Local UDP address to listen on; port 0 picks a free one.
        #[arg(long, value_name = "IP:PORT", default_value = "0.0.0.0:0")]
        listen: SocketAddrV4,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Connect to a server (this end may be behind a NAT), then run CMD.
    Client {
        /// The server's UDP address, as its first line printed it (with an address this end reaches it at).
        #[arg(value_name = "SERVER_IP:PORT")]
        server: SocketAddrV4,
        /// Hold every data datagram this many milliseconds more in each direction, before it is
        /// sent and after it is received (the flow's round trip grows by twice this); logged
        /// before the delay when sent, after it when received. Fractions allowed, up to 10 000.
        #[arg(long, value_name = "MS", default_value = "0", value_parser = parse_extra_delay_us)]
        extra_delay_ms: ExtraDelayUs,
        #[command(flatten)]
        common: CommonArgs,
    },
}

#[derive(Debug, Args)]
pub struct CommonArgs {
    /// The session key, shared with the other endpoint: 64 hexadecimal digits (and a newline) in a
    /// regular file that grants nothing to group or others.
    #[arg(long, value_name = "FILE")]
    pub key_file: PathBuf,
    /// MTU of the path between the endpoints in bytes; CMD's MTU is this minus the tunnel's overhead.
    #[arg(long, value_name = "BYTES", default_value_t = 1500, value_parser = clap::value_parser!(u16).range(MIN_PATH_MTU_BYTES..))]
    pub path_mtu: u16,
    /// Log of the datagrams entering the tunnel here, sent by CMD (µs, UID, inner bytes).
    #[arg(long, value_name = "FILE")]
    pub ingress_log: Option<PathBuf>,
    /// Log of the datagrams leaving the tunnel here, from the peer to CMD (µs, UID, inner bytes).
    #[arg(long, value_name = "FILE")]
    pub egress_log: Option<PathBuf>,
    /// The ingress log in the original pantheon-tunnel's text form (ms, UID, outer bytes).
    #[arg(long, value_name = "FILE")]
    pub ingress_text_log: Option<PathBuf>,
    /// The egress log in the original pantheon-tunnel's text form.
    #[arg(long, value_name = "FILE")]
    pub egress_text_log: Option<PathBuf>,
    /// Log of the clock exchanges this endpoint initiated with the peer (t1 t2 t3 t4, µs since the epoch).
    #[arg(long, value_name = "FILE")]
    pub clock_log: Option<PathBuf>,
    /// The command to run inside the tunnel's namespace, after '--'.
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `--extra-delay-ms` in whole microseconds (the relay's grain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtraDelayUs(pub u64);

/// The largest extra delay: 10 s each way is beyond any path on Earth; a larger one is a typo.
const MAX_EXTRA_DELAY_MS: f64 = 10_000.0;

fn parse_extra_delay_us(text: &str) -> Result<ExtraDelayUs, String> {
    match text.parse::<f64>() {
        Ok(ms) if (0.0..=MAX_EXTRA_DELAY_MS).contains(&ms) => Ok(ExtraDelayUs((ms * 1000.0).round() as u64)),
        _ => Err(format!("expected milliseconds from 0 to {MAX_EXTRA_DELAY_MS}, e.g. 20 or 2.5")),
    }
}

/// IPv4's minimum MTU (RFC 791: every host must take 576-byte datagrams) plus the overhead.
const MIN_PATH_MTU_BYTES: i64 = 576 + OVERHEAD_BYTES as i64;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<TunnelArgs, clap::Error> {
        TunnelArgs::try_parse_from(std::iter::once("pantheon-tunnel").chain(words.iter().copied()))
    }

    #[test]
    fn server_defaults_to_any_address_and_a_free_port() {
        let Endpoint::Server { listen, common } = parse(&["server", "--key-file", "k", "--", "true"]).unwrap().endpoint
        else {
            panic!()
        };
        assert_eq!(listen, "0.0.0.0:0".parse().unwrap());
        assert_eq!(common.path_mtu, 1500);
        assert_eq!(common.command, ["true"]);
    }

    #[test]
    fn client_needs_the_server_and_the_key() {
        assert!(parse(&["client", "--key-file", "k", "--", "true"]).is_err());
        assert!(parse(&["client", "192.0.2.1:5000", "--", "true"]).is_err());
        assert!(parse(&["server", "--", "true"]).is_err());
        let words = ["client", "192.0.2.1:5000", "--key-file", "k", "--egress-log", "e.log", "--clock-log", "c.log"];
        let args = parse(&[&words[..], &["--", "sh", "-c", "x"]].concat()).unwrap();
        let Endpoint::Client { server, common, .. } = args.endpoint else { panic!() };
        assert_eq!((server, common.key_file.to_str()), ("192.0.2.1:5000".parse().unwrap(), Some("k")));
        assert_eq!(common.clock_log, Some(PathBuf::from("c.log")));
        assert_eq!(common.egress_log, Some(PathBuf::from("e.log")));
        assert_eq!(common.command, ["sh", "-c", "x"]);
    }

    #[test]
    fn extra_delay_is_the_clients_in_microseconds() {
        let client = |delay: &[&str]| {
            parse(&[&["client", "192.0.2.1:5000", "--key-file", "k"], delay, &["--", "true"]].concat()).map(|args| {
                match args.endpoint {
                    Endpoint::Client { extra_delay_ms, .. } => extra_delay_ms.0,
                    Endpoint::Server { .. } => panic!(),
                }
            })
        };
        assert_eq!(client(&[]).unwrap(), 0);
        assert_eq!(client(&["--extra-delay-ms", "20"]).unwrap(), 20_000);
        assert_eq!(client(&["--extra-delay-ms", "2.5"]).unwrap(), 2_500);
        assert_eq!(client(&["--extra-delay-ms", "10000"]).unwrap(), 10_000_000);
        for bad in ["-1", "10001", "nan", "inf", "x"] {
            assert!(client(&["--extra-delay-ms", bad]).is_err(), "{bad}");
        }
        assert!(parse(&["server", "--extra-delay-ms", "5", "--key-file", "k", "--", "true"]).is_err());
    }

    #[test]
    fn path_mtu_must_leave_room_for_576_byte_datagrams() {
        assert!(parse(&["server", "--key-file", "k", "--path-mtu", "611", "--", "true"]).is_err());
        assert!(parse(&["server", "--key-file", "k", "--path-mtu", "612", "--", "true"]).is_ok());
    }
}
