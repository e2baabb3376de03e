"""Profile-likelihood intervals of the drift terms, the bound on a random walk the log does not show, and
the model a log may not tell apart from the chosen one (a slow Gauss-Markov bias and a random walk).

**Why profiles.** The long-``tau`` estimates of an Allan deviation are few (an hour holds a dozen
independent averages of 5 minutes), and a drift term's likelihood is far from a parabola there: a
correlation time's is skewed towards long times, a variance's is flat towards 0. The inverse Fisher
information of the chosen model is the curvature at one point, so the uncertainty of each drift term
comes from its profile instead: the term held at a value, every other parameter of the chosen model
refitted (:func:`drift_se`), and the values whose ``Q`` stays within ``LEVEL`` (the chi-square of two
standard errors, times the misfit ``phi``) of the chosen model's are the term's two-standard-error
interval; a quarter of its width (in log units) is the standard error. The trade between the two drift
terms (a walk 35% smaller plus a bias of correlation time 80 s can fit an hour as well as the walk alone)
is the model choice's, which :mod:`~sensorgym.fitting.estimate` adds as the spread over the models that
have the term.

**A slow bias is a walk.** Over ``tau`` well below its correlation time a Gauss-Markov bias is a random walk
of density ``sigma_g sqrt(2 / tau_c)``; only past its peak (``tau`` about ``1.89 tau_c``) does its Allan
deviation fall. A bias whose peak lies less than about two thirds of an octave inside the longest ``tau``
(``tau_c > tau_max / DECLINE``) shows no fall the log's few long averages can confirm, and the log cannot
tell it from a walk (the issue 33 logs read a true walk of 0.003 as a bias of ``tau_c`` 135-190 s, with
the walk "not identifiable (< 0.0026)"; on the published sets' hours a true 50 s bias reads up to 100 s,
under ``tau_max / 3``). Such a bias is part of the walk here; where a bias alone explains the log about as
well (:func:`alternative`), the report gives it as the alternative, with its bounds.

Example:
    >>> import numpy as np
    >>> from sensorgym.fitting.allan import allan_deviation, fit_m
    >>> from sensorgym.fitting.estimate import fit_allan
    >>> rng = np.random.default_rng(3)
    >>> y = rng.normal(0, 0.02, 200_000) + np.cumsum(rng.normal(0, 2e-4, 200_000))  # white + walk
    >>> k = fit_allan(allan_deviation(y, 0.005, fit_m(len(y), len(y) // 10)), 0.005).estimates[
    ...     "random_walk_density"]
    >>> bool(abs(k.value - 2e-4 / np.sqrt(0.005)) < 2 * k.se)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .likelihood import AllanProblem, Structure, pack, param_names
from .model import ModelParams

__all__ = ["DECLINE", "LEVEL", "UPPER_95", "Alternative", "alternative", "drift_se", "random_walk_bound"]

DECLINE = 3.0  # tau_max / tau_c under which a Gauss-Markov bias shows its fall (module docstring)
LEVEL = 4.0  # Q of a two-standard-error interval (chi-square, one degree of freedom)
UPPER_95 = 2.71  # Q of a one-sided 95% bound
_SPAN = 9.0  # log units searched on each side (a factor 8,000 in a variance)
_FIRST_STEP = 0.25
_BISECT = 3  # the interval's ends to an eighth of the last step
_TOLERANCE = 0.01  # Q to a hundredth: the interval's ends need no more
_SLOW_TC = 10.0  # a slow bias's correlation time is searched up to this many longest tau


def _starts(problem: AllanProblem, p: ModelParams, structure: Structure, tc_max: float) -> list[ModelParams]:
    """``p`` and, where a Gauss-Markov bias is free, ``p`` with its correlation time at three more points
    of its range (the profile of a drift term can jump between two bumps)."""
    if not structure[2]:
        return [p]
    lo = problem.tc_grid[0]
    if tc_max <= 2 * lo:
        return [p.replace(bias_correlation_time=min(max(p.bias_correlation_time, lo), tc_max))]
    out = [p.replace(bias_correlation_time=min(max(p.bias_correlation_time or tc_max, lo), tc_max))]
    return out + [p.replace(bias_correlation_time=float(tc)) for tc in np.geomspace(lo, tc_max, 5)[1:-1]]


def best_fit(
    problem: AllanProblem,
    structure: Structure,
    starts: list[ModelParams],
    tc_max: float,
    pins: dict[int, float] | None = None,
    spread: bool = True,
) -> tuple[ModelParams, float]:
    """The best polished fit of ``structure`` from each of ``starts`` (and, with ``spread``, their
    correlation-time variants), the ``pins`` held, the correlation time at most ``tc_max``."""
    best: tuple[ModelParams, float] | None = None
    for start in starts:
        start = problem.complete(start, structure)
        variants = _starts(problem, start, structure, tc_max) if spread else [start]
        for s in variants:
            fit = problem.polish(structure, s, pins, tc_max, _TOLERANCE)
            if best is None or fit[1] < best[1]:
                best = fit
    assert best is not None
    return best


def _edge(
    problem: AllanProblem,
    structure: Structure,
    start: ModelParams,
    index: int,
    direction: float,
    ref_q: float,
    limit: float,
    tc_max: float,
    span: float = _SPAN,
) -> float:
    """How far (log units, signed) the ``index``-th log-parameter of ``structure`` goes from ``start``'s
    before the profiled ``Q`` exceeds ``ref_q + limit``; +-inf when it never does within ``_SPAN``. A
    correlation time stops at the end of its range (there a bias is a white noise or a walk)."""
    theta0 = float(pack(start, structure)[index])
    ranged = False
    if param_names(structure)[index] == "bias_correlation_time":  # its range ends the search
        end = math.log(tc_max) if direction > 0 else math.log(problem.tc_grid[0])
        span, ranged = min(span, abs(end - theta0)), True
    inside, outside, prev = 0.0, None, start
    step = min(_FIRST_STEP, span)
    while step <= span and step > 0:
        # the first point looks for another bump of the bias; the next ones continue from the last
        pins = {index: theta0 + direction * step}
        p, q = best_fit(problem, structure, [prev], tc_max, pins, spread=prev is start)
        if q - ref_q > limit:
            outside = step
            break
        inside, prev = step, p
        step = span if step < span < 2.0 * step else 2.0 * step
    if outside is None:
        return direction * (inside if ranged else math.inf)
    for _ in range(_BISECT):
        mid = (inside + outside) / 2.0
        p, q = best_fit(problem, structure, [prev], tc_max, {index: theta0 + direction * mid}, spread=False)
        if q - ref_q > limit:
            outside = mid
        else:
            inside, prev = mid, p
    return direction * (inside + outside) / 2.0


def drift_se(
    problem: AllanProblem,
    chosen: Structure,
    params: ModelParams,
    q_chosen: float,
    phi: float,
    off_q: dict[str, float],
    tc_max: float,
) -> dict[str, float]:
    """Per drift log-parameter of ``chosen`` (``random_walk_density``, ``bias_instability``,
    ``bias_correlation_time``): the standard error from its profile (module docstring); ``inf`` where the
    interval is unbounded (a variance that may be 0: ``off_q[name]``, the ``Q`` without the term, within
    the limit of ``q_chosen``)."""
    limit = LEVEL * phi
    names = param_names(chosen)
    out = {}
    for name in ("random_walk_density", "bias_instability", "bias_correlation_time"):
        if name not in names:
            continue
        i = names.index(name)
        hi = _edge(problem, chosen, params, i, 1.0, q_chosen, limit, tc_max)
        if name in off_q and off_q[name] - q_chosen <= limit:
            lo = -math.inf
        else:
            lo = _edge(problem, chosen, params, i, -1.0, q_chosen, limit, tc_max)
        half = (hi - lo) / 4.0
        out[name] = half if math.isfinite(half) else math.inf
    return out


def random_walk_bound(
    problem: AllanProblem, chosen: Structure, params: ModelParams, q_chosen: float, phi: float, tc_max: float
) -> float:
    """The largest random walk density the log allows at 95% (one-sided) when the chosen model has none:
    the profile of ``K`` in the chosen model plus a walk, every other term refitted."""
    wide = (chosen[0], True, chosen[2])
    i = param_names(wide).index("random_walk_density")
    # from a walk a hundredth of the one that would make a tenth of the longest tau's variance, upwards
    start = problem.complete(params.replace(random_walk_density=problem.small_rw * 1e-2), wide)
    up = _edge(problem, wide, start, i, 1.0, q_chosen, UPPER_95 * phi, tc_max, span=4 * _SPAN)
    if not math.isfinite(up):
        return math.inf
    return math.exp((float(pack(start, wide)[i]) + up) / 2.0)


@dataclass
class Alternative:
    """A model the log cannot tell apart from the chosen one: a Gauss-Markov bias alone where a random walk
    was chosen, or a random walk alone where a bias was.

    ``params`` is its fit; ``ranges`` the two-standard-error interval of each of its drift terms, from
    their profiles (``inf`` above: the log sets no upper bound); ``score_difference`` its criterion minus
    the chosen model's.
    """

    structure: Structure
    params: ModelParams
    ranges: dict[str, tuple[float, float]]
    score_difference: float

    @property
    def kind(self) -> str:
        return "random walk" if self.structure[1] else "Gauss-Markov bias"


def _ranges(
    problem: AllanProblem, structure: Structure, fit: ModelParams, q: float, phi: float, tc_max: float
) -> dict[str, tuple[float, float]]:
    """Two-standard-error intervals (values, not logs) of the drift terms of ``structure``."""
    names = param_names(structure)
    out = {}
    for name in ("random_walk_density", "bias_instability", "bias_correlation_time"):
        if name not in names:
            continue
        i = names.index(name)
        centre = float(pack(fit, structure)[i])
        lo = centre + _edge(problem, structure, fit, i, -1.0, q, LEVEL * phi, tc_max)
        hi = centre + _edge(problem, structure, fit, i, 1.0, q, LEVEL * phi, tc_max)
        if name == "bias_correlation_time" and hi >= math.log(tc_max) - 1e-6:
            hi = math.inf
        scale = 1.0 if name == "bias_correlation_time" else 0.5  # a variance's log: half for the value
        out[name] = (math.exp(scale * lo), math.exp(scale * hi) if math.isfinite(hi) else math.inf)
    if structure[2] and fit.bias_correlation_time >= 0.99 * tc_max:  # no fall: its size grows with tau_c
        out = {k: (v[0], math.inf) for k, v in out.items()}
    return out


def alternative(
    problem: AllanProblem,
    chosen: Structure,
    params: ModelParams,
    score: dict[Structure, float],
    fits: dict[Structure, tuple[ModelParams, float]],
    phi_full: float,
    penalty: float,
    margin: float,
) -> Alternative | None:
    """The other drift term alone (same filter) where the log cannot tell it from the chosen one: for a
    chosen walk, a bias (correlation times up to ``_SLOW_TC`` longest tau) that scores at least as well;
    for a chosen bias, a walk within ``margin`` of its score."""
    if problem.tc_grid is None or chosen[1] == chosen[2]:
        return None
    if chosen[1]:  # a walk: is it a slow bias?
        alt: Structure = (chosen[0], False, True)
        tc_max = _SLOW_TC * problem.tau_max
        start = params.replace(random_walk_density=0.0, bias_correlation_time=problem.tau_max)
        # the same slope at short tau: sigma_g^2 = K^2 tau_c / 2
        start = start.replace(bias_instability=params.random_walk_density * math.sqrt(problem.tau_max / 2.0))
        fit, q = best_fit(problem, alt, [start, fits[alt][0]], tc_max)
        diff = q / phi_full + penalty * (2 + chosen[0] + 1) - score[chosen]
        if diff > 0.0:
            return None
    else:
        alt = (chosen[0], True, False)
        fit, q = fits[alt]
        tc_max = problem.tc_grid[-1]
        diff = score[alt] - score[chosen]
        if diff > margin:
            return None
    return Alternative(alt, fit, _ranges(problem, alt, fit, q, phi_full, tc_max), diff)
