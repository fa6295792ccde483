"""ECN on Python's side (issue 34), without an emulator: a flow asks for ECN (`--ecn`, a scenario's
`ecn = true`) and each kind of scheme turns it on its own way (kernel TCP's sysctl in the flow's
namespace only, a crates/cc spec's `ecn=1`); the tunnel logs' ECN column becomes the records'
`ecn` and `ce`; `ce_rate` is worked out by hand from records; the report and the terminal summary
show CE marks only where a run used ECN; the link log's `ce` token and `aqm` drops read; records
and perf.json written before ECN still read and upload. The behaviour of the queues and the
schemes over the emulator and the simulator is tested where they run (tests/test_behaviour.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pantheon import link_log, schemes
from pantheon import plan as plans
from pantheon.analysis import logs
from pantheon.analysis.analyze import analyze
from pantheon.analysis.cli import summary_text
from pantheon.analysis.metrics import ce_rate, run_metrics
from pantheon.analysis.report import html_report
from pantheon.errors import PantheonError
from pantheon.experiment import Experiment
from pantheon.harness.records import RecordsError, merge_run
from pantheon.harness.run import scheme_side
from pantheon.processes import lifeline
from test_analysis_cli import write_run

T0_US = 1_795_000_000_000_000
NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3


# --- a flow asks for ECN ---------------------------------------------------------------------------

def test_a_crates_cc_spec_gains_ecn_once() -> None:
    assert schemes.ecn_spec("cubic") == "cubic:ecn=1"
    assert schemes.ecn_spec("copa:delta=0.5") == "copa:delta=0.5,ecn=1"
    assert schemes.ecn_spec("cubic:ecn=0") == "cubic:ecn=0", "what the spec says stands"
    assert schemes.ecn_spec("prague") == "prague:ecn=1", "Prague keeps its ECT(1): crates/cc's flow says so"


def test_each_scheme_turns_ecn_on_its_own_way(tmp_path: Path) -> None:
    known = schemes.registry()
    cubic_user, prague, cubic = known.schemes["cubic-user"], known.schemes["prague"], known.schemes["cubic"]
    assert (cubic_user.ecn_switch(), prague.ecn_switch(), cubic.ecn_switch()) == ("spec", "spec", "sysctl")
    sender = scheme_side(tmp_path, "flow0.sender", cubic_user, "sender", ecn=True)
    assert sender[sender.index("--cc") + 1] == "cubic:ecn=1" and "--sysctl" not in sender
    assert scheme_side(tmp_path, "flow0.receiver", cubic_user, "receiver", ecn=True) == \
        scheme_side(tmp_path, "flow0.receiver", cubic_user, "receiver", ecn=False)
    with_ecn = scheme_side(tmp_path, "flow0.sender", prague, "sender", ecn=True)
    assert with_ecn[with_ecn.index("--cc") + 1] == "prague:ecn=1"
    for side in ("sender", "receiver"):
        line = scheme_side(tmp_path, f"flow0.{side}", cubic, side, ecn=True)
        launcher, command = line[: line.index("--")], line[line.index("--") + 1:]
        assert launcher[-2:] == ["--sysctl", "net.ipv4.tcp_ecn=1"]
        assert command == cubic.command(side, port=50_000), "kernel TCP's command line is as without ECN"
        assert "--sysctl" not in scheme_side(tmp_path, f"flow0.{side}", cubic, side, ecn=False)
    assert "quic-cubic cannot be asked to use ECN" in (known.ecn_problem("quic-cubic") or "")
    assert known.ecn_problem("cubic") is None and known.ecn_problem("dctcp-user") is None


def test_the_launcher_sets_the_sysctl_in_the_flows_namespace_alone(tmp_path: Path) -> None:
    """As the tunnel endpoint runs it, in a namespace of its own: the scheme reads 1 there, the
    host keeps its value; a setting outside net.* (the whole host's) is refused."""
    host = Path("/proc/sys/net/ipv4/tcp_ecn").read_text()
    (tmp_path / "flow0.sender.go").touch()
    line = scheme_side(tmp_path, "flow0.sender", schemes.registry().schemes["cubic"], "sender", ecn=True)
    launcher = line[: line.index("--")]
    fd = lifeline()
    done = subprocess.run(["unshare", "-n", *launcher, "--", "sh", "-c", "cat /proc/sys/net/ipv4/tcp_ecn >&2"],
                          pass_fds=(fd,), timeout=30)
    assert done.returncode == 0
    assert (tmp_path / "flow0.sender.stderr").read_text() == "1\n"
    assert Path("/proc/sys/net/ipv4/tcp_ecn").read_text() == host
    (tmp_path / "flow1.sender.go").touch()
    done = subprocess.run([sys.executable, "-m", "pantheon.harness.launch", str(tmp_path), "flow1.sender", str(fd),
                           "--sysctl", "kernel.panic=1", "--", "true"], pass_fds=(fd,), timeout=30)
    assert json.loads((tmp_path / "flow1.sender.exit").read_text()) == {"status": 126, "exited_early": True}
    assert "only a network namespace's own settings (net.*)" in (tmp_path / "flow1.sender.stderr").read_text()
    os.close(fd)


@pytest.mark.parametrize("command", [["test", "local"], ["test", "remote", "node"], ["sim"]])
def test_every_experiment_command_takes_ecn(command: list[str]) -> None:
    from pantheon import cli

    args = cli._parser().parse_args([*command, "--schemes", "cubic", "--ecn"])
    asked = Experiment.from_args(args, "x")
    assert asked.ecn and asked.arguments()["ecn"] is True


def test_a_scenario_says_ecn_per_flow(tmp_path: Path) -> None:
    path = tmp_path / "mixed.toml"
    path.write_text('[[flow]]\nscheme = "prague"\nstart_s = 0\nduration_s = 10\necn = true\n'
                    '[[flow]]\nscheme = "cubic"\nstart_s = 0\nduration_s = 10\n')
    plan = plans.scenario(path)
    assert [f.ecn for f in plan.flows] == [True, False]
    assert [f.ecn for f in plan.with_ecn().flows] == [True, True]
    for text, message in (('ecn = "yes"', "ecn must be true or false, got 'yes'"), ("color = 1", "unknown key 'color'")):
        path.write_text(f'[[flow]]\nscheme = "cubic"\nstart_s = 0\nduration_s = 10\n{text}\n')
        with pytest.raises(plans.PlanError, match=message):
            plans.scenario(path)


def experiment(tmp_path: Path, **asked) -> Experiment:
    defaults = dict(schemes=(), all_schemes=False, scenario=None, run_times=1, runtime_s=10.0, flows=2, interval_s=0.0,
                    seed=0, data_dir=tmp_path, emulator=None, path_options=())
    return Experiment(**{**defaults, **asked})


def test_ecn_selects_the_schemes_that_can_and_names_those_that_cannot(tmp_path: Path, capsys) -> None:
    known = schemes.registry()
    choose = dict(problem=lambda name: None, verb="run", skip_line="skipping {name}: {why}",
                  expected_skip=lambda name: False, ecn_problem=known.ecn_problem)
    picked = experiment(tmp_path, all_schemes=True, ecn=True).select(every=["cubic", "quic-cubic", "copa"], **choose)
    assert [p.label for p in picked.plans] == ["cubic", "copa"] and all(f.ecn for p in picked.plans for f in p.flows)
    assert picked.not_run == [], "under --all, a scheme that cannot use ECN is an expected skip"
    assert "skipping quic-cubic: quic-cubic cannot be asked to use ECN" in capsys.readouterr().err
    named = experiment(tmp_path, schemes=("quic-cubic", "copa"), ecn=True).select(every=[], **choose)
    assert named.not_run == ["quic-cubic"]
    scenario = tmp_path / "s.toml"
    scenario.write_text('[[flow]]\nscheme = "quic-cubic"\nstart_s = 0\nduration_s = 5\necn = true\n')
    with pytest.raises(PantheonError, match=r"flow 1 \(quic-cubic\) asks for ECN: quic-cubic cannot"):
        experiment(tmp_path, scenario=scenario).select(every=[], **choose)
    assert experiment(tmp_path, schemes=("cubic",)).arguments()["ecn"] is False


def test_a_simulated_flow_gets_ecn_in_its_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pantheon.sim import campaign, simulator
    from pantheon.trials import Trial

    seen: list[list[str]] = []

    class Stop(Exception):
        """The simulation itself is the simulator's tests'."""

    def spawn(argv: list[str], **popen) -> None:
        seen.append(argv)
        raise Stop

    monkeypatch.setattr(simulator, "spawn", spawn)
    plan = plans.Plan("mix", (plans.Flow("copa", 0.0, 1.0, ecn=True), plans.Flow("cubic-user", 0.0, 1.0)), 1.0)
    run = campaign.SimRun(Trial(1, plan, 1), tmp_path / "run1", {"copa": "copa:delta=0.5", "cubic-user": "cubic"}, [], 0)
    with pytest.raises(Stop):
        campaign.simulate(run)
    flows = [seen[0][i + 1] for i, arg in enumerate(seen[0]) if arg == "--flow"]
    assert flows == ["copa:delta=0.5,ecn=1@0.0+1.0", "cubic@0.0+1.0"]


# --- records ---------------------------------------------------------------------------------------

def write_log(path: Path, lines: list[tuple[int, ...]]) -> None:
    """A native tunnel log: `t_us uid bytes` lines, with the ECN column where a tuple has four."""
    header = f"# pantheon-tunnel log\n# base: t_us 0 is {T0_US:016d} us since the Unix epoch (CLOCK_REALTIME)\n"
    path.write_text(header + "".join(" ".join(map(str, line)) + "\n" for line in lines))


def ecn_run(run_dir: Path) -> None:
    """Flow 0 sends 1, 2, 3 as ECT(0): 1 arrives as sent, 2 is lost, 3 arrives CE-marked. The
    acknowledgements' logs are the tunnel's before ECN (three columns)."""
    write_log(run_dir / "flow0.sender.ingress.log", [(1_000_000, 1, 1464, ECT0), (1_010_000, 2, 1464, ECT0),
                                                     (1_020_000, 3, 1464, ECT0)])
    write_log(run_dir / "flow0.receiver.egress.log", [(1_020_000, 1, 1464, ECT0), (1_040_000, 3, 1464, CE)])
    write_log(run_dir / "flow0.receiver.ingress.log", [(1_020_100, 11, 52), (1_040_100, 13, 52)])
    write_log(run_dir / "flow0.sender.egress.log", [(1_040_100, 11, 52), (1_060_100, 13, 52)])


def test_records_keep_the_codepoint_sent_and_whether_ce_arrived(tmp_path: Path) -> None:
    ecn_run(tmp_path)
    merge_run(tmp_path, plans.uniform("cubic", 1, 0, 2.0), T0_US / 1e6)
    table = pq.read_table(tmp_path / "records.parquet")
    assert table.schema.field("ecn").type == pa.uint8() and table.schema.field("ce").type == pa.bool_()
    rows = [(r["direction"], r["uid"], r["ecn"], r["ce"]) for r in table.to_pylist()]
    assert rows == [("data", 1, ECT0, False), ("data", 2, ECT0, None), ("data", 3, ECT0, True),
                    ("ack", 11, NOT_ECT, False), ("ack", 13, NOT_ECT, False)]
    events, _ = logs.read_records(tmp_path / "records.parquet")
    assert run_metrics(events).flows[0].ce_rate == 0.5, "1 of the 2 packets delivered was marked"


@pytest.mark.parametrize("line", ["1000 1 1464 4", "1000 1 1464 2 9", "1000 1 1464 x"])
def test_a_bad_ecn_column_is_one_line(tmp_path: Path, line: str) -> None:
    ecn_run(tmp_path)
    (tmp_path / "flow0.sender.ingress.log").write_text(f"# base: t_us 0 is {T0_US:016d} us since the Unix epoch\n{line}\n")
    with pytest.raises(RecordsError, match=r"flow0.sender.ingress.log line 2 is not 't_us uid bytes \[ecn 0-3\]'"):
        merge_run(tmp_path, plans.uniform("cubic", 1, 0, 2.0), T0_US / 1e6)


def ecn_records(path: Path, ecn: list[int], ce: list[bool | None], flow: list[int] | None = None) -> None:
    """Data packets of 1000 bytes every 10 ms from t = 0, each delivered 20 ms later unless `ce` is None."""
    n = len(ecn)
    send = [i * 10_000 for i in range(n)]
    pq.write_table(pa.table({
        "flow": pa.array(flow or [0] * n, pa.uint16()), "direction": ["data"] * n,
        "uid": pa.array(range(n), pa.uint64()), "size_bytes": pa.array([1000] * n, pa.uint32()),
        "send_us": pa.array(send, pa.int64()),
        "recv_us": pa.array([t + 20_000 if c is not None else None for t, c in zip(send, ce)], pa.int64()),
        "ecn": pa.array(ecn, pa.uint8()), "ce": pa.array(ce, pa.bool_()),
    }), path)


def test_ce_rate_by_hand(tmp_path: Path) -> None:
    """Flow 1 sends 5 ECT(1) packets: 4 arrive, 1 of them marked (25 %); flow 2 sends 5 Not-ECT, all
    arrive (no ECN: no CE rate); all flows: 1 of 9 deliveries marked."""
    path = tmp_path / "records.parquet"
    ecn_records(path, [ECT1] * 5 + [NOT_ECT] * 5, [False, True, None, False, False] + [False] * 5, flow=[0] * 5 + [1] * 5)
    run = run_metrics(logs.read_records(path)[0])
    assert [m.ce_rate for m in run.flows] == [0.25, None]
    assert run.all.ce_rate == pytest.approx(1 / 9)
    assert run.flows[0].loss_rate == pytest.approx(0.2)
    assert ce_rate(np.array([NOT_ECT]), np.array([], dtype=bool)) is None


def test_records_before_ecn_read_as_not_ect(tmp_path: Path) -> None:
    write_run(tmp_path / "run1", packets=10, lost_at_end=2, delay_ms=20)
    events, problems = logs.read_records(tmp_path / "run1" / "records.parquet")
    assert events.send_ecn is not None and not events.send_ecn.any() and events.recv_ce is not None
    assert not events.recv_ce.any() and events.recv_ce.size == 8 and not problems.found
    metrics = run_metrics(events)
    assert metrics.all.ce_rate is None and metrics.all.loss_rate == pytest.approx(0.2)


# --- the report, perf.json and the archive ---------------------------------------------------------

def ecn_data_dir(root: Path, ecn: bool) -> Path:
    """One scheme, two runs of 10 packets; with `ecn` sent ECT(0), 8 delivered of which 2 (run 1)
    and 1 (run 2) CE-marked: CE rates 25 % and 12.5 %."""
    root.mkdir()
    (root / "metadata.json").write_text(json.dumps({
        "pantheon_version": "0.1.0", "git_commit": "0" * 40, "start_time": "2026-01-01T00:00:00+00:00",
        "arguments": {"runtime": 0.1, "flows": 1, "interval": 0, "run_times": 2, "seed": 0, "ecn": ecn},
        "emulator_options": ["--uplink-queue", "codel"], "schemes": {"cubic": {"display": "TCP Cubic"}},
        "trials": [{"number": k, "label": "cubic", "repetition": k} for k in (1, 2)],
    }))
    for k, marked in ((1, 2), (2, 1)):
        run_dir = root / "cubic" / f"run{k}"
        write_run(run_dir, packets=10, lost_at_end=2, delay_ms=20)
        json_path = run_dir / "run.json"
        json_path.write_text(json_path.read_text().replace('"runtime_s": 1.0', '"runtime_s": 0.1')
                             .replace('"duration_s": 1.0', '"duration_s": 0.1'))
        ce = [i < marked for i in range(8)] + [None, None]
        ecn_records(run_dir / "records.parquet", [ECT0 if ecn else NOT_ECT] * 10, ce if ecn else [False] * 8 + [None] * 2)
    return root


def test_the_report_and_perf_json_show_ce_marks_where_ecn_was_used(tmp_path: Path) -> None:
    """The HTML report without its figures (the PDF draws the same tables: tests/test_report_ranking.py)."""
    marked = analyze(ecn_data_dir(tmp_path / "ecn", ecn=True), draw=False, quiet=True)
    perf = json.loads((tmp_path / "ecn" / "perf.json").read_text())
    cubic = perf["schemes"]["cubic"]
    assert [cubic["runs"][k]["flows"]["1"]["ce_rate"] for k in ("1", "2")] == [0.25, 0.125]
    assert cubic["summary"]["all"]["ce_rate"]["mean"] == pytest.approx(0.1875)
    page = html_report(marked, str)
    assert "CE marks<br>(%)" in page and "<td>18.75</td>" in page and "<td>25.00</td>" in page
    assert "marked Congestion Experienced" in page, "the definition"
    assert "<th>Queues</th><td>uplink queue CoDel, downlink queue infinite</td>" in page
    assert "<th>ECN</th><td>every flow negotiated ECN (--ecn)</td>" in page
    assert "loss 20.00 %, CE marks 18.75 %" in summary_text(marked)
    plain = analyze(ecn_data_dir(tmp_path / "plain", ecn=False), draw=False, quiet=True)
    assert "CE marks" not in html_report(plain, str) and "CE marks" not in summary_text(plain)
    assert json.loads((tmp_path / "plain" / "perf.json").read_text())["schemes"]["cubic"]["runs"]["1"]["flows"]["1"]["ce_rate"] is None


def test_a_perf_json_written_before_ecn_still_uploads() -> None:
    """Its flows and summaries lack ce_rate: that agrees with records that say nothing of ECN, not
    with records of marks."""
    from pantheon.archive.upload import _first_difference

    mine = {"flows": {"1": {"loss_rate": 0.1, "ce_rate": None}}, "ce_rate": {"mean": None, "sd": None, "n": 0}}
    assert _first_difference(mine, {"flows": {"1": {"loss_rate": 0.1}}}, "cubic run 1") is None
    marked = {"flows": {"1": {"loss_rate": 0.1, "ce_rate": 0.25}}}
    assert _first_difference(marked, {"flows": {"1": {"loss_rate": 0.1}}}, "cubic run 1") == (
        "cubic run 1 flows 1 ce_rate is None there, 0.25 from the records")


# --- the link log ----------------------------------------------------------------------------------

def test_the_link_log_reads_marks_and_aqm_drops(tmp_path: Path) -> None:
    path = tmp_path / "uplink.log"
    path.write_text("# pantheon link log\n# queue: codel [packets=1000,target=5,interval=100,ecn=1]\n"
                    "0 + 1 1500\n10 + 2 1500\n20 + 3 1500\n1000 # 1500\n"
                    "1000 - 1 1500 1000 3\n1000 d 2 1500 aqm\n2000 # 1500\n2000 - 3 1500 1980 2 ce\n")
    log = link_log.read(path)
    assert [(d.uid, d.ce) for d in log.departures] == [(1, False), (3, True)]
    assert log.marked_uids() == [3] and log.dropped_uids("aqm") == [2]
    path.write_text("# header\n0 + 1 1500\n5 d 1 1500 overflow\n")
    with pytest.raises(link_log.LinkLogError, match=r"uplink.log:3: .*a drop's cause is one of loss, policer, queue, aqm"):
        link_log.read(path)
    path.write_text("# header\n0 + 1 1500\n5 - 1 1500 5 0 marked\n")
    with pytest.raises(link_log.LinkLogError, match=r"uplink.log:3: .*\[ce\]"):
        link_log.read(path)
