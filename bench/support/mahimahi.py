"""Mahimahi, the anchor (../shared/tools/mahimahi-anchor): whether it is installed, and what its
shells need (quoted scripts, constant-rate traces)."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

from support import REPO
from support.tcp_buffers import TCP_BUFFER_SYSCTLS, read_sysctls, write_sysctls

ANCHOR = REPO.parent / "shared" / "tools" / "mahimahi-anchor"  # shared/ sits beside the repository
ANCHOR_INSTALLED_MARK = Path("/var/lib/mahimahi-anchor/shim")
ANCHOR_NETNS = Path("/run/netns/mmanchor")
"""The anchor's network namespace: made by its first `run` or `exec`, kept until `clean`."""
# Mahimahi traces are in 1500-byte delivery opportunities; 1 Mbit/s = 1/12 opportunity per ms.
MTU_BYTES = 1500


def missing_prerequisite(emu: Path) -> str | None:
    """What stops a run through our emulator and Mahimahi, if anything."""
    if os.geteuid() != 0:
        return "run as root (it creates network namespaces)"
    if not emu.is_file():
        return f"no emulator at {emu}: run 'cargo build --release' in {REPO}, or pass --emu PATH"
    if not ANCHOR_INSTALLED_MARK.exists():
        return f"Mahimahi is not installed: run '{ANCHOR} install'"
    for tool in ("iperf3", "nsenter", "ip", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH"
    return None


def double_quoted(script: str) -> str:
    return '"' + re.sub(r'([\\"$`])', r"\\\1", script) + '"'


def write_constant_rate_trace(path: Path, rate_mbps: int) -> None:
    """A Mahimahi trace: one line per 1500-byte opportunity, its ms timestamp; the file repeats.

    R Mbit/s is R/12 opportunities per ms; the period is the smallest whole number of ms holding a
    whole number of opportunities (1000 Mbit/s: 250 in 3 ms), spread evenly over it.
    """
    per_ms = Fraction(rate_mbps * 1_000_000, 8 * MTU_BYTES * 1000)
    period_ms, count = per_ms.denominator, per_ms.numerator
    path.write_text("".join(f"{k * period_ms // count + 1}\n" for k in range(count)))
    path.chmod(0o644)



@contextlib.contextmanager
def anchor_with_tcp_buffers() -> Iterator[None]:
    """The anchor's namespace with TCP buffers raised for the block: its old values put back after
    it, and the namespace deleted (`mahimahi-anchor clean`) if the block made it, so a bench leaves
    behind no namespace of its own."""
    existed = ANCHOR_NETNS.exists()
    inside = [str(ANCHOR), "exec"]
    old = read_sysctls(inside)
    try:
        write_sysctls(inside, TCP_BUFFER_SYSCTLS)
        yield
    finally:
        write_sysctls(inside, old)
        if not existed and ANCHOR_NETNS.exists():
            subprocess.run([str(ANCHOR), "clean"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
