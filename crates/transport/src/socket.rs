//! The UDP socket of either end, non-blocking, and batched I/O on it: `recvmmsg(2)` and
//! `sendmmsg(2)` move up to a batch of datagrams per system call through buffers allocated once,
//! so nothing is allocated per datagram. A receiving socket may ask the kernel to stamp each
//! datagram with its arrival time (SO_TIMESTAMPNS, socket(7)), taken when the datagram reached
//! the host, however late the reading thread wakes.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Socket buffers asked for: 4 MiB holds 30 ms of 1 Gbit/s data, or 130 000 queued 32-byte
/// acknowledgements, so a thread that is descheduled for a while loses nothing.
const BUFFER_BYTES: libc::c_int = 4 << 20;
/// Room for one SCM_TIMESTAMPNS control message (a timespec behind its cmsghdr), rounded up.
const CONTROL_BYTES: usize = 64;

use pantheon_netns::sys::{check, sockaddr_in as sockaddr, socket_addr_v4 as socket_addr};

fn set_option(fd: RawFd, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: an int option of the right size.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as _,
        )
    };
    check(ret).map(|_| ())
}

/// Whether a failed receive or send just means "not now": nothing queued, a signal, or an ICMP
/// port-unreachable for an earlier datagram (the peer not listening, yet or any more), which
/// Linux reports once on a connected socket's next call (ECONNREFUSED, udp(7)).
pub fn is_transient(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused)
}

pub struct UdpSocket {
    fd: OwnedFd,
}

impl UdpSocket {
    /// A non-blocking socket bound to `local`, with large buffers, and receive timestamps if
    /// `timestamps`.
    pub fn bind(local: SocketAddrV4, timestamps: bool) -> io::Result<UdpSocket> {
        // SAFETY: plain socket(2).
        let fd = check(unsafe {
            libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0)
        })?;
        // SAFETY: fd is fresh and ours.
        let socket = UdpSocket { fd: unsafe { OwnedFd::from_raw_fd(fd) } };
        for (forced, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
            // Past net.core.[rw]mem_max only with CAP_NET_ADMIN; otherwise as much as allowed.
            if set_option(fd, forced, BUFFER_BYTES).is_err() {
                set_option(fd, plain, BUFFER_BYTES)?;
            }
        }
        if timestamps {
            set_option(fd, libc::SO_TIMESTAMPNS, 1)?;
        }
        let sin = sockaddr(local);
        // SAFETY: a valid sockaddr_in.
        check(unsafe {
            libc::bind(fd, (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as _)
        })?;
        Ok(socket)
    }

    /// Sends go to `peer` and only datagrams from `peer` are received.
    pub fn connect(&self, peer: SocketAddrV4) -> io::Result<()> {
        let sin = sockaddr(peer);
        // SAFETY: a valid sockaddr_in.
        let ret = unsafe {
            libc::connect(self.fd(), (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as _)
        };
        check(ret).map(|_| ())
    }

    pub fn local_addr(&self) -> io::Result<SocketAddrV4> {
        // SAFETY: getsockname into a zeroed sockaddr_in of the right length.
        let mut sin: libc::sockaddr_in = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        check(unsafe { libc::getsockname(self.fd(), (&mut sin as *mut libc::sockaddr_in).cast(), &mut len) })?;
        Ok(socket_addr(&sin))
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Sends one datagram on a connected socket.
    pub fn send(&self, datagram: &[u8]) -> io::Result<()> {
        // SAFETY: the buffer outlives the call.
        let n = unsafe { libc::send(self.fd(), datagram.as_ptr().cast(), datagram.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Buffers for receiving up to `slots` datagrams of at most `slot_bytes` with one `recvmmsg`.
pub struct RecvBatch {
    slot_bytes: usize,
    buffers: Vec<u8>,
    names: Vec<libc::sockaddr_in>,
    controls: Vec<[u8; CONTROL_BYTES]>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    count: usize,
}

impl RecvBatch {
    pub fn new(slots: usize, slot_bytes: usize) -> RecvBatch {
        RecvBatch {
            slot_bytes,
            buffers: vec![0; slots * slot_bytes],
            // SAFETY (zeroed): plain C structs, filled before each call.
            names: vec![unsafe { zeroed() }; slots],
            controls: vec![[0; CONTROL_BYTES]; slots],
            iovecs: vec![unsafe { zeroed() }; slots],
            headers: vec![unsafe { zeroed() }; slots],
            count: 0,
        }
    }

    /// Receives what is queued, up to a batch, without waiting: how many datagrams (0: none, or a
    /// transient error, see `is_transient`). Only the first `slot_bytes` of each are kept, so a
    /// reader that needs only headers copies only headers.
    pub fn receive(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        let base = self.buffers.as_mut_ptr();
        for i in 0..self.headers.len() {
            // SAFETY: slot i lies inside `buffers`.
            self.iovecs[i] =
                libc::iovec { iov_base: unsafe { base.add(i * self.slot_bytes) }.cast(), iov_len: self.slot_bytes };
            let header = &mut self.headers[i].msg_hdr;
            header.msg_name = (&mut self.names[i] as *mut libc::sockaddr_in).cast();
            header.msg_namelen = size_of::<libc::sockaddr_in>() as _;
            header.msg_iov = &mut self.iovecs[i];
            header.msg_iovlen = 1;
            header.msg_control = self.controls[i].as_mut_ptr().cast();
            header.msg_controllen = CONTROL_BYTES as _;
            header.msg_flags = 0;
        }
        self.count = 0;
        // SAFETY: every header points into buffers owned by self, valid for the call.
        let n = unsafe {
            libc::recvmmsg(
                socket.fd(),
                self.headers.as_mut_ptr(),
                self.headers.len() as _,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return if is_transient(&err) { Ok(0) } else { Err(err) };
        }
        self.count = n as usize;
        Ok(self.count)
    }

    /// The `i`-th datagram of the last `receive`, cut to the slot size if it was longer.
    pub fn bytes(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.count);
        let len = self.len(i).min(self.slot_bytes);
        &self.buffers[i * self.slot_bytes..i * self.slot_bytes + len]
    }

    /// The `i`-th datagram's full length, also when only its start fitted the slot (MSG_TRUNC).
    pub fn len(&self, i: usize) -> usize {
        self.headers[i].msg_len as usize
    }

    pub fn from(&self, i: usize) -> SocketAddrV4 {
        socket_addr(&self.names[i])
    }

    /// When the kernel received the `i`-th datagram, CLOCK_REALTIME nanoseconds, if it said.
    pub fn realtime_ns(&self, i: usize) -> Option<u64> {
        let header = &self.headers[i].msg_hdr;
        // SAFETY: the kernel filled msg_control up to msg_controllen; the CMSG macros walk it.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(header);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
                    return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
                cmsg = libc::CMSG_NXTHDR(header, cmsg);
            }
        }
        None
    }
}

/// Up to `slots` datagrams of `N` bytes, each to its own address, for one `sendmmsg`.
pub struct SendBatch<const N: usize> {
    buffers: Vec<[u8; N]>,
    names: Vec<libc::sockaddr_in>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    count: usize,
}

impl<const N: usize> SendBatch<N> {
    pub fn new(slots: usize) -> Self {
        SendBatch {
            buffers: vec![[0; N]; slots],
            // SAFETY (zeroed): plain C structs, filled before each call.
            names: vec![unsafe { zeroed() }; slots],
            iovecs: vec![unsafe { zeroed() }; slots],
            headers: vec![unsafe { zeroed() }; slots],
            count: 0,
        }
    }

    /// The next free slot's buffer, to fill before `commit`; `None` when the batch is full.
    pub fn slot(&mut self) -> Option<&mut [u8; N]> {
        self.buffers.get_mut(self.count)
    }

    /// The slot `slot` returned is filled and goes to `to`.
    pub fn commit(&mut self, to: SocketAddrV4) {
        self.names[self.count] = sockaddr(to);
        self.count += 1;
    }

    /// Sends every committed datagram and empties the batch. A datagram the kernel refuses (full
    /// buffer, unreachable, a destination it will not send to) is skipped and counted: it is
    /// lost, as on a congested path. Returns the count skipped; fails only on a broken socket.
    pub fn flush(&mut self, socket: &UdpSocket) -> io::Result<u64> {
        for i in 0..self.count {
            self.iovecs[i] = libc::iovec { iov_base: self.buffers[i].as_mut_ptr().cast(), iov_len: N };
            let header = &mut self.headers[i].msg_hdr;
            header.msg_name = (&mut self.names[i] as *mut libc::sockaddr_in).cast();
            header.msg_namelen = size_of::<libc::sockaddr_in>() as _;
            header.msg_iov = &mut self.iovecs[i];
            header.msg_iovlen = 1;
            header.msg_control = std::ptr::null_mut();
            header.msg_controllen = 0;
            header.msg_flags = 0;
        }
        let mut skipped = 0;
        let mut next = 0;
        while next < self.count {
            // SAFETY: headers next..count point into buffers owned by self.
            let n = unsafe {
                libc::sendmmsg(
                    socket.fd(),
                    self.headers[next..].as_mut_ptr(),
                    (self.count - next) as _,
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                next += n as usize;
                continue;
            }
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if matches!(err.raw_os_error(), Some(libc::EBADF | libc::ENOTSOCK | libc::EFAULT)) {
                self.count = 0;
                return Err(err);
            }
            // Whatever else is wrong concerns one datagram (its destination, a full buffer);
            // sendmmsg reports an error only for the first datagram it could not send.
            skipped += 1;
            next += 1;
        }
        self.count = 0;
        Ok(skipped)
    }
}

/// The peer's network is not reachable now (a route or the tunnel gone, the device queue full):
/// what a path that drops the datagram would do, not a reason to stop.
pub fn is_unreachable(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENOBUFS | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN | libc::ENETDOWN)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn loopback(timestamps: bool) -> UdpSocket {
        UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), timestamps).unwrap()
    }

    #[test]
    fn a_batch_goes_out_and_comes_back_with_addresses_and_kernel_times() {
        let receiver = loopback(true);
        let sender = loopback(false);
        let to = receiver.local_addr().unwrap();
        let mut batch = SendBatch::<8>::new(4);
        for k in 0..3u8 {
            *batch.slot().unwrap() = [k; 8];
            batch.commit(to);
        }
        assert_eq!(batch.flush(&sender).unwrap(), 0);
        let mut received = RecvBatch::new(16, 64);
        let mut got = Vec::new();
        for _ in 0..1000 {
            let n = received.receive(&receiver).unwrap();
            for i in 0..n {
                assert_eq!(received.from(i), sender.local_addr().unwrap());
                assert!(received.realtime_ns(i).is_some());
                got.push(received.bytes(i).to_vec());
            }
            if got.len() == 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got, vec![vec![0u8; 8], vec![1u8; 8], vec![2u8; 8]]);
    }

    #[test]
    fn a_full_batch_has_no_slot() {
        let mut batch = SendBatch::<4>::new(1);
        batch.slot().unwrap();
        batch.commit(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9));
        assert!(batch.slot().is_none());
    }

    #[test]
    fn nothing_queued_is_zero_not_an_error() {
        let socket = loopback(false);
        assert_eq!(RecvBatch::new(4, 64).receive(&socket).unwrap(), 0);
    }
}
