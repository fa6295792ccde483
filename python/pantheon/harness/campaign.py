"""A campaign: every run of `pantheon test local` or `pantheon test remote`, in the paper's trial
order, into one data dir. The mode (`Mode`) says where a run's endpoints are; all else is here.

Trial order and metadata.json are every driver's (trials.py); the runs and their files are here.

Data dir layout:
    metadata.json               every argument, the emulator's parameters, scheme versions, the
                                project's git commit, kernel and sysctls, start time, head start
    LABEL/runK/                 one run (LABEL is the scheme, or the scenario's name)
        run.json                outcome: ok or the failures, flows and their times
        records.parquet         per-packet records of every flow (see records.py)
        datalink.log, acklink.log   the same in the original Pantheon's merged text form
        uplink.log, downlink.log    the emulator's link logs (local mode)
        flowI.{sender,receiver}.*   tunnel logs and clock logs (remote mode: the far side's
                                    fetched back), scheme stderr
A failed run keeps what it wrote and its reason; the campaign goes on. Ctrl-C ends the run in
progress cleanly and keeps every finished run. Result files are written atomically (files.py); a
read-only or unwritable data dir is a one-line error before the first run, and a full disk ends the
campaign after the run it cut short, which says so in its run.json (files.cut_short).
"""
from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pantheon import files
from pantheon.analysis.cli import campaign_line
from pantheon.errors import PantheonError
from pantheon.experiment import seed_of
from pantheon.harness import leftovers
from pantheon.harness.run import HEAD_START_S, Endpoints, Outcome, Run
from pantheon.plan import Plan
from pantheon.progress import Progress
from pantheon.schemes import Scheme
from pantheon.trials import Trial, metadata, refuse_taken, trial_order, write_metadata

if TYPE_CHECKING:
    from pantheon.harness.clock import PeerClock

class CampaignBroken(PantheonError):
    """No further run can succeed (the other host is out of reach): the campaign ends after the
    run that found out, whose failure says why; finished runs stay."""


class Terminated(KeyboardInterrupt):
    """SIGTERM during a run: ended like Ctrl-C, so a campaign stopped by a supervisor or `timeout`
    leaves nothing behind."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM ended a campaign: the run in progress was cleaned up and marked, finished
    runs stay. Carries the line to print and the exit status (130, or 143 for SIGTERM)."""

    def __init__(self, message: str, exit_status: int) -> None:
        super().__init__(message)
        self.exit_status = exit_status


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


class Mode(Protocol):
    """What differs between local and remote mode in a campaign: where a run's endpoints are, what
    metadata.json says about the path, and whose clock the far side's logs are on."""

    def metadata(self, seed: int) -> dict:
        """The mode's keys of metadata.json: "emulator_options", and remote mode's "remote"."""

    def endpoints(self, index: int, run_seed: int, run_dir: Path) -> Endpoints:
        """The endpoints of the campaign's run number `index` (from 1), of repetition seed
        `run_seed`, whose files go in `run_dir`."""

    def peer_clock(self, run_dir: Path) -> PeerClock | None:
        """The far side's clock, fitted from the run's clock logs (None: one clock, local mode);
        a PantheonError (ClockError) is the run's failure line."""

    def broken(self) -> str | None:
        """Why no further run can succeed (remote mode: the connection to the other host is lost);
        None while runs can go on."""


def run_campaign(*, plans: list[Plan], schemes: dict[str, Scheme], mode: Mode, data_dir: Path,
                 run_times: int, random_order: bool, seed: int, quiet: bool, arguments: dict,
                 skipped: dict[str, str] | None = None, progress: Progress | None = None, path: str | None = None) -> int:
    """Runs every trial; returns the number of failed runs. Raises Interrupted on Ctrl-C or SIGTERM.
    `path`: what the emulated path is, in words, said once the campaign is sure to start.
    A full disk ends the campaign after the run it cut short (a failed run, files.cut_short), with
    a line saying so: the caller's analysis then reads the finished runs. `progress`: a bar shared
    with the caller's other runs (`schemes check`), else the campaign's own."""
    removed = leftovers.clean()
    if removed and not quiet:
        print(f"pantheon: removed {len(removed)} namespace(s) left by a harness that was killed: {', '.join(removed)}", file=sys.stderr)
    trials = trial_order(plans, run_times, random_order, seed)
    files.writable_dir(data_dir, "--data-dir")
    refuse_taken(data_dir, trials)  # before metadata.json, which belongs to the runs already there
    used = sorted({s for p in plans for s in p.schemes})
    write_metadata(data_dir, {**metadata(arguments, [], [schemes[s] for s in used], trials, skipped or {}, head_start_s=HEAD_START_S),
                              **mode.metadata(seed)})
    if path and not quiet:  # after every check: a user's mistake stays one line
        print(f"pantheon: path: {path}", file=sys.stderr)
    own_progress = progress is None
    progress = progress or Progress(len(trials), quiet=quiet)
    failed = 0
    try:
        for trial in trials:
            run_dir = trial.run_dir(data_dir)
            name = f"{trial.plan.label} run {trial.repetition}/{run_times}"
            progress.started(name)
            run_seed = seed_of(seed, trial.repetition)
            try:
                failures = _run(trial, run_seed, run_dir, schemes, mode, progress, name, data_dir)
            except OSError as e:
                if not files.out_of_space(e):
                    raise
                failures = [str(e)]
            failed += bool(failures)
            if full := files.full_disk_failure(failures):
                _cut_short(trial, run_dir, run_seed, full, progress, name, data_dir)
                return failed
            progress.ended(f"{name} {f'FAILED: {failures[0]}' if failures else 'ok'}")
            if why := mode.broken():
                raise CampaignBroken(f"{why}; the campaign cannot go on: finished runs are in {data_dir}")
    finally:
        if own_progress:
            progress.close()
    if not quiet:
        print(campaign_line(data_dir, len(trials), failed), file=sys.stderr)
    return failed


def _run(trial: Trial, run_seed: int, run_dir: Path, schemes: dict[str, Scheme], mode: Mode, progress: Progress,
         name: str, data_dir: Path) -> list[str]:
    """One run into `run_dir`, its records merged and its run.json written; returns its failures.
    Raises Interrupted on Ctrl-C or SIGTERM, OSError when the disk is full."""
    run_dir.mkdir(parents=True)
    run = Run(plan=trial.plan, schemes=schemes, run_dir=run_dir, endpoints=mode.endpoints(trial.number, run_seed, run_dir))
    previous_handler = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        outcome = run.execute(progress.tick)
    except KeyboardInterrupt as e:
        sigterm = isinstance(e, Terminated)
        how = "SIGTERM" if sigterm else "Ctrl-C"
        files.write_atomic(run_dir / "run.json", files.json_text({"ok": False, "failures": [f"interrupted ({how})"]}))
        progress.ended(f"{name} FAILED: interrupted")
        raise Interrupted(f"interrupted ({how}); finished runs are in {data_dir}", 128 + signal.SIGTERM if sigterm else 130) from None
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    if files.full_disk_failure(outcome.failures):
        return outcome.failures  # its logs are incomplete and its files about to be freed (cut_short)
    clock = _merge(run_dir, trial.plan, outcome.t0_epoch_s, outcome, mode) if outcome.t0_epoch_s is not None else {}
    files.write_atomic(run_dir / "run.json", files.json_text({
        **trial.run_keys(run_seed), "ok": outcome.ok, "failures": outcome.failures,
        "t0_epoch_s": outcome.t0_epoch_s, "ended_epoch_s": outcome.ended_epoch_s,
        "start_lateness_ms": outcome.start_lateness_ms, "host_steal_pct": outcome.host_steal_pct, **clock,
    }))
    return outcome.failures


def _cut_short(trial: Trial, run_dir: Path, run_seed: int, why: str, progress: Progress, name: str, data_dir: Path) -> None:
    """The disk filled up during this run: it is marked failed, the campaign ends here."""
    marked = files.cut_short(run_dir, {**trial.run_keys(run_seed), "ok": False, "failures": [f"cut short: {why}"]})
    progress.ended(f"{name} FAILED: cut short, the disk is full")
    progress.write(f"pantheon: the disk of {data_dir} is full: {name} was cut short "
                   f"({'marked failed in its run.json' if marked else 'no room even for its run.json'}) and the campaign "
                   f"stops here; every finished run is intact", sys.stderr)


def _merge(run_dir: Path, plan: Plan, t0_epoch_s: float, outcome: Outcome, mode: Mode) -> dict:
    """Merges the run's logs into its records (failures go to `outcome`); returns run.json's
    clock keys: in remote mode "clock" (the fit) and "flags" (records.clock_flags)."""
    # Imported here: pyarrow takes ~0.2 s to load, which `pantheon sim` (whose records
    # pantheon-sim writes itself) and the quick subcommands should not pay.
    from pantheon.harness import records

    try:
        peer = mode.peer_clock(run_dir)
    except PantheonError as e:
        outcome.failures.append(f"clock: {e}")
        return {}
    try:
        summary = records.merge_run(run_dir, plan, t0_epoch_s, peer_clock=peer)
        records.merge_transfers(run_dir, plan, t0_epoch_s, HEAD_START_S)
    except records.RecordsError as e:
        outcome.failures.append(str(e))
        return {}
    outcome.failures += [f"flow {i} ({plan.flows[i].scheme}) moved no data" for i in summary.silent_flows]
    if peer is None:
        return {}
    return {"clock": peer.fit.to_json(), "flags": records.clock_flags(summary, peer.fit)}
