"""The sampler study (issue 15): PPO trained (a) with every sensor sampled every step, (b) under a realistic
multi-rate set with lost samples and action latency, (c) under (b) randomized per episode; every policy
scored under (b), under a shifted condition (slower rates, more dropout, more latency), under each part of
that shift alone, and beyond (c)'s ranges.

The task, the sensors, the conditions (a)-(c) and PPO's settings are those of
``examples/configs/sampler_study.toml`` (the same study as a ``sensorgym ablate`` config); training and
scoring go through sensorgym's own ``train_from_config`` and ``evaluate_saved``, so every run directory is
an ordinary ``sensorgym train`` run (``sensorgym eval <run> --config ...`` replays it). The score of a
run under a condition is the mean return of ``--episodes`` evaluation episodes of the deterministic
policy; every run is scored on the same initial states (evaluation seed ``seed + 10000``) under every
condition. The tables give, per training condition, the mean over seeds with its 95% t-interval, and the
differences between training conditions with Welch's interval and test (``scipy.stats``).

Runs go to ``--workers`` processes with one torch thread each; finished runs are kept in
``<out>/runs.json`` and skipped when the script is run again (it resumes).

docs/sampler_study.md is generated from the runs, so its numbers cannot drift from them: its tables,
per-seed values and every sentence with a number sit between ``<!-- generated: NAME -->`` markers that
``--doc`` rewrites from ``runs.json``; the runs behind the committed document are
``docs/data/sampler_study_runs.json`` (``tests/app/test_sampler_study_doc.py`` checks that the document
is what they give).

Usage:
    python benchmarks/study_sampler.py                     # 5 seeds x 3 conditions
    python benchmarks/study_sampler.py --seeds 0 --timesteps 20000 --out /tmp/pilot   # a quick pilot
    python benchmarks/study_sampler.py --report-only --doc docs/sampler_study.md      # the document again
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import re
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "configs" / "sampler_study.toml"
DOC = ROOT / "docs" / "sampler_study.md"
#: the runs behind the committed docs/sampler_study.md (a copy of the runs.json that produced it)
DATA = ROOT / "docs" / "data" / "sampler_study_runs.json"
DEFAULT_SEEDS = [0, 1, 2, 3, 4]
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
PARTS = {
    "shift_encoders": "the encoders",
    "shift_cart_speed": "the cart speed",
    "shift_latency": "the latency",
}


def _cells(cfg: Any) -> dict[str, dict]:
    a, b, c = cfg.sweep.cells()
    return {"a": a, "b": b, "c": c}


def _one(job: tuple[str, int, int, int, str]) -> dict[str, Any]:
    """Train one (condition, seed) and score it under every scoring condition (in a worker)."""
    condition, seed, timesteps, episodes, out = job
    import torch

    torch.set_num_threads(1)
    from sensorgym.app.config import apply_overrides, load_config
    from sensorgym.app.training import evaluate_saved, train_from_config

    base = load_config(CONFIG)
    cells = _cells(base)
    cfg = apply_overrides(base, cells[condition])
    run_dir = Path(out) / f"{condition}_seed{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)  # a run a killed study left half done: it is trained again
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


# -- statistics (scipy.stats) ------------------------------------------------------------------------------
def _ci(xs: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval (NaN for fewer than two values)."""
    from scipy import stats

    x = np.asarray(xs, float)
    if len(x) < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


def _welch(x: list[float], y: list[float]) -> tuple[float, float, float]:
    """Difference of means x - y, the half-width of its 95% Welch interval and the two-sided p-value."""
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    d = float(x.mean() - y.mean())
    if x.var(ddof=1) + y.var(ddof=1) < 1e-9 * (1 + d * d):  # both at a ceiling: nothing to test
        return d, 0.0, 1.0 if abs(d) < 1e-6 else 0.0
    with warnings.catch_warnings():  # one group at a ceiling (1000 on every seed) is not an error here
        warnings.simplefilter("ignore", RuntimeWarning)
        test = stats.ttest_ind(x, y, equal_var=False)
    low, high = test.confidence_interval(0.95)
    return d, float(high - low) / 2, float(test.pvalue)


def _cell(xs: list[float]) -> str:
    m, h = _ci(xs)
    return f"{m:,.0f} ± {h:,.0f}" if math.isfinite(h) else f"{m:,.0f}"


def _evidence(p: float, n: int) -> str:
    """How strongly a p-value of ``n`` seeds per condition supports a difference, in words."""
    if p < 0.01:
        return f"clear evidence, p = {p:.2g}"
    if p < 0.05:
        return f"moderate evidence, p = {p:.2g}"
    return f"not significant with {n} seeds per condition, p = {p:.2g}: it may be chance"


def _listing(values: list[float]) -> str:
    """``1,000, 169 and 104``; ``all 1,000`` when every value rounds to the same."""
    words = [f"{v:,.0f}" for v in values]
    if len(words) > 2 and len(set(words)) == 1:
        return f"all {words[0]}"
    return ", ".join(words[:-1]) + f" and {words[-1]}" if len(words) > 1 else "".join(words)


# -- the document -----------------------------------------------------------------------------------------
def blocks(rows: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, str]:
    """The generated parts of docs/sampler_study.md (name -> markdown), from the runs ``rows``."""
    by = {c: sorted((r for r in rows if r["condition"] == c), key=lambda r: r["seed"]) for c in CONDITIONS}
    n = min(len(v) for v in by.values())
    seeds = sorted({r["seed"] for r in rows})

    def mean(c: str, key: str) -> float:
        return float(np.mean([r[key] for r in by[c]]))

    def at_1000(c: str, key: str) -> str:
        full = [x >= 999.5 for r in by[c] for x in r[f"{key}_returns"]]
        return f"{sum(full)}/{len(full)}"

    out: dict[str, str] = {}
    d_cb, h_cb, p_cb = _welch([r["shifted"] for r in by["c"]], [r["shifted"] for r in by["b"]])
    d_ba, h_ba, p_ba = _welch([r["b"] for r in by["b"]], [r["b"] for r in by["a"]])
    out["answer"] = (
        f"**Short answer (one task, {n} seeds per condition):** a policy trained with ideal sensors scores "
        f"{_cell([r['b'] for r in by['a']])} of 1000 under the realistic set, where those trained under it "
        f"score {_cell([r['b'] for r in by['b']])}: training under realistic rates and latency matters "
        f"({_evidence(p_ba, n)}). Under the shifted condition the policies trained every step fail "
        f"({_cell([r['shifted'] for r in by['a']])}); those trained with the set randomized per episode "
        f"score {_cell([r['shifted'] for r in by['c']])}, against {_cell([r['shifted'] for r in by['b']])} "
        f"for the fixed set: randomization helps there by {d_cb:+,.0f} ± {h_cb:,.0f} "
        f"({_evidence(p_cb, n)}). Beyond the ranges (c) was trained on, every policy scores at most "
        f"{max(mean(c, 'far') for c in CONDITIONS):,.0f}."
    )

    lines = [
        "| trained under | seeds | under its own condition | under (b) | under shifted | episodes at 1000 "
        "(shifted) |",
        "|---|---|---|---|---|---|",
    ]
    for c, name in CONDITIONS.items():
        cells = " | ".join(_cell([r[k] for r in by[c]]) for k in ("own", "b", "shifted"))
        lines.append(f"| ({c}) {name} | {len(by[c])} | {cells} | {at_1000(c, 'shifted')} |")
    lines += ["", "| comparison | under (b) | under shifted |", "|---|---|---|"]
    for x, y in (("b", "a"), ("c", "a"), ("c", "b")):
        cells = []
        for key in ("b", "shifted"):
            d, h, p = _welch([r[key] for r in by[x]], [r[key] for r in by[y]])
            cells.append(f"{d:+,.0f} ± {h:,.0f} (p = {p:.2g})")
        lines.append(f"| ({x}) − ({y}) | {' | '.join(cells)} |")
    out["results"] = "\n".join(lines)

    head = "| trained under | " + " | ".join(label for label, _ in EVALS.values()) + " |"
    parts = [head, "|---|" + "---|" * len(EVALS)]
    for c, name in CONDITIONS.items():
        parts.append(f"| ({c}) {name} | " + " | ".join(_cell([r[k] for r in by[c]]) for k in EVALS) + " |")
    out["parts"] = "\n".join(parts)

    out["seeds"] = (
        f"Per seed ({', '.join(map(str, seeds))}): under (b), the policies trained every step scored "
        f"{_listing([r['b'] for r in by['a']])} (under their own condition: "
        f"{_listing([r['own'] for r in by['a']])}); under the shifted condition, those trained under (b) "
        f"scored {_listing([r['shifted'] for r in by['b']])}, and those trained under (c) "
        f"{_listing([r['shifted'] for r in by['c']])}."
    )

    worst = {c: min(PARTS, key=lambda k: mean(c, k)) for c in CONDITIONS}
    if len(set(worst.values())) == 1:
        hurts = f"For every training condition the part that hurts most is {PARTS[worst['a']]}."
    else:
        hurts = "The part that hurts most: " + ", ".join(f"({c}) {PARTS[worst[c]]}" for c in CONDITIONS) + "."
    part_text = "; ".join(
        f"{PARTS[k]} alone: " + ", ".join(f"({c}) {mean(c, k):,.0f}" for c in CONDITIONS) for k in PARTS
    )
    d_ca, h_ca, p_ca = _welch([r["shifted"] for r in by["c"]], [r["shifted"] for r in by["a"]])
    far = ", ".join(f"({c}) {mean(c, 'far'):,.0f}" for c in CONDITIONS)
    d_bb, _, p_bb = _welch([r["b"] for r in by["c"]], [r["b"] for r in by["b"]])
    cost = (
        f"no cost shows ({_cell([r['b'] for r in by['c']])} against {_cell([r['b'] for r in by['b']])})"
        if p_bb >= 0.05
        else f"it costs {-d_bb:,.0f} ({_evidence(p_bb, n)})"
    )
    head_ba = (
        "Training under realistic rates and latency matters on this task."
        if p_ba < 0.05
        else "Training under realistic rates and latency may matter; these seeds do not show it clearly."
    )
    head_cb = (
        "Per-episode randomization helps under the shift it covers."
        if p_cb < 0.05 and d_cb > 0
        else f"Under the shift it covers, per-episode randomization beats training every step; against the "
        f"fixed set its gain is not significant with {n} seeds."
        if p_ca < 0.05 and d_ca > 0
        else "Under the shift it covers, these seeds show no clear gain from per-episode randomization."
    )
    head_far = (
        "Randomization does not extrapolate."
        if max(mean(c, "far") for c in CONDITIONS) < 200
        else "Beyond its ranges, randomization holds up only in part."
    )
    episodes = np.array([x for r in rows for k in EVALS for x in r[f"{k}_returns"]])
    extreme = np.mean((episodes >= 999.5) | (episodes < 100))
    out["support"] = "\n".join(
        [
            f"* **{head_ba}** Under (b), the policies "
            f"trained every step score {abs(d_ba):,.0f} ± {h_ba:,.0f} less than those trained under (b) "
            f"({_evidence(p_ba, n)}); {sum(r['b'] < 999.5 for r in by['a'])} of {n} lost return there, "
            f"while under ideal sensors they scored {_listing([r['own'] for r in by['a']])}.",
            f"* **{head_cb}** Under the shifted condition (c) beats (a) by {d_ca:+,.0f} ± {h_ca:,.0f} "
            f"({_evidence(p_ca, n)}) and (b) by {d_cb:+,.0f} ± {h_cb:,.0f} ({_evidence(p_cb, n)}). Single "
            f"episodes are nearly all or nothing ({extreme:.0%} of them balance to the end or fall within "
            "2 s), so a seed's mean depends on how many of its episodes fall, and the per-seed values above "
            f"say more than the means. Under (b) {cost}; under its own condition (c) scores "
            f"{_cell([r['own'] for r in by['c']])}.",
            f"* **Which part of the shift breaks a policy** (the other settings at (b)'s): {part_text}. "
            + hurts,
            f"* **{head_far}** Beyond (c)'s ranges the three score {far} of 1000. "
            'The data support "randomize over the rates, losses and latencies you expect", not '
            '"randomization makes a policy robust to anything".',
            "",
            "Limits: one task, and an easy one with a ceiling, so (b) and (c) cannot be told apart under "
            f"(b); one budget ({meta['timesteps']:,} steps), short enough that harder tasks may show a "
            "training cost of randomization that this one does not; the policy never saw the readings' ages "
            f"(`[policy] age`), which might help the fixed-set policy. The intervals are over {n} training "
            "seeds; with all-or-nothing episodes they are wide.",
        ]
    )

    cpu = sum(r.get("seconds", 0.0) for r in rows) / 60
    out["reproduce"] = (
        f"{len(seeds)} seeds x {len(CONDITIONS)} conditions: {len(rows)} runs of "
        f"{int(np.median([r['timesteps'] for r in rows])):,} steps (a {meta['timesteps']:,} budget in whole "
        f"rollouts), each scored under {len(EVALS)} conditions with {meta['episodes']} episodes: "
        f"{cpu:,.0f} minutes of run time in all (the sum over runs; two run at a time on 2 cores, each "
        "with one torch thread, so the wall time is about half of it on an idle machine)."
    )
    return out


_BLOCK = re.compile(r"(<!-- generated: (\w+)[^>]*-->\n)(.*?)(\n<!-- end: \2 -->)", re.S)


def render(doc: str, generated: dict[str, str]) -> str:
    """``doc`` with every generated block replaced by ``generated[name]``; a block the document names but
    ``generated`` lacks (or the reverse) is an error, so no number is left behind."""
    found = set()

    def sub(m: re.Match) -> str:
        found.add(m.group(2))
        if m.group(2) not in generated:
            raise KeyError(f"the document has a generated block {m.group(2)!r} the report does not make")
        return m.group(1) + generated[m.group(2)] + m.group(4)

    text = _BLOCK.sub(sub, doc)
    missing = set(generated) - found
    if missing:
        raise KeyError(f"the document lacks the generated blocks {sorted(missing)}")
    return text


def figure(rows: list[dict[str, Any]], out_png: Path, meta: dict[str, Any]) -> None:
    """The study's figure: per scoring condition ((b), shifted, beyond), every seed and the mean ± 95% CI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {c: [r for r in rows if r["condition"] == c] for c in CONDITIONS}
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
        ax.set_xlabel("trained under", fontsize=9)
    axes[0].set_ylabel("mean evaluation return (max 1000)")
    fig.suptitle(
        f"InvertedPendulum-v5 at 50 Hz, PPO {meta['timesteps']:,} steps, {meta['seeds']} seeds "
        "(dots: seeds; bars: mean ± 95% CI)",
        fontsize=9,
    )
    fig.tight_layout()
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    """The script's options, each with its help."""
    p = argparse.ArgumentParser(
        prog="python benchmarks/study_sampler.py",
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog="Finished runs are kept in <out>/runs.json and skipped when the script runs again. "
        "docs/sampler_study.md is generated: --report-only --runs docs/data/sampler_study_runs.json "
        "--doc docs/sampler_study.md rewrites it from the committed runs.",
    )
    p.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=DEFAULT_SEEDS,
        metavar="SEED",
        help=f"training seeds, each trained under every condition (default: {DEFAULT_SEEDS})",
    )
    p.add_argument(
        "--timesteps",
        type=int,
        default=None,
        metavar="STEPS",
        help="training budget per run (default: the config's algorithm.timesteps, 60000)",
    )
    p.add_argument(
        "--episodes",
        type=int,
        default=20,
        help="evaluation episodes per run and scoring condition (default 20)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="runs at a time, one process each with one torch thread (default 2)",
    )
    p.add_argument(
        "--conditions",
        nargs="+",
        default=list(CONDITIONS),
        choices=list(CONDITIONS),
        help="training conditions to run (default: a b c)",
    )
    p.add_argument(
        "--out",
        default=str(ROOT / "sensorgym_outputs" / "study_sampler"),
        help="folder of runs.json, the run directories, table.md and study.png "
        "(default: sensorgym_outputs/study_sampler)",
    )
    p.add_argument(
        "--runs",
        default=None,
        metavar="JSON",
        help="report from this runs.json instead of <out>/runs.json (e.g. docs/data/sampler_study_runs.json)",
    )
    p.add_argument("--table", default=None, help="write the tables here (markdown; default <out>/table.md)")
    p.add_argument("--figure", default=None, help="write the figure here (PNG; default <out>/study.png)")
    p.add_argument(
        "--doc",
        default=None,
        metavar="MD",
        help="rewrite the generated blocks of this document (docs/sampler_study.md) from the runs",
    )
    p.add_argument(
        "--save-data",
        action="store_true",
        help=f"copy the runs reported on to {DATA.relative_to(ROOT)} (the runs behind the committed "
        "document)",
    )
    p.add_argument("--report-only", action="store_true", help="train nothing: report on the runs there are")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from sensorgym.app.config import load_config

    timesteps = args.timesteps or load_config(CONFIG).algorithm.timesteps
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store = Path(args.runs) if args.runs else out / "runs.json"
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
    if not rows:
        raise SystemExit(f"no finished runs of {timesteps:,} steps in {store}: run without --report-only")
    episodes = int(np.median([len(r["b_returns"]) for r in rows]))  # as the runs were scored
    meta = {"timesteps": timesteps, "seeds": len({r["seed"] for r in rows}), "episodes": episodes}
    generated = blocks(rows, meta)
    table = "\n\n".join(generated[k] for k in ("results", "parts", "seeds"))
    Path(args.table or out / "table.md").write_text(table + "\n")
    figure(rows, Path(args.figure or out / "study.png"), meta)
    if args.save_data:
        DATA.parent.mkdir(parents=True, exist_ok=True)
        DATA.write_text(json.dumps(rows, indent=1) + "\n")
    if args.doc:
        doc = Path(args.doc)
        doc.write_text(render(doc.read_text(), generated))
        print(f"rewrote the generated blocks of {doc}")
    print(table)


if __name__ == "__main__":
    main()
