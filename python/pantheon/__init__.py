"""Pantheon: a training ground for Internet congestion-control research.

Python drives processes and does the science; the Rust binaries under target/release move the
packets (docs/architecture.md: the house as built, and the README)."""

__version__ = "0.1.0"
