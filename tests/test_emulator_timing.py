"""pantheon-emu's `--timing mahimahi` keeps Mahimahi's whole-millisecond clock end to end
(crates/link/src/timing.rs; docs/emulator.md): the delay line holds a packet from the start of the
millisecond it entered in, and the link's opportunities fall on whole milliseconds and carry only
packets that reached the queue before them. The log's times are the model's, so these checks are
exact and do not depend on how busy the machine is. `--stalls`, the other part of reproducing a
Mahimahi run, holds writes back as a stalling host does, and leaves the model's times alone."""
from __future__ import annotations

import json
from pathlib import Path

from pantheon import link_log
from support.emulator import TRAFFIC_PORT as PORT
from support.emulator import emulate, receiver, summary_of, traffic_command


def departures(emu: Path, netns: str, log_path: Path, options: list[str], rate_mbps: float, size: int,
               seconds: float) -> tuple[list[link_log.Departure], dict[int, int]]:
    """A paced UDP flow of `size`-byte packets over the uplink: its departures and every entry time."""
    with receiver(netns, "udp-recv", PORT, "--seconds", 20):
        emulate(emu, netns, [*options, "--delay", "5", "--uplink-log", str(log_path)],
                traffic_command("udp-send", PORT, "--rate-mbps", rate_mbps, "--size", size, "--seconds", seconds,
                                linger_s=0.1))
    log = link_log.read(log_path)
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


def test_stalls_hold_departures_back_in_order_and_leave_the_model_alone(emu: Path, netns: str, tmp_path: Path) -> None:
    """`--stalls 100,2`: the host is stalled 20% of the time (100 a second, 2 ms on average), so a
    datagram is held past its time more than 1 ms with probability 0.2 · e^-0.5 = 12%
    (crates/link/src/stalls.rs). The model's times are unchanged (every departure exactly 5 ms
    after its entry); the log's lateness column and the receiver both see the holds; nothing is
    reordered or lost."""
    count, delay_us = 1500, 5000
    log_path = tmp_path / "up.log"
    with receiver(netns, "stamp-recv", PORT, "--count", count, "--seconds", 20) as rx:
        sent = emulate(emu, netns, ["--delay", "5", "--uplink-rate", "unlimited", "--stalls", "100,2",
                                    "--uplink-log", str(log_path)],
                       traffic_command("stamp-send", PORT, "--count", count, "--interval-ms", 2, "--size", 100,
                                       linger_s=0.2))
        records = summary_of(rx)["records"]
    kernel_send_ns = json.loads(sent.strip().splitlines()[-1])["kernel_send_ns"]
    log = link_log.read(log_path)
    ours = [d for d in log.departures if d.size_bytes == 100]
    assert len(ours) == count and len(records) == count
    assert all(d.t_us == log.entries_us[d.uid] + delay_us for d in ours)
    held_in_log = sum(d.lateness_us > 1000 for d in ours) / count
    held_at_receiver = sum((recv_ns - kernel_send_ns[seq]) / 1000 - delay_us > 1000
                           for seq, _, recv_ns in records) / count
    print(f"held over 1 ms: {held_in_log:.1%} in the log, {held_at_receiver:.1%} at the receiver")
    assert 0.06 < held_in_log < 0.20
    assert abs(held_at_receiver - held_in_log) < 0.03
    arrival_order = [seq for seq, _, _ in sorted(records, key=lambda r: r[2])]
    assert arrival_order == sorted(arrival_order)
