"""A Ctrl-C while the ``sensorgym`` command is still importing torch ends in one line and exit code 130,
not Python's ``KeyboardInterrupt`` traceback (issue 13: only internal bugs may print a traceback)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sensorgym_cli

from .common import command_env, sigint_default_in_child


def _command() -> list[str]:
    script = Path(sys.executable).with_name("sensorgym")
    if script.exists():
        return [str(script)]
    found = shutil.which("sensorgym")
    if found is None:
        pytest.skip("the sensorgym console script is not installed (pip install -e .)")
    return [found]


@pytest.mark.parametrize("delay", [0.3, 0.8])
def test_ctrl_c_while_starting_is_one_line_and_exit_130(tmp_path, delay):
    proc = subprocess.Popen(
        [*_command(), "train", "--timesteps", "64", "--no-progress", "--out", str(tmp_path / "run")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default_in_child,  # a suite run as a background job passes SIGINT on ignored
    )
    time.sleep(delay)  # Python is up (its SIGINT handler installed) and importing the package
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err, err
    # on a warm machine the import may already be done: then the command's own Ctrl-C handling answers
    assert "interrupted" in err.strip().splitlines()[-1], err


def test_the_entry_point_returns_the_cli_exit_code(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["sensorgym", "bogus"])
    assert sensorgym_cli.main() == 2
    assert "invalid choice" in capsys.readouterr().err


#: what a command's work loads and --help or an argument error must not wait for (issue 33 item 18: 2.3 s
#: at load 3, 18 s on a busy machine, before `sensorgym trian`'s one line)
HEAVY = ("torch", "gymnasium", "numpy", "scipy", "stable_baselines3", "matplotlib", "mujoco")


def _entry_point(tmp_path, argv: list[str], after: str = "") -> subprocess.CompletedProcess:
    """The console script's ``main()`` with ``argv`` in a fresh interpreter (as the ``sensorgym`` script
    calls it: from ``sys.argv``); it prints its exit code and the heavy modules loaded, then runs
    ``after``."""
    script = (
        "import sys\n"
        f"sys.argv = ['sensorgym', *{argv!r}]\n"
        "import sensorgym_cli\n"
        "code = sensorgym_cli.main()\n"
        f"print('EXIT', code, sorted(m for m in {HEAVY!r} if m in sys.modules))\n" + after
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=command_env(), capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["trian"], 2, "invalid choice: 'trian'"),
        ([], 2, "the following arguments are required: COMMAND"),
        (["--help"], 0, "usage: sensorgym"),
        (["fit", "--help"], 0, "usage: sensorgym fit"),
        (["inspect", "--help"], 0, "usage: sensorgym inspect"),
        (["train", "--timesteps", "x"], 2, "'x' is not a positive whole number of steps"),
        (["inspect", "--steps", "0"], 2, "'0' is not a positive whole number of steps"),
        (["eval"], 2, "the following arguments are required: RUN_DIR"),
        (["ablate", "--critic", "x"], 2, "unrecognized arguments: --critic x"),
        (["fit", "log.csv"], 2, "the following arguments are required: --channels"),
    ],
)
def test_help_and_argument_errors_answer_without_loading_torch(tmp_path, argv, code, says):
    proc = _entry_point(tmp_path, argv)
    assert proc.stdout.strip().splitlines()[-1] == f"EXIT {code} []", (proc.stdout, proc.stderr)
    assert says in (proc.stdout if code == 0 else proc.stderr), (proc.stdout, proc.stderr)
    if code == 2:
        assert len(proc.stderr.strip().splitlines()) == 1 and "Fix:" in proc.stderr, proc.stderr


def test_a_command_that_parses_runs_with_the_real_package(tmp_path):
    """After the parser ran with the package's __init__ skipped, a command imports the package as always:
    the reference envs registered, the public names there."""
    after = (
        "import gymnasium, sensorgym\n"
        "registered = 'sensorgym/BatchedPendulum-v0' in gymnasium.registry\n"
        "print('REAL', callable(sensorgym.SensorManager), registered)\n"
    )
    proc = _entry_point(tmp_path, ["demo", "--steps", "2"], after)
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("sensorgym demo: "), proc.stdout
    assert lines[-2].startswith("EXIT 0 [") and "torch" in lines[-2], proc.stdout
    assert lines[-1] == "REAL True True", (proc.stdout, proc.stderr)
