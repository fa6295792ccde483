"""A simulated campaign: the runs of `pantheon test local`, each simulated by pantheon-sim, in
parallel on every core, into a data dir of the harness's layout (docs/harness.md), so that
`pantheon analyze`, its plots and its report read it unchanged.

Per run, in LABEL/runK/:
    run.json            as the harness writes it; t0 is 0 (the simulated clock starts at the Unix
                        epoch), plus "simulated", the seed, the simulator's event count and wall time
    sim.json            what pantheon-sim printed: events, wall and simulated seconds, per-flow metrics
    records.parquet, datalink.log, acklink.log   written by pantheon-sim itself, equal to what the
                        harness's record merge (harness/records.py) builds from the text logs
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
"""
from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
import sys
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

from pantheon.harness.campaign import Trial
from pantheon.sim import simulator

POLL_S = 0.05
"""How often a worker checks, while its simulator runs, whether the campaign was interrupted."""
_stop: EventType | None = None
"""Set by the parent on Ctrl-C; each worker process gets it at start-up."""


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

    @property
    def ok(self) -> bool:
        return not self.failures


def _failure(done: subprocess.CompletedProcess) -> str:
    if done.returncode < 0:
        return f"{simulator.PROGRAM} was killed by {signal.Signals(-done.returncode).name}"
    return f"{simulator.PROGRAM}: {simulator.message(done.stderr) or f'exited with status {done.returncode}'}"


def simulate(run: SimRun) -> RunResult:
    """One run, in a worker process: the simulation (which writes the records), run.json."""
    plan = run.trial.plan
    result = RunResult(run.trial)
    if _stop is not None and _stop.is_set():
        result.failures.append("not started: interrupted (Ctrl-C)")
        return result
    run.run_dir.mkdir(parents=True)
    flows = [simulator.FlowArg(run.cc[f.scheme], f.start_s, f.duration_s) for f in plan.flows]
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
            (run.run_dir / "sim.json").write_text(json.dumps(report, indent=2) + "\n")
            result.events, result.wall_s = report.get("events"), report.get("wall_s")
            result.failures += [f"flow {i} ({plan.flows[i].scheme}) moved no data"
                                for i, flow in enumerate(report.get("flows", [])) if flow.get("delivered_packets") == 0]
    write_run_json(run, result)
    return result


def write_run_json(run: SimRun, result: RunResult) -> None:
    plan = run.trial.plan
    (run.run_dir / "run.json").write_text(json.dumps({
        "ok": result.ok, "failures": result.failures, "label": plan.label, "repetition": run.trial.repetition,
        "runtime_s": plan.runtime_s, "t0_epoch_s": 0.0, "ended_epoch_s": plan.runtime_s,
        "flows": [asdict(f) for f in plan.flows],
        "simulated": True, "seed": run.seed, "events": result.events, "wall_s": result.wall_s,
    }, indent=2) + "\n")


def _worker_setup(stop: EventType) -> None:
    global _stop
    _stop = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    simulator.die_with_parent()


class Progress:
    """One line per finished run (runs finish out of order); nothing with --quiet."""

    def __init__(self, quiet: bool, total: int, run_times: int) -> None:
        self.quiet, self.total, self.run_times, self.finished = quiet, total, run_times, 0

    def run_ended(self, result: RunResult, sim_s: float) -> None:
        self.finished += 1
        if self.quiet:
            return
        trial = result.trial
        if result.ok:
            speed = f", {sim_s / result.wall_s:,.0f}x real time" if result.wall_s else ""
            status = f"ok: {sim_s:g} s simulated in {1e3 * (result.wall_s or 0):.1f} ms{speed}"
        else:
            status = f"FAILED: {result.failures[0]}"
        print(f"[{self.finished}/{self.total}] {trial.plan.label} run {trial.repetition}/{self.run_times} {status}",
              file=sys.stderr, flush=True)


def run_all(runs: list[SimRun], jobs: int, progress: Progress) -> int:
    """Simulates every run on `jobs` worker processes; returns the number of failed runs (130 on
    Ctrl-C)."""
    failed = 0
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(runs)), mp_context=context, initializer=_worker_setup,
                               initargs=(stop,))
    pending: dict[Future, SimRun] = {}
    try:
        pending = {pool.submit(simulate, run): run for run in runs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                run = pending.pop(future)
                if (error := future.exception()) is not None:
                    # A worker that died (SIGKILL) or could not write: this run fails, the others go on.
                    result = RunResult(run.trial, [f"{type(error).__name__}: {error}"])
                    if run.run_dir.exists():
                        write_run_json(run, result)
                else:
                    result = future.result()
                failed += not result.ok
                progress.run_ended(result, run.trial.plan.runtime_s)
    except KeyboardInterrupt:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        return 130
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return failed
