"""Steal time: the share of this host's CPU time that a hypervisor gave to other machines while
this one's virtual CPUs had work to do (proc(5), /proc/stat: the "steal" column of the "cpu" line,
in clock ticks summed over the CPUs; zero on bare metal).

An experiment on a virtual machine runs on CPUs it shares. While the hypervisor runs someone
else, every thread of the run — the emulator's relays, the tunnel endpoints, the senders and
receivers — stops, and the path the run measures is the emulated one plus those stops. On the
2-core development VM (Firecracker, 2026-11-30), ten-second runs of Indigo over the demo's path
(12 Mbit/s, 20 ms, 60 kB) each measured their steal: at 0.2% the emulator wrote 0.2–0.4% of its
departures more than 0.5 ms after their time and Indigo moved 11.05 Mbit/s at a p95 one-way delay
of 24.0 ms; at 15–22% it wrote 14–23% of them that late and Indigo moved 6.6–9.5 Mbit/s at
31–40 ms. The harness therefore records each run's steal (run.json's `host_steal_pct`), and the
analysis warns of a run that had more than a quiet host's (analyze.QUIET_STEAL_PCT).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTicks:
    """The "cpu" line of /proc/stat at one instant: stolen ticks and all ticks."""

    steal: int
    total: int


def read(proc_stat: Path = PROC_STAT) -> CpuTicks | None:
    """Now's ticks; None where /proc/stat cannot be read or has no steal column (before Linux
    2.6.11)."""
    try:
        with proc_stat.open() as f:
            fields = f.readline().split()
    except OSError:
        return None
    # cpu user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
    # already counted in user and nice, so the total is the first eight.
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    try:
        ticks = [int(v) for v in fields[1:9]]
    except ValueError:
        return None
    return CpuTicks(steal=ticks[7], total=sum(ticks))


def stolen_pct(before: CpuTicks | None, after: CpuTicks | None) -> float | None:
    """The percentage of the CPUs' time between two readings that was stolen; None without both
    readings or when no tick passed."""
    if before is None or after is None or after.total <= before.total:
        return None
    return round(100 * (after.steal - before.steal) / (after.total - before.total), 2)
