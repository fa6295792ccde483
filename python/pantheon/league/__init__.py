"""The league (issue 36): every scheme over a matrix of environments, in the simulator, as Dask
tasks, ranked as ccBench ranks schemes (Abbasloo, "Internet Congestion Control Benchmarking",
arXiv:2307.10054, 2023): who is within 10 % of the best in each contest (docs/league.md).

    matrix.py     the matrix (TOML): rates, RTTs, buffers, queues, loss, rate steps, presets, topologies, flows, seeds
    path.py       an environment's path as the simulator's options; a rate step as a delivery trace
    entrants.py   who plays: crates/cc schemes, and kernel or QUIC schemes through their stand-ins
    campaign.py   the cells as Dask tasks over `pantheon-sim batch`, journaled, resumable
    table.py      a row per environment × scheme × seed, the score, harm; league.parquet
    ranking.py    contests, winners within the margin, standings, per-dimension win shares, spread
    report.py     report.md and league.json
    cli.py        `pantheon league MATRIX.toml --data-dir DIR`
"""
