"""``sensorgym ablate``: sweep sensor imperfection levels x critic type x seeds, resumably.

A package of one purpose per module: :mod:`~sensorgym.app.ablation.plan` (the runs of a sweep and their
ids), :mod:`~sensorgym.app.ablation.run` (running them: in process, in worker processes or on Ray,
resumably, interruptibly), :mod:`~sensorgym.app.ablation.statistics` (scipy's t-intervals and paired
t-test) and :mod:`~sensorgym.app.ablation.report` (``summary.md`` and the figure). Its names are
re-exported here.

Every run trains PPO with one cell of the sweep (dotted-path overrides of the config, e.g.
``{"sensors.angle.noise": 0.05}``), one critic type and one seed, then evaluates it. Each finished run is
appended to ``results.csv`` at once; runs already in the CSV are skipped, so an interrupted sweep resumes
where it stopped. Runs go sequentially, to local worker processes (``workers``, each with ``threads``
torch threads, by default ``max(1, cores // workers)``), or to a Ray cluster (``ray_address``, each task
reserving ``threads`` CPUs, by default 1), with a progress bar for the sweep and one per running run.

Ctrl-C (SIGINT) stops a sweep within seconds: queued runs are cancelled, running workers terminated,
every finished run is kept in ``results.csv``, and :class:`SweepInterrupted` says how many are done.

The outputs answer the sweep's question: ``summary.md`` gives per level the mean and sample standard
deviation (ddof=1) over seeds for each critic, the asymmetric-minus-symmetric difference on paired seeds
with a 95% t-interval and p-value, the spread of single evaluation episodes, and one sentence saying what
the data support and how strongly; ``return_vs_level.png`` plots the same.

Example:
    >>> from sensorgym.app.ablation import plan_runs
    >>> from sensorgym.app.config import parse_config
    >>> cfg = parse_config({"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}},
    ...                     "sweep": {"seeds": [0, 1], "grid": {"sensors.a.noise": [0.0, 0.1]}}})
    >>> len(plan_runs(cfg))   # 2 levels x 2 critics x 2 seeds
    8
"""

from __future__ import annotations

from .plan import RESULT_FIELDS, Run, available_cores, default_threads, plan_runs
from .report import plot_results, results_figure, summary_markdown
from .run import SweepInterrupted, read_results, run_one, run_sweep
from .statistics import ci_half, paired_difference, t_quantile

__all__ = [
    "RESULT_FIELDS",
    "Run",
    "SweepInterrupted",
    "available_cores",
    "ci_half",
    "default_threads",
    "paired_difference",
    "plan_runs",
    "plot_results",
    "read_results",
    "results_figure",
    "run_one",
    "run_sweep",
    "summary_markdown",
    "t_quantile",
]
