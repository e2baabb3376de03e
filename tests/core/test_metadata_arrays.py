"""``md.xp``, ``md.array`` and ``md.numpy_view``: what a hook uses to run on the manager's executor."""

from __future__ import annotations

import numpy as np
import torch

import sensorgym as sg
from sensorgym.core.xp import MAX_VIEWS


def metadata(executor: str):
    mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0, executor=executor)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), noise=0.1))
    mgr.reset({"x": np.zeros((2, 3), np.float32)})
    return mgr.metadata(sg.StateSensor)


def test_numpy_view_shares_memory_and_is_made_once_per_tensor():
    md = metadata("numpy")
    t = torch.zeros(2, 3)
    view = md.numpy_view(t)
    view[1, 2] = 5.0
    assert t[1, 2].item() == 5.0 and md.numpy_view(t) is view
    other = torch.zeros(2, 3)
    assert md.numpy_view(other) is not view


def test_numpy_view_is_none_where_numpy_cannot_view():
    md = metadata("numpy")
    assert md.numpy_view(torch.zeros(2, dtype=torch.bfloat16)) is None
    assert md.numpy_view(torch.zeros(2, requires_grad=True)) is None


def test_array_follows_the_executor():
    t = torch.ones(2, 3)
    md_torch, md_numpy = metadata("torch"), metadata("numpy")
    assert md_torch.xp.name == "torch" and md_torch.array(t) is t
    assert md_numpy.xp.name == "numpy" and isinstance(md_numpy.array(t), np.ndarray)
    assert np.shares_memory(md_numpy.array(t), t.numpy())


def test_the_view_cache_stays_bounded_when_a_hook_passes_new_tensors():
    md = metadata("numpy")
    kept = []
    for _ in range(3 * MAX_VIEWS):
        t = torch.zeros(1)
        kept.append(t)  # alive: ids are not recycled, the cache would otherwise grow with them
        assert md.numpy_view(t) is not None
    assert len(md.binding._views) <= MAX_VIEWS
