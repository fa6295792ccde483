//! The Linux plumbing that every Pantheon driver of real packets shares: the emulator
//! (`pantheon-emu`), the instrumented tunnel (`pantheon-tunnel`) and the UDP transport
//! (`pantheon-udp`). The emulator and the tunnel run a command in a fresh, anonymous network
//! namespace whose only way out is a TUN device they hold, and must leave nothing behind however
//! they end; the tunnel and the transport move datagrams through batched UDP sockets; all of them
//! sleep precisely on one clock and stop when told. Each mechanism exists once, here; the
//! sans-IO models it serves (crates/link, crates/cc) never touch it.
//!
//! - [`namespace`]: anonymous network namespaces, created on a helper thread so the caller never
//!   leaves its own; they vanish with the last process and descriptor that holds them.
//! - [`tun`]: TUN devices, non-persistent, so the kernel deletes them when their descriptor closes.
//! - [`child`]: the command, in its own process group inside the namespace and a PID namespace
//!   whose init dies with the driver, so the kernel ends its whole tree (never by name).
//! - [`privileges`]: CAP_NET_ADMIN through an unprivileged user namespace when not root.
//! - [`udp`]: a UDP socket, batched receives and sends (recvmmsg/sendmmsg), kernel receive times.
//! - [`clock`]: CLOCK_MONOTONIC, the wall clock, a flow's clock, timer slack.
//! - [`poll`]: sleeping until a descriptor is ready, a stop is requested, or a timeout passes.
//! - [`stop`]: a stop request that I/O threads see at once, asleep or busy.
//! - [`signal`]: SIGTERM, SIGINT and SIGHUP as a stop request, SIGUSR1 as a report request.
//! - [`errno`]: system calls' -1 as `io::Error`.

pub mod child;
pub mod clock;
pub mod errno;
pub mod namespace;
pub mod poll;
pub mod privileges;
pub mod signal;
pub mod stop;
pub mod tun;
pub mod udp;
