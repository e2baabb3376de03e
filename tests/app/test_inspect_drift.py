"""``sensorgym inspect`` on sensors with a bias random walk and a Gauss-Markov bias (audit 26/27): the bias
row's standard error carries the wander of the two slow terms over the first quarter of the trace, the drift
row's spread their change to the last quarter (both derived in sensorgym/app/inspect_drift.py), and the
noise density no longer absorbs the walk; a correct config shows "differs" in about 5% of its tables and a
wrong value is still called "differs".

Before the fix, on the configs below (20 traces of 400 steps each): under the Gauss-Markov bias of 0.1
(tau_c = 2 s) the bias row's errors in standard errors spread 7.8 (1 is due; up to 13) and 20 of 20 tables
were flagged; under a walk of 0.05 unit/s/sqrt(Hz) read every step 9.6 (up to 21) and 14 of 20; behind a
2 Hz filter read at 10 Hz that walk's noise density read 11% high (18%, 6.2 standard errors, over 2,000
steps, where the bias row lay up to 8.8 standard errors off); the audit's pendulum gyro (walk, Gauss-Markov
bias, scale factor, filter, bursts) 3 of 20 (the bias row)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.app.inspect_drift import gm_mean_variance, walk_variance, within_block_variance
from sensorgym.app.inspection import compare_channel, run_inspect

from .common import FLAGS, INSPECT_SEEDS, MOST_FALSE_TABLES, flagged, load_config_text

#: correct configs on Pendulum (dt = 0.05 s)
DRIFTING = """
[env]
id = "Pendulum-v1"

[sensors.wander]         # the audit's pendulum gyro (/tmp/audit_26/cfg/pend.toml)
type = "StateSensorOptions"
key = "obs"
index = [2]
update_period = 0.1
noise_density = 0.05
random_walk_density = 0.01
bias_instability = 0.05
bias_correlation_time = 5.0
scale_factor = 0.02
bandwidth = 2.0
dropout = 0.1
dropout_burst = 3.0

[sensors.walk]           # a strong walk behind a 2 Hz filter read at 10 Hz
type = "StateSensorOptions"
key = "obs"
index = [2]
update_period = 0.1
noise_density = 0.05
random_walk_density = 0.05
bandwidth = 2.0
dropout = 0.1
dropout_burst = 3.0

[sensors.markov]         # a Gauss-Markov bias alone
type = "StateSensorOptions"
key = "obs"
index = [2]
noise = 0.05
bias_instability = 0.1
bias_correlation_time = 2.0

[sensors.plain_walk]     # a strong walk read every step
type = "StateSensorOptions"
key = "obs"
index = [2]
noise = 0.05
random_walk_density = 0.05
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return load_config_text(tmp_path_factory, DRIFTING, "drifting.toml")


def test_a_correct_drifting_config_is_called_differs_in_at_most_5_percent_of_tables(config):
    """20 traces of 400 steps (22 checks a table): at most 3 tables with a "differs" (measured: 0 of 20;
    before: 20 of 20), and the walk's noise density unbiased (measured: 0.0500 mean; before: 0.0554)."""
    false_tables, densities = [], []
    for seed in range(INSPECT_SEEDS):
        result = run_inspect(config, steps=400, seed=seed)
        if flagged(result):
            false_tables.append((seed, flagged(result)))
        walk = next(entry for entry in result.summary if entry["channel"] == "walk")
        densities.append(float(walk["rows"]["noise density"][1].split(" ± ")[0]))
    assert len(false_tables) <= MOST_FALSE_TABLES, false_tables
    # 20 estimates of a spread of 0.0032: their mean within 0.0025 (3.5 standard errors) of the truth
    assert np.mean(densities) == pytest.approx(0.05, abs=0.0025), densities


def test_a_wrong_bias_walk_or_noise_density_is_called_differs(config):
    result = run_inspect(config, steps=2000, seed=0)
    assert not flagged(result), flagged(result)  # the correct config: nothing differs
    entry = {s["channel"]: s for s in result.summary}
    wrong = {
        ("walk", "noise density"): dataclasses.replace(config.sensors["walk"], noise_density=0.035),
        ("walk", "bias"): dataclasses.replace(config.sensors["walk"], bias=0.3),
        ("wander", "bias"): dataclasses.replace(config.sensors["wander"], bias=0.3),
        ("markov", "bias"): dataclasses.replace(config.sensors["markov"], bias=0.3),
        # a walk 10 times too weak: its drift over the trace is far beyond the spread
        ("plain_walk", "drift at end"): dataclasses.replace(
            config.sensors["plain_walk"], random_walk_density=0.005
        ),
    }
    for (channel, row), options in wrong.items():
        got = compare_channel(options, 0, entry[channel], 0.05, z=result.z)["rows"][row]
        assert got[2].startswith(("differs", "larger than expected")), (channel, row, got)
    # a Gauss-Markov bias 10 times too weak: its wander shows in the bias or the drift row
    weak = dataclasses.replace(config.sensors["markov"], bias_instability=0.01)
    rows = compare_channel(weak, 0, entry["markov"], 0.05, z=result.z)["rows"]
    assert any(rows[name][2].startswith(FLAGS) for name in ("bias", "drift at end")), rows


def test_the_offsets_variances_are_the_pipelines():
    """2,000 envs of 401 steps through SensorManager: the spread of the first quarter's mean and of the last
    quarter's minus the first is what walk_variance says (within 6%, the sampling error of 2,000 spreads
    being 1.6%), for a walk and for a Gauss-Markov bias."""
    envs, steps, dt = 2000, 401, 0.05
    cases = [
        ({"random_walk_density": 0.05}, (0.05 * math.sqrt(dt), 0.0, 0.0)),
        ({"bias_instability": 0.1, "bias_correlation_time": 2.0}, (0.0, 0.1, math.exp(-dt / 2.0))),
    ]
    window = steps // 4
    first, last = np.zeros(steps), np.zeros(steps)
    first[:window] = 1.0 / window
    last[-window:] = 1.0 / window
    at = (np.arange(steps), np.zeros(steps, int))
    for options, (walk, sigma_g, phi) in cases:
        manager = sg.SensorManager(num_envs=envs, dt=dt, seed=5)
        sensor = manager.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), **options))
        state = {"x": torch.zeros(envs, 1)}
        manager.reset(state)
        reads = [sensor.read()[:, 0].double().numpy().copy()]
        for _ in range(steps - 1):
            manager.step(state)
            reads.append(sensor.read()[:, 0].double().numpy().copy())
        d = np.array(reads)  # (steps, envs): the drift alone
        for weights, observed in ((first, first @ d), (last - first, (last - first) @ d)):
            expected = math.sqrt(walk_variance(weights, *at, walk, sigma_g, phi))
            assert observed.std() == pytest.approx(expected, rel=0.06), (options, observed.std(), expected)


def test_the_gauss_markov_mean_is_the_classical_formula():
    """The discrete sum against sigma_g^2 2 tau_c / T (1 - tau_c / T (1 - exp(-T / tau_c))), the variance of
    the time average of an exponentially correlated process, at fine steps."""
    for tau, duration in ((1.0, 5.0), (5.0, 2.5), (2.0, 20.0)):
        dt = tau / 2000
        n = round(duration / dt)
        exact = walk_variance(
            np.full(n, 1 / n), np.arange(n), np.zeros(n, int), 0.0, 0.3, math.exp(-dt / tau)
        )
        x = duration / tau
        classical = 0.09 * 2 / x * (1 - (1 - math.exp(-x)) / x)
        assert exact == pytest.approx(classical, rel=1e-3)
        assert gm_mean_variance(0.3, tau, duration) == pytest.approx(classical, rel=1e-12)


def test_what_a_block_keeps_of_a_walk():
    """The walk's wander around each block's mean: (B^2 - 1) / 6 per block of B samples one step apart, r^2
    per step; by simulation too."""
    members = (np.arange(1, 17), np.repeat([0, 1], 8))
    at = (np.arange(17), np.zeros(17, int))
    assert within_block_variance(members, at, {"walk": 1.0, "sigma_g": 0.0, "phi": 0.0}) == pytest.approx(
        21.0
    )
    rng = np.random.default_rng(0)
    d = np.cumsum(rng.standard_normal((20000, 17)), axis=1)[:, 1:]
    kept = sum(((d[:, b] - d[:, b].mean(1, keepdims=True)) ** 2).sum(1) for b in (slice(0, 8), slice(8, 16)))
    assert kept.mean() == pytest.approx(21.0, rel=0.03)
