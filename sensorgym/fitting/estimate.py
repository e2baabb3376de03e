"""Fit the closed-form Allan variance of the error model (:mod:`~sensorgym.fitting.model`) to a
log's.

Each Allan variance estimate ``A_i`` at ``m_i`` is, for the noise a sensor has, the model's variance
``M_i`` times ``chi^2_nu / nu`` with ``nu_i`` Greenhall's degrees of freedom, so the fit maximizes that
likelihood, ``-log L = sum_i nu_i / 2 (A_i / M_i + log M_i)`` (whose estimating equation is unbiased,
unlike a least-squares fit of ``log A``). The model is linear in ``N^2``, ``K^2`` and ``sigma_g^2`` once
the bandwidth ``f_c`` and the correlation time ``tau_c`` are fixed: those three come from a non-negative
iteratively reweighted least squares (the same likelihood), over a grid of ``f_c`` and ``tau_c``; the best
cell is polished by ``scipy.optimize.minimize`` over all parameters.

Which terms the log shows is a choice between the eight models with or without a filter, a random walk
and a Gauss-Markov bias (white noise is always there): the smallest ``D / phi + 2 k`` (deviance ``D``
scaled by the over-dispersion ``phi`` of the fullest model, ``k`` parameters; Akaike's criterion, with the
rules below dropping terms the log cannot pin down: on 30 white-noise logs of 20,000 samples it added a
random walk to 3, the rate a criterion weighing a parameter 2 has, and no other term). A term
left out is "not identifiable from this log", with the largest value the log allows where one can be
said. Each estimate's relative error is taken as at least ``_MODEL_ERROR`` (1%): the closed form is no
more exact than that (rounding as white noise, lost samples breaking the filter's correlation), and the
shortest ``tau`` of a long log would otherwise weigh as if it were. Uncertainties are the inverse Fisher
information, scaled by ``phi`` and by 2 because neighbouring half-octave estimates share most of their
data (a check over seeds: the spread of the estimates matches them). A term whose relative
uncertainty exceeds 50%, a drift that shapes the deviation over less than an octave of ``tau``, or a
bandwidth more than a tenth past Nyquist (``1.1 / (2 T_s)``; the search reaches ``1 / T_s`` so that
a cut-off near Nyquist is inside it) or a correlation time pinned at the end of its range (``5 T_s`` to
two thirds of the longest ``tau``) is dropped and the rest refitted without it: it is not identifiable
from this log.

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
from .model import (
    ModelParams,
    allan_variance,
    gauss_markov_allan_variance,
    quantization_allan_variance,
    random_walk_allan_variance,
    white_allan_variance,
)

__all__ = ["TERMS", "Estimate", "NoiseFit", "fit_allan"]

#: the fitted options, in report order
TERMS = ("noise_density", "bandwidth", "random_walk_density", "bias_instability", "bias_correlation_time")
_GRID = 20
_MAX_RELATIVE_SE = 0.5
_CORRELATION_INFLATION = 2.0  # half-octave neighbours share data: count each octave's information once
_MIN_POINTS = 3
_PENALTY = 2.0  # per parameter: Akaike's; the uncertainty and octave rules below guard against overfitting
_POLISH_MARGIN = 50.0  # deviance: far beyond what polishing gains or the criterion weighs
_MODEL_ERROR = 0.01  # relative error of the closed form, as a floor on each estimate's own error


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
    structure: tuple[bool, bool, bool]  # filter, random walk, Gauss-Markov
    dispersion: float
    notes: list[str] = field(default_factory=list)

    def model_adev(self, m: np.ndarray) -> np.ndarray:
        return np.sqrt(allan_variance(self.params, m, self.sample_interval))


# -- the linear part: N^2, K^2, sigma_g^2 by non-negative IRLS -----------------------------------------
def _basis(m: np.ndarray, ts: float, fc: float | None, rw: bool, tc: float | None) -> np.ndarray:
    cols = [white_allan_variance(1.0, fc or 0.0, m, ts)]
    if rw:
        cols.append(random_walk_allan_variance(1.0, m, ts))
    if tc is not None:
        cols.append(gauss_markov_allan_variance(1.0, tc, m, ts))
    return np.stack(cols, axis=1)


def _deviance(a: np.ndarray, model: np.ndarray, nu: np.ndarray) -> float:
    ratio = a / model
    return float(np.sum(nu * (ratio - 1.0 - np.log(ratio))))


def _irls(
    basis: np.ndarray, a: np.ndarray, nu: np.ndarray, fixed: np.ndarray, nnls
) -> tuple[np.ndarray, float]:
    """Non-negative coefficients of ``basis`` maximizing the chi-square likelihood of ``a``, and the
    deviance."""
    model = a.copy()
    coef = np.zeros(basis.shape[1])
    floor = 1e-12 * a.max()
    for _ in range(8):
        w = np.sqrt(nu / 2.0) / model
        coef, _ = nnls(basis * w[:, None], (a - fixed) * w)
        model = np.maximum(basis @ coef + fixed, floor)
    return coef, _deviance(a, model, nu)


# -- the fit ------------------------------------------------------------------------------------------------
def _unpack(theta: np.ndarray, structure: tuple[bool, bool, bool], resolution: float) -> ModelParams:
    filt, rw, gm = structure
    it = iter(np.exp(np.clip(theta, -700.0, 700.0)))
    n2 = next(it)
    fc = next(it) if filt else 0.0
    k2 = next(it) if rw else 0.0
    s2, tc = (next(it), next(it)) if gm else (0.0, 0.0)
    return ModelParams(math.sqrt(n2), fc, math.sqrt(k2), math.sqrt(s2), tc, resolution)


def _pack(p: ModelParams, structure: tuple[bool, bool, bool]) -> np.ndarray:
    filt, rw, gm = structure
    vals = [p.noise_density**2]
    vals += [p.bandwidth] if filt else []
    vals += [p.random_walk_density**2] if rw else []
    vals += [p.bias_instability**2, p.bias_correlation_time] if gm else []
    return np.log(np.maximum(vals, 1e-300))


def _fit_structure(
    structure: tuple[bool, bool, bool],
    m: np.ndarray,
    a: np.ndarray,
    nu: np.ndarray,
    ts: float,
    resolution: float,
    fc_grid: np.ndarray,
    tc_grid: np.ndarray,
    scipy_opt,
    nnls,
    polish_below: float = math.inf,
) -> tuple[ModelParams, float]:
    filt, rw, gm = structure
    fixed = quantization_allan_variance(resolution, m) if resolution > 0 else np.zeros(len(m))
    best: tuple[float, ModelParams] | None = None
    for fc, tc in itertools.product(fc_grid if filt else [None], tc_grid if gm else [None]):
        coef, dev = _irls(_basis(m, ts, fc, rw, tc), a, nu, fixed, nnls)
        if best is None or dev < best[0]:
            c = iter(coef)
            n2 = next(c)
            k2 = next(c) if rw else 0.0
            s2 = next(c) if gm else 0.0
            best = (
                dev,
                ModelParams(math.sqrt(n2), fc or 0.0, math.sqrt(k2), math.sqrt(s2), tc or 0.0, resolution),
            )
    if (
        best[0] > polish_below
    ):  # far behind the fullest structure's grid cell: polishing cannot change the choice
        return best[1], best[0]
    start = best[1]
    # a term the grid drove to zero cannot be polished in log space: start it small instead
    tiny = {
        k: v
        for k, v in (
            ("noise_density", math.sqrt(a.min() * ts) * 1e-3),
            ("random_walk_density", 1e-12),
            ("bias_instability", 1e-12),
        )
        if getattr(start, k) == 0
    }
    start = start.replace(**tiny)
    bounds = [(None, None)]
    bounds += [(math.log(fc_grid[0]), math.log(fc_grid[-1]))] if filt else []
    bounds += [(None, None)] if rw else []
    bounds += [(None, None), (math.log(tc_grid[0]), math.log(tc_grid[-1]))] if gm else []

    def objective(theta: np.ndarray) -> float:
        with np.errstate(all="ignore"):  # the optimizer may try absurd values on its way
            model = allan_variance(_unpack(theta, structure, resolution), m, ts)
            dev = _deviance(a, np.maximum(model, 1e-300), nu)
        return dev if math.isfinite(dev) else 1e300

    res = scipy_opt.minimize(objective, _pack(start, structure), method="L-BFGS-B", bounds=bounds)
    polished = _unpack(res.x, structure, resolution)
    dev = objective(res.x)
    return (polished, dev) if dev <= best[0] else (best[1], best[0])


def _covariance(
    p: ModelParams, structure: tuple[bool, bool, bool], m: np.ndarray, nu: np.ndarray, ts: float
) -> np.ndarray:
    """Inverse Fisher information of the log-parameters (before any inflation)."""
    theta = _pack(p, structure)
    base = np.log(allan_variance(p, m, ts))
    grads = []
    for i in range(len(theta)):
        step = 1e-5
        t = theta.copy()
        t[i] += step
        grads.append((np.log(allan_variance(_unpack(t, structure, p.resolution), m, ts)) - base) / step)
    g = np.stack(grads, axis=1)
    info = (g * (nu / 2.0)[:, None]).T @ g
    return np.linalg.pinv(info)


def _tau_range(
    taus: np.ndarray, part: np.ndarray, total: np.ndarray, share: float = 0.25
) -> tuple[float, float] | None:
    where = part >= share * total
    return (float(taus[where].min()), float(taus[where].max())) if where.any() else None


def fit_allan(allan: Allan, sample_interval: float, resolution: float = 0.0) -> NoiseFit:
    """Fit noise density, bandwidth, random walk and Gauss-Markov bias to a log's Allan deviation.

    ``resolution`` (from :func:`~sensorgym.fitting.lattice.lattice_step`) enters as known white noise
    ``r^2 / 12``.
    """
    scipy_opt = require("scipy.optimize", "fit", "fitting the Allan deviation")
    nnls = scipy_opt.nnls
    allan = allan.select(np.isfinite(allan.adev) & (allan.adev > 0))
    m, a = allan.m.astype(np.float64), allan.avar
    # the model is exact only to about a percent (white rounding, the filter left off the drift, lost
    # samples breaking the filter's correlation): no estimate is trusted beyond that
    nu = 2.0 / (2.0 / np.maximum(allan.edf, 1.0) + _MODEL_ERROR**2)
    if len(m) < _MIN_POINTS:
        raise FitError(
            f"the static window holds {allan.n} samples, too few for an Allan deviation at {_MIN_POINTS} "
            "averaging times",
            "give a longer static stretch with --static START:END, or record the sensor at rest for longer",
        )
    ts = sample_interval
    tau_max = m.max() * ts
    fc_grid = np.geomspace(0.002, 1.0, _GRID) / ts  # a = 0.975 .. 0.002 (past Nyquist: next to no filter)
    tc_lo, tc_hi = 5 * ts, tau_max / 1.5
    tc_grid = np.geomspace(tc_lo, tc_hi, _GRID) if tc_hi > 2 * tc_lo else None
    structures = [s for s in itertools.product([False, True], repeat=3) if not (s[2] and tc_grid is None)]
    # the fullest structure first: its deviance bounds how good the others can get; one more than
    # _POLISH_MARGIN behind it on the grid is not polished (a parameter weighs 2 on the criterion)
    full = max(structures, key=sum)
    fits = {full: _fit_structure(full, m, a, nu, ts, resolution, fc_grid, tc_grid, scipy_opt, nnls)}
    for s in structures:
        if s != full:
            limit = fits[full][1] + _POLISH_MARGIN
            fits[s] = _fit_structure(s, m, a, nu, ts, resolution, fc_grid, tc_grid, scipy_opt, nnls, limit)
    k_of = {s: 1 + s[0] + s[1] + 2 * s[2] for s in structures}
    pearson = float(np.sum(nu / 2.0 * (a / allan_variance(fits[full][0], m, ts) - 1.0) ** 2))
    dispersion = max(1.0, pearson / max(len(m) - k_of[full], 1))
    score = {s: fits[s][1] / dispersion + _PENALTY * k_of[s] for s in structures}
    allowed = list(structures)
    while True:
        chosen = min(allowed, key=lambda s: (score[s], k_of[s]))
        params = fits[chosen][0]
        cov = _covariance(params, chosen, m, nu, ts) * dispersion * _CORRELATION_INFLATION
        se_log = np.sqrt(np.maximum(np.diag(cov), 0.0))
        weak = _weak_terms(chosen, se_log)
        if weak is None:
            weak = _narrow_drift(params, chosen, m, ts)
        if weak is None:  # a value pinned at the end of its range is a bound, not an estimate
            # a cut-off a tenth past Nyquist correlates neighbouring samples by under e^(-1.1 pi) = 3%:
            # a white log's scatter makes as much (5 of 31 white logs chose 62-73 Hz at 100 Hz without
            # this rule); the real x-io accelerometer's 46 and 50 Hz at 99 Hz (Nyquist 49.6) stay
            if chosen[0] and params.bandwidth > 0.55 / ts:
                weak = 0
            elif chosen[2] and not (1.05 * tc_grid[0] <= params.bias_correlation_time <= 0.95 * tc_grid[-1]):
                weak = 2
        if weak is None:
            break
        # a term the log barely constrains is dropped, and the others refitted without it
        allowed = [s for s in allowed if not s[weak]]
    return _estimates(params, chosen, se_log, allan, ts, m, dispersion)


def _narrow_drift(
    params: ModelParams, structure: tuple[bool, bool, bool], m: np.ndarray, ts: float
) -> int | None:
    """A drift term (1 random walk, 2 Gauss-Markov) that shapes the Allan variance (a quarter of it or
    more) over less than an octave of tau: a bend at the last point or two, which the log's scatter
    makes as easily; or None."""
    taus, total = m * ts, allan_variance(params, m, ts)
    parts = {
        1: random_walk_allan_variance(params.random_walk_density, m, ts),
        2: gauss_markov_allan_variance(params.bias_instability, params.bias_correlation_time, m, ts),
    }
    for index, part in parts.items():
        if structure[index]:
            span = _tau_range(taus, part, total)
            if span is None or span[1] < 2 * span[0]:
                return index
    return None


def _weak_terms(structure: tuple[bool, bool, bool], se_log: np.ndarray) -> int | None:
    """The index (0 filter, 1 random walk, 2 Gauss-Markov) of a term whose relative uncertainty exceeds
    the limit, or None. Relative errors: a log-parameter's standard error (halved for a variance)."""
    filt, rw, gm = structure
    i = 1
    out = None
    if filt:
        if se_log[i] > _MAX_RELATIVE_SE:
            out = 0
        i += 1
    if rw:
        if se_log[i] / 2 > _MAX_RELATIVE_SE:
            out = 1
        i += 1
    if gm and (se_log[i] / 2 > _MAX_RELATIVE_SE or se_log[i + 1] > _MAX_RELATIVE_SE):
        out = 2
    return out


def _estimates(
    params: ModelParams,
    structure: tuple[bool, bool, bool],
    se_log: np.ndarray,
    allan: Allan,
    ts: float,
    m: np.ndarray,
    dispersion: float,
) -> NoiseFit:
    filt, rw, gm = structure
    taus = m * ts
    total = allan_variance(params, m, ts)
    se = iter(se_log)
    est: dict[str, Estimate] = {}
    notes: list[str] = []
    # noise density: a variance parameter, so its own relative error is half that of N^2
    white = white_allan_variance(params.noise_density, 0.0, m, ts)
    rel = next(se) / 2
    est["noise_density"] = Estimate(
        params.noise_density, rel * params.noise_density, _tau_range(taus, white, total)
    )
    if filt:
        rel_fc = next(se)
        unfiltered = params.replace(bandwidth=0.0)
        change = np.abs(allan_variance(unfiltered, m, ts) - total)
        est["bandwidth"] = Estimate(
            params.bandwidth, rel_fc * params.bandwidth, _tau_range(taus, change, total, 0.05)
        )
    else:
        nyquist = 0.5 / ts
        est["bandwidth"] = Estimate(
            None,
            note="no roll-off at the shortest tau: any filter cuts off near or above Nyquist "
            f"({nyquist:.3g} Hz)",
        )
    edge = f"the longest tau here is {taus.max():.3g} s"
    if rw:
        rel_k = next(se) / 2
        part = random_walk_allan_variance(params.random_walk_density, m, ts)
        est["random_walk_density"] = Estimate(
            params.random_walk_density, rel_k * params.random_walk_density, _tau_range(taus, part, total)
        )
    else:
        # the largest K whose random walk stays below the log's upper band at every tau
        upper = math.sqrt(float(np.min(allan.hi**2 / random_walk_allan_variance(1.0, m, ts))))
        est["random_walk_density"] = Estimate(
            None,
            note=f"no rise at the longest tau: the log is too short to show a random walk ({edge})",
            upper=upper,
        )
    if gm:
        rel_s, rel_t = next(se) / 2, next(se)
        part = gauss_markov_allan_variance(params.bias_instability, params.bias_correlation_time, m, ts)
        rng = _tau_range(taus, part, total)
        est["bias_instability"] = Estimate(params.bias_instability, rel_s * params.bias_instability, rng)
        est["bias_correlation_time"] = Estimate(
            params.bias_correlation_time, rel_t * params.bias_correlation_time, rng
        )
    else:
        why = f"no flattening of the deviation between white noise and random walk ({edge})"
        est["bias_instability"] = Estimate(None, note=why)
        est["bias_correlation_time"] = Estimate(None, note=why)
    if (
        est["noise_density"].se is not None
        and est["noise_density"].se > _MAX_RELATIVE_SE * params.noise_density
    ):
        e = est["noise_density"]
        est["noise_density"] = Estimate(
            None, tau=e.tau, note=f"the log constrains it only to ±{100 * e.se / max(e.value, 1e-300):.0f}%"
        )
    if not est["noise_density"].identified or est["noise_density"].value == 0:
        notes.append(
            "the white noise is hidden under the quantization: the noise density is not identifiable"
        )
    final = ModelParams(
        noise_density=params.noise_density if est["noise_density"].identified else 0.0,
        bandwidth=params.bandwidth if est["bandwidth"].identified else 0.0,
        random_walk_density=params.random_walk_density if est["random_walk_density"].identified else 0.0,
        bias_instability=params.bias_instability if est["bias_instability"].identified else 0.0,
        bias_correlation_time=params.bias_correlation_time
        if est["bias_correlation_time"].identified
        else 0.0,
        resolution=params.resolution,
    )
    if params.resolution > 0 and params.noise_density > 0:
        a_f = math.exp(-2 * math.pi * params.bandwidth * ts) if params.bandwidth else 0.0
        spread = params.noise_density / math.sqrt(ts) * math.sqrt((1 - a_f) / (1 + a_f))
        if spread < params.resolution / 2:
            notes.append(
                f"the noise ({spread:.3g}) is below half a quantization step ({params.resolution:.3g}): "
                "rounding is "
                "not white there, and the fit's split between noise and quantization is rough"
            )
    return NoiseFit(final, est, allan, ts, structure, dispersion, notes)
