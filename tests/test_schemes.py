"""The scheme registry and `pantheon schemes list | setup | check`: every manifest in schemes/ is
sound and set up, every scheme passes its check (a short flow that moves data over the emulator and
stops cleanly), and a broken manifest, a failed setup or a scheme that ignores SIGTERM is reported in
one line without hiding or stopping the others."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pantheon import schemes
from test_harness import pantheon, run_namespaces

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs flows over the emulator (needs root)")
KERNEL_RECEIVER = '["{python}", "-m", "pantheon.kernel_tcp", "receiver", "{port}", "--bind", "{local}"]'
KERNEL_SENDER = '["{python}", "-m", "pantheon.kernel_tcp", "sender", "{peer}", "{port}", "--cc", "cubic"]'


def manifest(directory: Path, name: str, extra: str = "", receiver: str = KERNEL_RECEIVER, sender: str = KERNEL_SENDER) -> None:
    (directory / f"{name}.toml").write_text(
        f'name = "{name}"\ndisplay = "{name}"\ncolor = "#000000"\ndescription = "a test scheme"\n'
        f'run_first = "receiver"\nreceiver = {receiver}\nsender = {sender}\n{extra}')


def listed(env: dict[str, str]) -> dict[str, str]:
    """`pantheon schemes list`, its line per scheme."""
    done = pantheon("schemes", "list", env=env)
    assert done.returncode == 0, done.stderr
    return {line.split()[0]: line for line in done.stdout.splitlines()[1:]}


@pytest.fixture
def extra_schemes(tmp_path: Path):
    """A directory of test manifests on $PANTHEON_SCHEMES_PATH; their setup state is removed after."""
    directory = tmp_path / "schemes"
    directory.mkdir()
    yield directory
    for path in directory.glob("*.toml"):
        for suffix in (".log", ".failed"):
            (schemes.SETUP_LOGS / f"{path.stem}{suffix}").unlink(missing_ok=True)


def test_every_manifest_is_sound_and_set_up() -> None:
    registry = schemes.registry()
    assert registry.broken == {}
    assert {"cubic", "bbr", "reno"} <= registry.schemes.keys()
    for name, scheme in registry.schemes.items():
        kind, why = scheme.status()
        assert kind in ("ready", "unavailable"), f"{name}: {kind}: {why} (./setup.sh sets every scheme up)"
        assert scheme.versions, f"{name}: the manifest must say which versions it runs"
    colors = [s.color.lower() for s in registry.schemes.values()]
    assert len(set(colors)) == len(colors), "each scheme has its own plot colour"


def test_list_shows_broken_manifests_without_hiding_the_others(extra_schemes: Path) -> None:
    (extra_schemes / "syntax.toml").write_text('name = "syntax"\ndisplay = \n')
    manifest(extra_schemes, "nosender", receiver='["true"]', sender="[1, 2]")
    manifest(extra_schemes, "placeholder", sender='["{peer}", "{nonsense}"]')
    manifest(extra_schemes, "unbuilt", extra='[setup]\nready = ["{dir}/never-built"]\n')
    manifest(extra_schemes, "nodeb", extra='[setup]\ndebian = ["pantheon-no-such-package"]\n')
    manifest(extra_schemes, "untrained", extra='needs_files = ["{dir}/../weights.safetensors"]\n')
    lines = listed({"PANTHEON_SCHEMES_PATH": str(extra_schemes)})
    assert "ready" in lines["cubic"]
    assert "broken" in lines["syntax"] and "not a readable TOML manifest" in lines["syntax"]
    assert "sender must be a list of strings" in lines["nosender"]
    assert "unknown placeholder" in lines["placeholder"] and "'nonsense'" in lines["placeholder"]
    assert "needs setup" in lines["unbuilt"] and "never-built is missing" in lines["unbuilt"]
    assert "Debian package pantheon-no-such-package not installed" in lines["nodeb"]
    assert "unavailable" in lines["untrained"]
    assert f"{extra_schemes.parent}/weights.safetensors is missing (no setup step makes it" in lines["untrained"]


@needs_root
def test_a_failed_setup_is_one_line_remembered_and_skipped_by_campaigns(extra_schemes: Path, tmp_path: Path) -> None:
    env = {"PANTHEON_SCHEMES_PATH": str(extra_schemes)}
    manifest(extra_schemes, "flaky", extra='[setup]\ncommands = [["sh", "-c", "test -e {dir}/fixed && touch {dir}/built"]]\n'
                                           'ready = ["{dir}/built"]\n')
    done = pantheon("schemes", "setup", "flaky", "cubic", env=env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"setup flaky: FAILED: 'sh -c test -e {extra_schemes}/fixed && touch {extra_schemes}/built' exited with status 1 "
        f"(see {schemes.SETUP_LOGS}/flaky.log)"]
    assert "setup cubic: ok" in done.stdout
    assert "its last setup failed" in listed(env)["flaky"]

    data = tmp_path / "data"
    done = pantheon("test", "local", "--schemes", "flaky,cubic", "--runtime", "2", "--data-dir", str(data), "--quiet", env=env)
    assert done.returncode == 1
    assert "pantheon: skipping flaky: its last setup failed" in done.stderr
    assert json.loads((data / "cubic" / "run1" / "run.json").read_text())["ok"]

    (extra_schemes / "fixed").touch()
    assert pantheon("schemes", "setup", "flaky", env=env).returncode == 0
    assert listed(env)["flaky"].split()[1] == "ready"


@needs_root
def test_check_flags_a_scheme_that_ignores_sigterm(extra_schemes: Path, tmp_path: Path) -> None:
    stubborn = '["sh", "-c", "trap \'\' TERM; {python} -m pantheon.kernel_tcp receiver {port} --bind {local} & exec sleep 1000"]'
    manifest(extra_schemes, "stubborn", receiver=stubborn)
    done = pantheon("schemes", "check", "stubborn", "--data-dir", str(tmp_path / "check"),
                    env={"PANTHEON_SCHEMES_PATH": str(extra_schemes)})
    assert done.returncode == 1
    line = next(line for line in done.stdout.splitlines() if line.startswith("stubborn"))
    assert "FAIL" in line and "receiver ignored SIGTERM and was killed" in line
    assert float(line.split()[2]) > 5, "it moved data: only the stop was unclean"
    assert run_namespaces(done.pid) == []


@pytest.mark.slow  # ~145 s: a 5 s flow of every scheme (a browser's longer)
@needs_root
def test_every_scheme_passes_its_check(tmp_path: Path) -> None:
    done = pantheon("schemes", "check", "--all", "--data-dir", str(tmp_path / "check"), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    ready = [n for n, s in schemes.registry().schemes.items() if s.status()[0] == "ready"]
    passed = [line.split()[0] for line in done.stdout.splitlines() if " pass " in line]
    assert sorted(passed) == sorted(ready)
