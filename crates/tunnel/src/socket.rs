//! The endpoint's UDP socket, in the namespace the endpoint was started in, and batched I/O on it:
//! `sendmmsg`/`recvmmsg` move up to a batch of datagrams per system call through buffers that are
//! allocated once. Each received datagram comes with the kernel's receive time (SO_TIMESTAMPNS,
//! CLOCK_REALTIME, taken when the datagram reached the host, however late this thread wakes up)
//! and the socket's count of datagrams dropped for a full receive buffer (SO_RXQ_OVFL).

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use pantheon_netns::sys::{check, sockaddr_in as sockaddr, socket_addr_v4 as from_sockaddr};

/// Socket buffers: 100 ms at 1 Gbit/s, so a thread descheduled for a while loses nothing.
const BUFFER_BYTES: libc::c_int = 16 << 20;

pub struct UdpSocket {
    fd: OwnedFd,
}

fn set_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: an int option of the right size.
    check(unsafe {
        libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), size_of::<libc::c_int>() as _)
    })
    .map(|_| ())
}

impl UdpSocket {
    /// A socket bound to `local`, with big buffers and receive timestamps.
    pub fn bind(local: SocketAddrV4) -> io::Result<UdpSocket> {
        // SAFETY: plain socket(2).
        let fd = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: fd is fresh and ours.
        let socket = UdpSocket { fd: unsafe { OwnedFd::from_raw_fd(fd) } };
        for (forced, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
            // Beyond net.core.[rw]mem_max only with CAP_NET_ADMIN; otherwise as much as allowed.
            if set_option(fd, libc::SOL_SOCKET, forced, BUFFER_BYTES).is_err() {
                set_option(fd, libc::SOL_SOCKET, plain, BUFFER_BYTES)?;
            }
        }
        set_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        set_option(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
        let sin = sockaddr(local);
        // SAFETY: a valid sockaddr_in.
        check(unsafe {
            libc::bind(fd, (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as _)
        })?;
        Ok(socket)
    }

    /// Only datagrams from `peer` will be received.
    pub fn connect(&self, peer: SocketAddrV4) -> io::Result<()> {
        let sin = sockaddr(peer);
        // SAFETY: a valid sockaddr_in.
        check(unsafe {
            libc::connect(self.fd(), (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as _)
        })
        .map(|_| ())
    }

    pub fn local_addr(&self) -> io::Result<SocketAddrV4> {
        // SAFETY: getsockname into a zeroed sockaddr_in of the right length.
        let mut sin: libc::sockaddr_in = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        check(unsafe { libc::getsockname(self.fd(), (&mut sin as *mut libc::sockaddr_in).cast(), &mut len) })?;
        Ok(from_sockaddr(&sin))
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receives one datagram if one is queued.
    pub fn try_recv(&self, buffer: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: receiving into a buffer we own.
        let n = unsafe { libc::recv(self.fd(), buffer.as_mut_ptr().cast(), buffer.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused => Ok(None),
            _ => Err(err),
        }
    }

    pub fn send_to(&self, datagram: &[u8], to: SocketAddrV4) -> io::Result<()> {
        let sin = sockaddr(to);
        // SAFETY: the buffer and address outlive the call.
        let n = unsafe {
            libc::sendto(
                self.fd(),
                datagram.as_ptr().cast(),
                datagram.len(),
                0,
                (&sin as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as _,
            )
        };
        check(n as libc::c_int).map(|_| ())
    }
}

/// Control-message space per datagram: a timespec (SO_TIMESTAMPNS) and a u32 (SO_RXQ_OVFL),
/// each with its cmsghdr, rounded up.
const CONTROL_BYTES: usize = 64;

/// One received datagram.
pub struct Received<'a> {
    pub from: SocketAddrV4,
    pub bytes: &'a [u8],
    /// The kernel's receive time in µs since the epoch, if it gave one.
    pub epoch_us: Option<u64>,
}

/// Buffers for `recvmmsg`.
pub struct RecvBatch {
    buffers: Vec<Box<[u8]>>,
    iovecs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_in>,
    controls: Vec<[u8; CONTROL_BYTES]>,
    headers: Vec<libc::mmsghdr>,
    count: usize,
    /// The socket's count of datagrams dropped for a full receive buffer, as last reported.
    pub overflow_drops: u32,
}

impl RecvBatch {
    pub fn new(batch: usize, datagram_bytes: usize) -> RecvBatch {
        RecvBatch {
            buffers: (0..batch).map(|_| vec![0u8; datagram_bytes].into_boxed_slice()).collect(),
            // SAFETY (all zeroed): plain C structs, filled before each call.
            iovecs: vec![unsafe { zeroed() }; batch],
            names: vec![unsafe { zeroed() }; batch],
            controls: vec![[0; CONTROL_BYTES]; batch],
            headers: vec![unsafe { zeroed() }; batch],
            count: 0,
            overflow_drops: 0,
        }
    }

    /// Receives what is queued, up to a batch, without waiting; the number received (0: none).
    pub fn receive(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        for i in 0..self.headers.len() {
            self.iovecs[i] =
                libc::iovec { iov_base: self.buffers[i].as_mut_ptr().cast(), iov_len: self.buffers[i].len() };
            let hdr = &mut self.headers[i].msg_hdr;
            hdr.msg_name = (&mut self.names[i] as *mut libc::sockaddr_in).cast();
            hdr.msg_namelen = size_of::<libc::sockaddr_in>() as _;
            hdr.msg_iov = &mut self.iovecs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = self.controls[i].as_mut_ptr().cast();
            hdr.msg_controllen = CONTROL_BYTES as _;
            hdr.msg_flags = 0;
        }
        // SAFETY: every header points into buffers owned by self, valid for the call.
        let n = unsafe {
            libc::recvmmsg(
                socket.fd(),
                self.headers.as_mut_ptr(),
                self.headers.len() as _,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            self.count = 0;
            return match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                // An ICMP error for an earlier send (the peer not listening yet) surfaces here.
                io::ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(err),
            };
        }
        self.count = n as usize;
        Ok(self.count)
    }

    /// The `i`-th datagram of the last `receive`.
    pub fn get(&mut self, i: usize) -> Received<'_> {
        debug_assert!(i < self.count);
        let mut epoch_us = None;
        let hdr = &self.headers[i].msg_hdr;
        // SAFETY: the kernel filled msg_control up to msg_controllen; the CMSG macros walk it.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
            while !cmsg.is_null() {
                let data = libc::CMSG_DATA(cmsg);
                match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                    (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                        let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                        epoch_us = Some(ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000);
                    }
                    (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                        self.overflow_drops = std::ptr::read_unaligned(data as *const u32);
                    }
                    _ => {}
                }
                cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
            }
        }
        Received {
            from: from_sockaddr(&self.names[i]),
            bytes: &self.buffers[i][..self.headers[i].msg_len as usize],
            epoch_us,
        }
    }
}

/// Buffers for `sendmmsg`: each slot holds one outgoing datagram, tunnel header first.
pub struct SendBatch {
    buffers: Vec<Box<[u8]>>,
    lengths: Vec<usize>,
    iovecs: Vec<libc::iovec>,
    name: libc::sockaddr_in,
    headers: Vec<libc::mmsghdr>,
    count: usize,
}

impl SendBatch {
    pub fn new(batch: usize, datagram_bytes: usize) -> SendBatch {
        SendBatch {
            buffers: (0..batch).map(|_| vec![0u8; datagram_bytes].into_boxed_slice()).collect(),
            lengths: vec![0; batch],
            // SAFETY (all zeroed): plain C structs, filled before each call.
            iovecs: vec![unsafe { zeroed() }; batch],
            name: unsafe { zeroed() },
            headers: vec![unsafe { zeroed() }; batch],
            count: 0,
        }
    }

    pub fn is_full(&self) -> bool {
        self.count == self.buffers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn len(&self) -> usize {
        self.count
    }

    /// The next free slot, to be filled and then committed with its length.
    pub fn slot(&mut self) -> &mut [u8] {
        &mut self.buffers[self.count]
    }

    pub fn commit(&mut self, len: usize) {
        self.lengths[self.count] = len;
        self.count += 1;
    }

    /// Sends every committed datagram to `to` (`None`: where the socket is connected) and empties
    /// the batch. Returns how many the kernel refused (each refusal is skipped: a datagram the
    /// tunnel loses).
    pub fn send(&mut self, socket: &UdpSocket, to: Option<SocketAddrV4>) -> io::Result<u64> {
        let (name, name_len) = match to {
            Some(to) => {
                self.name = sockaddr(to);
                ((&mut self.name as *mut libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as _)
            }
            None => (std::ptr::null_mut(), 0),
        };
        for i in 0..self.count {
            self.iovecs[i] = libc::iovec { iov_base: self.buffers[i].as_mut_ptr().cast(), iov_len: self.lengths[i] };
            let hdr = &mut self.headers[i].msg_hdr;
            hdr.msg_name = name;
            hdr.msg_namelen = name_len;
            hdr.msg_iov = &mut self.iovecs[i];
            hdr.msg_iovlen = 1;
        }
        let mut refused = 0;
        let mut start = 0;
        while start < self.count {
            // SAFETY: headers start..count point into buffers owned by self.
            let n = unsafe {
                libc::sendmmsg(socket.fd(), self.headers[start..].as_mut_ptr(), (self.count - start) as _, 0)
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(
                        libc::ECONNREFUSED | libc::ENOBUFS | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EMSGSIZE,
                    ) => {
                        refused += 1;
                        start += 1;
                    }
                    _ => {
                        self.count = 0;
                        return Err(err);
                    }
                }
            } else {
                start += n as usize;
            }
        }
        self.count = 0;
        Ok(refused)
    }
}
