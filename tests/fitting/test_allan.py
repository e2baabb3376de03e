"""The Allan deviation of a log is allantools' overlapping deviation; its band and the batched estimator."""

from __future__ import annotations

import allantools
import numpy as np
import pytest

from sensorgym.fitting.allan import allan_deviation, allan_variance_batch, fit_m, noise_alpha, octave_m

SEEDS = (0, 1, 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_equals_allantools_overlapping_deviation(seed):
    rng = np.random.default_rng(seed)
    y = 9.81 + rng.normal(0, 0.02, 30000) + np.cumsum(rng.normal(0, 1e-4, 30000))  # a mean far from 0
    m = fit_m(len(y), len(y) // 5)
    ours = allan_deviation(y, 0.005, m)
    taus, adev, _, _ = allantools.oadev(y, rate=200.0, data_type="freq", taus=m * 0.005)
    assert np.array_equal(ours.m, np.rint(taus * 200).astype(int))
    np.testing.assert_allclose(ours.adev, adev, rtol=1e-8)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_batched_estimator_pools_allantools_over_rows(seed):
    rows = np.random.default_rng(seed).normal(0, 1, (5, 3000)).cumsum(axis=1) * 0.01
    m = octave_m(3000)
    pooled = allan_variance_batch(rows, m)
    per_row = np.array(
        [allantools.oadev(r, rate=1.0, data_type="freq", taus=m.astype(float))[1] ** 2 for r in rows]
    )
    np.testing.assert_allclose(pooled, per_row.mean(axis=0), rtol=1e-8)


def test_the_95_percent_band_covers_the_truth_about_95_percent_of_the_time():
    # white noise of known deviation: count how often the band misses it, over 60 logs x 6 octaves
    misses, total = 0, 0
    for seed in range(60):
        y = np.random.default_rng(100 + seed).normal(0, 1.0, 4000)
        a = allan_deviation(y, 1.0, octave_m(4000, hi=400))
        truth = 1.0 / np.sqrt(a.m)
        misses += int(np.sum((truth < a.lo) | (truth > a.hi)))
        total += len(a.m)
    assert 0.01 < misses / total < 0.10, misses / total  # 5% expected; a binomial 3-sigma range


def test_noise_type_from_the_local_slope():
    m = 2.0 ** np.arange(12)
    assert set(noise_alpha(m, 1.0 / m)) == {0}  # white frequency
    assert set(noise_alpha(m, np.ones_like(m))) == {-1}  # flicker
    assert set(noise_alpha(m, m)) == {-2}  # random walk
    assert set(noise_alpha(m, 1.0 / m**2)) == {0}  # steeper than white counts as white


def test_averaging_factors():
    assert octave_m(100).tolist() == [1, 2, 4, 8, 16, 32]
    assert octave_m(1000, lo=2, hi=100).tolist() == [2, 4, 8, 16, 32, 64]
    assert fit_m(10000, 40).tolist() == [1, 2, 3, 4, 6, 8, 11, 16, 23, 32]
