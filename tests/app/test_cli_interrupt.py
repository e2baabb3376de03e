"""Ctrl-C on the command line, with a real SIGINT sent to a ``sensorgym`` subprocess (to its whole process
group, as a terminal does): ``ablate`` (worker processes, in-process, Ray) and ``train`` stop within seconds,
keep what is finished, print one line saying how to resume, exit with code 130 and print no traceback;
``train`` leaves a checkpoint that ``--resume`` continues from."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

from sensorgym.app.cli import main

ROOT = Path(__file__).resolve().parents[2]
#: the first Ctrl-C must end the command within this many seconds (measured: 0.3-3 s on 2 busy cores)
STOP_WITHIN_S = 10.0

CONFIG = """
[env]
id = "Pendulum-v1"
n_envs = 2
[sensors.angle]
type = "StateSensorOptions"
key = "obs"
index = [0, 1]
delay = 0.05
noise = 0.05
history_length = 2
[algorithm]
timesteps = {timesteps}
eval_episodes = 2
kwargs = {{ n_steps = 64, batch_size = 64, n_epochs = 1 }}
[sweep]
seeds = [0, 1]
critic = ["symmetric", "asymmetric"]
grid = {{ "sensors.angle.noise" = [0.0, 0.2] }}
"""
RUNS = 8  # 2 levels x 2 critics x 2 seeds


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may land in the working directory of the test run


def _rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def _running_in_group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid`` (Linux ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


class Command:
    """``python -m sensorgym ...`` in its own process group, with stdout/stderr in files."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.cwd = cwd
        self.out, self.err = cwd / "stdout.txt", cwd / "stderr.txt"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sensorgym", *args],
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def wait_for(self, ready: Callable[[], bool], timeout: float = 240.0) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None:
                pytest.fail(f"exited early ({self.proc.returncode}): {self.err.read_text()}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail("the command never got ready")
            time.sleep(0.2)

    def interrupt(self) -> float:
        """Send SIGINT to the process group; return the seconds until the command exited."""
        start = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("still running 60 s after SIGINT")
        return time.monotonic() - start

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def stderr_lines(self) -> list[str]:
        """stderr without progress-bar redraws (tqdm writes them with carriage returns) and blank lines."""
        text = self.err.read_text()
        return [line for line in re.split(r"[\r\n]", text) if line.strip() and "%|" not in line]


def _assert_clean_interrupt(cmd: Command, seconds: float, command: str) -> str:
    """Exit code 130 within seconds, no traceback, and the one line saying how to resume; returns it."""
    err = cmd.err.read_text()
    assert cmd.proc.returncode == 130, err
    assert seconds < STOP_WITHIN_S, f"took {seconds:.1f} s to stop"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    ours = [line for line in cmd.stderr_lines() if line.startswith(f"sensorgym {command}:")]
    assert len(ours) == 1, cmd.stderr_lines()
    assert "interrupted" in ours[0] and "Resume" in ours[0]
    return ours[0]


@pytest.mark.parametrize("workers", ["2", "1"])
def test_ctrl_c_stops_ablate_keeps_finished_rows_and_resumes(tmp_path, workers, capsys):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(CONFIG.format(timesteps=768))
    args = ["ablate", "--config", str(cfg), "--out", "ab", "--workers", workers, "--threads", "1"]
    cmd = Command(tmp_path, *args)
    csv_path = tmp_path / "ab" / "results.csv"
    cmd.wait_for(lambda: len(_rows(csv_path)) >= 1)  # a run has finished
    seconds = cmd.interrupt()
    line = _assert_clean_interrupt(cmd, seconds, "ablate")
    with capsys.disabled():
        print(f"ablate --workers {workers} stopped {seconds:.2f} s after SIGINT")
    kept = _rows(csv_path)
    assert 1 <= len(kept) < RUNS, "the sweep was stopped, not finished"
    assert f"{len(kept)} of {RUNS} runs finished and are kept in ab/results.csv" in line
    assert f"with: sensorgym {' '.join(args)}" in line  # the command to resume: the same one
    assert not any(p.suffix == ".json" for p in (tmp_path / "ab" / ".finished").glob("*"))
    time.sleep(0.5)
    assert _running_in_group(cmd.proc.pid) == [], "the worker processes were left running"
    # resuming reruns only the missing runs and keeps the finished rows as they were
    assert main([*args, "--no-progress"]) == 0
    assert f"; {len(kept)} already in" in capsys.readouterr().out
    rows = _rows(csv_path)
    assert len(rows) == RUNS and len({r["run_id"] for r in rows}) == RUNS
    assert rows[: len(kept)] == kept


def test_ctrl_c_before_any_run_finished_says_so(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(CONFIG.format(timesteps=100_000))
    cmd = Command(tmp_path, "ablate", "--config", str(cfg), "--out", "ab", "--workers", "2")
    cmd.wait_for(lambda: "sweep:" in cmd.out.read_text())
    time.sleep(1.0)  # the workers are starting (importing torch): they must not print tracebacks
    seconds = cmd.interrupt()
    line = _assert_clean_interrupt(cmd, seconds, "ablate")
    assert f"none of the {RUNS} runs had finished" in line


def test_ctrl_c_stops_train_with_a_checkpoint_that_resumes(tmp_path, capsys):
    cfg = tmp_path / "train.toml"
    cfg.write_text(CONFIG.format(timesteps=200_000))
    cmd = Command(tmp_path, "train", "--config", str(cfg), "--out", "run")
    cmd.wait_for(lambda: (tmp_path / "run" / "tb").exists())
    time.sleep(2.0)  # training
    seconds = cmd.interrupt()
    line = _assert_clean_interrupt(cmd, seconds, "train")
    with capsys.disabled():
        print(f"train stopped {seconds:.2f} s after SIGINT: {line}")
    # the progress bar counts to the steps that will be trained (the budget rounded up to rollouts)
    assert "so 200,064 steps will be trained" in cmd.out.read_text()
    assert "/200064 [" in cmd.err.read_text() and "/200000 [" not in cmd.err.read_text()
    steps = int(re.search(r"interrupted at ([\d,]+) steps", line).group(1).replace(",", ""))
    assert 0 < steps < 200_000
    assert "checkpoint saved in run/checkpoint" in line
    assert line.endswith("Resume with: sensorgym train --out run --resume")
    for name in ("model.zip", "sensors.pt", "state.pt", "envs.pkl"):
        assert (tmp_path / "run" / "checkpoint" / name).exists(), name
    assert not (tmp_path / "run" / "model.zip").exists()  # no final model: training did not finish
    # --resume continues from the interrupted step (here to a small budget) and scores the model
    budget = steps + 256
    assert main(["train", "--out", "run", "--resume", "--timesteps", str(budget), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "resuming PPO" in out and "final score:" in out
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert budget <= result["timesteps"] < budget + 128  # resumed: not retrained from step 0


@pytest.mark.slow
def test_ctrl_c_stops_a_ray_sweep(tmp_path):
    pytest.importorskip("ray")
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(CONFIG.format(timesteps=100_000))
    cmd = Command(tmp_path, "ablate", "--config", str(cfg), "--out", "ab", "--ray", "local", "--no-progress")
    cmd.wait_for(lambda: "sweep:" in cmd.out.read_text())
    time.sleep(8.0)  # the Ray tasks are running
    seconds = cmd.interrupt()
    line = _assert_clean_interrupt(cmd, seconds, "ablate")
    print(f"ablate --ray local stopped {seconds:.2f} s after SIGINT: {line}")
