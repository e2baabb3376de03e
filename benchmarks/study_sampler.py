"""The sampler study (issue 15): PPO trained (a) with every sensor sampled every step, (b) under a realistic
multi-rate set with lost samples and action latency, (c) under (b) randomized per episode; every policy
scored under (b) and under a shifted condition (slower rates, more dropout, more latency).

The task, the sensors, the conditions (a)-(c) and PPO's settings are those of
``examples/configs/sampler_study.toml`` (the same study as a ``sensorgym ablate`` config); training and
scoring go through sensorgym's own ``train_from_config`` and ``evaluate_saved``, so every run directory is
an ordinary ``sensorgym train`` run (``sensorgym eval <run> --config ...`` replays it). The score of a
run under a condition is the mean return of ``--episodes`` evaluation episodes of the deterministic
policy; every run is scored on the same initial states (evaluation seed ``seed + 10000``) under both
conditions. The table gives, per training condition, the mean over seeds with a 95% t-interval.

Runs go to ``--workers`` processes with one torch thread each; finished runs are kept in
``<out>/runs.json`` and skipped when the script is run again (it resumes).

Usage:
    python benchmarks/study_sampler.py                           # 10 seeds x 3 conditions, ~15 min on 2 cores
    python benchmarks/study_sampler.py --seeds 0 --timesteps 20000 --out /tmp/pilot   # a quick pilot
    python benchmarks/study_sampler.py --report-only              # table + figure from runs.json
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "configs" / "sampler_study.toml"
CONDITIONS = {"a": "every step", "b": "multi-rate + latency", "c": "(b) randomized per episode"}
SHORT = {"a": "every step", "b": "multi-rate\n+ latency", "c": "randomized"}
#: the shifted evaluation condition: every reading slower (the IMU aside), more samples lost, more latency
SHIFTED = {
    "sensors.encoders.update_period": 0.04,  # 25 Hz instead of 100 Hz
    "sensors.encoders.dropout": 0.05,
    "sensors.cart_speed.update_period": 0.1,  # 10 Hz instead of 25 Hz
    "sensors.cart_speed.dropout": 0.2,  # 20% of its samples lost instead of 5%
    "latency.delay": 0.04,  # 40 ms (+0..20 ms) instead of 20 ms (+0..10 ms)
    "latency.jitter": 0.02,
}
#: beyond the randomized ranges of (c): still slower, more lost samples, more latency
FAR = {
    "sensors.encoders.update_period": 0.06,
    "sensors.encoders.dropout": 0.1,
    "sensors.cart_speed.update_period": 0.2,
    "sensors.cart_speed.dropout": 0.3,
    "latency.delay": 0.06,
    "latency.jitter": 0.02,
}
#: scoring conditions: name -> (label, overrides on top of (b))
EVALS = {
    "b": ("under (b)", {}),
    "shifted": ("under the shifted condition", SHIFTED),
    # the shifted condition one part at a time: which part breaks a policy
    "shift_encoders": ("shifted encoders only", {k: v for k, v in SHIFTED.items() if ".encoders." in k}),
    "shift_cart_speed": (
        "shifted cart speed only",
        {k: v for k, v in SHIFTED.items() if ".cart_speed." in k},
    ),
    "shift_latency": ("shifted latency only", {k: v for k, v in SHIFTED.items() if k.startswith("latency.")}),
    "far": ("beyond (c)'s ranges", FAR),
}


def _cells(cfg: Any) -> dict[str, dict]:
    a, b, c = cfg.sweep.cells()
    return {"a": a, "b": b, "c": c}


def _one(job: tuple[str, int, int, int, str]) -> dict[str, Any]:
    """Train one (condition, seed) and score it under (b) and the shifted condition (in a worker)."""
    condition, seed, timesteps, episodes, out = job
    import torch

    torch.set_num_threads(1)
    from sensorgym.app.config import apply_overrides, load_config
    from sensorgym.app.training import evaluate_saved, train_from_config

    base = load_config(CONFIG)
    cells = _cells(base)
    cfg = apply_overrides(base, cells[condition])
    run_dir = Path(out) / f"{condition}_seed{seed}"
    start = time.perf_counter()
    trained = train_from_config(cfg, run_dir, progress_bar=False, timesteps=timesteps, seed=seed)
    row: dict[str, Any] = {
        "condition": condition,
        "seed": seed,
        "timesteps": trained["timesteps"],
        "train_seconds": trained["train_seconds"],
        "own": trained["eval_return_mean"],
    }
    for name, (_, overrides) in EVALS.items():
        r = evaluate_saved(run_dir, apply_overrides(base, {**cells["b"], **overrides}), episodes=episodes)
        row[name] = r["eval_return_mean"]
        row[f"{name}_returns"] = r["eval_returns"]
    row["seconds"] = time.perf_counter() - start
    return row


def _ci(xs: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval."""
    from sensorgym.app.ablation import t_quantile

    x = np.asarray(xs, float)
    if len(x) < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), float(t_quantile(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


def _welch(x: list[float], y: list[float]) -> tuple[float, float, float]:
    """Difference of means x - y, its 95% Welch interval half-width and two-sided p-value."""
    from sensorgym.app.ablation import _t_cdf, t_quantile

    x, y = np.asarray(x, float), np.asarray(y, float)
    d = float(x.mean() - y.mean())
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    se = math.sqrt(vx + vy)
    if se == 0:
        return d, 0.0, 1.0 if d == 0 else 0.0
    df = (vx + vy) ** 2 / ((vx**2 / (len(x) - 1) if vx else 0) + (vy**2 / (len(y) - 1) if vy else 0))
    p = 2 * (1 - _t_cdf(abs(d) / se, df))
    return d, float(t_quantile(0.975, df) * se), float(p)


def report(rows: list[dict[str, Any]], out_png: Path, meta: dict[str, Any]) -> str:
    """The tables (markdown, returned) and the figure (written to ``out_png``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {c: [r for r in rows if r["condition"] == c] for c in CONDITIONS}
    lines = [
        "| trained under | seeds | under its own condition | under (b) | under shifted | episodes at 1000 "
        "(shifted) |",
        "|---|---|---|---|---|---|",
    ]
    for c, name in CONDITIONS.items():
        rs = by[c]
        if not rs:
            continue
        cells = []
        for key in ("own", "b", "shifted"):
            m, h = _ci([r[key] for r in rs])
            cells.append(f"{m:,.0f} ± {h:,.0f}" if math.isfinite(h) else f"{m:,.0f}")
        full = [x >= 999.5 for r in rs for x in r["shifted_returns"]]
        lines.append(f"| ({c}) {name} | {len(rs)} | {' | '.join(cells)} | {sum(full)}/{len(full)} |")
    diffs = ["", "| comparison | under (b) | under shifted |", "|---|---|---|"]
    for x, y in (("b", "a"), ("c", "a"), ("c", "b")):
        if len(by[x]) < 2 or len(by[y]) < 2:
            continue
        cells = []
        for key in ("b", "shifted"):
            d, h, p = _welch([r[key] for r in by[x]], [r[key] for r in by[y]])
            cells.append(f"{d:+,.0f} ± {h:,.0f} (p = {p:.2g})")
        diffs.append(f"| ({x}) − ({y}) | {' | '.join(cells)} |")
    parts = [
        "",
        "| trained under | " + " | ".join(label for label, _ in EVALS.values()) + " |",
        "|---|" + "---|" * len(EVALS),
    ]
    for c, name in CONDITIONS.items():
        if by[c]:
            cells = []
            for key in EVALS:
                m, h = _ci([r[key] for r in by[c]])
                cells.append(f"{m:,.0f} ± {h:,.0f}" if math.isfinite(h) else f"{m:,.0f}")
            parts.append(f"| ({c}) {name} | {' | '.join(cells)} |")
    table = "\n".join(lines + diffs + parts)

    shown = ("b", "shifted", "far")
    fig, axes = plt.subplots(1, len(shown), figsize=(12, 3.8), sharey=True)
    colors = {"a": "tab:gray", "b": "tab:blue", "c": "tab:green"}
    for ax, key in zip(axes, shown, strict=True):
        for i, c in enumerate(CONDITIONS):
            vals = [r[key] for r in by[c]]
            if not vals:
                continue
            m, h = _ci(vals)
            jitter = np.linspace(-0.12, 0.12, len(vals)) if len(vals) > 1 else [0.0]
            ax.scatter(i + np.asarray(jitter), vals, color=colors[c], alpha=0.5, s=18)
            ax.errorbar(i, m, yerr=h if math.isfinite(h) else None, fmt="o", color="black", capsize=5, ms=6)
        ax.set_xticks(range(len(CONDITIONS)), [f"({c})\n{n}" for c, n in SHORT.items()], fontsize=8)
        ax.set_title(f"scored {EVALS[key][0]}", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("mean evaluation return (max 1000)")
    for ax in axes:
        ax.set_xlabel("trained under", fontsize=9)
    fig.suptitle(
        f"InvertedPendulum-v5 at 50 Hz, PPO {meta['timesteps']:,} steps, {meta['seeds']} seeds "
        "(dots: seeds; bars: mean ± 95% CI)",
        fontsize=9,
    )
    fig.tight_layout()
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    p.add_argument("--timesteps", type=int, default=None, help="default: the config's algorithm.timesteps")
    p.add_argument("--episodes", type=int, default=20, help="evaluation episodes per condition")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=list(CONDITIONS))
    p.add_argument("--out", default=str(ROOT / "sensorgym_outputs" / "study_sampler"))
    p.add_argument("--table", default=None, help="write the table here (markdown)")
    p.add_argument("--figure", default=None, help="write the figure here (PNG)")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from sensorgym.app.config import load_config

    timesteps = args.timesteps or load_config(CONFIG).algorithm.timesteps
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store = out / "runs.json"
    rows = json.loads(store.read_text()) if store.exists() else []
    done = {(r["condition"], r["seed"], r["timesteps_budget"]) for r in rows}
    jobs = [
        (c, s, timesteps, args.episodes, str(out))
        for s in args.seeds
        for c in args.conditions
        if (c, s, timesteps) not in done
    ]
    start = time.perf_counter()
    if jobs and not args.report_only:
        print(f"{len(jobs)} runs of {timesteps:,} steps on {args.workers} worker(s)", flush=True)
        with mp.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
            for row in pool.imap_unordered(_one, jobs):
                row["timesteps_budget"] = timesteps
                rows.append(row)
                store.write_text(json.dumps(rows, indent=1))
                print(
                    f"({row['condition']}) seed {row['seed']}: own {row['own']:.0f}, "
                    f"under (b) {row['b']:.0f}, shifted {row['shifted']:.0f}; {row['seconds']:.0f} s "
                    f"[{time.perf_counter() - start:.0f} s elapsed]",
                    flush=True,
                )
    rows = [r for r in rows if r["timesteps_budget"] == timesteps and r["seed"] in args.seeds]
    meta = {"timesteps": timesteps, "seeds": len({r["seed"] for r in rows}), "episodes": args.episodes}
    table = report(rows, Path(args.figure or out / "study.png"), meta)
    Path(args.table or out / "table.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
