"""The control step a config runs at is the env's (issue 23 items 9 and 11): an ``[env] dt`` that
contradicts the env's own step is refused (every delay, period and latency was converted with it: 0.1 s
became 5 steps = 0.25 s on Pendulum, and ``inspect`` said "ok"), and ``eval --config`` refuses a config
that changes the env's kwargs (``frame_skip``, dynamics) or its control step, listing each change (it
compared only the env id and the number of envs, so another control rate was scored as like for like)."""

from __future__ import annotations

import pytest

pytest.importorskip("stable_baselines3")

from sensorgym.app.cli import main

from .common import one_line, sensorgym, sensorgym_here, tiny_toml


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def test_a_dt_that_contradicts_the_env_is_refused(tmp_path):
    (tmp_path / "c.toml").write_text(tiny_toml().replace("n_envs = 2", "n_envs = 2\ndt = 0.02"))
    line = one_line(sensorgym(tmp_path, "inspect", "--config", "c.toml", "--steps", "5"))
    assert line.startswith("sensorgym inspect: c.toml: config env.dt = 0.02: Pendulum-v1 gives its own"), line
    assert "0.05 s" in line and "a delay of 0.1 s would be 5 steps = 0.25 s" in line, line
    assert "Fix: remove dt from [env]" in line, line


def test_a_dt_equal_to_the_envs_own_or_for_an_env_without_one_is_accepted(tmp_path, capsys):
    (tmp_path / "same.toml").write_text(tiny_toml().replace("n_envs = 2", "n_envs = 2\ndt = 0.05"))
    assert main(["inspect", "--config", "same.toml", "--steps", "5", "--out", "a.png"]) == 0
    cartpole = tiny_toml().replace('id = "Pendulum-v1"', 'id = "CartPole-v1"\ndt = 0.02')
    (tmp_path / "cartpole.toml").write_text(cartpole)  # CartPole gives no dt: the config's is the step
    assert main(["inspect", "--config", "cartpole.toml", "--steps", "5", "--out", "b.png"]) == 0
    assert "CartPole-v1, 5 steps of 0.02 s" in capsys.readouterr().out


def test_a_dt_against_a_mujoco_envs_frame_skip_is_refused(tmp_path, capsys):
    pytest.importorskip("mujoco")
    text = (
        tiny_toml()
        .replace('id = "Pendulum-v1"', 'id = "InvertedPendulum-v5"\nkwargs = { frame_skip = 1 }\ndt = 0.04')
        .replace("index = [0, 1]", "index = [1]")
    )
    (tmp_path / "ip.toml").write_text(text)
    assert main(["inspect", "--config", "ip.toml", "--steps", "5"]) == 2
    line = capsys.readouterr().err.strip()
    assert "env.dt = 0.04: InvertedPendulum-v5 gives its own control step, 0.02 s" in line, line
    assert "(with its kwargs {'frame_skip': 1})" in line, line


def test_eval_refuses_another_env_kwargs_or_control_step(tmp_path):
    cartpole = (
        tiny_toml()
        .replace('id = "Pendulum-v1"', 'id = "CartPole-v1"\ndt = 0.02')
        .replace("delay = 0.05", "delay = 0.04")  # a whole number of steps at 0.02 s and at 0.04 s
    )
    (tmp_path / "train.toml").write_text(cartpole)
    trained = sensorgym(tmp_path, "train", "--config", "train.toml", "--out", "run")
    assert trained.returncode == 0, trained.stderr
    # another control step (the env gives none, so [env] dt is the run's): refused, named
    (tmp_path / "slow.toml").write_text(cartpole.replace("dt = 0.02", "dt = 0.04"))
    line = one_line(sensorgym(tmp_path, "eval", "run", "--config", "slow.toml"))  # the real command
    # the other cases in this process (the same main(), without another interpreter's torch import)
    assert (
        "changes what the policy in run reads" in line and "control step (env.dt): 0.02 s -> 0.04 s" in line
    )
    # other env kwargs: refused, each named
    (tmp_path / "kw.toml").write_text(
        cartpole.replace("dt = 0.02", "dt = 0.02\nkwargs = { sutton_barto_reward = true }")
    )
    line = one_line(sensorgym_here(tmp_path, "eval", "run", "--config", "kw.toml"))
    assert "env.kwargs.sutton_barto_reward: (unset) -> True" in line, line
    assert "Fix: keep the env, its kwargs and control step" in line, line
    # only a level changed: scored
    (tmp_path / "noisy.toml").write_text(cartpole.replace("noise = 0.05", "noise = 0.2"))
    scored = sensorgym_here(tmp_path, "eval", "run", "--config", "noisy.toml")
    assert scored.returncode == 0 and "under the sensors of noisy.toml" in scored.stdout, scored.stderr
