"""The local experiment harness (`pantheon test local`): runs schemes over an emulated path, each
flow through an instrumented tunnel, and keeps every packet's record (paper §3.1.2, §3.2)."""
