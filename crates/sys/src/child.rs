//! The command a driver runs (the emulator's or a tunnel endpoint's): started inside the driver's
//! namespace in a process group of its own, watched until it exits, and cleaned up after — with
//! everything it started.
//!
//! Cleanup tracks processes by id, never by name: the driver is a child subreaper, so orphans of
//! the command are re-parented to it; at the end it signals the command's process group and every
//! process whose network namespace is the command's (found by namespace inode in /proc), first
//! with SIGTERM, then with SIGKILL, reaping as it goes. With no process left in it and the
//! driver's descriptors closed, the namespace and its TUN devices disappear. The command gets
//! SIGKILL from the kernel (PR_SET_PDEATHSIG) if the driver itself is killed.

use std::ffi::OsString;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::errno::check;

/// How long the command may take to exit after a forwarded signal before it is killed.
pub const SIGNAL_GRACE: Duration = Duration::from_secs(2);
/// How long leftovers get between SIGTERM and SIGKILL.
pub const CLEANUP_GRACE: Duration = Duration::from_millis(500);

/// Signals the driver handles itself; blocked in every thread and received with sigtimedwait.
pub fn handled_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGCHLD, libc::SIGTTOU] {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// Blocks the handled signals in the calling thread (and so in threads it starts later).
pub fn block_handled_signals() -> io::Result<()> {
    let set = handled_signals();
    // SAFETY: valid sigset.
    let ret = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if ret != 0 {
        return Err(io::Error::from_raw_os_error(ret));
    }
    // SAFETY: prctl with an integer flag.
    check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) })?;
    Ok(())
}

/// How the command ended, as a shell would report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus(pub i32);

impl ExitStatus {
    fn from_wait(status: libc::c_int) -> ExitStatus {
        if libc::WIFEXITED(status) {
            ExitStatus(libc::WEXITSTATUS(status))
        } else {
            ExitStatus(128 + libc::WTERMSIG(status))
        }
    }
}

/// Finds the command's program the way a shell would, so that a typo fails before any namespace
/// exists; returns the command line with the program's path in first place.
pub fn resolve(command: &[OsString]) -> Result<Vec<OsString>, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.is_file() && p.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    let program = &command[0];
    let name = Path::new(program);
    let path = if name.components().count() > 1 || program.to_string_lossy().contains('/') {
        if !executable(name) {
            return Err(format!("command not found or not executable: {}", name.display()));
        }
        name.to_path_buf()
    } else {
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(name))
            .find(|p| executable(p))
            .ok_or_else(|| format!("command not found: {} (not in PATH)", name.display()))?
    };
    Ok(std::iter::once(path.into_os_string()).chain(command[1..].iter().cloned()).collect())
}

/// Runs a resolved command inside the namespace `netns` (whose inode is `netns_inode`) with `env`
/// added, supervises it to the end, and returns its exit status as a shell reports it.
pub fn run(command: &[OsString], netns: RawFd, netns_inode: u64, env: &[(&str, String)]) -> Result<i32, String> {
    let child =
        spawn(command, netns, env).map_err(|e| format!("cannot start {}: {e}", command[0].to_string_lossy()))?;
    Ok(child.supervise(netns_inode).0)
}

pub struct Child {
    pid: libc::pid_t,
    /// The terminal the command was given as its foreground, to take back at the end.
    terminal: Option<RawFd>,
}

/// Starts `command` inside the namespace `netns` with `env` added.
pub fn spawn(command: &[OsString], netns: RawFd, env: &[(&str, String)]) -> io::Result<Child> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]);
    for (key, value) in env {
        cmd.env(key, value);
    }
    // SAFETY: isatty/getpgrp are async-signal-safe queries.
    let terminal =
        (unsafe { libc::isatty(0) } == 1 && unsafe { libc::tcgetpgrp(0) } == unsafe { libc::getpgrp() }).then_some(0);
    let give_terminal = terminal.is_some();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            check(libc::setns(netns, libc::CLONE_NEWNET))?;
            check(libc::setpgid(0, 0))?;
            if give_terminal {
                // SIGTTOU is still blocked here, so taking the foreground cannot stop us.
                libc::tcsetpgrp(0, libc::getpid());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    Ok(Child { pid: child.id() as libc::pid_t, terminal })
}

/// Waits for a handled signal for at most `timeout`; `None` on timeout.
fn next_signal(timeout: Duration) -> Option<libc::c_int> {
    let set = handled_signals();
    let ts =
        libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: valid set and timespec; info may be null.
    let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    (sig > 0).then_some(sig)
}

/// Reaps every exited child; returns the command's status if it was among them.
fn reap(pid: libc::pid_t) -> Option<ExitStatus> {
    let mut ours = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid into a local.
        let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if reaped <= 0 {
            return ours;
        }
        if reaped == pid {
            ours = Some(ExitStatus::from_wait(status));
        }
    }
}

impl Child {
    /// Waits for the command (see [`Child::wait`]), ends whatever it left in the namespace with
    /// inode `netns_inode` (see [`Child::clean_up`]) and takes the terminal back.
    pub fn supervise(self, netns_inode: u64) -> ExitStatus {
        let status = self.wait(SIGNAL_GRACE);
        self.clean_up(netns_inode, CLEANUP_GRACE);
        self.restore_terminal();
        status
    }

    /// Waits for the command to exit, forwarding SIGINT, SIGTERM, SIGHUP and SIGQUIT to its
    /// process group; if it outlives a forwarded signal by `grace`, it is killed.
    fn wait(&self, grace: Duration) -> ExitStatus {
        let mut kill_at: Option<Instant> = None;
        loop {
            if let Some(status) = reap(self.pid) {
                return status;
            }
            let timeout = kill_at.map_or(Duration::from_secs(1), |t| t.saturating_duration_since(Instant::now()));
            match next_signal(timeout) {
                Some(libc::SIGCHLD) | Some(libc::SIGTTOU) | None => {}
                Some(sig) => {
                    // SAFETY: signalling our own child's process group.
                    unsafe { libc::kill(-self.pid, sig) };
                    kill_at.get_or_insert(Instant::now() + grace);
                }
            }
            if kill_at.is_some_and(|t| Instant::now() >= t) {
                // SAFETY: as above.
                unsafe { libc::kill(-self.pid, libc::SIGKILL) };
            }
        }
    }

    /// Ends everything the command left behind: its process group and every process in the
    /// command's namespace.
    fn clean_up(&self, netns_inode: u64, grace: Duration) {
        for sig in [libc::SIGTERM, libc::SIGKILL] {
            let mut targets = processes_in_netns(netns_inode);
            // SAFETY: signalling the command's own process group; ESRCH if it is empty.
            let group_alive = unsafe { libc::kill(-self.pid, sig) } == 0;
            for &pid in &targets {
                // SAFETY: pid is in the command's namespace, which only our command's tree can enter.
                unsafe { libc::kill(pid, sig) };
            }
            if targets.is_empty() && !group_alive {
                break;
            }
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                reap(self.pid);
                targets.retain(|&pid| process_in_netns(pid, netns_inode));
                if targets.is_empty() && processes_in_netns(netns_inode).is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        reap(self.pid);
    }

    /// Gives the terminal's foreground back to the driver's process group.
    fn restore_terminal(&self) {
        if let Some(fd) = self.terminal {
            // SAFETY: SIGTTOU is blocked, so this cannot stop the driver.
            unsafe { libc::tcsetpgrp(fd, libc::getpgrp()) };
        }
    }
}

fn netns_inode_of(pid: libc::pid_t) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/net")).ok().map(|m| m.ino())
}

fn process_in_netns(pid: libc::pid_t, inode: u64) -> bool {
    netns_inode_of(pid) == Some(inode) && !is_zombie(pid)
}

fn is_zombie(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(true)
}

/// Every live process whose network namespace has this inode.
pub fn processes_in_netns(inode: u64) -> Vec<libc::pid_t> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|&pid| process_in_netns(pid, inode))
        .collect()
}
