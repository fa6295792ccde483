"""The Dask cluster a command's tasks run on (calibration's trials, the observatory's experiments): the
one at `--scheduler ADDRESS`, or a LocalCluster in this process. Dask is imported here, when a command
asks for a cluster, not when `pantheon` starts."""
from __future__ import annotations

from pantheon.errors import PantheonError


def dask_client(scheduler: str | None, threads: int, resources: dict[str, float] | None = None):
    """A Dask client: of the cluster at `scheduler`, or of a LocalCluster of one worker with `threads`
    threads and `resources` (Dask's worker resources, which tasks may ask for)."""
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            return Client(scheduler, timeout="15s")
        except (OSError, TimeoutError) as e:
            raise PantheonError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({e})") from None
    # The scheduler's HTTP server on a free local port: the default, 8787, may be another cluster's.
    return Client(LocalCluster(n_workers=1, threads_per_worker=threads, processes=False,
                               dashboard_address="127.0.0.1:0", resources=resources))
