"""The copy of the raw value into the working buffer, folded into the imperfection kernel's first write.

A :class:`~sensorgym.SimpleSensor` that keeps the default hooks skips ``measured.copy_(gt)`` and lets the
kernel read the GT slot instead (one pass over the class's block less per step). The other route is the
same sensor with ``_apply_hardware_imperfections`` overridden by a plain ``super()`` call, which the
manager must not fold: the two must give the same numbers, bit for bit, on both executors, through
autoresets and setters, for every combination of imperfections the kernel branches on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.core.sensor import folds_raw_copy

B, DT, WIDTH = 5, 0.1, 3


@dataclass(frozen=True, kw_only=True)
class UnfoldedOptions(sg.StateSensorOptions):
    pass


class UnfoldedStateSensor(sg.StateSensor):
    """StateSensor with the hook after the raw write overridden (unchanged behaviour): never folded."""

    options_cls = UnfoldedOptions

    @classmethod
    def _apply_hardware_imperfections(cls, md, data):
        super()._apply_hardware_imperfections(md, data)


@dataclass(frozen=True, kw_only=True)
class TransformedOptions(sg.StateSensorOptions):
    pass


class TransformedStateSensor(sg.StateSensor):
    options_cls = TransformedOptions

    @classmethod
    def _apply_transform(cls, md, data, timeline, *, is_measured):
        data.mul_(2.0)


COMBOS = {
    "none": {},
    "noise": dict(noise=0.1),
    "bias": dict(bias=[0.25, -0.5, 1.0]),
    "walk": dict(random_walk=0.05),
    "resolution": dict(resolution=0.25),
    "partial resolution": dict(resolution=[0.25, 0.0, 0.5]),
    "partial resolution + noise": dict(resolution=[0.0, 0.25, 0.0], noise=0.1),
    "all": dict(
        random_walk=0.05, noise=sg.LogUniform(0.01, 0.2), bias=sg.Uniform(-0.5, 0.5), resolution=0.125
    ),
    "all + delay, jitter, history": dict(
        random_walk=0.05, noise=0.1, bias=0.3, resolution=0.125, delay=0.2, jitter=0.1, history_length=3
    ),
}


def _managers(options: dict, executor: str, compile: bool = False):
    out = []
    for opts_cls in (sg.StateSensorOptions, UnfoldedOptions):
        mgr = sg.SensorManager(num_envs=B, dt=DT, seed=3, executor=executor, compile=compile)
        sensor = mgr.add_sensor(opts_cls(key="x", shape=(WIDTH,), **options), name="s")
        out.append((mgr, sensor))
    return out


def _state(rng: np.random.Generator) -> dict:
    return {"x": torch.from_numpy(rng.normal(size=(B, WIDTH)).astype(np.float32) * 3)}


def _reads(sensor, history: int) -> list[np.ndarray]:
    reads = [sensor.read(), sensor.read_ground_truth()]
    if history:
        reads += [sensor.read(history_length=history), sensor.read_ground_truth(history_length=history)]
    return [np.asarray(r) for r in reads]


def _storage(mgr):
    return next(iter(mgr._stores.values()))


@pytest.mark.parametrize("executor", ["torch", "numpy"])
@pytest.mark.parametrize("combo", list(COMBOS))
def test_folded_copy_equals_the_copy_bit_for_bit(combo, executor):
    options = COMBOS[combo]
    (folded, s_fold), (unfolded, s_plain) = _managers(options, executor)
    history = options.get("history_length", 0)
    rng = np.random.default_rng(0)
    first = _state(rng)
    folded.reset(first)
    unfolded.reset(first)
    assert _storage(folded).md.imperfections.raw_source is not None
    assert _storage(unfolded).md.imperfections.raw_source is None
    assert folded.executor_used == unfolded.executor_used == executor
    for t in range(40):
        state = _state(rng)
        mask = rng.random(B) < 0.2 if t % 3 else None  # autoresets on some steps
        if t == 20:  # a setter re-plans the kernel's arguments on both
            for s in (s_fold, s_plain):
                s.set_noise([0.0, 0.3, 0.0], envs_idx=[1, 2])
                s.set_bias(0.75, envs_idx=[0])
        folded.step(state, reset_mask=mask)
        unfolded.step(state, reset_mask=mask)
        for a, b in zip(_reads(s_fold, history), _reads(s_plain, history), strict=True):
            np.testing.assert_array_equal(a, b)
    for key, value in folded.state_dict().items():
        other = unfolded.state_dict()[key]
        if torch.is_tensor(value):
            assert torch.equal(value, other), key


def test_the_folded_gt_slot_keeps_the_raw_value():
    """The fold reads the GT slot and never writes it: ground truth stays uncorrupted."""
    mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), bias=1.5, resolution=0.5))
    x = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    mgr.reset({"x": x})
    mgr.step({"x": x + 1})
    assert _storage(mgr).md.imperfections.raw_source is not None
    np.testing.assert_array_equal(np.asarray(s.read_ground_truth()), (x + 1).numpy())
    np.testing.assert_array_equal(np.asarray(s.read()), [[2.5, 2.5], [3.0, 3.0]])  # 2.6, 2.7, 2.8, 2.9


@pytest.mark.parametrize(
    ("opts_cls", "extra", "folds"),
    [
        (sg.StateSensorOptions, {}, True),
        (sg.StateSensorOptions, dict(nan_policy="hold"), False),  # the policy reads the working buffer
        (sg.StateSensorOptions, dict(nan_policy="raise"), False),
        (UnfoldedOptions, {}, False),
        (TransformedOptions, {}, False),  # a transform runs on the working buffer before the kernel
    ],
)
def test_only_the_default_hooks_fold(opts_cls, extra, folds):
    mgr = sg.SensorManager(num_envs=2, dt=DT, seed=0)
    mgr.add_sensor(opts_cls(key="x", shape=(1,), noise=0.1, **extra))
    mgr.reset({"x": torch.zeros(2, 1)})
    assert (_storage(mgr).md.imperfections.raw_source is not None) is folds
    assert folds_raw_copy(sg.StateSensor) and not folds_raw_copy(UnfoldedStateSensor)


def test_a_copied_manager_folds_into_its_own_buffers():
    import copy

    (mgr, s), _ = _managers(COMBOS["all"], "numpy")
    rng = np.random.default_rng(1)
    mgr.reset(_state(rng))
    twin = copy.deepcopy(mgr)
    twin_s = twin.sensors[0]
    assert _storage(twin).md.imperfections.raw_source is _storage(twin).gt.intermediate
    for _ in range(5):
        state = _state(rng)
        mgr.step(state)
        twin.step(state)
        np.testing.assert_array_equal(np.asarray(s.read()), np.asarray(twin_s.read()))


def _drive(pairs, device: str, steps: int, captured=None) -> None:
    """Step every (manager, sensor) pair on the same states (autoresets on some steps); their reads must
    be equal after each step. ``captured``: a captured step that drives the first manager instead."""
    g = torch.Generator().manual_seed(4)
    for t in range(steps):
        state = {"x": (torch.randn(B, WIDTH, generator=g) * 3).to(device)}
        mask = (torch.rand(B, generator=g) < 0.2).to(device)
        for i, (mgr, _) in enumerate(pairs):
            if i == 0 and captured is not None:
                captured(state, reset_mask=mask)
            else:
                mgr.step(state, reset_mask=mask)
        reads = [_reads(s, 3) for _, s in pairs] if device == "cpu" else [
            [r.cpu() for r in (s.read(), s.read_ground_truth(), s.read(history_length=3))] for _, s in pairs
        ]  # fmt: skip
        for other in reads[1:]:
            for a, b in zip(reads[0], other, strict=True):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"step {t}")


def test_the_compiled_kernel_folds_with_the_same_bits():
    options = COMBOS["all + delay, jitter, history"]
    pairs = []
    for opts_cls, compile in ((sg.StateSensorOptions, True), (UnfoldedOptions, False)):
        mgr = sg.SensorManager(num_envs=B, dt=DT, seed=3, compile=compile)
        pairs.append((mgr, mgr.add_sensor(opts_cls(key="x", shape=(WIDTH,), **options), name="s")))
    state = {"x": torch.zeros(B, WIDTH)}
    for mgr, _ in pairs:
        mgr.reset(state)
    assert _storage(pairs[0][0]).md.imperfections.raw_source is not None
    _drive(pairs, "cpu", 25)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_folded_copy_on_cuda_eager_and_captured():
    options = COMBOS["all + delay, jitter, history"]
    built = []
    for opts_cls in (sg.StateSensorOptions, sg.StateSensorOptions, UnfoldedOptions):
        mgr = sg.SensorManager(num_envs=B, dt=DT, seed=3, device="cuda")
        built.append((mgr, mgr.add_sensor(opts_cls(key="x", shape=(WIDTH,), **options), name="s")))
    state = {"x": torch.zeros(B, WIDTH, device="cuda")}
    for mgr, _ in built:
        mgr.reset(state)
    captured = built[0][0].capture_cuda_graph(state)
    _drive(built, "cuda", 40, captured=captured)
