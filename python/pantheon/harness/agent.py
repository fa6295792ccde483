"""The emulator's command during a run: starts the sender side of every flow (each a tunnel
client whose own command is a launcher waiting for the harness's go) inside the emulated
namespace, and lasts until they have all ended, the harness writes `agent.stop` in the control
directory, or the harness process disappears (the harness's lifeline, descriptor LIFELINE_FD, reads
end-of-file: pantheon.processes) — then it ends them (SIGTERM, then SIGKILL) and exits, and the
emulator with it. The tunnel clients get the lifeline too, for their launchers.

    python -m pantheon.harness.agent CONTROL_DIR LIFELINE_FD PLAN_JSON

PLAN_JSON holds a list of {"name", "argv", "stdout"}; "$MAHIMAHI_BASE" in an argv element is
replaced by the peer address the emulator gives its command.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pantheon.harness.run import last_line
from pantheon.processes import cut

POLL_S = 0.02
GRACE_S = 3.0


def main(argv: list[str]) -> int:
    control, harness, plan = Path(argv[0]), int(argv[1]), json.loads(Path(argv[2]).read_text())
    base = os.environ["MAHIMAHI_BASE"]
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    children = []
    for entry in plan:
        command = [arg.replace("$MAHIMAHI_BASE", base) for arg in entry["argv"]]
        with open(entry["stdout"], "wb") as out:
            children.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                             pass_fds=(harness,)))

    while any(c.poll() is None for c in children):
        if stopping or (control / "agent.stop").exists() or cut(harness):
            break
        time.sleep(POLL_S)
    # Told to stop by the harness, the clients' launchers were told too: they get a grace to end on
    # their own, so that the status each exits with is its own.
    told = (control / "agent.stop").exists()
    signalled = set()
    for sig in ((None,) if told else ()) + (signal.SIGTERM, signal.SIGKILL):
        for child in children:
            if sig is not None and child.poll() is None:
                os.killpg(child.pid, sig)
                signalled.add(child.pid)
        deadline = time.monotonic() + GRACE_S
        while any(c.poll() is None for c in children) and time.monotonic() < deadline:
            time.sleep(POLL_S)
    # A tunnel client that ended with a status of its own (a log it could not write) or by a signal
    # not of the agent's failed: the agent's status, and so the emulator's, says so, and its line
    # ends the emulator's output.
    failed = [(entry, child.returncode) for entry, child in zip(plan, children, strict=True)
              if child.pid not in signalled and child.returncode]
    for entry, status in failed:
        how = f"status {status}" if status > 0 else f"killed by {signal.Signals(-status).name}"
        print(f"the tunnel client of {entry['name']} failed ({how}): {last_line(Path(entry['stdout']))}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
