//! TUN devices: the emulator's two ends, a tunnel endpoint's inner end. A TUN device hands every IP
//! datagram the kernel routes into it to whoever holds its file descriptor, and injects whatever
//! that holder writes. The devices are not persistent, so the kernel deletes them when the
//! driver's descriptors close, however the driver ends (even by SIGKILL).

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::errno::check;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

/// Ethernet's MTU: the largest IP datagram an emulated path carries.
pub const ETHERNET_MTU_BYTES: usize = 1500;

/// Device transmit queue: deep enough that a scheduling hiccup of the driver does not make the
/// kernel drop packets the driver never saw.
const TX_QUEUE_PACKETS: i32 = 10_000;

#[derive(Debug)]
pub struct Tun {
    file: File,
    name: String,
}

fn ifreq_named(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *dst = src as libc::c_char;
    }
    req
}

fn sockaddr_in(addr: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from(addr).to_be() },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size; this is how the ioctls take addresses.
    unsafe { std::mem::transmute(sin) }
}

/// A socket to issue interface ioctls in the calling thread's network namespace.
fn control_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2).
    let fd = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is fresh and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ioctl(sock: &OwnedFd, request: libc::c_ulong, req: &mut libc::ifreq, what: &str) -> io::Result<()> {
    // SAFETY: req is a valid ifreq for these SIOC* requests.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), request as _, req as *mut libc::ifreq) })
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// Sets IFF_UP on a device of the calling thread's namespace.
pub fn bring_up(name: &str) -> io::Result<()> {
    let sock = control_socket()?;
    let mut req = ifreq_named(name);
    ioctl(&sock, libc::SIOCGIFFLAGS, &mut req, "reading interface flags")?;
    // SAFETY: the flags member was just filled by SIOCGIFFLAGS.
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    ioctl(&sock, libc::SIOCSIFFLAGS, &mut req, "bringing the interface up")
}

impl Tun {
    /// Creates a TUN device in the calling thread's network namespace. `pattern` may contain
    /// `%d` for the kernel to pick a free number.
    pub fn create(pattern: &str) -> io::Result<Tun> {
        Tun::create_with(pattern, IFF_TUN | IFF_NO_PI)
    }

    /// Creates a TUN device that offers the kernel checksum offload and TCP segmentation offload
    /// for IPv4 (ECN included): every packet read or written is preceded by a `virtio_net_hdr`
    /// (10 bytes) describing them, and TCP hands over packets of up to 64 KiB to be segmented by
    /// whoever reads the device.
    pub fn create_offloading(pattern: &str) -> io::Result<Tun> {
        let tun = Tun::create_with(pattern, IFF_TUN | IFF_NO_PI | IFF_VNET_HDR)?;
        let offloads = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO_ECN;
        // SAFETY: TUNSETOFFLOAD takes the offload flags as an integer argument.
        check(unsafe { libc::ioctl(tun.fd(), TUNSETOFFLOAD as _, offloads as libc::c_ulong) })
            .map_err(|e| io::Error::new(e.kind(), format!("cannot switch on the TUN device's offloads: {e}")))?;
        Ok(tun)
    }

    fn create_with(pattern: &str, flags: libc::c_short) -> io::Result<Tun> {
        let file = OpenOptions::new().read(true).write(true).open("/dev/net/tun").map_err(|e| {
            let hint = if e.kind() == io::ErrorKind::PermissionDenied {
                "; without root it must be readable and writable by you (mode 0666, Debian's default), or run as root"
            } else {
                ""
            };
            io::Error::new(e.kind(), format!("cannot open /dev/net/tun: {e}{hint}"))
        })?;
        let mut req = ifreq_named(pattern);
        req.ifr_ifru.ifru_flags = flags;
        // SAFETY: TUNSETIFF takes an ifreq.
        check(unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req as *mut libc::ifreq) })
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create a TUN device: {e}")))?;
        // SAFETY: the kernel wrote a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(req.ifr_name.as_ptr()) }.to_string_lossy().into_owned();
        Ok(Tun { file, name })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Makes reads return `WouldBlock` when no packet is queued, so a driver can drain the device
    /// and sleep in poll(2) instead.
    pub fn set_nonblocking(&self) -> io::Result<()> {
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let flags = check(libc::fcntl(self.fd(), libc::F_GETFL))?;
            check(libc::fcntl(self.fd(), libc::F_SETFL, flags | libc::O_NONBLOCK))?;
        }
        Ok(())
    }

    /// Gives the device `local` and a point-to-point route to `peer` (a /32 route, nothing
    /// else), sets the MTU and brings it up. Must run in the device's namespace. IPv6 is switched
    /// off on the device first: paths are IPv4, and router solicitations would otherwise show up
    /// in the per-packet logs.
    pub fn configure(&self, local: Ipv4Addr, peer: Ipv4Addr, mtu_bytes: usize) -> io::Result<()> {
        // Best effort: a kernel without IPv6 has no such file, and then nothing to switch off.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", self.name), "1");
        let sock = control_socket()?;
        let mut req = ifreq_named(&self.name);
        req.ifr_ifru.ifru_addr = sockaddr_in(local);
        ioctl(&sock, libc::SIOCSIFADDR, &mut req, "setting the address")?;
        req.ifr_ifru.ifru_addr = sockaddr_in(Ipv4Addr::BROADCAST);
        ioctl(&sock, libc::SIOCSIFNETMASK, &mut req, "setting the netmask")?;
        req.ifr_ifru.ifru_dstaddr = sockaddr_in(peer);
        ioctl(&sock, libc::SIOCSIFDSTADDR, &mut req, "setting the peer address")?;
        req.ifr_ifru.ifru_mtu = mtu_bytes as i32;
        ioctl(&sock, libc::SIOCSIFMTU, &mut req, "setting the MTU")?;
        req.ifr_ifru.ifru_metric = TX_QUEUE_PACKETS; // ifr_qlen shares the union
                                                     // Refused inside an unprivileged user namespace; the default (500 packets) then stays.
        let _ = ioctl(&sock, libc::SIOCSIFTXQLEN, &mut req, "setting the transmit queue length");
        bring_up(&self.name)
    }

    /// Makes this device the default route of the calling thread's namespace.
    pub fn route_everything(&self) -> io::Result<()> {
        self.route(Ipv4Addr::UNSPECIFIED, 0)
    }

    /// Routes `network`/`prefix_len` through this device in the calling thread's namespace (the
    /// route goes with the device).
    pub fn route(&self, network: Ipv4Addr, prefix_len: u8) -> io::Result<()> {
        let sock = control_socket()?;
        let mut dev = self.name.clone().into_bytes();
        dev.push(0);
        let mask = u32::MAX.checked_shl(32 - u32::from(prefix_len.min(32))).unwrap_or(0);
        // SAFETY: rtentry is plain data; zero is "no gateway, no metric".
        let mut rt: libc::rtentry = unsafe { std::mem::zeroed() };
        rt.rt_dst = sockaddr_in(network);
        rt.rt_genmask = sockaddr_in(Ipv4Addr::from(mask));
        rt.rt_flags = libc::RTF_UP;
        rt.rt_dev = dev.as_mut_ptr() as *mut libc::c_char;
        // SAFETY: rt and the device name it points to outlive the call.
        check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCADDRT as _, &mut rt as *mut libc::rtentry) })
            .map(|_| ())
            .map_err(|e| io::Error::new(e.kind(), format!("routing {network}/{prefix_len} to {}: {e}", self.name)))
    }
}
