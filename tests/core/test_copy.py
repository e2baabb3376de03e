"""A copied manager (``copy.deepcopy``) continues exactly like the original, on both executors; pickling
one is refused with the fix.

The numpy executor keeps numpy views of the manager's buffers (ring slots, the delay line's arrays, the
kernel's bound arguments, the copy stages, hooks' ``md.array`` views). Copied along, such a view would not
share the copy's new memory: the copy would silently read and write detached arrays. A copied manager
remakes them from its own tensors (``SensorManager.__deepcopy__``). Plain pickle stores each view of a
shared buffer as its own copy (the rings would stop sharing memory, on either executor), so it raises.
"""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.envs.ant import ant_sensors
from sensorgym.wrappers import SensorObservation

from ..helpers import FilterOptions, ThresholdOptions
from ..sensors.test_executors_mujoco import batched

B = 3


def build(executor: str) -> sg.SensorManager:
    mgr = sg.SensorManager(B, dt=0.1, seed=0, executor=executor)
    mgr.add_sensor(
        sg.StateSensorOptions(
            key="x", shape=(2,), delay=0.2, jitter=0.1, noise=0.1, random_walk=0.05, resolution=0.01,
            bias=sg.Normal(0.0, 0.1), history_length=3,
        ),
        name="state",
    )  # fmt: skip
    mgr.add_sensor(FilterOptions(width=2, alpha=0.5, noise=0.1, delay=0.1), name="filter")
    mgr.add_sensor(ThresholdOptions(width=2, threshold=0.0, noise=0.3, history_length=2), name="switch")
    return mgr


def reads(mgr: sg.SensorManager) -> dict[str, np.ndarray]:
    out = {}
    for s in mgr.sensors:
        out[f"{s.name}.read"] = s.read().numpy().copy()
        out[f"{s.name}.gt"] = s.read_ground_truth().numpy().copy()
        out[f"{s.name}.age"] = s.read_age().numpy().copy()
    return out


def state(t: int) -> dict[str, np.ndarray]:
    return {"x": np.sin(np.arange(B * 2, dtype=np.float32).reshape(B, 2) + 0.3 * t).astype(np.float32)}


@pytest.mark.parametrize("executor", ["torch", "numpy"])
def test_a_copied_manager_continues_like_the_original(executor):
    mgr = build(executor)
    mgr.reset(state(0))
    for t in range(1, 6):
        mgr.step(state(t), reset_mask=np.array([False, t == 4, False]))
    copies = [copy.deepcopy(mgr), copy.deepcopy(mgr)]
    assert all(c.executor_used == executor for c in copies)
    for t in range(6, 20):
        mask = np.array([t == 9, False, t == 15])
        for m in (mgr, *copies):
            m.step(state(t), reset_mask=mask)
        expected = reads(mgr)
        for c in copies:
            got = reads(c)
            for key in expected:
                np.testing.assert_array_equal(got[key], expected[key], err_msg=f"step {t}: {key}")
    # the copies own their memory: stepping one leaves the original alone
    before, randomization = reads(mgr), mgr.sensors[0].read_randomization()["bias"].clone()
    copies[0].seed(123)  # its autoresets draw other biases, through its own parameter tables
    for t in range(5):
        copies[0].step({"x": np.full((B, 2), 100.0 + t, np.float32)}, reset_mask=np.full(B, t == 2))
    after = reads(mgr)
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])
    assert torch.equal(mgr.sensors[0].read_randomization()["bias"], randomization)
    assert not torch.equal(copies[0].sensors[0].read_randomization()["bias"], randomization)
    assert not np.array_equal(reads(copies[0])["state.gt"], before["state.gt"])


def test_pickling_a_manager_is_refused_with_the_fix():
    mgr = build("numpy")
    mgr.reset(state(0))
    with pytest.raises(TypeError, match=r"cannot be pickled.*Fix: save mgr.state_dict\(\)"):
        pickle.dumps(mgr)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_copied_manager_of_catalog_sensors_continues_like_the_original():
    """The catalog hooks' md.array views (IMU coupling, contact threshold, contact-force limits)."""
    options = ant_sensors()
    options["torso_force"] = sg.ContactForceOptions(body="torso", max_force=20.0, min_force=0.5, noise=0.2)
    envs = [gym.make("Ant-v5") for _ in range(2)]
    for i, env in enumerate(envs):
        env.reset(seed=i)

    mgr = sg.SensorManager(2, dt=envs[0].unwrapped.dt, seed=1)
    for name, o in options.items():
        mgr.add_sensor(o, name=name)
    mgr.reset(batched(envs, options))
    rng = np.random.default_rng(0)
    for _ in range(5):
        for env in envs:
            env.step(rng.uniform(-1, 1, 8))
        mgr.step(batched(envs, options))
    assert mgr.executor_used == "numpy"
    clone = copy.deepcopy(mgr)
    for t in range(40):
        for env in envs:
            env.step(rng.uniform(-1, 1, 8))
        s = batched(envs, options)
        mgr.step(s)
        clone.step(s)
        for a, b in zip(mgr.sensors, clone.sensors, strict=True):
            for x, y in ((a.read(), b.read()), (a.read_ground_truth(), b.read_ground_truth())):
                xs = x._asdict().values() if hasattr(x, "_asdict") else [x]
                ys = y._asdict().values() if hasattr(y, "_asdict") else [y]
                for u, v in zip(xs, ys, strict=True):
                    assert torch.equal(u, v), f"step {t}: {a.name}"


def test_a_copied_wrapper_continues_like_the_original():
    env = SensorObservation(
        gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync"),
        {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.1, jitter=0.05, noise=0.1,
                                        history_length=3)},
        seed=0,
    )  # fmt: skip
    env.reset(seed=0)
    actions = np.random.default_rng(0).uniform(-2, 2, (60, 2, 1)).astype(np.float32)
    for a in actions[:10]:
        env.step(a)
    clone = copy.deepcopy(env)
    for t, a in enumerate(actions[10:]):
        obs, obs_clone = env.step(a)[0], clone.step(a)[0]
        for key in ("policy", "critic"):
            np.testing.assert_array_equal(obs[key], obs_clone[key], err_msg=f"step {t}: {key}")


def test_a_copy_binds_its_own_memory():
    """Every array a copied numpy-executor manager runs on views the copy's own tensors: its bindings hold
    views made after the copy, none sharing memory with the original's buffers."""
    mgr = build("numpy")
    mgr.reset(state(0))
    for t in range(1, 4):
        mgr.step(state(t))
    original_views = [v for s in mgr._stores.values() for v in s.binding.views()]
    assert original_views
    clone = copy.deepcopy(mgr)
    clone.step(state(4))
    copied_views = [v for s in clone._stores.values() for v in s.binding.views()]
    assert copied_views
    for v in copied_views:
        assert not any(np.shares_memory(v, o) for o in original_views)
    for storage in clone._stores.values():  # what the stages and the kernel read: the copy's tensors
        for ring in (storage.gt.timeline, storage.gt.ring, storage.measured.ring, storage.measured.history):
            if ring is not None:
                for k in range(ring.depth):
                    assert np.shares_memory(ring.array_at(k), ring.at(k).numpy())


def test_a_copied_single_env_wrapper_continues_like_the_original():
    """A copy of the single-env wrapper: its layout may be copied before its manager, and must make its
    numpy sources again from the copy's buffers."""
    from sensorgym.wrappers import SingleEnvSensorObservation

    env = SingleEnvSensorObservation(
        gym.make("Pendulum-v1"),
        {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.1, noise=0.1, history_length=3)},
        seed=0,
    )
    env.reset(seed=0)
    actions = np.random.default_rng(0).uniform(-2, 2, (40, 1)).astype(np.float32)
    for a in actions[:10]:
        env.step(a)
    clone = copy.deepcopy(env)
    for t, a in enumerate(actions[10:]):
        obs, obs_clone = env.step(a)[0], clone.step(a)[0]
        for key in ("policy", "critic"):
            np.testing.assert_array_equal(obs[key], obs_clone[key], err_msg=f"step {t}: {key}")
