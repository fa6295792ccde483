//! Who may talk to an endpoint, and the client's connection schedule (sans-IO: told the time and
//! the datagrams, answers with verdicts; never reads a clock or a socket).
//!
//! The server learns its client from the first authenticated `hello` (`auth`), and from then on
//! sends to the address that hello came from: a client behind a NAT connects out, and its NAT's
//! mapping is where the server's datagrams must go. A later authenticated, fresh hello (the
//! client's keepalive, or the same client after its NAT re-mapped it) moves the peer to its
//! source address; a replayed one is refused ([`replay`]), so nobody without the key can move the
//! server. Every other datagram must come from the peer's address, carry a tag made with the
//! peer's key and a number not accepted before, and a data datagram's inner IPv4 source must be
//! the peer's tunnel address: only then is it delivered (and logged). Anything else is dropped
//! and counted by its reason; the checks run cheapest first, the window before the tag as
//! RFC 4303 §3.4.3 orders them.
//!
//! The client sends `hello` every `HELLO_INTERVAL_US` until a `welcome` arrives (giving up after
//! `CONNECT_TIMEOUT_US`), and afterwards whenever it has sent nothing for
//! `KEEPALIVE_INTERVAL_US`, which keeps a NAT's mapping open while the command is silent.
//!
//! [`replay`]: crate::replay

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use pantheon_format::tunnel_wire::{decapsulate, Control, Malformed, Message};

use crate::auth::{ControlSender, DirectionKey};
use crate::replay::{ReplayWindow, Replayed};
use crate::role::Role;

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
    /// Send this control datagram back to where the datagram came from (a server's welcome).
    Answer(Vec<u8>),
    /// The server welcomed this client.
    Welcomed,
    /// The peer's clock probe, sent at `t1_us` on its clock: answer it.
    Probed {
        t1_us: u64,
    },
    /// The answer to one of this endpoint's probes (RFC 5905 §8's t1, t2, t3).
    Exchanged {
        t1_us: u64,
        t2_us: u64,
        t3_us: u64,
    },
    Drop(Dropped),
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    Malformed(Malformed),
    /// From an address that is not the peer's.
    Stranger,
    /// Its tag is not the peer's.
    BadTag,
    Replayed(Replayed),
    /// A data datagram whose inner datagram is not IPv4 from the peer's tunnel address.
    ForeignSource,
    /// A control message this role never receives (a hello at the client, a welcome at the server).
    WrongRole,
}

/// An endpoint's view of its peer.
#[derive(Debug)]
pub struct Admission {
    role: Role,
    /// The key of what the peer sends.
    peer_key: DirectionKey,
    /// How this endpoint seals its answers (shared with its other senders).
    control: Arc<ControlSender>,
    /// The peer's outer address; `None` while a server has no client.
    peer: Option<SocketAddrV4>,
    /// The peer's tunnel address, the only inner source accepted.
    peer_inner_addr: Ipv4Addr,
    /// Data UIDs accepted.
    data: ReplayWindow,
    /// Control counters accepted.
    controls: ReplayWindow,
}

impl Admission {
    /// A server, waiting for a client.
    pub fn server(peer_key: DirectionKey, control: Arc<ControlSender>, peer_inner_addr: Ipv4Addr) -> Admission {
        Admission::new(Role::Server, peer_key, control, None, peer_inner_addr)
    }

    /// A client of the server at `server`.
    pub fn client(
        peer_key: DirectionKey,
        control: Arc<ControlSender>,
        server: SocketAddrV4,
        peer_inner_addr: Ipv4Addr,
    ) -> Admission {
        Admission::new(Role::Client, peer_key, control, Some(server), peer_inner_addr)
    }

    fn new(
        role: Role,
        peer_key: DirectionKey,
        control: Arc<ControlSender>,
        peer: Option<SocketAddrV4>,
        peer_inner_addr: Ipv4Addr,
    ) -> Admission {
        Admission {
            role,
            peer_key,
            control,
            peer,
            peer_inner_addr,
            data: ReplayWindow::default(),
            controls: ReplayWindow::default(),
        }
    }

    /// Where datagrams for the peer go; `None` while a server has no client yet.
    pub fn peer(&self) -> Option<SocketAddrV4> {
        self.peer
    }

    pub fn on_datagram<'a>(&mut self, from: SocketAddrV4, datagram: &'a [u8]) -> Verdict<'a> {
        match self.admit(from, datagram) {
            Ok(verdict) => verdict,
            Err(dropped) => Verdict::Drop(dropped),
        }
    }

    fn admit<'a>(&mut self, from: SocketAddrV4, datagram: &'a [u8]) -> Result<Verdict<'a>, Dropped> {
        let message = decapsulate(datagram).map_err(Dropped::Malformed)?;
        let from_peer = self.peer == Some(from);
        match (message, self.role) {
            (Message::Hello { .. }, Role::Client) | (Message::Welcome { .. }, Role::Server) => Err(Dropped::WrongRole),
            // A hello may come from a new address: the client's NAT re-mapped it.
            (Message::Hello { counter }, Role::Server) => {
                self.authenticate(Window::Control, counter, datagram)?;
                self.peer = Some(from);
                Ok(Verdict::Answer(self.control.message(Control::Welcome, &[])))
            }
            _ if !from_peer => Err(Dropped::Stranger),
            (Message::Data { uid_low, inner }, _) => {
                let uid = self.data.infer(uid_low);
                self.authenticate(Window::Data, uid, datagram)?;
                if inner_source(inner) != Some(self.peer_inner_addr) {
                    return Err(Dropped::ForeignSource);
                }
                Ok(Verdict::Deliver { uid, inner })
            }
            (Message::Welcome { counter }, Role::Client) => {
                self.authenticate(Window::Control, counter, datagram)?;
                Ok(Verdict::Welcomed)
            }
            (Message::Probe { counter, t1_us }, _) => {
                self.authenticate(Window::Control, counter, datagram)?;
                Ok(Verdict::Probed { t1_us })
            }
            (Message::Answer { counter, t1_us, t2_us, t3_us }, _) => {
                self.authenticate(Window::Control, counter, datagram)?;
                Ok(Verdict::Exchanged { t1_us, t2_us, t3_us })
            }
        }
    }

    /// Checks `datagram`'s number against its window, then its tag; marks the number if both pass.
    fn authenticate(&mut self, window: Window, n: u64, datagram: &[u8]) -> Result<(), Dropped> {
        let window = match window {
            Window::Data => &mut self.data,
            Window::Control => &mut self.controls,
        };
        window.check(n).map_err(Dropped::Replayed)?;
        if !self.peer_key.verify(n, datagram) {
            return Err(Dropped::BadTag);
        }
        window.accept(n);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Window {
    Data,
    Control,
}

/// An IPv4 datagram's source address; `None` for anything else.
fn inner_source(inner: &[u8]) -> Option<Ipv4Addr> {
    let source: [u8; 4] = inner.get(12..16)?.try_into().ok()?;
    (inner[0] >> 4 == 4).then(|| Ipv4Addr::from(source))
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
    use crate::auth::{direction_keys, KEY_BYTES};
    use pantheon_format::tunnel_wire::{data_header, UID_WIRE_MASK};

    const SERVER_INNER: Ipv4Addr = Ipv4Addr::new(10, 100, 0, 1);
    const CLIENT_INNER: Ipv4Addr = Ipv4Addr::new(10, 100, 0, 2);
    /// Its halves differ, as a random key's do.
    const KEY: [u8; KEY_BYTES] = {
        let mut key = [0; KEY_BYTES];
        let mut i = 0;
        while i < KEY_BYTES {
            key[i] = i as u8;
            i += 1;
        }
        key
    };

    fn addr(text: &str) -> SocketAddrV4 {
        text.parse().unwrap()
    }

    /// An IPv4 header from `source`, then a byte of payload.
    fn ip_from(source: Ipv4Addr) -> Vec<u8> {
        let mut ip = vec![0x45, 0, 0, 21, 0, 0, 0, 0, 64, 17, 0, 0];
        ip.extend_from_slice(&source.octets());
        ip.extend_from_slice(&SERVER_INNER.octets());
        ip.push(9);
        ip
    }

    /// What the client's tunnel sends: data `uid` sealed with `key`.
    fn data(key: &[u8; KEY_BYTES], uid: u64, inner: &[u8]) -> Vec<u8> {
        let mut datagram = data_header(uid).to_vec();
        datagram.extend_from_slice(inner);
        direction_keys(key, Role::Client).0.seal(uid, &mut datagram);
        datagram
    }

    struct Pair {
        server: Admission,
        client: Admission,
        /// What the client sends its control messages with.
        client_control: Arc<ControlSender>,
        server_control: Arc<ControlSender>,
    }

    fn pair(server_addr: SocketAddrV4) -> Pair {
        let (client_sends, client_receives) = direction_keys(&KEY, Role::Client);
        let (server_sends, server_receives) = direction_keys(&KEY, Role::Server);
        let client_control = Arc::new(ControlSender::new(client_sends));
        let server_control = Arc::new(ControlSender::new(server_sends));
        Pair {
            server: Admission::server(server_receives, Arc::clone(&server_control), CLIENT_INNER),
            client: Admission::client(client_receives, Arc::clone(&client_control), server_addr, SERVER_INNER),
            client_control,
            server_control,
        }
    }

    #[test]
    fn server_takes_the_first_authentic_hello_as_its_client() {
        let Pair { mut server, client_control, .. } = pair(addr("100.64.0.1:5000"));
        let nat = addr("198.51.100.7:40000");
        let ip = ip_from(CLIENT_INNER);
        assert_eq!(server.on_datagram(nat, &data(&KEY, 0, &ip)), Verdict::Drop(Dropped::Stranger));
        let mut forged = client_control.message(Control::Hello, &[]);
        forged[5] ^= 1;
        assert_eq!(server.on_datagram(nat, &forged), Verdict::Drop(Dropped::BadTag));
        assert_eq!(server.peer(), None);
        let hello = client_control.message(Control::Hello, &[]);
        assert!(matches!(server.on_datagram(nat, &hello), Verdict::Answer(_)));
        assert_eq!(server.peer(), Some(nat));
        assert_eq!(server.on_datagram(nat, &data(&KEY, 7, &ip)), Verdict::Deliver { uid: 7, inner: &ip });
        let stranger = addr("198.51.100.8:40000");
        assert_eq!(server.on_datagram(stranger, &data(&KEY, 8, &ip)), Verdict::Drop(Dropped::Stranger));
        // A replayed hello from an attacker's address does not move the server.
        assert_eq!(server.on_datagram(stranger, &hello), Verdict::Drop(Dropped::Replayed(Replayed::Duplicate)));
        assert_eq!(server.peer(), Some(nat));
    }

    #[test]
    fn a_fresh_hello_from_a_new_address_moves_the_server_to_it() {
        let Pair { mut server, client_control, .. } = pair(addr("100.64.0.1:5000"));
        server.on_datagram(addr("198.51.100.7:40000"), &client_control.message(Control::Hello, &[]));
        let remapped = addr("198.51.100.7:40001");
        assert!(matches!(
            server.on_datagram(remapped, &client_control.message(Control::Hello, &[])),
            Verdict::Answer(_)
        ));
        assert_eq!(server.peer(), Some(remapped));
        let ip = ip_from(CLIENT_INNER);
        assert_eq!(
            server.on_datagram(addr("198.51.100.7:40000"), &data(&KEY, 1, &ip)),
            Verdict::Drop(Dropped::Stranger)
        );
    }

    #[test]
    fn data_must_be_authentic_fresh_and_from_the_peers_tunnel_address() {
        let Pair { mut server, client_control, .. } = pair(addr("100.64.0.1:5000"));
        let client = addr("198.51.100.7:40000");
        server.on_datagram(client, &client_control.message(Control::Hello, &[]));
        let ip = ip_from(CLIENT_INNER);
        assert_eq!(server.on_datagram(client, &data(&[4; KEY_BYTES], 0, &ip)), Verdict::Drop(Dropped::BadTag));
        assert_eq!(server.on_datagram(client, &data(&KEY, 0, &ip)), Verdict::Deliver { uid: 0, inner: &ip });
        assert_eq!(
            server.on_datagram(client, &data(&KEY, 0, &ip)),
            Verdict::Drop(Dropped::Replayed(Replayed::Duplicate))
        );
        let spoofed = ip_from(Ipv4Addr::new(1, 2, 3, 4));
        assert_eq!(server.on_datagram(client, &data(&KEY, 1, &spoofed)), Verdict::Drop(Dropped::ForeignSource));
        assert_eq!(server.on_datagram(client, &data(&KEY, 2, &[0x60; 40])), Verdict::Drop(Dropped::ForeignSource));
        // The UID's high bits travel only in the tag: a datagram past 2^31 is still delivered whole.
        let far = UID_WIRE_MASK + 5;
        for uid in [UID_WIRE_MASK - 2, far] {
            assert_eq!(server.on_datagram(client, &data(&KEY, uid, &ip)), Verdict::Deliver { uid, inner: &ip });
        }
    }

    #[test]
    fn a_reflected_datagram_fails() {
        let Pair { mut client, client_control, .. } = pair(addr("100.64.0.1:5000"));
        let server = addr("100.64.0.1:5000");
        let own_probe = client_control.message(Control::Probe, &[1]);
        assert_eq!(client.on_datagram(server, &own_probe), Verdict::Drop(Dropped::BadTag));
    }

    #[test]
    fn client_accepts_only_its_servers_messages() {
        let server = addr("100.64.0.1:5000");
        let Pair { mut client, server_control, .. } = pair(server);
        let welcome = server_control.message(Control::Welcome, &[]);
        assert_eq!(client.on_datagram(addr("100.64.0.9:5000"), &welcome), Verdict::Drop(Dropped::Stranger));
        assert_eq!(
            client.on_datagram(server, &server_control.message(Control::Hello, &[])),
            Verdict::Drop(Dropped::WrongRole)
        );
        assert_eq!(client.on_datagram(server, &welcome), Verdict::Welcomed);
        assert_eq!(
            client.on_datagram(server, &server_control.message(Control::Probe, &[11])),
            Verdict::Probed { t1_us: 11 }
        );
        assert_eq!(
            client.on_datagram(server, &server_control.message(Control::Answer, &[1, 2, 3])),
            Verdict::Exchanged { t1_us: 1, t2_us: 2, t3_us: 3 }
        );
        assert_eq!(client.on_datagram(server, &[1, 2]), Verdict::Drop(Dropped::Malformed(Malformed::Truncated)));
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
