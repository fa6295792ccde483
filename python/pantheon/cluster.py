"""The Dask cluster a command's tasks run on (calibration's trials, the observatory's experiments): the
one at `--scheduler ADDRESS`, or a LocalCluster in this process. Dask is imported here, when a command
asks for a cluster, not when `pantheon` starts."""
from __future__ import annotations

from pantheon.errors import PantheonError

LOOPBACK = "127.0.0.1"


def dask_client(scheduler: str | None, threads: int, resources: dict[str, float] | None = None):
    """A Dask client: of the cluster at `scheduler`, or of a LocalCluster of one worker with `threads`
    threads and `resources` (Dask's worker resources, which tasks may ask for)."""
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            return Client(scheduler, timeout="15s")
        except (OSError, TimeoutError) as e:
            raise PantheonError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({e})") from None
    # Every server of the cluster on loopback (Dask's default for the worker's is every interface),
    # on a free port (the default, 8787, may be another cluster's): a LocalCluster is this host's
    # alone, and its dashboard link is then one that answers.
    return Client(LocalCluster(n_workers=1, threads_per_worker=threads, processes=False,
                               dashboard_address=f"{LOOPBACK}:0", worker_dashboard_address=f"{LOOPBACK}:0",
                               resources=resources))


def close(client) -> None:
    """Closes the client and, when it is this process's own LocalCluster, the cluster with it (its
    worker threads and their tasks); a `--scheduler` cluster is left running for its next user."""
    cluster = client.cluster
    client.close()
    if cluster is not None:
        cluster.close()


def dashboard_link(client) -> str:
    """The address of the client's Dask dashboard that answers: a LocalCluster's is on loopback,
    where Dask's own link names the host's first address."""
    if client.cluster is None:
        return client.dashboard_link
    return f"http://{LOOPBACK}:{client.scheduler_info()['services']['dashboard']}/status"
