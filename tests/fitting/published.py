"""Published IMU parameter sets and a log generator written from the error model's closed forms
(docs/error_model.md), with numpy and scipy.signal only (no sensorgym code), for the coverage checks of
`sensorgym fit` (issue 33 items 10-11).

The generator follows the error model's order per sample (``dt = T_s``, one own sample per step): the
drift (a random walk whose increment has std ``K sqrt(T_s)`` and a Gauss-Markov bias ``g <- phi g +
sigma_g sqrt(1 - phi^2) w``, ``phi = exp(-T_s / tau_c)``, drawn from ``N(0, sigma_g^2)`` at the start) is
added to the true value, then white noise of per-sample std ``sigma = N / sqrt(T_s)`` and the low-pass
filter ``y <- a y + (1 - a) x + eps``, ``eps ~ N(0, sigma^2 (1 - a)^2)``, ``a = exp(-2 pi f_c T_s)``,
started at ``x_0`` plus a draw of the filter's stationary spread ``sigma sqrt((1 - a) / (1 + a))``; then
rounding to the resolution. Losses follow the sampler's two-state chain (after a kept sample the next is
lost with ``q = p / (L (1 - p))``, after a lost one with ``1 - 1/L``; the first kept), drawn as
alternating geometric runs. A delay shifts the true value: the sensor reads ``s(t - d)``.

The sets are datasheet or published calibration values (units: rad/s and m/s^2 for the Kalibr sets,
deg/s and g for the datasheet ones; the fit does not care). Where a source gives a bias instability but no
correlation time (datasheets give the Allan floor), the Gauss-Markov bias gets ``sigma_g`` at about that
floor and a ``tau_c`` chosen here (said in the comment above the set).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import signal


@dataclass(frozen=True)
class Params:
    """One channel's true error model (0: the term is off)."""

    rate: float = 200.0
    noise_density: float = 0.0
    bandwidth: float = 0.0
    random_walk_density: float = 0.0
    bias_instability: float = 0.0
    bias_correlation_time: float = 0.0
    resolution: float = 0.0
    dropout: float = 0.0
    burst: float = 1.0
    level: float = 0.0

    @property
    def sample_interval(self) -> float:
        return 1.0 / self.rate


#: name -> (parameters, log duration in s)
PUBLISHED: dict[str, tuple[Params, float]] = {
    # EuRoC MAV dataset, ADIS16448 at 200 Hz, its Kalibr imu.yaml (rad/s, m/s^2); the ADIS16448's 330 Hz
    # filter lies past Nyquist
    "EuRoC gyro": (Params(noise_density=1.6968e-4, random_walk_density=1.9393e-5), 3600.0),
    "EuRoC acc": (Params(noise_density=2.0e-3, random_walk_density=3.0e-3, level=9.81), 3600.0),
    # TUM-VI, Bosch BMI160 at 200 Hz, its published imu config
    "TUM-VI gyro": (Params(noise_density=1.6e-4, random_walk_density=2.2e-5), 3600.0),
    "TUM-VI acc": (Params(noise_density=2.8e-3, random_walk_density=8.6e-4, level=9.81), 3600.0),
    # ADIS16448 datasheet: angle random walk 0.66 deg/sqrt(h) = 0.011 (deg/s)/sqrt(Hz), in-run bias
    # stability 14.5 deg/h = 0.004 deg/s (as a Gauss-Markov bias of tau_c 50 s, chosen here)
    "ADIS16448 gyro": (
        Params(noise_density=0.011, bias_instability=0.004, bias_correlation_time=50.0),
        3600.0,
    ),
    # InvenSense MPU-9250 datasheet: gyro 0.01 (deg/s)/sqrt(Hz) through its 41 Hz DLPF, sampled at 200 Hz;
    # accelerometer 300 ug/sqrt(Hz) through its 44.8 Hz DLPF; 16-bit at +-250 deg/s: 0.0076 deg/s steps
    "MPU-9250 gyro": (Params(noise_density=0.01, bandwidth=41.0, resolution=250.0 / 32768), 1800.0),
    "MPU-9250 acc": (Params(noise_density=3.0e-4, bandwidth=44.8, level=1.0), 1800.0),
    # Xsens MTi-100 datasheet: gyro 0.01 (deg/s)/sqrt(Hz), in-run bias stability 10 deg/h = 0.0028 deg/s
    # (tau_c 20 s, chosen here); at 100 Hz, 2% of the samples lost in bursts of 3 (a USB logger's)
    "MTi-100 gyro": (
        Params(
            rate=100.0,
            noise_density=0.01,
            bias_instability=0.0028,
            bias_correlation_time=20.0,
            dropout=0.02,
            burst=3.0,
        ),
        3600.0,
    ),
    # VectorNav VN-100 datasheet: accelerometer 0.14 mg/sqrt(Hz) = 1.4e-4 g/sqrt(Hz), bias stability
    # 0.04 mg (tau_c 100 s, chosen here), over 2 h
    "VN-100 acc": (
        Params(noise_density=1.4e-4, bias_instability=4e-5, bias_correlation_time=100.0, level=1.0),
        7200.0,
    ),
}


def loss_mask(rng: np.random.Generator, n: int, p: float, burst: float) -> np.ndarray:
    """``True`` where a sample arrives: the sampler's two-state chain as alternating geometric runs."""
    keep = np.ones(n, dtype=bool)
    if p <= 0:
        return keep
    q = p / (burst * (1.0 - p))
    pairs = int(2 * n * q + 100)
    kept, lost = rng.geometric(q, pairs), rng.geometric(1.0 / burst, pairs)
    starts = np.cumsum(kept + np.concatenate([[0], lost[:-1]]))  # the first lost sample of each run
    for s, run in zip(starts[starts < n], lost, strict=False):
        keep[s : s + run] = False
    return keep


def generate(
    p: Params, duration: float, seed: int, true_value=None, delay: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """``(times, values)`` of the received samples of a ``duration``-second log; the sensor reads
    ``true_value(t - delay)`` (a function of time, default: the constant ``p.level``)."""
    rng = np.random.default_rng(seed)
    ts = p.sample_interval
    n = round(duration / ts)
    t = np.arange(n) * ts
    x = np.full(n, p.level) if true_value is None else np.asarray(true_value(t - delay), float)
    if p.random_walk_density > 0:
        x = x + np.cumsum(rng.normal(0.0, p.random_walk_density * math.sqrt(ts), n))
    if p.bias_instability > 0:
        phi = math.exp(-ts / p.bias_correlation_time)
        w = rng.normal(0.0, p.bias_instability * math.sqrt(1.0 - phi * phi), n)
        w[0] = rng.normal(0.0, p.bias_instability)  # the reset's draw, not advanced
        x = x + signal.lfilter([1.0], [1.0, -phi], w)
    sigma = p.noise_density / math.sqrt(ts)
    if p.bandwidth > 0:
        a = math.exp(-2.0 * math.pi * p.bandwidth * ts)
        drive = (1.0 - a) * x + rng.normal(0.0, sigma * (1.0 - a), n)
        y0 = x[0] + rng.normal(0.0, sigma * math.sqrt((1.0 - a) / (1.0 + a)))
        y = signal.lfilter([1.0], [1.0, -a], drive[1:], zi=np.array([a * y0]))[0]
        y = np.concatenate([[y0], y])
    else:
        y = x + rng.normal(0.0, sigma, n)
    if p.resolution > 0:
        y = np.round(y / p.resolution) * p.resolution
    keep = loss_mask(rng, n, p.dropout, p.burst)
    return t[keep], y[keep]


def motion(t: np.ndarray) -> np.ndarray:
    """A band-limited motion after 2 min at rest (smooth start), as a motion-capture rate would show."""
    ramp = np.clip((np.asarray(t) - 120.0) / 5.0, 0.0, 1.0)
    ramp = ramp * ramp * (3 - 2 * ramp)
    parts = ((0.23, 0.5, 0.1), (0.61, 0.3, 1.7), (1.3, 0.2, 2.9), (2.7, 0.1, 4.0))
    return ramp * sum(a * np.sin(2 * np.pi * f * t + ph) for f, a, ph in parts)
