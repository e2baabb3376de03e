"""``sensorgym ablate``: sweep sensor imperfection levels x critic type x seeds, resumably.

A package of one purpose per module: :mod:`~sensorgym.app.ablation.plan` (the runs of a sweep and their
ids), :mod:`~sensorgym.app.ablation.task` (one run: train, keep its run directory, score it under each
``[deploy]`` condition), :mod:`~sensorgym.app.ablation.run` (running them: in process, in worker
processes or on Ray (:mod:`~sensorgym.app.ablation.on_ray`), resumably, interruptibly, with
:mod:`~sensorgym.app.ablation.progress` bars), :mod:`~sensorgym.app.ablation.statistics` (scipy's
t-intervals and paired t-test), :mod:`~sensorgym.app.ablation.report` (``summary.md`` and the figure) and
:mod:`~sensorgym.app.ablation.deploy_report` (how each trained arm transfers to the deployment
conditions: its part of ``summary.md`` and ``deploy.png``). Its names are re-exported here.

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
the data support and how strongly; ``return_vs_level.png`` plots the same. With ``[deploy.<name>]``
conditions (overrides of the run's config: what the policy meets where it will be deployed), every run is
also scored under each on its own evaluation episodes (a ``deploy_<name>_return_mean`` column), and the
summary gives per training arm the drop and which arm transfers best, with paired 95% intervals.

Example:
    >>> from sensorgym.app.ablation import plan_runs
    >>> from sensorgym.app.config import parse_config
    >>> cfg = parse_config({"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}},
    ...                     "sweep": {"seeds": [0, 1], "grid": {"sensors.a.noise": [0.0, 0.1]}}})
    >>> len(plan_runs(cfg))   # 2 levels x 2 critics x 2 seeds
    8
"""

from __future__ import annotations

from .deploy_report import deploy_figure, deploy_markdown, plot_deploy
from .plan import RESULT_FIELDS, Run, available_cores, default_threads, plan_runs
from .report import plot_results, results_figure, summary_markdown
from .run import SweepInterrupted, read_results, run_sweep
from .statistics import ci_half, paired_difference, t_quantile
from .task import RUNS, run_one

__all__ = [
    "RESULT_FIELDS",
    "RUNS",
    "Run",
    "SweepInterrupted",
    "available_cores",
    "ci_half",
    "default_threads",
    "deploy_figure",
    "deploy_markdown",
    "paired_difference",
    "plan_runs",
    "plot_deploy",
    "plot_results",
    "read_results",
    "results_figure",
    "run_one",
    "run_sweep",
    "summary_markdown",
    "t_quantile",
]
