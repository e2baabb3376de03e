"""`sensorgym fit` explains real logs (issue 33 item 14): on every real log of tests/data, per channel, the
fitted config's closed loop lies inside the log's 95% band at 90% of the tau or more, or the fit names,
for each tau range outside, what the error model lacks there (a narrow-band component, the samples'
correlation, a drift); and a bench log's warm-up is reported as such, not read as a random walk.

The flight controller's bench log of the issue is not in the repository; tests/fitting/bench_log.py
generates one with its features (handled for the first seconds, then at rest, the gyro bias settling
after power-on). The x-io log's own test is tests/fitting/test_real_log.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sensorgym.fitting.api import fit
from sensorgym.fitting.diagnose import CHANCE

from .bench_log import HANDLED, WARMUP, bench_log

DATA = Path(__file__).resolve().parents[1] / "data"
GENERIC = (CHANCE, "a shape no term")


def _explained(f) -> bool:
    """Inside the band at 90% of the tau, or every range outside named with a cause of its own."""
    c = f.closed_loop
    if c.inside.sum() >= 0.9 * len(c.taus):
        return True
    return bool(f.unexplained) and not any(u.cause.startswith(GENERIC) for u in f.unexplained)


@pytest.fixture(scope="module")
def broad():
    """A rest phase of a real myon IMU (BROAD trial 02): gyro z with a resonance near 25 Hz, gyro x with
    anti-correlated neighbours."""
    return fit(DATA / "broad_rest_cut.npz", ["gyr_x", "gyr_z"], envs=32, seed=0)


def test_a_resonance_is_named_not_called_motion(broad):
    """d71066f: "the window 0-28.7 s ... is not demonstrably at rest" for gyro z, whose window is at rest
    (the dataset's own movement flag) and holds a 25 Hz resonance of 6% of its variance."""
    z = next(f for f in broad.channels if f.channel.name == "gyr_z")
    assert z.spectral is not None and 20.0 < z.spectral.frequency < 30.0
    assert 0.03 < z.spectral.share < 0.1
    line = next(w for w in broad.warnings if w.startswith("gyr_z: the window"))
    assert "not demonstrably at rest" not in line and "narrow-band component near 24.9 Hz" in line
    assert any("narrow-band component near 24.9 Hz" in u.cause for u in z.unexplained)


def test_anti_correlated_samples_are_named(broad):
    x = next(f for f in broad.channels if f.channel.name == "gyr_x")
    assert x.spectral is None
    assert x.unexplained and all("anti-correlated (lag 1: -0.057" in u.cause for u in x.unexplained)


def test_every_broad_channel_is_explained(broad):
    for f in broad.channels:
        assert _explained(f), (f.channel.name, f.closed_loop.inside, [u.cause for u in f.unexplained])
        assert f.window == pytest.approx((0.0, 28.6965))  # the whole cut: at rest


def test_the_px4_log_is_explained():
    """PX4's sample ULog: two seconds on the ground, the accelerometers' vibration named (z: 60% of its
    variance near 42 Hz, so the window is not called at rest), every channel explained."""
    axes = [f"sensor_combined.gyro_rad[{i}]" for i in range(3)]
    axes += [f"sensor_combined.accelerometer_m_s2[{i}]" for i in range(3)]
    result = fit(DATA / "px4_sensor_combined.ulg", axes, names=["gyro"] * 3 + ["acc"] * 3, envs=16)
    for f in result.channels:
        assert _explained(f), (f.channel.name, f.closed_loop.inside, [u.cause for u in f.unexplained])
    z = result.channels[5]
    assert z.spectral is not None and 35.0 < z.spectral.frequency < 50.0 and z.spectral.share > 0.5
    assert any(w.startswith(f"{z.channel.name}: the window") and "a shake?" in w for w in result.warnings)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    t, gyro, acc = bench_log(seed=0, minutes=6.0)
    path = tmp_path_factory.mktemp("bench") / "bench.npz"
    np.savez(path, t=t, gyro=gyro, acc=acc)
    channels = [f"gyro[{i}]" for i in range(3)] + [f"acc[{i}]" for i in range(3)]
    return fit(path, channels, names=["gyro"] * 3 + ["acc"] * 3, envs=16, seed=0)


def test_a_warm_up_is_reported_not_read_as_a_walk(bench):
    """d71066f gave gyro x and y a random walk three times gyro z's (the warm-up), without a word, and its
    closed loop missed their longest tau."""
    gyro = bench.channels[:3]
    for f, (amplitude, tau) in zip(gyro[:2], WARMUP[:2], strict=True):
        assert f.warmup is not None, f.channel.name
        assert 0.6 < f.warmup.time_constant / tau < 1.5
        assert np.sign(f.warmup.amplitude) == np.sign(amplitude)
        assert any(w.startswith(f"{f.channel.name}: a warm-up trend") for w in bench.warnings)
    assert gyro[2].warmup is None
    # gyro x (40 s) starts once settled; gyro y (60 s) has too little after it and is detrended instead
    assert gyro[0].window[0] == pytest.approx(
        gyro[0].warmup.start + 3 * gyro[0].warmup.time_constant, abs=0.01
    )
    assert gyro[1].window[0] < HANDLED + 2.0
    walks = [f.noise.estimates["random_walk_density"] for f in gyro]
    reference = walks[2]
    for w in walks[:2]:  # any walk left is gyro z's kind (its bias), not the warm-up's
        assert not w.identified or w.value < 1.5 * (reference.value or 2e-5), (w, reference)


def test_the_bench_log_window_is_at_rest_and_explained(bench):
    for f in bench.channels:
        assert f.window[0] >= HANDLED  # the handling is left out
        assert _explained(f), (f.channel.name, f.closed_loop.inside, [u.cause for u in f.unexplained])
    assert not any("not demonstrably at rest" in w for w in bench.warnings)
