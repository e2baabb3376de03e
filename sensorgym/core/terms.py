"""The error terms of the measured branch, each one record (:class:`Term`), run in their documented order.

A term declares in one place what it is made of: the per-component options it reads, its coefficient
tables (derived from the per-env option values, in float64 and rounded once, never per step), its per-env
state (saved in checkpoints and restored for the envs a reset does not touch), the block of the step's
standard normals it draws from, the state entries it reads every step (an exogenous input, e.g. a
temperature), and its per-step operation, written once against an array namespace (:mod:`sensorgym.core.xp`)
so both executors and ``torch.compile`` run the same definition. The class's
:class:`~sensorgym.core.error_model.ErrorModel` allocates what the terms of its sensors declare and binds
each present term's arguments once per plan; :func:`run_plan` is the whole per-step loop.

The built-in terms, in :data:`TERMS` order (docs/error_model.md): scale factor, random walk, Gauss-Markov
bias (bias instability), white noise (through the sensor's own low-pass filter when it has a bandwidth),
a replayed recording (:mod:`sensorgym.core.replay`: where drift, noise and filter stand, for the
components that replay one), bias, resolution. :func:`register_term` adds one at a place in that order,
from outside the package too.

Example: a term that adds a per-env offset proportional to a temperature the state carries
    >>> import torch, sensorgym as sg
    >>> from dataclasses import dataclass
    >>> from sensorgym.core.terms import Term, register_term, unregister_term
    >>> def thermal(xp, x, data, rows, scratch, coefficient, temperature):
    ...     xp.add(x, xp.mul(coefficient, temperature, scratch), data)
    ...     return data
    >>> @dataclass(frozen=True, kw_only=True)
    ... class ThermalOptions(sg.StateSensorOptions):
    ...     thermal_coefficient: float = 0.0
    >>> term = Term("thermal", options=("thermal_coefficient",), apply=thermal, inputs=("temperature",),
    ...             bind=lambda model: (model.scratch, model.value("thermal_coefficient"),
    ...                                 model.input("temperature")))
    >>> register_term(term, before="bias")
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.1)
    >>> s = mgr.add_sensor(ThermalOptions(key="x", shape=(1,), thermal_coefficient=0.5))
    >>> mgr.reset({"x": torch.zeros(2, 1), "temperature": torch.tensor([[1.0], [4.0]])})
    >>> s.read().flatten().tolist()
    [0.5, 2.0]
    >>> unregister_term("thermal")
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from . import replay as _replay
from .xp import TORCH

#: what a term's bind, presence and derivation receive: the class's ``ErrorModel``
#: (:mod:`sensorgym.core.error_model`, which imports this module; not imported here: no import circle)
ErrorModel = Any

__all__ = [
    "STAGES",
    "TERMS",
    "Term",
    "component_options",
    "quantize_",
    "register_stage",
    "register_term",
    "run_plan",
    "unregister_term",
]


@dataclass(frozen=True)
class Term:
    """One error term (see the module docstring).

    Attributes:
        name: the term's name (also the name a class's model keeps its tables under).
        options: the per-component option fields it reads; a class allocates a ``(B, cols)`` table of
            per-env values for each (randomized per env at every reset like any option) when some sensor
            of it has the field.
        apply: ``apply(xp, x, data, rows, *args) -> array``: the step's operation on the value ``x`` (the
            raw value, or what the term before wrote), writing ``data`` (the working buffer) and returning
            what the next term reads (usually ``data``; ``x`` when it wrote nothing). ``rows``: the envs
            this capture resets, as an array of the executor, None without resets (or when no present term
            restarts). ``args``: what :attr:`bind` returned.
        bind: ``bind(model) -> tuple``: the arrays :attr:`apply` takes after ``rows`` (through
            ``model.value(field)``, ``model.table(name)``, ``model.state(name)``, ``model.draws(block)``,
            ``model.input(key)``, ``model.scratch``). Called at build, after a setter and after a load,
            for a present term.
        present: ``present(model) -> bool``: whether the term runs in this plan (some sensor can make it
            non-zero; a setter can switch a per-step term on). Default: some sensor of the class has one
            of :attr:`options` non-zero.
        tables: the coefficient tables it derives (``(B, cols)``, the class's dtype unless
            :attr:`table_dtypes` says otherwise), made on first use (at build).
        state: its per-env state tables: restored for the envs a reset does not touch and saved in
            checkpoints as ``"md.<name>"``.
        derive: ``derive(model) -> None``: recompute :attr:`tables` from the per-env values (at build,
            after a setter or a load, at resets that redraw a value they derive from).
        draws: the block of the step's standard normals it reads (0: white noise, 1: random walk, 2:
            Gauss-Markov bias): a block's place in the stream is fixed, so a class's stream does not change
            with the terms it happens to use.
        follows: options that mean nothing alone and get a table exactly when the first of :attr:`options`
            does (a correlation time follows its bias instability).
        depends: the fields its derivation reads besides :attr:`options` (another term's values, or
            ``"update_period"`` for tables that follow the sample interval ``T_s``): a reset that redraws
            one recomputes its tables.
        restarts: whether its state restarts at a reset (it then reads ``rows``).
        widen: ``widen(lo, hi, option) -> (lo, hi, size) | None``: the range of a component's reading after
            the term, from its range before (``option(field)`` gives the ``(lowest, highest)`` value the
            option can take for that component), and the size it adds (0 for a multiplicative or range-
            keeping term), which sizes the float32 rounding slack; None where the term changes nothing.
            Unset: the term makes a component unbounded wherever one of its options can be non-zero.
        samples: whether it reads the sampler's decision of the step, on ``model.sampler`` (None: every
            step is a sample): ``take``, which envs and sensors take a sample; ``due``, which were due, lost
            ones too (``(B, n_sensors)`` bool each). A stage that consumes samples holds its state where
            none is taken.
        inputs: state entries it reads every step (``(B,)``, ``(B, 1)`` or ``(B, cols)``), copied by the
            class's storage into ``model.input(key)`` (``(B, cols)``) before the class's hook.
        table_dtypes: ``((table, dtype), ...)`` for tables that are not of the class's dtype (masks).
        state_dtypes: ``((state, dtype), ...)`` for state tables that are not of the class's dtype (indices).
        settings: per-sensor options that are not numbers (a path, names; e.g. ``replay``): the class's
            plan reads them once into each sensor's ``settings`` (where given), and a class holds the term
            when some sensor gives the first. Such a term usually declares no :attr:`options`.
        setup: ``setup(model) -> None``: once, when the class's model is made, for a term of
            :attr:`settings`: the constant buffers it makes from the plan (``model.buffer(name, tensor)``).
        redraw: ``redraw(model, mask) -> None``: at every reset of the envs in ``mask`` (after the options'
            own resample), what the term draws for them with the class's random source
            (``model.params.random``: each env's stream with per-env generators).
    """

    name: str
    options: tuple[str, ...]
    apply: Callable[..., Any]
    bind: Callable[[ErrorModel], tuple]
    present: Callable[[ErrorModel], bool] | None = None
    tables: tuple[str, ...] = ()
    state: tuple[str, ...] = ()
    derive: Callable[[ErrorModel], None] | None = None
    follows: tuple[str, ...] = ()
    depends: tuple[str, ...] = ()
    draws: int | None = None
    restarts: bool = False
    widen: Callable[..., tuple[float, float, float] | None] | None = None
    samples: bool = False
    inputs: tuple[str, ...] = ()
    table_dtypes: tuple[tuple[str, torch.dtype], ...] = ()
    state_dtypes: tuple[tuple[str, torch.dtype], ...] = ()
    settings: tuple[str, ...] = ()
    setup: Callable[[ErrorModel], None] | None = None
    redraw: Callable[[ErrorModel, torch.Tensor], None] | None = None


# -- the per-step loop --------------------------------------------------------------------------------------
def run_plan(xp: Any, plan: tuple, data: Any, source: Any, rows: Any) -> None:
    """Every present term of a class, in order, on the working buffer ``data`` ``(B, cols)``; the first
    reads the raw value from ``source`` (the GT slot: the copy into ``data`` is folded into the first
    write) or from ``data`` itself. ``plan``: ``((apply, args), ...)`` bound by the class's model."""
    x = data if source is None else source
    for apply, args in plan:
        x = apply(xp, x, data, rows, *args)
    if x is not data:  # nothing wrote (or the last term read only): the raw value is the reading
        xp.copy(data, x)


# -- the built-in terms' operations ---------------------------------------------------------------------
def _scale(xp: Any, x: Any, data: Any, rows: Any, scale: Any) -> Any:
    """Scale-factor error: ``x (1 + k)``."""
    xp.mul(x, scale, data)
    return data


def _walk(xp: Any, x: Any, data: Any, rows: Any, scratch: Any, walk: Any, draw: Any, std: Any) -> Any:
    """Random walk: the accumulator advances by ``std * w`` (and is zeroed where an env resets)."""
    xp.add(walk, xp.mul(draw, std, scratch), walk)
    if rows is not None:
        xp.fill_where(walk, rows[:, None], 0.0)
    xp.add(x, walk, data)
    return data


def _markov(
    xp: Any,
    x: Any,
    data: Any,
    rows: Any,
    scratch: Any,
    state: Any,
    draw: Any,
    phi: Any,
    drive: Any,
    sigma: Any,
) -> Any:
    """Gauss-Markov bias: ``g <- phi g + drive w``; ``g = sigma_g w`` at a reset."""
    xp.mul(state, phi, state)
    xp.add(state, xp.mul(draw, drive, scratch), state)
    if rows is not None:
        xp.select_into(state, rows[:, None], xp.mul(draw, sigma, scratch))
    xp.add(x, state, data)
    return data


def _noise(xp: Any, x: Any, data: Any, rows: Any, scratch: Any, draw: Any, std: Any) -> Any:
    """White noise: one draw of ``std`` per sample."""
    xp.add(x, xp.mul(draw, std, scratch), data)
    return data


def _lowpass(
    xp: Any,
    x: Any,
    data: Any,
    rows: Any,
    scratch: Any,
    draw: Any,
    state: Any,
    gain: Any,
    step_std: Any,
    start_std: Any,
    update: Any,
    spare: Any,
    due: tuple | None,
) -> Any:
    """White noise through the sensor's first-order low-pass filter, closed form over the step:
    ``y + (1 - a^m) (x - y) + step_std w`` (the specified ``a^m y + (1 - a^m) x``, written so that float
    rounding keeps a noise-free output between ``y`` and ``x``: ``a^m y + (1 - a^m) x`` in float32 drifted
    up to 50 ulps outside a bound the input held when ``1 - a^m`` is small); at a reset the filter starts
    at the sample plus one draw of its stationary std. The state advances where ``update`` is set (filtered
    columns, and due samples when the sensor has an own rate: ``due`` then recomputes the mask); a column
    without a filter keeps ``y = 0``, so its output is exactly ``x`` plus its noise."""
    if due is not None:  # update = active and due, per column
        sampler_due, col_to_sensor, active = due
        xp.take_in_range(sampler_due, col_to_sensor, update, 1)
        xp.logical_and(update, active, update)
    if rows is not None:  # the filter starts at the reset sample, at its stationary spread
        xp.add(x, xp.mul(draw, start_std, scratch), spare)
    xp.sub(x, state, scratch)  # (x is read first: it may be `data`)
    xp.mul(scratch, gain, scratch)
    xp.add(state, scratch, data)
    xp.add(data, xp.mul(draw, step_std, scratch), data)
    if rows is not None:
        xp.select_into(data, rows[:, None], spare)
    xp.select_into(state, update, data)
    return data


def _bias(xp: Any, x: Any, data: Any, rows: Any, bias: Any) -> Any:
    xp.add(x, bias, data)
    return data


def _resolution(xp: Any, x: Any, data: Any, rows: Any, step: Any, active: Any, scratch: Any) -> Any:
    """Quantization ``round(x / r) * r`` (half to even): of every component (``active`` None), or where
    ``active`` (``step`` is then a safe divisor elsewhere, and the rest keeps its value)."""
    if active is None:
        xp.div(x, step, data)
        xp.round(data, data)
        xp.mul(data, step, data)
        return data
    if x is not data:
        xp.copy(data, x)
    _quantize(xp, data, step, active, scratch)
    return data


def _quantize(xp: Any, data: Any, safe_step: Any, active: Any, scratch: Any) -> None:
    xp.div(data, safe_step, scratch)
    xp.round(scratch, scratch)
    xp.mul(scratch, safe_step, scratch)
    xp.select_into(data, active, scratch)


def quantize_(
    data: torch.Tensor, safe_step: torch.Tensor, active: torch.Tensor, scratch: torch.Tensor
) -> torch.Tensor:
    """``data = round(data / r) * r`` (half to even) where ``active``; in place, no allocation (a helper
    for custom hooks, on torch tensors)."""
    _quantize(TORCH, data, safe_step, active, scratch)
    return data


# -- the built-in terms' presence, bindings and tables ----------------------------------------------------
def _scale_args(m: ErrorModel) -> tuple:
    return (m.table("scale"),)


def _derive_scale(m: ErrorModel) -> None:
    torch.add(m.value("scale_factor"), 1.0, out=m.table("scale"))


def _walk_present(m: ErrorModel) -> bool:
    return m.can_be_nonzero("random_walk") or m.has("random_walk_density")


def _walk_args(m: ErrorModel) -> tuple:
    std = m.table("walk_std") if m.has("random_walk_density") else m.value("random_walk")
    return (m.scratch, m.state("random_walk_state"), m.draws(1), std)


def _derive_walk(m: ErrorModel) -> None:
    if m.has("random_walk_density"):
        k = m.value("random_walk_density").to(torch.float64)
        m.table("walk_std").copy_(m.value("random_walk").to(torch.float64) + k * math.sqrt(m.dt))


def _markov_args(m: ErrorModel) -> tuple:
    tables = (m.table("phi"), m.table("drive"), m.table("markov_sigma"))
    return (m.scratch, m.state("markov_state"), m.draws(2), *tables)


def _derive_markov(m: ErrorModel) -> None:
    f64 = torch.float64
    tau = m.value("bias_correlation_time").to(f64)
    phi = torch.where(tau > 0, torch.exp(-m.dt / torch.where(tau > 0, tau, 1.0)), 0.0)
    sigma_g = m.value("bias_instability").to(f64)
    m.table("phi").copy_(phi)
    m.table("drive").copy_(sigma_g * torch.sqrt(1.0 - phi * phi))
    m.table("markov_sigma").copy_(sigma_g)


def _noise_present(m: ErrorModel) -> bool:  # through the filter when the class has one
    return (m.can_be_nonzero("noise") or m.has("noise_density")) and not m.has("bandwidth")


def _noise_args(m: ErrorModel) -> tuple:
    return (m.scratch, m.draws(0), m.table("sigma") if m.has("noise_density") else m.value("noise"))


def _derive_noise(m: ErrorModel) -> None:
    """``sigma = noise + N / sqrt(T_s)`` per sample, where a density or a filter needs it."""
    if m.has("noise_density") or m.has("bandwidth"):
        sigma = m.value("noise").to(torch.float64)
        if m.has("noise_density"):
            sigma = sigma + m.value("noise_density").to(torch.float64) / m.sample_interval().sqrt()
        m.table("sigma").copy_(sigma)


def _lowpass_args(m: ErrorModel) -> tuple:
    # a sensor with an own rate: the filter advances on due samples (the update mask follows them)
    active = m.table("lowpass_active")
    update, due = active, None
    if m.follows_due:
        update, due = m.table("lowpass_update"), (m.sampler.due, m.column_sensor(), active)
    tables = (m.table("lowpass_gain"), m.table("lowpass_step_std"), m.table("lowpass_start_std"))
    return (m.scratch, m.draws(0), m.state("lowpass_state"), *tables, update, m.table("lowpass_spare"), due)


def _derive_lowpass(m: ErrorModel) -> None:
    """The filter's coefficients from the per-env ``f_c`` and ``T_s`` (after :func:`_derive_noise`'s
    ``sigma``): ``a = exp(-2 pi f_c T_s)``, ``m = max(dt / T_s, 1)`` own samples per step,
    ``gain = 1 - a^m``, the step's noise std ``sigma (1 - a) sqrt((1 - a^2m) / (1 - a^2))`` and the
    stationary std ``sigma sqrt((1 - a) / (1 + a))``; no filter: gain 1 and ``sigma`` for both."""
    f64 = torch.float64
    t_s = m.sample_interval()
    f_c = m.value("bandwidth").to(f64)
    active = f_c > 0
    x = 2.0 * math.pi * torch.where(active, f_c, 1.0) * t_s  # a = exp(-x): the decay per own sample
    steps = torch.clamp(m.dt / t_s, min=1.0)  # own samples per step (1 per due sample when T_s >= dt)
    sigma = m.table("sigma").to(f64)
    one_minus_a = -torch.expm1(-x)
    step_std = sigma * one_minus_a * torch.sqrt(torch.expm1(-2.0 * x * steps) / torch.expm1(-2.0 * x))
    start_std = sigma * torch.sqrt(one_minus_a / (2.0 - one_minus_a))  # (1 - a) / (1 + a)
    # no filter: y = 0 + 1 * (x - 0) + sigma * w, the unfiltered noise, in the same operation
    m.table("lowpass_gain").copy_(torch.where(active, -torch.expm1(-x * steps), 1.0))
    m.table("lowpass_step_std").copy_(torch.where(active, step_std, sigma))
    m.table("lowpass_start_std").copy_(torch.where(active, start_std, sigma))
    m.table("lowpass_active").copy_(active)


def _bias_args(m: ErrorModel) -> tuple:
    return (m.value("bias"),)


def _resolution_present(m: ErrorModel) -> bool:
    return m.can_be_nonzero("resolution") or m.params.components.resolution_all_active


def _resolution_args(m: ErrorModel) -> tuple:
    if m.params.components.resolution_all_active:
        return (m.value("resolution"), None, None)
    return (m.table("resolution_step"), m.table("resolution_active"), m.scratch)


def _derive_resolution(m: ErrorModel) -> None:
    """``resolution_active = r > 0``, ``resolution_step = r`` there and 1 elsewhere (a safe divisor), on
    the class's executor (the tables of a setter's or a reset's new values)."""
    xp, array = m.xp, m.array
    r, step, active = (
        array(m.value("resolution")),
        array(m.table("resolution_step")),
        array(m.table("resolution_active")),
    )
    xp.greater(r, 0, active)
    xp.copy(step, array(m.one))  # a safe divisor where off ...
    xp.select_into(step, active, r)  # ... r where on


def _widen_scale(lo: float, hi: float, option: Callable) -> tuple | None:
    k_lo, k_hi = option("scale_factor")
    if k_lo == 0.0 and k_hi == 0.0:
        return None
    products = [lo * g for g in (1 + k_lo, 1 + k_hi)] + [hi * g for g in (1 + k_lo, 1 + k_hi)]
    finite = [p for p in products if p == p]  # an infinite range times a gain: no NaN from 0 * inf here
    return min(finite), max(finite), 0.0


def _widen_keep(field: str) -> Callable:
    """A term that keeps a noise-free reading inside its input's range (the filter)."""
    return lambda lo, hi, option: (lo, hi, 0.0) if option(field)[1] > 0 else None


def _widen_bias(lo: float, hi: float, option: Callable) -> tuple | None:
    b_lo, b_hi = option("bias")
    if not (math.isfinite(b_lo) and math.isfinite(b_hi)):
        return -math.inf, math.inf, 0.0
    if b_lo == 0.0 and b_hi == 0.0:
        return None
    return lo + b_lo, hi + b_hi, max(abs(b_lo), abs(b_hi))


def _widen_resolution(lo: float, hi: float, option: Callable) -> tuple | None:
    r = option("resolution")[1]
    return (lo - r / 2, hi + r / 2, r) if r > 0 else None


#: the built-in terms in the order they run (docs/error_model.md): white noise and the low-pass filter
#: stand at one place (a class with a filter runs its noise through it; the noise term is then absent)
# fmt: off
TERMS: list[Term] = [
    Term("scale_factor", ("scale_factor",), _scale, _scale_args, tables=("scale",), derive=_derive_scale,
         widen=_widen_scale),
    Term(
        "random_walk",
        ("random_walk", "random_walk_density"),
        _walk,
        _walk_args,
        present=_walk_present,
        tables=("walk_std",),
        state=("random_walk_state",),
        derive=_derive_walk,
        draws=1,
        restarts=True,
    ),
    Term(
        "bias_instability",
        ("bias_instability", "bias_correlation_time"),
        _markov,
        _markov_args,
        tables=("phi", "drive", "markov_sigma"),
        state=("markov_state",),
        derive=_derive_markov,
        follows=("bias_correlation_time",),
        draws=2,
        restarts=True,
    ),
    Term(
        "white_noise",
        ("noise", "noise_density"),
        _noise,
        _noise_args,
        present=_noise_present,
        tables=("sigma",),
        derive=_derive_noise,
        depends=("update_period",),
        draws=0,
    ),
    Term(
        "lowpass",
        ("bandwidth",),
        _lowpass,
        _lowpass_args,
        tables=(
            "lowpass_gain",
            "lowpass_step_std",
            "lowpass_start_std",
            "lowpass_active",
            "lowpass_update",
            "lowpass_spare",
        ),
        state=("lowpass_state",),
        derive=_derive_lowpass,
        depends=("noise", "noise_density", "update_period"),
        draws=0,
        restarts=True,
        table_dtypes=(("lowpass_active", torch.bool), ("lowpass_update", torch.bool)),
        widen=_widen_keep("bandwidth"),
    ),
    Term(
        "replay",
        (),
        _replay.apply,
        _replay.bind,
        present=_replay.present,
        tables=("replay_step", "replay_due", "replay_wrapped", "replay_flat"),
        state=("replay_index",),
        derive=_replay.derive,
        samples=True,
        table_dtypes=(("replay_step", torch.long), ("replay_due", torch.bool), ("replay_wrapped", torch.long),
                      ("replay_flat", torch.long)),
        state_dtypes=(("replay_index", torch.long),),
        settings=("replay", "replay_channels"),
        setup=_replay.setup,
        redraw=_replay.redraw,
    ),
    Term("bias", ("bias",), _bias, _bias_args, widen=_widen_bias),
    Term(
        "resolution",
        ("resolution",),
        _resolution,
        _resolution_args,
        present=_resolution_present,
        tables=("resolution_step", "resolution_active"),
        derive=_derive_resolution,
        table_dtypes=(("resolution_active", torch.bool),), widen=_widen_resolution,
    ),
]
# fmt: on


#: the stages after the hardware imperfections: records of the same shape as the terms, run after every
#: term on the whole measured sample (e.g. an attitude estimator that reads the IMU's measured samples and
#: writes its estimate into the sensor's output columns); empty by default
STAGES: list[Term] = []


def register_stage(stage: Term) -> None:
    """Add ``stage`` after the hardware imperfections (after every term and the stages registered before
    it): every manager built afterwards runs it for the sensors whose options have its fields."""
    if any(t.name == stage.name for t in (*TERMS, *STAGES)):
        raise ValueError(f"register_stage: {stage.name!r} exists. Fix: give the stage another name.")
    STAGES.append(stage)


def register_term(term: Term, *, before: str | None = None, after: str | None = None) -> None:
    """Add ``term`` to :data:`TERMS`, before or after the term of that name (default: last). Every manager
    built afterwards runs it for the sensors whose options have its fields."""
    names = [t.name for t in TERMS]
    if term.name in names:
        raise ValueError(f"register_term: a term named {term.name!r} exists. Fix: give it another name.")
    anchor = before if before is not None else after
    if anchor is not None and anchor not in names:
        raise ValueError(f"register_term(before/after={anchor!r}): no such term; known: {names}.")
    at = len(TERMS) if anchor is None else names.index(anchor) + (after is not None)
    TERMS.insert(at, term)


def unregister_term(name: str) -> None:
    """Remove the term or stage ``name`` added by :func:`register_term` or :func:`register_stage`."""
    TERMS[:] = [t for t in TERMS if t.name != name]
    STAGES[:] = [t for t in STAGES if t.name != name]


def component_options() -> tuple[str, ...]:
    """Every per-component option field the error terms read: the ones a setter changes first, then the
    others in the order the options, checkpoints and critic columns have kept them, then any other
    term's in :data:`TERMS` order."""
    fields = [name for term in (*TERMS, *STAGES) for name in term.options]
    return tuple(sorted(fields, key=lambda f: _ORDER.index(f) if f in _ORDER else len(_ORDER)))


#: the built-in terms' options in the order they have had since before the terms were records
_ORDER = (
    "noise", "bias", "random_walk", "resolution", "noise_density", "random_walk_density", "bias_instability",
    "bias_correlation_time", "scale_factor", "bandwidth",
)  # fmt: skip
