"""Sensor options and their validation.

``SensorOptions`` holds the time options every sensor has (delay, jitter, history, padding, non-finite
policy); ``SimpleSensorOptions`` adds the hardware imperfections of the standard pipeline (noise, bias,
random walk, resolution). Every field is checked when the options object is constructed; an invalid value
raises a ``ValueError``/``TypeError`` naming the field, the value and the fix. Checks that need the sensor's
size (one value per component) or the control step ``dt`` run when the sensor is added to a manager.

Example:
    >>> import sensorgym as sg
    >>> sg.SimpleSensorOptions(delay=0.04, jitter=0.02, noise=[0.1, 0.1, 0.2], history_length=3).jitter
    0.02
    >>> try:
    ...     sg.SensorOptions(delay=0.01, jitter=0.02)
    ... except ValueError as e:
    ...     print(str(e).split(": ")[0], "...", str(e).split("Fix: ")[1])
    SensorOptions.jitter=0.02 is invalid ... lower jitter to at most 0.01 or raise delay.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .randomization import Distribution, LogUniform, Uniform
from .replay import check_replay, check_replay_channels, check_replay_rate
from .values import as_int, as_real

__all__ = [
    "ComponentValue",
    "SensorOptions",
    "SimpleSensorOptions",
    "TimeValue",
    "check_seconds",
    "did_you_mean",
    "option_error",
]

TimeValue = float | Distribution
ComponentValue = float | Sequence[float | Distribution] | Distribution

PADDING_TYPES = ("reset", "zero")
NAN_POLICIES = ("propagate", "raise", "hold")


def option_error(owner: str, name: str, value: Any, why: str, fix: str) -> ValueError:
    """Build the uniform error message: field, value, reason and fix."""
    return ValueError(f"{owner}.{name}={value!r} is invalid: {why}. Fix: {fix}.")


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """``"did you mean 'obs'? "`` for the known name closest to ``name`` (a close spelling, or one the other
    begins with: ``"observation"`` -> ``'obs'``), else ``""``; the start of a message's fix."""
    name = str(name)
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    close = close or [k for k in known if k and (name.startswith(k) or k.startswith(name))][:1]
    return f"did you mean {close[0]!r}? " if close else ""


def bounds_of(value: float | Distribution) -> tuple[float, float]:
    """``(lowest, highest)`` value a number or distribution can take."""
    if isinstance(value, Distribution):
        return value.bounds
    return (float(value), float(value))


def _is_number(v: Any) -> bool:
    return as_real(v) is not None


# -- per-field checks (the table `SensorOptions._field_checks` runs them) ------------------------------
def check_seconds(owner: str, name: str, value: Any, sized: str = "") -> float | Distribution:
    """A time option: a finite number of seconds ``>= 0``, or a bounded non-negative distribution.

    ``sized`` completes the reason a distribution must be bounded (e.g. ``" so the delay ring can be
    sized"``)."""
    if isinstance(value, Distribution):
        lo, hi = value.bounds
        if lo < 0:
            raise option_error(
                owner,
                name,
                value,
                f"it can produce negative {name} ({lo})",
                "use a distribution with non-negative support, e.g. Uniform(0.0, 0.04) or "
                "Normal(..., low=0.0, high=...)",
            )
        if not math.isfinite(hi):
            raise option_error(
                owner,
                name,
                value,
                f"{name} must be bounded{sized}",
                "give the Normal distribution a finite high=... bound",
            )
        return value
    if not _is_number(value):
        raise TypeError(
            f"{owner}.{name}={value!r} is invalid: expected seconds as a float or a "
            f"Distribution. Fix: pass e.g. {name}=0.02 or {name}=sg.Uniform(0.0, 0.04)."
        )
    seconds = as_real(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise option_error(
            owner,
            name,
            seconds,
            f"{name} must be a finite number of seconds >= 0",
            f"use {name}=0.0 for none",
        )
    return float(seconds)


def _time(options: SensorOptions, name: str, value: Any) -> float | Distribution:
    sized = " so the delay ring can be sized" if name in ("delay", "jitter") else ""
    return check_seconds(type(options).__name__, name, value, sized)


def _optional_time(options: SensorOptions, name: str, value: Any) -> float | Distribution | None:
    return None if value is None else _time(options, name, value)


def _jitter(options: SensorOptions, name: str, value: Any) -> float | Distribution:
    """A time option, at most ``delay`` (checked before it)."""
    value = _time(options, name, value)
    d_hi = bounds_of(options.delay)[1]
    if bounds_of(value)[1] > d_hi + 1e-12:
        raise options._err(
            name,
            value,
            "jitter is extra delay on top of `delay` and must satisfy 0 <= jitter <= delay "
            f"({options.delay})",
            f"lower jitter to at most {d_hi:g} or raise delay",
        )
    return value


def _history_length(options: SensorOptions, name: str, value: Any) -> int:
    if as_int(value) is None:
        raise TypeError(
            f"{type(options).__name__}.{name}={value!r} is invalid: expected an int. "
            "Fix: pass history_length=0 (no history) or a positive number of reads."
        )
    if value < 0:
        raise options._err(
            name, value, "it must be >= 0", "use 0 for no history or N > 0 for the last N reads"
        )
    return as_int(value)


def _one_of(choices: tuple[str, ...], fix: str) -> Callable[..., str]:
    def check(options: SensorOptions, name: str, value: Any) -> str:
        if value not in choices:
            raise options._err(name, value, f"it must be one of {choices}", fix)
        return value

    return check


def _max_delay(options: SensorOptions, name: str, value: Any) -> float | None:
    """``None``, or finite seconds at least the ``delay + jitter`` the options reach (checked before)."""
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(as_real(value)):
        raise options._err(
            name, value, "it must be a finite number of seconds", "pass max_delay=None or e.g. max_delay=0.1"
        )
    reach = bounds_of(options.delay)[1] + bounds_of(options.jitter)[1]
    if value < reach - 1e-12:
        raise options._err(
            name,
            value,
            f"it is below delay + jitter ({reach:g}) that the options already reach",
            f"use max_delay >= {reach:g} or leave it None",
        )
    return as_real(value)


def _probability(options: SensorOptions, name: str, value: Any) -> float | Distribution:
    """A lost-sample probability in ``[0, 1)``, or a distribution inside it."""
    fix = f"pass a probability 0 <= {name} < 1, e.g. {name}=0.05 or {name}=sg.Uniform(0.0, 0.1)"
    if isinstance(value, Distribution):
        lo, hi = value.bounds
        # Uniform and LogUniform draw from [low, high): high = 1 is never drawn (the sampler keeps a draw
        # that rounds to 1 below it); a clipped Normal or a Choice can give its upper bound itself
        open_top = isinstance(value, (Uniform, LogUniform)) and lo < hi
        if lo < 0 or hi > 1 or (hi == 1 and not open_top):
            raise options._err(name, value, f"it can produce {lo if lo < 0 else hi}, outside [0, 1)", fix)
        return value
    if not _is_number(value):
        raise TypeError(
            f"{type(options).__name__}.{name}={value!r} is invalid: expected a probability as a float "
            f"or a Distribution. Fix: {fix}."
        )
    probability = as_real(value)
    if not (math.isfinite(probability) and 0.0 <= probability < 1.0):
        raise options._err(name, value, f"a lost-sample probability must satisfy 0 <= {name} < 1", fix)
    return float(probability)


def _burst(options: SensorOptions, name: str, value: Any) -> float | Distribution | None:
    """``None``, or a mean burst length ``L >= 1`` (samples) with which the loss chain can keep the loss
    fraction ``p = dropout`` (checked before it): ``q = p / (L (1 - p)) <= 1``, i.e. ``p <= L / (L + 1)``."""
    if value is None:
        return None
    fix = f"pass {name}=None (independent losses) or a mean run length >= 1, e.g. {name}=4.0"
    if isinstance(value, Distribution):
        lo, hi = value.bounds
        if not (lo >= 1 and math.isfinite(hi)):
            raise options._err(name, value, f"it can produce {lo if lo < 1 else hi}, outside [1, inf)", fix)
    elif not _is_number(value):
        raise TypeError(
            f"{type(options).__name__}.{name}={value!r} is invalid: expected a mean number of lost samples "
            f"per burst as a float or a Distribution. Fix: {fix}."
        )
    else:
        value = float(as_real(value))
        if not (math.isfinite(value) and value >= 1.0):
            raise options._err(name, value, "a mean burst length must be a finite number >= 1", fix)
        lo = value
    p = bounds_of(options.dropout)[1]
    if p == 0.0:
        raise options._err(
            name,
            value,
            "dropout is 0, so no sample is ever lost and a mean length of a run of lost samples means "
            "nothing",
            f"give the loss fraction too, e.g. dropout=0.05, {name}={value!r}; or leave {name}=None",
        )
    if p > lo / (lo + 1.0) + 1e-12:
        q = p / (lo * (1.0 - p))
        raise options._err(
            name,
            value,
            f"with dropout up to {p:g}, a kept sample would have to be followed by a lost one with "
            f"probability q = p / (L (1 - p)) = {q:.3g} > 1",
            f"lower dropout to at most L / (L + 1) = {lo / (lo + 1.0):.4g}, or raise {name} to at least "
            f"p / (1 - p) = {p / (1.0 - p):.4g}",
        )
    return value


@dataclass(frozen=True, kw_only=True)
class SensorOptions:
    """Time options shared by every sensor.

    Args:
        delay: seconds between capture and the read that shows it; ``D = round(delay / dt)`` steps
            (zero-order hold). A number or a :class:`~sensorgym.Distribution` resampled per env at reset.
        jitter: extra random delay in seconds, ``0 <= jitter <= delay``; each step each env adds
            ``floor(j / dt + u)`` steps with ``j ~ U[0, jitter)``, ``u ~ U[0, 1)``. Reads never go back in
            capture time.
        history_length: ``N > 0`` makes ``read()`` return the last ``N`` reads, newest first.
        padding_type: what delayed and history reads show before the episode has produced enough
            snapshots: ``"reset"`` repeats the episode's first snapshot, ``"zero"`` gives zeros.
        nan_policy: non-finite raw values: ``"propagate"`` (default), ``"raise"`` (a ``ValueError`` naming
            the sensor and losing nothing, random stream included; costs one device sync per step),
            ``"hold"`` (keep the last finite raw value).
        max_delay: optional upper bound, in seconds, on ``delay + jitter`` that ``set_delay`` /
            ``set_jitter`` may reach at run time; the delay ring is sized for it.
        update_period: the sampler's own period ``T`` in seconds (docs/pipeline.md). ``T <= dt``
            (default 0): a sample every control step. ``T > dt``: with ``tau_t = t*dt - phase`` (``t`` =
            steps since the env's reset), a sample is due at step ``t >= 1`` iff ``floor(tau_t/T + 1e-9) >
            floor(tau_{t-1}/T + 1e-9)``, and always at the reset. Between samples the measured snapshot
            repeats the last sample bit for bit (noise, bias and quantization included; the random walk
            keeps drifting; ground truth is never held). Delay, jitter, padding and history then apply
            to these per-step snapshots.
        update_phase: the sampler's phase ``phi`` in seconds (``>= 0``); ``None`` (default) draws
            ``phi ~ U[0, T)`` per env at every reset, so the samplers of a batch are not in lock-step.
        dropout: probability in ``[0, 1)`` that a due sample is lost (the previous sample is held);
            drawn per env per due sample (every step when ``T <= dt``); the reset sample is never lost.
        dropout_burst: mean length ``L >= 1`` of a run of lost samples (docs/error_model.md). ``None``
            (default): losses are independent. Given: per env and sensor, over the due samples, a lost
            sample is followed by another with probability ``1 - 1/L`` and a kept one by a lost one with
            probability ``q = p / (L (1 - p))`` (``p = dropout``, ``q <= 1``), so the long-run loss fraction
            stays ``p`` and runs of losses last ``L`` samples on average. The reset sample is kept.

        ``update_period``, ``update_phase``, ``dropout`` and ``dropout_burst`` may be distributions,
        resampled per env at every reset; the defaults (``0.0``, ``None``, ``0.0``, ``None``) change
        nothing, the random stream included. :meth:`~sensorgym.Sensor.read_age` gives the age of the
        sample behind a reading.

    Example:
        >>> import sensorgym as sg
        >>> sg.SensorOptions(delay=sg.Uniform(0.0, 0.06), jitter=0.02, padding_type="zero").padding_type
        'zero'
    """

    delay: TimeValue = 0.0
    jitter: TimeValue = 0.0
    history_length: int = 0
    padding_type: str = "reset"
    nan_policy: str = "propagate"
    max_delay: float | None = None
    update_period: TimeValue = 0.0
    update_phase: TimeValue | None = None
    dropout: TimeValue = 0.0
    dropout_burst: TimeValue | None = None

    #: fields whose value may be a Distribution
    randomizable: ClassVar[tuple[str, ...]] = (
        "delay", "jitter", "update_period", "update_phase", "dropout", "dropout_burst",
    )  # fmt: skip

    def __post_init__(self) -> None:
        self._validate()

    #: the per-field checks, in the order they run (a check may read fields checked before it): field name
    #: -> ``check(options, name, value)``, which raises on an invalid value and returns it normalized
    _field_checks: ClassVar[tuple[tuple[str, Callable[..., Any]], ...]]

    def _validate(self) -> None:
        for name, check in self._field_checks:
            object.__setattr__(self, name, check(self, name, getattr(self, name)))

    def _err(self, name: str, value: Any, why: str, fix: str) -> ValueError:
        return option_error(type(self).__name__, name, value, why, fix)

    # -- helpers used by the manager -------------------------------------------------------------------
    def check_with_dt(self, dt: float) -> None:
        """The checks that need the control step ``dt`` (run by ``SensorManager.add_sensor``); none here."""

    def randomized_fields(self) -> tuple[str, ...]:
        """Names of fields given as distributions (directly or per component)."""
        out = []
        for field in self.randomizable:
            value = getattr(self, field)
            if isinstance(value, Distribution) or (
                isinstance(value, tuple) and any(isinstance(component, Distribution) for component in value)
            ):
                out.append(field)
        return tuple(out)


SensorOptions._field_checks = (
    ("delay", _time),
    ("jitter", _jitter),
    ("history_length", _history_length),
    (
        "padding_type",
        _one_of(PADDING_TYPES, 'use padding_type="reset" (repeat the first snapshot) or "zero"'),
    ),
    ("nan_policy", _one_of(NAN_POLICIES, 'use nan_policy="propagate", "raise" or "hold"')),
    ("max_delay", _max_delay),
    ("update_period", _time),
    ("update_phase", _optional_time),
    ("dropout", _probability),
    ("dropout_burst", _burst),
)


@dataclass(frozen=True, kw_only=True)
class SimpleSensorOptions(SensorOptions):
    """Options of the standard pipeline: time options plus hardware imperfections.

    Each imperfection is a number (all components), one value per component, or a
    :class:`~sensorgym.Distribution` (sampled per env and component at every reset); a per-component
    sequence may itself hold distributions. Order at the output stage: scale factor, drift (random walk
    plus Gauss-Markov bias), white noise and low-pass filter, bias, resolution (docs/error_model.md).

    ``T_s`` below is the sensor's own sample interval: ``update_period`` when it is given (> 0, also below
    ``dt``), else ``dt``; ``n = max(dt / T_s, 1)`` of its samples fall in one control step.

    Args:
        noise: std of zero-mean Gaussian noise per sample.
        bias: constant offset added to the output.
        random_walk: std of the per-step increment of a drift accumulator added to the output (zeroed at
            every reset).
        resolution: quantization step ``r``: the output is ``round(x / r) * r`` (half to even) where
            ``r > 0``.
        noise_density: white noise density ``N`` (unit/sqrt(Hz)): per-sample std ``N / sqrt(T_s)``
            (Kalibr's convention). Exclusive with ``noise`` per component.
        random_walk_density: bias random walk ``K`` (unit/s/sqrt(Hz), Kalibr's ``random_walk``): the drift
            accumulator's increment per control step has std ``K * sqrt(dt)``. Exclusive with
            ``random_walk`` per component.
        bias_instability: std ``sigma_g`` of a first-order Gauss-Markov bias, drawn ``N(0, sigma_g^2)`` at
            every reset and advanced every control step with ``phi = exp(-dt / tau_c)``.
        bias_correlation_time: its correlation time ``tau_c`` (s), required (> 0) where
            ``bias_instability > 0``.
        scale_factor: scale-factor error ``k > -1``: the measured value is multiplied by ``1 + k``.
        bandwidth: cut-off ``f_c`` (Hz) of the sensor's own first-order low-pass filter over its own
            samples (0: none); it filters the white noise too, in closed form over the ``n`` samples of a
            control step (docs/error_model.md).
        replay: the path of a recording of a real sensor's errors (the NPZ ``sensorgym fit --residuals``
            writes; default None), or one path (None: not replayed) per component: a replayed component
            takes its white noise, drift and filtering from it (exclusive with ``noise``,
            ``noise_density``, ``random_walk``, ``random_walk_density``, ``bias_instability`` and
            ``bandwidth``). Each due sample takes the next recorded sample, from an offset drawn per env
            at every reset; the index wraps at the end (docs/error_model.md, "Replayed real errors").
        replay_channels: one channel of the recording per component (default: the file's channels in
            order, as many as the sensor has components).

    Example:
        >>> import sensorgym as sg
        >>> sg.SimpleSensorOptions(noise=0.01, bias=[0.0, 0.1, -0.1], resolution=0.05).bias
        (0.0, 0.1, -0.1)
        >>> sg.SimpleSensorOptions(noise_density=1.7e-4, bandwidth=50.0, update_period=0.005).noise_density
        0.00017
    """

    noise: ComponentValue = 0.0
    bias: ComponentValue = 0.0
    random_walk: ComponentValue = 0.0
    resolution: ComponentValue = 0.0
    noise_density: ComponentValue = 0.0
    random_walk_density: ComponentValue = 0.0
    bias_instability: ComponentValue = 0.0
    bias_correlation_time: ComponentValue = 0.0
    scale_factor: ComponentValue = 0.0
    bandwidth: ComponentValue = 0.0
    replay: str | tuple[str | None, ...] | None = None
    replay_channels: tuple[str | None, ...] | None = None

    randomizable: ClassVar[tuple[str, ...]] = (
        *SensorOptions.randomizable,
        "noise",
        "bias",
        "random_walk",
        "resolution",
        "noise_density",
        "random_walk_density",
        "bias_instability",
        "bias_correlation_time",
        "scale_factor",
        "bandwidth",
    )

    def check_with_dt(self, dt: float) -> None:
        """A ``bandwidth`` below the Nyquist rate of the sensor's own samples, ``T_s = dt`` where
        ``update_period`` can be 0; a ``replay`` recording's sample interval against ``T_s``."""
        nyquist_error(self, self.bandwidth, dt)
        check_replay_rate(self, dt)

    #: imperfections that must be >= 0 (bias and scale_factor may be negative)
    _non_negative: ClassVar[tuple[str, ...]] = (
        "noise", "random_walk", "resolution", "noise_density", "random_walk_density", "bias_instability",
        "bias_correlation_time", "bandwidth",
    )  # fmt: skip


def _component(options: SimpleSensorOptions, name: str, value: Any) -> ComponentValue:
    """An imperfection: a number, one value per component, or a distribution (also per component);
    ``>= 0`` unless the field may be negative (bias)."""
    non_neg = name in options._non_negative
    fix = f"pass {name}=0.0, a list with one value per component, or a Distribution"

    def check_one(v: Any, where: str) -> float | Distribution:
        if isinstance(v, Distribution):
            lo, _ = v.bounds
            if non_neg and lo < 0:
                raise options._err(
                    name,
                    value,
                    f"{where}can produce negative values ({lo}) but {name} must be >= 0",
                    "use a non-negative distribution such as Uniform(0.0, x), "
                    "LogUniform or Normal(..., low=0.0)",
                )
            return v
        if not _is_number(v):
            raise TypeError(
                f"{type(options).__name__}.{name}={value!r} is invalid: {where}expected a number or a "
                f"Distribution, got {type(v).__name__}. Fix: {fix}."
            )
        v = float(v)
        if not math.isfinite(v):
            raise options._err(name, value, f"{where}values must be finite", fix)
        if non_neg and v < 0:
            raise options._err(name, value, f"{where}{name} must be >= 0", f"use {abs(v)} or 0.0")
        return v

    if isinstance(value, (str, bytes)):
        raise TypeError(
            f"{type(options).__name__}.{name}={value!r} is invalid: expected a number. Fix: {fix}."
        )
    if isinstance(value, np.ndarray):
        if value.ndim > 1:
            raise options._err(
                name,
                value.tolist(),
                "per-component values must be one flat sequence",
                "flatten it to one value per component",
            )
        value = value.tolist() if value.ndim == 1 else value.item()
    if isinstance(value, Sequence):
        if len(value) == 0:
            raise options._err(name, value, "the per-component sequence is empty", fix)
        return tuple(check_one(v, f"component {i}: ") for i, v in enumerate(value))
    return check_one(value, "")


def _scale_factor(options: SimpleSensorOptions, name: str, value: Any) -> ComponentValue:
    """A scale-factor error per component: ``k > -1`` (the measured value is multiplied by ``1 + k``)."""
    value = _component(options, name, value)
    for i, v in enumerate(_per_component(value)):
        lo = bounds_of(v)[0]
        if lo <= -1.0:
            where = f"component {i}: " if isinstance(value, tuple) else ""
            what = f"it can produce {lo:g}" if isinstance(v, Distribution) else f"{lo:g} is not above -1"
            raise options._err(
                name,
                value,
                f"{where}{what}; a gain 1 + k must stay positive, so k > -1",
                "use a scale-factor error above -1, e.g. scale_factor=0.01 (1 %) or sg.Uniform(-0.02, 0.02)",
            )
    return value


def _per_component(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def _can_be_nonzero(v: Any) -> bool:
    lo, hi = bounds_of(v)
    return lo != 0.0 or hi != 0.0


def _aligned(a: Any, b: Any) -> list[tuple[int, Any, Any]] | None:
    """``[(component, a_i, b_i)]`` for two per-component values, None when their lengths disagree (the
    check against the sensor's size at ``add_sensor`` then names the length)."""
    ta, tb = _per_component(a), _per_component(b)
    n = max(len(ta), len(tb))
    if len(ta) not in (1, n) or len(tb) not in (1, n):
        return None
    return [(i, ta[i if len(ta) > 1 else 0], tb[i if len(tb) > 1 else 0]) for i in range(n)]


def _exclusive_with(other: str) -> Callable[..., ComponentValue]:
    """A density option that may not be non-zero where ``other`` (its per-step twin) is."""

    def check(options: SimpleSensorOptions, name: str, value: Any) -> ComponentValue:
        value = _component(options, name, value)
        for i, a, b in _aligned(getattr(options, other), value) or []:
            if _can_be_nonzero(a) and _can_be_nonzero(b):
                where = f" (component {i})" if isinstance(value, tuple) or isinstance(
                    getattr(options, other), tuple
                ) else ""  # fmt: skip
                raise options._err(
                    name,
                    value,
                    f"{other}={getattr(options, other)!r} and {name} are both non-zero{where}; they are "
                    f"two units of the same error term",
                    f"give one of {other} (per step) or {name} (per sqrt(Hz)) and set the other to 0.0",
                )
        return value

    return check


def _bandwidth(options: SimpleSensorOptions, name: str, value: Any) -> ComponentValue:
    """A cut-off ``f_c >= 0`` (Hz) below the Nyquist rate ``1 / (2 T_s)`` of the sensor's own samples, where
    ``update_period`` fixes ``T_s`` (else the manager checks it against ``dt``: :meth:`check_with_dt`)."""
    value = _component(options, name, value)
    lo, _ = bounds_of(options.update_period)
    if lo > 0:
        nyquist_error(options, value, None)
    return value


def nyquist_error(options: SimpleSensorOptions, value: Any, dt: float | None) -> None:
    """Raise when a ``bandwidth`` can reach the Nyquist rate ``1 / (2 T_s)``: the sensor's samples cannot
    carry a frequency above it, so such a filter is no filter of this sensor (a bandwidth given for
    another rate, or in rad/s). ``T_s`` is the longest sample interval ``update_period`` can give, ``dt``
    where it can be 0."""
    lo, hi = bounds_of(options.update_period)
    longest = max(hi, dt if (dt is not None and lo <= 0) else 0.0)
    if longest <= 0:
        return
    nyquist = 1.0 / (2.0 * longest)
    for i, v in enumerate(_per_component(value)):
        f_hi = bounds_of(v)[1]
        if f_hi >= nyquist:
            where = f"component {i}: " if isinstance(value, tuple) else ""
            source = "update_period" if hi >= longest and hi > 0 else "dt"
            raise options._err(
                "bandwidth",
                value,
                f"{where}{f_hi:g} Hz is at or above the Nyquist rate {nyquist:g} Hz of the sensor's own "
                f"samples (T_s = {longest:g} s, its {source}); a first-order filter's cut-off must lie "
                "below it",
                f"give the cut-off in Hz below {nyquist:g} (e.g. the datasheet's bandwidth), or a shorter "
                "update_period if the sensor samples faster",
            )


def _correlation_time(options: SimpleSensorOptions, name: str, value: Any) -> ComponentValue:
    """``tau_c``: required (> 0) wherever ``bias_instability`` can be non-zero."""
    value = _component(options, name, value)
    for i, sigma, tau in _aligned(options.bias_instability, value) or []:
        if _can_be_nonzero(sigma) and bounds_of(tau)[0] <= 0.0:
            where = f" (component {i})" if isinstance(value, tuple) else ""
            raise options._err(
                name,
                value,
                f"bias_instability={options.bias_instability!r} needs a correlation time > 0{where}",
                "give bias_correlation_time in seconds, e.g. bias_correlation_time=100.0",
            )
    return value


def _validate_simple(options: SimpleSensorOptions) -> None:
    """The field checks, then the options of registered error terms and stages that this (sub)class has
    and no check covers: each a number, per-component values or a distribution (a term declared outside
    the package brings its options this way, with an options subclass that adds the fields)."""
    SensorOptions._validate(options)
    from .terms import component_options

    checked = {name for name, _ in options._field_checks}
    for name in component_options():
        if name not in checked and hasattr(options, name):
            object.__setattr__(options, name, _component(options, name, getattr(options, name)))


SimpleSensorOptions._validate = _validate_simple

SimpleSensorOptions._field_checks = (
    *SensorOptions._field_checks,
    *((name, _component) for name in ("noise", "bias", "random_walk", "resolution")),
    ("noise_density", _exclusive_with("noise")),
    ("random_walk_density", _exclusive_with("random_walk")),
    ("bias_instability", _component),
    ("bias_correlation_time", _correlation_time),
    ("scale_factor", _scale_factor),
    ("bandwidth", _bandwidth),
    ("replay", check_replay),
    ("replay_channels", check_replay_channels),
)
