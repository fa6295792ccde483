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

use crate::sys::check;
use crate::tun::{bring_up, Tun};

/// Both ends of an emulated path.
#[derive(Debug)]
pub struct Ends {
    /// In the emulator's own namespace; its address is the command's peer.
    pub outer: Tun,
    /// In the command's namespace.
    pub inner: Tun,
    /// Keeps the command's namespace alive and lets children join it.
    pub inner_ns: OwnedFd,
    pub outer_addr: Ipv4Addr,
    pub inner_addr: Ipv4Addr,
}

impl Ends {
    /// The inode that identifies the command's namespace in /proc/PID/ns/net.
    pub fn inner_ns_inode(&self) -> io::Result<u64> {
        // SAFETY: fstat on a descriptor we own into a zeroed stat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstat(self.inner_ns.as_raw_fd(), &mut st) })?;
        Ok(st.st_ino)
    }
}

/// IPv4 addresses of every interface in the calling thread's namespace.
fn local_ipv4_addresses() -> io::Result<Vec<Ipv4Addr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below.
    check(unsafe { libc::getifaddrs(&mut head) })?;
    let mut found = Vec::new();
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: cursor walks the list getifaddrs returned.
        let ifa = unsafe { &*cursor };
        if !ifa.ifa_addr.is_null() && i32::from(unsafe { (*ifa.ifa_addr).sa_family }) == libc::AF_INET {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            found.push(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
        }
        cursor = ifa.ifa_next;
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
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

/// Creates both ends. Runs in the caller's namespace; the inner one is made on a helper thread
/// so that the calling thread never leaves its namespace.
pub fn create() -> io::Result<Ends> {
    let _lock = lock_allocation()?;
    let k = free_subnet()?;
    let outer_addr = Ipv4Addr::new(100, 64, k, 1);
    let inner_addr = Ipv4Addr::new(100, 64, k, 2);
    let outer = Tun::create("pemu%d")?;
    outer.configure(outer_addr, inner_addr)?;
    let (inner, inner_ns) = std::thread::spawn(move || -> io::Result<(Tun, OwnedFd)> {
        // SAFETY: unshare affects only this helper thread, which ends right after.
        check(unsafe { libc::unshare(libc::CLONE_NEWNET) })
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create a network namespace: {e}")))?;
        let ns = std::fs::File::open("/proc/thread-self/ns/net")?;
        bring_up("lo")?;
        let tun = Tun::create("pemu0")?;
        tun.configure(inner_addr, outer_addr)?;
        tun.route_everything()?;
        Ok((tun, OwnedFd::from(ns)))
    })
    .join()
    .map_err(|_| io::Error::other("namespace set-up thread panicked"))??;
    Ok(Ends { outer, inner, inner_ns, outer_addr, inner_addr })
}
