"""How long `sensorgym fit` takes on a 1-hour, 200 Hz, six-channel IMU log (the target: under 30 s).

The log is synthetic (numpy): three gyro and three accelerometer axes, each white noise through a 40 Hz
low-pass filter with a random walk and a Gauss-Markov bias, a shared clock losing 1% of its samples in
bursts of 2, written as a CSV of 720,000 rows (the format most logs are exported to). The command runs in
this process exactly as `sensorgym fit LOG --channels ... --out DIR` would; each stage is timed by wrapping
the function that does it, and the table gives wall and CPU seconds (the CPU column is what the machine's
other work does not inflate).

Usage:
    python benchmarks/bench_fit.py                 # 1 h at 200 Hz, 6 channels
    python benchmarks/bench_fit.py --minutes 10    # a shorter log
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import signal


def make_log(path: Path, minutes: float, rate: float = 200.0, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    n = round(minutes * 60 * rate)
    ts = 1.0 / rate
    a = math.exp(-2 * math.pi * 40.0 * ts)
    keep = np.ones(n, dtype=bool)
    starts = rng.choice(n - 2, size=int(0.005 * n), replace=False)
    keep[starts] = keep[starts + 1] = False
    keep[0] = True
    columns = {"time": np.arange(n) * ts}
    names = [f"gyro_{a}" for a in "xyz"] + [f"acc_{a}" for a in "xyz"]
    for i, name in enumerate(names):
        density, level = (0.003, 0.0) if name.startswith("gyro") else (0.02, 9.81 * (i == 5))
        y = signal.lfilter(
            [1 - a], [1, -a], level + rng.normal(0, density / math.sqrt(ts), n), zi=[a * level]
        )[0]
        y += np.cumsum(rng.normal(0, density * 0.05 * math.sqrt(ts), n))
        phi = math.exp(-ts / 20.0)
        y += signal.lfilter([1.0], [1, -phi], rng.normal(0, density * 0.3 * math.sqrt(1 - phi * phi), n))
        columns[name] = y
    data = np.column_stack([columns[k][keep] for k in columns])
    np.savetxt(path, data, delimiter=",", header=",".join(columns), comments="", fmt="%.9g")
    return names


def timed(module, name: str, stages: dict[str, list[float]], label: str) -> None:
    """Wrap ``module.name`` so that its wall and CPU time add to ``stages[label]``."""
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            row = stages.setdefault(label, [0.0, 0.0])
            row[0] += time.perf_counter() - wall
            row[1] += time.process_time() - cpu

    setattr(module, name, wrapper)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=60.0, help="log length (default 60)")
    parser.add_argument("--out", help="folder for the log and the outputs (default: a temporary one)")
    args = parser.parse_args()
    folder = Path(args.out or tempfile.mkdtemp(prefix="bench_fit_"))
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "imu.csv"
    t0 = time.perf_counter()
    names = make_log(log, args.minutes)
    print(f"log: {log} ({args.minutes:g} min at 200 Hz, 6 channels, {log.stat().st_size / 1e6:.0f} MB), "
          f"written in {time.perf_counter() - t0:.1f} s")  # fmt: skip

    from sensorgym.app.cli import main as cli
    from sensorgym.fitting import api, report

    stages: dict[str, list[float]] = {}
    timed(api, "read_channels", stages, "read the CSV")
    timed(api, "find_static_window", stages, "find the static window")
    timed(api, "_fit_channel", stages, "timing, Allan deviation, model fit")
    timed(api, "simulate", stages, "simulate the fitted config (SensorManager)")
    timed(report, "report_markdown", stages, "fit_report.md")
    from sensorgym.fitting import plots

    timed(plots, "plot_allan", stages, "allan.png, timing.png")
    timed(plots, "plot_timing", stages, "allan.png, timing.png")
    wall, cpu = time.perf_counter(), time.process_time()
    rc = cli(["fit", str(log), "--channels", *names, "--names", "gyro", "gyro", "gyro", "acc", "acc", "acc",
              "--out", str(folder / "fit"), "--no-progress"])  # fmt: skip
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if rc:
        return rc
    print("\n| stage | wall (s) | CPU (s) |\n|---|---:|---:|")
    for label, (w, c) in stages.items():
        print(f"| {label} | {w:.1f} | {c:.1f} |")
    print(f"| **sensorgym fit, all** | **{wall:.1f}** | **{cpu:.1f}** |")
    print(f"\nunder 30 s: {'yes' if wall < 30 else 'no'} (wall), {'yes' if cpu < 30 else 'no'} (CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
