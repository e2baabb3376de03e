"""Lost samples from jittered time stamps (issue 33 item 16b: stamps off by up to ±0.4 T_s were read as 6.7%
lost). An interval counts ``m - 1`` lost samples only where the stamps show ``m`` slots of the sensor's own
grid: jitter alone loses nothing, real gaps are counted exactly, against the truth of a generator that
knows which samples it dropped (a property test over rates, jitter, loss patterns and clock errors)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sensorgym as sg
from sensorgym.fitting.timing import analyse_timing

T_S = 0.01


def stamps(n: int, jitter: float, seed: int, drop: np.ndarray | None = None, *, period: float = T_S,
           t0: float = 0.0, rate_error: float = 0.0, wander: float = 0.0) -> np.ndarray:  # fmt: skip
    """``n`` sample slots of ``period`` from ``t0``, each stamp off by ``U(-jitter, jitter) * period``, on a
    clock ``rate_error`` fast whose rate also wanders by ``wander`` (one sine over the log), the slots
    ``drop`` removed."""
    rng = np.random.default_rng(seed)
    slots = np.arange(n, dtype=np.float64)
    drift = wander * n / (2 * np.pi) * (1.0 - np.cos(2 * np.pi * slots / n))  # in slots
    t = t0 + (slots + drift + rng.uniform(-jitter, jitter, n)) * period * (1.0 + rate_error)
    return t if drop is None else np.delete(t, drop)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stamps_jittered_by_four_tenths_of_a_sample_lose_nothing(seed):
    timing = analyse_timing(stamps(20_000, 0.4, seed))
    assert (timing.lost, timing.dropout, timing.burst) == (0, 0.0, None)
    assert timing.sample_interval == pytest.approx(T_S, rel=0.02)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_real_gaps_among_jittered_stamps_are_counted_exactly(seed):
    rng = np.random.default_rng(100 + seed)
    starts = np.sort(rng.choice(np.arange(10, 19_900, 10), 150, replace=False))
    lengths = rng.integers(1, 5, starts.size)  # runs of 1 to 4 lost samples
    drop = np.concatenate([np.arange(s, s + k) for s, k in zip(starts, lengths, strict=True)])
    timing = analyse_timing(stamps(20_000, 0.4, seed, drop))
    assert timing.lost == drop.size and timing.runs.tolist() == lengths.tolist()
    assert timing.dropout == pytest.approx(drop.size / 20_000)


def test_clean_stamps_count_as_before():
    # no jitter: whole intervals, as round(interval / T_s) counted them (the x-io clock's 0.75 T_s step
    # every 31 samples included)
    from sensorgym.fitting.timing import slot_steps

    t = np.cumsum(np.where(np.arange(3000) % 31 == 0, 0.00756, 0.01008))
    t = np.delete(t, [500, 501, 1700])
    steps = slot_steps(t, float(np.median(np.diff(t))))
    assert steps.tolist() == np.maximum(np.rint(np.diff(t) / np.median(np.diff(t))), 1).astype(int).tolist()
    assert analyse_timing(t).runs.tolist() == [2, 1]


@settings(max_examples=60, deadline=None)
@given(
    case=st.one_of(  # (stamps, jitter): any length to ±0.3 T_s; from 512 stamps to ±0.4 T_s
        st.tuples(st.integers(64, 6000), st.floats(0.0, 0.3)),
        st.tuples(st.integers(512, 6000), st.floats(0.3, 0.4)),
    ),
    loss=st.floats(0.0, 0.1),
    burst=st.integers(1, 4),
    period=st.sampled_from([1e-4, 0.001, 0.005, 0.0100794, 0.25]),
    t0=st.sampled_from([0.0, 37.5, 1.7e9]),  # from zero, from boot, a Unix time
    rate_error=st.floats(-2e-4, 2e-4),  # a clock off by up to 200 ppm
    wander=st.floats(0.0, 2e-5),  # and whose rate wanders by up to 20 ppm
    seed=st.integers(0, 2**31),
)
def test_lost_samples_are_the_ones_dropped(case, loss, burst, period, t0, rate_error, wander, seed):
    n, jitter = case
    rng = np.random.default_rng(seed)
    starts = np.flatnonzero(rng.random(n) < loss / burst)
    drop = np.unique(np.concatenate([np.arange(s, s + burst) for s in starts] + [np.empty(0, int)]))
    drop = drop[(drop > 0) & (drop < n - 1)]  # the log's first and last stamps are there
    t = stamps(n, jitter, seed, drop, period=period, t0=t0, rate_error=rate_error, wander=wander)
    timing = analyse_timing(t)
    # the truth: the runs of consecutive dropped slots, in order
    truth = [len(r) for r in np.split(drop, np.flatnonzero(np.diff(drop) > 1) + 1) if len(r)]
    assert timing.lost == drop.size and timing.runs.tolist() == truth


def test_the_fit_reads_a_jittered_log_as_whole_and_its_allan_gaps_too(tmp_path):
    t = stamps(20_000, 0.4, 5)
    g = np.random.default_rng(5).normal(0.0, 0.05, t.size)
    np.savez(tmp_path / "jittered.npz", t=t, g=g)
    result = sg.fit(tmp_path / "jittered.npz", ["g"], simulate_config=False)
    fit = result.channels[0]
    assert fit.timing.dropout == 0.0 and result.options["g"]["dropout"] == 0.0
    assert "dropout_burst" not in result.options["g"]
    assert fit.noise.gaps is None or fit.noise.gaps.mean == 1.0  # the Allan model sees no gaps either
    est = fit.noise.estimates["noise_density"]
    assert abs(est.value / (0.05 * np.sqrt(T_S)) - 1) < 3 * est.se / est.value  # 0.005 within its error
