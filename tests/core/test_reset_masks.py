"""Which envs a reset argument selects: no input is silently misread (issue 23, item 14).

``SensorManager.step(state, reset_mask=...)`` takes a bool mask, a 0/1 integer done vector of shape ``(B,)``
(rsl_rl's and Isaac Lab's ``dones``) or env indices; an integer vector that reads both ways is refused.
``reset(state, envs_idx=...)`` and the setters take a bool mask or env indices. An index given twice is
refused everywhere. A ramp state with a 2-step delay
makes a reset visible exactly: a reset env reads its new value at once (``"reset"`` padding), the others
still read the value of two steps ago.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sensorgym as sg

B, DT = 4, 0.1


def _ramp(t: int, b: int = B) -> dict:
    return {"x": torch.full((b, 1), float(t))}


def _manager(b: int = B, **options) -> tuple[sg.SensorManager, sg.Sensor]:
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=0)
    sensor = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), delay=2 * DT, **options))
    mgr.reset(_ramp(0, b))
    for t in range(1, 4):
        mgr.step(_ramp(t, b))
    return mgr, sensor


@pytest.mark.parametrize(
    "dones",
    [
        torch.tensor([0, 0, 1, 0]),  # rsl_rl: dones as a long tensor
        torch.tensor([0, 0, 1, 0], dtype=torch.int32),
        np.array([0, 0, 1, 0]),
        [0, 0, 1, 0],
        np.array([False, False, True, False]),
    ],
    ids=["long-tensor", "int32-tensor", "int-array", "int-list", "bool-mask"],
)
def test_an_integer_done_vector_resets_the_done_envs_only(dones):
    mgr, sensor = _manager()
    mgr.step(_ramp(4), reset_mask=dones)
    # env 2 starts an episode at 4 (its delayed read is the reset snapshot); the others read 4 - 2
    assert sensor.read()[:, 0].tolist() == [2.0, 2.0, 4.0, 2.0]
    assert mgr.episode.steps.tolist() == [4, 4, 0, 4]


def test_integer_envs_idx_are_indices_and_a_done_vector_there_is_refused_with_the_fix():
    """``reset``'s and the setters' ``envs_idx`` are env indices (a bool mask too): with one or two envs
    ``[0]`` and ``[0, 1]`` select those envs, and a done vector (repeated 0/1) is refused, not misread."""
    mgr, sensor = _manager()
    with pytest.raises(ValueError, match=r"envs_idx=\[1, 0, 0, 1\].*more than once.*dones\.bool\(\)"):
        mgr.reset(_ramp(9), envs_idx=torch.tensor([1, 0, 0, 1]))
    mgr.reset(_ramp(9), envs_idx=torch.tensor([1, 0, 0, 1]).bool())
    assert sensor.read()[:, 0].tolist() == [9.0, 1.0, 1.0, 9.0]
    for b, idx in ((1, [0]), (2, [0, 1]), (2, np.array([1, 0]))):
        mgr, sensor = _manager(b)
        mgr.reset(_ramp(9, b), envs_idx=idx)
        assert sensor.read()[:, 0].tolist() == [9.0] * b
        sensor.set_delay(0.0, envs_idx=idx)  # the setters read indices too


def test_a_done_vector_of_zeros_is_a_plain_step_with_the_same_random_numbers():
    noisy = {"noise": 0.1, "jitter": DT}
    (a, sa), (b, sb) = _manager(**noisy), _manager(**noisy)
    for t in range(4, 9):
        a.step(_ramp(t), reset_mask=torch.zeros(B, dtype=torch.long))
        b.step(_ramp(t), reset_mask=np.zeros(B, bool))
        assert torch.equal(sa.read(), sb.read())
    assert a.episode.steps.tolist() == [8] * B


def test_indices_still_select_envs():
    mgr, sensor = _manager()
    mgr.step(_ramp(4), reset_mask=[3, 1])
    assert sensor.read()[:, 0].tolist() == [2.0, 4.0, 2.0, 4.0]
    mgr.reset(_ramp(7), envs_idx=torch.tensor([0]))
    assert sensor.read()[:, 0].tolist() == [7.0, 4.0, 2.0, 4.0]


@pytest.mark.parametrize("call", ["step", "reset"])
@pytest.mark.parametrize("indices", [[0, 3, 3], torch.tensor([2, 2]), np.array([1, 0, 1])])
def test_repeated_indices_are_refused_naming_the_option_the_value_and_the_fix(call, indices):
    mgr, sensor = _manager()
    before = sensor.read().clone()
    what = "reset_mask" if call == "step" else "envs_idx"
    with pytest.raises(ValueError, match=rf"{what}=\[.*more than once.*Fix: give each env once"):
        if call == "step":
            mgr.step(_ramp(4), reset_mask=indices)
        else:
            mgr.reset(_ramp(4), envs_idx=indices)
    assert torch.equal(sensor.read(), before)
    assert mgr.episode.steps.tolist() == [3] * B  # nothing moved


@pytest.mark.parametrize("b, value", [(1, [0]), (1, torch.tensor([0])), (2, [0, 1]), (2, np.array([1, 0]))])
def test_an_integer_reset_mask_that_reads_both_ways_is_refused(b, value):
    mgr, _ = _manager(b)
    with pytest.raises(ValueError, match=r"reset_mask=\[.*ambiguous.*Fix: pass a bool mask"):
        mgr.step(_ramp(4, b), reset_mask=value)


def test_a_float_done_vector_is_refused_with_the_fix():
    mgr, _ = _manager()
    with pytest.raises(TypeError, match=r"reset_mask=\[0.0, 0.0, 1.0, 0.0\].*Fix: pass a bool mask"):
        mgr.step(_ramp(4), reset_mask=torch.tensor([0.0, 0.0, 1.0, 0.0]))
