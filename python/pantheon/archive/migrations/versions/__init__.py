"""One file per schema change, oldest first (0001_initial: the first schema)."""
