"""Pantheon: a training ground for Internet congestion-control research.

Python drives processes and does the science; the Rust binaries under target/release move the
packets (see ../../shared/DESIGN.md in the project's workspace, and the README)."""

__version__ = "0.1.0"
