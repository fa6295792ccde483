"""What several benchmarks share, and what the tests share with them: one module per thing it
models (processes, figures, tcp_buffers, link, mahimahi, ns3, iperf, datadir, disk, supervised,
emulator, tunnel, frontier), and traffic.py, the program that sends and receives stamped datagrams.

bench/ never imports tests/: a mechanism a test asserts on and a benchmark prints lives here once,
and the tests import it too (pytest's pythonpath in pyproject.toml names bench/). Importing the
package also puts python/ on sys.path, so a benchmark run by a python3 without the project's venv
still finds pantheon: a benchmark imports `support` before any pantheon module.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

BIN = REPO / "target" / "release"
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
POLL_S = 0.05
