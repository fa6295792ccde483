"""A flow's finite transfers in the emulated experiment (issue 35; docs/harness.md, "Workloads"):
what its two sides run instead of a bulk flow, and where they log.

A flow with transfers is still one tunnel pair. Its receiver is the scheme's own, told to log
each transfer's completion (`--transfers-log`: kernel TCP's receiver in pantheon.kernel_tcp,
pantheon-udp's `recv`); its sender is the transfer driver (pantheon.transfers), which begins each
transfer at its planned offset from the flow's start: kernel TCP transfers in the driver's own
threads (a connection each, `--tcp`), pantheon-udp transfers as one `pantheon-udp send --bytes N
--transfer-id K` each. The driver logs when it began each; the receiver when it had the last
byte; records.merge_transfers joins the two into transfers.parquet. Both logs are on this host's
clock, as the tunnel logs of local mode are.

Only kernel TCP and pantheon-udp schemes have finite transfers (Scheme.transfer_mode); QUIC
libraries and browsers run as bulk flows only.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from pantheon.plan import Flow
from pantheon.schemes import Scheme


@dataclass(frozen=True)
class TransferFiles:
    """Flow i's transfer schedule and logs, in the run's directory."""

    schedule: Path
    sender_log: Path
    receiver_log: Path

    @classmethod
    def under(cls, run_dir: Path, i: int) -> TransferFiles:
        return cls(run_dir / f"flow{i}.transfers.json", run_dir / f"flow{i}.transfers.sender.log",
                   run_dir / f"flow{i}.transfers.receiver.log")


def write_schedule(flow: Flow, path: Path) -> None:
    """The driver's schedule: `[[offset_s, bytes], ...]`, offsets from the flow's start (when the
    harness releases the driver)."""
    path.write_text(json.dumps([[t.start_s - flow.start_s, t.bytes] for t in flow.transfers]))


def side_command(scheme: Scheme, side: str, command: list[str], files: TransferFiles, port: int) -> list[str]:
    """What flow's `side` runs when the flow has transfers, from the scheme's own bulk `command`."""
    if side == "receiver":
        return [*command, "--transfers-log", str(files.receiver_log)]
    driver = [sys.executable, "-m", "pantheon.transfers", "--schedule", str(files.schedule), "--log", str(files.sender_log)]
    if scheme.transfer_mode() == "tcp":
        return [*driver, "--tcp", str(scheme.needs_kernel_cc), "{peer}", str(port)]
    return [*driver, "--", *command, "--bytes", "{bytes}", "--transfer-id", "{transfer}"]
