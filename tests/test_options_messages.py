# ruff: noqa: E501  (the pinned messages are long strings)
"""The options' table-driven validation (options.py: one ``check(options, name, value)`` per field,
run in table order by ``SensorOptions._validate``) raises exactly the messages the per-field methods it
replaced raised (pinned below from the code before the change), and normalizes values the same way."""

from __future__ import annotations

import numpy as np
import pytest

import sensorgym as sg

CASES = [
    ("SensorOptions", dict(delay=-0.1)),
    ("SensorOptions", dict(delay="x")),
    ("SensorOptions", dict(delay=float("nan"))),
    ("SensorOptions", dict(delay=sg.Uniform(-0.1, 0.1))),
    ("SensorOptions", dict(delay=sg.Normal(0.1, 0.1))),
    ("SensorOptions", dict(jitter=sg.Normal(0.1, 0.1, low=0.0))),
    ("SensorOptions", dict(delay=0.01, jitter=0.02)),
    ("SensorOptions", dict(delay=sg.Uniform(0.0, 0.02), jitter=sg.Uniform(0.0, 0.04))),
    ("SensorOptions", dict(history_length=-1)),
    ("SensorOptions", dict(history_length=1.5)),
    ("SensorOptions", dict(history_length="3")),
    ("SensorOptions", dict(padding_type="x")),
    ("SensorOptions", dict(nan_policy="ignore")),
    ("SensorOptions", dict(max_delay="a")),
    ("SensorOptions", dict(max_delay=float("inf"))),
    ("SensorOptions", dict(delay=0.1, max_delay=0.05)),
    ("SensorOptions", dict(update_period=-1.0)),
    ("SensorOptions", dict(update_period=sg.Normal(0.1, 0.1))),
    ("SensorOptions", dict(update_phase=-0.5)),
    ("SensorOptions", dict(update_phase="p")),
    ("SensorOptions", dict(dropout=1.0)),
    ("SensorOptions", dict(dropout=-0.1)),
    ("SensorOptions", dict(dropout="a")),
    ("SensorOptions", dict(dropout=sg.Uniform(0.0, 1.5))),
    ("SensorOptions", dict(dropout=sg.Uniform(-0.1, 0.5))),
    ("SimpleSensorOptions", dict(noise=-1.0)),
    ("SimpleSensorOptions", dict(noise="a")),
    ("SimpleSensorOptions", dict(noise=[])),
    ("SimpleSensorOptions", dict(noise=[0.1, -0.2])),
    ("SimpleSensorOptions", dict(noise=[0.1, "x"])),
    ("SimpleSensorOptions", dict(noise=np.zeros((2, 2)))),
    ("SimpleSensorOptions", dict(bias=float("inf"))),
    ("SimpleSensorOptions", dict(random_walk=sg.Normal(0.0, 1.0))),
    ("SimpleSensorOptions", dict(resolution=[sg.Uniform(-1.0, 1.0)])),
    ("SimpleSensorOptions", dict(resolution=b"x")),
    ("SimpleSensorOptions", dict(delay=-1.0, noise=-1.0)),
    ("StateSensorOptions", dict(key="obs", jitter=0.1)),
    ("StateSensorOptions", dict(key="obs", noise=np.array([0.1, -0.1]))),
]

EXPECTED = [
    (
        ValueError,
        "SensorOptions.delay=-0.1 is invalid: delay must be a finite number of seconds >= 0. Fix: use delay=0.0 for none.",
    ),
    (
        TypeError,
        "SensorOptions.delay='x' is invalid: expected seconds as a float or a Distribution. Fix: pass e.g. delay=0.02 or delay=sg.Uniform(0.0, 0.04).",
    ),
    (
        ValueError,
        "SensorOptions.delay=nan is invalid: delay must be a finite number of seconds >= 0. Fix: use delay=0.0 for none.",
    ),
    (
        ValueError,
        "SensorOptions.delay=Uniform(low=-0.1, high=0.1) is invalid: it can produce negative delay (-0.1). Fix: use a distribution with non-negative support, e.g. Uniform(0.0, 0.04) or Normal(..., low=0.0, high=...).",
    ),
    (
        ValueError,
        "SensorOptions.delay=Normal(mean=0.1, std=0.1, low=None, high=None) is invalid: it can produce negative delay (-inf). Fix: use a distribution with non-negative support, e.g. Uniform(0.0, 0.04) or Normal(..., low=0.0, high=...).",
    ),
    (
        ValueError,
        "SensorOptions.jitter=Normal(mean=0.1, std=0.1, low=0.0, high=None) is invalid: jitter must be bounded so the delay ring can be sized. Fix: give the Normal distribution a finite high=... bound.",
    ),
    (
        ValueError,
        "SensorOptions.jitter=0.02 is invalid: jitter is extra delay on top of `delay` and must satisfy 0 <= jitter <= delay (0.01). Fix: lower jitter to at most 0.01 or raise delay.",
    ),
    (
        ValueError,
        "SensorOptions.jitter=Uniform(low=0.0, high=0.04) is invalid: jitter is extra delay on top of `delay` and must satisfy 0 <= jitter <= delay (Uniform(low=0.0, high=0.02)). Fix: lower jitter to at most 0.02 or raise delay.",
    ),
    (
        ValueError,
        "SensorOptions.history_length=-1 is invalid: it must be >= 0. Fix: use 0 for no history or N > 0 for the last N reads.",
    ),
    (
        TypeError,
        "SensorOptions.history_length=1.5 is invalid: expected an int. Fix: pass history_length=0 (no history) or a positive number of reads.",
    ),
    (
        TypeError,
        "SensorOptions.history_length='3' is invalid: expected an int. Fix: pass history_length=0 (no history) or a positive number of reads.",
    ),
    (
        ValueError,
        "SensorOptions.padding_type='x' is invalid: it must be one of ('reset', 'zero'). Fix: use padding_type=\"reset\" (repeat the first snapshot) or \"zero\".",
    ),
    (
        ValueError,
        "SensorOptions.nan_policy='ignore' is invalid: it must be one of ('propagate', 'raise', 'hold'). Fix: use nan_policy=\"propagate\", \"raise\" or \"hold\".",
    ),
    (
        ValueError,
        "SensorOptions.max_delay='a' is invalid: it must be a finite number of seconds. Fix: pass max_delay=None or e.g. max_delay=0.1.",
    ),
    (
        ValueError,
        "SensorOptions.max_delay=inf is invalid: it must be a finite number of seconds. Fix: pass max_delay=None or e.g. max_delay=0.1.",
    ),
    (
        ValueError,
        "SensorOptions.max_delay=0.05 is invalid: it is below delay + jitter (0.1) that the options already reach. Fix: use max_delay >= 0.1 or leave it None.",
    ),
    (
        ValueError,
        "SensorOptions.update_period=-1.0 is invalid: update_period must be a finite number of seconds >= 0. Fix: use update_period=0.0 for none.",
    ),
    (
        ValueError,
        "SensorOptions.update_period=Normal(mean=0.1, std=0.1, low=None, high=None) is invalid: it can produce negative update_period (-inf). Fix: use a distribution with non-negative support, e.g. Uniform(0.0, 0.04) or Normal(..., low=0.0, high=...).",
    ),
    (
        ValueError,
        "SensorOptions.update_phase=-0.5 is invalid: update_phase must be a finite number of seconds >= 0. Fix: use update_phase=0.0 for none.",
    ),
    (
        TypeError,
        "SensorOptions.update_phase='p' is invalid: expected seconds as a float or a Distribution. Fix: pass e.g. update_phase=0.02 or update_phase=sg.Uniform(0.0, 0.04).",
    ),
    (
        ValueError,
        "SensorOptions.dropout=1.0 is invalid: a lost-sample probability must satisfy 0 <= dropout < 1. Fix: pass a probability 0 <= dropout < 1, e.g. dropout=0.05 or dropout=sg.Uniform(0.0, 0.1).",
    ),
    (
        ValueError,
        "SensorOptions.dropout=-0.1 is invalid: a lost-sample probability must satisfy 0 <= dropout < 1. Fix: pass a probability 0 <= dropout < 1, e.g. dropout=0.05 or dropout=sg.Uniform(0.0, 0.1).",
    ),
    (
        TypeError,
        "SensorOptions.dropout='a' is invalid: expected a probability as a float or a Distribution. Fix: pass a probability 0 <= dropout < 1, e.g. dropout=0.05 or dropout=sg.Uniform(0.0, 0.1).",
    ),
    (
        ValueError,
        "SensorOptions.dropout=Uniform(low=0.0, high=1.5) is invalid: it can produce 1.5, outside [0, 1). Fix: pass a probability 0 <= dropout < 1, e.g. dropout=0.05 or dropout=sg.Uniform(0.0, 0.1).",
    ),
    (
        ValueError,
        "SensorOptions.dropout=Uniform(low=-0.1, high=0.5) is invalid: it can produce -0.1, outside [0, 1). Fix: pass a probability 0 <= dropout < 1, e.g. dropout=0.05 or dropout=sg.Uniform(0.0, 0.1).",
    ),
    (ValueError, "SimpleSensorOptions.noise=-1.0 is invalid: noise must be >= 0. Fix: use 1.0 or 0.0."),
    (
        TypeError,
        "SimpleSensorOptions.noise='a' is invalid: expected a number. Fix: pass noise=0.0, a list with one value per component, or a Distribution.",
    ),
    (
        ValueError,
        "SimpleSensorOptions.noise=[] is invalid: the per-component sequence is empty. Fix: pass noise=0.0, a list with one value per component, or a Distribution.",
    ),
    (
        ValueError,
        "SimpleSensorOptions.noise=[0.1, -0.2] is invalid: component 1: noise must be >= 0. Fix: use 0.2 or 0.0.",
    ),
    (
        TypeError,
        "SimpleSensorOptions.noise=[0.1, 'x'] is invalid: component 1: expected a number or a Distribution, got str. Fix: pass noise=0.0, a list with one value per component, or a Distribution.",
    ),
    (
        ValueError,
        "SimpleSensorOptions.noise=[[0.0, 0.0], [0.0, 0.0]] is invalid: per-component values must be one flat sequence. Fix: flatten it to one value per component.",
    ),
    (
        ValueError,
        "SimpleSensorOptions.bias=inf is invalid: values must be finite. Fix: pass bias=0.0, a list with one value per component, or a Distribution.",
    ),
    (
        ValueError,
        "SimpleSensorOptions.random_walk=Normal(mean=0.0, std=1.0, low=None, high=None) is invalid: can produce negative values (-inf) but random_walk must be >= 0. Fix: use a non-negative distribution such as Uniform(0.0, x), LogUniform or Normal(..., low=0.0).",
    ),
    (
        ValueError,
        "SimpleSensorOptions.resolution=[Uniform(low=-1.0, high=1.0)] is invalid: component 0: can produce negative values (-1.0) but resolution must be >= 0. Fix: use a non-negative distribution such as Uniform(0.0, x), LogUniform or Normal(..., low=0.0).",
    ),
    (
        TypeError,
        "SimpleSensorOptions.resolution=b'x' is invalid: expected a number. Fix: pass resolution=0.0, a list with one value per component, or a Distribution.",
    ),
    (
        ValueError,
        "SimpleSensorOptions.delay=-1.0 is invalid: delay must be a finite number of seconds >= 0. Fix: use delay=0.0 for none.",
    ),
    (
        ValueError,
        "StateSensorOptions.jitter=0.1 is invalid: jitter is extra delay on top of `delay` and must satisfy 0 <= jitter <= delay (0.0). Fix: lower jitter to at most 0 or raise delay.",
    ),
    (
        ValueError,
        "StateSensorOptions.noise=[0.1, -0.1] is invalid: component 1: noise must be >= 0. Fix: use 0.1 or 0.0.",
    ),
]


@pytest.mark.parametrize(("case", "expected"), list(zip(CASES, EXPECTED, strict=True)), ids=repr)
def test_messages_are_unchanged(case, expected):
    cls, kwargs = case
    kind, message = expected
    with pytest.raises(kind) as caught:
        getattr(sg, cls)(**kwargs)
    assert str(caught.value) == message


def test_values_are_normalized():
    o = sg.SimpleSensorOptions(
        delay=np.float32(0.04),
        jitter=0.02,
        history_length=np.int64(3),
        noise=np.array([0.1, 0.2]),
        bias=(1, 2),
        max_delay=np.float64(0.2),
        dropout=np.float32(0.25),
    )
    assert (
        repr(o)
        == "SimpleSensorOptions(delay=0.03999999910593033, jitter=0.02, history_length=3, padding_type='reset', nan_policy='propagate', max_delay=0.2, update_period=0.0, update_phase=None, dropout=0.25, dropout_burst=None, noise=(0.1, 0.2), bias=(1.0, 2.0), random_walk=0.0, resolution=0.0, noise_density=0.0, random_walk_density=0.0, bias_instability=0.0, bias_correlation_time=0.0, scale_factor=0.0, bandwidth=0.0, replay=None, replay_channels=None)"
    )
    assert type(o.history_length) is int and type(o.delay) is float and type(o.dropout) is float
    assert [name for name, _ in sg.SimpleSensorOptions._field_checks] == [
        "delay",
        "jitter",
        "history_length",
        "padding_type",
        "nan_policy",
        "max_delay",
        "update_period",
        "update_phase",
        "dropout",
        "dropout_burst",
        "noise",
        "bias",
        "random_walk",
        "resolution",
        "noise_density",
        "random_walk_density",
        "bias_instability",
        "bias_correlation_time",
        "scale_factor",
        "bandwidth",
        "replay",
        "replay_channels",
    ]
