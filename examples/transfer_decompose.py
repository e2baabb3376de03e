"""Why each arm of the transfer study (docs/transfer_study.md) loses what it loses under ``[deploy.real]``:
every run scored again under the real condition's two parts apart, the attitude estimator alone (the arm's
own sensor errors kept) and the replayed real errors alone (no estimator: the true orientation, the real
gyroscope on the angular rate), on the same evaluation episodes (``sensorgym eval RUN --config``).

    sensorgym ablate --config examples/configs/transfer.toml --out study --workers 2
    python examples/transfer_decompose.py study docs/data/transfer_study_decomposition.json

``--table FILE.json`` prints the markdown table of a results file written before (the doc's table).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RECORDING = "./examples/data/broad_07_residuals.npz"
REPLAY = {
    "gyro_replay": RECORDING,
    "gyro_replay_channels": ["gyr_x", "gyr_y", "gyr_z"],
    "acc_replay": RECORDING,
    "acc_replay_channels": ["acc_x", "acc_y", "acc_z"],
}
#: every parametric term an arm sets, off (a replayed component refuses them)
NO_TERMS = {"orientation_noise": 0.0, "gyro_noise": 0.0, "gyro_noise_density": 0.0, "gyro_bandwidth": 0.0,
            "acc_noise_density": 0.0}  # fmt: skip
PARTS = {
    "estimator alone": {"estimator": "mahony", "estimator_kp": 1.0},
    "replayed errors alone": {"estimator": "none", **NO_TERMS, **REPLAY},
}
ARMS = ("a-truth", "b-noise", "c-fitted")
REAL_COLUMN = "deploy_real_return_mean"  # results.csv: the run's score under [deploy.real]


def score(run: Path, changes: dict, folder: Path) -> float:
    """The run's score with its IMU's options changed (its own config otherwise)."""
    cfg = json.loads((run / "config.json").read_text())
    cfg["sensors"]["imu"].update(changes)
    path = folder / f"{run.name}_{abs(hash(json.dumps(changes, sort_keys=True)))}.json"
    path.write_text(json.dumps(cfg))
    command = ["sensorgym", "eval", str(run), "--config", str(path)]
    done = subprocess.run(command, capture_output=True, text=True)
    match = re.search(r"score (-?[\d,]+\.\d)", done.stdout)
    if match is None:
        sys.exit(f"sensorgym eval {run} failed: {done.stderr.strip().splitlines()[-1]}")
    return float(match.group(1).replace(",", ""))


def table(records: list[dict]) -> str:
    """Mean over seeds per arm and part, with the real condition (both parts) from the study's rows."""
    head = "| arm | real (both parts) | estimator alone | replayed errors alone |"
    lines = [head, "|---|---:|---:|---:|"]
    for arm in ARMS:
        cells = []
        for part in ("real", *PARTS):
            xs = [r["score"] for r in records if r["arm"] == arm and r["part"] == part]
            cells.append(f"{sum(xs) / len(xs):,.1f} ({', '.join(f'{x:,.0f}' for x in xs)})")
        lines.append(f"| `{arm}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", nargs="?", help="the folder `sensorgym ablate --out` wrote")
    parser.add_argument("out", nargs="?", help="the JSON of scores to write")
    parser.add_argument("--table", metavar="FILE.json", help="print the table of a results file")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())), end="")
        return
    if not args.study or not args.out:
        parser.error("give the study folder and the JSON to write (or --table FILE.json)")
    study = Path(args.study)
    with (study / "results.csv").open(newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: (r["arm"], int(r["seed"])))
    records = [
        {"arm": r["arm"], "seed": int(r["seed"]), "part": "real", "score": float(r[REAL_COLUMN])}
        for r in rows
    ]
    jobs = [(r, part, changes) for r in rows for part, changes in PARTS.items()]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        scores = pool.map(lambda j: score(study / "runs" / j[0]["run_id"], j[2], Path(tmp)), jobs)
        for (r, part, _), s in zip(jobs, scores, strict=True):
            records.append({"arm": r["arm"], "seed": int(r["seed"]), "part": part, "score": s})
    Path(args.out).write_text(json.dumps(records, indent=1) + "\n")
    print(table(records), end="")


if __name__ == "__main__":
    main()
