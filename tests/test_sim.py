"""`pantheon sim` and the batch API over the real pantheon-sim (crates/sim).

Path: 12 Mbit/s each way, 20 ms one-way delay each way, a DropTail buffer of 60 000 bytes on the
data direction (one bandwidth-delay product: 12 Mbit/s x 40 ms). What a researcher checks by hand:
- every data packet is a 1464-byte datagram and every delivered one is acknowledged by one 60-byte
  datagram (pantheon-udp's wire format);
- no packet is faster than the propagation delay (20 ms) nor slower than the delay plus a full
  buffer (60 000 bytes at 12 Mbit/s = 40 ms) plus one 1500-byte delivery opportunity (1 ms);
- Cubic fills the buffer and the link (throughput near 12 Mbit/s, 95th-percentile delay near
  20 + 40 ms) while Copa keeps less queued (its paper, NSDI 2018 §2: about 1/delta packets);
- the simulator's own per-flow metrics equal `pantheon analyze`'s, computed from the records;
- the records.parquet, datalink.log and acklink.log pantheon-sim writes are those the harness's
  record merge (harness/records.py) builds from its text logs: same rows and values, same bytes;
- the data dir is the harness's, says it was simulated, and the report says so.
Also: determinism (byte-identical records and logs for the same command), seeds per repetition,
bad path options with the emulator's message, unknown and unsimulable schemes skipped with one
line each, Ctrl-C and SIGKILL leave no process behind, and the batch API's good and bad jobs.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pantheon import plan as plans
from pantheon import schemes
from pantheon.harness import records as records_merge
from pantheon.sim import simulable
from pantheon.sim.batch import FlowSpec, Job, link_options, run_batch

REPO = Path(__file__).resolve().parent.parent
SIM = REPO / "target" / "release" / "pantheon-sim"
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
RATE_MBPS = 12
DELAY_MS = 20
QUEUE_BYTES = 60_000
PATH = ["--delay", str(DELAY_MS), "--uplink-rate", str(RATE_MBPS), "--downlink-rate", str(RATE_MBPS),
        "--uplink-queue", "droptail", "--uplink-queue-bytes", str(QUEUE_BYTES)]
QUEUE_MS = QUEUE_BYTES * 8 / (RATE_MBPS * 1e3)
OPPORTUNITY_MS = 1500 * 8 / (RATE_MBPS * 1e3)
PACKET_BYTES = 1464
ACK_BYTES = 60
RUNTIME_S = 5

pytestmark = pytest.mark.skipif(not SIM.is_file(), reason=f"{SIM} is not built (cargo build --release --workspace)")


def pantheon(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(PANTHEON), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    data = tmp_path_factory.mktemp("sim") / "data"
    done = pantheon("sim", "--schemes", "copa,cubic-user", "--runtime", str(RUNTIME_S), "--data-dir", str(data),
                    "--quiet", *PATH)
    return data, done


def records(run_dir: Path) -> dict[str, list]:
    return pq.read_table(run_dir / "records.parquet").to_pydict()


def test_campaign_writes_the_harness_data_dir(campaign: tuple[Path, subprocess.CompletedProcess]) -> None:
    data, done = campaign
    assert done.returncode == 0, done.stderr
    meta = json.loads((data / "metadata.json").read_text())
    assert meta["simulated"] is True
    assert meta["simulator"]["program"] == "pantheon-sim" and meta["simulator"]["version"]
    assert meta["simulator"]["cc"] == {"copa": "copa:delta=0.5", "cubic-user": "cubic"}
    assert meta["emulator_options"] == [*PATH, "--seed", "0"]
    assert [t["label"] for t in meta["trials"]] == ["copa", "cubic-user"]
    for scheme in ("copa", "cubic-user"):
        run_dir = data / scheme / "run1"
        run = json.loads((run_dir / "run.json").read_text())
        assert run["ok"] and run["t0_epoch_s"] == 0.0 and run["simulated"]
        assert run["flows"] == [{"scheme": scheme, "start_s": 0.0, "duration_s": float(RUNTIME_S), "ecn": False,
                                 "transfers": [], "extra_delay_ms": 0.0, "cc": None, "role": "bulk"}]
        for name in ("records.parquet", "datalink.log", "acklink.log", "sim.json", "throughput.png", "delay.png"):
            assert (run_dir / name).is_file(), name
        assert not list(run_dir.glob("flow*.log")) and not (run_dir / "uplink.log").exists(), "text logs on request only"
    for name in ("perf.json", "report.html", "report.pdf"):
        assert (data / name).is_file(), name
    assert "simulated by pantheon-sim" in (data / "report.html").read_text()


def test_packets_cross_the_path_as_the_model_says(campaign: tuple[Path, subprocess.CompletedProcess]) -> None:
    data, _ = campaign
    for scheme in ("copa", "cubic-user"):
        r = records(data / scheme / "run1")
        sent = [s for d, s in zip(r["direction"], r["size_bytes"]) if d == "data"]
        acks = [s for d, s in zip(r["direction"], r["size_bytes"]) if d == "ack"]
        delays_ms = [(recv - send) / 1e3 for d, send, recv in zip(r["direction"], r["send_us"], r["recv_us"])
                     if d == "data" and recv is not None]
        assert set(sent) == {PACKET_BYTES} and set(acks) == {ACK_BYTES}
        assert len(acks) == len(delays_ms), "one acknowledgement per delivered datagram"
        assert len(sent) > 2_000, "5 s at about 12 Mbit/s is about 5 000 datagrams"
        assert min(delays_ms) >= DELAY_MS
        assert max(delays_ms) <= DELAY_MS + QUEUE_MS + OPPORTUNITY_MS
        assert all(s >= 0 and s < RUNTIME_S * 1e6 for s in r["send_us"])


def test_metrics_agree_with_the_analysis(campaign: tuple[Path, subprocess.CompletedProcess]) -> None:
    data, _ = campaign
    perf = json.loads((data / "perf.json").read_text())
    found = {}
    for scheme in ("copa", "cubic-user"):
        sim = json.loads((data / scheme / "run1" / "sim.json").read_text())["flows"][0]
        ours = perf["schemes"][scheme]["summary"]["flows"]["1"]
        assert sim["throughput_mbps"] == pytest.approx(ours["throughput_mbps"]["mean"], rel=1e-9)
        assert sim["delay_p95_ms"] == pytest.approx(ours["delay_p95_ms"]["mean"], rel=1e-9)
        assert sim["loss_rate"] == pytest.approx(ours["loss_rate"]["mean"], rel=1e-9, abs=1e-12)
        found[scheme] = sim
    cubic, copa = found["cubic-user"], found["copa"]
    assert 10.5 <= cubic["throughput_mbps"] <= RATE_MBPS
    assert cubic["delay_p95_ms"] >= DELAY_MS + 0.75 * QUEUE_MS, "Cubic fills the buffer"
    assert copa["delay_p95_ms"] < cubic["delay_p95_ms"], "Copa keeps less queued than Cubic"


def test_records_are_those_the_harness_merges_from_the_text_logs(tmp_path: Path) -> None:
    rust, python = tmp_path / "rust", tmp_path / "python"
    flows = ["--flow", "cubic", "--flow", "copa@0.5+1.5"]
    done = subprocess.run([str(SIM), "run", "--out", str(rust), "--text-logs", "--seed", "3", "--runtime-s", "2",
                           *flows, *PATH, "--uplink-loss", "0.02"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    python.mkdir()
    for log in [*rust.glob("flow*.log"), rust / "uplink.log", rust / "downlink.log"]:
        (python / log.name).write_bytes(log.read_bytes())
    records_merge.merge_run(python, plans.uniform("cubic-user", 2, 0.5, 2.0), 0.0)
    ours, theirs = pq.read_table(rust / "records.parquet"), pq.read_table(python / "records.parquet")
    assert ours.schema.equals(theirs.schema) and ours.num_rows == theirs.num_rows > 1_000
    assert ours.equals(theirs), "same rows, same columns, same values"
    assert ours.column("recv_us").null_count > 0, "losses show as nulls"
    for name in ("datalink.log", "acklink.log"):
        assert (rust / name).read_bytes() == (python / name).read_bytes(), name


PEAK_RSS = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs a command and writes its peak RSS (kB) to a file. Through this small process, not from the
test's: Linux keeps a process's peak RSS across exec, so a child forked from a pytest process of
1.4 GB reports at least that (as one CI run did), whatever it then uses itself."""


def test_a_fast_run_holds_its_datagrams_in_flight_not_every_record(tmp_path: Path) -> None:
    # Issue 36 §4: 30 s of Cubic at 1 Gbit/s, 2.5 M datagrams each way. Holding every record (and
    # delivery opportunity) until the end peaked at 300 MB of RSS, and grew 10 MB a simulated
    # second; spilled as they become final (crates/sim/src/records.rs), about 100 MB at any length:
    # records.parquet's row group of 1 Mi rows is the most held at once.
    out = tmp_path / "run"
    args = [str(SIM), "run", "--out", str(out), "--runtime-s", "30", "--flow", "cubic", "--delay", "20",
            "--uplink-rate", "1000", "--downlink-rate", "1000", "--uplink-queue", "droptail",
            "--uplink-queue-bytes", "5000000"]
    with (tmp_path / "stdout").open("wb") as stdout, (tmp_path / "stderr").open("wb") as stderr:
        child = subprocess.run([sys.executable, "-c", PEAK_RSS, str(tmp_path / "peak_kb"), *args], stdout=stdout,
                               stderr=stderr, timeout=120)
    assert child.returncode == 0, (tmp_path / "stderr").read_text()
    peak_mb = int((tmp_path / "peak_kb").read_text()) / 1024
    assert peak_mb < 160, f"pantheon-sim run peaked at {peak_mb:.0f} MB"
    sent = json.loads((tmp_path / "stdout").read_text())["flows"][0]["sent_packets"]
    parquet = pq.ParquetFile(out / "records.parquet")
    assert sent > 2_000_000 and parquet.metadata.num_row_groups == -(-parquet.metadata.num_rows // 2**20)
    table = pq.read_table(out / "records.parquet", columns=["direction", "uid"])
    data = table.filter(pc.equal(table.column("direction"), "data"))
    assert data.num_rows == sent and (data.column("uid").to_numpy() == np.arange(sent)).all(), "every datagram, in order"
    assert sorted(p.name for p in out.iterdir()) == ["acklink.log", "datalink.log", "records.parquet"], "no spill left"


def test_same_command_same_bytes_and_seeds_per_repetition(tmp_path: Path) -> None:
    lossy = [*PATH, "--uplink-loss", "0.02"]
    for name in ("a", "b"):
        done = pantheon("sim", "--schemes", "copa", "--runtime", "3", "--run-times", "2", "--seed", "7",
                        "--data-dir", str(tmp_path / name), "--no-analyze", "--quiet", "--text-logs", *lossy)
        assert done.returncode == 0, done.stderr
    for run in ("run1", "run2"):
        for name in ("records.parquet", "datalink.log", "acklink.log", "uplink.log", "flow0.sender.ingress.log"):
            assert (tmp_path / "a" / "copa" / run / name).read_bytes() == (tmp_path / "b" / "copa" / run / name).read_bytes(), name
    assert json.loads((tmp_path / "a" / "copa" / "run2" / "run.json").read_text())["seed"] == 8
    one, two = (records(tmp_path / "a" / "copa" / run) for run in ("run1", "run2"))
    lost = [sum(1 for d, rv in zip(r["direction"], r["recv_us"]) if d == "data" and rv is None) for r in (one, two)]
    assert one["recv_us"] != two["recv_us"] and all(n > 0 for n in lost), "run 2 has a seed, and losses, of its own"


@pytest.mark.parametrize("option", [["--uplink-rate", "abc"], ["--uplink-loss", "2"], ["--uplink-queue", "droptail"],
                                    # Issue 18: the OOM killer ended pantheon-sim ("exited with status -9").
                                    ["--uplink-trace", "/dev/zero"], ["--delay", "1e300"]])
def test_bad_path_option_gets_the_harness_message(tmp_path: Path, option: list[str]) -> None:
    sim = pantheon("sim", "--schemes", "copa", "--runtime", "1", "--data-dir", str(tmp_path / "s"), *option)
    assert sim.returncode == 2 and len(sim.stderr.splitlines()) == 1, sim.stderr
    assert not (tmp_path / "s").exists()
    if os.geteuid() == 0:
        harness = pantheon("test", "local", "--schemes", "copa", "--runtime", "1", "--data-dir", str(tmp_path / "h"), *option)
        assert sim.stderr == harness.stderr
    else:
        emulate = pantheon("emulate", *option, "--", "true")
        assert sim.stderr == emulate.stderr.replace("pantheon emulate: ", "pantheon: ")


def test_unknown_and_kernel_schemes_are_skipped_in_one_line(tmp_path: Path) -> None:
    done = pantheon("sim", "--schemes", "nosuch,cubic,copa", "--runtime", "2", "--data-dir", str(tmp_path), "--quiet",
                    "--no-analyze", *PATH)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0].startswith("pantheon: nosuch: unknown scheme (simulable schemes: ") and "copa" in lines[0]
    assert lines[1].startswith("pantheon: cubic: cannot be simulated (it runs kernel TCP); simulable schemes: ")
    assert "cubic-user" in lines[1] and "quic-cubic" not in lines[1]
    assert lines[-1] == "pantheon: not simulated: nosuch, cubic (see the lines at the start)"
    assert json.loads((tmp_path / "copa" / "run1" / "run.json").read_text())["ok"]
    assert not (tmp_path / "cubic").exists()


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    """Those of `pids` still running (a zombie has ended)."""
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupt_or_kill_leaves_nothing_running(tmp_path: Path, sig: signal.Signals) -> None:
    fast = ["--delay", "20", "--uplink-rate", "1000", "--downlink-rate", "1000", "--uplink-queue", "droptail",
            "--uplink-queue-bytes", "5000000"]
    proc = subprocess.Popen([str(PANTHEON), "sim", "--schemes", "copa,cubic-user", "--runtime", "600", "--run-times", "3",
                             "--jobs", "2", "--data-dir", str(tmp_path), "--no-analyze", *fast],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while len(family := _descendants(proc.pid)) < 4 and time.monotonic() < deadline:  # 2 workers, 2 simulators
        time.sleep(0.05)
    assert len(family) >= 4, "the campaign did not start its workers and simulators"
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=10)
    deadline = time.monotonic() + 5
    while _alive(family) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(family)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "interrupted" in stderr
        runs = sorted(p.parent.name + "/" + p.name for p in tmp_path.glob("*/run*"))
        assert runs == ["copa/run1", "cubic-user/run1"], "runs not yet started never start"
        for run in runs:
            assert json.loads((tmp_path / run / "run.json").read_text())["failures"] == ["interrupted (Ctrl-C)"]


def test_batch_good_and_bad_jobs(tmp_path: Path) -> None:
    path = link_options(rate_mbps=RATE_MBPS, delay_ms=DELAY_MS, queue_bytes=QUEUE_BYTES)
    good = Job([FlowSpec("cubic")], path, runtime_s=RUNTIME_S)
    two = Job([FlowSpec("copa:delta=0.5"), FlowSpec("cubic", start_s=1, duration_s=3)], path, runtime_s=RUNTIME_S)
    bad_cc = Job([FlowSpec("nosuch")], path, runtime_s=1)
    bad_path = Job([FlowSpec("cubic")], ["--uplink-loss", "2"], runtime_s=1)
    results = run_batch([good, bad_cc, two, bad_path, good], jobs_parallel=2)
    assert [r.ok for r in results] == [True, False, True, False, True]
    assert "nosuch" in results[1].error
    assert results[3].error == "--uplink-loss: loss probability must be in [0, 1], got '2'"
    cubic = results[0].flows[0]
    assert results[4].flows == results[0].flows, "the same job gives the same metrics"
    assert 10.5 <= cubic.throughput_mbps <= RATE_MBPS
    assert cubic.delivered_packets <= cubic.sent_packets
    assert cubic.loss_rate == pytest.approx(1 - cubic.delivered_packets / cubic.sent_packets)
    assert DELAY_MS <= cubic.delay_mean_ms <= cubic.delay_p95_ms <= DELAY_MS + QUEUE_MS + OPPORTUNITY_MS
    assert len(results[2].flows) == 2 and results[0].events > 0
    # The batch's metrics are the `pantheon sim` run's: the same simulation, no files.
    done = pantheon("sim", "--schemes", "cubic-user", "--runtime", str(RUNTIME_S), "--data-dir", str(tmp_path),
                    "--no-analyze", "--quiet", *path)
    assert done.returncode == 0, done.stderr
    run = json.loads((tmp_path / "cubic-user" / "run1" / "sim.json").read_text())
    assert run["flows"][0]["throughput_mbps"] == cubic.throughput_mbps
    assert run["flows"][0]["sent_packets"] == cubic.sent_packets


def test_help_lists_sim() -> None:
    done = subprocess.run([sys.executable, "-m", "pantheon.cli", "--help"], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    assert " sim " in done.stdout


def test_batch_returns_the_decisions_of_a_flow_that_records_them() -> None:
    weights = REPO / "crates/cc/tests/fixtures/indigo/lstm32.safetensors"
    indigo = f"indigo:weights={weights},policy=expert,oracle_cwnd_packets=30"
    path = link_options(rate_mbps=RATE_MBPS, delay_ms=DELAY_MS)
    [result] = run_batch([Job([FlowSpec(f"{indigo},record=1"), FlowSpec(indigo)], path, runtime_s=1)])
    recorded, plain = result.flows
    assert plain.decisions is None and recorded.decisions is not None
    d = recorded.decisions
    assert len(d.inputs) == len(d.cwnd_packets) == len(d.actions) > 20 and len(d.inputs[0]) == 9
    assert d.expert_actions == d.actions and d.cwnd_packets[-1] == 30


def test_batch_returns_the_rule_tally_of_a_tao_flow_that_records_it() -> None:
    tree = REPO / "crates/cc/tests/fixtures/tao/three_rules.pb"
    path = link_options(rate_mbps=RATE_MBPS, delay_ms=DELAY_MS)
    [result] = run_batch([Job([FlowSpec(f"tao:tree={tree},record=1"), FlowSpec(f"tao:tree={tree}")], path,
                              runtime_s=1)])
    assert result.ok, result.error
    recorded, plain = result.flows
    assert plain.rules is None and recorded.decisions is None and recorded.rules is not None
    uses, memories = recorded.rules.uses, recorded.rules.memories
    # One entry per rule of the fixture's three; one use per acknowledgement, none past the delivered.
    assert len(uses) == len(memories) == 3
    assert 0 < sum(uses) <= recorded.delivered_packets
    assert all(len(kept) <= 64 and all(len(m) == 4 for m in kept) for kept in memories)
    assert memories[0][0] == [0.0, 0.0, 0.0, 0.0]


def test_a_scheme_missing_a_file_it_needs_is_not_simulated(tmp_path: Path) -> None:
    # Indigo's manifest needs its trained weights; until they exist the simulator has none either.
    copa = schemes.registry().schemes["copa"]
    known = schemes.Registry({"copa": dataclasses.replace(copa, needs_files=(str(tmp_path / "w.safetensors"),))}, {})
    assert simulable.problem(known, "copa") == (f"{tmp_path}/w.safetensors is missing (no setup step makes it; "
                                                "see the scheme's description)")
    (tmp_path / "w.safetensors").touch()
    assert simulable.problem(known, "copa") is None


def test_batch_cuts_a_run_into_windows_whose_bits_are_the_flows() -> None:
    path = link_options(rate_mbps=RATE_MBPS, delay_ms=DELAY_MS, queue_bytes=QUEUE_BYTES)
    # Cubic all along, a second flow from 2 s: before it starts, its windows are empty.
    flows = [FlowSpec("cubic"), FlowSpec("cubic", start_s=2)]
    whole, windowed = run_batch([Job(flows, path, runtime_s=RUNTIME_S),
                                 Job(flows, path, runtime_s=RUNTIME_S, window_s=0.5)])
    assert whole.ok and windowed.ok, (whole.error, windowed.error)
    assert all(f.windows is None for f in whole.flows)
    for plain, flow in zip(whole.flows, windowed.flows):
        assert dataclasses.replace(flow, windows=None) == plain, "windows leave the whole run's numbers as they are"
        assert flow.windows is not None and len(flow.windows) == RUNTIME_S / 0.5
        mean_mbps = sum(w.throughput_mbps for w in flow.windows) / len(flow.windows)
        assert mean_mbps * RUNTIME_S * 1e6 == pytest.approx(flow.delivered_packets * PACKET_BYTES * 8, rel=1e-12)
    late = windowed.flows[1].windows
    assert late is not None and all(w.throughput_mbps == 0 and w.delay_p95_ms is None for w in late[:4])
    assert all(w.delay_p95_ms is not None and w.delay_p95_ms >= DELAY_MS for w in late[4:])
