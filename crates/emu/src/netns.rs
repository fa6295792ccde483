//! The emulated namespace and the addresses of its two ends.
//!
//! The command runs in a fresh, anonymous network namespace (no name in /run/netns, so nothing
//! outlives the processes and descriptors that hold it) with one TUN device, its default route.
//! The other TUN device lives in the namespace the emulator was started in, with a host route to
//! the inner end. Each pair takes a /24 out of 100.64.0.0/10 (RFC 6598 shared address space, as
//! Mahimahi does) that no interface of the outer namespace already uses, so emulators nest and run
//! side by side.

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

fn free_subnet() -> io::Result<u8> {
    let used = local_ipv4_addresses()?;
    (0..=255u8)
        .find(|&k| !used.iter().any(|a| a.octets()[..3] == [100, 64, k]))
        .ok_or_else(|| io::Error::new(io::ErrorKind::AddrInUse, "all of 100.64.0.0/16 is in use"))
}

/// Creates both ends. Runs in the caller's namespace; the inner one is made in a fresh one.
pub fn create() -> io::Result<Ends> {
    let _lock = lock_allocation()?;
    let k = free_subnet()?;
    let outer_addr = Ipv4Addr::new(100, 64, k, 1);
    let inner_addr = Ipv4Addr::new(100, 64, k, 2);
    let outer = Tun::create("pemu%d")?;
    outer.configure(outer_addr, inner_addr, ETHERNET_MTU_BYTES)?;
    let (inner_ns, inner) = Namespace::create(|| {
        let tun = Tun::create("pemu0")?;
        tun.configure(inner_addr, outer_addr, ETHERNET_MTU_BYTES)?;
        tun.route_everything()?;
        Ok(tun)
    })?;
    Ok(Ends { outer, inner, inner_ns, outer_addr, inner_addr })
}
