#!/usr/bin/env bash
# Install the lowest version of every dependency range that pyproject.toml declares (the package's own and
# the mujoco and test extras, which the core, sensor and wrapper tests use) into a fresh venv, and run those
# tests in it. tests/test_min_versions.py runs this under `pytest -m slow`; it is not part of the default run.
#   bash .ci/min_versions.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-$(mktemp -d)/venv-min}"
python3 -m venv "$venv"
py="$venv/bin/python"
pins=$(python3 .ci/lowest_versions.py mujoco test)
echo "lowest declared versions:" $pins
# torch first, alone: pip would otherwise resolve it together with the rest
"$py" -m pip install --quiet $(echo "$pins" | grep '^torch==')
"$py" -m pip install --quiet $(echo "$pins" | grep -v '^torch==')
"$py" -m pip list 2>/dev/null | grep -iE '^(torch|gymnasium|numpy|mujoco|imageio|pytest|hypothesis) '
# the package from this checkout, without installing it (nothing is written into the tree)
PYTHONPATH="$PWD" "$py" -m pytest tests/core tests/wrappers tests/sensors tests/envs tests/test_layers.py \
    -q -p no:cacheprovider -m "not slow"
