"""Analysis: per-packet records in, Pantheon's metrics, plots and reports out (Yan et al., ATC 2018, §3.2).

    events.py    what one direction of a path saw: sends, deliveries, delivery opportunities
    logs.py      readers: this project's records.parquet and the original Pantheon's text logs
    metrics.py   throughput, one-way delay percentiles, loss, capacity, fairness, power; per scheme
    transfers.py finite transfers: FCT, slowdown, by size, start lateness; RTT fairness
    probes.py    latency probes: RTT per probe, and with no other flow active
    workloads.py the two above applied to a run (run.json's flows, transfers.parquet)
    harm.py      harm of one scheme on another (Ware et al., HotNets 2019), harm.json
    series.py    the same in time bins, for the plots
    datadir.py   the runs of a data dir (this harness's layout or the original Pantheon's)
    plots.py     throughput and delay over time per run; throughput against delay per scheme
    perf.py      perf.json and the flat table (CSV, Parquet)
    report.py    the report, as a self-contained HTML page and as a PDF
    analyze.py   all of the above, for every run of a data dir
    cli.py       `pantheon analyze DATA_DIR`, and the analysis at the end of `pantheon test`

docs/analysis.md states every definition.
"""

DEFAULT_BIN_MS = 500.0
"""The time bin of the series and plots over time, ms: the original Pantheon's. Here, not in
series.py, so that the command line can name it without importing numpy."""
MIN_BIN_MS, MAX_BIN_MS = 1.0, 3_600_000.0
"""The bins a reader can use: below 1 ms a run of one day has more bins than memory holds (a
bin of 1e-300 ms ended in a MemoryError), above an hour every plot is one bar."""

METADATA_FORMAT_VERSION = 2
"""metadata.json's format, written by every driver (trials.py) and read here. 1: no
`format_version` key (data dirs before 2026-11-29); 2: adds `format_version` and `head_start_s`.
The reader reads every version up to its own and refuses a newer one in one line."""
PERF_FORMAT_VERSION = 2
"""perf.json's format (perf.py). 1: no `format_version` key; 2: adds it. A key added beside the
others (each flow's `ce_rate`, issue 34) is no new version: an older reader ignores it, and a
perf.json without it reads as null there (archive/upload.py's LATER_KEYS); a version is for a
change an older reader would misread. The workload metrics (issue 35: fct_ms, slowdown,
transfers, start_lateness_ms, probe_rtt_ms, probe_rtt_idle_ms, rtt_fairness) are such keys."""
LEGACY_HEAD_START_S = 1.0
"""The head start taken where a data dir does not say it: a metadata.json of version 1 (the
harness's head start then), and the original Pantheon's data dirs (as this analysis always took it)."""
