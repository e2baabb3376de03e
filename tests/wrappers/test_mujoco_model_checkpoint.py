"""A MuJoCo checkpoint keeps the changes a run made to its model (issue 23, item 8).

Resuming from ``SensorObservation.state_dict(include_envs=True)`` rebuilds each sub-env from its XML. A
per-env randomization of the model (``env.model.body_mass[...] = ...``) must come back with it: the
rebuilt model receives every field of the saved one. The guard changes every numeric array of
``MjModel`` (and of its option, visual and statistic structs), not one field, and checks that each
round-trips bit for bit.
"""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest

import sensorgym as sg
from sensorgym.wrappers import SensorObservation
from sensorgym.wrappers.checkpoint import restore_vector_env, snapshot_vector_env

mujoco = pytest.importorskip("mujoco")


@pytest.fixture(autouse=True)
def _mujoco_log_in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes MUJOCO_LOG.TXT into the working directory


def _ants(n: int = 2) -> gym.vector.VectorEnv:
    return gym.make_vec("Ant-v5", num_envs=n, vectorization_mode="sync")


def _fields(obj, path: str = "model") -> dict[str, np.ndarray]:
    """Every numeric array and scalar reachable from an ``MjModel`` (nested structs included), copied."""
    out = {}
    for name in dir(obj):
        if name.startswith("_"):
            continue
        value = getattr(obj, name)
        if callable(value) or value is None or isinstance(value, (str, bytes, list, tuple, dict)):
            continue
        if isinstance(value, np.ndarray):
            if value.dtype.kind in "biuf":
                out[f"{path}.{name}"] = value.copy()
        elif isinstance(value, (bool, int, float)):
            out[f"{path}.{name}"] = np.asarray(value)
        else:
            out.update(_fields(value, f"{path}.{name}"))
    return out


def _change(value: np.ndarray, k: int) -> None:
    if value.dtype.kind == "b":
        value[...] = ~value
    elif value.dtype.kind == "f":
        value += np.asarray(0.25 + k, value.dtype)
    else:
        value[...] = value + 1


def _perturb_structs(obj, k: int) -> int:
    """Change every array and float of a nested struct (opt, vis, stat, ...); returns how many."""
    changed = 0
    for name in dir(obj):
        value = getattr(obj, name)
        if name.startswith("_") or callable(value):
            continue
        if isinstance(value, np.ndarray):
            _change(value, k)
            changed += 1
        elif isinstance(value, float):
            setattr(obj, name, value + 0.5 + k)
            changed += 1
        elif not isinstance(value, (bool, int, str, bytes)):
            changed += _perturb_structs(value, k)
    return changed


def _perturb(model, k: int) -> tuple[list[str], list[str]]:
    """Change every numeric array of ``model`` that a run can change: every float array, and every integer
    array MuJoCo still accepts changed (addresses, ids and the tree make the model invalid: MuJoCo's own
    check, on serializing, refuses them). Returns (changed, refused by MuJoCo)."""
    changed, structural = [], []
    for name in dir(model):
        value = getattr(model, name)
        if name.startswith("_") or not isinstance(value, np.ndarray):
            continue
        if not value.size or not value.flags.writeable or value.dtype.kind not in "biuf":
            continue
        old = value.copy()
        _change(value, k)
        if value.dtype.kind != "f":
            try:
                pickle.loads(pickle.dumps(model))
            except ValueError:  # "Invalid serialized mjModel": not a change a run can make
                value[...] = old
                structural.append(name)
                continue
        changed.append(name)
    for struct in (model.opt, model.vis, model.stat):
        changed += [f"struct field {i}" for i in range(_perturb_structs(struct, k))]
    return changed, structural


def test_every_numeric_model_field_round_trips_through_a_snapshot():
    envs = _ants()
    envs.reset(seed=0)
    models = [e.unwrapped.model for e in envs.envs]
    for k, m in enumerate(models):
        changed, structural = _perturb(m, k)
        arrays = [
            n for n in dir(m) if n[0] != "_" and isinstance(getattr(m, n), np.ndarray) and getattr(m, n).size
        ]
        assert len(changed) > 200 and set(arrays) <= set(changed) | set(structural)  # every array
        assert all(getattr(m, n).dtype.kind in "iu" for n in structural)
    expected = [_fields(m) for m in models]
    restored = restore_vector_env(snapshot_vector_env(envs))
    for k, env in enumerate(restored.envs):
        assert env.unwrapped.model is not models[k]  # rebuilt from the XML ...
        got = _fields(env.unwrapped.model)
        assert got.keys() == expected[k].keys()
        for name, value in expected[k].items():  # ... and given every saved field back
            assert got[name].tobytes() == value.tobytes(), f"env {k}: {name} was not restored"
    restored.close()
    envs.close()


def test_a_per_env_mass_and_damping_randomization_survives_a_checkpoint():
    sensors = {"torso": sg.StateSensorOptions(key="obs", index=[0, 1, 2, 3, 4], noise=0.01)}
    env = SensorObservation(_ants(), sensors, seed=0)
    env.reset(seed=0)
    for k, sub in enumerate(env.unwrapped.envs):  # a per-env domain randomization of the model
        model = sub.unwrapped.model
        model.body_mass[1:] *= 1.0 + 0.8 * (k + 1)
        model.dof_damping[6:] += 2.0 * (k + 1)
        model.opt.gravity[2] = -9.81 * (1.0 + 0.3 * k)
    actions = np.random.default_rng(0).uniform(-1, 1, (20, 2, 8)).astype(np.float32)
    for a in actions[:5]:
        env.step(a)
    state = env.state_dict(include_envs=True)
    expected = [env.step(a)[0] for a in actions[5:]]

    fresh = SensorObservation(_ants(), sensors, seed=0)
    fresh.reset(seed=1)
    fresh.load_state_dict(state)
    for a, e in zip(actions[5:], expected, strict=True):
        got = fresh.step(a)[0]
        for key in ("policy", "critic"):
            np.testing.assert_array_equal(got[key], e[key])
    fresh.close()
    env.close()


def test_a_snapshot_of_another_model_is_refused():
    from sensorgym.wrappers.checkpoint import copy_model_fields

    ant = _ants(1).envs[0].unwrapped.model
    pendulum = gym.make("InvertedPendulum-v5").unwrapped.model
    with pytest.raises(ValueError, match=r"cannot restore MjModel\.\w+.*another XML.*Fix"):
        copy_model_fields(pendulum, ant)
