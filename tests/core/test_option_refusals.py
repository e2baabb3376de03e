"""Issue 33 items 15 (bandwidth above Nyquist), 16 (dropout_burst without dropout) and 17 (scale_factor's
message): refused at the option, in one line naming it, the value and the fix."""

from __future__ import annotations

import pytest
import torch

import sensorgym as sg


@pytest.mark.parametrize(
    ("options", "dt", "match"),
    [
        (
            dict(bandwidth=12.0, update_period=0.05),
            0.01,
            r"12 Hz is at or above the Nyquist rate 10 Hz .*update_period",
        ),
        (dict(bandwidth=sg.Uniform(1.0, 11.0), update_period=0.05), 0.01, r"11 Hz is at or above .* 10 Hz"),
        (
            dict(bandwidth=[1.0, 20.0], update_period=sg.Uniform(0.01, 0.05)),
            0.01,
            r"component 1: 20 Hz .* 10 Hz",
        ),
        (dict(bandwidth=12.0), 0.05, r"12 Hz is at or above the Nyquist rate 10 Hz .*T_s = 0.05 s, its dt"),
        (dict(bandwidth=10.0), 0.05, r"10 Hz is at or above"),  # at Nyquist: a = exp(-pi), no filter of it
        (dict(noise=0.2, bandwidth=3.0), 0.2, r"3 Hz is at or above the Nyquist rate 2.5 Hz"),
    ],
)
def test_a_bandwidth_at_or_above_nyquist_is_refused(options, dt, match):
    with pytest.raises(ValueError, match=r"StateSensorOptions\.bandwidth=.*is invalid: " + match) as e:
        o = sg.StateSensorOptions(key="x", shape=(2,), **options)
        sg.SensorManager(num_envs=2, dt=dt).add_sensor(o)
    assert "Fix: give the cut-off in Hz below" in str(e.value) and "\n" not in str(e.value)


def test_a_bandwidth_below_nyquist_is_kept():
    mgr = sg.SensorManager(num_envs=2, dt=0.05, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), noise=0.2, bandwidth=9.99))
    mgr.reset({"x": torch.zeros(2, 1)})
    mgr.step({"x": torch.zeros(2, 1)})
    assert torch.isfinite(s.read()).all()
    # a sensor sampling faster than the policy: T_s = update_period sets the limit, not dt
    fast = sg.StateSensorOptions(key="x", shape=(1,), bandwidth=200.0, update_period=0.001)
    sg.SensorManager(num_envs=2, dt=0.05).add_sensor(fast)


def test_an_imu_field_bandwidth_is_checked_too():
    with pytest.raises(ValueError, match=r"bandwidth=.*component 3: 60 Hz is at or above .* 50 Hz"):
        o = sg.IMUOptions(body="b", gyro_bandwidth=60.0)
        sg.SensorManager(num_envs=1, dt=0.01).add_sensor(o)


def test_dropout_burst_without_dropout_is_refused():
    with pytest.raises(ValueError, match=r"dropout_burst=3.0 is invalid: dropout is 0, .*Fix: give the loss"):
        sg.StateSensorOptions(key="x", dropout_burst=3.0)
    sg.StateSensorOptions(key="x", dropout=0.05, dropout_burst=3.0)  # with a loss fraction: fine
    sg.StateSensorOptions(key="x", dropout=sg.Uniform(0.0, 0.1), dropout_burst=3.0)  # can lose samples


def test_scale_factor_message_says_what_is_wrong():
    with pytest.raises(
        ValueError, match=r"scale_factor=-1.5 is invalid: -1.5 is not above -1; a gain 1 \+ k"
    ):
        sg.StateSensorOptions(key="x", scale_factor=-1.5)
    with pytest.raises(ValueError, match=r"scale_factor=Uniform.* is invalid: it can produce -1.5;"):
        sg.StateSensorOptions(key="x", scale_factor=sg.Uniform(-1.5, 0.0))
