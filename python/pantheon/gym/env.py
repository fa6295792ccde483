"""Gymnasium environments over the simulator (issue 19 §4; docs/gym.md): one flow on an emulated
path whose window the agent sets once per decision interval, as Indigo's network does (Yan et al.,
USENIX ATC 2018, §6).

- Observation: Indigo's 9 network inputs (crates/cc/src/indigo/state.rs), float32: the averages of
  queueing delay, delivery rate and sending rate over the interval, the window and the previous
  action one-hot, scaled as Indigo's released code scales them.
- Action: Discrete(5), Indigo's ÷2, −10, +0, +10, ×2 packets on the window (floor 2 packets, ceiling
  `max_cwnd_packets`), applied at the interval's start. With actions="multiplier", a Box(1,) a in
  [−1, 1] instead that multiplies the window by max_factor^a (½ to 2 by default; symmetric and
  normalised, as policy-gradient trainers prefer), and the observation is the 4 measurements and
  the last factor (0 before the first step).
- Step: one decision interval of simulated time (`step_ms`, 10 ms by default); an episode is
  `episode_steps` of them, then `truncated` (the episode never terminates on its own).
- Reward: rewards.py (the paper's log(throughput) − log(delay) by default).
- info: the interval's throughput_mbps, delay_ms, loss_rate, cwnd_packets, delivered and sent
  packets; at reset, the drawn path's name.

`CongestionEnv` is one environment (what stable-baselines3 and most trainers wrap);
`CongestionVectorEnv` steps N in one round trip to one simulator process, and resets an
environment whose episode ended on its next step (Gymnasium's next-step autoreset).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from pantheon.errors import PantheonError
from pantheon.gym import process, rewards
from pantheon.gym.paths import DrawnPath, PathSampler, Ranges, sampler
from pantheon.gym.process import EpisodeConfig, GymError, GymProcess

ACTIONS = 5
ACTION_NAMES = ("/2", "-10", "+0", "+10", "*2")
"""Indigo's actions, in its order (crates/cc/src/indigo/mod.rs)."""
ACTION_KINDS = ("indigo", "multiplier")
SYNTHETIC = Ranges()
"""The default paths: the span of the paper's synthetic training set (paths.py)."""
SEED_BOUND = 2**63
"""Simulator seeds are drawn below this (pantheon-emu's --seed is a u64)."""
MEASUREMENTS = 4
"""Indigo's inputs before its previous action's one-hot (gym.rs's MEASUREMENTS)."""
MEASUREMENT_HIGH = 1e6
"""The observation space's bound on the scaled averages (Gymnasium asks for a finite one): 2e8 ms
of queueing delay or 2e8 Mbit/s, past anything the emulator runs."""


class _Episodes:
    """What both environments share: the settings, the spaces, the path draws and the records."""

    def __init__(self, paths: PathSampler | str | Sequence[str], step_ms: float, episode_steps: int,
                 max_cwnd_packets: float, reward: str | rewards.Reward, actions: str, max_factor: float) -> None:
        if not (isinstance(episode_steps, int) and episode_steps >= 1):
            raise PantheonError(f"episode_steps: expected a whole number >= 1, got {episode_steps!r}")
        if actions not in ACTION_KINDS:
            raise PantheonError(f"actions: expected one of {', '.join(ACTION_KINDS)}, got {actions!r}")
        if not (isinstance(max_factor, int | float) and 1 < max_factor < math.inf):
            raise PantheonError(f"max_factor: expected a window multiplier above 1, got {max_factor!r}")
        self.max_factor = float(max_factor)
        self.paths = sampler(paths)
        self.step_ms = float(step_ms)
        self.episode_steps = episode_steps
        self.max_cwnd_packets = float(max_cwnd_packets)
        self.reward = rewards.lookup(reward)
        self.indigo = actions == "indigo"
        self.observed = process.INPUTS if self.indigo else MEASUREMENTS + 1
        """How many of a record's observation values the agent sees."""
        self.action_space: spaces.Space[Any] = (
            spaces.Discrete(ACTIONS) if self.indigo else spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32))
        measured = [MEASUREMENT_HIGH] * 3 + [self.max_cwnd_packets / process.CWND_SCALE_PACKETS]
        last = [1.0] * ACTIONS if self.indigo else [self.max_factor]
        self.observation_space = spaces.Box(low=0.0, high=np.array(measured + last, dtype=np.float32), dtype=np.float32)

    def reset_request(self, env: int, rng: np.random.Generator, options: dict[str, Any] | None) -> tuple[str, DrawnPath]:
        """The request starting env's next episode, on a path drawn with `rng` (or options["path"]:
        a sampler, preset name or list of them for this episode alone)."""
        paths = sampler(options["path"]) if options and "path" in options else self.paths
        drawn = paths.sample(rng)
        config = EpisodeConfig(drawn.options, int(rng.integers(SEED_BOUND)), self.step_ms, self.episode_steps,
                               self.max_cwnd_packets)
        return config.request(env), drawn

    def token(self, action: Any) -> str:
        """The protocol's word for `action`; a GymError for one outside the action space."""
        if self.indigo:
            if isinstance(action, int | np.integer) and 0 <= action < ACTIONS:
                return str(int(action))
            raise GymError(f"action: expected 0 to {ACTIONS - 1} ({', '.join(ACTION_NAMES)}), got {action!r}")
        exponent = np.asarray(action, dtype=np.float32).reshape(-1)
        if exponent.shape == (1,) and self.action_space.contains(exponent):
            return f"x{self.max_factor ** float(exponent[0])!r}"
        raise GymError(f"action: expected one number from -1 to 1 (the window times {self.max_factor:g}^a), got {action!r}")

    def observations(self, records: np.ndarray) -> np.ndarray:
        return records[..., :self.observed].astype(np.float32)

    def stats(self, record: list[float]) -> rewards.StepStats:
        """The step's numbers from its record as a list: plain floats, as indexing a numpy array per
        field costs more (Python's time is a large part of a 12 Mbit/s step; bench/gym_speed.py)."""
        throughput_mbps, delay_ms, loss_rate, cwnd_packets, delivered, sent = record[process.INPUTS:]
        return rewards.StepStats(throughput_mbps, delay_ms, loss_rate, cwnd_packets, int(delivered), int(sent), self.step_ms)


def _records(reply: np.ndarray | GymError) -> np.ndarray:
    if isinstance(reply, GymError):
        raise reply
    return reply


class CongestionEnv(gym.Env[np.ndarray, Any]):
    """One flow's window, stepped every `step_ms` of simulated time (see the module's note).

        env = CongestionEnv(paths=Ranges(rate_mbps=(10, 50)), episode_steps=500)
        obs, info = env.reset(seed=1)
        obs, reward, terminated, truncated, info = env.step(3)   # +10 packets
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, paths: PathSampler | str | Sequence[str] = SYNTHETIC, *, step_ms: float = 10.0,
                 episode_steps: int = 1000, max_cwnd_packets: float = 10_000, reward: str | rewards.Reward = "log",
                 actions: str = "indigo", max_factor: float = 2.0) -> None:
        self._episodes = _Episodes(paths, step_ms, episode_steps, max_cwnd_packets, reward, actions, max_factor)
        self.observation_space = self._episodes.observation_space
        self.action_space = self._episodes.action_space
        self._process = GymProcess()
        self._steps = 0
        self._needs_reset = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        request, drawn = self._episodes.reset_request(0, self.np_random, options)
        record = _records(self._process.exchange([request])[0])[0]
        self._steps = 0
        self._needs_reset = False
        return self._episodes.observations(record), {"path": drawn.name, "path_options": drawn.options}

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._needs_reset:
            raise GymError("step before reset, or after the episode ended: call reset() first")
        token = self._episodes.token(action)
        reply = self._process.step_one(int(token)) if self._episodes.indigo else self._process.exchange([f"step {token}"])[0]
        record = _records(reply)[0]
        self._steps += 1
        truncated = self._steps >= self._episodes.episode_steps
        self._needs_reset = truncated
        stats = self._episodes.stats(record.tolist())
        info = {"throughput_mbps": stats.throughput_mbps, "delay_ms": stats.delay_ms, "loss_rate": stats.loss_rate,
                "cwnd_packets": stats.cwnd_packets, "delivered_packets": stats.delivered_packets,
                "sent_packets": stats.sent_packets}
        return self._episodes.observations(record), float(self._episodes.reward(stats)), False, truncated, info

    def close(self) -> None:
        self._process.close()


class CongestionVectorEnv(VectorEnv[np.ndarray, np.ndarray, np.ndarray]):
    """`num_envs` `CongestionEnv`s in one simulator process, stepped in one round trip; each draws
    its paths with its own generator (reset(seed=s) seeds environment i with s + i, as Gymnasium's
    vector environments do). An environment whose episode ended is reset by the next step, which
    ignores its action (Gymnasium's AutoresetMode.NEXT_STEP)."""

    metadata: dict[str, Any] = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int, paths: PathSampler | str | Sequence[str] = SYNTHETIC, *, step_ms: float = 10.0,
                 episode_steps: int = 1000, max_cwnd_packets: float = 10_000, reward: str | rewards.Reward = "log",
                 actions: str = "indigo", max_factor: float = 2.0) -> None:
        if not (isinstance(num_envs, int) and num_envs >= 1):
            raise PantheonError(f"num_envs: expected a whole number >= 1, got {num_envs!r}")
        self._episodes = _Episodes(paths, step_ms, episode_steps, max_cwnd_packets, reward, actions, max_factor)
        self.num_envs = num_envs
        self.single_observation_space = self._episodes.observation_space
        self.single_action_space = self._episodes.action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self._process = GymProcess()
        self._rngs = [np.random.default_rng() for _ in range(num_envs)]
        self._steps = np.zeros(num_envs, dtype=np.int64)
        self._autoreset = np.zeros(num_envs, dtype=bool)
        self._started = False

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        seeds = seed if isinstance(seed, list) else [None if seed is None else seed + i for i in range(self.num_envs)]
        if len(seeds) != self.num_envs:
            raise PantheonError(f"reset: {len(seeds)} seeds for {self.num_envs} environments")
        self._rngs = [np.random.default_rng(s) for s in seeds]
        requests, names = [], []
        for i in range(self.num_envs):
            request, drawn = self._episodes.reset_request(i, self._rngs[i], options)
            requests.append(request)
            names.append(drawn.name)
        records = np.concatenate([_records(r) for r in self._process.exchange(requests)])
        self._steps[:] = 0
        self._autoreset[:] = False
        self._started = True
        return self._episodes.observations(records), {"path": np.array(names, dtype=object)}

    def _tokens(self, actions: np.ndarray) -> list[str]:
        if self._episodes.indigo:
            valid = (actions.shape == (self.num_envs,) and np.issubdtype(actions.dtype, np.integer)
                     and ((actions >= 0) & (actions < ACTIONS)).all())
            if not valid:
                raise GymError(f"actions: expected {self.num_envs} actions from 0 to {ACTIONS - 1}, got {actions!r}")
            return [str(a) for a in actions.tolist()]
        if actions.size != self.num_envs:
            raise GymError(f"actions: expected {self.num_envs} numbers from -1 to 1, got {actions!r}")
        return [self._episodes.token(a) for a in actions.reshape(self.num_envs, 1)]

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._started:
            raise GymError("step before reset: call reset() first")
        tokens = self._tokens(np.asarray(actions))
        requests = [self._episodes.reset_request(int(i), self._rngs[i], None)[0] for i in np.flatnonzero(self._autoreset)]
        words = ["-" if again else token for token, again in zip(tokens, self._autoreset)]
        replies = self._process.exchange([*requests, "step " + " ".join(words)])
        for reply in replies[:-1]:
            _records(reply)
        records = _records(replies[-1])
        stats = [self._episodes.stats(r) for r in records.tolist()]
        rewards_now = np.array([0.0 if again else self._episodes.reward(s) for s, again in zip(stats, self._autoreset)])
        self._steps = np.where(self._autoreset, 0, self._steps + 1)
        truncated = self._steps >= self._episodes.episode_steps
        self._autoreset = truncated
        info = {name: records[:, column] for name, column in (
            ("throughput_mbps", process.THROUGHPUT_MBPS), ("delay_ms", process.DELAY_MS),
            ("loss_rate", process.LOSS_RATE), ("cwnd_packets", process.CWND_PACKETS),
            ("delivered_packets", process.DELIVERED_PACKETS), ("sent_packets", process.SENT_PACKETS))}
        return (self._episodes.observations(records), rewards_now, np.zeros(self.num_envs, dtype=bool),
                truncated.copy(), info)

    def close_extras(self, **kwargs: Any) -> None:
        self._process.close()
