//! `pantheon-tunnel`: the instrumented tunnel of Pantheon (Yan et al., "Pantheon: the training
//! ground for Internet congestion-control research", USENIX ATC 2018, §3.1.2). Pantheon measures
//! every IP datagram a scheme sends by running all of its traffic through a tunnel between two
//! endpoints; each endpoint runs a command (a scheme's sender or receiver) in a network namespace
//! of its own whose only way out is the tunnel:
//!
//! ```text
//!   endpoint A (its own netns)                                endpoint B (its own netns)
//!   command ─ ptun0 ─► ingress: uid, log ─ UDP ── path ──► egress: log ─► ptun0 ─ command
//!   10.100.0.x        ◄─ egress: log ◄──── UDP ── path ─── ingress: uid, log ◄─   10.100.0.y
//!                     (UDP sockets in the namespaces A and B were started in)
//! ```
//!
//! Every datagram the command sends is read from its endpoint's TUN device, gets a unique id
//! (UID), is logged (time, UID, size) in the endpoint's ingress log (it enters the tunnel), and
//! travels to the peer inside a UDP datagram with the UID in front (`pantheon_format::tunnel_wire`); the peer logs
//! (time, UID, size) in its egress log (it leaves the tunnel) and writes the inner datagram to its
//! own TUN device. Either endpoint sends and receives (data one way, acknowledgements the other),
//! whichever side started the tunnel. Pairing a sender's ingress log with the receiver's egress
//! log by UID gives each datagram's one-way delay or its loss, whatever the path in between: an
//! emulator, or the Internet between two hosts.
//!
//! The server listens and prints how a client must connect (its address and port); the client
//! connects out, so it may sit behind a NAT ([`session`]). Both hold a session key that never
//! appears on a command line: every datagram carries a tag made with it and a number accepted
//! once, checked before anything is delivered or logged ([`auth`], [`replay`]), so on an open
//! path nobody else can inject traffic. The endpoints also measure each other's clocks over
//! the path ([`probe`]) for the harness to put both ends' logs on one timeline. Logs are microsecond-precise
//! in our native form and also in the original's text form ([`log`]). The deciding parts
//! (admission, anti-replay, handshake and probe schedules, segmentation) are sans-IO and unit-tested; the wire format,
//! UIDs and log formats are data the simulator writes too, so they live in `pantheon_format`
//! (`tunnel_wire`, `tunnel_log`). ECN crosses the tunnel as RFC 6040 says ([`ecn`]): the outer
//! header carries the inner codepoint, and a mark the path sets on it reaches the inner datagram.
//! A client may hold its data datagrams a constant extra time each way ([`delay`]): one flow's
//! longer propagation delay outside a shared path. The driver ([`relay`], [`endpoint`]) moves datagrams in
//! batches; namespaces, the TUN device, the supervised command and the batched UDP socket come
//! from `pantheon_sys`, shared with the emulator and the UDP transport.

pub mod args;
pub mod auth;
pub mod checksum;
pub mod coalesce;
pub mod delay;
pub mod ecn;
pub mod endpoint;
pub mod log;
pub mod probe;
pub mod relay;
pub mod replay;
pub mod role;
pub mod segment;
pub mod session;
pub mod virtio;
