"""Every example runs, with a tiny budget."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    ("script", "args", "needs"),
    [
        ("asymmetric_pendulum.py", ["--timesteps", "512"], "stable_baselines3"),
        ("ant_sensors.py", ["--timesteps", "64", "--num-envs", "2"], "mujoco"),
        ("custom_sensor.py", [], None),
        ("rsl_rl_pendulum.py", ["--iterations", "1", "--num-envs", "16"], "rsl_rl"),
        ("skrl_pendulum.py", ["--timesteps", "64", "--num-envs", "8"], "skrl"),
    ],
)
def test_example_runs(script, args, needs, monkeypatch, capsys):
    if needs:
        pytest.importorskip(needs)
    monkeypatch.setattr(sys, "argv", [script, *args])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    assert capsys.readouterr().out.strip()
