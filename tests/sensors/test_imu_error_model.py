"""The IMU simulates its per-field error model end to end (SPEC §5.1): a gyroscope given in datasheet units
(noise density, its own rate above the policy's, a first-order bandwidth), an accelerometer with a
Gauss-Markov bias and a magnetometer with a scale factor, fed a known truth, against the closed forms; the
three fields are lost together; and the per-field keys are config keys a sweep can vary.

The truth is handed over as the IMU's state entry (what the sub-env extraction writes), so these statistics
test the pipeline, not MuJoCo.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import sensorgym as sg

B, DT = 4096, 0.02
N_GYRO, T_S, F_C = 2e-3, 0.001, 30.0  # rad/s/sqrt(Hz), a 1 kHz gyro, its filter (Hz)
SIGMA_G, TAU_C = 0.05, 0.2  # the accelerometer's bias instability (m/s^2) and correlation time (s)
K_MAG = 0.03


def _imu(**extra) -> tuple[sg.SensorManager, sg.Sensor]:
    options = sg.IMUOptions(
        body="b", update_period=T_S,
        gyro_noise_density=N_GYRO, gyro_bandwidth=F_C,
        acc_bias_instability=SIGMA_G, acc_bias_correlation_time=TAU_C,
        mag_scale_factor=K_MAG, **extra,
    )  # fmt: skip
    mgr = sg.SensorManager(num_envs=B, dt=DT, seed=0)
    return mgr, mgr.add_sensor(options, name="imu")


def _run(mgr: sg.SensorManager, imu: sg.Sensor, steps: int, truth: torch.Tensor) -> np.ndarray:
    """(steps, B, 9) of measured readings (acc, gyro, mag), the truth constant."""
    state = {imu.state_key: truth}
    mgr.reset(state)
    out = []
    for _ in range(steps):
        mgr.step(state)
        out.append(torch.cat(list(imu.read()), dim=1).numpy().copy())
    return np.stack(out)


def test_each_field_follows_its_closed_form():
    truth = torch.zeros(B, 9)
    truth[:, 6:] = torch.tensor([0.2, -0.4, 0.5])  # the magnetic field; acc and gyro at rest
    mgr, imu = _imu()
    x = _run(mgr, imu, 40, truth)
    # gyro: white noise of std N / sqrt(T_s) per own sample through the filter: stationary spread
    # sigma sqrt((1 - a) / (1 + a)), and a^n between control steps (n = dt / T_s own samples)
    a = math.exp(-2 * math.pi * F_C * T_S)
    sigma = N_GYRO / math.sqrt(T_S)
    gyro = x[:, :, 3:6]
    spread = gyro[10:].std(axis=1).mean()
    assert spread == pytest.approx(sigma * math.sqrt((1 - a) / (1 + a)), rel=0.02)
    lag1 = np.mean([np.corrcoef(gyro[t, :, 0], gyro[t + 1, :, 0])[0, 1] for t in range(10, 39)])
    assert lag1 == pytest.approx(a ** (DT / T_S), abs=0.02)
    # acc: a Gauss-Markov bias of stationary spread sigma_g, lag-1 exp(-dt / tau_c), from the reset on
    acc = x[:, :, 0:3]
    assert acc.std(axis=1).mean() == pytest.approx(SIGMA_G, rel=0.03)
    lag1 = np.mean([np.corrcoef(acc[t, :, 1], acc[t + 1, :, 1])[0, 1] for t in range(39)])
    assert lag1 == pytest.approx(math.exp(-DT / TAU_C), abs=0.02)
    # mag: the scale factor alone, exactly (1 + k) x in float32
    expected = (truth[:, 6:] * torch.tensor(1 + K_MAG, dtype=torch.float32)).numpy()
    np.testing.assert_array_equal(x[-1, :, 6:], expected)
    # ground truth never carries the error model
    gt = torch.cat(list(imu.read_ground_truth()), dim=1)
    assert torch.equal(gt, truth)


def test_the_three_fields_are_lost_together_in_bursts():
    """``dropout`` with ``dropout_burst`` on an IMU: per env and sensor, so a lost sample holds acc, gyro
    and mag together; loss fraction p and mean burst L (SPEC §5.1)."""
    p, burst = 0.1, 3.0
    mgr, imu = _imu(dropout=p, dropout_burst=burst, noise=0.0)
    truth = torch.zeros(B, 9)
    steps = 60
    state = {imu.state_key: truth}
    mgr.reset(state)
    ages, reads = [], []
    for t in range(steps):
        truth[:, 6:] = float(t + 1)  # a ramp on the magnetometer: a held sample shows an older value
        mgr.step(state)
        ages.append(imu.read_age().numpy().copy())
        reads.append(torch.cat(list(imu.read()), dim=1).numpy().copy())
    held = np.stack(ages)[10:] > 0  # (steps, B): the sample behind the read is older than this step
    assert held.mean() == pytest.approx(p, abs=0.01)
    runs = np.diff(np.concatenate([np.zeros((1, B)), held.astype(int), np.zeros((1, B))]), axis=0)
    assert (runs == 1).sum() > 0
    assert held.sum() / (runs == 1).sum() == pytest.approx(burst, rel=0.1)
    x = np.stack(reads)[10:]
    repeated = np.all(x[1:] == x[:-1], axis=2)  # every one of the 9 components held at once
    np.testing.assert_array_equal(repeated, held[1:])  # a lost sample holds all three fields ...
    fresh = ~held[1:]
    assert np.all(x[1:, :, 6:][fresh] != x[:-1, :, 6:][fresh])  # ... and a new one moves the ramp


def test_per_field_keys_are_config_keys_a_sweep_varies(tmp_path):
    from sensorgym.app.config import apply_overrides, load_config

    path = tmp_path / "imu.toml"
    path.write_text(
        """
[env]
id = "sensorgym/AntSensors-v0"
n_envs = 2

[sensors.imu]
type = "IMUOptions"
body = "torso"
gyro_noise_density = 2e-4
gyro_bandwidth = 50.0
acc_bias_instability = 0.01
acc_bias_correlation_time = 100.0
mag_scale_factor = { dist = "Uniform", low = -0.01, high = 0.01 }
update_period = 0.005

[sweep]
seeds = [0]
grid = { "sensors.imu.gyro_noise_density" = [1e-4, 4e-4] }
"""
    )
    cfg = load_config(path)
    o = cfg.sensors["imu"]
    assert o.noise_density[3:6] == (2e-4,) * 3 and o.noise_density[:3] == (0.0,) * 3
    assert o.bandwidth[3:6] == (50.0,) * 3 and o.bias_instability[:3] == (0.01,) * 3
    assert o.scale_factor[6:] == (sg.Uniform(-0.01, 0.01),) * 3
    cells = cfg.sweep.cells()
    assert [c["sensors.imu.gyro_noise_density"] for c in cells] == [1e-4, 4e-4]
    for cell in cells:
        swept = apply_overrides(cfg, cell).sensors["imu"]
        assert swept.noise_density[3:6] == (cell["sensors.imu.gyro_noise_density"],) * 3
        assert swept.bandwidth == o.bandwidth  # the other per-field options stay
