"""The plan of one sensor class: what its sensors' options ask of the engine, read once.

At build, :class:`ClassPlan` reads the options of every sensor of a class, the one place the engine
reads them: per sensor a :class:`SensorPlan` (its columns, time options, sampler options, per-component
values of the error terms' options, history, padding and non-finite policy, the ring depth its delay can
reach, its fixed sample interval) and, for the class, what its components are built from (which error
options get a per-env table, whether it needs a sampler, its history length, the one delay shift of every
env while nothing can vary). The class's parameter table, sampler, error model, delay line, NaN policy
and padding receive the plan, never the options.

Example:
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.02)
    >>> _ = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), delay=0.04, noise_density=1e-3))
    >>> _ = mgr.add_sensor(sg.StateSensorOptions(key="y", shape=(1,), update_period=0.05, dropout=0.1))
    >>> mgr.reset({"x": torch.zeros(2, 3), "y": torch.zeros(2, 1)})
    >>> plan = mgr.storage(sg.StateSensor).class_plan
    >>> plan.fields, plan.needs_sampler, [s.deepest_shift for s in plan.sensors]
    (('noise', 'bias', 'random_walk', 'resolution', 'noise_density'), True, [2, 0])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import terms as _terms
from .delay_law import delay_steps, jitter_extra_steps
from .options import SimpleSensorOptions, bounds_of
from .randomization import Distribution

__all__ = ["COMPONENT_FIELDS", "ClassPlan", "SensorPlan", "deepest_shift", "needs_sampler"]

#: the per-component options a setter can switch on at run time: a floating class always holds their tables
COMPONENT_FIELDS = ("noise", "bias", "random_walk", "resolution")
#: options whose effect depends on the sensor's own sample interval ``T_s``
RATE_DEPENDENT = ("noise_density", "bandwidth")


def deepest_shift(delay: Any, jitter: Any, max_delay: float | None, dt: float) -> int:
    """The deepest delay + jitter shift (steps) a sensor's options can reach: what its ring must hold."""
    d_hi = bounds_of(delay)[1]
    j_hi = min(bounds_of(jitter)[1], d_hi)
    shift = delay_steps(d_hi, dt) + jitter_extra_steps(j_hi, dt)
    if max_delay is not None:
        shift = max(shift, jitter_extra_steps(max_delay, dt) + 1)
    return shift


def _components(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


@dataclass(frozen=True)
class SensorPlan:
    """What one sensor's options ask of its class (read once, at build).

    Attributes:
        name, index: the sensor's name and its place among its class's sensors (column order).
        cache_slice, return_slice: its intermediate and return columns within the class.
        sensor_type, option_type: the names of its sensor and options classes (for messages).
        delay, jitter, max_delay, update_period, update_phase, dropout, dropout_burst: its time options.
        history_length, padding_type, nan_policy: its read options.
        simple: whether its options carry the error terms' options (``SimpleSensorOptions``).
        values: per error option the class holds a table of, the value as the options give it (a number,
            one per component, or a distribution).
        deepest_shift: the deepest delay + jitter shift (steps) its options reach.
        sample_interval: its own sample interval ``T_s`` where ``update_period`` is a number: the period
            when > 0, else ``dt``.
        needs_sampler: whether it can skip a step's sample (``T > dt``, ``dropout > 0``) or its error terms
            need a per-env ``T_s`` drawn from an ``update_period`` distribution.
        settings: the error terms' non-numeric options it gives (a term's ``settings``: ``replay``,
            ``replay_channels``), as the options hold them; absent where not given.
    """

    name: str
    index: int
    cache_slice: slice
    return_slice: slice
    sensor_type: str
    option_type: str
    delay: Any
    jitter: Any
    max_delay: float | None
    update_period: Any
    update_phase: Any
    dropout: Any
    dropout_burst: Any
    history_length: int
    padding_type: str
    nan_policy: str
    simple: bool
    values: dict[str, Any] = field(default_factory=dict)
    deepest_shift: int = 0
    sample_interval: float = 0.0
    needs_sampler: bool = False
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def width(self) -> int:
        """Intermediate columns of the sensor."""
        return self.cache_slice.stop - self.cache_slice.start


@dataclass(frozen=True)
class ClassPlan:
    """What a class's sensors' options ask of the engine (see the module docstring).

    Attributes:
        sensors: one :class:`SensorPlan` per sensor, in column order.
        dt: the control step.
        fields: the error options the class holds per-env tables of: :data:`COMPONENT_FIELDS` (a setter can
            switch them on) for a class with error options, then the others some sensor can make non-zero
            (a term's ``follows`` options with its first), in the order of the randomization columns.
        simple: whether some sensor has the error terms' options.
        needs_sampler, has_rate, has_dropout, has_burst: the sampler the class needs.
        history_length: the deepest history a sensor of the class keeps.
        fixed_shift: the one delay shift (steps) of every env and sensor while nothing can vary (no jitter,
            no randomized or per-sensor delays), else None.
        has_jitter: whether some jitter can be non-zero.
        resolution_all_active: whether every component is quantized.
    """

    sensors: tuple[SensorPlan, ...]
    dt: float
    fields: tuple[str, ...]
    simple: bool
    needs_sampler: bool
    has_rate: bool
    has_dropout: bool
    has_burst: bool
    history_length: int
    fixed_shift: int | None
    has_jitter: bool
    resolution_all_active: bool

    @classmethod
    def build(cls, sensors: list, dt: float) -> ClassPlan:
        """Read the options of ``sensors`` (built: their columns are placed) once."""
        simple = any(isinstance(s.options, SimpleSensorOptions) for s in sensors)
        fields = (*COMPONENT_FIELDS, *_used_fields(sensors)) if simple else ()
        plans = tuple(_sensor_plan(s, fields, dt) for s in sensors)
        jitter = any(bounds_of(p.jitter)[1] > 0 for p in plans)
        delays = {p.delay for p in plans}
        randomized_delay = any(isinstance(p.delay, Distribution) for p in plans)
        one_delay = not jitter and not randomized_delay and len(delays) == 1
        fixed = delay_steps(next(iter(delays)), dt) if one_delay else None
        has_dropout = any(bounds_of(p.dropout)[1] > 0 for p in plans)
        return cls(
            sensors=plans,
            dt=dt,
            fields=fields,
            simple=simple,
            needs_sampler=any(p.needs_sampler for p in plans),
            has_rate=any(bounds_of(p.update_period)[1] > dt for p in plans),
            has_dropout=has_dropout,
            has_burst=has_dropout and any(p.dropout_burst is not None for p in plans),
            history_length=max(p.history_length for p in plans),
            fixed_shift=fixed,
            has_jitter=jitter,
            resolution_all_active=simple
            and all(bounds_of(v)[0] > 0 for p in plans for v in _components(p.values.get("resolution", 0.0))),
        )

    def rate_dependent(self) -> bool:
        """Whether the class holds a table of an option that follows ``T_s`` (a density, a bandwidth)."""
        return any(f in self.fields for f in RATE_DEPENDENT)


def _sensor_plan(sensor: Any, fields: tuple[str, ...], dt: float) -> SensorPlan:
    o = sensor.options
    simple = isinstance(o, SimpleSensorOptions)
    values = {name: getattr(o, name, 0.0) for name in fields} if simple else {}
    names = (name for term in (*_terms.TERMS, *_terms.STAGES) for name in term.settings)
    settings = {name: getattr(o, name) for name in names if getattr(o, name, None) is not None}
    period = o.update_period
    return SensorPlan(
        name=sensor.name,
        index=sensor.index,
        cache_slice=sensor.cache_slice,
        return_slice=sensor.return_slice,
        sensor_type=type(sensor).__name__,
        option_type=type(o).__name__,
        delay=o.delay,
        jitter=o.jitter,
        max_delay=o.max_delay,
        update_period=period,
        update_phase=o.update_phase,
        dropout=o.dropout,
        dropout_burst=o.dropout_burst,
        history_length=o.history_length,
        padding_type=o.padding_type,
        nan_policy=o.nan_policy,
        simple=simple,
        values=values,
        deepest_shift=deepest_shift(o.delay, o.jitter, o.max_delay, dt),
        sample_interval=float(period) if not isinstance(period, Distribution) and period > 0 else dt,
        needs_sampler=needs_sampler(o, dt),
        settings=settings,
    )


def needs_sampler(options: Any, dt: float) -> bool:
    """Whether a sensor needs a sampler: its options can skip a step's sample (``T > dt`` or
    ``dropout > 0``), or its error terms need a per-env sample interval drawn from an ``update_period``
    distribution (``noise_density`` or ``bandwidth`` with a randomized rate below ``dt``)."""
    if bounds_of(options.update_period)[1] > dt or bounds_of(options.dropout)[1] > 0:
        return True
    period = options.update_period
    return isinstance(period, Distribution) and any(
        bounds_of(v) != (0.0, 0.0)
        for name in RATE_DEPENDENT
        for v in _components(getattr(options, name, 0.0))
    )


def _used_fields(sensors: list) -> tuple[str, ...]:
    """The other options of the error terms (and stages) that some sensor can make non-zero: only those get
    a table, so a class without them holds and saves nothing more. A term's ``follows`` options (a
    correlation time) come with its first; the order is the randomization columns' and checkpoints'."""

    def used(name: str) -> bool:
        return any(
            bounds_of(v) != (0.0, 0.0)
            for s in sensors
            if isinstance(s.options, SimpleSensorOptions)
            for v in _components(getattr(s.options, name, 0.0))
        )

    found: list[str] = []
    for term in (*_terms.TERMS, *_terms.STAGES):
        for name in term.options:
            if name in COMPONENT_FIELDS or name in term.follows:
                continue
            if used(name):
                found.append(name)
                if name == term.options[0]:
                    found += list(term.follows)
    order = _terms.component_options()
    return tuple(sorted(found, key=order.index))
