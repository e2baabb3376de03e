"""A command never loses what a reused ``--out`` holds (issue 24 item 1), and the paths and places a user
can get wrong are one line, not a traceback (item 4): a file or a read-only folder as ``--out``, ``--ray``
with no cluster, a missing MuJoCo, an example without its extra. Run as a user runs them: ``python -m
sensorgym`` in a subprocess, on real folders."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

from .common import ROOT, command_env, one_line, rows, sensorgym, sensorgym_here, tiny_toml

#: one run (1 level x 1 critic x 1 seed) of the tiny config: a study in seconds
ONE_RUN = '[sweep]\nseeds = [0]\ncritic = ["asymmetric"]\ngrid = { "sensors.angle.noise" = [0.1] }\n'


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may land in the working directory of the test run


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes): what must survive a refused command."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A finished one-run study of the tiny config, written by `sensorgym ablate` (copied per test)."""
    folder = tmp_path_factory.mktemp("study")
    (folder / "tiny.toml").write_text(tiny_toml(extra=ONE_RUN))
    proc = sensorgym(folder, "ablate", "--config", "tiny.toml", "--out", "ab", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A finished tiny training run, written by `sensorgym train` (copied per test)."""
    folder = tmp_path_factory.mktemp("run")
    (folder / "tiny.toml").write_text(tiny_toml())
    proc = sensorgym(folder, "train", "--config", "tiny.toml", "--out", "run")
    assert proc.returncode == 0, proc.stderr
    return folder


def _copy(source: Path, tmp_path: Path) -> None:
    for entry in source.iterdir():
        (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, tmp_path / entry.name)


# -- item 1: a reused --out -------------------------------------------------------------------------------
def test_ablate_refuses_a_folder_holding_a_study_of_another_config(study, tmp_path):
    _copy(study, tmp_path)
    before = _snapshot(tmp_path / "ab")
    (tmp_path / "other.toml").write_text(tiny_toml(extra=ONE_RUN).replace("delay = 0.05", "delay = 0.1"))
    line = one_line(sensorgym(tmp_path, "ablate", "--config", "other.toml", "--out", "ab", "--workers", "1"))
    assert line.startswith("sensorgym ablate: --out ab holds a study of another config"), line
    assert "sensors.angle.delay" in line and "1 finished run(s)" in line and "--force" in line, line
    assert _snapshot(tmp_path / "ab") == before  # config.json, results.csv and the rest untouched
    # a new budget is another config too (the runs change)
    proc = sensorgym(tmp_path, "ablate", "--config", "tiny.toml", "--out", "ab", "--timesteps", "256")
    assert "algorithm.timesteps" in one_line(proc)
    assert _snapshot(tmp_path / "ab") == before


def test_ablate_force_moves_the_old_study_aside_untouched(study, tmp_path):
    _copy(study, tmp_path)
    before = _snapshot(tmp_path / "ab")
    (tmp_path / "other.toml").write_text(tiny_toml(extra=ONE_RUN).replace("delay = 0.05", "delay = 0.1"))
    proc = sensorgym(tmp_path, "ablate", "--config", "other.toml", "--out", "ab", "--force", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    (moved,) = (tmp_path / "ab").glob("replaced-*")
    assert f"--force: moved the study ab held to {moved.relative_to(tmp_path)}" in proc.stdout
    assert _snapshot(moved) == before  # the old study, byte for byte
    saved = json.loads((tmp_path / "ab" / "config.json").read_text())
    assert saved["sensors"]["angle"]["delay"] == 0.1
    assert len(rows(tmp_path / "ab" / "results.csv")) == 1  # the new study's run only


def test_ablate_resumes_and_extends_a_study_of_the_same_config(study, tmp_path):
    """The same config resumes; another [sweep] of it (here: another swept key) adds runs, and the rows
    already there keep every value (their swept column was blanked when the CSV was rewritten)."""
    _copy(study, tmp_path)
    (old,) = rows(tmp_path / "ab" / "results.csv")
    proc = sensorgym(tmp_path, "ablate", "--config", "tiny.toml", "--out", "ab")
    assert proc.returncode == 0 and "1 already in ab/results.csv, 0 to run" in proc.stdout, proc.stderr
    (tmp_path / "more.toml").write_text(
        tiny_toml(extra=ONE_RUN.replace('"sensors.angle.noise" = [0.1]', '"sensors.angle.delay" = [0.1]'))
    )
    proc = sensorgym(tmp_path, "ablate", "--config", "more.toml", "--out", "ab", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    first, second = rows(tmp_path / "ab" / "results.csv")
    assert first == {**old, "sensors.angle.delay": ""}  # nothing of the old row changed or went missing
    assert second["sensors.angle.delay"] == "0.1" and second["sensors.angle.noise"] == ""


def test_train_refuses_a_finished_run_and_an_interrupted_one(run, tmp_path):
    _copy(run, tmp_path)
    before = _snapshot(tmp_path / "run")
    steps = json.loads((tmp_path / "run" / "result.json").read_text())["timesteps"]
    line = one_line(sensorgym(tmp_path, "train", "--config", "tiny.toml", "--out", "run"))
    assert line.startswith(f"sensorgym train: --out run holds a finished run ({steps:,} steps, final score")
    assert "--force" in line and "--resume --timesteps" in line, line
    assert _snapshot(tmp_path / "run") == before
    # an interrupted run: a checkpoint and no final model
    (tmp_path / "run" / "model.zip").unlink()
    (tmp_path / "run" / "result.json").unlink()
    before = _snapshot(tmp_path / "run")
    line = one_line(sensorgym(tmp_path, "train", "--out", "run"))
    assert f"--out run holds a run at {steps:,} steps that did not finish" in line, line
    assert "sensorgym train --out run --resume" in line and "--force" in line, line
    assert _snapshot(tmp_path / "run") == before  # the checkpoint was not overwritten
    # the other kind of output folder
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "results.csv").write_text("run_id,critic,seed\nx,symmetric,0\n")
    assert "holds an ablation study" in one_line(sensorgym(tmp_path, "train", "--out", "ab"))


def test_train_force_moves_the_old_run_aside(run, tmp_path):
    _copy(run, tmp_path)
    before = _snapshot(tmp_path / "run")
    proc = sensorgym(tmp_path, "train", "--config", "tiny.toml", "--out", "run", "--force")
    assert proc.returncode == 0, proc.stderr
    (moved,) = (tmp_path / "run").glob("replaced-*")
    assert _snapshot(moved) == before
    assert (tmp_path / "run" / "model.zip").exists() and (tmp_path / "run" / "result.json").exists()


@pytest.mark.parametrize("command", ["train", "ablate"])
def test_a_users_own_file_of_an_output_name_is_not_overwritten(tmp_path, command):
    """A folder holding a ``config.json`` that sensorgym did not write (a user's own notes) is refused in one
    line; with ``--force`` it is moved aside, byte for byte (it was overwritten without a word)."""
    (tmp_path / "tiny.toml").write_text(tiny_toml(extra=ONE_RUN if command == "ablate" else ""))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text('{"my": "notes"}')
    workers = ["--workers", "1"] if command == "ablate" else []
    args = [command, "--config", "tiny.toml", "--out", "mine", *workers]
    line = one_line(sensorgym(tmp_path, *args))
    assert line == (
        f"sensorgym {command}: --out mine holds config.json, which `sensorgym {command}` did not write and "
        "would overwrite. Fix: choose another --out (an empty or new folder), or --force (which moves those "
        "files to mine/replaced-<time>/, nothing is deleted)."
    ), line
    assert (tmp_path / "mine" / "config.json").read_text() == '{"my": "notes"}'
    proc = sensorgym(tmp_path, *args, "--force")
    assert proc.returncode == 0, proc.stderr
    (moved,) = (tmp_path / "mine").glob("replaced-*")
    assert (moved / "config.json").read_text() == '{"my": "notes"}'


def test_train_resume_on_a_study_says_it_holds_no_run(study, tmp_path):
    _copy(study, tmp_path)
    before = _snapshot(tmp_path / "ab")
    proc = sensorgym(tmp_path, "train", "--resume", "--out", "ab")
    line = one_line(proc)
    assert line.startswith(
        "sensorgym train: --out ab holds an ablation study (results.csv), not a `sensorgym train` run: there "
        "is nothing to resume."
    ), line
    assert "resuming" not in proc.stdout  # refused before it says what it would do
    assert _snapshot(tmp_path / "ab") == before


def test_the_readme_says_what_a_reused_out_does():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "A reused `--out`" in readme and "--force" in readme and "replaced-" in readme


# -- item 4: paths and places -----------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["train", "ablate"])
def test_out_pointing_at_a_file_is_one_line(tmp_path, command):
    (tmp_path / "tiny.toml").write_text(tiny_toml(extra=ONE_RUN))
    (tmp_path / "results").write_text("my notes")
    run = sensorgym if command == "train" else sensorgym_here  # the same check: one real process is enough
    line = one_line(run(tmp_path, command, "--config", "tiny.toml", "--out", "results"))
    assert f"sensorgym {command}: --out results is a file" in line, line
    assert (tmp_path / "results").read_text() == "my notes"


def test_inspect_out_pointing_at_a_folder_is_one_line(tmp_path):
    (tmp_path / "figs").mkdir()
    line = one_line(sensorgym_here(tmp_path, "inspect", "--out", "figs", "--steps", "20"))
    assert "--out figs is a folder" in line and "figs/inspect.png" in line, line


def _read_only(folder: Path) -> list[str]:
    """A command prefix that runs with ``folder`` read-only: a read-only bind mount in a private mount
    namespace as root (root writes through chmod), else the folder's write permission removed."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return []
    unshare = shutil.which("unshare")
    probe = subprocess.run(
        [unshare or "unshare", "-m", "sh", "-c", f"mount --bind {folder} {folder}"], capture_output=True
    )
    if unshare is None or probe.returncode != 0:
        pytest.skip("cannot make a read-only folder here (root without mount namespaces)")
    script = f'mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec "$@"'
    return [unshare, "-m", "sh", "-c", script, "sh"]


#: each command with a config and an --out inside the folder ``locked`` (fit: the x-io log's gyro channel)
def _writing_command(command: str, locked: Path) -> list[str]:
    if command == "fit":
        log = str(ROOT / "tests/data/xio_fusion_sensor_data.csv")
        return ["fit", log, "--channels", "Gyroscope X (deg/s)", "--out", str(locked / "fit")]
    out = str(locked / ("fig.png" if command == "inspect" else "out"))
    args = ["--config", "tiny.toml"] if command != "inspect" else ["--steps", "20"]
    return [command, *args, "--out", out]


@pytest.mark.parametrize("command", ["train", "ablate", "inspect", "fit"])
def test_a_read_only_out_is_one_line(tmp_path, command):
    (tmp_path / "tiny.toml").write_text(tiny_toml(extra=ONE_RUN))
    locked = tmp_path / "locked"
    locked.mkdir()
    proc = subprocess.run(
        [*_read_only(locked), sys.executable, "-m", "sensorgym", *_writing_command(command, locked)],
        cwd=tmp_path,
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = one_line(proc)
    assert "cannot write" in line and str(locked) in line, line
    if os.geteuid() == 0:  # the read-only bind mount
        assert "on a read-only file system. Fix: choose an --out you can write to" in line, line
        assert "on a writable disk" in line, line
    assert "free space" not in line, line  # no disk is full (fit had said "Fix: free space")


def _write_protected(folder: Path) -> list[str]:
    """A command prefix under which ``folder``, chmod 555, cannot be written: for a user the chmod itself;
    root writes through permissions, so as root the command runs without the two capabilities that let it
    (``setpriv`` drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH), still as root: the chmod stops it."""
    folder.chmod(0o555)
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root writes through a chmod, and setpriv (util-linux) is not here to drop that")
        caps = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]
    probe = [*prefix, sys.executable, "-c", f"open({str(folder / 'probe')!r}, 'w')"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        pytest.skip(f"a chmod 555 folder is writable here ({'root' if os.geteuid() == 0 else 'a user'})")
    return prefix


@pytest.mark.parametrize("command", ["train", "ablate", "inspect", "fit"])
def test_a_write_protected_out_says_it_is_not_writable_and_the_fix(tmp_path, command):
    """A folder without write permission as --out (issue 33 item 17): "not writable (permission denied)"
    and the fix (another --out, or chmod u+w), never "free space" (fit's line had said "Fix: free space")."""
    (tmp_path / "tiny.toml").write_text(tiny_toml(extra=ONE_RUN))
    locked = tmp_path / "locked"
    locked.mkdir()
    try:
        prefix = _write_protected(locked)
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "sensorgym", *_writing_command(command, locked)],
            cwd=tmp_path,
            env=command_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        locked.chmod(0o755)
    line = one_line(proc)
    assert f"{locked} is not writable (permission denied)" in line or "it is not writable (permission" in line
    assert "Fix: choose an --out you can write to" in line and f"(chmod u+w {locked})" in line, line
    assert "free space" not in line, line
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (errno.EACCES, "is not writable (permission denied). Fix: choose an --out you can write to"),
        (errno.EPERM, "is not writable (permission denied). Fix: choose an --out you can write to"),
        (errno.EROFS, "is on a read-only file system. Fix: choose an --out you can write to"),
        (errno.ENOSPC, "no space is left on its disk. Fix: free space there, or choose an --out"),
        (errno.EDQUOT, "your disk quota is used up. Fix: free space there, or choose an --out"),
        (errno.ENOTDIR, "(a file stands where a folder is needed, or a folder where a file is). Fix: choose"),
        (errno.EEXIST, "(a file stands where a folder is needed, or a folder where a file is). Fix: choose"),
    ],
)
def test_each_cause_of_a_failed_write_has_its_own_fix(tmp_path, capsys, monkeypatch, code, expected):
    """What a command says when writing fails inside it (where fit writes its files): only a full disk is
    told to free space. The OSError is raised where the command writes, as the machine would."""
    import sensorgym.app.inspection as inspection

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code), str(tmp_path / "out" / "inspect.png"))

    monkeypatch.setattr(inspection, "run_inspect", refuse)
    done = sensorgym_here(tmp_path, "inspect", "--steps", "5", "--out", str(tmp_path / "out" / "inspect.png"))
    line = one_line(done)
    assert line.startswith(f"sensorgym inspect: cannot write {tmp_path / 'out' / 'inspect.png'}: "), line
    assert expected in line, line
    assert ("free space" in line) == (code in (errno.ENOSPC, errno.EDQUOT)), line


def test_ray_with_no_cluster_is_one_line_and_writes_nothing(tmp_path):
    pytest.importorskip("ray")
    (tmp_path / "tiny.toml").write_text(tiny_toml(extra=ONE_RUN))
    env = {k: v for k, v in command_env().items() if k != "RAY_ADDRESS"}
    args = ["ablate", "--config", "tiny.toml", "--out", "ab", "--ray", "auto"]
    proc = subprocess.run(
        [sys.executable, "-m", "sensorgym", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = one_line(proc)
    assert "--ray auto: no Ray cluster to connect to" in line and "--ray local" in line, line
    assert list((tmp_path / "ab").iterdir()) == []  # no config.json of a study that never ran


def test_a_missing_mujoco_is_one_line_with_one_fix(tmp_path):
    """Gymnasium's own "run `pip install gymnasium[mujoco]`" was printed beside ours: two fixes."""
    script = (
        "import sys; sys.modules['mujoco'] = None\n"  # as if MuJoCo were not installed
        "from sensorgym.app.cli import main\n"
        f"sys.exit(main(['inspect', '--config', {str(ROOT / 'examples/configs/sampler_study.toml')!r}]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=command_env(), capture_output=True, text=True
    )
    line = one_line(proc)
    assert line.count("pip install") == 1 and 'Fix: pip install "sensorgym[mujoco]"' in line, line
    assert "gymnasium[mujoco]" not in line


@pytest.mark.parametrize(
    ("example", "hidden", "fix"),
    [
        ("asymmetric_pendulum.py", "stable_baselines3", 'pip install "sensorgym[sb3]"'),
        ("ant_sensors.py", "stable_baselines3", 'pip install "sensorgym[sb3]"'),
        ("ant_sensors.py", "mujoco", 'pip install "sensorgym[mujoco]"'),
    ],
)
def test_an_example_without_its_extra_is_one_line(tmp_path, example, hidden, fix):
    script = (
        f"import runpy, sys; sys.modules[{hidden!r}] = None; sys.argv = [{example!r}]\n"
        f"runpy.run_path({str(ROOT / 'examples' / example)!r}, run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=command_env(), capture_output=True, text=True
    )
    line = one_line(proc)
    assert line == f"examples/{example}: needs {hidden}, which is not installed. Fix: {fix}", line


# -- item 5: pointing the user the right way ----------------------------------------------------------------
def test_inspect_model_uses_the_runs_own_config(run, tmp_path):
    """The run's policy reads 2 values x 2 reads; the built-in inspect config gives another shape."""
    _copy(run, tmp_path)
    proc = sensorgym(tmp_path, "inspect", "--model", "run", "--steps", "30", "--out", "fig.png")
    assert proc.returncode == 0, proc.stderr
    assert "policy run" in proc.stdout and "angle[0]" in proc.stdout and "gyro" not in proc.stdout


@pytest.mark.parametrize("command", ["eval", "inspect"])
def test_an_interrupted_run_names_resume(run, tmp_path, command):
    _copy(run, tmp_path)
    (tmp_path / "run" / "model.zip").unlink()  # the checkpoint stays: training did not finish
    steps = json.loads((tmp_path / "run" / "result.json").read_text())["timesteps"]
    args = ["eval", "run"] if command == "eval" else ["inspect", "--model", "run"]
    run = sensorgym if command == "eval" else sensorgym_here
    line = one_line(run(tmp_path, *args))
    assert f"its training was interrupted at {steps:,} steps" in line, line
    assert "Fix: finish its training with `sensorgym train --out run --resume`" in line, line


# -- item 6: logs -------------------------------------------------------------------------------------------
def test_a_log_gets_one_line_per_finished_run_not_progress_bars(tmp_path):
    """Output that is not a terminal (a batch job's log): no bar redraws (they filled a log with ~21 KB of
    control codes a minute), and no silence either (--no-progress printed nothing for minutes): one line
    per finished run, with its score and seconds."""
    (tmp_path / "tiny.toml").write_text(tiny_toml(extra=ONE_RUN))
    for flags in ([], ["--no-progress"]):
        out = f"ab{len(flags)}"
        proc = sensorgym(tmp_path, "ablate", "--config", "tiny.toml", "--out", out, "--workers", "1", *flags)
        assert proc.returncode == 0, proc.stderr
        assert "\r" not in proc.stderr and "%|" not in proc.stderr and "\x1b" not in proc.stderr
        lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
        assert len(lines) == 1, proc.stdout
        for line, row in zip(lines, rows(tmp_path / out / "results.csv"), strict=True):
            score = float(row["eval_return_mean"])
            assert line.startswith(f"[1/1] {row['critic']} s0 angle.noise=0.1: score {score:.1f} (sd ")
            assert line.endswith(f"{float(row['train_seconds']):.0f} s of training"), line
    proc = sensorgym(tmp_path, "train", "--config", "tiny.toml", "--out", "run", "--timesteps", "1280")
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "%|" not in proc.stderr
    tenths = [line.strip() for line in proc.stdout.splitlines() if line.startswith("  trained ")]
    assert tenths[0].startswith("trained 128 of 1,280 steps (10%)") and len(tenths) == 10, proc.stdout
