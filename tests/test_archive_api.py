"""The archive's server and upload client, for real: `pantheon archive serve` (uvicorn on 127.0.0.1,
a free port, SQLite in a temporary directory), `pantheon archive token`, `pantheon archive upload` of
small data dirs that `pantheon sim` makes, then the API, the filters, the export and the pages, and
hostile or malformed uploads refused with nothing visible afterwards."""
from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy.orm import Session

from archive_server import (
    ArchiveServer,
    Member,
    data_dir_members,
    manifest_member,
    pack,
    pantheon,
    post_upload,
    regular,
)
from pantheon.archive import client, tokens
from pantheon.archive.db import engine_for
from pantheon.archive.pages import rank_colour
from pantheon.archive.stats import describe, t_quantile

REPO = Path(__file__).resolve().parent.parent
UNPACKED_LIMIT_MB = 32
"""The server's unpacked-size limit in these tests: above the sim data dirs (~3 MB), far below the bomb."""


@pytest.fixture(scope="module")
def data_dirs(tmp_path_factory) -> dict[str, Path]:
    """Two small simulated data dirs: two schemes × two runs of 2 s at 10 ms; one scheme, two flows, a preset."""
    root = tmp_path_factory.mktemp("data")
    sims = [subprocess.Popen([sys.executable, "-m", "pantheon.cli", "sim", *args, "--runtime", "2", "--quiet",
                              "--data-dir", str(root / name)], env={**os.environ, "PYTHONPATH": str(REPO / "python")},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for name, args in (("two-schemes", ["--schemes", "copa,cubic-user", "--run-times", "2", "--delay", "10"]),
                               ("two-flows", ["--schemes", "copa", "--flows", "2", "--emulator", "buffer-30000b"]))]
    for sim in sims:
        _, err = sim.communicate(timeout=120)
        assert sim.returncode == 0, err
    return {"two-schemes": root / "two-schemes", "two-flows": root / "two-flows"}


class Archive(ArchiveServer):
    """The tests' shared server (tests/archive_server.py) with the reads these tests make."""

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url + path.lstrip("/"), timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def json(self, path: str) -> dict:
        status, body = self.get(path)
        assert status == 200, body
        return json.loads(body)

    def upload_as(self, data_dir: Path, token: str, *extra: str) -> subprocess.CompletedProcess:
        """`pantheon archive upload` with the token from the environment, as a user would set it."""
        return pantheon("archive", "upload", str(data_dir), "--to", self.url, *extra, env={"PANTHEON_ARCHIVE_TOKEN": token})


@pytest.fixture(scope="module")
def archive(tmp_path_factory, data_dirs) -> Iterator[Archive]:
    root = tmp_path_factory.mktemp("archive")
    (root / "logs").mkdir()
    served = Archive(f"sqlite:///{root / 'archive.db'}", root / "files", root / "logs",
                     options=("--max-unpacked-mb", str(UNPACKED_LIMIT_MB)))
    served.start()
    yield served
    assert served.stop() == 0


@pytest.fixture(scope="module")
def token(archive) -> str:
    return archive.token("tests")


@pytest.fixture(scope="module")
def uploaded(archive, token, data_dirs) -> dict[str, int]:
    """The first data dir uploaded by the command, the second by the client in-process (quicker)."""
    done = archive.upload_as(data_dirs["two-schemes"], token, "--title", "test two-schemes")
    assert done.returncode == 0, done.stderr
    url = done.stdout.splitlines()[-1].split()[-1]
    assert url.startswith(archive.url + "results/")
    second = client.upload(data_dirs["two-flows"], archive.url, token, {"title": "test two-flows"})
    assert second["created"]
    return {"two-schemes": int(url.rsplit("/", 1)[1]), "two-flows": second["id"]}


def changed_members(path: Path, change: dict[str, bytes]) -> list[Member]:
    """The data dir's members with `change` (path → new bytes) applied and a manifest that agrees."""
    files = [regular(info.name, change.get(info.name, data)) for info, data in data_dir_members(path)[1:]]
    return [manifest_member(files), *files]


def test_upload_lands_once_with_the_derived_metrics(archive, token, data_dirs, uploaded):
    again = client.upload(data_dirs["two-schemes"], archive.url, token)
    assert again == {"id": uploaded["two-schemes"], "url": f"{archive.url}results/{uploaded['two-schemes']}", "created": False}
    assert archive.json("api/results")["total"] == 2

    perf = json.loads((data_dirs["two-schemes"] / "perf.json").read_text())
    runs = archive.json(f"api/results/{uploaded['two-schemes']}/runs")["runs"]
    assert len(runs) == 4
    for run in runs:
        claimed = perf["schemes"][run["scheme"]]["runs"][str(run["number"])]["flows"]["all"]
        assert run["flows"][0]["flow"] == "all"
        assert run["flows"][0]["throughput_mbps"] == pytest.approx(claimed["throughput_mbps"], rel=1e-9)
        assert run["flows"][0]["delay_p95_ms"] == pytest.approx(claimed["delay_p95_ms"], rel=1e-9)

    detail = archive.json(f"api/results/{uploaded['two-schemes']}")
    assert detail["schemes"] == ["copa", "cubic-user"] and detail["kind"] == "simulation"
    copa = next(s for s in detail["stats"] if s["scheme"] == "copa")
    mean = perf["schemes"]["copa"]["summary"]["all"]["throughput_mbps"]
    assert copa["throughput_mbps"]["mean"] == pytest.approx(mean["mean"], rel=1e-9)
    assert copa["throughput_mbps"]["sd"] == pytest.approx(mean["sd"], rel=1e-9)
    half = 12.706 * mean["sd"] / 2 ** 0.5  # t(0.975, 1 df) for two runs
    assert copa["throughput_mbps"]["ci_high"] == pytest.approx(mean["mean"] + half, rel=1e-4)
    status, body = archive.get(f"results/{uploaded['two-schemes']}/files/perf.json")
    assert status == 200 and body == (data_dirs["two-schemes"] / "perf.json").read_bytes()
    status, body = archive.get(f"results/{uploaded['two-schemes']}/archive.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        assert "copa/run1/records.parquet" in tar.getnames()


def test_uploads_need_a_valid_token(archive, data_dirs, uploaded, monkeypatch):
    monkeypatch.delenv(client.TOKEN_VARIABLE, raising=False)
    with pytest.raises(client.UploadError, match="no token"):
        client.upload(data_dirs["two-schemes"], archive.url, None)
    with pytest.raises(client.UploadError, match="the archive refused the token"):
        client.upload(data_dirs["two-schemes"], archive.url, "pantheon_not-a-token")
    assert post_upload(archive.url, pack(data_dir_members(data_dirs["two-schemes"])), None)[0] == 401

    with Session(engine_for(archive.db)) as session:
        revoked = tokens.create(session, "revoked")
        tokens.revoke(session, "revoked")
        with pytest.raises(tokens.TokenError, match="no token named 'revoked' is in use"):
            tokens.revoke(session, "revoked")
    local = archive.files / "local-token"  # made by a loopback server on an archive without tokens
    assert local.stat().st_mode & 0o777 == 0o600
    request = urllib.request.Request(archive.url + "api/token", headers={"Authorization": f"Bearer {local.read_text().strip()}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.loads(response.read()) == {"name": "local"}

    refused = archive.upload_as(data_dirs["two-flows"], revoked)
    assert refused.returncode == 1 and "refused the token" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def _symlink() -> Member:
    info = tarfile.TarInfo("perf.json")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return info, b""


def _hardlink() -> Member:
    info = tarfile.TarInfo("perf.json")
    info.type, info.linkname = tarfile.LNKTYPE, "../../etc/passwd"
    return info, b""


def _bomb(kind: bytes = tarfile.REGTYPE) -> bytes:
    """A member of 64 MiB of zeros (twice the server's unpacked limit), ~64 KB on the wire; as a PAX
    header (kind XHDTYPE) it is one that tarfile would read into memory whole."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb") as zipped:
        info = tarfile.TarInfo("zeros")
        info.type = kind
        info.size = 2 * UNPACKED_LIMIT_MB << 20
        zipped.write(info.tobuf())
        for _ in range(info.size >> 20):
            zipped.write(bytes(1 << 20))
    return out.getvalue()


def _perf_changed(path: Path, summary: bool = False) -> dict[str, bytes]:
    """perf.json with copa's throughput 1 % higher in run 1, or in its summary's mean."""
    perf = json.loads((path / "perf.json").read_text())
    copa = perf["schemes"]["copa"]
    (copa["summary"]["all"]["throughput_mbps"] if summary else copa["runs"]["1"]["flows"]["all"])[
        "mean" if summary else "throughput_mbps"] *= 1.01
    return {"perf.json": json.dumps(perf).encode()}


HOSTILE = {
    "traversal": (lambda d: pack([*data_dir_members(d), regular("../escape", b"x")]), 400, "path traversal"),
    "absolute": (lambda d: pack([*data_dir_members(d), regular("/tmp/escape", b"x")]), 400, "absolute"),
    "symlink": (lambda d: pack([*data_dir_members(d)[:1], _symlink()]), 400, "is a link"),
    "hardlink": (lambda d: pack([*data_dir_members(d)[:1], _hardlink()]), 400, "is a link"),
    "bomb": (lambda d: _bomb(), 413, "decompression bomb"),
    "PAX header bomb": (lambda d: _bomb(tarfile.XHDTYPE), 413, "decompression bomb"),
    "not gzip": (lambda d: b"hello" * 100, 400, "not a whole gzip-compressed tar"),
    "hash mismatch": (lambda d: pack([(m[0], m[1] if m[0].name != "perf.json" else m[1].replace(b"{", b"{ ", 1))
                                         for m in data_dir_members(d)]), 400, "its sha256 is"),
    "perf mismatch": (lambda d: pack(changed_members(d, _perf_changed(d))), 400, "perf.json does not match the records"),
    "summary mismatch": (lambda d: pack(changed_members(d, _perf_changed(d, summary=True))), 400,
                         "copa summary all throughput_mbps mean is"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_uploads_are_refused_and_leave_nothing(archive, token, data_dirs, uploaded, case):
    make, status, words = HOSTILE[case]
    before = archive.json("api/results")["total"]
    got, body = post_upload(archive.url, make(data_dirs["two-schemes"]), token)
    assert (got, words in body["error"]) == (status, True), body
    assert "\n" not in body["error"]
    assert archive.json("api/results")["total"] == before
    assert not list((archive.files / "staging").iterdir())
    assert not (archive.files.parent / "escape").exists()


def test_filters_pagination_and_errors(archive, uploaded):
    def ids(query: str) -> set[int]:
        return {r["id"] for r in archive.json(f"api/results?{query}")["results"]}
    both = set(uploaded.values())
    assert ids("kind=simulation") == both
    assert ids("scheme=cubic-user") == {uploaded["two-schemes"]}
    assert ids("scheme=copa&kind=simulation") == both
    assert ids("flows=2") == {uploaded["two-flows"]}
    assert ids("preset=buffer-30000b") == {uploaded["two-flows"]}
    assert ids("q=TEST+two-flows") == {uploaded["two-flows"]}
    assert ids("q=cubic") == {uploaded["two-schemes"]}
    assert ids("kind=node-cloud") == set()
    listing = archive.json("api/results")["results"][0]
    year, month, day = listing["date"][:10].split("-")
    assert ids(f"kind=simulation&year={year}&month={int(month)}&date_from={year}-{month}-{day}&date_to={year}-{month}-{day}") == both
    assert ids(f"date_to={int(year) - 1}-01-01") == set()
    assert archive.json("api/results?page=2")["results"] == [] and archive.json("api/results?page=2")["page"] == 2
    assert archive.get("api/results?flows=two")[0] == 400
    assert archive.get("api/results?date_from=yesterday")[0] == 400
    assert "buffer-30000b" in archive.json("api/filters")["preset"]


def test_a_real_path_is_found_by_node_peer_and_direction(archive, token, data_dirs, uploaded, tmp_path):
    """A data dir whose metadata.json says remote mode (docs/remote.md), as pantheon test remote writes it."""
    remote = tmp_path / "remote"
    shutil.copytree(data_dirs["two-flows"], remote)
    metadata = json.loads((remote / "metadata.json").read_text())
    metadata.pop("simulated")
    metadata["remote"] = {"host": "ubuntu@203.0.113.7", "sender": "remote", "tunnel_server": "remote",
                          "local_desc": "Stanford", "remote_desc": "AWS California", "remote_git_commit": "abc123"}
    (remote / "metadata.json").write_text(json.dumps(metadata))
    answer = client.upload(remote, archive.url, token, {"link": "cellular"})
    found = archive.json("api/results?node=Stanford&peer=AWS+California&direction=peer-to-node&link=cellular&kind=node-cloud")
    assert [r["id"] for r in found["results"]] == [answer["id"]]
    assert found["results"][0]["title"].startswith("AWS California → Stanford: Copa")
    assert archive.json(f"api/results/{answer['id']}")["versions"]["remote_git_commit"] == "abc123"


def test_export_has_every_flow_of_every_run(archive, uploaded):
    status, csv = archive.get("api/export.csv")
    lines = csv.decode().strip().splitlines()
    # two-schemes: 4 runs × (all + flow 1); two-flows: 1 run × (all + flows 1, 2)
    counts = {i: sum(1 for line in lines[1:] if line.startswith(f"{i},")) for i in uploaded.values()}
    assert status == 200 and counts == {uploaded["two-schemes"]: 4 * 2, uploaded["two-flows"]: 3}
    status, parquet = archive.get("api/export.parquet")
    table = pq.read_table(io.BytesIO(parquet))
    assert table.num_rows == len(lines) - 1
    assert {"result_id", "scheme", "run", "flow", "throughput_mbps", "delay_p95_ms", "valid", "kind"} <= set(table.column_names)


def test_pages_carry_the_hooks(archive, uploaded):
    status, find = archive.get("?scheme=copa&kind=simulation")
    assert status == 200 and b'form id="filters"' in find and find.count(b'class="result-link"') == 2
    status, page = archive.get(f"results/{uploaded['two-schemes']}")
    assert status == 200 and b'<table id="schemes">' in page
    assert b'class="plot" src="/results/' in page and b'class="download" href="/results/' in page
    status, summary = archive.get("summary")
    assert status == 200 and summary.count(b'class="score n" data-score=') >= 3
    for path in ("schemes/copa", f"compare?ids={','.join(map(str, uploaded.values()))}", "faq"):
        assert archive.get(path)[0] == 200, path
    assert archive.get("results/999")[0] == 404 and archive.get("api/export.xlsx")[0] == 404
    summary_api = archive.json("api/summary")
    row = next(e for e in summary_api["experiments"] if e["id"] == uploaded["two-schemes"])
    assert row["cells"]["copa"]["score"] > row["cells"]["cubic-user"]["score"]


def test_student_t_and_the_colours():
    assert [round(t_quantile(df), 3) for df in (1, 2, 9, 30)] == [12.706, 4.303, 2.262, 2.042]
    assert describe([1.0, 2.0, 3.0]) == pytest.approx({"n": 3, "mean": 2.0, "sd": 1.0, "ci_low": 2 - 4.3027 / 3 ** 0.5,
                                                       "ci_high": 2 + 4.3027 / 3 ** 0.5}, rel=1e-4)
    assert describe([5.0])["sd"] is None
    assert [rank_colour(r, 3) for r in range(3)] == ["hsl(120, 70%, 80%)", "hsl(60, 70%, 80%)", "hsl(0, 70%, 80%)"]
