"""An emulated run replayed in the simulator on the same path: the same delivery opportunities,
drops and delays, so that what differs is the simulator's model of the hosts and nothing else.

Why: over a Poisson path (the cellular presets) two runs with different draws of opportunities
differ far more than the simulator and the emulator do. Copa's p95 one-way delay over
mexico-cellular ranges from 160 to 780 ms from seed to seed in either, because whether a flow
fills the 130-packet buffer early decides the rest of the run; comparing means needs tens of runs
per side. Replayed on the same draw, an emulated run and its simulated twin agree run by run until the
emulated hosts do something no model replays: over mexico-cellular, of 20 runs of PCC Vivace the
datagrams sent in the first 3 s agreed within 1% in throughput and p95 delay in 19 (`first_seconds`);
in the 20th the emulated sender sent one datagram 8.7 ms late at 0.39 s, a monitor interval's
utility came out lower, and from 0.9 s on the two sent at half and twice the rate. Over 8 s, 7 of
the 20 stayed within 10%: a chaotic controller forks at the first such hiccup (docs/sim.md), so
a replay compares a run's first seconds, and longer runs compare in the mean of many.

How: pantheon-emu's random streams (Poisson opportunities, loss) are seeded by `--seed` and start
with its link clock, which starts before the flow does: the harness starts the emulator, the
tunnel and the scheme's first side, and releases the sender `HEAD_START_S` later. The first data
datagram on the uplink log (1500 bytes on the path, docs/tunnel.md) marks the flow's start on the
link's clock; the simulated flow starts at that instant of a run with the same options and seed,
so it sees the same opportunities at the same times. The tunnel's handshake datagram (44 bytes)
takes part of one opportunity in the emulator and is not replayed.

Several flows replay too: the uplink log does not say which flow a datagram belongs to, so the
first data datagram on it is the earliest flow's, and each other flow starts as much later as its
first datagram left its sender after the earliest flow's did (datalink.log, where every flow's
sends are on the one clock of the run).
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pantheon import link_log
from pantheon.analysis.logs import read_text_log
from pantheon.analysis.metrics import FlowMetrics, flow_metrics
from pantheon.errors import PantheonError
from pantheon.sim import simulator

DATA_PATH_BYTES = 1500
"""A data datagram on the emulator's path: 1464 inside the tunnel plus its 36 bytes."""
TAIL_S = 0.5
"""Simulated time after the flow's end, for its last datagrams in flight to arrive."""


@dataclass(frozen=True)
class Replay:
    flows: tuple[simulator.FlowArg, ...]
    """In the run's flow order (flow 1 first)."""
    path_options: list[str]
    """pantheon-emu's options as the emulated run got them, `--seed` left out."""
    seed: int
    runtime_s: float


def first_data_entry_us(uplink_log: Path) -> int:
    """Link time (µs) of the first data datagram entering the uplink (pantheon-emu's native log:
    `t_us + uid bytes`)."""
    entered_us = link_log.first_entry_us(uplink_log, DATA_PATH_BYTES)
    if entered_us is None:
        raise PantheonError(f"{uplink_log}: no data datagram entered the uplink")
    return entered_us


def first_sends_us(datalink_log: Path) -> dict[int, int]:
    """Each flow's first datagram into its tunnel, on the run's clock (µs), by flow number."""
    events, _ = read_text_log(datalink_log)
    return {flow: int(events.send_t_us[events.send_flow == flow].min())
            for flow in np.unique(events.send_flow).tolist()}


def replay_of(run_dir: Path, emulator_options: list[str], spec: str) -> Replay:
    """The simulated run of controller `spec` (a crates/cc spec) that replays emulated run
    `run_dir`, whose data dir's metadata.json gave `emulator_options`, on the run's own seed."""
    run = json.loads((run_dir / "run.json").read_text())
    flows = run["flows"]
    at = emulator_options.index("--seed")
    seed = int(run["seed"])
    path_options = emulator_options[:at] + emulator_options[at + 2:]
    first_s = first_data_entry_us(run_dir / "uplink.log") / 1e6
    lags_s = [0.0]
    if len(flows) > 1:
        firsts_us = first_sends_us(run_dir / "datalink.log")
        if missing := [k for k in range(1, len(flows) + 1) if k not in firsts_us]:
            raise PantheonError(f"{run_dir}: flow {missing[0]} sent nothing, so its start cannot be replayed")
        earliest_us = min(firsts_us.values())
        lags_s = [(firsts_us[k] - earliest_us) / 1e6 for k in range(1, len(flows) + 1)]
    replayed = tuple(simulator.FlowArg(spec, first_s + lag_s, float(f["duration_s"]))
                     for f, lag_s in zip(flows, lags_s, strict=True))
    end_s = max(f.start_s + (f.duration_s or 0.0) for f in replayed)
    return Replay(replayed, path_options, seed, end_s + TAIL_S)


def run(replay: Replay, out_dir: Path, text_logs: bool = False) -> list[dict]:
    """Runs the replay into `out_dir` (with text_logs, the tunnel's and the emulator's own logs
    too, as the emulated run has them); its flows' metrics (docs/sim.md, FLOW_METRICS), in order."""
    # Phase 0 and exact starts: the flows' starts are read off the run's logs, on the link's clock already.
    argv = simulator.run_command(out_dir, replay.flows, replay.path_options, replay.runtime_s, replay.seed,
                                 text_logs=text_logs, link_phase_us=0, exact_starts=True)
    done = subprocess.run(argv, capture_output=True, text=True, preexec_fn=simulator.die_with_parent)  # noqa: PLW1509
    if done.returncode != 0:
        raise simulator.SimError(simulator.message(done.stderr) or f"{simulator.PROGRAM} exited {done.returncode}")
    return simulator.parse_report(done.stdout)["flows"]


def first_seconds(datalink_log: Path, seconds: float) -> FlowMetrics:
    """The metrics (pantheon.analysis.metrics) of the datagrams a one-flow run sent in its first
    `seconds` from its first datagram, wherever they arrived, from the run's datalink.log: the same
    for an emulated run and for its replay, whose clocks start at different instants."""
    events, _ = read_text_log(datalink_log)
    until_us = int(events.send_t_us.min()) + round(seconds * 1e6)
    sent = events.send_t_us < until_us
    kept = events.recv_t_us - events.delay_us < until_us
    return flow_metrics("all", None, events.send_t_us[sent], events.send_bytes[sent], events.recv_t_us[kept],
                        events.recv_bytes[kept], events.delay_us[kept])
