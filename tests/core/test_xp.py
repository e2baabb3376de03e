"""The two executors of ``md.xp`` accept the same inputs and give the same bits (or both raise).

Custom hooks are written once against ``md.xp``; ``executor="auto"`` runs them on numpy for small CPU
batches and on torch above that, on CUDA and with ``compile=True``. A hook that works on one executor and
raises (or silently differs) on the other fails a user the day their batch grows. Each case below runs the
same call on both and compares.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.core.xp import NUMPY, TORCH, numpy_executes

from ..helpers import HalfSensor


def _x() -> torch.Tensor:
    return torch.tensor([1.0, 5.0, float("nan"), -2.5, 9.0])


def _mask() -> torch.Tensor:
    return torch.tensor([True, False, True, False, True])


def _minimum_scalar(xp, c):
    a = _x()
    xp.minimum(c(a), 4.0, c(a))
    return a


def _minimum_array(xp, c):
    a = _x()
    xp.minimum(c(a), c(torch.full((5,), 4.0)), c(a))
    return a


def _select_scalar(xp, c):
    a = _x()
    xp.select_into(c(a), c(_mask()), 0.0)
    return a


def _select_wider(xp, c):
    a = _x()
    xp.select_into(c(a), c(_mask()), c(torch.full((5,), 0.1, dtype=torch.float64)))
    return a


def _round_int(xp, c):
    a = torch.arange(5, dtype=torch.int32)
    xp.round(c(a), c(a))
    return a


def _round_into_float64(xp, c):
    out = torch.zeros(5, dtype=torch.float64)
    xp.round(c(_x() * 0.5), c(out))
    return out


def _round_half_even(xp, c):
    a = torch.tensor([0.5, 1.5, 2.5, -0.5])
    xp.round(c(a), c(a))
    return a


def _take(xp, c):
    out = torch.zeros(3)
    xp.take(c(_x()), c(torch.tensor([4, 0, 0])), c(out))
    return out


def _copy_scalar(xp, c):
    a = _x()
    xp.copy(c(a), 2.0)
    return a


def _fill_zero_into_int(xp, c):
    a = torch.arange(5)
    xp.fill_where(c(a), c(_mask()), 0.0)
    return a


CASES = {
    "minimum with a Python number": _minimum_scalar,
    "minimum with an array": _minimum_array,
    "select_into a Python number": _select_scalar,
    "select_into float64 into float32": _select_wider,
    "round an int32 array": _round_int,
    "round float32 into float64": _round_into_float64,
    "round half to even": _round_half_even,
    "take in range": _take,
    "copy a Python number": _copy_scalar,
    "fill_where 0.0 into int64": _fill_zero_into_int,
}

RAISING = {
    "take an index past the end": lambda xp, c: xp.take(c(_x()), c(torch.tensor([5, 0])), c(torch.zeros(2))),
    "take a negative index": lambda xp, c: xp.take(c(_x()), c(torch.tensor([-1, 0])), c(torch.zeros(2))),
    "fill_where NaN into int32": lambda xp, c: xp.fill_where(
        c(torch.zeros(5, dtype=torch.int32)), c(_mask()), float("nan")
    ),
}


def _run(case, xp):
    convert = (lambda t: t) if xp is TORCH else (lambda t: t.numpy())
    return torch.as_tensor(np.asarray(case(xp, convert)))


@pytest.mark.parametrize("name", list(CASES))
def test_both_executors_accept_the_same_inputs_and_agree(name):
    a, b = _run(CASES[name], TORCH), _run(CASES[name], NUMPY)
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("name", list(RAISING))
def test_both_executors_refuse_the_same_inputs(name):
    for xp in (TORCH, NUMPY):
        with pytest.raises((IndexError, ValueError, RuntimeError)):
            _run(RAISING[name], xp)


def test_float16_classes_run_on_torch():
    """numpy rounds a Python scalar to float16 before a float16 operation, torch keeps it at float32: a
    hook's ``md.xp.mul(x, 0.1, x)`` would differ, so float16 classes never take the numpy executor."""
    x = torch.tensor([3.0], dtype=torch.float16)
    torch_result, numpy_result = x.clone(), x.clone()
    TORCH.mul(torch_result, 0.1, torch_result)
    NUMPY.mul(numpy_result.numpy(), 0.1, numpy_result.numpy())
    assert not torch.equal(torch_result, numpy_result)  # the reason
    assert not numpy_executes(torch.float16, torch.float32)
    assert not numpy_executes(torch.bfloat16)
    assert numpy_executes(torch.float32, torch.bool) and numpy_executes(torch.float64, torch.int32)


@dataclass(frozen=True, kw_only=True)
class _ScaledHalfOptions(sg.SimpleSensorOptions):
    pass


class _ScaledHalf(HalfSensor):
    """float16 with a transform written against ``md.xp`` (a Python-scalar multiply)."""

    options_cls = _ScaledHalfOptions

    @classmethod
    def _apply_transform(cls, md, data, timeline, *, is_measured):
        x = md.array(data)
        md.xp.mul(x, 0.1, x)


def test_a_float16_hook_gives_the_same_bits_for_every_executor_choice():
    reads = {}
    for executor in ("torch", "numpy", "auto"):
        mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0, executor=executor)
        s = mgr.add_sensor(_ScaledHalfOptions(noise=0.01))
        g = torch.Generator().manual_seed(0)
        mgr.reset({"x": (torch.randn(2, 3, generator=g) * 100).half()})
        for _ in range(3):
            mgr.step({"x": (torch.randn(2, 3, generator=g) * 100).half()})
        assert mgr.storage(_ScaledHalf).binding.name == "torch"
        reads[executor] = s.read().clone()
    assert torch.equal(reads["torch"], reads["numpy"]) and torch.equal(reads["torch"], reads["auto"])


@pytest.mark.parametrize("executor", ["torch", "numpy"])
@pytest.mark.parametrize("sensors", [1, 2])
def test_a_state_that_requires_grad_is_measured(executor, sensors):
    """A differentiable simulator's state: the sensors read it (no gradient flows into them)."""
    mgr = sg.SensorManager(num_envs=3, dt=0.1, seed=0, executor=executor)
    handles = [mgr.add_sensor(sg.StateSensorOptions(key="x", noise=0.0)) for _ in range(sensors)]
    x = torch.arange(6.0).reshape(3, 2).requires_grad_()
    mgr.reset({"x": x})
    mgr.step({"x": x * 2})
    for s in handles:
        np.testing.assert_array_equal(s.read().numpy(), (x * 2).detach().numpy())
        assert not s.read().requires_grad
    assert torch.is_grad_enabled()  # the caller's grad mode is restored
