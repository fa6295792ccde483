"""The simulator against the emulator, run by run (issue 15 §4).

Short runs of PCC Vivace over mexico-cellular (2.64 Mbit/s Poisson deliveries each way, 88 ms,
130 packets) in `pantheon test local`, each replayed in the simulator on the same draw of delivery
opportunities (pantheon.sim.replay: same options and seed, the flow started at the instant of the
emulator's link clock at which the emulated flow sent its first datagram). What can still differ is
what the simulator models of the hosts: wake-up latencies, the receiver's acknowledgements, the
sender's pacing and its reading of acknowledgements. Compared: throughput and p95 one-way delay of
the datagrams sent in the first 3 s (replay.first_seconds), within 5%.

Why replay: runs over this path differ from draw to draw by more than any useful bound (8 s of
Vivace over 20 simulated seeds: coefficient of variation 22% in throughput, 59% in p95), so means
would need tens of emulated runs. Why the first 3 s: an emulated run's hosts now and then wake a
thread milliseconds late, which no model replays, and Vivace, whose every step follows from
comparing two monitor intervals' utilities, forks there (in one run: one datagram 8.7 ms late at
0.39 s, and from 0.9 s on the two sent at half and twice the rate). Measured on 20 seeds of 8 s on
a quiet machine: the first 3 s agreed within 1% in 19 (the 20th is the run above), the first 4 s within
10% in 17, the whole 8 s in 7. In its first 3 s a run has ramped up, and in some draws filled the
buffer (emulated p95 from 103 to 572 ms), so the comparison covers the link, the pacing and the
controller's start. Agreement over whole runs, in the mean of many, is bench/sim_fidelity.py's.
A busy machine late more often forks more runs, so the test stops at the first four seeds within
the bound and fails only when four of seven are beyond it.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pantheon.analysis.metrics import FlowMetrics
from pantheon.schemes import registry
from pantheon.sim import replay
from pantheon.sim.simulable import cc_spec

REPO = Path(__file__).resolve().parent.parent
PANTHEON = str(REPO / ".venv" / "bin" / "pantheon")
SCHEME = "pcc-vivace"
PRESET = "mexico-cellular"
RUNTIME_S = 4
"""Long enough for the datagrams sent in the first COMPARED_S to arrive through a full buffer."""
COMPARED_S = 3.0
BOUND = 0.05
SEEDS = (1, 2, 3, 4, 5, 6, 7)
FAILURES_ALLOWED = 3


def emulated_and_replayed(data: Path, seed: int) -> tuple[FlowMetrics, FlowMetrics]:
    """The first COMPARED_S of one seed's emulated run and of its replay."""
    done = subprocess.run([PANTHEON, "test", "local", "--schemes", SCHEME, "--emulator", PRESET, "--runtime",
                           str(RUNTIME_S), "--seed", str(seed), "--data-dir", str(data), "--quiet", "--no-analyze"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    options = json.loads((data / "metadata.json").read_text())["emulator_options"]
    spec = cc_spec(registry().schemes[SCHEME])
    assert spec is not None
    run_dir = data / SCHEME / "run1"
    replay.run(replay.replay_of(run_dir, options, spec), data / "replay")
    return (replay.first_seconds(run_dir / "datalink.log", COMPARED_S),
            replay.first_seconds(data / "replay" / "datalink.log", COMPARED_S))


def relative_differences(emulated: FlowMetrics, simulated: FlowMetrics) -> dict[str, float]:
    return {metric: getattr(simulated, metric) / getattr(emulated, metric) - 1
            for metric in ("throughput_mbps", "delay_p95_ms")}


def test_a_replay_starts_at_the_first_data_datagram_with_the_runs_path_and_seed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run1"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"seed": 8, "flows": [{"scheme": "copa", "start_s": 0.0, "duration_s": 30.0}]}))
    # The tunnel's handshake (52 bytes) comes first; the flow's first datagram is the first of 1500.
    (run_dir / "uplink.log").write_text("# pantheon-emu link log v1\n36923 + 0 52\n40000 # 1500\n1283904 + 1 1500\n"
                                        "1293852 + 2 1500\n")
    options = ["--delay", "88", "--uplink-poisson", "2.64", "--seed", "7", "--downlink-poisson", "2.64"]
    got = replay.replay_of(run_dir, options, "copa:delta=0.5")
    assert got.flow.cc == "copa:delta=0.5"
    assert (got.flow.start_s, got.flow.duration_s) == (1.283904, 30.0)
    # The run's own seed (run.json), not the campaign's base seed.
    assert (got.seed, got.path_options) == (8, ["--delay", "88", "--uplink-poisson", "2.64", "--downlink-poisson", "2.64"])
    assert got.runtime_s == pytest.approx(1.283904 + 30 + replay.TAIL_S)


@pytest.mark.skipif(os.geteuid() != 0, reason="the emulator needs root")
def test_vivace_over_mexico_cellular_replays_its_first_seconds_within_five_percent(tmp_path: Path) -> None:
    tried, failed = [], 0
    for seed in SEEDS:
        emulated, simulated = emulated_and_replayed(tmp_path / f"seed{seed}", seed)
        differences = relative_differences(emulated, simulated)
        ok = all(abs(d) <= BOUND for d in differences.values())
        tried.append(f"seed {seed}: emulator {emulated.throughput_mbps:.3f} Mbit/s p95 {emulated.delay_p95_ms:.1f} ms,"
                     f" simulator {simulated.throughput_mbps:.3f} p95 {simulated.delay_p95_ms:.1f}{'' if ok else ' (beyond)'}")
        failed += not ok
        if failed > FAILURES_ALLOWED:
            pytest.fail(f"the replays' first {COMPARED_S:g} s differ by more than {BOUND:.0%}: " + "; ".join(tried))
        if len(tried) - failed == len(SEEDS) - FAILURES_ALLOWED:
            return


INDIGO_EMULATED_MBPS = 11.16
"""The shipped `indigo` over pantheon-emu on the demo's path, 10 runs of 10 s (10.93–11.46;
docs/indigo.md, issue 38 §2)."""


def test_indigo_on_the_demo_path_is_within_ten_percent_of_the_emulator(tmp_path: Path) -> None:
    """Issue 38 §2: every simulated seed held a window of 25 packets (6.93 Mbit/s), because a flow
    started on the link's slot grid measured a min RTT no later packet could see. With the link's
    clock at a seeded phase most seeds fill the link; the mean of these 40 deterministic seeds is
    10.16 Mbit/s (200 seeds: 10.62), the runs that still stop at 25 packets being the policy's."""
    data = tmp_path / "d"
    for argv in (["sim", "--schemes", "indigo", "--delay", "20", "--uplink-rate", "12", "--downlink-rate", "12",
                  "--uplink-queue-bytes", "60000", "--downlink-queue-bytes", "60000", "--runtime", "10",
                  "--run-times", "40", "--data-dir", str(data), "--quiet", "--no-analyze"],
                 ["analyze", str(data), "--no-plots", "--quiet"]):
        done = subprocess.run([PANTHEON, *argv], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    runs = json.loads((data / "perf.json").read_text())["schemes"]["indigo"]["runs"]
    mbps = sorted(run["flows"]["all"]["throughput_mbps"] for run in runs.values())
    assert len(mbps) == 40 and mbps[20] > 11.0  # the median run fills the link
    assert abs(sum(mbps) / len(mbps) / INDIGO_EMULATED_MBPS - 1) <= 0.10, mbps
