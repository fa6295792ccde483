"""The archive under faults (issue 20 §2), with the real server as a process over SQLite and over a
real PostgreSQL (tests/archive_server.py): twenty uploads at once of different data dirs all land;
one data dir sent five times at once is one result; a client cut off half-way and a server
SIGKILLed half-way leave nothing visible and nothing half-written (every table's rows counted
directly in the database, not through the server); hostile archives are refused with one line.

tests/test_archive_api.py (the server's own) sends hostile archives to a real server over SQLite;
here they go to one over PostgreSQL, with the kinds it does not send (a device, a FIFO, a nested
traversal, a file the manifest leaves out, a perf.json whose summary lies, a bomb declaring 8 GiB),
and what must not change is read from the database and the file system."""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import signal
import socket
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from archive_server import (
    DATABASES,
    ArchiveServer,
    Experiment,
    Member,
    Postgres,
    archive_server,
    data_dir_members,
    get_bytes,
    get_json,
    manifest_member,
    new_database,
    pack,
    post_upload,
    regular,
    row_counts,
    tar_member,
)

CONCURRENT_UPLOADS = 20


def empty_archive(request: pytest.FixtureRequest, kind: str, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[ArchiveServer, str]]:
    """A running server over a fresh database of `kind`, and an upload token for it (not the session's
    `archive`: these tests add results of their own)."""
    root = tmp_path_factory.mktemp(f"faults-{kind}")
    with archive_server(new_database(request, kind, root), root) as server:
        yield server, server.token("faults")


@pytest.fixture(scope="module")
def sqlite_faults(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[ArchiveServer, str]]:
    yield from empty_archive(request, "sqlite", tmp_path_factory)


@pytest.fixture(scope="module")
def postgresql_faults(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[tuple[ArchiveServer, str]]:
    yield from empty_archive(request, "postgresql", tmp_path_factory)


@pytest.fixture(params=DATABASES)
def bare_archive(request: pytest.FixtureRequest) -> tuple[ArchiveServer, str]:
    """Each of the above in turn (each made once a module)."""
    return request.getfixturevalue(f"{request.param}_faults")


def variant(experiment: Experiment, number: int) -> list[Member]:
    """The experiment's data dir as if it had been copied to another path and uploaded from there: its
    metadata's data_dir changed (every other byte the same real data), with its own manifest."""
    files = data_dir_members(experiment.path)[1:]
    for i, (info, data) in enumerate(files):
        if info.name == "metadata.json":
            meta = json.loads(data)
            meta["arguments"]["data_dir"] += f"-copy{number}"
            files[i] = regular(info.name, json.dumps(meta, indent=2).encode())
    return [manifest_member(files), *files]


def total(server: ArchiveServer) -> int:
    return server.results()["total"]


def state(server: ArchiveServer) -> tuple[dict[str, int], int]:
    """What a refused or interrupted upload must leave as it was: the rows of every table, read in the
    database, and the number of results the API lists."""
    return row_counts(server.db), total(server)


def staged(server: ArchiveServer) -> list[Path]:
    """What the server has in its staging directory (uploads it is receiving or did not clean up)."""
    staging = server.files / "staging"
    return sorted(staging.iterdir()) if staging.is_dir() else []


def wait_for(condition, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s")
        time.sleep(0.05)


def assert_all_files_served(server: ArchiveServer, result_id: int, members: list[Member]) -> None:
    """Every file of the data dir downloads from the result with the bytes that were uploaded."""
    expected = {info.name: hashlib.sha256(data).hexdigest() for info, data in members[1:]}
    served = {}
    with tarfile.open(fileobj=io.BytesIO(get_bytes(f"{server.url}results/{result_id}/archive.tar.gz"))) as tar:
        for member in tar:
            if member.isreg():
                extracted = tar.extractfile(member)
                assert extracted is not None
                served[member.name.removeprefix("./")] = hashlib.sha256(extracted.read()).hexdigest()
    served.pop("MANIFEST.json", None)
    assert served == expected


def test_twenty_concurrent_uploads_of_different_data_dirs_all_land(
        bare_archive: tuple[ArchiveServer, str], experiments: dict[str, Experiment]) -> None:
    server, token = bare_archive
    before = total(server)
    bodies = [pack(variant(experiments["copa-cubic"], 100 + i)) for i in range(CONCURRENT_UPLOADS)]
    start = threading.Barrier(CONCURRENT_UPLOADS)

    def upload(body: bytes) -> tuple[int, dict]:
        start.wait()
        return post_upload(server.url, body, token, timeout=300)

    t0 = time.monotonic()
    with ThreadPoolExecutor(CONCURRENT_UPLOADS) as pool:
        answers = list(pool.map(upload, bodies))
    took_s = time.monotonic() - t0
    assert [status for status, _ in answers] == [201] * CONCURRENT_UPLOADS, answers
    ids = {answer["id"] for _, answer in answers}
    assert len(ids) == CONCURRENT_UPLOADS
    assert total(server) == before + CONCURRENT_UPLOADS
    for result_id in ids:
        assert get_json(f"{server.url}api/results/{result_id}")
    print(f"{CONCURRENT_UPLOADS} concurrent uploads of {sum(map(len, bodies)) / 1e6:.1f} MB landed in {took_s:.1f} s")


def test_one_data_dir_sent_five_times_at_once_is_one_result(
        bare_archive: tuple[ArchiveServer, str], experiments: dict[str, Experiment]) -> None:
    server, token = bare_archive
    before = total(server)
    body = pack(variant(experiments["vegas-2flows"], 200))
    with ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda b: post_upload(server.url, b, token), [body] * 5))
    assert sorted(status for status, _ in answers) == [200, 200, 200, 200, 201], answers
    assert len({answer["id"] for _, answer in answers}) == 1
    assert [answer["created"] for status, answer in answers if status == 200] == [False] * 4
    assert total(server) == before + 1


def send_half(server: ArchiveServer, body: bytes, token: str, pieces: int = 8, pause_s: float = 0.05) -> socket.socket:
    """A raw HTTP upload that declares the whole body but sends only its first half, slowly; the open
    socket is returned for the caller to cut."""
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    connection.sendall((f"POST /api/uploads HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                        f"Authorization: Bearer {token}\r\nContent-Type: application/gzip\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n").encode())
    half = body[:len(body) // 2]
    step = -(-len(half) // pieces)
    for offset in range(0, len(half), step):
        connection.sendall(half[offset:offset + step])
        time.sleep(pause_s)
    return connection


def test_a_client_cut_off_half_way_leaves_nothing(
        bare_archive: tuple[ArchiveServer, str], experiments: dict[str, Experiment]) -> None:
    server, token = bare_archive
    members = variant(experiments["nepal-3schemes"], 300)
    body = pack(members)
    before = state(server)
    send_half(server, body, token).close()
    wait_for(lambda: not staged(server), "the server dropping the half-received upload's staging directory")
    assert state(server) == before
    # Nothing of the cut upload is mistaken for the data dir: sent whole, it is a new result.
    status, answer = post_upload(server.url, body, token)
    assert status == 201 and answer["created"] is True, answer
    assert_all_files_served(server, answer["id"], members)


def test_a_server_killed_mid_upload_and_restarted_keeps_nothing_half_written(
        bare_archive: tuple[ArchiveServer, str], experiments: dict[str, Experiment]) -> None:
    server, token = bare_archive
    members = variant(experiments["copa-cubic"], 400)
    body = pack(members)
    before = state(server)

    # Killed while the body is half received.
    connection = send_half(server, body, token)
    wait_for(lambda: staged(server), "the server staging the upload")
    server.stop(signal.SIGKILL)
    connection.close()
    server.start(port=server.port)
    assert not staged(server)
    assert state(server) == before

    # Killed the moment the whole body is sent, before it answers: whatever point of staging,
    # verifying or committing that is, the result is there whole or not at all.
    connection = send_half(server, body, token, pieces=1, pause_s=0)
    connection.sendall(body[len(body) // 2:])
    server.stop(signal.SIGKILL)
    connection.close()
    server.start(port=server.port)
    assert not staged(server)
    after_kill = state(server)

    # Sent again, it is one result, every file whole: new if the killed one left nothing, the
    # same if the kill came after its commit.
    status, answer = post_upload(server.url, body, token)
    assert (status, after_kill == before) in ((201, True), (200, False)), (status, answer)
    assert total(server) == before[1] + 1
    assert_all_files_served(server, answer["id"], members)


def test_a_restart_removes_the_blobs_no_result_names(
        bare_archive: tuple[ArchiveServer, str], experiments: dict[str, Experiment]) -> None:
    """What a SIGKILL between an upload's blobs and its rows leaves (blobs go in first): the next
    start removes it, and every result keeps its files."""
    server, token = bare_archive
    members = variant(experiments["copa-cubic"], 7401)
    status, answer = post_upload(server.url, pack(members), token)
    assert status == 201, answer
    server.stop(signal.SIGKILL)
    stray = server.files / "sha256" / "ff" / ("f" * 62)
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"a blob whose rows were never committed")
    server.start(port=server.port)
    assert not stray.exists()
    assert_all_files_served(server, answer["id"], members)


def test_the_archive_outlives_a_postgresql_restart(
        postgresql_faults: tuple[ArchiveServer, str], postgres: Postgres, experiments: dict[str, Experiment]) -> None:
    """The database restarted under a running archive (an upgrade, a failover): while it is down the
    health check and the API answer 503 with one line, and an upload fails with one line and leaves nothing; once it is back the archive serves and takes uploads
    again without being restarted itself."""
    server, token = postgresql_faults
    members = variant(experiments["vegas-2flows"], 600)
    before = state(server)
    postgres.stop()
    try:
        # A monitor is told the truth, and every answer is one line.
        for path in ("api/health", "api/results"):
            with pytest.raises(urllib.error.HTTPError) as unavailable:
                get_json(server.url + path)
            with unavailable.value as response:
                assert response.code == 503, path
                assert "\n" not in json.loads(response.read())["error"], path
        refused = server.upload(write_data_dir(members, server.log_dir / "pg-down"), token)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert "the archive is unavailable (503)" in refused.stderr.strip().splitlines()[-1], refused.stderr
        assert not staged(server)
    finally:
        postgres.start()
    assert state(server) == before
    status, answer = post_upload(server.url, pack(members), token)
    assert status == 201, answer
    assert_all_files_served(server, answer["id"], members)


def write_data_dir(members: list[Member], path: Path) -> Path:
    """The members (after the manifest) as a data dir on disk, for the command line to upload."""
    for info, data in members[1:]:
        (path / info.name).parent.mkdir(parents=True, exist_ok=True)
        (path / info.name).write_bytes(data)
    return path


# --- hostile archives -----------------------------------------------------------------------------


def with_member(files: list[Member], extra: Member) -> list[Member]:
    """The data dir's files and `extra`, the manifest listing them all (so `extra` is the only fault)."""
    return [manifest_member([*files, extra]), *files, extra]


def special(name: str, kind: bytes, linkname: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    if kind == tarfile.CHRTYPE:
        info.devmajor, info.devminor = 1, 3
    return info, b""


def changed_perf(files: list[Member]) -> list[Member]:
    """perf.json with one scheme's mean throughput doubled, the manifest updated to match: the
    hashes are right, the numbers are not what the records say."""
    changed = []
    for info, data in files:
        if info.name == "perf.json":
            perf = json.loads(data)
            summary = next(iter(perf["schemes"].values()))["summary"]["all"]["throughput_mbps"]
            summary["mean"] *= 2
            info, data = regular(info.name, json.dumps(perf).encode())
        changed.append((info, data))
    return [manifest_member(changed), *changed]


def changed_after_manifest(files: list[Member]) -> list[Member]:
    manifest = manifest_member(files)
    info, data = files[-1]
    return [manifest, *files[:-1], regular(info.name, data + b"\n")]


ZEROS_MIB = 64
BOMB_BYTES = 8 << 30
"""Twice the server's default unpacked limit (--max-unpacked-mb 4096)."""


def bomb(files: list[Member]) -> bytes:
    """A body of ~8 MB that unpacks to BOMB_BYTES: after the data dir, a member declaring that size
    whose contents are gzip members of zeros concatenated (a gzip stream may hold several members)."""
    big = tarfile.TarInfo("bomb.bin")
    big.size = BOMB_BYTES
    head = b"".join(tar_member(info, data) for info, data in [manifest_member(files), *files]) + tar_member(big, b"")
    zeros = gzip.compress(b"\0" * (ZEROS_MIB << 20), compresslevel=9, mtime=0)
    return gzip.compress(head, mtime=0) + zeros * (BOMB_BYTES // (ZEROS_MIB << 20))


HOSTILE = {
    "traversal": lambda files: pack(with_member(files, regular("../escape.txt", b"out"))),
    "nested traversal": lambda files: pack(with_member(files, regular("copa/../../escape.txt", b"out"))),
    "absolute name": lambda files: pack(with_member(files, regular("/tmp/pantheon-archive-escape.txt", b"out"))),
    "symlink": lambda files: pack(with_member(files, special("copa/run1/passwd", tarfile.SYMTYPE, "/etc/passwd"))),
    "hardlink": lambda files: pack(with_member(files, special("copa/run1/passwd", tarfile.LNKTYPE, "/etc/passwd"))),
    "device": lambda files: pack(with_member(files, special("copa/run1/null", tarfile.CHRTYPE))),
    "fifo": lambda files: pack(with_member(files, special("copa/run1/fifo", tarfile.FIFOTYPE))),
    "decompression bomb": bomb,
    "file changed after the manifest": lambda files: pack(changed_after_manifest(files)),
    "file not in the manifest": lambda files: pack([manifest_member(files[:-1]), *files]),
    "perf.json not from the records": lambda files: pack(changed_perf(files)),
    "not a gzip tar": lambda files: b"PK\x03\x04 this is a zip file, not a gzip-compressed tar",
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_archive_is_refused_with_one_line_and_leaves_nothing(
        case: str, postgresql_faults: tuple[ArchiveServer, str], experiments: dict[str, Experiment]) -> None:
    server, token = postgresql_faults
    files = variant(experiments["copa-cubic"], 500)[1:]
    body = HOSTILE[case](files)
    before = state(server)
    status, answer = post_upload(server.url, body, token)
    assert status in ((400, 413) if case == "decompression bomb" else (400,)), (status, answer)
    message = answer["error"]
    assert message and "\n" not in message and len(message) < 400 and "Traceback" not in message, message
    assert state(server) == before
    wait_for(lambda: not staged(server), "the server dropping the refused upload's staging directory")
    assert not Path("/tmp/pantheon-archive-escape.txt").exists()
    assert not list(server.files.parent.rglob("escape.txt"))


# --- malformed requests from anyone, and wrong types from a token holder (issue 39 §3) -----------


def answer(url: str) -> tuple[int, bytes]:
    """GET url: its status and body, an error's included."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read()


BEYOND_64_BITS = str(2**64)
MALFORMED_QUERIES = [f"page={BEYOND_64_BITS}", f"page={2**62}", f"flows={BEYOND_64_BITS}", f"flows={2**63}",
                     f"year={BEYOND_64_BITS}", f"month={BEYOND_64_BITS}", "month=13", "month=0", "year=10000",
                     "page=0", "page=%C2%B2", "flows=" + "9" * 5000, "q=a%00b", "scheme=%00", "date_to=9999-13-01"]
"""Query strings each of which the find page and /api/results answer with a 400 and one line
(page=² is "²".isdigit(), which int() refuses; 5000 digits are past int()'s limit)."""


@pytest.mark.parametrize("query", MALFORMED_QUERIES, ids=lambda query: query if len(query) < 40 else f"{query[:12]}...")
def test_a_malformed_query_is_a_400_with_one_line(query: str, bare_archive: tuple[ArchiveServer, str]) -> None:
    server, _ = bare_archive
    for path in ("api/results", ""):
        status, body = answer(f"{server.url}{path}?{query}")
        assert status == 400, (path, status, body[:300])
        if path:
            message = json.loads(body)["error"]
            assert message and "\n" not in message and len(message) < 200, message


def test_ids_and_names_no_result_has_are_a_4xx(bare_archive: tuple[ArchiveServer, str]) -> None:
    """Result ids past 64 bits, past PostgreSQL's integer, or digits int() refuses, and NUL in a
    name: 404 (no result has them) or 400, never the database's error as a 500."""
    server, _ = bare_archive
    for path in (f"api/results/{BEYOND_64_BITS}", f"api/results/{2**31}", "api/results/%C2%B2",
                 f"api/results/{BEYOND_64_BITS}/runs", f"results/{BEYOND_64_BITS}", "results/%C2%B2",
                 f"results/{BEYOND_64_BITS}/archive.tar.gz", f"results/{BEYOND_64_BITS}/files/perf.json",
                 "results/1/files/perf%00.json", "schemes/co%00pa"):
        assert answer(server.url + path)[0] == 404, path
    assert answer(server.url + "api/schemes/co%00pa")[0] == 400
    for ids in (f"1,{BEYOND_64_BITS}", "%C2%B2", f"{2**63}", "1,two"):
        assert answer(f"{server.url}compare?ids={ids}")[0] == 400, ids


def test_the_last_day_of_the_calendar_is_a_date_to(bare_archive: tuple[ArchiveServer, str]) -> None:
    server, _ = bare_archive
    everything = server.results()["total"]
    assert server.results(date_to="9999-12-31")["total"] == everything
    assert server.results(date_from="0001-01-01", year="9999", month="12", page=str(2**31 - 1))["results"] == []


def changed_file(experiment: Experiment, name: str, change, number: int) -> list[Member]:
    """The experiment's variant (a data dir of its own) with the JSON file `name` changed by
    `change` (a function of the parsed document), the manifest agreeing."""
    files = []
    for info, data in variant(experiment, number)[1:]:
        if info.name == name:
            document = json.loads(data)
            change(document)
            info, data = regular(name, json.dumps(document).encode())
        files.append((info, data))
    return [manifest_member(files), *files]


def set_keys(**values):
    return lambda document: document.update(values)


def set_runs(runs):
    def change(perf: dict) -> None:
        for scheme in perf["schemes"].values():
            scheme["runs"] = runs
    return change


WRONG_TYPES = {
    "start_time a number": ("metadata.json", set_keys(start_time=1764400000)),
    "start_time past the calendar": ("metadata.json", set_keys(start_time="9999-12-31T23:59:59-01:00")),
    "arguments a list": ("metadata.json", set_keys(arguments=["--schemes", "copa"])),
    "schemes a list": ("metadata.json", set_keys(schemes=["copa", "cubic-user"])),
    "schemes a string": ("metadata.json", set_keys(schemes="copa")),
    "schemes of strings": ("metadata.json", set_keys(schemes={"copa": "v1", "cubic-user": 5})),
    "emulator_options a number": ("metadata.json", set_keys(emulator_options=3)),
    "emulator_options of numbers": ("metadata.json", set_keys(emulator_options=[1, None, "--seed"])),
    "machine a string": ("metadata.json", set_keys(machine="box")),
    "remote of wrong types": ("metadata.json", set_keys(remote={
        "local_desc": 5, "remote_desc": ["AWS"], "host": {"name": "h"}, "sender": 1, "tunnel_server": None,
        "remote_pantheon_version": 2.5, "remote_git_commit": ["abc"], "remote_machine": "box"})),
    "versions too long for their columns": ("metadata.json", set_keys(pantheon_version="9" * 1000, git_commit="f" * 1000)),
    "NUL in the text": ("metadata.json", set_keys(git_commit="abc\u0000def", remote={"local_desc": "Stan\u0000ford"})),
    "NaN": ("metadata.json", set_keys(clock_offset_ms=float("nan"))),
    "perf runs a list": ("perf.json", set_runs(["1", "2"])),
    "perf runs a string": ("perf.json", set_runs("12")),
    "perf runs of other keys": ("perf.json", set_runs({"01": {}, "²": {}, "9" * 5000: {}})),
    "perf schemes of strings": ("perf.json", lambda perf: perf.update(schemes={"copa": "runs"})),
}
"""What a token holder may upload that is of the wrong type (issue 39 §3)."""


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_an_upload_of_wrong_types_is_a_201_or_a_400_with_one_line(
        case: str, bare_archive: tuple[ArchiveServer, str], experiments: dict[str, Experiment]) -> None:
    """Wrong types in metadata.json are the analysis's to refuse (open_data_dir: a 400) or the
    archive's to read as absent (a 201); in perf.json the runs then disagree (a 400). Never a 500."""
    server, token = bare_archive
    name, change = WRONG_TYPES[case]
    before = state(server)
    status, body = post_upload(server.url, pack(changed_file(experiments["copa-cubic"], name, change,
                                                             900 + list(WRONG_TYPES).index(case))), token)
    assert status in (201, 400), (status, body)
    if status == 400:
        assert "\n" not in body["error"] and len(body["error"]) < 400, body
        assert state(server) == before
    else:
        detail = get_json(f"{server.url}api/results/{body['id']}")
        assert len(detail["versions"]["pantheon"]) <= 50 and "\x00" not in json.dumps(detail["node"] + detail["title"])
    if name == "perf.json" or case == "NaN":
        assert status == 400, body


def test_nul_in_what_the_uploader_says_is_a_400(bare_archive: tuple[ArchiveServer, str],
                                                  experiments: dict[str, Experiment]) -> None:
    server, token = bare_archive
    body = pack(variant(experiments["copa-cubic"], 950))
    for query in ("title=a%00b", "node=Stan%00ford", "description=%00"):
        status, answered = post_upload(server.url, body, token, query=query)
        assert status == 400 and "NUL" in answered["error"], (query, status, answered)
