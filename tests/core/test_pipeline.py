"""Exact-value conformance for SPEC 2.3-2.5, driven by ramp signals (``x = t + 100 * env``)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pytest
import torch

import sensorgym as sg

from ..helpers import ByteOptions, FilterOptions, ThresholdOptions, as_np, ramp_state

DT = 0.1
B = 3
ENV = np.arange(B) * 100.0  # ramp offset per env


def run(options, steps, num_envs=B, seed=0, start=0, **mgr_kwargs):
    """Reset at ``t=start`` and step through ``start+1 .. start+steps``; yield (t, sensor) after each."""
    mgr = sg.SensorManager(num_envs=num_envs, dt=DT, seed=seed, **mgr_kwargs)
    s = mgr.add_sensor(options)
    mgr.reset(ramp_state(start, num_envs))
    yield start, s
    for t in range(start + 1, start + steps + 1):
        mgr.step(ramp_state(t, num_envs))
        yield t, s


# -- delay ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d_steps", [0, 1, 2, 5])
def test_delay_is_zero_order_hold_of_the_snapshot_d_steps_back(d_steps):
    for t, s in run(sg.StateSensorOptions(key="x", delay=d_steps * DT), 10, start=20):
        expect = max(t - d_steps, 20) + ENV  # "reset" padding: first snapshot before enough exist
        np.testing.assert_array_equal(as_np(s.read())[:, 0], expect)
        np.testing.assert_array_equal(as_np(s.read_ground_truth())[:, 0], t + ENV)  # GT never delayed


@pytest.mark.parametrize(
    ("delay", "expected_steps"), [(0.1, 0), (0.125, 0), (0.2, 1), (0.375, 2), (0.625, 2), (0.875, 4)]
)
def test_delay_rounds_half_to_even_and_warns(delay, expected_steps):
    # dt = 0.25 so that delay / dt is exact in binary and the halves really are halves
    mgr = sg.SensorManager(num_envs=1, dt=0.25)
    with pytest.warns(UserWarning, match=r"not a multiple of dt=0\.25.*rounded to"):
        s = mgr.add_sensor(sg.StateSensorOptions(key="x", delay=delay))
        mgr.reset(ramp_state(0, 1))
    for t in range(1, 7):
        mgr.step(ramp_state(t, 1))
    assert s.read().item() == 6 - expected_steps


def test_delay_that_is_a_multiple_of_dt_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in run(sg.StateSensorOptions(key="x", delay=0.3), 2):
            pass


def test_delay_zero_padding_gives_zeros_until_the_episode_fills():
    for t, s in run(sg.StateSensorOptions(key="x", delay=3 * DT, padding_type="zero"), 6, start=10):
        expect = np.where(t - 3 >= 10, t - 3 + ENV, 0.0)
        np.testing.assert_array_equal(as_np(s.read())[:, 0], expect)


# -- jitter ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("d_steps", "j_steps"), [(1, 0.5), (2, 1.0), (3, 2.5), (2, 2.0)])
def test_jitter_bounds_and_mean(d_steps, j_steps):
    shifts = []
    prev_capture = None
    opts = sg.StateSensorOptions(key="x", delay=d_steps * DT, jitter=j_steps * DT)
    for t, s in run(opts, 2000, num_envs=8, seed=1):
        shift = t + ENV.mean() * 0 - (as_np(s.read())[:, 0] - np.arange(8) * 100.0)
        capture = t - shift
        if prev_capture is not None:
            assert (capture >= prev_capture).all(), "reads went back in capture time"
        prev_capture = capture
        if t > d_steps + 3:  # past the padding
            assert ((shift >= d_steps) & (shift <= d_steps + np.ceil(j_steps))).all()
            shifts.append(shift)
    shifts = np.concatenate(shifts)
    # The sampler's mean is D + jitter/(2 dt) (checked without holds below); a hold replaces a sample
    # that would go back in time by the previous capture, i.e. a smaller shift, so the mean can only drop.
    assert d_steps < shifts.mean() <= d_steps + j_steps / 2 + 0.02
    assert set(np.unique(shifts)) == set(range(d_steps, d_steps + int(np.ceil(j_steps)) + 1))


def test_jitter_sampler_mean_without_holds():
    # One sample per episode: reset every step so the monotone clamp never acts.
    mgr = sg.SensorManager(num_envs=4000, dt=DT, seed=3)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", delay=2 * DT, jitter=1.5 * DT, padding_type="zero"))
    mgr.reset(ramp_state(0, 4000, env_scale=0.0))
    for t in range(1, 4):
        mgr.step(ramp_state(t, 4000, env_scale=0.0))
    mgr.step(ramp_state(4, 4000, env_scale=0.0))
    shifts = []
    for t in range(5, 25):
        mgr.step(ramp_state(t, 4000, env_scale=0.0))
        prev = as_np(s.read())[:, 0]
        shifts.append(t - prev)
        # a fresh jitter sample needs a fresh monotone state: reset all envs' shift history cheaply
        s._storage.measured.delay_line.prev_shift.fill_(1 << 40)
    shifts = np.concatenate(shifts)
    # shift = 2 + floor(j/dt + u), j ~ U[0, 1.5 dt): mean 2 + 0.75, values in {2, 3, 4}
    assert abs(shifts.mean() - 2.75) < 0.02
    assert set(np.unique(shifts)) == {2.0, 3.0, 4.0}


def test_jitter_larger_than_dt_never_wraps_the_ring():
    opts = sg.StateSensorOptions(key="x", delay=4 * DT, jitter=3.5 * DT)
    for t, s in run(opts, 300, num_envs=16, seed=5):
        v = as_np(s.read())[:, 0] - np.arange(16) * 100.0
        assert (v <= max(t - 4, 0)).all() and (v >= max(t - 8, 0)).all()
    assert s._storage.measured.ring.depth == 4 + 4 + 1  # D + ceil(jitter/dt) + 1: exactly what is reachable


# -- history --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("padding", ["reset", "zero"])
def test_history_is_causal_with_delay_jitter_and_noise(padding):
    opts = sg.StateSensorOptions(
        key="x",
        delay=2 * DT,
        jitter=1.5 * DT,
        noise=0.3,
        random_walk=0.1,
        history_length=4,
        padding_type=padding,
    )
    seen = []
    for _, s in run(opts, 40, seed=2, start=7):
        seen.append(as_np(s.read(history_length=0)))
        hist = as_np(s.read())
        assert hist.shape == (B, 4, 1)
        for i in range(4):
            if len(seen) - 1 - i >= 0:
                np.testing.assert_array_equal(hist[:, i], seen[-1 - i])
            else:
                pad = seen[0] if padding == "reset" else np.zeros_like(seen[0])
                np.testing.assert_array_equal(hist[:, i], pad)
        np.testing.assert_array_equal(as_np(s.read(history_length=2)), hist[:, :2])


def test_ground_truth_history_is_gt_i_steps_earlier():
    opts = sg.StateSensorOptions(key="x", delay=DT, noise=1.0, history_length=3, padding_type="zero")
    for t, s in run(opts, 6, start=10):
        gt = as_np(s.read_ground_truth())[:, :, 0]
        expect = np.stack([np.where(t - i >= 10, t - i + ENV, 0.0) for i in range(3)], axis=1)
        np.testing.assert_array_equal(gt, expect)


def test_history_read_bounds():
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", history_length=2))
    plain = mgr.add_sensor(sg.StateSensorOptions(key="x"))
    mgr.reset(ramp_state(0, 2))
    assert s.read(history_length=0).shape == (2, 1)
    with pytest.raises(ValueError, match=r"history_length=3.*only 2.*Fix"):
        s.read(history_length=3)
    with pytest.raises(ValueError, match=r"history_length=1.*only 0"):
        plain.read(history_length=1)
    with pytest.raises(ValueError, match=r"int >= 0"):
        s.read(history_length=-1)


# -- hardware imperfections -------------------------------------------------------------------------------
def test_order_random_walk_noise_bias_then_resolution():
    # raw 0.2 + bias 0.1 = 0.3, quantized to 0.25; quantizing before the bias would give 0.35
    mgr = sg.SensorManager(num_envs=1, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", bias=0.1, resolution=0.25))
    mgr.reset({"x": torch.tensor([[0.2]])})
    assert s.read().item() == 0.25
    assert s.read_ground_truth().item() == pytest.approx(0.2)


def test_resolution_rounds_half_to_even_per_component():
    mgr = sg.SensorManager(num_envs=1, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", resolution=[0.5, 0.5, 0.5, 0.0]))
    mgr.reset({"x": torch.tensor([[0.25, 0.75, 1.25, 0.3]])})
    assert s.read().tolist() == [[0.0, 1.0, 1.0, pytest.approx(0.3)]]


def test_bias_is_a_constant_offset():
    for t, s in run(sg.StateSensorOptions(key="x", bias=2.5), 5):
        np.testing.assert_array_equal(as_np(s.read())[:, 0], t + ENV + 2.5)


def test_noise_is_frozen_at_capture_and_reads_are_idempotent():
    mgr = sg.SensorManager(num_envs=B, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", noise=1.0, max_delay=DT))
    mgr.reset(ramp_state(0, B))
    mgr.step(ramp_state(1, B))
    captured = s.read().clone()
    assert torch.equal(s.read(), captured)  # idempotent within a step
    assert not torch.equal(captured, s.read_ground_truth())
    s.set_delay(DT)
    mgr.step(ramp_state(2, B))
    assert torch.equal(s.read(), captured)  # the delayed read carries the noise drawn at capture


def test_hardware_imperfections_do_not_compound_through_a_recurrent_transform():
    a, bias, phys = 0.5, 10.0, 3.0
    opts = FilterOptions(alpha=a, bias=bias, physics_offset=phys)
    gt_prev = m_prev = None
    for t, s in run(opts, 8, start=4):
        x = t + ENV
        if gt_prev is None:  # steady state at reset: the older slot holds the first raw value
            gt_prev, m_prev = x, x + phys
        gt = x + a * gt_prev
        m = x + phys + a * m_prev  # physics imperfection propagates through the response
        np.testing.assert_allclose(as_np(s.read_ground_truth())[:, 0], gt, rtol=0, atol=1e-4)
        np.testing.assert_allclose(as_np(s.read())[:, 0], m + bias, rtol=0, atol=1e-4)
        gt_prev, m_prev = gt, m


def test_random_walk_is_zero_at_reset():
    for t, s in run(sg.StateSensorOptions(key="x", random_walk=1.0), 3):
        if t == 0:
            np.testing.assert_array_equal(as_np(s.read())[:, 0], ENV)
        else:
            assert (as_np(s.read())[:, 0] != t + ENV).all()


# -- post-processing --------------------------------------------------------------------------------------
def test_uint8_post_process_with_delay_keeps_dtype_and_holds():
    for t, s in run(ByteOptions(delay=2 * DT, padding_type="zero"), 6, num_envs=2, start=250):
        r = s.read()
        assert r.dtype == torch.uint8
        expect = [min(t - 2, 255) if t - 2 >= 250 else 0, 255 if t - 2 >= 250 else 0]
        assert r[:, 0].tolist() == expect
        assert s.read_ground_truth()[:, 0].tolist() == [min(t, 255), 255]


@dataclass(frozen=True, kw_only=True)
class TickOptions(sg.SensorOptions):  # time options only: an integer intermediate has no noise etc.
    key: str = "x"


class TickSensor(sg.SimpleSensor):
    """An integer intermediate and cache (a tick counter): nothing for the imperfection kernel to apply."""

    options_cls = TickOptions
    intermediate_dtype = torch.int32
    cache_dtype = torch.int32
    return_format = (1,)

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        for s in md.sensors:
            raw[:, s.cache_slice] = torch.as_tensor(state[s.options.key]).to(torch.int32)


@pytest.mark.parametrize("executor", ["torch", "numpy"])
def test_integer_intermediate_with_delay_and_history_on_both_executors(executor):
    # the numpy executor (the default for small CPU batches) once failed here: its kernel had no
    # arguments bound for a class without noise, bias, random walk or resolution
    options = TickOptions(delay=DT, history_length=2)
    for t, s in run(options, 6, start=10, executor=executor):
        assert s.read().dtype == torch.int32
        expect = [[max(t - 1, 10) + e, max(t - 2, 10) + e] for e in ENV.astype(int)]
        assert as_np(s.read())[:, :, 0].tolist() == expect
        assert as_np(s.read_ground_truth(history_length=0))[:, 0].tolist() == (t + ENV).astype(int).tolist()
        assert s._manager.executor_used == executor


def test_bool_post_process_threshold_with_delay():
    for t, s in run(ThresholdOptions(threshold=3.5, delay=DT), 6, num_envs=1):
        assert s.read().dtype == torch.bool
        assert s.read().item() == (max(t - 1, 0) > 3.5)
        assert s.read_ground_truth().item() == (t > 3.5)


def test_bool_sensor_noise_can_flip_the_reading():
    mgr = sg.SensorManager(num_envs=2000, dt=DT, seed=0)
    s = mgr.add_sensor(ThresholdOptions(threshold=0.5, noise=0.5))
    mgr.reset({"x": torch.zeros(2000, 1)})
    frac = s.read().float().mean().item()
    assert 0.11 < frac < 0.20  # P(N(0, 0.5) > 0.5) = 0.159
    assert not s.read_ground_truth().any()


# -- resets ----------------------------------------------------------------------------------------
def _ramp_with(reset_env, t, t_reset):
    x = ramp_state(t, B)["x"].clone()
    x[reset_env] = 1000.0 + (t - t_reset)  # the reset env starts a new ramp
    return {"x": x}


@pytest.mark.parametrize("fold", [False, True])
def test_partial_reset_leaves_other_envs_untouched(fold):
    opts = sg.StateSensorOptions(
        key="x", delay=2 * DT, jitter=DT, noise=0.2, random_walk=0.05, history_length=3
    )
    runs = []
    for do_reset in (False, True):
        mgr = sg.SensorManager(num_envs=B, dt=DT, seed=0)
        s = mgr.add_sensor(opts)
        mgr.reset(ramp_state(0, B))
        out = []
        for t in range(1, 12):
            st = ramp_state(t, B) if not (do_reset and t >= 6) else _ramp_with(1, t, 6)
            if do_reset and t == 6:
                if fold:
                    mgr.step(st, reset_mask=np.array([False, True, False]))
                else:
                    mgr.step(ramp_state(t, B))
                    mgr.reset(st, envs_idx=[1])
            else:
                mgr.step(st)
            out.append((as_np(s.read()), as_np(s.read_ground_truth())))
        runs.append(out)
    # rows 0 and 2 are bit-identical with or without the reset of env 1 only if the draws coincide;
    # draws are made for all rows either way, so they do (the fold path draws once, like a step).
    for (a, ga), (b, gb) in zip(runs[0], runs[1], strict=True):
        np.testing.assert_array_equal(ga[[0, 2]], gb[[0, 2]])
        if fold:
            np.testing.assert_array_equal(a[[0, 2]], b[[0, 2]])


def test_read_right_after_reset_is_the_new_episode():
    mgr = sg.SensorManager(num_envs=B, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", delay=3 * DT, history_length=2))
    mgr.reset(ramp_state(0, B))
    for t in range(1, 8):
        mgr.step(ramp_state(t, B))
    before = as_np(s.read())
    mgr.reset(_ramp_with(2, 7, 7), envs_idx=np.array([False, False, True]))
    after = as_np(s.read())
    np.testing.assert_array_equal(after[:2], before[:2])  # others not advanced
    np.testing.assert_array_equal(after[2], [[1000.0], [1000.0]])  # new episode, padded with its first
    assert s.read_ground_truth(0)[2].item() == 1000.0


def test_reset_takes_indices_or_masks_and_checks_them():
    mgr = sg.SensorManager(num_envs=4, dt=DT)
    mgr.add_sensor(sg.StateSensorOptions(key="x"))
    mgr.reset(ramp_state(0, 4))
    mgr.reset(ramp_state(0, 4), envs_idx=[0, 3])
    mgr.reset(ramp_state(0, 4), envs_idx=torch.tensor([1]))
    mgr.reset(ramp_state(0, 4), envs_idx=[])
    with pytest.raises(ValueError, match=r"bool mask has shape \(3,\) but num_envs=4.*Fix"):
        mgr.reset(ramp_state(0, 4), envs_idx=np.ones(3, bool))
    with pytest.raises(ValueError, match=r"out of range for num_envs=4.*Fix"):
        mgr.reset(ramp_state(0, 4), envs_idx=[4])
    with pytest.raises(TypeError, match=r"bool mask of shape \(4,\) or env indices.*Fix"):
        mgr.step(ramp_state(1, 4), reset_mask=np.array([0.5]))


def test_steady_state_timeline_after_partial_reset():
    a = 0.5
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    s = mgr.add_sensor(FilterOptions(alpha=a))
    mgr.reset(ramp_state(0, 2))
    for t in range(1, 5):
        mgr.step(ramp_state(t, 2))
    x = torch.tensor([[40.0], [7.0]])
    mgr.reset({"x": x}, envs_idx=[1])
    assert s.read()[1].item() == 7.0 + a * 7.0  # filter starts from the new episode's raw value
    assert s.read_ground_truth()[1].item() == 7.0 + a * 7.0


# -- per-env setters ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("setter", ["set_noise", "set_bias", "set_random_walk", "set_resolution"])
def test_component_setters_touch_only_given_envs(setter):
    mgr = sg.SensorManager(num_envs=4, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,)))
    other = mgr.add_sensor(sg.StateSensorOptions(key="y", shape=(3,)))
    mgr.reset({"x": torch.full((4, 2), 0.3), "y": torch.zeros(4, 3)})
    getattr(s, setter)([0.5, 2.0], envs_idx=[1, 3])
    md = mgr.metadata(sg.StateSensor)
    name = setter[4:]
    param = getattr(md, name)
    assert param[:, :2].tolist() == [[0, 0], [0.5, 2.0], [0, 0], [0.5, 2.0]]
    assert (param[:, 2:] == 0).all()  # the other sensor's columns are untouched
    for _ in range(3):
        mgr.step({"x": torch.full((4, 2), 0.3), "y": torch.zeros(4, 3)})
    r = as_np(s.read())
    np.testing.assert_allclose(r[[0, 2]], 0.3)
    assert (r[[1, 3]] != np.float32(0.3)).any()
    np.testing.assert_array_equal(as_np(other.read()), 0.0)


def test_set_delay_per_env():
    mgr = sg.SensorManager(num_envs=3, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", max_delay=3 * DT))
    mgr.reset(ramp_state(0, 3))
    s.set_delay([0.0, DT, 3 * DT], envs_idx=[0, 1, 2])
    for t in range(1, 8):
        mgr.step(ramp_state(t, 3))
    np.testing.assert_array_equal(as_np(s.read())[:, 0], [7, 6 + 100, 4 + 200])
    s.set_delay(0.0, envs_idx=[2])  # shorter delay: jump forward at once
    mgr.step(ramp_state(8, 3))
    assert s.read()[2].item() == 208
    s.set_delay(3 * DT, envs_idx=[2])  # longer delay: hold, never go back in capture time
    seen = []
    for t in range(9, 13):
        mgr.step(ramp_state(t, 3))
        seen.append(s.read()[2].item() - 200)
    assert seen == [8, 8, 8, 9]
    with pytest.raises(ValueError, match=r"exceeds max_delay=0\.3.*Fix"):
        s.set_delay(4 * DT)
    with pytest.raises(ValueError, match=r"jitter .* exceeds delay"):
        s.set_jitter(DT, envs_idx=[0])


def test_set_delay_on_a_sensor_built_without_a_ring_explains_the_fix():
    mgr = sg.SensorManager(num_envs=1, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x"))
    mgr.reset(ramp_state(0, 1))
    with pytest.raises(ValueError, match=r"sized for 0.*max_delay=0\.1"):
        s.set_delay(DT)


def test_setter_values_are_checked():
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,)))
    mgr.reset({"x": torch.zeros(2, 3)})
    with pytest.raises(ValueError, match=r"set_noise.*>= 0"):
        s.set_noise(-1.0)
    with pytest.raises(ValueError, match=r"cannot be broadcast to \(n_envs=2, components=3\)"):
        s.set_bias([1.0, 2.0])
    with pytest.raises(TypeError, match=r"setters take values, not distributions"):
        s.set_noise(sg.Uniform(0, 1))
    with pytest.raises(ValueError, match=r"finite"):
        s.set_bias(float("nan"))
