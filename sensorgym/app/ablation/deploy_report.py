"""How the trained arms transfer: the part of ``summary.md`` and the figure ``deploy.png`` for a study with
``[deploy]`` conditions. An *arm* is what was trained: a sweep cell with a critic type, over its seeds.

Per arm: its mean score in its own condition and under each deployment condition (mean ± sample sd over
seeds), and the drop (own minus deployed, paired by seed: the same run scored twice on the same
episodes) with its 95% t-interval. Per condition: the arm that scores highest there against each other
arm, paired by seed, with the 95% t-interval of the difference and its n, and one sentence naming the
arm that transfers best and how sure that is (:mod:`~sensorgym.app.ablation.statistics`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..config_deploy import deploy_column
from .report import _as_number, _fmt, _level_name, _sane_ylim, _value_text
from .statistics import ci_half, paired_difference

__all__ = ["deploy_figure", "deploy_markdown", "plot_deploy"]


@dataclass
class _Arm:
    """One training arm: its own score and its score under each condition, per seed."""

    critic: str
    cell: tuple
    name: str
    own: dict[int, float]
    deployed: dict[str, dict[int, float]]


def _sort_key(value: Any) -> tuple:
    x = _as_number(value)
    return (0, x, "") if x is not None else (1, 0.0, str(value))


def _arms(rows: list[dict[str, Any]], cell_keys: list[str], cfg: Config) -> list[_Arm]:
    """The arms of ``rows``, ordered by level (numbers by value) and then as ``[sweep] critic`` lists."""
    names = list(cfg.deploy)
    arms: dict[tuple, _Arm] = {}
    for r in rows:
        cell = tuple(r.get(k, "") for k in cell_keys)
        critic = r["critic"]
        if (cell, critic) not in arms:
            label = f"{critic} ({_level_name(cell_keys, cell)})" if cell_keys else critic
            arms[(cell, critic)] = _Arm(critic, cell, label, {}, {n: {} for n in names})
        arm = arms[(cell, critic)]
        seed = int(r["seed"])
        arm.own[seed] = float(r["eval_return_mean"])
        for n in names:
            x = _as_number(r.get(deploy_column(n)))
            if x is not None:
                arm.deployed[n][seed] = x
    order = list(cfg.sweep.critic)
    return sorted(
        arms.values(),
        key=lambda a: (
            tuple(_sort_key(v) for v in a.cell),
            order.index(a.critic) if a.critic in order else len(order),
        ),
    )


def _paired(a: dict[int, float], b: dict[int, float]) -> dict[str, float]:
    """``a - b`` on the seeds both have (:func:`paired_difference`)."""
    common = sorted(set(a) & set(b))
    return paired_difference([a[s] for s in common], [b[s] for s in common])


def _mean_sd(xs: list[float]) -> str:
    if not xs:
        return "-"
    sd = float(np.std(xs, ddof=1)) if len(xs) > 1 else math.nan
    return f"{_fmt(float(np.mean(xs)))} ± {_fmt(sd)}"


def _interval(d: dict[str, float]) -> str:
    if d["n"] == 0:
        return "-"
    ci = f" [{_fmt(d['lo'], sign=True)}, {_fmt(d['hi'], sign=True)}]" if d["n"] > 1 else " [n/a: one seed]"
    return f"{_fmt(d['mean'], sign=True)}{ci}"


def _ranked(arms: list[_Arm], name: str) -> list[_Arm]:
    """The arms with a score under ``name``, highest mean deployed score first."""
    scored = [a for a in arms if a.deployed[name]]
    return sorted(scored, key=lambda a: -float(np.mean(list(a.deployed[name].values()))))


def _verdict(name: str, ranked: list[_Arm]) -> str:
    """One sentence: which arm transfers best under ``name`` (the highest deployed score) and how sure."""
    if not ranked:
        return f"Under {name}, no run has a score yet."
    best = ranked[0]
    mean = f"mean {_fmt(float(np.mean(list(best.deployed[name].values()))))}"
    if len(ranked) == 1:
        return f"Under {name}, one training arm only ({best.name}, {mean}): nothing to compare it with."
    d = _paired(best.deployed[name], ranked[1].deployed[name])
    n = int(d["n"])
    if n < 2:
        return (
            f"Under {name}, {best.name} scores highest ({mean}, {_fmt(d['mean'], sign=True)} ahead of "
            f"{ranked[1].name}), but with {n} paired seed(s) there is no interval: this cannot tell the "
            "arms apart; run more seeds."
        )
    ci = f"{_fmt(d['mean'], sign=True)} [{_fmt(d['lo'], sign=True)}, {_fmt(d['hi'], sign=True)}]"
    if d["lo"] > 0:
        others = [_paired(best.deployed[name], a.deployed[name]) for a in ranked[1:]]
        clear = sum(o["n"] > 1 and o["lo"] > 0 for o in others)
        every = "every other arm" if clear == len(others) else f"{clear} of the {len(others)} other arms"
        return (
            f"Under {name}, {best.name} transfers best ({mean}): it beats the next best, {ranked[1].name}, "
            f"by {ci} (95% paired t-interval, n = {n} seeds; the interval excludes 0), and {every} with an "
            "interval that excludes 0."
        )
    close = [a.name for a in ranked[1:] if _paired(best.deployed[name], a.deployed[name])["lo"] <= 0]
    return (
        f"Under {name}, {best.name} scores highest ({mean}), but it cannot be told apart from the next best, "
        f"{ranked[1].name}: {ci} (95% paired t-interval, n = {n} seeds; the interval includes 0); "
        f"{len(close)} arm(s) are within that uncertainty of it: {'; '.join(close)}."
    )


def _condition_text(overrides: dict[str, Any]) -> str:
    return ", ".join(f"`{k}` = {_value_text(v)}" for k, v in overrides.items())


def _arm_table(arms: list[_Arm], names: list[str]) -> list[str]:
    head = ["training arm", "seeds", "own: mean ± sd"]
    for n in names:
        head += [f"{n}: mean ± sd", f"{n}: drop [95% CI]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm in arms:
        cells = [arm.name, str(len(arm.own)), _mean_sd(list(arm.own.values()))]
        for n in names:
            cells += [_mean_sd(list(arm.deployed[n].values())), _interval(_paired(arm.own, arm.deployed[n]))]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _pair_table(name: str, ranked: list[_Arm]) -> list[str]:
    if len(ranked) < 2:
        return []
    best = ranked[0]
    lines = [
        f"### Under {name}: {best.name} against each other arm",
        "",
        f"| arm | {name}: mean | {best.name} - arm, paired [95% CI] | n (seeds) | p |",
        "|---|---|---|---|---|",
        f"| {best.name} (highest) | {_fmt(float(np.mean(list(best.deployed[name].values()))))} | - | - | - |",
    ]
    for arm in ranked[1:]:
        d = _paired(best.deployed[name], arm.deployed[name])
        p = f"{d['p']:.2g}" if d["n"] > 1 else "n/a"
        mean = _fmt(float(np.mean(list(arm.deployed[name].values()))))
        lines.append(f"| {arm.name} | {mean} | {_interval(d)} | {int(d['n'])} | {p} |")
    return [*lines, ""]


def deploy_markdown(rows: list[dict[str, Any]], cell_keys: list[str], cfg: Config) -> str:
    """The section of ``summary.md`` on the ``[deploy]`` conditions (empty without any)."""
    names = list(cfg.deploy)
    if not names:
        return ""
    arms = _arms(rows, cell_keys, cfg)
    episodes = sorted({int(float(r["eval_episodes"])) for r in rows if r.get("eval_episodes")})
    ep = "/".join(map(str, episodes)) or "its"
    lines = [
        "## Scored where it will be deployed",
        "",
        "Every run was also scored under each `[deploy]` condition: its own config with the condition's "
        f"overrides, on the same {ep} evaluation episodes (the same evaluation seed, so the same initial "
        "states); *drop* is own score minus deployed score on the same run (> 0: it loses return there).",
        "",
        *(f"- **{n}**: {_condition_text(cfg.deploy[n])}" for n in names),
        "",
        "### Which arm transfers best",
        "",
        *(f"- {_verdict(n, _ranked(arms, n))}" for n in names),
        "",
        "### Per training arm",
        "",
        *_arm_table(arms, names),
        "",
    ]
    for n in names:
        lines += _pair_table(n, _ranked(arms, n))
    lines.append(
        "How to read it: a *training arm* is a sweep cell with a critic type, over its seeds; the arm that "
        "*transfers best* is the one with the highest mean score under the condition. Every interval is a "
        "Student-t 95% confidence interval over seeds of differences paired by seed (the drop: the same run "
        "in its own condition and deployed; between arms: runs of the same seed), with n the number of "
        "paired seeds. The highest arm is picked from these same scores, so its lead over the next is, if "
        "anything, flattered: an interval that includes 0 means the arms cannot be told apart. More seeds "
        "(`--seeds 0 1 2 3 4 5`) narrow the intervals; finished runs are reused."
    )
    return "\n".join(lines) + "\n"


def plot_deploy(rows: list[dict[str, Any]], cell_keys: list[str], path: str | Path, cfg: Config) -> Path:
    """Save :func:`deploy_figure` as a PNG at ``path``."""
    import matplotlib.pyplot as plt

    fig = deploy_figure(rows, cell_keys, cfg)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def deploy_figure(rows: list[dict[str, Any]], cell_keys: list[str], cfg: Config) -> Any:
    """Per training arm, the mean score in its own condition and under each deployment condition (95%
    t-interval bars over seeds), and the drop under each condition (paired by seed, 95% t-interval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = _arms(rows, cell_keys, cfg)
    xs = np.arange(len(arms), dtype=float)
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(11.0, 1.6 * len(arms) + 4), 5.0))
    scale = _score_panel(left, arms, xs, list(cfg.deploy))
    _drop_panel(right, arms, xs, list(cfg.deploy), scale)
    for ax in (left, right):
        ax.set_xticks(xs)
        ax.set_xticklabels([a.name.replace(" (", "\n(", 1) for a in arms], fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Scored where it will be deployed: {cfg.env.id}", fontsize=12)
    fig.text(
        0.5, 0.01,
        "Points: mean over seeds; bars: 95% t-interval (left: of the mean score; right: of the drop, paired "
        "by seed). Deployed: the same run scored on the same evaluation episodes under the condition.",
        ha="center", fontsize=8,
    )  # fmt: skip
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    return fig


def _score_panel(ax: Any, arms: list[_Arm], xs: np.ndarray, names: list[str]) -> float:
    """Each arm's mean score in its own condition and under each condition, with 95% t-interval bars;
    returns the largest magnitude shown (the scale of both panels' y ranges)."""
    series = [("own condition", lambda a: a.own), *((n, (lambda a, n=n: a.deployed[n])) for n in names)]
    values: list[float] = []
    for i, (label, get) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * 0.15
        mx, my, me = [], [], []
        for x, arm in zip(xs, arms, strict=True):
            scores = list(get(arm).values())
            if scores:
                mx.append(x + offset)
                my.append(float(np.mean(scores)))
                me.append(ci_half(scores))
                values += [my[-1] - me[-1], my[-1] + me[-1]]
        marker = "os^vD"[i % 5]
        ax.errorbar(mx, my, yerr=me, marker=marker, capsize=4, ls="none", color=f"C{i}", label=label)
    scale = max((abs(v) for v in values), default=1.0)
    _sane_ylim(ax, values, min_span=0.25 * scale)
    ax.set_ylabel("score: mean evaluation return")
    ax.set_title("score per training arm: own condition and deployed", fontsize=10)
    return scale


def _drop_panel(ax: Any, arms: list[_Arm], xs: np.ndarray, names: list[str], scale: float) -> None:
    """Each arm's drop (own minus deployed, paired by seed) under each condition, with its 95% interval."""
    drops: list[float] = []
    for i, n in enumerate(names):
        offset = (i - (len(names) - 1) / 2) * 0.15
        labelled = False
        for x, arm in zip(xs, arms, strict=True):
            d = _paired(arm.own, arm.deployed[n])
            if d["n"] == 0:
                continue
            err = [[d["mean"] - d["lo"]], [d["hi"] - d["mean"]]] if d["n"] > 1 else None
            ax.errorbar([x + offset], [d["mean"]], yerr=err, marker="s^vD"[i % 4], capsize=4,
                        color=f"C{i + 1}", label=None if labelled else n)  # fmt: skip
            labelled = True
            drops += [d["mean"]] + ([d["lo"], d["hi"]] if d["n"] > 1 else [])
    ax.axhline(0.0, color="black", lw=1, ls="--")
    _sane_ylim(ax, drops, min_span=0.25 * scale, include=0.0)
    ax.set_ylabel("drop: own - deployed (same run)")
    ax.set_title("drop per training arm (> 0: loses return when deployed)", fontsize=10)
