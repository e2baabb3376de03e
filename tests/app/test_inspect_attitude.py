"""Issue 35 item 4: ``inspect`` shows an attitude estimate against the truth (inclination and heading
errors over time, their RMSE). The errors are checked against the BROAD metric of
:func:`sensorgym.estimators.attitude_errors` (another route: quaternion algebra, not gravity vectors), and
the command is run as a user runs it on the example config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sensorgym.app.inspect_attitude import attitude_traces
from sensorgym.estimators import attitude_errors, projected_gravity, roll_pitch

ROOT = Path(__file__).resolve().parents[2]


def _random_quaternions(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _small_turns(rng, n, degrees):
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    half = np.radians(rng.uniform(0, degrees, n)) / 2
    return np.c_[np.cos(half), axis * np.sin(half)[:, None]]


def _mul(p, q):
    p0, p1, p2, p3 = p.T
    q0, q1, q2, q3 = q.T
    return np.stack(
        [
            p0 * q0 - p1 * q1 - p2 * q2 - p3 * q3,
            p0 * q1 + p1 * q0 + p2 * q3 - p3 * q2,
            p0 * q2 - p1 * q3 + p2 * q0 + p3 * q1,
            p0 * q3 + p1 * q2 - p2 * q1 + p3 * q0,
        ],
        -1,
    )


@pytest.mark.parametrize(
    "outputs", [("quaternion",), ("projected_gravity", "quaternion"), ("roll_pitch", "quaternion")]
)
def test_the_errors_are_the_broad_metric_whichever_output_holds_the_gravity(outputs):
    rng = np.random.default_rng(0)
    n = 400
    truth = _random_quaternions(rng, n)
    est = _mul(_small_turns(rng, n, 30.0), truth)  # errors up to 30 degrees about any axis
    est[0] = truth[0]  # the episode starts on the truth: no heading offset to remove
    cols = {
        "quaternion": lambda q: q,
        "projected_gravity": lambda q: projected_gravity(q),
        "roll_pitch": lambda q: roll_pitch(q),
    }
    gt = np.concatenate([cols[o](truth) for o in outputs], -1).astype(np.float32)
    measured = np.concatenate([cols[o](est) for o in outputs], -1).astype(np.float32)
    resets = np.r_[True, np.zeros(n - 1, bool)]
    got = attitude_traces(outputs, gt, measured, resets)
    oracle = np.degrees(attitude_errors(est, truth))  # total, heading, inclination
    np.testing.assert_allclose(got["inclination"], oracle[:, 2], atol=0.02)  # float32 columns
    np.testing.assert_allclose(np.abs(got["heading"]), oracle[:, 1], atol=0.02)
    assert got["inclination"].max() > 10 and np.abs(got["heading"]).max() > 10


def test_the_heading_error_is_measured_from_each_episodes_start():
    """A constant heading offset (the estimator's own earth frame) reads as zero; a drift reads as itself,
    and a reset starts the count again."""
    n = 100
    yaw_offset = np.radians(70.0)
    drift = np.radians(np.r_[np.linspace(0, 5, 50), np.linspace(0, 3, 50)])  # a reset at step 50
    truth = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    turn = yaw_offset + drift
    est = np.c_[np.cos(turn / 2), np.zeros((n, 2)), np.sin(turn / 2)]
    resets = np.zeros(n, bool)
    resets[[0, 50]] = True
    got = attitude_traces(("quaternion",), truth, est, resets)
    np.testing.assert_allclose(got["heading"], np.degrees(drift), atol=1e-9)
    np.testing.assert_allclose(got["inclination"], 0.0, atol=1e-6)


def test_without_gravity_or_quaternion_outputs_there_is_nothing_to_show():
    got = attitude_traces(("ang_vel",), np.zeros((5, 3)), np.zeros((5, 3)), np.ones(5, bool))
    assert got == {"inclination": None, "heading": None}


def test_inspect_prints_the_estimates_rmse_and_writes_its_figure(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "fig.png"
    cfg = ROOT / "examples" / "configs" / "ant_attitude.toml"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "sensorgym",
            "inspect",
            "--config",
            str(cfg),
            "--steps",
            "150",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    assert "imu (estimate vs truth)" in run.stdout
    line = next(x for x in run.stdout.splitlines() if "incl. RMSE" in x)
    rmse = float(line.split("deg")[0].split()[-1])
    assert 0.1 < rmse < 15.0, line  # a noisy, biased IMU on a flailing Ant: degrees, not zero, not chaos
    assert (tmp_path / "fig_attitude.png").stat().st_size > 10_000
    assert "attitude figure:" in run.stdout


def test_inspect_runs_in_process_and_returns_the_errors(tmp_path):
    pytest.importorskip("matplotlib")
    from sensorgym.app.config import load_config
    from sensorgym.app.inspection import run_inspect

    cfg = load_config(ROOT / "examples" / "configs" / "ant_attitude.toml")
    result = run_inspect(cfg, steps=60, seed=0, out=tmp_path / "x.png")
    inc = result.attitude["imu"]["inclination"]
    assert inc.shape == (61,) and np.isfinite(inc).all()
    # the first reading: the truth turned by estimator_init_error = 2 degrees, then one update
    assert 1.0 < inc[0] < 3.0, inc[:3]
    assert result.attitude_figure.exists()
