"""The lowest declared versions that ``.ci/min_versions.sh`` installs, one phase (one fresh venv) at a time.

Every dependency that pyproject.toml declares (the package's own and every extra's) has a lower bound, and
every lower bound is installed exactly in at least one phase. A dependency without a lower bound is an
error: it would not be tested.

- ``core``: the package's own dependencies and the ``mujoco`` and ``test`` extras, at their lowest
  versions; the core, sensor, env and wrapper tests run there.
- ``all``: the package's own dependencies and every extra, at their lowest versions; the core, sensor,
  env and wrapper tests run there again (those that need an extra skip in ``core``) and the app,
  integration and fitting tests. The lowest versions of all extras do not all install together: where one
  dependency's own requirements exclude another's lowest declared version, that one is installed at the
  lowest version they allow (``INSTEAD`` says which and why), and its declared bound is the ``core``
  phase's to test.

    python .ci/lowest_versions.py core            # name==version, one a line
    python .ci/lowest_versions.py --extras all    # the extras to install the package with: a,b,...
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

#: per phase: name -> (version installed instead of the lowest declared one, why)
INSTEAD: dict[str, dict[str, tuple[str, str]]] = {
    "core": {},
    "all": {"pyyaml": ("6.0", "rl-games 1.6.5 requires PyYAML>=6; PyYAML 5.1 is tested in the core phase")},
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lower_bound(line: str) -> tuple[str, str]:
    """``(canonical name, lowest version)`` of one requirement line of pyproject.toml."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*(,.*)?", line)
    if match is None:
        raise SystemExit(f"{line!r}: no lower bound (name>=version) to install and test")
    return canonical(match[1]), match[2]


def extras(phase: str) -> list[str]:
    """The extras the package is installed with in ``phase``."""
    optional = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    if phase == "core":
        return ["mujoco", "test"]
    if phase == "all":
        return [name for name in optional if name != "all"]  # `all` lists the others
    raise SystemExit(f"{phase!r}: no such phase (core, all)")


def declared(names: list[str]) -> dict[str, str]:
    """``name -> lowest declared version`` of the package's own dependencies and the extras ``names``.
    A dependency named in two extras (scipy, allantools, rosbags) must have one lower bound."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    lines = list(project["dependencies"])
    for extra in names:
        lines += project["optional-dependencies"][extra]
    bounds: dict[str, str] = {}
    for line in lines:
        name, version = lower_bound(line)
        if bounds.setdefault(name, version) != version:
            raise SystemExit(f"{name}: declared with two lower bounds ({bounds[name]} and {version})")
    return bounds


def pins(phase: str) -> dict[str, str]:
    """``name -> version`` that ``phase`` installs."""
    bounds = declared(extras(phase))
    for name, (version, _) in INSTEAD[phase].items():
        if name not in bounds:
            raise SystemExit(f"{name}: installed instead in phase {phase}, but not declared there")
        bounds[name] = version
    return bounds


def main(argv: list[str]) -> None:
    if argv[:1] == ["--extras"]:
        print(",".join(extras(argv[1])))
    elif len(argv) == 1:
        print("\n".join(f"{name}=={version}" for name, version in pins(argv[0]).items()))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
