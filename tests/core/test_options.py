"""Option validation: every invalid value raises an error naming the field, the value and the fix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sensorgym as sg


@pytest.mark.parametrize(
    ("kwargs", "exc", "pattern"),
    [
        (dict(delay=-0.1), ValueError, r"SensorOptions\.delay=-0\.1 is invalid.*>= 0.*Fix"),
        (dict(delay="0.1"), TypeError, r"delay='0\.1'.*Fix"),
        (dict(delay=float("nan")), ValueError, r"delay=nan"),
        (dict(jitter=0.05, delay=0.02), ValueError, r"jitter=0\.05.*jitter <= delay.*Fix"),
        (dict(jitter=-0.01), ValueError, r"jitter=-0\.01"),
        (dict(history_length=-1), ValueError, r"history_length=-1.*Fix"),
        (dict(history_length=1.5), TypeError, r"history_length=1\.5.*Fix"),
        (dict(history_length=True), TypeError, r"history_length=True"),
        (dict(padding_type="edge"), ValueError, r"padding_type='edge'.*'reset'.*Fix"),
        (dict(nan_policy="ignore"), ValueError, r"nan_policy='ignore'.*Fix"),
        (dict(delay=sg.Normal(0.02, 0.01)), ValueError, r"delay=Normal.*negative.*Fix"),
        (dict(delay=sg.Normal(0.02, 0.01, low=0.0)), ValueError, r"bounded.*Fix"),
        (dict(delay=sg.Uniform(0.0, 0.02), jitter=sg.Uniform(0.0, 0.04)), ValueError, r"jitter=Uniform"),
        (dict(delay=0.04, max_delay=0.02), ValueError, r"max_delay=0\.02.*Fix"),
    ],
)
def test_time_options_rejected(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        sg.SensorOptions(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "exc", "pattern"),
    [
        (dict(noise=-0.1), ValueError, r"SimpleSensorOptions\.noise=-0\.1.*>= 0.*Fix"),
        (dict(random_walk=-1.0), ValueError, r"random_walk=-1\.0"),
        (dict(resolution=-0.5), ValueError, r"resolution=-0\.5"),
        (dict(noise=[0.1, -0.2]), ValueError, r"noise=\[0\.1, -0\.2\].*component 1"),
        (dict(bias=[]), ValueError, r"bias=\[\].*empty"),
        (dict(bias="x"), TypeError, r"bias='x'"),
        (dict(bias=[0.0, "x"]), TypeError, r"component 1"),
        (dict(bias=float("inf")), ValueError, r"bias=inf.*finite"),
        (dict(noise=sg.Normal(0.0, 0.1)), ValueError, r"noise=Normal.*negative.*Fix"),
        (dict(resolution=np.zeros((2, 2))), ValueError, r"resolution=.*flat"),
    ],
)
def test_component_options_rejected(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        sg.SimpleSensorOptions(**kwargs)


def test_valid_options_are_normalised():
    o = sg.SimpleSensorOptions(
        delay=1,
        jitter=0,
        noise=np.array([0.1, 0.2]),
        bias=[1, 2],
        resolution=sg.LogUniform(0.01, 0.1),
        history_length=np.int64(3),
    )
    assert o.delay == 1.0 and isinstance(o.delay, float)
    assert o.noise == (0.1, 0.2) and o.bias == (1.0, 2.0)
    assert o.history_length == 3 and type(o.history_length) is int
    assert o.randomized_fields() == ("resolution",)
    assert sg.SimpleSensorOptions(bias=[0.0, sg.Normal(0, 1)]).randomized_fields() == ("bias",)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: sg.Uniform(1.0, 0.0), r"low must be <= high"),
        (lambda: sg.LogUniform(0.0, 1.0), r"0 < low <= high"),
        (lambda: sg.Normal(0.0, -1.0), r"std must be >= 0"),
        (lambda: sg.Normal(0.0, 1.0, low=1.0, high=0.0), r"low must be <= high"),
        (lambda: sg.Choice([]), r"at least one value"),
        (lambda: sg.Choice([0.0, float("nan")]), r"finite"),
        (lambda: sg.Uniform(0.0, float("inf")), r"finite"),
    ],
)
def test_distributions_rejected(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()


def test_state_sensor_options_rejected():
    with pytest.raises(TypeError, match=r"key=''.*Fix"):
        sg.StateSensorOptions(key="")
    with pytest.raises(ValueError, match=r"shape=\(0,\).*Fix"):
        sg.StateSensorOptions(key="x", shape=(0,))
    with pytest.raises(ValueError, match=r"index=\[\].*Fix"):
        sg.StateSensorOptions(key="x", index=[])
    assert sg.StateSensorOptions(key="x", shape=3, index=2).shape == (3,)


@pytest.mark.parametrize(
    "number",
    [np.float32(0.02), np.float64(0.02), np.array(0.02), np.array(0.02, np.float32), torch.tensor(0.02)],
    ids=["np.float32", "np.float64", "0-d array", "0-d float32 array", "0-d tensor"],
)
def test_any_real_number_type_is_accepted(number) -> None:
    """Regression (issue 11.10): ``dt=np.float32(0.02)`` was rejected as "must be > 0"; every place a number
    is accepted takes numpy scalars, 0-d arrays and 0-d tensors."""
    import gymnasium as gym

    from sensorgym.wrappers import SensorObservation

    mgr = sg.SensorManager(num_envs=np.int64(2), dt=number, seed=0)
    assert mgr.dt == pytest.approx(0.02) and mgr.num_envs == 2
    opts = sg.StateSensorOptions(
        key="x",
        shape=(1,),
        delay=number,
        jitter=number,
        noise=number,
        resolution=[number],
        history_length=np.int64(2),
        max_delay=np.float32(0.1),
    )
    assert isinstance(opts.delay, float) and isinstance(opts.history_length, int)
    assert sg.Uniform(np.float32(0.0), number).high == pytest.approx(0.02)
    s = mgr.add_sensor(opts)
    mgr.reset({"x": torch.zeros(2, 1)})
    assert s.read(history_length=np.int64(1)).shape == (2, 1, 1)
    envs = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")  # no dt of its own
    wrapped = SensorObservation(envs, {"a": sg.StateSensorOptions(key="obs")}, dt=number)
    assert wrapped.dt == pytest.approx(0.02)


@pytest.mark.parametrize("bad", [True, "0.02", np.array([0.02]), None])
def test_non_numbers_are_still_refused(bad) -> None:
    with pytest.raises((TypeError, ValueError), match="dt"):
        sg.SensorManager(num_envs=1, dt=bad)
