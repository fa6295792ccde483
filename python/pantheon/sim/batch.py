"""Many simulations from Python, for programs that need thousands of runs (calibration's Bayesian
optimisation, paper §4; Indigo's training, Yan et al. ATC 2018 §6): each job is a path and its
flows, each result the flows' Pantheon metrics, and no files are written.

    from pantheon.sim.batch import FlowSpec, Job, link_options, run_batch
    jobs = [Job([FlowSpec("copa:delta=0.5")], link_options(rate_mbps=12, delay_ms=20, queue_bytes=q), runtime_s=30)
            for q in (15_000, 30_000, 60_000)]
    for r in run_batch(jobs):
        print(r.error or r.flows[0].throughput_mbps)

All jobs go through one `pantheon-sim batch` subprocess (docs/sim.md): JSON lines in on stdin, one
result line out per job, in completion order, simulated on every core by the Rust side. A
subprocess rather than a PyO3 extension module, because:
- no build coupling: a PyO3 module is compiled against one Python's ABI and must be rebuilt with
  it (maturin, a second build system beside cargo); the binary is the one `cargo build` makes;
- parallel without the GIL: the Rust side runs jobs on its own threads, and the Python caller is
  free while they run (results stream back as they finish);
- isolation: a panic or abort in one simulation ends a process that is not the caller's, so a long
  calibration keeps its state and gets an error for the jobs that were lost.
What it costs: JSON encoding of a job (a few hundred bytes) and of its result, and one process
start per batch, not per job. bench/sim_speed.py measures it (200 jobs of 0.2 simulated seconds
at 12 Mbit/s, one at a time): 0.07 to 0.1 ms per job beyond the simulations themselves, against
0.9 to 2.3 ms per job for one `pantheon-sim run` process each (shared 2-core machine); a 30 s job
at 12 Mbit/s itself takes about 13 ms.

A flow is bulk, or made of finite transfers (`FlowSpec.transfers`: a workload's arrivals, each a
sender of its own with the flow's cc), and may lie further away than the path (`extra_delay_ms`),
as a flows file's flow (docs/sim.md, "Transfers, the flows file and extra delays"); each transfer
comes back with its completion (`FlowMetrics.transfers`).

Jobs that are wrong (an unknown controller, a bad path option) come back as results with `error`
set, the simulator's one line; the others run. Determinism: the same job and seed give the same
metrics, whatever the batch around it and however many jobs run at once.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pantheon.binaries import binary
from pantheon.sim import simulator


@dataclass(frozen=True)
class TransferSpec:
    """A finite transfer of a flow: `size_bytes` (> 0; ⌈size / 1464⌉ datagrams, the byte budget)
    by a sender of its own from `start_s` (≥ 0, before the run's end) until every datagram is
    acknowledged or the run ends."""
    start_s: float
    size_bytes: int


@dataclass(frozen=True)
class FlowSpec:
    cc: str
    """A crates/cc spec, e.g. `copa:delta=0.5` (docs/cc.md); packets are 1464-byte datagrams."""
    start_s: float = 0.0
    duration_s: float | None = None
    """None: until the end of the run. A flow with transfers has neither a start nor a duration."""
    transfers: tuple[TransferSpec, ...] = ()
    """Finite transfers, in plan order, instead of one bulk sender; (): a bulk flow."""
    extra_delay_ms: float = 0.0
    """The flow's own one-way propagation delay each way beyond the path's, ms (0 to 3 600 000)."""

    def job_fields(self) -> dict[str, Any]:
        """The flow as a job line gives it (docs/sim.md, "batch"): fields at their defaults are
        left out, except a bulk flow's `start_s` (as lines have always had it)."""
        fields: dict[str, Any] = {"cc": self.cc}
        if not self.transfers or self.start_s != 0.0:
            fields["start_s"] = self.start_s
        if self.duration_s is not None:
            fields["duration_s"] = self.duration_s
        if self.extra_delay_ms:
            fields["extra_delay_ms"] = self.extra_delay_ms
        if self.transfers:
            fields["transfers"] = [{"start_s": t.start_s, "bytes": t.size_bytes} for t in self.transfers]
        return fields


@dataclass(frozen=True)
class Job:
    flows: Sequence[FlowSpec]
    path_options: Sequence[str] = ()
    """pantheon-emu's options (`pantheon emulate --help`); link_options() builds the common ones."""
    runtime_s: float = 30.0
    seed: int = 0
    window_s: float | None = None
    """Also each flow's metrics per window of this many seconds of the run (`FlowMetrics.windows`);
    None: the whole run's alone."""
    topology: Mapping[str, Any] | None = None
    """Links and a route per flow instead of `path_options`: a topology file's fields (docs/sim.md,
    "Topologies"), {"routes": [["a", "b"], ["a"]], "link": [{"name": "a", "path": [...]}, ...]}."""

    def line(self, job_id: int) -> str:
        flows = [f.job_fields() for f in self.flows]
        extra: dict[str, Any] = {} if self.window_s is None else {"window_s": self.window_s}
        if self.topology is not None:
            extra["topology"] = self.topology
        return json.dumps({"id": job_id, "flows": flows, "path": list(self.path_options),
                           "runtime_s": self.runtime_s, "seed": self.seed, **extra})


def link_options(*, rate_mbps: float = 12.0, delay_ms: float = 0.0, queue_bytes: int | None = None,
                 loss: float = 0.0, downlink_rate_mbps: float | None = None) -> list[str]:
    """The path of most experiments: a constant-rate uplink with a DropTail buffer of `queue_bytes`
    (None: infinite) and i.i.d. loss, `delay_ms` one way each way; the downlink (acknowledgements)
    at `downlink_rate_mbps`, by default the uplink's rate."""
    options = ["--delay", f"{delay_ms!r}", "--uplink-rate", f"{rate_mbps!r}",
               "--downlink-rate", f"{(rate_mbps if downlink_rate_mbps is None else downlink_rate_mbps)!r}"]
    if queue_bytes is not None:
        options += ["--uplink-queue", "droptail", "--uplink-queue-bytes", str(queue_bytes)]
    if loss:
        options += ["--uplink-loss", f"{loss!r}"]
    return options


@dataclass(frozen=True)
class Decisions:
    """A learned controller's record of its decisions (Indigo's `record=1`, docs/cc.md), one entry
    per decision in each list."""
    inputs: list[list[float]]
    """The network's 9 inputs (crates/cc/src/indigo/state.rs), exactly what its LSTM step got."""
    cwnd_packets: list[float]
    """The window before the decision's action, packets."""
    actions: list[int]
    """The action taken, 0..4: ÷2, −10, +0, +10, ×2."""
    expert_actions: list[int] | None
    """The expert's action towards `oracle_cwnd_packets`; None when no oracle was given."""


@dataclass(frozen=True)
class RuleTally:
    """A RemyCC's record of its rules over one flow (Tao's `record=1`, docs/cc.md), for the rule
    optimiser: one entry per rule in each list, rules numbered depth-first through the tree,
    children in file order (THE numbering: `pantheon-sim tree show` prints it)."""
    uses: list[int]
    """Acknowledgements whose lookup landed in the rule; they sum to the flow's acknowledgements."""
    memories: list[list[list[float]]]
    """Per rule, a sample of the memories that used it (at most 64: every k-th use, k doubling
    when full), each [rec_send_ewma, rec_rec_ewma, rtt_ratio, slow_rec_rec_ewma], ms (the ratio
    has no unit)."""


@dataclass(frozen=True)
class Window:
    """A flow in one window [kW, (k+1)W) of the run (`Job.window_s`; the last may be shorter)."""
    throughput_mbps: float
    """Bits of its datagrams delivered in the window over the window's length (the whole run's
    throughput is over the span from its first delivery to its last instead)."""
    delay_p95_ms: float | None
    """The nearest-rank p95 of those datagrams' one-way delays; None when none was delivered."""


@dataclass(frozen=True)
class TransferResult:
    """One transfer of a flow, as the simulator's transfers.parquet row (docs/sim.md, "Transfers"):
    µs since the run's start."""
    size_bytes: int
    start_us: int
    """Its planned start, which is when its sender began (a simulated sender is never late)."""
    end_us: int | None
    """When its receiver had the last datagram; None: not by the run's end."""

    @property
    def fct_ms(self) -> float | None:
        """Its flow completion time, end − start (no handshake: analysis/transfers.py), ms; None
        if it did not complete."""
        return None if self.end_us is None else (self.end_us - self.start_us) / 1000.0


@dataclass(frozen=True)
class FlowMetrics:
    """One flow's data direction, as `pantheon analyze` defines them (docs/analysis.md)."""
    throughput_mbps: float
    delay_p95_ms: float | None
    delay_mean_ms: float | None
    loss_rate: float | None
    ce_rate: float | None
    """Delivered datagrams that arrived marked CE (a queue's ECN signal), of all delivered."""
    sent_packets: int
    delivered_packets: int
    decisions: Decisions | None = None
    """Indigo's decision records when it keeps them (`record=1`); None otherwise."""
    rules: RuleTally | None = None
    """Tao's per-rule uses and memories when it keeps them (`record=1`); None otherwise."""
    windows: list[Window] | None = None
    """Per window of the run, in time order, when the job gave `window_s`; None otherwise."""
    transfers: list[TransferResult] | None = None
    """Each of the flow's transfers, in plan order, when it has transfers; None for a bulk flow.
    The metrics above are over all their datagrams together."""


_NESTED = ("decisions", "rules", "windows", "transfers")


def _flow(reply: dict) -> FlowMetrics:
    metrics: dict[str, Any] = {k: reply.get(k) for k in FlowMetrics.__dataclass_fields__ if k not in _NESTED}
    d = reply.get("decisions")
    decisions = None if d is None else Decisions(d["inputs"], d["cwnd_packets"], d["actions"],
                                                  d.get("expert_actions"))
    r = reply.get("rules")
    rules = None if r is None else RuleTally(r["uses"], r["memories"])
    w = reply.get("windows")
    windows = None if w is None else [Window(x["throughput_mbps"], x["delay_p95_ms"]) for x in w]
    t = reply.get("transfers")
    transfers = None if t is None else [TransferResult(x["bytes"], x["start_us"], x["end_us"]) for x in t]
    return FlowMetrics(**metrics, decisions=decisions, rules=rules, windows=windows, transfers=transfers)


@dataclass
class Result:
    job: Job
    flows: list[FlowMetrics] = field(default_factory=list)
    events: int | None = None
    wall_s: float | None = None
    """The simulator's own time for this job, not counting the batch's overheads."""
    error: str | None = None
    """Why the job did not run, in one line; None when it did."""

    @property
    def ok(self) -> bool:
        return self.error is None


def _result(job: Job, reply: dict) -> Result:
    if not reply.get("ok"):
        return Result(job, error=str(reply.get("error") or "pantheon-sim gave no reason"))
    flows = [_flow(f) for f in reply["flows"]]
    return Result(job, flows, events=reply.get("events"), wall_s=reply.get("wall_s"))


def iter_batch(jobs: Iterable[Job], jobs_parallel: int | None = None) -> Iterator[tuple[int, Result]]:
    """(index of the job, its result), in completion order, while the batch runs."""
    jobs = list(jobs)
    argv = [str(binary(simulator.PROGRAM)), "batch", *(["--jobs", str(jobs_parallel)] if jobs_parallel else [])]
    # stderr to a file: a pipe nobody reads while results stream could fill and stall the simulator.
    with tempfile.TemporaryFile(mode="w+") as errors:
        child = simulator.spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True,
                                bufsize=1)
        stdin, stdout = child.stdin, child.stdout
        assert stdin is not None and stdout is not None, "both are pipes"

        def feed() -> None:
            # A thread, so that a batch larger than the pipe's buffer cannot block on results unread.
            try:
                for i, job in enumerate(jobs):
                    stdin.write(job.line(i) + "\n")
                stdin.close()
            except (BrokenPipeError, ValueError):
                pass  # the simulator ended early; its missing results are reported below

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        answered: set[int] = set()
        try:
            for line in stdout:
                reply = json.loads(line)
                index = reply.get("id")
                if isinstance(index, int) and 0 <= index < len(jobs) and index not in answered:
                    answered.add(index)
                    yield index, _result(jobs[index], reply)
            child.wait()
            writer.join()
            if len(answered) < len(jobs):
                errors.seek(0)
                why = simulator.message(errors.read()) or f"exited with status {child.returncode}"
                for index in (i for i in range(len(jobs)) if i not in answered):
                    yield index, Result(jobs[index], error=f"{simulator.PROGRAM} batch ended before this job: {why}")
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            stdout.close()


def run_batch(jobs: Iterable[Job], jobs_parallel: int | None = None,
              on_result: Callable[[int, Result], None] | None = None) -> list[Result]:
    """Every job's result, in the jobs' order; `jobs_parallel` jobs at once (default: every core).
    `on_result(index, result)` is called as each finishes (a progress bar, an early stop)."""
    jobs = list(jobs)
    results: list[Result | None] = [None] * len(jobs)
    for index, result in iter_batch(jobs, jobs_parallel):
        results[index] = result
        if on_result:
            on_result(index, result)
    return results  # type: ignore[return-value]  # every index is filled by iter_batch
