"""What the command-line tests share: one tiny TOML config (every test derives its variant from it) and
the ``sensorgym`` command run as a user runs it, in a subprocess with real folders and real signals."""

from __future__ import annotations

import contextlib
import csv
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: PPO on tiny rollouts: 64 steps per env, one epoch (the CLI tests' training in seconds)
TINY_PPO = "kwargs = { n_steps = 64, batch_size = 64, n_epochs = 1 }"

#: the one tiny config of the CLI tests: Pendulum through a delayed, noisy angle sensor, PPO on 128-step
#: rollouts (2 envs x 64 steps); ``{timesteps}`` is the budget. Variants: ``tiny_toml(...)``.
TINY_TOML = """
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
eval_episodes = {eval_episodes}
eval_every = {eval_every}
{ppo}
"""

#: a sweep of the tiny config: 2 noise levels x 2 critics x 2 seeds = 8 runs
SWEEP_TOML = """
[sweep]
seeds = [0, 1]
critic = ["symmetric", "asymmetric"]
grid = { "sensors.angle.noise" = [0.0, 0.2] }
"""
SWEEP_RUNS = 8


def tiny_toml(timesteps: int = 128, eval_episodes: int = 1, eval_every: int = 0, extra: str = "") -> str:
    """The tiny config's text with its budget, evaluation episodes and learning-curve period, plus
    ``extra`` tables appended (e.g. :data:`SWEEP_TOML`)."""
    values = dict(timesteps=timesteps, eval_episodes=eval_episodes, eval_every=eval_every, ppo=TINY_PPO)
    return TINY_TOML.format(**values) + extra


def write_config(folder: Path, name: str = "tiny.toml", **kwargs: object) -> Path:
    """Write :func:`tiny_toml` (``kwargs`` as there) to ``folder/name``; returns the path."""
    path = folder / name
    path.write_text(tiny_toml(**kwargs))  # type: ignore[arg-type]
    return path


def command_env() -> dict[str, str]:
    """The environment of a test's command: this checkout first, unbuffered output, and one torch thread
    (on a shared, busy machine two threads per process wait on each other: a tiny run took 54 s, not 3)."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "MUJOCO_GL": "egl",
        "OMP_NUM_THREADS": "1",
    }


def sensorgym(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m sensorgym ARGS`` in ``cwd``, output captured (not a terminal), to the end."""
    return subprocess.run(
        [sys.executable, "-m", "sensorgym", *args],
        cwd=cwd,
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sensorgym_here(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``sensorgym ARGS`` run in this process (the same ``main()`` the command runs, with ``cwd`` as the
    working directory and its output captured): for the variants of a check whose first case runs as a
    real subprocess, without paying a fresh interpreter's torch import again."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from sensorgym.app.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["sensorgym", *args], code, out.getvalue(), err.getvalue())


def one_line(proc: subprocess.CompletedProcess) -> str:
    """The command failed as a user mistake: exit code 2, no traceback, exactly one line on stderr."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].count("Fix:") == 1, lines[0]
    return lines[0]


def rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def running_in_group(pgid: int) -> list[int]:
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


def sigint_default_in_child() -> None:
    """A child's SIGINT as an interactive shell leaves it (the default: ``KeyboardInterrupt``), also when
    the test suite itself runs as a background job of a script, whose children inherit SIGINT ignored
    (the Ctrl-C tests then saw a command that never stopped)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sigint_ignored_in_child() -> None:
    """A child started as a shell script starts a background job (``cmd &``: SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Command:
    """``python -m sensorgym ...`` in its own process group, stdout/stderr in files (not a terminal)."""

    def __init__(self, cwd: Path, *args: str, tag: str = "", sigint_ignored: bool = False) -> None:
        """``sigint_ignored``: start it as a shell script starts a background job (``cmd &``: SIGINT ignored,
        as in SLURM batch scripts and under ``nohup``)."""
        self.cwd = cwd
        self.out, self.err = cwd / f"stdout{tag}.txt", cwd / f"stderr{tag}.txt"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sensorgym", *args],
                cwd=cwd,
                env=command_env(),
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=sigint_ignored_in_child if sigint_ignored else sigint_default_in_child,
            )

    def wait_for(self, ready: Callable[[], bool], timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None:
                pytest.fail(f"exited early ({self.proc.returncode}): {self.err.read_text()}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail("the command never got ready")
            time.sleep(0.1)

    def signal(self, sig: int = signal.SIGINT, group: bool = True) -> float:
        """Send ``sig`` to the process group (a terminal's Ctrl-C, SLURM, ``timeout``) or to the command's
        own process only (``docker stop``, ``kill PID``); return the seconds until the command exited."""
        start = time.monotonic()
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running 60 s after signal {sig}")
        return time.monotonic() - start

    def wait(self, timeout: float = 600) -> int:
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def stderr_lines(self) -> list[str]:
        """stderr without progress-bar redraws (tqdm writes them with carriage returns) and blank lines."""
        text = self.err.read_text()
        return [line for line in re.split(r"[\r\n]", text) if line.strip() and "%|" not in line]


# -- inspect's false-alarm tests ------------------------------------------------------------------------
#: seeds of a correct config each false-alarm test inspects
INSPECT_SEEDS = 20
#: Binomial(20, 0.05): 4 or more tables with a false "differs" has a chance of 1.6%
MOST_FALSE_TABLES = 3
#: the verdicts that call a configured value wrong
FLAGS = ("differs", "larger than expected", "higher")


def flagged(result) -> list[tuple[str, str, tuple[str, str, str]]]:
    """``(channel, row, (configured, estimate, verdict))`` of every row of an inspect result whose verdict
    calls the configured value wrong."""
    return [
        (entry["channel"], name, row)
        for entry in result.summary
        for name, row in entry.get("rows", {}).items()
        if row[2].startswith(FLAGS)
    ]


def load_config_text(tmp_path_factory, text: str, name: str):
    """A config loaded from ``text`` written to a fresh temporary file ``name``."""
    from sensorgym.app.config import load_config

    path = tmp_path_factory.mktemp("config") / name
    path.write_text(text)
    return load_config(path)


def t_interval(diffs: list[float]) -> tuple[float, float, float]:
    """The mean of ``diffs`` and its 95% Student-t interval, from scipy.stats.t directly (the oracle of the
    summaries' intervals)."""
    import math

    from scipy import stats

    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def ci(mean: float, lo: float, hi: float) -> str:
    """An interval as summary.md writes it: ``+12.3 [+1.0, +23.6]``."""
    return f"{mean:+,.1f} [{lo:+,.1f}, {hi:+,.1f}]"
