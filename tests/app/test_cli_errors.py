"""User errors on the command line are one line (exit code 2, no traceback) naming the config file, the key,
the value and the fix; a missing optional package names the exact ``pip install "sensorgym[...]"``; and
``--help`` is plain text with help for every option."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sensorgym.app.cli import build_parser, install_fix, main

from .common import tiny_toml

ROOT = Path(__file__).resolve().parents[2]

BASE = tiny_toml()  # the shared tiny config; each case edits one line of it


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may land in the working directory of the test run


def _one_line_error(capsys, argv: list[str]) -> str:
    """Run ``main(argv)``: it must return 2 and print exactly one line to stderr (returned)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- config mistakes: the file, the key, the value and the fix -------------------------------------------
@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('id = "Pendulum-v1"', 'id = "Pendulm-v1"', ["env.id = 'Pendulm-v1'", "did you mean 'Pendulum-v1'"]),
        ("timesteps = 128", "timesteps = 0", ["algorithm.timesteps = 0", "Fix: write 100000"]),
        ("eval_episodes = 1", "eval_episodes = 0", ["algorithm.eval_episodes = 0", "Fix:"]),
        ("n_steps = 64", "n_stepz = 64", ["algorithm.kwargs.n_stepz = 64", "did you mean 'n_steps'"]),
        ("n_steps = 64", 'n_steps = "x"', ["algorithm.kwargs.n_steps = 'x'", "Fix:"]),
        ("noise = 0.05", "noise = -2", ["sensors.angle", "noise=-2", "Fix: use 2.0 or 0.0"]),
        ("noise = 0.05", "nosie = 0.05", ["sensors.angle.nosie", "did you mean 'noise'"]),
        ("index = [0, 1]", "index = [0, 5]", ["sensor 'angle'", "index [5] out of range", "Fix:"]),
        ('key = "obs"', "", ["sensors.angle", "missing key", "Fix: add key = <value> to [sensors.angle]"]),
        ("n_envs = 2", "n_envs = 2\nn_envs = 3", ["cannot be parsed (TOML)", "line", "Fix:"]),
        # found by a review: each was a traceback, or a failure after the whole training budget
        (
            "n_envs = 2",
            "n_envs = 2\nkwargs = { max_episode_step = 10 }",
            ["env.kwargs", "max_episode_step", "Fix:"],
        ),
        ("n_epochs = 1 }", 'n_epochs = 1, learning_rate = "fast" }', ["learning_rate = 'fast'", "a number"]),
        (
            "n_envs = 2",
            "n_envs = 2\n[critic]\nsensors = []\nenv_obs = false",
            ["critic.sensors = []", "Fix:"],
        ),
        (
            'id = "Pendulum-v1"',
            'id = "sensorgym/BatchedPendulum-v0"',
            ["vector-only", "Fix: use a single-env"],
        ),
        ("n_envs = 2", 'n_envs = 2\nvectorization = "async"', ["env.vectorization = 'async'", "Fix: write"]),
        ('id = "Pendulum-v1"', 'id = "CartPole-v1"', ["cannot infer the control step", "Fix: add dt = "]),
        ("n_envs = 2", "n_envs = 2\ndt = -1", ["env.dt = -1", "Fix: write e.g. dt = 0.02"]),
        ("n_epochs = 1 }", "n_epochs = 1 }\n[sweep]\nseeds = [0, 0]", ["sweep.seeds = [0, 0]", "repeated"]),
        (
            "n_epochs = 1 }",
            'n_epochs = 1 }\n[sweep]\ngrid = { "critic.type" = ["symmetric"] }',
            ["sweep.grid.critic.type", "use sweep.critic"],
        ),
    ],
)
def test_config_mistakes_are_one_line_naming_file_key_value_and_fix(tmp_path, capsys, old, new, expected):
    cfg = tmp_path / "mine.toml"
    assert old in BASE
    cfg.write_text(BASE.replace(old, new))
    line = _one_line_error(capsys, ["train", "--config", str(cfg), "--no-progress"])
    assert line.startswith(f"sensorgym train: {cfg}: "), line
    for part in expected:
        assert part in line, line
    assert line.count("Fix:") == 1, line  # never doubled
    assert ".." not in line.replace("...", ""), line


@pytest.mark.parametrize("command", ["train", "ablate", "inspect"])
def test_a_model_file_the_env_cannot_find_is_one_line_naming_the_working_directory(tmp_path, capsys, command):
    """A MuJoCo env's ``xml_file`` relative to another folder (the transfer study's, run from elsewhere) was
    a traceback from Gymnasium's constructor ("OSError: File ... does not exist")."""
    pytest.importorskip("mujoco")
    cfg = tmp_path / "mine.toml"
    cfg.write_text(
        BASE.replace('id = "Pendulum-v1"', 'id = "InvertedPendulum-v5"')
        .replace("n_envs = 2", 'n_envs = 2\nkwargs = { xml_file = "./models/pendulum.xml" }')
        .replace('key = "obs"', 'key = "obs"\nshape = [4]')
    )
    line = _one_line_error(capsys, [command, "--config", str(cfg)])
    assert "config env.kwargs = {'xml_file': './models/pendulum.xml'}" in line, line
    assert f"working directory {tmp_path}" in line and "Fix: run from the folder" in line, line


def test_a_missing_model_file_outside_the_preflight_is_one_line_too(tmp_path):
    """``eval RUN`` builds the run's own env without a preflight: Gymnasium's OSError for a missing model
    file is a user's path, answered in one line (the eval of a transfer-study run from another folder)."""
    from sensorgym.app.cli import _user_message

    message = _user_message(OSError("File ./examples/data/model.xml does not exist"))
    assert message == (
        "the env could not open a file it was given (File ./examples/data/model.xml does not exist; working "
        f"directory {tmp_path}). Fix: run from the folder a relative path is relative to, or give an "
        "absolute path."
    )
    assert _user_message(OSError("some other failure")) is None  # an internal failure keeps its traceback


def test_a_one_step_rollout_is_refused_before_sb3_asserts(tmp_path, capsys):
    cfg = tmp_path / "mine.toml"
    cfg.write_text(BASE.replace("n_envs = 2", "n_envs = 1").replace("n_steps = 64", "n_steps = 1"))
    line = _one_line_error(capsys, ["train", "--config", str(cfg), "--no-progress"])
    assert "algorithm.kwargs.n_steps = 1 with env.n_envs = 1" in line and "Fix: write e.g." in line, line


def test_a_wrong_type_of_option_has_one_fix_not_two(tmp_path, capsys):
    cfg = tmp_path / "mine.toml"
    cfg.write_text(BASE.replace("noise = 0.05", 'noise = "abc"'))
    line = _one_line_error(capsys, ["inspect", "--config", str(cfg)])
    assert "noise='abc'" in line and "Fix: check the" not in line, line
    assert line.count("Fix:") == 1 and ".." not in line, line


def test_a_sweep_cell_that_does_not_fit_the_env_is_refused_before_any_run(tmp_path, capsys):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(BASE + '[sweep]\nseeds = [0]\ngrid = { "sensors.angle.index" = [[0], [7]] }\n')
    line = _one_line_error(capsys, ["ablate", "--config", str(cfg), "--out", "ab", "--no-progress"])
    assert f"{cfg}: with sensors.angle.index = [7]" in line and "out of range" in line
    assert not (tmp_path / "ab" / "results.csv").exists()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["train", "--timesteps", "0"], "--timesteps: '0' is not a positive whole number of steps. Fix:"),
        (["train", "--timesteps", "1e5"], "'1e5' is not a positive whole number"),
        (["ablate", "--workers", "0"], "--workers: '0' is not a positive whole number of workers"),
        (["eval", "--episodes", "0", "x"], "--episodes: '0'"),
        (["inspect", "--steps", "-3"], "--steps: '-3'"),
        (["eval"], "required: RUN_DIR. Fix: see `sensorgym eval --help`"),
        (["eval", "nothere"], "run directory nothere: no such run directory. Fix: pass the run directory"),
        (["train", "--config", "nothere.toml"], "config file 'nothere.toml' does not exist. Fix:"),
        (["train", "--out", "nothere", "--resume"], "--out nothere: no run to resume there"),
        (["inspect", "--model", "nothere"], "--model nothere: no such run directory. Fix:"),
        (["bogus"], "invalid choice: 'bogus'"),
    ],
)
def test_flag_and_path_mistakes_are_one_line_with_a_fix(capsys, argv, expected):
    pytest.importorskip("stable_baselines3")
    line = _one_line_error(capsys, argv)
    assert expected in line and "Fix:" in line, line


def test_eval_of_a_file_says_it_needs_a_run_directory(tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    (tmp_path / "model.zip").write_text("")
    line = _one_line_error(capsys, ["eval", str(tmp_path / "model.zip")])
    assert "needs a run directory" in line


def test_wrong_env_id_in_a_real_process_prints_one_line(tmp_path):
    """The headline case of the issue (29-56 lines of traceback), run as a user runs it."""
    cfg = tmp_path / "mine.toml"
    cfg.write_text(BASE.replace('id = "Pendulum-v1"', 'id = "Pendulm-v1"'))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "sensorgym", "train", "--config", str(cfg)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "did you mean 'Pendulum-v1'" in proc.stderr and str(cfg) in proc.stderr
    assert list(tmp_path.iterdir()) == [cfg]  # nothing written


# -- missing optional packages: the exact pip command --------------------------------------------------------
def test_install_fix_names_the_extras():
    assert install_fix(["tqdm"]) == 'pip install "sensorgym[plot]"'
    assert install_fix(["stable_baselines3", "tensorboard"]) == 'pip install "sensorgym[plot,sb3]"'
    assert install_fix(["ray"]) == 'pip install "sensorgym[ray]"'


@pytest.mark.parametrize(
    ("argv", "hidden", "fix"),
    [
        (["train"], ["stable_baselines3", "tqdm", "tensorboard"], 'pip install "sensorgym[plot,sb3]"'),
        (["train"], ["tqdm"], 'pip install "sensorgym[plot]"'),
        (["ablate"], ["matplotlib"], 'pip install "sensorgym[plot]"'),
        (["ablate", "--ray", "auto"], ["ray"], 'pip install "sensorgym[ray]"'),
        (["inspect"], ["matplotlib"], 'pip install "sensorgym[plot]"'),
        (["eval", "run"], ["stable_baselines3"], 'pip install "sensorgym[sb3]"'),
    ],
)
def test_a_missing_extra_names_the_exact_pip_install(monkeypatch, capsys, argv, hidden, fix):
    # on a terminal, where the progress bars (tqdm) are drawn; elsewhere plain lines need no tqdm
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    for module in hidden:
        monkeypatch.setitem(sys.modules, module, None)  # find_spec -> None, import -> ImportError
    line = _one_line_error(capsys, argv)
    assert line.endswith(f"Fix: {fix}"), line
    for module in hidden:
        assert module in line


def test_train_without_tqdm_runs_with_no_progress(monkeypatch, tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("tensorboard")
    monkeypatch.setitem(sys.modules, "tqdm", None)
    cfg = tmp_path / "mine.toml"
    cfg.write_text(BASE)
    assert main(["train", "--config", str(cfg), "--out", "run", "--no-progress"]) == 0


def test_a_module_missing_deep_inside_a_command_is_one_line(monkeypatch, capsys):
    from sensorgym.app.commands import demo

    def broken(args: argparse.Namespace) -> int:
        raise ModuleNotFoundError("No module named 'mujoco'", name="mujoco")

    monkeypatch.setattr(demo, "run", broken)
    line = _one_line_error(capsys, ["demo"])
    assert (
        line == 'sensorgym demo: needs mujoco, which is not installed. Fix: pip install "sensorgym[mujoco]"'
    )


def test_an_internal_bug_still_shows_its_traceback(monkeypatch):
    from sensorgym.app.commands import demo

    def broken(args: argparse.Namespace) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(demo, "run", broken)
    with pytest.raises(ZeroDivisionError):
        main(["demo"])


# -- --help --------------------------------------------------------------------------------------------------
def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", [None, "demo", "inspect", "train", "eval", "ablate"])
def test_help_is_plain_text(capsys, command):
    assert main([*([command] if command else []), "--help"]) == 0
    text = capsys.readouterr().out
    assert "``" not in text and ":class:" not in text and ":func:" not in text
    assert text.startswith("usage: sensorgym")


def test_every_option_has_help_text():
    for name, sub in _subparsers().items():
        for action in sub._actions:
            assert action.help, f"sensorgym {name} {action.option_strings or action.dest}: no help text"


def test_help_explains_timesteps_seed_steps_and_episodes(capsys):
    texts = {}
    for command in ("train", "eval", "inspect", "demo", "ablate"):
        main([command, "--help"])
        texts[command] = " ".join(capsys.readouterr().out.split())
    assert "--timesteps STEPS training budget in env steps" in texts["train"]
    assert "rounded up to whole PPO rollouts" in texts["train"]
    assert "--seed SEED training seed" in texts["train"]
    assert "--episodes EPISODES evaluation episodes" in texts["eval"]
    assert "--seed SEED seed of the evaluation envs" in texts["eval"]
    assert "--steps STEPS control steps to record" in texts["inspect"]
    assert "--steps STEPS rows to show: the reset (step 0) and the control steps after it" in texts["demo"]
    assert "RUN_DIR the run directory" in texts["eval"]
    assert "config.json" in texts["train"] and "config.json" in texts["ablate"]
