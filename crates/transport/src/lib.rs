//! `pantheon-udp`: the real-time driver of Pantheon's own congestion controllers (crates/cc). A
//! UDP sender runs one full-throttle flow under any `pantheon_cc` controller, and a receiver
//! acknowledges every datagram with the time it arrived, so every scheme built on crates/cc —
//! Copa, Vegas, LEDBAT, BBR, Cubic, Reno in userspace — has the same harness around it and
//! differs only in its controller (Yan et al., USENIX ATC 2018, §3.1.1: every scheme is a
//! full-throttle flow until killed). A sender may instead carry one finite transfer (`send --bytes
//! N`): it ends once ⌈N / 1464⌉ of its datagrams are acknowledged, and the receiver logs when the
//! transfer completed (docs/transport.md, "Transfers").
//!
//! - [`wire`]: the data datagram (sequence number, send time, transfer and budget, padding to 1464-byte IP packets,
//!   the tunnel's inner MTU) and the acknowledgement (sequence number, echoed send time, the
//!   receiver's receive time, its count of CE-marked datagrams: ECN, RFC 3168).
//! - [`sender`]: the event loop: acknowledgements, timers and sends as `pantheon_cc::flow::Flow`
//!   decides them, sleeping with sub-millisecond precision ([`wait`]). The decisions — loss
//!   detection, controller timers, window and pacing, probing a silent path, the controller sized
//!   for our datagrams (`pantheon_cc::flow::controller`) — are sans-IO in crates/cc, which the
//!   simulator drives too.
//! - [`receiver`]: acknowledges each datagram to its source; it keeps only each sender's count of
//!   CE marks and, for a transfer under way, the sequence numbers received.
//! - [`log`]: the sender's per-acknowledgement log, and the transfers logs of both ends.
//!
//! Batched UDP I/O, the clocks and the stop on SIGTERM/SIGINT come from `pantheon_sys`, shared
//! with the tunnel and the emulator.
//!
//! Reliability is deliberately absent: nothing is retransmitted, reordered data is not buffered,
//! and there is no stream. Pantheon measures congestion control with full-throttle flows whose
//! bytes nobody reads, and the original harnesses of the schemes this driver stands in for
//! (genericCC for Copa, Indigo, Sprout) were unreliable the same way. A lost datagram is only a
//! loss event for the controller.

pub mod log;
pub mod receiver;
pub mod sender;
pub mod wait;
pub mod wire;
