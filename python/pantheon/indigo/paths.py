"""The paths Indigo trains on (Yan et al., ATC 2018, §6): the paper's synthetic ones — a constant
rate of 5, 10, 20, 50, 100 or 200 Mbit/s × a one-way delay of 10, 20, 40 or 80 ms, an infinite
buffer and no loss (24 paths) — and, for the variant the paper called "Indigo" as against
"Indigo w/o calib", the calibrated emulators of real paths (presets/, §4), or any preset file.

A deviation, in both variants: six paths with Poisson delivery (`JITTER`: 12, 24, 60 Mbit/s × 15,
30 ms one way, infinite buffer) join the synthetic ones. Trained on constant-rate paths alone, the
network learned that queueing delay appears only once the window reaches the oracle's, and over the
emulator — whose hosts clump acknowledgements, so a window-limited sender's bursts queue for 2–6 ms
(p90–p99) well under the BDP — it stopped raising the window at the first millisecond of jitter:
51–69% of 100–150-packet BDPs, against 94–95% with these paths in training (docs/indigo.md,
bench/indigo_emulator.py).

Each path is simulator options (pantheon.sim.batch's `path_options`) and its bandwidth-delay
product, where the oracle's search starts (oracle.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from pantheon import presets
from pantheon.sim.batch import link_options

SYNTHETIC_RATES_MBPS = (5, 10, 20, 50, 100, 200)
SYNTHETIC_DELAYS_MS = (10, 20, 40, 80)
CALIBRATED = ("china-wired", "colombia-cellular", "india-wired", "mexico-cellular", "mexico-wired", "nepal-wifi")
"""The calibrated presets `--with-calibrated` adds (presets/NAME.toml)."""
JITTER_RATES_MBPS = (12, 24, 60)
JITTER_DELAYS_MS = (15, 30)
"""The Poisson-delivery paths both variants train on (the module's header says why)."""
VALIDATION = ((7, 15), (35, 60), (150, 30))
"""(Mbit/s, one-way ms) of the synthetic paths off the training grid that measure how the network
generalises (dagger.py): rolled out each iteration, never trained on."""
PACKET_BYTES = 1500
"""A packet on the wire: pantheon-udp's 1464-byte datagram (the controller's window is counted in
them) and 36 bytes of headers (crates/sim/src/simulation.rs), so the BDP is in the window's unit."""


@dataclass(frozen=True)
class TrainingPath:
    name: str
    options: tuple[str, ...]
    """pantheon-sim's path options."""
    rate_mbps: float
    """The bottleneck's (mean) rate."""
    delay_ms: float
    """One way; the round trip's propagation is twice this."""
    random: bool = False
    """Whether runs differ by seed (Poisson delivery, loss): the oracle then averages seeds."""

    @property
    def bdp_packets(self) -> float:
        """Bandwidth × round-trip propagation delay, in packets (at least the controllers' floor of 2)."""
        return max(2.0, self.rate_mbps * 1e6 * 2 * self.delay_ms / 1e3 / (PACKET_BYTES * 8))


def synthetic_path(rate_mbps: float, delay_ms: float) -> TrainingPath:
    """A constant rate, an infinite buffer, no loss."""
    options = tuple(link_options(rate_mbps=rate_mbps, delay_ms=delay_ms))
    return TrainingPath(f"{rate_mbps:g}mbps-{delay_ms:g}ms", options, rate_mbps, delay_ms)


def synthetic(rates_mbps=SYNTHETIC_RATES_MBPS, delays_ms=SYNTHETIC_DELAYS_MS) -> list[TrainingPath]:
    return [synthetic_path(rate, delay) for rate in rates_mbps for delay in delays_ms]


def jitter_path(rate_mbps: float, delay_ms: float) -> TrainingPath:
    """Poisson delivery at a mean of `rate_mbps` each way, an infinite buffer, no loss."""
    options = ("--delay", f"{delay_ms!r}", "--uplink-poisson", f"{rate_mbps!r}", "--downlink-poisson", f"{rate_mbps!r}")
    return TrainingPath(f"poisson-{rate_mbps:g}mbps-{delay_ms:g}ms", options, rate_mbps, delay_ms, random=True)


def jitter() -> list[TrainingPath]:
    return [jitter_path(rate, delay) for rate in JITTER_RATES_MBPS for delay in JITTER_DELAYS_MS]


def from_preset(name: str) -> TrainingPath:
    """A built-in preset by name or a preset file's path (a PresetError if neither); a trace's rate
    is its mean."""
    preset = presets.lookup(name)
    up = preset.uplink
    if up.trace_ms is not None:
        rate = len(up.trace_ms) * PACKET_BYTES * 8 / (max(up.trace_ms[-1], 1) * 1e3)
    else:
        rate = up.rate_mbps or presets.DEFAULT_DIRECTION.rate_mbps or 0.0
    options = tuple(preset.options(presets.traces_cache()))
    random = any(d.poisson or d.loss > 0 for d in (preset.uplink, preset.downlink))
    return TrainingPath(preset.name, options, rate, preset.delay_ms, random)


def training_set(with_calibrated: bool, extra: list[str]) -> list[TrainingPath]:
    """The synthetic and jitter paths, plus the calibrated presets when asked, plus the presets
    `extra` names."""
    names = [*(CALIBRATED if with_calibrated else ()), *extra]
    return synthetic() + jitter() + [from_preset(name) for name in dict.fromkeys(names)]
