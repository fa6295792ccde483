"""Properties of the metrics over generated runs (hypothesis, bounded so the file runs in seconds):
what goes through an emulated bottleneck never beats its capacity, loss stays in [0, 1], merging
flows keeps every byte, the reader gives back what was written, and the percentile is the
nearest-rank one."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pantheon.analysis.events import LinkEvents
from pantheon.analysis.logs import read_text_log
from pantheon.analysis.metrics import nearest_rank, run_metrics
from pantheon.analysis.series import binned

FAST = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@st.composite
def emulated_runs(draw, constant_rate: bool):
    """Packets of 1..3 flows through a FIFO bottleneck: each delivery opportunity (1500 B) sends
    the head of the queue if it has arrived, as a Mahimahi-style link does; what is queued when
    the opportunities end is lost. Returns (events, opportunity times)."""
    flows = draw(st.integers(1, 3))
    packets = draw(st.integers(1, 80))
    arrivals = np.sort(np.array(draw(st.lists(st.integers(0, 200_000), min_size=packets, max_size=packets))))
    sizes = np.array(draw(st.lists(st.integers(40, 1500), min_size=packets, max_size=packets)))
    owners = np.array(draw(st.lists(st.integers(1, flows), min_size=packets, max_size=packets)))
    if constant_rate:
        gap = draw(st.integers(100, 5000))
        opportunities = np.arange(draw(st.integers(0, 5000)), 250_000, gap)
    else:
        opportunities = np.unique(np.array(draw(st.lists(st.integers(0, 250_000), min_size=2, max_size=300))))
    delivered_at = np.full(packets, -1)
    head = 0
    for t in opportunities:
        if head < packets and arrivals[head] <= t:
            delivered_at[head] = t
            head += 1
    got = delivered_at >= 0
    events = LinkEvents.build((owners, arrivals, sizes), (owners[got], delivered_at[got], sizes[got], (delivered_at - arrivals)[got]),
                              (opportunities, np.full(opportunities.size, 1500)))
    return events


@FAST
@given(emulated_runs(constant_rate=False), st.sampled_from([1.0, 10.0, 500.0]))
def test_no_bin_delivers_more_than_the_link_could(events, bin_ms):
    series = binned(events, bin_ms)
    delivered = sum(series.throughput_mbps.values())
    assert np.all(delivered <= series.capacity_mbps + 1e-9)


@FAST
@given(emulated_runs(constant_rate=True))
def test_throughput_never_exceeds_a_constant_rate_capacity(events):
    # N deliveries at distinct opportunities Δ apart span at least (N-1)Δ, and carry at most
    # 1500 B each: (N-1)/N of the original's throughput (bits over the delivery span) is at most
    # 1500·8/Δ, which the capacity (opportunity bits over their span, M/(M-1)·1500·8/Δ) exceeds.
    run = run_metrics(events)
    n = events.recv_t_us.size
    if n >= 2:
        assert run.all.throughput_mbps * (n - 1) / n <= run.capacity_mbps + 1e-9
        for flow in run.flows:
            k = flow.delivered_packets
            assert k < 2 or flow.throughput_mbps * (k - 1) / k <= run.capacity_mbps + 1e-9


@FAST
@given(emulated_runs(constant_rate=False))
def test_loss_is_a_fraction_and_merging_flows_keeps_every_byte(events):
    run = run_metrics(events)
    for m in [run.all, *run.flows]:
        assert m.loss_rate is None or 0.0 <= m.loss_rate <= 1.0
    assert sum(f.sent_bytes for f in run.flows) == run.all.sent_bytes == int(events.send_bytes.sum())
    assert sum(f.delivered_bytes for f in run.flows) == run.all.delivered_bytes
    merged = LinkEvents.build((np.ones_like(events.send_flow), events.send_t_us, events.send_bytes),
                              (np.ones_like(events.recv_flow), events.recv_t_us, events.recv_bytes, events.delay_us))
    one = run_metrics(merged)
    assert (one.flows[0].sent_bytes, one.flows[0].delivered_bytes) == (run.all.sent_bytes, run.all.delivered_bytes)
    assert one.flows[0].throughput_mbps == run.all.throughput_mbps
    assert one.flows[0].delay_p95_ms == run.all.delay_p95_ms


@FAST
@given(emulated_runs(constant_rate=False),
       st.lists(st.sampled_from(["", "1.5", "x y z", "3 + ", "4 - 1500", "5 ? 1 2", "  ", "7 # abc", "8 + 1500 1 2 3"]), max_size=6))
def test_the_text_log_gives_back_what_was_written_around_garbage(tmp_path_factory, events, garbage):
    lines = [(t, f"{t / 1000:.3f} + {b} {f}") for f, t, b in zip(events.send_flow, events.send_t_us, events.send_bytes)]
    lines += [(t, f"{t / 1000:.3f} - {b} {d / 1000:.3f} {f}")
              for f, t, b, d in zip(events.recv_flow, events.recv_t_us, events.recv_bytes, events.delay_us)]
    lines += [(t, f"{t / 1000:.3f} # 1500") for t in events.opportunity_t_us]
    text = [line for _, line in sorted(lines)]
    for i, junk in enumerate(garbage):
        text.insert((i * 7) % (len(text) + 1), junk)
    path = tmp_path_factory.mktemp("log") / "datalink.log"
    path.write_text("# init timestamp: 0\n" + "\n".join(text) + "\n")
    back, problems = read_text_log(path)
    assert sorted(zip(back.send_flow, back.send_t_us, back.send_bytes)) == sorted(zip(events.send_flow, events.send_t_us, events.send_bytes))
    assert sorted(zip(back.recv_flow, back.recv_t_us, back.delay_us)) == sorted(zip(events.recv_flow, events.recv_t_us, events.delay_us))
    assert sorted(back.opportunity_t_us.tolist()) == sorted(events.opportunity_t_us.tolist())
    assert sum(count for count, _ in problems.found.values()) == sum(1 for g in garbage if g.strip())  # blanks are fine


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=300), st.sampled_from([50, 90, 95, 99]))
def test_nearest_rank_matches_the_inverted_cdf_percentile(values, percent):
    x = np.sort(np.array(values))
    assert nearest_rank(x, percent) == np.percentile(x, percent, method="inverted_cdf")
