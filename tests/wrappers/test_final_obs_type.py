"""A natively batched (torch) env in SAME_STEP mode: ``info["final_obs"]`` is the sensor Dict on every
step, whether or not an episode finished (issue 12: it used to be the raw env observation on steps where
nothing finished)."""

from __future__ import annotations

import torch

import sensorgym as sg
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import SensorObservation


def test_batched_final_obs_is_the_sensor_dict_on_every_step():
    n, horizon = 4, 5
    env = SensorObservation(
        BatchedPendulumEnv(n, autoreset_mode="SameStep", max_episode_steps=horizon),
        {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, history_length=2)},
        seed=0,
    )
    env.reset(seed=0)
    finished = 0
    for _ in range(2 * horizon + 2):
        obs, _, terminated, truncated, info = env.step(torch.zeros(n, 1))
        final = info["final_obs"]
        assert isinstance(final, dict) and set(final) == {"policy", "critic"}
        for k in final:
            assert torch.is_tensor(final[k]) and final[k].shape == obs[k].shape
        done = terminated | truncated
        if done.any():
            finished += int(done.sum())
            assert torch.equal(info["_final_obs"], done)
            # finished rows: the terminal sensor observation, not the reset one
            assert not torch.equal(final["critic"][done], obs["critic"][done])
        else:  # nothing finished: its rows are the observation itself
            assert all(torch.equal(final[k], obs[k]) for k in final)
            assert final["policy"] is not obs["policy"]  # a copy, never the same buffer
    assert finished == 2 * n
