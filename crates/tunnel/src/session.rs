//! Who may talk to an endpoint, and the client's connection schedule (sans-IO: told the time and
//! the datagrams, answers with verdicts; never reads a clock or a socket).
//!
//! The server learns its client from the first `hello` that carries the right token, and from
//! then on sends to the address that hello came from: a client behind a NAT connects out, and its
//! NAT's mapping is where the server's datagrams must go. A later hello with the token (the
//! client's keepalive, or the same client after its NAT re-mapped it) moves the peer to its
//! source address. Data from any other address is ignored, so nothing but the peer endpoint can
//! inject datagrams into the command's namespace.
//!
//! The client sends `hello` every `HELLO_INTERVAL_US` until a `welcome` with the token arrives
//! (giving up after `CONNECT_TIMEOUT_US`), and afterwards whenever it has sent nothing for
//! `KEEPALIVE_INTERVAL_US`, which keeps a NAT's mapping open while the command is silent.

use std::net::SocketAddrV4;

use pantheon_format::tunnel_wire::{decapsulate, welcome, Malformed, Message};

/// The client repeats its hello this often until the server answers.
pub const HELLO_INTERVAL_US: u64 = 250_000;
/// The client gives up if the server has not answered after this long.
pub const CONNECT_TIMEOUT_US: u64 = 10_000_000;
/// A connected client that has sent nothing for this long sends a hello. NATs keep a UDP mapping
/// for 30 s at least by RFC 4787's measurements (REQ-5 asks for 2 min); 5 s stays well inside.
pub const KEEPALIVE_INTERVAL_US: u64 = 5_000_000;

/// What to do with a datagram that arrived from the path.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Write `inner` to the TUN device: the peer's datagram `uid`.
    Deliver {
        uid: u64,
        inner: &'a [u8],
    },
    /// Send this control datagram back to where the datagram came from.
    Answer(Vec<u8>),
    /// The server welcomed this client.
    Welcomed,
    Ignore(Ignored),
}

/// Why a datagram was ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    Malformed(Malformed),
    /// From an address that is not the peer's.
    Stranger,
    /// A control message with the wrong token.
    BadToken,
    /// A control message this role never receives (a hello at the client, a welcome at the server).
    WrongRole,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}

/// An endpoint's view of its peer.
#[derive(Debug)]
pub struct Admission {
    role: Role,
    token: Vec<u8>,
    peer: Option<SocketAddrV4>,
}

impl Admission {
    /// A server, waiting for a client that knows `token`.
    pub fn server(token: &str) -> Admission {
        Admission { role: Role::Server, token: token.as_bytes().to_vec(), peer: None }
    }

    /// A client of the server at `server`.
    pub fn client(token: &str, server: SocketAddrV4) -> Admission {
        Admission { role: Role::Client, token: token.as_bytes().to_vec(), peer: Some(server) }
    }

    /// Where datagrams for the peer go; `None` while a server has no client yet.
    pub fn peer(&self) -> Option<SocketAddrV4> {
        self.peer
    }

    pub fn on_datagram<'a>(&mut self, from: SocketAddrV4, datagram: &'a [u8]) -> Verdict<'a> {
        let message = match decapsulate(datagram) {
            Ok(message) => message,
            Err(malformed) => return Verdict::Ignore(Ignored::Malformed(malformed)),
        };
        match (message, self.role) {
            (Message::Data { uid, inner }, _) if self.peer == Some(from) => Verdict::Deliver { uid, inner },
            (Message::Data { .. }, _) => Verdict::Ignore(Ignored::Stranger),
            (Message::Hello { token }, Role::Server) if token == self.token => {
                self.peer = Some(from);
                Verdict::Answer(welcome(&self.token))
            }
            (Message::Welcome { .. }, Role::Client) if self.peer != Some(from) => Verdict::Ignore(Ignored::Stranger),
            (Message::Welcome { token }, Role::Client) if token == self.token => Verdict::Welcomed,
            (Message::Hello { .. }, Role::Server) | (Message::Welcome { .. }, Role::Client) => {
                Verdict::Ignore(Ignored::BadToken)
            }
            (Message::Hello { .. }, Role::Client) | (Message::Welcome { .. }, Role::Server) => {
                Verdict::Ignore(Ignored::WrongRole)
            }
        }
    }
}

/// The client's next step while connecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connecting {
    SendHello,
    /// Wait this long for an answer.
    Wait {
        timeout_us: u64,
    },
    GiveUp,
}

/// The client's hello schedule until the server answers.
#[derive(Debug)]
pub struct Handshake {
    started_us: u64,
    last_hello_us: Option<u64>,
}

impl Handshake {
    pub fn new(now_us: u64) -> Handshake {
        Handshake { started_us: now_us, last_hello_us: None }
    }

    pub fn next(&mut self, now_us: u64) -> Connecting {
        let elapsed_us = now_us.saturating_sub(self.started_us);
        if elapsed_us >= CONNECT_TIMEOUT_US {
            return Connecting::GiveUp;
        }
        match self.last_hello_us {
            Some(last) if now_us < last + HELLO_INTERVAL_US => Connecting::Wait {
                timeout_us: (last + HELLO_INTERVAL_US - now_us).min(CONNECT_TIMEOUT_US - elapsed_us),
            },
            _ => {
                self.last_hello_us = Some(now_us);
                Connecting::SendHello
            }
        }
    }
}

/// When a connected client must send a keepalive.
#[derive(Debug)]
pub struct Keepalive {
    last_sent_us: u64,
}

impl Keepalive {
    pub fn new(now_us: u64) -> Keepalive {
        Keepalive { last_sent_us: now_us }
    }

    /// The client sent something to the server at `now_us`.
    pub fn sent(&mut self, now_us: u64) {
        self.last_sent_us = now_us;
    }

    /// How long until a keepalive is due (zero: now).
    pub fn due_in_us(&self, now_us: u64) -> u64 {
        (self.last_sent_us + KEEPALIVE_INTERVAL_US).saturating_sub(now_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pantheon_format::tunnel_wire::{data_header, hello};

    fn addr(text: &str) -> SocketAddrV4 {
        text.parse().unwrap()
    }

    fn data(uid: u64, inner: &[u8]) -> Vec<u8> {
        let mut datagram = data_header(uid).to_vec();
        datagram.extend_from_slice(inner);
        datagram
    }

    #[test]
    fn server_takes_the_first_hello_with_the_token_as_its_client() {
        let mut server = Admission::server("t0k");
        let nat = addr("198.51.100.7:40000");
        assert_eq!(server.on_datagram(nat, &data(0, b"x")), Verdict::Ignore(Ignored::Stranger));
        assert_eq!(server.on_datagram(nat, &hello(b"wrong")), Verdict::Ignore(Ignored::BadToken));
        assert_eq!(server.peer(), None);
        assert_eq!(server.on_datagram(nat, &hello(b"t0k")), Verdict::Answer(welcome(b"t0k")));
        assert_eq!(server.peer(), Some(nat));
        assert_eq!(server.on_datagram(nat, &data(7, b"ip")), Verdict::Deliver { uid: 7, inner: b"ip" });
        assert_eq!(server.on_datagram(addr("198.51.100.8:40000"), &data(8, b"ip")), Verdict::Ignore(Ignored::Stranger));
    }

    #[test]
    fn a_hello_from_a_new_address_moves_the_server_to_it() {
        let mut server = Admission::server("t");
        server.on_datagram(addr("198.51.100.7:40000"), &hello(b"t"));
        let remapped = addr("198.51.100.7:40001");
        assert_eq!(server.on_datagram(remapped, &hello(b"t")), Verdict::Answer(welcome(b"t")));
        assert_eq!(server.peer(), Some(remapped));
        assert_eq!(server.on_datagram(addr("198.51.100.7:40000"), &data(1, b"x")), Verdict::Ignore(Ignored::Stranger));
    }

    #[test]
    fn client_accepts_only_its_servers_welcome_and_data() {
        let server = addr("100.64.0.1:5000");
        let mut client = Admission::client("t", server);
        assert_eq!(client.on_datagram(addr("100.64.0.9:5000"), &welcome(b"t")), Verdict::Ignore(Ignored::Stranger));
        assert_eq!(client.on_datagram(server, &welcome(b"u")), Verdict::Ignore(Ignored::BadToken));
        assert_eq!(client.on_datagram(server, &hello(b"t")), Verdict::Ignore(Ignored::WrongRole));
        assert_eq!(client.on_datagram(server, &welcome(b"t")), Verdict::Welcomed);
        assert_eq!(client.on_datagram(server, &data(3, b"ip")), Verdict::Deliver { uid: 3, inner: b"ip" });
        assert_eq!(client.on_datagram(server, &[1, 2]), Verdict::Ignore(Ignored::Malformed(Malformed::Truncated)));
    }

    #[test]
    fn handshake_repeats_hello_every_250_ms_for_10_s() {
        let mut handshake = Handshake::new(1_000_000);
        assert_eq!(handshake.next(1_000_000), Connecting::SendHello);
        assert_eq!(handshake.next(1_100_000), Connecting::Wait { timeout_us: 150_000 });
        assert_eq!(handshake.next(1_250_000), Connecting::SendHello);
        assert_eq!(handshake.next(10_900_000), Connecting::SendHello);
        assert_eq!(handshake.next(10_950_000), Connecting::Wait { timeout_us: 50_000 });
        assert_eq!(handshake.next(11_000_000), Connecting::GiveUp);
    }

    #[test]
    fn keepalive_is_due_5_s_after_the_last_datagram_sent() {
        let mut keepalive = Keepalive::new(0);
        assert_eq!(keepalive.due_in_us(1_000_000), 4_000_000);
        keepalive.sent(3_000_000);
        assert_eq!(keepalive.due_in_us(7_000_000), 1_000_000);
        assert_eq!(keepalive.due_in_us(9_000_000), 0);
    }
}
