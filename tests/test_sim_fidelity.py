"""The simulator against the emulator, run by run (issue 15 §4) and cell by cell (issue 38 §1).

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
the bound and fails only when four of seven are beyond it; a run whose hypervisor stole more than
a quiet host's share of the CPUs (analyze.QUIET_STEAL_PCT) is not compared at all (quiet_runs).

The fidelity matrix (bench/sim_fidelity.py, docs/sim.md) keeps a strict subset here: three schemes
on the demo's path with a shallow buffer, one and two flows, two emulated runs of 5 s against the
mean of simulated seeds; and the Indigo cell as issue 38 states it (the demo's own path, 20 seeds
against 3 emulated runs of 10 s), each within 10% on throughput and p95 one-way delay. About 120 s
as root (marked slow).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path

import pytest

from pantheon.analysis.analyze import QUIET_STEAL_PCT, host_was_stolen
from pantheon.analysis.metrics import FlowMetrics
from pantheon.schemes import registry
from pantheon.sim import replay
from pantheon.sim.simulable import cc_spec
from support import fidelity

REPO = Path(__file__).resolve().parent.parent
PANTHEON = str(REPO / ".venv" / "bin" / "pantheon")
SCHEME = "pcc-vivace"
PRESET = "mexico-cellular"
RUNTIME_S = 4
"""Long enough for the datagrams sent in the first COMPARED_S to arrive through a full buffer."""
COMPARED_S = 3.0
BOUND = 0.05
COMPARED_RUNS = 7
"""Runs on a quiet host that decide; FAILURES_ALLOWED of them may be beyond the bound."""
FAILURES_ALLOWED = 3
SEEDS = range(1, 2 * COMPARED_RUNS + 1)
"""Twice as many as decide: the others stand in for runs on a host that was not quiet (quiet_runs)."""


def emulated_and_replayed(data: Path, seed: int) -> tuple[FlowMetrics, FlowMetrics] | float:
    """The first COMPARED_S of one seed's emulated run and of its replay; or, where the run's host
    was not quiet, how much of its CPU time the hypervisor stole (quiet_runs says why)."""
    done = subprocess.run([PANTHEON, "test", "local", "--schemes", SCHEME, "--emulator", PRESET, "--runtime",
                           str(RUNTIME_S), "--seed", str(seed), "--data-dir", str(data), "--quiet", "--no-analyze"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    options = json.loads((data / "metadata.json").read_text())["emulator_options"]
    spec = cc_spec(registry().schemes[SCHEME])
    assert spec is not None
    run_dir = data / SCHEME / "run1"
    stolen_pct = json.loads((run_dir / "run.json").read_text())["host_steal_pct"]
    if host_was_stolen(stolen_pct):
        return float(stolen_pct)
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
    assert [(f.cc, f.start_s, f.duration_s) for f in got.flows] == [("copa:delta=0.5", 1.283904, 30.0)]
    # The run's own seed (run.json), not the campaign's base seed.
    assert (got.seed, got.path_options) == (8, ["--delay", "88", "--uplink-poisson", "2.64", "--downlink-poisson", "2.64"])
    assert got.runtime_s == pytest.approx(1.283904 + 30 + replay.TAIL_S)


@pytest.mark.skipif(os.geteuid() != 0, reason="the emulator needs root")
def test_vivace_over_mexico_cellular_replays_its_first_seconds_within_five_percent(tmp_path: Path) -> None:
    tried, failed, stolen = [], 0, []
    for seed in SEEDS:
        compared = emulated_and_replayed(tmp_path / f"seed{seed}", seed)
        if isinstance(compared, float):
            stolen.append(compared)
            continue
        emulated, simulated = compared
        differences = relative_differences(emulated, simulated)
        ok = all(abs(d) <= BOUND for d in differences.values())
        tried.append(f"seed {seed}: emulator {emulated.throughput_mbps:.3f} Mbit/s p95 {emulated.delay_p95_ms:.1f} ms,"
                     f" simulator {simulated.throughput_mbps:.3f} p95 {simulated.delay_p95_ms:.1f}{'' if ok else ' (beyond)'}")
        failed += not ok
        if failed > FAILURES_ALLOWED:
            pytest.fail(f"the replays' first {COMPARED_S:g} s differ by more than {BOUND:.0%}: " + "; ".join(tried))
        if len(tried) - failed == COMPARED_RUNS - FAILURES_ALLOWED:
            return
    pytest.skip(f"the host was not quiet: the hypervisor stole more than {QUIET_STEAL_PCT:g}% of its CPU time in "
                f"{len(stolen)} of {len(SEEDS)} emulated runs ({stolen} %), and {len(tried)} runs decide nothing: "
                + "; ".join(tried))


# The fidelity matrix's strict subset (issue 38 §1; bench/sim_fidelity.py runs the whole matrix):
# a few of its cells, each emulated once against the mean of simulated seeds, within the matrix's
# bound on both metrics.
MATRIX_BOUND = 0.10
SUBSET_SCHEMES = ("cubic-user", "bbr-user", "vegas-user")
SUBSET_BUFFER = "shallow"
SUBSET_RUNTIME_S = 5.0
SUBSET_EMULATED_RUNS = 2
"""vegas-user's two flows decide the cell's noise: a short run's p95 is a few milliseconds of queue,
and how their starts overlap puts it at one of two levels. Eight emulated runs of 3 s each: p95
25.5 to 30.9 ms (the simulator's 10 seeds 27.1 ± 1.6), so the mean of two was 10.7% off once in CI;
of 5 s: 26.0 to 27.9 ms (the simulator's 26.1 ± 0.5), the worst mean of two 7% off. cubic-user and
bbr-user stay within 0.1 ms at either length. A CI run on the loaded machine (2026-11-30) once had
vegas-user's two-flow mean at 31.0 ms, 16% off, outside the eight runs' range: so a scheme whose
first two runs are beyond the bound gets SUBSET_MORE_RUNS more, and the mean of all four decides
(a sequential sample: an outlier is diluted, a real difference stays, as the bound is unchanged)."""
SUBSET_MORE_RUNS = 2
SUBSET_SIM_SEEDS = 10
INDIGO_EMULATED_RUNS = 3
"""And as many more when the first three are beyond the bound (the subset's sequential rule,
`disagreeing`): the mean of six decides. Each on a quiet host (quiet_runs): on 2026-11-30, 24
emulated runs on this path, the simulator's 20 seeds giving 11.06 Mbit/s at a p95 of 26.41 ms,
were in two kinds. The 10 whose hypervisor stole 0.05-1.7% of the CPUs' time gave 11.10 Mbit/s at
25.67 ms (11.03-11.58, 23.3-33.7); the 14 from which it stole 3.0-22% gave 9.42 at 32.91
(6.64-10.94, 29.8-39.9): the host, not the path, is the 15-20% they differ by."""
INDIGO_SIM_SEEDS = 20
QUIET_TRIES = 4
"""At most this many emulated runs for each one wanted on a quiet host (quiet_runs)."""
INDIGO_RUNTIME_S = 10.0


def beyond(emulated: list[fidelity.Pair], simulated: list[fidelity.Pair]) -> list[str]:
    """The metrics whose simulated mean is more than MATRIX_BOUND from the emulated mean."""
    out = []
    for i, metric in enumerate(("throughput Mbit/s", "p95 ms")):
        emu, sim = (statistics.mean(p[i] for p in emulated), statistics.mean(p[i] for p in simulated))
        if abs(sim / emu - 1) > MATRIX_BOUND:
            out.append(f"{metric}: emulator {emu:.2f}, simulator {sim:.2f} ({sim / emu - 1:+.1%})")
    return out


def quiet_runs(path_file: Path, names: list[str], flows: int, runtime_s: float, wanted: int, seed: int,
               tmp_path: Path) -> tuple[dict[str, list[fidelity.Pair]], int]:
    """`wanted` emulated runs of each scheme of `names` on a quiet host, from the emulator's seed
    `seed` on, and the next seed. A run whose host had more than QUIET_STEAL_PCT of its CPU time
    stolen (harness/steal.py) measured the path and the host's stalls together, which is not what
    the simulator models: it is replaced by a run on the next seed, up to QUIET_TRIES runs for
    each one wanted. A host that stays that busy for longer leaves nothing to compare: the test is
    skipped, saying so."""
    kept: dict[str, list[fidelity.Pair]] = {name: [] for name in names}
    stolen: dict[str, list[float]] = {name: [] for name in names}
    while needed := {name: wanted - len(kept[name]) for name in names if len(kept[name]) < wanted}:
        if over := [name for name in needed if len(stolen[name]) > (QUIET_TRIES - 1) * wanted]:
            pytest.skip(f"the host was not quiet: in {len(stolen[over[0]])} emulated runs of {over[0]} the hypervisor "
                        f"stole more than {QUIET_STEAL_PCT:g}% of its CPU time ({stolen[over[0]]} %), so their delays "
                        f"are the host's as much as the path's: nothing to compare the simulator with")
        runs = max(needed.values())
        data_dir = tmp_path / f"emu-seed{seed}"
        emulated = fidelity.emulated(path_file, list(needed), flows, runtime_s, seed, data_dir, timeout_s=240,
                                     runs=runs)
        steals = fidelity.steal_pcts(data_dir / "perf.json")
        for name, missing in needed.items():
            for pair, steal in zip(emulated[name], steals[name], strict=True):
                if host_was_stolen(steal):
                    stolen[name].append(steal)
                elif missing:
                    kept[name] += valid([pair])
                    missing -= 1
        seed += runs
    return kept, seed


def disagreeing(path_file: Path, flows: int, runtime_s: float, simulated: dict[str, dict[int, fidelity.Pair | None]],
                runs: int, more_runs: int, tmp_path: Path) -> dict[str, tuple[list[str], list[fidelity.Pair]]]:
    """Each scheme of `simulated` emulated `runs` times over the path on a quiet host (quiet_runs),
    and its metrics beyond the bound with its emulated runs, for those that disagree. A sequential
    sample: a scheme beyond the bound after its first runs gets `more_runs` more (the next seeds)
    and the mean of all decides, so that an outlier is diluted and a real difference stays (the
    bound is unchanged)."""
    names = list(simulated)
    emulated, seed = quiet_runs(path_file, names, flows, runtime_s, runs, 0, tmp_path)
    sim = {name: valid(list(simulated[name].values())) for name in names}
    if again := [name for name in names if beyond(emulated[name], sim[name])]:
        more, _ = quiet_runs(path_file, again, flows, runtime_s, more_runs, seed, tmp_path)
        for name in again:
            emulated[name] += more[name]
    return {name: (why, emulated[name]) for name in names if (why := beyond(emulated[name], sim[name]))}


def valid(pairs: list[fidelity.Pair | None]) -> list[fidelity.Pair]:
    assert pairs and all(p is not None for p in pairs), f"a run was invalid: {pairs}"
    return [p for p in pairs if p is not None]


def test_the_matrixs_buffers_scale_with_the_paths_bandwidth_delay_product() -> None:
    paths = fidelity.all_paths()
    # The demo's path: 12 Mbit/s x 40 ms = 60 000 bytes, 40 packets.
    assert fidelity.bdp_bytes(paths["demo"]) == pytest.approx(60_000)
    assert [fidelity.buffer_bytes(paths["demo"], b) for b in ("own", "shallow", "deep")] == [60_000, 30_000, 240_000]
    # Nepal's 0.57 Mbit/s x 56 ms is 3 990 bytes: the floors of 4 and 16 packets.
    assert [fidelity.buffer_bytes(paths["nepal-wifi"], b) for b in ("shallow", "deep")] == [6_000, 24_000]
    # An AQM keeps its discipline and parameters; only its limit is scaled.
    codel = fidelity.scaled(paths["bdp-codel"], "deep").uplink
    assert (codel.queue, codel.queue_args, codel.queue_bytes, codel.queue_packets) == ("codel", "target=5,interval=100",
                                                                                     360_000, None)
    # The buffer sweep's presets differ only in their buffer: scaled, they are one path.
    assert fidelity.canonical("buffer-45000b", "shallow") == "buffer-9000b"
    assert fidelity.canonical("policer-12mbps-10ms", "shallow") == "policer-12mbps-10ms"


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the emulator needs root")
@pytest.mark.parametrize("flows", [1, 2])
def test_the_demo_paths_cells_agree_within_ten_percent(tmp_path: Path, flows: int) -> None:
    """The demo's path with a shallow buffer (half a BDP, 30 000 bytes), the mean of two emulated
    runs of 5 s of each scheme against the mean of 10 simulated seeds. In the matrix's 10 s runs these cells
    agree within 1.2% (docs/sim.md, "The fidelity matrix")."""
    path = fidelity.scaled(fidelity.all_paths()["demo"], SUBSET_BUFFER)
    path_file = tmp_path / "path.toml"
    path_file.write_text(path.toml())
    specs = {name: cc_spec(registry().schemes[name]) or "" for name in SUBSET_SCHEMES}
    simulated = fidelity.simulated(path, specs, flows, SUBSET_RUNTIME_S, range(SUBSET_SIM_SEEDS), tmp_path)
    wrong = disagreeing(path_file, flows, SUBSET_RUNTIME_S, simulated, SUBSET_EMULATED_RUNS, SUBSET_MORE_RUNS, tmp_path)
    assert not wrong, wrong


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the emulator needs root")
def test_indigo_on_the_demo_path_is_within_ten_percent_of_the_emulator(tmp_path: Path) -> None:
    """Issue 38: the shipped `indigo` on the demo's own path (12 Mbit/s, 20 ms, 60 000-byte
    DropTail), the simulator's mean over 20 seeds against the emulator's over 3 runs of 10 s (6 when
    the first 3 are beyond the bound: INDIGO_EMULATED_RUNS),
    within 10% on throughput and p95 one-way delay. Before its retraining the simulator gave
    6.93 Mbit/s on seed 0 (mean about 10.6 over 200 seeds) against the emulator's 11.16."""
    path = fidelity.all_paths()["demo"]
    path_file = tmp_path / "path.toml"
    path_file.write_text(path.toml())
    spec = cc_spec(registry().schemes["indigo"])
    assert spec is not None
    simulated = fidelity.simulated(path, {"indigo": spec}, 1, INDIGO_RUNTIME_S, range(INDIGO_SIM_SEEDS), tmp_path)
    wrong = disagreeing(path_file, 1, INDIGO_RUNTIME_S, simulated, INDIGO_EMULATED_RUNS, INDIGO_EMULATED_RUNS, tmp_path)
    assert not wrong, wrong
