"""The archive's pages in a real browser (issue 20 §3, issue 39 §2): Playwright for Python driving
Debian's chromium, headless, against the real server over a real PostgreSQL (tests/archive_server.py).
The experiments are uploaded with `pantheon archive upload`; then, as a visitor would, the test finds
one through the filter form, opens it, reads its ranking, sees every plot load, follows the downloads,
reads the summary table's numbers and colours, and compares two results on one chart. Each page is
looked at 1400 px wide and 400 px wide (a phone): the find and result pages must not scroll sideways
there. Screenshots of each page at both widths are kept (the path is printed)."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from archive_server import PANTHEON, Archive, Experiment, archive_server, new_database
from prerequisites import missing

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("PANTHEON_SCREENSHOTS", "/tmp/pantheon-archive-screenshots"))
"""Where the screenshots are copied for a person to look at (also kept in the test's tmp dir)."""
WIDE, PHONE = 1400, 400
"""The two widths every page is looked at, in CSS pixels: a desktop's window and a phone's."""

try:
    from playwright import sync_api
except ImportError:
    sync_api = None


@pytest.fixture(scope="module", autouse=True)
def _browser_installed() -> None:
    """Before the module's browser: autouse fixtures of a scope come first."""
    if sync_api is None:
        missing("playwright is not installed (requirements.lock)")
    if not CHROMIUM.is_file():
        missing(f"{CHROMIUM} is missing (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser(pytestconfig: pytest.Config) -> Iterator:
    """One headless chromium for the module; says where the screenshots are when it closes."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield chromium
        chromium.close()
    if SCREENSHOTS.is_dir():
        # Past pytest's capture, so that the line shows in a passing run's output too.
        with pytestconfig.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
            print(f"\narchive pages' screenshots: {SCREENSHOTS}")


@pytest.fixture
def page(browser, tmp_path: Path) -> Iterator:
    context = browser.new_context(accept_downloads=True, viewport={"width": WIDE, "height": 900})
    context.set_default_timeout(30_000)
    yield context.new_page()
    context.close()


def screenshot(page, tmp_path: Path, name: str) -> None:
    """A full-page screenshot in the test's tmp dir, copied to SCREENSHOTS."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENSHOTS / path.name)


def sideways_scroll_px(page) -> int:
    """How far the page itself scrolls sideways (0 when everything fits its width)."""
    return page.evaluate("() => document.scrollingElement.scrollWidth - window.innerWidth")


def screenshots(page, tmp_path: Path, name: str, fits_a_phone: bool = False) -> None:
    """NAME-1400.png and NAME-400.png of the page (the window left wide again); with `fits_a_phone`,
    asserts that at 400 px the page does not scroll sideways (a wide table scrolls in its own box)."""
    for width in (WIDE, PHONE):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_load_state("networkidle")
        screenshot(page, tmp_path, f"{name}-{width}")
        if fits_a_phone and width == PHONE:
            assert sideways_scroll_px(page) <= 0, f"{name} scrolls sideways at {width} px"
    page.set_viewport_size({"width": WIDE, "height": 900})


def choose(page, name: str, value: str) -> None:
    """Set a filter of the find form, whether it is a select or a text input."""
    field = page.locator(f"#filters [name={name}]")
    if field.evaluate("e => e.tagName") == "SELECT":
        field.select_option(value)
    else:
        field.fill(value)


def test_find_open_see_plots_and_download(postgresql_archive: Archive, page, tmp_path: Path,
                                          experiments: dict[str, Experiment]) -> None:
    archive = postgresql_archive
    server = archive.server
    pages = {name: f"{server.url}results/{result_id}" for name, result_id in archive.ids.items()}
    experiment = experiments["vegas-2flows"]
    page.goto(server.url)
    assert page.locator("a.result-link").count() == len(pages)
    choose(page, "scheme", "vegas-user")
    choose(page, "flows", "2")
    screenshots(page, tmp_path, "find", fits_a_phone=True)
    page.locator("#filters [type=submit]").click()
    page.wait_for_load_state()
    assert "scheme=vegas-user" in page.url and "flows=2" in page.url
    links = page.locator("a.result-link")
    assert links.count() == 1
    # The filters stay set on the page of results they chose.
    assert page.locator("#filters [name=scheme]").input_value() == "vegas-user"
    links.first.click()
    page.wait_for_load_state("load")
    assert page.url == f"{server.url}results/{archive.ids['vegas-2flows']}"
    # The title is a short name (what ran, where, how many flows), the emulator's command is in the body.
    assert page.locator("h1").inner_text().strip() == "Vegas (userspace) on buffer-30000b, 2 flows"
    assert page.title() == "Vegas (userspace) on buffer-30000b, 2 flows · Pantheon archive"
    command = " ".join(json.loads((experiment.path / "metadata.json").read_text())["emulator_options"])
    assert page.locator("#command").inner_text().strip() == command

    # Every plot is one of the data dir's images, and the browser decoded it (a broken image is 0 wide).
    pngs = {p.relative_to(experiment.path).as_posix() for p in experiment.path.rglob("*.png")}
    page.wait_for_load_state("networkidle")
    plots = page.locator("img.plot").evaluate_all(
        "images => images.map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")
    assert len(plots) >= 2
    assert all(complete and width > 0 for _, complete, width in plots), plots
    assert all(any(src.endswith(png) for png in pngs) for src, _, _ in plots), plots
    screenshots(page, tmp_path, "result", fits_a_phone=True)

    perf_link = page.locator('a.download[href$="perf.json"]')
    assert perf_link.count() == 1
    perf_bytes = page.request.get(perf_link.evaluate("a => a.href")).body()
    assert perf_bytes == (experiment.path / "perf.json").read_bytes()
    # The whole data dir is an attachment: the browser saves it.
    with page.expect_download() as whole:
        page.locator('a.download[href$="archive.tar.gz"]').click()
    with tarfile.open(whole.value.path()) as tar:
        extracted = tar.extractfile("perf.json")
        assert extracted is not None and extracted.read() == perf_bytes
    # The report opens in chromium's PDF viewer (which hands the page an HTML wrapper of its own),
    # so its bytes are fetched through the browser's context, as the viewer's download button would.
    report_link = page.locator('a.download[href$="report.pdf"]')
    report_url = report_link.evaluate("a => a.href")
    report_link.click()
    page.wait_for_url(report_url)
    screenshot(page, tmp_path, "report")
    assert page.request.get(report_url).body() == (experiment.path / "report.pdf").read_bytes()


def perf_means(experiment: Experiment) -> dict[str, dict[str, float]]:
    """Each scheme's all-flows means in the experiment's perf.json, and its score ln(throughput / p95 delay)."""
    schemes = json.loads((experiment.path / "perf.json").read_text())["schemes"]
    means = {name: {m: scheme["summary"]["all"][m]["mean"] for m in ("throughput_mbps", "delay_p95_ms", "loss_rate")}
             for name, scheme in schemes.items()}
    return {name: {**m, "score": math.log(m["throughput_mbps"] / m["delay_p95_ms"])} for name, m in means.items()}


def test_result_ranks_schemes_best_first(postgresql_archive: Archive, page, tmp_path: Path,
                                         experiments: dict[str, Experiment]) -> None:
    server = postgresql_archive.server
    means = perf_means(experiments["nepal-3schemes"])
    page.goto(f"{server.url}results/{postgresql_archive.ids['nepal-3schemes']}")
    ranking = page.locator("#schemes tr.ranked").evaluate_all(
        "rows => rows.map(row => [row.dataset.scheme, row.querySelector('td.rank').innerText, row.innerText])")
    assert [scheme for scheme, _, _ in ranking] == sorted(means, key=lambda name: -means[name]["score"])
    assert [rank for _, rank, _ in ranking] == ["1", "2", "3"]
    # Loss in per cent: the mean fraction of perf.json × 100.
    for scheme, _, text in ranking:
        assert f"{100 * means[scheme]['loss_rate']:.2f} %" in text, text
    # The chart: one point per scheme, in the scheme's colour of the ranking's swatch.
    points = page.locator("#throughput-delay path.point").evaluate_all("ps => ps.map(p => p.dataset.scheme)")
    assert sorted(points) == sorted(means)
    screenshots(page, tmp_path, "result-3schemes", fits_a_phone=True)


def rgb(colour: str) -> tuple[float, ...]:
    """'rgb(r, g, b)' or 'rgba(r, g, b, a)' as computed by the browser."""
    inside = colour[colour.index("(") + 1:colour.index(")")]
    return tuple(float(part) for part in inside.split(",")[:3])


def summary_rows(page) -> list[list[tuple[float, str, str]]]:
    """The summary's rows that have a scored cell: each cell's score, background colour and the text
    it shows (innerText: only what is visible, no hover)."""
    rows = page.locator("#summary tr").evaluate_all("""rows => rows.map(row => Array.from(row.querySelectorAll('td.score'))
        .map(cell => [parseFloat(cell.dataset.score), getComputedStyle(cell).backgroundColor, cell.innerText]))""")
    return [[tuple(cell) for cell in row] for row in rows if row]


def assert_coloured_best_to_worst(row: list[tuple[float, str, str]]) -> None:
    cells = sorted(row)
    worst, best = rgb(cells[0][1]), rgb(cells[-1][1])
    # Best is green and worst red, as the page's legend says: the best cell has more green over red.
    assert best[1] - best[0] > worst[1] - worst[0], row
    # Each colour's place on the line from the worst cell's colour to the best's must grow with
    # the score (a scale that is not a straight line in RGB, red → yellow → green, still moves along it).
    direction = [b - w for b, w in zip(best, worst)]
    places = [sum((c - w) * d for c, w, d in zip(rgb(colour), worst, direction)) for _, colour, _ in cells]
    assert places == sorted(places), cells


def test_summary_shows_numbers_and_colours_order_by_score(postgresql_archive: Archive, page, tmp_path: Path,
                                                          experiments: dict[str, Experiment]) -> None:
    archive = postgresql_archive
    server = archive.server
    page.goto(server.url + "summary")
    rows = summary_rows(page)
    screenshots(page, tmp_path, "summary")
    # The experiments ran on three different paths: three rows.
    assert sorted(map(len, rows)) == sorted(len(e.schemes) for e in experiments.values())
    # Every cell's score is ln(mean throughput / mean p95 delay) of a scheme in an experiment, worked
    # out here from its perf.json, and the cell shows, without hovering, the score and those two means.
    means = {round(m["score"], 9): m for e in experiments.values() for m in perf_means(e).values()}
    assert {round(score, 9) for row in rows for score, _, _ in row} == set(means)
    for score, _, text in (cell for row in rows for cell in row):
        m = means[round(score, 9)]
        assert f"{score:.2f}" in text and f"{m['throughput_mbps']:.2f} Mbit/s" in text and f"{m['delay_p95_ms']:.2f} ms" in text, text
    for row in [row for row in rows if len(row) > 1]:
        assert_coloured_best_to_worst(row)
    assert max(map(len, rows)) == 3, "no row with a colour between its best and worst"


def test_summary_puts_one_scheme_per_result_on_one_path_in_one_row(request: pytest.FixtureRequest, page,
                                                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    """As the observatory uploads: one result per scheme, all on one path (nepal-wifi, 1 flow); the
    summary compares them in one row, coloured within it."""
    root = tmp_path_factory.mktemp("archive-per-scheme")
    schemes = ("copa", "vegas-user")
    started = [subprocess.Popen(
        [str(PANTHEON), "sim", "--schemes", scheme, "--run-times", "2", "--runtime", "2", "--flows", "1", "--jobs", "1",
         "--quiet", "--data-dir", str(root / scheme), "--emulator", "nepal-wifi", "--seed", str(seed)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed, scheme in enumerate(schemes)]
    for proc in started:
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
    tmp_path = root / "screens"
    tmp_path.mkdir()
    with archive_server(new_database(request, "sqlite", root / "archive"), root / "archive") as server:
        token = server.token("observatory")
        server.upload_all({scheme: root / scheme for scheme in schemes}, token)
        page.goto(server.url + "summary")
        rows = summary_rows(page)
        screenshots(page, tmp_path, "summary-per-scheme")
        assert len(rows) == 1 and len(rows[0]) == len(schemes), rows
        assert_coloured_best_to_worst(rows[0])
        assert page.locator("#summary a.result-link").count() == len(schemes)


def test_compare_two_results_chosen_on_the_find_page(postgresql_archive: Archive, page, tmp_path: Path) -> None:
    archive = postgresql_archive
    server = archive.server
    chosen = sorted([archive.ids["copa-cubic"], archive.ids["nepal-3schemes"]])
    page.goto(server.url)
    for result_id in chosen:
        page.locator(f'#compare input[type=checkbox][value="{result_id}"]').check()
    page.locator("#compare [type=submit]").click()
    page.wait_for_load_state("load")
    assert page.locator("h1").inner_text().strip() == "Compare results"
    shown = page.locator("a.result-link").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert sorted(int(href.rsplit("/", 1)[1]) for href in shown) == chosen
    page.wait_for_load_state("networkidle")
    sizes = page.locator("img.plot").evaluate_all("images => images.map(i => i.naturalWidth)")
    assert len(sizes) == len(chosen) and all(width > 0 for width in sizes), sizes
    # One chart on shared axes: a point per scheme of each result, a scheme one colour in both.
    points = page.locator("#throughput-delay path.point").evaluate_all(
        "ps => ps.map(p => [p.dataset.scheme, p.getAttribute('fill')])")
    assert sorted(scheme for scheme, _ in points) == sorted(["copa", "cubic-user", "bbr-user", "copa", "reno-user"])
    colours = {scheme: {fill for s, fill in points if s == scheme} for scheme, _ in points}
    assert all(len(fills) == 1 for fills in colours.values()) and len({f for fs in colours.values() for f in fs}) == len(colours)
    screenshots(page, tmp_path, "compare")


def test_the_other_pages_answer(postgresql_archive: Archive, page, tmp_path: Path) -> None:
    server = postgresql_archive.server
    for name, path in (("scheme", "schemes/copa"), ("faq", "faq")):
        response = page.goto(server.url + path)
        assert response is not None and response.status == 200, path
        assert page.locator("h1").count() == 1
        screenshots(page, tmp_path, name)
