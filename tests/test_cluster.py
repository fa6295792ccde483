"""The LocalCluster that calibration, Indigo's training and the observatory run on by default is this
host's alone: every server it opens listens on loopback, and the dashboard link it prints answers
(issue 39 §4: the worker's web server listened on 0.0.0.0 and [::], and the link named an address
where nothing listened)."""
from __future__ import annotations

import os
import subprocess
import urllib.request

from pantheon.cluster import dashboard_link, dask_client


def listening_here() -> list[str]:
    """The local addresses of this process's listening TCP sockets."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if f"pid={os.getpid()}," in line]


def test_a_local_cluster_listens_on_loopback_only_and_its_dashboard_answers() -> None:
    before = set(listening_here())
    with dask_client(None, threads=1) as client:
        opened = [a for a in listening_here() if a not in before]
        link = dashboard_link(client)
        with urllib.request.urlopen(link, timeout=10) as answer:
            status = answer.status
    assert opened and all(a.startswith("127.0.0.1:") for a in opened), opened
    assert link.startswith("http://127.0.0.1:") and status == 200
