"""Runs one side of one flow when the harness says so. Started inside a tunnel endpoint's
namespace (as the tunnel's command), it waits for `NAME.go` to appear in the control directory,
runs the scheme's command in a process group of its own, and ends it when `NAME.stop` appears,
the harness process disappears (the harness's lifeline, descriptor LIFELINE_FD, reads end-of-file:
pantheon.processes), or it gets SIGTERM. It reports in the control directory:
`NAME.ready` when it is waiting, `NAME.started` (epoch seconds) and `NAME.exit` (JSON: status,
whether the scheme had exited on its own before it was told to stop, which counts as a failure,
and whether it ignored SIGTERM for STOP_GRACE_S and had to be killed). The scheme's standard
error goes to `NAME.stderr`. A daemon the scheme started with setsid escapes the process group but
not the tunnel endpoint's PID namespace, which the kernel ends with the endpoint (docs/tunnel.md).
`NAME.started` and `NAME.exit` are written atomically (pantheon.files): on a full disk the harness
finds a whole report or none (an empty one was a traceback in the harness), and the launcher's
own failure ends the tunnel endpoint, whose exit status the harness reports.
`{local}` and `{peer}` in the command become the tunnel's addresses
($PANTHEON_TUNNEL_LOCAL, $PANTHEON_TUNNEL_PEER), which only the tunnel knows.

`--sysctl NAME=VALUE` (kernel TCP's `net.ipv4.tcp_ecn=1` for a flow with ECN) is written to
/proc/sys before the scheme starts. /proc/sys/net shows the network namespace of the process that
opens it, and the launcher runs in the tunnel endpoint's own (docs/tunnel.md), so the setting is
the flow's alone and ends with it; the host's is never touched. A setting that cannot be written
fails the side as a command that cannot start does (status 126, the reason in `NAME.stderr`).

    python -m pantheon.harness.launch CONTROL_DIR NAME LIFELINE_FD [--sysctl NAME=VALUE ...] -- CMD ...
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pantheon import files
from pantheon.processes import cut

POLL_S = 0.005
STOP_GRACE_S = 2.0


def set_sysctls(settings: list[str]) -> str | None:
    """Writes each `name=value` under /proc/sys, this network namespace's; the first failure in
    one line, or None. Only net.* settings: every other sysctl is the whole host's."""
    for setting in settings:
        name, _, value = setting.partition("=")
        if not name.startswith("net."):
            return f"cannot set {name}: only a network namespace's own settings (net.*) are set for a flow"
        try:
            Path("/proc/sys", *name.split(".")).write_text(value + "\n")
        except OSError as e:
            return f"cannot set {name}={value} in the flow's network namespace: {e.strerror or e}"
    return None


def main(argv: list[str]) -> int:
    control, name, harness = Path(argv[0]), argv[1], int(argv[2])
    end = argv.index("--")
    settings = [argv[i + 1] for i in range(3, end) if argv[i] == "--sysctl"]
    local, peer = os.environ.get("PANTHEON_TUNNEL_LOCAL", ""), os.environ.get("PANTHEON_TUNNEL_PEER", "")
    command = [arg.replace("{local}", local).replace("{peer}", peer) for arg in argv[end + 1 :]]
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    def told_to_stop() -> bool:
        return stopping or (control / f"{name}.stop").exists() or cut(harness)

    (control / f"{name}.ready").touch()
    while not (control / f"{name}.go").exists():
        if told_to_stop():
            return 0
        time.sleep(POLL_S)
    with open(control / f"{name}.stderr", "wb") as stderr:
        if failed := set_sysctls(settings):
            stderr.write(f"{failed}\n".encode())
            files.write_atomic(control / f"{name}.exit", json.dumps({"status": 126, "exited_early": True}))
            return 0
        try:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        except OSError as e:
            stderr.write(f"cannot start {command[0]}: {e}\n".encode())
            files.write_atomic(control / f"{name}.exit", json.dumps({"status": 127, "exited_early": True}))
            return 0
        files.write_atomic(control / f"{name}.started", f"{time.time():.6f}\n")
        while child.poll() is None and not told_to_stop():
            time.sleep(POLL_S)
        exited_early = child.poll() is not None
        needed_sigkill = False
        if not exited_early:
            os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                needed_sigkill = True
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # anything the scheme left in its group
    files.write_atomic(control / f"{name}.exit", json.dumps({"status": child.returncode, "exited_early": exited_early,
                                                       "needed_sigkill": needed_sigkill}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
