"""The archive's API and command line with the real parts (issue 20 §1, §2), over SQLite and over a
real PostgreSQL cluster (tests/archive_server.py): `pantheon archive serve` as a process, three
simulated data dirs uploaded with `pantheon archive upload`, then every number the API gives checked
against the data dir's own perf.json, computed here by hand (the mean, the 95% confidence interval
with Student's t, the summary's score ln(mean throughput / mean p95 delay)), every download against
the bytes uploaded, the filters against what each experiment is, and the tokens' rules."""
from __future__ import annotations

import csv
import datetime
import hashlib
import io
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import tarfile
import urllib.error
import urllib.parse
from pathlib import Path

import pytest

from archive_server import (
    PANTHEON,
    Archive,
    ArchiveServer,
    Experiment,
    archive_server,
    data_dir_members,
    get_bytes,
    get_json,
    pack,
    pantheon,
    post_upload,
)

# The 97.5th percentile of Student's t with one degree of freedom (two runs per scheme): tan(0.475π).
T_975_DF1 = math.tan(0.475 * math.pi)


def perf(experiment: Experiment) -> dict:
    return json.loads((experiment.path / "perf.json").read_text())


def found(archive: Archive, **query: str) -> set[str]:
    """The experiments (by name) that /api/results lists for `query`."""
    names = {result_id: name for name, result_id in archive.ids.items()}
    answer = archive.server.results(**query)
    assert answer["total"] == len(answer["results"])
    return {names[r["id"]] for r in answer["results"]}


def test_upload_lists_each_experiment_with_its_page(archive: Archive, experiments: dict[str, Experiment]) -> None:
    listed = {r["id"]: r for r in archive.server.results()["results"]}
    assert set(listed) == set(archive.ids.values())
    for name, result_id in archive.ids.items():
        result = listed[result_id]
        assert result["url"] == f"{archive.server.url}results/{result_id}"
        assert sorted(result["schemes"]) == sorted(experiments[name].schemes)
        assert result["flows"] == experiments[name].flows
        assert result["kind"] == "simulation"
        assert result["preset"] == (experiments[name].emulator or "")
        assert get_bytes(result["url"]).lower().startswith(b"<!doctype html>")


def test_filters_find_each_experiment_by_what_it_is(archive: Archive) -> None:
    today = datetime.date.today()
    assert found(archive, scheme="vegas-user") == {"vegas-2flows"}
    assert found(archive, scheme="copa") == {"copa-cubic", "nepal-3schemes"}
    assert found(archive, scheme="reno-user") == {"nepal-3schemes"}
    assert found(archive, flows="2") == {"vegas-2flows"}
    assert found(archive, preset="nepal-wifi") == {"nepal-3schemes"}
    assert found(archive, scheme="copa", preset="nepal-wifi") == {"nepal-3schemes"}
    assert found(archive, kind="simulation") == set(archive.ids)
    assert found(archive, kind="node-cloud") == set()
    assert found(archive, q="nepal") == {"nepal-3schemes"}
    assert found(archive, q="vegas buffer-30000b") == {"vegas-2flows"}
    assert found(archive, year=str(today.year), month=str(today.month)) == set(archive.ids)
    assert found(archive, date_from=(today + datetime.timedelta(days=1)).isoformat()) == set()
    assert found(archive, date_to=today.isoformat(), scheme="cubic-user") == {"copa-cubic"}


def test_a_malformed_filter_is_a_400_with_one_line(archive: Archive) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        archive.server.results(flows="two")
    with refused.value as response:
        assert response.code == 400
        message = json.loads(response.read())["error"]
    assert "flows" in message and "\n" not in message


def test_per_scheme_statistics_are_perf_jsons_with_a_students_t_interval(
        archive: Archive, experiments: dict[str, Experiment]) -> None:
    for name, result_id in archive.ids.items():
        detail = get_json(f"{archive.server.url}api/results/{result_id}")
        expected = perf(experiments[name])["schemes"]
        assert {row["scheme"] for row in detail["stats"]} == set(expected)
        for row in detail["stats"]:
            summary = expected[row["scheme"]]["summary"]["all"]
            assert row["runs"] == row["valid_runs"] == 2
            for metric in ("throughput_mbps", "delay_p95_ms", "loss_rate"):
                stats, wanted = row[metric], summary[metric]
                assert stats["n"] == wanted["n"] == 2
                assert stats["mean"] == pytest.approx(wanted["mean"], rel=1e-9)
                assert stats["sd"] == pytest.approx(wanted["sd"], rel=1e-9)
                half = T_975_DF1 * wanted["sd"] / math.sqrt(2)
                assert stats["ci_low"] == pytest.approx(wanted["mean"] - half, rel=1e-6, abs=1e-12)
                assert stats["ci_high"] == pytest.approx(wanted["mean"] + half, rel=1e-6, abs=1e-12)
            assert row["score"] == pytest.approx(
                math.log(summary["throughput_mbps"]["mean"] / summary["delay_p95_ms"]["mean"]), rel=1e-9)


def test_runs_carry_every_flows_metrics(archive: Archive, experiments: dict[str, Experiment]) -> None:
    for name, result_id in archive.ids.items():
        runs = get_json(f"{archive.server.url}api/results/{result_id}/runs")
        runs = runs["runs"] if isinstance(runs, dict) else runs
        expected = perf(experiments[name])["schemes"]
        assert len(runs) == 2 * len(expected)
        for run in runs:
            wanted = expected[run["scheme"]]["runs"][str(run["number"])]
            assert run["valid"] is wanted["valid"]
            assert run["power"] == pytest.approx(wanted["power"], rel=1e-9)
            flows = {flow["flow"]: flow for flow in run["flows"]}
            assert set(flows) == set(wanted["flows"]) == {"all", *map(str, range(1, experiments[name].flows + 1))}
            for flow, metrics in wanted["flows"].items():
                assert flows[flow]["delivered_bytes"] == metrics["delivered_bytes"]
                assert flows[flow]["delay_p95_ms"] == pytest.approx(metrics["delay_p95_ms"], rel=1e-9)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_every_file_downloads_with_the_bytes_uploaded(archive: Archive, experiments: dict[str, Experiment]) -> None:
    for name, result_id in archive.ids.items():
        data_dir = experiments[name].path
        local = {p.relative_to(data_dir).as_posix(): sha256(p.read_bytes()) for p in data_dir.rglob("*") if p.is_file()}
        detail = get_json(f"{archive.server.url}api/results/{result_id}")
        assert {f["path"]: f["sha256"] for f in detail["files"]} == local
        for file in detail["files"]:
            if file["role"] in ("plot", "download") or file["path"].endswith("run1/run.json"):
                assert sha256(get_bytes(file["url"])) == local[file["path"]], file["path"]
        whole = {}
        with tarfile.open(fileobj=io.BytesIO(get_bytes(detail["archive_url"]))) as tar:
            for member in tar:
                if member.isreg() and member.name != "MANIFEST.json":
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    whole[member.name] = sha256(extracted.read())
        assert whole == local


def test_summary_scores_are_ln_of_mean_throughput_over_mean_p95_delay(
        archive: Archive, experiments: dict[str, Experiment]) -> None:
    summary = get_json(f"{archive.server.url}api/summary")
    rows = {row["id"]: row for row in summary["experiments"]}
    for name, result_id in archive.ids.items():
        cells = rows[result_id]["cells"]
        expected = perf(experiments[name])["schemes"]
        assert set(cells) == set(expected)
        for scheme, cell in cells.items():
            means = expected[scheme]["summary"]["all"]
            assert cell["score"] == pytest.approx(
                math.log(means["throughput_mbps"]["mean"] / means["delay_p95_ms"]["mean"]), rel=1e-9)


def test_the_csv_export_has_every_flow_of_every_run(archive: Archive, experiments: dict[str, Experiment]) -> None:
    rows = list(csv.DictReader(io.StringIO(get_bytes(f"{archive.server.url}api/export.csv").decode())))
    expected = sum(len(run["flows"]) for e in experiments.values() for s in perf(e)["schemes"].values()
                   for run in s["runs"].values())
    assert len(rows) == expected
    assert get_bytes(f"{archive.server.url}api/export.parquet").startswith(b"PAR1")


def error_line(done: subprocess.CompletedProcess) -> str:
    """The one line a refused upload ends with (after the client's progress line, if it got that far)."""
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("pantheon: "), done.stderr
    return line


def test_serve_and_upload_make_a_browsable_archive_in_two_commands(
        tmp_path: Path, experiments: dict[str, Experiment]) -> None:
    """Issue 20's "done when": in a fresh directory, `pantheon archive serve` with every default but the
    port, then `pantheon archive upload DIR DIR --to URL` with no token anywhere (the one the loopback
    server made for this machine's user)."""
    server = ArchiveServer(f"sqlite:///{tmp_path / 'archive' / 'archive.db'}", tmp_path / "archive" / "files",
                           tmp_path, cwd=tmp_path)
    server.start()
    try:
        dirs = [experiments["copa-cubic"].path, experiments["vegas-2flows"].path]
        without_token = {k: v for k, v in os.environ.items() if k != "PANTHEON_ARCHIVE_TOKEN"}
        done = subprocess.run([str(PANTHEON), "archive", "upload", *map(str, dirs), "--to", server.url],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path, env=without_token)
        assert done.returncode == 0, done.stderr
        assert [line.split()[-2] for line in done.stdout.splitlines()] == ["uploaded:", "uploaded:"], done.stdout
        assert (server.files / "local-token").stat().st_mode & 0o777 == 0o600
        assert get_bytes(server.url).count(b'class="result-link"') == len(dirs)
    finally:
        server.stop()


# The command line's token handling and its one-line refusals do not depend on the database: once,
# over the deployment's (PostgreSQL) and the default (SQLite).
def test_tokens_are_needed_to_upload_and_can_be_revoked(
        postgresql_archive: Archive, experiments: dict[str, Experiment]) -> None:
    archive = postgresql_archive
    server = archive.server
    data_dir = experiments["copa-cubic"].path
    assert "no token" in error_line(server.upload(data_dir, None))
    # Over HTTP: no token, or one the archive never made, is a 401 with one line.
    body = pack(data_dir_members(data_dir))
    for token in (None, "pantheon_not-a-token"):
        status, answer = post_upload(server.url, body, token)
        assert status == 401 and "\n" not in answer["error"], (status, answer)
    # From the environment; the same data dir again is the same result.
    again = pantheon("archive", "upload", str(data_dir), "--to", server.url, env={"PANTHEON_ARCHIVE_TOKEN": archive.token})
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[-1] == f"{server.url}results/{archive.ids['copa-cubic']}"
    spare = server.token("spare")
    revoked = pantheon("archive", "token", "revoke", "spare", "--db", server.db)
    assert revoked.returncode == 0, revoked.stderr
    assert "the archive refused the token" in error_line(server.upload(data_dir, spare))
    assert server.results()["total"] == len(archive.ids)


def test_a_data_dir_whose_perf_json_lies_is_refused_in_one_line(
        sqlite_archive: Archive, experiments: dict[str, Experiment], tmp_path: Path) -> None:
    archive = sqlite_archive
    data_dir = shutil.copytree(experiments["vegas-2flows"].path, tmp_path / "lying")
    perf_path = data_dir / "perf.json"
    document = json.loads(perf_path.read_text())
    document["schemes"]["vegas-user"]["runs"]["1"]["flows"]["all"]["delivered_bytes"] += 1_000_000
    perf_path.write_text(json.dumps(document))
    assert "perf.json" in error_line(archive.server.upload(data_dir, archive.token))
    assert archive.server.results()["total"] == len(archive.ids)


def test_results_outlive_a_restart(archive: Archive) -> None:
    server = archive.server
    before = server.results()
    detail = get_json(f"{server.url}api/results/{archive.ids['nepal-3schemes']}")
    assert server.stop(signal.SIGTERM) == 0
    server.start(port=server.port)
    assert server.results() == before
    plot = next(f for f in detail["files"] if f["role"] == "plot")
    assert sha256(get_bytes(plot["url"])) == plot["sha256"]


def test_a_backup_as_docs_archive_md_says_restores_the_archive(
        archive: Archive, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The database first, the files second (docs/archive.md, "Backups"), restored beside the running
    archive into a fresh database and file store: the restored archive serves the same results."""
    server = archive.server
    restored = tmp_path / "restored"
    if server.db.startswith("sqlite:///"):
        db = f"sqlite:///{tmp_path / 'backup.db'}"
        with sqlite3.connect(server.db.removeprefix("sqlite:///")) as live, \
                sqlite3.connect(db.removeprefix("sqlite:///")) as backup:
            live.backup(backup)
    else:
        postgres = request.getfixturevalue("postgres")
        dump = tmp_path / "archive.dump"
        postgres.tool("pg_dump", "-Fc", "-f", str(dump), "-d", urllib.parse.urlsplit(server.db).path[1:])
        db = postgres.new_database()
        postgres.tool("pg_restore", "-d", urllib.parse.urlsplit(db).path[1:], str(dump))
    shutil.copytree(server.files / "sha256", restored / "files" / "sha256")
    with archive_server(db, restored) as copy:
        assert copy.results()["total"] == server.results()["total"] == len(archive.ids)
        for result_id in archive.ids.values():
            detail = get_json(f"{copy.url}api/results/{result_id}")
            for file in detail["files"]:
                assert sha256(get_bytes(file["url"])) == file["sha256"]
