"""How long `sensorgym fit` takes on a 1-hour, 200 Hz, six-channel IMU log (the target: under 30 s).

The log is synthetic (numpy): three gyro and three accelerometer axes, each white noise through a 40 Hz
low-pass filter with a random walk and a Gauss-Markov bias, a shared clock losing 1% of its samples in
bursts of 2, written as a CSV of 720,000 rows (the format most logs are exported to). The command runs in
this process exactly as `sensorgym fit LOG --channels ... --out DIR` would; each stage is timed by wrapping
the function that does it. Two baselines are measured in the same run, on the same machine and load: the
log read by ``numpy.loadtxt`` alone, and allantools' overlapping Allan deviation of the six channels
alone (the least any fit of this log must do); the table gives each stage's wall and CPU seconds and its
CPU time over the reading baseline's.

The machine may be shared, so the exit code is 1 when the CPU time of the command exceeds the target, or
when its wall time does while the machine was not busier than its cores (load average below the core
count: otherwise the wall time measures the other work, and the line says so); else 0.

Usage:
    python benchmarks/bench_fit.py                 # 1 h at 200 Hz, 6 channels
    python benchmarks/bench_fit.py --minutes 10    # a shorter log
    python benchmarks/bench_fit.py --target 20     # another target (s)
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import signal

TARGET_S = 30.0


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


class Clock:
    """Wall and CPU seconds of a block."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


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


def baselines(log: Path, names: list[str]) -> dict[str, Clock]:
    """The two baselines: reading the CSV with numpy, and allantools' Allan deviation of every channel at
    the fit's averaging times (half-octave up to a tenth of the log)."""
    import allantools

    from sensorgym.fitting.allan import fit_m

    with Clock() as read:
        data = np.loadtxt(log, delimiter=",", skiprows=1)
    m = fit_m(len(data), len(data) // 10)
    with Clock() as adev:
        for i in range(len(names)):
            allantools.oadev(data[:, i + 1], rate=200.0, data_type="freq", taus=m / 200.0)
    return {"baseline: numpy.loadtxt of the CSV": read, "baseline: allantools.oadev of the 6 channels": adev}


def run(minutes: float = 60.0, folder: Path | None = None, target: float = TARGET_S) -> tuple[int, str]:
    """Run the benchmark; return its exit code and its table (markdown)."""
    folder = Path(folder or tempfile.mkdtemp(prefix="bench_fit_"))
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "imu.csv"
    t0 = time.perf_counter()
    names = make_log(log, minutes)
    print(f"log: {log} ({minutes:g} min at 200 Hz, 6 channels, {log.stat().st_size / 1e6:.0f} MB), "
          f"written in {time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip

    from sensorgym.app.cli import main as cli
    from sensorgym.fitting import api, plots, report

    base = baselines(log, names)
    stages: dict[str, list[float]] = {}
    timed(api, "read_channels", stages, "read the CSV")
    timed(api, "find_static_window", stages, "find the static window")
    timed(api, "_fit_channel", stages, "timing, Allan deviation, model fit")
    timed(api, "simulate", stages, "simulate the fitted config (SensorManager)")
    timed(report, "report_markdown", stages, "fit_report.md")
    timed(plots, "plot_allan", stages, "allan.png, timing.png")
    timed(plots, "plot_timing", stages, "allan.png, timing.png")
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    with Clock() as whole:
        tables = ["gyro"] * 3 + ["acc"] * 3
        rc = cli(["fit", str(log), "--channels", *names, "--names", *tables,
                  "--out", str(folder / "fit"), "--no-progress"])  # fmt: skip
    if rc:
        return rc, ""
    unit = base["baseline: numpy.loadtxt of the CSV"].cpu
    rows = ["| stage | wall (s) | CPU (s) | CPU / reading the CSV |", "|---|---:|---:|---:|"]
    for label, clock in base.items():
        rows.append(f"| {label} | {clock.wall:.1f} | {clock.cpu:.1f} | {clock.cpu / unit:.2f} |")
    for label, (w, c) in stages.items():
        rows.append(f"| {label} | {w:.1f} | {c:.1f} | {c / unit:.2f} |")
    rows.append(f"| **sensorgym fit, all** | **{whole.wall:.1f}** | **{whole.cpu:.1f}** | "
                f"**{whole.cpu / unit:.1f}** |")  # fmt: skip
    busy = load >= cores
    verdict = []
    code = 0
    if whole.cpu >= target:
        verdict.append(f"CPU {whole.cpu:.1f} s >= {target:g} s: missed")
        code = 1
    else:
        verdict.append(f"CPU {whole.cpu:.1f} s < {target:g} s")
    if whole.wall < target:
        verdict.append(f"wall {whole.wall:.1f} s < {target:g} s")
    elif busy:
        verdict.append(
            f"wall {whole.wall:.1f} s >= {target:g} s with the machine busier than its cores "
            f"(load {load:.1f} on {cores}): not counted"
        )
    else:
        verdict.append(f"wall {whole.wall:.1f} s >= {target:g} s on a machine of load {load:.1f}: missed")
        code = 1
    text = "\n".join(rows) + f"\n\nload average {load:.1f} on {cores} cores; " + "; ".join(verdict)
    return code, text


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=60.0, help="log length (default 60)")
    parser.add_argument("--out", help="folder for the log and the outputs (default: a temporary one)")
    parser.add_argument("--target", type=float, default=TARGET_S, help="the target in seconds (default 30)")
    args = parser.parse_args()
    code, text = run(args.minutes, Path(args.out) if args.out else None, args.target)
    print("\n" + text)
    print("target met" if code == 0 else "TARGET MISSED", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
