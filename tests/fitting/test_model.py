"""The closed-form Allan variance of each error term (sensorgym/fitting/model.py), against an exact double
sum and against the Allan variance of independently simulated series (numpy/scipy, not sensorgym)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import signal

from sensorgym.fitting.allan import allan_variance_batch
from sensorgym.fitting.model import (
    ModelParams,
    _ar1_bracket,
    allan_variance,
    ar1_allan_variance,
    gauss_markov_allan_variance,
    quantization_allan_variance,
    random_walk_allan_variance,
    white_allan_variance,
)

SEEDS = (0, 1, 2)


def exact_avar(autocov, m: int) -> float:
    """AVAR(m) = Var(mean of block 2 - mean of block 1) / 2 by the double sum over the difference filter."""
    h = np.r_[-np.ones(m), np.ones(m)] / m
    lags = np.abs(np.subtract.outer(np.arange(2 * m), np.arange(2 * m)))
    return float(h @ autocov(lags) @ h) / 2.0


@pytest.mark.parametrize("a", [0.0, 0.3, 0.9, 0.999, 1 - 1e-6])
@pytest.mark.parametrize("m", [1, 2, 3, 7, 40])
def test_ar1_closed_form_equals_the_double_sum(a, m):
    closed = float(ar1_allan_variance(2.5, a, np.array([m]))[0])
    assert closed == pytest.approx(exact_avar(lambda lag: 2.5 * a**lag, m), rel=1e-7)


def test_random_walk_closed_form_equals_the_sum_over_increments():
    # S2 - S1 = sum_i c_i e_i with c_i = min(i, 2m - i) for i = 1 .. 2m-1 (the increments between blocks)
    for m in (1, 2, 5, 33):
        c = np.minimum(np.arange(1, 2 * m), 2 * m - np.arange(1, 2 * m))
        exact = float(np.sum(c**2)) / (2 * m * m) * 0.7**2 * 0.01  # q^2 = K^2 T_s, K = 0.7, T_s = 0.01
        assert random_walk_allan_variance(0.7, np.array([m]), 0.01)[0] == pytest.approx(exact, rel=1e-12)


def test_the_series_branch_meets_the_closed_form():
    for m in (1, 10, 1000, 10**5):
        b = 1e-3 / m  # the switch point
        below, above = (
            _ar1_bracket(np.array([m]), b * (1 - 1e-9)),
            _ar1_bracket(np.array([m]), b * (1 + 1e-9)),
        )
        assert below[0] == pytest.approx(above[0], rel=1e-7)
    # far below the switch the series is what the double sum gives
    m, b = 3, 1e-8
    assert _ar1_bracket(np.array([m]), b)[0] * 1.0 / m**2 == pytest.approx(
        exact_avar(lambda lag: np.exp(-b * lag), m), rel=1e-6
    )


def test_white_noise_is_density_squared_over_tau():
    m = np.array([1, 4, 100])
    assert np.allclose(white_allan_variance(0.01, 0.0, m, 0.005), 0.01**2 / (m * 0.005))
    assert np.allclose(quantization_allan_variance(0.1, m), 0.01 / 12 / m)


def _simulate(kind: str, seed: int, n: int, envs: int, ts: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "filtered":
        a = math.exp(-2 * math.pi * 15.0 * ts)
        w = rng.normal(0, 0.02 / math.sqrt(ts), (envs, n))
        zi = (rng.normal(0, 0.02 / math.sqrt(ts) * math.sqrt((1 - a) / (1 + a)), envs) * a)[:, None]
        return signal.lfilter([1 - a], [1, -a], w, axis=1, zi=zi)[0]
    if kind == "random_walk":
        return np.cumsum(rng.normal(0, 3e-3 * math.sqrt(ts), (envs, n)), axis=1)
    if kind == "gauss_markov":
        phi = math.exp(-ts / 0.4)
        w = rng.normal(0, 0.05 * math.sqrt(1 - phi * phi), (envs, n))
        zi = (rng.normal(0, 0.05, envs) * phi)[:, None]
        return signal.lfilter([1.0], [1, -phi], w, axis=1, zi=zi)[0]
    if kind == "quantized":
        return np.round((rng.normal(0, 0.05, (envs, n)) + 0.013) / 0.02) * 0.02
    raise ValueError(kind)


EXPECTED = {
    "filtered": lambda m, ts: white_allan_variance(0.02, 15.0, m, ts),
    "random_walk": lambda m, ts: random_walk_allan_variance(3e-3, m, ts),
    "gauss_markov": lambda m, ts: gauss_markov_allan_variance(0.05, 0.4, m, ts),
    "quantized": lambda m, ts: allan_variance(
        ModelParams(noise_density=0.05 * math.sqrt(ts), resolution=0.02), m, ts
    ),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_closed_form_matches_simulated_series(kind, seed):
    ts, n, envs = 0.01, 4000, 64
    m = np.array([1, 2, 4, 16, 64, 256])
    got = allan_variance_batch(_simulate(kind, seed, n, envs, ts), m)
    want = EXPECTED[kind](m, ts)
    # the pooled estimate's relative error: about sqrt(2 / dof), dof ~ envs * (n / m) / 2 for the
    # overlapping estimator of these noises (fewer for random-walk-like ones): 5 of its sigmas
    dof = envs * np.maximum(n / m / 2.5, 1.0)
    assert np.all(np.abs(got / want - 1) < 5 * np.sqrt(2 / dof) + 0.01), got / want - 1


@pytest.mark.parametrize(
    ("seed", "dropout", "burst"),
    [(0, 0.1, 3.0), (1, 0.3, 3.0), (2, 0.05, 1.0),
     *(pytest.param(s, p, b, marks=pytest.mark.slow) for s in (3, 4) for p, b in ((0.1, 3.0), (0.3, 3.0)))],
)  # fmt: skip
def test_the_closed_form_of_the_received_samples(seed, dropout, burst):
    """Lost samples (issue 27 audit item 4): the Allan variance of the samples as received, at m received
    samples, is the model's with each AR(1) coefficient a replaced by E[a^g] and the random walk's
    increments by E[g] times theirs (g: the gaps), against series made by scipy.signal and thinned by the
    independent generator's loss chain."""
    from sensorgym.fitting.model import Gaps

    from .synthetic import loss_mask

    ts, n, envs = 0.005, 8000, 48
    rng = np.random.default_rng(seed)
    a = math.exp(-2 * math.pi * 20.0 * ts)
    white = rng.normal(0, 0.003 / math.sqrt(ts), (envs, n))
    zi = (rng.normal(0, 0.003 / math.sqrt(ts) * math.sqrt((1 - a) / (1 + a)), envs) * a)[:, None]
    y = signal.lfilter([1 - a], [1, -a], white, axis=1, zi=zi)[0]
    y += np.cumsum(rng.normal(0, 2e-3 * math.sqrt(ts), (envs, n)), axis=1)
    phi = math.exp(-ts / 0.5)
    w = rng.normal(0, 0.01 * math.sqrt(1 - phi * phi), (envs, n))
    y += signal.lfilter([1.0], [1, -phi], w, axis=1, zi=(rng.normal(0, 0.01, envs) * phi)[:, None])[0]
    keeps = [loss_mask(rng, n, dropout, burst) for _ in range(envs)]
    rows = [y[b, k] for b, k in enumerate(keeps)]
    common = min(len(r) for r in rows)
    gaps = Gaps.from_steps(np.concatenate([np.diff(np.flatnonzero(k)) for k in keeps]))
    m = np.array([1, 2, 4, 16, 64, 256])
    got = allan_variance_batch(np.stack([r[:common] for r in rows]), m)
    params = ModelParams(0.003, 20.0, 2e-3, 0.01, 0.5)
    want = allan_variance(params, m, ts, gaps)
    dof = envs * np.maximum(common / m / 2.5, 1.0)
    assert np.all(np.abs(got / want - 1) < 5 * np.sqrt(2 / dof) + 0.01), got / want - 1
    if dropout >= 0.3:  # and there the lossless closed form is wrong by more than that: the losses matter
        assert np.abs(got[0] / allan_variance(params, m, ts)[0] - 1) > 5 * np.sqrt(2 / dof[0]) + 0.01
