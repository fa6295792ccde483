"""Issue 18 §2: nothing a command of pantheon-emu or pantheon-tunnel started outlives the binary,
not even after a SIGKILL of the binary itself, and not a grandchild that left the command's process
group and session (setsid): the command runs in a PID namespace whose init dies with the binary
(crates/sys/src/child.rs). The same holds for a scheme the harness's launcher starts under a
tunnel endpoint, when the scheme daemonizes and when the harness disappears."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import links_in
from pantheon.harness.run import launcher
from pantheon.harness.tunnel import write_session_key
from supervision import finish, left, without_root
from support.emulator import in_ns
from support.supervised import RECORDED, start, translate

REPO = Path(__file__).resolve().parent.parent
TUNNEL = REPO / "target" / "release" / "pantheon-tunnel"
PANTHEON = REPO / ".venv" / "bin" / "pantheon"  # which execs pantheon-emu for `pantheon emulate`
# The kernel kills the namespace as soon as its init dies; this leaves a busy 2-core machine room.
GONE_WITHIN_S = 2.0
RECORD = "read -r pid rest < /proc/self/stat; echo $pid > {path}"


def key(tmp: Path) -> Path:
    path = tmp / "session.key"
    return path if path.exists() else write_session_key(path)


def wait_until_gone(netns: str, tmp: Path, names: tuple[str, ...] = RECORDED) -> None:
    """Waits up to GONE_WITHIN_S for every recorded process and every process that was in the
    command's network and PID namespaces to be gone, then checks."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while left(tmp, names) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert left(tmp, names) == [], f"survived the SIGKILL by {GONE_WITHIN_S} s"
    assert links_in(netns) == ["lo"]


@pytest.mark.parametrize("via_cli", [False, True], ids=["pantheon-emu", "pantheon emulate"])
def test_sigkill_of_the_emulator_ends_the_commands_whole_tree(netns: str, emu: Path, tmp_path: Path, via_cli: bool) -> None:
    proc = start(netns, [str(PANTHEON), "emulate"] if via_cli else [str(emu)], tmp_path)
    proc.kill()
    proc.wait()
    wait_until_gone(netns, tmp_path)


@pytest.mark.parametrize("around", [[], ["unshare", "-Urn"], ["unshare", "-Urnm"]],
                         ids=["its own user namespace", "inside unshare -Urn", "inside unshare -Urnm"])
def test_sigkill_of_an_unprivileged_emulator_ends_the_commands_whole_tree(netns: str, emu: Path, around: list[str]) -> None:
    """As user nobody, in the unprivileged user namespace the emulator makes for itself, or in one
    its caller made (as `pantheon test` without root runs it), where it is root: the user namespace
    owns the PID and mount namespaces, so the init may mount their /proc."""
    with without_root(emu, 0o777) as (public, copy, node):
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        as_nobody = ["unshare", "-m", "sh", "-c", f'mount --bind {node} /dev/net/tun && exec "$0" "$@"', *nobody, *around, str(copy)]
        proc = start(netns, as_nobody, public)
        proc.kill()
        proc.wait()
        wait_until_gone(netns, public)


def test_sigkill_of_a_tunnel_server_ends_the_commands_whole_tree(netns: str, tmp_path: Path) -> None:
    proc = start(netns, [str(TUNNEL), "server", "--key-file", str(key(tmp_path))], tmp_path)
    proc.kill()
    proc.wait()
    wait_until_gone(netns, tmp_path)


def test_sigkill_of_a_tunnel_client_ends_the_commands_whole_tree(netns: str, tmp_path: Path) -> None:
    server = subprocess.Popen(in_ns(netns, [str(TUNNEL), "server", "--listen", "127.0.0.1:0", "--key-file", str(key(tmp_path)),
                                            "--", "sleep", "30"]), stdout=subprocess.PIPE, text=True)
    try:
        address = server.stdout.readline().split()[-1]
        proc = start(netns, [str(TUNNEL), "client", address, "--key-file", str(key(tmp_path))], tmp_path)
        proc.kill()
        proc.wait()
        wait_until_gone(netns, tmp_path)
    finally:
        server.send_signal(signal.SIGTERM)
        finish(server)


def test_exit_status_and_pid_namespace(netns: str, emu: Path, tmp_path: Path) -> None:
    """The command is PID 2 of its own PID namespace (so `kill $$` ends a shell, which as PID 1 it
    would not), its status is reported as a shell reports it, and a failed exec is one line."""
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(in_ns(netns, [str(emu), "--", *argv]), capture_output=True, text=True, timeout=30)

    assert run("sh", "-c", "echo $$").stdout == "2\n"
    assert run("sh", "-c", 'read -r pid rest < /proc/self/stat; echo $pid').stdout == "2\n"
    assert run("sh", "-c", "exit 3").returncode == 3
    assert run("sh", "-c", "kill -TERM $$").returncode == 128 + signal.SIGTERM
    not_a_program = tmp_path / "not-a-program"
    not_a_program.write_bytes(b"\x00\x01")
    not_a_program.chmod(0o755)
    failed = run(str(not_a_program))
    assert failed.returncode == 2
    assert failed.stderr == f"pantheon emulate: cannot start {not_a_program}: Exec format error (os error 8)\n"


def launched_scheme(netns: str, tmp: Path, lifeline: int) -> subprocess.Popen[bytes]:
    """A tunnel server whose command is the harness's launcher (watching the harness's `lifeline`),
    released at once, running a scheme that records itself and starts a daemon (setsid) that
    records itself."""
    control = tmp / "control"
    control.mkdir()
    (control / "side.go").touch()
    scheme = ["sh", "-c", f"{RECORD.format(path=tmp / 'cmd.inner')}; readlink /proc/self/ns/net > {tmp}/netns; "
              f"readlink /proc/self/ns/pid > {tmp}/pidns; "
              f"setsid sh -c '{RECORD.format(path=tmp / 'daemon.inner')}; exec sleep 1000' & wait"]
    command = launcher(control, "side", scheme)
    command[command.index("--") - 1] = str(lifeline)  # the given lifeline, which need not be this process's
    argv = [str(TUNNEL), "server", "--key-file", str(key(tmp)), "--", *command]
    proc = subprocess.Popen(in_ns(netns, argv), stdout=subprocess.DEVNULL, env=os.environ | {"PYTHONPATH": str(REPO / "python")},
                            pass_fds=(lifeline,))
    deadline = time.monotonic() + 20
    while not (tmp / "daemon.inner").exists() or not (tmp / "daemon.inner").read_text().strip():
        assert time.monotonic() < deadline, "the scheme did not start"
        assert proc.poll() is None, "the tunnel exited early"
        time.sleep(0.02)
    translate(tmp, ("cmd", "daemon"))
    return proc


@contextlib.contextmanager
def harness_lifeline() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A lifeline (the read end, for the launcher) whose write end a stand-in harness process holds
    alone, and that process. Not this process's own lifeline (`pantheon.processes.lifeline`): in
    the whole suite's pytest process its write end was once found closed under this test, the
    launcher read end-of-file and stopped the scheme as if the harness had gone."""
    read_end, write_end = os.pipe()
    harness = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(write_end,))
    os.close(write_end)
    try:
        yield read_end, harness
    finally:
        os.close(read_end)
        harness.kill()
        harness.wait()


def test_a_launched_schemes_daemon_ends_with_the_run(netns: str, tmp_path: Path) -> None:
    with harness_lifeline() as (read_end, _harness):
        proc = launched_scheme(netns, tmp_path, read_end)
        (tmp_path / "control" / "side.stop").touch()
        assert finish(proc) == 0
    wait_until_gone(netns, tmp_path, ("cmd", "daemon"))


def test_a_launched_schemes_daemon_ends_when_the_harness_disappears(netns: str, tmp_path: Path) -> None:
    """The launcher, inside the tunnel's PID namespace where the harness has no pid, sees the
    harness's SIGKILL by its lifeline and ends the scheme; the daemon then ends with the tunnel."""
    with harness_lifeline() as (read_end, harness):
        proc = launched_scheme(netns, tmp_path, read_end)
        harness.kill()
        harness.wait()
        assert finish(proc) == 0
    wait_until_gone(netns, tmp_path, ("cmd", "daemon"))
