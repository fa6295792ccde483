//! Running without root. Creating TUN devices and namespaces needs CAP_NET_ADMIN; a user without
//! it gets it inside an unprivileged user namespace of their own, where the kernel allows one.
//! The emulator then starts from a fresh private network namespace (the caller's real one cannot
//! be changed without privilege), which is where the command's peer lives.

use std::io;

use crate::sys::check;

/// Whether this process may configure networking in its current namespace.
fn has_net_admin() -> bool {
    // CAP_NET_ADMIN is bit 12 of the effective set.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("CapEff:").map(|v| v.trim().to_string())))
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .is_some_and(|caps| caps & (1 << 12) != 0)
}

/// Makes sure the rest of the emulator runs with CAP_NET_ADMIN. Must be called before any
/// thread is started (the kernel refuses a user namespace to a multithreaded process).
pub fn ensure_net_admin() -> io::Result<()> {
    if has_net_admin() {
        return Ok(());
    }
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: unshare on a single-threaded process.
    check(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) }).map_err(|e| {
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
    crate::tun::bring_up("lo")
}
