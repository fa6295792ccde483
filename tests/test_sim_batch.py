"""The batch API's flows of finite transfers and extra delays (`pantheon.sim.batch`, docs/sim.md
"batch"), over the real pantheon-sim.

What a researcher checks by hand:
- alone on an empty 12 Mbit/s path, 10 ms away plus 5 ms of the flow's own, a transfer sent in one
  window completes within a millisecond of its ideal FCT (analysis/transfers.py's, pantheon-udp's
  transport: no handshake, 15 ms one way plus its 1500-byte datagrams at 1 ms each): the link sends
  its first datagram at its next delivery opportunity, up to 1 ms sooner than the ideal's full
  1 ms of serialisation; one too large for the rest of the run has no end (None);
- a flow of transfers in a batch job is the flows file's flow: `pantheon-sim run --flows-file` gives
  the same transfer end times (transfers.parquet) and the same metrics;
- a bad transfer or extra delay is its job's one-line error, and the other jobs run;
- jobs without transfers or extra delays have the lines they always had.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pantheon.analysis.transfers import DATAGRAMS, ideal_fct_ms, read_transfers
from pantheon.sim.batch import FlowSpec, Job, TransferSpec, link_options, run_batch

REPO = Path(__file__).resolve().parent.parent
SIM = REPO / "target" / "release" / "pantheon-sim"

pytestmark = pytest.mark.skipif(not SIM.is_file(), reason=f"{SIM} is not built (cargo build --release --workspace)")


def test_transfers_alone_on_an_empty_path_complete_near_their_ideal_fct() -> None:
    rate_mbps, delay_ms, extra_ms = 12.0, 10.0, 5.0
    # A window of 100 datagrams sends each transfer (at most 69 datagrams) at once; they start
    # 300 ms apart, each done well before the next. The last needs 6.8 s, the run has 0.5 s left.
    sizes = (1, 14_640, 100_000, 10_000_000)
    transfers = tuple(TransferSpec(0.1 + 0.3 * i, size) for i, size in enumerate(sizes))
    flow = FlowSpec("fixed:cwnd_packets=100", transfers=transfers, extra_delay_ms=extra_ms)
    [result] = run_batch([Job([flow], link_options(rate_mbps=rate_mbps, delay_ms=delay_ms), runtime_s=1.5)])
    assert result.ok, result.error
    done = result.flows[0].transfers
    assert done is not None
    assert [(t.size_bytes, t.start_us) for t in done] == [(s, round(t.start_s * 1e6)) for s, t in zip(sizes, transfers)]
    for t in done[:3]:
        ideal = ideal_fct_ms(t.size_bytes, DATAGRAMS, rate_mbps, delay_ms + extra_ms)
        assert t.fct_ms is not None and ideal - 1.0 <= t.fct_ms <= ideal, (t, ideal)
    # 1 byte: 15 ms + 1 ms; 100 000 bytes: 69 datagrams, 15 ms + 69 ms.
    assert [ideal_fct_ms(s, DATAGRAMS, rate_mbps, delay_ms + extra_ms) for s in sizes[:3]] == [16.0, 25.0, 84.0]
    assert done[3].end_us is None and done[3].fct_ms is None
    # The flow's metrics are over all its transfers' datagrams; the extra delay is in every one.
    metrics = result.flows[0]
    assert metrics.delivered_packets > 1 + 10 + 69 and metrics.delay_mean_ms is not None
    assert metrics.delay_mean_ms >= delay_ms + extra_ms


def test_a_flow_of_transfers_in_a_batch_is_the_flows_files(tmp_path: Path) -> None:
    # A bulk Cubic flow 20 ms further away against a flow of Copa transfers that overlap, through a
    # DropTail buffer of 30 kB: queueing and losses, so that any difference in the scenario shows.
    path = link_options(rate_mbps=12, delay_ms=10, queue_bytes=30_000)
    starts_sizes = [(0.2, 150_000), (0.25, 2_000), (0.9, 400_000), (1.5, 30_000), (2.9, 1_000_000)]
    flows = [FlowSpec("cubic", extra_delay_ms=20),
             FlowSpec("copa:delta=0.5", transfers=tuple(TransferSpec(s, b) for s, b in starts_sizes), extra_delay_ms=2.5)]
    runtime_s, seed = 3.0, 7
    [result] = run_batch([Job(flows, path, runtime_s=runtime_s, seed=seed)])
    assert result.ok, result.error
    rows = ["flow,cc,start_s,duration_s,bytes,extra_delay_ms", "0,cubic,0,,,20"]
    rows += [f"1,copa:delta=0.5,{s},,{b},2.5" for s, b in starts_sizes]
    (tmp_path / "flows.csv").write_text("\n".join(rows) + "\n")
    run = subprocess.run([str(SIM), "run", "--out", str(tmp_path / "run"), "--flows-file", str(tmp_path / "flows.csv"),
                          "--runtime-s", str(runtime_s), "--seed", str(seed), *path],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    on_file = read_transfers(tmp_path / "run" / "transfers.parquet")
    assert list(on_file) == [1]
    batch = result.flows[1].transfers
    assert batch is not None and result.flows[0].transfers is None
    ends = [None if t.end_us is None else float(t.end_us) for t in batch]
    assert ends == [None if e != e else float(e) for e in on_file[1].end_us]
    assert [t.start_us for t in batch] == list(on_file[1].start_us)
    assert ends[0] is not None and ends[-1] is None, "some complete, the last 1 MB not by the end"
    summary = json.loads(run.stdout)
    for printed, metrics in zip(summary["flows"], result.flows):
        assert printed["throughput_mbps"] == metrics.throughput_mbps
        assert printed["delivered_packets"] == metrics.delivered_packets
        assert printed["delay_p95_ms"] == metrics.delay_p95_ms


def test_a_bad_transfer_is_its_jobs_one_line_error_and_the_others_run() -> None:
    good = Job([FlowSpec("cubic"), FlowSpec("cubic", transfers=(TransferSpec(0.1, 5_000),))], runtime_s=1)
    bad = [FlowSpec("cubic", transfers=(TransferSpec(0.1, 5_000), TransferSpec(0.2, 0))),
           FlowSpec("cubic", transfers=(TransferSpec(-0.5, 5_000),)),
           FlowSpec("cubic", transfers=(TransferSpec(1.0, 5_000),)),
           FlowSpec("cubic", duration_s=0.5, transfers=(TransferSpec(0.1, 5_000),)),
           FlowSpec("cubic", start_s=0.1, transfers=(TransferSpec(0.1, 5_000),)),
           FlowSpec("cubic", extra_delay_ms=-1)]
    results = run_batch([good, *(Job([flow], runtime_s=1) for flow in bad), good], jobs_parallel=2)
    assert [r.ok for r in results] == [True] + [False] * len(bad) + [True]
    takes_no = ("flow 1: a flow with transfers takes no start_s or duration_s: each transfer starts at its own "
                "start_s and runs until its bytes are acknowledged or the run ends")
    assert [r.error for r in results[1:-1]] == [
        "flow 1, transfer 2: bytes must be a whole number > 0, got 0",
        "flow 1, transfer 1: expected a start in seconds ≥ 0, got '-0.5'",
        "flow 1, transfer 1: a start at 1 s is not before the run's end at 1 s: start it earlier or lengthen the run",
        takes_no,
        takes_no,
        "flow 1: extra_delay_ms: expected an extra delay in ms from 0 to 3600000 (one hour), got '-1'",
    ]
    assert results[0].flows == results[-1].flows
    assert results[0].flows[0].transfers is None
    [transfer] = results[0].flows[1].transfers or []
    assert transfer.size_bytes == 5_000 and transfer.start_us == 100_000 and transfer.end_us is not None


def test_jobs_without_transfers_have_the_lines_they_always_had() -> None:
    path = link_options(rate_mbps=12, delay_ms=20)
    job = Job([FlowSpec("cubic"), FlowSpec("copa:delta=0.5", start_s=1, duration_s=3)], path, runtime_s=5, seed=2)
    assert job.line(4) == (
        '{"id": 4, "flows": [{"cc": "cubic", "start_s": 0.0}, {"cc": "copa:delta=0.5", "start_s": 1, "duration_s": 3}], '
        '"path": ["--delay", "20", "--uplink-rate", "12", "--downlink-rate", "12"], "runtime_s": 5, "seed": 2}')
    flows = [FlowSpec("cubic", extra_delay_ms=30), FlowSpec("bbr", transfers=(TransferSpec(0.5, 1000),))]
    assert json.loads(Job(flows).line(0))["flows"] == [
        {"cc": "cubic", "start_s": 0.0, "extra_delay_ms": 30},
        {"cc": "bbr", "transfers": [{"start_s": 0.5, "bytes": 1000}]},
    ]
