//! `pantheon-udp`: the real-time driver of Pantheon's own congestion controllers (crates/cc). A
//! UDP sender runs one full-throttle flow under any `pantheon_cc` controller, and a receiver
//! acknowledges every datagram with the time it arrived, so every scheme built on crates/cc —
//! Copa, Vegas, LEDBAT, BBR, Cubic, Reno in userspace — has the same harness around it and
//! differs only in its controller (Yan et al., USENIX ATC 2018, §3.1.1: every scheme is a
//! full-throttle flow until killed).
//!
//! - [`wire`]: the data datagram (sequence number, send time, padding to 1464-byte IP packets,
//!   the tunnel's inner MTU) and the acknowledgement (sequence number, echoed send time, the
//!   receiver's receive time).
//! - [`sender`]: the event loop: acknowledgements, timers and sends as [`control`] decides them,
//!   sleeping with sub-millisecond precision ([`wait`]).
//! - [`control`]: the sender's decisions, sans-IO (shared with the simulator): loss detection
//!   (`pantheon_cc::Sender`), controller timers, window and pacing ([`pacing`]), probing a silent
//!   path.
//! - [`receiver`]: acknowledges each datagram to its source; stateless.
//! - [`controller`]: the controller a command line names, sized for our datagrams.
//! - [`log`]: the sender's per-acknowledgement log.
//!
//! Batched UDP I/O, the clocks and the stop on SIGTERM/SIGINT come from `pantheon_sys`, shared
//! with the tunnel and the emulator.
//!
//! Reliability is deliberately absent: nothing is retransmitted, reordered data is not buffered,
//! and there is no stream. Pantheon measures congestion control with full-throttle flows whose
//! bytes nobody reads, and the original harnesses of the schemes this driver stands in for
//! (genericCC for Copa, Indigo, Sprout) were unreliable the same way. A lost datagram is only a
//! loss event for the controller.

pub mod control;
pub mod controller;
pub mod log;
pub mod pacing;
pub mod receiver;
pub mod sender;
pub mod wait;
pub mod wire;
