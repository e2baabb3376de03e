"""The likelihood of a log's Allan variance under the error model, and the fit of one model structure
to it (:class:`AllanProblem`); :mod:`~sensorgym.fitting.estimate` chooses among the structures.

**The likelihood.** The Allan variance estimates ``A_i`` at the half-octave ``m_i`` are far from
independent: neighbours share most of their data (a correlation of 0.8 to 0.9 for every noise of the
model), so a fit that treats them as independent counts the same information several times and reports
errors several times too small. Here their joint law is computed from the model itself: the overlapping
estimator at ``m`` is a filter of the samples whose squared gain is ``|H_m(f)|^2 = 2 sin^4(pi f m) /
(m^2 sin^2(pi f))``, so for a Gaussian sequence of spectrum ``S`` (:func:`~sensorgym.fitting.model.psd`)

    ``Cov(A_i, A_j) = 2 / N_ij * integral over [-1/2, 1/2] of |H_i|^2 |H_j|^2 S^2 df``,

``N_ij = n - 2 max(m_i, m_j) + 1`` differences (the variance of a mean of squares of a stationary
Gaussian sequence; the integral on a fixed stratified grid of frequencies). On 200 simulated logs of
each kind (white, filtered, random walk, Gauss-Markov, quantized, 30% lost in bursts) the variances it
gives are within 15% of the logs' own scatter and the neighbours' correlations within 0.05; its diagonal
agrees with Greenhall's degrees of freedom. The fit maximizes the Gaussian likelihood of ``log A`` with
that covariance (log-chi-square variance ``psi'(nu / 2)`` and its bias ``psi(nu / 2) - log(nu / 2)`` for
the few degrees of freedom of the longest ``tau``), plus an independent ``MODEL_ERROR`` per estimate:
``Q = r' C^-1 r``, ``r = log A - bias - log M(theta)``. The covariance is evaluated at a pilot fit and
again at the chosen model.

**The parameters.** ``M`` is linear in ``N^2``, ``K^2`` and ``sigma_g^2`` once the bandwidth ``f_c`` and
the correlation time ``tau_c`` are fixed: those come from non-negative least squares on the whitened
(``C^-1/2``) residuals over a grid of ``f_c`` and ``tau_c``, and the best cell is polished by
Levenberg-Marquardt over all parameters (from the grid and from the fits of the neighbouring structures).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .allan import Allan
from .errors import require
from .model import (
    Gaps,
    ModelParams,
    allan_variance,
    gauss_markov_allan_variance,
    psd,
    quantization_allan_variance,
    random_walk_allan_variance,
    white_allan_variance,
)

__all__ = [
    "AllanProblem",
    "Structure",
    "allan_log_covariance",
    "levenberg_marquardt",
    "pack",
    "param_names",
    "unpack",
]

GRID = 16
MODEL_ERROR = 0.0005  # relative error of each estimate on top of its sampling error (the closed form's)
NUGGET = 0.1  # and a tenth of its own sampling variance, independent of its neighbours'
_STRATA, _PER_STRATUM = 1500, 4  # the frequency grid of the covariance integral

Structure = tuple[bool, bool, bool]  # filter, random walk, Gauss-Markov


# -- the covariance of the Allan variance estimates ---------------------------------------------------
def _frequency_grid(m_max: float) -> tuple[np.ndarray, np.ndarray]:
    """Points and weights of the integral over ``(0, 1/2]``: log-spaced strata, a few points drawn in each
    (a fixed seed: the same grid every time), so that the fast oscillation of ``|H_m|^2`` at large ``m``
    averages out instead of aliasing."""
    rng = np.random.default_rng(0)
    low = 1e-3 / max(m_max, 1.0)
    edges = np.geomspace(low, 0.5, _STRATA + 1)
    width = np.diff(edges)
    f = edges[:-1, None] + rng.random((_STRATA, _PER_STRATUM)) * width[:, None]
    w = np.repeat(width[:, None] / _PER_STRATUM, _PER_STRATUM, axis=1)
    return np.concatenate([[low / 2], f.ravel()]), np.concatenate([[low], w.ravel()])


def allan_log_covariance(
    params: ModelParams, m: np.ndarray, n: int, sample_interval: float, gaps: Gaps | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The covariance of ``log A`` over the averaging factors ``m`` of ``n`` received samples of the model
    ``params``, and the bias ``E[log A] - log AVAR`` of each (module docstring)."""
    special = require("scipy.special", "fit", "fitting the Allan deviation")
    m = np.asarray(m, dtype=np.float64)
    f, w = _frequency_grid(float(m.max()))
    spectrum = psd(params, f, sample_interval, gaps)
    sin_f = np.sin(np.pi * f) ** 2
    rows = 2.0 * np.sin(np.pi * np.outer(m, f)) ** 4 / (m[:, None] ** 2 * sin_f) * spectrum
    avar = 2.0 * rows @ w
    weighted = rows * np.sqrt(w)
    gram = np.einsum("ik,jk->ij", weighted, weighted)  # numpy's own loop: no BLAS threads to wait for
    count = np.sqrt(np.maximum(n - 2.0 * m + 1.0, 1.0))  # differences per estimate (kept positive definite)
    cov = 4.0 * gram / np.outer(count, count)
    rel = cov / np.outer(avar, avar)
    nu = np.maximum(2.0 / np.diag(rel), 1.0)
    # few degrees of freedom: log chi-square's own variance psi'(nu/2) instead of 2 / nu
    scale = np.sqrt(special.polygamma(1, nu / 2.0) * nu / 2.0)
    rel = rel * np.outer(scale, scale)
    rel = rel + np.diag(MODEL_ERROR**2 + NUGGET * np.diag(rel))
    bias = special.digamma(nu / 2.0) - np.log(nu / 2.0)
    return rel, bias


# -- the model's pieces ---------------------------------------------------------------------------------
def unpack(theta: np.ndarray, structure: Structure, resolution: float) -> ModelParams:
    filt, rw, gm = structure
    it = iter(np.exp(np.clip(theta, -700.0, 700.0)))
    n2 = next(it)
    fc = next(it) if filt else 0.0
    k2 = next(it) if rw else 0.0
    s2, tc = (next(it), next(it)) if gm else (0.0, 0.0)
    return ModelParams(math.sqrt(n2), fc, math.sqrt(k2), math.sqrt(s2), tc, resolution)


def pack(p: ModelParams, structure: Structure) -> np.ndarray:
    filt, rw, gm = structure
    vals = [p.noise_density**2]
    vals += [p.bandwidth] if filt else []
    vals += [p.random_walk_density**2] if rw else []
    vals += [p.bias_instability**2, p.bias_correlation_time] if gm else []
    return np.log(np.maximum(vals, 1e-300))


def param_names(structure: Structure) -> list[str]:
    """The log-parameters of a structure, in :func:`pack` order (variances for the first three)."""
    filt, rw, gm = structure
    out = ["noise_density"] + (["bandwidth"] if filt else []) + (["random_walk_density"] if rw else [])
    return out + (["bias_instability", "bias_correlation_time"] if gm else [])


class AllanProblem:
    """One channel's data and the likelihood's weights."""

    def __init__(self, allan: Allan, ts: float, resolution: float, gaps: Gaps | None, scipy_opt) -> None:
        self.m, self.a = allan.m.astype(np.float64), allan.avar
        self.lo, self.hi = allan.lo, allan.hi
        self.octave = (allan.m >= 2) & ((allan.m & (allan.m - 1)) == 0)
        self.n, self.ts, self.resolution, self.gaps = allan.n, ts, resolution, gaps
        self.nnls = scipy_opt.nnls
        self.fixed = (
            quantization_allan_variance(resolution, self.m) if resolution > 0 else np.zeros(len(self.m))
        )
        tau_max = float(self.m.max()) * ts * (gaps.mean if gaps is not None else 1.0)
        self.fc_grid = np.geomspace(0.002, 1.0, GRID) / ts  # a = 0.975 .. 0.002 (past Nyquist: no filter)
        tc_lo, tc_hi = 5 * ts, tau_max / 1.5
        self.tau_max = tau_max
        self.tc_grid = np.geomspace(tc_lo, tc_hi, GRID) if tc_hi > 2 * tc_lo else None
        # the grid's columns, once: white noise through each filter, the random walk, each Gauss-Markov
        self.white_cols = {None: white_allan_variance(1.0, 0.0, self.m, ts, gaps)}
        self.white_cols.update({fc: white_allan_variance(1.0, fc, self.m, ts, gaps) for fc in self.fc_grid})
        self.rw_col = random_walk_allan_variance(1.0, self.m, ts, gaps)
        self.gm_cols = {}
        if self.tc_grid is not None:
            self.gm_cols = {tc: gauss_markov_allan_variance(1.0, tc, self.m, ts, gaps) for tc in self.tc_grid}
        # a drift term started from "off": a tenth of the longest tau's variance (log space cannot move 0)
        self.small_rw = math.sqrt(0.1 * self.a[-1] / self.rw_col[-1])
        self.small_gm = math.sqrt(0.1 * self.a[-1])
        # the pilot's weights: each estimate on its own (Greenhall's dof), linearized at the data
        nu = 2.0 / (2.0 / np.maximum(allan.edf, 1.0) + MODEL_ERROR**2)
        self.set_weights(np.diag(2.0 / nu), np.zeros(len(self.m)), self.a)

    def inside(self, p: ModelParams) -> bool:
        """Whether the model's Allan deviation lies inside the log's 95% band at the octave ``m`` (2, 4,
        8, ...) of the closed-loop check."""
        adev = np.sqrt(self.model(p)[self.octave])
        return bool(np.all((adev >= self.lo[self.octave]) & (adev <= self.hi[self.octave])))

    def set_weights(self, cov: np.ndarray, bias: np.ndarray, level: np.ndarray) -> None:
        root = np.linalg.cholesky((cov + cov.T) / 2.0)  # cov = R R^T
        self.white = np.linalg.inv(root)  # Q = |R^-1 r|^2
        self.inv = self.white.T @ self.white
        self.y = np.log(self.a) - bias
        self.level = level

    def model(self, p: ModelParams) -> np.ndarray:
        return allan_variance(p, self.m, self.ts, self.gaps)

    def q(self, p: ModelParams) -> float:
        with np.errstate(all="ignore"):  # the optimizer may try absurd values on its way
            r = self.white @ (self.y - np.log(np.maximum(self.model(p), 1e-300)))
            out = float(r @ r)
        return out if math.isfinite(out) else 1e300

    def fit(
        self, structure: Structure, starts: Sequence[ModelParams] = (), grid: bool = True
    ) -> tuple[ModelParams, float]:
        """The best parameters of ``structure`` and their ``Q``: the best cell of the grid (``grid``), and
        each of ``starts`` (another structure's fit, its extra terms off), polished."""
        filt, rw, gm = structure
        if gm and self.tc_grid is None:
            raise ValueError("no correlation-time range")
        ts, res = self.ts, self.resolution
        whiten = self.white / self.level[None, :]  # R^-1 diag(1 / M0): the linearized log residual
        target = whiten @ (np.exp(self.y) - self.fixed)
        best: tuple[float, ModelParams] | None = None
        cells = itertools.product(self.fc_grid if filt else [None], self.tc_grid if gm else [None])
        for fc, tc in cells if grid or not starts else []:
            cols = [self.white_cols[fc]] + ([self.rw_col] if rw else []) + ([self.gm_cols[tc]] if gm else [])
            basis = np.stack(cols, axis=1)
            coef, _ = self.nnls(whiten @ basis, target)
            coef[0] = max(coef[0], float(self.a.min() * ts) * 1e-6)
            with np.errstate(all="ignore"):
                r = self.white @ (self.y - np.log(np.maximum(basis @ coef + self.fixed, 1e-300)))
            q = float(r @ r)
            if best is None or q < best[0]:
                c = iter(coef)
                n2 = next(c)
                k2 = next(c) if rw else 0.0
                s2 = next(c) if gm else 0.0
                p = ModelParams(math.sqrt(n2), fc or 0.0, math.sqrt(k2), math.sqrt(s2), tc or 0.0, res)
                best = (self.q(p), p)
        if best is None:  # no grid: the starts, as they are
            best = min(((self.q(self.complete(p, structure)), self.complete(p, structure)) for p in starts),
                       key=lambda b: b[0])  # fmt: skip
            starts = [best[1], *starts]
        out = best
        for start in [best[1], *starts[:3]] if grid else starts[:4]:
            # a term that is off cannot be polished in log space: start it small instead (or where the
            # grid puts the bandwidth and correlation time)
            polished, q = self.polish(structure, self.complete(start, structure, best[1]))
            if q < out[0]:
                out = (q, polished)
        return out[1], out[0]

    def polish(
        self,
        structure: Structure,
        start: ModelParams,
        pins: dict[int, float] | None = None,
        tc_max: float | None = None,
        tolerance: float = 1e-4,
    ) -> tuple[ModelParams, float]:
        """Levenberg-Marquardt from ``start`` (every term of ``structure`` on), the log-parameters of
        ``pins`` (index in :func:`pack` order: value) held fixed, the correlation time at most ``tc_max``
        (default: the end of the grid), until a step gains less than ``tolerance`` in ``Q``."""
        filt, rw, gm = structure
        lower = [-np.inf] + ([math.log(self.fc_grid[0])] if filt else []) + ([-np.inf] if rw else [])
        upper = [np.inf] + ([math.log(self.fc_grid[-1])] if filt else []) + ([np.inf] if rw else [])
        if gm:
            lower += [-np.inf, math.log(self.tc_grid[0])]
            upper += [np.inf, math.log(tc_max if tc_max is not None else self.tc_grid[-1])]
        lower_a, upper_a = np.array(lower), np.array(upper)
        for i, value in (pins or {}).items():
            lower_a[i] = upper_a[i] = value
        res = self.resolution

        def residual(theta: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                model = np.maximum(self.model(unpack(theta, structure, res)), 1e-300)
                r = self.white @ (self.y - np.log(model))
            return r if np.all(np.isfinite(r)) else np.full(len(r), 1e150)

        theta = levenberg_marquardt(residual, pack(start, structure), lower_a, upper_a, tolerance=tolerance)
        polished = unpack(theta, structure, res)
        return polished, self.q(polished)

    def complete(self, p: ModelParams, structure: Structure, fill: ModelParams | None = None) -> ModelParams:
        """``p`` with every term of ``structure`` on: a term that is off cannot be polished in log space,
        so it starts small (or where ``fill`` has it: the grid's bandwidth and correlation time)."""
        filt, rw, gm = structure
        fill = fill or p
        fc = p.bandwidth or fill.bandwidth or math.sqrt(self.fc_grid[0] * self.fc_grid[-1])
        tc = p.bias_correlation_time or fill.bias_correlation_time
        if gm and not tc:
            tc = math.sqrt(self.tc_grid[0] * self.tc_grid[-1])
        return p.replace(
            noise_density=p.noise_density or fill.noise_density or math.sqrt(float(self.a[0]) * self.ts),
            bandwidth=fc if filt else 0.0,
            random_walk_density=(p.random_walk_density or self.small_rw) if rw else 0.0,
            bias_instability=(p.bias_instability or self.small_gm) if gm else 0.0,
            bias_correlation_time=tc if gm else 0.0,
            resolution=self.resolution,
        )

    def gradient(self, p: ModelParams, structure: Structure) -> np.ndarray:
        """``d log M / d theta`` (columns: the log-parameters of :func:`pack`)."""
        theta = pack(p, structure)
        base = np.log(self.model(p))
        cols = []
        for i in range(len(theta)):
            t = theta.copy()
            t[i] += 1e-5
            cols.append((np.log(self.model(unpack(t, structure, p.resolution))) - base) / 1e-5)
        return np.stack(cols, axis=1)

    def covariance(self, p: ModelParams, structure: Structure) -> np.ndarray:
        """Inverse Fisher information of the log-parameters."""
        g = self.gradient(p, structure)
        return np.linalg.pinv(g.T @ self.inv @ g)


def levenberg_marquardt(
    residual,
    theta: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    iterations: int = 60,
    tolerance: float = 1e-4,
) -> np.ndarray:
    """Minimize ``|residual(theta)|^2`` within the box ``[lower, upper]`` (Levenberg-Marquardt with a
    forward-difference Jacobian, each step projected into the box). Written out rather than
    ``scipy.optimize.least_squares`` or L-BFGS-B: on a shared machine their BLAS calls wait on threads
    for a problem of a few parameters (15 times slower, measured)."""
    theta = np.clip(theta, lower, upper)
    r = residual(theta)
    cost = float(r @ r)
    damping = 1e-3
    for _ in range(iterations):
        jac = np.empty((len(r), len(theta)))
        for i in range(len(theta)):
            t = theta.copy()
            t[i] += 1e-6
            jac[:, i] = (residual(t) - r) / 1e-6
        grad, hess = jac.T @ r, jac.T @ jac
        scale = np.diag(hess) + 1e-12
        while True:
            try:
                step = np.linalg.solve(hess + damping * np.diag(scale), -grad)
            except np.linalg.LinAlgError:
                step = -grad / scale
            new = np.clip(theta + step, lower, upper)
            r_new = residual(new)
            c_new = float(r_new @ r_new)
            if c_new < cost:
                break
            damping *= 4.0
            if damping > 1e10:
                return theta
        gain = cost - c_new
        theta, r, cost = new, r_new, c_new
        damping = max(damping / 3.0, 1e-12)
        if gain < tolerance:  # Q is a chi-square: a ten-thousandth changes nothing
            break
    return theta
