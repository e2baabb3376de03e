#!/usr/bin/env bash
# The declared lower bounds are tested ones: install the lowest version of every dependency range that
# pyproject.toml declares (the package's own and every extra's) into fresh Python 3.11 venvs and run the
# tests there, in two phases (.ci/lowest_versions.py says what each installs and why they are two):
#   core: the package's own dependencies and the mujoco and test extras; the core, sensor, env and wrapper
#         tests.
#   all:  the package's own dependencies and every extra; those tests and the app, integration and fitting
#         tests. Every extra must import there, and a test skipped for a missing module fails the phase.
# The package is installed from a copy of this checkout (nothing is written into the tree); the tests
# import this checkout's code. Not the CI run (.ci/run installs the newest versions): tests/test_min_versions.py
# runs this under `pytest -m slow`.
#   bash .ci/min_versions.sh [WORK_DIR] [PHASE...]     (default: a new temp dir, both phases)
set -euo pipefail
cd "$(dirname "$0")/.."
python=python3.11  # the Python the lowest versions are tested on; no other is claimed
if ! command -v "$python" >/dev/null || ! "$python" -c 'import sys; assert sys.version_info[:2] == (3, 11)'; then
    echo "min_versions.sh: needs $python on PATH (the lowest versions are tested on Python 3.11)" >&2
    exit 2
fi
work="${1:-$(mktemp -d)}"
shift || true
phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(core all)
mkdir -p "$work"
src="$work/sensorgym-src"
rm -rf "$src" && mkdir -p "$src"
cp -r pyproject.toml README.md sensorgym_cli.py sensorgym "$src/"

# an extra that must import in the `all` phase (tests importorskip them: a broken one would only skip)
imports="stable_baselines3, mujoco, imageio, yaml, matplotlib.pyplot, tqdm, rich, torch.utils.tensorboard,
scipy.stats, scipy.optimize, rsl_rl, skrl, rl_games, ray, allantools, pyulog, rosbags.highlevel, mcap.reader"

run_phase() {
    local phase=$1
    shift
    local venv="$work/venv-$phase" log="$work/pytest-$phase.log" pins extras
    local start=$SECONDS
    pins=$("$python" .ci/lowest_versions.py "$phase")
    extras=$("$python" .ci/lowest_versions.py --extras "$phase")
    echo "== phase $phase: lowest declared versions:" $pins
    rm -rf "$venv"
    "$python" -m venv "$venv"
    local py="$venv/bin/python"
    # torch first, alone (the CPU build on this machine); then named again with the rest, so that a pin
    # which wants another torch fails the install instead of fetching one
    "$py" -m pip install --quiet torch==2.13.0
    "$py" -m pip install --quiet torch==2.13.0 $pins "$src[$extras]"
    "$py" -m pip check
    # installed exactly what was asked
    "$py" - $pins <<'EOF'
import importlib.metadata, sys
from packaging.version import Version
pins = dict(pin.split("==") for pin in sys.argv[1:])
got = {name: importlib.metadata.version(name) for name in pins}
wrong = {name: got[name] for name in pins if Version(got[name].split("+")[0]) != Version(pins[name])}
sys.exit(f"installed versions differ from the pins: {wrong}" if wrong else 0)
EOF
    if [ "$phase" = all ]; then
        "$py" -c "import $(echo $imports)"
    fi
    echo "== phase $phase: installed in $((SECONDS - start)) s; pytest $*"
    local rc=0
    PYTHONPATH="$PWD" "$py" -m pytest "$@" -q -p no:cacheprovider -m "not slow" -rs 2>&1 | tee "$log" || rc=$?
    echo "== phase $phase: pytest exit $rc after $((SECONDS - start)) s"
    if [ "$phase" = all ] && grep -E "^SKIPPED .*(could not import|not installed)" "$log"; then
        echo "== phase $phase: a test skipped for a module that the lowest versions should have installed" >&2
        rc=1
    fi
    return $rc
}

core_tests=(tests/core tests/wrappers tests/sensors tests/envs tests/test_layers.py)
status=0
for phase in "${phases[@]}"; do
    case $phase in
        core) run_phase core "${core_tests[@]}" || status=1 ;;
        # the core tests again: those that need an extra (stable_baselines3) skipped in the core phase
        all) run_phase all "${core_tests[@]}" tests/app tests/integrations tests/fitting || status=1 ;;
        *) echo "min_versions.sh: no phase $phase (core, all)" >&2; exit 2 ;;
    esac
done
exit $status
