"""Harm and sharing (issue 35 §2-4), in the simulator, which runs crates/cc's controllers as
pantheon-udp does over the emulator (these take seconds; the emulated harness is exercised by
tests/test_workloads.py).

- `pantheon harm`: a scheme's harm on itself is 0 by definition; Cubic, which fills a deep buffer,
  does Vegas, which backs off as delay grows, great harm; Vegas does Cubic none (Ware et al.,
  "Beyond Jain's fairness index", HotNets 2019, take exactly this kind of pair as their example).
- BBR (v1) against Cubic: BBR takes most of a shallow buffer's link and less and less of a deeper
  one, the direction Ware et al., "Modeling BBR's interactions with loss-based congestion
  control", IMC 2019, model and measure (BBR is window-limited by its 2·BDP cap when it competes,
  so the deeper the buffer Cubic fills, the smaller BBR's share).
- RTT unfairness: two Cubic flows whose base RTTs are 20 and 80 ms; the short one gets more.
"""
from __future__ import annotations

import json
from pathlib import Path

from test_harness import pantheon

DEEP = ["--delay", "20", "--uplink-queue", "droptail", "--uplink-queue-bytes", "300000"]
"""12 Mbit/s (the default), 20 ms each way: 1 BDP is 60 kB, this queue 5 BDP."""


def test_harm_matrix_of_cubic_and_vegas(tmp_path: Path) -> None:
    data = tmp_path / "harm"
    done = pantheon("harm", "--schemes", "cubic-user,vegas-user", "--sim", "--runtime", "20", "--run-times", "2", *DEEP,
                    "--data-dir", str(data))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "harm A→B (throughput / p95 delay)" in done.stdout
    matrix = json.loads((data / "harm.json").read_text())
    for scheme in ("cubic-user", "vegas-user"):
        assert matrix[scheme][scheme]["throughput"] == 0 and matrix[scheme][scheme]["delay"] == 0
    cubic_on_vegas, vegas_on_cubic = matrix["cubic-user"]["vegas-user"], matrix["vegas-user"]["cubic-user"]
    assert cubic_on_vegas["throughput"] > 0.6 and cubic_on_vegas["delay"] > 0.5, cubic_on_vegas
    assert vegas_on_cubic["throughput"] < 0.1 and vegas_on_cubic["delay"] < 0.1, vegas_on_cubic
    assert cubic_on_vegas["runs"] == 2 and cubic_on_vegas["baseline_runs"] == 4, "each B flow of B+B is a baseline run"
    assert (data / "harm.png").exists() and "Harm" in (data / "report.html").read_text()


def test_harm_needs_two_schemes_and_no_flow_options(tmp_path: Path) -> None:
    done = pantheon("harm", "--schemes", "cubic-user", "--sim", "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 2 and done.stderr.strip() == "pantheon: --schemes: give 2 to 12 different schemes, got 1"
    done = pantheon("harm", "--schemes", "cubic-user,copa", "--sim", "--flows", "3", "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 2 and "--flows and --interval do not apply" in done.stderr
    assert not (tmp_path / "d").exists()


def _shares(tmp_path: Path, name: str, scenario: str, *path: str) -> dict:
    (tmp_path / f"{name}.toml").write_text(scenario)
    data = tmp_path / name
    done = pantheon("sim", "--scenario", str(tmp_path / f"{name}.toml"), *path, "--data-dir", str(data), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((data / "perf.json").read_text())["schemes"][name]["runs"]["1"]


BBR_VS_CUBIC = """[[flow]]
scheme = "bbr-user"
start_s = 0
duration_s = 40
[[flow]]
scheme = "cubic-user"
start_s = 0
duration_s = 40
"""


def test_bbr_takes_most_of_a_shallow_buffer_and_less_of_a_deep_one(tmp_path: Path) -> None:
    def bbr_share(name: str, queue_bytes: int) -> float:
        flows = _shares(tmp_path, name, BBR_VS_CUBIC, "--delay", "20", "--uplink-queue", "droptail",
                        "--uplink-queue-bytes", str(queue_bytes))["flows"]
        return flows["1"]["throughput_mbps"] / (flows["1"]["throughput_mbps"] + flows["2"]["throughput_mbps"])

    # Measured (3 seeds each, 60 s): 0.72 at 0.5 and 1 BDP, 0.39 at 5, 0.28 at 10, 0.13 at 20 BDP.
    shallow, deep = bbr_share("shallow", 30_000), bbr_share("deep", 600_000)
    assert shallow > 0.6 and deep < 0.4, (shallow, deep)


def test_cubic_favours_the_shorter_round_trip(tmp_path: Path) -> None:
    two_rtts = BBR_VS_CUBIC.replace('"bbr-user"', '"cubic-user"') + "extra_delay_ms = 30\n"
    run = _shares(tmp_path, "rtt", two_rtts, "--delay", "10", "--uplink-queue", "droptail", "--uplink-queue-bytes", "60000")
    # Base RTTs of 20 and 80 ms (4x). Measured 2.9x with the kernel's Cubic over the emulator and
    # 3.0-3.7x in the simulator: near-linear in the RTT ratio, as Ha, Rhee & Xu (CUBIC, 2008) claim
    # for Cubic, where Reno's share goes with the ratio's square.
    assert 1.5 < run["rtt_fairness"] < 6, run["rtt_fairness"]
    short, long = run["flows"]["1"], run["flows"]["2"]
    assert long["delay_p95_ms"] - short["delay_p95_ms"] > 25, "the long flow's one-way delays include its 30 ms"
