"""tools/count_step.py, the independent count of issue 34 item 4: which sensorgym functions and modules one
``SensorManager.step`` (a StateSensor class with delay and noise) and one ``read()`` run through."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def counts() -> dict:
    out = subprocess.run(
        [sys.executable, "tools/count_step.py", "--json"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def test_the_count_follows_the_rule(counts):
    assert set(counts) == {"numpy", "torch"}
    for executor, result in counts.items():
        assert result["executor"] == executor
        step, read = result["step"], result["read"]
        # first-call order, starting at the entry points; each function once; only sensorgym's own
        assert step["list"][0] == "sensorgym.core.manager.SensorManager.step"
        assert read["list"][0] == "sensorgym.core.sensor.Sensor.read"
        for r in (step, read):
            assert len(set(r["list"])) == len(r["list"]) == r["functions"]
            assert all(name.startswith(f"{m}.") for name, m in zip(r["list"], r["module_of"], strict=True))
            assert all(m.startswith("sensorgym.") for m in r["module_of"])
            assert r["modules"] == len(set(r["module_of"]))
        # SPEC hooks count (the issue's rule), so the StateSensor's raw read is in the list
        assert "sensorgym.sensors.state.StateSensor._update_raw_data" in step["list"]


def test_an_engine_step_meets_the_target_of_issue_34(counts):
    """At most 15 functions across at most 8 modules per engine step on the numpy executor (what a CPU
    manager runs up to 2**18 envs x columns). The torch executor adds its two array ops written in Python
    (``TORCH.add``/``TORCH.mul``: torch's ``out=`` is keyword-only), 17 across 9, and no more."""
    numpy, torch_ = counts["numpy"]["step"], counts["torch"]["step"]
    assert numpy["functions"] <= 15 and numpy["modules"] <= 8, numpy["list"]
    extra = set(torch_["list"]) - set(numpy["list"])
    assert extra <= {"sensorgym.core.xp.TORCH.add", "sensorgym.core.xp.TORCH.mul"}, extra
