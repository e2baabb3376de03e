"""Ctrl-C and SIGTERM on the command line, with real signals sent to a ``sensorgym`` subprocess: to its whole
process group (a terminal's Ctrl-C, SLURM, ``timeout``) or to its own process only (``docker stop``,
``kill PID``). ``ablate`` (worker processes, in-process, Ray) and ``train`` stop within seconds, keep what
is finished, print one line saying how to resume, exit with code 130 (Ctrl-C) or 143 (SIGTERM) and print no
traceback; a resumed study or run is the uninterrupted one."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

from sensorgym.app.cli import main

from .common import SWEEP_TOML, Command, rows, running_in_group, sensorgym, tiny_toml

#: the first Ctrl-C must end the command within this many seconds (measured: 0.3-3 s on 2 busy cores)
STOP_WITHIN_S = 10.0


#: the tiny sweep with one seed: 2 noise levels x 2 critics (enough to stop one mid-sweep and resume it)
RUNS = 4


def _sweep_config(timesteps: int) -> str:
    return tiny_toml(
        timesteps=timesteps, eval_episodes=2, extra=SWEEP_TOML.replace("seeds = [0, 1]", "seeds = [0]")
    )


def _rows(path: Path) -> list[dict]:
    return rows(path)


def _running_in_group(pgid: int) -> list[int]:
    return running_in_group(pgid)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may land in the working directory of the test run


def _assert_clean_interrupt(cmd: Command, seconds: float, command: str, code: int = 130) -> str:
    """Exit code ``code`` within seconds, no traceback, no leaked resource, and the one line saying how to
    resume; returns it."""
    err = cmd.err.read_text()
    assert cmd.proc.returncode == code, err
    assert "leaked" not in err and "resource_tracker" not in err, err  # the workers' queues were closed
    assert seconds < STOP_WITHIN_S, f"took {seconds:.1f} s to stop"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    ours = [line for line in cmd.stderr_lines() if line.startswith(f"sensorgym {command}:")]
    assert len(ours) == 1, cmd.stderr_lines()
    assert ("interrupted" in ours[0] or "stopped by SIGTERM" in ours[0]) and "Resume" in ours[0]
    return ours[0]


@pytest.mark.parametrize(
    ("workers", "sig", "group"),
    [
        ("2", signal.SIGINT, True),  # Ctrl-C in a terminal: the whole group
        # in process: the default run keeps the two above (the same handler, plus the workers' queues)
        pytest.param("1", signal.SIGINT, True, marks=pytest.mark.slow),
        ("2", signal.SIGTERM, False),  # docker stop, kill PID: the command only, its workers are its job
    ],
    ids=["ctrl-c-workers", "ctrl-c-in-process", "sigterm-to-the-command-only"],
)
def test_a_stop_signal_stops_ablate_keeps_finished_rows_and_resumes(tmp_path, workers, sig, group, capsys):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(_sweep_config(768))
    for attempt in (1, 2):
        out = "ab" if attempt == 1 else "ab_again"
        args = ["ablate", "--config", str(cfg), "--out", out, "--workers", workers, "--threads", "1"]
        cmd = Command(tmp_path, *args)
        csv_path = tmp_path / out / "results.csv"
        cmd.wait_for(lambda path=csv_path: len(_rows(path)) >= 1)  # a run has finished
        seconds = cmd.signal(sig, group=group)
        err = cmd.err.read_text()
        # known, rare (about 1 stop in 10 on a loaded machine, docs/reliability.md): Python's resource
        # tracker reports one already-unlinked semaphore of the workers' queues at exit; a second stop
        # that reports it too fails
        if attempt == 1 and "resource_tracker" in err and "No such file or directory" in err:
            with capsys.disabled():
                print("the known resource_tracker warning after the stop; stopping a fresh study once more")
            continue
        break
    line = _assert_clean_interrupt(cmd, seconds, "ablate", 128 + sig)
    with capsys.disabled():
        print(f"ablate --workers {workers} stopped {seconds:.2f} s after {signal.Signals(sig).name}")
    kept = _rows(csv_path)
    assert 1 <= len(kept) < RUNS, "the sweep was stopped, not finished"
    assert f"{len(kept)} of {RUNS} runs finished and are kept in ab/results.csv" in line
    assert f"with: sensorgym {' '.join(args)}" in line  # the command to resume: the same one
    assert ("stopped by SIGTERM" in line) == (sig == signal.SIGTERM), line
    assert not any(p.suffix == ".json" for p in (tmp_path / out / ".finished").glob("*"))
    time.sleep(0.5)
    assert _running_in_group(cmd.proc.pid) == [], "the worker processes were left running"
    # resuming reruns only the missing runs and keeps the finished rows as they were
    assert main([*args, "--no-progress"]) == 0
    assert f"; {len(kept)} already in" in capsys.readouterr().out
    done = _rows(csv_path)
    assert len(done) == RUNS and len({r["run_id"] for r in done}) == RUNS
    assert done[: len(kept)] == kept


@pytest.mark.parametrize("command", ["ablate", "train"])
def test_sigterm_stops_a_command_started_with_sigint_ignored(tmp_path, command):
    """A background job of a shell script (``sensorgym ablate &`` in a SLURM batch script, ``nohup``)
    starts with SIGINT ignored; SIGTERM from SLURM, ``timeout`` or ``kill`` must still stop it as it stops a
    foreground one (it was swallowed: the sweep ran on, and ``timeout`` waited for it forever)."""
    cfg = tmp_path / "sweep.toml"
    if command == "ablate":
        cfg.write_text(_sweep_config(768))
        args = ["ablate", "--config", str(cfg), "--out", "ab", "--workers", "2", "--threads", "1"]
        ready = lambda: len(_rows(tmp_path / "ab" / "results.csv")) >= 1  # noqa: E731
    else:
        cfg.write_text(tiny_toml(timesteps=200_000, eval_episodes=1))
        args = ["train", "--config", str(cfg), "--out", "run", "--no-progress"]
        ready = lambda: _progress(tmp_path / "run") >= 1024  # noqa: E731  (training, with checkpoints)
    cmd = Command(tmp_path, *args, sigint_ignored=True)
    cmd.wait_for(ready)
    seconds = cmd.signal(signal.SIGTERM, group=False)
    _assert_clean_interrupt(cmd, seconds, command, 143)
    time.sleep(0.5)
    assert _running_in_group(cmd.proc.pid) == [], "the worker processes were left running"


def _scores(path: Path) -> dict[str, dict]:
    """A study's rows by run id, without the columns that measure the machine (seconds, threads)."""
    return {
        r["run_id"]: {k: v for k, v in r.items() if k not in ("train_seconds", "torch_threads")}
        for r in _rows(path)
    }


@pytest.mark.slow  # two whole sweeps (~50 s on 2 busy cores); SIGTERM's default-run test is the one above
def test_sigterm_to_a_sweep_and_resume_give_the_uninterrupted_study(tmp_path):
    """SLURM's scancel or `timeout` (SIGTERM to the whole group) mid-sweep, then the same command again:
    results.csv holds the same runs with the same scores, bit for bit, as a sweep that was never stopped.
    (Before, SIGTERM killed it at once: no resume line, leaked semaphores, exit code 143 by accident.)"""
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(_sweep_config(768))
    args = ["ablate", "--config", str(cfg), "--workers", "2", "--threads", "1"]
    cmd = Command(tmp_path, *args, "--out", "stopped")
    cmd.wait_for(lambda: len(_rows(tmp_path / "stopped" / "results.csv")) >= 1)
    seconds = cmd.signal(signal.SIGTERM, group=True)
    line = _assert_clean_interrupt(cmd, seconds, "ablate", 143)
    assert "stopped by SIGTERM" in line, line
    time.sleep(0.5)
    assert _running_in_group(cmd.proc.pid) == []
    resumed = sensorgym(tmp_path, *args, "--out", "stopped")
    assert resumed.returncode == 0, resumed.stderr
    whole = sensorgym(tmp_path, *args, "--out", "whole")
    assert whole.returncode == 0, whole.stderr
    assert len(_scores(tmp_path / "whole" / "results.csv")) == RUNS
    assert _scores(tmp_path / "stopped" / "results.csv") == _scores(tmp_path / "whole" / "results.csv")
    # and the summary, which is made from them, is the same too
    summary = (tmp_path / "stopped" / "summary.md").read_text()
    assert summary == (tmp_path / "whole" / "summary.md").read_text()


def test_ctrl_c_before_any_run_finished_says_so(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(_sweep_config(100_000))
    cmd = Command(tmp_path, "ablate", "--config", str(cfg), "--out", "ab", "--workers", "2")
    cmd.wait_for(lambda: "sweep:" in cmd.out.read_text())
    time.sleep(1.0)  # the workers are starting (importing torch): they must not print tracebacks
    seconds = cmd.signal(signal.SIGINT)
    line = _assert_clean_interrupt(cmd, seconds, "ablate")
    assert f"none of the {RUNS} runs had finished" in line


def _progress(run: Path) -> int:
    """The steps of the run's last checkpoint (0 before the first)."""
    try:
        return int(json.loads((run / "checkpoint" / "progress.json").read_text())["timesteps"])
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.parametrize(
    "sig",
    # SIGTERM to train also runs in the default run: test_a_resumed_train_is_the_uninterrupted_one
    [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
    ids=["ctrl-c", "sigterm"],
)
def test_a_stop_signal_stops_train_with_a_checkpoint_that_resumes(tmp_path, sig, capsys):
    cfg = tmp_path / "train.toml"
    cfg.write_text(tiny_toml(timesteps=200_000))
    cmd = Command(tmp_path, "train", "--config", str(cfg), "--out", "run")
    cmd.wait_for(lambda: _progress(tmp_path / "run") >= 1024)  # training, with checkpoints
    seconds = cmd.signal(sig)
    line = _assert_clean_interrupt(cmd, seconds, "train", 128 + sig)
    with capsys.disabled():
        print(f"train stopped {seconds:.2f} s after {signal.Signals(sig).name}: {line}")
    # the budget rounded up to rollouts; a log (not a terminal) gets plain lines, not a bar's redraws
    assert "so 200,064 steps will be trained" in cmd.out.read_text()
    assert "\r" not in cmd.err.read_text() and "%|" not in cmd.err.read_text()
    steps, saved = (
        int(x.replace(",", "")) for x in re.search(r"at ([\d,]+) steps; .* at ([\d,]+) steps", line).groups()
    )
    assert 0 < saved <= steps < 200_000 and saved % 128 == 0 and steps - saved < 128 + 2
    assert "checkpoint saved in run/checkpoint" in line
    assert line.endswith("Resume with: sensorgym train --out run --resume")
    for name in ("model.zip", "sensors.pt", "state.pt", "envs.pkl", "progress.json"):
        assert (tmp_path / "run" / "checkpoint" / name).exists(), name
    assert _progress(tmp_path / "run") == saved
    assert not (tmp_path / "run" / "model.zip").exists()  # no final model: training did not finish
    # --resume continues from the checkpoint (here to a small budget) and scores the model
    budget = saved + 256
    assert main(["train", "--out", "run", "--resume", "--timesteps", str(budget), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "resuming PPO" in out and "final score:" in out
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["timesteps"] == budget  # resumed at a rollout boundary: not retrained from step 0


def test_a_resumed_train_is_the_uninterrupted_one(tmp_path):
    """A run stopped for real (SIGTERM mid-run) and resumed with --resume trains the same steps to the same
    score with the same learning curve as a run that was never stopped. (It differed: the resumed run
    started fresh rollouts where the interrupt fell, trained 102,404 steps instead of 102,400, scored
    differently, and lost the learning curve's points from before the interrupt.)"""
    (tmp_path / "c.toml").write_text(tiny_toml(timesteps=3840, eval_episodes=1, eval_every=640))
    whole = sensorgym(tmp_path, "train", "--config", "c.toml", "--out", "whole")
    assert whole.returncode == 0, whole.stderr
    cmd = Command(tmp_path, "train", "--config", "c.toml", "--out", "stopped")
    cmd.wait_for(lambda: _progress(tmp_path / "stopped") >= 1280)  # after two learning-curve points
    cmd.signal(signal.SIGTERM)
    assert cmd.proc.returncode == 143, cmd.err.read_text()
    resumed = sensorgym(tmp_path, "train", "--out", "stopped", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    a = json.loads((tmp_path / "whole" / "result.json").read_text())
    b = json.loads((tmp_path / "stopped" / "result.json").read_text())
    assert b["timesteps"] == a["timesteps"] == 3840
    assert b["eval_history"] == a["eval_history"] and len(a["eval_history"]) == 5  # 640, ..., 3,200
    assert b["eval_returns"] == a["eval_returns"] and b["eval_return_mean"] == a["eval_return_mean"]
    curve = [line for line in resumed.stdout.splitlines() if line.startswith("  ") and "steps:" in line]
    assert curve == [line for line in whole.stdout.splitlines() if line.startswith("  ") and "steps:" in line]


@pytest.mark.slow
def test_ctrl_c_stops_a_ray_sweep(tmp_path):
    pytest.importorskip("ray")
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(_sweep_config(100_000))
    cmd = Command(tmp_path, "ablate", "--config", str(cfg), "--out", "ab", "--ray", "local", "--no-progress")
    cmd.wait_for(lambda: "sweep:" in cmd.out.read_text())
    time.sleep(8.0)  # the Ray tasks are running
    seconds = cmd.signal(signal.SIGINT)
    line = _assert_clean_interrupt(cmd, seconds, "ablate")
    print(f"ablate --ray local stopped {seconds:.2f} s after SIGINT: {line}")


def test_a_stop_caught_inside_exec_code_still_exits_143_not_by_sigint(tmp_path):
    """CPython marks a KeyboardInterrupt that leaves code run by ``exec()`` as unhandled even once caught,
    and at exit kills the process with SIGINT: a SIGTERM that landed while an import built a dataclass (in
    ``train``'s setup: torch._dynamo) gave exit status -2 instead of 143, in about 1 of 3 tries at the
    right moment. The command line forgets that mark once it has handled the stop."""
    import subprocess
    import sys

    from .common import command_env

    (tmp_path / "stop_in_exec.py").write_text(
        "from sensorgym.app import cli\n"
        "from sensorgym.app.commands import demo\n"
        "# the command's work: a SIGTERM that lands inside exec'd code (as in a dataclass being built)\n"
        "demo.run = lambda args: exec('import signal; signal.raise_signal(signal.SIGTERM)')\n"
        "raise SystemExit(cli.main(['demo']))\n"
    )
    env = {**command_env(), "PYTHONPATH": f"{command_env()['PYTHONPATH']}:{tmp_path}"}
    done = subprocess.run(  # run as `python -m`, like `python -m sensorgym`
        [sys.executable, "-m", "stop_in_exec"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert "sensorgym demo: stopped by SIGTERM" in done.stderr and "Traceback" not in done.stderr
