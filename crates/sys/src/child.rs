//! The command a driver runs (the emulator's or a tunnel endpoint's): started inside the driver's
//! network namespace, watched until it exits, and ended after — with everything it started, however
//! the driver itself ends, SIGKILL included.
//!
//! Why a PID namespace. Only the direct child can be tied to the driver's life (PR_SET_PDEATHSIG,
//! prctl(2), is cleared in every child it forks), and a subreaper that is killed leaves its orphans
//! to the next one up. A cgroup killed as a whole (cgroup.kill, cgroups(7), Linux 5.14) would do,
//! but creating one needs write access to a cgroup directory, which an ordinary user in the
//! emulator's unprivileged user namespace does not have unless systemd delegated it. A PID
//! namespace needs only CAP_SYS_ADMIN in the driver's user namespace, which both root and that
//! user namespace give, and the kernel itself ends it: "If the 'init' process of a PID namespace
//! terminates, the kernel terminates all of the processes in the namespace via a SIGKILL signal"
//! (pid_namespaces(7)). So the driver clones a tiny init (this module's [`run_init`], not a program)
//! as PID 1 of a new PID namespace, the init gets SIGKILL when the driver dies (PR_SET_PDEATHSIG),
//! and the command is the init's only child, PID 2: every process it starts, even one that left its
//! process group or session, lives in that namespace and dies with the init.
//!
//! The command is not PID 1 itself because PID 1 ignores every signal it has no handler for
//! (pid_namespaces(7)), so `kill -TERM $$` or a forwarded SIGTERM would not end a shell. The init
//! and the command share a process group, whose id is the init's pid as the driver sees it:
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT the driver gets are forwarded to that group (the init
//! ignores them), and 2 s later SIGKILL, which ends the init and so the namespace. When the command
//! exits, the init sends SIGTERM to every process left in the namespace (kill(2) with pid -1),
//! waits up to [`CLEANUP_GRACE`] while reaping, and exits with the command's status as a shell
//! reports it (128 + signal if it was killed), which the driver then reports; by the time the
//! driver can reap the init, the kernel has killed and reaped everything else in the namespace.
//!
//! What the command sees. The init also has a mount namespace of its own (CLONE_NEWNS), made
//! private (MS_REC | MS_PRIVATE on /, so nothing it mounts reaches the caller, mount_namespaces(7)),
//! where it mounts a fresh proc on /proc: a proc instance shows the PID namespace of the process
//! that mounted it (proc(5)), so `$$`, getpid(2) and /proc agree (the command is 2; /proc/$$ and
//! /proc/self are the same process), and a program that walks its own tree through /proc by its own
//! pid finds it. Everything else is as it was: the caller's file systems, and the driver's network
//! namespace (so /proc/self/ns/net, /proc/net and /proc/sys/net are that namespace's). A process
//! outside the PID namespace has no pid inside it: neither /proc/PID nor kill(2) can name it, so a
//! command that must notice its caller going away holds the read end of a pipe whose write end
//! the caller holds (python/pantheon/processes.py). In the emulator's unprivileged user namespace this is allowed
//! too: the user namespace owns both new namespaces (user_namespaces(7)).
//!
//! Between the clone and exec only async-signal-safe calls are made (signal-safety(7)): the driver
//! has threads, and a lock one of them held is held forever in the copy. So the clones are raw
//! clone(2) system calls, not glibc's fork, whose handlers take such locks.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::errno::check;

/// How long the command may take to exit after a forwarded signal before it is killed.
pub const SIGNAL_GRACE: Duration = Duration::from_secs(2);
/// How long what the command left behind gets between SIGTERM and SIGKILL.
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

/// Runs a resolved command inside the network namespace `netns` with `env` added, supervises it
/// to the end, and returns its exit status as a shell reports it. Call it from the thread that
/// lives as long as the driver (main): the init's parent-death signal follows that thread.
pub fn run(command: &[OsString], netns: RawFd, env: &[(&str, String)]) -> Result<i32, String> {
    let child =
        spawn(command, netns, env).map_err(|e| format!("cannot start {}: {e}", command[0].to_string_lossy()))?;
    Ok(child.supervise().0)
}

pub struct Child {
    /// The init's pid in the driver's PID namespace, which is also the command's process group.
    init: libc::pid_t,
    /// The terminal the command was given as its foreground, to take back at the end.
    terminal: Option<RawFd>,
    /// The write end of a pipe whose read end the init checks once it has its parent-death signal:
    /// closed means the driver died before, and the init must not start the command.
    _driver_alive: OwnedFd,
}

/// What the init needs, all made before the clone (nothing may be allocated after it).
struct Start<'a> {
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    netns: RawFd,
    give_terminal: bool,
    /// Read end of the driver-alive pipe.
    driver_alive: RawFd,
    /// Write end of a close-on-exec pipe on which a failure to start the command is reported as
    /// a [`Step`] and an errno (4 bytes each); the driver reads end-of-file once the command's exec
    /// succeeded.
    failure: RawFd,
    handled: libc::sigset_t,
}

/// Starts `command` as PID 2 of a new PID namespace, inside the network namespace `netns`, with
/// `env` added.
pub fn spawn(command: &[OsString], netns: RawFd, env: &[(&str, String)]) -> io::Result<Child> {
    let argv = c_strings(command.iter().map(|arg| arg.as_bytes().to_vec()))?;
    let envp = c_strings(environment(env))?;
    let (argv_ptrs, envp_ptrs) = (null_terminated(&argv), null_terminated(&envp));
    // SAFETY: isatty/tcgetpgrp/getpgrp are plain queries.
    let terminal =
        (unsafe { libc::isatty(0) } == 1 && unsafe { libc::tcgetpgrp(0) } == unsafe { libc::getpgrp() }).then_some(0);
    let (alive_read, alive_write) = pipe()?;
    let (failure_read, failure_write) = pipe()?;
    let start = Start {
        argv: &argv_ptrs,
        envp: &envp_ptrs,
        netns,
        give_terminal: terminal.is_some(),
        driver_alive: alive_read.as_raw_fd(),
        failure: failure_write.as_raw_fd(),
        handled: handled_signals(),
    };
    let init = clone_process(libc::CLONE_NEWPID | libc::CLONE_NEWNS)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create a PID and a mount namespace: {e}")))?;
    if init == 0 {
        // SAFETY: the child of the clone, which only makes async-signal-safe calls and never returns.
        unsafe { run_init(&start, alive_write.as_raw_fd()) }
    }
    drop((alive_read, failure_write));
    let mut report = [0u8; 8];
    if read_full(&failure_read, &mut report) == report.len() {
        let mut status = 0;
        // SAFETY: reaping our own child, which exits right after reporting.
        unsafe { libc::waitpid(init, &mut status, 0) };
        let [step, errno] = [&report[..4], &report[4..]].map(|b| i32::from_ne_bytes(b.try_into().expect("4 bytes")));
        let e = io::Error::from_raw_os_error(errno);
        return Err(match Step::ALL.get(step as usize).and_then(|step| step.context()) {
            Some(context) => io::Error::new(e.kind(), format!("{context}: {e}")),
            None => e,
        });
    }
    Ok(Child { init, terminal, _driver_alive: alive_write })
}

/// The environment the command gets: the driver's, with `extra` added or replacing.
fn environment(extra: &[(&str, String)]) -> Vec<Vec<u8>> {
    std::env::vars_os()
        .filter(|(key, _)| !extra.iter().any(|(name, _)| key.as_bytes() == name.as_bytes()))
        .map(|(key, value)| [key.as_bytes(), b"=", value.as_bytes()].concat())
        .chain(extra.iter().map(|(key, value)| format!("{key}={value}").into_bytes()))
        .collect()
}

fn c_strings(strings: impl IntoIterator<Item = Vec<u8>>) -> io::Result<Vec<CString>> {
    strings.into_iter().map(|s| CString::new(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))).collect()
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 into a local array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads until `buf` is full or end-of-file; returns how much was read.
fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reading into the unfilled rest of buf.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        match n {
            n if n > 0 => got += n as usize,
            n if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => break,
        }
    }
    got
}

/// fork(2) with `flags` added, as the raw system call: glibc's fork would run its handlers, which
/// take locks another thread of the driver may hold. Returns 0 in the child.
fn clone_process(flags: libc::c_int) -> io::Result<libc::pid_t> {
    let flags = (flags | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: no CLONE_VM and no new stack: the child goes on with a copy of this one, as after
    // fork. The remaining arguments (parent and child tid, tls) are unused without their flags.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid as libc::pid_t)
    }
}

/// What the init or the command was doing when it failed, as reported to the driver.
#[derive(Clone, Copy)]
enum Step {
    /// Entering the network namespace and making the process group.
    Enter,
    /// Making the mount namespace private and mounting the PID namespace's /proc.
    MountProc,
    /// Cloning the command or executing it.
    Exec,
}

impl Step {
    const ALL: [Step; 3] = [Step::Enter, Step::MountProc, Step::Exec];

    /// What the driver's message says before the error; none for the exec, whose error (no such
    /// file, permission denied) says it all.
    fn context(self) -> Option<&'static str> {
        match self {
            Step::Enter => Some("cannot enter the network namespace"),
            Step::MountProc => Some("cannot mount /proc for the command's PID namespace"),
            Step::Exec => None,
        }
    }
}

/// Reports `step` and `errno` to the driver and exits.
///
/// # Safety
/// Only in the init or the command, before exec.
unsafe fn fail(start: &Start, step: Step, errno: i32) -> ! {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&(step as i32).to_ne_bytes());
    bytes[4..].copy_from_slice(&errno.to_ne_bytes());
    libc::write(start.failure, bytes.as_ptr().cast(), bytes.len());
    libc::_exit(127)
}

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// PID 1 of the command's PID namespace: ties itself to the driver's life, enters the network
/// namespace, mounts the PID namespace's /proc in its private mount namespace, starts the command, waits for it, ends what it left, and exits with its status.
///
/// # Safety
/// Only in the child of the clone; makes only async-signal-safe calls.
unsafe fn run_init(start: &Start, alive_write: RawFd) -> ! {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    // Its name in ps(1), which otherwise shows a copy of the driver.
    libc::prctl(libc::PR_SET_NAME, c"pantheon-init".as_ptr());
    libc::close(alive_write);
    // With every write end closed, the read end polls as hung up: the driver died before prctl.
    let mut alive = libc::pollfd { fd: start.driver_alive, events: libc::POLLIN, revents: 0 };
    if libc::poll(&mut alive, 1, 0) != 0 {
        libc::_exit(127);
    }
    if libc::setns(start.netns, libc::CLONE_NEWNET) != 0 || libc::setpgid(0, 0) != 0 {
        fail(start, Step::Enter, last_errno());
    }
    // Private first: / is usually shared (systemd makes it so), and a mount under a shared one in a
    // new mount namespace propagates back to its peers, so the new /proc would hide the caller's.
    let none = std::ptr::null();
    let hardened = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    if libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0
        || libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), hardened, std::ptr::null()) != 0
    {
        fail(start, Step::MountProc, last_errno());
    }
    if start.give_terminal {
        // SIGTTOU is blocked (inherited from the driver), so taking the foreground cannot stop us.
        libc::tcsetpgrp(0, libc::getpgrp());
    }
    libc::pthread_sigmask(libc::SIG_BLOCK, &start.handled, std::ptr::null_mut());
    let command = match clone_process(0) {
        Ok(0) => exec_command(start),
        Ok(pid) => pid,
        Err(e) => fail(start, Step::Exec, e.raw_os_error().unwrap_or(libc::EIO)),
    };
    libc::close(start.failure);
    let status = loop {
        let mut status = 0;
        if libc::waitpid(-1, &mut status, 0) == command {
            break status;
        }
    };
    end_the_rest(CLEANUP_GRACE);
    libc::_exit(ExitStatus::from_wait(status).0)
}

/// The command's side of the clone: default signal handling, then exec.
///
/// # Safety
/// Only in the init's child; makes only async-signal-safe calls.
unsafe fn exec_command(start: &Start) -> ! {
    // The Rust runtime ignores SIGPIPE; a command expects the default, as std's Command gives it.
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    libc::execve(start.argv[0], start.argv.as_ptr(), start.envp.as_ptr());
    fail(start, Step::Exec, last_errno())
}

/// In the init, once the command has exited: SIGTERM to every other process in the namespace, and
/// reaping until none is left or `grace` has passed (the init's exit then kills the rest).
///
/// # Safety
/// Only in the init; SIGCHLD must be blocked.
unsafe fn end_the_rest(grace: Duration) {
    libc::kill(-1, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    let mut chld: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut chld);
    libc::sigaddset(&mut chld, libc::SIGCHLD);
    loop {
        let mut status = 0;
        let reaped = libc::waitpid(-1, &mut status, libc::WNOHANG);
        if reaped > 0 {
            continue;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if reaped < 0 && last_errno() == libc::ECHILD || left.is_zero() {
            return;
        }
        libc::sigtimedwait(&chld, std::ptr::null_mut(), &timespec(left));
    }
}

/// Waits for a handled signal for at most `timeout`; `None` on timeout.
fn next_signal(timeout: Duration) -> Option<libc::c_int> {
    let set = handled_signals();
    // SAFETY: valid set and timespec; info may be null.
    let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &timespec(timeout)) };
    (sig > 0).then_some(sig)
}

fn timespec(duration: Duration) -> libc::timespec {
    libc::timespec { tv_sec: duration.as_secs() as libc::time_t, tv_nsec: duration.subsec_nanos() as libc::c_long }
}

impl Child {
    /// Waits for the command, forwarding SIGINT, SIGTERM, SIGHUP and SIGQUIT to its process group;
    /// if it outlives a forwarded signal by [`SIGNAL_GRACE`], the group is killed, init included,
    /// and with it the namespace. Takes the terminal back at the end.
    pub fn supervise(self) -> ExitStatus {
        let mut kill_at: Option<Instant> = None;
        let status = loop {
            let mut status = 0;
            // SAFETY: waitpid on our own child into a local.
            if unsafe { libc::waitpid(self.init, &mut status, libc::WNOHANG) } == self.init {
                break ExitStatus::from_wait(status);
            }
            let timeout = kill_at.map_or(Duration::from_secs(1), |t| t.saturating_duration_since(Instant::now()));
            match next_signal(timeout) {
                Some(libc::SIGCHLD) | Some(libc::SIGTTOU) | None => {}
                Some(sig) => {
                    // SAFETY: signalling our own child's process group.
                    unsafe { libc::kill(-self.init, sig) };
                    kill_at.get_or_insert(Instant::now() + SIGNAL_GRACE);
                }
            }
            if kill_at.is_some_and(|t| Instant::now() >= t) {
                // SAFETY: as above.
                unsafe { libc::kill(-self.init, libc::SIGKILL) };
            }
        };
        if let Some(fd) = self.terminal {
            // SAFETY: SIGTTOU is blocked, so this cannot stop the driver.
            unsafe { libc::tcsetpgrp(fd, libc::getpgrp()) };
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namespace::Namespace;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Runs `script` under `sh -c` as a supervised command in a fresh network namespace, with
    /// `$DIR` a scratch directory that `on_start` gets too; `None` where the test cannot create
    /// namespaces (not root).
    fn supervised(script: &str, on_start: impl FnOnce(&Path, &Child)) -> Option<ExitStatus> {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        // SAFETY: plain getter.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root for namespaces");
            return None;
        }
        block_handled_signals().unwrap();
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("pantheon-child-{}-{run}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (netns, ()) = Namespace::create(|| Ok(())).unwrap();
        // SAFETY: fstat on a descriptor we own into a zeroed stat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstat(netns.as_raw_fd(), &mut st) }).unwrap();
        let command: Vec<OsString> = ["/bin/sh", "-c", script].iter().map(OsString::from).collect();
        let env = [("DIR", dir.display().to_string()), ("NETNS", format!("net:[{}]", st.st_ino))];
        let child = spawn(&command, netns.as_raw_fd(), &env).unwrap();
        on_start(&dir, &child);
        let status = child.supervise();
        std::fs::remove_dir_all(dir).unwrap();
        Some(status)
    }

    /// Waits up to 5 s for the command to write `dir/name`, and returns what it wrote.
    fn recorded(dir: &Path, name: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(text) = std::fs::read_to_string(dir.join(name)).ok().filter(|s| s.ends_with('\n')) {
                return text.trim().to_string();
            }
            assert!(Instant::now() < deadline, "{name} was not recorded");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The processes (by their pids here) whose PID namespace is `pidns` (as /proc/PID/ns/pid reads).
    fn members(pidns: &str) -> Vec<libc::pid_t> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .filter(|pid: &libc::pid_t| {
                std::fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|link| link.as_os_str() == pidns)
            })
            .collect()
    }

    /// Records the command's PID namespace in `$DIR/pidns`, as /proc/PID/ns/pid reads it.
    const PIDNS: &str = "readlink /proc/self/ns/pid > $DIR/pidns;";

    #[test]
    fn the_status_is_the_commands_as_a_shell_reports_it() {
        for (script, expected) in [("exit 3", 3), ("kill -TERM $$", 128 + libc::SIGTERM), ("[ $$ = 2 ]", 0)] {
            if let Some(status) = supervised(script, |_, _| {}) {
                assert_eq!(status, ExitStatus(expected), "{script}");
            }
        }
    }

    #[test]
    fn proc_is_the_pid_namespaces_and_the_network_namespace_the_drivers() {
        // `read` is the shell's own, so /proc/self is the shell.
        let script =
            r#"read -r pid rest < /proc/self/stat; [ "$pid" = $$ ] && [ "$(readlink /proc/self/ns/net)" = "$NETNS" ]"#;
        if let Some(status) = supervised(script, |_, _| {}) {
            assert_eq!(status, ExitStatus(0));
        }
    }

    #[test]
    fn the_inits_death_ends_every_grandchild_even_a_setsid_one() {
        let script = format!("{PIDNS} sleep 101 & setsid sleep 102 & echo > $DIR/started; wait");
        let mut pidns = String::new();
        let status = supervised(&script, |dir, child| {
            recorded(dir, "started");
            pidns = recorded(dir, "pidns");
            // The init, the shell and its two sleeps.
            assert_eq!(members(&pidns).len(), 4, "{:?}", members(&pidns));
            // What PR_SET_PDEATHSIG does to the init when the driver is killed.
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.init, libc::SIGKILL) };
        });
        if let Some(status) = status {
            assert_eq!(status, ExitStatus(128 + libc::SIGKILL));
            assert_eq!(members(&pidns), [], "survived their init");
        }
    }

    #[test]
    fn what_the_command_left_gets_sigterm_then_dies_with_the_init() {
        let script = format!(
            "{PIDNS} sh -c 'trap \"\" TERM; echo > $DIR/started; exec sleep 103' &
             while [ ! -s $DIR/started ]; do sleep 0.01; done; exit 5"
        );
        let started = Instant::now();
        let mut pidns = String::new();
        if let Some(status) = supervised(&script, |dir, _| {
            recorded(dir, "started");
            pidns = recorded(dir, "pidns");
        }) {
            assert_eq!(status, ExitStatus(5));
            let took = started.elapsed();
            assert!(took >= CLEANUP_GRACE && took < CLEANUP_GRACE + Duration::from_secs(2), "took {took:?}");
            assert_eq!(members(&pidns), [], "outlived the command");
        }
    }
}
