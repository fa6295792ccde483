//! Running without root. Creating TUN devices and namespaces needs CAP_NET_ADMIN; a user without
//! it gets it inside an unprivileged user namespace of their own, where the kernel allows one.
//! Capabilities there reach only namespaces that user namespace owns: the ones the driver creates
//! from then on, never the caller's network namespace. So a driver that must put a device in the
//! namespace it was started in (the emulator's outer end) moves to a fresh private network
//! namespace, where the command's peer then lives; one that only configures namespaces it creates
//! (a tunnel endpoint) stays where it was started, and its sockets still reach the real network.

use std::io;

use crate::errno::check;

/// Which network namespaces the driver must configure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The one it was started in, and new ones.
    CallerNamespace,
    /// Only new ones it creates.
    NewNamespacesOnly,
}

/// Whether this process may configure networking in its current namespace.
fn has_net_admin() -> bool {
    // CAP_NET_ADMIN is bit 12 of the effective set.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("CapEff:").map(|v| v.trim().to_string())))
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .is_some_and(|caps| caps & (1 << 12) != 0)
}

/// Makes sure the rest of the driver runs with CAP_NET_ADMIN over the namespaces `scope` names.
/// Must be called before any thread is started (the kernel refuses a user namespace to a
/// multithreaded process).
pub fn ensure_net_admin(scope: Scope) -> io::Result<()> {
    if has_net_admin() {
        return Ok(());
    }
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let flags = match scope {
        Scope::CallerNamespace => libc::CLONE_NEWUSER | libc::CLONE_NEWNET,
        Scope::NewNamespacesOnly => libc::CLONE_NEWUSER,
    };
    // SAFETY: unshare on a single-threaded process.
    check(unsafe { libc::unshare(flags) }).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "not root, and the kernel refused an unprivileged user namespace ({e}); \
                 run as root, or allow user namespaces (sysctl user.max_user_namespaces > 0, \
                 kernel.unprivileged_userns_clone=1)"
            ),
        )
    })?;
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    match scope {
        Scope::CallerNamespace => crate::tun::bring_up("lo"),
        Scope::NewNamespacesOnly => Ok(()),
    }
}
