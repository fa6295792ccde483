"""ns-3 for the benchmarks that compare against it (sim_speed.py, aqm_ns3.py): Debian 12's ns-3.37
(libns3-dev), which ./setup.sh does not install (benches are not part of it), and the programs in
bench/ns3/, each built into target/ns3/ when missing or older than its source."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support import REPO

MODULES = ("ns3-core", "ns3-network", "ns3-internet", "ns3-point-to-point", "ns3-applications", "ns3-traffic-control")
"""The pkg-config modules every program here links."""


def binary(name: str) -> Path:
    """Where bench/ns3/NAME.cc is built."""
    return REPO / "target" / "ns3" / name


def install(packages: list[str], why: str, bench: str) -> str | None:
    """apt-get installs `packages`, `bench` saying so first; None on success, else why not."""
    if os.geteuid() != 0:
        return f"{why}, and installing {' '.join(packages)} needs root: apt-get install {' '.join(packages)}"
    print(f"{bench}: {why}; installing Debian's {' '.join(packages)} (apt-get update && apt-get install -y "
          f"{' '.join(packages)}) ...", file=sys.stderr, flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
        if subprocess.run(step, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            return f"{' '.join(step)} failed"
    return None


def ready(name: str, bench: str) -> str | None:
    """Builds bench/ns3/NAME.cc (installing libns3-dev first if needed); None when it is ready, else
    why not."""
    if (subprocess.run(["pkg-config", "--exists", *MODULES]).returncode != 0
            and (why := install(["libns3-dev"], "ns-3 is not installed", bench))):
        return why
    source, built = REPO / "bench" / "ns3" / f"{name}.cc", binary(name)
    if not built.exists() or built.stat().st_mtime < source.stat().st_mtime:
        built.parent.mkdir(parents=True, exist_ok=True)
        # --libs-only-l: Debian's .pc files also name libgsl.so by path, which only libgsl-dev
        # provides and which no program here uses.
        libs = subprocess.run(["pkg-config", "--libs-only-l", *MODULES], capture_output=True, text=True, check=True).stdout.split()
        print(f"{bench}: building {built.relative_to(REPO)} ...", file=sys.stderr, flush=True)
        done = subprocess.run(["g++", "-O2", "-std=c++17", str(source), "-o", str(built), *libs], capture_output=True, text=True)
        if done.returncode != 0:
            return f"building {source.name} failed: {done.stderr.strip()[-300:]}"
    return None
