"""pantheon.gym (docs/gym.md): Gymnasium's own checker, seeded resets, a reward that tells a
sensible policy from a wasteful one, one-line errors, and no simulator left behind."""
from __future__ import annotations

import gc
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from pantheon.gym import ENV_ID, CongestionEnv, CongestionVectorEnv, DrawnPath, GymError, Presets, Ranges

# 12 Mbit/s, 20 ms one way: a BDP of 60 000 bytes, 40 datagrams of 1500 bytes; a buffer of one BDP.
ONE_BDP = Ranges(rate_mbps=(12, 12), delay_ms=(20, 20), queue_bdp=(1, 1))
BDP_PACKETS = 40


@pytest.mark.parametrize("actions", ["indigo", "multiplier"])
def test_gymnasiums_checker_passes(actions: str) -> None:
    env = CongestionEnv(paths=ONE_BDP, episode_steps=50, actions=actions)
    check_env(env, skip_render_check=True)
    env.close()


def test_a_multiplier_scales_the_window_and_is_observed() -> None:
    env = CongestionEnv(paths=ONE_BDP, episode_steps=5, actions="multiplier", max_factor=4)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (5,) and obs[4] == 0
    # The window times 4^0.5 = 2, then times 4^-1: 10 -> 20 -> 5.
    obs, _, _, _, info = env.step(np.array([0.5], dtype=np.float32))
    assert info["cwnd_packets"] == 20.0 and obs[4] == 2.0
    assert env.step(np.array([-1.0], dtype=np.float32))[4]["cwnd_packets"] == 5.0
    with pytest.raises(GymError, match="expected one number from -1 to 1"):
        env.step(np.array([1.5], dtype=np.float32))
    env.close()
    vector = CongestionVectorEnv(2, paths=ONE_BDP, episode_steps=5, actions="multiplier")
    vector.reset(seed=1)
    assert vector.step(np.array([[1.0], [-1.0]], dtype=np.float32))[4]["cwnd_packets"].tolist() == [20.0, 5.0]
    vector.close()


def test_gymnasium_makes_them_by_name() -> None:
    env = gymnasium.make(ENV_ID, paths=ONE_BDP, episode_steps=3)
    env.reset(seed=1)
    assert [env.step(3)[4]["cwnd_packets"] for _ in range(3)] == [20.0, 30.0, 40.0]
    env.close()
    vector = gymnasium.make_vec(ENV_ID, num_envs=2, vectorization_mode="vector_entry_point", paths=ONE_BDP,
                                episode_steps=3)
    assert isinstance(vector.unwrapped, CongestionVectorEnv)
    vector.reset(seed=1)
    assert vector.step(np.array([4, 0]))[4]["cwnd_packets"].tolist() == [20.0, 5.0]
    vector.close()


def run_episode(env: CongestionEnv, seed: int, policy) -> tuple[list[np.ndarray], list[float], list[dict]]:
    obs, info = env.reset(seed=seed)
    observations, rewards, infos = [obs], [], [info]
    truncated = False
    while not truncated:
        obs, reward, _, truncated, info = env.step(policy(obs, infos[-1]))
        observations.append(obs)
        rewards.append(float(reward))
        infos.append(info)
    return observations, rewards, infos


def test_a_seed_repeats_the_path_and_the_episode() -> None:
    env = CongestionEnv(paths=Ranges(queue_bdp=(0.5, 2), loss=(0, 0.01)), episode_steps=40)
    rng = np.random.default_rng(3)
    actions = list(rng.integers(0, 5, size=40))
    play = iter(actions)

    def replay(obs, info) -> int:
        return int(next(play))

    first = run_episode(env, 11, replay)
    play = iter(actions)
    again = run_episode(env, 11, replay)
    assert first[2][0]["path"] == again[2][0]["path"]
    assert all(np.array_equal(a, b) for a, b in zip(first[0], again[0]))
    assert first[1] == again[1]
    play = iter(actions)
    other = run_episode(env, 12, replay)
    assert other[2][0]["path"] != first[2][0]["path"]
    env.close()


def hold_near_bdp(obs, info) -> int:
    cwnd = info.get("cwnd_packets", 10.0)
    return 3 if cwnd < BDP_PACKETS - 5 else 1 if cwnd > BDP_PACKETS + 5 else 2


def test_holding_the_bdp_beats_doubling_on_a_one_bdp_buffer() -> None:
    # Doubling fills the buffer (one-way delay 20 + 40 ms of queue) for the same throughput:
    # log(60/20) ≈ 1.1 less reward per interval once full; holding near 40 packets keeps the
    # delay near 20 ms.
    env = CongestionEnv(paths=ONE_BDP, episode_steps=300, max_cwnd_packets=1000)
    _, hold, hold_infos = run_episode(env, 1, hold_near_bdp)
    _, double, double_infos = run_episode(env, 1, lambda obs, info: 4)
    assert np.mean(hold) > np.mean(double) + 0.5, (np.mean(hold), np.mean(double))
    # Both keep the link busy: the reward's difference is the delay, not starvation.
    assert np.mean([i["throughput_mbps"] for i in hold_infos[150:]]) > 10.5
    assert np.mean([i["throughput_mbps"] for i in double_infos[150:]]) > 10.5
    assert np.mean([i["delay_ms"] for i in double_infos[150:]]) > 50
    env.close()


class BadPath:
    def sample(self, rng: np.random.Generator) -> DrawnPath:
        return DrawnPath("bad", ["--uplink-rate", "0"])


def test_a_bad_path_is_a_one_line_error_and_the_process_goes_on() -> None:
    env = CongestionEnv(paths=ONE_BDP, episode_steps=5)
    with pytest.raises(GymError) as caught:
        env.reset(seed=1, options={"path": BadPath()})
    assert str(caught.value) == "--uplink-rate: rate must be positive, got '0'"
    with pytest.raises(GymError, match="call reset"):
        env.step(2)
    env.reset(seed=1)
    env.step(2)
    with pytest.raises(GymError, match="expected 0 to 4"):
        env.step(5)
    env.close()
    with pytest.raises(Exception, match="unknown emulator 'nowhere'"):
        CongestionEnv(paths="nowhere")


def test_the_simulator_ends_with_close_and_with_the_object() -> None:
    env = CongestionEnv(paths=ONE_BDP, episode_steps=5)
    pid = env._process.pid
    env.reset(seed=1)
    assert Path(f"/proc/{pid}").exists()
    env.close()
    assert not Path(f"/proc/{pid}").exists()
    vector = CongestionVectorEnv(2, paths=ONE_BDP, episode_steps=5)
    pid = vector._process.pid
    vector.reset(seed=1)
    del vector
    gc.collect()
    assert not Path(f"/proc/{pid}").exists()


def test_the_vector_steps_each_environment_as_alone_and_resets_on_the_next_step() -> None:
    paths = Presets.of_kind("buffer sweep")
    vector = CongestionVectorEnv(3, paths=paths, episode_steps=4)
    obs, info = vector.reset(seed=20)
    actions = [np.array([4, 3, 2]), np.array([3, 3, 0]), np.array([2, 4, 1]), np.array([4, 4, 4])]
    steps = [vector.step(a) for a in actions]
    for i in range(3):
        alone = CongestionEnv(paths=paths, episode_steps=4)
        alone_obs, alone_info = alone.reset(seed=20 + i)
        assert alone_info["path"] == info["path"][i]
        assert np.array_equal(alone_obs, obs[i])
        for a, (v_obs, v_reward, _, v_truncated, v_info) in zip(actions, steps):
            a_obs, a_reward, _, a_truncated, a_info = alone.step(int(a[i]))
            assert np.array_equal(a_obs, v_obs[i]) and a_reward == v_reward[i] and a_truncated == v_truncated[i]
            assert a_info["cwnd_packets"] == v_info["cwnd_packets"][i]
        alone.close()
    assert steps[-1][3].all()
    # The step after the episode's end resets: the action is ignored, the reward 0.
    obs_next, reward_next, _, truncated_next, _ = vector.step(np.array([0, 0, 0]))
    assert not truncated_next.any() and (reward_next == 0).all()
    assert np.allclose(obs_next[:, 3], 10 / 5000)
    vector.close()
