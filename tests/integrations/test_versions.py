"""Declared versions are tested versions: every RL library in pyproject's ``sb3`` and ``rl`` extras is
declared with a range closed above (one major version), and the version installed here, which the
integration tests in this folder run against, lies inside it."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _requirements() -> list[Requirement]:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    return [Requirement(line) for name in ("sb3", "rl") for line in extras[name]]


def test_rl_libraries_are_declared_within_one_major_version():
    names = {r.name for r in _requirements()}
    assert names == {"stable-baselines3", "rsl-rl-lib", "skrl", "rl-games"}
    for req in _requirements():
        ops = {spec.operator for spec in req.specifier}
        assert ">=" in ops and "<" in ops, f"{req}: declare the tested range, closed above"


@pytest.mark.parametrize("req", _requirements(), ids=lambda r: r.name)
def test_installed_version_is_inside_the_declared_range(req):
    try:
        version = importlib.metadata.version(req.name)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{req.name} is not installed")
    assert req.specifier.contains(version, prereleases=True), (
        f"{req.name} {version} is installed and tested, but pyproject declares {req}"
    )
