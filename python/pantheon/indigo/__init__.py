"""Indigo's training (Yan et al., "Pantheon: the training ground for Internet congestion-control
research", USENIX ATC 2018, §6; issue 19 §2): an LSTM congestion controller learned by imitating
an oracle that knows the path, with DAgger, over the simulator. The controller itself — its
state, actions and network at run time — is crates/cc/src/indigo; this package makes its weights.

    paths.py    the training paths: the paper's synthetic ones, calibrated presets
    oracle.py   each path's best fixed window, searched in the simulator (cached)
    model.py    the network in JAX (the controller's LSTM step, over whole episodes) and its
                weights file
    dagger.py   the DAgger loop, training, checkpoints (its simulations: pantheon.sim.runner)
    training.py a whole training: the oracles, the DAgger iterations, the weights file and its summary
    cli.py      `pantheon indigo train`: its options into one `train` call, the result printed
"""
