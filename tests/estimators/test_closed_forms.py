"""Closed forms (derived in docs/estimators.md, "What the gains do"), on static logs with fixed seeds.

* Mahony, static tilt error θ: dθ/dt = −kp·sin θ, so tan(θ/2) = tan(θ0/2)·exp(−kp·t) (a small error
  decays as exp(−kp·t)), whatever the attitude.
* Madgwick, static tilt error: the normalized gradient step moves the quaternion at rate β, so the error
  closes at 2β rad/s while the sensor is level; the report's gradient has a radial part that depends on
  the attitude, so on its side (error about a horizontal sensor axis whose cross product with up is
  vertical) it closes at 2β/√2.
* Constant gyro bias b on a tilt axis: Mahony with ki > 0 ends with no tilt error and its integral term
  −b̂ at −b; with ki = 0 it holds sin θ = b/kp. Madgwick with β > b/2 holds the error in a band of width
  4βΔt, (−(2β − b)Δt, (2β + b)Δt], covered uniformly: mean bΔt, mean |θ| = (β + b²/(4β))Δt, RMS
  Δt·sqrt(4β²/3 + b²); with β < b/2 it loses the tilt at (b − 2β) rad/s.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sensorgym.estimators import Madgwick, Mahony
from sensorgym.estimators.quaternion import quat_multiply, rotate, rotate_inverse

G = 9.81


def axis_angle(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


def random_attitude(rng) -> np.ndarray:
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def static_log(q_true: np.ndarray, n: int, bias=(0.0, 0.0, 0.0)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A sensor at rest in attitude ``q_true``: (gyr, acc, up in the sensor frame)."""
    up = rotate_inverse(q_true, np.array([0.0, 0.0, 1.0]))
    return np.tile(bias, (n, 1)), np.tile(G * up, (n, 1)), up


def tilted_start(q_true: np.ndarray, angle: float, rng) -> np.ndarray:
    """``q_true`` turned by ``angle`` about a random horizontal earth axis (a pure tilt error)."""
    phi = rng.uniform(0, 2 * np.pi)
    return quat_multiply(axis_angle([np.cos(phi), np.sin(phi), 0.0], angle), q_true)


def tilt(q: np.ndarray, up: np.ndarray) -> np.ndarray:
    """The angle between the estimate's up axis and the true one, both in the sensor frame."""
    est = rotate_inverse(q, np.array([0.0, 0.0, 1.0]))
    return np.arccos(np.clip(est @ up, -1.0, 1.0))


def run(filt, gyr, acc, q0, kind):
    if kind == "torch":
        return filt.run(torch.tensor(gyr), torch.tensor(acc), q0=torch.tensor(q0)).numpy()
    return filt.run(gyr, acc, q0=q0)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize(("kp", "seed"), [(0.5, 1), (2.0, 2), (5.0, 3)])
def test_mahony_tilt_error_decays_as_exp_minus_kp_t(kp, seed, kind):
    rng = np.random.default_rng(seed)
    rate, theta0 = 1000.0, 0.05
    n = int(3.0 / kp * rate)  # three time constants
    q_true = random_attitude(rng)
    gyr, acc, up = static_log(q_true, n)
    q = run(Mahony(kp=kp, ki=0.0, rate=rate), gyr, acc, tilted_start(q_true, theta0, rng), kind)
    t = np.arange(1, n + 1) / rate
    theta = tilt(q, up)
    exact = 2 * np.arctan(np.tan(theta0 / 2) * np.exp(-kp * t))
    # Euler steps of kp·dt: the decay per step is 1 − kp·dt, not exp(−kp·dt), so after t the relative
    # difference is about kp²·dt·t/2 (at most 0.75% here); and exp(−kp t) for the small error itself
    np.testing.assert_allclose(theta, exact, rtol=kp * kp / rate * t[-1] / 2 + 1e-3)
    np.testing.assert_allclose(theta, theta0 * np.exp(-kp * t), rtol=kp * kp / rate * t[-1] / 2 + 2e-3)
    slope = np.polyfit(t, np.log(theta), 1)[0]
    assert slope == pytest.approx(-kp, rel=kp / rate + 1e-3)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize(("beta", "seed"), [(0.05, 4), (0.2, 5)])
def test_madgwick_level_tilt_error_closes_at_2_beta(beta, seed, kind):
    rng = np.random.default_rng(seed)
    rate, theta0 = 1000.0, 0.1
    q_true = axis_angle([0, 0, 1], rng.uniform(0, 2 * np.pi))  # level, any heading
    n = int(1.5 * theta0 / (2 * beta) * rate)
    gyr, acc, up = static_log(q_true, n)
    q = run(Madgwick(beta=beta, rate=rate), gyr, acc, tilted_start(q_true, theta0, rng), kind)
    t = np.arange(1, n + 1) / rate
    theta = tilt(q, up)
    closing = (theta > 0.2 * theta0) & (theta < 0.8 * theta0)
    slope = np.polyfit(t[closing], theta[closing], 1)[0]
    # the report's radial term slows a level error θ by cos(θ/2)/sqrt(cos²(θ/2) + 4 sin²(θ/2)) (0.3% at
    # θ = 0.08), so the rate is 2β within 0.5%
    assert slope == pytest.approx(-2 * beta, rel=5e-3)
    closed = t > 1.1 * theta0 / (2 * beta)
    assert theta[closed].max() <= 2 * beta / rate * (1 + 1e-6)  # then it stays within one step, 2β·Δt


def test_madgwick_closing_rate_depends_on_the_attitude():
    """Not rotation-invariant: on its side (sensor x up), an error about the sensor's y axis closes at
    2β/√2, one about its z axis at 2β (docs/estimators.md derives the factor 1/sqrt(1 + ((k × s)_z)²))."""
    rate, beta, theta0, n = 1000.0, 0.1, 0.01, 40
    q_true = axis_angle([0, 1, 0], -np.pi / 2)  # the sensor's x axis points up
    gyr, acc, up = static_log(q_true, n)
    np.testing.assert_allclose(up, [1, 0, 0], atol=1e-12)
    rates = []
    for sensor_axis in ([0, 1, 0], [0, 0, 1]):
        q0 = quat_multiply(q_true, axis_angle(sensor_axis, theta0))  # an error about a sensor axis
        theta = tilt(Madgwick(beta=beta, rate=rate).run(gyr, acc, q0=q0), up)
        rates.append((theta0 - theta[-1]) / (n / rate))
    assert rates[0] == pytest.approx(2 * beta / np.sqrt(2), rel=2e-3)
    assert rates[1] == pytest.approx(2 * beta, rel=2e-3)


def test_mahony_integral_term_cancels_a_gyro_bias():
    """ki > 0: the tilt error goes to zero and the integral term −b̂ to minus the bias (a random tilt axis
    and attitude); ki = 0: the tilt holds at asin(b/kp)."""
    rng = np.random.default_rng(6)
    rate, n, b = 200.0, 8000, 0.02  # 40 s
    q_true = random_attitude(rng)
    _, acc, up = static_log(q_true, n)
    axis = np.cross(up, rng.normal(size=3))
    bias = b * axis / np.linalg.norm(axis)  # perpendicular to up: a tilt axis
    gyr = np.tile(bias, (n, 1))
    # kp = 1, ki = 0.25: critically damped, s² + kp·s + ki = (s + 0.5)²
    filt = Mahony(kp=[1.0, 0.5], ki=[0.25, 0.0], rate=rate)
    state = filt.new_state(2, executor="numpy")
    filt.initialize(state, q0=q_true)
    for i in range(n):
        filt.update(state, gyr[i : i + 1].repeat(2, 0), acc[i : i + 1].repeat(2, 0))
    q = filt.quaternion(state)
    theta = tilt(q, up)
    assert theta[0] < 1e-6
    np.testing.assert_allclose(-filt.bias(state)[0], -bias, atol=1e-6)  # the integral term
    assert theta[1] == pytest.approx(np.arcsin(b / 0.5), rel=1e-3)
    np.testing.assert_array_equal(filt.bias(state)[1], 0.0)


def _signed_tilt(q: np.ndarray, up: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """The estimate's attitude error as a rotation about the sensor ``axis`` (positive: the way a positive
    gyro bias about ``axis`` turns it; its up axis then turns the other way in the sensor frame)."""
    est = rotate_inverse(q, np.array([0.0, 0.0, 1.0]))
    return np.arctan2(np.cross(est, up) @ axis, est @ up)


def test_madgwick_holds_a_bias_in_a_band_of_width_4_beta_dt():
    """Level sensor, bias b on its x axis, β above b/2 (values with no small rational ratio, so the band
    is covered evenly): mean, mean |θ| and RMS as derived; below b/2 the error grows at b − 2β."""
    rate, b, n = 200.0, 0.0271, 14000
    dt = 1 / rate
    betas = [0.0437, 0.0911, 0.2339, 0.0093]
    q_true = axis_angle([0, 0, 1], 0.7)
    _, acc, up = static_log(q_true, n)
    gyr = np.tile([b, 0.0, 0.0], (n, 1))
    q = Madgwick(beta=betas, rate=rate).run(gyr, acc, q0=q_true)
    for k, beta in enumerate(betas[:3]):
        theta = _signed_tilt(q[k, 1000:], up, np.array([1.0, 0.0, 0.0]))
        assert theta.min() > -(2 * beta - b) * dt * 1.001 and theta.max() <= (2 * beta + b) * dt * 1.001
        width = 4 * beta * dt
        assert abs(theta.mean() - b * dt) < 0.01 * width
        assert np.abs(theta).mean() == pytest.approx((beta + b * b / (4 * beta)) * dt, rel=0.02)
        assert np.sqrt(np.mean(theta**2)) == pytest.approx(dt * np.sqrt(4 * beta**2 / 3 + b * b), rel=0.02)
    lost = _signed_tilt(q[3, :2000], up, np.array([1.0, 0.0, 0.0]))  # 10 s
    assert lost[-1] == pytest.approx((b - 2 * betas[3]) * 10.0, rel=0.03)


def test_the_estimators_earth_frame():
    """z up along the specific force at rest; with a magnetometer x along the horizontal field."""
    rng = np.random.default_rng(9)
    q_true = random_attitude(rng)
    field = np.array([0.3, 0.0, -0.8])  # the earth's field in the filter's frame: north and down
    n = 50
    gyr, acc, _ = static_log(q_true, n)
    mag = np.tile(rotate_inverse(q_true, field), (n, 1))
    for filt, tol in (
        (Madgwick(beta=0.1, rate=100.0), 2 * 0.1 / 100.0),
        (Mahony(kp=1.0, ki=0.1, rate=100.0), 1e-9),
    ):
        q = filt.run(gyr, acc, mag)  # starts from the first sample: the frame itself
        # Madgwick's normalized step is a full β even for a gradient of rounding noise: it stays within
        # 2β·Δt of the frame (an angle), where Mahony stays on it
        for qi in (q[0], q[-1]):
            np.testing.assert_allclose(rotate(qi, acc[0]) / G, [0, 0, 1], atol=tol)
            horizontal = rotate(qi, mag[0])
            np.testing.assert_allclose(
                horizontal / np.linalg.norm(horizontal[:2]), [1, 0, -0.8 / 0.3], atol=3 * tol
            )
