"""Every Gymnasium observation space, numpy and torch envs, vector and single-env wrappers.

The oracle is Gymnasium itself: the env part of ``"critic"`` must equal ``gymnasium.spaces.flatten`` of
each sub-env's own last observation (recorded by the sub-env, not by our batching), row by row, and
every observation returned must lie in ``observation_space``, with readings sitting on the Box bounds
half of the time and quantization and bias widening them.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import sensorgym as sg
from sensorgym.wrappers import SensorObservation, SingleEnvSensorObservation
from sensorgym.wrappers.spaces import leaf_paths

from .envs import SpaceEnv, TorchSpaceVecEnv

Box, Discrete = gym.spaces.Box, gym.spaces.Discrete

SPACES = {
    "box_float16": Box(-2.0, 2.0, (3,), np.float16),
    "box_float32": Box(np.array([-1.0, -np.inf, 0.1]), np.array([1.0, 3.0, np.inf]), (3,), np.float32),
    "box_float64": Box(-0.1, 0.3, (2, 2), np.float64),
    "box_int8": Box(-5, 5, (3,), np.int8),
    "box_int32": Box(-1000, 1000, (2,), np.int32),
    "box_int64": Box(0, 7, (2,), np.int64),
    "box_bool": Box(0, 1, (3,), np.bool_),
    "image_uint8": Box(0, 255, (4, 5, 3), np.uint8),
    "discrete": Discrete(5, start=-2),
    "multidiscrete": gym.spaces.MultiDiscrete([[2, 3], [4, 5]], start=[[1, 1], [0, -2]]),
    "multibinary": gym.spaces.MultiBinary([2, 3]),
    "tuple": gym.spaces.Tuple((Discrete(3), Box(-1.0, 1.0, (2,), np.float32), gym.spaces.MultiBinary(2))),
    "dict_nested_unsorted": gym.spaces.Dict(
        [
            ("z", Box(-1.0, 1.0, (2,), np.float32)),
            ("a", gym.spaces.Dict([("y", Discrete(4)), ("b", gym.spaces.MultiBinary(3))])),
            ("m", gym.spaces.Tuple((Discrete(2), Box(0, 9, (1,), np.int32)))),
        ]
    ),
    "dict_sorted": gym.spaces.Dict({"vel": Box(-3.0, 3.0, (1,), np.float32), "pos": Discrete(3)}),
}


def _sensors(space: gym.Space) -> dict[str, sg.SensorOptions]:
    """Per leaf: a bounded reading (resolution + bias), a noisy one with history; an info reading."""
    sensors: dict[str, sg.SensorOptions] = {"t": sg.StateSensorOptions(key="t", shape=(1,), delay=0.1)}
    for path, _ in leaf_paths(space):
        key = ".".join(["obs", *map(str, path)])
        sensors[f"{key}:quantized"] = sg.StateSensorOptions(key=key, resolution=0.3, bias=0.05)
        sensors[f"{key}:noisy"] = sg.StateSensorOptions(key=key, noise=0.1, delay=0.1, history_length=2)
    return sensors


def _flat(space: gym.Space, obs) -> np.ndarray:
    return gym.spaces.flatten(space, obs).astype(np.float32)


def _run_vector(envs: SensorObservation, sub_envs: list, mode: AutoresetMode, steps: int = 25) -> None:
    space = envs.env.single_observation_space
    obs, _ = envs.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        assert obs in envs.observation_space
        critic = obs["critic"].cpu().numpy() if torch.is_tensor(obs["critic"]) else obs["critic"]
        for i, sub in enumerate(sub_envs):
            np.testing.assert_array_equal(critic[i], _flat(space, sub.last_obs))
        action = rng.uniform(-1, 1, (envs.num_envs, 1)).astype(np.float32)
        obs, _, term, trunc, _ = envs.step(action)
        done = np.asarray(term | trunc)
        if mode is AutoresetMode.DISABLED and done.any():
            obs, _ = envs.reset(options={"reset_mask": done})


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.name)
@pytest.mark.parametrize("name", list(SPACES))
def test_numpy_vector_env_critic_is_gymnasium_flatten(name: str, mode: AutoresetMode) -> None:
    space = SPACES[name]
    inner = SyncVectorEnv([lambda: SpaceEnv(space) for _ in range(3)], autoreset_mode=mode)
    envs = SensorObservation(inner, _sensors(space), critic=[], seed=0)
    _run_vector(envs, [e.unwrapped for e in inner.envs], mode)


@pytest.mark.parametrize("name", list(SPACES))
def test_torch_vector_env_critic_is_gymnasium_flatten(name: str) -> None:
    """Torch envs: every leaf a tensor; Dict leaves arrive in the env's own key order (reversed here),
    not the space's: the critic still follows the space (regression, issue 11.6)."""
    space = SPACES[name]
    order = list(reversed(space.spaces)) if isinstance(space, gym.spaces.Dict) else None
    inner = TorchSpaceVecEnv(space, 3, key_order=order)
    envs = SensorObservation(inner, _sensors(space), critic=[], seed=0)
    _run_vector(envs, [e.unwrapped for e in inner.envs], AutoresetMode.NEXT_STEP)


@pytest.mark.parametrize("name", list(SPACES))
def test_single_env_critic_is_gymnasium_flatten(name: str) -> None:
    space = SPACES[name]
    env = SingleEnvSensorObservation(SpaceEnv(space), _sensors(space), critic=[], seed=0)
    obs, _ = env.reset(seed=1)
    for _ in range(25):
        assert obs in env.observation_space
        np.testing.assert_array_equal(obs["critic"], _flat(space, env.unwrapped.last_obs))
        obs, _, term, trunc, _ = env.step(np.zeros(1, np.float32))
        if term or trunc:
            obs, _ = env.reset()


@pytest.mark.parametrize("name", list(SPACES))
def test_single_env_packs_the_same_bits_with_numpy_and_torch(name: str) -> None:
    """The single-env wrapper packs numpy observations with numpy views of the sensor buffers; the torch
    packing (used for torch observations) must give the same policy and critic arrays."""
    space = SPACES[name]
    traces = []
    for numpy_pack in (True, False):
        env = SingleEnvSensorObservation(SpaceEnv(space), _sensors(space), seed=0, critic_randomization=True)
        assert env._numpy_pack
        env._numpy_pack = numpy_pack
        obs, _ = env.reset(seed=1)
        trace = [obs]
        for _ in range(25):
            obs, _, term, trunc, _ = env.step(np.zeros(1, np.float32))
            trace.append(obs)
            if term or trunc:
                obs, _ = env.reset()
                trace.append(obs)
        traces.append(trace)
    for a, b in zip(*traces, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape
            assert a[key].tobytes() == b[key].tobytes(), key


def test_tuple_rows_are_not_mixed_across_envs() -> None:
    """Regression (issue 11.2): ``(B, k)`` Tuple parts were stacked ``(parts, B, k)`` and reshaped, so env
    0's critic row held env 0's and env 1's values."""
    space = gym.spaces.Tuple((Box(-10.0, 10.0, (2,), np.float32), Box(-10.0, 10.0, (2,), np.float32)))
    inner = SyncVectorEnv([lambda: SpaceEnv(space) for _ in range(2)])
    envs = SensorObservation(inner, {"t": sg.StateSensorOptions(key="t", shape=(1,))}, critic=[])
    obs, _ = envs.reset(seed=0)
    a, b = inner.envs[0].unwrapped.last_obs, inner.envs[1].unwrapped.last_obs
    np.testing.assert_array_equal(obs["critic"][0], np.concatenate(a))
    np.testing.assert_array_equal(obs["critic"][1], np.concatenate(b))


@pytest.mark.parametrize("as_torch", [False, True], ids=["numpy", "torch"])
def test_multidiscrete_critic_is_one_hot_and_fully_written(as_torch: bool) -> None:
    """Regression (issue 11.4): the critic was sized by flatdim but only ``len(nvec)`` columns were
    written (the rest uninitialised memory); the torch packing crashed."""
    space = gym.spaces.MultiDiscrete([3, 2])
    inner = TorchSpaceVecEnv(space, 2) if as_torch else SyncVectorEnv([lambda: SpaceEnv(space)] * 2)
    envs = SensorObservation(inner, {"t": sg.StateSensorOptions(key="t", shape=(1,))}, critic=[])
    for _ in range(5):
        obs, _ = envs.reset()
        critic = np.asarray(obs["critic"])
        assert critic.shape == (2, 5)
        for i, sub in enumerate(inner.envs):
            x = sub.unwrapped.last_obs
            expected = np.zeros(5, np.float32)
            expected[x[0]] = expected[3 + x[1]] = 1.0
            np.testing.assert_array_equal(critic[i], expected)


def test_dict_sensor_reads_leaf_by_name_whatever_the_key_order() -> None:
    """A sensor on ``obs.<key>`` reads that leaf for torch envs whose dicts come in another order."""
    space = gym.spaces.Dict({"a": Box(-5.0, 5.0, (1,), np.float32), "b": Box(-5.0, 5.0, (2,), np.float32)})
    inner = TorchSpaceVecEnv(space, 2, key_order=["b", "a"])
    envs = SensorObservation(inner, {"b": sg.StateSensorOptions(key="obs.b")}, critic=[], seed=0)
    obs, _ = envs.reset(seed=0)
    for i, sub in enumerate(inner.envs):
        np.testing.assert_array_equal(obs["policy"][i].numpy(), sub.unwrapped.last_obs["b"])
        np.testing.assert_array_equal(obs["critic"][i].numpy(), _flat(space, sub.unwrapped.last_obs))


def test_unsupported_space_names_the_fix() -> None:
    space = gym.spaces.Dict({"text": gym.spaces.Text(5), "x": Box(-1.0, 1.0, (1,), np.float32)})
    inner = SyncVectorEnv([lambda: SpaceEnv(space)])
    with pytest.raises(TypeError, match=r"Text.*critic_env_obs=False"):
        SensorObservation(inner, {"x": sg.StateSensorOptions(key="obs.x")})
    envs = SensorObservation(inner, {"x": sg.StateSensorOptions(key="obs.x")}, critic_env_obs=False)
    obs, _ = envs.reset(seed=0)
    assert obs["policy"].shape == (1, 1)


@pytest.mark.parametrize("index", [[-1], [-2, -1], [0, -1]])
def test_negative_index_on_an_info_entry(index: list[int]) -> None:
    """Regression (issue 11.9): a negative ``index`` on an info entry was rejected at build (the
    placeholder entry was ``max(index) + 1`` wide)."""

    class InfoEnv(SpaceEnv):
        def reset(self, *, seed=None, options=None):
            obs, info = super().reset(seed=seed, options=options)
            return obs, {**info, "vec": np.array([10.0, 20.0, 30.0]) + self.t}

        def step(self, action):
            obs, r, te, tr, info = super().step(action)
            return obs, r, te, tr, {**info, "vec": np.array([10.0, 20.0, 30.0]) + self.t}

    space = Box(-1.0, 1.0, (1,), np.float32)
    opts = sg.StateSensorOptions(key="vec", index=index, shape=(len(index),))
    envs = SensorObservation(SyncVectorEnv([lambda: InfoEnv(space)] * 2), {"v": opts}, critic=[])
    obs, _ = envs.reset(seed=0)
    np.testing.assert_array_equal(obs["policy"][0], (np.array([10.0, 20.0, 30.0]))[index])
    obs, *_ = envs.step(np.zeros((2, 1), np.float32))
    np.testing.assert_array_equal(obs["policy"][0], (np.array([11.0, 21.0, 31.0]))[index])
