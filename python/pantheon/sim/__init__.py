"""The simulator's Python side: `pantheon sim` (a campaign of simulated runs into a data dir of the
same layout as `pantheon test local`) and a batch API for programs that need thousands of runs
(calibration, Indigo training). Both drive the Rust binary pantheon-sim (crates/sim, docs/sim.md):
the emulator's link model and pantheon-udp's controllers under a discrete-event clock.
"""
