#!/usr/bin/env python3
"""Fidelity matrix: the simulator against the emulator, cell by cell (issue 38 §1).

What is measured
    A cell is a scheme, a path, a buffer and 1 or 2 flows (bench/support/fidelity.py defines them):
    every scheme the simulator runs (a registry scheme whose sender is pantheon-udp with a crates/cc
    controller: pantheon.sim.simulable) and the kernel's Cubic, BBR and Reno, which run only in the
    emulator and are compared with their userspace twins in the simulator (cubic-user, bbr-user,
    reno-user; the rows marked `kernel`); the demo's path and every preset in presets/; a shallow
    (half a bandwidth-delay product) and a deep (four) uplink buffer, the path's own discipline kept.
    Each cell runs in `pantheon test local` (the real emulator, tunnels and sockets), emulated run K on
    the emulator's `--seed K`, and in the simulator (`pantheon-sim batch`, the runs `pantheon sim`
    makes), simulated run K on seed K, with the same options. Metrics, the same in both: the flows'
    total throughput and the mean of their p95 one-way delays.

      tput Mbit/s   mean over runs of the cell's throughput
      p95 ms        mean over runs of the cell's p95 one-way delay
      ±             half-width of the mean's 95% confidence interval (Student's t)
      Δ             (sim − emu) / emu of the means, ± the 95% interval of the difference of the
                    means (Welch), relative to the emulator's mean
      replay Δ      the mean over emulated runs of (replay − emu) / emu, ± its 95% interval: each
                    emulated run replayed in the simulator on the same draw of delivery
                    opportunities, each flow started where it started emulated (pantheon.sim.replay),
                    so the path's randomness cancels and what is left is the simulator's model of
                    the hosts (docs/sim.md)
      verdict       `ok`: |Δ| ≤ 10% on both metrics (the issue's bound); `flag`: beyond, with the
                    cause the runs measure: `draws` (the replays agree within 10%: the runs' luck
                    on the path and the hosts, not the model), `stolen` (the replays differ, and
                    the hypervisor took more than 2% of the CPUs' time in an emulated run: the
                    host was not the quiet one the simulator models; harness/steal.py), `hosts`
                    (the replays differ beyond 10% on a quiet host: the simulator's model of the
                    hosts), `unresolved` (no replay, and
                    Δ's interval reaches back within the bound: more runs would tell), `2 flows`
                    (beyond the bound, a two-flow run recorded before two flows replayed), `twin` (a kernel row
                    whose userspace twin, emulated on the same seeds, differs from it beyond 10%:
                    the twin's difference from the kernel, not the simulator's; bench/twin_fidelity.py)

Why
    Calibration, Indigo, the league and Tao's optimiser run in the simulator and the emulator only
    confirms (issue 38): that is only sound where the simulator reproduces what the emulator
    measures, and the matrix says where, with intervals that say how sure.

Size: 18 simulable schemes + 3 kernel rows, 19 distinct paths (the buffer sweep's four presets scale
to one path), 2 buffers, 1 and 2 flows: 1 596 cells. The simulator side of all of them takes about
3 minutes; the emulator runs in real time (one campaign of every scheme, one seed, 10 s runs: about
4 minutes; the whole matrix with 3 runs about 15 hours), so it is gathered in pieces: `--keep DIR` keeps every campaign, and a later invocation
with the same DIR reuses what is there and runs only what is missing (`--runs 2` after `--runs 1`
runs seed 1; `--again-unless-quiet` emulates again, beside them, the runs whose host is not known to
have been quiet, and the quieter run counts). Each emulated run's figures and replay are also written to the record,
data/fidelity/emulated.json (committed; `--record FILE`), and a run that is there but not in DIR is
read from it and not run again: the matrix outlives the machine its data dirs were on. Selection:
--schemes, --kernel, --paths, --buffers, --flows.

Run as root, from the repository (cargo build --release and ./setup.sh first):
    python3 bench/sim_fidelity.py --keep DIR [--runs 3] [--sim-runs 20] [--runtime 10]
        [--paths demo,india-wired] [--buffers shallow,deep] [--flows 1,2] [--schemes copa,cubic-user]
        [--again-unless-quiet] [--sim-only] [--json FILE] [--markdown FILE] [--before-bin DIR] [--record FILE]

It prints a row per cell with emulated runs (--sim-only: the simulator's side of every selected
cell), writes every selected cell to DIR/matrix.json (or --json FILE), and with --markdown FILE the
summary by cause, the tables and the matrix's coverage as docs/fidelity-matrix.md carries them. --before-bin DIR adds the Δ of another
pantheon-sim build (PANTHEON_BIN_DIR=DIR) against the same emulated runs, and its replays' Δ.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import support
from pantheon.analysis.analyze import QUIET_STEAL_PCT, host_was_stolen
from pantheon.schemes import registry
from pantheon.sim import replay, simulator
from pantheon.sim.simulable import problem as simulable_problem
from pantheon.sim.simulable import simulable
from support import fidelity
from support.fidelity import KERNEL_TWINS, RECORD, Pair

REPO = support.REPO
BOUND = 0.10
FORMAT_VERSION = 1
"""matrix.json's format; a reader takes this version."""
RECORD_VERSION = 1
CAUSES = ("hosts", "2 flows", "unresolved", "twin", "draws", "stolen")
"""A flagged cell's causes, the one that says most against the simulator first: a cell counts under
its first."""


class Emulated(NamedTuple):
    """One emulated run of a cell: its figures (None: the analysis found it invalid), its replay,
    --before-bin's replay, and how much of the host's CPU time the hypervisor stole (None: not
    measured, as in runs recorded before the harness measured it)."""
    run: Pair | None
    replayed: Pair | None
    replayed_before: Pair | None
    steal_pct: float | None


@dataclass(frozen=True)
class Where:
    """A cell's path, buffer and flow count: one emulated campaign per seed, one simulated batch."""
    path: str
    buffer: str
    flows: int

    def dir(self, root: Path) -> Path:
        return root / self.path / self.buffer / f"{self.flows}flow"


@dataclass
class Cell:
    scheme: str
    sim_scheme: str
    where: Where
    emu: list[Pair] = field(default_factory=list)
    sim: list[Pair] = field(default_factory=list)
    replays: list[Pair] = field(default_factory=list)
    """One per emulated run, in the emulated runs' order."""
    steal_pcts: list[float] = field(default_factory=list)
    """The emulated runs' host steal, where measured."""
    invalid_emu: int = 0
    invalid_sim: int = 0
    before: list[Pair] = field(default_factory=list)
    replays_before: list[Pair] = field(default_factory=list)
    twin_emu: list[Pair] = field(default_factory=list)
    """A kernel scheme's cell: its userspace twin's emulated runs on the same place and seeds."""


def column(pairs: list[Pair], i: int) -> list[float]:
    return [p[i] for p in pairs]


def mean_ci(values: list[float]) -> dict:
    return {"mean": statistics.mean(values), "ci95": fidelity.half_width(values), "runs": len(values)}


def delta(emu: list[float], sim: list[float]) -> dict:
    e = statistics.mean(emu)
    return {"value": statistics.mean(sim) / e - 1, "ci95": fidelity.difference_half_width(sim, emu) / e}


def paired(emu: list[float], replayed: list[float]) -> dict:
    d = [r / e - 1 for e, r in zip(emu, replayed, strict=True)]
    return {"mean": statistics.mean(d), "ci95": fidelity.half_width(d)}


METRICS = (("tput", 0), ("p95", 1))


def judged(cell: Cell) -> dict:
    """The cell as matrix.json holds it: means, Δ, replays, verdict and cause."""
    w = cell.where
    out: dict = {"scheme": cell.scheme, "sim_scheme": cell.sim_scheme, "kernel": cell.scheme != cell.sim_scheme,
                 "path": w.path, "buffer": w.buffer, "flows": w.flows,
                 "buffer_bytes": fidelity.buffer_bytes(fidelity.all_paths()[w.path], w.buffer),
                 "invalid_emu_runs": cell.invalid_emu, "invalid_sim_runs": cell.invalid_sim}
    if cell.steal_pcts:
        out["emu_steal_pct"] = max(cell.steal_pcts)
        out["emu_steal_runs"] = len(cell.steal_pcts)
    if cell.sim:
        out["sim"] = {m: mean_ci(column(cell.sim, i)) for m, i in METRICS}
    if not cell.emu or not cell.sim:
        out["verdict"] = "not run" if not cell.emu else "no simulated run"
        return out
    out["emu"] = {m: mean_ci(column(cell.emu, i)) for m, i in METRICS}
    out["delta"] = {m: delta(column(cell.emu, i), column(cell.sim, i)) for m, i in METRICS}
    if cell.twin_emu:
        out["twin_delta"] = {m: delta(column(cell.emu, i), column(cell.twin_emu, i)) for m, i in METRICS}
    if cell.replays and len(cell.replays) == len(cell.emu):
        out["replay_delta"] = {m: paired(column(cell.emu, i), column(cell.replays, i)) for m, i in METRICS}
    if cell.before:
        out["before_delta"] = {m: delta(column(cell.emu, i), column(cell.before, i)) for m, i in METRICS}
    if cell.replays_before:
        out["before_replay_delta"] = {m: paired(column(cell.emu, i), column(cell.replays_before, i))
                                      for m, i in METRICS}
    beyond = [m for m, _ in METRICS if abs(out["delta"][m]["value"]) > BOUND]
    out["verdict"] = "flag" if beyond else "ok"
    if beyond:
        out["causes"] = {m: cause(out, m) for m in beyond}
    return out


def cause(cell: dict, metric: str) -> str:
    """Why a metric of the cell is beyond the bound: the kernel scheme's userspace twin is
    (`twin`); the emulated runs' own draws are, their replays agreeing (`draws`); the host was not
    quiet in an emulated run (`stolen`: its hypervisor took more of the CPUs' time than
    analyze.QUIET_STEAL_PCT); the hosts' timing is, the replays disagreeing too (`hosts`); a run
    without a replay could be within the bound (`unresolved`) or is not (`2 flows`, which only
    recorded two-flow runs lack)."""
    d = cell["delta"][metric]
    stolen = host_was_stolen(cell.get("emu_steal_pct"))
    if "twin_delta" in cell and abs(cell["twin_delta"][metric]["value"]) > BOUND:
        return "twin"
    if "replay_delta" in cell and abs(cell["replay_delta"][metric]["mean"]) <= BOUND:
        return "draws"
    if stolen:
        return "stolen"
    if "replay_delta" in cell:
        return "hosts"
    if abs(d["value"]) - d["ci95"] <= BOUND:
        return "unresolved"
    return "2 flows"


@contextmanager
def bin_dir(directory: Path | None) -> Iterator[None]:
    """pantheon.binaries reads PANTHEON_BIN_DIR at each call: `directory`'s pantheon-sim meanwhile."""
    if directory is None:
        yield
        return
    kept = os.environ.get("PANTHEON_BIN_DIR")
    os.environ["PANTHEON_BIN_DIR"] = str(directory)
    try:
        yield
    finally:
        if kept is None:
            del os.environ["PANTHEON_BIN_DIR"]
        else:
            os.environ["PANTHEON_BIN_DIR"] = kept


def path_file(root: Path, where: Where) -> Path:
    """The cell's path as a preset file, which both drivers read (`--emulator FILE`)."""
    target = where.dir(root) / "path.toml"
    text = fidelity.scaled(fidelity.all_paths()[where.path], where.buffer).toml(
        f"fidelity matrix: {where.path}, {where.buffer} buffer (bench/support/fidelity.py)")
    if not target.exists() or target.read_text() != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return target


def simulated_side(root: Path, where: Where, specs: dict[str, str], runs: int, runtime_s: float, build: str,
                   before_bin: Path | None) -> tuple[dict[str, list[Pair | None]], dict[str, list[Pair | None]]]:
    """Seeds 0..runs-1 of each scheme, from DIR's sim-<T>s-<build>.json where they are there (the
    simulator is deterministic; `build` names the pantheon-sim binary, whose controllers and
    Indigo's weights are built in), run otherwise; and --before-bin's, never kept."""
    cache = fidelity.simulated_seeds_file(where.dir(root), runtime_s, build)
    kept: dict[str, dict[str, list[float] | None]] = json.loads(cache.read_text()) if cache.exists() else {}
    preset = fidelity.scaled(fidelity.all_paths()[where.path], where.buffer)
    traces = where.dir(root) / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    missing = {name: spec for name, spec in specs.items()
               if any(str(seed) not in kept.get(name, {}) for seed in range(runs))}
    if missing:
        seeds = range(runs)
        for name, by_seed in fidelity.simulated(preset, missing, where.flows, runtime_s, seeds, traces).items():
            kept.setdefault(name, {}).update({str(s): (list(p) if p else None) for s, p in by_seed.items()})
        cache.write_text(json.dumps(kept))
    sim = {name: [_pair(kept[name][str(s)]) for s in range(runs)] for name in specs}
    before: dict[str, list[Pair | None]] = {}
    if before_bin:
        with bin_dir(before_bin):
            got = fidelity.simulated(preset, specs, where.flows, runtime_s, range(runs), traces)
        before = {name: [got[name][s] for s in range(runs)] for name in specs}
    return sim, before


def _pair(value: list[float] | None) -> Pair | None:
    return None if value is None else (value[0], value[1])


class Record:
    """The emulated runs' figures, kept in the repository (data/fidelity/emulated.json) so that the
    matrix outlives the data dirs it was gathered in: per run (place, run length, seed, scheme), the
    run's throughput and p95 and its replay in the simulator with the build that replayed it. A run
    whose data dir is gone is read from here (its replay then is of the build the record names); a
    run whose data dir is there is read from it and written here."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.runs: dict[str, dict] = {}
        if path is not None and path.exists():
            got = json.loads(path.read_text())
            if got.get("format_version") != RECORD_VERSION:
                sys.exit(f"sim_fidelity: {path}: record format {got.get('format_version')}, this script reads "
                         f"{RECORD_VERSION}; pass another --record")
            self.runs = got["runs"]

    @staticmethod
    def key(where: Where, runtime_s: float, seed: int, scheme: str) -> str:
        return f"{where.path} {where.buffer} {where.flows} {runtime_s:g}s seed{seed} {scheme}"

    def get(self, key: str) -> Emulated | None:
        """A recorded run (without --before-bin's replay), or None if it is not recorded."""
        entry = self.runs.get(key)
        if entry is None:
            return None
        replayed = entry.get("replay")
        return Emulated(_pair(entry["emu"]), None if replayed is None else (replayed["tput"], replayed["p95"]), None,
                        entry.get("steal_pct"))

    def put(self, key: str, run: Emulated, spec: str, build: str) -> None:
        replayed = run.replayed
        self.runs[key] = {"emu": None if run.run is None else list(run.run),
                          "replay": None if replayed is None else {"spec": spec, "build": build,
                                                                   "tput": replayed[0], "p95": replayed[1]},
                          "steal_pct": run.steal_pct}

    def save(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lines = ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(self.runs.items()))
            self.path.write_text(f'{{"format_version": {RECORD_VERSION}, "runs": {{\n{lines}\n}}}}\n')  # a run a line


def emulated_side(root: Path, where: Where, schemes: list[str], runs: int, runtime_s: float, specs: dict[str, str],
                  build: str, sim_only: bool, before_bin: Path | None,
                  record: Record, again_unless_quiet: bool = False) -> dict[str, list[Emulated]]:
    """Each scheme's emulated runs on seeds 0..runs-1, each with its replay, --before-bin's replay
    and its host's steal. Campaigns in DIR are reused, and runs
    whose campaign is not in DIR are read from the record; a seed's schemes in neither run in one
    more campaign beside them (`seed<K>/part<I>`), and so do, with `again_unless_quiet`, those whose
    host is not known to have been quiet (its steal not measured, or analyze.host_was_stolen).
    Where a scheme has run more than once on a seed, the matrix takes the run on the quietest host
    (the least steal; the latest of equals)."""
    base = where.dir(root) / f"emu-{runtime_s:g}s"
    out: dict[str, list[Emulated]] = {}
    for seed in range(runs):
        seed_dir = base / f"seed{seed}"
        parts = sorted(seed_dir.glob("part*/perf.json"), key=lambda perf: int(perf.parent.name[len("part"):])) \
            if seed_dir.exists() else []
        found = quietest({perf.parent: fidelity.steal_pcts(perf) for perf in parts})
        recorded = {s: got for s in schemes if s not in found
                    and (got := record.get(Record.key(where, runtime_s, seed, s))) is not None}
        steal = {**{s: got.steal_pct for s, got in recorded.items()}, **{s: pct for s, (_, pct) in found.items()}}
        missing = [s for s in schemes if s not in steal or (again_unless_quiet and not _quiet(steal[s]))]
        if missing and not sim_only:
            data_dir = seed_dir / f"part{len(parts)}"
            shutil.rmtree(data_dir, ignore_errors=True)
            started = time.monotonic()
            print(f"  emulating {where.path} {where.buffer} {where.flows} flow(s), seed {seed}: {len(missing)} schemes "
                  f"x {runtime_s:g} s ...", file=sys.stderr, flush=True)
            fidelity.emulated(path_file(root, where), missing, where.flows, runtime_s, seed, data_dir,
                              timeout_s=len(missing) * (3 * runtime_s + 60) + 120)
            print(f"  ... {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            again = quietest({data_dir: fidelity.steal_pcts(data_dir / "perf.json")})
            for name, (run_dir, pct) in again.items():
                if name not in steal or not _quieter(steal[name], pct):
                    found[name] = (run_dir, pct)
                    recorded.pop(name, None)
        for name in schemes:
            if name in recorded:
                out.setdefault(name, []).append(recorded[name])
            if name not in found:
                continue
            run_dir, steal_pct = found[name]
            pair = fidelity.perf_pairs(run_dir / "perf.json")[name][0]
            replayed = replayed_before = None
            spec = specs[KERNEL_TWINS.get(name, name)]
            if pair is not None:
                replayed = cached_replay(run_dir, name, spec, build, None)
                if before_bin:
                    replayed_before = cached_replay(run_dir, name, spec, build, before_bin)
            run = Emulated(pair, replayed, replayed_before, steal_pct)
            record.put(Record.key(where, runtime_s, seed, name), run, spec, build)
            out.setdefault(name, []).append(run)
    return out


def _quiet(steal_pct: float | None) -> bool:
    """Whether a run's host is known to have been quiet: its steal measured, and under the bound."""
    return steal_pct is not None and not host_was_stolen(steal_pct)


def _quieter(a: float | None, b: float | None) -> bool:
    """Whether a host that lost a% of its CPU time to the hypervisor was quieter than one that lost
    b% (an unmeasured host is not known to be quiet: it loses to a measured one)."""
    return a is not None and (b is None or a < b)


def quietest(parts: dict[Path, dict[str, list[float | None]]]) -> dict[str, tuple[Path, float | None]]:
    """Of the campaigns of a seed (each data dir with its schemes' steal, in the order they ran),
    each scheme's run on the quietest host, and its steal."""
    out: dict[str, tuple[Path, float | None]] = {}
    for data_dir, schemes in parts.items():
        for name, (pct, *_) in schemes.items():
            if name not in out or not _quieter(out[name][1], pct):
                out[name] = (data_dir, pct)
    return out


def cached_replay(data_dir: Path, name: str, spec: str, build: str, before_bin: Path | None) -> Pair | None:
    """The emulated run's replay in the simulator, its flows on their emulated starts (replay.json
    beside it, for one build; --before-bin's never kept); None when a replayed flow delivered nothing."""
    kept = data_dir / name / "replay.json"
    if before_bin is None and kept.exists():
        got = json.loads(kept.read_text())
        if got.get("spec") == spec and got.get("build") == build and "pair" in got:
            return _pair(got["pair"])
    options = json.loads((data_dir / "metadata.json").read_text())["emulator_options"]
    what = replay.replay_of(data_dir / name / "run1", options, spec)
    with tempfile.TemporaryDirectory(prefix="fidelity-replay-") as scratch, bin_dir(before_bin):
        flows = replay.run(what, Path(scratch))
    pair = fidelity.pair((f["throughput_mbps"], f["delay_p95_ms"]) for f in flows)
    if before_bin is None:
        kept.write_text(json.dumps({"spec": spec, "build": build, "pair": None if pair is None else list(pair)}))
    return pair


def selected(text: str, known: list[str], what: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"sim_fidelity: unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def wheres(paths: list[str], buffers: list[str], flows: list[int]) -> tuple[list[Where], dict[Where, str]]:
    """The distinct cells' places, and for each selected place that scales to another path, that path."""
    out: list[Where] = []
    same: dict[Where, str] = {}
    for path in paths:
        for buffer in buffers:
            first = fidelity.canonical(path, buffer)
            for n in flows:
                if first != path:
                    same[Where(path, buffer, n)] = first
                if Where(first, buffer, n) not in out:
                    out.append(Where(first, buffer, n))
    return out, same


def pct(d: dict) -> str:
    ci = d["ci95"]
    return f"{d['value'] if 'value' in d else d['mean']:+.1%}" + ("" if math.isinf(ci) else f"±{ci:.0%}")


def mci(m: dict, digits: int = 2) -> str:
    ci = m["ci95"]
    return f"{m['mean']:.{digits}f}" + ("" if math.isinf(ci) else f"±{ci:.{digits}f}")


def verdict(c: dict) -> str:
    """`ok`, or `flag:` and each metric's cause with the figure that names it."""
    if c["verdict"] != "flag":
        return c["verdict"]
    said = []
    for metric, why in c["causes"].items():
        figure = {"twin": ("twin_delta", "value", "twin"), "draws": ("replay_delta", "mean", "replay"),
                  "hosts": ("replay_delta", "mean", "replay")}.get(why)
        if why == "stolen":
            said.append(f"{metric} stolen ({c['emu_steal_pct']:.1f}% of the CPUs)")
            continue
        said.append(f"{metric} {why}" + (f" ({figure[2]} {c[figure[0]][metric][figure[1]]:+.0%})" if figure else ""))
    return "flag: " + ", ".join(said)


def text_row(c: dict) -> str:
    name = c["scheme"] + (" (k)" if c["kernel"] else "")
    head = f"{name:<17} {c['path']:<24} {c['buffer']:<7} {c['flows']:>1} "
    if "emu" not in c:
        if "sim" not in c:
            return head + c["verdict"]
        return head + f"{'':>13} {mci(c['sim']['tput']):>13} {'':>11} {'':>13} {mci(c['sim']['p95'], 1):>13}"
    r = c.get("replay_delta")
    row = (head + f"{mci(c['emu']['tput']):>13} {mci(c['sim']['tput']):>13} {pct(c['delta']['tput']):>11} "
           f"{mci(c['emu']['p95'], 1):>13} {mci(c['sim']['p95'], 1):>13} {pct(c['delta']['p95']):>11} "
           f"{pct(r['tput']) if r else '-':>11} {pct(r['p95']) if r else '-':>11} "
           f"{c['emu']['tput']['runs']}/{c['sim']['tput']['runs']}  {verdict(c)}")
    if "before_delta" in c:
        b, rb = c["before_delta"], c.get("before_replay_delta")
        row += f"  before: {pct(b['tput'])} {pct(b['p95'])}" + (f" replay {pct(rb['tput'])} {pct(rb['p95'])}" if rb else "")
    return row


def display_name(c: dict) -> str:
    return c["scheme"] + (" (kernel)" if c["kernel"] else "")


def by_buffer_and_flows(cells: list[dict]) -> dict[tuple[str, int], list[dict]]:
    """The cells of each buffer and flow count, in the order they first come."""
    out: dict[tuple[str, int], list[dict]] = {}
    for c in cells:
        out.setdefault((c["buffer"], c["flows"]), []).append(c)
    return out


def delta_table(chosen: list[dict], names: list[str]) -> list[str]:
    """Δ tput / Δ p95 of one buffer and flow count's cells: a row per scheme, a column per path."""
    paths = list(dict.fromkeys(c["path"] for c in chosen))
    by_key = {(display_name(c), c["path"]): c for c in chosen}
    lines = ["| scheme | " + " | ".join(paths) + " |", "|---" * (len(paths) + 1) + "|"]
    for name in names:
        entries = []
        for path in paths:
            c = by_key.get((name, path))
            d = [] if c is None else [c["delta"][m]["value"] * 100 for m, _ in METRICS]
            entries.append(" / ".join(f"**{v:+.1f}**" if abs(v) > BOUND * 100 else f"{v:+.1f}" for v in d) or "–")
        lines.append(f"| {name} | " + " | ".join(entries) + " |")
    return lines


def summary(run: list[dict]) -> list[str]:
    """Per buffer and flow count: the cells within the bound and the flagged ones by cause."""
    lines = ["| buffer, flows | places | cells | within 10% | " + " | ".join(f"`{k}`" for k in CAUSES) + " |",
             "|---" * (4 + len(CAUSES)) + "|"]
    groups = [(f"{b}, {n}", chosen) for (b, n), chosen in by_buffer_and_flows(run).items()]
    for label, chosen in [*groups, ("all", run)]:
        counts = dict.fromkeys(CAUSES, 0)
        for c in chosen:
            if c["verdict"] == "flag":
                counts[next(k for k in CAUSES if k in c["causes"].values())] += 1
        ok = sum(c["verdict"] == "ok" for c in chosen)
        places = len({(c["path"], c["buffer"], c["flows"]) for c in chosen})
        lines.append(f"| {label} | {places} | {len(chosen)} | {ok} ({ok / len(chosen):.0%}) | "
                     + " | ".join(str(counts[k]) for k in CAUSES) + " |")
    return lines


def on_a_quiet_host(cell: dict) -> bool:
    """Whether every emulated run of a cell was on a host whose steal was measured and quiet."""
    return cell.get("emu_steal_runs", 0) == cell["emu"]["tput"]["runs"] and not host_was_stolen(cell["emu_steal_pct"])


def markdown(cells: list[dict], same: dict[Where, str], command: str) -> str:
    """docs/fidelity-matrix.md: the summary by cause, Δ tput / Δ p95 of every cell with emulated runs
    (a table per buffer and flow count, a row per scheme and a column per path), the flagged cells in
    full with their causes, and the coverage."""
    run = [c for c in cells if "emu" in c]
    flagged = [c for c in run if c["verdict"] == "flag"]
    names = list(dict.fromkeys(display_name(c) for c in cells))
    lines = ["# The fidelity matrix, cell by cell", "",
             f"Written by `{command}` (bench/sim_fidelity.py; docs/sim.md, \"The fidelity matrix\", says what a "
             "cell is and what its causes mean).", "",
             f"Cells with emulated runs: {len(run)} of {len(cells)} selected; within 10% on both metrics: "
             f"{len(run) - len(flagged)}; flagged: {len(flagged)}.", ""]
    if run:
        lines += summary(run)
    for (buffer, flows), chosen in by_buffer_and_flows(run).items():
        lines += ["", f"## {buffer.capitalize()} buffer, {flows} flow{'s' if flows > 1 else ''}", "",
                  "Each entry: Δ throughput / Δ p95, (sim − emu) / emu of the means in %, **bold** beyond 10%.", "",
                  *delta_table(chosen, names)]
    if flagged:
        lines += ["", "## Flagged cells", "", "Mean ± 95% interval; runs emulated/simulated; replay Δ: each emulated "
                  "run replayed in the simulator on its own draw.", "",
                  "| scheme | path | buffer | flows | emu Mbit/s | sim Mbit/s | Δ tput | emu p95 ms | sim p95 ms | Δ p95 "
                  "| replay Δ tput | replay Δ p95 | runs | cause |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in flagged:
            r = c.get("replay_delta")
            lines.append(f"| {display_name(c)} | {c['path']} | {c['buffer']} ({c['buffer_bytes']:,} B) | {c['flows']} "
                         f"| {mci(c['emu']['tput'])} | {mci(c['sim']['tput'])} | {pct(c['delta']['tput'])} "
                         f"| {mci(c['emu']['p95'], 1)} | {mci(c['sim']['p95'], 1)} | {pct(c['delta']['p95'])} "
                         f"| {pct(r['tput']) if r else '–'} | {pct(r['p95']) if r else '–'} "
                         f"| {c['emu']['tput']['runs']}/{c['sim']['tput']['runs']} | {verdict(c).removeprefix('flag: ')} |")
    by_place: dict[tuple[str, str, int], list[dict]] = {}
    for c in cells:
        by_place.setdefault((c["path"], c["buffer"], c["flows"]), []).append(c)
    lines += ["", "## Coverage", "", "Cells on a quiet host: every emulated run's host steal measured and at most "
              f"{QUIET_STEAL_PCT:g}% (harness/steal.py).", "",
              "| path | buffer | flows | schemes run | emulated runs | simulated seeds | cells on a quiet host |",
              "|---|---|---|---|---|---|---|"]
    remaining, remaining_cells = [], 0
    for (path, buffer, flows), group in by_place.items():
        done = [c for c in group if "emu" in c]
        if not done:
            remaining.append(f"{path} {buffer} {flows}")
            remaining_cells += len(group)
            continue
        runs = sorted({c["emu"]["tput"]["runs"] for c in done})
        seeds = max((c["sim"]["tput"]["runs"] for c in group if "sim" in c), default=0)
        lines.append(f"| {path} | {buffer} ({group[0]['buffer_bytes']:,} B) | {flows} | {len(done)} of {len(group)} | "
                     f"{'–'.join(map(str, sorted({runs[0], runs[-1]})))} | {seeds} | {sum(map(on_a_quiet_host, done))} |")
    if remaining:
        lines += ["", f"Not emulated yet ({len(remaining)} places, {remaining_cells} cells; their simulator side is in "
                  "matrix.json): " + ", ".join(remaining) + "."]
    if same:
        lines += ["", "Same paths once scaled: " + "; ".join(
            sorted({f"{w.path} {w.buffer} = {first}" for w, first in same.items()})) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    known = registry()
    # A simulable scheme that cannot run here (tao before its tree is trained and committed) is left
    # out; naming it in --schemes says why.
    specs = {name: spec for name, spec in simulable(known).items() if simulable_problem(known, name) is None}
    paths = list(fidelity.all_paths())
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: flock /work/bench.lock python3 bench/sim_fidelity.py --keep /tmp/m "
                                     "--paths demo --buffers deep --flows 1 --runs 1")
    parser.add_argument("--runs", type=int, default=3, help="emulated runs per cell (seeds 0..N-1; default 3)")
    parser.add_argument("--sim-runs", type=int, default=20, help="simulated runs per cell (seeds 0..N-1; default 20)")
    parser.add_argument("--runtime", type=float, default=10.0, help="seconds each run lasts (default 10)")
    parser.add_argument("--schemes", default=",".join(specs), help="simulable schemes (default: all)")
    parser.add_argument("--kernel", default=",".join(KERNEL_TWINS),
                        help="kernel schemes against their userspace twins ('' for none)")
    parser.add_argument("--paths", "--presets", default=",".join(paths),
                        help="demo and presets (default: all; --presets is the older name)")
    parser.add_argument("--buffers", default="shallow,deep",
                        help="shallow (0.5 BDP), deep (4 BDP), own (the path as shipped); default shallow,deep")
    parser.add_argument("--flows", default="1,2", help="flows per run: 1, 2 or both (default 1,2)")
    parser.add_argument("--sim-only", action="store_true", help="the simulator's side only; no emulated run")
    parser.add_argument("--keep", type=Path, help="data dir of the matrix; what is there is reused")
    parser.add_argument("--again-unless-quiet", action="store_true",
                        help="emulate again each selected run whose host is not known to have been quiet (its steal "
                        f"not measured, or more than {QUIET_STEAL_PCT:g}%% of its CPU time); the quieter run counts")
    parser.add_argument("--json", type=Path, help="the selected cells as JSON (default DIR/matrix.json)")
    parser.add_argument("--markdown", type=Path, help="the measured cells, by cause and in full, and the coverage, "
                        "as docs/fidelity-matrix.md carries them")
    parser.add_argument("--before-bin", type=Path, help="a directory with another pantheon-sim: its Δ too")
    parser.add_argument("--record", default=str(RECORD),
                        help="the emulated runs' figures, read where DIR lacks a run and written with what DIR has "
                        "(default data/fidelity/emulated.json, committed; '' for none)")
    args = parser.parse_args()
    # A scheme left out of specs says why (unknown, not a crates/cc scheme, a file it needs missing).
    if missing := next((n for n in args.schemes.split(",") if n and n not in specs), None):
        sys.exit(f"sim_fidelity: {missing}: {simulable_problem(known, missing)}")
    schemes = selected(args.schemes, list(specs), "scheme")
    kernel = selected(args.kernel, list(KERNEL_TWINS), "kernel scheme")
    buffers = selected(args.buffers, [*fidelity.BUFFERS, fidelity.OWN], "buffer")
    flows = [int(n) for n in selected(args.flows, ["1", "2"], "flow count")]
    places, same = wheres(selected(args.paths, paths, "path"), buffers, flows)
    sim_schemes = list(dict.fromkeys([*schemes, *(KERNEL_TWINS[k] for k in kernel)]))
    sim_specs = {name: specs[name] for name in sim_schemes}
    root = args.keep or Path(tempfile.mkdtemp(prefix="sim-fidelity-"))
    simulator_version = simulator.version()
    build = simulator_version["binary_sha256"][:12]
    record = Record(Path(args.record) if args.record else None)
    print(f"{len(places)} places x {len(schemes) + len(kernel)} schemes; {args.runs} emulated and {args.sim_runs} "
          f"simulated runs x {args.runtime:g} s; mean ± 95% interval; Δ = (sim − emu) / emu ± 95% (Welch)")
    print(f"{'scheme':<17} {'path':<24} {'buffer':<7} F {'emu tput':>13} {'sim tput':>13} {'Δ tput':>11} "
          f"{'emu p95':>13} {'sim p95':>13} {'Δ p95':>11} {'replay tput':>11} {'replay p95':>11} runs  verdict")
    cells: list[dict] = []
    for where in places:
        path_file(root, where)
        sim, before = simulated_side(root, where, sim_specs, args.sim_runs, args.runtime, build, args.before_bin)
        emu = emulated_side(root, where, schemes + kernel, args.runs, args.runtime, specs, build, args.sim_only,
                            args.before_bin, record, args.again_unless_quiet)
        record.save()
        for name in schemes + kernel:
            twin = KERNEL_TWINS.get(name, name)
            cell = Cell(name, twin, where)
            cell.sim = [p for p in sim[twin] if p is not None]
            cell.invalid_sim = sum(p is None for p in sim[twin])
            cell.before = [p for p in before.get(twin, []) if p is not None]
            if twin != name:
                cell.twin_emu = [t.run for k, t in zip(emu.get(name, []), emu.get(twin, []), strict=False)
                                 if k.run is not None and t.run is not None]
            for emulated in emu.get(name, []):
                if emulated.run is None:
                    cell.invalid_emu += 1
                    continue
                cell.emu.append(emulated.run)
                if emulated.replayed is not None:
                    cell.replays.append(emulated.replayed)
                if emulated.replayed_before is not None:
                    cell.replays_before.append(emulated.replayed_before)
                if emulated.steal_pct is not None:
                    cell.steal_pcts.append(emulated.steal_pct)
            c = judged(cell)
            cells.append(c)
            if "emu" in c or args.sim_only:
                print(text_row(c), flush=True)
    run = [c for c in cells if "emu" in c]
    flagged = [c for c in run if c["verdict"] == "flag"]
    print(f"cells: {len(cells)} selected, {len(run)} with emulated runs; within {BOUND:.0%} on both metrics: "
          f"{len(run) - len(flagged)}; flagged: {len(flagged)}")
    command = "python3 bench/sim_fidelity.py " + " ".join(sys.argv[1:])
    matrix = {"format_version": FORMAT_VERSION, "command": command, "bound": BOUND, "runtime_s": args.runtime,
              "simulator": simulator_version,
              "cells": cells,
              "same_paths": [{"path": w.path, "buffer": w.buffer, "flows": w.flows, "same_as": first}
                             for w, first in same.items()]}
    json_path = args.json or root / "matrix.json"
    json_path.write_text(json.dumps(matrix, indent=1))
    print(f"cells as JSON: {json_path}")
    if args.markdown:
        args.markdown.write_text(markdown(cells, same, command))
        print(f"Markdown: {args.markdown}")


if __name__ == "__main__":
    main()
