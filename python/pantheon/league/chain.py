"""A topology of one or two links, run for real over a chain of emulators, so that a simulated
cell of a parking lot can be spot-checked (issue 36 §3): the simulator runs topologies
(crates/sim/src/topology.rs), the emulator reaches them by nesting, as Mahimahi's shells nest
(docs/emulator.md, "Chains"), and this runs one over the other and measures each flow as the
analysis measures every run.

    from pantheon import topology
    from pantheon.league.chain import emulate_topology, supported
    parking_lot = topology.load("parking-lot-2")
    assert supported(parking_lot) is None
    flows = emulate_topology(parking_lot, ["cubic", "cubic", "cubic"], duration_s=8, seed=1, run_dir=Path("run"))
    flows[0]["throughput_mbps"], flows[0]["delay_p95_ms"]

Where everything runs. The links in series are [first, second] (the order the routes cross them);
the first crossed is the inner emulator, the second the outer one, and every route is a contiguous
run of the series:

    run namespace (pantheon-run-PID-N)              depth 0
      ├─ tunnel servers of routes ending beyond the second link
      └─ pantheon-emu (second link) ─ middle namespace    depth 1
           ├─ tunnel servers of routes [first]; tunnel clients of routes [second]
           └─ pantheon-emu (first link) ─ inner namespace     depth 2
                └─ tunnel clients of routes [first, second] and [first]

A flow is the harness's (harness/local.py does the same over one link): its sender behind a
tunnel client where its route starts, its receiver behind a tunnel server where it ends, each side
under a launcher released by the harness's own schedule (harness/run.py: the receiver first, the
sender a second later, both stopped at the flow's end), pantheon-udp running the flow's crates/cc
spec as the simulator runs it. The tunnel logs every datagram where it enters and where it leaves
(docs/tunnel.md), with 36 bytes of encapsulation that make the 1464-byte datagram the simulator
counts 1500 on each link; every endpoint reads this host's clock, so a one-way delay is a
difference of two log times. harness/records.py merges the logs into records.parquet and the
analysis (`read_records`, `run_metrics`) computes the metrics: throughput over the delivery span,
the nearest-rank p95 one-way delay (docs/analysis.md).

A client reaches a server beyond the second link at the outer emulator's peer ($MAHIMAHI_BASE,
which a nested emulator keeps for its command), and a server in the middle namespace at the middle
namespace's own address on the outer link, which only that namespace knows: the outer emulator's
command is `python -m pantheon.league.chain` (`main`), which finds it, writes it into both agents'
plans (the middle namespace's servers listen on it: MIDDLE) and then is the harness's agent
(harness/agent.py) for the middle namespace, the inner emulator one of the processes it starts and
ends.

Seeds: link k of the topology (its place in `link`) gets `--seed` link_seed(seed, k), the seed
pantheon-sim gives that link's pair of paths (topology.rs), so a link's losses and Poisson
deliveries are the same draws in both drivers. What the simulator draws besides (the hosts'
latencies and stalls, the link clock's phase) the machine does here.
"""
from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from pantheon import schemes
from pantheon.analysis.logs import read_records
from pantheon.analysis.metrics import FlowMetrics, run_metrics
from pantheon.binaries import binary
from pantheon.errors import PantheonError
from pantheon.harness import agent, leftovers, tunnel
from pantheon.harness.local import EmulatedPath, check_emulator_options
from pantheon.harness.records import merge_run
from pantheon.harness.run import Run, SessionKeys, scheme_side, side_name, wait_for_connect_line
from pantheon.netns import in_netns, require_root
from pantheon.plan import Flow, Plan
from pantheon.processes import lifeline
from pantheon.topology import Topology, link_seed

MAX_LINKS = 2
"""Links a chain of emulators can be: a third level's replies would need a route in the middle
namespace that no emulator makes (docs/emulator.md, "Chains")."""
CARRIER = "cubic-user"
"""The pantheon-udp scheme whose manifest carries every flow: its sender's `--cc` is replaced by
the flow's spec (Scheme.command), so the scheme's name is a carrier, not the controller."""
MIDDLE = "$CHAIN_MIDDLE"
"""Stands for the middle namespace's address in the agents' plans, until `main` knows it. A tunnel
server there listens on that address, not on every address: its answers must come from the address
its client sends to, and the kernel would answer a client beyond the first link from the first
link's end (100.64.a.5) instead."""
MIDDLE_PORT = 40_000
"""Flow i's tunnel server in the middle namespace listens on MIDDLE_PORT + i: the namespace is the
chain's alone, so no port is taken there."""
METRICS = ("throughput_mbps", "delay_p95_ms", "delay_mean_ms", "loss_rate", "ce_rate", "sent_packets",
           "delivered_packets")
"""Each flow's result: pantheon.sim.batch.FlowMetrics's fields, the analysis's numbers."""
OWN_OPTIONS = ("--seed", "--uplink-log", "--downlink-log", "--uplink-mm-log", "--downlink-mm-log")
"""Options the chain sets on each emulator itself; a link's path may not."""
_numbers = itertools.count(1_000_000)
"""The run namespace's N, apart from a campaign's runs (leftovers.run_namespace)."""


class ChainError(PantheonError, RuntimeError):
    """A topology the chain cannot emulate, or an emulated run that failed: one line."""


def series(topology: Topology) -> list[str]:
    """The links in the order data crosses them: a route of two links gives it, otherwise (links
    side by side) the file's order."""
    return list(next((route for route in topology.routes if len(route) == MAX_LINKS),
                     [link.name for link in topology.links]))


def supported(topology: Topology) -> str | None:
    """None when the chain can run the topology (pantheon.topology checked the file: its links,
    names and routes), else one line why not: at most two links, each route a contiguous run of
    the series [first, second], no option the chain sets itself."""
    if not 1 <= len(topology.links) <= MAX_LINKS:
        return f"{len(topology.links)} links: a chain of emulators has one or two (docs/emulator.md, \"Chains\")"
    for link in topology.links:
        if own := [w for w in link.path if w in OWN_OPTIONS]:
            return f"link {link.name}: {own[0]} is set by the chain, not by a link"
    order = series(topology)
    runs = [tuple(order[i:j]) for i in range(len(order)) for j in range(i + 1, len(order) + 1)]
    for flow, route in enumerate(topology.routes):
        if route not in runs:
            return (f"the route of flow {flow}, {' -> '.join(route)}, is not a contiguous run of "
                    f"the chain {' -> '.join(order)}")
    return None


class ChainedPath(EmulatedPath):
    """The harness's endpoints (harness/run.py's Endpoints) over a chain of emulators: the run
    namespace, the emulators nested in it, each flow's tunnel endpoints at the depths its route
    starts and ends (module header). Signalling, checking and stopping are local mode's."""

    def __init__(self, *, topology: Topology, seed: int, namespace: str, run_dir: Path) -> None:
        super().__init__(emulator_options=[], namespace=namespace, run_dir=run_dir)
        self.topology, self.seed = topology, seed

    def _emulator(self, name: str, command: list[str]) -> list[str]:
        """pantheon-emu as link `name`, seeded as pantheon-sim seeds it, logging if it is the log link."""
        names = [link.name for link in self.topology.links]
        k = names.index(name)
        options = list(self.topology.links[k].path)
        if name == (self.topology.log_link or names[0]):
            options += ["--uplink-log", str(self.dir / "uplink.log"), "--downlink-log", str(self.dir / "downlink.log")]
        return [str(binary("pantheon-emu")), *options, "--seed", str(link_seed(self.seed, k)), "--", *command]

    def start(self, run: Run) -> None:
        self.names = run.names()
        order = series(self.topology)
        subprocess.run(["ip", "netns", "add", self.namespace], check=True)
        subprocess.run(in_netns(self.namespace, ["ip", "link", "set", "lo", "up"]), check=True)
        self.keys = SessionKeys()
        # Depth -> the tunnel endpoints the agent there starts.
        plans: dict[int, list[dict]] = {depth: [] for depth in range(1, len(order) + 1)}
        for i, flow in enumerate(run.plan.flows):
            route = self.topology.routes[i]
            first = order.index(route[0])
            sender_depth, receiver_depth = len(order) - first, len(order) - first - len(route)
            key = self.keys.new(i)
            scheme = run.schemes[flow.scheme]
            receiver, sender = side_name(i, "receiver"), side_name(i, "sender")
            receiver_side = scheme_side(self.control, receiver, scheme, "receiver", ecn=False)
            receiver_logs = tunnel.EndpointLogs.under(self.dir, receiver, clock=False)
            out = self.dir / f"flow{i}.tunnel-server.out"
            if receiver_depth == 0:
                server = tunnel.server_command(receiver_logs, key, receiver_side)
                started = self.processes.spawn(f"tunnel server of flow {i}", in_netns(self.namespace, server), out, receiver)
                _, port = wait_for_connect_line(started, out, f"flow {i}: the tunnel server")
                address = f"$MAHIMAHI_BASE:{port}"
            else:
                address = f"{MIDDLE}:{MIDDLE_PORT + i}"
                server = tunnel.server_command(receiver_logs, key, receiver_side, listen=address)
                plans[receiver_depth].append({"name": receiver, "stdout": str(out), "argv": server})
            sender_side = scheme_side(self.control, sender, scheme, "sender", ecn=False, spec=flow.cc)
            sender_logs = tunnel.EndpointLogs.under(self.dir, sender, clock=False)
            plans[sender_depth].append({"name": sender, "stdout": str(self.dir / f"flow{i}.tunnel-client.out"),
                                        "argv": tunnel.client_command(address, key, sender_logs, sender_side)})
        files = {depth: self.control / f"agent.{depth}.json" for depth in plans}

        def agent_command(depth: int) -> list[str]:
            return [sys.executable, "-m", "pantheon.harness.agent", str(self.control), str(lifeline()), str(files[depth])]

        outer_command = agent_command(1)
        if len(order) == MAX_LINKS:
            plans[1].append({"name": f"the emulator of link {order[0]}", "stdout": str(self.dir / "emulator.inner.out"),
                             "argv": self._emulator(order[0], agent_command(2))})
            outer_command = [sys.executable, "-m", "pantheon.league.chain", str(self.control), str(lifeline()),
                             str(files[1]), str(files[2])]
        for depth, plan in plans.items():
            files[depth].write_text(json.dumps(plan))
        outer = self._emulator(order[-1], outer_command)
        self.processes.spawn(f"emulator of link {order[-1]}", in_netns(self.namespace, outer), self.dir / "emulator.out")


def _numbers_of(metrics: FlowMetrics | None) -> dict:
    if metrics is None:
        return {"throughput_mbps": 0.0, "delay_p95_ms": None, "delay_mean_ms": None, "loss_rate": None, "ce_rate": None,
                "sent_packets": 0, "delivered_packets": 0}
    return {name: getattr(metrics, name) for name in METRICS}


def emulate_topology(topology: Topology, ccs: Sequence[str], duration_s: float, seed: int, run_dir: Path,
                     starts_s: Sequence[float] | None = None) -> list[dict]:
    """Runs flow i (crates/cc spec ccs[i], over routes[i]) from starts_s[i] (default 0) to
    `duration_s` over the chain, in real time, and returns each flow's METRICS, flow 0 first.
    `run_dir` (created; it must not hold a run) keeps the tunnel logs, records.parquet and the
    emulators' outputs. A topology the chain cannot run, or a run that fails, is a ChainError;
    whatever happens, every process and namespace the run made is gone when this returns."""
    if why := supported(topology):
        raise ChainError(why)
    starts = [0.0] * len(ccs) if starts_s is None else [float(s) for s in starts_s]
    if not ccs or len(ccs) > len(topology.routes) or len(starts) != len(ccs):
        raise ChainError(f"{len(ccs)} flows with {len(starts)} starts over {len(topology.routes)} routes: give one spec "
                         f"(and start) per flow, at most one flow per route")
    if not all(0 <= s < duration_s for s in starts):
        raise ChainError(f"every flow must start within the run's {duration_s:g} s")
    require_root("emulating a topology")
    for k, link in enumerate(topology.links):
        try:
            check_emulator_options([*link.path, "--seed", str(link_seed(seed, k))])
        except PantheonError as e:
            raise ChainError(f"link {link.name}: {e}") from None
    run_dir.mkdir(parents=True, exist_ok=True)
    if (run_dir / "control").exists():
        raise ChainError(f"{run_dir} holds a run already: give a new directory")
    flows = tuple(Flow(scheme=CARRIER, start_s=s, duration_s=duration_s - s, cc=cc) for cc, s in zip(ccs, starts, strict=True))
    plan = Plan(label="chain", flows=flows, runtime_s=duration_s)
    namespace = leftovers.run_namespace(os.getpid(), next(_numbers))
    endpoints = ChainedPath(topology=topology, seed=seed, namespace=namespace, run_dir=run_dir)
    run = Run(plan=plan, schemes={CARRIER: schemes.registry().schemes[CARRIER]}, run_dir=run_dir, endpoints=endpoints)
    outcome = run.execute(lambda now_s, total_s: None)
    if not outcome.ok or outcome.t0_epoch_s is None:
        raise ChainError(f"the emulated run in {run_dir} failed: {outcome.failures[0] if outcome.failures else 'no start'}")
    merge_run(run_dir, plan, outcome.t0_epoch_s)
    events, _ = read_records(run_dir / "records.parquet")
    measured = {m.flow: m for m in run_metrics(events).flows}
    return [_numbers_of(measured.get(str(i + 1))) for i in range(len(ccs))]


def _address_towards(peer: str) -> str:
    """This namespace's own address on the way to `peer` (a UDP socket's connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((peer, 9))
        return str(s.getsockname()[0])


def main(argv: list[str]) -> int:
    """The outer emulator's command: puts this (middle) namespace's address into both agents' plans,
    then is the middle namespace's agent (harness/agent.py), the inner emulator among its processes.

        python -m pantheon.league.chain CONTROL_DIR LIFELINE_FD MIDDLE_PLAN_JSON INNER_PLAN_JSON
    """
    control, fd, middle, inner = argv
    address = _address_towards(os.environ["PANTHEON_PEER"])
    for plan in (Path(middle), Path(inner)):
        entries = json.loads(plan.read_text())
        for entry in entries:
            entry["argv"] = [arg.replace(MIDDLE, address) for arg in entry["argv"]]
        plan.write_text(json.dumps(entries))
    return agent.main([control, fd, middle])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
