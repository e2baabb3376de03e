"""``sensorgym inspect`` on configs that ``sensorgym fit`` wrote from the project's x-io log
(tests/data/xio_fusion_sensor_data.csv, ``--into examples/configs/inspect.toml``, audit 27): a correct table,
and a wrong value still called "differs".

The gyro table is the fit of "Gyroscope X (deg/s)" (``--names gyro``): a 99.2 Hz sensor behind a 46 Hz filter,
read every 5 of its samples, rare losses in bursts of 2, delayed a step. The angle table is the audit's fit
of the same log onto the example's angle sensor, which keeps its jitter, quantization and random walk.
Before the fixes every one of 20 tables said "differs": the angle's jitter skips samples, which the dropout
row counted as lost (0.28 for 0.0015) and the mean burst as runs of 1; its noise density carried the rounding
to steps of 0.02 (0.0006 for 0.00023) and the random walk; the delay was matched one step early through a
free filter coefficient; the jittered angle's noise std read "higher: jitter" in 19 of 20 tables. Earlier,
a fitted 45.6 Hz bandwidth had read "differs: the samples look unfiltered".

The audit's fit had bandwidths of 49.9 and 52.2 Hz, at and above the 49.6 Hz Nyquist rate of the 99.2 Hz
samples, which the options refuse since issue 33; here they are 45.6 Hz, the
bandwidth an earlier fit of this log gave."""

from __future__ import annotations

import dataclasses

import pytest

from sensorgym.app.inspection import compare_channel, run_inspect

from .common import INSPECT_SEEDS, MOST_FALSE_TABLES, flagged, load_config_text

FITTED = """
[env]
id = "Pendulum-v1"

[sensors.angle]
type = "StateSensorOptions"
key = "obs"
index = [0, 1]
delay = 0.1
jitter = 0.05
bias = 0.05
random_walk = 0.003
resolution = 0.02
update_period = 0.010079380000000526
dropout = 0.0014777597162701345
dropout_burst = 2.0
noise_density = [0.00023153696226242644, 0.00025858384326190984]
bandwidth = [0.0, 45.6]

[sensors.gyro]
type = "StateSensorOptions"
key = "obs"
index = [2]
delay = 0.05
bias = -0.3
noise_density = 0.010846940945728988
bandwidth = 45.6
update_period = 0.010079380000000526
dropout = 0.0014777597162701345
dropout_burst = 2.0
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return load_config_text(tmp_path_factory, FITTED, "fitted_config.toml")


def test_the_fitted_config_is_called_differs_in_at_most_5_percent_of_tables(config):
    """20 traces of 400 steps: at most 3 tables with a "differs" (measured: 0 of 20; before: 20 of 20), no
    fitted bandwidth ever "differs", and the jittered angle's noise std is its configured value."""
    false_tables = []
    for seed in range(INSPECT_SEEDS):
        result = run_inspect(config, steps=400, seed=seed)
        bad = flagged(result)
        assert not [f for f in bad if f[1] == "bandwidth"], (seed, bad)
        if bad:
            false_tables.append((seed, bad))
    assert len(false_tables) <= MOST_FALSE_TABLES, false_tables


def test_a_wrong_fitted_value_is_called_differs(config):
    result = run_inspect(config, steps=2000, seed=0)
    assert not flagged(result), flagged(result)
    entry = {s["channel"]: s for s in result.summary}
    angle, gyro = config.sensors["angle"], config.sensors["gyro"]
    wrong = {
        ("gyro", "bandwidth"): dataclasses.replace(gyro, bandwidth=5.0),  # 9x too slow: a^m = 0.21 shows
        ("gyro", "noise density"): dataclasses.replace(gyro, noise_density=0.02),
        ("gyro", "dropout"): dataclasses.replace(gyro, dropout=0.05),
        # jitter skips a quarter of the angle's samples, so its count of missing samples bounds the losses
        # from above only; a dropout above that count still differs
        ("angle[0]", "dropout"): dataclasses.replace(angle, dropout=0.4),
        # the rounding hides a density of 0.00023; one of 0.005 would show above it
        ("angle[0]", "noise density"): dataclasses.replace(angle, noise_density=[0.005, 0.005]),
        ("angle[0]", "delay"): dataclasses.replace(angle, delay=0.2),
    }
    for (channel, row), options in wrong.items():
        component = 0 if channel != "angle[1]" else 1
        got = compare_channel(options, component, entry[channel], 0.05, z=result.z)["rows"][row]
        assert got[2].startswith("differs"), (channel, row, got)
