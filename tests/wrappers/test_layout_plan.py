"""ObservationLayout packs from one plan: a list of copies built once, executed by a torch executor
(``pack``) and a numpy executor (``pack_numpy``) of the same steps; the engine's storage is read in one
function (``layout._sources``)."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import torch

import sensorgym as sg
from sensorgym.wrappers import layout as layout_module
from sensorgym.wrappers.layout import ObservationLayout

ENGINE_NAMES = {  # the class storage (its branches are read through it: storage.measured.cache, ...)
    "storage",
    "_stores",
    "_storage",
    "buffer",
}


def _layout():
    mgr = sg.SensorManager(num_envs=3, dt=0.05, seed=0)
    sensors = {
        "a": mgr.add_sensor(
            sg.StateSensorOptions(key="x", shape=(2,), noise=0.1, history_length=3), name="a"
        ),
        "b": mgr.add_sensor(
            sg.StateSensorOptions(key="x", shape=(2,), delay=0.1, history_length=3), name="b"
        ),
        "c": mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), bias=1.0), name="c"),
    }
    mgr.build({"x": np.zeros((3, 2), np.float32)})
    return mgr, ObservationLayout(mgr, sensors, ["a", "b", "c"], ["c", "a"], None)


def test_one_plan_both_executors_same_bits():
    mgr, layout = _layout()
    policy_copies, critic_copies = layout._plan
    # a and b (adjacent, same class, same history) merge into one copy; c has no history; the critic's
    # c, a are not adjacent in return columns in that order: two copies
    assert [(c.sensors, c.history_length) for c in policy_copies] == [(2, 3), (1, 0)]
    assert len(critic_copies) == 2
    assert layout.numpy_packable()
    for copies, sources in zip(layout._plan, layout._sources(), strict=True):
        for copy, (source, _) in zip(
            copies, sources, strict=True
        ):  # the numpy executor views the same sources
            assert np.shares_memory(copy.source.numpy(), source)
    history_copy, newest_first = policy_copies[0], layout._sources()[0][0][1]
    g = torch.Generator().manual_seed(0)
    for t in range(8):
        state = {"x": torch.randn(3, 2, generator=g)}
        mgr.reset(state) if t == 0 else mgr.step(state, reset_mask=torch.tensor([False, t == 5, False]))
        with_torch, with_numpy = layout.pack(None), layout.pack_numpy(None)
        # the numpy executor's slot table row is the ring's own newest-first order (torch executor)
        ring = history_copy.history
        np.testing.assert_array_equal(newest_first[ring.slot(0)], ring.order(3).numpy())
        for key in ("policy", "critic"):
            np.testing.assert_array_equal(with_torch[key].numpy(), with_numpy[key])
        expected = torch.cat([mgr.sensors[0].read(), mgr.sensors[1].read()], 1)  # (B, history 3, 2) each
        policy = with_numpy["policy"]
        np.testing.assert_array_equal(policy[:, :12], expected.reshape(3, -1).numpy())
        np.testing.assert_array_equal(policy[:, 12:], mgr.sensors[2].read().numpy())


def test_engine_storage_is_read_in_one_function():
    tree = ast.parse(inspect.getsource(layout_module))
    readers = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and inner.attr in ENGINE_NAMES:
                readers.add((node.name, inner.attr))
    functions = {name for name, _ in readers}
    # the views' own attributes (`buffer` of the ring handed out by _sources) are read where bound
    assert {name for name, attr in readers if attr != "buffer"} == {"_sources"}, readers
    assert functions <= {"_sources", "_Copy", "bind"}, readers
