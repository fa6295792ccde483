"""Reinforcement-learning environments over Pantheon's simulator, for learned congestion control
(issue 19 §4; docs/gym.md): Gymnasium's `Env` and `VectorEnv`, whose state and actions are Indigo's
(Yan et al., USENIX ATC 2018, §6), on paths drawn from presets or ranges, with a configurable reward.

    from pantheon.gym import CongestionEnv, Ranges
    env = CongestionEnv(paths=Ranges(rate_mbps=(10, 50), queue_bdp=(1, 1)))
"""
from __future__ import annotations

from pantheon.gym.env import ACTION_NAMES, CongestionEnv, CongestionVectorEnv
from pantheon.gym.paths import DrawnPath, PathSampler, Presets, Ranges
from pantheon.gym.process import GymError
from pantheon.gym.rewards import REWARDS, LogReward, StepStats, aurora

__all__ = ["ACTION_NAMES", "REWARDS", "CongestionEnv", "CongestionVectorEnv", "DrawnPath", "GymError", "LogReward",
           "PathSampler", "Presets", "Ranges", "StepStats", "aurora"]
