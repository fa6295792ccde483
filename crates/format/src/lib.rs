//! `pantheon-format`: the formats that more than one Pantheon driver writes, kept in one place so
//! that the emulator and the tunnel (real packets) and the simulator (virtual time) write them
//! with the same code, and a format changes once for all of them. Nothing here reads a clock or
//! touches a socket: times and sizes are arguments, output goes to any `io::Write` or byte buffer.
//!
//! - [`link_log`]: the link's per-packet logs (native µs form, Mahimahi's ms form) and the one-line
//!   description of a path direction their headers carry;
//! - [`tunnel_wire`]: what crosses the path between two tunnel endpoints (the 8-byte header, its
//!   36 bytes of overhead on the path, the control messages);
//! - [`tunnel_log`]: the tunnel's per-datagram logs (native µs form, the original's text form);
//! - [`ip_ecn`]: a datagram's ECN field (read, set to CE) and its flow key, for the emulator's
//!   queues;
//! - [`line`](mod@line): the fixed buffer both native forms assemble their lines in, fast enough for
//!   1 Gbit/s.

pub mod ip_ecn;
pub mod line;
pub mod link_log;
pub mod tunnel_log;
pub mod tunnel_wire;
