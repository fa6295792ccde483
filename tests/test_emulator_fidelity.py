"""Fidelity of the emulated link, checked the way a researcher would check it by hand.

Real traffic (bench/support/traffic.py) runs through `pantheon-emu` inside a private namespace, and the
numbers below are recomputed from the emulator's per-packet log and, where it matters, from what
a receiver on the far side saw:

  rate      a constant 12 Mbit/s link and a 10-ms trace averaging 24 Mbit/s deliver within 1 % of
            their rate when saturated (1000- and 1200-byte packets, so opportunities are split
            across packets); at the receiving end as well for the constant link
  delay     --delay 20 adds 20 ms to every packet: |error| median <= 250 us, p99 <= 1 ms, from
            the log (write time - entry - 20 ms) and end to end (kernel receive time - kernel
            transmit time at the TUN device). Bounds a busy machine meets (an idle one measures
            ~10-30 us and ~100 us) and a millisecond grain (Mahimahi's: median ~500 us) fails;
            bench/emulator_delay.py prints the figures against the tight targets
  poisson   --uplink-poisson 120 on an idle path: gaps between opportunities have mean 100 us
            (within 2 %) and a standard deviation equal to the mean (within 5 %), as exponential
            gaps do
  loss      the fraction dropped lies in the 99 % binomial interval of p; p = 0 never drops; the
            same seed drops the same packets
  droptail  replaying the log, the queue never holds more than its limit (packets or bytes) and
            every queue drop happens when the packet would not fit
  pathology a TCP bulk flow crosses one-packet buffers, and a downlink that delivers in bursts
            every 200 ms (ACK aggregation), which releases packets only at those instants

The emulator is the command's gateway: its uplink is from the command outwards, towards the
namespace of the `netns` fixture, where the receivers listen. All log times are microseconds.
"""
from __future__ import annotations

import math
import statistics
from collections import deque
from pathlib import Path

import pytest

from pantheon import link_log
from pantheon.analysis.metrics import nearest_rank
from support.emulator import TRAFFIC_PORT as PORT
from support.emulator import emulate, measure_delay_errors, receiver, summary_of, traffic_command

UDP_IP_OVERHEAD_BYTES = 28
OPPORTUNITY_BYTES = 1500


# --- arithmetic a researcher would do ------------------------------------------------------------

def rate_over_whole_periods_mbps(departures: list[link_log.Departure], period_us: int, warmup_us: int) -> float:
    """IP bits that left in whole schedule periods, per microsecond (= Mbit/s), skipping the first
    `warmup_us` while the queue fills. Counting whole periods makes a saturated link's answer exact
    up to the one packet that straddles each end of the window."""
    start_us = (departures[0].t_us + warmup_us) // period_us * period_us + period_us
    end_us = departures[-1].t_us // period_us * period_us
    assert end_us - start_us >= 20 * period_us, "too few departures to measure a rate"
    bits = 8 * sum(d.size_bytes for d in departures if start_us < d.t_us <= end_us)
    return bits / (end_us - start_us)


def binomial_interval_99(p: float, n: int) -> tuple[float, float]:
    """Normal approximation to the 99 % interval of a binomial fraction (z = 2.576)."""
    half = 2.576 * math.sqrt(p * (1 - p) / n)
    return p - half, p + half


# --- rate ----------------------------------------------------------------------------------------

def test_constant_12_mbps_link_delivers_its_rate(emu: Path, netns: str, tmp_path: Path) -> None:
    """20 Mbit/s of 1000-byte packets into 12 Mbit/s: three packets per two opportunities."""
    log_path = tmp_path / "up.log"
    with receiver(netns, "udp-recv", PORT, "--seconds", 20) as rx:
        emulate(emu, netns, ["--uplink-rate", "12", "--uplink-log", str(log_path)],
                traffic_command("udp-send", PORT, "--rate-mbps", 20, "--size", 1000, "--seconds", 4))
        received = summary_of(rx)
    log = link_log.read(log_path)
    ours = [d for d in log.departures if d.size_bytes == 1000]

    # 12 Mbit/s is one 1500-byte opportunity every 1000 us.
    log_rate_mbps = rate_over_whole_periods_mbps(ours, period_us=1000, warmup_us=100_000)
    assert abs(log_rate_mbps - 12) / 12 < 0.01, f"log: {log_rate_mbps:.4f} Mbit/s"

    # The receiver sees the same packets, late by its own scheduling only: all of them arrive, and
    # over the ~4 s between the first and the last, at the same rate.
    assert received["packets"] >= 0.999 * len(ours), (received["packets"], len(ours))
    span_s = (received["last_ns"] - received["first_ns"]) / 1e9
    receiver_rate_mbps = 8 * (received["bytes"] - received["first_bytes"]) / span_s / 1e6
    print(f"constant 12 Mbit/s: log {log_rate_mbps:.4f} Mbit/s, receiver {receiver_rate_mbps:.4f} Mbit/s "
          f"({received['packets']} of {len(ours)} packets over {span_s:.2f} s)")
    assert span_s > 3
    assert abs(receiver_rate_mbps - 12) / 12 < 0.01, f"receiver: {receiver_rate_mbps:.4f} Mbit/s"


def test_trace_link_delivers_the_traces_rate(emu: Path, netns: str, tmp_path: Path) -> None:
    """A 10-ms trace of 20 uneven opportunities (24 Mbit/s on average), saturated at 36 Mbit/s."""
    opportunities_ms = [1, 1, 1, 1, 2, 2, 3, 3, 3, 3, 3, 3, 5, 5, 7, 8, 9, 10, 10, 10]
    period_ms = opportunities_ms[-1]
    trace_rate_mbps = len(opportunities_ms) * OPPORTUNITY_BYTES * 8 / (period_ms * 1000)
    assert trace_rate_mbps == 24
    trace = tmp_path / "uneven.trace"
    trace.write_text("".join(f"{t}\n" for t in opportunities_ms))
    log_path = tmp_path / "up.log"
    emulate(emu, netns, ["--uplink-trace", str(trace), "--uplink-log", str(log_path)],
            traffic_command("udp-send", PORT, "--rate-mbps", 36, "--size", 1200, "--seconds", 4))
    log = link_log.read(log_path)
    ours = [d for d in log.departures if d.size_bytes == 1200]
    rate_mbps = rate_over_whole_periods_mbps(ours, period_us=period_ms * 1000, warmup_us=100_000)
    print(f"trace 24 Mbit/s: log {rate_mbps:.4f} Mbit/s")
    assert abs(rate_mbps - trace_rate_mbps) / trace_rate_mbps < 0.01, f"{rate_mbps:.4f} Mbit/s"
    # Departures happen only at the trace's instants.
    instants_ms = {t % period_ms for t in opportunities_ms}
    assert all(d.t_us % 1000 == 0 and d.t_us // 1000 % period_ms in instants_ms for d in ours)


# --- delay ---------------------------------------------------------------------------------------

DELAY_ATTEMPTS = 3
DELAY_MEDIAN_BOUND_US = 250
"""Half the median error of a 1 ms grain; 8x what a fresh machine of this kind measured end to end
(30-32 us, issue 14), which a loaded one can reach (70-116 us measured with other builds running)."""
DELAY_P99_BOUND_US = 1000
"""The grain itself; 8x a fresh machine's end-to-end p99 (108-133 us)."""


def test_delay_adds_20_ms_to_every_packet(emu: Path, netns: str, tmp_path: Path) -> None:
    """1500 stamped datagrams 2 ms apart over an unlimited link with 20 ms of delay. This shared
    2-core VM has hiccups of milliseconds now and then (its hypervisor deschedules a vCPU), which
    can put one run's p99 over its bound, so the measurement gets up to three attempts; every
    attempt's figures are printed."""
    attempts = []
    for attempt in range(DELAY_ATTEMPTS):
        errors = measure_delay_errors(emu, netns, tmp_path / f"up-{attempt}.log", count=1500, delay_us=20_000)
        misses = []
        for vantage, errors_us in errors.items():
            median_us, p99_us = statistics.median(errors_us), nearest_rank(sorted(errors_us), 99)
            print(f"{vantage}: |error| median {median_us:.1f} us, p99 {p99_us:.1f} us, max {max(errors_us):.1f} us")
            if median_us > DELAY_MEDIAN_BOUND_US:
                misses.append(f"{vantage}: median |error| {median_us:.1f} us > {DELAY_MEDIAN_BOUND_US} us")
            if p99_us > DELAY_P99_BOUND_US:
                misses.append(f"{vantage}: p99 |error| {p99_us:.1f} us > {DELAY_P99_BOUND_US} us")
        if not misses:
            return
        attempts.append("; ".join(misses))
    pytest.fail(f"all {DELAY_ATTEMPTS} attempts missed: " + " | ".join(attempts))


# --- Poisson delivery ----------------------------------------------------------------------------

def test_poisson_opportunities_have_exponential_gaps(emu: Path, netns: str, tmp_path: Path) -> None:
    """120 Mbit/s of 1500-byte opportunities is one every 100 us on average; an idle path logs
    every one of them."""
    rate_mbps, duration_s = 120, 5
    mean_gap_us = OPPORTUNITY_BYTES * 8 / rate_mbps
    log_path = tmp_path / "up.log"
    emulate(emu, netns, ["--uplink-poisson", str(rate_mbps), "--uplink-log", str(log_path)], ["sleep", str(duration_s)])
    times_us = link_log.read(log_path).opportunities_us
    expected = duration_s * 1e6 / mean_gap_us
    assert len(times_us) > 0.95 * expected, f"{len(times_us)} opportunities logged in {duration_s} s, expected ~{expected:.0f}"
    gaps_us = [b - a for a, b in zip(times_us, times_us[1:])]
    mean_us, sd_us = statistics.fmean(gaps_us), statistics.pstdev(gaps_us)
    print(f"poisson: {len(gaps_us)} gaps, mean {mean_us:.2f} us, sd {sd_us:.2f} us")
    assert abs(mean_us - mean_gap_us) / mean_gap_us < 0.02, f"mean gap {mean_us:.2f} us"
    assert abs(sd_us - mean_us) / mean_us < 0.05, f"sd {sd_us:.2f} us vs mean {mean_us:.2f} us"


# --- loss ----------------------------------------------------------------------------------------

def run_lossy(emu: Path, netns: str, log_path: Path, loss: float, seed: int) -> link_log.LinkLog:
    """~7500 small datagrams across an unlimited link with i.i.d. loss."""
    emulate(emu, netns, ["--uplink-rate", "unlimited", "--uplink-loss", str(loss), "--seed", str(seed),
                         "--uplink-log", str(log_path)],
            traffic_command("udp-send", PORT, "--rate-mbps", 4, "--size", 100, "--seconds", 1.5))
    return link_log.read(log_path)


def test_loss_fraction_is_binomial(emu: Path, netns: str, tmp_path: Path) -> None:
    p = 0.1
    log = run_lossy(emu, netns, tmp_path / "up.log", p, seed=7)
    lost = len(log.dropped_uids("loss"))
    decided = lost + len(log.departures)
    assert decided > 5000
    low, high = binomial_interval_99(p, decided)
    print(f"loss 0.1: {lost}/{decided} = {lost / decided:.4f}, 99 % interval [{low:.4f}, {high:.4f}]")
    assert low <= lost / decided <= high, f"{lost}/{decided} = {lost / decided:.4f} outside [{low:.4f}, {high:.4f}]"


def test_zero_loss_never_drops(emu: Path, netns: str, tmp_path: Path) -> None:
    log = run_lossy(emu, netns, tmp_path / "up.log", 0.0, seed=7)
    assert len(log.departures) > 5000
    assert log.drops == []


def test_same_seed_drops_the_same_packets(emu: Path, netns: str, tmp_path: Path) -> None:
    first = run_lossy(emu, netns, tmp_path / "a.log", 0.1, seed=11)
    again = run_lossy(emu, netns, tmp_path / "b.log", 0.1, seed=11)
    other = run_lossy(emu, netns, tmp_path / "c.log", 0.1, seed=12)
    # Runs differ in how many packets the sender fits into its time; compare the common prefix.
    common = min(len(first.entries_us), len(again.entries_us), len(other.entries_us))

    def dropped_in_common(log: link_log.LinkLog) -> list[int]:
        return [uid for uid in log.dropped_uids("loss") if uid < common]

    assert len(dropped_in_common(first)) > 300
    assert dropped_in_common(first) == dropped_in_common(again)
    assert dropped_in_common(first) != dropped_in_common(other)


# --- DropTail ------------------------------------------------------------------------------------

def replay_droptail(log: link_log.LinkLog, limit_packets: int | None, limit_bytes: int | None) -> tuple[int, int]:
    """Rebuilds the bottleneck queue from the log of a delay-0, loss-free path, with Mahimahi's
    rules: each opportunity sends 1500 bytes from the head of the queue, a packet that does not
    fit finishes at a later opportunity (and is no longer in the queue meanwhile). Checks that
    every accepted packet fits under the limit, every queue drop would not have fitted, and every
    opportunity sends exactly the packets the log says it sent. Returns the largest occupancy
    seen, in packets and in bytes."""
    queue_drops = set(log.dropped_uids("queue"))
    queue: deque[tuple[int, int]] = deque()  # (uid, bytes) waiting
    queued_bytes = 0
    in_transit: list[int] | None = None  # [uid, bytes still to send]
    departed_since_opportunity: list[int] = []
    most_packets = most_bytes = 0

    def fits(size_bytes: int) -> bool:
        if limit_packets is not None:
            return len(queue) + 1 <= limit_packets
        assert limit_bytes is not None
        return queued_bytes + size_bytes <= limit_bytes

    for t_us, kind, event_uid, size in log.events:
        if kind == "+":
            assert event_uid is not None
            uid = event_uid
            if uid in queue_drops:
                assert not fits(size), f"{t_us}: uid {uid} dropped with room in the queue ({len(queue)} pkts, {queued_bytes} B)"
                continue
            assert fits(size), f"{t_us}: uid {uid} accepted beyond the limit ({len(queue)} pkts, {queued_bytes} B)"
            queue.append((uid, size))
            queued_bytes += size
            most_packets, most_bytes = max(most_packets, len(queue)), max(most_bytes, queued_bytes)
        elif kind == "-":
            assert event_uid is not None
            departed_since_opportunity.append(event_uid)
        elif kind == "#":
            room = OPPORTUNITY_BYTES
            completed = []
            while room > 0:
                if in_transit is None:
                    if not queue:
                        break
                    uid, size = queue.popleft()
                    queued_bytes -= size
                    in_transit = [uid, size]
                sent = min(room, in_transit[1])
                in_transit[1] -= sent
                room -= sent
                if in_transit[1] == 0:
                    completed.append(in_transit[0])
                    in_transit = None
            assert completed == departed_since_opportunity, f"{t_us}: replay sends {completed}, log {departed_since_opportunity}"
            departed_since_opportunity = []
    return most_packets, most_bytes


@pytest.mark.parametrize(
    ("option", "limit"),
    [("--uplink-queue-packets", 10), ("--uplink-queue-bytes", 15_000)],
    ids=["packets", "bytes"],
)
def test_droptail_never_exceeds_its_limit(emu: Path, netns: str, tmp_path: Path, option: str, limit: int) -> None:
    """20 Mbit/s of mixed 1000/1400/400-byte packets into 12 Mbit/s (a small packet can fit in a
    byte-limited queue where a big one cannot)."""
    log_path = tmp_path / "up.log"
    emulate(emu, netns, ["--uplink-rate", "12", option, str(limit), "--uplink-log", str(log_path)],
            traffic_command("udp-send", PORT, "--rate-mbps", 20, "--size", "1000,1400,400", "--seconds", 2))
    log = link_log.read(log_path)
    assert len(log.dropped_uids("queue")) > 100, "the queue never filled"
    assert {cause for *_, cause in log.drops} == {"queue"}
    by_packets = option.endswith("packets")
    most_packets, most_bytes = replay_droptail(log, limit if by_packets else None, None if by_packets else limit)
    if by_packets:
        assert most_packets == limit
    else:
        # Saturated, the queue fills until not even a 400-byte packet fits.
        assert limit - 400 < most_bytes <= limit


# --- pathological paths --------------------------------------------------------------------------

def test_tcp_crosses_one_packet_buffers(emu: Path, netns: str, tmp_path: Path) -> None:
    log_path = tmp_path / "up.log"
    with receiver(netns, "tcp-recv", PORT, "--seconds", 20) as rx:
        emulate(emu, netns, ["--uplink-queue-packets", "1", "--downlink-queue-packets", "1",
                             "--uplink-log", str(log_path)],
                traffic_command("tcp-send", PORT, "--seconds", 3))
        received = summary_of(rx)
    log = link_log.read(log_path)
    # 3 s at 12 Mbit/s is 4.5 MB. With room for one waiting packet, the second of any two
    # back-to-back segments is dropped unless an opportunity falls between them, so TCP keeps
    # cutting its window and moves ~1 Mbit/s here; "data moves" means at least 0.4 Mbit/s.
    print(f"tiny buffers: {received['bytes']} bytes received, {len(log.dropped_uids('queue'))} uplink queue drops")
    assert received["bytes"] > 150_000
    assert log.dropped_uids("queue")


def test_tcp_survives_ack_aggregation(emu: Path, netns: str, tmp_path: Path) -> None:
    """The downlink delivers ten opportunities every 200 ms, so ACKs come back in bursts."""
    trace = tmp_path / "bursts.trace"
    trace.write_text("200\n" * 10)
    log_path = tmp_path / "down.log"
    with receiver(netns, "tcp-recv", PORT, "--seconds", 20) as rx:
        emulate(emu, netns, ["--uplink-rate", "12", "--downlink-trace", str(trace), "--downlink-log", str(log_path)],
                traffic_command("tcp-send", PORT, "--seconds", 3))
        received = summary_of(rx)
    log = link_log.read(log_path)
    print(f"ack aggregation: {received['bytes']} bytes received, {len(log.departures)} downlink departures")
    # ACKs arrive ~5 times a second, so the window, not the 12 Mbit/s uplink, limits the flow
    # (0.7 to 1.3 MB in 3 s here); "still moves data" means at least 0.8 Mbit/s.
    assert received["bytes"] > 300_000
    assert len(log.departures) > 100
    off_beat = [d.t_us for d in log.departures if d.t_us % 200_000]
    assert off_beat == [], f"downlink departures off the 200 ms grid: {off_beat[:5]}"
