"""The `ahrs` package (an independent implementation of both papers) as an oracle, where its conventions
allow; docs/estimators.md lists the differences:

* Madgwick 6- and 9-axis: ahrs's ``updateIMU``/``updateMARG`` are the report's form (the earth-field
  reference b, not the C code's b/2): equal to ours to rounding.
* Mahony 6-axis: equal, bias estimate included.
* Mahony 9-axis: ahrs's earth frame has the horizontal field along y (east-north-up), ours along x, so
  ahrs's estimate is ours turned by +90° about the vertical (from starts turned the same way).
* ahrs returns its state unchanged when the gyroscope reads exactly zero (no correction either); ours
  still corrects from the accelerometer and magnetometer. ahrs's batch constructors start from their own
  first-sample states (NED for Madgwick's 9-axis), so the tests call the per-sample updates with our start.
"""

from __future__ import annotations

import numpy as np
import pytest

from sensorgym.estimators import Madgwick, Mahony
from sensorgym.estimators.quaternion import Q_NWU_TO_ENU, quat_multiply

from .test_reference import random_log

ahrs_filters = pytest.importorskip("ahrs.filters")

RATE = 100.0


def ahrs_run(update, q0, *samples) -> np.ndarray:
    q, out = np.array(q0, float), []
    for row in zip(*samples, strict=True):
        q = np.asarray(update(q, *row), float)
        out.append(q)
    return np.array(out)


@pytest.mark.parametrize("beta", [0.033, 0.3, 1.5])
def test_madgwick_6_and_9_axis_equal_ahrs(beta):
    gyr, acc, mag, q0 = random_log(11, n=400)
    oracle = ahrs_filters.Madgwick(gain=beta, frequency=RATE)
    filt = Madgwick(beta=beta, rate=RATE)
    np.testing.assert_allclose(
        filt.run(gyr, acc, q0=q0), ahrs_run(oracle.updateIMU, q0, gyr, acc), atol=1e-12
    )
    np.testing.assert_allclose(
        filt.run(gyr, acc, mag, q0=q0), ahrs_run(oracle.updateMARG, q0, gyr, acc, mag), atol=1e-12
    )


def test_madgwick_6_axis_equals_ahrs_batch_mode():
    """ahrs's own loop: its row 0 is the start, row t the update with sample t."""
    gyr, acc, _, q0 = random_log(12, n=300)
    oracle = ahrs_filters.Madgwick(gyr=gyr, acc=acc, gain=0.1, frequency=RATE, q0=q0)
    np.testing.assert_allclose(
        Madgwick(beta=0.1, rate=RATE).run(gyr[1:], acc[1:], q0=q0), oracle.Q[1:], atol=1e-12
    )


@pytest.mark.parametrize(("kp", "ki"), [(1.0, 0.3), (0.42, 0.0003), (3.0, 1.0)])
def test_mahony_6_axis_equals_ahrs_with_its_bias(kp, ki):
    gyr, acc, _, q0 = random_log(13, n=400)
    oracle = ahrs_filters.Mahony(k_P=kp, k_I=ki, frequency=RATE)
    expected, biases = [], []
    q = q0.copy()
    for i in range(len(gyr)):
        q = oracle.updateIMU(q, gyr[i], acc[i])
        expected.append(q)
        biases.append(oracle.b.copy())
    filt = Mahony(kp=kp, ki=ki, rate=RATE)
    state = filt.new_state(1, executor="numpy")
    filt.initialize(state, q0=q0)
    for i in range(len(gyr)):
        filt.update(state, gyr[i : i + 1], acc[i : i + 1])
        np.testing.assert_allclose(filt.quaternion(state)[0], expected[i], atol=1e-12)
        np.testing.assert_allclose(filt.bias(state)[0], biases[i], atol=1e-12)


def test_mahony_9_axis_equals_ahrs_turned_into_its_frame():
    gyr, acc, mag, q0 = random_log(14, n=400)
    turn = np.array(Q_NWU_TO_ENU)  # +90° about z: the field from x (ours) to y (ahrs)
    oracle = ahrs_filters.Mahony(k_P=0.8, k_I=0.2, frequency=RATE)
    expected = ahrs_run(oracle.updateMARG, quat_multiply(turn, q0), gyr, acc, mag)
    ours = Mahony(kp=0.8, ki=0.2, rate=RATE).run(gyr, acc, mag, q0=q0)
    np.testing.assert_allclose(quat_multiply(turn, ours), expected, atol=1e-12)


def test_where_ahrs_differs_a_gyroscope_reading_zero():
    """ahrs skips the whole update on an exactly zero gyroscope sample; ours still corrects (the papers'
    filters do): the two agree before that sample and part there."""
    gyr, acc, _, q0 = random_log(15, n=20)
    gyr[10] = 0.0
    oracle = ahrs_run(ahrs_filters.Madgwick(gain=0.3, frequency=RATE).updateIMU, q0, gyr, acc)
    ours = Madgwick(beta=0.3, rate=RATE).run(gyr, acc, q0=q0)
    np.testing.assert_allclose(ours[:10], oracle[:10], atol=1e-12)
    np.testing.assert_array_equal(oracle[10], oracle[9])  # ahrs: unchanged
    assert np.abs(ours[10] - ours[9]).max() > 1e-4  # ours: the correction step (β·Δt = 0.003)
