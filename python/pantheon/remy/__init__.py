"""Remy (Winstein & Balakrishnan, "TCP ex Machina: computer-generated congestion control", SIGCOMM
2013; Sivaraman et al., "An experimental study of the learnability of congestion control",
SIGCOMM 2014): a congestion controller's rule tree optimised for a prior over networks, every
evaluation in the simulator. The controller that runs the tree is crates/cc's `tao`; this package
makes its trees (docs/remy.md).

    prior.py       the prior (TOML): link rate, RTT, senders, on/off times, buffer, delta, steps
    networks.py    networks drawn from a prior, each one a simulator job
    tree.py        the rule tree as plain data, its rules, the split at the median, its file
    objective.py   Remy's objective: Σ log(throughput) − δ·log(delay) over the senders
    evaluation.py  trees evaluated on networks (the protocol, and the simulator's evaluator)
    optimise.py    Remy's loop: the most-used rule's local search, generations, splits
    training.py    a whole training: budget, checkpoints, progress, the tree file and its summary
    cli.py         `pantheon remy train` and `pantheon remy show`
"""
