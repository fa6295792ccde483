"""Remote mode (`pantheon test remote`, issue 16 §1): the experiment of local mode over a real path
between this host and another reached over ssh (paper §3.1.3, §3.2). The emulator is replaced by
the path; each flow's far endpoint is started by the agent on the other host (remote_agent.py,
through channel.py); the clocks of the two hosts are fitted from the tunnels' own exchanges
(clock.py), so one-way delays are on one timeline, with an error bound.

    this host (the harness's network namespace)          remote host (PANTHEON_DIR)
      harness ══ ssh (one connection per campaign) ══════ agent
      tunnel endpoint ─ own namespace ─ launcher ─ scheme side  ◄═ path ═►  tunnel endpoint ─ ... ─ scheme side

`--sender` says which host sends the data (the two directions of a path are different results,
paper §4 finding 2); `--tunnel-server` which host's endpoint listens, the other connecting out (so
one host may sit behind a NAT). The defaults are the original Pantheon's: the sender local, the
server remote.

Before any run: ssh must reach the host, the agent must start in PANTHEON_DIR, both sides must run
the same commit and scheme versions, and every scheme asked for must be able to run on both.
"""
from __future__ import annotations

import dataclasses
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pantheon import __version__, schemes
from pantheon import plan as plans
from pantheon.analysis.cli import after_campaign
from pantheon.errors import PantheonError
from pantheon.experiment import Experiment
from pantheon.harness import tunnel
from pantheon.harness.campaign import run_campaign
from pantheon.harness.channel import Channel, ChannelError, ssh_argv, ssh_hostname
from pantheon.harness.run import (
    STOP_TIMEOUT_S,
    Processes,
    Run,
    RunFailed,
    SessionKeys,
    scheme_side,
    side_name,
    wait_for_connect_line,
)
from pantheon.repository import ROOT
from pantheon.trials import git_commit

if TYPE_CHECKING:
    from pantheon.harness.clock import PeerClock

SSH_FAILED = 255
"""ssh's exit status when it could not connect or log in (ssh(1)); otherwise it is the remote command's."""
STOP_ANSWER_TIMEOUT_S = STOP_TIMEOUT_S + 300.0
"""The agent answers `stop` once its endpoints have ended and their logs are sent: minutes for
the logs of a long run at a Gbit/s."""


@dataclass(frozen=True)
class Setup:
    """What was asked of the remote mode, its addresses resolved."""
    destination: str
    """[USER@]HOST, as ssh takes it."""
    remote_dir: str
    """PANTHEON_DIR on the remote host."""
    sender: str
    """"local" or "remote": which host's scheme side sends the data."""
    tunnel_server: str
    """"local" or "remote": which host's tunnel endpoint listens."""
    local_addr: str
    """Where the remote endpoint reaches this host's (when the server is local)."""
    remote_addr: str
    """Where this host's endpoint reaches the remote one (when the server is remote)."""
    local_desc: str
    remote_desc: str

    @property
    def local_side(self) -> str:
        return "sender" if self.sender == "local" else "receiver"

    @property
    def remote_side(self) -> str:
        return "receiver" if self.sender == "local" else "sender"


def parse_destination(text: str) -> tuple[str, str]:
    """([USER@]HOST, PANTHEON_DIR) from `[USER@]HOST[:PANTHEON_DIR]`; the directory defaults to
    this checkout's path."""
    destination, _, remote_dir = text.partition(":")
    if not destination:
        raise PantheonError(f"{text!r}: expected [USER@]HOST[:PANTHEON_DIR]")
    return destination, remote_dir or str(ROOT)


def ipv4_of(host: str) -> str:
    try:
        return str(socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0])
    except OSError as e:
        raise PantheonError(f"cannot resolve {host}: {e}; give the address with --remote-addr") from None


class RealPath:
    """Remote mode's endpoints of one run: this host's side of every flow started here, the other
    side's by the agent; the tunnel server's side first, the client connecting to it."""

    def __init__(self, channel: Channel, setup: Setup, index: int, run_dir: Path) -> None:
        self.channel, self.setup, self.index = channel, setup, index
        self.dir, self.control = run_dir, run_dir / "control"
        self.processes = Processes(self.control)
        self.keys: SessionKeys | None = None
        self.names: list[str] = []

    def _remote(self, message: dict, timeout_s: float = 60.0) -> dict:
        try:
            return self.channel.request(message, timeout_s)
        except ChannelError as e:
            raise RunFailed(f"on {self.setup.destination}: {e}") from None

    def start(self, run: Run) -> None:
        self.names = run.names()
        self.channel.run_dir, self.channel.exits = run.dir, []
        self._remote({"op": "run", "index": self.index})
        self.keys = SessionKeys()
        local_side, remote_side = self.setup.local_side, self.setup.remote_side
        for i, flow in enumerate(run.plan.flows):
            key = self.keys.new(i)
            command = scheme_side(self.control, side_name(i, local_side), run.schemes[flow.scheme], local_side, ecn=flow.ecn,
                                  spec=flow.cc)
            logs = tunnel.EndpointLogs.under(self.dir, side_name(i, local_side), clock=True)
            far = {"op": "endpoint", "flow": i, "side": remote_side, "scheme": flow.scheme, "ecn": flow.ecn,
                   "spec": flow.cc, "key": key.read_text().strip()}
            if self.setup.tunnel_server == "remote":
                port = self._remote({**far, "role": "server"})["port"]
                self.processes.spawn(f"tunnel client of flow {i}", tunnel.client_command(
                    f"{self.setup.remote_addr}:{port}", key, logs, command), self.dir / f"flow{i}.tunnel-client.out",
                    side_name(i, local_side))
            else:
                out = self.dir / f"flow{i}.tunnel-server.out"
                server = self.processes.spawn(f"tunnel server of flow {i}", tunnel.server_command(logs, key, command), out,
                                              side_name(i, local_side))
                _, port = wait_for_connect_line(server, out, f"flow {i}: the tunnel server")
                self._remote({**far, "role": "client", "server": f"{self.setup.local_addr}:{port}"})

    def local_sides(self) -> tuple[str, ...]:
        return (self.setup.local_side,)

    def signal(self, files: list[str]) -> None:
        far = [name for name in files if name.split(".")[1] == self.setup.remote_side]
        for name in files:
            if name not in far:
                (self.control / name).touch()
        if far:
            try:
                self.channel.send({"op": "signal", "files": far})
            except ChannelError as e:
                raise RunFailed(f"on {self.setup.destination}: {e}") from None

    def check(self) -> None:
        if self.channel.exits:
            ended = self.channel.exits[0]
            raise RunFailed(f"on {self.setup.destination}: the {ended['what']} exited early (status {ended['status']})"
                            + (f": {ended['output']}" if ended["output"] else ""))
        if not self.channel.open:
            raise RunFailed(str(self.channel.lost()))
        self.processes.check(self.dir)

    def stop(self) -> list[str]:
        """Both hosts' endpoint failures: the far host's come in the agent's answer to "stop"."""
        far: list[str] = []
        for name in self.names:
            (self.control / f"{name}.stop").touch()
        try:
            if self.channel.open:
                answer = self.channel.request({"op": "stop"}, STOP_ANSWER_TIMEOUT_S)
                far = [f"on {self.setup.destination}: {failure}" for failure in answer.get("failures", [])]
        except ChannelError as e:
            print(f"pantheon: on {self.setup.destination}: {e}", file=sys.stderr)
        finally:
            failures = self.processes.end()
            if self.keys:
                self.keys.remove()
        return failures + far


class Remote:
    """Remote mode in a campaign."""

    def __init__(self, channel: Channel, setup: Setup, hello: dict) -> None:
        self.channel, self.setup, self.hello = channel, setup, hello

    def metadata(self, seed: int) -> dict:
        s = self.setup
        return {"emulator_options": [], "remote": {
            "host": s.destination, "dir": s.remote_dir, "sender": s.sender, "tunnel_server": s.tunnel_server,
            "local_addr": s.local_addr, "remote_addr": s.remote_addr, "local_desc": s.local_desc,
            "remote_desc": s.remote_desc, "remote_machine": self.hello["machine"], "remote_sysctls": self.hello["sysctls"],
            "remote_git_commit": self.hello["git_commit"], "remote_pantheon_version": self.hello["pantheon_version"],
        }}

    def endpoints(self, index: int, run_seed: int, run_dir: Path) -> RealPath:
        return RealPath(self.channel, self.setup, index, run_dir)

    def broken(self) -> str | None:
        return None if self.channel.open else str(self.channel.lost())

    def peer_clock(self, run_dir: Path) -> PeerClock:
        """The remote clock fitted from every flow's exchanges (the flows' endpoints share the two
        hosts' clocks, so all their exchanges measure the same offset and drift, and more of them
        give minimum-delay filtering more to choose from)."""
        from pantheon.harness import clock

        def exchanges(side: str) -> list[clock.Exchange]:
            return [e for log in sorted(run_dir.glob(f"flow*.{side}.clock.log")) for e in clock.read_clock_log(log)]

        return clock.PeerClock(clock.fit(exchanges(self.setup.local_side), exchanges(self.setup.remote_side)), self.setup.remote_side)


def _check_commit(hello: dict, peer: str) -> None:
    here, there = f"{git_commit()} (pantheon {__version__})", f"{hello['git_commit']} (pantheon {hello['pantheon_version']})"
    if here != there:
        raise PantheonError(f"versions differ: this host runs {here}, {peer} runs {there}: check out the same commit on both")


def _problem(known: schemes.Registry, hello: dict, destination: str) -> Callable[[str], str | None]:
    """Why a scheme cannot run between the two hosts: not here, not there, or not the same version."""

    def problem(name: str) -> str | None:
        if why := known.problem(name):
            return why
        far = hello["schemes"][name]
        if far["problem"]:
            return f"on {destination}: {far['problem']}"
        if far["versions"] != known.schemes[name].versions:
            return f"this host runs {known.schemes[name].versions!r}, {destination} runs {far['versions']!r}"
        return None

    return problem


def _asked(experiment: Experiment, known: schemes.Registry) -> list[str]:
    if experiment.scenario:
        return plans.scenario(experiment.scenario).schemes
    return known.names() if experiment.all_schemes else list(dict.fromkeys(experiment.schemes))


def run_remote(experiment: Experiment, setup: Setup, *, ssh_config: Path | None, random_order: bool, analyze: bool,
               arguments: dict) -> int:
    """Runs the experiment between this host and `setup`'s; 0 when every run succeeded, else 1.
    Raises Interrupted on Ctrl-C or SIGTERM, PantheonError (one line) before any run for a host
    that cannot be reached or used."""
    peer = f"{setup.destination}:{setup.remote_dir}"
    known = schemes.registry()
    names = _asked(experiment, known)
    channel = Channel(ssh_argv(setup.destination, ssh_config, setup.remote_dir), peer)
    try:
        try:
            hello = channel.request({"op": "hello", "schemes": names})
        except ChannelError:
            said = channel.ssh_said() or f"exit status {channel.proc.returncode}"
            if channel.proc.returncode == SSH_FAILED:
                raise PantheonError(f"cannot reach {setup.destination} over ssh: {said}") from None
            raise PantheonError(f"cannot start Pantheon's agent in {setup.remote_dir} on {setup.destination}: {said} "
                                "(is Pantheon set up there? see docs/remote.md)") from None
        for line in hello["leftovers"]:
            print(f"pantheon: on {setup.destination}: {line}", file=sys.stderr)
        _check_commit(hello, peer)
        problem = _problem(known, hello, setup.destination)
        if not experiment.all_schemes and (problems := [f"{n}: {why}" for n in names if (why := problem(n))]):
            raise PantheonError(f"cannot run {'; '.join(problems)}")
        if not setup.local_addr:
            if setup.tunnel_server == "local" and not hello["ssh_client"]:
                raise PantheonError(f"{peer} does not say where it is reached from: give --local-addr")
            setup = dataclasses.replace(setup, local_addr=hello["ssh_client"])

        selection = experiment.select(every=names, problem=problem, verb="run", skip_line="pantheon: skipping {name}: {why}",
                                      expected_skip=lambda name: True, ecn_problem=known.ecn_problem)
        for plan in selection.plans:
            if local_only := next((f for f in plan.flows if f.transfers or f.extra_delay_ms), None):
                raise PantheonError(f"{plan.label}: a {local_only.role} flow with finite transfers or an extra delay runs "
                                    f"in pantheon test local and pantheon sim, not yet over a real path")
        used = {name: known.schemes[name] for plan in selection.plans for name in plan.schemes}
        failed = run_campaign(plans=selection.plans, schemes=used, mode=Remote(channel, setup, hello),
                              data_dir=experiment.data_dir, run_times=experiment.run_times, random_order=random_order,
                              seed=experiment.seed, quiet=experiment.quiet, arguments=arguments, skipped=selection.skipped)
    finally:
        channel.close()
    if analyze:
        after_campaign(experiment.data_dir, experiment.quiet)
    return 1 if failed else 0


def setup_of(text: str, *, sender: str, tunnel_server: str, local_addr: str | None, remote_addr: str | None,
             local_desc: str, remote_desc: str, ssh_config: Path | None) -> Setup:
    """The command line's remote options; the remote address resolved (ssh -G, then DNS) when the
    remote endpoint is the server. The local address, when needed and not given, comes from the
    agent ($SSH_CONNECTION)."""
    destination, remote_dir = parse_destination(text)
    if ssh_config and not ssh_config.is_file():
        raise PantheonError(f"--ssh-config {ssh_config}: no such file")
    if tunnel_server == "remote" and not remote_addr:
        try:
            remote_addr = ipv4_of(ssh_hostname(destination, ssh_config))
        except ChannelError as e:
            raise PantheonError(str(e)) from None
    return Setup(destination=destination, remote_dir=remote_dir, sender=sender, tunnel_server=tunnel_server,
                 local_addr=local_addr or "", remote_addr=remote_addr or "", local_desc=local_desc, remote_desc=remote_desc)

