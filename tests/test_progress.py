"""Progress (pantheon/progress.py): on a terminal a bar with the current run, the share done, the
time elapsed and left; plain lines when the output is not a terminal; nothing with --quiet. The
terminal path end to end: `pantheon sim` in a pseudo-terminal (pty) of 100 columns."""
from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path

import pytest

from pantheon.progress import Progress

REPO = Path(__file__).resolve().parent.parent
SIM = REPO / "target" / "release" / "pantheon-sim"
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
SIM_ARGS = ["sim", "--schemes", "copa,cubic-user", "--runtime", "2", "--jobs", "1", "--no-analyze"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def campaign(progress: Progress) -> None:
    for n in (1, 2):
        progress.started(f"copa run {n}/2")
        progress.tick(1.0, 2.0)
        progress.ended(f"copa run {n}/2 ok")
    progress.close()


def test_a_terminal_gets_a_bar_with_the_run_and_the_time_left() -> None:
    out = Terminal()
    campaign(Progress(2, quiet=False, stream=out))
    text = out.getvalue()
    assert "[1/2] copa run 1/2" in text and "%|" in text and "elapsed" in text and "left" in text, text
    assert "[2/2] copa run 2/2 ok\n" in text
    assert "[1/2] copa run 1/2 ...\n" not in text, "a terminal gets the bar, not the plain start lines"


def test_other_output_gets_plain_lines_and_quiet_nothing() -> None:
    out = io.StringIO()
    campaign(Progress(2, quiet=False, stream=out))
    assert out.getvalue() == ("[1/2] copa run 1/2 ...\n[1/2] copa run 1/2 ok\n"
                              "[2/2] copa run 2/2 ...\n[2/2] copa run 2/2 ok\n")
    for stream in (io.StringIO(), Terminal()):
        campaign(Progress(2, quiet=True, stream=stream))
        assert stream.getvalue() == ""


def test_the_bar_moves_within_a_run() -> None:
    progress = Progress(4, quiet=False, stream=Terminal())
    progress.started("copa run 1/4")
    progress.tick(3.0, 4.0)
    assert progress.bar is not None and progress.bar.n == pytest.approx(0.75)
    progress.ended("copa run 1/4 ok")
    progress.tick(9.0, 4.0)
    assert progress.bar.n == pytest.approx(2.0), "a run's ticks never go past the run"
    progress.close()


def in_pty(argv: list[str]) -> tuple[int, str]:
    """Runs `argv` with its stdout and stderr a 24 x 100 pseudo-terminal; its exit status and output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return child.wait(timeout=60), out.decode(errors="replace")


@pytest.mark.skipif(not SIM.is_file(), reason=f"{SIM} is not built (cargo build --release --workspace)")
def test_sim_on_a_terminal_and_in_a_pipe(tmp_path: Path) -> None:
    status, out = in_pty([str(PANTHEON), *SIM_ARGS, "--data-dir", str(tmp_path / "tty")])
    assert status == 0, out
    assert "%|" in out and "elapsed" in out and " left" in out, out
    assert "[2/2] cubic-user run 1/1 ok" in out, out

    piped = subprocess.run([str(PANTHEON), *SIM_ARGS, "--data-dir", str(tmp_path / "pipe")], capture_output=True,
                           text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    lines = piped.stderr.splitlines()
    assert lines[0].startswith("pantheon: path: "), lines  # what it simulates, first (issue 39 §1)
    assert lines[1].startswith("[1/2] copa run 1/1 ok") and lines[2].startswith("[2/2] cubic-user run 1/1 ok"), lines
    assert "\r" not in piped.stderr and "%|" not in piped.stderr
