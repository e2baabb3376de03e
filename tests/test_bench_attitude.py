"""benchmarks/bench_attitude.py, the speed table of issue 35 (docs/estimators.md, "Speed"), runs as the doc
runs it, in fresh processes, and its shares are what its times say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_attitude.py"


def test_the_median_over_processes_and_the_estimators_own_share():
    argv = ["--sizes", "1", "--executors", "numpy", "--processes", "2", "--rounds", "1"]
    argv += ["--round-time", "0.01"]
    done = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "median over 2 processes" in done.stdout
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("| 1 | numpy |")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    imu, projection, none, madgwick, mahony = (float(cells[i]) for i in (2, 3, 5, 7, 9))
    assert imu > 0 and all(t > imu * 0.5 for t in (projection, none, madgwick, mahony)), line
    # each share is computed from the unrounded medians: within the rounding of the printed ones
    arms = ((projection, cells[4]), (none, cells[6]), (madgwick, cells[8]), (mahony, cells[10]))
    for time, share in arms:
        assert abs(float(share.rstrip("%")) - (time / imu - 1) * 100) <= 1.5, line
    alone = [float(x) for x in re.findall(r"[+-]\d+", cells[11])]
    for time, share in zip((madgwick, mahony), alone, strict=True):
        assert abs(share - (time - none) / imu * 100) <= 1.5, line
