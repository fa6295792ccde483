//! The sizes of a flow's two datagrams, which both drivers need: the UDP transport to build them
//! (its wire.rs holds their byte layout and asserts it against these sizes) and the simulator to
//! count them on the link model without building them.
//!
//! Every data datagram is an IP packet of 1464 bytes, the tunnel's inner MTU (docs/tunnel.md), so
//! that one datagram is one tunnel datagram and one 1500-byte delivery opportunity on the path.
//! The controller counts each as 1464 bytes, the IP datagram, as the link model counts packets
//! (lib.rs: "sizes are bytes as the driver counts them"). An acknowledgement carries 32 bytes of
//! UDP payload: a 24-byte header, then the receiver's receive time.

/// IPv4 header (RFC 791, no options) plus UDP header (RFC 768).
pub const IP_UDP_HEADER_BYTES: usize = 20 + 8;
/// Every data datagram as an IP packet: the tunnel's inner MTU. This is what the controller counts.
pub const PACKET_BYTES: u64 = 1464;
/// The UDP payload of an acknowledgement.
pub const ACK_BYTES: usize = 32;
