"""The archive's tables (SQLAlchemy 2 declarative). One result is one uploaded data dir; it keeps
its metadata (the hosts, the path, versions, clock bounds) as columns the find page filters on,
and every run and every flow of every run with the metrics the project's analysis derived from the
records at upload (python/pantheon/analysis), not only aggregates: anyone can recompute a mean, or
a statistic the archive does not show, from the flows table or the bulk export. Times are UTC.

The schema's history is migrations/versions/; a change here needs a new migration there.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class Token(Base):
    """An upload token: its holder may add results. The token itself is shown once and never stored."""
    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    """Who holds it (a person, a lab, a CI job); unique among tokens not revoked."""
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    """sha256 of the token, hex."""
    created_at: Mapped[datetime] = mapped_column(DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)


class Result(Base):
    """One uploaded data dir."""
    __tablename__ = "results"
    id: Mapped[int] = mapped_column(primary_key=True)
    manifest_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    """sha256 of the canonical MANIFEST.json (sorted path → file sha256): the same data dir is one result."""
    archive_sha256: Mapped[str] = mapped_column(String(64))
    """The first uploaded tar.gz of the data dir, kept whole in the store for download."""
    archive_bytes: Mapped[int] = mapped_column(BigInteger)
    title: Mapped[str] = mapped_column(String(500))
    description: Mapped[str] = mapped_column(Text, default="")
    kind: Mapped[str] = mapped_column(String(20), index=True)
    """emulation, simulation, node-cloud or cloud-cloud."""
    preset: Mapped[str] = mapped_column(String(200), default="", index=True)
    """The emulator preset (pantheon emulators), or "" for a path given by options or a real one."""
    emulator_options: Mapped[str] = mapped_column(Text, default="")
    node: Mapped[str] = mapped_column(String(200), default="", index=True)
    """The host the experiment ran from (remote mode: the local host), by its description."""
    peer: Mapped[str] = mapped_column(String(200), default="", index=True)
    """The far host (remote mode), by its description; "" for an emulated path."""
    direction: Mapped[str] = mapped_column(String(20), default="", index=True)
    """Remote mode: "node-to-peer" when the node sent, "peer-to-node" when the peer did."""
    link: Mapped[str] = mapped_column(String(50), default="", index=True)
    """The node's link type as the uploader named it (ethernet, wifi, cellular), or "emulated"."""
    flows: Mapped[int] = mapped_column(Integer, index=True)
    """Flows per run (the largest of the runs, for a scenario of mixed schemes)."""
    started_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    """When the experiment started (metadata.json), UTC."""
    year: Mapped[int] = mapped_column(Integer, index=True)
    month: Mapped[int] = mapped_column(Integer, index=True)
    uploaded_at: Mapped[datetime] = mapped_column(DateTime)
    token_id: Mapped[int | None] = mapped_column(ForeignKey("tokens.id"))
    layout: Mapped[str] = mapped_column(String(20))
    """"harness" (this project's data dir) or "pantheon" (the original's)."""
    pantheon_version: Mapped[str] = mapped_column(String(50), default="")
    git_commit: Mapped[str] = mapped_column(String(64), default="")
    remote_pantheon_version: Mapped[str] = mapped_column(String(50), default="")
    remote_git_commit: Mapped[str] = mapped_column(String(64), default="")
    delay_bound_min_ms: Mapped[float | None] = mapped_column(Float)
    """Remote mode: the tightest of the runs' clock bounds on a one-way delay, ms."""
    delay_bound_max_ms: Mapped[float | None] = mapped_column(Float)
    """Remote mode: the loosest of the runs' clock bounds, ms."""
    setup_json: Mapped[str] = mapped_column(Text)
    """The analysis's (what, value) rows describing the experiment, JSON."""
    metadata_json: Mapped[str] = mapped_column(Text)
    """The data dir's metadata.json (or pantheon_metadata.json) as uploaded."""
    search_text: Mapped[str] = mapped_column(Text)
    """Lower-case text the free-text filter searches: title, description, hosts, schemes, setup."""
    schemes: Mapped[list[ResultScheme]] = relationship(back_populates="result", cascade="all, delete-orphan",
                                                       order_by="ResultScheme.position")
    runs: Mapped[list[Run]] = relationship(back_populates="result", cascade="all, delete-orphan",
                                           order_by="Run.position")
    files: Mapped[list[File]] = relationship(back_populates="result", cascade="all, delete-orphan",
                                             order_by="File.path")


class ResultScheme(Base):
    """A scheme (or scenario label) of a result, as the data dir named and described it."""
    __tablename__ = "result_schemes"
    result_id: Mapped[int] = mapped_column(ForeignKey("results.id", ondelete="CASCADE"), primary_key=True)
    scheme: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)
    position: Mapped[int] = mapped_column(Integer)
    display: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(500), default="")
    runs: Mapped[int] = mapped_column(Integer)
    valid_runs: Mapped[int] = mapped_column(Integer)
    """Runs the analysis judged valid; the means and the score are over these."""
    throughput_mbps_mean: Mapped[float | None] = mapped_column(Float)
    delay_p95_ms_mean: Mapped[float | None] = mapped_column(Float)
    loss_rate_mean: Mapped[float | None] = mapped_column(Float)
    score: Mapped[float | None] = mapped_column(Float)
    """ln(throughput_mbps_mean / delay_p95_ms_mean), the summary table's cell; kept so that the
    summary of a large archive reads one row per (result, scheme), not every flow."""
    result: Mapped[Result] = relationship(back_populates="schemes")


class Run(Base):
    """One run of one scheme, with the run-wide metrics of the analysis (metrics.RunMetrics)."""
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("results.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    scheme: Mapped[str] = mapped_column(String(200), index=True)
    number: Mapped[int] = mapped_column(Integer)
    valid: Mapped[bool] = mapped_column(Boolean)
    flags: Mapped[str] = mapped_column(Text)
    """Why the run is not valid for comparisons, one flag a line; "" when it is."""
    capacity_mbps: Mapped[float | None] = mapped_column(Float)
    utilization: Mapped[float | None] = mapped_column(Float)
    jain_index: Mapped[float | None] = mapped_column(Float)
    power: Mapped[float | None] = mapped_column(Float)
    """ln(throughput Mbit/s / p95 delay ms) of all flows together."""
    delay_bound_ms: Mapped[float | None] = mapped_column(Float)
    """Remote mode: how far each one-way delay of the run may be off (clock bound), ms."""
    rtt_fairness: Mapped[float | None] = mapped_column(Float)
    """The shortest-RTT bulk flows' throughput / the longest's, where they differed (issue 35)."""
    result: Mapped[Result] = relationship(back_populates="runs")
    flows: Mapped[list[Flow]] = relationship(back_populates="run", cascade="all, delete-orphan", order_by="Flow.position")


class Flow(Base):
    """One flow of a run ("1", "2", ...), or all its flows together ("all"): metrics.FlowMetrics."""
    __tablename__ = "flows"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    flow: Mapped[str] = mapped_column(String(10))
    scheme: Mapped[str | None] = mapped_column(String(200))
    sent_packets: Mapped[int] = mapped_column(Integer)
    sent_bytes: Mapped[int] = mapped_column(BigInteger)
    delivered_packets: Mapped[int] = mapped_column(Integer)
    delivered_bytes: Mapped[int] = mapped_column(BigInteger)
    first_send_s: Mapped[float | None] = mapped_column(Float)
    last_send_s: Mapped[float | None] = mapped_column(Float)
    first_delivery_s: Mapped[float | None] = mapped_column(Float)
    last_delivery_s: Mapped[float | None] = mapped_column(Float)
    duration_s: Mapped[float] = mapped_column(Float)
    throughput_mbps: Mapped[float] = mapped_column(Float)
    ingress_mbps: Mapped[float] = mapped_column(Float)
    delay_p95_ms: Mapped[float | None] = mapped_column(Float)
    delay_mean_ms: Mapped[float | None] = mapped_column(Float)
    delay_median_ms: Mapped[float | None] = mapped_column(Float)
    loss_rate: Mapped[float | None] = mapped_column(Float)
    ce_rate: Mapped[float | None] = mapped_column(Float)
    """Deliveries marked CE / deliveries; None for a flow without ECN (and those uploaded before it)."""
    fct_ms: Mapped[float | None] = mapped_column(Float)
    """A finite flow's completion time, ms; None for other flows (issue 35)."""
    slowdown: Mapped[float | None] = mapped_column(Float)
    """A finite flow's FCT / its ideal FCT on the empty path; None for other flows."""
    run: Mapped[Run] = relationship(back_populates="flows")


class File(Base):
    """A file of a result's data dir, its bytes in the content-addressed store under its sha256."""
    __tablename__ = "files"
    result_id: Mapped[int] = mapped_column(ForeignKey("results.id", ondelete="CASCADE"), primary_key=True)
    path: Mapped[str] = mapped_column(String(1000), primary_key=True)
    """Relative to the data dir, '/'-separated."""
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    result: Mapped[Result] = relationship(back_populates="files")


class League(Base):
    """One uploaded league (`pantheon league MATRIX.toml --data-dir DIR`, issue 36 §5): every scheme
    of a matrix against every other over its environments, ranked by wins. league.json is kept whole
    (league_json) for its per-dimension breakdown; the ranking is in league_schemes, one row each,
    so that leagues compare and list without reading the document."""
    __tablename__ = "leagues"
    id: Mapped[int] = mapped_column(primary_key=True)
    manifest_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    """sha256 of the canonical MANIFEST.json: the same league dir uploaded again is one league."""
    archive_sha256: Mapped[str] = mapped_column(String(64))
    """The first uploaded tar.gz of the league dir, kept whole in the store for download."""
    archive_bytes: Mapped[int] = mapped_column(BigInteger)
    title: Mapped[str] = mapped_column(String(500))
    """The uploader's title, or the matrix and the commit."""
    matrix: Mapped[str] = mapped_column(String(200), index=True)
    """The matrix's name (league.json's "matrix"): leagues of one matrix ran the same contests."""
    description: Mapped[str] = mapped_column(Text, default="")
    git_commit: Mapped[str | None] = mapped_column(String(50), index=True)
    """The commit the league ran at, 40 lower-case hex digits, "-dirty" after them for a tree with
    uncommitted changes; None when league.json says null."""
    created_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    """When the league was made (league.json's created_utc), UTC."""
    uploaded_at: Mapped[datetime] = mapped_column(DateTime)
    token_id: Mapped[int | None] = mapped_column(ForeignKey("tokens.id"))
    duration_s: Mapped[float] = mapped_column(Float)
    """Each contest's simulated length, s."""
    environments: Mapped[int] = mapped_column(Integer)
    rows: Mapped[int] = mapped_column(Integer)
    """Rows of league.parquet: environment × scheme × seed."""
    failed_rows: Mapped[int] = mapped_column(Integer)
    top_scheme: Mapped[str] = mapped_column(String(200), default="")
    """The scheme ranked first ("" for a league with an empty ranking)."""
    league_json: Mapped[str] = mapped_column(Text)
    """league.json as uploaded (checked against the contract, leagues.py)."""
    schemes: Mapped[list[LeagueScheme]] = relationship(back_populates="league", cascade="all, delete-orphan",
                                                       order_by="LeagueScheme.position")
    files: Mapped[list[LeagueFile]] = relationship(back_populates="league", cascade="all, delete-orphan",
                                                   order_by="LeagueFile.path")


class LeagueScheme(Base):
    """A scheme of a league: how it was simulated, and its row of the ranking (None where the ranking
    leaves it out)."""
    __tablename__ = "league_schemes"
    league_id: Mapped[int] = mapped_column(ForeignKey("leagues.id", ondelete="CASCADE"), primary_key=True)
    scheme: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)
    position: Mapped[int] = mapped_column(Integer)
    """Its place in the ranking (0 best), ranked schemes first; then the others in league.json's order."""
    simulated_as: Mapped[str] = mapped_column(String(500), default="")
    stand_in: Mapped[str | None] = mapped_column(String(200))
    """The scheme that stood in for it in the simulator (cubic for cubic-user), or None."""
    rank: Mapped[int | None] = mapped_column(Integer)
    wins: Mapped[int | None] = mapped_column(Integer)
    contests: Mapped[int | None] = mapped_column(Integer)
    win_share: Mapped[float | None] = mapped_column(Float)
    """wins / contests, 0 to 1."""
    mean_relative_score: Mapped[float | None] = mapped_column(Float)
    throughput_mbps_median: Mapped[float | None] = mapped_column(Float)
    utilization_median: Mapped[float | None] = mapped_column(Float)
    delay_p95_ms_median: Mapped[float | None] = mapped_column(Float)
    loss_rate_median: Mapped[float | None] = mapped_column(Float)
    """A fraction, 0 to 1 (the pages show it in %)."""
    jain_median: Mapped[float | None] = mapped_column(Float)
    harm_throughput_median: Mapped[float | None] = mapped_column(Float)
    league: Mapped[League] = relationship(back_populates="schemes")


class LeagueFile(Base):
    """A file of a league dir (league.json, league.parquet, matrix.toml, report.md, ...), its bytes
    in the content-addressed store under its sha256."""
    __tablename__ = "league_files"
    league_id: Mapped[int] = mapped_column(ForeignKey("leagues.id", ondelete="CASCADE"), primary_key=True)
    path: Mapped[str] = mapped_column(String(1000), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    league: Mapped[League] = relationship(back_populates="files")
