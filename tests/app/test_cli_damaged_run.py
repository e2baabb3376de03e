"""A run directory with a damaged file (issue 33 item 15): ``eval`` (and ``inspect --model``, which loads
the same files) on a run whose ``model.zip`` is empty or whose ``vecnormalize.pkl`` is cut short prints one
line naming the file and the fix, and exits with code 2. Before, each ended in the loader's traceback
(SB3's ``ValueError: ... wasn't a zip-file``, pickle's ``UnpicklingError: pickle data was truncated``) with
exit code 1. The family: every file of a run that ``eval`` reads (``config.json`` and ``result.json``
too), however it was damaged (empty, truncated, replaced by other bytes)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .common import one_line, sensorgym, sensorgym_here, write_config


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A finished tiny training run (128 steps)."""
    folder = tmp_path_factory.mktemp("trained")
    config = write_config(folder)
    done = sensorgym_here(folder, "train", "--config", str(config), "--out", "run", "--no-progress")
    assert done.returncode == 0, done.stderr
    return folder / "run"


def _damaged(run: Path, tmp_path: Path, name: str, keep: int | None) -> Path:
    """A copy of ``run`` whose ``name`` keeps only its first ``keep`` bytes (``None``: random bytes)."""
    copy = tmp_path / "damaged"
    shutil.copytree(run, copy)
    data = (run / name).read_bytes()
    (copy / name).write_bytes(data[:keep] if keep is not None else bytes(range(256)) * 8)
    return copy


@pytest.mark.parametrize(
    ("name", "keep", "what"),
    [("model.zip", 0, "is empty (0 bytes)"), ("vecnormalize.pkl", 1000, "pickle data was truncated")],
)
def test_eval_of_a_damaged_run_is_one_line_naming_the_file_and_the_fix(run, tmp_path, name, keep, what):
    damaged = _damaged(run, tmp_path, name, keep)
    line = one_line(sensorgym(tmp_path, "eval", str(damaged)))
    assert line.startswith(f"sensorgym eval: {damaged / name} "), line
    assert what in line, line
    assert f"Fix: restore it from a copy, or train the run again: sensorgym train --config {damaged}" in line


@pytest.mark.parametrize(
    ("name", "keep", "what"),
    [
        ("model.zip", 70_000, "truncated or damaged"),  # cut inside the archive: SB3's AssertionError
        ("model.zip", None, "wasn't a zip-file"),
        ("vecnormalize.pkl", 0, "is empty (0 bytes)"),
        ("vecnormalize.pkl", None, "truncated or damaged"),
        ("result.json", 10, "truncated or damaged"),
        ("config.json", 20, "truncated or damaged"),
    ],
)
@pytest.mark.parametrize("command", ["eval", "inspect"])
def test_every_damaged_run_file_is_one_line_in_eval_and_inspect(run, tmp_path, name, keep, what, command):
    if command == "inspect" and name == "result.json":
        pytest.skip("inspect --model does not read result.json")
    damaged = _damaged(run, tmp_path, name, keep)
    args = (
        ["eval", str(damaged)] if command == "eval" else ["inspect", "--model", str(damaged), "--steps", "5"]
    )
    line = one_line(sensorgym_here(tmp_path, *args, *(["--out", "i.png"] if command == "inspect" else [])))
    assert str(damaged / name) in line, line
    if name == "config.json" and command == "inspect":  # read as the config to inspect: the config's line
        assert "cannot be parsed (JSON)" in line, line
    else:
        assert what in line, line
        assert "Fix: restore it from a copy, or train the run again" in line, line


def test_the_fix_named_works(run, tmp_path):
    """The command the line names trains the run again, the damaged files moved aside; eval then works."""
    damaged = _damaged(run, tmp_path, "model.zip", 0)
    line = one_line(sensorgym_here(tmp_path, "eval", str(damaged)))
    fix = line.split("train the run again: ")[1].split(" (")[0].split()
    assert fix[:2] == ["sensorgym", "train"], fix
    assert sensorgym_here(tmp_path, *fix[1:], "--no-progress").returncode == 0
    assert sensorgym_here(tmp_path, "eval", str(damaged)).returncode == 0
    assert (next(damaged.glob("replaced-*")) / "model.zip").stat().st_size == 0  # moved, not deleted
