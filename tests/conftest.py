"""Shared fixtures: every test that moves packets runs inside a private network namespace it
creates and deletes, so the host's network is never touched. These tests need root (CI is root).
The archive's tests share one throwaway PostgreSQL cluster and a few simulated data dirs."""
from __future__ import annotations

import itertools
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from archive_server import (
    DATABASES,
    Archive,
    Experiment,
    Postgres,
    archive_server,
    make_experiments,
    new_database,
    postgres_cluster,
)
from pantheon.netns import private_netns

REPO = Path(__file__).resolve().parent.parent
EMU = REPO / "target" / "release" / "pantheon-emu"
_counter = itertools.count()

# A shell that starts the suite in the background (`./test.sh &`, nohup) leaves SIGINT ignored, and
# every child would inherit that: the tests that send SIGINT (Ctrl-C) to the emulator, the tunnel
# and the harness need it delivered. A handler here is reset to the default in each child on exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root for network namespaces")
        for item in items:
            if "netns" in getattr(item, "fixturenames", ()):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def emu() -> Path:
    """The emulator binary (built by setup.sh)."""
    if not EMU.exists():
        pytest.fail(f"{EMU} is missing: run ./setup.sh --no-run (or cargo build --release) first")
    return EMU


@pytest.fixture
def netns() -> Iterator[str]:
    """A fresh, private network namespace with loopback up; removed after the test."""
    with private_netns(f"pantheon-test-{os.getpid()}-{next(_counter)}") as name:
        yield name


def links_in(netns: str) -> list[str]:
    """Interface names in a namespace."""
    out = subprocess.run(["ip", "-n", netns, "-o", "link"], capture_output=True, text=True, check=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()]


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A throwaway PostgreSQL cluster that the archive's tests share (tests/archive_server.py)."""
    with postgres_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def experiments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Experiment]:
    """Small real data dirs (pantheon sim) that the archive's tests upload, by name."""
    return make_experiments(tmp_path_factory.mktemp("experiments"))


def published(request: pytest.FixtureRequest, kind: str, tmp_path_factory: pytest.TempPathFactory,
              experiments: dict[str, Experiment]) -> Iterator[Archive]:
    """The archive's server over a fresh database of `kind` with the experiments uploaded by
    `pantheon archive upload`; the API's and the browser's tests read it."""
    root = tmp_path_factory.mktemp(f"archive-{kind}")
    with archive_server(new_database(request, kind, root), root) as server:
        token = server.token("ci")
        yield Archive(server, token, server.upload_all({name: e.path for name, e in experiments.items()}, token))


@pytest.fixture(scope="session")
def sqlite_archive(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                   experiments: dict[str, Experiment]) -> Iterator[Archive]:
    yield from published(request, "sqlite", tmp_path_factory, experiments)


@pytest.fixture(scope="session")
def postgresql_archive(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                       experiments: dict[str, Experiment]) -> Iterator[Archive]:
    yield from published(request, "postgresql", tmp_path_factory, experiments)


@pytest.fixture(params=DATABASES)
def archive(request: pytest.FixtureRequest) -> Archive:
    """Each of the above in turn (each made once a session)."""
    return request.getfixturevalue(f"{request.param}_archive")
