"""A flight controller's IMU on a bench, generated with numpy and scipy.signal only (no sensorgym code):
handled for the first seconds, then at rest, its gyro bias settling after power-on (issue 33 item 14's
log, which is not in the repository, had these features; the values are an ICM-20602-class sensor's).

At 200 Hz, per axis: white noise (gyro 7e-5 rad/s/sqrt(Hz), about 0.004 deg/s/sqrt(Hz); accelerometer
1e-3 m/s^2/sqrt(Hz)); the gyro a Gauss-Markov bias of 5e-5 rad/s at 20 s; the accelerometer a flicker
(1/f) bias instability, the flat Allan floor of 2.5e-4 m/s^2 (25 ug) from 1 to 200 s that datasheets
call bias instability (a sum of twelve Gauss-Markov biases of correlation times 0.25 to 512 s, each of
``FLOOR / 1.39``); and on gyro x and y a warm-up: the bias settles exponentially from power-on (4e-3 and
-3e-3 rad/s, time constants 40 and 60 s). For the first ``HANDLED`` seconds the
sensor is turned by hand (band-limited rotations of about 1 rad/s, the accelerometer seeing gravity
turn and 3 m/s^2 of motion).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import signal

RATE = 200.0
HANDLED = 8.0
GYRO = {"noise": 7e-5, "sigma_g": 5e-5, "tau_c": 20.0}
ACC = {"noise": 1e-3, "floor": 2.5e-4}
FLICKER_TIMES = np.geomspace(0.25, 512.0, 12)  # a factor 2 apart: their sum's Allan deviation is flat
WARMUP = ((4e-3, 40.0), (-3e-3, 60.0), (0.0, 1.0))  # per gyro axis: amplitude (rad/s), time constant (s)


def _gauss_markov(rng: np.random.Generator, n: int, sigma: float, tau_c: float) -> np.ndarray:
    phi = math.exp(-1.0 / (RATE * tau_c))
    w = rng.normal(0.0, sigma * math.sqrt(1.0 - phi * phi), n)
    w[0] = rng.normal(0.0, sigma)
    return signal.lfilter([1.0], [1.0, -phi], w)


def _handling(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    """Band-limited motion (under 3 Hz) during the first HANDLED seconds, smoothly ended."""
    b, a = signal.butter(2, 3.0 / (RATE / 2))
    motion = signal.filtfilt(b, a, rng.normal(0.0, 1.0, n))
    t = np.arange(n) / RATE
    envelope = np.clip((HANDLED - t) / 1.0, 0.0, 1.0)
    return scale * motion / motion.std() * envelope


def bench_log(seed: int, minutes: float = 10.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(t, gyro (n, 3) rad/s, acc (n, 3) m/s^2)``."""
    rng = np.random.default_rng(seed)
    n = round(minutes * 60.0 * RATE)
    t = np.arange(n) / RATE
    gyro = np.empty((n, 3))
    acc = np.empty((n, 3))
    gravity = (0.0, 0.0, 9.81)
    for axis in range(3):
        amplitude, tau = WARMUP[axis]
        gyro[:, axis] = (
            _handling(rng, n, 1.0)
            + amplitude * np.exp(-t / tau)
            + _gauss_markov(rng, n, GYRO["sigma_g"], GYRO["tau_c"])
            + rng.normal(0.0, GYRO["noise"] * math.sqrt(RATE), n)
        )
        acc[:, axis] = (
            gravity[axis]
            + _handling(rng, n, 3.0)
            + sum(_gauss_markov(rng, n, ACC["floor"] / 1.39, tc) for tc in FLICKER_TIMES)
            + rng.normal(0.0, ACC["noise"] * math.sqrt(RATE), n)
        )
    return t, gyro, acc
