"""The archive's server and upload client, for real: `pantheon archive serve` (uvicorn on 127.0.0.1,
a free port, SQLite in a temporary directory), `pantheon archive token`, `pantheon archive upload` of
small data dirs that `pantheon sim` makes, then the API, the filters, the export and the pages, and
hostile or malformed uploads refused with nothing visible afterwards."""
from __future__ import annotations

import copy
import gzip
import io
import json
import os
import re
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import String, Text
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
from pantheon.analysis.analyze import judge_run
from pantheon.analysis.datadir import open_data_dir
from pantheon.archive import client, tokens, upload
from pantheon.archive.db import engine_for, opened
from pantheon.archive.pages import rank_colour
from pantheon.archive.queries import FilterError, Filters, find
from pantheon.archive.staging import Refused, Unpacked
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

    # Issue 39 §2: where the loopback archive's own token is, and --token-file to give it.
    with pytest.raises(client.UploadError, match="FILES/local-token .* give it with --token-file"):
        client.upload(data_dirs["two-schemes"], archive.url, None)
    again = pantheon("archive", "upload", str(data_dirs["two-schemes"]), "--to", archive.url, "--token-file", str(local),
                     env={"PANTHEON_ARCHIVE_TOKEN": ""})
    assert again.returncode == 0 and "already in the archive" in again.stdout, again.stderr
    assert_one_line_exit_2(pantheon("archive", "upload", str(data_dirs["two-schemes"]), "--to", archive.url,
                                    "--token-file", str(local.parent / "no-such-token")), "cannot read the token")


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
    # A count agrees with its noun (issue 39 §1: "(1 runs)").
    compared = archive.get(f"compare?ids={','.join(map(str, uploaded.values()))}")[1].decode()
    assert re.search(r"\((1 valid run|[02-9]\d* valid runs)\)", compared) and not re.search(r"\b1 valid runs\b", compared + summary.decode())
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


# --- one line and exit status 2 for options that cannot work; any input a 2xx or a 4xx (issue 39 §3) --


def assert_one_line_exit_2(done: subprocess.CompletedProcess, words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.startswith("pantheon: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    assert words in done.stderr, done.stderr


SERVE_MISTAKES = {
    "--port 99999": (["--port", "99999"], "is not a TCP port"),
    "--port -5": (["--port", "-5"], "is not a TCP port"),
    "--files FILE": (["--files", "a-file"], "is not a directory"),
    "--max-upload-mb nan": (["--max-upload-mb", "nan"], "--max-upload-mb nan is not a size"),
    "--max-upload-mb -1": (["--max-upload-mb", "-1"], "--max-upload-mb -1 is not a size"),
    "--max-unpacked-mb inf": (["--max-unpacked-mb", "inf"], "--max-unpacked-mb inf is not a size"),
    "--max-files 0": (["--max-files", "0"], "--max-files 0"),
    "--db in /proc": (["--db", "sqlite:////proc/pantheon-archive.db"], "cannot open the database sqlite:////proc/"),
}


@pytest.mark.parametrize("case", SERVE_MISTAKES)
def test_serve_options_that_cannot_work_are_one_line_and_exit_2(case: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    options, words = SERVE_MISTAKES[case]
    done = pantheon("archive", "serve", "--db", f"sqlite:///{tmp_path / 'archive.db'}", "--files", str(tmp_path / "files"),
                    *options, cwd=tmp_path, timeout=60)
    assert_one_line_exit_2(done, words)


def test_a_token_for_a_database_whose_directory_is_missing_is_refused(tmp_path: Path) -> None:
    done = pantheon("archive", "token", "create", "alice", "--db", f"sqlite:///{tmp_path / 'typo' / 'archive.db'}")
    assert_one_line_exit_2(done, f"the directory {tmp_path / 'typo'} does not exist")
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999/", "http://127.0.0.1:-1/", "http://127.0.0.1:x/"])
def test_upload_to_a_url_that_cannot_be_an_archive_is_one_line_and_exit_2(url: str, tmp_path: Path) -> None:
    (tmp_path / "perf.json").write_text("{}")  # so that nothing but the URL is wrong
    assert_one_line_exit_2(pantheon("archive", "upload", str(tmp_path), "--to", url, "--token", "t"), "is not an archive's URL")


PROPERTIES = settings(max_examples=150, deadline=None, database=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
FILTER_NAMES = ["q", "scheme", "preset", "kind", "node", "peer", "direction", "link", "flows", "year", "month",
                "date_from", "date_to", "page"]
NUMBERS = st.one_of(st.integers(min_value=-2, max_value=2**70).map(str), st.sampled_from(["²", "١٢", "1e3", "0x10", " 7 ", "9" * 5000]))
DATES = st.one_of(st.dates().map(str), st.sampled_from(["9999-12-31", "0001-01-01", "9999-13-01", "2026-02-30", "20261129"]))
QUERY_VALUES = st.one_of(st.text(max_size=300), NUMBERS, DATES)
JSON = st.recursive(st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.floats() | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                    max_leaves=10)
"""Any JSON document Python's json reads (NaN and Infinity included, as json.loads takes them)."""
METADATA_KEYS = ["start_time", "arguments", "schemes", "emulator_options", "remote", "machine", "pantheon_version",
                 "git_commit", "simulated"]
REMOTE = st.fixed_dictionaries({}, optional={k: JSON for k in ("local_desc", "remote_desc", "host", "sender", "tunnel_server",
                                                                "remote_machine", "remote_pantheon_version", "remote_git_commit")})


@pytest.fixture(scope="module")
def query_database(tmp_path_factory) -> Iterator[Session]:
    with Session(opened(f"sqlite:///{tmp_path_factory.mktemp('queries') / 'archive.db'}")) as session:
        yield session


@PROPERTIES
@given(params=st.dictionaries(st.sampled_from(FILTER_NAMES), QUERY_VALUES, max_size=6))
def test_any_query_is_filters_or_a_filter_error_and_the_database_takes_the_filters(query_database, params) -> None:
    """What a 2xx or a 400 is made of: Filters.parse raises nothing but FilterError, and whatever it
    returns the database runs (SQLite here; NUL, which only PostgreSQL refuses, never gets that far)."""
    try:
        filters = Filters.parse(params)
    except FilterError as e:
        assert "\n" not in str(e)
        return
    assert all("\x00" not in str(v) for v in vars(filters).values())
    assert find(query_database, filters) == ([], 0)


@pytest.fixture(scope="module")
def judged(data_dirs):
    """A real data dir read and every run judged by the analysis, and its perf.json."""
    data = open_data_dir(data_dirs["two-schemes"])
    derived = {(source.label, source.number): judge_run(data, source)[1] for source in data.runs}
    return data, derived, json.loads((data_dirs["two-schemes"] / "perf.json").read_text())


def assert_fits_its_columns(row) -> None:
    """Every text of a row as PostgreSQL takes it: no NUL, no longer than its column."""
    for column in type(row).__table__.columns:
        value = getattr(row, column.key)
        if isinstance(column.type, (String, Text)) and value is not None:
            assert "\x00" not in value, column.key
            assert column.type.length is None or len(value) <= column.type.length, column.key


@PROPERTIES
@given(changes=st.fixed_dictionaries({}, optional={k: REMOTE if k == "remote" else JSON for k in METADATA_KEYS}),
       told=st.builds(upload.Description, title=st.none() | st.text(max_size=600), node=st.none() | st.text(max_size=30),
                      description=st.none() | st.text(max_size=30), link=st.none() | st.text(max_size=60)))
def test_any_metadata_is_a_result_that_fits_its_columns_or_refused(judged, changes, told) -> None:
    """The archive's own reads of metadata.json (types unchecked by the analysis's reader are the
    archive's to check): a result whose every text fits its column, or Refused (a 400)."""
    data, derived, _ = judged
    fuzzed = copy.copy(data)
    fuzzed.metadata = {**data.metadata, **changes}
    try:
        result = upload.build_result(fuzzed, derived, Unpacked(data.path, {}, "0" * 64), told.check())
    except Refused as e:
        assert "\n" not in str(e)
        return
    for row in [result, *result.schemes, *result.runs, *(f for r in result.runs for f in r.flows)]:
        assert_fits_its_columns(row)
    json.dumps(json.loads(result.metadata_json), allow_nan=False)  # what the API's JSONResponse does


@PROPERTIES
@given(where=st.sampled_from(["schemes", "scheme", "runs", "run"]), value=JSON)
def test_any_perf_json_is_accepted_or_refused(judged, where, value) -> None:
    """_check_perf of a perf.json (a JSON object: read_perf_json) with any JSON at any level of its
    runs: None or Refused (a 400)."""
    data, derived, perf = judged
    perf = copy.deepcopy(perf)
    scheme = next(iter(perf["schemes"]))
    if where == "schemes":
        perf["schemes"] = value
    elif where == "scheme":
        perf["schemes"][scheme] = value
    elif where == "runs":
        perf["schemes"][scheme]["runs"] = value
    else:
        perf["schemes"][scheme]["runs"]["1"] = value
    try:
        upload._check_perf(perf, derived)
    except Refused as e:
        assert "\n" not in str(e)
