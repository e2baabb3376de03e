"""Checkpoint and resume: a wrapper saved mid-episode and loaded in a fresh process continues the
sensor observation stream, the rewards and the episode ends bit-identically to an uninterrupted run (Sync
numpy env, natively batched torch env, MuJoCo env with measurements inside the sub-envs, the same under
ActionLatency), across episode boundaries. A MuJoCo sub-env is rebuilt from its constructor arguments when
unpickled (EzPickle): its random generator and its derived state (the body positions Ant's reward reads)
must come back too."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

BUILD = {
    "pendulum": """
import sensorgym as sg
from sensorgym.wrappers import make_sensor_vec
def build():
    return make_sensor_vec("Pendulum-v1", 3, {
        "angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=sg.Choice([0.05, 0.1]), jitter=0.05,
                                       noise=sg.LogUniform(0.01, 0.1), random_walk=0.01, history_length=3),
        "rate": sg.EnvAttributeOptions(attr="state", shape=(2,), index=[1], bias=sg.Normal(0, 0.1)),
    }, seed=5, critic_randomization=True)
def actions(t):
    return np.full((3, 1), np.sin(0.1 * t), np.float32)
""",
    "batched": """
import sensorgym as sg, torch
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import SensorObservation
def build():
    return SensorObservation(BatchedPendulumEnv(8, max_episode_steps=60), {
        "angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, jitter=0.05,
                                       noise=sg.Uniform(0.0, 0.1), history_length=2)}, seed=1)
def actions(t):
    return torch.full((8, 1), float(np.cos(0.2 * t)))
""",
    # episodes of 40 steps: the resumed part (steps 30-59) crosses an autoreset, which draws the new
    # episode's initial state from each sub-env's own np_random
    "ant": """
import sensorgym as sg
from sensorgym.envs.ant import ant_sensors
from sensorgym.wrappers import make_sensor_vec
def build():
    return make_sensor_vec("Ant-v5", 2, ant_sensors(), seed=2, env_kwargs={"max_episode_steps": 40})
def actions(t):
    return np.full((2, 8), 0.3 * np.sin(0.3 * t), np.float32)
""",
    "ant_latency": """
import functools, gymnasium as gym
import sensorgym as sg
from sensorgym.envs.ant import ant_sensors
from sensorgym.wrappers import ActionLatency, SensorObservation, SimStateExtractor
def build():
    inner = gym.make_vec("Ant-v5", 2, vectorization_mode="sync", max_episode_steps=40,
                         wrappers=[functools.partial(SimStateExtractor, sensors=ant_sensors())])
    return SensorObservation(ActionLatency(inner, delay=0.1, jitter=0.05, seed=0), ant_sensors(), seed=2)
def actions(t):
    return np.full((2, 8), 0.3 * np.sin(0.3 * t), np.float32)
""",
}

RUN = """
import sys, numpy as np, torch
{build}
env = build()
mode, path, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def as_np(x):
    return {{k: (v.numpy() if torch.is_tensor(v) else np.asarray(v)) for k, v in x.items()}}
if mode == "save":
    env.reset(seed=0)
    for t in range(n1):
        env.step(actions(t))
    torch.save(env.state_dict(include_envs=True), path)
else:
    env.load_state_dict(torch.load(path, weights_only=False))
    out = [as_np(env.current_observation())]
    for t in range(n1, n1 + n2):
        obs, reward, term, trunc, _ = env.step(actions(t))
        out.append({{**as_np(obs), **as_np({{"reward": reward, "term": term, "trunc": trunc}})}})
    np.savez(path + ".obs.npz", **{{f"{{i}}_{{k}}": v for i, o in enumerate(out) for k, v in o.items()}})
"""


def _reference(name: str, n1: int, n2: int) -> list[dict]:
    ns: dict = {"np": np, "torch": torch}
    exec(textwrap.dedent(BUILD[name]), ns)
    env = ns["build"]()
    env.reset(seed=0)
    for t in range(n1):
        obs = env.step(ns["actions"](t))[0]
    out = [obs]
    ends = 0
    for t in range(n1, n1 + n2):
        obs, reward, term, trunc, _ = env.step(ns["actions"](t))
        out.append({**obs, "reward": reward, "term": term, "trunc": trunc})
        ends += int(np.asarray(term | trunc).sum())
    env.close()
    assert ends > 0, "the resumed part should cross an episode end"
    return [{k: (v.numpy() if torch.is_tensor(v) else np.asarray(v)) for k, v in o.items()} for o in out]


@pytest.mark.parametrize(
    ("name", "n1", "n2"),
    [("pendulum", 150, 80), ("batched", 40, 50), ("ant", 30, 30), ("ant_latency", 30, 30)],
)
def test_resume_in_a_fresh_process_continues_bit_identically(name, n1, n2, tmp_path):
    script = tmp_path / "run.py"
    script.write_text(RUN.format(build=textwrap.dedent(BUILD[name])))
    ckpt = str(tmp_path / "ckpt.pt")
    env = {"PYTHONPATH": str(ROOT), "MUJOCO_GL": "egl", "PATH": "/usr/bin:/bin"}
    for mode in ("save", "load"):  # two separate processes
        subprocess.run(
            [sys.executable, str(script), mode, ckpt, str(n1), str(n2)],
            check=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )
    resumed = np.load(ckpt + ".obs.npz")
    reference = _reference(name, n1, n2)
    for i, obs in enumerate(reference):
        for k in ("policy", "critic") + (("reward", "term", "trunc") if i else ()):
            np.testing.assert_array_equal(resumed[f"{i}_{k}"], obs[k], err_msg=f"{name} step {i} {k}")


def test_async_envs_cannot_be_snapshotted_but_sensor_state_can():
    import sensorgym as sg
    from sensorgym.wrappers import make_sensor_vec

    env = make_sensor_vec(
        "Pendulum-v1", 2, {"a": sg.StateSensorOptions(key="obs")}, vectorization_mode="async"
    )
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"AsyncVectorEnv.*Fix"):
        env.state_dict(include_envs=True)
    state = env.state_dict()
    env.load_state_dict(state)
    env.close()


def test_async_envs_under_another_vector_wrapper_are_refused_clearly():
    import gymnasium as gym

    import sensorgym as sg
    from sensorgym.wrappers import ActionLatency, SensorObservation

    inner = gym.make_vec("Pendulum-v1", 2, vectorization_mode="async")
    env = SensorObservation(ActionLatency(inner, delay=0.05, seed=0), {"a": sg.StateSensorOptions(key="obs")})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"AsyncVectorEnv.*Fix"):
        env.state_dict(include_envs=True)
    env.close()


def test_a_sub_env_that_pickles_as_its_arguments_is_refused():
    """Gymnasium's EzPickle envs (Box2D, ...) unpickle as fresh envs: a snapshot would silently lose their
    state. MuJoCo envs are EzPickle too, and their state is restored (the Ant cases above)."""
    import gymnasium as gym
    from gymnasium.utils import EzPickle

    from sensorgym.wrappers.checkpoint import snapshot_vector_env

    class Counter(gym.Env, EzPickle):
        observation_space = gym.spaces.Box(-1e9, 1e9, (1,))
        action_space = gym.spaces.Box(-1, 1, (1,))

        def __init__(self):
            EzPickle.__init__(self)
            self.count = 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(1, np.float32), {}

        def step(self, action):
            self.count += 1
            return np.full(1, self.count, np.float32), 0.0, False, False, {}

    envs = gym.vector.SyncVectorEnv([Counter] * 2)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"sub-env 0 \(Counter\).*EzPickle.*Fix"):
        snapshot_vector_env(envs)
