"""Declared dependency ranges are tested ranges (issue 23, item 7).

Every dependency of the package and of every extra is declared with a lower bound, and
``.ci/min_versions.sh`` installs exactly those lowest versions into fresh Python 3.11 venvs, in two phases
(``.ci/lowest_versions.py``): ``core`` (the package's own dependencies and the ``mujoco`` and ``test``
extras; the core, sensor, env and wrapper tests) and ``all`` (every extra; those tests again and the app,
integration and fitting tests). That run downloads packages and takes about 35 minutes: it is marked ``slow``
(``python -m pytest -m slow tests/test_min_versions.py``), outside the default run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "min_versions.sh"
PHASES = ("core", "all")


def _lowest_versions(*args: str) -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "lowest_versions.py"), *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _pins(phase: str) -> dict[str, str]:
    return dict(line.split("==") for line in _lowest_versions(phase).split())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> list[tuple[str, str, str]]:
    """``(group, canonical name, requirement line)`` of every dependency pyproject declares, but `all`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    return [
        (group, _canonical(re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0]), line.replace(" ", ""))
        for group, lines in groups.items()
        if group != "all"
        for line in lines
    ]


def test_every_declared_dependency_has_a_lower_bound_that_a_phase_installs():
    pins = {phase: _pins(phase) for phase in PHASES}
    for group, name, line in _declared():
        lowest = re.search(r">=([0-9][0-9A-Za-z.]*)", line)
        assert lowest, f"{group}: {line} has no lower bound"
        installed = {phase: pins[phase][name] for phase in PHASES if name in pins[phase]}
        # the lowest declared version itself is installed by some phase, and no phase installs a lower one
        assert lowest[1] in installed.values(), f"{group}: {line} is installed at {installed}"
        assert all(Version(v) >= Version(lowest[1]) for v in installed.values()), (group, line, installed)
    # the core phase: the package's own dependencies and the mujoco and test extras, all at their bounds
    core = {
        name: re.search(r">=([0-9][0-9A-Za-z.]*)", line)[1]
        for group, name, line in _declared()
        if group in ("dependencies", "mujoco", "test")
    }
    assert pins["core"] == core
    assert {"torch", "gymnasium", "numpy", "mujoco"} <= set(pins["core"])


def test_the_all_phase_installs_every_extra_and_the_all_extra_lists_them():
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    others = [name for name in optional if name != "all"]
    assert _lowest_versions("--extras", "all").split() == [",".join(others)]
    assert optional["all"] == [f"sensorgym[{','.join(others)}]"]
    names = {name for group, name, line in _declared()}
    assert set(_pins("all")) == names


def test_the_script_runs_both_phases_on_python_3_11_and_torch_2_13_0_only():
    text = SCRIPT.read_text()
    assert "python=python3.11" in text
    assert "phases=(core all)" in text
    assert "tests/app tests/integrations tests/fitting" in text
    # every pip install names the CPU torch, so that no pin can make pip resolve another one
    installs = [
        line for line in text.splitlines() if "pip install" in line and not line.lstrip().startswith("#")
    ]
    assert installs and all("torch==2.13.0" in line for line in installs)
    assert _pins("core")["torch"] == _pins("all")["torch"] == "2.13"


@pytest.mark.slow
def test_the_lowest_declared_versions_pass_the_tests(tmp_path):
    result = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=4 * 3600,
    )
    # pip's notes about the local package mirrors are noise here
    stderr = "\n".join(line for line in result.stderr.splitlines() if "is ignored" not in line)
    assert result.returncode == 0, result.stdout[-8000:] + stderr[-3000:]
