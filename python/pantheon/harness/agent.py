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
    for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, None)):
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, sig)
        deadline = time.monotonic() + (wait_s or GRACE_S)
        while any(c.poll() is None for c in children) and time.monotonic() < deadline:
            time.sleep(POLL_S)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
