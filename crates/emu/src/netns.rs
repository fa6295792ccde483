//! The emulated namespace and the addresses of its two ends.
//!
//! The command runs in a fresh, anonymous network namespace (no name in /run/netns, so nothing
//! outlives the processes and descriptors that hold it) with one TUN device, its default route.
//! The other TUN device lives in the namespace the emulator was started in, with a host route to
//! the inner end. Each pair takes a /24 out of 100.64.0.0/10 (RFC 6598 shared address space, as
//! Mahimahi does) that no interface of the outer namespace already uses, so emulators run side by
//! side, and routes all of it to its outer device.
//!
//! Chains (issue 36 §3): an emulator started as another's command (`pantheon emulate A -- pantheon
//! emulate B -- CMD`, as Mahimahi's shells nest) makes a second link in series. It knows it is
//! nested by its environment (the outer emulator's PANTHEON_PEER, 100.64.a.1) and by its namespace
//! (an address of 100.64.a.0/24: the outer's inner end), and takes a /30 inside the outer's /24,
//! 100.64.a.(4m+1) and .(4m+2), m ≥ 1: the outer namespace's /24 route then brings the replies
//! back into the middle namespace, whose own routes (the outer's default route, the inner pair's
//! host route) carry datagrams on, since every emulator lets its inner namespace forward. The
//! command behind the chain keeps the outer PANTHEON_PEER (and MAHIMAHI_BASE), so it talks across
//! both links. A chain of two: a third level's replies would need a route in the middle namespace
//! that no emulator makes.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use pantheon_sys::errno::check;
use pantheon_sys::namespace::{local_ipv4_addresses, Namespace};
use pantheon_sys::tun::{Tun, ETHERNET_MTU_BYTES};

/// Both ends of an emulated path.
#[derive(Debug)]
pub struct Ends {
    /// In the emulator's own namespace; its address is the command's peer.
    pub outer: Tun,
    /// In the command's namespace.
    pub inner: Tun,
    /// The command's namespace, kept alive by this descriptor.
    pub inner_ns: Namespace,
    pub outer_addr: Ipv4Addr,
    pub inner_addr: Ipv4Addr,
}

/// Serialises address allocation among emulators starting in the same namespace: an abstract
/// Unix socket name is per network namespace and vanishes with its socket, even on SIGKILL.
fn lock_allocation() -> io::Result<OwnedFd> {
    const NAME: &[u8] = b"\0pantheon-emu-address-allocation";
    // SAFETY: plain socket(2); the address is built in a zeroed sockaddr_un.
    let fd = check(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, src) in addr.sun_path.iter_mut().zip(NAME) {
        *dst = *src as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + NAME.len()) as libc::socklen_t;
    for _ in 0..5000 {
        // SAFETY: addr is a valid sockaddr_un of length len.
        let ret = unsafe { libc::bind(sock.as_raw_fd(), &addr as *const _ as *const libc::sockaddr, len) };
        if ret == 0 {
            return Ok(sock);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EADDRINUSE) {
            return Err(err);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Err(io::Error::new(io::ErrorKind::TimedOut, "another emulator held the address lock for 5 s"))
}

/// Where an emulator's pair of addresses comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// A /24 of its own, 100.64.k.0/24 (.1 outside, .2 inside), routed to its outer device.
    Own(u8),
    /// The m-th /30 of an outer emulator's 100.64.a.0/24: nested, the second link of a chain.
    Nested { a: u8, m: u8 },
}

impl Block {
    /// (outer end, inner end).
    fn ends(self) -> (Ipv4Addr, Ipv4Addr) {
        let (k, base) = match self {
            Block::Own(k) => (k, 0),
            Block::Nested { a, m } => (a, 4 * m),
        };
        (Ipv4Addr::new(100, 64, k, base + 1), Ipv4Addr::new(100, 64, k, base + 2))
    }
}

/// The block for an emulator whose caller's namespace has the addresses `used` and whose
/// environment's PANTHEON_PEER is `outer_peer` (module header).
pub fn choose_block(used: &[Ipv4Addr], outer_peer: Option<Ipv4Addr>) -> io::Result<Block> {
    let taken = |a: &Ipv4Addr, k: u8| a.octets()[..3] == [100, 64, k];
    if let Some(peer) = outer_peer.filter(|p| p.octets()[..2] == [100, 64] && p.octets()[3] == 1) {
        let a = peer.octets()[2];
        if used.iter().any(|u| taken(u, a)) {
            return (1..64u8)
                .map(|m| Block::Nested { a, m })
                .find(|block| {
                    let (outer, inner) = block.ends();
                    !used.contains(&outer) && !used.contains(&inner)
                })
                .ok_or_else(|| io::Error::new(io::ErrorKind::AddrInUse, format!("all of 100.64.{a}.0/24 is in use")));
        }
    }
    (0..=255u8)
        .find(|&k| !used.iter().any(|u| taken(u, k)))
        .map(Block::Own)
        .ok_or_else(|| io::Error::new(io::ErrorKind::AddrInUse, "all of 100.64.0.0/16 is in use"))
}

/// Lets a namespace's kernel forward datagrams between its devices (net.ipv4.ip_forward, a
/// per-namespace sysctl): the calling thread's namespace, which must be one of ours. Best effort:
/// a kernel that refuses it (a user namespace's, on some kernels) leaves a path that works alone
/// and cannot be a chain's first link.
fn forward_datagrams() {
    let _ = std::fs::write("/proc/sys/net/ipv4/ip_forward", "1");
}

/// Creates both ends. Runs in the caller's namespace; the inner one is made in a fresh one.
/// `outer_peer`: the PANTHEON_PEER of an emulator this one may be nested in.
pub fn create(outer_peer: Option<Ipv4Addr>) -> io::Result<(Ends, Block)> {
    let _lock = lock_allocation()?;
    let block = choose_block(&local_ipv4_addresses()?, outer_peer)?;
    let (outer_addr, inner_addr) = block.ends();
    let outer = Tun::create("pemu%d")?;
    outer.configure(outer_addr, inner_addr, ETHERNET_MTU_BYTES)?;
    if let Block::Own(k) = block {
        outer.route(Ipv4Addr::new(100, 64, k, 0), 24)?;
    }
    let (inner_ns, inner) = Namespace::create(|| {
        let tun = Tun::create("pemu0")?;
        tun.configure(inner_addr, outer_addr, ETHERNET_MTU_BYTES)?;
        tun.route_everything()?;
        forward_datagrams();
        Ok(tun)
    })?;
    Ok((Ends { outer, inner, inner_ns, outer_addr, inner_addr }, block))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> Ipv4Addr {
        text.parse().unwrap()
    }

    #[test]
    fn an_emulator_alone_takes_the_first_free_slash_24() {
        assert_eq!(choose_block(&[addr("127.0.0.1")], None).unwrap(), Block::Own(0));
        assert_eq!(choose_block(&[addr("100.64.0.1"), addr("100.64.1.1")], None).unwrap(), Block::Own(2));
        // A peer whose /24 is not this namespace's: not nested (an emulator beside another).
        assert_eq!(choose_block(&[addr("10.0.0.1")], Some(addr("100.64.3.1"))).unwrap(), Block::Own(0));
    }

    #[test]
    fn a_nested_emulator_takes_a_slash_30_of_the_outer_ones_slash_24() {
        let inside = [addr("127.0.0.1"), addr("100.64.3.2")];
        let block = choose_block(&inside, Some(addr("100.64.3.1"))).unwrap();
        assert_eq!(block, Block::Nested { a: 3, m: 1 });
        assert_eq!(block.ends(), (addr("100.64.3.5"), addr("100.64.3.6")));
        let busy = [addr("100.64.3.2"), addr("100.64.3.5")];
        assert_eq!(choose_block(&busy, Some(addr("100.64.3.1"))).unwrap(), Block::Nested { a: 3, m: 2 });
    }
}
