"""Option validation: every invalid value raises an error naming the field, the value and the fix."""

from __future__ import annotations

import numpy as np
import pytest

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
