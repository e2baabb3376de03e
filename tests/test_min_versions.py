"""Declared dependency ranges are tested ranges (issue 23, item 7).

Every dependency of the package (and of the ``mujoco`` and ``test`` extras the core, sensor and wrapper
tests use) is declared with a lower bound, and ``.ci/min_versions.sh`` installs exactly those lowest
versions into a fresh venv and runs those tests there. That run downloads packages and takes minutes: it is
marked ``slow`` (``python -m pytest -m slow tests/test_min_versions.py``), outside the default run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]


def _pins(*extras: str) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "lowest_versions.py"), *extras],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("==") for line in out.split())


def test_every_tested_dependency_has_a_lower_bound_that_the_job_installs():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins("mujoco", "test")
    declared = project["dependencies"] + [
        r for extra in ("mujoco", "test") for r in project["optional-dependencies"][extra]
    ]
    assert len(pins) == len(declared)
    for requirement in declared:
        name = requirement.split(">=")[0].strip()
        assert f"{name}>={pins[name]}" in requirement.replace(" ", "")
    assert {"torch", "gymnasium", "numpy", "mujoco"} <= set(pins)


@pytest.mark.slow
def test_the_lowest_declared_versions_pass_the_core_sensor_and_wrapper_tests(tmp_path):
    result = subprocess.run(
        ["bash", str(ROOT / ".ci" / "min_versions.sh"), str(tmp_path / "venv")],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    # pip's notes about the local package mirrors are noise here
    stderr = "\n".join(line for line in result.stderr.splitlines() if "is ignored" not in line)
    assert result.returncode == 0, result.stdout[-8000:] + stderr[-3000:]
