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
        ("skrl_pendulum.py", ["--timesteps", "64", "--num-envs", "8", "--out", "skrl_runs"], "skrl"),
    ],
)
def test_example_runs(script, args, needs, monkeypatch, capsys, tmp_path):
    if needs:
        pytest.importorskip(needs)
    monkeypatch.chdir(tmp_path)  # whatever an example writes lands in a temp dir, not the checkout
    monkeypatch.setattr(sys, "argv", [script, *args])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    assert capsys.readouterr().out.strip()
    assert not (tmp_path / "runs").exists()  # skrl's default experiment folder is not used
