"""The sweep's answer: ``summary.md`` gives per level the mean and sample standard deviation (ddof=1)
over seeds for each critic, the asymmetric-minus-symmetric difference on paired seeds with a 95%
t-interval and p-value (:mod:`~sensorgym.app.ablation.statistics`), the smallest difference the paired
test detects with 80% probability at that level's spread and number of seeds (so that "no clear
difference" says what it rules out), the spread of single evaluation episodes, and one sentence saying
what the data support and how strongly; ``return_vs_level.png`` plots the same.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..config_values import ARM
from .statistics import ci_half, detectable_difference, paired_difference

__all__ = ["plot_results", "results_figure", "summary_markdown"]


@dataclass
class _Level:
    """The runs of one cell: per critic, seed -> score and seed -> episode returns."""

    cell: tuple
    scores: dict[str, dict[int, float]]
    episodes: dict[str, dict[int, list[float]]]
    episode_sd: dict[str, dict[int, float]]


def _levels(rows: list[dict[str, Any]], cell_keys: list[str]) -> list[_Level]:
    levels: dict[tuple, _Level] = {}
    for r in rows:
        cell = tuple(r.get(k, "") for k in cell_keys)
        lv = levels.setdefault(cell, _Level(cell, {}, {}, {}))
        seed = int(r["seed"])
        lv.scores.setdefault(r["critic"], {})[seed] = float(r["eval_return_mean"])
        text = str(r.get("eval_returns") or "").split()
        lv.episodes.setdefault(r["critic"], {})[seed] = [float(x) for x in text]
        with contextlib.suppress(TypeError, ValueError):
            lv.episode_sd.setdefault(r["critic"], {})[seed] = float(r["eval_return_std"])
    return list(levels.values())


def _episode_sd(level: _Level) -> tuple[float, int]:
    """The pooled within-run sd (ddof=1) of single evaluation episodes, and the episodes per run."""
    variances, sizes = [], []
    for critic, by_seed in level.episodes.items():
        for seed, xs in by_seed.items():
            if len(xs) > 1:
                variances.append(float(np.var(xs, ddof=1)))
                sizes.append(len(xs))
            elif not xs and seed in level.episode_sd.get(critic, {}):  # an older CSV: only the std column
                variances.append(level.episode_sd[critic][seed] ** 2)
    if not variances:
        return float("nan"), 0
    return math.sqrt(float(np.mean(variances))), int(np.median(sizes)) if sizes else 0


def _level_name(cell_keys: list[str], cell: tuple) -> str:
    if not cell_keys:
        return "the base setting"
    if ARM in cell_keys:  # a named cell reads as its name; summary.md spells out its settings once
        return str(cell[cell_keys.index(ARM)])
    return ", ".join(f"{_readable(k)} = {_value_text(v)}" for k, v in zip(cell_keys, cell, strict=True))


def _value_text(value: Any) -> str:
    """A level's value for tables and ticks: a distribution as ``Uniform(0.05, 0.2)``, a key the cell does
    not set as ``config`` (the config's own value).

    Example:
        >>> _value_text("{'dist': 'Uniform', 'low': 0.05, 'high': 0.2}"), _value_text(""), _value_text(0.1)
        ('Uniform(0.05, 0.2)', 'config', '0.1')
    """
    import ast

    if value == "" or value is None:
        return "config"
    if isinstance(value, str) and value.startswith("{"):
        with contextlib.suppress(ValueError, SyntaxError):
            value = ast.literal_eval(value)
    if isinstance(value, dict) and "dist" in value:
        params = [value[k] for k in value if k != "dist"]
        return f"{value['dist']}({', '.join(str(p) for p in params)})"
    return str(value)


#: level labels longer than this are numbered in the figure ("cell 2"), with the number in summary.md
_LONG_LABEL = 28


def _level_labels(levels: list[Any], cell_keys: list[str]) -> tuple[list[str], bool]:
    """Each level's values as text, and whether they are too long for the figure's ticks."""
    if ARM in cell_keys:
        return [_level_name(cell_keys, lv.cell) for lv in levels], False
    texts = [", ".join(_value_text(v) for v in lv.cell) if cell_keys else "base" for lv in levels]
    return texts, any(len(t) > _LONG_LABEL for t in texts)


def arm_settings(levels_cells: list[tuple], cell_keys: list[str]) -> str:
    """One line per named cell: its name and the settings it overrides (empty without named cells).

    Example:
        >>> keys = ["arm", "x.imu.noise", "x.imu.estimator"]
        >>> print(arm_settings([("a", "0.0", ""), ("b", "", "mahony")], keys))
        - *a*: imu noise = 0.0
        - *b*: imu estimator = mahony
    """
    if ARM not in cell_keys:
        return ""
    out = []
    for cell in levels_cells:
        settings = [f"{_readable(k)} = {_value_text(v)}" for k, v in zip(cell_keys, cell, strict=True)
                    if k != ARM and v not in ("", None)]  # fmt: skip
        out.append(f"- *{cell[cell_keys.index(ARM)]}*: " + (", ".join(settings) or "the config as written"))
    return "\n".join(out)


def _readable(key: str) -> str:
    """``sensors.angle.noise`` -> ``angle noise``; other dotted keys lose their first part."""
    parts = key.split(".")
    if parts[0] == "latency" and len(parts) > 1:  # latency.delay -> action delay (not a sensor's delay)
        return "action " + " ".join(p.replace("_", " ") for p in parts[1:])
    return " ".join(p.replace("_", " ") for p in parts[1:]) if len(parts) > 1 else key


def _fmt(x: float, digits: int = 1, sign: bool = False) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:+,.{digits}f}" if sign else f"{x:,.{digits}f}"


def _verdict(name: str, d: dict[str, float], episode_sd: float) -> str:
    """One plain sentence: what the paired difference supports at this level, and how strongly."""
    n = d["n"]
    if n == 0:
        return f"At {name}, no seed has both critics yet, so there is nothing to compare."
    scale = (
        f" (for scale: single evaluation episodes vary with sd {_fmt(episode_sd, 0)})"
        if (math.isfinite(episode_sd))
        else ""
    )
    if n == 1:
        return (
            f"At {name}, one seed only: asymmetric - symmetric = {_fmt(d['mean'], sign=True)}{scale}; one "
            "seed cannot tell a difference from seed-to-seed luck, so this is anecdotal: run more seeds."
        )
    ci = (
        f"95% CI {_fmt(d['lo'], sign=True)} to {_fmt(d['hi'], sign=True)}, p = {d['p']:.2g}, {n} paired seeds"
    )
    if d["lo"] > 0 or d["hi"] < 0:
        better = "higher" if d["mean"] > 0 else "lower"
        effect = "helps" if d["mean"] > 0 else "hurts"
        strength = (
            "strong evidence"
            if d["p"] < 0.01 and n >= 5
            else (
                "clear evidence, though from few seeds"
                if d["p"] < 0.01
                else "moderate evidence (from few seeds)"
            )
        )
        return (
            f"At {name}, the asymmetric critic scores {better} by {_fmt(abs(d['mean']))} ({ci}): "
            f"{strength} that it {effect} here{scale}."
        )
    if d["p"] < 0.1:
        better = "higher" if d["mean"] > 0 else "lower"
        return (
            f"At {name}, only a weak hint that the asymmetric critic scores {better} "
            f"(asymmetric - symmetric = {_fmt(d['mean'], sign=True)}, {ci}): the interval still includes 0, "
            f"so the data do not show a difference at the 5% level; more seeds would tell{scale}."
            + _power_sentence(d)
        )
    return (
        f"At {name}, no clear difference: asymmetric - symmetric = {_fmt(d['mean'], sign=True)} ({ci}); "
        f"the data are consistent with anything from {_fmt(d['lo'], sign=True)} to "
        f"{_fmt(d['hi'], sign=True)}, so they neither show that it helps nor that it does not{scale}."
        + _power_sentence(d)
    )


#: seeds for the "more seeds would detect" comparison of the power sentence
_MORE_SEEDS = 10


def _power_sentence(d: dict[str, float]) -> str:
    """What a null answer rules out: the smallest true difference the study's paired t-test detects with
    80% probability, at the spread of the paired differences seen and the number of seeds (and at
    :data:`_MORE_SEEDS` seeds with the same spread)."""
    n, sd = int(d["n"]), d["sd"]
    smallest = detectable_difference(sd, n)
    if not math.isfinite(smallest):
        return ""
    more = (
        f"; {_MORE_SEEDS} seeds would detect {_fmt(detectable_difference(sd, _MORE_SEEDS))}"
        if n < _MORE_SEEDS
        else ""
    )
    return (
        f" With {n} seeds and this spread of the paired differences (sd {_fmt(sd)}), the study detects a "
        f"true difference of {_fmt(smallest)} or more (either way) with 80% probability: a smaller one is "
        f"not ruled out{more}."
    )


def _steps_sentence(rows: list[dict[str, Any]], cfg: Config) -> str:
    from ..training import planned_timesteps, rollout_steps

    budget = cfg.algorithm.timesteps
    trained = sorted({int(float(r["timesteps"])) for r in rows if r.get("timesteps")})
    rollout = rollout_steps(cfg.algorithm.kwargs, cfg.env.n_envs)
    n_steps = rollout // cfg.env.n_envs
    if not trained:
        trained = [planned_timesteps(budget, rollout)]
    got = f"{trained[0]:,}" if len(trained) == 1 else f"{trained[0]:,} to {trained[-1]:,}"
    if trained == [budget]:
        return f"each run trained {got} steps"
    return (
        f"each run trained {got} steps: the budget of {budget:,} rounded up to whole PPO rollouts of "
        f"{cfg.env.n_envs} envs x {n_steps:,} steps = {rollout:,} steps"
    )


def summary_markdown(rows: list[dict[str, Any]], cell_keys: list[str], cfg: Config) -> str:
    """The study's answer, per level: each critic's mean ± sample sd over seeds, the asymmetric-minus-
    symmetric difference on paired seeds with a 95% t-interval and p-value, the episode-level spread,
    and one sentence saying what the data support and how strongly."""
    levels = _levels(rows, cell_keys)
    critics = list(cfg.sweep.critic)
    both = "symmetric" in critics and "asymmetric" in critics
    unit = "arm" if ARM in cell_keys else "level"
    seeds = sorted({int(r["seed"]) for r in rows})
    episodes = sorted({int(float(r["eval_episodes"])) for r in rows if r.get("eval_episodes")})
    ep = f"{episodes[0]}" if len(episodes) == 1 else "/".join(map(str, episodes)) if episodes else "?"
    lines = [
        _title(levels, cell_keys, cfg, both),
        "",
        f"{len(levels)} {unit}(s) x {len(critics)} critic type(s) x {len(seeds)} seed(s) ({seeds}) = "
        f"{len(rows)} "
        f"runs; {_steps_sentence(rows, cfg)}. A run's score is the mean return of its {ep} evaluation "
        "episodes (deterministic policy, evaluation envs seeded apart from training).",
        "",
    ]
    diffs = []
    for lv in levels:
        sym, asym = lv.scores.get("symmetric", {}), lv.scores.get("asymmetric", {})
        common = sorted(set(sym) & set(asym))
        diffs.append(paired_difference([asym[s] for s in common], [sym[s] for s in common]))
    if both:
        lines += ["## Answer", ""]
        for lv, d in zip(levels, diffs, strict=True):
            lines.append(f"- {_verdict(_level_name(cell_keys, lv.cell), d, _episode_sd(lv)[0])}")
        lines.append("")
    head = [
        "arm" if ARM in cell_keys else ", ".join(_readable(k) for k in cell_keys) or "setting",
        *(f"{c}: mean ± sd (seeds)" for c in critics),
    ]
    if both:
        head += ["asymmetric - symmetric, paired [95% CI]", "p", "detectable (80% power)"]
    head += ["episode sd"]
    lines += [f"## Scores per {unit}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    texts, numbered = _level_labels(levels, cell_keys)
    for n, (lv, d) in enumerate(zip(levels, diffs, strict=True)):
        cells = [f"cell {n + 1}: {texts[n]}" if numbered else texts[n]]
        for c in critics:
            xs = list(lv.scores.get(c, {}).values())
            cells.append(
                f"{_fmt(float(np.mean(xs)))} ± "
                f"{_fmt(float(np.std(xs, ddof=1)) if len(xs) > 1 else math.nan)} "
                f"({len(xs)})"
                if xs
                else "-"
            )
        if both:
            ci = f" [{_fmt(d['lo'], sign=True)}, {_fmt(d['hi'], sign=True)}]" if d["n"] > 1 else ""
            cells += [f"{_fmt(d['mean'], sign=True)}{ci}", f"{d['p']:.2g}" if d["n"] > 1 else "n/a"]
            cells.append(_fmt(detectable_difference(d["sd"], int(d["n"]))))
        cells.append(_fmt(_episode_sd(lv)[0]))
        lines.append("| " + " | ".join(cells) + " |")
    named = arm_settings([lv.cell for lv in levels], cell_keys)
    lines += ["", "The arms (named sweep cells) and what each sets:", "", named] if named else []
    lines += ["", _how_to_read(cell_keys)]
    return "\n".join(lines) + "\n"


def _title(levels: list[Any], cell_keys: list[str], cfg: Config, both: bool) -> str:
    varied = ", ".join(cell_keys) or "nothing (one setting)"
    if ARM in cell_keys:
        names = ", ".join(_level_name(cell_keys, lv.cell) for lv in levels)
        varied = f"the arm ({names}; what each sets is listed below)"
    if both:
        return f"# Does an asymmetric critic help? {cfg.env.id}, varying {varied}"
    return f"# Ablation: {cfg.env.id}, varying {varied}"


def _how_to_read(cell_keys: list[str]) -> str:
    return (
        "How to read it: "
        + (", ".join(f"*{_readable(k)}* is `{k}`" for k in cell_keys if k != ARM) or "one setting")
        + "; *sd* is the sample standard deviation over seeds (ddof=1); the paired difference compares "
        "the two "
        "critics on the same seeds (same initial weights' seed, same training and evaluation envs), with a "
        "Student-t 95% confidence interval over seeds and the two-sided paired t-test p-value; "
        "*detectable (80% power)* is the smallest true difference, either way, that this test at the 5% "
        "level finds with 80% probability, given the number of seeds and the sd of the paired differences "
        "seen (the noncentral t; that sd is itself rough with few seeds): at a level without a clear "
        "difference, a true difference that large would have been found 4 times in 5, and a smaller one "
        "is not ruled out; "
        "*episode sd* is "
        "the pooled standard deviation of single evaluation episodes within a run (how much one episode's "
        "return varies; a run's score averages its episodes). Few seeds give wide intervals: add seeds "
        "(`--seeds 0 1 2 3 4 5`) to narrow them; finished runs are reused."
    )


def _as_number(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _sane_ylim(ax: Any, values: list[float], min_span: float, include: float | None = None) -> None:
    """Limits around ``values`` (and ``include``), at least ``min_span`` tall, so that a difference that is
    small next to the returns is not blown up to fill the panel."""
    vals = [v for v in values if math.isfinite(v)] + ([include] if include is not None else [])
    if not vals:
        return
    lo, hi = min(vals), max(vals)
    span = max(hi - lo, min_span, 1e-9)
    mid = 0.5 * (lo + hi)
    ax.set_ylim(mid - 0.55 * span, mid + 0.55 * span)


def plot_results(
    rows: list[dict[str, Any]], cell_keys: list[str], path: str | Path, cfg: Config | None = None
) -> Path:
    """Save :func:`results_figure` as a PNG at ``path``."""
    import matplotlib.pyplot as plt

    fig = results_figure(rows, cell_keys, cfg)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def results_figure(rows: list[dict[str, Any]], cell_keys: list[str], cfg: Config | None = None) -> Any:
    """Score vs the swept level per critic type (mean over seeds, 95% t-interval bars, single seeds as
    dots) and, with both critics, the asymmetric-minus-symmetric difference on paired seeds; with a title,
    a caption saying what the bars are, readable axis labels, and y ranges that keep small differences
    small. Returns the matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = _levels(rows, cell_keys)
    numeric = len(cell_keys) == 1 and all(_as_number(lv.cell[0]) is not None for lv in levels)
    if numeric:
        levels.sort(key=lambda lv: _as_number(lv.cell[0]))
    xs = np.arange(len(levels), dtype=float)
    ticks, numbered = _level_labels(levels, cell_keys)
    xlabel = ", ".join(f"{_readable(k)} ({k})" for k in cell_keys) or "setting"
    if ARM in cell_keys:
        xlabel = "arm (summary.md lists each arm's settings)"
    if numbered:  # long settings (several keys, distributions): numbered, spelled out in summary.md
        ticks = [f"cell {n + 1}" for n in range(len(levels))]
        xlabel = "sweep cell (summary.md lists each cell's settings)"
    critics = [c for c in ("symmetric", "asymmetric") if any(c in lv.scores for lv in levels)]
    critics += sorted({c for lv in levels for c in lv.scores} - set(critics))
    both = {"symmetric", "asymmetric"} <= set(critics)
    n_seeds = sorted({len(lv.scores.get(c, {})) for lv in levels for c in critics})
    seeds_text = f"{n_seeds[0]}" if len(n_seeds) == 1 else f"{n_seeds[0]}-{n_seeds[-1]}"
    fig, axes = plt.subplots(1, 2 if both else 1, figsize=(11 if both else 7, 4.6), squeeze=False)
    scale = _score_panel(axes[0, 0], levels, xs, critics, ticks, xlabel, seeds_text)
    if both:
        _difference_panel(axes[0, 1], levels, xs, ticks, xlabel, scale)
    _titles(fig, rows, cfg, both, seeds_text)
    return fig


def _score_panel(
    ax: Any, levels: list, xs: np.ndarray, critics: list[str], ticks: list[str], xlabel: str, seeds_text: str
) -> float:
    """The score per critic type at each level: means with 95% t-interval bars, single seeds as faint
    dots. Returns the largest magnitude shown (the scale of both panels' y ranges)."""
    all_values: list[float] = []
    for i, critic in enumerate(critics):
        offset = (i - (len(critics) - 1) / 2) * 0.12
        mx, my, me = [], [], []
        for x, lv in zip(xs, levels, strict=True):
            scores = list(lv.scores.get(critic, {}).values())
            if not scores:
                continue
            mx.append(x + offset)
            my.append(float(np.mean(scores)))
            me.append(ci_half(scores))
            ax.scatter([x + offset] * len(scores), scores, s=12, alpha=0.35, color=f"C{i}", zorder=2)
            all_values += [*scores, my[-1] - me[-1], my[-1] + me[-1]]
        ax.errorbar(mx, my, yerr=me, marker="o", capsize=4, color=f"C{i}", label=f"{critic} critic", zorder=3)
    scale = max((abs(v) for v in all_values), default=1.0)
    _sane_ylim(ax, all_values, min_span=0.25 * scale)
    ax.set_xticks(xs)
    ax.set_xticklabels(ticks, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("score: mean evaluation return")
    ax.set_title("score per critic type", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title=f"mean of {seeds_text} seeds,\nbars: 95% CI", title_fontsize=8)
    return scale


def _difference_panel(
    ax2: Any, levels: list, xs: np.ndarray, ticks: list[str], xlabel: str, scale: float
) -> None:
    """The asymmetric-minus-symmetric difference on paired seeds at each level, with its 95% interval."""
    vals: list[float] = []
    for x, lv in zip(xs, levels, strict=True):
        sym, asym = lv.scores.get("symmetric", {}), lv.scores.get("asymmetric", {})
        common = sorted(set(sym) & set(asym))
        d = paired_difference([asym[s] for s in common], [sym[s] for s in common])
        if d["n"] == 0:
            continue
        single = [asym[s] - sym[s] for s in common]
        ax2.scatter([x] * len(single), single, s=12, alpha=0.35, color="C2", zorder=2)
        err = [[d["mean"] - d["lo"]], [d["hi"] - d["mean"]]] if d["n"] > 1 else None
        ax2.errorbar([x], [d["mean"]], yerr=err, marker="s", capsize=4, color="C2", zorder=3)
        vals += single + [d["mean"]] + ([d["lo"], d["hi"]] if d["n"] > 1 else [])
    ax2.axhline(0.0, color="black", lw=1, ls="--", label="no difference")
    _sane_ylim(ax2, vals, min_span=0.25 * scale, include=0.0)
    ax2.set_xticks(xs)
    ax2.set_xticklabels(ticks, fontsize=9)
    ax2.set_xlabel(xlabel)
    ax2.set_ylabel("asymmetric - symmetric (same seed)")
    ax2.set_title("difference on paired seeds (> 0: asymmetric better)", fontsize=10)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8, loc="best")


def _titles(fig: Any, rows: list[dict[str, Any]], cfg: Config | None, both: bool, seeds_text: str) -> None:
    """The figure's title (the question, the env, the steps per run) and the caption on what it shows."""
    env_id = cfg.env.id if cfg is not None else ""
    steps = ""
    if cfg is not None and rows:
        trained = sorted({int(float(r["timesteps"])) for r in rows if r.get("timesteps")})
        steps = f", {trained[0]:,} training steps per run" if len(trained) == 1 else ""
    fig.suptitle(
        ("Does an asymmetric critic help? " if both else "Ablation: ") + f"{env_id}{steps}", fontsize=12
    )
    note = (
        f"Points: mean over {seeds_text} seeds of each run's score (mean return of its evaluation episodes); "
        "bars: 95% t-interval of that mean; faint dots: single seeds."
    )
    if not both:  # one panel: the note on two lines, so that it fits the narrower figure
        note = note.replace("); ", ");\n", 1)
    fig.text(0.5, 0.01, note, ha="center", fontsize=8)
    fig.tight_layout(rect=(0, 0.04 if both else 0.07, 1, 0.95))
