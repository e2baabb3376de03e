"""A/B of two checkouts of sensorgym on the standard suite, alternated in one run.

Each round runs ``benchmarks/run_all.py --no-sampler`` (this checkout's script) once against each tree's
package (``PYTHONPATH``), old then new, so both see the same machine load; the table keeps each tree's
best of the rounds per batch size and prints the ratio new / old for the eager step (the executor chosen
automatically), the torch executor forced, the fast path (``compile=True`` on CPU) and what
``SensorObservation`` adds to a SyncVectorEnv step (B <= 1024).

Usage:
    git worktree add /tmp/old <commit>
    python benchmarks/ab_trees.py /tmp/old . --rounds 3 --sizes 1 16 64 256 1024 4096 16384
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KEYS = (
    ("eager", "eager"), ("eager_torch", "torch executor"), ("fast", "compiled"), ("wrap_sg", "wrapper adds"),
)  # fmt: skip


def run_tree(tree: Path, sizes: list[int], min_time: float, out: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    cmd = [sys.executable, str(HERE / "run_all.py"), "--no-sampler", "--no-fit", "--devices", "cpu",
           "--min-time", str(min_time), "--out", str(out), "--sizes", *map(str, sizes)]  # fmt: skip
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "results_cpu.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="checkout of the old tree (its package is imported)")
    parser.add_argument("new", type=Path, help="checkout of the new tree")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (best of each kept)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64, 256, 1024, 4096, 16384])
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds of timing per measurement")
    args = parser.parse_args()
    best: dict[str, dict[int, dict[str, float]]] = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, tree in (("old", args.old), ("new", args.new)):
                rows = run_tree(tree, args.sizes, args.min_time, Path(tmp) / f"{name}{r}")
                for row in rows:
                    kept = best[name].setdefault(row["B"], {})
                    for key, _ in KEYS:
                        if key in row:
                            kept[key] = min(kept.get(key, float("inf")), row[key])
                print(f"round {r + 1}/{args.rounds}: {name} done", file=sys.stderr)
    head = " | ".join(f"{label} old / new µs | new / old" for _, label in KEYS)
    print(f"| B | {head} |")
    print("|---:|" + "---:|---:|" * len(KEYS))
    for b in args.sizes:
        cells = []
        for key, _ in KEYS:
            old, new = best["old"][b].get(key), best["new"][b].get(key)
            if old is None or new is None:
                cells += ["", ""]
            else:
                cells += [f"{old * 1e6:,.1f} / {new * 1e6:,.1f}", f"{new / old:.2f}"]
        print(f"| {b} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
