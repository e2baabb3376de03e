"""The structure tools of tools/ (hop count of one step, class sizes) run and report what they claim."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> str:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def test_trace_step_lists_the_hops_from_the_wrapper_step_to_read():
    out = _run("tools/trace_step.py")
    assert "sensorgym.wrappers.vector.SensorObservation.step" in out
    assert "sensorgym.core.manager.SensorManager.step" in out
    assert "sensorgym.core.sensor.Sensor.read" in out
    assert "wrapper step + read:" in out


def test_class_sizes_counts_self_attributes():
    out = _run("tools/class_sizes.py", "--top", "3", "--names", "SensorManager")
    row = next(line for line in out.splitlines() if line.startswith("| `SensorManager`"))
    attributes = int(row.rstrip(" |").rsplit("|", 1)[1])
    assert attributes >= 5
