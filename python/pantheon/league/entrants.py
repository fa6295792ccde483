"""Who plays in a league: schemes the simulator runs, each as its crates/cc spec.

A scheme whose sender is pantheon-udp with a crates/cc controller plays as itself (sim/simulable.py).
One the simulator cannot run (kernel TCP, a QUIC library) plays through the stand-in its manifest
names (`stand_in = "cubic-user"`: the kernel's Cubic as crates/cc's), and every row and table says
so; one with no stand-in is refused with its reason. "Every scheme" is every available crates/cc
congestion controller (not cbr, the unresponsive cross traffic): the kernel's schemes are asked
for by name, since their stand-ins play anyway.
"""
from __future__ import annotations

from dataclasses import dataclass

from pantheon.errors import PantheonError
from pantheon.schemes import Registry
from pantheon.sim import simulable


class EntrantError(PantheonError):
    """A scheme that cannot play: one line saying why."""


@dataclass(frozen=True)
class Entrant:
    name: str
    spec: str
    """The crates/cc spec the simulator runs."""
    stand_in: str | None = None
    """The scheme that plays for this one (its spec is `spec`), None when it plays itself."""


def entrant(known: Registry, name: str) -> Entrant:
    if name in known.schemes and (spec := simulable.cc_spec(known.schemes[name])) is None:
        scheme = known.schemes[name]
        proxy = scheme.stand_in
        if proxy is None:
            raise EntrantError(f"{name} cannot play: the simulator cannot run it ({simulable.why_not(scheme)}) and "
                               "its manifest names no stand_in")
        if problem := simulable.problem(known, proxy):
            raise EntrantError(f"{name}'s stand-in {proxy}: {problem}")
        return Entrant(name, simulable.cc_spec(known.schemes[proxy]) or "", stand_in=proxy)
    if problem := simulable.problem(known, name):
        raise EntrantError(f"{name}: {problem}")
    assert spec is not None
    return Entrant(name, spec)


def every(known: Registry) -> list[Entrant]:
    """Every available crates/cc congestion controller, by name."""
    return [Entrant(name, spec) for name, spec in simulable.simulable(known).items()
            if known.schemes[name].congestion_control and simulable.problem(known, name) is None]


def resolve(known: Registry, names: list[str] | None) -> list[Entrant]:
    """The named schemes (None: every one), in order; an EntrantError for the first that cannot play."""
    if names is None:
        found = every(known)
        if not found:
            raise EntrantError("no scheme can play: build the workspace (./setup.sh) first")
        return found
    if len(set(names)) != len(names):
        raise EntrantError(f"--schemes names {next(n for n in names if names.count(n) > 1)} twice")
    return [entrant(known, name) for name in names]
