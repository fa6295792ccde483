"""The userspace BBR twin behaves like the kernel's BBR over the emulator (issue 15 §3).

bbr-user (crates/cc/src/bbr.rs driven by pantheon-udp) and the kernel's bbr run one after the
other over the 1-BDP path (12 Mbit/s each way, 30 ms each way, a 90 000-byte uplink DropTail
buffer) for 20 s each; the twin's throughput must be within 5% of the kernel's and its p95 one-way
delay at most 15% above it, the goal bench/twin_fidelity.py measures (both ways) over more paths.
The delay bound is one-sided because on a loaded machine the kernel's BBR itself keeps a standing
queue that the twin does not (p95 78–89 ms against the twin's 44–56 ms, docs/cc.md): a twin
below the kernel there is the machine, not the twin.

What it guards: a twin whose queue climbs through the run where the kernel's drains between
probes. Before bbr-user paced 1% below its bandwidth estimate (crates/cc/src/bbr.rs) its queue
grew ~2 ms a second on this path and a 20 s run's p95 one-way delay reached 73.5 ms; with the
margin, 43.7–55.9 ms (4 runs).

One run on a 2-core machine shared with the emulator is noisy (the kernel's BBR itself once kept a
40 ms standing queue through a run on a loaded machine), so a pair outside the bounds is run again,
up to ATTEMPTS pairs, and the test judges the means of all pairs run so far: noise averages out,
a twin that is off in every run does not.
"""
from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest

from test_harness import pantheon

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="runs flows over the emulator (needs root)")]

PATH = ["--delay", "30", "--uplink-queue", "droptail", "--uplink-queue-bytes", "90000"]
RUNTIME_S = 20
ATTEMPTS = 3
THROUGHPUT_BOUND = 0.05
DELAY_BOUND = 0.15


def pair(data_dir: Path) -> dict[str, tuple[float, float]]:
    """{scheme: (throughput Mbit/s, p95 one-way delay ms)} of one run of bbr and one of bbr-user."""
    done = pantheon("test", "local", "--schemes", "bbr,bbr-user", *PATH, "--runtime", str(RUNTIME_S),
                    "--data-dir", str(data_dir), "--quiet", timeout=2 * (RUNTIME_S + 30) + 120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    schemes = json.loads((data_dir / "perf.json").read_text())["schemes"]
    out = {}
    for name in ("bbr", "bbr-user"):
        (run,) = schemes[name]["runs"].values()
        assert run["valid"], f"{name}: the run is flagged: {run['flags']}"
        flow = run["flows"]["all"]
        out[name] = (flow["throughput_mbps"], flow["delay_p95_ms"])
    return out


@pytest.mark.timeout(ATTEMPTS * 240)
def test_bbr_user_matches_kernel_bbr_on_a_one_bdp_buffer(tmp_path: Path) -> None:
    pairs = []
    for attempt in range(ATTEMPTS):
        pairs.append(pair(tmp_path / f"attempt{attempt}"))
        kernel_mbps, kernel_ms = (statistics.mean(p["bbr"][i] for p in pairs) for i in (0, 1))
        twin_mbps, twin_ms = (statistics.mean(p["bbr-user"][i] for p in pairs) for i in (0, 1))
        throughput_ratio, delay_ratio = twin_mbps / kernel_mbps, twin_ms / kernel_ms
        if abs(throughput_ratio - 1) <= THROUGHPUT_BOUND and delay_ratio <= 1 + DELAY_BOUND:
            return
    pytest.fail(f"bbr-user against kernel bbr over {len(pairs)} pairs of {RUNTIME_S} s runs: throughput "
                f"{twin_mbps:.2f} vs {kernel_mbps:.2f} Mbit/s (ratio {throughput_ratio:.3f}, bound ±{THROUGHPUT_BOUND:.0%}), "
                f"p95 one-way delay {twin_ms:.1f} vs {kernel_ms:.1f} ms (ratio {delay_ratio:.3f}, bound "
                f"+{DELAY_BOUND:.0%}); runs: {pairs}")
