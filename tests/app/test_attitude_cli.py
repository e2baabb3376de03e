"""Issue 35 item 4: an attitude estimator from a config: its TOML keys (gains as values or
distributions), a sweep over its gain (``sensors.imu.estimator_kp``), and ``sensorgym train`` then
``sensorgym eval`` on the reference config, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sensorgym as sg
from sensorgym.app.ablation.plan import plan_runs
from sensorgym.app.config import ConfigError, apply_overrides, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "configs" / "ant_attitude.toml"


def _raw(**imu):
    return {
        "env": {"id": "Ant-v5"},
        "sensors": {"imu": {"type": "AttitudeOptions", "body": "torso", **imu}},
    }


def test_the_estimators_keys_parse_into_attitude_options():
    cfg = parse_config(
        _raw(
            estimator="madgwick",
            estimator_beta={"dist": "LogUniform", "low": 0.01, "high": 0.3},
            estimator_magnetometer=True,
            estimator_earth_field="c_code",
            estimator_init="truth",
            estimator_init_error=3.0,
            outputs=["projected_gravity", "quaternion", "roll_pitch", "bias"],
        )
    )
    o = cfg.sensors["imu"]
    assert isinstance(o, sg.AttitudeOptions)
    assert o.estimator_beta == sg.LogUniform(0.01, 0.3)
    assert o.outputs == ("projected_gravity", "quaternion", "roll_pitch", "bias")
    assert (o.estimator_magnetometer, o.estimator_earth_field, o.estimator_init_error) == (
        True,
        "c_code",
        3.0,
    )


@pytest.mark.parametrize(
    ("imu", "names"),
    [
        (dict(estimator="kalman"), ["sensors.imu", "estimator", "'kalman'", "madgwick"]),
        (dict(outputs=["gravity"]), ["sensors.imu", "outputs", "projected_gravity"]),
        (dict(estimator_kp={"dist": "Uniform", "low": -1.0, "high": 1.0}), ["estimator_kp", ">= 0"]),
    ],
)
def test_a_bad_estimator_key_is_one_line_naming_the_key_the_value_and_the_fix(imu, names):
    with pytest.raises(ConfigError) as err:
        parse_config(_raw(**imu))
    message = str(err.value)
    assert "\n" not in message and "Fix" in message
    for name in names:
        assert name in message, (name, message)


def test_an_estimator_key_in_an_imu_table_names_the_options_class_that_has_it():
    raw = _raw(estimator="mahony")
    raw["sensors"]["imu"]["type"] = "IMUOptions"
    with pytest.raises(
        ConfigError, match=r'estimator.* is an option of AttitudeOptions.*type = "AttitudeOptions"'
    ):
        parse_config(raw)


def test_a_sweep_over_the_estimators_gain_gives_one_run_per_value_and_seed():
    raw = _raw(estimator="mahony")
    raw["sweep"] = {"seeds": [0, 1], "grid": {"sensors.imu.estimator_kp": [0.2, 1.0, 5.0]}}
    cfg = parse_config(raw)
    runs = plan_runs(cfg)
    assert len(runs) == 3 * 2 * 2  # values x seeds x critics (symmetric and asymmetric by default)
    gains = sorted({apply_overrides(cfg, r.cell).sensors["imu"].estimator_kp for r in runs})
    assert gains == [0.2, 1.0, 5.0]


@pytest.mark.slow
def test_train_then_eval_on_the_reference_config(tmp_path):
    out = tmp_path / "run"
    train = subprocess.run(
        [sys.executable, "-m", "sensorgym", "train", "--config", str(CONFIG), "--timesteps", "2048",
         "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr
    result = json.loads((out / "result.json").read_text())
    cfg = load_config(out / "config.json")
    assert isinstance(cfg.sensors["imu"], sg.AttitudeOptions)
    evaluated = subprocess.run(
        [sys.executable, "-m", "sensorgym", "eval", str(out)], capture_output=True, text=True, timeout=900
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert f"{result['eval_return_mean']:.1f}" in evaluated.stdout  # eval reproduces the final score


def test_an_estimator_and_an_imus_per_field_terms_are_levels_a_trained_policy_may_be_scored_under(tmp_path):
    """``sensorgym eval --config`` and deployment conditions score a policy under other imperfection
    levels: for an IMU read through an estimator those include the estimator, its gains, the per-field
    error terms and a replayed recording; the outputs (what the policy reads) are not."""
    from sensorgym.app.saved_policy import policy_input_differences
    from sensorgym.core.recording import write_residuals

    rng = np.random.default_rng(0)
    residuals = write_residuals(
        tmp_path / "gyro.npz", 0.0035, {f"gyr_{a}": rng.normal(0.0, 1e-3, 2000) for a in "xyz"}
    )

    trained = parse_config(_raw(estimator="none", outputs=["projected_gravity", "ang_vel"]))
    deployed = parse_config(
        _raw(
            estimator="mahony",
            estimator_kp=0.5,
            estimator_init="truth",
            orientation_noise=0.01,
            acc_noise_density=[1e-3, 1e-3, 1e-3],
            acc_bias=0.05,
            gyro_replay=str(residuals),
            gyro_replay_channels=["gyr_x", "gyr_y", "gyr_z"],
            delay=0.04,
            outputs=["projected_gravity", "ang_vel"],
        )
    )
    assert policy_input_differences(trained, deployed) == []
    other_outputs = parse_config(_raw(estimator="none", outputs=["roll_pitch", "ang_vel"]))
    assert policy_input_differences(trained, other_outputs) == [
        "sensors.imu.outputs: ['projected_gravity', 'ang_vel'] -> ['roll_pitch', 'ang_vel']"
    ]
    moved = parse_config(_raw(estimator="none", outputs=["projected_gravity", "ang_vel"], body="pole"))
    assert policy_input_differences(trained, moved) == ["sensors.imu.body: 'torso' -> 'pole'"]
