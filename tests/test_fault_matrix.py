"""A dozen cases of the bad-input and fault matrix (bench/fault_matrix.py, issue 18 §9), one or two
per command and kind of fault, each a clean one-line error or a clean recovery that leaks nothing.
The bench runs in a process of its own: it makes itself the subreaper of what its cases orphan."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO

CASES = (
    "emulate --uplink-trace /dev/zero", "emulate --delay 1e300", "sim --runtime nan", "sim batch: runtime_s 1e300",
    "test local --runtime inf", "analyze corrupt records", "analyze a duplicated uid", "calibrate --rate-mbps 0.0001:1000",
    "demo --runtime 1e300", "schemes check an unknown scheme", "emulate: SIGTERM of it, its command forking grandchildren",
    "tunnel server: SIGINT of it, its command forking grandchildren",
)


@pytest.mark.skipif(os.geteuid() != 0, reason="the matrix needs root (network namespaces, tmpfs mounts)")
def test_a_subset_of_the_matrix_is_clean_and_leaks_nothing() -> None:
    only = [arg for case in CASES for arg in ("--only", case)]
    done = subprocess.run([sys.executable, str(REPO / "bench" / "fault_matrix.py"), "--table", *only],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    assert done.returncode == 0, done.stderr
    counts = dict(item.split(": ") for item in done.stdout.strip().splitlines()[-1].split(", "))
    assert int(counts["cases"]) == len(CASES), done.stdout
    assert int(counts["clean error"]) + int(counts["clean recovery"]) == len(CASES), done.stdout
    assert counts["leaked namespaces"] == counts["leaked devices"] == counts["leaked processes"] == "0", done.stdout
