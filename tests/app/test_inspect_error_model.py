"""``sensorgym inspect`` prints each configured error-model value in the sensor's own units beside its
estimate from the trace (issue 26 item 4): noise density, bandwidth, loss fraction and mean burst. The
estimator is checked on series made with scipy.signal (not sensorgym), then through the real command on a
Pendulum config, where a correct config is "ok" and a wrong one "differs"."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import signal

import sensorgym as sg
from sensorgym.app.config import load_config
from sensorgym.app.inspect_error_model import error_model_rows, loss_runs, regress_filter
from sensorgym.app.inspection import compare_channel, run_inspect

from .common import sensorgym

CONFIG = """
[env]
id = "Pendulum-v1"

[sensors.angle]
type = "StateSensorOptions"
key = "obs"
index = [0, 1]
update_period = 0.01
noise_density = 0.002
bandwidth = 20.0
bias = 0.05

[sensors.gyro]
type = "StateSensorOptions"
key = "obs"
index = [2]
update_period = 0.1
noise_density = 0.05
dropout = 0.1
dropout_burst = 3.0
"""


def _filtered_noise(a: float, sigma: float, n: int, seed: int, x: np.ndarray | None = None) -> np.ndarray:
    """``y <- a y + (1 - a) (x + sigma w)`` (``x`` held over ``m`` own samples when it is shorter), from
    the stationary start, by scipy.signal.lfilter."""
    w = np.random.default_rng(seed).standard_normal(n)
    drive = sigma * w + (np.repeat(x, n // len(x)) if x is not None else 0.0)
    start = (x[0] if x is not None else 0.0) + sigma * math.sqrt((1 - a) / (1 + a)) * np.random.default_rng(
        seed + 1
    ).standard_normal()
    return signal.lfilter([1 - a], [1, -a], drive, zi=[a * start])[0]


@pytest.mark.parametrize(("bandwidth", "m"), [(20.0, 1), (20.0, 5), (5.0, 2)])
def test_the_regression_recovers_the_filter_and_the_density(bandwidth, m):
    ts, density = 0.01, 0.002
    a = math.exp(-2 * math.pi * bandwidth * ts)
    x = np.sin(np.arange(20000) * 0.05)  # a moving signal, constant over a control step of m own samples
    # a read every m own samples, at the last of the step's; a bias after the filter
    z = _filtered_noise(a, density / math.sqrt(ts), 20000 * m, seed=3, x=x)[m - 1 :: m] + 0.3
    y = z
    fit = regress_filter(z, x, np.ones(y.size - 1, bool), np.ones(y.size - 1, int))
    assert fit["slope"] == pytest.approx(a**m, abs=4 * fit["slope_se"])
    opts = sg.StateSensorOptions(key="obs", noise_density=density, bandwidth=bandwidth, update_period=ts)
    rows, _ = error_model_rows(opts, 0, {"filter": fit}, dt=m * ts, z=3.0)
    got_n, n_se = (float(v) for v in rows["noise density"][1].split()[0:3:2])
    if a**m < 0.01:
        # a^m of a 20 Hz filter read every 5 samples is 0.002, within 3 standard errors (0.0027) of 0: the
        # trace cannot tell it from no filter, and gives only a lower bound (below the true 20 Hz); the
        # noise density then comes through the configured filter (the delta method said 18.4 ± 2.8 Hz)
        assert rows["bandwidth"][2] == "not identifiable from this trace", rows
        assert rows["bandwidth"][1].startswith("> ") and float(rows["bandwidth"][1].split()[1]) < bandwidth
    else:
        got_bw, bw_se = (float(v) for v in rows["bandwidth"][1].split()[0:3:2])
        assert abs(got_bw - bandwidth) <= max(3 * bw_se, 0.05 * bandwidth) and rows["bandwidth"][2] == "ok"
        assert bw_se < 0.03 * bandwidth
    assert abs(got_n - density) <= max(3 * n_se, 0.03 * density) and rows["noise density"][2] == "ok"
    assert n_se < (0.02 if m == 1 else 0.1) * density


def test_a_wrong_bandwidth_or_density_differs():
    ts = 0.01
    y = _filtered_noise(math.exp(-2 * math.pi * 20.0 * ts), 0.002 / math.sqrt(ts), 20000, seed=4)
    fit = regress_filter(y, np.zeros(y.size), np.ones(y.size - 1, bool), np.ones(y.size - 1, int))
    wrong = sg.StateSensorOptions(key="obs", noise_density=0.004, bandwidth=5.0, update_period=ts)
    rows, _ = error_model_rows(wrong, 0, {"filter": fit}, dt=ts, z=3.0)
    assert rows["bandwidth"][2] == "differs (expected 5 Hz)"
    assert rows["noise density"][2].startswith("differs")
    noise = np.random.default_rng(5).normal(size=5000)
    white = regress_filter(noise, np.zeros(5000), np.ones(4999, bool), np.ones(4999, int))
    filtered = sg.StateSensorOptions(key="obs", noise_density=0.01, bandwidth=10.0, update_period=ts)
    assert error_model_rows(filtered, 0, {"filter": white}, dt=ts, z=3.0)[0]["bandwidth"][2].startswith(
        "differs"
    )


def test_loss_runs_and_the_burst_row():
    assert loss_runs(np.array([1, 4, 1, 2, 1, 1, 3])).tolist() == [3, 1, 2]
    opts = sg.StateSensorOptions(key="obs", update_period=0.1, dropout=0.1, dropout_burst=3.0)
    runs = np.random.default_rng(0).geometric(1 / 3.0, 200)  # geometric runs of mean 3
    assert error_model_rows(opts, 0, {"runs": runs}, dt=0.05, z=3.0)[0]["mean burst"][2] == "ok"
    single = np.ones(200, int)  # independent losses at 10%: runs of 1.1 on average, far from 3
    assert error_model_rows(opts, 0, {"runs": single}, dt=0.05, z=3.0)[0]["mean burst"][2].startswith(
        "differs"
    )


def test_the_real_command_estimates_the_configured_error_model(tmp_path):
    path = tmp_path / "em.toml"
    path.write_text(CONFIG)
    result = run_inspect(load_config(path), steps=2000, seed=0)
    rows = {s["channel"]: s["rows"] for s in result.summary}
    for channel in ("angle[0]", "angle[1]"):
        assert {"noise density", "bandwidth"} <= set(rows[channel])
        # read every 5 own samples, a^m = 0.002: a lower bound below the configured 20 Hz, no verdict
        bandwidth = rows[channel]["bandwidth"]
        assert bandwidth[2] == "not identifiable from this trace" and float(bandwidth[1].split()[1]) < 20.0
        assert float(rows[channel]["noise density"][1].split()[0]) == pytest.approx(0.002, rel=0.1)
    gyro = rows["gyro"]
    assert float(gyro["noise density"][1].split()[0]) == pytest.approx(0.05, rel=0.1)
    assert float(gyro["mean burst"][1].split()[0]) == pytest.approx(3.0, rel=0.3)
    assert float(gyro["dropout"][1].split()[0]) == pytest.approx(0.1, rel=0.3)
    verdicts = [v for r in rows.values() for _, _, v in r.values()]
    assert all(v.startswith("ok") or v == "not identifiable from this trace" for v in verdicts), rows
    # the same trace compared with a wrong config: each of the new rows says so
    entry = {s["channel"]: s for s in result.summary}
    cfg = load_config(path)
    angle = dataclasses.replace(cfg.sensors["angle"], bandwidth=4.0)
    gyro = dataclasses.replace(cfg.sensors["gyro"], noise_density=0.1, dropout_burst=8.0)
    bad_angle = compare_channel(angle, 0, entry["angle[0]"], 0.05, z=result.z)["rows"]
    bad_gyro = compare_channel(gyro, 0, entry["gyro"], 0.05, z=result.z)["rows"]
    # a 4 Hz filter would leave a^m = 0.29 between reads: the trace's filter is faster than its bound
    assert bad_angle["bandwidth"][2].startswith("differs (expected 4 Hz: the trace's filter is faster than")
    assert bad_gyro["mean burst"][2] == "differs (expected 8)"
    assert bad_gyro["noise density"][2] == "differs (expected 0.1)"


def test_the_cli_prints_the_rows(tmp_path):
    path = tmp_path / "em.toml"
    path.write_text(CONFIG)
    out = sensorgym(
        tmp_path, "inspect", "--config", str(path), "--steps", "600", "--out", str(tmp_path / "i.png")
    )
    assert out.returncode == 0, out.stderr
    for row in ("noise density", "bandwidth", "mean burst", "dropout"):
        assert f"  {row} " in out.stdout
