"""A tiny data dir of the harness's layout: one flow of 1000-byte packets every 10 ms, as the
analysis tests and the fault matrix need."""
from __future__ import annotations

import json
from pathlib import Path


def write_run(run_dir: Path, *, packets: int = 100, delivered: int | None = None, delay_ms: float = 20.0,
              duplicate_rows: int = 0) -> None:
    """One flow of 1000-byte packets every 10 ms for 1 s; the first `delivered` arrive delay_ms
    later; the first `duplicate_rows` rows are logged a second time at the end."""
    # Imported here: the benchmarks run by a python3 without the venv never write a data dir.
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_dir.mkdir(parents=True)
    delivered = packets if delivered is None else delivered
    send = [i * 10_000 for i in range(packets)]
    recv = [t + int(delay_ms * 1000) if i < delivered else None for i, t in enumerate(send)]
    uid = list(range(packets)) + list(range(duplicate_rows))
    send, recv = send + send[:duplicate_rows], recv + recv[:duplicate_rows]
    n = len(uid)
    pq.write_table(pa.table({
        "flow": pa.array([0] * n, pa.uint16()), "direction": ["data"] * n, "uid": pa.array(uid, pa.uint64()),
        "size_bytes": pa.array([1000] * n, pa.uint32()), "send_us": pa.array(send, pa.int64()),
        "recv_us": pa.array(recv, pa.int64()),
    }), run_dir / "records.parquet")
    (run_dir / "run.json").write_text(json.dumps({
        "ok": True, "failures": [], "runtime_s": 1.0, "flows": [{"scheme": "cubic", "start_s": 0.0, "duration_s": 1.0}]}))


def data_dir(root: Path, runs: int = 1, **kwargs) -> Path:
    """A data dir of `runs` runs of cubic, each a `write_run(**kwargs)`."""
    root.mkdir()
    (root / "metadata.json").write_text(json.dumps({
        "schemes": {"cubic": {"display": "TCP Cubic"}},
        "trials": [{"number": k, "label": "cubic", "repetition": k} for k in range(1, runs + 1)]}))
    for k in range(1, runs + 1):
        write_run(root / "cubic" / f"run{k}", **kwargs)
    return root
