"""``inspect``'s table: each quantity of one channel as configured beside its estimate, with a verdict
(:func:`compare_channel`), and the threshold that verdict uses (:func:`verdict_z`).

Example:
    >>> round(verdict_z(1), 2)
    1.96
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .inspect_drift import bias_drift_rows, drift_terms, step_wander
from .inspect_error_model import error_model_rows, loss_fraction_ok, skips_samples
from .inspect_options import as_number as _number
from .inspect_options import option_component as _component
from .inspect_replay import replay_rows

__all__ = ["compare_channel", "verdict_z"]


def verdict_z(comparisons: int, alpha: float = 0.05) -> float:
    """How many standard errors an estimate may lie from its configured value before ``inspect`` calls it
    "differs": the two-sided normal quantile that keeps the chance of any false alarm among
    ``comparisons`` checks of a correct config at ``alpha`` (Bonferroni). A fixed 2 standard errors gave a
    5% false alarm per check, so a table of 15 checks of a correct config showed "differs" about half the
    time (a correct bias was called off at 2.3 sigma).

    Example:
        >>> round(verdict_z(1), 2), round(verdict_z(15), 2), round(verdict_z(40), 2)
        (1.96, 2.94, 3.23)
    """
    from scipy.stats import norm

    return float(norm.isf(alpha / (2 * max(1, comparisons))))


def _g(x: float) -> str:
    return f"{x:.3g}"


def _density_terms(options: Any, component: int, dt: float) -> dict[str, Any] | None:
    """The per-step noise and random-walk std that ``noise_density``, ``bandwidth`` and
    ``random_walk_density`` (the units ``sensorgym fit`` writes) give one component at control step ``dt``,
    as :func:`estimate_channel` sees them, and ``filter``: the share of a white noise of std ``sigma`` per
    own sample (from ``noise`` or from ``noise_density``) that the configured ``bandwidth`` leaves in that
    estimate; ``None`` where one of them (or ``update_period``) is drawn per episode.

    The noise is ``sigma = N / sqrt(T_s)`` per sample; through the low-pass filter ``a = exp(-2 pi f_c
    T_s)`` (docs/error_model.md: the filter takes the white noise of either option) the reading's spread
    is ``sigma sqrt((1 - a) / (1 + a))`` and consecutive reads, ``m`` samples apart, share a fraction
    ``a^m`` of it, so their difference (what the estimate is made of) shows ``sqrt(1 - a^m)`` of it. The
    walk is ``K sqrt(dt)`` per step.

    Example:
        >>> import sensorgym as sg
        >>> opts = sg.StateSensorOptions(key="obs", noise_density=0.01, update_period=0.01)
        >>> round(_density_terms(opts, 0, dt=0.05)["noise"], 6)  # 0.01 / sqrt(0.01)
        0.1
        >>> opts = sg.StateSensorOptions(key="obs", noise=0.2, bandwidth=3.0)  # a = 0.390 at T_s = 0.05 s
        >>> round(0.2 * _density_terms(opts, 0, dt=0.05)["filter"], 4)
        0.1035
    """
    values = [
        _number(_component(getattr(options, name, 0.0), component))
        for name in ("noise_density", "bandwidth", "random_walk_density")
    ]
    period = _number(getattr(options, "update_period", 0.0))
    if any(v is None for v in values) or period is None:
        return None
    density, bandwidth, walk_density = values
    ts = period if period > 0 else dt
    noise = density / math.sqrt(ts)
    note = ""
    if density:
        note = f"noise_density {_g(density)} at T_s = {_g(ts)} s is a noise of {_g(noise)} per sample"
    spread = share = 1.0
    if bandwidth:
        a = math.exp(-2.0 * math.pi * bandwidth * ts)
        m = max(dt / ts, 1.0)
        spread = math.sqrt((1 - a) / (1 + a))
        share = spread * math.sqrt(1 - a**m)
    if density and bandwidth:
        noise *= share
        note += f"; the {_g(bandwidth)} Hz filter leaves {_g(noise)} in the step-to-step difference of reads"
    walk = walk_density * math.sqrt(dt)
    if walk:
        note += ("; " if note else "") + f"random_walk_density {_g(walk_density)} drifts {_g(walk)} per step"
    return {
        "noise": noise,
        "walk": walk,
        "note": note,
        "filter": share,
        "spread": spread,
        "bandwidth": bandwidth,
    }


def compare_channel(
    options: Any,
    component: int,
    est: dict[str, Any],
    dt: float,
    gt: np.ndarray | None = None,
    z: float | None = None,
    replay_wraps: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Configured vs estimated for one channel: per quantity the configured text, the estimate text, a
    verdict (``"ok"`` or why it differs), and plain-language notes on estimates that cannot match.

    A statistical verdict says "differs" only when the estimate lies more than ``z`` standard errors
    from the configured value (:func:`verdict_z` of the number of checks in the whole table; default:
    this channel's checks alone). For a sensor with its own rate or lost samples (``est`` from
    :func:`estimate_sampled`) it also compares the update period and the dropout. A replayed component
    (option ``replay``) compares its noise, bias and drift with what its recording shows and says how many
    episodes wrapped around the recording's end (``replay_wraps``: ``(wrapped, episodes)``).

    Example:
        >>> import sensorgym as sg
        >>> opts = sg.StateSensorOptions(key="obs", noise=0.02, resolution=0.02)
        >>> est = {"delay_steps": 0, "noise_std": 0.021, "noise_se": 0.002, "bias": 0.0, "bias_se": 0.003,
        ...        "drift_end": 0.001, "drift_se": 0.004, "quantization": 0.02, "samples": 200}
        >>> c = compare_channel(opts, 0, est, dt=0.05)
        >>> c["rows"]["noise std"]
        ('0.02', '0.021 ± 0.002', 'ok')
        >>> any("quantization" in n for n in c["notes"])
        True
    """
    n = int(est.get("samples", 0))
    sampled = "period_steps" in est
    z = verdict_z(5 if sampled else 3) if z is None else float(z)
    rows: dict[str, tuple[str, str, str]] = {}
    notes: list[str] = []
    c = _configured(options, component, dt, notes)
    _delay_row(rows, notes, c, est, dt, gt)
    _noise_row(rows, notes, c, options, component, est, dt, z)
    # bias and drift: the first quarter's median residual, and the last quarter's minus it, with what the
    # random walk and the Gauss-Markov bias make of them (inspect_drift.py)
    drift_rows, drift_notes = bias_drift_rows(options, component, est, dt, z, c.bias, c.walk, c.q)
    replayed = replay_rows(options, component, est, dt, z, replay_wraps)
    rows.update(drift_rows)
    notes += drift_notes if replayed is None else []  # a replay: the recording's drift (its notes below)
    rows["quantization"] = _quantization_row(c.q, float(est["quantization"]))
    _rate_rows(rows, notes, options, est, dt, z, sampled)
    model_rows, model_notes = error_model_rows(options, component, est, dt, z)
    rows.update(model_rows)
    notes += model_notes
    if replayed is not None:  # the recording stands where the noise and the drift terms stand
        rows.update(replayed[0])
        notes += replayed[1]
    if n and n < 100:
        notes.append(
            f"short trace ({n} samples): every estimate is rough (see the ± values); record more with "
            "--steps 500"
        )
    return {"rows": rows, "notes": notes}


@dataclass
class _Expected:
    """One channel's configured values as numbers (None: drawn per episode) and what the estimates
    should show of them: ``sigma`` the noise in the step-to-step difference of reads (with a noise
    density and through a filter), ``written`` the noise the table shows as configured, ``walk`` the
    random walk per step (with its density)."""

    sigma: float | None
    written: float | None
    bias: float | None
    walk: float | None
    q: float | None
    delay: float | None
    jitter: float | None


def _configured(options: Any, component: int, dt: float, notes: list[str]) -> _Expected:
    """The configured values of one channel (:class:`_Expected`), and the notes on how they combine: what
    is drawn per episode, a noise or walk density, a noise behind a filter."""
    delay, jitter = getattr(options, "delay", 0.0), getattr(options, "jitter", 0.0)
    noise = _component(getattr(options, "noise", None), component)
    bias = _component(getattr(options, "bias", None), component)
    walk = _component(getattr(options, "random_walk", None), component)
    res = _component(getattr(options, "resolution", None), component)
    randomized = [
        name
        for name, v in (
            ("delay", delay),
            ("jitter", jitter),
            ("noise", noise),
            ("bias", bias),
            ("random walk", walk),
            ("resolution", res),
        )
        if v is not None and _number(v) is None
    ]
    if randomized:
        notes.append(
            f"{', '.join(randomized)} {'is' if len(randomized) == 1 else 'are'} drawn per episode from a "
            "distribution: the estimate is this episode's value, not the configured range"
        )
    sigma, b, rw, q = (_number(v) for v in (noise, bias, walk, res))
    density = _density_terms(options, component, dt)
    if density is None:  # a density term or the sample interval is drawn per episode
        sigma = rw = None
        notes.append("the error-model densities are drawn per episode: the estimate is this episode's value")
    elif density["note"]:
        sigma = math.sqrt((sigma or 0.0) ** 2 + density["noise"] ** 2) if sigma is not None else None
        rw = math.sqrt((rw or 0.0) ** 2 + density["walk"] ** 2) if rw is not None else None
        notes.append(density["note"])
    # a per-step noise behind a bandwidth: the filter takes it as it takes a noise density's
    # (docs/error_model.md); compared unfiltered, a correct noise 0.2 behind a 3 Hz filter at dt 0.05 was
    # "0.104, differs"
    written, per_step = sigma, _number(noise) if noise is not None else None
    if density is not None and density["filter"] < 1.0 and sigma is not None and per_step:
        filtered = per_step * density["filter"]
        sigma = math.sqrt(max(sigma**2 - per_step**2, 0.0) + filtered**2)
        notes.append(
            f"noise {_g(per_step)} per sample behind the {_g(density['bandwidth'])} Hz filter: the "
            f"reading's noise has std {_g(per_step * density['spread'])} (noise·√((1 − a)/(1 + a))), "
            f"and the step-to-step difference of reads, which the estimate is made of, shows {_g(filtered)} "
            f"of it (expected ≈ {_g(filtered)})"
        )
    return _Expected(sigma, written, b, rw, q, _number(delay), _number(jitter))


def _delay_row(
    rows: dict[str, tuple[str, str, str]],
    notes: list[str],
    c: _Expected,
    est: dict[str, Any],
    dt: float,
    gt: np.ndarray | None,
) -> None:
    """The delay row: D steps, plus 0..ceil(jitter/dt) steps of jitter."""
    est_d = int(est["delay_steps"])
    d_s, j_s = c.delay, c.jitter
    if d_s is None or j_s is None or dt <= 0:
        rows["delay"] = ("randomized", f"{est_d} steps", "this episode's value")
        return
    base = round(d_s / dt)
    extra = math.ceil(j_s / dt - 1e-9) if j_s > 0 else 0
    text = f"{base} step{'s' * (base != 1)}" + (f" (+0..{extra} jitter)" if extra else "")
    ok = base <= est_d <= base + extra
    got = f"{est_d} step{'s' * (est_d != 1)}"
    rows["delay"] = (text, got, "ok" if ok else f"differs (expected {base}..{base + extra})")
    if extra and "delay_age_steps" in est:  # each reading matched with the GT at its sample's step
        notes.append(
            f"jitter re-reads samples up to {extra} step{'s' * (extra != 1)} older, so the delay "
            f"estimate lies in {base}..{base + extra}; each reading is compared with the ground truth "
            "at the step its sample was taken (its age), so the jitter does not inflate the noise "
            "estimate"
        )
    elif extra and gt is not None and len(gt) > 2:
        move = float(np.median(np.abs(np.diff(gt))))
        notes.append(
            f"jitter re-reads samples up to {extra} step{'s' * (extra != 1)} older, so the delay "
            "estimate lies in "
            f"{base}..{base + extra} and the residual also carries the signal's change per step "
            f"(median {_g(move)} here), which inflates the noise estimate"
        )


def _noise_row(
    rows: dict[str, tuple[str, str, str]],
    notes: list[str],
    c: _Expected,
    options: Any,
    component: int,
    est: dict[str, Any],
    dt: float,
    z: float,
) -> None:
    """The noise row: the estimator sees noise, quantization error and the random walk's steps."""
    est_n, se_n = float(est["noise_std"]), float(est.get("noise_se", 0.0))
    sigma, rw, q = c.sigma, c.walk, c.q
    if sigma is None:
        rows["noise std"] = ("randomized", f"{_g(est_n)} ± {_g(se_n)}", "this episode's value")
        return
    # the walk's and the Gauss-Markov bias's change between consecutive samples (inspect_drift.py)
    slow = drift_terms(options, component, dt)
    wander = step_wander(slow, float(est.get("period_steps", 1.0))) if slow else (rw or 0.0) ** 2
    expected = math.sqrt(sigma**2 + (q**2 / 12 if q else 0.0) + wander / 2)
    tol = max(z * se_n, 0.1 * expected, 1e-6)
    if abs(est_n - expected) <= tol:
        verdict = "ok"
    elif est_n > expected and c.jitter and "delay_age_steps" not in est:
        verdict = f"higher: jitter (expected ≈ {_g(expected)} without it)"
    else:
        verdict = f"differs (expected ≈ {_g(expected)})"
    rows["noise std"] = (_g(c.written), f"{_g(est_n)} ± {_g(se_n)}", verdict)
    if q:
        notes.append(
            f"quantization (step {_g(q)}) adds up to q/√12 = {_g(q / math.sqrt(12))} of rounding error "
            f"to the noise estimate (expected ≈ √(noise² + q²/12) = {_g(expected)})"
            + (
                f"; noise under half a step ({_g(q / 2)}) is partly hidden by the rounding"
                if sigma < q / 2
                else ""
            )
        )
    if rw:
        notes.append(f"the random walk's steps (std {_g(rw)}) add rw/√2 = {_g(rw / math.sqrt(2))} too")


def _quantization_row(q: float | None, est_q: float) -> tuple[str, str, str]:
    """The quantization row: the configured step beside the grid step of the measured values."""
    if q is None:
        return ("randomized", _g(est_q) if est_q else "none", "this episode's value")
    conf = _g(q) if q else "none"
    got = _g(est_q) if est_q else "none"
    ratio = est_q / q if q else 0.0
    ok = (not q and not est_q) or bool(q and est_q and round(ratio) >= 1 and abs(ratio - round(ratio)) < 1e-3)
    verdict = "ok" if ok else ("not detected (too few distinct values)" if q else "differs")
    if ok and q and round(ratio) > 1:
        verdict = "ok (a multiple: the trace used every other step)"
    return (conf, got, verdict)


def _rate_rows(
    rows: dict[str, tuple[str, str, str]],
    notes: list[str],
    options: Any,
    est: dict[str, Any],
    dt: float,
    z: float,
    sampled: bool,
) -> None:
    """The update period and dropout rows of a sensor compared sample by sample (``sampled``), or the
    note on what a sampler's hold does to the estimates of one compared step by step."""
    period, dropout = getattr(options, "update_period", 0.0), getattr(options, "dropout", 0.0)
    p_hi = period.bounds[1] if hasattr(period, "bounds") else float(period or 0.0)
    d_hi = dropout.bounds[1] if hasattr(dropout, "bounds") else float(dropout or 0.0)
    if sampled:
        burst = getattr(options, "dropout_burst", None)
        _sampler_rows(rows, notes, period, dropout, burst, est, dt, z, skips=skips_samples(options))
    elif p_hi > dt or d_hi > 0:
        notes.append(
            "the sampler holds each sample until the next one (update_period, dropout): the reading lags the "
            "ground truth by up to a period, which the delay and noise estimates include; the sampler figure "
            "shows the samples taken, those lost and the reading's age"
        )


def _sampler_rows(
    rows: dict[str, tuple[str, str, str]],
    notes: list[str],
    period: Any,
    dropout: Any,
    burst: Any,
    est: dict[str, Any],
    dt: float,
    z: float,
    skips: bool = False,
) -> None:
    """The update period and dropout rows of a sensor with its own rate or lost samples; the dropout's
    verdict tests the loss count against its law under the configured value: binomial, or with ``burst``
    (``dropout_burst``) that of bursty losses
    (:func:`~sensorgym.app.inspect_error_model.loss_fraction_ok`). ``skips`` (jitter): samples the reading
    skipped count as lost too, so only too few missing samples differ."""
    est_p, due, est_d = float(est["period_steps"]), int(est["due"]), float(est["dropout"])
    got_p = f"{est_p:.3g} steps" if math.isfinite(est_p) else "no 2 samples"
    t = _number(period)
    if t is None:
        rows["update period"] = ("randomized", got_p, "this episode's value")
    else:
        steps = max(t / dt, 1.0)  # faster than the control step: a fresh sample every step
        conf = f"{_g(t)} s = {_g(steps)} step{'s' * (steps != 1)}" if t > dt else f"{_g(t)} s: every step"
        ok = math.isfinite(est_p) and abs(est_p - steps) <= 0.5
        rows["update period"] = (conf, got_p, "ok" if ok else f"differs (expected {_g(steps)})")
    p = _number(dropout)
    got_d = f"{est_d:.3g} of {due} due" if due else "none due"
    if p is None:
        rows["dropout"] = ("randomized", got_d, "this episode's value")
    else:
        # the count's own law under the configured value: binomial, or of bursts (dropout_burst)
        ok = loss_fraction_ok(round(est_d * due), due, p, z, burst, est.get("runs"), at_least=skips)
        rows["dropout"] = (_g(p), got_d, "ok" if ok else "differs")
        if skips:
            notes.append(
                "jitter skips samples (a read whose delay shrinks shows a newer sample than the next "
                "one): they leave the gap a lost sample leaves, so the dropout estimate counts both and "
                "only a loss count below what the configured dropout gives differs"
            )
    notes.append(
        "the sensor holds each sample until the next one (update_period, dropout): its readings are compared "
        "with the ground truth at the step their sample was taken (their age), each sample once, so the hold "
        "does not inflate the noise estimate; the sampler figure shows the samples taken, those lost and "
        "the reading's age"
    )
