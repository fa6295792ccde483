"""A simulated campaign: the runs of `pantheon test local`, each simulated by pantheon-sim, in
parallel on every core, into a data dir of the harness's layout (docs/harness.md), so that
`pantheon analyze`, its plots and its report read it unchanged.

Per run, in LABEL/runK/:
    run.json            as the harness writes it; t0 is 0 (the simulated clock starts at the Unix
                        epoch), plus "simulated", the seed, the simulator's event count and wall time
    sim.json            what pantheon-sim printed: events, wall and simulated seconds, per-flow metrics
    records.parquet, datalink.log, acklink.log   written by pantheon-sim itself, equal to what the
                        harness's record merge (harness/records.py) builds from the text logs
    transfers.parquet   where flows have transfers (issue 35), by pantheon-sim too, as the harness's
                        merge builds it from the transfer logs
    flows.csv           where flows have transfers or extra delays: the senders as pantheon-sim
                        read them (simulator.write_flows_file)
    with --text-logs, also the text logs of the real experiment:
    uplink.log, downlink.log                     the link logs, in pantheon-emu's form
    flowI.{sender,receiver}.{ingress,egress}.log the tunnel logs, in pantheon-tunnel's native form

Seeds: run K of every label uses seed `--seed + K - 1` (experiment.seed_of, as the emulated
harness does).

Parallelism: a pool of worker processes, one per job, each running one pantheon-sim.
Ctrl-C (SIGINT to the process group from a terminal, or to `pantheon sim` alone) ends the runs
in flight at once: the parent tells the workers through an event and each kills its own
simulator by pid; their run.json says so, runs not yet started never start, finished runs are
kept. Every worker and simulator dies with its parent (PR_SET_PDEATHSIG), so a SIGKILL of
`pantheon sim` leaves nothing running.

Disks: run.json and sim.json are written atomically (files.py). A run that finds the disk full
(the simulator says so, or it failed with almost no space left) is cut short (files.cut_short),
runs not yet started never start, those in flight finish or are cut short too, and one line names
the runs cut short; the finished runs are intact and the analysis reads them.
"""
from __future__ import annotations

import multiprocessing
import signal
import subprocess
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

from pantheon import files
from pantheon.plan import Flow
from pantheon.progress import Progress
from pantheon.schemes import ecn_spec
from pantheon.sim import simulator
from pantheon.trials import Trial

POLL_S = 0.05
"""How often a worker checks, while its simulator runs, whether the campaign was interrupted."""
_stop: EventType | None = None
"""Set by the parent on Ctrl-C; each worker process gets it at start-up."""
_full: EventType | None = None
"""Set by the parent when a run found the disk full: runs not yet started do not start."""


@dataclass(frozen=True)
class SimRun:
    trial: Trial
    run_dir: Path
    cc: dict[str, str]
    """Scheme name -> crates/cc spec."""
    path_options: list[str]
    seed: int
    text_logs: bool = False
    """Also keep the tunnel's and the emulator's own text logs (pantheon-sim run --text-logs)."""


@dataclass
class RunResult:
    trial: Trial
    failures: list[str] = field(default_factory=list)
    events: int | None = None
    wall_s: float | None = None
    cut_short: bool = False
    """The disk filled up during this run (files.cut_short)."""

    @property
    def ok(self) -> bool:
        return not self.failures


def _failure(done: subprocess.CompletedProcess) -> str:
    if done.returncode < 0:
        return f"{simulator.PROGRAM} was killed by {signal.Signals(-done.returncode).name}"
    return f"{simulator.PROGRAM}: {simulator.message(done.stderr) or f'exited with status {done.returncode}'}"


def simulate(run: SimRun) -> RunResult:
    """One run, in a worker process: the simulation (which writes the records), run.json; a run
    the full disk cut short keeps only its run.json, saying so."""
    result = RunResult(run.trial)
    if _stop is not None and _stop.is_set():
        result.failures.append("not started: interrupted (Ctrl-C)")
        return result
    if _full is not None and _full.is_set():
        result.failures.append("not started: the disk is full")
        return result
    try:
        _simulate(run, result)
    except OSError as e:
        if not files.out_of_space(e):
            raise
        result.failures.append(str(e))
    if full := files.full_disk_failure(result.failures):
        result.failures, result.cut_short = [f"cut short: {full}"], True
        files.cut_short(run.run_dir, run_json(run, result))
    return result


def _simulate(run: SimRun, result: RunResult) -> None:
    """The simulation into `run.run_dir`, its failures into `result`, sim.json and run.json."""
    plan = run.trial.plan
    run.run_dir.mkdir(parents=True)
    specs = [ecn_spec(f.cc or run.cc[f.scheme]) if f.ecn else f.cc or run.cc[f.scheme] for f in plan.flows]
    flows: list[simulator.FlowArg] | Path
    if any(f.transfers or f.extra_delay_ms for f in plan.flows):
        rows = [row for i, (f, spec) in enumerate(zip(plan.flows, specs)) for row in _sender_rows(i, f, spec)]
        flows = simulator.write_flows_file(run.run_dir / "flows.csv", rows)
    else:
        flows = [simulator.FlowArg(spec, f.start_s, f.duration_s) for f, spec in zip(plan.flows, specs)]
    argv = simulator.run_command(run.run_dir, flows, run.path_options, plan.runtime_s, run.seed, run.text_logs)
    child = simulator.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    interrupted = False
    while True:
        try:
            stdout, stderr = child.communicate(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            if _stop is not None and _stop.is_set() and not interrupted:
                child.kill()
                interrupted = True
    done = subprocess.CompletedProcess(argv, child.returncode, stdout, stderr)
    if interrupted or done.returncode == -signal.SIGINT:
        result.failures.append("interrupted (Ctrl-C)")
    elif done.returncode != 0:
        result.failures.append(_failure(done))
    else:
        try:
            report = simulator.parse_report(done.stdout)
        except ValueError as e:
            result.failures.append(str(e))
        else:
            files.write_atomic(run.run_dir / "sim.json", files.json_text(report))
            result.events, result.wall_s = report.get("events"), report.get("wall_s")
            result.failures += [f"flow {i} ({plan.flows[i].scheme}) moved no data"
                                for i, flow in enumerate(report.get("flows", [])) if flow.get("delivered_packets") == 0]
    files.write_atomic(run.run_dir / "run.json", files.json_text(run_json(run, result)))


def _sender_rows(i: int, flow: Flow, spec: str) -> list[simulator.SenderRow]:
    """Flow i's senders for --flows-file: one bulk sender, or one per transfer (each may last to
    the flow's end)."""
    if not flow.transfers:
        return [simulator.SenderRow(i, spec, flow.start_s, flow.duration_s, None, flow.extra_delay_ms)]
    return [simulator.SenderRow(i, spec, t.start_s, flow.end_s - t.start_s, t.bytes, flow.extra_delay_ms)
            for t in flow.transfers]


def run_json(run: SimRun, result: RunResult) -> dict:
    return {
        **run.trial.run_keys(run.seed), "ok": result.ok, "failures": result.failures,
        "t0_epoch_s": 0.0, "ended_epoch_s": run.trial.plan.runtime_s,
        "simulated": True, "events": result.events, "wall_s": result.wall_s,
    }


def _worker_setup(stop: EventType, full: EventType) -> None:
    global _stop, _full
    _stop, _full = stop, full
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    simulator.die_with_parent()


def ended_line(result: RunResult, sim_s: float, run_times: int) -> str:
    """A finished run's progress line: how fast it was simulated, or why it failed."""
    trial = result.trial
    if result.ok:
        speed = f", {sim_s / result.wall_s:,.0f}x real time" if result.wall_s else ""
        status = f"ok: {sim_s:g} s simulated in {1e3 * (result.wall_s or 0):.1f} ms{speed}"
    else:
        status = f"FAILED: {result.failures[0]}"
    return f"{trial.plan.label} run {trial.repetition}/{run_times} {status}"


def run_all(runs: list[SimRun], jobs: int, progress: Progress, run_times: int) -> int:
    """Simulates every run on `jobs` worker processes; returns the number of failed runs (130 on
    Ctrl-C). A run that finds the disk full is cut short and no further run starts (those in
    flight finish, or are cut short too); a line names the runs cut short."""
    failed = 0
    context = multiprocessing.get_context("fork")
    stop, full = context.Event(), context.Event()
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(runs)), mp_context=context, initializer=_worker_setup,
                               initargs=(stop, full))
    pending: dict[Future, SimRun] = {}
    cut: list[str] = []
    try:
        pending = {pool.submit(simulate, run): run for run in runs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                run = pending.pop(future)
                if future.cancelled():
                    continue
                result = _result(run, future)
                if result.cut_short:
                    full.set()
                    cut.append(f"{run.trial.plan.label} run {run.trial.repetition}")
                    for queued in pending:
                        queued.cancel()
                if result.failures[:1] == ["not started: the disk is full"]:
                    continue
                failed += not result.ok
                progress.ended(ended_line(result, run.trial.plan.runtime_s, run_times))
    except KeyboardInterrupt:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        return 130
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        progress.close()
    if cut:
        not_started = len(runs) - progress.done
        progress.write(f"pantheon: the disk is full: {', '.join(cut)} cut short (marked failed in run.json), "
                       f"{not_started} run(s) not started; the campaign stops here, its {progress.done - len(cut)} "
                       f"finished run(s) are intact")
        failed += not_started
    return failed


def _result(run: SimRun, future: Future) -> RunResult:
    error = future.exception()
    if error is None:
        return future.result()
    # A worker that died (SIGKILL) or could not write: this run fails, the others go on.
    result = RunResult(run.trial, [f"{type(error).__name__}: {error}"])
    if run.run_dir.exists():
        try:
            files.write_atomic(run.run_dir / "run.json", files.json_text(run_json(run, result)))
        except OSError as e:
            result.failures.append(f"its run.json could not be written: {e}")
    return result
