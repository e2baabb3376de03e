"""Constant hooks as class attributes: ``cache_dtype``, ``intermediate_dtype``, ``return_format`` and
``intermediate_format`` are the short form of the ``_get_*`` hooks (the extension contract's names); the
long form (classmethods / instance methods) still works and gives the same bits."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

import sensorgym as sg
from sensorgym.core.sensor import Sensor


@dataclass(frozen=True, kw_only=True)
class LongOptions(sg.SimpleSensorOptions):
    pass


@dataclass(frozen=True, kw_only=True)
class ShortOptions(sg.SimpleSensorOptions):
    pass


def _raw(cls, state, md, raw):
    raw.copy_(torch.as_tensor(state["x"]) * 3.0)


def _counts(cls, md, data, timeline, *, is_measured):
    return data.clamp(0, 255).round().to(torch.uint8)


class LongForm(sg.SimpleSensor):
    """The long form: every hook written out."""

    options_cls = LongOptions

    def _get_return_format(self):
        return (2,)

    def _get_intermediate_format(self):
        return (2,)

    @classmethod
    def _get_cache_dtype(cls):
        return torch.uint8

    @classmethod
    def _get_intermediate_dtype(cls):
        return torch.float32

    _update_raw_data = classmethod(_raw)
    _post_process = classmethod(_counts)


class ShortForm(sg.SimpleSensor):
    options_cls = ShortOptions
    return_format = (2,)
    cache_dtype = torch.uint8
    intermediate_dtype = torch.float32  # declares the space _post_process maps from
    _update_raw_data = classmethod(_raw)
    _post_process = classmethod(_counts)


def test_short_and_long_forms_give_the_same_bits():
    g = torch.Generator().manual_seed(0)
    readings = {}
    for options in (LongOptions, ShortOptions):
        mgr = sg.SensorManager(num_envs=3, dt=0.05, seed=7)
        s = mgr.add_sensor(options(delay=0.05, noise=2.0, history_length=2))
        out = []
        g.manual_seed(0)
        for t in range(6):
            state = {"x": torch.rand(3, 2, generator=g) * 80}
            mgr.reset(state) if t == 0 else mgr.step(state)
            out.append((s.read().clone(), s.read_ground_truth().clone()))
        readings[options] = out
        assert s.read().dtype == torch.uint8 and s.read().shape == (3, 2, 2)
    for (m1, g1), (m2, g2) in zip(readings[LongOptions], readings[ShortOptions], strict=True):
        assert torch.equal(m1, m2) and torch.equal(g1, g2)
    assert (
        ShortForm._get_cache_dtype() is torch.uint8 and ShortForm._get_intermediate_dtype() is torch.float32
    )


def test_a_multi_field_format_and_a_subclass_that_changes_the_value():
    @dataclass(frozen=True, kw_only=True)
    class PairOptions(sg.SimpleSensorOptions):
        pass

    class Pair(sg.SimpleSensor):
        options_cls = PairOptions
        return_format = ((1,), (2,))
        cache_dtype = torch.float32

        @classmethod
        def _update_raw_data(cls, state, md, raw):
            raw.copy_(torch.as_tensor(state["x"]))

    class DoublePair(Pair):
        cache_dtype = torch.float64  # the inherited default hook reads the subclass's value

    assert DoublePair._get_cache_dtype() is torch.float64 and Pair._get_cache_dtype() is torch.float32
    mgr = sg.SensorManager(num_envs=2, dt=0.1)
    s = mgr.add_sensor(PairOptions())
    mgr.reset({"x": torch.arange(6.0).reshape(2, 3)})
    first, second = s.read()
    assert first.shape == (2, 1) and second.tolist() == [[1.0, 2.0], [4.0, 5.0]]


def test_neither_attribute_nor_hook_stays_abstract_and_both_is_refused():
    class Incomplete(sg.SimpleSensor):
        return_format = (1,)

        @classmethod
        def _update_raw_data(cls, state, md, raw):
            pass

    assert Incomplete.__abstractmethods__ == frozenset({"_get_cache_dtype"})
    with pytest.raises(TypeError, match="sets both cache_dtype and _get_cache_dtype"):

        class Both(Sensor):
            cache_dtype = torch.float32

            @classmethod
            def _get_cache_dtype(cls):
                return torch.float32


def test_post_process_still_needs_a_declared_intermediate_space():
    with pytest.raises(TypeError, match="overrides _post_process"):

        class Undeclared(sg.SimpleSensor):
            return_format = (1,)
            cache_dtype = torch.uint8
            _post_process = classmethod(_counts)
