"""Leagues in the archive (issue 36 §5, docs/archive.md): a league dir of `pantheon league` (league.json,
league.parquet, matrix.toml, report.md, made here by hand to the contract pantheon-league/1) uploaded
with `pantheon archive upload` to the real server (tests/archive_server.py), then its table, its
per-scheme breakdown and its downloads through the API and the pages, two leagues of different
commits side by side (which scheme moved, by how much, which ran in one only), a league.json that
breaks the contract refused with one line and nothing kept, the schema's migration on SQLite and
PostgreSQL, and the league and compare pages in headless Chromium at a desktop's and a phone's width.

League A ranks copa, cubic (the kernel's, played in the simulator by its stand-in cubic-user), vegas,
reno; league B, a later commit, ranks cubic, copa, vegas, bbr: cubic moved up one place, copa down
one, vegas stayed, reno ran in A only and bbr in B only."""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext

from archive_server import (
    ArchiveServer,
    get_bytes,
    get_json,
    manifest_member,
    pack,
    post_upload,
    regular,
    row_counts,
)
from archive_server import pantheon as run_pantheon
from pantheon.archive import client, schema
from pantheon.archive.db import engine_for
from pantheon.archive.models import Base
from prerequisites import missing

COMMIT_A = "a" * 40
COMMIT_B = "0123456789abcdef0123456789abcdef01234567-dirty"
"""B ran on a tree with uncommitted changes, as `git describe --dirty` says (and pantheon league writes)."""
DIMENSIONS = {"rate_mbps": ("12", "48", "120"), "queue": ("fifo", "codel")}
"""The breakdown's dimensions in these leagues: rates in numeric order (120 after 48, not before, as
text would sort them) and queues in the matrix's order."""


SIMULATED_AS = {"copa": "copa:delta=0.5"}
"""Each scheme's simulator spec where it is not its name (as pantheon league's entrants write it)."""


def league_document(commit: str, created: str, ranking: list[tuple[str, int, int]], stand_ins: dict[str, str]) -> dict:
    """league.json for `ranking`: (scheme, rank, wins) best first, each over 6 contests; the breakdown
    gives each scheme its win share plus 0.1 × the value's position, capped at 1."""
    contests = 6
    rows = [{"rank": rank, "scheme": scheme, "wins": wins, "contests": contests, "win_share": wins / contests,
             "mean_relative_score": 1 - 0.1 * rank, "throughput_mbps_median": 10.0 + wins,
             "utilization_median": 0.5 + 0.05 * wins, "delay_p95_ms_median": 30.0 + 5 * rank,
             "loss_rate_median": 0.001 * rank, "jain_median": None, "harm_throughput_median": None,
             "stand_in": stand_ins.get(scheme)} for scheme, rank, wins in ranking]
    return {
        "format": "pantheon-league/1", "matrix": "ccbench-single", "description": "one flow, six environments",
        "commit": commit, "created_utc": created, "duration_s": 30.0, "environments": 6, "seeds": [0],
        "rows": 6 * len(ranking), "failed_rows": 0,
        "score": "throughput / max(delay, base RTT), relative to the environment's best scheme",
        "win_margin": 0.1,
        "schemes": [{"name": scheme, "simulated_as": SIMULATED_AS.get(scheme, scheme), "stand_in": stand_ins.get(scheme)}
                    for scheme, _, _ in ranking],
        "ranking": rows,
        "breakdown": {dimension: {value: {scheme: min(1.0, wins / contests + 0.1 * i) for scheme, _, wins in ranking}
                                  for i, value in enumerate(values)} for dimension, values in DIMENSIONS.items()},
    }


LEAGUES = {
    "a": league_document(COMMIT_A, "2026-11-28T10:00:00Z",
                         [("copa", 1, 4), ("cubic", 2, 3), ("vegas", 3, 2), ("reno", 4, 1)], {"cubic": "cubic-user"}),
    "b": league_document(COMMIT_B, "2026-11-29T21:40:00Z",
                         [("cubic", 1, 5), ("copa", 2, 3), ("vegas", 3, 2), ("bbr", 4, 0)], {"cubic": "cubic-user"}),
}


def parquet_bytes(document: dict) -> bytes:
    """league.parquet: one row per environment × scheme × seed, the contract's columns."""
    rows = [{"environment": e, "rate_mbps": 12.0, "rtt_ms": 40.0, "buffer_bdp": 1.0, "queue": "fifo", "loss": 0.0,
             "flows": 1, "scheme": s["name"], "seed": 0, "ok": True, "throughput_mbps": 10.0, "utilization": 0.8,
             "delay_p95_ms": 40.0, "loss_rate": 0.0, "score": 0.5}
            for e in range(document["environments"]) for s in document["schemes"]]
    out = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue().to_pybytes()


def write_league(root: Path, document: dict) -> Path:
    root.mkdir(parents=True)
    (root / "league.json").write_text(json.dumps(document, indent=1))
    (root / "league.parquet").write_bytes(parquet_bytes(document))
    (root / "matrix.toml").write_text(f'name = "{document["matrix"]}"\nrate_mbps = [12, 48, 120]\n')
    (root / "report.md").write_text(f"# League {document['matrix']}\n\n<script>alert(1)</script> copa wins.\n")
    return root


@pytest.fixture(scope="module")
def league_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("leagues")
    return {name: write_league(root / f"league-{name}", document) for name, document in LEAGUES.items()}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArchiveServer]:
    root = tmp_path_factory.mktemp("league-archive")
    (root / "logs").mkdir()
    served = ArchiveServer(f"sqlite:///{root / 'archive.db'}", root / "files", root / "logs")
    served.start()
    yield served
    assert served.stop() == 0


@pytest.fixture(scope="module")
def token(server: ArchiveServer) -> str:
    return server.token("league-tests")


@pytest.fixture(scope="module")
def uploaded(server: ArchiveServer, token: str, league_dirs: dict[str, Path]) -> dict[str, int]:
    """League A by the command line, league B by the client in-process; each one's id."""
    done = run_pantheon("archive", "upload", str(league_dirs["a"]), "--to", server.url, env={"PANTHEON_ARCHIVE_TOKEN": token})
    assert done.returncode == 0, done.stderr
    url = done.stdout.splitlines()[-1].split()[-1]
    assert url.startswith(f"{server.url}leagues/"), done.stdout
    second = client.upload(league_dirs["b"], server.url, token)
    assert second["created"] and second["url"] == f"{server.url}leagues/{second['id']}"
    return {"a": int(url.rsplit("/", 1)[1]), "b": second["id"]}


def test_a_league_is_one_upload_listed_with_its_top_scheme(server, token, league_dirs, uploaded) -> None:
    listed = get_json(server.url + "api/leagues")["leagues"]
    assert [entry["id"] for entry in listed] == [uploaded["b"], uploaded["a"]]  # newest first
    newest = listed[0]
    assert newest["url"] == f"{server.url}leagues/{uploaded['b']}"
    assert (newest["matrix"], newest["commit"], newest["date"]) == ("ccbench-single", COMMIT_B, "2026-11-29T21:40:00Z")
    assert (newest["environments"], newest["schemes"], newest["top_scheme"]) == (6, 4, "cubic")
    assert newest["title"] == "ccbench-single at 0123456789-dirty"
    # The same league dir again is the same league: 200, not created.
    again = client.upload(league_dirs["a"], server.url, token)
    assert (again["id"], again["created"]) == (uploaded["a"], False)
    assert len(get_json(server.url + "api/leagues?matrix=ccbench-single")["leagues"]) == 2
    assert get_json(server.url + "api/leagues?matrix=other")["leagues"] == []


def test_the_league_api_gives_its_table_breakdown_and_files(server, league_dirs, uploaded) -> None:
    league = get_json(f"{server.url}api/leagues/{uploaded['a']}")
    document = LEAGUES["a"]
    assert [row["scheme"] for row in league["ranking"]] == ["copa", "cubic", "vegas", "reno"]
    cubic = league["ranking"][1]
    assert (cubic["rank"], cubic["wins"], cubic["contests"], cubic["stand_in"], cubic["simulated_as"]) == (
        2, 3, 6, "cubic-user", "cubic")
    assert league["ranking"][0]["simulated_as"] == "copa:delta=0.5"
    assert cubic["win_share"] == pytest.approx(0.5)
    assert cubic["delay_p95_ms_median"] == 40.0 and cubic["jain_median"] is None
    assert league["ranking"][0]["stand_in"] is None
    assert list(league["breakdown"]["rate_mbps"]) == ["12", "48", "120"]
    # copa won 4 of 6; at the third rate 4/6 + 0.2.
    assert league["breakdown"]["rate_mbps"]["120"]["copa"] == pytest.approx(4 / 6 + 0.2)
    assert list(league["breakdown"]["queue"]) == ["fifo", "codel"]
    assert (league["score"], league["win_margin"], league["seeds"]) == (document["score"], 0.1, [0])
    files = {f["path"]: f for f in league["files"]}
    assert set(files) == {"league.json", "league.parquet", "matrix.toml", "report.md"}
    for path, f in files.items():
        assert get_bytes(f["url"]) == (league_dirs["a"] / path).read_bytes()
    table = pq.read_table(pa.BufferReader(get_bytes(files["league.parquet"]["url"])))
    assert table.num_rows == 24 and "score" in table.column_names
    assert get_bytes(league["archive_url"])[:2] == b"\x1f\x8b"  # the whole dir, gzip


def test_the_league_page_shows_ranking_stand_ins_breakdown_and_downloads(server, uploaded) -> None:
    page = get_bytes(f"{server.url}leagues/{uploaded['a']}").decode()
    assert page.index('data-scheme="copa"') < page.index('data-scheme="cubic"') < page.index('data-scheme="reno"')
    assert "simulated as copa:delta=0.5" in page
    assert "stand-in: cubic-user" in page
    assert "66.7 %" in page  # copa's win share, 4 of 6
    assert page.index(">12</th>") < page.index(">48</th>") < page.index(">120</th>")
    assert f'href="/leagues/compare?a={uploaded["b"]}&amp;b={uploaded["a"]}"' in page
    assert 'href="/leagues/{}/files/league.parquet"'.format(uploaded["a"]) in page
    # report.md is shown as text: its markup is escaped, never run.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert "with uncommitted changes" not in page
    assert "with uncommitted changes (-dirty)" in get_bytes(f"{server.url}leagues/{uploaded['b']}").decode()
    listing = get_bytes(server.url + "leagues").decode()
    assert listing.index(f'href="/leagues/{uploaded["b"]}"') < listing.index(f'href="/leagues/{uploaded["a"]}"')
    assert '<a href="/leagues">Leagues</a>' in get_bytes(server.url).decode()  # in every page's navigation


def test_two_leagues_side_by_side_show_which_scheme_moved(server, uploaded) -> None:
    compared = get_json(f"{server.url}api/leagues/compare?a={uploaded['a']}&b={uploaded['b']}")
    assert compared["same_matrix"] and compared["a"]["commit"] == COMMIT_A and compared["b"]["commit"] == COMMIT_B
    rows = {row["scheme"]: row for row in compared["schemes"]}
    assert [row["scheme"] for row in compared["schemes"]] == ["cubic", "copa", "vegas", "bbr", "reno"]
    assert rows["cubic"]["rank_moved"] == 1 and rows["cubic"]["win_share_change"] == pytest.approx(2 / 6)
    assert rows["copa"]["rank_moved"] == -1 and rows["copa"]["win_share_change"] == pytest.approx(-1 / 6)
    assert rows["vegas"]["rank_moved"] == 0 and rows["vegas"]["win_share_change"] == pytest.approx(0)
    assert (rows["bbr"]["only_in"], rows["bbr"]["rank_moved"], rows["bbr"]["a"]) == ("b", None, None)
    assert (rows["reno"]["only_in"], rows["reno"]["b"]) == ("a", None)
    # copa at 120 Mbit/s: A 4/6 + 0.2 (capped 1 → 0.8667), B 3/6 + 0.2.
    assert compared["breakdown"]["rate_mbps"]["120"]["copa"]["change"] == pytest.approx(-1 / 6)
    page = get_bytes(f"{server.url}leagues/compare?a={uploaded['a']}&b={uploaded['b']}").decode()
    assert "↑ 1" in page and "↓ 1" in page and "only in A" in page and "only in B" in page
    assert "+33.3 pts" in page and "different-matrices" not in page
    for query, status in (("a=x&b=1", 400), ("b=1", 400), (f"a={uploaded['a']}&b=999", 404)):
        with pytest.raises(Exception) as refused:
            get_json(f"{server.url}api/leagues/compare?{query}")
        assert getattr(refused.value, "code", None) == status, query


def blob_count(server: ArchiveServer) -> int:
    return sum(1 for _ in (server.files / "sha256").glob("??/*"))


BROKEN = {
    "a format of another version": (lambda d: d.update(format="pantheon-league/2"), '"format"'),
    "a ranked scheme not among the schemes": (lambda d: d["ranking"][0].update(scheme="nosuch"), "ranking[0].scheme"),
    "a win share above 1": (lambda d: d["ranking"][1].update(win_share=1.5), "ranking[1].win_share"),
    "more wins than contests": (lambda d: d["ranking"][1].update(wins=7), "ranking[1].wins"),
    "a rank out of order": (lambda d: d["ranking"][0].update(rank=3), "ranking[1].rank"),
    "a commit that is no commit": (lambda d: d.update(commit="unknown"), "commit"),
    "a time that is no time": (lambda d: d.update(created_utc="yesterday"), "created_utc"),
    "no environments": (lambda d: d.update(environments=0), "environments"),
    "a breakdown of an unknown scheme": (lambda d: d["breakdown"]["queue"]["fifo"].update(nosuch=0.5), "breakdown.queue.fifo"),
    "a median that is text": (lambda d: d["ranking"][0].update(throughput_mbps_median="11"), "throughput_mbps_median"),
    "a dimension's value of two lines": (lambda d: d["breakdown"]["queue"].update({"a\nb": {"copa": 2}}), "breakdown.queue.a?b"),
}


def test_a_league_json_that_breaks_the_contract_is_refused_with_one_line(server, token, tmp_path) -> None:
    before, blobs = row_counts(server.db), blob_count(server)
    good = parquet_bytes(LEAGUES["a"])
    cases = {}
    for name, (change, field) in BROKEN.items():
        document = json.loads(json.dumps(LEAGUES["a"]))
        change(document)
        cases[name] = (json.dumps(document).encode(), good, field)
    nan = json.dumps(LEAGUES["a"]).replace('"win_margin": 0.1', '"win_margin": NaN').encode()
    cases["NaN"] = (nan, good, "not JSON")
    cases["not JSON"] = (b"{", good, "not JSON")
    cases["a parquet that is not one"] = (json.dumps(LEAGUES["a"]).encode(), b"PAR1 no", "league.parquet is not a Parquet")
    for name, (league_json, parquet, field) in cases.items():
        files = [regular("league.json", league_json), regular("league.parquet", parquet)]
        status, answer = post_upload(server.url, pack([manifest_member(files), *files]), token)
        assert status == 400, (name, answer)
        assert field in answer["error"] and "\n" not in answer["error"], (name, answer)
    assert row_counts(server.db) == before and blob_count(server) == blobs
    # The command line: the archive's one line, exit status 1.
    broken = write_league(tmp_path / "broken", {**LEAGUES["a"], "win_margin": -1})
    done = run_pantheon("archive", "upload", str(broken), "--to", server.url, "--token", token)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1].startswith("pantheon: the archive refused the upload (400): league.json: "
                                                            "win_margin is -1")
    assert row_counts(server.db) == before and blob_count(server) == blobs


def test_the_schema_migrates_up_and_down_and_matches_the_models(tmp_path, request) -> None:
    """Alembic's head is the models (no difference autogenerate would write), and 0004 goes down to
    0003 and up again; on SQLite, and on PostgreSQL where it is installed."""
    urls = [f"sqlite:///{tmp_path / 'migrated.db'}"]
    if Path("/usr/lib/postgresql/15/bin/initdb").is_file():
        urls.append(request.getfixturevalue("postgres").new_database())
    for url in urls:
        engine = engine_for(url)
        try:
            schema.upgrade(engine)
            with engine.connect() as connection:
                assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == [], url
            config = Config()
            config.set_main_option("script_location", str(schema.MIGRATIONS))
            with engine.begin() as connection:
                config.attributes["connection"] = connection
                command.downgrade(config, "0003")
            assert "leagues" not in sqlalchemy.inspect(engine).get_table_names()
            schema.upgrade(engine)
            assert {"leagues", "league_schemes", "league_files"} <= set(sqlalchemy.inspect(engine).get_table_names())
        finally:
            engine.dispose()


def test_leagues_on_postgresql(postgres, tmp_path, league_dirs) -> None:
    """The same uploads and comparison over PostgreSQL, and a bad one refused with nothing kept."""
    (tmp_path / "logs").mkdir()
    served = ArchiveServer(postgres.new_database(), tmp_path / "files", tmp_path / "logs")
    served.start()
    try:
        token = served.token("pg")
        ids = [client.upload(league_dirs[name], served.url, token)["id"] for name in ("a", "b")]
        compared = get_json(f"{served.url}api/leagues/compare?a={ids[0]}&b={ids[1]}")
        assert [(row["scheme"], row["rank_moved"]) for row in compared["schemes"]] == [
            ("cubic", 1), ("copa", -1), ("vegas", 0), ("bbr", None), ("reno", None)]
        before = row_counts(served.db)
        files = [regular("league.json", json.dumps({**LEAGUES["a"], "matrix": "x\x00"}).encode()),
                 regular("league.parquet", parquet_bytes(LEAGUES["a"]))]
        status, answer = post_upload(served.url, pack([manifest_member(files), *files]), token)
        assert status == 400 and "matrix" in answer["error"]
        assert row_counts(served.db) == before
        assert "stand-in: cubic-user" in get_bytes(f"{served.url}leagues/{ids[1]}").decode()
        # A restart sweeps the store of blobs no row names: a league's files are named, and stay.
        assert served.stop() == 0
        served.start()
        league = get_json(f"{served.url}api/leagues/{ids[0]}")
        parquet = next(f for f in league["files"] if f["path"] == "league.parquet")
        assert get_bytes(parquet["url"]) == (league_dirs["a"] / "league.parquet").read_bytes()
        assert get_bytes(league["archive_url"])[:2] == b"\x1f\x8b"
    finally:
        assert served.stop() == 0


CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("PANTHEON_SCREENSHOTS", "/tmp/pantheon-archive-screenshots"))
"""Where test_archive_browser.py keeps its screenshots; the league pages' join them."""


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def sideways_scroll_px(page) -> int:
    """How far the page itself scrolls sideways (0 when everything fits its width)."""
    return page.evaluate("() => document.scrollingElement.scrollWidth - window.innerWidth")


def test_the_league_and_compare_pages_in_a_browser(server, uploaded) -> None:
    """As a visitor: the league page's ranking and breakdown bars, at 1400 px and at a phone's 400 px
    without scrolling sideways; the compare link to the other league, and its moves."""
    try:
        from playwright import sync_api
    except ImportError:
        missing("playwright is not installed (requirements.lock)")
    if not CHROMIUM.is_file():
        missing(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(f"{server.url}leagues")
            screenshot(page, "leagues-1400")
            page.locator(f'a.league-link[href="/leagues/{uploaded["b"]}"]').click()
            page.wait_for_load_state("load")
            ranked = page.locator("#ranking tr.ranked")
            assert [ranked.nth(i).get_attribute("data-scheme") for i in range(ranked.count())] == [
                "cubic", "copa", "vegas", "bbr"]
            assert page.locator("#ranking tr.ranked").first.locator(".stand-in").inner_text() == "stand-in: cubic-user"
            # cubic won 5 of 6: its win-share bar fills 83.3% of the cell.
            assert "83.3%" in page.locator("#ranking tr.ranked td.share").first.get_attribute("style")
            assert page.locator("figure.dimension").count() == 2
            for width in (1400, 400):
                page.set_viewport_size({"width": width, "height": 900})
                screenshot(page, f"league-{width}")
                assert sideways_scroll_px(page) <= 0, f"the league page scrolls sideways at {width} px"
            page.set_viewport_size({"width": 1400, "height": 900})
            page.locator("#compare-form button").click()
            page.wait_for_load_state("load")
            assert f"a={uploaded['a']}" in page.url and f"b={uploaded['b']}" in page.url
            cubic = page.locator('#league-compare tr[data-scheme="cubic"]')
            assert cubic.locator("td.moved").inner_text() == "↑ 1"
            assert page.locator('#league-compare tr[data-scheme="reno"] .only').inner_text() == "only in A"
            for width in (1400, 400):
                page.set_viewport_size({"width": width, "height": 900})
                screenshot(page, f"league-compare-{width}")
                assert sideways_scroll_px(page) <= 0, f"the compare page scrolls sideways at {width} px"
        finally:
            browser.close()
