"""The RL-library examples wire the critic as the docs say (issue 23 item 6: the skrl example's critic read
the measured readings twice, ``observations`` + ``states`` = 6 + 11 = 17 values, when skrl's ``states``
already hold them)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch

from .common import sensor_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_skrl_example_critic_reads_the_states_once(tmp_path, monkeypatch, capsys):
    pytest.importorskip("skrl")
    monkeypatch.chdir(tmp_path)
    from sensorgym.integrations.skrl import SkrlWrapper

    example = runpy.run_path(str(EXAMPLES / "skrl_pendulum.py"), run_name="example")
    env = SkrlWrapper(sensor_env())  # states: policy (4) + critic (5)
    assert example["Value"](env).net[0].in_features == env.state_space.shape[0] == 9

    agent = example["main"](["--timesteps", "32", "--num-envs", "4", "--out", str(tmp_path / "runs")])
    value = agent.models["value"]
    # skrl's states = the critic input: measured readings (2 x history 3) + GT angle (2) + env obs (3)
    assert agent.state_space.shape == (6 + 2 + 3,)
    assert value.net[0].in_features == 11  # the other examples' critic width; 17 before the fix
    states = torch.randn(4, 11)
    out, _ = value.compute({"states": states}, role="value")  # needs nothing but the states
    assert out.shape == (4, 1)
    assert "critic input = 11 values" in capsys.readouterr().out
