"""`pantheon harm`: every pair of the given schemes sharing a path, and the harm each does to the
other (Ware et al., HotNets 2019; analysis/harm.py computes it from the data dir)."""
