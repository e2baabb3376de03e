"""The largest batch that fits in a memory budget with the standard suite (benchmarks/suite.py).

Builds the suite at growing B, steps it, and records the process's peak resident memory (sensor state,
the state tensors handed in, and every temporary of a step), measured in a fresh subprocess per B so
peaks do not mix. A straight-line fit of peak memory against B gives bytes per env and the fixed part;
the largest B under the budget follows, and is then verified (or, when the budget exceeds this machine's
memory, the largest verified B is reported next to the extrapolation).

Usage:
    python benchmarks/max_batch.py                      # 24 GiB budget
    python benchmarks/max_batch.py --budget-gib 8 --sizes 16384 65536
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(b: int, steps: int = 3) -> None:
    """Child: build, reset, step; print peak RSS in bytes."""
    sys.path.insert(0, HERE)
    import torch
    from suite import build_suite, make_state

    import sensorgym as sg

    state = make_state(b)
    mgr = build_suite(b)
    mgr.reset(state)
    mask = torch.zeros(b, dtype=torch.bool)
    mask[::7] = True
    for i in range(steps):
        mgr.step(state, reset_mask=mask if i == 1 else None)
    mgr.reset(state, mask)
    for s in mgr.sensors:
        s.read()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(peak, sg.memory_report(mgr).total)


def run_child(b: int) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(b)], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), int(out[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget-gib", type=float, default=24.0)
    p.add_argument("--sizes", type=int, nargs="+", default=[16384, 65536, 262144, 1048576])
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        measure(args.child)
        return
    rows = []
    print("| B | peak RSS MiB | sensor state MiB | state bytes/env |")
    print("|---:|---:|---:|---:|")
    for b in args.sizes:
        peak, state = run_child(b)
        rows.append((b, peak))
        print(f"| {b:,} | {peak / 2**20:,.0f} | {state / 2**20:,.1f} | {state / b:,.0f} |", flush=True)
    (b0, p0), (b1, p1) = rows[-2], rows[-1]
    per_env = (p1 - p0) / (b1 - b0)
    fixed = p1 - per_env * b1
    budget = args.budget_gib * 2**30
    b_max = int((budget - fixed) / per_env)
    print(f"\npeak memory ~ {fixed / 2**20:,.0f} MiB + {per_env:,.0f} B x B")
    print(f"largest B within {args.budget_gib:g} GiB: {b_max:,} (extrapolated)")
    avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    verify = min(b_max, int((0.8 * avail - fixed) / per_env))
    peak, _ = run_child(verify)
    label = "the extrapolated maximum" if verify == b_max else "the most this machine's free memory allows"
    print(f"verified: B = {verify:,} ({label}) ran with peak RSS {peak / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
