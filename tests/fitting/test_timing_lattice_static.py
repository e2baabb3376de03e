"""Timing from time stamps, the quantization lattice, and the static window."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import signal

from sensorgym.fitting.lattice import lattice_step
from sensorgym.fitting.readers import read_channels
from sensorgym.fitting.static import find_static_window
from sensorgym.fitting.timing import analyse_timing

DATA = Path(__file__).resolve().parents[1] / "data"
SEEDS = (0, 1, 2)


def test_lost_samples_runs_and_their_statistics():
    t = np.delete(np.arange(1000) * 0.005, [10, 11, 12, 500, 700, 701])  # runs of 3, 1 and 2
    timing = analyse_timing(t)
    assert timing.sample_interval == pytest.approx(0.005, rel=1e-12)
    assert timing.lost == 6 and timing.received == 994
    assert timing.dropout == pytest.approx(6 / 1000)
    assert timing.runs.tolist() == [3, 1, 2] and timing.burst == pytest.approx(2.0)
    assert timing.burst_se == pytest.approx(1.0 / math.sqrt(3))


def test_no_losses_give_an_upper_bound_and_no_burst():
    timing = analyse_timing(np.arange(600) * 0.01)
    assert timing.dropout == 0 and timing.burst is None
    assert timing.dropout_upper == pytest.approx(3 / 600)


def test_jittered_time_stamps_are_not_losses():
    # the x-io log: 10.08 ms intervals with a 7.56 ms one now and then (its clock's correction)
    t = np.cumsum(np.where(np.arange(3000) % 31 == 0, 0.00756, 0.01008))
    timing = analyse_timing(t)
    assert timing.lost == 0 and timing.sample_interval == pytest.approx(0.01008)


def test_lattice_with_an_offset_and_in_float32():
    x = np.random.default_rng(0).normal(0, 0.3, 5000)
    on = np.round(x / 0.061) * 0.061 + 0.0123
    assert lattice_step(on)[0] == pytest.approx(0.061, rel=1e-9)
    assert lattice_step(on.astype(np.float32))[0] == pytest.approx(0.061, rel=1e-6)
    assert lattice_step(x) == (None, None)


def test_print_precision_is_not_a_resolution():
    x = np.round(np.random.default_rng(0).normal(1.0, 0.003, 5000), 7)  # a CSV of 7 decimals
    assert lattice_step(x) == (None, None)


def _filtered_noise(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = math.exp(-2 * math.pi * 20 * 0.005)
    return signal.lfilter([1 - a], [1, -a], rng.normal(0, 0.04, n))


@pytest.mark.parametrize("seed", SEEDS)
def test_a_log_at_rest_is_static_throughout(seed):
    # filtered (correlated) noise with a slow drift: no window may be called motion
    n = 200 * 600
    t = np.arange(n) * 0.005
    x = _filtered_noise(seed, n) + np.cumsum(np.random.default_rng(seed).normal(0, 1e-4, n))
    start, end = find_static_window([(t, x)])
    assert start == 0.0 and end == pytest.approx(t[-1])


@pytest.mark.parametrize("seed", SEEDS)
def test_the_longest_still_stretch_is_found(seed):
    n = 200 * 120
    t = np.arange(n) * 0.005
    x = _filtered_noise(seed, n)
    x[4000:6000] += np.sin(np.linspace(0, 6 * np.pi, 2000))  # motion from 20 to 30 s
    x[16000:16400] += 0.3 * np.sin(np.linspace(0, 2 * np.pi, 400))  # and from 80 to 82 s
    start, end = find_static_window([(t, x)])
    assert 30.0 <= start <= 31.0 and 79.0 <= end <= 80.0


def test_the_real_log_static_window():
    names = [f"Gyroscope {a} (deg/s)" for a in "XYZ"] + [f"Accelerometer {a} (g)" for a in "XYZ"]
    chans = read_channels(DATA / "xio_fusion_sensor_data.csv", names)
    start, end = find_static_window([(c.times, c.values) for c in chans])
    assert 118.5 <= start <= 121.0 and end == pytest.approx(chans[0].times[-1])
