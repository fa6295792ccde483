"""The record merge (pantheon.harness.records) on hand-written tunnel logs: the local mode's exact
output, and the remote mode's mapping of every time onto the sender's clock (issue 16 §2)."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pantheon import plan as plans
from pantheon.harness.clock import ClockFit, PeerClock
from pantheon.harness.records import Summary, clock_flags, merge_run

T0_US = 1_795_000_000_000_000
"""The harness's t0 on the local clock, µs since the Unix epoch."""
PATH_DELAY_US = 20_000
"""One-way delay of the (imaginary) path, each way."""


def write_log(path: Path, base_us: int, packets: list[tuple[int, int, int]]) -> None:
    """A native tunnel log: a header with its base time, then `t_us uid bytes` lines."""
    lines = [f"# pantheon-tunnel log\n# base: t_us 0 is {base_us:016d} us since the Unix epoch (CLOCK_REALTIME)\n"]
    lines += [f"{t} {uid} {size}\n" for t, uid, size in packets]
    path.write_text("".join(lines))


def peer_clock_fit(offset_us: float, drift_us_per_s: float = 0.0, step: dict | None = None) -> ClockFit:
    return ClockFit(t_ref_us=T0_US, offset_us=offset_us, drift_us_per_s=drift_us_per_s, exchanges=120, kept=40,
                    min_rtt_us=2 * PATH_DELAY_US, residual_us=80.0, bound_us=PATH_DELAY_US + 80.0, step=step)


def one_flow_run(run_dir: Path, sender_clock, receiver_clock) -> None:
    """Flow 0: data packets 1, 2, 3 sent at 1.000, 1.010, 1.020 s after t0 (true time), 1 and 3
    delivered PATH_DELAY_US later, 2 lost; one ack each way back for 1 and 3. Each endpoint
    writes its log on its own clock: sender_clock and receiver_clock map true epoch µs to it."""
    sends = {1: T0_US + 1_000_000, 2: T0_US + 1_010_000, 3: T0_US + 1_020_000}
    sender_base, receiver_base = sender_clock(T0_US), receiver_clock(T0_US)
    s = lambda t: sender_clock(t) - sender_base  # noqa: E731
    r = lambda t: receiver_clock(t) - receiver_base  # noqa: E731
    write_log(run_dir / "flow0.sender.ingress.log", sender_base, [(s(t), uid, 1464) for uid, t in sends.items()])
    write_log(run_dir / "flow0.receiver.egress.log", receiver_base, [(r(sends[u] + PATH_DELAY_US), u, 1464) for u in (1, 3)])
    acks = {11: sends[1] + PATH_DELAY_US + 100, 13: sends[3] + PATH_DELAY_US + 100}
    write_log(run_dir / "flow0.receiver.ingress.log", receiver_base, [(r(t), uid, 52) for uid, t in acks.items()])
    write_log(run_dir / "flow0.sender.egress.log", sender_base, [(s(t + PATH_DELAY_US), uid, 52) for uid, t in acks.items()])


def records(run_dir: Path) -> list[dict]:
    return pq.read_table(run_dir / "records.parquet").to_pylist()


def test_local_mode_records_and_text_logs(tmp_path):
    one_flow_run(tmp_path, lambda t: t, lambda t: t)
    (tmp_path / "uplink.log").write_text(f"# base: t_us 0 is {T0_US:016d} us since the Unix epoch\n1000500 # 1500\n")
    summary = merge_run(tmp_path, plans.uniform("cubic", 1, 0, 2.0), T0_US / 1e6)
    assert (summary.data_packets, summary.ack_packets, summary.silent_flows) == (3, 2, [])
    assert (summary.negative_delays, summary.min_delay_us) == (0, PATH_DELAY_US)
    data = [r for r in records(tmp_path) if r["direction"] == "data"]
    assert [(r["uid"], r["send_us"], r["recv_us"]) for r in data] == [
        (1, 1_000_000, 1_020_000), (2, 1_010_000, None), (3, 1_020_000, 1_040_000)]
    assert (tmp_path / "datalink.log").read_text() == (
        "# init timestamp: 1795000000000.000\n"
        "1000.000 + 1464 1\n1000.500 # 1500\n1010.000 + 1464 1\n1020.000 - 1464 20.000 1\n"
        "1020.000 + 1464 1\n1040.000 - 1464 20.000 1\n")
    assert (tmp_path / "acklink.log").read_text() == (
        "# init timestamp: 1795000000000.000\n"
        "1020.100 + 52 1\n1040.100 - 52 20.000 1\n1040.100 + 52 1\n1060.100 - 52 20.000 1\n")


@pytest.mark.parametrize("remote_side", ["sender", "receiver"])
def test_remote_times_are_mapped_onto_the_senders_clock(tmp_path, remote_side):
    # The remote host's clock is 7 s ahead and gains 30 µs/s: uncorrected, every delay would be ±7 s.
    fit = peer_clock_fit(7_000_000, 30.0)
    peer = fit.local_to_peer_us
    local = lambda t: t  # noqa: E731
    sender, receiver = (peer, local) if remote_side == "sender" else (local, peer)
    one_flow_run(tmp_path, sender, receiver)
    summary = merge_run(tmp_path, plans.uniform("cubic", 1, 0, 2.0), T0_US / 1e6, PeerClock(fit, remote_side))
    assert summary.negative_delays == 0
    assert summary.min_delay_us == pytest.approx(PATH_DELAY_US, abs=2)
    rows = records(tmp_path)
    for r in rows:
        if r["recv_us"] is not None:
            assert r["recv_us"] - r["send_us"] == pytest.approx(PATH_DELAY_US, abs=2), r
    # On the sender's clock, t0 included: 1 s of true time after t0 reads 1 s plus the drift when
    # the sender's clock is the remote one.
    first = next(r for r in rows if r["uid"] == 1)
    assert first["send_us"] == pytest.approx(1_000_030 if remote_side == "sender" else 1_000_000, abs=1)


def test_uncorrected_remote_clock_would_give_absurd_delays(tmp_path):
    # The check above can fail: the same logs merged as if both were local are 7 s off.
    fit = peer_clock_fit(7_000_000)
    one_flow_run(tmp_path, lambda t: t, fit.local_to_peer_us)
    summary = merge_run(tmp_path, plans.uniform("cubic", 1, 0, 2.0), T0_US / 1e6)
    assert summary.min_delay_us == 7_000_000 + PATH_DELAY_US


def test_delays_below_zero_after_correction_are_flagged_with_the_numbers(tmp_path):
    # The fit says the receiver's clock is 50 ms further ahead than it is: on a 20 ms path every
    # corrected delay is −30 ms, beyond the ±20.08 ms bound's promise. One 10 ms off gives −10 ms,
    # which the bound allows: no flag.
    truth, wrong, within = peer_clock_fit(7_000_000), peer_clock_fit(7_050_000), peer_clock_fit(7_030_000)
    one_flow_run(tmp_path, lambda t: t, truth.local_to_peer_us)
    plan = plans.uniform("cubic", 1, 0, 2.0)
    summary = merge_run(tmp_path, plan, T0_US / 1e6, PeerClock(wrong, "receiver"))
    assert (summary.negative_delays, summary.min_delay_us) == (2, -30_000)
    assert clock_flags(summary, wrong) == [
        "clock: 2 of 3 data packets arrived before they were sent after the clock correction (least one-way delay "
        "-30.000 ms, clock bound ± 20.080 ms): the clocks moved beyond the measured bound"]
    assert clock_flags(merge_run(tmp_path, plan, T0_US / 1e6, PeerClock(within, "receiver")), within) == []
    assert clock_flags(merge_run(tmp_path, plan, T0_US / 1e6, PeerClock(truth, "receiver")), truth) == []


def test_a_clock_step_is_flagged():
    fit = peer_clock_fit(0, step={"at_us": T0_US + 15_250_000, "size_us": 200_000.0})
    assert clock_flags(Summary(data_packets=10, min_delay_us=5000), fit) == [
        "clock: the remote host's clock stepped by +200.000 ms at 11:06:55.250 UTC (local clock) during the run; "
        "one-way delays around it are off by up to that much"]
