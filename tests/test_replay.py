"""An emulated run of several flows replayed in the simulator (pantheon.sim.replay) starts each flow
where the emulated one started on the link's clock: the earliest at the first data datagram on the
uplink log, another as much later as its first datagram left its sender after the earliest's (one
flow's replay: tests/test_sim_fidelity.py). Fast: the run dir is written here, and the replay
itself runs pantheon-sim (a fraction of a second)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pantheon.errors import PantheonError
from pantheon.sim import replay

OPTIONS = ["--delay", "20", "--uplink-rate", "12", "--uplink-queue", "droptail", "--uplink-queue-bytes", "30000",
           "--downlink-rate", "12", "--downlink-queue", "droptail", "--downlink-queue-bytes", "60000",
           "--seed", "3"]


def run_dir(tmp_path: Path, firsts_ms: dict[int, float], flows: int) -> Path:
    """A run dir as `pantheon test local` leaves it, with what the replay reads: run.json, the
    emulator's uplink log (the tunnel's 44-byte handshake, then data at 1.25 s on the link's clock)
    and datalink.log (flow k's first datagram at firsts_ms[k] on the run's clock)."""
    d = tmp_path / "run1"
    d.mkdir()
    d.joinpath("run.json").write_text(json.dumps({"seed": 3, "flows": [{"duration_s": 10.0}] * flows}))
    d.joinpath("uplink.log").write_text("# pantheon-emu link log v1\n84545 + 0 44\n1250000 + 1 1500\n"
                                        "1250100 + 2 1500\n")
    sends = sorted((t_ms + 0.1 * i, flow) for flow, t_ms in firsts_ms.items() for i in range(3))
    d.joinpath("datalink.log").write_text("# init timestamp: 1796037701997.847\n"
                                          + "".join(f"{t:.3f} + 1464 {flow}\n" for t, flow in sends))
    return d


def test_a_second_flow_starts_as_much_later_as_it_left_its_sender(tmp_path: Path) -> None:
    got = replay.replay_of(run_dir(tmp_path, {1: 1007.5, 2: 1000.0}, 2), OPTIONS, "cubic")
    assert [f.start_s for f in got.flows] == pytest.approx([1.2575, 1.25])
    assert got.runtime_s == pytest.approx(1.2575 + 10.0 + replay.TAIL_S)
    flows = replay.run(got, tmp_path / "replayed")
    assert len(flows) == 2 and all(f["throughput_mbps"] > 1 for f in flows)
    # Exactly there: a replay's flows start as told, not as late as the simulated hosts start a flow.
    assert replay.first_sends_us(tmp_path / "replayed" / "datalink.log") == {1: 1_257_500, 2: 1_250_000}


def test_a_flow_that_sent_nothing_cannot_be_replayed(tmp_path: Path) -> None:
    with pytest.raises(PantheonError, match="flow 2 sent nothing"):
        replay.replay_of(run_dir(tmp_path, {1: 1000.0}, 2), OPTIONS, "cubic")
