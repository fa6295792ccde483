//! Anonymous network namespaces. A namespace made here has no name in /run/netns, so nothing
//! outlives the processes and descriptors that hold it: when the command in it and every
//! descriptor of ours are gone, the kernel deletes it with its devices, even after a SIGKILL.
//!
//! The namespace is created on a helper thread (`unshare(CLONE_NEWNET)` affects only the calling
//! thread), which sets it up and ends; the caller keeps a descriptor to it and never leaves its own
//! namespace, so sockets it opens later still live where it was started.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::errno::check;
use crate::tun::bring_up;

/// A network namespace held open by a descriptor (from /proc/thread-self/ns/net).
#[derive(Debug)]
pub struct Namespace {
    fd: OwnedFd,
}

impl Namespace {
    /// Creates a fresh namespace with loopback up and runs `setup` inside it (on a helper thread
    /// that then ends). Whatever `setup` opens (a TUN device) stays in the namespace.
    pub fn create<T: Send>(setup: impl FnOnce() -> io::Result<T> + Send) -> io::Result<(Namespace, T)> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| -> io::Result<(Namespace, T)> {
                    // SAFETY: unshare affects only this helper thread, which ends right after.
                    check(unsafe { libc::unshare(libc::CLONE_NEWNET) })
                        .map_err(|e| io::Error::new(e.kind(), format!("cannot create a network namespace: {e}")))?;
                    let fd = OwnedFd::from(std::fs::File::open("/proc/thread-self/ns/net")?);
                    bring_up("lo")?;
                    let made = setup()?;
                    Ok((Namespace { fd }, made))
                })
                .join()
                .map_err(|_| io::Error::other("namespace set-up thread panicked"))?
        })
    }
}

impl AsRawFd for Namespace {
    /// A descriptor for setns(2), to start processes inside.
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// IPv4 addresses of every interface in the calling thread's namespace.
pub fn local_ipv4_addresses() -> io::Result<Vec<Ipv4Addr>> {
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
