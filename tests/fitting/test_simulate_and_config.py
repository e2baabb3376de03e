"""The fitted options simulated through SensorManager, and the fitted tables written as config TOML."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tomllib

import sensorgym as sg
from sensorgym.fitting.config_out import merge_into, read_config, to_toml
from sensorgym.fitting.errors import FitError
from sensorgym.fitting.model import ModelParams, allan_variance
from sensorgym.fitting.simulate import LONG_LOG, SimSensor, _layout, simulate

ROOT = Path(__file__).resolve().parents[2]
SEEDS = (0, 1, 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_simulation_has_the_models_allan_deviation_and_the_losses(seed):
    ts = 0.005
    options = {"noise_density": [0.003], "bandwidth": [20.0], "random_walk_density": [2e-3],
               "dropout": 0.05, "dropout_burst": 3.0}  # fmt: skip
    m = np.array([1, 2, 4, 16, 64, 256])
    out = simulate(
        [SimSensor("gyro", ["g"], options, np.array([0.1]), ts, 20000)], {"g": m}, envs=64, seed=seed
    )
    model = np.sqrt(allan_variance(ModelParams(0.003, 20.0, 2e-3), m, ts))
    # lost samples are left out, as a log leaves them out: the deviation is the model's within a few %
    assert np.all(np.abs(out.adev["g"] / model - 1) < 0.04), out.adev["g"] / model - 1
    timing = out.timing["gyro"]
    assert timing.dropout == pytest.approx(0.05, rel=0.05)
    assert timing.burst == pytest.approx(3.0, rel=0.05)


def test_the_sampler_flags_it_reads_are_the_samples_taken():
    # simulate() reads which envs took a sample from the class's sampler; a fresh sample has age 0
    mgr = sg.SensorManager(num_envs=16, dt=0.01, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), update_period=0.01, noise_density=0.01,
                                             dropout=0.2, dropout_burst=2.0))  # fmt: skip
    state = {"x": np.zeros((16, 1), np.float32)}
    mgr.reset(state)
    sampler = mgr.storage(sg.StateSensor).sampler
    for _ in range(200):
        mgr.step(state)
        np.testing.assert_array_equal(sampler.take.numpy()[:, s.index], s.read_age().numpy() == 0)


def test_a_long_log_runs_in_up_to_four_parts_that_hold_the_longest_tau():
    segments, envs, length = _layout(720_000, 6, 64, longest_m=72_000 // 2)
    assert segments == 4 and length == 180_000 and length >= 2.5 * 36_000
    assert envs * length * 6 <= 40_000_000  # the stored readings stay bounded
    assert _layout(50_000, 6, 64, 1000)[:2] == (1, 64)  # shorter logs: 64 envs of the whole log
    assert _layout(LONG_LOG - 1, 6, 64, 1000)[0] == 1


def test_toml_round_trips_every_example_config():
    for path in sorted((ROOT / "examples" / "configs").glob("*.toml")):
        raw = tomllib.loads(path.read_text())
        assert tomllib.loads(to_toml(raw)) == raw, path.name


def test_into_a_config_replaces_the_per_sample_forms_and_keeps_the_source(tmp_path):
    raw = read_config(ROOT / "examples" / "configs" / "eval_noisy.toml")
    table = raw["sensors"]["angle"]
    assert "noise" in table
    fitted = {
        "angle": {"update_period": 0.01, "noise_density": [0.01, 0.02], "random_walk_density": [0.0, 1e-3]}
    }
    merged, changes = merge_into(raw, fitted, {"angle": 2}, "eval_noisy.toml")
    new = merged["sensors"]["angle"]
    assert "noise" not in new and new["noise_density"] == [0.01, 0.02]
    assert {k: new[k] for k in ("type", "key", "index")} == {k: table[k] for k in ("type", "key", "index")}
    assert "removed noise (replaced by noise_density)" in changes[0]
    assert raw["sensors"]["angle"]["noise"] == table["noise"]  # the original mapping is not touched


@pytest.mark.parametrize(
    ("fitted", "counts", "words"),
    [
        ({"gyro": {"noise_density": 0.1}}, {"gyro": 1}, "no [sensors.gyro]"),
        ({"angle": {"noise_density": [0.1]}}, {"angle": 1}, "has 2 components and 1 channel was fitted"),
        (
            {"angle.gyro": {"noise_density": [0.1, 0.2]}},
            {"angle.gyro": 2},
            "has no option 'gyro_noise_density'",
        ),
    ],
)
def test_into_a_config_that_cannot_take_them_is_one_line(fitted, counts, words):
    raw = read_config(ROOT / "examples" / "configs" / "train.toml")
    with pytest.raises(FitError) as e:
        merge_into(raw, fitted, counts, "train.toml")
    assert words in str(e.value) and "Fix:" in str(e.value) and "\n" not in str(e.value)


def test_imu_fields_become_prefixed_options_of_one_table():
    from sensorgym.fitting.api import fitted_tables

    options = {
        "imu.gyro": {"update_period": 0.005, "dropout": 0.0, "noise_density": [1e-3, 1e-3, 2e-3]},
        "imu.acc": {
            "update_period": 0.005,
            "dropout": 0.0,
            "noise_density": [0.02, 0.02, 0.03],
            "bandwidth": [40.0] * 3,
        },
    }
    table = fitted_tables(options)["sensors"]["imu"]
    assert table == {
        "update_period": 0.005,
        "dropout": 0.0,
        "gyro_noise_density": [1e-3, 1e-3, 2e-3],
        "acc_noise_density": [0.02, 0.02, 0.03],
        "acc_bandwidth": [40.0] * 3,
    }
    assert tomllib.loads(to_toml({"sensors": {"imu": table}}))["sensors"]["imu"] == table
