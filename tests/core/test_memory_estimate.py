"""Issue 33 item 8: the memory guard counts what a long delay really allocates.

``delay=40000`` s (the "milliseconds" mistake) on 4 envs x 3 columns peaked at 3 GB of RSS for a 36.6 MiB
ring: the per-slot views (a tensor view of each slot, one of its phase's slot table, and their numpy
twins on the numpy executor) cost some 40x the values, and the guard counted about 1/80 of the peak.
Measured here in a fresh process: the peak RSS a build adds lies within 2x of what the guard counts
(``delay_line_bytes``), on both executors, with a fixed shift, jitter and a sampler.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CODE = r"""
import sys, torch, sensorgym as sg
from sensorgym.core.delay_line import delay_line_bytes

def status(field):  # kB, from /proc/self/status
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))

ex, jitter, period = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])  # one build per process
with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) restarts at the current RSS
    f.write("5")
before = status("VmRSS:")
mgr = sg.SensorManager(num_envs=4, dt=0.05, seed=0, executor=ex)
mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), delay=2000.0, jitter=jitter,
                                     update_period=period))
mgr.reset({"x": torch.zeros(4, 3)})
for _ in range(3):
    mgr.step({"x": torch.zeros(4, 3)})
peak = (status("VmHWM:") - before) * 1024
depth = round((2000.0 + jitter) / 0.05) + 1
counted = delay_line_bytes(depth, 4, 3, torch.float32, numpy_views=mgr.executor_used == "numpy",
                           sampler_columns=1 if period else 0)
print(ex, jitter, period, peak, counted, depth * 4 * 3 * 4)
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's VmHWM reset")
@pytest.mark.parametrize(
    ("executor", "jitter", "period"),
    [("numpy", 0.0, 0.0), ("numpy", 0.0, 0.1), ("torch", 0.1, 0.0), ("torch", 0.0, 0.1)],
    ids=["numpy-fixed", "numpy-rate", "torch-jitter", "torch-rate"],
)
def test_the_guard_counts_the_peak_within_2x(executor, jitter, period):
    args = [sys.executable, "-c", CODE, executor, str(jitter), str(period)]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    ex, jitter, period, peak, counted, values = out.stdout.split()
    peak, counted, values = int(peak), int(counted), int(values)
    assert peak > 10 * values  # the views, not the values, are what a long delay costs
    assert counted / 2 <= peak <= 2 * counted, (ex, jitter, period, peak, counted)
