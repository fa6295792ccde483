"""pantheon-emu's `--timing mahimahi` keeps Mahimahi's whole-millisecond clock end to end
(crates/link/src/timing.rs; docs/emulator.md): the delay line holds a packet from the start of the
millisecond it entered in, and the link's opportunities fall on whole milliseconds and carry only
packets that reached the queue before them. The log's times are the model's, so these checks are
exact and do not depend on how busy the machine is."""
from __future__ import annotations

from pathlib import Path

from test_emulator_fidelity import PORT, Departure, emulate, read_native_log, receiver, traffic_command


def departures(emu: Path, netns: str, log_path: Path, options: list[str], rate_mbps: float, size: int,
               seconds: float) -> tuple[list[Departure], dict[int, int]]:
    """A paced UDP flow of `size`-byte packets over the uplink: its departures and every entry time."""
    with receiver(netns, "udp-recv", PORT, "--seconds", 20):
        emulate(emu, netns, [*options, "--delay", "5", "--uplink-log", str(log_path)],
                traffic_command("udp-send", PORT, "--rate-mbps", rate_mbps, "--size", size, "--seconds", seconds,
                                linger_s=0.1))
    log = read_native_log(log_path)
    return [d for d in log.departures if d.size_bytes == size], log.entries_us


def test_mahimahi_timing_puts_every_departure_on_a_whole_millisecond(emu: Path, netns: str, tmp_path: Path) -> None:
    ours, entries_us = departures(emu, netns, tmp_path / "up.log", ["--timing", "mahimahi", "--uplink-rate", "100"],
                                  60, 1000, 1)
    assert len(ours) > 5000
    assert all(d.t_us % 1000 == 0 for d in ours)
    # Released at the entry's millisecond + 5 ms, then carried by a later millisecond's opportunity.
    assert all(d.t_us > entries_us[d.uid] // 1000 * 1000 + 5000 for d in ours)
    # The microsecond clock (the default) does neither.
    exact, _ = departures(emu, netns, tmp_path / "up.log", ["--uplink-rate", "100"], 60, 1000, 0.3)
    assert sum(d.t_us % 1000 != 0 for d in exact) > len(exact) / 2


def test_mahimahi_timing_truncates_the_delay_to_the_millisecond(emu: Path, netns: str, tmp_path: Path) -> None:
    ours, entries_us = departures(emu, netns, tmp_path / "up.log", ["--timing", "mahimahi", "--uplink-rate", "unlimited"],
                                  2, 500, 0.5)
    assert len(ours) > 200
    assert all(d.t_us == entries_us[d.uid] // 1000 * 1000 + 5000 for d in ours)
