"""`pantheon calibrate`: from a path's measured results to an emulator preset that replicates them
(Yan et al., "Pantheon: the training ground for Internet congestion-control research", USENIX ATC
2018, §4 "calibrated emulators" and §5's replication error).

The paper fitted five link parameters (bottleneck rate, one-way propagation delay, DropTail buffer,
i.i.d. loss, constant or Poisson delivery) with Bayesian optimisation, each evaluation running
every scheme over the emulator in real time. Here each evaluation runs the schemes in the
simulator (pantheon.sim.batch: the emulator's link model and the schemes' own controllers in
virtual time), trials run in parallel on Dask, and Optuna chooses them. Beyond the paper, a
time-varying model: a delivery trace inferred from the data (`--model trace`; by default both are
searched and the one that replicates the data better is kept).

    targets.py      what is to be replicated: per scheme and flow setting, the mean throughput and
                    mean p95 one-way delay over its valid runs, as the analysis computes them
    replication.py  the replication error and its noise floor
    space.py        the five parameters, their bounds (from the data, overridable), a candidate
                    as a preset; the trace model's parameters beside them
    trace.py        the richer model (--model trace): a delivery trace inferred from the runs'
                    arrivals, over which delay, buffer, loss and a rate scale are fitted
    standins.py     which controller the simulator runs for each scheme
    evaluate.py     one trial: every setting simulated over a candidate path
    search.py       the Optuna study (SQLite, resumable) and the Dask trials
    calibration.py  a whole calibration: the above in order, then its files (preset TOML, JSON
                    summary, figures, report page)
    cli.py          the command: its options into one `calibrate` call, the result's table printed
"""
