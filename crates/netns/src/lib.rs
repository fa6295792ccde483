//! The Linux plumbing that every Pantheon driver of real packets shares: the emulator
//! (`pantheon-emu`) and the instrumented tunnel (`pantheon-tunnel`) both run a command in a fresh,
//! anonymous network namespace whose only way out is a TUN device they hold, and both must leave
//! nothing behind however they end.
//!
//! - [`namespace`]: anonymous network namespaces, created on a helper thread so the caller never
//!   leaves its own; they vanish with the last process and descriptor that holds them.
//! - [`tun`]: TUN devices, non-persistent, so the kernel deletes them when their descriptor closes.
//! - [`child`]: the command, in its own process group inside the namespace, with signal forwarding
//!   and clean-up by process group, subreaper and namespace inode (never by name).
//! - [`privileges`]: CAP_NET_ADMIN through an unprivileged user namespace when not root.
//! - [`stop`]: an eventfd that tells I/O threads to finish.
//! - [`sys`]: checked system calls and clocks.

pub mod child;
pub mod namespace;
pub mod privileges;
pub mod stop;
pub mod sys;
pub mod tun;
