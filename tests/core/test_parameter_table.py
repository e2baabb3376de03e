"""The parameter table: per-env values from options, resampling at reset, setters, randomization."""

from __future__ import annotations

import pytest
import torch

import sensorgym as sg

from .helpers import sensors, table


def test_values_from_options_per_component_and_derived_tables():
    with pytest.warns(UserWarning, match="rounded to 2 step"):
        p = table(sensors(dict(delay=0.25, jitter=0.1, noise=(0.1, 0.2), resolution=0.5, width=2)))
        values = p.components.values
    assert p.times.delay_steps.tolist() == [[2], [2]]  # round(2.5) = 2: half to even
    assert p.times.jitter_steps[0, 0].item() == pytest.approx(1.0)  # min(jitter, delay) / dt
    assert p.times.jitter_ceil.tolist() == [[1], [1]]
    assert values["noise"][0].tolist() == pytest.approx([0.1, 0.2])
    assert (
        values["resolution"][0].tolist() == [0.5, 0.5] and p.components.resolution_all_active
    )  # steps: the resolution term
    assert (
        p.components.nonzero["noise"]
        and p.components.nonzero["resolution"]
        and p.times.has_jitter
        and not p.components.nonzero["bias"]
    )
    assert p.times.fixed_shift is None  # jitter: the shift varies


def test_fixed_shift_only_when_nothing_can_vary():
    assert table(sensors(dict(delay=0.2), dict(delay=0.2))).times.fixed_shift == 2
    assert table(sensors(dict(delay=0.2), dict(delay=0.1))).times.fixed_shift is None
    assert table(sensors(dict(delay=sg.Choice([0.1, 0.2])))).times.fixed_shift is None


def test_resample_draws_only_the_masked_envs_and_holds_the_rest():
    p = table(sensors(dict(bias=sg.Uniform(1.0, 2.0), delay=sg.Choice([0.1, 0.3]))), num_envs=64)
    values = p.components.values
    p.resample(torch.ones(64, dtype=torch.bool))
    first_bias, first_delay = values["bias"].clone(), p.times.delay_steps.clone()
    assert ((first_bias >= 1.0) & (first_bias < 2.0)).all()
    assert set(first_delay.flatten().tolist()) == {1, 3}
    mask = torch.arange(64) < 32
    p.resample(mask)
    assert torch.equal(values["bias"][~mask], first_bias[~mask]) and not torch.equal(
        values["bias"][mask], first_bias[mask]
    )
    s = p.sensors[0]
    values = p.randomization(s)
    assert list(values) == ["delay", "bias"] or set(values) == {"delay", "bias"}
    assert torch.allclose(values["delay"], p.times.delay_steps.float() * 0.1)
    assert p.randomized_components(s) == {"bias": [0], "delay": [0]}


def test_setters_validate_then_write():
    p = table(sensors(dict(delay=0.2, max_delay=0.4, width=2)))
    values = p.components.values
    rows = torch.tensor([1])
    p.set_component(p.sensors[0], "noise", [0.5, 0.0], rows)
    assert values["noise"].tolist() == [[0.0, 0.0], [0.5, 0.0]] and p.components.nonzero["noise"]
    with pytest.raises(ValueError, match=r"noise must be >= 0"):
        p.set_component(p.sensors[0], "noise", -1.0, rows)
    with pytest.raises(ValueError, match=r"jitter .* exceeds delay"):
        p.set_time(p.sensors[0], "jitter", 0.3, rows, max_shift=4)
    with pytest.raises(ValueError, match="sized for 2"):
        p.set_time(p.sensors[0], "delay", 0.4, rows, max_shift=2)
    assert p.times.fixed_shift == 2  # a refused setter changes nothing
    p.set_time(p.sensors[0], "delay", 0.4, rows, max_shift=4)
    assert p.times.delay_steps.tolist() == [[2], [4]] and p.times.fixed_shift is None
    flags = p.flags()
    fresh = table(sensors(dict(delay=0.2, max_delay=0.4, width=2)))
    fresh.load_flags(flags)
    assert fresh.flags() == flags
