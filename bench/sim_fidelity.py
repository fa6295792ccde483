#!/usr/bin/env python3
"""Fidelity: the simulator against the emulator, scheme by scheme, path by path.

What is measured
    Each userspace scheme (pantheon-udp over a crates/cc controller) runs over each preset in
    `pantheon sim` (virtual time, docs/sim.md) and in `pantheon test local` (the real emulator,
    tunnels and sockets), with the same options. Emulated run K uses the emulator's `--seed K`
    (one campaign per run: a campaign's runs share its seed, and over a Poisson path they would
    all see the same delivery opportunities); simulated run K uses seed K too (`pantheon sim
    --run-times` numbers its seeds from `--seed`). The kernel's Cubic, BBR and Reno run only in
    the emulator; they are compared with their userspace versions in the simulator (cubic-user,
    bbr-user, reno-user), the rows marked `kernel`.

      tput Mbit/s   mean over runs of the flow's throughput (perf.json, docs/analysis.md)
      p95 ms        mean over runs of the flow's p95 one-way delay
      ±             half-width of the mean's 95% confidence interval (Student's t)
      Δ             (sim − emu) / emu of the means, with the 95% interval of the difference of
                    the means (Welch), relative to the emulator's mean; `*` marks a difference
                    above 10% (the issue's bound), `!` one whose interval excludes 0 as well
      replay Δ      the mean over emulated runs of (replay − emu) / emu, ± its 95% interval: each
                    emulated run replayed in the simulator on the same draw of delivery
                    opportunities (pantheon.sim.replay), so the path's randomness cancels and
                    what is left is the simulator's model of the hosts (docs/sim.md)

    Presets (python/pantheon/presets.py): a wired path (india-wired, 100 Mbit/s), a cellular Poisson
    path (mexico-cellular), a policer (policer-12mbps-10ms) and a buffer-sweep point
    (buffer-30000b).

Why
    Calibration and Indigo's training replace thousands of real-time runs with simulated ones
    (issue 7); that is only sound if the simulator reproduces what the emulator measures. Over a
    slow Poisson path a run's p95 delay is bimodal (the queue fills or it does not, depending on
    the draw of opportunities in the first seconds): a single run says little, and the intervals
    say how many runs a difference needs.

The emulator runs in real time on this machine's two cores: all schemes × 4 presets × 10 runs of
30 s take hours, so `--runs`, `--sim-runs` and `--runtime` pick a smaller sweep, and the output says
which. The simulator is cheap: `--sim-runs` may be larger than `--runs` (more seeds, a narrower
interval on its side).

Run as root, from the repository (cargo build --release and ./setup.sh first):
    python3 bench/sim_fidelity.py [--runs 10] [--sim-runs 40] [--runtime 30] [--schemes copa,vegas-user]
        [--presets india-wired] [--keep DIR] [--before-bin DIR]

With --keep, campaigns already there are reused (the replays are redone), so a long sweep can be
gathered preset by preset and seed by seed under the bench lock. --before-bin DIR adds the Δ of
another pantheon-sim (PANTHEON_BIN_DIR=DIR; e.g. a build of an older host model) against the same
emulated runs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import support
from pantheon.schemes import registry
from pantheon.sim import replay
from pantheon.sim.simulable import cc_spec

REPO = support.REPO

PANTHEON = REPO / ".venv" / "bin" / "pantheon"
USERSPACE = ["copa", "copa-0.1", "vegas-user", "cubic-user", "reno-user", "bbr-user", "ledbat-user",
             "pcc-allegro", "pcc-vivace", "sprout", "verus", "scream"]
KERNEL_TWINS = {"cubic": "cubic-user", "bbr": "bbr-user", "reno": "reno-user"}
PRESETS = ["india-wired", "mexico-cellular", "policer-12mbps-10ms", "buffer-30000b"]
BOUND = 0.10
# Student's t, two-sided 95%, by degrees of freedom (1..30); above 30, the normal's 1.96 is within 4%.
T_975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042]

Runs = dict[str, list[tuple[float, float]]]
"""Per scheme, each valid run's (throughput Mbit/s, p95 delay ms)."""


def t_975(df: float) -> float:
    return T_975[max(1, math.floor(df)) - 1] if df < len(T_975) + 1 else 1.96


def half_width(values: list[float]) -> float:
    """Half-width of the 95% confidence interval of the mean (inf with one value)."""
    if len(values) < 2:
        return math.inf
    return t_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def difference_half_width(a: list[float], b: list[float]) -> float:
    """Half-width of Welch's 95% interval of mean(a) − mean(b)."""
    if len(a) < 2 or len(b) < 2:
        return math.inf
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return 0.0
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return t_975(df) * math.sqrt(va + vb)


def campaign(mode: list[str], schemes: list[str], preset: str, runs: int, seed: int, runtime_s: int,
             data_dir: Path, env: dict[str, str] | None = None) -> Runs:
    """Each scheme's valid runs of one campaign (`runs` runs from seed `seed`), run unless
    `data_dir` has it."""
    perf_path = data_dir / "perf.json"
    argv = [str(PANTHEON), *mode, "--schemes", ",".join(schemes), "--emulator", preset, "--run-times", str(runs),
            "--seed", str(seed), "--runtime", str(runtime_s), "--data-dir", str(data_dir), "--quiet"]
    done = None if perf_path.exists() else subprocess.run(argv, capture_output=True, text=True, env=env)
    if done is not None and not perf_path.exists():
        sys.exit(f"{' '.join(mode)} on {preset} wrote no perf.json (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    out: Runs = {}
    for name, scheme in json.loads(perf_path.read_text())["schemes"].items():
        flows = [run["flows"]["all"] for run in scheme["runs"].values() if run["valid"]]
        out[name] = [(f["throughput_mbps"], f["delay_p95_ms"]) for f in flows]
    return out


def replayed_by(bin_dir: Path | None, what: replay.Replay, out_dir: Path) -> dict:
    """The replay's flow metrics, by the pantheon-sim in `bin_dir` (None: this checkout's)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    if bin_dir is None:
        return replay.run(what, out_dir)
    # pantheon.binaries reads PANTHEON_BIN_DIR at each call.
    kept = os.environ.get("PANTHEON_BIN_DIR")
    os.environ["PANTHEON_BIN_DIR"] = str(bin_dir)
    try:
        return replay.run(what, out_dir)
    finally:
        if kept is None:
            del os.environ["PANTHEON_BIN_DIR"]
        else:
            os.environ["PANTHEON_BIN_DIR"] = kept


def emulated(schemes: list[str], preset: str, runs: int, runtime_s: int, root: Path,
             before_bin: Path | None) -> tuple[Runs, Runs, Runs]:
    """`runs` emulated runs per scheme, run K on the emulator's seed K, and each one's replay in the
    simulator (a kernel scheme's by its userspace twin), and by `before_bin`'s when given."""
    known = registry()
    out: Runs = {}
    replays: Runs = {}
    replays_before: Runs = {}
    for k in range(runs):
        data_dir = root / f"seed{k}"
        for name, values in campaign(["test", "local"], schemes, preset, 1, k, runtime_s, data_dir).items():
            out.setdefault(name, []).extend(values)
            spec = cc_spec(known.schemes[KERNEL_TWINS.get(name, name)])
            options = json.loads((data_dir / "metadata.json").read_text())["emulator_options"]
            if values and spec:
                what = replay.replay_of(data_dir / name / "run1", options, spec)
                flow = replayed_by(None, what, data_dir / name / "replay")
                replays.setdefault(name, []).append((flow["throughput_mbps"], flow["delay_p95_ms"]))
                if before_bin:
                    flow = replayed_by(before_bin, what, data_dir / name / "replay-before")
                    replays_before.setdefault(name, []).append((flow["throughput_mbps"], flow["delay_p95_ms"]))
    return out, replays, replays_before


def paired(emu: list[float], replayed: list[float]) -> str:
    """Mean and 95% half-width of the runs' (replay − emu) / emu."""
    d = [r / e - 1 for e, r in zip(emu, replayed, strict=True)]
    return f"{statistics.mean(d):+6.1%}±{half_width(d):<5.0%}"


def cell(emu: list[float], sim: list[float]) -> str:
    """`emu±ci sim±ci Δ[±ci]` for one metric."""
    e, s = statistics.mean(emu), statistics.mean(sim)
    d = (s - e) / e if e else math.inf
    ci = difference_half_width(sim, emu) / e if e else math.inf
    flag = ("!" if abs(s - e) > difference_half_width(sim, emu) else "*") if abs(d) > BOUND else " "
    return f"{e:7.2f}±{half_width(emu):<6.2f} {s:7.2f}±{half_width(sim):<6.2f} {d:+6.1%}±{ci:<5.0%}{flag}"


def before_delta(emu_tput: list[float], emu_p95: list[float], before: list[tuple[float, float]] | None) -> str:
    """(before − emu) / emu of the means of both metrics, for --before-bin's simulator."""
    if not before:
        return "-"
    tput, p95 = (statistics.mean(c) for c in zip(*before))
    return f"{tput / statistics.mean(emu_tput) - 1:+6.1%} {p95 / statistics.mean(emu_p95) - 1:+6.1%}"


def replay_before(emu_tput: list[float], emu_p95: list[float], replays: list[tuple[float, float]] | None) -> str:
    """The paired replay Δ of both metrics by --before-bin's simulator."""
    if not replays:
        return "-"
    tput, p95 = (list(c) for c in zip(*replays))
    return f"{paired(emu_tput, tput)} {paired(emu_p95, p95)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="emulated runs per scheme and preset")
    parser.add_argument("--sim-runs", type=int, help="simulated runs per scheme and preset (default: --runs)")
    parser.add_argument("--runtime", type=int, default=30)
    parser.add_argument("--schemes", default=",".join(USERSPACE))
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--kernel", default=",".join(KERNEL_TWINS), help="kernel schemes to compare ('' for none)")
    parser.add_argument("--keep", type=Path, help="keep the data dirs here; campaigns already there are reused")
    parser.add_argument("--before-bin", type=Path,
                        help="a directory with another pantheon-sim: its Δ against the same emulated runs too")
    args = parser.parse_args()
    sim_runs = args.sim_runs or args.runs
    schemes = [s for s in args.schemes.split(",") if s]
    kernel = [k for k in args.kernel.split(",") if k]
    twins = [KERNEL_TWINS[k] for k in kernel if KERNEL_TWINS[k] not in schemes]
    root = args.keep or Path(tempfile.mkdtemp(prefix="sim-fidelity-"))
    print(f"{args.runs} emulated and {sim_runs} simulated runs x {args.runtime} s per scheme and preset; "
          "mean ± 95% interval; Δ = (sim − emu) / emu ± 95% interval (Welch)")
    print(f"{'scheme':<13} {'preset':<20} {'emu tput':>14} {'sim tput':>14} {'Δ tput':>13} "
          f"{'emu p95':>14} {'sim p95':>14} {'Δ p95':>13}  {'replay Δ tput':>13} {'replay Δ p95':>13}  runs"
          + ("  before: Δ tput, Δ p95, replay Δ tput, replay Δ p95" if args.before_bin else ""))
    worst: list[tuple[float, str]] = []
    for preset in args.presets.split(","):
        t0 = time.monotonic()
        sim = campaign(["sim"], schemes + twins, preset, sim_runs, 0, args.runtime, root / preset / "sim")
        sim_s = time.monotonic() - t0
        before = campaign(["sim"], schemes + twins, preset, sim_runs, 0, args.runtime, root / preset / "sim-before",
                          dict(os.environ, PANTHEON_BIN_DIR=str(args.before_bin))) if args.before_bin else {}
        emu, replayed, replayed_before = emulated(schemes + kernel, preset, args.runs, args.runtime,
                                                  root / preset / "emu", args.before_bin)
        rows = [(s, s, "") for s in schemes] + [(k, KERNEL_TWINS[k], " kernel") for k in kernel]
        for emu_name, sim_name, note in rows:
            if not emu.get(emu_name) or not sim.get(sim_name):
                print(f"{emu_name:<13} {preset:<20} missing: emu {'ok' if emu.get(emu_name) else '-'}, "
                      f"sim {'ok' if sim.get(sim_name) else '-'}")
                continue
            e, s = emu[emu_name], sim[sim_name]
            (et, ed), (st, sd) = ([list(c) for c in zip(*e)], [list(c) for c in zip(*s)])
            rt, rd = [list(c) for c in zip(*replayed[emu_name])]
            print(f"{emu_name:<13} {preset:<20} {cell(et, st)} {cell(ed, sd)}  {paired(et, rt)} {paired(ed, rd)}"
                  f"  {len(e)}/{len(s)}{note}" + (f"  {before_delta(et, ed, before.get(sim_name))}  {replay_before(et, ed, replayed_before.get(emu_name))}"
                     if args.before_bin else ""))
            worst.append((max(abs(statistics.mean(st) / statistics.mean(et) - 1),
                              abs(statistics.mean(sd) / statistics.mean(ed) - 1)), f"{emu_name} on {preset}"))
        print(f"  ({preset}: simulated campaign {sim_s:.1f} s wall)")
    worst.sort(reverse=True)
    within = sum(1 for d, _ in worst if d <= BOUND)
    print(f"within {BOUND:.0%} on both metrics: {within}/{len(worst)}; largest: "
          + ", ".join(f"{what} {d:.0%}" for d, what in worst[:3]))
    if not args.keep:
        print(f"data: {root}")


if __name__ == "__main__":
    main()
