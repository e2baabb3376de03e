"""``sensorgym inspect``'s delay row where the reading is held or samples are lost (audit 27): the delay is
the lag at which the samples the reading shows match the ground truth, so a delayed sensor with ``dropout``,
with its own rate (``update_period > dt``), behind a filter, or with jitter on top is called "ok", and a
wrong delay is still called "differs".

Before the fix the delay of a sampled sensor was the youngest age of any reading, and at an episode's reset
step the reading is its own sample (age 0): every delayed sensor with losses or its own rate read "0 steps,
differs" (20 of 20 tables of each sensor below). Without a sampler the delay was the lag of least residual
variance, which a 2 Hz filter's lag on the swinging pendulum moved from 2 steps to 3; the filter regression
at the wrong lag then called the bandwidth, the noise density and the noise std "differs" too."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sensorgym.app.inspect_fits import match_delay
from sensorgym.app.inspection import compare_channel, run_inspect

from .common import INSPECT_SEEDS, MOST_FALSE_TABLES, flagged, load_config_text

#: correct configs of delayed sensors on Pendulum (dt = 0.05 s), each sensor its own table's rows
DELAYED = """
[env]
id = "Pendulum-v1"

[sensors.lossy]          # the audit's reproducer (/tmp/audit_27/dl/g.toml): every step, 1% lost
type = "StateSensorOptions"
key = "obs"
index = [2]
delay = 0.1
noise = 0.05
dropout = 0.01

[sensors.slow]           # 10 Hz, held over 2 steps, 10% lost
type = "StateSensorOptions"
key = "obs"
index = [2]
delay = 0.1
noise = 0.05
update_period = 0.1
dropout = 0.1

[sensors.filtered]       # no sampler: a 2 Hz filter's lag is not delay
type = "StateSensorOptions"
key = "obs"
index = [2]
delay = 0.1
noise_density = 0.01
bandwidth = 2.0

[sensors.full]           # 10 Hz behind a 2 Hz filter, a scale factor, losses in bursts, delayed
type = "StateSensorOptions"
key = "obs"
index = [2]
delay = 0.1
update_period = 0.1
noise_density = 0.05
bandwidth = 2.0
scale_factor = 0.05
dropout = 0.1
dropout_burst = 3.0

[sensors.jittery]        # 14.3 Hz, 3 steps + up to 2 of jitter, 5% lost
type = "StateSensorOptions"
key = "obs"
index = [2]
delay = 0.15
jitter = 0.1
noise = 0.05
update_period = 0.07
dropout = 0.05
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return load_config_text(tmp_path_factory, DELAYED, "delayed.toml")


def test_a_delayed_sensor_with_losses_holds_or_a_filter_is_called_ok(config):
    """20 traces of 400 steps: every delay row "ok" (before: 0 of 20 for lossy, slow, full and jittery,
    whose estimate was 0 steps, and for filtered, 3 steps), and at most 3 tables with any "differs"
    (measured: 0 of 20; before: 20 of 20)."""
    false_tables, delays = [], []
    for seed in range(INSPECT_SEEDS):
        result = run_inspect(config, steps=400, seed=seed)
        delays.append({entry["channel"]: entry["rows"]["delay"] for entry in result.summary})
        if flagged(result):
            false_tables.append((seed, flagged(result)))
    wrong = [
        (seed, name, row) for seed, rows in enumerate(delays) for name, row in rows.items() if row[2] != "ok"
    ]
    assert not wrong, wrong
    assert len(false_tables) <= MOST_FALSE_TABLES, false_tables
    assert {rows["lossy"][1] for rows in delays} == {"2 steps"}
    assert {rows["filtered"][1] for rows in delays} == {"2 steps"}


def test_a_wrong_delay_is_called_differs(config):
    result = run_inspect(config, steps=400, seed=0)
    entry = {s["channel"]: s for s in result.summary}
    for name in ("lossy", "slow", "filtered", "full"):
        options = config.sensors[name]
        assert entry[name]["delay_steps"] == 2, (name, entry[name]["delay_steps"])
        for delay in (0.05, 0.15):  # one step short, one step long
            rows = compare_channel(
                dataclasses.replace(options, delay=delay), 0, entry[name], 0.05, z=result.z
            )
            assert rows["rows"]["delay"][2].startswith("differs"), (name, delay, rows["rows"]["delay"])
    jittery = dataclasses.replace(config.sensors["jittery"], delay=0.25, jitter=0.0)  # 5 steps: too long
    rows = compare_channel(jittery, 0, entry["jittery"], 0.05, z=result.z)["rows"]
    assert rows["delay"][2].startswith("differs"), rows["delay"]


def test_match_delay_ignores_held_and_lost_samples():
    """The traces alone: a 10 Hz sensor read at 20 Hz, 3 steps late, 20% of its samples lost, held between
    them; the youngest reading's age would say 0 (the reset step's reading is its own sample)."""
    rng = np.random.default_rng(3)
    n, late = 600, 3
    x = np.sin(np.arange(n) * 0.07) + 0.3 * np.sin(np.arange(n) * 0.31)
    taken = np.zeros(n, int)  # the step whose sample each snapshot holds
    for t in range(1, n):
        new = t % 2 == 0 and rng.random() > 0.2
        taken[t] = t if new else taken[t - 1]
    noisy = x + 0.02 * rng.standard_normal(n)
    snapshot = noisy[taken]
    reading = np.r_[np.repeat(snapshot[0], late), snapshot[:-late]]  # padding, then the delayed snapshots
    assert match_delay(reading, x, 10)["delay_steps"] == late
    assert match_delay(1.05 * reading + 0.2, x, 10)["delay_steps"] == late  # scale and bias: same lag
