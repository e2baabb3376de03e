"""The closed loop on a real IMU (tests/data/xio_fusion_sensor_data.csv: an x-io sensor at about 100 Hz):
for each gyroscope and accelerometer axis, the fitted config simulated through SensorManager lies inside
the log's 95% Allan-deviation band at every octave tau in [2 T_s, duration/10] but at most one, which the
fit names (accelerometer Y at 0.08 s, the ringing after the last rotation: its 55 Hz roll-off, past the
99 Hz sensor's Nyquist rate, is not an option a config can hold), within 25% of the log's deviation
wherever tau <= duration/50, and its lost samples come as the log's do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sensorgym.fitting.api import fit

LOG = Path(__file__).resolve().parents[1] / "data" / "xio_fusion_sensor_data.csv"
AXES = [f"Gyroscope {a} (deg/s)" for a in "XYZ"] + [f"Accelerometer {a} (g)" for a in "XYZ"]


@pytest.fixture(scope="module")
def result():
    return fit(LOG, AXES, names=["gyro"] * 3 + ["acc"] * 3, envs=64, seed=0)


@pytest.mark.parametrize("axis", AXES)
def test_the_simulated_config_lies_in_the_logs_band(result, axis):
    f = next(f for f in result.channels if f.channel.name == axis)
    c = f.closed_loop
    ts = f.timing.sample_interval
    assert c.taus[0] == pytest.approx(2 * ts) and c.taus[-1] <= f.duration / 10 < 2 * c.taus[-1]
    assert c.inside.sum() >= len(c.taus) - 1, list(zip(c.taus, c.relative, strict=True))
    named = [t for u in f.unexplained for t in c.taus if u.taus[0] <= t <= u.taus[1]]
    assert sorted(named) == sorted(c.taus[~c.inside]), (named, f.unexplained)  # every miss is named
    short = c.taus <= f.duration / 50
    assert short.sum() >= 3 and np.all(np.abs(c.relative[short]) <= 0.25)


def test_the_static_window_is_the_last_still_stretch(result):
    start, end = result.channels[0].window
    assert 119.0 < start < 121.0 and end == pytest.approx(135.33, abs=0.01)


@pytest.mark.parametrize("name", ["gyro", "acc"])
def test_the_simulated_losses_match_the_logs(result, name):
    log = next(f for f in result.channels if f.name == name).timing
    sim = result.sim.timing[name]
    assert log.lost == 20 and log.burst == 2.0  # ten gaps of 30 ms: two samples each
    # the loss fraction within the log's own uncertainty (10 runs), the burst within 15%
    assert abs(sim.dropout - log.dropout) < 2 * log.dropout_se
    assert abs(sim.burst / log.burst - 1) < 0.15


def test_the_closed_loop_lines(result):
    assert len(result.lines) == 6
    for line, axis in zip(result.lines, AXES, strict=True):
        inside = 6 if axis == "Accelerometer Y (g)" else 7
        assert line.startswith(
            f"closed loop {axis}: within the log's 95% band at {inside} of 7 τ; largest relative difference"
        )
