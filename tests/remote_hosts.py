"""Two "hosts" on one machine for remote-mode tests (issue 16 §5): network namespaces joined by a
path, a real OpenSSH server in the remote one, and a remote clock the code under test cannot know.

Topology. `two_hosts` makes two named namespaces, LOCAL and REMOTE, joined by a veth pair
(10.77.0.1/24 in LOCAL, 10.77.0.2/24 in REMOTE). With `delay_ms == 0` the sshd runs in REMOTE and
the path is the veth pair. With `delay_ms > 0` the sshd runs as the command of `pantheon-emu` inside
REMOTE (`path_options(delay_ms)`), so the remote host is the emulator's own namespace (100.64.k.2,
its default route the emulator's TUN device) and everything between the hosts, ssh included,
crosses the emulated path. The emulator does no NAT, so the two namespaces route: REMOTE forwards
(ip_forward=1 there) between the veth and the emulator's outer TUN device, and LOCAL has a route to
100.64.0.0/10 via 10.77.0.2. Wrapping the remote side, not the local one, leaves the harness under
test free to run as it would on a real host: a plain command in LOCAL.

sshd. Debian's /usr/sbin/sshd with its own configuration, port, host key, PidFile and authorized
keys, all under tmp_path (throwaway ed25519 keys from ssh-keygen), root login by key only, no PAM.
`ForceCommand` runs every session (commands, and sftp for scp) under Debian's `faketime -m -f
'+OFFSET xRATE'` (libfaketime's multi-threaded library, whose `faketime` wrapper shares one clock
among all the processes of a session), so the remote CLOCK_REALTIME is offset and runs at RATE
relative to the truth from the moment the session started. libfaketime 0.9.10 fakes
CLOCK_MONOTONIC as well, and a timed wait on a semaphore or condition variable (Python's
`queue.Queue.get(timeout=...)`, `threading.Event.wait(t)`) never returns under it; with
`--exclude-monotonic` instead, Python's `time.sleep` fails with EINVAL. Code that runs on the remote
host must wait with select/poll or sleep, as the remote agent does. The ssh configuration (`ssh -F`) has a
Host `pantheon-remote` with the key, a known_hosts file holding the host key, and BatchMode.

Clean-up. sshd runs as PID 1 of a PID namespace of its own (`unshare --pid --fork --kill-child
--mount-proc`), so every process any session starts, daemons included, lives in that namespace
and the kernel kills them all when sshd exits: stopping sshd by its process id ends the remote
host. The same mount namespace has a private /dev/shm, where the faketime wrapper keeps its shared
clock, so a SIGKILLed session leaves no file behind. Commands run with `run_local`/`popen_local`
carry a tag in their environment (PANTHEON_TEST_HOSTS) by which `local_processes` finds them and
their descendants in any namespace. On exit, whatever happened (a failed assertion, Ctrl-C), sshd
is stopped, every tagged local process and every process left in either namespace is killed by id,
and both namespaces are deleted. If the test process itself is SIGKILLed, the kernel kills the
remote host's supervisor (PR_SET_PDEATHSIG) and so the whole remote PID namespace. Outside
tmp_path and the namespaces nothing is created but /run/sshd, the privilege-separation directory
sshd needs (created if missing, as Debian's ssh.service does)."""
from __future__ import annotations

import ctypes
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from supervision import alive

REPO = Path(__file__).resolve().parent.parent
EMU = REPO / "target" / "release" / "pantheon-emu"
SSHD = "/usr/sbin/sshd"
FAKETIME = "/usr/bin/faketime"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
LOCAL_ADDR = "10.77.0.1"
REMOTE_VETH_ADDR = "10.77.0.2"
SSH_PORT = 2222
HOST_ALIAS = "pantheon-remote"
TAG = "PANTHEON_TEST_HOSTS"
# The 20 ms path of issue 16 §5 is meant to show clock errors, not queueing: 24 Mbit/s each way
# (a 1500-byte packet every 0.5 ms) and a 4-packet DropTail queue keep a flow's queueing delay under
# ~2 ms, so two runs of one scheme differ in median delay by well under a millisecond.
PATH_RATE_MBPS = 24
PATH_QUEUE_PACKETS = 4
_PR_SET_PDEATHSIG = 1
_counter = itertools.count()


def path_options(delay_ms: float) -> list[str]:
    """The emulator options of the path `two_hosts(delay_ms=...)` builds (also `pantheon test local`'s)."""
    options = ["--delay", f"{delay_ms:g}"]
    for direction in ("uplink", "downlink"):
        options += [f"--{direction}-rate", str(PATH_RATE_MBPS), f"--{direction}-queue", "droptail",
                    f"--{direction}-queue-packets", str(PATH_QUEUE_PACKETS)]
    return options


def faketime_spec(offset_s: float, rate: float) -> str:
    """libfaketime's relative form (faketime(1) -f): an offset in seconds and a clock rate."""
    return f"{offset_s:+.6f} x{rate:.9f}"


@dataclass
class Hosts:
    local_ns: str
    """Named network namespace of the local host (the harness under test runs here)."""
    remote_ns: str
    """Named network namespace of the remote host (with a delay, the emulator's outer side)."""
    local_addr: str
    """The local host's address on the path."""
    remote_addr: str
    """The remote host's address on the path (where sshd listens)."""
    ssh_config: Path
    """For `ssh -F`: Host `pantheon-remote` with user, port, key and known_hosts."""
    host_alias: str
    """The ssh Host alias: "pantheon-remote"."""
    sshd_pid: int
    """Process id (in this machine's PID namespace) of the listening sshd."""
    tag: str
    """Value of PANTHEON_TEST_HOSTS in the environment of everything run_local/popen_local start."""
    remote_home: Path
    """HOME of the remote host's sessions (under tmp_path)."""
    remote_tmp: Path
    """TMPDIR of the remote host's sessions (under tmp_path)."""

    def _local_argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.local_ns, *argv]

    def _local_env(self, kwargs: dict) -> dict[str, str]:
        env = dict(kwargs.pop("env", None) or os.environ)
        env[TAG] = self.tag
        return env

    def run_local(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """Runs argv in the local namespace (subprocess.run's keywords)."""
        env = self._local_env(kwargs)
        return subprocess.run(self._local_argv(argv), env=env, **kwargs)

    def popen_local(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Starts argv in the local namespace (subprocess.Popen's keywords)."""
        env = self._local_env(kwargs)
        return subprocess.Popen(self._local_argv(argv), env=env, **kwargs)

    def remote_processes(self) -> list[int]:
        """Every process alive under sshd (its sessions and all they started), sshd itself not."""
        pid_ns = _proc_link(self.sshd_pid, "ns/pid")
        if pid_ns is None:
            return []
        return [pid for pid in _all_pids() if pid != self.sshd_pid and _proc_link(pid, "ns/pid") == pid_ns and alive(pid)]

    def local_processes(self) -> list[int]:
        """Every process alive that run_local/popen_local started, or one of its descendants."""
        return [pid for pid in _all_pids() if _tagged(pid, self.tag) and alive(pid)]

    def session_pids(self) -> list[int]:
        """The sshd processes serving connections (each connection's privileged monitor and its
        child): killing them drops the connections as a failed network would, and nothing else."""
        return [pid for pid in self.remote_processes() if _proc_link(pid, "exe") == SSHD]


def _all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None


def _proc_link(pid: int, name: str) -> str | None:
    """Where /proc/PID/NAME points (exe, ns/pid, ns/net); None once the process is gone."""
    try:
        return os.readlink(f"/proc/{pid}/{name}")
    except OSError:
        return None


def _tagged(pid: int, tag: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{TAG}={tag}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def _ns_init_pid(root_pid: int) -> int | None:
    """The descendant of root_pid that is PID 1 of its own PID namespace (the sshd)."""
    for pid in _all_pids():
        try:
            with open(f"/proc/{pid}/status") as f:
                ns_pids = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if len(ns_pids) > 1 and ns_pids[-1] == "1" and _descends_from(pid, root_pid):
            return pid
    return None


def _descends_from(pid: int, ancestor: int) -> bool:
    current: int | None = pid
    while current and current > 1:
        if current == ancestor:
            return True
        current = _ppid(current)
    return False


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _die_with_parent() -> None:
    """Runs in the supervisor's child before exec: SIGKILL it when the test process dies."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True)


def _write_keys_and_configs(d: Path, clock_offset_s: float, clock_rate: float) -> tuple[Path, Path, Path]:
    """Keys, the sshd configuration, the session wrapper and the client's files; returns
    (sshd_config, ssh_config, known_hosts)."""
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"pantheon-test-{name}",
                        "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
    host_key = (d / "host_key.pub").read_text().split()
    known_hosts = d / "known_hosts"
    known_hosts.write_text(f"{HOST_ALIAS} {host_key[0]} {host_key[1]}\n")
    spec = faketime_spec(clock_offset_s, clock_rate)
    session = d / "session.sh"
    # sftp (what scp speaks) arrives as the subsystem name; everything else as a shell command.
    for private in ("remote-home", "remote-tmp"):
        (d / private).mkdir(mode=0o700)
    session.write_text(f"""#!/bin/sh
# Every ssh session of the remote test host runs on its faked clock ({spec}), with a home and a
# temporary directory of its own (the state a remote agent keeps is the remote host's, not ours).
export HOME={d / "remote-home"} TMPDIR={d / "remote-tmp"}
if [ "$SSH_ORIGINAL_COMMAND" = sftp ]; then
    exec {FAKETIME} -m -f '{spec}' {SFTP_SERVER}
fi
exec {FAKETIME} -m -f '{spec}' /bin/sh -c "$SSH_ORIGINAL_COMMAND"
""")
    session.chmod(0o755)
    sshd_config = d / "sshd_config"
    sshd_config.write_text(f"""# A throwaway sshd for remote-mode tests (tests/remote_hosts.py).
Port {SSH_PORT}
ListenAddress 0.0.0.0
HostKey {d / "host_key"}
PidFile {d / "sshd.pid"}
AuthorizedKeysFile {d / "authorized_keys"}
PermitRootLogin prohibit-password
AllowUsers root
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# tmp_path lies under world-writable /tmp, which StrictModes refuses for authorized_keys.
StrictModes no
X11Forwarding no
PrintMotd no
LogLevel VERBOSE
ForceCommand {session}
""")
    ssh_config = d / "ssh_config"
    ssh_config.write_text(f"""Host {HOST_ALIAS}
    HostName {{remote_addr}}
    Port {SSH_PORT}
    User root
    IdentityFile {d / "user_key"}
    IdentitiesOnly yes
    HostKeyAlias {HOST_ALIAS}
    UserKnownHostsFile {known_hosts}
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    BatchMode yes
    ConnectTimeout 10
    LogLevel ERROR
""")
    return sshd_config, ssh_config, known_hosts


def _emulator_inner_addr(remote_ns: str, deadline: float) -> str:
    """The emulated namespace's address: the peer of the emulator's outer TUN device in REMOTE."""
    while time.monotonic() < deadline:
        out = subprocess.run(["ip", "-n", remote_ns, "-4", "-o", "addr", "show"], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            words = line.split()
            if "peer" in words and words[words.index("peer") + 1].startswith("100.64."):
                return words[words.index("peer") + 1].split("/")[0]
        time.sleep(0.02)
    raise RuntimeError(f"the emulator in {remote_ns} made no TUN device")


def _ssh_answers(ssh_config: Path, local_ns: str) -> bool:
    probe = subprocess.run(["ip", "netns", "exec", local_ns, "ssh", "-F", str(ssh_config), HOST_ALIAS, "true"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


@contextmanager
def two_hosts(tmp_path: Path, *, delay_ms: float = 0, clock_offset_s: float = 0.0,
              clock_rate: float = 1.0) -> Iterator[Hosts]:
    """A local and a remote host joined by a path of `delay_ms` each way (none: a veth pair), the
    remote one serving ssh with its clock `clock_offset_s` ahead and running at `clock_rate`."""
    d = tmp_path / "hosts"
    d.mkdir()
    name = f"pantheon-rh-{os.getpid()}-{next(_counter)}"
    local_ns, remote_ns = f"{name}-l", f"{name}-r"
    tag = f"{name}-{time.time_ns()}"
    sshd_config, ssh_config_template, _ = _write_keys_and_configs(d, clock_offset_s, clock_rate)
    made: list[str] = []
    supervisor: subprocess.Popen | None = None
    sshd_pid: int | None = None
    try:
        for ns in (local_ns, remote_ns):
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", local_ns, "link", "add", "rh0", "type", "veth", "peer", "name", "rh1", "netns", remote_ns)
        _ip("-n", local_ns, "addr", "add", f"{LOCAL_ADDR}/24", "dev", "rh0")
        _ip("-n", remote_ns, "addr", "add", f"{REMOTE_VETH_ADDR}/24", "dev", "rh1")
        _ip("-n", local_ns, "link", "set", "rh0", "up")
        _ip("-n", remote_ns, "link", "set", "rh1", "up")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        # PID 1 of a fresh PID namespace, with a private /dev/shm (see the module's header).
        sshd = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
                f"mount -t tmpfs -o mode=1777 pantheon-test-shm /dev/shm && exec {SSHD} -D -e -f {sshd_config}"]
        if delay_ms > 0:
            subprocess.run(["ip", "netns", "exec", remote_ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"],
                           check=True)
            _ip("-n", local_ns, "route", "add", "100.64.0.0/10", "via", REMOTE_VETH_ADDR)
            sshd = [str(EMU), *path_options(delay_ms), "--", *sshd]
        with open(d / "sshd.log", "wb") as log:
            supervisor = subprocess.Popen(["ip", "netns", "exec", remote_ns, *sshd], stdout=log,
                                          stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 20
        remote_addr = _emulator_inner_addr(remote_ns, deadline) if delay_ms > 0 else REMOTE_VETH_ADDR
        ssh_config = d / "ssh_config"
        ssh_config.write_text(ssh_config_template.read_text().replace("{remote_addr}", remote_addr))
        while not (d / "sshd.pid").exists() or (sshd_pid := _ns_init_pid(supervisor.pid)) is None:
            if supervisor.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sshd did not start: {(d / 'sshd.log').read_text()}")
            time.sleep(0.02)
        if not _ssh_answers(ssh_config, local_ns):
            raise RuntimeError(f"ssh to the test host failed: {(d / 'sshd.log').read_text()}")
        hosts = Hosts(local_ns=local_ns, remote_ns=remote_ns, local_addr=LOCAL_ADDR, remote_addr=remote_addr,
                      ssh_config=ssh_config, host_alias=HOST_ALIAS, sshd_pid=sshd_pid, tag=tag,
                      remote_home=d / "remote-home", remote_tmp=d / "remote-tmp")
        yield hosts
    finally:
        _tear_down(supervisor, sshd_pid, tag, made)


def _tear_down(supervisor: subprocess.Popen | None, sshd_pid: int | None, tag: str, namespaces: list[str]) -> None:
    """Stops sshd by its id (the kernel then ends its whole PID namespace), kills what the local
    side left by id, and deletes the namespaces."""
    if sshd_pid is not None:
        with suppress(ProcessLookupError):
            os.kill(sshd_pid, signal.SIGTERM)
    if supervisor is not None:
        try:
            supervisor.wait(timeout=10)
        except subprocess.TimeoutExpired:
            supervisor.kill()
            supervisor.wait()
    _kill_all([pid for pid in _all_pids() if _tagged(pid, tag)])
    links = set()
    for ns in namespaces:
        with suppress(OSError):
            links.add(_ns_link(ns))
    _kill_all([pid for pid in _all_pids() if _proc_link(pid, "ns/net") in links])
    for ns in namespaces:
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


def _ns_link(ns: str) -> str:
    """The `net:[INODE]` form /proc/PID/ns/net gives for a named namespace."""
    return f"net:[{os.stat(f'/run/netns/{ns}').st_ino}]"
