"""Pantheon's emulator presets expand into the right emulator options, and options given on the
command line replace the preset's for the same parameter."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from pantheon import presets
from support.emulator import in_ns


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
    """The original's paths and the 1-BDP path with Mahimahi's CoDel; the AQMs Mahimahi lacks run on µs."""
    for preset in presets.PRESETS.values():
        opts = preset.options(tmp_path)
        ours = preset.name in ("home-router-fq-codel", "l4s-dualpi2")
        assert opts[opts.index("--timing") + 1] == ("us" if ours else "mahimahi"), preset.name
    merged = presets.merge(presets.lookup("india-wired").options(tmp_path), ["--timing", "us"])
    assert merged.count("--timing") == 1 and merged[-2:] == ["--timing", "us"]


def test_emulate_splices_the_preset_before_the_options_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pantheon emulate --delay 5 --emulator=nepal-wifi -- CMD`: the preset's options, less its delay, then
    the user's; CMD's own arguments are never read, even one that looks like --emulator."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    command = ["--", "sh", "-c", "echo --emulator nope"]
    assert presets.splice(["--delay", "5", "--emulator=nepal-wifi", *command]) == [
        "--uplink-poisson", "0.57", "--uplink-queue", "droptail", "--uplink-queue-packets", "14", "--uplink-loss", "0.0477",
        "--downlink-poisson", "0.57", "--timing", "mahimahi", "--delay", "5", *command]
    assert presets.splice(["--emulator", "nepal-wifi", "--timing", "us"])[-4:] == ["--downlink-poisson", "0.57", "--timing", "us"]
    assert presets.splice(["--delay", "5", *command]) == ["--delay", "5", *command]


def test_the_aqm_presets_are_the_queues_of_todays_internet(tmp_path: Path) -> None:
    """CoDel on the buffer sweep's 1-BDP path (12 Mbit/s × 60 ms RTT = 90 000 bytes, as buffer-90000b);
    a home router's FQ-CoDel, 10 Mbit/s up (the data's way) and 50 down; DualPI2 at 40 Mbit/s."""
    bdp = presets.lookup("bdp-codel")
    sweep = presets.lookup("buffer-90000b")
    assert (bdp.delay_ms, bdp.uplink.rate_mbps, bdp.uplink.queue_bytes) == (sweep.delay_ms, sweep.uplink.rate_mbps, 12e6 / 8 * 0.060)
    assert bdp.options(tmp_path) == [
        "--delay", "30", "--uplink-rate", "12", "--uplink-queue", "codel", "--uplink-queue-bytes", "90000",
        "--uplink-queue-args", "target=5,interval=100", "--downlink-rate", "12", "--timing", "mahimahi"]
    home = presets.lookup("home-router-fq-codel").options(tmp_path)
    assert home == [
        "--delay", "10",
        "--uplink-rate", "10", "--uplink-queue", "fq-codel", "--uplink-queue-packets", "10240",
        "--uplink-queue-args", "target=5,interval=100",
        "--downlink-rate", "50", "--downlink-queue", "fq-codel", "--downlink-queue-packets", "10240",
        "--downlink-queue-args", "target=5,interval=100", "--timing", "us"]
    l4s = presets.lookup("l4s-dualpi2").options(tmp_path)
    assert [l4s[l4s.index(f"--{d}-queue") + 1] for d in ("uplink", "downlink")] == ["dualpi2", "dualpi2"]
    assert l4s[l4s.index("--uplink-rate") + 1] == "40" and l4s[l4s.index("--delay") + 1] == "10"
    listing = {line.split()[0]: line for line in presets.table().splitlines()}
    assert "12 Mbit/s, CoDel 90000 bytes (target=5,interval=100)" in listing["bdp-codel"]
    assert "FQ-CoDel 10240 packets" in listing["home-router-fq-codel"] and "AQM" in listing["l4s-dualpi2"]
    assert list(presets.PRESETS)[-3:] == ["bdp-codel", "home-router-fq-codel", "l4s-dualpi2"], "AQMs listed last"


def test_the_users_queue_options_replace_the_presets_queue() -> None:
    """A discipline or a limit replaces the preset's queue with its parameters; parameters alone
    replace only the preset's parameters."""
    base = presets.lookup("bdp-codel").options(Path("/nonexistent"))
    args_only = presets.merge(base, ["--uplink-queue-args", "target=10,interval=200,ecn=0"])
    assert args_only[args_only.index("--uplink-queue") + 1] == "codel"
    assert args_only.count("--uplink-queue-args") == 1 and args_only[-1] == "target=10,interval=200,ecn=0"
    assert args_only[args_only.index("--uplink-queue-bytes") + 1] == "90000"
    droptail = presets.merge(base, ["--uplink-queue-packets", "50"])
    assert [o for o in droptail if o.startswith("--uplink-queue")] == ["--uplink-queue-packets"]
    pie = presets.merge(base, ["--uplink-queue", "pie", "--uplink-queue-args", "qdelay_ref=15"])
    assert pie[-4:] == ["--uplink-queue", "pie", "--uplink-queue-args", "qdelay_ref=15"]
    assert "--uplink-queue-bytes" not in pie and pie.count("--uplink-queue-args") == 1


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


@pytest.mark.parametrize(("name", "queue"), [
    ("bdp-codel", "queue codel [bytes=90000,target=5,interval=100,"),
    ("home-router-fq-codel", "queue fq-codel [packets=10240,target=5,interval=100,"),
    ("l4s-dualpi2", "queue dualpi2 [packets=10000,"),
], ids=["bdp-codel", "home-router-fq-codel", "l4s-dualpi2"])
def test_emulate_takes_each_aqm_preset(netns: str, tmp_path: Path, name: str, queue: str) -> None:
    """The emulator itself judges the AQM presets' options and names the queue in its log's header."""
    log = tmp_path / "up.log"
    done = subprocess.run(
        in_ns(netns, [str(REPO / ".venv/bin/pantheon"), "emulate", "--emulator", name, "--uplink-log", str(log), "--", "true"]),
        capture_output=True, text=True, timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert queue in log.read_text().splitlines()[2]


def test_every_builtin_preset_is_a_file_that_reads_back_as_itself(tmp_path: Path) -> None:
    assert {p.stem for p in presets.PRESETS_DIR.glob("*.toml")} == set(presets.PRESETS)
    for name, preset in presets.PRESETS.items():
        written = tmp_path / f"{name}.toml"
        written.write_text(preset.toml("a comment"))
        assert presets.lookup(str(written)) == preset


def test_a_preset_file_is_taken_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('kind = "calibrated"\ndelay_ms = 12.5\n[uplink]\nrate_mbps = 24.0\ndelivery = "poisson"\n'
                    'queue_bytes = 60000\nloss = 0.01\n[downlink]\nrate_mbps = 24.0\ndelivery = "poisson"\n')
    assert presets.lookup(str(path)).options(tmp_path) == [
        "--delay", "12.5", "--uplink-poisson", "24", "--uplink-queue", "droptail", "--uplink-queue-bytes", "60000",
        "--uplink-loss", "0.01", "--downlink-poisson", "24", "--timing", "us"]


@pytest.mark.parametrize("text, message", [
    ("delay_ms = [", "not TOML"),
    ("speed = 3", "unknown key 'speed'"),
    ("[uplink]\nrate_mbps = -1", r"uplink.rate_mbps must be a number > 0, got -1"),
    ("[uplink]\nrate_mbps = 1\ntrace_ms = [1]", "exactly one of rate_mbps and trace_ms"),
    ("[uplink]\nrate_mbps = 1\ndelivery = 'bursty'", "delivery must be one of constant, poisson"),
    ("[uplink]\nrate_mbps = 1\nqueue_bytes = 1.5", "queue_bytes must be an integer"),
    ("[uplink]\nrate_mbps = 1\nloss = 2", r"loss must be a number >= 0 and <= 1"),
    ("timing = 'ns'", "timing must be one of us, mahimahi"),
    ("[uplink]\nrate_mbps = 1\nqueue = 'blue'", r"uplink.queue must be one of droptail, infinite, codel, pie, fq-codel, red, "
                                                 r"dualpi2, got 'blue'"),
    ("[uplink]\nrate_mbps = 1\nqueue = 'droptail'", "droptail\" needs a limit: queue_packets or queue_bytes"),
    ("[uplink]\nrate_mbps = 1\nqueue = 'infinite'\nqueue_packets = 5", "infinite\" takes no limit"),
    ("[uplink]\nrate_mbps = 1\nqueue_args = 'target=5'", r"queue_args needs queue"),
    ("[uplink]\nrate_mbps = 1\nqueue = 'codel'\nqueue_args = 'target 5'", r"queue_args must be text of key=value items"),
    ("[uplink]\nrate_mbps = 1\nqueue = 'codel'\nqueue_args = 5", r"queue_args must be text of key=value items"),
])
def test_a_bad_preset_file_is_one_line_naming_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(presets.PresetError, match=message) as caught:
        presets.lookup(str(path))
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_preset_file_is_one_line() -> None:
    with pytest.raises(presets.PresetError, match="emulator file /nonexistent/path.toml: No such file"):
        presets.lookup("/nonexistent/path.toml")


def test_sim_runs_over_a_preset_file(tmp_path: Path) -> None:
    path = tmp_path / "path.toml"
    path.write_text("delay_ms = 5\n[uplink]\nrate_mbps = 6\nqueue_packets = 20\n[downlink]\nrate_mbps = 6\n")
    data = tmp_path / "data"
    done = subprocess.run([str(REPO / ".venv/bin/pantheon"), "sim", "--schemes", "cubic-user", "--runtime", "2",
                           "--emulator", str(path), "--data-dir", str(data), "--no-analyze", "--quiet"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    options = json.loads((data / "metadata.json").read_text())["emulator_options"]
    assert options[:6] == ["--delay", "5", "--uplink-rate", "6", "--uplink-queue", "droptail"]
