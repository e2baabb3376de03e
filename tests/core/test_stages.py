"""The capture is planned at build from named stages; the imperfection kernel is one function."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.core.metadata import CaptureContext
from sensorgym.core.stages import PadRing
from sensorgym.core.terms import TERMS, run_plan
from sensorgym.core.xp import TORCH


def _storage(**opts):
    mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), **opts))
    mgr.reset({"x": torch.zeros(2, 2)})
    return mgr, s, mgr.storage(sg.StateSensor)


def test_zero_copy_class_has_no_stage():
    _, _, st = _storage(noise=0.1)
    assert st.stage_names() == [] and st.stage_names(reset=True) == []
    assert st.measured.is_alias and st.gt.is_alias


def test_stages_follow_the_configuration():
    # GT is a zero-copy view in all three (no stage); the measured branch differs
    assert _storage(delay=0.2)[2].stage_names() == ["ProjectIntoRing", "hold_fixed_shift"]
    assert _storage(delay=0.2, jitter=0.1)[2].stage_names() == ["ProjectIntoRing", "sample_delay"]
    assert _storage(dropout=0.5)[2].stage_names() == ["CopyToReturnCache", "SampleAndHold"]
    st = _storage(delay=0.1, history_length=2)[2]
    assert st.stage_names() == [
        "ProjectIntoRing", "ProjectIntoRing", "hold_fixed_shift", "WriteHistory",
    ]  # fmt: skip
    assert st.stage_names(reset=True) == [
        "ProjectIntoRing", "PadRing", "ProjectIntoRing", "PadRing", "hold_fixed_shift",
        "WriteHistory", "PadRing",
    ]  # fmt: skip


def test_a_setter_replans_the_delay_stage():
    mgr, s, st = _storage(delay=0.1, max_delay=0.3)
    assert st.stage_names()[-1] == "hold_fixed_shift"
    s.set_delay(0.3, envs_idx=[1])
    assert st.stage_names()[-1] == "sample_delay"
    state = mgr.state_dict()
    fresh, _, fresh_st = _storage(delay=0.1, max_delay=0.3)
    fresh.load_state_dict(state)
    assert fresh_st.stage_names()[-1] == "sample_delay"


def test_the_capture_context_is_frozen_and_replaced():
    mgr, _, st = _storage(delay=0.1)
    ctx = st.md.context
    assert ctx.reset_mask is None and ctx.advancing and st.md.reset_mask is None
    try:
        ctx.advancing = False
    except AttributeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("CaptureContext must be frozen")
    seen = []

    class Spy(sg.StateSensor):
        options_cls = type("SpyOptions", (sg.StateSensorOptions,), {})

        @classmethod
        def _update_raw_data(cls, state, md, raw):
            seen.append(md.context)
            super()._update_raw_data(state, md, raw)

    mgr = sg.SensorManager(num_envs=2, dt=0.1)
    mgr.add_sensor(Spy.options_cls(key="x", shape=(1,)))
    mgr.reset({"x": torch.zeros(2, 1)}, envs_idx=[1])
    mgr.step({"x": torch.zeros(2, 1)}, reset_mask=[0])
    mgr.step({"x": torch.zeros(2, 1)})
    assert [c.advancing for c in seen] == [False, True, True]
    assert seen[0].rows.tolist() == [False, True] and seen[1].rows is None
    assert seen[1].reset_mask.tolist() == [True, False] and seen[2].reset_mask is None


def test_kernel_order_random_walk_noise_bias_resolution():
    """The built-in terms' operations, run by run_plan in TERMS order: walk, noise, bias, resolution."""
    ops = {term.name: term.apply for term in TERMS}
    assert [t.name for t in TERMS] == [
        "scale_factor", "random_walk", "bias_instability", "white_noise", "lowpass", "replay", "bias",
        "resolution",
    ]  # fmt: skip
    data, scratch = torch.tensor([[1.0, 1.0]]), torch.empty(1, 2)
    walk = torch.tensor([[0.5, 0.0]])
    plan = (
        (ops["random_walk"], (scratch, walk, torch.tensor([[1.0, 1.0]]), torch.tensor([[0.25, 0.0]]))),
        (ops["white_noise"], (scratch, torch.tensor([[2.0, -2.0]]), torch.tensor([[0.1, 0.1]]))),
        (ops["bias"], (torch.tensor([[0.0, 0.3]]),)),
        (ops["resolution"], (torch.tensor([[0.5, 0.5]]), None, None)),  # every component quantized to 0.5
    )
    run_plan(TORCH, plan, data, None, None)  # walk += 1 * 0.25, noise = draw * std
    assert walk.tolist() == [[0.75, 0.0]]
    assert data.tolist() == [[2.0, 1.0]]  # round(1.95 / 0.5) * 0.5, round(1.1 / 0.5) * 0.5
    plan = ((ops["random_walk"], (scratch, walk, torch.ones(1, 2), torch.ones(1, 2))),)
    run_plan(TORCH, plan, data, None, torch.tensor([True]))
    assert walk.tolist() == [[0.0, 0.0]]  # a reset snapshot shows no drift


@pytest.mark.parametrize("padding", ["reset", "zero"])
def test_numpy_padding_writes_only_the_reset_rows_with_or_without_their_indices(padding):
    """The padding stage is one definition on the executor's ``pad_rows``: on numpy it pads the rows of
    ``ctx.reset_index`` (or of the mask, for a context made without the indices); either way only the
    masked rows change, and both give the torch executor's values."""
    managers = {}
    for executor in ("torch", "numpy"):
        m = sg.SensorManager(num_envs=3, dt=0.1, seed=0, executor=executor)
        m.add_sensor(
            sg.StateSensorOptions(key="x", shape=(2,), history_length=3, padding_type=padding), name="a"
        )
        m.reset({"x": torch.zeros(3, 2)})
        for t in range(3):
            m.step({"x": torch.full((3, 2), t + 1.0)})
        managers[executor] = m
    mask = torch.tensor([True, False, True])
    stage, torch_stage = (
        next(s for s in managers[e].storage(sg.StateSensor).reset_stages if type(s) is PadRing)
        for e in ("numpy", "torch")
    )
    assert stage.xp.name == "numpy" and torch_stage.xp.name == "torch"
    torch_stage(CaptureContext(mask, None, True))
    expected = torch_stage.ring.buffer.clone()
    for index in (np.flatnonzero(mask.numpy()), None):
        before = stage.ring.buffer.clone()
        stage(CaptureContext(mask, None, True, reset_index=index))
        after = stage.ring.buffer
        assert torch.equal(after[:, 1], before[:, 1])  # the row not reset is untouched
        assert torch.equal(after, expected)
        stage.ring.buffer.copy_(before)
