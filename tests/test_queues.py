"""The queue options as Python reads them (pantheon.queues, issue 34): every command that runs an
experiment takes `--uplink-queue KIND` with the AQMs and `--uplink-queue-args ARGS`, passes them to
the Rust untouched, and names the AQM where it describes the path; the report's infinite-queue note
is not made for an AQM. The values are the Rust's to judge (tests/test_cli.py holds the option list
to pantheon-emu's)."""
from __future__ import annotations

import re
import subprocess

import pytest

from pantheon import cli, experiment, queues
from pantheon.binaries import binary
from pantheon.sim import simulator


def test_the_path_names_its_aqm() -> None:
    assert experiment.describe_path(["--delay", "10", "--uplink-rate", "50", "--downlink-rate", "50",
                                     "--uplink-queue", "fq-codel", "--uplink-queue-args", "target=5,interval=100",
                                     "--downlink-queue", "fq-codel", "--downlink-queue-args", "target=5,interval=100"]) == (
        "50 Mbit/s each way, 10 ms, FQ-CoDel queues (target=5,interval=100)")
    assert experiment.describe_path(["--uplink-queue", "codel", "--uplink-queue-packets", "1000",
                                     "--uplink-queue-args", "target=5"]) == (
        "12 Mbit/s each way, 0 ms, uplink queue CoDel 1000 packets (target=5), downlink queue infinite")
    assert experiment.describe_path(["--uplink-queue=dualpi2", "--downlink-queue=dualpi2"]) == (
        "12 Mbit/s each way, 0 ms, DualPI2 queues")


@pytest.mark.parametrize(("options", "discipline", "infinite", "aqm"), [
    ([], "infinite", True, False),
    (["--uplink-queue-bytes", "9000"], "droptail", False, False),
    (["--uplink-queue", "infinite"], "infinite", True, False),
    (["--uplink-queue", "pie"], "pie", False, True),
    (["--uplink-queue", "red", "--uplink-queue-args", "packets=100,min_th=5,max_th=15"], "red", False, True),
    (["--downlink-queue", "codel"], "infinite", True, False),
])
def test_one_reader_says_which_queue_the_data_meets(options, discipline, infinite, aqm) -> None:
    """The report's infinite-queue note asks the same reader (the data flow on the uplink)."""
    queue = queues.Queue.of(options, "uplink")
    assert (queue.discipline, queue.infinite, queue.aqm) == (discipline, infinite, aqm)


@pytest.mark.parametrize("command", [["test", "local"], ["sim"]])
def test_the_queue_options_reach_the_rust_as_given(command: list[str]) -> None:
    args = cli._parser().parse_args([*command, "--schemes", "copa", "--uplink-queue", "fq-codel",
                                     "--uplink-queue-args", "packets=1000,target=5,interval=100,ecn=1",
                                     "--downlink-queue", "pie", "--downlink-queue-packets", "200"])
    assert experiment.Experiment.from_args(args, "x").path_options == (
        "--uplink-queue", "fq-codel", "--uplink-queue-args", "packets=1000,target=5,interval=100,ecn=1",
        "--downlink-queue", "pie", "--downlink-queue-packets", "200")


def test_every_queue_kind_is_named() -> None:
    assert set(queues.NAMES) == set(queues.KINDS)
    assert [queues.Queue(kind).name() for kind in ("codel", "pie", "fq-codel", "red", "dualpi2")] == [
        "CoDel", "PIE", "FQ-CoDel", "RED", "DualPI2"]


def test_the_kinds_are_the_emulators() -> None:
    """queues.KINDS and the list in pantheon-emu's help for --uplink-queue (pantheon_cli's) agree."""
    help_text = subprocess.run([str(binary("pantheon-emu")), "--help"], capture_output=True, text=True, check=True).stdout
    line = help_text.split("--uplink-queue <KIND>", 1)[1].strip().splitlines()[0]
    listed = re.sub(r"\([^)]*\)|\[[^]]*\]|\.$", "", line.split(":", 1)[1]).replace(" or ", ", ")
    assert [kind.strip() for kind in listed.split(",")] == list(queues.KINDS)


@pytest.mark.parametrize("kind", [k for k in queues.KINDS if k != "infinite"])
def test_the_simulator_takes_every_kind_python_names(kind: str) -> None:
    """queues.KINDS is a copy of pantheon_cli's list: each kind runs (a 1 ms simulation, the path
    options' own check), with a limit and with parameters in Mahimahi's form."""
    simulator.check_path_options(["--uplink-queue", kind, "--uplink-queue-args", "packets=100"], seed=0)


def test_a_bad_queue_is_the_rusts_one_line() -> None:
    with pytest.raises(simulator.SimError, match="--uplink-queue") as bad:
        simulator.check_path_options(["--uplink-queue", "blue"], seed=0)
    assert "\n" not in str(bad.value)
    with pytest.raises(simulator.SimError, match="--uplink-queue-args"):
        simulator.check_path_options(["--uplink-queue", "codel", "--uplink-queue-args", "target=soon"], seed=0)
