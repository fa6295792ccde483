"""Which schemes the simulator can run, and as which controller.

The simulator runs crates/cc controllers, the ones pantheon-udp drives over a real path
(docs/architecture.md: the same Copa runs over a real emulated link and inside the simulator).
A scheme is simulable when its manifest's sender is `pantheon-udp send --cc SPEC ...`: the simulator then runs SPEC, so
the manifest stays the one place that says which controller, with which parameters, a scheme is.
Schemes that run anything else (the kernel's TCP, QUIC libraries, browsers) have no model in the
simulator and are refused with a one-line reason.
"""
from __future__ import annotations

from pathlib import Path

from pantheon.schemes import UDP_SENDER as SENDER_PROGRAM
from pantheon.schemes import Registry, Scheme


def cc_spec(scheme: Scheme) -> str | None:
    """The crates/cc spec the scheme's sender runs (`copa:delta=0.5`), or None when the sender is
    not pantheon-udp (Scheme.cc_spec, which the harness reads too, to turn ECN on)."""
    return scheme.cc_spec()


def _program(sender: tuple[str, ...]) -> str:
    """The sender's program by name: the script or module for a Python sender."""
    if sender[:1] == ("{python}",):
        rest = sender[1:]
        if rest[:1] == ("-m",) and len(rest) > 1:
            return rest[1]
        return Path(rest[0]).name if rest else "python"
    return Path(sender[0]).name if sender else "nothing"


def why_not(scheme: Scheme) -> str:
    """Why a scheme with no cc spec cannot be simulated, in a few words."""
    if scheme.needs_kernel_cc:
        return "it runs kernel TCP"
    return f"its sender is {_program(scheme.sender)}, not {SENDER_PROGRAM} with a crates/cc controller"


def simulable(known: Registry) -> dict[str, str]:
    """Scheme name -> cc spec, for every sound manifest whose sender is pantheon-udp."""
    return {name: spec for name, scheme in known.schemes.items() if (spec := cc_spec(scheme))}


def problem(known: Registry, name: str) -> str | None:
    """Why `name` cannot be simulated (unknown, broken manifest, not a crates/cc scheme, a file it
    needs missing), or None.
    Whether pantheon-udp is built does not matter: the simulator does not run it."""
    if name in known.broken:
        return known.broken[name]
    if name not in known.schemes:
        return f"unknown scheme (simulable schemes: {', '.join(simulable(known))})"
    if cc_spec(known.schemes[name]) is None:
        return f"cannot be simulated ({why_not(known.schemes[name])}); simulable schemes: {', '.join(simulable(known))}"
    # A file the controller is built from (Indigo's weights) is missing: the simulator lacks it too.
    return known.schemes[name].unavailable_reason()
