"""Recovery: logs generated independently (tests/fitting/synthetic.py: numpy and scipy.signal, not
sensorgym) with known parameters, 2 h at 200 Hz, fitted by sensorgym.fit; and what a short log cannot show.

Tolerances (issue 27): noise density 5%, random-walk density 25%, bandwidth 15%, bias instability 30%,
sample interval exact, loss fraction 10%, mean burst 15%, delay 0.25 samples. Each estimate must also lie
within 3 of its own reported standard errors. Besides the default run's parameter set (TRUTH, 3 seeds),
the slow tests fit three more (a random walk alone, a Gauss-Markov bias alone, a 100 Hz sensor losing 5%
in bursts of 2) to the same tolerances, check on a hard set (the benchmark's gyro: a bias instability of
correlation time 20 s where the random walk crosses the white noise) that the reported uncertainties
cover the truth over eight seeds, and that lost samples (10% and 30%, bursts of 3) do not bias the fit or
its closed loop. docs/fit.md gives the spread over 12 seeds of each set.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sensorgym.fitting.api import fit

from .synthetic import Truth, generate

SEEDS = (0, 1, 2)
TRUTH = Truth(resolution=0.002, dropout=0.02, burst=3.0)
TOLERANCE = {"noise_density": 0.05, "random_walk_density": 0.25, "bandwidth": 0.15, "bias_instability": 0.30}


@pytest.fixture(scope="module", params=SEEDS)
def two_hours(request, tmp_path_factory):
    times, values = generate(TRUTH, 7200.0, seed=request.param)
    path = tmp_path_factory.mktemp(f"rec{request.param}") / "log.npz"
    np.savez(path, t=times, gyro=values)
    return fit(path, ["gyro"], simulate_config=False).channels[0]


def _check(fitted, truth: Truth) -> None:
    """Every term of ``truth`` recovered within its tolerance and 3 of its standard errors, the others
    not identified (or, if identified, consistent with 0 within 3 standard errors)."""
    for term, tolerance in TOLERANCE.items():
        est, true = fitted.noise.estimates[term], getattr(truth, term)
        if true == 0:
            assert not est.identified or est.value < 3 * est.se, (term, est)
            continue
        assert est.identified, (term, est.note)
        assert abs(est.value / true - 1) < tolerance, (term, est.value, true)
        assert abs(est.value - true) < 3 * est.se, (term, est.value, est.se, true)
    if truth.bias_instability > 0:  # a correlation time: its log within 3 of its relative errors
        est = fitted.noise.estimates["bias_correlation_time"]
        assert abs(math.log(est.value / truth.bias_correlation_time)) < 3 * est.se / est.value, est


@pytest.mark.parametrize("term", sorted(TOLERANCE))
def test_error_terms_are_recovered(two_hours, term):
    est = two_hours.noise.estimates[term]
    true = getattr(TRUTH, term)
    assert est.identified, est.note
    assert abs(est.value / true - 1) < TOLERANCE[term], (est.value, true)
    assert abs(est.value - true) < 3 * est.se, (est.value, est.se, true)


def test_correlation_time_comes_with_its_uncertainty(two_hours):
    est = two_hours.noise.estimates["bias_correlation_time"]
    assert abs(est.value - TRUTH.bias_correlation_time) < 3 * est.se


#: other parameter sets (issue 27 audit item 3: recovery held only near TRUTH)
SETS = {
    "random walk alone": Truth(bias_instability=0.0),
    "Gauss-Markov alone": Truth(random_walk_density=0.0),
    "100 Hz, 5% lost": Truth(rate=100.0, noise_density=2e-4, bandwidth=30.0, random_walk_density=2e-5,
                             bias_instability=2e-4, bias_correlation_time=3.0, dropout=0.05, burst=2.0,
                             level=9.81),
}  # fmt: skip


def _fit(truth: Truth, seed: int, tmp_path, duration: float = 7200.0):
    times, values = generate(truth, duration, seed=seed)
    np.savez(tmp_path / "log.npz", t=times, gyro=values)
    return fit(tmp_path / "log.npz", ["gyro"], simulate_config=False).channels[0]


@pytest.mark.slow
@pytest.mark.parametrize("seed", (1, 2))
@pytest.mark.parametrize("name", sorted(SETS))
def test_other_parameter_sets_are_recovered(name, seed, tmp_path):
    truth = SETS[name]
    fitted = _fit(truth, seed, tmp_path)
    _check(fitted, truth)
    assert fitted.timing.sample_interval == pytest.approx(truth.sample_interval, rel=1e-9)
    if truth.dropout:
        assert abs(fitted.timing.dropout / truth.dropout - 1) < 0.10
        assert abs(fitted.timing.burst / truth.burst - 1) < 0.15


#: the benchmark's gyro (benchmarks/bench_fit.py): a bias instability whose bump sits where the random walk
#: crosses the white noise, so that a 2 h log pins it to about 20% only (audit: "not identifiable" with
#: the random walk 62% high at 10.8 of its standard errors)
HARD = Truth(noise_density=0.003, bandwidth=40.0, random_walk_density=1.5e-4, bias_instability=9e-4,
             bias_correlation_time=20.0)  # fmt: skip


@pytest.mark.slow
def test_the_uncertainties_cover_the_truth_where_the_terms_are_hard_to_separate(tmp_path):
    misses, values, lost = 0, 0, 0
    for seed in range(8):
        est = _fit(HARD, seed, tmp_path).noise.estimates
        for term in ("noise_density", "bandwidth", "random_walk_density", "bias_instability"):
            e, true = est[term], getattr(HARD, term)
            if not e.identified:  # allowed: the log cannot tell it apart, and says so
                lost += 1
                continue
            values += 1
            misses += abs(e.value - true) > 2 * e.se
        tc = est["bias_correlation_time"]
        if tc.identified:
            values += 1
            misses += abs(math.log(tc.value / HARD.bias_correlation_time)) > 2 * tc.se / tc.value
    # a 2-sigma interval misses about 1 in 20; over 8 seeds x 5 values allow 4 misses (and 4 terms lost)
    assert misses <= 4 and lost <= 4, (misses, values, lost)


@pytest.mark.slow
@pytest.mark.parametrize("dropout", (0.1, 0.3))
def test_lost_samples_bias_neither_the_fit_nor_its_closed_loop(dropout, tmp_path):
    """Audit item 4: 600 s logs losing 10% in bursts of 3 were inside the band at 75% of tau (98% without
    losses), the noise density 2.4% low; at 40% the top octave was dropped. (Before the fix, on these
    300 s logs: 22 and 12 of 24 tau inside, the noise density 2.4% and 7.4% low on average.)"""
    inside, total, errors = 0, 0, []
    for seed in (1, 2):
        truth = Truth(dropout=dropout, burst=3.0)
        times, values = generate(truth, 300.0, seed=seed)
        np.savez(tmp_path / "lossy.npz", t=times, gyro=values)
        f = fit(tmp_path / "lossy.npz", ["gyro"], envs=8, seed=seed).channels[0]
        c = f.closed_loop
        assert len(c.taus) == 12 and c.taus[-1] <= 30.0 < 2 * c.taus[-1]  # every octave up to duration/10
        inside, total = inside + int(c.inside.sum()), total + len(c.taus)
        est = f.noise.estimates["noise_density"]
        assert abs(est.value - truth.noise_density) < 3 * est.se, (est.value, est.se)
        errors.append(est.value / truth.noise_density - 1)
    assert inside >= 0.9 * total, (inside, total)
    assert abs(np.mean(errors)) < 0.015, errors


def test_timing_and_resolution_are_recovered(two_hours):
    t = two_hours.timing
    assert t.sample_interval == pytest.approx(TRUTH.sample_interval, rel=1e-9)  # exact up to float rounding
    assert abs(t.dropout / TRUTH.dropout - 1) < 0.10
    assert abs(t.burst / TRUTH.burst - 1) < 0.15
    assert two_hours.resolution[0] == pytest.approx(TRUTH.resolution, rel=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_short_log_cannot_show_the_drifts(seed, tmp_path):
    # a minute of a gyro whose random walk and bias instability only show over hours
    truth = Truth(random_walk_density=2e-5, bias_instability=2e-4, bias_correlation_time=300.0)
    times, values = generate(truth, 60.0, seed=seed)
    np.savez(tmp_path / "short.npz", t=times, gyro=values)
    est = fit(tmp_path / "short.npz", ["gyro"], simulate_config=False).channels[0].noise.estimates
    for term in ("random_walk_density", "bias_instability", "bias_correlation_time"):
        assert est[term].value is None and est[term].note, term  # not a number: a reason
    assert abs(est["noise_density"].value / truth.noise_density - 1) < 0.05
    assert est["random_walk_density"].upper > truth.random_walk_density  # the bound it reports holds


def _reference(t: np.ndarray) -> np.ndarray:
    """Band-limited motion after 2 min at rest (smooth start), as a motion-capture rate would be."""
    ramp = np.clip((t - 120.0) / 5.0, 0.0, 1.0)
    ramp = ramp * ramp * (3 - 2 * ramp)
    freqs, amps, phases = (0.23, 0.61, 1.3, 2.7), (0.5, 0.3, 0.2, 0.1), (0.1, 1.7, 2.9, 4.0)
    return ramp * sum(a * np.sin(2 * np.pi * f * t + p) for f, a, p in zip(freqs, amps, phases, strict=True))


@pytest.mark.parametrize("seed", SEEDS)
def test_delay_to_a_fraction_of_a_sample(seed, tmp_path):
    truth = Truth(random_walk_density=2e-5, bias_instability=0.0)
    delay = 3.3 * truth.sample_interval  # not a whole number of samples
    t = np.arange(round(600.0 * truth.rate)) * truth.sample_interval
    times, values = generate(truth, 600.0, seed=seed, signal_in=_reference(t - delay))
    np.savez(tmp_path / "moving.npz", t=t, ref=_reference(t), gyro=np.interp(t, times, values))
    result = fit(tmp_path / "moving.npz", ["gyro"], reference="ref", simulate_config=False)
    est = result.channels[0].delay
    assert abs(est.delay - delay) < 0.25 * truth.sample_interval, (est.delay / truth.sample_interval, 3.3)
    assert abs(est.delay - delay) < 4 * est.se + 1e-4 * truth.sample_interval
    assert result.options["gyro"]["delay"] == pytest.approx(est.delay)
    assert math.isfinite(est.correlation) and est.correlation > 0.9


def test_white_noise_logs_get_no_filter():
    """A white log's scatter at the shortest tau fits a cut-off past Nyquist now and then (seeds 11, 12,
    25 and 28 at 65-73 Hz, 100 Hz sampling, before the rule): such a filter is not identifiable and is not
    reported; the white noise is recovered on every seed."""
    from sensorgym.fitting.allan import allan_deviation, fit_m
    from sensorgym.fitting.estimate import fit_allan

    for seed in (0, 1, 11, 12, 25, 28):
        y = np.random.default_rng(seed).normal(0.0, 0.05, 20000)
        f = fit_allan(allan_deviation(y, 0.01, fit_m(len(y), len(y) // 5)), 0.01)
        assert f.estimates["bandwidth"].value is None, (seed, f.estimates["bandwidth"])
        assert f.params.bandwidth == 0.0
        assert abs(f.estimates["noise_density"].value / 0.005 - 1) < 0.03
