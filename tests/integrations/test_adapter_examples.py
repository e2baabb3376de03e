"""The RL-library examples wire the critic as the docs say (issue 23 item 6: the skrl example's critic read
the measured readings twice, ``observations`` + ``states`` = 6 + 11 = 17 values, when skrl's ``states``
already hold them), and without their library say so in one line (issue 24 item 4: a raw
``ModuleNotFoundError`` traceback)."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ..app.common import command_env, one_line
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


@pytest.mark.parametrize(
    ("example", "hidden"), [("skrl_pendulum.py", "skrl"), ("rsl_rl_pendulum.py", "rsl_rl")]
)
def test_an_rl_example_without_its_library_is_one_line(tmp_path, example, hidden):
    """As tests/app/test_cli_outputs.py checks the SB3 and MuJoCo examples: the library hidden, the example
    run as a script, one line naming the module and the extra that installs it, exit code 2."""
    script = (
        f"import runpy, sys; sys.modules[{hidden!r}] = None; sys.argv = [{example!r}]\n"
        f"runpy.run_path({str(EXAMPLES / example)!r}, run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=command_env(), capture_output=True, text=True
    )
    line = one_line(proc)
    fix = 'pip install "sensorgym[rl]"'
    assert line == f"examples/{example}: needs {hidden}, which is not installed. Fix: {fix}", line
