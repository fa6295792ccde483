"""The simulator agrees with the emulator on a slow Poisson path (issue 15 §4), checked live.

Short runs of PCC Vivace over mexico-cellular (2.64 Mbit/s Poisson deliveries each way, 88 ms,
130 packets) in `pantheon test local`, each replayed in the simulator on the same draw of delivery
opportunities (pantheon.sim.replay: same options and seed, the flow started at the instant of the
emulator's link clock at which the emulated flow sent its first datagram). What can still differ is
what the simulator models of the hosts: wake-up latencies, the receiver's acknowledgements, the
sender's pacing and its reading of acknowledgements. Bound: throughput and p95 one-way delay
within 10% (3 emulated runs of 30 s: the first 6 s of each replayed within 2%).

Why replay: runs over this path differ from draw to draw by more than the bound (8 s of Vivace
over 20 simulated seeds: coefficient of variation 22% in throughput, 59% in p95), so means would
need tens of emulated runs; a replay that met another stretch of the draw (the flow started at the
link's 0 instead) differed by more than 10% in 13 of those 20 seeds. Why Vivace and 8 s: a flow's
run is chaotic past some seconds (a spurious-loss path taken in one and not the other, docs/sim.md),
and within 8 s Vivace's replays stay put when the hosts' latency model changes (mean 25 → 60 µs,
20 seeds: throughput within 7.7%, p95 within 1.6%). A busy machine can still perturb an emulated
run (a full ./test.sh saw two of three seeds beyond the bound in 3 of 10 tries, isolated runs pass),
so the test stops at the first three seeds within the bound and fails only when three of five are
beyond it.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pantheon.analysis.analyze import analyze
from pantheon.schemes import registry
from pantheon.sim import replay
from pantheon.sim.simulable import cc_spec

REPO = Path(__file__).resolve().parent.parent
PANTHEON = str(REPO / ".venv" / "bin" / "pantheon")
SCHEME = "pcc-vivace"
PRESET = "mexico-cellular"
RUNTIME_S = 8
BOUND = 0.10
SEEDS = (1, 2, 3, 4, 5)
FAILURES_ALLOWED = 2



def emulated_and_replayed(data: Path, seed: int) -> tuple[dict, dict]:
    """(emulated flow metrics from perf.json, the replay's flow metrics) for one seed."""
    done = subprocess.run([PANTHEON, "test", "local", "--schemes", SCHEME, "--emulator", PRESET, "--runtime",
                           str(RUNTIME_S), "--seed", str(seed), "--data-dir", str(data), "--quiet", "--no-analyze"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    analyze(data, draw=False, reports=False, quiet=True)
    emulated = json.loads((data / "perf.json").read_text())["schemes"][SCHEME]["runs"]["1"]["flows"]["all"]
    options = json.loads((data / "metadata.json").read_text())["emulator_options"]
    spec = cc_spec(registry().schemes[SCHEME])
    assert spec is not None
    simulated = replay.run(replay.replay_of(data / SCHEME / "run1", options, spec), data / "replay")
    return emulated, simulated


def relative_differences(emulated: dict, simulated: dict) -> dict[str, float]:
    return {metric: simulated[metric] / emulated[metric] - 1 for metric in ("throughput_mbps", "delay_p95_ms")}


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
def test_vivace_over_mexico_cellular_replays_within_ten_percent(tmp_path: Path) -> None:
    tried, failed = [], 0
    for seed in SEEDS:
        emulated, simulated = emulated_and_replayed(tmp_path / f"seed{seed}", seed)
        differences = relative_differences(emulated, simulated)
        ok = all(abs(d) <= BOUND for d in differences.values())
        tried.append(f"seed {seed}: emulator {emulated['throughput_mbps']:.3f} Mbit/s p95 {emulated['delay_p95_ms']:.1f} ms,"
                     f" simulator {simulated['throughput_mbps']:.3f} p95 {simulated['delay_p95_ms']:.1f}{'' if ok else ' (beyond)'}")
        failed += not ok
        if failed > FAILURES_ALLOWED:
            pytest.fail("the simulator's replays differ by more than 10%: " + "; ".join(tried))
        if len(tried) - failed == len(SEEDS) - FAILURES_ALLOWED:
            return
