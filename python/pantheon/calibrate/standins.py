"""Which controller the simulator runs for each scheme of the data.

A scheme whose sender is pantheon-udp with a crates/cc controller runs as itself
(pantheon.sim.simulable). One the simulator cannot run (the kernel's TCP, a QUIC library) is stood
in for by its userspace twin, the crates/cc controller of the same algorithm: NAME-user (cubic →
cubic-user, bbr → bbr-user, reno → reno-user, vegas → vegas-user, ledbat → ledbat-user), and for a
QUIC scheme quic-NAME the twin of its congestion controller (quic-cubic → cubic-user, quic-bbr →
bbr-user). bench/twin_fidelity.py measures how far each twin is from its kernel scheme over the
emulator; that difference is part of a calibration that uses it. A scheme with neither (WebRTC,
Sprout, Verus, SCReAM) cannot be calibrated on: asked for by name it is a one-line error, and
without --schemes it is left out with a line saying so.
"""
from __future__ import annotations

from dataclasses import dataclass

from pantheon.schemes import Registry
from pantheon.sim import simulable

TWIN_SUFFIX = "-user"
QUIC_PREFIX = "quic-"


@dataclass(frozen=True)
class StandIn:
    scheme: str
    """The scheme whose controller is simulated (the scheme itself or its twin)."""
    cc: str
    """Its crates/cc spec."""


def stand_in(known: Registry, name: str) -> StandIn | str:
    """The controller simulated for scheme `name`, or why there is none."""
    specs = simulable.simulable(known)
    base = name.removeprefix(QUIC_PREFIX)
    for candidate in (name, f"{name}{TWIN_SUFFIX}", f"{base}{TWIN_SUFFIX}"):
        if candidate in specs:
            return StandIn(candidate, specs[candidate])
    why = simulable.problem(known, name) or "no simulable controller"
    return f"{name} cannot be simulated and has no userspace twin ({why})"
