//! `pantheon-cli`: what the command lines of Pantheon's binaries share, so that each is declared
//! once and every binary behaves the same. It holds no I/O beyond printing an error and reading a
//! trace file named on the command line, so the simulator uses it as freely as the emulator.
//!
//! - [`usage`]: the contract every binary keeps (`pantheon emulate`, `pantheon-tunnel`,
//!   `pantheon-udp`, `pantheon-sim`): a user's mistake is one line and exit status 2;
//! - [`path_options`]: the emulated path's options and their validation into
//!   `pantheon_link::PathConfig`, flattened into the emulator's and the simulator's command lines.

pub mod path_options;
pub mod usage;
