"""The bit-for-bit safety net of issue 34 (tools/bitcheck.py): every output of the recorded scenarios (both
executors, resets and partial resets, every error term, the IMU mount, ActionLatency, SensorObservation,
error messages) equals what the tree recorded in tests/data/bitcheck_baseline.json produced, and the
checkpoints that tree saved (tests/data/bitcheck_checkpoints/) load and continue exactly as they did then.

Re-record only for an intended change of behaviour, from a clean checkout (see the tool's docstring)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "tests" / "data" / "bitcheck_baseline.json"
CHECKPOINTS = ROOT / "tests" / "data" / "bitcheck_checkpoints"


def _bitcheck(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "tools/bitcheck.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_every_output_matches_the_baseline():
    """All but the compiled scenarios (their first builds take seconds each: the slow test below)."""
    run = _bitcheck("compare", str(BASELINE), "--skip", "^compile/")
    assert run.returncode == 0, run.stdout + run.stderr
    names = json.loads(BASELINE.read_text())["scenarios"]
    eager = [n for n in names if not n.startswith("compile/")]
    assert len(eager) >= 150
    assert f"compared {len(eager)} scenarios" in run.stdout  # the file/ scenarios too
    assert "0 differ, 0 missing" in run.stdout


@pytest.mark.slow
def test_every_output_of_the_fused_kernel_matches_the_baseline():
    """``compile=True`` (torch.compile of the imperfection kernel)."""
    run = _bitcheck("compare", str(BASELINE), "--only", "^compile/")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "compared 3 scenarios" in run.stdout and "0 differ, 0 missing" in run.stdout


def test_the_baseline_covers_what_issue_34_names():
    names = json.loads(BASELINE.read_text())["scenarios"]
    parts = (
        "/numpy/", "/torch/", "per_env_rng", "one_rng", "opt/nan_raise", "opt/dropout_burst",
        "opt/gauss_markov", "opt/bandwidth", "opt/scale_factor", "opt/update_period", "imu/mount",
        "latency/", "observation/", "state_dict/", "setter/", "err/", "file/manager", "file/latency",
        "compile/", "batch/B1/", "memory/",
    )  # fmt: skip
    for part in parts:
        assert any(part in n for n in names), part
    sizes = sum(p.stat().st_size for p in CHECKPOINTS.iterdir()) + BASELINE.stat().st_size
    assert sizes < 2 * 2**20


def test_a_changed_output_is_named_and_fails(tmp_path):
    """A baseline whose recorded output differs: exit 1, the scenario and the first differing output named;
    ``--ignore`` accepts a difference only in the outputs it names."""
    data = json.loads(BASELINE.read_text())
    name = "opt/delay/numpy/one_rng"
    kept = data["scenarios"][name]
    codes = kept["records"]
    # the 5th output (step 0's read of sensor b) as if the old tree had given another value
    flipped = "A" if codes[24] != "A" else "B"
    data["scenarios"] = {name: {**kept, "digest": "0" * 64, "records": codes[:24] + flipped + codes[25:]}}
    data["checkpoints"] = None
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(data))
    run = _bitcheck("compare", str(changed))
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"DIFFERS {name}: output 4 '0.b.m' differs (after '0.a.age', which agrees); 1 of" in run.stdout
    # accepted when the output's label is one the caller expects to change, and only then
    run = _bitcheck("compare", str(changed), "--ignore", r"^0\.b\.m$")
    assert run.returncode == 0 and "1 scenarios differ only in outputs matching" in run.stdout, run.stdout
    run = _bitcheck("compare", str(changed), "--ignore", r"^0\.a\.m$")
    assert run.returncode == 1, run.stdout


def test_a_recording_is_reproduced_and_a_missing_scenario_fails(tmp_path):
    """Record a few scenarios afresh (their checkpoint files too) and compare: equal; a scenario the tool no
    longer defines is a failure, not a silent skip."""
    recorded = tmp_path / "few.json"
    only = ["^opt/jitter/", "^file/manager_numpy$", "^err/options/padding$"]
    run = _bitcheck("record", str(recorded), "--checkpoints", str(tmp_path / "ck"), "--only", *only)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "ck" / "manager_numpy.pt").is_file()
    data = json.loads(recorded.read_text())
    assert len(data["scenarios"]) == 6
    run = _bitcheck("compare", str(recorded))
    assert run.returncode == 0 and "compared 6 scenarios" in run.stdout, run.stdout + run.stderr
    data["scenarios"]["opt/retired/numpy/one_rng"] = data["scenarios"]["opt/jitter/numpy/one_rng"]
    recorded.write_text(json.dumps(data))
    run = _bitcheck("compare", str(recorded))
    assert run.returncode == 1 and "MISSING opt/retired/numpy/one_rng" in run.stdout, run.stdout
