"""`pantheon-sim run --topology` on the shipped topologies (data/topologies/, docs/sim.md "Topologies").

What a researcher checks by hand, from records.parquet (the tunnel's times, end to end):
- the dumbbell: each flow's least one-way delay is its access link's plus the bottleneck's
  (5 + 10, 20 + 10, 40 + 10 ms), the three together fill the 24 Mbit/s bottleneck and no more,
  and the shorter the base RTT the larger the share (RTT unfairness);
- the parking lot: the long flow's base RTT is the sum of the three hops' delays both ways (60 ms),
  a cross flow's one hop's (20 ms); no hop carries more than its 12 Mbit/s, and the long flow gets
  less than every cross flow (Cubic, an AIMD controller);
- the moving bottleneck: the flow's throughput follows the smaller of the two links' rates, the
  first link's 8 Mbit/s before the step at 5 s, the second link's 4 Mbit/s after it;
- a topology of one link is the path options it holds, byte for byte;
- mistakes (a path option beside --topology, a flow without a route, a bad link) are one line, exit 2.
Rates inside the tunnel are the path's times 1464/1500 (the tunnel's 36 bytes per datagram).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parent.parent
SIM = REPO / "target" / "release" / "pantheon-sim"
TOPOLOGIES = REPO / "data" / "topologies"
INSIDE = 1464 / 1500
"""A path's rate as the tunnel's datagrams carry it."""

pytestmark = pytest.mark.skipif(not SIM.is_file(), reason=f"{SIM} is not built (cargo build --release --workspace)")


def simulate(out: Path, *args: str) -> dict:
    done = subprocess.run([str(SIM), "run", "--out", str(out), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class Records:
    """One run's records.parquet as arrays."""

    def __init__(self, run_dir: Path) -> None:
        table = pq.read_table(run_dir / "records.parquet").to_pydict()
        self.flow = np.array(table["flow"])
        self.data = np.array(table["direction"]) == "data"
        self.size = np.array(table["size_bytes"], dtype=float)
        self.send_us = np.array(table["send_us"], dtype=float)
        self.recv_us = np.array([np.nan if t is None else t for t in table["recv_us"]], dtype=float)

    def least_one_way_ms(self, flow: int, data: bool) -> float:
        mine = (self.flow == flow) & (self.data == data) & ~np.isnan(self.recv_us)
        return float(np.min(self.recv_us[mine] - self.send_us[mine])) / 1e3

    def base_rtt_ms(self, flow: int) -> float:
        return self.least_one_way_ms(flow, True) + self.least_one_way_ms(flow, False)

    def rate_mbps(self, flow: int, from_s: float, to_s: float) -> float:
        """Data delivered to the receiver in [from_s, to_s), Mbit/s."""
        arrived = (self.flow == flow) & self.data & (self.recv_us >= from_s * 1e6) & (self.recv_us < to_s * 1e6)
        return float(self.size[arrived].sum()) * 8 / ((to_s - from_s) * 1e6)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, Records]]:
    root = tmp_path_factory.mktemp("topologies")
    flows = {"dumbbell": 3, "parking-lot": 4, "parking-lot-2": 3, "moving-bottleneck": 1}
    out = {}
    for name, count in flows.items():
        # Flows started together: the first datagram of each meets empty hops (its base RTT is the
        # propagation's), where flows started as late as the hosts start them may meet a rival's
        # first window queued (crates/sim/src/host.rs).
        args = ["--runtime-s", "10", "--seed", "1", "--exact-starts", "--topology", str(TOPOLOGIES / f"{name}.toml")]
        summary = simulate(root / name, *args, *(["--flow", "cubic"] * count))
        out[name] = (summary, Records(root / name))
    return out


def test_every_shipped_topology_is_run(runs: dict) -> None:
    assert sorted(p.stem for p in TOPOLOGIES.glob("*.toml")) == sorted(runs)
    for summary, _ in runs.values():
        assert all(flow["delivered_packets"] > 0 for flow in summary["flows"])


def test_dumbbell_flows_see_their_access_delays_and_share_the_bottleneck_by_rtt(runs: dict) -> None:
    summary, records = runs["dumbbell"]
    for flow, access_ms in enumerate([5, 20, 40]):
        # Data may find the bottleneck's queue never empty; its acknowledgements cross an empty
        # 24 Mbit/s downlink, waiting at most one delivery opportunity (0.5 ms) and the hosts.
        assert records.least_one_way_ms(flow, data=True) >= access_ms + 10
        assert access_ms + 10 <= records.least_one_way_ms(flow, data=False) <= access_ms + 10 + 0.6
    rates = [f["throughput_mbps"] for f in summary["flows"]]
    assert 0.9 * 24 * INSIDE < sum(rates) <= 24 * INSIDE
    assert rates[0] > rates[1] > rates[2], rates


def test_parking_lot_long_flow_crosses_every_hop_and_gets_least(runs: dict) -> None:
    summary, records = runs["parking-lot"]
    # Three hops of 10 ms each way; each link and direction makes a datagram wait at most a 1 ms
    # opportunity (one that comes from the previous link 20 µs after one, about that: the links
    # share a clock), and the acknowledgement a host's wake-up or two.
    assert 60 <= records.base_rtt_ms(0) <= 60 + 6 * 1.02 + 1
    for cross in (1, 2, 3):
        assert 20 <= records.base_rtt_ms(cross) <= 20 + 1 + 1
    rates = [f["throughput_mbps"] for f in summary["flows"]]
    for cross in (1, 2, 3):
        # The hop carries the long flow and its cross flow: at most its 12 Mbit/s, and busy.
        assert 0.9 * 12 * INSIDE < rates[0] + rates[cross] <= 12 * INSIDE
        assert rates[0] < rates[cross], rates


def test_moving_bottleneck_throughput_follows_the_smaller_rate(runs: dict) -> None:
    _, records = runs["moving-bottleneck"]
    # Before the step at 5 s the first link's 8 Mbit/s (the second runs at 12); after it the
    # second's 4 (the first runs at 16). Cubic's start and the queue the step strands are left out.
    before = records.rate_mbps(0, 1.5, 4.9)
    after = records.rate_mbps(0, 6.5, 10.0)
    assert 0.95 * 8 * INSIDE < before <= 8 * INSIDE * 1.01, before
    assert 0.95 * 4 * INSIDE < after <= 4 * INSIDE * 1.01, after


def test_one_link_topology_is_its_path_byte_for_byte(tmp_path: Path) -> None:
    path = ["--delay", "20", "--uplink-rate", "12", "--downlink-rate", "12", "--uplink-queue", "droptail",
            "--uplink-queue-bytes", "60000", "--uplink-loss", "0.001"]
    topology = tmp_path / "one.toml"
    topology.write_text(f'routes = [["path"], ["path"]]\n[[link]]\nname = "path"\npath = {json.dumps(path)}\n')
    flows = ["--flow", "cubic", "--flow", "copa:delta=0.5@1", "--runtime-s", "5", "--seed", "4"]
    plain = simulate(tmp_path / "plain", *flows, *path)
    routed = simulate(tmp_path / "routed", *flows, "--topology", str(topology))
    plain.pop("wall_s")
    routed.pop("wall_s")
    assert routed == plain
    for name in ("records.parquet", "datalink.log", "acklink.log"):
        assert (tmp_path / "routed" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes(), name


@pytest.mark.parametrize(("args", "message"), [
    (["--topology", str(TOPOLOGIES / "parking-lot.toml"), "--delay", "5"],
     "the argument '--topology <FILE.toml>' cannot be used with '--delay <MS>'"),
    (["--topology", str(TOPOLOGIES / "moving-bottleneck.toml"), "--flow", "cubic"],
     "2 flows, but the topology has routes for 1: give each flow a route"),
])
def test_mistakes_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run([str(SIM), "run", "--out", str(tmp_path / "run"), "--flow", "cubic", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


def test_a_bad_link_names_the_file_and_the_link(tmp_path: Path) -> None:
    topology = tmp_path / "bad.toml"
    topology.write_text('routes = [["a"]]\n[[link]]\nname = "a"\npath = ["--uplink-rate", "0"]\n')
    done = subprocess.run([str(SIM), "run", "--out", str(tmp_path / "run"), "--flow", "cubic", "--topology", str(topology)],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (
        2, f"pantheon-sim: --topology {topology}: link a: --uplink-rate: rate must be positive, got '0'\n")


def test_a_batch_job_takes_a_topology_whose_link_names_a_model_file() -> None:
    """The batch API's `topology` (pantheon.sim.batch.Job.topology), with a trace that travels as a
    model file (sim/runner.py): 12 Mbit/s (one 1500-byte opportunity a millisecond), then 6."""
    from pantheon.sim.batch import FlowSpec, Job
    from pantheon.sim.runner import model_file, run_jobs

    topology = {"routes": [["first", "second"]], "link": [
        {"name": "first", "path": ["--delay", "5", "--uplink-trace", model_file(0), "--downlink-rate", "12"]},
        {"name": "second", "path": ["--delay", "5", "--uplink-rate", "6", "--downlink-rate", "6"]}]}
    [result] = run_jobs([Job([FlowSpec("cubic")], runtime_s=3.0, topology=topology)], {0: b"1\n"})
    assert result.ok, result.error
    assert 4.0 < result.flows[0].throughput_mbps <= 6.05
    assert result.flows[0].delay_p95_ms >= 20.0
