"""Print ``name==version`` for the lowest version of each dependency that pyproject.toml declares (the
package's own dependencies and the extras named on the command line), one per line: what
.ci/min_versions.sh installs. A dependency without a lower bound is an error: it would not be tested.

    python .ci/lowest_versions.py mujoco test
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def lowest(requirements: list[str]) -> list[str]:
    pins = []
    for line in requirements:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*(,.*)?", line)
        if match is None:
            raise SystemExit(f"{line!r}: no lower bound (name>=version) to install and test")
        pins.append(f"{match[1]}=={match[2]}")
    return pins


def main(extras: list[str]) -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    print("\n".join(lowest(requirements)))


if __name__ == "__main__":
    main(sys.argv[1:])
