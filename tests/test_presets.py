"""Pantheon's emulator presets expand into the right emulator options, and options given on the
command line replace the preset's for the same parameter."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import REPO, in_ns
from pantheon import presets


def test_calibrated_preset_options(tmp_path: Path) -> None:
    opts = presets.lookup("nepal-wifi").options(tmp_path)
    assert opts == [
        "--delay", "28",
        "--uplink-poisson", "0.57", "--uplink-queue", "droptail", "--uplink-queue-packets", "14", "--uplink-loss", "0.0477",
        "--downlink-poisson", "0.57",
        "--timing", "mahimahi",
    ]


def test_ack_aggregation_writes_its_trace(tmp_path: Path) -> None:
    opts = presets.lookup("ack-aggregation-10x200ms").options(tmp_path)
    trace = Path(opts[opts.index("--downlink-trace") + 1])
    assert trace.read_text() == "200\n" * 10
    assert opts[opts.index("--uplink-rate") + 1] == "12"


def test_policers_have_one_packet_buffers_both_ways(tmp_path: Path) -> None:
    names = [n for n in presets.PRESETS if n.startswith("policer-")]
    assert len(names) == 6
    for name in names:
        opts = presets.lookup(name).options(tmp_path)
        assert opts.count("--uplink-queue-packets") == opts.count("--downlink-queue-packets") == 1
        assert opts[opts.index("--uplink-queue-packets") + 1] == "1"


def test_buffer_sweep_is_fractions_of_the_bdp() -> None:
    # 12 Mbit/s over a 60 ms round trip (30 ms each way) holds 90 000 bytes.
    bdp_bytes = 12e6 / 8 * 0.060
    sweep = sorted(p.uplink.queue_bytes for p in presets.PRESETS.values() if p.kind == "buffer sweep")
    assert sweep == [bdp_bytes * f for f in (0.1, 1 / 3, 0.5, 1)]


def test_user_options_replace_the_presets() -> None:
    base = ["--delay", "28", "--uplink-poisson", "0.57", "--uplink-queue", "droptail", "--uplink-queue-packets", "14",
            "--uplink-loss", "0.0477", "--downlink-poisson", "0.57"]
    merged = presets.merge(base, ["--uplink-rate", "5", "--uplink-queue-bytes", "3000", "--seed", "3"])
    assert merged == ["--delay", "28", "--uplink-loss", "0.0477", "--downlink-poisson", "0.57",
                      "--uplink-rate", "5", "--uplink-queue-bytes", "3000", "--seed", "3"]


def test_every_preset_runs_on_mahimahis_clock_unless_the_user_says_otherwise(tmp_path: Path) -> None:
    for preset in presets.PRESETS.values():
        opts = preset.options(tmp_path)
        assert opts[opts.index("--timing") + 1] == "mahimahi", preset.name
    merged = presets.merge(presets.lookup("india-wired").options(tmp_path), ["--timing", "us"])
    assert merged.count("--timing") == 1 and merged[-2:] == ["--timing", "us"]


def test_unknown_preset_is_a_clear_error() -> None:
    with pytest.raises(presets.PresetError, match="unknown emulator 'nope'.*nepal-wifi"):
        presets.lookup("nope")


def test_emulate_accepts_a_preset(netns: str, tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    done = subprocess.run(
        in_ns(netns, [str(REPO / ".venv/bin/pantheon"), "emulate", "--emulator", "china-wired", "--uplink-log", str(log), "--", "true"]),
        capture_output=True, text=True, timeout=30,
    )
    assert done.returncode == 0, done.stderr
    header = log.read_text().splitlines()[2]
    assert "delay 51000 us; loss 0.0006; queue droptail [packets=94]; delivery constant 77.72 Mbit/s" in header
