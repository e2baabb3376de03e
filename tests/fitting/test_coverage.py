"""Calibrated uncertainties of `sensorgym fit` (issue 33 items 10 and 11), on logs generated independently
from the error model's closed forms (docs/error_model.md) with published IMU parameter sets
(tests/fitting/published.py: numpy and scipy.signal, no sensorgym code).

A value's "±2 se interval" is read on the log scale, ``|log(value / truth)| <= 2 se / value`` (the fit's
standard errors are those of the logs of its parameters; for the small relative errors of a noise density
this is the linear ``value ± 2 se``). The slow tests give docs/fit.md's coverage table.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sensorgym.fitting.api import fit

from .published import PUBLISHED, Params, generate, motion

TERMS = ("noise_density", "bandwidth", "random_walk_density", "bias_instability", "bias_correlation_time")


def _fit(p: Params, duration: float, seed: int, tmp_path):
    times, values = generate(p, duration, seed)
    np.savez(tmp_path / "log.npz", t=times, y=values)
    return fit(tmp_path / "log.npz", ["y"], simulate_config=False).channels[0].noise


def _holds(value: float, se: float, truth: float) -> bool:
    return abs(math.log(value / truth)) <= 2.0 * se / value


@pytest.mark.parametrize("seed", (8, 13))
def test_a_walk_is_not_read_as_a_bias(seed, tmp_path):
    """Item 10: an hour of the EuRoC accelerometer (a walk of 0.003, no bias). On d71066f these seeds gave
    "random walk not identifiable (< 0.0026 at 95%)" and (< 0.00281), bounds that exclude the truth, and a
    Gauss-Markov bias of tau_c 182 and 188 s instead; the reason given ("no rise at the longest tau: the log
    is too short") contradicted the log's rise. Now the walk is the value written, within its ±2 se, and
    where a bias alone explains the hour about as well it is given as the alternative, with its bounds."""
    p, duration = PUBLISHED["EuRoC acc"]
    noise = _fit(p, duration, seed, tmp_path)
    walk = noise.estimates["random_walk_density"]
    assert walk.identified, walk.note
    assert _holds(walk.value, walk.se, p.random_walk_density), (walk.value, walk.se)
    assert not noise.estimates["bias_instability"].identified
    alt = noise.alternative
    assert alt is not None and alt.kind == "Gauss-Markov bias"
    low, high = alt.ranges["bias_correlation_time"]
    assert low > 0.0 and high > low  # a slow bias (its fall past the log's longest tau), bounded below
    # the walk's and the bias's slope at short tau agree: K^2 = 2 sigma_g^2 / tau_c, within a factor 2
    slope = math.sqrt(2.0 / alt.params.bias_correlation_time) * alt.params.bias_instability
    assert 0.5 < slope / walk.value < 2.0


@pytest.mark.parametrize("seed", (1104, 1504))
def test_a_bias_that_a_walk_explains_almost_as_well_says_so(seed, tmp_path):
    """Item 10, the other way round: the ADIS16448's bias (0.004 deg/s, tau_c 50 s) on logs whose hour
    shows it at 90-100 s. The bias is written, its ±2 se holding the truth, and the walk that explains the
    hour nearly as well is the alternative (d71066f had no alternative)."""
    p, duration = PUBLISHED["ADIS16448 gyro"]
    noise = _fit(p, duration, seed, tmp_path)
    for term in ("bias_instability", "bias_correlation_time"):
        e = noise.estimates[term]
        assert e.identified and _holds(e.value, e.se, getattr(p, term)), (term, e)
    alt = noise.alternative
    assert alt is not None and alt.kind == "random walk" and alt.score_difference > 0
    low, high = alt.ranges["random_walk_density"]
    assert 0 < low < alt.params.random_walk_density < high


def _delay_fit(seed: int, tmp_path):
    """A gyro through its 41 Hz filter (MPU-9250-like, 200 Hz) lagging a strong motion by 13.5 ms (2.7
    samples): the delay itself is pinned to a hundredth of a millisecond, the filter's lag is not."""
    p = Params(noise_density=0.01, bandwidth=41.0)
    delay = 0.0135

    def signal(t):
        return 20.0 * motion(t)

    times, values = generate(p, 600.0, 7000 + seed, true_value=signal, delay=delay)
    grid = np.arange(round(600.0 * p.rate)) * p.sample_interval
    np.savez(tmp_path / "moving.npz", t=grid, ref=signal(grid), gyro=np.interp(grid, times, values))
    est = fit(tmp_path / "moving.npz", ["gyro"], reference="ref", simulate_config=False).channels[0].delay
    return est, delay


@pytest.mark.parametrize("seed", (1, 3, 4))
def test_the_delay_error_includes_the_bandwidths(seed, tmp_path):
    """Item 11: the delay is the transport delay on top of the fitted filter's own lag, so the cut-off's
    uncertainty is the delay's too. On d71066f these seeds read 13.456, 13.441 and 13.595 ms ± 0.012 for
    13.5 (3.7, 4.9 and 8.0 se off); the se now includes the filter's (about 0.06 ms)."""
    est, delay = _delay_fit(seed, tmp_path)
    assert abs(est.delay - delay) < 2.0 * est.se, (est.delay, est.se)
    assert est.se > 0.03e-3


def _coverage(results: list[tuple[str, dict]]) -> dict[str, tuple[int, int]]:
    """Per term: fits whose ±2 se interval (or, where the term is the alternative's, its interval) holds
    the truth, of the fits of a set that has it."""
    out: dict[str, list[int]] = {}
    for name, estimates in results:
        p = PUBLISHED[name][0]
        for term in TERMS:
            truth = getattr(p, term)
            if truth <= 0:
                continue
            e, alt = estimates[term], estimates["alternative"]
            if e.identified:
                ok = _holds(e.value, e.se, truth)
            elif alt is not None and term in alt.ranges:
                ok = alt.ranges[term][0] <= truth <= alt.ranges[term][1]
            else:
                ok = False
            out.setdefault(term, [0, 0])
            out[term][0] += ok
            out[term][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


SEEDS = 30


@pytest.mark.slow
def test_the_uncertainties_cover_the_truth_on_published_parameter_sets(tmp_path):
    """Item 11: over 30 seeds of each published set (docs/fit.md's table), every term's ±2 se interval
    holds the truth in 90-98% of the fits, pooled over the sets that have the term; no set falls under
    75% (d71066f: the walk 85% pooled, its bounds excluding the truth in 1 of 15 hour-long logs); a term a
    set does not have is reported (not as an alternative) in under 5% of the fits."""
    results, spurious, count = [], 0, 0
    for index, (name, (p, duration)) in enumerate(PUBLISHED.items()):
        for seed in range(SEEDS):
            noise = _fit(p, duration, 100 * seed + index, tmp_path)
            results.append((name, {**noise.estimates, "alternative": noise.alternative}))
            absent = [t for t in ("random_walk_density", "bias_instability") if getattr(p, t) == 0]
            alt_terms = noise.alternative.ranges if noise.alternative is not None else {}
            spurious += any(noise.estimates[t].identified and not alt_terms for t in absent)
            count += 1
    pooled = _coverage(results)
    print("coverage per term:", {k: f"{a}/{b}" for k, (a, b) in pooled.items()})
    for name in PUBLISHED:
        per_set = _coverage([r for r in results if r[0] == name])
        print(name, {k: f"{a}/{b}" for k, (a, b) in per_set.items()})
        assert all(a >= 0.75 * b for a, b in per_set.values()), (name, per_set)
    for term, (held, total) in pooled.items():
        assert 0.90 <= held / total <= 0.98, (term, held, total)
    assert spurious <= 0.05 * count, (spurious, count)


@pytest.mark.slow
def test_the_delay_uncertainty_covers_the_truth(tmp_path):
    """Item 11: over 40 seeds the delay's ±2 se holds the true 13.5 ms in at least 90% of the fits, and the
    errors in standard errors spread as a standard normal's (sd between 0.75 and 1.3: 0.93 measured, 40 of
    40 held, where 38.7 are expected; d71066f: 12 of 40 held, sd 5.3, its se 0.012 ms leaving the filter's lag
    out). With 40 fits the spread says more than the count: a 95% interval holds 36 to 40 of them."""
    fits = [_delay_fit(seed, tmp_path) for seed in range(40)]
    z = np.array([(est.delay - delay) / est.se for est, delay in fits])
    print("delay coverage", int(np.sum(np.abs(z) <= 2)), "of 40; sd", float(z.std()))
    assert np.sum(np.abs(z) <= 2) >= 36 and 0.75 <= z.std() <= 1.3, z
