"""Local mode: an experiment over an emulated path on this machine, every flow through an
instrumented tunnel (`pantheon test local`, and the demo). Checks what was asked before the first
run starts, so a mistake costs no run: the schemes, and the path's options, judged by the emulator
itself.

A run's endpoints (`EmulatedPath`):

    run namespace (pantheon-run-PID-N)
      ├─ tunnel server ─ own namespace ─ launcher ─ scheme receiver      (one per flow)
      └─ pantheon-emu ─ emulated namespace ─ agent
                                               └─ tunnel client ─ own namespace ─ launcher ─ scheme sender

Data flows on the emulator's uplink.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pantheon import schemes
from pantheon.analysis.cli import after_campaign
from pantheon.binaries import binary
from pantheon.errors import PantheonError
from pantheon.experiment import Experiment, describe_path, uplink_rate_mbps
from pantheon.harness import leftovers, tunnel
from pantheon.harness.campaign import run_campaign
from pantheon.harness.run import SIDES, Processes, Run, SessionKeys, scheme_side, side_name, wait_for_connect_line
from pantheon.harness.transfers import TransferFiles, write_schedule
from pantheon.netns import in_netns, require_root
from pantheon.plan import Plan
from pantheon.processes import lifeline
from pantheon.workload import peak_arrivals_per_s


class EmulatedPath:
    """Local mode's endpoints: a private namespace for the whole run, the emulator in it; flow
    servers on the far side of the emulated path, their clients (started by the emulator's agent,
    agent.py) inside it."""

    def __init__(self, *, emulator_options: list[str], namespace: str, run_dir: Path) -> None:
        self.emulator_options, self.namespace = emulator_options, namespace
        self.dir, self.control = run_dir, run_dir / "control"
        self.processes = Processes(self.control)
        self.keys: SessionKeys | None = None
        self.names: list[str] = []

    def start(self, run: Run) -> None:
        self.names = run.names()
        subprocess.run(["ip", "netns", "add", self.namespace], check=True)
        subprocess.run(in_netns(self.namespace, ["ip", "link", "set", "lo", "up"]), check=True)
        self.keys = SessionKeys()
        clients = []
        for i, flow in enumerate(run.plan.flows):
            scheme = run.schemes[flow.scheme]
            key = self.keys.new(i)
            transfers = TransferFiles.under(self.dir, i) if flow.transfers else None
            if transfers:
                write_schedule(flow, transfers.schedule)
            receiver = scheme_side(self.control, side_name(i, "receiver"), scheme, "receiver", ecn=flow.ecn,
                                   transfers=transfers)
            out = self.dir / f"flow{i}.tunnel-server.out"
            server = self.processes.spawn(f"tunnel server of flow {i}", in_netns(self.namespace, tunnel.server_command(
                tunnel.EndpointLogs.under(self.dir, side_name(i, "receiver"), clock=False), key, receiver)), out, side_name(i, "receiver"))
            _, port = wait_for_connect_line(server, out, f"flow {i}: the tunnel server")
            sender = scheme_side(self.control, side_name(i, "sender"), scheme, "sender", ecn=flow.ecn, spec=flow.cc,
                                 transfers=transfers)
            clients.append({
                "name": side_name(i, "sender"),
                "argv": tunnel.client_command(f"$MAHIMAHI_BASE:{port}", key, tunnel.EndpointLogs.under(self.dir, side_name(i, "sender"), clock=False),
                                              sender, flow.extra_delay_ms),
                "stdout": str(self.dir / f"flow{i}.tunnel-client.out"),
            })
        plan_file = self.control / "agent.json"
        plan_file.write_text(json.dumps(clients))
        agent = [sys.executable, "-m", "pantheon.harness.agent", str(self.control), str(lifeline()), str(plan_file)]
        emulate = [str(binary("pantheon-emu")), *self.emulator_options,
                   "--uplink-log", str(self.dir / "uplink.log"), "--downlink-log", str(self.dir / "downlink.log"), "--", *agent]
        self.processes.spawn("emulator", in_netns(self.namespace, emulate), self.dir / "emulator.out")

    def local_sides(self) -> tuple[str, ...]:
        return SIDES

    def signal(self, files: list[str]) -> None:
        for name in files:
            (self.control / name).touch()

    def check(self) -> None:
        self.processes.check(self.dir)

    def stop(self) -> list[str]:
        self.signal([f"{name}.stop" for name in self.names] + ["agent.stop"])
        try:
            failures = self.processes.end()
        finally:
            leftovers.remove_namespace(self.namespace)
            if self.keys:
                self.keys.remove()
        return failures


class Emulated:
    """Local mode in a campaign: run K's emulator gets `--seed` seed_of(seed, K)."""

    def __init__(self, emulator_options: list[str]) -> None:
        self.emulator_options = emulator_options

    def metadata(self, seed: int) -> dict:
        return {"emulator_options": [*self.emulator_options, "--seed", str(seed)]}

    def endpoints(self, index: int, run_seed: int, run_dir: Path) -> EmulatedPath:
        return EmulatedPath(emulator_options=[*self.emulator_options, "--seed", str(run_seed)],
                            namespace=leftovers.run_namespace(os.getpid(), index), run_dir=run_dir)

    def peer_clock(self, run_dir: Path) -> None:
        return None

    def broken(self) -> None:
        return None


def check_emulator_options(options: list[str]) -> None:
    """Lets the emulator itself judge the options once, in a scratch namespace, so a bad value
    stops the campaign before it starts with the emulator's own one-line message."""
    name = leftovers.check_namespace(os.getpid())
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        done = subprocess.run(["ip", "netns", "exec", name, str(binary("pantheon-emu")), *options, "--", "true"],
                              capture_output=True, text=True)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
    if done.returncode != 0:
        raise PantheonError(done.stderr.strip().removeprefix("pantheon emulate: ") or f"emulator exited {done.returncode}")


MAX_ARRIVALS_PER_S = 200
"""Most transfers a run may begin within any one second over the emulator: the transfer driver
begins 200 a second on time on the 2-core development machine (bench/transfer_starts.py); more
would start late and measure the harness, not the scheme."""


def check_transfers(plan: Plan, known: schemes.Registry) -> None:
    """A PantheonError, before anything runs, for transfers the emulated experiment cannot run: a
    scheme without finite transfers (Scheme.transfer_mode), or more arrivals in a second than the
    harness begins on time (the simulator has neither limit)."""
    for i, flow in enumerate(plan.flows, start=1):
        if flow.transfers and known.schemes[flow.scheme].transfer_mode() is None:
            raise PantheonError(f"flow {i} ({flow.scheme}, {flow.role}): {flow.scheme} cannot run finite transfers over "
                                f"the emulator (kernel TCP and pantheon-udp schemes can: docs/harness.md)")
    starts = [t.start_s for flow in plan.flows for t in flow.transfers]
    if (peak := peak_arrivals_per_s(starts)) > MAX_ARRIVALS_PER_S:
        raise PantheonError(f"{plan.label}: {peak} transfers begin within one second, more than the {MAX_ARRIVALS_PER_S} "
                            f"the emulated harness begins on time: lower the load, use larger sizes, or run it in "
                            f"pantheon sim")


def run_local(experiment: Experiment, *, random_order: bool, analyze: bool, arguments: dict) -> int:
    """Runs the experiment, then (`analyze`) the analysis of its data dir; 0 when every run
    succeeded and every scheme asked for ran, else 1. `arguments` is the command's record for
    metadata.json. Raises Interrupted on Ctrl-C or SIGTERM."""
    require_root("pantheon test local")
    emulator_options = experiment.expanded_path_options()
    check_emulator_options([*emulator_options, "--seed", str(experiment.seed)])
    known = schemes.registry()

    def expected_skip(name: str) -> bool:
        return name in known.schemes and known.schemes[name].unavailable_reason() is not None

    selection = experiment.select(every=known.names(), problem=known.problem, verb="run",
                                  skip_line="pantheon: skipping {name}: {why}", expected_skip=expected_skip,
                                  ecn_problem=known.ecn_problem, rate_mbps=uplink_rate_mbps(emulator_options) if experiment.scenario else None)
    for plan in selection.plans:
        check_transfers(plan, known)
    used = {name: known.schemes[name] for plan in selection.plans for name in plan.schemes}
    failed = run_campaign(plans=selection.plans, schemes=used, mode=Emulated(emulator_options),
                          data_dir=experiment.data_dir, run_times=experiment.run_times, random_order=random_order,
                          seed=experiment.seed, quiet=experiment.quiet, arguments=arguments, skipped=selection.skipped,
                          path=describe_path(emulator_options, experiment.emulator))
    if analyze:
        after_campaign(experiment.data_dir, experiment.quiet)
    if selection.not_run:
        print(f"pantheon: not run: {', '.join(selection.not_run)} (see the lines at the start)", file=sys.stderr)
    return 1 if failed or selection.not_run else 0
