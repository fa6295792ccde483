"""Whatever ends a run — the command exiting, being SIGKILLed, or the emulator getting SIGINT or
SIGTERM — every process the command started (even one that left its process group with setsid),
its network namespace and both TUN devices are gone afterwards."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from supervision import assert_all_gone, command_pid, finish
from support.supervised import start


def test_command_exit_cleans_up_leftovers(netns: str, emu: Path, tmp_path: Path) -> None:
    proc = start(netns, [str(emu)], tmp_path, tail="exit 3")
    assert finish(proc) == 3
    assert_all_gone(netns, tmp_path)


def test_sigkill_of_the_command(netns: str, emu: Path, tmp_path: Path) -> None:
    proc = start(netns, [str(emu)], tmp_path)
    os.kill(command_pid(tmp_path), signal.SIGKILL)
    assert finish(proc) == 128 + signal.SIGKILL
    assert_all_gone(netns, tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_emulator(netns: str, emu: Path, tmp_path: Path, sig: signal.Signals) -> None:
    proc = start(netns, [str(emu)], tmp_path)
    proc.send_signal(sig)
    assert finish(proc) == 128 + sig
    assert_all_gone(netns, tmp_path)


def test_command_that_ignores_signals_is_killed(netns: str, emu: Path, tmp_path: Path) -> None:
    proc = start(netns, [str(emu)], tmp_path, tail="trap '' INT TERM; while :; do sleep 0.1; done")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert finish(proc) == 128 + signal.SIGKILL
    assert time.monotonic() - started < 6
    assert_all_gone(netns, tmp_path)
