//! A UDP socket and batched I/O on it, for every driver that moves datagrams (the tunnel's outer
//! socket, both ends of `pantheon-udp`): `recvmmsg(2)` and `sendmmsg(2)` move up to a batch of
//! datagrams per system call through buffers allocated once, in fixed-size slots, so nothing is
//! allocated or copied per datagram beyond the kernel's own copy. A socket may ask the kernel to
//! stamp each received datagram with its arrival time (SO_TIMESTAMPNS, socket(7)), taken when the
//! datagram reached the host however late the reading thread wakes, and to report how many
//! datagrams it dropped for a full receive buffer (SO_RXQ_OVFL).
//!
//! ECN (RFC 3168) travels in the low two bits of the IPv4 header's TOS byte, which a UDP socket
//! neither sets per datagram nor reports unless asked. A socket may report each received
//! datagram's TOS (IP_RECVTOS, ip(7)), and every datagram sent has a TOS of its own: the socket's
//! ([`UdpSocket::set_tos`]), or another one carried by an IP_TOS control message (Linux 3.13 on).
//! The control message is not free: with one, Linux looks up the route for each datagram
//! (udp_sendmsg) instead of using a connected socket's cached one, 0.3 µs more per 1464-byte
//! datagram over loopback here (a sendmmsg of 64: 2.2 against 2.5 µs a datagram; 0.1 µs on an
//! unconnected socket, which looks the route up anyway). So a batch whose datagrams all carry one
//! TOS makes it the socket's, with one setsockopt, and sends them without control messages: a flow
//! whose codepoint does not change pays nothing per datagram. Reporting the TOS costs 0.07 µs per
//! datagram received (a recvmmsg of 64: 0.59 against 0.66 µs a datagram). The sockets are IPv4 only, so IPv6's traffic class (IPV6_TCLASS) is
//! not needed.
//!
//! Receiving never waits (a driver sleeps in [`crate::poll::wait`] instead); sending waits for room
//! in the socket's buffer only if the socket was opened with `blocking_sends`.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU8, Ordering};

use crate::errno::check;

/// Control-message space per received datagram: a timespec (SO_TIMESTAMPNS), a u32
/// (SO_RXQ_OVFL) and a byte (IP_TOS), each behind its cmsghdr (32 + 24 + 24 bytes on 64 bits),
/// rounded up.
const CONTROL_BYTES: usize = 96;
/// Control-message space for one sent datagram's TOS: an int (IP_TOS) behind its cmsghdr.
// SAFETY: CMSG_SPACE is arithmetic on its argument.
const TOS_CONTROL_BYTES: usize = unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) } as usize;

/// A control-message buffer, aligned for the cmsghdr at its start.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct ControlBuffer<const N: usize>([u8; N]);

impl<const N: usize> ControlBuffer<N> {
    const ZERO: Self = ControlBuffer([0; N]);
}

/// How a socket is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Receive and send buffers asked for, in bytes: past `net.core.[rw]mem_max` only with
    /// CAP_NET_ADMIN, otherwise as much as that allows.
    pub buffer_bytes: usize,
    /// Stamp each received datagram with the kernel's receive time (SO_TIMESTAMPNS).
    pub timestamps: bool,
    /// Report the count of datagrams dropped for a full receive buffer (SO_RXQ_OVFL).
    pub overflow_counts: bool,
    /// A send waits for room in the send buffer; otherwise it fails with `WouldBlock`.
    pub blocking_sends: bool,
    /// Report each received datagram's TOS byte, its ECN codepoint in the low two bits (IP_RECVTOS).
    pub receive_tos: bool,
}

/// `addr` as the kernel's `sockaddr_in` (network byte order).
fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

/// The address a `sockaddr_in` holds.
fn socket_addr(sin: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)), u16::from_be(sin.sin_port))
}

fn set_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: an int option of the right size.
    check(unsafe {
        libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), size_of::<libc::c_int>() as _)
    })
    .map(|_| ())
}

/// Whether a failed receive or send just means "not now": nothing queued, a signal, or an ICMP
/// port-unreachable for an earlier datagram (the peer not listening, yet or any more), which
/// Linux reports once on a connected socket's next call (ECONNREFUSED, udp(7)).
pub fn is_transient(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused)
}

/// The peer's network is not reachable now (a route or the tunnel gone, the device queue full):
/// what a path that drops the datagram would do, not a reason to stop.
pub fn is_unreachable(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENOBUFS | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN | libc::ENETDOWN)
    )
}

pub struct UdpSocket {
    fd: OwnedFd,
    /// The TOS byte of the datagrams sent without one of their own, as last set (0 at first).
    tos: AtomicU8,
}

/// Whether the kernel's receive stamps are on the clock this process reads. They are on the
/// kernel's CLOCK_REALTIME, and so is `clock::epoch_us` — unless a clock shim loaded with
/// LD_PRELOAD (libfaketime, as the remote-mode tests use to give a host a clock of its own) moves
/// what clock_gettime(2) returns, which it cannot do to the stamps. Mixing the two would put one
/// log on two clocks, so a socket takes no stamps then, and its datagrams are stamped when they
/// are read. Decided once per process: a datagram sent to itself over a socket pair must be
/// stamped between two readings of the clock, within `STAMP_SLACK_NS`; the first time they
/// disagree the process says so on stderr.
fn kernel_clock_is_ours() -> bool {
    static AGREE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AGREE.get_or_init(|| match stamp_offset_ns() {
        Ok(offset_ns) if offset_ns.abs() <= STAMP_SLACK_NS => true,
        Ok(offset_ns) => {
            eprintln!(
                "{}: note: the kernel's receive stamps are {:.3} s off this process's clock (an LD_PRELOAD clock shim?): datagrams are stamped when read",
                program_name(),
                offset_ns as f64 / -1e9
            );
            false
        }
        Err(e) => {
            eprintln!("{}: note: cannot compare the kernel's clock with this process's ({e}): datagrams are stamped when read", program_name());
            false
        }
    })
}

/// How far a kernel stamp may lie outside the two readings around it; any shim worth noticing
/// moves the clock by far more, and the readings themselves agree to the nanosecond.
const STAMP_SLACK_NS: i128 = 1_000_000;

fn program_name() -> String {
    let argv0 = std::env::args().next().unwrap_or_default();
    argv0.rsplit('/').next().unwrap_or_default().to_string()
}

/// A kernel receive stamp minus the process's clock around it, in ns (0 when it lies between
/// the readings before the send and after the receive).
fn stamp_offset_ns() -> io::Result<i128> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills two descriptors, owned from here on.
    check(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) })?;
    // SAFETY: fresh descriptors.
    let (sender, receiver) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    set_option(receiver.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    let before_ns = i128::from(crate::clock::epoch_ns());
    // SAFETY: one byte from a live buffer.
    check(unsafe { libc::send(sender.as_raw_fd(), [0u8].as_ptr().cast(), 1, 0) } as libc::c_int)?;
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = ControlBuffer::<CONTROL_BYTES>::ZERO;
    // SAFETY: a zeroed msghdr pointing at buffers that outlive the call.
    let mut header: libc::msghdr = unsafe { zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.0.as_mut_ptr().cast();
    header.msg_controllen = CONTROL_BYTES as _;
    check(unsafe { libc::recvmsg(receiver.as_raw_fd(), &mut header, libc::MSG_DONTWAIT) } as libc::c_int)?;
    let after_ns = i128::from(crate::clock::epoch_ns());
    // SAFETY: the kernel filled msg_control up to msg_controllen.
    let stamp_ns = unsafe { timestamp_ns(&header) }
        .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "no receive stamp on a local socket"))?;
    let stamp_ns = i128::from(stamp_ns);
    Ok(if stamp_ns < before_ns { stamp_ns - before_ns } else { (stamp_ns - after_ns).max(0) })
}

/// An SCM_TIMESTAMPNS control message's timespec, in ns.
///
/// # Safety
/// `data` must point at the message's data.
unsafe fn read_stamp_ns(data: *const u8) -> u64 {
    let ts = std::ptr::read_unaligned(data as *const libc::timespec);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The SO_TIMESTAMPNS stamp among a received message's control messages, in ns.
///
/// # Safety
/// `header`'s control buffer must be as the kernel filled it.
unsafe fn timestamp_ns(header: &libc::msghdr) -> Option<u64> {
    let mut cmsg = libc::CMSG_FIRSTHDR(header);
    while !cmsg.is_null() {
        if ((*cmsg).cmsg_level, (*cmsg).cmsg_type) == (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) {
            return Some(read_stamp_ns(libc::CMSG_DATA(cmsg)));
        }
        cmsg = libc::CMSG_NXTHDR(header, cmsg);
    }
    None
}

impl UdpSocket {
    /// A socket bound to `local`, set up as `options` say.
    pub fn bind(local: SocketAddrV4, options: Options) -> io::Result<UdpSocket> {
        let nonblocking = if options.blocking_sends { 0 } else { libc::SOCK_NONBLOCK };
        // SAFETY: plain socket(2).
        let fd = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | nonblocking | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: fd is fresh and ours.
        let socket = UdpSocket { fd: unsafe { OwnedFd::from_raw_fd(fd) }, tos: AtomicU8::new(0) };
        let buffer_bytes = options.buffer_bytes.min(libc::c_int::MAX as usize) as libc::c_int;
        for (forced, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
            if set_option(fd, libc::SOL_SOCKET, forced, buffer_bytes).is_err() {
                set_option(fd, libc::SOL_SOCKET, plain, buffer_bytes)?;
            }
        }
        if options.timestamps && kernel_clock_is_ours() {
            set_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        }
        if options.overflow_counts {
            set_option(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
        }
        if options.receive_tos {
            set_option(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
        }
        let sin = sockaddr(local);
        // SAFETY: a valid sockaddr_in.
        check(unsafe {
            libc::bind(fd, (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as _)
        })?;
        Ok(socket)
    }

    /// Sends without an address go to `peer`, and only datagrams from `peer` are received.
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
        Ok(socket_addr(&sin))
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Every datagram this socket sends carries `tos` in its IPv4 header's TOS byte (its ECN
    /// codepoint in the low two bits), unless it is given another; 0 until set.
    pub fn set_tos(&self, tos: u8) -> io::Result<()> {
        set_option(self.fd(), libc::IPPROTO_IP, libc::IP_TOS, tos.into())?;
        self.tos.store(tos, Ordering::Relaxed);
        Ok(())
    }

    /// The TOS byte of what the socket sends without a TOS of its own.
    pub fn tos(&self) -> u8 {
        self.tos.load(Ordering::Relaxed)
    }

    /// Sends one datagram on a connected socket.
    pub fn send(&self, datagram: &[u8]) -> io::Result<()> {
        // SAFETY: the buffer outlives the call.
        let n = unsafe { libc::send(self.fd(), datagram.as_ptr().cast(), datagram.len(), 0) };
        check(n as libc::c_int).map(|_| ())
    }

    /// Sends one datagram to `to` with the TOS byte `tos`, whatever the socket's (another thread
    /// may be changing it with its batches).
    pub fn send_to(&self, datagram: &[u8], to: SocketAddrV4, tos: u8) -> io::Result<()> {
        let mut sin = sockaddr(to);
        let mut iov = libc::iovec { iov_base: datagram.as_ptr() as *mut _, iov_len: datagram.len() };
        let mut control = tos_control(tos);
        // SAFETY: a zeroed msghdr pointing at buffers that outlive the call; the kernel only reads them.
        let mut header: libc::msghdr = unsafe { zeroed() };
        header.msg_name = (&mut sin as *mut libc::sockaddr_in).cast();
        header.msg_namelen = size_of::<libc::sockaddr_in>() as _;
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.0.as_mut_ptr().cast();
        header.msg_controllen = TOS_CONTROL_BYTES as _;
        check(unsafe { libc::sendmsg(self.fd(), &header, 0) } as libc::c_int).map(|_| ())
    }

    /// Receives one datagram into `buffer` if one is queued: its length, cut to the buffer's
    /// (`None`: nothing queued, or a transient error, see `is_transient`).
    pub fn try_recv(&self, buffer: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: receiving into a buffer we own.
        let n = unsafe { libc::recv(self.fd(), buffer.as_mut_ptr().cast(), buffer.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let err = io::Error::last_os_error();
        if is_transient(&err) {
            Ok(None)
        } else {
            Err(err)
        }
    }
}

/// One datagram of a `RecvBatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received<'a> {
    pub from: SocketAddrV4,
    /// The datagram, or its first slot's worth if it was longer.
    pub bytes: &'a [u8],
    /// Its full length in bytes, also when only its start fitted the slot.
    pub len: usize,
    /// When the kernel received it, in nanoseconds on CLOCK_REALTIME, if the socket has
    /// `timestamps` and the kernel's clock is the one this process reads (`kernel_clock_is_ours`).
    pub realtime_ns: Option<u64>,
    /// The socket's count of datagrams dropped for a full receive buffer so far, if the socket has
    /// `overflow_counts` and the kernel has dropped any.
    pub overflow_drops: Option<u32>,
    /// Its IPv4 header's TOS byte, the ECN codepoint in the low two bits, if the socket has
    /// `receive_tos`.
    pub tos: Option<u8>,
}

/// Buffers for receiving up to `slots` datagrams of at most `slot_bytes` with one `recvmmsg`.
pub struct RecvBatch {
    /// Bytes per slot; a longer datagram keeps only its start.
    slot_bytes: usize,
    /// `slots` slots of `slot_bytes`, back to back.
    buffers: Vec<u8>,
    names: Vec<libc::sockaddr_in>,
    controls: Vec<ControlBuffer<CONTROL_BYTES>>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    /// Datagrams the last `receive` filled.
    count: usize,
}

impl RecvBatch {
    pub fn new(slots: usize, slot_bytes: usize) -> RecvBatch {
        RecvBatch {
            slot_bytes,
            buffers: vec![0; slots * slot_bytes],
            // SAFETY (zeroed): plain C structs, filled before each call.
            names: vec![unsafe { zeroed() }; slots],
            controls: vec![ControlBuffer::ZERO; slots],
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
            header.msg_control = self.controls[i].0.as_mut_ptr().cast();
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

    /// The `i`-th datagram of the last `receive`, to change in place (a decapsulator rewriting
    /// an inner header before passing the datagram on).
    pub fn bytes_mut(&mut self, i: usize) -> &mut [u8] {
        debug_assert!(i < self.count);
        let len = self.len(i).min(self.slot_bytes);
        &mut self.buffers[i * self.slot_bytes..i * self.slot_bytes + len]
    }

    /// The `i`-th datagram's full length, also when only its start fitted the slot (MSG_TRUNC).
    pub fn len(&self, i: usize) -> usize {
        self.headers[i].msg_len as usize
    }

    /// The `i`-th datagram of the last `receive` with its source and what the kernel said of it.
    pub fn get(&self, i: usize) -> Received<'_> {
        let mut received = Received {
            from: socket_addr(&self.names[i]),
            bytes: self.bytes(i),
            len: self.len(i),
            realtime_ns: None,
            overflow_drops: None,
            tos: None,
        };
        let header = &self.headers[i].msg_hdr;
        // SAFETY: the kernel filled msg_control up to msg_controllen; the CMSG macros walk it.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(header);
            while !cmsg.is_null() {
                let data = libc::CMSG_DATA(cmsg);
                match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                    (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                        received.realtime_ns = Some(read_stamp_ns(data));
                    }
                    (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                        received.overflow_drops = Some(std::ptr::read_unaligned(data as *const u32));
                    }
                    (libc::IPPROTO_IP, libc::IP_TOS) => received.tos = Some(*data),
                    _ => {}
                }
                cmsg = libc::CMSG_NXTHDR(header, cmsg);
            }
        }
        received
    }
}

/// Up to `slots` datagrams of at most `slot_bytes`, each to its own address, for one `sendmmsg`.
pub struct SendBatch {
    /// Bytes per slot: the longest datagram the batch can hold.
    slot_bytes: usize,
    /// `slots` slots of `slot_bytes`, back to back.
    buffers: Vec<u8>,
    /// Each committed datagram's length in bytes.
    lengths: Vec<usize>,
    /// Each committed datagram's destination; `None`: where the socket is connected.
    names: Vec<Option<libc::sockaddr_in>>,
    /// Each committed datagram's TOS byte.
    tos: Vec<u8>,
    /// IP_TOS control messages, for the datagrams whose TOS is not the socket's.
    controls: Vec<ControlBuffer<TOS_CONTROL_BYTES>>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    /// Datagrams committed since the last `flush`.
    count: usize,
}

impl SendBatch {
    pub fn new(slots: usize, slot_bytes: usize) -> SendBatch {
        SendBatch {
            slot_bytes,
            buffers: vec![0; slots * slot_bytes],
            lengths: vec![0; slots],
            names: vec![None; slots],
            tos: vec![0; slots],
            controls: vec![ControlBuffer::ZERO; slots],
            // SAFETY (zeroed): plain C structs, filled before each call.
            iovecs: vec![unsafe { zeroed() }; slots],
            headers: vec![unsafe { zeroed() }; slots],
            count: 0,
        }
    }

    pub fn is_full(&self) -> bool {
        self.count == self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Datagrams committed and not yet sent.
    pub fn len(&self) -> usize {
        self.count
    }

    /// The next free slot's buffer (`slot_bytes` long), to fill before `commit`; `None` when the
    /// batch is full.
    pub fn slot(&mut self) -> Option<&mut [u8]> {
        let start = self.count * self.slot_bytes;
        self.buffers.get_mut(start..start + self.slot_bytes)
    }

    /// The first `len` bytes of the slot `slot` returned are a datagram for `to` (`None`: where
    /// the socket is connected) with the TOS byte `tos` (the ECN codepoint in its low two bits).
    pub fn commit(&mut self, len: usize, to: Option<SocketAddrV4>, tos: u8) {
        debug_assert!(len <= self.slot_bytes && !self.is_full());
        self.lengths[self.count] = len;
        self.names[self.count] = to.map(sockaddr);
        self.tos[self.count] = tos;
        self.count += 1;
    }

    /// Sends every committed datagram and empties the batch. A datagram the kernel refuses (full
    /// buffer, unreachable, a destination it will not send to, too long) is skipped and counted:
    /// it is lost, as on a congested path. Returns the count skipped; fails only on a broken
    /// socket. If every datagram has the same TOS, it becomes the socket's (see the module's
    /// documentation); otherwise those whose TOS is not the socket's carry it in a control message.
    pub fn flush(&mut self, socket: &UdpSocket) -> io::Result<u64> {
        let batch_tos = &self.tos[..self.count];
        if let Some(&first) = batch_tos.first() {
            if first != socket.tos() && batch_tos.iter().all(|&tos| tos == first) {
                // Should the kernel refuse, each datagram carries its TOS instead.
                let _ = socket.set_tos(first);
            }
        }
        let socket_tos = socket.tos();
        let base = self.buffers.as_mut_ptr();
        for i in 0..self.count {
            // SAFETY: slot i lies inside `buffers`.
            self.iovecs[i] =
                libc::iovec { iov_base: unsafe { base.add(i * self.slot_bytes) }.cast(), iov_len: self.lengths[i] };
            let header = &mut self.headers[i].msg_hdr;
            (header.msg_name, header.msg_namelen) = match &mut self.names[i] {
                Some(name) => ((name as *mut libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as _),
                None => (std::ptr::null_mut(), 0),
            };
            header.msg_iov = &mut self.iovecs[i];
            header.msg_iovlen = 1;
            (header.msg_control, header.msg_controllen) = if self.tos[i] == socket_tos {
                (std::ptr::null_mut(), 0)
            } else {
                self.controls[i] = tos_control(self.tos[i]);
                (self.controls[i].0.as_mut_ptr().cast(), TOS_CONTROL_BYTES as _)
            };
            header.msg_flags = 0;
        }
        let mut skipped = 0;
        let mut next = 0;
        while next < self.count {
            // SAFETY: headers next..count point into buffers owned by self.
            let n =
                unsafe { libc::sendmmsg(socket.fd(), self.headers[next..].as_mut_ptr(), (self.count - next) as _, 0) };
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
            // Whatever else is wrong concerns one datagram (its destination, its length, a full
            // buffer); sendmmsg reports an error only for the first datagram it could not send.
            skipped += 1;
            next += 1;
        }
        self.count = 0;
        Ok(skipped)
    }
}

/// An IP_TOS control message setting a sent datagram's TOS byte (ip(7); the kernel takes an int).
fn tos_control(tos: u8) -> ControlBuffer<TOS_CONTROL_BYTES> {
    let mut control = ControlBuffer::ZERO;
    // SAFETY: the buffer is aligned for a cmsghdr and has room for it and an int after it.
    unsafe {
        let cmsg = control.0.as_mut_ptr() as *mut libc::cmsghdr;
        (*cmsg).cmsg_level = libc::IPPROTO_IP;
        (*cmsg).cmsg_type = libc::IP_TOS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut libc::c_int, tos.into());
    }
    control
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_stamps_are_on_this_processs_clock_without_a_shim() {
        assert!(stamp_offset_ns().unwrap().abs() <= STAMP_SLACK_NS);
        assert!(kernel_clock_is_ours());
    }

    const OPTIONS: Options = Options {
        buffer_bytes: 1 << 20,
        timestamps: true,
        overflow_counts: true,
        blocking_sends: false,
        receive_tos: false,
    };

    fn loopback(options: Options) -> UdpSocket {
        UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), options).unwrap()
    }

    /// Receives until `count` datagrams came, or a second passed.
    fn receive_all(batch: &mut RecvBatch, socket: &UdpSocket, count: usize, each: &mut dyn FnMut(Received)) {
        let mut got = 0;
        for _ in 0..1000 {
            let n = batch.receive(socket).unwrap();
            for i in 0..n {
                each(batch.get(i));
            }
            got += n;
            if got >= count {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("{got} of {count} datagrams came");
    }

    #[test]
    fn a_batch_goes_out_and_comes_back_with_addresses_and_kernel_times() {
        let receiver = loopback(OPTIONS);
        let sender = loopback(Options { timestamps: false, ..OPTIONS });
        let to = receiver.local_addr().unwrap();
        let mut batch = SendBatch::new(4, 8);
        for k in 0..3u8 {
            batch.slot().unwrap()[..k as usize + 1].fill(k);
            batch.commit(k as usize + 1, Some(to), 0);
        }
        assert_eq!(batch.len(), 3);
        assert_eq!(batch.flush(&sender).unwrap(), 0);
        assert!(batch.is_empty());
        let mut got = Vec::new();
        receive_all(&mut RecvBatch::new(16, 64), &receiver, 3, &mut |datagram| {
            assert_eq!(datagram.from, sender.local_addr().unwrap());
            assert!(datagram.realtime_ns.is_some());
            assert_eq!(datagram.overflow_drops, None);
            got.push(datagram.bytes.to_vec());
        });
        assert_eq!(got, vec![vec![0u8; 1], vec![1u8; 2], vec![2u8; 3]]);
    }

    #[test]
    fn a_connected_socket_sends_a_batch_without_addresses_and_a_long_datagram_keeps_its_start() {
        let receiver = loopback(OPTIONS);
        let sender = loopback(Options { blocking_sends: true, ..OPTIONS });
        sender.connect(receiver.local_addr().unwrap()).unwrap();
        let mut batch = SendBatch::new(2, 100);
        batch.slot().unwrap().fill(7);
        batch.commit(100, None, 0);
        assert_eq!(batch.flush(&sender).unwrap(), 0);
        receive_all(&mut RecvBatch::new(4, 10), &receiver, 1, &mut |datagram| {
            assert_eq!((datagram.bytes, datagram.len), (&[7u8; 10][..], 100));
        });
    }

    #[test]
    fn each_datagram_of_a_batch_carries_its_own_tos_and_the_receiver_reads_it() {
        let receiver = loopback(Options { receive_tos: true, ..OPTIONS });
        let sender = loopback(OPTIONS);
        let to = receiver.local_addr().unwrap();
        let mut batch = SendBatch::new(8, 4);
        // The ECN codepoints Not-ECT, ECT(1), ECT(0), CE (RFC 3168), then a DSCP (EF, 46) with ECT(0).
        let tos = [0b00, 0b01, 0b10, 0b11, 46 << 2 | 0b10];
        for (k, &tos) in tos.iter().enumerate() {
            batch.slot().unwrap()[0] = k as u8;
            batch.commit(1, Some(to), tos);
        }
        assert_eq!(batch.flush(&sender).unwrap(), 0);
        // A mixed batch leaves the socket's TOS alone.
        assert_eq!(sender.tos(), 0);
        let mut got = Vec::new();
        receive_all(&mut RecvBatch::new(16, 4), &receiver, tos.len(), &mut |datagram| {
            got.push((datagram.bytes[0], datagram.tos));
        });
        assert_eq!(got, vec![(0, Some(0)), (1, Some(1)), (2, Some(2)), (3, Some(3)), (4, Some(186))]);
    }

    #[test]
    fn a_batch_of_one_tos_makes_it_the_sockets_and_control_messages_keep_their_own() {
        let receiver = loopback(Options { receive_tos: true, ..OPTIONS });
        let sender = loopback(OPTIONS);
        let to = receiver.local_addr().unwrap();
        let mut batch = SendBatch::new(4, 4);
        for k in 0..3 {
            batch.slot().unwrap()[0] = k;
            batch.commit(1, Some(to), 0b10);
        }
        assert_eq!(batch.flush(&sender).unwrap(), 0);
        assert_eq!(sender.tos(), 0b10);
        sender.send_to(&[3], to, 0).unwrap();
        let mut got = Vec::new();
        receive_all(&mut RecvBatch::new(8, 4), &receiver, 4, &mut |datagram| {
            got.push((datagram.bytes[0], datagram.tos))
        });
        assert_eq!(got, vec![(0, Some(2)), (1, Some(2)), (2, Some(2)), (3, Some(0))]);
    }

    #[test]
    fn a_sockets_own_tos_goes_on_every_datagram_a_batch_does_not_change() {
        let receiver = loopback(Options { receive_tos: true, ..OPTIONS });
        let sender = loopback(OPTIONS);
        sender.set_tos(0b10).unwrap();
        sender.connect(receiver.local_addr().unwrap()).unwrap();
        sender.send(&[1]).unwrap();
        let mut batch = SendBatch::new(2, 4);
        batch.slot().unwrap()[0] = 2;
        batch.commit(1, None, 0b10);
        batch.slot().unwrap()[0] = 3;
        batch.commit(1, None, 0b11);
        assert_eq!(batch.flush(&sender).unwrap(), 0);
        assert_eq!(sender.tos(), 0b10);
        let mut got = Vec::new();
        receive_all(&mut RecvBatch::new(4, 4), &receiver, 3, &mut |datagram| {
            got.push((datagram.bytes[0], datagram.tos))
        });
        assert_eq!(got, vec![(1, Some(0b10)), (2, Some(0b10)), (3, Some(0b11))]);
        // Without receive_tos, nothing is reported.
        let plain = loopback(OPTIONS);
        sender.send_to(&[4], plain.local_addr().unwrap(), 0).unwrap();
        receive_all(&mut RecvBatch::new(4, 4), &plain, 1, &mut |datagram| assert_eq!(datagram.tos, None));
    }

    #[test]
    fn a_received_datagram_can_be_changed_in_place() {
        let receiver = loopback(OPTIONS);
        loopback(OPTIONS).send_to(&[1, 2, 3], receiver.local_addr().unwrap(), 0).unwrap();
        let mut batch = RecvBatch::new(2, 2);
        receive_all(&mut batch, &receiver, 1, &mut |_| {});
        batch.bytes_mut(0)[1] = 9;
        assert_eq!((batch.bytes(0), batch.len(0)), (&[1u8, 9][..], 3));
    }

    #[test]
    fn a_full_batch_has_no_slot() {
        let mut batch = SendBatch::new(1, 4);
        assert_eq!(batch.slot().unwrap().len(), 4);
        batch.commit(4, Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9)), 0);
        assert!(batch.is_full());
        assert!(batch.slot().is_none());
    }

    #[test]
    fn nothing_queued_is_zero_not_an_error() {
        let socket = loopback(OPTIONS);
        assert_eq!(RecvBatch::new(4, 64).receive(&socket).unwrap(), 0);
        assert_eq!(socket.try_recv(&mut [0; 64]).unwrap(), None);
    }
}
