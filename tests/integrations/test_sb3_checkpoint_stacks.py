"""Issue 33 items 6 and 7: SB3 checkpoints of every env stack a user builds.

* A Gymnasium vector wrapper between ``SB3VecEnv`` and ``SensorObservation`` (``RecordEpisodeStatistics``,
  or ``ActionLatency``, documented to wrap any VectorEnv): ``learn`` with ``SensorCheckpointCallback``
  died at the first checkpoint and ``load_checkpoint`` likewise. The checkpoint now holds every stateful
  wrapper of the stack and resumes bit for bit, or refuses in one line.
* ``VecMonitor(VecNormalize(SB3VecEnv))``: ``load_checkpoint`` built ``VecNormalize(VecNormalize(...))``
  (observations and rewards normalized twice, the monitor dropped). The statistics now go into the env's
  own ``VecNormalize``, and the resumed run equals the uninterrupted one.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")
from gymnasium.vector import VectorWrapper
from gymnasium.wrappers.vector import RecordEpisodeStatistics
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv, SensorCheckpointCallback
from sensorgym.integrations.sb3_checkpoint import load_checkpoint, save_checkpoint
from sensorgym.wrappers import ActionLatency, make_sensor_vec

from .common import SENSORS


def _sensors():
    return make_sensor_vec(
        "Pendulum-v1", 2, SENSORS, autoreset_mode="SameStep", seed=0, env_kwargs={"max_episode_steps": 20}
    )


STACKS = {
    "record-episode-statistics": lambda: SB3VecEnv(RecordEpisodeStatistics(_sensors())),
    "action-latency-outside": lambda: SB3VecEnv(ActionLatency(_sensors(), delay=0.1, jitter=0.05, seed=3)),
    "both": lambda: SB3VecEnv(RecordEpisodeStatistics(ActionLatency(_sensors(), delay=0.05, seed=1))),
    "vecmonitor-vecnormalize": lambda: VecMonitor(VecNormalize(SB3VecEnv(_sensors()))),
    "vecnormalize-vecmonitor-stats": lambda: VecNormalize(
        VecMonitor(SB3VecEnv(RecordEpisodeStatistics(_sensors())))
    ),
}


def _model(env):
    return PPO(
        AsymmetricActorCriticPolicy, env, n_steps=16, batch_size=32, seed=0, device="cpu",
        policy_kwargs=dict(net_arch=[16]),
    )  # fmt: skip


def _weights(model):
    return {k: v.detach().clone() for k, v in model.get_parameters()["policy"].items()}


def _types(env):
    out, node = [], env
    while node is not None:
        out.append(type(node).__name__)
        node = getattr(node, "venv", None) or (node.env if isinstance(node, VectorWrapper) else None)
    return out


def _episode_stats(env):
    node = env
    while node is not None and not isinstance(node, RecordEpisodeStatistics):
        node = getattr(node, "venv", None) or (node.env if isinstance(node, VectorWrapper) else None)
    return (
        None if node is None else (node.episode_count, list(node.return_queue), node.episode_lengths.copy())
    )


@pytest.mark.parametrize("stack", list(STACKS))
def test_a_checkpoint_of_the_stack_resumes_bit_for_bit(tmp_path, stack):
    env = STACKS[stack]()
    model = _model(env)
    model.learn(64, callback=SensorCheckpointCallback(str(tmp_path), save_freq=32))  # no longer dies
    save_checkpoint(tmp_path, model, env)
    model.learn(96, reset_num_timesteps=False)  # the uninterrupted run
    reference, reference_stats = _weights(model), _episode_stats(env)

    fresh = STACKS[stack]()
    resumed, resumed_env = load_checkpoint(tmp_path, fresh)
    assert resumed_env is fresh and _types(resumed_env) == _types(env)  # the same stack, nothing doubled
    resumed.learn(96, reset_num_timesteps=False)
    after = _weights(resumed)
    for k in reference:
        assert torch.equal(after[k], reference[k]), f"{stack}: {k} differs after resuming"
    stats = _episode_stats(resumed_env)
    if reference_stats is not None:
        assert stats[0] == reference_stats[0] and stats[1] == reference_stats[1]
        np.testing.assert_array_equal(stats[2], reference_stats[2])


def test_vecnormalize_is_loaded_into_the_envs_own_not_wrapped_twice(tmp_path):
    env = STACKS["vecmonitor-vecnormalize"]()
    model = _model(env)
    model.learn(64)
    save_checkpoint(tmp_path, model, env)
    fresh = STACKS["vecmonitor-vecnormalize"]()
    _, loaded = load_checkpoint(tmp_path, fresh)
    assert _types(loaded) == ["VecMonitor", "VecNormalize", "SB3VecEnv", "SensorObservation", "SyncVectorEnv"]
    saved_stats = env.venv.obs_rms["policy"]
    assert np.array_equal(loaded.venv.obs_rms["policy"].mean, saved_stats.mean)
    assert loaded.venv.venv is fresh.venv.venv  # the adapter below is the fresh env's


def test_a_stack_with_other_wrappers_is_refused_in_one_line(tmp_path):
    env = STACKS["record-episode-statistics"]()
    model = _model(env)
    model.learn(32)
    save_checkpoint(tmp_path, model, env)
    with pytest.raises(ValueError, match=r"\['RecordEpisodeStatistics'\] above the sensors, this env \[\]"):
        load_checkpoint(tmp_path, SB3VecEnv(_sensors()))
    save_checkpoint(tmp_path, model, env)
    with pytest.raises(ValueError, match=r"normalizes observations, this env has no VecNormalize"):
        other = STACKS["vecmonitor-vecnormalize"]()
        m2 = _model(other)
        save_checkpoint(tmp_path / "n", m2, other)
        load_checkpoint(tmp_path / "n", STACKS["record-episode-statistics"]())


class _Unpicklable(VectorWrapper):
    def __init__(self, env):
        super().__init__(env)
        self.hook = lambda x: x  # a lambda does not pickle


def test_a_wrapper_whose_state_does_not_pickle_is_refused_before_writing(tmp_path):
    env = SB3VecEnv(_Unpicklable(_sensors()))
    model = _model(env)
    with pytest.raises(ValueError, match=r"cannot checkpoint the _Unpicklable of the env stack"):
        save_checkpoint(tmp_path / "c", model, env)
    assert not (tmp_path / "c").exists()
