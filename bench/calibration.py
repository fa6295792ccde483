#!/usr/bin/env python3
"""Calibration against a known truth: does `pantheon calibrate` recover the emulator a data dir was
made on, and how close does it come on a path its five parameters cannot describe (issue 17 §2)?

What is measured
    Data is made over a truth, RUNS runs of RUNTIME seconds per scheme, by `pantheon sim`
    (--source sim, seconds) or over the real emulator by `pantheon test local` (--source local:
    real time; the issue's target). The truth is either
      five (default)   one of our own five-parameter emulators: by default 20 Mbit/s constant,
                       25 ms, a 75 000-byte DropTail buffer, no loss (--rate, --delay, --buffer)
      trace:FILE,DELAY_MS,BUFFER_BYTES
                       a recorded Mahimahi trace (e.g. /usr/share/mahimahi/traces/
                       TMobile-LTE-short.up) as the data direction's delivery opportunities, with
                       a propagation delay and a DropTail buffer; the acknowledgements get FILE's
                       .down twin where there is one, else FILE. No five-parameter path
                       reproduces a varying rate: this is a path that can only be approximated.
    and, with --cross-traffic SCHEME,START_S,DURATION_S, each run also carries a flow of SCHEME
    (not measured: each scheme's runs are a scenario of its flow and that one, and the calibration
    leaves SCHEME's flows out, `pantheon calibrate --cross-traffic`), the other kind of path the
    five parameters can only approximate (--confirm re-runs the measured flows alone).
    Then `pantheon calibrate` runs on it once per sampler seed (with --confirm K: its K best
    candidates also run over the emulator, and the choice is the emulator's), and the table gives
    per seed:

      rate, delay, buffer   what it found, and (five-parameter truth) the error against the truth in %
      loss, delivery        what it found
      error %               the replication error of the chosen path, in the simulator
      emu %                 the same over the emulator (--confirm only)
      floor %               the noise floor (run halves against each other)
      model                 the model kept (--model: five, trace or both; both keeps the lower error)
      five %, trace %       each model's best replication error in the simulator (--model both)
      wall s                the calibration's wall time, end to end (search, confirmation, figures)

    With --hold-out S1,S2,... each of those schemes is held out in turn (leave-one-out, paper
    footnote 5): the path is fitted on the others and predicts it; a line per scheme gives the
    held-out scheme's error, and the mean.

    followed by the calibration's own tables (per scheme: real against simulated and, with
    --confirm, emulated throughput and p95 delay, the error and the floor) for the last seed.

Why
    A calibration that cannot find a path the five parameters describe exactly says nothing about
    paths they describe approximately; one that can is then measured on those (cellular traces,
    cross traffic: issue 17 §2; the paper's real paths: 13-25%).

The data dir is reused when --data-dir already holds one, so seeds and trial counts can be compared
on the same data (and data made in pieces, a scheme at a time, can be calibrated).

Run from the repository (cargo build --release and ./setup.sh first):
    python3 bench/calibration.py [--source sim|local] [--truth five|trace:FILE,DELAY_MS,BUFFER_BYTES]
        [--cross-traffic SCHEME,START_S,DURATION_S] [--runs 3] [--runtime 10] [--trials 200] [--seeds 1,2,3,4] [--confirm K]
        [--schemes cubic-user,bbr-user,copa,vegas-user] [--data-dir DIR] [--model five|trace|both]
        [--hold-out SCHEME,...]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
TRUTH = {"rate_mbps": 20.0, "delay_ms": 25.0, "buffer_bytes": 75_000}


@dataclass(frozen=True)
class Truth:
    toml: str
    """The truth as a preset file (presets.py's format)."""
    params: dict[str, float] | None
    """rate_mbps, delay_ms, buffer_bytes where the five parameters describe it; None for a trace."""
    text: str


def five_truth(rate_mbps: float, delay_ms: float, buffer_bytes: int) -> Truth:
    toml = (f'kind = "truth"\ndelay_ms = {delay_ms!r}\n[uplink]\nrate_mbps = {rate_mbps!r}\n'
            f"queue_bytes = {buffer_bytes}\n[downlink]\nrate_mbps = {rate_mbps!r}\n")
    return Truth(toml, {"rate_mbps": rate_mbps, "delay_ms": delay_ms, "buffer_bytes": buffer_bytes},
                 f"{rate_mbps:g} Mbit/s constant, {delay_ms:g} ms, {buffer_bytes} B, no loss")


def trace_truth(spec: str) -> Truth:
    """trace:FILE,DELAY_MS,BUFFER_BYTES; the downlink is FILE's .down twin where there is one."""
    try:
        name, delay, buffer = spec.removeprefix("trace:").split(",")
        uplink = Path(name)
        downlink = uplink.with_suffix(".down") if uplink.suffix == ".up" and uplink.with_suffix(".down").exists() else uplink
        up, down = ([int(line) for line in f.read_text().split()] for f in (uplink, downlink))
        delay_ms, buffer_bytes = float(delay), int(buffer)
    except (ValueError, OSError) as e:
        sys.exit(f"--truth {spec}: expected trace:FILE,DELAY_MS,BUFFER_BYTES with FILE a Mahimahi trace ({e})")
    toml = (f'kind = "truth"\ndelay_ms = {delay_ms!r}\n[uplink]\ntrace_ms = {up}\nqueue_bytes = {buffer_bytes}\n'
            f"[downlink]\ntrace_ms = {down}\n")
    mean_mbps = len(up) * 1500 * 8 / (up[-1] * 1000)
    return Truth(toml, None, f"{uplink.name} (mean {mean_mbps:.2f} Mbit/s over its {up[-1] / 1000:g} s; acknowledgements "
                             f"on {downlink.name}), {delay_ms:g} ms, {buffer_bytes} B")


def cross_traffic(spec: str | None) -> tuple[str, float, float] | None:
    """SCHEME,START_S,DURATION_S: a flow of SCHEME beside each measured one, not measured."""
    if spec is None:
        return None
    try:
        scheme, start, duration = spec.split(",")
        return scheme, float(start), float(duration)
    except ValueError:
        sys.exit(f"--cross-traffic {spec}: expected SCHEME,START_S,DURATION_S")


def make_data(args: argparse.Namespace, truth: Truth, data: Path) -> None:
    """RUNS runs of each scheme over the truth; with cross traffic each scheme's runs are a scenario
    (named after the scheme, so the runs are labelled by it) of its flow and the cross traffic's."""
    if (data / "metadata.json").exists():
        print(f"reusing the data in {data}", file=sys.stderr)
        return
    data.parent.mkdir(parents=True, exist_ok=True)
    preset = data.parent / "truth.toml"
    preset.write_text(truth.toml)
    command = ["sim", "--seed", "100"] if args.source == "sim" else ["test", "local"]
    common = ["--run-times", str(args.runs), "--emulator", str(preset), "--data-dir", str(data), "--no-analyze", "--quiet"]
    cross = cross_traffic(args.cross_traffic)
    if cross is None:
        what = [["--schemes", args.schemes, "--runtime", str(args.runtime)]]
    else:
        what = []
        for scheme in args.schemes.split(","):
            scenario = data.parent / f"{scheme}+cross.toml"
            scenario.write_text(f'name = "{scheme}"\nruntime_s = {args.runtime!r}\n'
                                f'[[flow]]\nscheme = "{scheme}"\nstart_s = 0\nduration_s = {args.runtime!r}\n'
                                f'[[flow]]\nscheme = "{cross[0]}"\nstart_s = {cross[1]!r}\nduration_s = {cross[2]!r}\n')
            what.append(["--scenario", str(scenario)])
    for options in what:
        done = subprocess.run([str(PANTHEON), *command, *options, *common], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"making the data failed: {done.stderr.strip()}")


def calibrate(args: argparse.Namespace, data: Path, seed: int, out: Path, hold_out: str | None = None
              ) -> tuple[dict, str, float]:
    shutil.rmtree(data / "calibration", ignore_errors=True)
    started = time.monotonic()
    done = subprocess.run([str(PANTHEON), "calibrate", str(data), "--trials", str(args.trials), "--seed", str(seed),
                           "--confirm", str(args.confirm), "--out", str(out), "--quiet", "--model", args.model,
                           *(["--hold-out", hold_out] if hold_out else []),
                           *(["--cross-traffic", args.cross_traffic.split(",")[0]] if args.cross_traffic else [])],
                          capture_output=True, text=True)
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"calibration failed: {done.stderr.strip()}")
    return json.loads(out.with_suffix(".json").read_text()), done.stdout, wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=("sim", "local"), default="sim")
    parser.add_argument("--truth", default="five", help="five (--rate, --delay, --buffer) or trace:FILE,DELAY_MS,BUFFER_BYTES")
    parser.add_argument("--cross-traffic", metavar="SCHEME,START_S,DURATION_S",
                        help="a flow of SCHEME beside each measured flow, which calibration leaves out")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--runtime", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--confirm", type=int, default=0)
    parser.add_argument("--schemes", default="cubic-user,bbr-user,copa,vegas-user")
    parser.add_argument("--rate", type=float, default=TRUTH["rate_mbps"])
    parser.add_argument("--delay", type=float, default=TRUTH["delay_ms"])
    parser.add_argument("--buffer", type=int, default=TRUTH["buffer_bytes"])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--model", default="both", help="pantheon calibrate --model: five, trace or both (default)")
    parser.add_argument("--hold-out", metavar="SCHEMES", help="leave-one-out: each of these schemes held out in turn "
                        "(first seed only)")
    args = parser.parse_args()
    truth = five_truth(args.rate, args.delay, args.buffer) if args.truth == "five" else trace_truth(args.truth)
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="calibration-bench-")) / "data"
    make_data(args, truth, root)
    cross = cross_traffic(args.cross_traffic)
    if cross:
        truth = replace(truth, text=f"{truth.text}; cross traffic: {cross[0]} from {cross[1]:g} s for {cross[2]:g} s")
    print(f"truth: {truth.text}; data: {args.source}, {args.runs} x {args.runtime:g} s of {args.schemes}; "
          f"{args.trials} trials" + (f", {args.confirm} confirmed over the emulator" if args.confirm else ""))
    print(f"{'seed':>4} {'rate':>8} {'err%':>5} {'delay':>7} {'err%':>5} {'buffer':>8} {'err%':>5} {'loss':>9} "
          f"{'delivery':>8} {'error%':>6} {'emu%':>6} {'floor%':>6} {'model':>5} {'five%':>6} {'trace%':>6} {'wall s':>6}")
    stdout = ""
    for seed in (int(s) for s in args.seeds.split(",")):
        summary, stdout, wall_s = calibrate(args, root, seed, root / f"bench-calibrated-seed{seed}.toml")
        path = summary["path"]
        off = {k: f"{100 * (path[k] - v) / v:+5.1f}" for k, v in (truth.params or {}).items()}
        emulated = summary["confirmation"][0]["emulated_error_pct"] if summary["confirmation"] else None
        models = {m: f"{v['replication_error_pct']:6.2f}" for m, v in summary["models"].items()}
        delivery = "trace" if summary["model"] == "trace" else "Poisson" if path["poisson"] else "constant"
        print(f"{seed:>4} {path['rate_mbps']:8.3f} {off.get('rate_mbps', '-'):>5} {path['delay_ms']:7.2f} "
              f"{off.get('delay_ms', '-'):>5} {path['buffer_bytes']:8d} {off.get('buffer_bytes', '-'):>5} "
              f"{path['loss']:9.2e} {delivery:>8} "
              f"{summary['replication_error_pct']:6.2f} {'-' if emulated is None else f'{emulated:6.2f}':>6} "
              f"{summary['noise_floor_pct'] or 0:6.2f} {summary['model']:>5} {models.get('five', '-'):>6} "
              f"{models.get('trace', '-'):>6} {wall_s:6.1f}", flush=True)
    print()
    print(stdout, end="")
    if args.hold_out:
        seed = int(args.seeds.split(",")[0])
        print(f"\nleave-one-out (seed {seed}, --model {args.model}): held-out scheme, its error, the calibration's "
              "error, the model kept, wall s")
        held_errors = []
        for scheme in args.hold_out.split(","):
            summary, _, wall_s = calibrate(args, root, seed, root / f"bench-held-out-{scheme}.toml", scheme)
            held_errors.append(summary["held_out"]["error_pct"])
            print(f"  {scheme:<12} {held_errors[-1]:6.2f} {summary['replication_error_pct']:6.2f} {summary['model']:>5} "
                  f"{wall_s:6.1f}", flush=True)
        print(f"  {'mean':<12} {sum(held_errors) / len(held_errors):6.2f}")


if __name__ == "__main__":
    main()
