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
