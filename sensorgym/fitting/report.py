"""The outputs of ``sensorgym fit``: ``fitted.toml``, ``fitted_config.toml`` (with ``--into``) and
``fit_report.md`` (every value, its uncertainty, the ``tau`` range it came from, what could not be
identified and why, the log's timing against the simulation's, and the closed-loop check); the figures
come from :mod:`~sensorgym.fitting.plots`.

Example:
    >>> fmt_value(0.0123456, 0.00012)
    '0.01235 ± 0.00012'
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .channels import unit_of
from .config_out import fitted_tables, to_toml
from .estimate import TERMS

if TYPE_CHECKING:
    from .result import ChannelFit, FitResult

__all__ = ["fmt_value", "report_markdown", "units", "write_outputs"]


def units(channel: str) -> dict[str, str]:
    """The unit of each fitted term of ``channel``, from the unit its name ends with (``"Gyroscope X
    (deg/s)"``: ``(deg/s)/√Hz``), else in "channel units".

    Example:
        >>> units("Gyroscope X (deg/s)")["noise_density"], units("gyro_x")["random_walk_density"]
        ('(deg/s)/√Hz', '(channel units)/s/√Hz')
    """
    unit = unit_of(channel)
    base = unit if unit else "channel units"
    wrapped = f"({base})" if (not unit or any(c in base for c in "/* ")) else base
    return {
        "noise_density": f"{wrapped}/√Hz",
        "bandwidth": "Hz",
        "random_walk_density": f"{wrapped}/s/√Hz",
        "bias_instability": base,
        "bias_correlation_time": "s",
        "resolution": base,
    }


def fmt_value(value: float, se: float | None) -> str:
    """``value ± se`` with the value given to the se's second significant digit."""
    if se is None or se <= 0 or not math.isfinite(se):
        return f"{value:.4g}"
    digits = max(0, 1 - math.floor(math.log10(se)))
    if abs(value) >= 1e-3 or value == 0:
        return f"{value:.{digits}f} ± {se:.2g}"
    return f"{value:.3e} ± {se:.1e}"


def _tau(rng: tuple[float, float] | None) -> str:
    return f"{rng[0]:.3g}–{rng[1]:.3g} s" if rng else "–"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


NOT_IDENTIFIABLE = "not identifiable from this log"


def _timing_rows(f: ChannelFit) -> list[str]:
    t = f.timing
    spread = f"median interval (interquartile spread: {100 * t.interval_spread:.2g}% of T_s)"
    out = [_row("update_period (T_s)", f"{t.sample_interval:.6g} s", "time stamps", spread)]
    if t.lost:
        out.append(
            _row(
                "dropout",
                fmt_value(t.dropout, t.dropout_se),
                "time stamps",
                f"{t.lost} lost in {len(t.runs)} runs",
            )
        )
        burst = fmt_value(t.burst, t.burst_se) if t.burst is not None else "–"
        out.append(_row("dropout_burst", f"{burst} samples", "time stamps", "mean run of lost samples"))
    else:
        out.append(
            _row(
                "dropout",
                f"0 (< {t.dropout_upper:.2g} at 95%)",
                "time stamps",
                "no interval of 2 T_s or more",
            )
        )
        out.append(_row("dropout_burst", NOT_IDENTIFIABLE, "–", "no lost samples"))
    return out


def _noise_rows(f: ChannelFit) -> list[str]:
    out = []
    unit = units(f.channel.name)
    for term in TERMS:
        e = f.noise.estimates[term]
        if e.identified:
            wide = e.se is not None and e.se > 0.5 * e.value
            note = f"uncertain by a factor {math.exp(min(e.se / e.value, 50.0)):.2g}" if wide else ""
            out.append(_row(term, f"{fmt_value(e.value, e.se)} {unit[term]}", _tau(e.tau), note))
        else:
            bound = f" (< {e.upper:.3g} at 95%)" if e.upper else ""
            out.append(_row(term, NOT_IDENTIFIABLE + bound, "–", e.note))
    step, step_se = f.resolution
    if step is not None:
        out.append(
            _row("resolution", f"{fmt_value(step, step_se)} {unit['resolution']}", "the values' lattice", "")
        )
    else:
        why = "the values lie on no lattice coarser than 1% of their step-to-step spread"
        out.append(_row("resolution", NOT_IDENTIFIABLE, "–", why))
    d = f.delay
    if d is not None and d.delay is not None:
        samples = f"{fmt_value(d.delay, d.se)} s ({d.delay / f.timing.sample_interval:.2f} samples)"
        out.append(_row("delay", samples, "whole log", f"correlation {d.correlation:.3f} with the reference"))
    elif d is not None:
        out.append(_row("delay", NOT_IDENTIFIABLE, "–", d.note))
    return out


def _channel_section(f: ChannelFit) -> list[str]:
    t = f.timing
    part = f" component {f.component}" if f.component else ""
    how = "given (--static)" if f.window_given else "found (the longest stretch without motion)"
    out = [
        f"## {f.channel.name} → `[sensors.{f.name}]`{part}",
        "",
        f"Source: {f.channel.source}; {t.received} samples over {f.channel.duration:.4g} s.",
        f"Static window: {f.window[0]:.4g} to {f.window[1]:.4g} s from the first time stamp "
        f"({f.duration:.4g} s, "
        f"{f.allan.n} samples), {how}; mean {f.level:.6g}.",
        "",
        "| option | value | τ range it came from | note |",
        "|---|---|---|---|",
        *_timing_rows(f),
        *_noise_rows(f),
        "",
        *(f"- {n}" for n in f.noise.notes),
        *_finding_lines(f),
        f"- Fit: {_structure(f.noise.structure)}; misfit of the Allan variance about the model "
        f"φ = {f.noise.dispersion:.2f} (its chi-square per degree of freedom under the estimates' joint law, "
        "at least 1; the uncertainties above are widened by its square root).",
    ]
    c = f.closed_loop
    if c is not None and len(c.taus):
        out += ["", "| τ (s) | log | 95% band | simulated | difference |", "|---|---|---|---|---|"]
        for i in range(len(c.taus)):
            mark = "" if c.inside[i] else " (outside)"
            band = f"{c.lo[i]:.4g}–{c.hi[i]:.4g}"
            out.append(
                _row(
                    f"{c.taus[i]:.4g}",
                    f"{c.log[i]:.4g}",
                    band,
                    f"{c.sim[i]:.4g}",
                    f"{100 * c.relative[i]:+.1f}%{mark}",
                )
            )
    out.append("")
    return out


def _range(low: float, high: float, unit: str) -> str:
    top = f"{high:.3g} {unit}" if math.isfinite(high) else "no upper bound from this log"
    return f"{low:.3g} {unit} to {top}"


def _finding_lines(f: ChannelFit) -> list[str]:
    """The alternative the log cannot tell apart, the window's warm-up and spectrum, and what the model
    leaves unexplained."""
    out = []
    alt = f.noise.alternative
    if alt is not None:
        unit = units(f.channel.name)
        bounds = "; ".join(
            f"{term} {_range(*alt.ranges[term], unit[term])}" for term in TERMS if term in alt.ranges
        )
        drift = (
            "the random walk written here drifts without bound over an episode, the bias only within its "
            "instability"
            if alt.kind == "Gauss-Markov bias"
            else "the bias written here stays within its instability, the walk drifts without bound"
        )
        out.append(
            f"- The log cannot tell this model from a {alt.kind} alone "
            f"(criterion {alt.score_difference:+.1f} against the one written; two standard errors): "
            f"{bounds}. Over an episode longer than the log's longest tau {drift}."
        )
    if f.spectral is not None:
        c = f.spectral
        out.append(
            f"- Spectrum: a narrow-band component near {c.frequency:.3g} Hz ({c.low:.3g}-{c.high:.3g} Hz, "
            f"{100 * c.share:.2g}% of the window's variance) beyond the fitted model's: a vibration, a "
            "resonance or an interference; the error model has no term for it."
        )
    for u in f.unexplained:
        span = f"{u.taus[0]:.3g} s" if u.taus[0] == u.taus[1] else f"{u.taus[0]:.3g}-{u.taus[1]:.3g} s"
        side = "below" if u.worst < 0 else "above"
        gap = f"the model {100 * abs(u.worst):.0f}% {side} the log"
        out.append(f"- Unexplained at τ {span} ({gap}): {u.cause}.")
    return out


def _structure(s: tuple[bool, bool, bool]) -> str:
    names = ("low-pass filter", "random walk", "Gauss-Markov bias")
    return "the log shows " + ", ".join(["white noise"] + [n for on, n in zip(s, names, strict=True) if on])


def _sim_lines(result: FitResult) -> list[str]:
    sim = result.sim
    lines = ["## Closed loop: the fitted config simulated through SensorManager", ""]
    for name, timing in sim.timing.items():
        log_t = next(f for f in result.channels if f.name.partition(".")[0] == name).timing
        burst = f"{timing.burst:.3g}" if timing.burst is not None else "–"
        log_burst = f"{log_t.burst:.3g}" if log_t.burst is not None else "–"
        runs = f" ({sim.segments[name]} runs of a part of the log each)" if sim.segments[name] > 1 else ""
        if sim.timing_run.get(name):
            envs, steps = sim.timing_run[name]
            runs += (
                " stepped without the sampler's losses, which were then drawn from its law (the fitted "
                f"dropout and burst); the timing from {envs} envs x {steps:,} steps with every option"
            )
        lines.append(
            f"- `{name}`: {sim.envs[name]} envs x {sim.steps[name]:,} steps of {log_t.sample_interval:.4g} s"
            f"{runs}; loss fraction {timing.dropout:.4g} (log {log_t.dropout:.4g}), mean burst {burst} "
            f"(log {log_burst})"
        )
    for name, segments in sim.segments.items():
        if segments > 1:
            slots = max(f.timing.slots for f in result.channels if f.name.partition(".")[0] == name)
            whole = sim.envs[name] * sim.steps[name] / max(slots, 1)
            lines.append(
                f"- `{name}`: the check asks for 64 envs of the log's duration; a log this long is simulated "
                f"as {segments} shorter runs side by side, {whole:.3g} log lengths in all (memory caps the "
                "stored readings, and the 30 s budget the steps; docs/fit.md, The closed loop)"
            )
    lines += [f"- simulation time: {sim.seconds:.1f} s", "", *(f"    {line}" for line in result.lines), ""]
    return lines


def report_markdown(result: FitResult, into: str | Path | None = None) -> str:
    """``fit_report.md``: every fitted value with its uncertainty and the data it came from."""
    when = datetime.datetime.now().isoformat(timespec="seconds")
    lines = [
        f"# sensorgym fit: {result.log.name}",
        "",
        f"Written {when} from `{result.log}`. Uncertainties are one standard error, the choice between "
        "models with and without each term included. The Allan deviation "
        "is the overlapping one (allantools) on the samples as received (τ: m received samples times "
        "their mean interval); its 95% band is chi-square with "
        "Greenhall's degrees of freedom. A value is reported only where the log shows it (docs/fit.md says "
        "how each is estimated).",
        "",
    ]
    if result.warnings:
        lines += ["## Warnings", "", *(f"- {w}" for w in result.warnings), ""]
    for f in result.channels:
        lines += _channel_section(f)
    if result.sim is not None:
        lines += _sim_lines(result)
    if result.into_changes or result.into_kept:
        lines += [
            f"## `fitted_config.toml` (from `{into}`)",
            "",
            "Its tables of the fitted names are the sensor simulated above: every error-model term the fit "
            "estimates is the fitted value, or removed where this log cannot show it; what a log at rest "
            "cannot show is kept from the config, not fitted.",
            "",
            *(f"- {c}" for c in result.into_changes),
            "",
        ]
    return "\n".join(lines)


def write_outputs(
    result: FitResult, out: Path, merged: Mapping[str, Any] | None, into: str | Path | None
) -> None:
    """Write ``fitted.toml``, ``fitted_config.toml`` (with ``into``), ``fit_report.md`` and the figures."""

    out.mkdir(parents=True, exist_ok=True)
    today = datetime.date.today().isoformat()
    header = [f"sensorgym fit {result.log.name} ({today}): the fitted error-model options."]
    missing = [
        f"  {f.channel.name}: {term}"
        for f in result.channels
        for term in TERMS
        if not f.noise.estimates[term].identified
    ]
    if missing:
        header += ["Not identifiable from this log (left at their defaults):", *missing]
    header.append(
        "Use them with: sensorgym fit ... --into YOUR_CONFIG (writes fitted_config.toml), see docs/fit.md"
    )
    path = out / "fitted.toml"
    path.write_text(to_toml(fitted_tables(result.options), header))
    result.files["fitted.toml"] = path
    if merged is not None:
        path = out / "fitted_config.toml"
        note = f"{into} with the options sensorgym fit found in {result.log.name} (its comments are not kept)"
        path.write_text(to_toml(merged, [note]))
        result.files["fitted_config.toml"] = path
    path = out / "fit_report.md"
    path.write_text(report_markdown(result, into))
    result.files["fit_report.md"] = path
    from .plots import plot_allan, plot_timing

    figures = plot_allan(result, out / "allan.png"), plot_timing(result, out / "timing.png")
    for fig in figures:
        if fig is not None:
            result.files[fig.name] = fig
