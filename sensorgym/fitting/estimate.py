"""Fit the closed-form Allan variance of the error model (:mod:`~sensorgym.fitting.model`) to a
log's.

**Which terms.** White noise is always there; the eight models with or without a filter, a random walk and
a Gauss-Markov bias compete by ``Q / phi + 3 k`` (``k`` parameters: a term must lower ``Q`` by 3 per
parameter it adds, where Akaike's criterion asks 2; ``phi`` the misfit ``Q / (n - k)`` of the fullest
model, at least 1; on 80 white logs 4 got a term, against 12 with 2). A term of the chosen model is not
identifiable from this log, and dropped (the rest refitted without it), when its two-standard-error
interval reaches 0 or its relative uncertainty exceeds 50% (a factor ``e`` for a correlation time), when
its bandwidth lies at or past Nyquist, when its correlation time is pinned at the end of its range (``5
T_s`` to two thirds of the longest ``tau``: there a Gauss-Markov bias is a white noise or a random walk),
when a bias is too slow to show its fall (:mod:`~sensorgym.fitting.profile`: beside a walk always, alone
unless it beats the walk by ``_SEPARATE``), or when a random walk shapes the deviation over less than its
last octave (:func:`_range_problem`). A log that rises far above every model without drift keeps its last
drift term, however uncertain. Two models within ``_TIE`` of each other are a tie the criterion cannot
break: the one whose Allan deviation lies inside the log's 95% band at the octave ``tau`` of the
closed-loop check is taken. Where the other drift term alone explains the log about as well (a bias for a
chosen walk that scores at least as well, a walk within ``_SEPARATE`` of a chosen bias), it is the fit's
``alternative``, with its bounds.

**Uncertainties** are the inverse Fisher information of ``Q``, times the misfit of the chosen model (at
least 1: a model that misses the log's shape widens its own errors), and they include the choice of
model: each value's variance adds the Akaike-weighted spread of the same value over the models that have
it and whose terms the log can tell apart (weights ``exp(-score / 2)``). For a drift term a quarter of its
profile-likelihood interval (:func:`~sensorgym.fitting.profile.drift_se`) stands for the Fisher error: the
long-``tau`` estimates are few, and a correlation time's likelihood is far from a parabola. Over 30 seeds
of each of nine published parameter sets (docs/fit.md) the truth lies within two of these standard errors
in 90-98% of the fits, per term.

**Lost samples** enter through the model (:class:`~sensorgym.fitting.model.Gaps`): the Allan deviation is
that of the received samples, ``m`` counts received samples, and the model is that of the received
sequence, from the window's own gaps.

Example:
    >>> import numpy as np
    >>> from sensorgym.fitting.allan import allan_deviation, fit_m
    >>> y = np.random.default_rng(1).normal(0.0, 0.05, 40000)  # white, 100 Hz: N = 0.05 * sqrt(0.01)
    >>> fit = fit_allan(allan_deviation(y, 0.01, fit_m(len(y), len(y) // 5)), 0.01)
    >>> est = fit.estimates["noise_density"]
    >>> bool(abs(est.value / 0.005 - 1) < 3 * est.se / est.value), fit.estimates["random_walk_density"].value
    (True, None)
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from .allan import Allan
from .errors import FitError, require
from .likelihood import AllanProblem, Structure, allan_log_covariance, pack, param_names
from .model import (
    Gaps,
    ModelParams,
    allan_variance,
    gauss_markov_allan_variance,
    random_walk_allan_variance,
    white_allan_variance,
)
from .profile import DECLINE, Alternative, alternative, best_fit, drift_se, random_walk_bound

__all__ = ["TERMS", "Estimate", "NoiseFit", "allan_log_covariance", "fit_allan"]

#: the fitted options, in report order
TERMS = ("noise_density", "bandwidth", "random_walk_density", "bias_instability", "bias_correlation_time")
_MAX_RELATIVE_SE = 0.5
_MAX_LOG_SE_TIME = 1.0  # a correlation time known to within a factor e is still a value
_MIN_POINTS = 3
_PENALTY = 3.0  # per parameter: a term must lower Q by 3 per parameter it adds (Akaike: 2)
_TIE = 2.0  # score difference within which the closed-loop band check may decide
# criterion difference that separates a walk from a slow bias: a true walk's hour-long logs read a bias
# better by up to 7 (1 in 15, issue 33; the Gaussian law of log A overstates a low last point)
_SEPARATE = 10.0


@dataclass
class Estimate:
    """One fitted value: ``value`` with its 1-sigma ``se``, or ``value=None`` and why (``note``).

    ``tau`` is the range of averaging times (s) in which the term shapes the Allan deviation, i.e. the data
    the value came from; ``upper`` a 95% bound where the term is not identifiable but bounded.
    """

    value: float | None
    se: float | None = None
    tau: tuple[float, float] | None = None
    note: str = ""
    upper: float | None = None

    @property
    def identified(self) -> bool:
        return self.value is not None


@dataclass
class NoiseFit:
    """The fit of one channel: the model's parameters (0 where not identified), each estimate, the data."""

    params: ModelParams
    estimates: dict[str, Estimate]
    allan: Allan
    sample_interval: float
    structure: Structure
    dispersion: float
    notes: list[str] = field(default_factory=list)
    gaps: Gaps | None = None
    #: a model the log cannot tell apart from the chosen one (a bias alone for a walk, or the reverse)
    alternative: Alternative | None = None

    def model_adev(self, m: np.ndarray) -> np.ndarray:
        """The fitted model's Allan deviation at ``m`` received samples (the log's gaps)."""
        return np.sqrt(allan_variance(self.params, m, self.sample_interval, self.gaps))


def _tau_range(
    taus: np.ndarray, part: np.ndarray, total: np.ndarray, share: float = 0.25
) -> tuple[float, float] | None:
    where = part >= share * total
    return (float(taus[where].min()), float(taus[where].max())) if where.any() else None


def _fit_all(
    problem: AllanProblem,
    structures: list[Structure],
    previous: dict[Structure, tuple[ModelParams, float]] | None = None,
) -> dict[Structure, tuple[ModelParams, float]]:
    """Every structure, fullest first: each smaller one also starts from the fit of each structure with one
    term more (the grid alone is too coarse for the short tau of a long log), then each larger one from
    the smaller ones where they fit better (a term started small); with ``previous`` (the fits under the
    pilot's weights) each starts from its previous fit instead of the grid."""
    fits: dict[Structure, tuple[ModelParams, float]] = {}

    def nested(small: Structure, big: Structure) -> bool:
        return sum(big) == sum(small) + 1 and all(b or not a for a, b in zip(small, big, strict=True))

    for s in sorted(structures, key=lambda s: -sum(s)):
        starts = ([previous[s][0]] if previous else []) + [fits[p][0] for p in fits if nested(s, p)]
        fits[s] = problem.fit(s, starts, grid=previous is None)
    # and back up: a structure with one term more fits at least as well as the one without it
    for s in sorted(structures, key=sum):
        children = [fits[c] for c in fits if nested(c, s) and fits[c][1] < fits[s][1]]
        if children:
            better = problem.fit(s, [c[0] for c in children], grid=False)
            fits[s] = min(better, fits[s], key=lambda f: f[1])
    return fits


def _k(s: Structure) -> int:
    return 1 + s[0] + s[1] + 2 * s[2]


def fit_allan(
    allan: Allan, sample_interval: float, resolution: float = 0.0, gaps: Gaps | None = None
) -> NoiseFit:
    """Fit noise density, bandwidth, random walk and Gauss-Markov bias to a log's Allan deviation.

    ``resolution`` (from :func:`~sensorgym.fitting.lattice.lattice_step`) enters as known white noise
    ``r^2 / 12``; ``gaps`` are the window's gaps between received samples (``None``: none lost), whose
    Allan deviation ``allan`` is, at ``m`` received samples.
    """
    scipy_opt = require("scipy.optimize", "fit", "fitting the Allan deviation")
    allan = allan.select(np.isfinite(allan.adev) & (allan.adev > 0))
    if len(allan.m) < _MIN_POINTS:
        raise FitError(
            f"the static window holds {allan.n} samples, too few for an Allan deviation at {_MIN_POINTS} "
            "averaging times",
            "give a longer static stretch with --static START:END, or record the sensor at rest for longer",
        )
    if gaps is not None and gaps.lossless:
        gaps = None
    ts = sample_interval
    problem = AllanProblem(allan, ts, resolution, gaps, scipy_opt)
    structures = [
        s for s in itertools.product([False, True], repeat=3) if not (s[2] and problem.tc_grid is None)
    ]
    full = max(structures, key=sum)
    # pilot: the fullest model with each estimate on its own; then the joint law at it, and at the choice
    reference = problem.fit(full)[0]
    fits = None
    for final in (False, True):
        cov, bias = allan_log_covariance(reference, problem.m, problem.n, ts, gaps)
        problem.set_weights(cov, bias, problem.model(reference))
        fits = _fit_all(problem, structures, fits)
        choice = _choose(problem, fits, structures, profiles=final)  # the pilot's choice: weights only
        reference = fits[choice.structure][0]
    return _estimates(choice, allan, ts, problem, fits)


def _range_problem(
    problem: AllanProblem, params: ModelParams, structure: Structure, slow_ok: bool = False
) -> int | None:
    """A term (0 filter, 1 random walk, 2 Gauss-Markov) of ``structure`` whose fitted value lies where the
    log cannot tell it from another term, or None: a cut-off at or past Nyquist, a correlation
    time pinned at the end of its range (a white noise or a random walk there), a bias too slow to show
    its fall (a walk over the log's tau, :mod:`~sensorgym.fitting.profile`; a bias alone may be that slow
    when ``slow_ok``: it beats the walk by more than the margin), a random walk that shapes the deviation
    over less than its last octave."""
    # a cut-off at or past Nyquist correlates neighbouring samples by under e^(-pi) = 4.3%: a white log's
    # scatter makes as much (2 of 40 white logs of 20,000 samples at 100 Hz chose 61 and 65 Hz), and the
    # options refuse it (a first-order filter's cut-off must lie below Nyquist, issue 33 item 15)
    tc = problem.tc_grid
    if structure[0] and params.bandwidth >= 0.5 / problem.ts:
        return 0
    if structure[2]:
        tau_c = params.bias_correlation_time
        if not (1.05 * tc[0] <= tau_c <= 0.95 * tc[-1]):
            return 2
        if tau_c > problem.tau_max / DECLINE and (structure[1] or not slow_ok):
            return 2
    if structure[1]:
        # a random walk rises to the longest tau: one that makes a quarter of the variance over less than
        # the last octave is a bend at the last point or two (a 15 s log's gyro read 0.015 +- 0.006 from
        # 0.9-1.3 s), which a slow drift or the scatter makes as easily. (Not for a Gauss-Markov bump,
        # which is an octave wide by nature: such a rule dropped the benchmark gyro's real one.)
        m, ts, gaps = problem.m, problem.ts, problem.gaps
        part = random_walk_allan_variance(params.random_walk_density, m, ts, gaps)
        span = _tau_range(m, part, allan_variance(params, m, ts, gaps))
        if span is None or span[1] < 2 * span[0]:
            return 1
    return None


@dataclass
class _Choice:
    """The chosen structure with its standard errors (log-parameters), misfit and every structure's
    score; ``slow_ok``: the bias-only structures whose slow bias beats the walk by the margin."""

    structure: Structure
    se_log: dict[str, float]
    dispersion: float
    score: dict[Structure, float]
    phi_full: float
    slow_ok: dict[Structure, bool]


def _choose(
    problem: AllanProblem,
    fits: dict[Structure, tuple[ModelParams, float]],
    structures: list[Structure],
    profiles: bool = True,
) -> _Choice:
    """The structure the criterion prefers among those whose terms the log can pin down, the standard
    errors of its log-parameters (model choice included; the drift terms' from their ``profiles``) and
    the over-dispersion."""
    npts = len(problem.m)
    full = max(structures, key=sum)
    phi_full = max(1.0, fits[full][1] / max(npts - _k(full), 1))
    score = {s: fits[s][1] / phi_full + _PENALTY * _k(s) for s in structures}
    # a bias alone, slower than the log shows, only where it beats the walk by the margin
    slow_ok = {s: s[2] and not s[1] and score[s] + _SEPARATE < score[(s[0], True, False)] for s in structures}
    # the alternatives a value's uncertainty weighs: the structures whose terms all lie where the log
    # can tell them apart (a Gauss-Markov bias pinned at the longest tau is a random walk, not a rival)
    rivals = [s for s in structures if _range_problem(problem, fits[s][0], s, slow_ok[s]) is None]

    cache: dict[Structure, dict[str, float]] = {}

    def se_of(s: Structure, phi: float) -> dict[str, float]:
        if s in cache:
            return cache[s]
        fisher, spread = _total_se(problem, fits, score, s, phi, rivals)
        out = cache[s] = {k: math.hypot(fisher[k], spread[k]) for k in fisher}
        if profiles and (s[1] or s[2]) and _weak_term(s, out) is None:
            # the drift terms' profiles stand for their Fisher errors (a bias beside a walk must show its
            # fall; a bias alone may range to the grid's end)
            tc_max = problem.tau_max / DECLINE if s[1] else problem.tc_grid[-1]
            off = _off_q(problem, fits, s, tc_max)
            drift = drift_se(problem, s, fits[s][0], fits[s][1], phi, off, tc_max)
            out.update({k: math.hypot(v, spread[k]) for k, v in drift.items()})
        return out

    allowed = list(structures)
    while True:
        chosen = min(allowed, key=lambda s: (score[s], _k(s)))
        params = fits[chosen][0]
        dispersion = max(1.0, fits[chosen][1] / max(npts - _k(chosen), 1))
        weak = _range_problem(problem, params, chosen, slow_ok[chosen])
        uncertain = weak is None
        if weak is None:
            se_log = se_of(chosen, dispersion)
            weak = _weak_term(chosen, se_log)
        if weak is None:
            break
        # a term the log cannot pin down is dropped, and the others refitted without it; but a log that
        # rises far above every model without drift keeps its last drift term, uncertain as it is
        remaining = [s for s in allowed if not s[weak]]
        after = min(remaining, key=lambda s: (score[s], _k(s)))
        needed = score[after] - score[chosen] > _SEPARATE
        if uncertain and sum(chosen[1:]) == 1 and not any(after[1:]) and needed:
            break
        allowed = remaining
    if problem.inside(params):
        return _Choice(chosen, se_log, dispersion, score, phi_full, slow_ok)
    # a tie (scores within _TIE) that the criterion cannot break: the structure whose Allan deviation
    # stays inside the log's 95% band at the octave tau of the closed-loop check, if one does
    for s in sorted(rivals, key=lambda s: score[s]):
        if s == chosen or score[s] - score[chosen] >= _TIE or not problem.inside(fits[s][0]):
            continue
        phi = max(1.0, fits[s][1] / max(npts - _k(s), 1))
        se_s = se_of(s, phi)
        if _weak_term(s, se_s) is None:
            return _Choice(s, se_s, phi, score, phi_full, slow_ok)
    return _Choice(chosen, se_log, dispersion, score, phi_full, slow_ok)


def _off_q(
    problem: AllanProblem, fits: dict[Structure, tuple[ModelParams, float]], s: Structure, tc_max: float
) -> dict[str, float]:
    """``Q`` of ``s`` less each of its drift terms (a remaining bias of correlation time at most
    ``tc_max``)."""
    out = {}
    if s[2]:
        out["bias_instability"] = fits[(s[0], s[1], False)][1]
    if s[1]:
        no_walk = (s[0], False, s[2])
        p, q = fits[no_walk]
        if s[2] and p.bias_correlation_time > tc_max:
            q = best_fit(problem, no_walk, [p, fits[s][0]], tc_max)[1]
        out["random_walk_density"] = q
    return out


def _total_se(
    problem: AllanProblem,
    fits: dict[Structure, tuple[ModelParams, float]],
    score: dict[Structure, float],
    chosen: Structure,
    dispersion: float,
    rivals: list[Structure],
) -> tuple[dict[str, float], dict[str, float]]:
    """Per log-parameter of ``chosen``: the Fisher standard error times the over-dispersion, and the
    Akaike-weighted spread of the same parameter over the ``rivals`` that have it (to be added in
    quadrature)."""
    params = fits[chosen][0]
    names = param_names(chosen)
    fisher = np.sqrt(np.maximum(np.diag(problem.covariance(params, chosen)), 0.0) * dispersion)
    pool = set(rivals) | {chosen}
    best = min(score[s] for s in pool)
    weight = {s: math.exp(-(score[s] - best) / 2.0) for s in pool}
    values = {s: dict(zip(param_names(s), pack(fits[s][0], s), strict=True)) for s in pool}
    spread = {}
    for name, own in zip(names, pack(params, chosen), strict=True):
        having = [s for s in pool if name in values[s]]
        total = sum(weight[s] for s in having)
        spread[name] = math.sqrt(sum(weight[s] * (values[s][name] - own) ** 2 for s in having) / total)
    return dict(zip(names, map(float, fisher), strict=True)), spread


def _weak_term(structure: Structure, se_log: dict[str, float]) -> int | None:
    """The index (0 filter, 1 random walk, 2 Gauss-Markov) of a term whose relative uncertainty exceeds
    the limit, or None. Relative errors: a log-parameter's standard error (halved for a variance)."""
    filt, rw, gm = structure
    out = None
    if filt and se_log["bandwidth"] > _MAX_RELATIVE_SE:
        out = 0
    if rw and se_log["random_walk_density"] / 2 > _MAX_RELATIVE_SE:
        out = 1
    if gm and (
        se_log["bias_instability"] / 2 > _MAX_RELATIVE_SE
        or se_log["bias_correlation_time"] > _MAX_LOG_SE_TIME
    ):
        out = 2
    return out


def _relative(se_log: float, value: float, variance: bool) -> float:
    """A standard error of ``value`` from that of its log (of its square for a variance parameter)."""
    return (se_log / 2 if variance else se_log) * value


def _estimates(
    choice: _Choice,
    allan: Allan,
    ts: float,
    problem: AllanProblem,
    fits: dict[Structure, tuple[ModelParams, float]],
) -> NoiseFit:
    structure, se_log = choice.structure, choice.se_log
    params = fits[structure][0]
    filt = structure[0]
    gaps = problem.gaps
    m, taus = problem.m, allan.taus
    total = allan_variance(params, m, ts, gaps)
    est: dict[str, Estimate] = {}
    notes: list[str] = []
    white = white_allan_variance(params.noise_density, 0.0, m, ts, gaps)
    est["noise_density"] = Estimate(
        params.noise_density,
        _relative(se_log["noise_density"], params.noise_density, True),
        _tau_range(taus, white, total),
    )
    if filt:
        unfiltered = params.replace(bandwidth=0.0)
        change = np.abs(allan_variance(unfiltered, m, ts, gaps) - total)
        est["bandwidth"] = Estimate(
            params.bandwidth,
            _relative(se_log["bandwidth"], params.bandwidth, False),
            _tau_range(taus, change, total, 0.05),
        )
    else:
        nyquist = 0.5 / ts
        est["bandwidth"] = Estimate(
            None,
            note="no roll-off at the shortest tau: any filter cuts off near or above Nyquist "
            f"({nyquist:.3g} Hz)",
        )
    est.update(_drift_estimates(choice, params, allan, problem, fits))
    e = est["noise_density"]
    if e.se is not None and e.se > _MAX_RELATIVE_SE * params.noise_density:
        est["noise_density"] = Estimate(
            None, tau=e.tau, note=f"the log constrains it only to ±{100 * e.se / max(e.value, 1e-300):.0f}%"
        )
    if not est["noise_density"].identified or est["noise_density"].value == 0:
        notes.append(
            "the white noise is hidden under the quantization: the noise density is not identifiable"
        )
    kept = {k: getattr(params, k) if est[k].identified else 0.0 for k in TERMS}
    final = ModelParams(**kept, resolution=params.resolution)
    if params.resolution > 0 and params.noise_density > 0:
        a_f = math.exp(-2 * math.pi * params.bandwidth * ts) if params.bandwidth else 0.0
        spread = params.noise_density / math.sqrt(ts) * math.sqrt((1 - a_f) / (1 + a_f))
        if spread < params.resolution / 2:
            notes.append(
                f"the noise ({spread:.3g}) is below half a quantization step ({params.resolution:.3g}): "
                "rounding is "
                "not white there, and the fit's split between noise and quantization is rough"
            )
    other = alternative(problem, structure, params, choice.score, fits, choice.phi_full, _PENALTY, _SEPARATE)
    return NoiseFit(final, est, allan, ts, structure, choice.dispersion, notes, gaps, other)


def _drift_estimates(
    choice: _Choice,
    params: ModelParams,
    allan: Allan,
    problem: AllanProblem,
    fits: dict[Structure, tuple[ModelParams, float]],
) -> dict[str, Estimate]:
    """The random walk's and the Gauss-Markov bias's estimates, or why the log cannot give them."""
    structure, se_log = choice.structure, choice.se_log
    filt, rw, gm = structure
    m, taus, ts, gaps = problem.m, allan.taus, problem.ts, problem.gaps
    total = allan_variance(params, m, ts, gaps)
    edge = f"the longest tau here is {taus.max():.3g} s"
    # does the log rise above its white noise (and filter, rounding) at the longest tau?
    flat = allan_variance(params.replace(random_walk_density=0.0, bias_instability=0.0), m, ts, gaps)
    rises = bool(allan.lo[-1] ** 2 > flat[-1])
    est: dict[str, Estimate] = {}
    if rw:
        part = random_walk_allan_variance(params.random_walk_density, m, ts, gaps)
        est["random_walk_density"] = Estimate(
            params.random_walk_density,
            _relative(se_log["random_walk_density"], params.random_walk_density, True),
            _tau_range(taus, part, total),
        )
    else:
        tc_max = problem.tc_grid[-1] if gm else problem.ts
        upper = random_walk_bound(problem, structure, params, fits[structure][1], choice.dispersion, tc_max)
        tc = params.bias_correlation_time
        if gm and rises:
            why = f"the rise at long tau is the Gauss-Markov bias's (tau_c {tc:.3g} s): a random walk beside "
            why += f"it is too small to tell apart ({edge})"
        elif rises:
            why = (
                "the log rises only at its last tau or two, which a walk, a slow drift or chance make alike "
            )
            why += f"({edge})"
        else:
            why = "no rise above the white noise at the longest tau: the log is too short to show a random "
            why += f"walk ({edge})"
        est["random_walk_density"] = Estimate(None, note=why, upper=upper if math.isfinite(upper) else None)
    if gm:
        part = gauss_markov_allan_variance(params.bias_instability, params.bias_correlation_time, m, ts, gaps)
        span = _tau_range(taus, part, total)
        est["bias_instability"] = Estimate(
            params.bias_instability,
            _relative(se_log["bias_instability"], params.bias_instability, True),
            span,
        )
        est["bias_correlation_time"] = Estimate(
            params.bias_correlation_time,
            _relative(se_log["bias_correlation_time"], params.bias_correlation_time, False),
            span,
        )
    else:
        why = f"no flattening of the deviation between white noise and random walk ({edge})"
        with_gm = [s for s in fits if s[2] and s[0] == filt and s[1] == rw]
        if with_gm and choice.score[with_gm[0]] < choice.score[structure]:
            why = (
                "the log shows a bias instability, but its size and correlation time cannot be told apart "
                f"from the random walk and the white noise ({edge})"
            )
        est["bias_instability"] = Estimate(None, note=why)
        est["bias_correlation_time"] = Estimate(None, note=why)
    return est
