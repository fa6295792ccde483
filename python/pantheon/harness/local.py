"""Local mode: an experiment over an emulated path on this machine, every flow through an
instrumented tunnel (`pantheon test local`, and the demo). Checks what was asked before the first
run starts, so a mistake costs no run: the schemes, and the path's options, judged by the emulator
itself."""
from __future__ import annotations

import os
import subprocess
import sys

from pantheon import schemes
from pantheon.analysis.cli import after_campaign
from pantheon.binaries import binary
from pantheon.errors import PantheonError
from pantheon.experiment import Experiment
from pantheon.harness.campaign import run_campaign
from pantheon.netns import require_root


def check_emulator_options(options: list[str]) -> None:
    """Lets the emulator itself judge the options once, in a scratch namespace, so a bad value
    stops the campaign before it starts with the emulator's own one-line message."""
    name = f"pantheon-check-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        done = subprocess.run(["ip", "netns", "exec", name, str(binary("pantheon-emu")), *options, "--", "true"],
                              capture_output=True, text=True)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
    if done.returncode != 0:
        raise PantheonError(done.stderr.strip().removeprefix("pantheon emulate: ") or f"emulator exited {done.returncode}")


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
                                  skip_line="pantheon: skipping {name}: {why}", expected_skip=expected_skip)
    used = {name: known.schemes[name] for plan in selection.plans for name in plan.schemes}
    failed = run_campaign(plans=selection.plans, schemes=used, emulator_options=emulator_options,
                          data_dir=experiment.data_dir, run_times=experiment.run_times, random_order=random_order,
                          seed=experiment.seed, quiet=experiment.quiet, arguments=arguments, skipped=selection.skipped)
    if analyze:
        after_campaign(experiment.data_dir, experiment.quiet)
    if selection.not_run:
        print(f"pantheon: not run: {', '.join(selection.not_run)} (see the lines at the start)", file=sys.stderr)
    return 1 if failed or selection.not_run else 0
