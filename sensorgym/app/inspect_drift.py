"""What a sensor's slow error terms, the bias random walk (``random_walk``, ``random_walk_density``) and the
Gauss-Markov bias (``bias_instability``, ``bias_correlation_time``), do to ``sensorgym inspect``'s bias and
drift estimates, and the bias-instability row.

Both terms are added before the filter and the constant bias (docs/error_model.md) and both restart at every
episode reset: the walk ``w`` from 0 (``w_e = sum_{i<=e} s_i``, ``s_i ~ N(0, r^2)`` per control step, ``e``
the step in the episode), the Gauss-Markov bias from its stationary law (``g_0 ~ N(0, sigma_g^2)``,
``g_e = phi g_{e-1} + sigma_g sqrt(1 - phi^2) eta_e``, ``phi = exp(-dt / tau_c)``). ``inspect``'s bias is the
median residual of the first quarter of the samples and its drift the last quarter's median minus it: both
move with ``d = w + g`` at the steps the samples were taken. For any weights ``c_k`` on the samples (taken at
episode steps ``e_k``), the linear statistic ``S = sum_k c_k d_{e_k}`` is Gaussian with, per episode and with
``C_e`` the weight summed over the samples taken at step ``e``,

    Var_w(S) = r^2 sum_{i>=1} T_i^2,                  T_i = sum_{e>=i} C_e                (each step's s_i
                                                                                          moves every later
                                                                                          sample),
    Var_g(S) = sigma_g^2 [B_0^2 + (1 - phi^2) sum_{i>=1} B_i^2],   B_i = sum_{e>=i} C_e phi^(e - i),

episodes being independent (:func:`walk_variance`). For the mean of ``N`` consecutive samples of a stationary
Gauss-Markov bias (``c_k = 1/N``, ``T = N dt``) this is, as ``dt -> 0``, the classical
``sigma_g^2 2 tau_c / T (1 - tau_c / T (1 - exp(-T / tau_c)))`` (the variance of the time average of an
exponentially correlated process, e.g. Papoulis, *Probability, Random Variables and Stochastic Processes*,
on time averages, with ``R(t) = sigma_g^2 exp(-|t| / tau_c)``); for the walk it is ``r^2 (N + 1)(2N + 1) /
(6 N)``. The medians follow the means within a few percent (20,000 simulated windows of a walk plus white
noise: 1-4% more spread), so :data:`MEDIAN_ALLOWANCE` widens the standard deviations by 5%.

The same terms leak into the filter regression's scatter (:func:`~sensorgym.app.inspect_fits.regress_filter`):
a constant intercept leaves ``(1 - a^m) (d - mean d)`` in the residual, which read a random walk of
0.05 unit/s/sqrt(Hz) as 12% more noise density. With a drift term configured that regression takes one
intercept per block of :data:`DRIFT_BLOCK` consecutive samples instead (``blocks``), which leaves about
``(1 - a^m)^2 r_s^2 B / 6`` of it (``r_s`` the walk per sample): 0.6% of the density there.

Example:
    >>> import numpy as np
    >>> steps = np.arange(1, 101)                                 # one episode, a sample every step
    >>> weights = np.full(100, 0.01)                              # the mean of the 100 samples
    >>> round(walk_variance(weights, steps, np.zeros(100, int), walk=0.1, sigma_g=0.0, phi=0.0), 3)
    0.338
    >>> round(0.1**2 * 101 * 201 / 600, 3)
    0.338
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .inspect_options import as_number as _number
from .inspect_options import option_component as _component

__all__ = [
    "DRIFT_BLOCK",
    "MEDIAN_ALLOWANCE",
    "drift_terms",
    "gm_mean_variance",
    "offset_variances",
    "step_wander",
    "walk_variance",
    "within_block_variance",
]

#: samples per intercept of the filter regression where a drift term is configured
DRIFT_BLOCK = 8
#: how much more a window's median of a wandering residual spreads than its mean (simulated: 1-4%)
MEDIAN_ALLOWANCE = 1.05


def drift_terms(options: Any, component: int, dt: float) -> dict[str, Any] | None:
    """The slow terms of one component at control step ``dt``: ``walk``, the walk's std per control step
    (``random_walk`` or ``random_walk_density * sqrt(dt)``), ``sigma_g``, ``tau_c`` and ``phi = exp(-dt /
    tau_c)`` of the Gauss-Markov bias; ``None`` where one of them is drawn per episode.

    Example:
        >>> import sensorgym as sg
        >>> o = sg.StateSensorOptions(key="x", random_walk_density=0.05, bias_instability=0.1,
        ...                           bias_correlation_time=5.0)
        >>> t = drift_terms(o, 0, 0.05)
        >>> round(t["walk"], 5), t["sigma_g"], round(t["phi"], 5)
        (0.01118, 0.1, 0.99005)
    """
    values = {
        name: _component(getattr(options, name, None), component)
        for name in ("random_walk", "random_walk_density", "bias_instability", "bias_correlation_time")
    }
    numbers = {name: (0.0 if v is None else _number(v)) for name, v in values.items()}
    if any(v is None for v in numbers.values()):
        return None
    walk = numbers["random_walk"] + numbers["random_walk_density"] * math.sqrt(dt)
    sigma_g, tau = numbers["bias_instability"], numbers["bias_correlation_time"]
    phi = math.exp(-dt / tau) if sigma_g > 0 and tau > 0 else 0.0
    return {"walk": walk, "sigma_g": sigma_g if tau > 0 else 0.0, "tau_c": tau, "phi": phi}


def walk_variance(
    weights: np.ndarray,
    episode_step: np.ndarray,
    episode: np.ndarray,
    walk: float,
    sigma_g: float,
    phi: float,
) -> float:
    """``Var(sum_k weights_k d_k)`` of the walk (std ``walk`` per step) plus the Gauss-Markov bias
    (``sigma_g``, ``phi``) at samples taken at ``episode_step`` of episode ``episode`` (module docstring)."""
    from scipy.signal import lfilter

    weights = np.asarray(weights, float)
    episode_step, episode = np.asarray(episode_step, int), np.asarray(episode, int)
    total = 0.0
    for e in np.unique(episode):
        mine = episode == e
        c = np.bincount(episode_step[mine], weights=weights[mine])  # C_e per episode step
        if walk > 0.0:
            tails = np.cumsum(c[::-1])[::-1]  # T_i = sum_{e >= i} C_e
            total += walk**2 * float(np.sum(tails[1:] ** 2))
        if sigma_g > 0.0:
            b = lfilter([1.0], [1.0, -phi], c[::-1])[::-1]  # B_i = C_i + phi B_{i+1}
            total += sigma_g**2 * (float(b[0]) ** 2 + (1.0 - phi * phi) * float(np.sum(b[1:] ** 2)))
    return total


def gm_mean_variance(sigma_g: float, tau_c: float, duration: float) -> float:
    """The variance of the time average over ``duration`` of a stationary Gauss-Markov process (the
    continuous limit :func:`walk_variance` approaches).

    Example:
        >>> dt, n = 0.001, 5000                                   # 5 s of a 1 s process, 1 ms steps
        >>> exact = walk_variance(np.full(n, 1 / n), np.arange(n), np.zeros(n, int), 0.0, 1.0,
        ...                       math.exp(-dt / 1.0))
        >>> round(exact, 4), round(gm_mean_variance(1.0, 1.0, n * dt), 4)
        (0.3205, 0.3205)
    """
    x = duration / tau_c
    return sigma_g**2 * 2.0 / x * (1.0 - (1.0 - math.exp(-x)) / x)


def step_wander(terms: dict[str, Any] | None, gap: float = 1.0) -> float:
    """The variance of the slow terms' change between two samples ``gap`` control steps apart (what the
    step-to-step noise estimate sees of them): ``gap r^2`` of the walk plus ``2 sigma_g^2 (1 - phi^gap)``
    of the Gauss-Markov bias.

    Example:
        >>> round(step_wander({"walk": 0.01, "sigma_g": 0.1, "phi": 0.99}, gap=2), 6)
        0.000598
    """
    if terms is None:
        return 0.0
    gap = gap if math.isfinite(gap) and gap >= 1.0 else 1.0
    return gap * terms["walk"] ** 2 + 2.0 * terms["sigma_g"] ** 2 * (1.0 - terms["phi"] ** gap)


def within_block_variance(
    members: tuple[np.ndarray, np.ndarray], drift_at: tuple[np.ndarray, np.ndarray], terms: dict[str, Any]
) -> float:
    """``E sum_blocks sum_k (d_k - mean_block d)^2``: what the slow terms leave in a regression with one
    intercept per block (:func:`~sensorgym.app.inspect_fits.regress_filter`), for the samples ``members``
    (their indices and blocks; a block lies in one episode) taken at the episode steps ``drift_at[0]``.
    Per block of ``n`` samples at episode steps ``e_i``: ``sum_i Var d_i - n Var(mean d)``, with ``Cov(d_i,
    d_j) = r^2 min(e_i, e_j) + sigma_g^2 phi^|e_i - e_j|``.

    Example:
        >>> members = (np.arange(1, 9), np.zeros(8, int))          # 8 samples in one block, steps 1..8
        >>> at = (np.arange(0, 9), np.zeros(9, int))
        >>> round(within_block_variance(members, at, {"walk": 1.0, "sigma_g": 0.0, "phi": 0.0}), 3)
        10.5
    """
    index, groups = (np.asarray(a) for a in members)
    steps = np.asarray(drift_at[0], float)[index]
    walk, sigma_g, phi = terms["walk"], terms["sigma_g"], terms["phi"]
    total = 0.0
    for g in np.unique(groups):
        e = steps[groups == g]
        if e.size < 2:
            continue
        cov = walk**2 * np.minimum.outer(e, e)
        if sigma_g > 0:
            cov = cov + sigma_g**2 * phi ** np.abs(np.subtract.outer(e, e))
        total += float(np.trace(cov) - cov.sum() / e.size)
    return total


def offset_variances(est: dict[str, Any], terms: dict[str, Any] | None) -> tuple[float, float] | None:
    """The variances the slow terms ``terms`` (:func:`drift_terms`) add to ``est``'s bias (the first
    window's median) and drift (the last window's minus the first's), from the samples' episode steps
    and episodes (``est["drift_at"]``) and the window (``est["window"]``); ``None`` without them."""
    at = est.get("drift_at")
    if terms is None or at is None or not (terms["walk"] > 0 or terms["sigma_g"] > 0):
        return None
    steps, episodes = (np.asarray(a, int) for a in at)
    n, window = steps.size, int(est.get("window", max(3, steps.size // 4)))
    if n == 0:
        return None
    first, last = np.zeros(n), np.zeros(n)
    first[: min(window, n)] = 1.0 / min(window, n)
    last[max(n - window, 0) :] = 1.0 / min(window, n)
    args = (steps, episodes, terms["walk"], terms["sigma_g"], terms["phi"])
    allowance = MEDIAN_ALLOWANCE**2
    return allowance * walk_variance(first, *args), allowance * walk_variance(last - first, *args)


def _g(x: float) -> str:
    return f"{x:.3g}"


def bias_drift_rows(
    options: Any,
    component: int,
    est: dict[str, Any],
    dt: float,
    z: float,
    bias: float | None,
    walk: float | None,
    resolution: float | None,
) -> tuple[dict[str, tuple[str, str, str]], list[str]]:
    """The bias and drift rows of one channel: the configured ``bias`` against the first window's median
    residual, the drift (the last window's minus it) against what the walk (``walk`` per step, ``None``:
    drawn per episode) and the Gauss-Markov bias make of it (:func:`offset_variances`; without them, no
    drift beyond the medians' own error). Both standard errors carry the slow terms' wander."""
    rows: dict[str, tuple[str, str, str]] = {}
    notes: list[str] = []
    terms = drift_terms(options, component, dt)
    drawn = terms is None or walk is None
    added = None if drawn else offset_variances(est, terms)
    n = int(est.get("samples", 0))
    q = resolution
    est_b, se_b = float(est["bias"]), float(est.get("bias_se", 0.0))
    est_r, se_r = float(est["drift_end"]), float(est.get("drift_se", 0.0))
    if added is not None:
        wander_b, spread = math.sqrt(added[0]), math.sqrt(added[1])
    else:  # no slow term, or one drawn per episode (the old rule: a walk from the start of one episode)
        wander_b, spread = 0.0, (walk * math.sqrt(0.75 * max(n, 1)) if walk else 0.0)
    gm = terms is not None and terms["sigma_g"] > 0
    total_b = math.hypot(se_b, wander_b)
    if bias is not None and not (drawn and gm):
        tol = z * total_b + (q / 2 if q else 0.0) + 1e-9
        rows["bias"] = (
            _g(bias),
            f"{_g(est_b)} ± {_g(total_b)}",
            "ok" if abs(est_b - bias) <= tol else "differs",
        )
    else:
        rows["bias"] = ("randomized", f"{_g(est_b)} ± {_g(total_b)}", "this episode's value")
    if wander_b:
        what = " and ".join(t for t, on in (("the random walk", walk), ("the Gauss-Markov bias", gm)) if on)
        notes.append(
            f"the bias is the median residual of the first quarter of the samples: {what} "
            f"{'move' if ' and ' in what else 'moves'} it by ±{_g(wander_b)} (1 sd, in its ±; "
            f"inspect_drift.py derives it), the noise by ±{_g(se_b)}"
        )
    if walk is None or (terms is None and gm):
        rows["drift at end"] = ("randomized", f"{_g(est_r)} ± {_g(se_r)}", "this episode's value")
        return rows, notes
    parts = [f"rw {_g(walk)}/step"] if walk else []
    if gm:
        parts.append(f"GM {_g(terms['sigma_g'])} (τ_c {_g(terms['tau_c'])} s)")
    conf = (", ".join(parts) + f": ±{_g(spread)}") if parts else "none"
    tol = z * math.sqrt(spread**2 + se_r**2) + 1e-9
    if abs(est_r) <= tol:
        verdict = "ok" if parts else f"ok: within ±{_g(tol)}, i.e. no drift"
    else:
        verdict = "larger than expected"
    rows["drift at end"] = (conf, f"{_g(est_r)} ± {_g(se_r)}", verdict)
    if parts:
        notes.append(
            f"{' and '.join(parts)} move the offset by about ±{_g(spread)} (1 sd) between the first and the "
            "last quarter of this trace (both restart at every episode reset)"
        )
    elif est_r != 0.0:
        notes.append(
            f"no random walk is configured: the drift estimate {_g(est_r)} is the difference of two "
            f"noisy medians (±{_g(se_r)}), "
            + ("within its uncertainty" if abs(est_r) <= tol else "so the residual changes along the trace")
        )
    return rows, notes
