"""Reinforcement-learning environments over Pantheon's simulator, for learned congestion control
(issue 19 §4; docs/gym.md): Gymnasium's `Env` and `VectorEnv`, whose state and actions are Indigo's
(Yan et al., USENIX ATC 2018, §6), on paths drawn from presets or ranges, with a configurable reward.

    from pantheon.gym import CongestionEnv, Ranges
    env = CongestionEnv(paths=Ranges(rate_mbps=(10, 50), queue_bdp=(1, 1)))

Importing it registers them with Gymnasium as `ENV_ID`, for trainers that build environments by
name: gymnasium.make("pantheon/Congestion-v0", episode_steps=500), gymnasium.make_vec(..., num_envs=16,
vectorization_mode="vector_entry_point") for the vector in one process.
"""
from __future__ import annotations

import gymnasium

from pantheon.gym.env import ACTION_NAMES, CongestionEnv, CongestionVectorEnv
from pantheon.gym.paths import DrawnPath, PathSampler, Presets, Ranges
from pantheon.gym.process import GymError
from pantheon.gym.rewards import REWARDS, LogReward, StepStats, aurora

ENV_ID = "pantheon/Congestion-v0"
gymnasium.register(id=ENV_ID, entry_point="pantheon.gym.env:CongestionEnv",
                   vector_entry_point="pantheon.gym.env:CongestionVectorEnv")

__all__ = ["ENV_ID", "ACTION_NAMES", "REWARDS", "CongestionEnv", "CongestionVectorEnv", "DrawnPath", "GymError", "LogReward",
           "PathSampler", "Presets", "Ranges", "StepStats", "aurora"]
