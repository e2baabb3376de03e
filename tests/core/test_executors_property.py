"""Two executors, one answer: random sensor sets run through ``SensorManager(executor="torch")`` and
``executor="numpy"`` (the same definitions of the per-step arithmetic, executed on numpy views of the same
buffers; sensorgym/core/xp.py) must give identical bits: reads, ground truth, history, read_age,
randomization and the whole state_dict, through partial resets, resets inside steps, setters, NaN
policies and a state_dict round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sensorgym as sg
from sensorgym.core.xp import NUMPY_MAX_ELEMENTS

from ..helpers import ByteOptions, FilterOptions, ThresholdOptions

DT = 0.1
EXECUTORS = ("torch", "numpy")


def _options(draw, kind: str, width: int):
    d_steps = draw(st.integers(0, 3))
    delay = d_steps * DT
    if draw(st.booleans()) and d_steps:
        delay = draw(st.sampled_from([sg.Uniform(0.0, d_steps * DT), sg.Choice([0.0, d_steps * DT])]))
    jitter = min(draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])) * DT, d_steps * DT)
    if draw(st.booleans()) and jitter:
        jitter = sg.Uniform(0.0, jitter)
    common = dict(
        delay=delay,
        jitter=jitter,
        history_length=draw(st.integers(0, 3)),
        padding_type=draw(st.sampled_from(["reset", "zero"])),
        noise=draw(st.sampled_from([0.0, 0.5, sg.Uniform(0.0, 1.0), sg.LogUniform(0.01, 0.1)])),
        bias=draw(st.sampled_from([0.0, 1.5, sg.Normal(0.0, 1.0)])),
        random_walk=draw(st.sampled_from([0.0, 0.3])),
        resolution=draw(st.sampled_from([0.0, 0.25, [0.0] * (width - 1) + [0.5]])),
        max_delay=draw(st.sampled_from([None, 0.5])),
        update_period=draw(st.sampled_from([0.0, 0.0, 0.2, sg.Uniform(0.1, 0.3)])),
        dropout=draw(st.sampled_from([0.0, 0.0, 0.3])),
        nan_policy=draw(st.sampled_from(["propagate", "propagate", "hold", "raise"])),
    )
    if kind == "state":
        index = list(range(width)) if draw(st.booleans()) else list(range(width))[::-1]
        return sg.StateSensorOptions(key="x", index=index, **common)
    common["resolution"] = draw(st.sampled_from([0.0, 0.25]))
    if kind == "filter":
        return FilterOptions(width=2, alpha=draw(st.sampled_from([0.0, 0.5])), **common)
    if kind == "threshold":
        return ThresholdOptions(width=2, threshold=draw(st.sampled_from([0.0, 5.0])), **common)
    return ByteOptions(width=2, **common)


def _snapshot(mgr) -> dict[str, np.ndarray]:
    out = {}
    for s in mgr.sensors:
        out[f"{s.name}.read"] = s.read(0)
        out[f"{s.name}.gt"] = s.read_ground_truth(0)
        if s.options.history_length:
            out[f"{s.name}.hist"] = s.read()
            out[f"{s.name}.gt_hist"] = s.read_ground_truth()
        out[f"{s.name}.age"] = s.read_age()
        for k, v in s.read_randomization().items():
            out[f"{s.name}.rand.{k}"] = v
    out.update(_flat(mgr.state_dict()))
    return {k: np.asarray(v.numpy() if torch.is_tensor(v) else v) for k, v in out.items()}


def _flat(d, prefix="sd") -> dict:
    out = {}
    for k, v in d.items() if isinstance(d, dict) else enumerate(d):
        if isinstance(v, dict | list | tuple):
            out.update(_flat(v, f"{prefix}.{k}"))
        else:
            out[f"{prefix}.{k}"] = v
    return out


def _assert_same(a: dict, b: dict, what: str) -> None:
    assert a.keys() == b.keys(), what
    for k in a:
        x, y = a[k], b[k]
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: {k}"
        if x.dtype == object:
            assert x.tolist() == y.tolist(), f"{what}: {k}"
        else:
            assert x.tobytes() == y.tobytes(), f"{what}: {k}\n{x}\n{y}"  # bits: NaN, -0.0 included


def _build(b: int, seed: int, sensors: list, executor: str, per_env_rng: bool):
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=seed, executor=executor, per_env_rng=per_env_rng)
    for i, opts in enumerate(sensors):
        mgr.add_sensor(opts, name=f"s{i}")
    return mgr


def _run(mgr, action, x, arg):
    """One action; returns the error's message if it raised (both executors must raise alike)."""
    try:
        if action == "step":
            mgr.step(x)
        elif action == "step_reset":
            mgr.step(x, reset_mask=arg)
        elif action == "reset":
            mgr.reset(x, envs_idx=arg)
        else:
            name, j, value, envs = arg
            s = mgr.sensors[j]
            getattr(s, f"set_{name}")(value, envs)
            mgr.step(x)
    except ValueError as e:
        return str(e)
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_torch_and_numpy_executors_give_the_same_bits(data):
    draw = data.draw
    b = draw(st.integers(1, 4), label="num_envs")
    width = draw(st.integers(1, 3), label="state sensor width")
    kinds = draw(
        st.lists(st.sampled_from(["state", "state", "filter", "threshold", "byte"]), min_size=1, max_size=5)
    )
    sensors = [_options(draw, k, width) for k in kinds]
    seed = draw(st.integers(0, 1000), label="seed")
    per_env_rng = draw(st.booleans(), label="per_env_rng")
    mgrs = [_build(b, seed, sensors, ex, per_env_rng) for ex in EXECUTORS]
    g = torch.Generator().manual_seed(seed)
    nan_rate = draw(st.sampled_from([0.0, 0.0, 0.1]), label="nan rate")

    def state(t):
        x = torch.randint(0, 40, (b, 3), generator=g).float() * 0.5 + (37.0 * t) % 200.0
        x[torch.rand(b, 3, generator=g) < nan_rate] = float("nan")
        return {"x": x}

    x0 = state(0)
    x0["x"] = torch.nan_to_num(x0["x"])
    for m in mgrs:
        m.reset(x0)
    assert [m.executor_used for m in mgrs] == list(EXECUTORS)
    _assert_same(*(_snapshot(m) for m in mgrs), "after reset")
    for t in range(1, draw(st.integers(1, 20), label="steps")):
        action = draw(st.sampled_from(["step"] * 4 + ["step_reset", "reset", "set", "roundtrip"]))
        x = state(t)
        arg = None
        if action in ("step_reset", "reset"):
            arg = np.array(draw(st.lists(st.booleans(), min_size=b, max_size=b)), dtype=bool)
        elif action == "set":
            j = draw(st.integers(0, len(sensors) - 1))
            o = sensors[j]
            names = ["noise", "bias", "random_walk", "resolution"]
            if o.max_delay is not None:
                names += ["delay", "jitter"]
            name = draw(st.sampled_from(names))
            value = draw(st.sampled_from([0.0, 0.1, 0.2])) if name in ("delay", "jitter") else 0.3
            arg = (name, j, value, np.flatnonzero(draw(st.lists(st.booleans(), min_size=b, max_size=b))))
        if action == "roundtrip":  # continue from a saved state in fresh managers, crossed: the torch
            # executor's checkpoint resumes on numpy and the numpy one on torch
            fresh = [_build(b, seed + 1, sensors, ex, per_env_rng) for ex in EXECUTORS]
            for m, f in zip(mgrs[::-1], fresh, strict=True):
                f.reset(x0)
                f.load_state_dict(m.state_dict())
            mgrs = fresh
            action = "step"
        errors = [_run(m, action, x, arg) for m in mgrs]
        assert errors[0] == errors[1]
        _assert_same(*(_snapshot(m) for m in mgrs), f"step {t} ({action})")


def test_auto_takes_numpy_only_for_small_cpu_batches():
    def used(b, cols, **kw):
        mgr = sg.SensorManager(num_envs=b, dt=DT, **kw)
        mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(cols,), delay=0.1))
        mgr.build({"x": torch.zeros(b, cols)})
        return mgr.executor_used, set(mgr.storage(sg.StateSensor).stage_executors())

    assert used(1, 3) == ("numpy", {"numpy"})
    assert used(NUMPY_MAX_ELEMENTS // 4, 4)[0] == "numpy"
    assert used(NUMPY_MAX_ELEMENTS // 4 + 1, 4) == ("torch", {"torch"})
    assert used(1, 3, executor="torch")[0] == "torch"
    assert used(1, 3, compile=True)[0] == "torch"
    with pytest.raises(ValueError, match="executor='numpy'"):
        sg.SensorManager(num_envs=1, dt=DT, compile=True, executor="numpy")
    with pytest.raises(ValueError, match="executor='gpu'"):
        sg.SensorManager(num_envs=1, dt=DT, executor="gpu")


def test_post_processed_classes_keep_their_torch_hook_on_the_numpy_executor():
    mgr = sg.SensorManager(num_envs=2, dt=DT, executor="numpy")
    mgr.add_sensor(ThresholdOptions(width=2, threshold=1.0, delay=0.1, history_length=2))
    mgr.reset({"x": torch.zeros(2, 3)})
    storage = mgr.storage(mgr.sensors[0].__class__)
    names = storage.stage_names()
    routes = dict(zip(names, storage.stage_executors(), strict=True))
    assert routes["ProjectIntoRing"] == "torch"  # _post_process is a torch hook
    assert routes["WriteHistory"] == "numpy"


@dataclass(frozen=True, kw_only=True)
class BFloat16Options(sg.SimpleSensorOptions):
    pass


class BFloat16Sensor(sg.SimpleSensor):
    """Buffers numpy cannot view: the class keeps the torch executor under the numpy one."""

    options_cls = BFloat16Options
    return_format = (2,)
    cache_dtype = torch.bfloat16

    @classmethod
    def _get_intermediate_dtype(cls):
        return torch.bfloat16

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        raw.copy_(state["x"][:, :2])


def test_a_class_numpy_cannot_view_keeps_the_torch_executor():
    reads = []
    for executor in EXECUTORS:
        mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0, executor=executor)
        s = mgr.add_sensor(BFloat16Options(delay=0.1, jitter=0.1, noise=0.1, history_length=2))
        f = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), delay=0.1, noise=0.1))
        mgr.reset({"x": torch.zeros(2, 3)})
        for t in range(6):
            mgr.step({"x": torch.full((2, 3), float(t))})
        assert mgr.storage(BFloat16Sensor).binding.name == "torch"
        assert mgr.storage(sg.StateSensor).binding.name == executor
        reads.append((s.read(), f.read()))
    for a, b in zip(*reads, strict=True):
        assert torch.equal(a, b)
