"""Kernel TCP buffers: the sysctls a fast flow needs raised, read and written in a namespace."""
from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

from support.processes import run_checked

# Max 64 MiB: enough for 2+ Gbit/s at 40 ms RTT plus queueing, with the kernel's buffer overhead.
TCP_BUFFER_SYSCTLS = {
    "net.ipv4.tcp_rmem": "4096 131072 67108864",
    "net.ipv4.tcp_wmem": "4096 16384 67108864",
}


def read_sysctls(prefix: list[str]) -> dict[str, str]:
    return {key: run_checked([*prefix, "sysctl", "-n", key]).strip().replace("\t", " ")
            for key in TCP_BUFFER_SYSCTLS}


def write_sysctls(prefix: list[str], values: dict[str, str]) -> None:
    run_checked([*prefix, "sysctl", "-qw", *(f"{key}={value}" for key, value in values.items())])


@contextlib.contextmanager
def tcp_netns(name: str) -> Iterator[None]:
    """A network namespace `name` for the block, loopback up and TCP buffers raised; deleted after."""
    try:
        run_checked(["ip", "netns", "add", name])
        run_checked(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"])
        write_sysctls(["ip", "netns", "exec", name], TCP_BUFFER_SYSCTLS)
        yield
    finally:
        subprocess.run(["ip", "netns", "del", name], stderr=subprocess.DEVNULL)
