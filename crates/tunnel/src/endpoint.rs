//! An endpoint's inner end: the namespace the command runs in, with loopback and one TUN device,
//! `ptun0`, whose only route is a /32 to the peer's inner address. There is no default route, so
//! the command reaches its peer through the tunnel and nothing else (anything else: "network is
//! unreachable").
//!
//! Inner addresses are fixed, 10.100.0.1 for the server and 10.100.0.2 for the client: each
//! namespace is fresh and private, so nothing can clash with them, and they stay clear of the
//! emulator's 100.64.0.0/10 so a reader of a trace tells the two apart. The device's MTU is the
//! path's minus the tunnel's overhead (36 bytes), so every datagram the command can send fits in
//! one outer datagram on the path. The device offers checksum and TCP segmentation offload (see
//! `segment` and `coalesce`): the endpoint cuts TCP's 64 KiB packets into MTU-sized segments
//! itself, each of which is one datagram in the tunnel, with its own UID.

use std::io;
use std::net::Ipv4Addr;

use pantheon_sys::namespace::Namespace;
use pantheon_sys::tun::Tun;

use crate::role::Role;

pub const SERVER_INNER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 100, 0, 1);
pub const CLIENT_INNER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 100, 0, 2);
pub const TUN_NAME: &str = "ptun0";

/// (this end's inner address, the peer's).
pub fn inner_addresses(role: Role) -> (Ipv4Addr, Ipv4Addr) {
    match role {
        Role::Server => (SERVER_INNER_ADDR, CLIENT_INNER_ADDR),
        Role::Client => (CLIENT_INNER_ADDR, SERVER_INNER_ADDR),
    }
}

pub struct InnerEnd {
    pub namespace: Namespace,
    /// Non-blocking.
    pub tun: Tun,
}

impl InnerEnd {
    pub fn create(role: Role, inner_mtu_bytes: usize) -> io::Result<InnerEnd> {
        let (local, peer) = inner_addresses(role);
        let (namespace, tun) = Namespace::create(|| {
            let tun = Tun::create_offloading(TUN_NAME)?;
            tun.configure(local, peer, inner_mtu_bytes)?;
            Ok(tun)
        })?;
        tun.set_nonblocking()?;
        Ok(InnerEnd { namespace, tun })
    }
}
