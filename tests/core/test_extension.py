"""Issue 34 item 2: a new error term and a new stateful stage, added from outside the package.

The toy term (a temperature-dependent bias: ``k (T - 25)`` with ``T`` a per-step state entry) and the toy
stage (an exponential average of the measured samples, after the hardware imperfections, holding where
the sampler takes no sample) are written here, in a test, against the public records of
``sensorgym.core.terms`` and an options subclass: nothing in the package is edited. Each is checked
against a slow per-env reference written from its definition, on both executors, through partial resets,
a randomized per-env coefficient, a checkpoint mid-episode, and the observation bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.core.terms import Term, register_stage, register_term, unregister_term
from sensorgym.wrappers.layout import measured_bounds


# -- the toy term: a bias proportional to the temperature's offset from 25 C -----------------------------
def _thermal(xp, x, data, rows, scratch, coefficient, temperature, offset):
    xp.add(temperature, offset, scratch)  # T - 25
    xp.mul(scratch, coefficient, scratch)
    xp.add(x, scratch, data)
    return data


def _thermal_args(model):
    tables = (model.value("thermal_coefficient"), model.input("temperature"), model.table("thermal_offset"))
    return (model.scratch, *tables)


def _thermal_derive(model):
    model.table("thermal_offset").fill_(-25.0)


THERMAL = Term(
    "thermal", ("thermal_coefficient",), _thermal, _thermal_args, tables=("thermal_offset",),
    derive=_thermal_derive, inputs=("temperature",),
)  # fmt: skip


# -- the toy stage: an exponential average of the taken samples ------------------------------------------
def _ema(xp, x, data, rows, scratch, alpha, state, take, col_to_sensor, update):
    if x is not data:
        xp.copy(data, x)
    if take is None:
        xp.copy(update, True)
    else:
        xp.take_in_range(take, col_to_sensor, update, 1)
    xp.sub(data, state, scratch)  # state + alpha (x - state) where a sample is taken
    xp.mul(scratch, alpha, scratch)
    xp.add(state, scratch, scratch)
    xp.select_into(state, update, scratch)
    if rows is not None:  # an episode starts at its first sample
        xp.select_into(state, rows[:, None], data)
    xp.copy(data, state)
    return data


def _ema_args(model):
    take = None if model.sampler is None else model.sampler.take  # None: every step is a sample
    return (model.scratch, model.value("ema_alpha"), model.state("ema_state"), take,
            model.column_sensor(), model.table("ema_update"))  # fmt: skip


EMA = Term(
    "ema", ("ema_alpha",), _ema, _ema_args, tables=("ema_update",), state=("ema_state",), restarts=True,
    samples=True, table_dtypes=(("ema_update", torch.bool),),
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ToyOptions(sg.StateSensorOptions):
    thermal_coefficient: object = 0.0
    ema_alpha: object = 0.0


@pytest.fixture
def toys():
    register_term(THERMAL, before="bias")
    register_stage(EMA)
    yield
    unregister_term("thermal")
    unregister_term("ema")


def _trace(executor, steps=30, seed=0, **options):
    rng = np.random.default_rng(seed)
    mgr = sg.SensorManager(num_envs=3, dt=0.1, seed=seed, executor=executor)
    s = mgr.add_sensor(ToyOptions(key="x", shape=(2,), **options))
    state = lambda: {"x": rng.normal(size=(3, 2)).astype(np.float32),  # noqa: E731
                     "temperature": rng.uniform(0, 50, size=(3,)).astype(np.float32)}  # fmt: skip
    states = [state()]
    mgr.reset(states[0])
    reads, gts = [s.read().clone()], [s.read_ground_truth().clone()]
    for t in range(steps):
        states.append(state())
        mask = torch.tensor([t == 9, False, t == 20])
        mgr.step(states[-1], reset_mask=mask if mask.any() else None)
        reads.append(s.read().clone())
        gts.append(s.read_ground_truth().clone())
    return mgr, s, states, torch.stack(reads), torch.stack(gts)


def test_the_toy_term_adds_its_temperature_bias_in_its_place(toys):
    for executor in ("numpy", "torch"):
        mgr, _, states, reads, gts = _trace(executor, thermal_coefficient=[0.1, -0.2], bias=0.5)
        for t, st in enumerate(states):  # the term stands before the bias: (x + k (T - 25)) + 0.5
            x = torch.as_tensor(st["x"])
            temp = torch.as_tensor(st["temperature"])[:, None]
            k = torch.tensor([0.1, -0.2])
            expected = (x + (temp + -25.0) * k) + 0.5
            torch.testing.assert_close(reads[t], expected, rtol=0, atol=0)
            assert torch.equal(gts[t], x)  # ground truth never sees an error term
        assert [t.name for t, _ in mgr.metadata(sg.StateSensor).imperfections.terms_run()] == [
            "thermal", "bias"]  # fmt: skip


def test_a_randomized_coefficient_is_drawn_per_env_at_resets_and_readable(toys):
    mgr, s, *_ = _trace("numpy", thermal_coefficient=sg.Uniform(-0.1, 0.1))
    drawn = s.read_randomization()["thermal_coefficient"]
    assert drawn.shape == (3, 2) and len(set(drawn.flatten().tolist())) == 6
    assert mgr.randomization_names()[:2] == ["StateSensor_0.thermal_coefficient[0]",
                                             "StateSensor_0.thermal_coefficient[1]"]  # fmt: skip
    lo, hi = measured_bounds(s, np.full(2, -1.0), np.full(2, 1.0))
    assert np.isinf(lo).all() and np.isinf(hi).all()  # a term without a `widen`: unbounded


def _ema_reference(states, alpha, period_steps=1, resets=((9, 0), (20, 2))):
    """Per env, the stage's definition: the average restarts at the episode's first sample and moves by
    alpha toward each sample taken (every period_steps steps from the reset), holding between them."""
    out = np.zeros((len(states), 3, 2), np.float32)
    for b in range(3):
        start, avg = 0, None
        for t, st in enumerate(states):
            if any(t - 1 == r and b == e for r, e in resets):
                start, avg = t, None
            x = st["x"][b].astype(np.float32)
            if avg is None:
                avg = x.copy()
            elif (t - start) % period_steps == 0:
                avg = (avg + np.float32(alpha) * (x - avg)).astype(np.float32)
            out[t, b] = avg
    return out


@pytest.mark.parametrize("period", [0.0, 0.2], ids=["every-step", "own-rate"])
def test_the_toy_stage_averages_the_taken_samples_on_both_executors(toys, period):
    traces = []
    for executor in ("numpy", "torch"):
        _, _, states, reads, gts = _trace(executor, ema_alpha=0.25, update_period=period, update_phase=0.0)
        expected = _ema_reference(states, 0.25, period_steps=2 if period else 1)
        np.testing.assert_allclose(reads.numpy(), expected, rtol=0, atol=2e-6)
        assert torch.equal(gts[-1], torch.as_tensor(states[-1]["x"]))
        traces.append(reads)
    assert torch.equal(traces[0], traces[1])


def test_a_checkpoint_mid_episode_resumes_the_stage_and_the_term_bit_for_bit(toys):
    opts = dict(ema_alpha=0.3, thermal_coefficient=sg.Uniform(0.0, 0.2), noise=0.1)
    mgr, s, *_ = _trace("numpy", steps=12, **opts)
    saved = mgr.state_dict()
    assert "md.ema_state" in saved["classes"]["StateSensor"]["tensors"]
    rng = np.random.default_rng(5)
    future = [
        {
            "x": rng.normal(size=(3, 2)).astype(np.float32),
            "temperature": rng.uniform(0, 50, (3,)).astype(np.float32),
        }
        for _ in range(8)
    ]
    ref = []
    for st in future:
        mgr.step(st)
        ref.append(s.read().clone())
    again = sg.SensorManager(num_envs=3, dt=0.1, seed=123, executor="numpy")
    s2 = again.add_sensor(ToyOptions(key="x", shape=(2,), **opts))
    again.reset(future[0])
    again.load_state_dict(saved)
    for st, expected in zip(future, ref, strict=True):
        again.step(st)
        assert torch.equal(s2.read(), expected)


def test_without_registration_the_options_subclass_changes_nothing():
    """Not registered: the fields are plain data, the pipeline runs only the built-in terms."""
    mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0)
    s = mgr.add_sensor(ToyOptions(key="x", shape=(1,), thermal_coefficient=1.0, ema_alpha=0.5))
    mgr.reset({"x": torch.ones(2, 1), "temperature": torch.zeros(2)})
    assert torch.equal(s.read(), torch.ones(2, 1))
