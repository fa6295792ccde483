//! `pantheon-emu`: the real-time driver of the link model. It runs a command in a fresh network
//! namespace whose only way out is a pair of TUN devices, and moves every datagram between them
//! through `pantheon_link::Path` (one per direction) on the wall clock.
//!
//! ```text
//!  caller's namespace                       emulated namespace
//!  peer 100.64.k.1 ── pemuN ◄─downlink─┐ ┌─uplink─► pemu0 ── command (100.64.k.2, default route)
//!                                      relay threads
//! ```
//!
//! - [`args`]: its command line; the path options in it are `pantheon_cli::path_options`, shared
//!   with the simulator, so both accept the same options with the same messages;
//! - [`relay`]: one direction's relay thread; it writes the link logs with
//!   `pantheon_format::link_log`, the simulator's writers too;
//! - [`netns`]: the emulated namespace and its TUN devices.
//!
//! Namespaces, TUN devices, the supervised command, the clock and the stop signal come from
//! `pantheon_sys`, shared with the tunnel and the UDP transport.

pub mod args;
pub mod netns;
pub mod relay;
