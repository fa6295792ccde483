"""Behaviour checks: each scheme shows what its paper or RFC is known for, on a path chosen to show
it (short runs; the figures a researcher would read off Pantheon's report), over the emulator or,
for crates/cc's controllers on some paths, in the simulator (below).

- Every scheme on 12 Mbit/s, 20 ms each way, a one-BDP (60 kB) DropTail buffer: utilization of at
  least 70%, or what its design leads one to expect (EXPECTED_UTILIZATION says why).
- Delay-based control (Copa, Arun & Balakrishnan NSDI 2018 §5; Vegas, Brakmo et al. SIGCOMM 1994
  §3.2) with a deep buffer (5 BDP): a p95 queueing delay far below Cubic's, which fills the buffer.
- Loss-driven or delay-tolerant control (PCC Allegro, Dong et al. NSDI 2015 §2.2; Verus with its
  authors' R = 6) on the same deep buffer: a p95 queueing delay near Cubic's, as published.
- PCC (Allegro, Dong et al. NSDI 2015 §4.1.1; Vivace, NSDI 2018 §5): at least 80% utilization
  under 1% random loss, where Cubic's loss-driven window collapses.
- Sprout (Winstein et al. NSDI 2013 §5): on the Verizon LTE trace, a p95 delay far below Cubic's.
- Two flows of a scheme whose paper claims fairness share the link: Jain's index ≥ 0.9 over the
  last half of each 30 s run; and a Vivace flow joining another 10 s later converges to its share.
- Tao, a RemyCC (Winstein & Balakrishnan SIGCOMM 2013; Sivaraman et al. SIGCOMM 2014), on a path
  inside the prior it was trained for that training never drew: at or near the throughput–delay
  frontier of Cubic, Copa and Vegas (no one of them ahead of it by TAO_MARGIN on both axes).

Where they run. Every scheme's utilization is judged over the emulator, end to end (tunnel,
transport, emulator, the scheme's own program), as Pantheon's report would show it. The other
paths test what a controller's paper claims of the controller, and every scheme they test is one of
crates/cc's, which the simulator runs unchanged (docs/sim.md): those paths run in `pantheon sim`,
with more seeds than the emulator could afford in CI's time (the emulator took 9 min of it for the
three paths, two runs each; the simulator takes about a minute, four seeds each). The simulator's
agreement with the emulator is tested on its own (tests/test_sim_fidelity.py,
bench/sim_fidelity.py). Sprout's check races the kernel's Cubic, so it stays on the emulator.

Each emulated path runs once per module as one campaign of `pantheon test local` (schemes in
sequence, not in parallel: they would share the two cores and the measurements with them), one run
of each scheme: one short run varies by a few percent, and the bars leave more room than that
(every scheme bar WebRTC and SCReAM at 85-97% of the link against the 70% bar, in two suites of
two runs and two of one). The simulated paths' bars judge the mean of SIMULATED_RUNS seeds, as
Pantheon's report averages runs, or each seed on its own where the test says so.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pantheon import schemes
from pantheon.analysis.analyze import host_was_stolen
from prerequisites import missing
from support.frontier import Point, dominators
from test_harness import pantheon

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="runs flows over the emulator (needs root)")]

RATE_MBPS = 12
DELAY_MS = 20
BDP_BYTES = RATE_MBPS * 1_000_000 // 8 * 2 * DELAY_MS // 1000
"""60 000 bytes: 12 Mbit/s over the 40 ms round trip."""
RUNTIME_S = 15
ONE_BDP_RUNTIME_S = 10
"""The one-BDP campaign runs every scheme, so its runs are the shortest that still show each
scheme's steady state here (10 s: every window-based scheme measured 86-97% of the link), and the
suite's longest part (22 schemes: 4.7 min)."""
SIMULATED_RUNS = 4
"""Seeds of each simulated campaign (all four take about a minute)."""
VERIZON_LTE = Path("/usr/share/mahimahi/traces/Verizon-LTE-short")
"""Mahimahi's traces (Debian's mahimahi-traces; here from ../shared/tools/mahimahi-anchor install)."""

EXPECTED_UTILIZATION = {
    "webrtc": 0.08,
    # Google Congestion Control paces a video encoder: it starts at 300 kbit/s and raises its
    # estimate multiplicatively, by at most 8% a second once past the start
    # (draft-ietf-rmcat-gcc-02 §5.5), and the encoder, not the link, caps the rate: measured 13-27%
    # over 10 s runs (4 runs; Chromium takes 0.4-1.9 s to start), 41% over 15 s, 67% over 30 s.
    "scream": 0.04,
    # RFC 8298's media rate ramps up by at most 200 kbit/s per second (§4.1.2.x, RAMP_UP_SPEED)
    # from 0.1 Mbit/s, so a 10 s run averages at most ~1.1 Mbit/s (9%; measured 6.9%, 4 runs,
    # as the ramp starts once the first feedback arrives); it reaches 80% of this link only
    # after ~49 s (crates/cc/src/scream.rs).
    "cbr": 0.15,
    # Not a congestion controller: unresponsive cross traffic at 2 Mbit/s whatever the link
    # (crates/cc/src/cbr.rs, schemes/cbr.toml), 1/6 of this one (16.7%).
}
"""Schemes whose design does not aim at 70% of this path in a short run, and what they reach."""


def ready(names: list[str]) -> list[str]:
    """The named schemes, less those unavailable on this kernel or machine (the kernel's vegas);
    a scheme that is not set up, or whose set-up failed, is named (prerequisites.missing)."""
    registry = schemes.registry()
    unready = {n: why for n in names if (why := registry.problem(n)) and registry.schemes[n].status()[0] != "unavailable"}
    if unready:
        missing("not set up: " + "; ".join(f"{n}: {why}" for n, why in unready.items()))
    return [n for n in names if registry.problem(n) is None]


def every_ready_scheme() -> list[str]:
    registry = schemes.registry()
    return sorted(n for n in registry.schemes if registry.problem(n) is None)


EMULATOR = ("test", "local")
SIMULATOR = ("sim",)


def campaign(data_dir: Path, names: list[str], *options: str, runtime_s: int = RUNTIME_S, runs: int = 1,
             engine: tuple[str, ...] = EMULATOR) -> dict:
    """Runs `names` `runs` times each over the path `options` describe, over the emulator or in the
    simulator (`engine`: the pantheon subcommand); perf.json's schemes."""
    done = pantheon(*engine, "--schemes", ",".join(names), "--runtime", str(runtime_s),
                    "--run-times", str(runs), "--data-dir", str(data_dir), "--quiet", *options,
                    timeout=runs * len(names) * (runtime_s + 30) + 120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((data_dir / "perf.json").read_text())["schemes"]


def simulated(data_dir: Path, names: list[str], *options: str, runtime_s: int = RUNTIME_S) -> dict:
    """`campaign` of crates/cc's schemes in the simulator, SIMULATED_RUNS seeds each."""
    return campaign(data_dir, names, *options, runtime_s=runtime_s, runs=SIMULATED_RUNS, engine=SIMULATOR)


def summary_of(perf: dict, name: str) -> dict:
    """The analysis's summary of the scheme's runs (means over them, as the report shows), each of
    which must be valid."""
    summary = perf[name]["summary"]
    flags = [run["flags"] for run in perf[name]["runs"].values()]
    assert summary["valid_runs"] == summary["runs"], f"{name}: a run is flagged: {flags}"
    return summary


def mean_utilization(perf: dict, name: str) -> float:
    return summary_of(perf, name)["run"]["utilization"]["mean"]


def queueing_p95_ms(perf: dict, name: str) -> float:
    """p95 one-way delay less the path's propagation delay, the mean over runs."""
    return summary_of(perf, name)["all"]["delay_p95_ms"]["mean"] - DELAY_MS


def one_bdp_options(queue_bytes: int = BDP_BYTES) -> list[str]:
    return ["--delay", str(DELAY_MS), "--uplink-rate", str(RATE_MBPS), "--downlink-rate", str(RATE_MBPS),
            "--uplink-queue-bytes", str(queue_bytes), "--downlink-queue-bytes", str(queue_bytes)]


STOLEN_RERUNS = 2
"""How many more times a scheme of the one-BDP campaign is run when its run's host was not quiet
(analyze.host_was_stolen: more than QUIET_STEAL_PCT of its CPU time stolen by the hypervisor,
harness/steal.py); its run on the quietest host is judged. Indigo on the demo's path moved 11.1 Mbit/s on a quiet host and 6.6
at 22% stolen (docs/sim.md, "The host's hypervisor: steal time"): the host's, not the scheme's."""


def stolen_pct(perf: dict, name: str) -> float:
    """The most of the host's CPU time stolen in any of the scheme's runs, % (0 where unmeasured)."""
    return max((run.get("host_steal_pct") or 0.0) for run in perf[name]["runs"].values())


@pytest.fixture(scope="module")
def one_bdp(tmp_path_factory: pytest.TempPathFactory) -> dict:
    perf = campaign(tmp_path_factory.mktemp("one-bdp"), every_ready_scheme(), *one_bdp_options(),
                    runtime_s=ONE_BDP_RUNTIME_S)
    for _ in range(STOLEN_RERUNS):
        if not (stolen := [name for name in perf if host_was_stolen(stolen_pct(perf, name))]):
            break
        again = campaign(tmp_path_factory.mktemp("one-bdp-again"), stolen, *one_bdp_options(),
                         runtime_s=ONE_BDP_RUNTIME_S)
        perf.update({name: again[name] for name in stolen if stolen_pct(again, name) < stolen_pct(perf, name)})
    return perf


@pytest.mark.timeout(1200)  # the first of these runs the whole campaign: ~13 s per scheme
@pytest.mark.parametrize("name", every_ready_scheme())
def test_utilization_on_a_one_bdp_buffer(one_bdp: dict, name: str) -> None:
    utilization = mean_utilization(one_bdp, name)
    expected = EXPECTED_UTILIZATION.get(name, 0.70)
    assert utilization >= expected, f"{name}: {utilization:.1%} of the link, expected ≥ {expected:.0%}"


SHALLOW = {"copa": 1 / 4, "vegas-user": 1 / 4, "copa-0.1": 1 / 2}
"""Delay-based schemes and the fraction of Cubic's p95 queueing on a 5-BDP buffer they stay under."""
FILLERS = ["pcc-allegro", "verus"]
"""Schemes whose published behaviour fills a deep buffer: Allegro's utility sees loss only (NSDI
2015 §2.2), and Verus lets the delay reach R = 6 times the minimum (its authors' verus.hpp since
July 2015), which on a 40 ms path is past what a 5-BDP buffer holds."""


@pytest.fixture(scope="module")
def five_bdp(tmp_path_factory: pytest.TempPathFactory) -> dict:
    names = ready([*SHALLOW, *FILLERS])
    return simulated(tmp_path_factory.mktemp("five-bdp"), [*names, "cubic-user"], *one_bdp_options(5 * BDP_BYTES))


def cubic_fills(perf: dict) -> float:
    cubic_ms = queueing_p95_ms(perf, "cubic-user")
    assert cubic_ms > 100, f"Cubic should fill the 5-BDP buffer (≈200 ms): p95 queueing {cubic_ms:.0f} ms"
    return cubic_ms


@pytest.mark.timeout(900)
def test_delay_based_schemes_keep_a_deep_buffer_nearly_empty(five_bdp: dict) -> None:
    # Copa with δ = 0.1 aims at ten times the queue of δ = 0.5 (1/δ packets, §2) and swings wider
    # around it. Simulated, 4 seeds: p95 queueing Vegas 4 ms, Copa 12–13 ms, Copa δ = 0.1 21 ms,
    # Cubic 197 ms; emulated, 2 runs: Copa δ = 0.1 21–22 ms, Cubic 195 ms.
    perf, shallow_ms = five_bdp, SHALLOW
    delay_based = ready(list(shallow_ms))
    cubic_ms = cubic_fills(perf)
    for name in delay_based:
        queueing_ms, utilization = queueing_p95_ms(perf, name), mean_utilization(perf, name)
        assert queueing_ms < cubic_ms * shallow_ms[name], (name, queueing_ms, cubic_ms)
        assert utilization >= 0.7, (name, utilization)


@pytest.mark.timeout(900)
def test_allegro_and_verus_fill_a_deep_buffer(five_bdp: dict) -> None:
    # Simulator, 15 s, 4 seeds: p95 queueing Allegro 200 ms, Verus 196 ms, Cubic 197 ms; Verus
    # with R = 2 (its authors' first release, our default before issue 15) 65–67 ms.
    cubic_ms = cubic_fills(five_bdp)
    for name in ready(FILLERS):
        queueing_ms, utilization = queueing_p95_ms(five_bdp, name), mean_utilization(five_bdp, name)
        assert queueing_ms > 0.6 * cubic_ms, (name, queueing_ms, cubic_ms)
        assert utilization >= 0.7, (name, utilization)


@pytest.mark.timeout(900)
def test_pcc_keeps_the_link_busy_under_random_loss(tmp_path: Path) -> None:
    pcc = ready(["pcc-allegro", "pcc-vivace"])
    if not pcc:
        pytest.skip("no PCC scheme is ready")
    # Vivace once climbed back from a dip at 0.06 Mbit/s a decision here, its γ drowned in the
    # probes' chance losses, and one emulated run held 57% of the link; scored at their pooled loss
    # rate (crates/cc/src/vivace.rs, deviation 8) its runs give 87–89% (emulator, 4 runs;
    # simulator, 20 seeds: 86–89%; these 4 seeds: 89–90%, Allegro 86–96%, Cubic 33–36%).
    perf = simulated(tmp_path, [*pcc, "cubic-user"], *one_bdp_options(), "--uplink-loss", "0.01", runtime_s=30)
    cubic = mean_utilization(perf, "cubic-user")
    # Mathis et al. (CCR 1997): a loss-driven window sustains 1.22·MSS/(RTT·√p) = 3.6 Mbit/s here.
    assert cubic < 0.6, f"Cubic should collapse under 1% loss: {cubic:.1%}"
    for name in pcc:
        assert mean_utilization(perf, name) >= 0.8, (name, perf[name]["runs"])


@pytest.mark.skipif(not VERIZON_LTE.with_suffix(".up").exists(),
                    reason=f"no {VERIZON_LTE}.up: ../shared/tools/mahimahi-anchor install brings Mahimahi's traces")
def test_sprout_keeps_delay_low_on_a_cellular_trace(tmp_path: Path) -> None:
    if not ready(["sprout"]):
        pytest.skip("sprout is not ready")
    trace = ["--uplink-trace", f"{VERIZON_LTE}.up", "--downlink-trace", f"{VERIZON_LTE}.down",
             "--delay", str(DELAY_MS), "--uplink-queue-packets", "1000"]
    perf = campaign(tmp_path, ["sprout", "cubic"], *trace, runtime_s=20)
    sprout_ms, cubic_ms = queueing_p95_ms(perf, "sprout"), queueing_p95_ms(perf, "cubic")
    assert sprout_ms < cubic_ms / 3, f"Sprout p95 queueing {sprout_ms:.0f} ms vs Cubic {cubic_ms:.0f} ms"


FAIR = ["copa", "cubic-user", "reno-user", "pcc-vivace"]
"""Schemes whose papers claim intra-protocol fairness: Copa §5 (Jain's index of competing Copa
flows), Cubic RFC 9438 §1 (RTT-fair among Cubic flows), Reno (AIMD, Chiu & Jain 1989), Vivace §5
(fast convergence to the fair share)."""
FAIR_JAIN = 0.9
"""At least a 2:1 split of the link between the two flows."""


def jain_from(run_dir: Path, from_s: float) -> float:
    """Jain's index of the flows' delivered bytes from `from_s` seconds into the run to its end."""
    table = pq.read_table(run_dir / "records.parquet", columns=["flow", "direction", "size_bytes", "recv_us"])
    late = pc.and_(pc.equal(table["direction"], "data"), pc.greater_equal(table["recv_us"], int(from_s * 1e6)))
    table = table.filter(late)
    shares = [pc.sum(table.filter(pc.equal(table["flow"], flow))["size_bytes"]).as_py() or 0
              for flow in pc.unique(table["flow"]).to_pylist()]
    assert len(shares) == 2, f"{run_dir}: expected two flows delivering, got {len(shares)}"
    return sum(shares) ** 2 / (len(shares) * sum(s * s for s in shares))


@pytest.mark.timeout(600)
def test_two_flows_of_a_fair_scheme_share_the_link(tmp_path: Path) -> None:
    names = ready(FAIR)
    simulated(tmp_path, names, *one_bdp_options(2 * BDP_BYTES), "--flows", "2", "--interval", "0", runtime_s=30)
    index = {(name, k): jain_from(tmp_path / name / f"run{k}", 15)
             for name in names for k in range(1, SIMULATED_RUNS + 1)}
    assert all(j >= FAIR_JAIN for j in index.values()), index


NEWCOMER_RUNS = 10
"""Seeds of the newcomer check: its runs are 40 s, the split varies from seed to seed, and ten take
a few seconds."""
NEWCOMER_JAIN = 0.95
"""Vivace §5 (fast convergence): a flow joining an established one reaches its share. Jain's index
over the newcomer's last 20 s, mean of the seeds. The authors' PCC-Uspace sender, two flows over our
emulator on this path: 0.926-0.999 (mean 0.980, 11 runs). Ours (20 simulated seeds): 0.988-1.000
(mean 0.997); with this crate's probing and RTT-gradient filter before issue 15's last change,
0.778-1.000 (mean 0.930; 0.929 over this test's 10 seeds), the newcomer's share random-walking."""


@pytest.mark.timeout(300)
def test_a_vivace_newcomer_converges_to_its_share(tmp_path: Path) -> None:
    if not ready(["pcc-vivace"]):
        pytest.skip("pcc-vivace is not ready")
    campaign(tmp_path, ["pcc-vivace"], *one_bdp_options(), "--flows", "2", "--interval", "10", runtime_s=40,
             runs=NEWCOMER_RUNS, engine=SIMULATOR)
    index = [jain_from(tmp_path / "pcc-vivace" / f"run{k}", 20) for k in range(1, NEWCOMER_RUNS + 1)]
    assert sum(index) / len(index) >= NEWCOMER_JAIN, index


TAO_RATE_MBPS = 40
TAO_DELAY_MS = 75
"""Inside tao-100x's prior (data/tao/tao-100x.toml: 3.16-316 Mbit/s, 150 ms RTT, an infinite buffer),
and not a network its training evaluates: the prior's corners (3.16 and 316 Mbit/s) are the only
rates it draws twice, the rest log-uniformly at random (pantheon.remy.networks)."""
TAO_RIVALS = ["cubic-user", "copa", "vegas-user"]
TAO_MARGIN = 0.10
"""How far ahead on both axes a comparator must be to count: Tao is "near" the frontier when no
comparator gets 1.1 times its throughput at its mean delay ÷ 1.1 (bench/support/frontier.py). 10%
is the simulator's agreement with the emulator (bench/sim_fidelity.py's bound), so a run's luck on
the emulator does not decide it. The built-in tree on this path, one 10 s flow (docs/remy.md,
"Evaluation"): simulated, 4 seeds, 35.8 Mbit/s at a mean one-way delay of 98.6 ms; Cubic 36.2 at
102.6, Copa 33.1 at 99.2, Vegas 3.9 at 75.6 (its window stops growing early on a 150 ms path).
Over the emulator, one run each: Tao 17.3 at 76.3 (its pacing rule 60 holds the flow at 18.5
Mbit/s, a fixed point the simulated flow never enters: docs/remy.md says why), Cubic 36.2 at
102.6, Copa 31.6 at 97.9, Vegas 4.0 at 75.9. Either way no comparator is ahead on both axes. The
published 100x tree (the learnability paper's, via bench/tao.py's --tree): 36.4 at 96.0 emulated,
36.4-36.7 at 94-95 simulated."""


@pytest.mark.timeout(300)
def test_tao_is_near_the_frontier_inside_its_prior(tmp_path: Path) -> None:
    names = ready(["tao", *TAO_RIVALS])
    assert "tao" in names, "tao is not ready: ./setup.sh builds data/tao/tao-100x.pb into pantheon-udp"
    options = ["--delay", str(TAO_DELAY_MS), "--uplink-rate", str(TAO_RATE_MBPS), "--downlink-rate", str(TAO_RATE_MBPS)]
    perf = campaign(tmp_path, names, *options, runtime_s=10)
    means = {name: summary_of(perf, name)["all"] for name in names}
    points = {name: Point(m["throughput_mbps"]["mean"], m["delay_mean_ms"]["mean"], m["delay_p95_ms"]["mean"])
              for name, m in means.items()}
    tao = points.pop("tao")
    assert not dominators(tao, points, TAO_MARGIN), (tao, points)

