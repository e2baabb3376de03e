"""The parameter table of one sensor class: per-env values of every option that may vary per env.

A :class:`ParameterTable` owns, per env, the ``delay`` and ``jitter`` of every sensor (seconds,
``(B, n_sensors)``) and the ``noise``, ``bias``, ``random_walk`` and ``resolution`` of every component
(``(B, cols)``, floating classes only), the tables derived from them (delay in steps, effective jitter,
quantization steps), and everything that writes them:

* domain randomization: an option given as a distribution is sampled per env at every reset of that env
  (:meth:`resample`; delay and jitter once per sensor, the others once per component) and held for the
  episode; :meth:`randomization` reads the values back for a critic;
* the run-time setters (:meth:`set_component`, :meth:`set_time`), which validate their input first;
* flags that say which imperfections can ever be non-zero (``has_noise`` ...), from which the capture's
  stages are planned at build and re-planned after a setter.

The state lives in three records, each with one responsibility: a :class:`TimeTable` (delay and jitter per
sensor, their step tables and the flags of the delayed read), a :class:`ComponentTable` (one table per
per-component field, which of them can be non-zero) and, per field given as a distribution, a
:class:`RandomizedField` (its distributions and the buffers its resample works in); each value is read
through its record (``table.times.delay_steps``, ``table.components.values["noise"]``).

The delay rule itself is ``D = round(delay / dt)`` (half to even); the effective jitter is
``min(jitter, delay) / dt`` steps and can add at most ``ceil(jitter / dt)`` steps.

Example:
    >>> import torch, sensorgym as sg
    >>> from sensorgym.core.parameters import ParameterTable
    >>> from sensorgym.core.plan import ClassPlan
    >>> opts = sg.StateSensorOptions(key="x", shape=(2,), delay=0.04, noise=(0.1, 0.2))
    >>> class S:  # a stand-in for a built sensor: its options and its columns
    ...     options, cache_slice, return_slice, index, name = opts, slice(0, 2), slice(0, 2), 0, "x"
    >>> plan = ClassPlan.build([S()], dt=0.02)
    >>> table = ParameterTable(plan, num_envs=3, device=torch.device("cpu"), random=None,
    ...                        param_dtype=torch.float32)
    >>> table.times.delay_steps[:, 0].tolist(), table.components.values["noise"][0].tolist()
    ([2, 2, 2], [0.10000000149011612, 0.20000000298023224])
    >>> table.times.fixed_shift
    2
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .delay_law import JITTER_CEIL_TOLERANCE, delay_steps, seconds_to_steps
from .options import _can_be_nonzero, _per_component
from .plan import COMPONENT_FIELDS
from .randomization import Distribution
from .xp import TORCH, Binding

if TYPE_CHECKING:
    from .plan import ClassPlan
    from .protocols import SensorHandle as Sensor
    from .rng import RandomSource

__all__ = [
    "COMPONENT_FIELDS",
    "TIME_FIELDS",
    "ComponentTable",
    "ParameterTable",
    "RandomizedField",
    "TimeTable",
]

TIME_FIELDS = ("delay", "jitter")
_NON_NEGATIVE = ("noise", "random_walk", "resolution", "delay", "jitter")
#: the flags a checkpoint carries (they say which imperfections a setter has switched on)
FLAG_NAMES = (
    "has_noise",
    "has_bias",
    "has_random_walk",
    "has_resolution",
    "has_jitter",
    "resolution_all_active",
    "uniform_shift",
)


def _components(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


class TimeTable:
    """The per-env delay and jitter of every sensor of one class, ``(B, n_sensors)``.

    Holds the values in seconds (what the options, randomization and :meth:`ParameterTable.set_time`
    write), the step tables derived from them (``delay_steps``, the effective ``jitter_steps``, its ceiling
    ``jitter_ceil`` and ``jitter_steps_f32``), the scratch of the conversion, and the two flags the delayed
    read is planned from: ``has_jitter`` (some jitter can be non-zero) and ``fixed_shift`` (the one shift
    of every env and sensor while it cannot vary, else None; the checkpoint flag ``uniform_shift``). The
    class's :class:`~sensorgym.core.delay_line.DelayLine` reads it every step, through the interface of
    :class:`~sensorgym.core.delay_line.DelaySteps`.
    """

    def __init__(self, num_envs: int, n: int, device: torch.device) -> None:
        f64 = dict(dtype=torch.float64, device=device)
        self.delay_seconds = torch.zeros(num_envs, n, **f64)
        self.jitter_seconds = torch.zeros(num_envs, n, **f64)
        self.delay_steps = torch.zeros(num_envs, n, dtype=torch.long, device=device)
        self.jitter_steps = torch.zeros(num_envs, n, **f64)  # effective: min(jitter, delay) / dt
        self.jitter_ceil = torch.zeros(num_envs, n, dtype=torch.long, device=device)
        self.jitter_steps_f32 = torch.zeros(num_envs, n, dtype=torch.float32, device=device)
        self.scratch = torch.zeros(num_envs, n, **f64)
        self.has_jitter = False
        # the one delay shift of every env and sensor while it cannot vary (no jitter, no randomized or
        # per-sensor delays, no setter call yet): the delayed read is then one slot copy
        self.fixed_shift: int | None = None

    def seconds(self, name: str) -> torch.Tensor:
        """The ``(B, n_sensors)`` seconds of ``"delay"`` or ``"jitter"``."""
        return self.delay_seconds if name == "delay" else self.jitter_seconds


class ComponentTable:
    """The per-env values of the per-component options of one sensor class, ``(B, cols)``.

    One table per field in :attr:`values` (``noise``, ``bias``, ``random_walk``, ``resolution``, and the
    error-model fields of :attr:`model_fields`: those some sensor of the class can make non-zero), whether
    each field can be non-zero (:attr:`nonzero`: the flags the error terms are planned from), and
    ``resolution_all_active`` (every component quantized: no mask needed; the quantization tables are the
    resolution term's, :mod:`sensorgym.core.terms`). A class without floating components (``dtype`` None)
    allocates no table and keeps its flags False.
    """

    def __init__(
        self, plan: ClassPlan, num_envs: int, cols: int, dtype: torch.dtype | None, device: torch.device
    ) -> None:
        self.dtype = dtype
        self.values: dict[str, torch.Tensor] = {}
        self.nonzero: dict[str, bool] = dict.fromkeys(COMPONENT_FIELDS, False)
        #: the error terms' other fields with a table: some sensor's options can make them non-zero
        self.model_fields: tuple[str, ...] = ()
        self.resolution_all_active = False
        if dtype is not None:
            p = dict(dtype=dtype, device=device)
            for name in plan.fields:
                self.values[name] = torch.zeros(num_envs, cols, **p)
            self.model_fields = plan.fields[len(COMPONENT_FIELDS) :]
            for name in self.model_fields:
                self.nonzero[name] = False
            self.resolution_all_active = plan.resolution_all_active


class RandomizedField:
    """The options of one field given as distributions, and the buffers a resample of that field works in.

    ``entries`` lists ``(columns, distribution)`` in the order the options gave them; after
    :meth:`allocate`, ``columns`` marks the table columns drawn (bool, one per column), ``draws`` is the
    scratch the distributions fill (the table's shape), ``draw_views`` pairs each distribution with its
    columns of ``draws``, and ``rows`` is where a resample writes (envs of the mask x drawn columns).
    """

    def __init__(self) -> None:
        self.entries: list[tuple[slice, Distribution]] = []
        self.columns: torch.Tensor | None = None
        self.draws: torch.Tensor | None = None
        self.rows: torch.Tensor | None = None
        self.draw_views: list[tuple[torch.Tensor, Distribution]] = []

    def allocate(self, like: torch.Tensor) -> None:
        """Make the buffers for a table shaped like ``like``."""
        self.columns = torch.zeros(like.shape[1], dtype=torch.bool, device=like.device)
        for sl, _ in self.entries:
            self.columns[sl] = True
        self.draws = torch.zeros_like(like)
        self.rows = torch.zeros(like.shape, dtype=torch.bool, device=like.device)
        self.draw_views = [(self.draws[:, sl], dist) for sl, dist in self.entries]


class ParameterTable:
    """Per-env option values of one sensor class (see the module docstring).

    The values live in three records, each read through its own name: :attr:`times` (a :class:`TimeTable`:
    delay and jitter per sensor, ``times.delay_steps``, ``times.fixed_shift``, ...), :attr:`components` (a
    :class:`ComponentTable`: ``components.values["noise"]``, ``components.nonzero["noise"]``, ...) and, per
    field given as a distribution, a :class:`RandomizedField`.

    Args:
        plan: the class's plan (:class:`~sensorgym.core.plan.ClassPlan`: its sensors' options, read once).
        num_envs, device, random: the manager's.
        param_dtype: dtype of the per-component tables, None for a class without them.
    """

    def __init__(
        self,
        plan: ClassPlan,
        num_envs: int,
        device: torch.device,
        random: RandomSource | None,
        param_dtype: torch.dtype | None,
        binding: Binding | None = None,
    ) -> None:
        #: the class's plan (its options, read once) and its sensors' part of it
        self.plan, self.sensors = plan, plan.sensors
        self.dt, self.device, self.random = plan.dt, device, random
        sensor_cols = [s.width for s in plan.sensors]
        #: the executor of refresh_derived and resample (the class's: torch, or numpy on views); the draws
        #: themselves always come from the torch generator (one random stream for both)
        self.binding = binding if binding is not None else Binding("torch")
        self.xp = self.binding.xp
        self._views: dict[str, Any] | None = None  # see _arrays
        self.times = TimeTable(num_envs, len(plan.sensors), device)
        self.components = ComponentTable(plan, num_envs, sum(sensor_cols), param_dtype, device)
        #: field -> its options given as distributions and the buffers of their resample
        self._random: dict[str, RandomizedField] = {}
        self._init_from_options(sensor_cols)

    def has_component_params(self) -> bool:
        """Whether the class has per-component tables (noise, bias, ...: a floating intermediate dtype)."""
        return self.components.dtype is not None

    # -- construction ----------------------------------------------------------------------------------
    def _init_from_options(self, sensor_cols: list[int]) -> None:
        """The values of the plan (numbers into the tables, distributions into the randomized fields)."""
        for j, s in enumerate(self.sensors):
            for name in TIME_FIELDS:
                self._init_time(j, s, name, getattr(s, name))
            if s.simple:
                if not self.has_component_params():
                    raise TypeError(
                        f"sensor {s.name!r}: {s.option_type} has noise/bias/random_walk/resolution but its "
                        "sensor class has a non-floating intermediate dtype. Fix: declare a floating "
                        "_get_intermediate_dtype and project in _post_process."
                    )
                for name in COMPONENT_FIELDS + self.components.model_fields:
                    self._init_component(s, name, s.values[name], sensor_cols[j])
        self.times.fixed_shift = self.plan.fixed_shift
        for name, field in self._random.items():
            like = self.times.delay_seconds if name in TIME_FIELDS else self.components.values["noise"]
            field.allocate(like)
        self.refresh_derived()

    def _init_time(self, j: int, s: Sensor, name: str, value: float | Distribution) -> None:
        if isinstance(value, Distribution):
            self._random.setdefault(name, RandomizedField()).entries.append((slice(j, j + 1), value))
            hi = value.bounds[1]
        else:
            self._param(name)[:, j] = value
            hi = value
            if name == "delay":
                self._warn_delay(s, value)
        if name == "jitter" and hi > 0:
            self.times.has_jitter = True

    def _warn_delay(self, s: Sensor, seconds: float) -> None:
        steps = seconds / self.dt
        if abs(steps - round(steps)) > 1e-6:
            d = delay_steps(seconds, self.dt)
            warnings.warn(
                f"sensor {s.name!r}: delay={seconds:g} s is not a multiple of dt={self.dt:g} s; it is "
                f"rounded to {d} step(s) = {d * self.dt:g} s.",
                stacklevel=4,
            )

    def _init_component(self, s: Sensor, name: str, value: Any, ncomp: int) -> None:
        sl = s.cache_slice
        if isinstance(value, tuple):
            if len(value) not in (1, ncomp):
                raise ValueError(
                    f"{s.option_type}.{name} has {len(value)} values but sensor {s.name!r} "
                    f"has {ncomp} components. Fix: give one value (all components) or exactly {ncomp}."
                )
            if len(value) == 1:
                value = value[0]
        values = value if isinstance(value, tuple) else (value,) * ncomp
        for i, v in enumerate(values):
            col = slice(sl.start + i, sl.start + i + 1)
            if isinstance(v, Distribution):
                self._random.setdefault(name, RandomizedField()).entries.append((col, v))
                lo, hi = v.bounds
                nonzero = lo != 0.0 or hi != 0.0
            else:
                self._param(name)[:, col] = v
                nonzero = v != 0.0
            if nonzero:
                self.components.nonzero[name] = True

    # -- derived tables --------------------------------------------------------------------------------
    def bind(self) -> None:
        """Take the tables again through the class's binding (when the class plans: after a setter, a
        checkpoint, a copy)."""
        self._views = None

    def _arrays(self) -> dict[str, Any]:
        """The tables :meth:`refresh_derived` and :meth:`resample` work on, as the executor's arrays: the
        tensors themselves, or numpy views of them, taken once per plan (tensors are written in place)."""
        if self._views is None:
            t = self.times
            tensors = {
                "delay_seconds": t.delay_seconds, "jitter_seconds": t.jitter_seconds,
                "delay_steps": t.delay_steps, "jitter_steps": t.jitter_steps, "jitter_ceil": t.jitter_ceil,
                "jitter_steps_f32": t.jitter_steps_f32, "_time_scratch": t.scratch,
            }  # fmt: skip
            for name, field in self._random.items():
                tensors[f"{name}.value"] = self._param(name)
                tensors[f"{name}.draws"] = field.draws
                tensors[f"{name}.columns"] = field.columns[None, :]
                tensors[f"{name}.rows"] = field.rows
            self._views = {k: self.binding.array(v) for k, v in tensors.items()}
        return self._views

    def refresh_derived(self, changed: Iterable[str] | None = None) -> None:
        """Recompute delay steps, effective jitter and the quantization tables from the values; ``changed``:
        the fields that changed (only what derives from them is recomputed), None for all."""
        xp, a = self.xp, self._arrays()
        changed = None if changed is None else set(changed)
        if changed is None or not changed.isdisjoint(TIME_FIELDS):
            seconds_to_steps(
                xp, self.dt, a["delay_seconds"], a["jitter_seconds"], scratch=a["_time_scratch"],
                steps=a["delay_steps"], jitter_steps=a["jitter_steps"], jitter_ceil=a["jitter_ceil"],
                jitter_steps_f32=a["jitter_steps_f32"],
            )  # fmt: skip

    def max_shift_per_sensor(self) -> list[int]:
        """The deepest delay + jitter shift each sensor can reach from its options (ring sizing)."""
        return [s.deepest_shift for s in self.sensors]

    # -- randomization ---------------------------------------------------------------------------------
    def resample(self, mask: torch.Tensor) -> None:
        """Draw new values of every option given as a distribution for the envs in ``mask`` (B,) bool."""
        if not self._random:
            return
        xp, a = self.xp, self._arrays()
        envs = (mask if xp is TORCH else mask.numpy())[:, None]
        for name, field in self._random.items():
            # from the torch generator on either executor: one random stream
            for out, dist in field.draw_views:
                self.random.sample_(dist, out, mask, 0)
            rows = a[f"{name}.rows"]
            xp.logical_and(envs, a[f"{name}.columns"], rows)
            xp.select_into(a[f"{name}.value"], rows, a[f"{name}.draws"])
        # at every autoreset: recompute only what derives from the fields drawn (often noise or bias: none)
        self.refresh_derived(self._random)

    def _param(self, name: str) -> torch.Tensor:
        if name in TIME_FIELDS:
            return self.times.seconds(name)
        return self.components.values[name]

    def randomized_components(self, s: Sensor) -> dict[str, list[int]]:
        """``{field: [component, ...]}`` of the options of ``s`` given as distributions (delay and
        jitter: ``[0]``, one value per sensor), in the column order of :meth:`randomization`."""
        out: dict[str, list[int]] = {}
        j, sl = s.index, s.cache_slice
        for name, field in self._random.items():
            entries = field.entries
            if name in TIME_FIELDS:
                if any(cols.start == j for cols, _ in entries):
                    out[name] = [0]
            else:
                comps = sorted(c.start - sl.start for c, _ in entries if sl.start <= c.start < sl.stop)
                if comps:
                    out[name] = comps
        return out

    def randomization(self, s: Sensor) -> dict[str, torch.Tensor]:
        """``{field: (B, k)}`` effective per-env values of the options of ``s`` given as distributions."""
        out: dict[str, torch.Tensor] = {}
        j = s.index
        for name, comps in self.randomized_components(s).items():
            if name == "delay":
                out[name] = self.times.delay_steps[:, j : j + 1].to(torch.float32) * self.dt
            elif name == "jitter":
                out[name] = (self.times.jitter_steps[:, j : j + 1] * self.dt).to(torch.float32)
            else:
                idx = torch.tensor([s.cache_slice.start + c for c in comps], device=self.device)
                out[name] = self._param(name).index_select(1, idx).to(torch.float32)
        return out

    # -- run-time setters ------------------------------------------------------------------------------
    def _as_values(
        self, s: Sensor, name: str, value: Any, shape: tuple[int, int], dtype: torch.dtype
    ) -> torch.Tensor:
        if isinstance(value, Distribution):
            raise TypeError(
                f"{type(s).__name__}.set_{name}({value!r}): setters take values, not distributions. Fix: "
                f"give the distribution in the options ({name}=...) to resample it at every reset."
            )
        try:
            v = torch.as_tensor(np.asarray(value) if not torch.is_tensor(value) else value)
            v = v.to(device=self.device, dtype=dtype)
            v = torch.broadcast_to(v, shape)
        except (RuntimeError, TypeError, ValueError) as e:
            raise ValueError(
                f"{type(s).__name__}.set_{name}: value of shape {tuple(np.shape(value))} cannot be "
                f"broadcast to (n_envs={shape[0]}, components={shape[1]}). Fix: pass a scalar, one value "
                "per component, or an (n_envs, components) array."
            ) from e
        if not bool(torch.isfinite(v).all()):
            raise ValueError(f"{type(s).__name__}.set_{name}({value!r}): values must be finite.")
        if name in _NON_NEGATIVE and bool((v < 0).any()):
            raise ValueError(
                f"{type(s).__name__}.set_{name}({value!r}): {name} must be >= 0. Fix: use 0.0 to turn it off."
            )
        return v

    def set_component(self, s: Sensor, name: str, value: Any, rows: torch.Tensor) -> None:
        """``noise``/``bias``/``random_walk``/``resolution`` of sensor ``s`` for the envs ``rows``."""
        target = self._param(name)
        sl = s.cache_slice
        v = self._as_values(s, name, value, (len(rows), sl.stop - sl.start), target.dtype)
        density = f"{name}_density"
        if density in self.components.model_fields:
            # what the options constructor refuses: both can be non-zero on a component. The density the
            # envs drew now is not enough: a distribution that drew 0 draws again at the next reset
            given = self.sensors[s.index].values.get(density, 0.0)
            can = [_can_be_nonzero(c) for c in _per_component(given)]
            width = sl.stop - sl.start
            can_density = torch.tensor(can * width if len(can) == 1 else can, device=v.device)
            if bool(((v != 0) & can_density).any()):
                raise ValueError(
                    f"{type(s).__name__}.set_{name}({value!r}): sensor {s.name!r} has "
                    f"{density}={given!r} on these components, and {name} and "
                    f"{density} are two units of the same error term. Fix: set {name} only on components "
                    f"whose {density} is 0 in the options, or give {name} in the options instead."
                )
        target[rows, sl] = v
        components = self.components
        if bool((v != 0).any()):
            components.nonzero[name] = True
        if name == "resolution":
            components.resolution_all_active = bool((components.values["resolution"] > 0).all())
        self.refresh_derived()

    def set_time(self, s: Sensor, name: str, value: Any, rows: torch.Tensor, max_shift: int) -> None:
        """``delay``/``jitter`` (seconds) of sensor ``s`` for the envs ``rows``; refuses a value whose
        shift would not fit the ring (``max_shift`` steps) or a jitter above the delay. Afterwards the
        shift is no longer fixed (:attr:`fixed_shift` is None)."""
        j = s.index
        if not isinstance(value, Distribution) and np.ndim(value) == 1:
            value = np.asarray(value)[:, None]  # one value per selected env
        v = self._as_values(s, name, value, (len(rows), 1), torch.float64)[:, 0]
        delay = v if name == "delay" else self.times.delay_seconds[rows, j]
        jitter = v if name == "jitter" else self.times.jitter_seconds[rows, j]
        if bool((jitter > delay + 1e-12).any()):
            raise ValueError(
                f"{type(s).__name__}.set_{name}: jitter {jitter.tolist()} exceeds delay {delay.tolist()} "
                f"for sensor {s.name!r}; jitter must satisfy 0 <= jitter <= delay. Fix: set the delay "
                "first or lower the jitter."
            )
        limit = self.sensors[s.index].max_delay
        if limit is not None and bool((delay + jitter > limit + 1e-12).any()):
            raise ValueError(
                f"{type(s).__name__}.set_{name}: delay + jitter {(delay + jitter).tolist()} exceeds "
                f"max_delay={limit:g} of sensor {s.name!r}. Fix: raise max_delay in its options."
            )
        shift = torch.round(delay / self.dt).long() + torch.ceil(
            jitter / self.dt - JITTER_CEIL_TOLERANCE
        ).clamp(min=0)
        deepest = int(shift.max()) if len(rows) else 0
        if deepest > max_shift:
            raise ValueError(
                f"{type(s).__name__}.set_{name}: sensor {s.name!r} would need a shift of {deepest} steps "
                f"(delay + jitter) but its ring was sized for {max_shift}. Fix: declare the largest value "
                f"in the options, e.g. max_delay={deepest * self.dt:g}, or a delay distribution."
            )
        if name == "delay":
            for sec in {float(x) for x in v.tolist()}:
                self._warn_delay(s, sec)
        times = self.times
        times.fixed_shift = None
        times.seconds(name)[rows, j] = v
        if name == "jitter" and bool((v > 0).any()):
            times.has_jitter = True
        self.refresh_derived()

    # -- persistence -----------------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The values (the derived tables are recomputed on load)."""
        out = {"delay_seconds": self.times.delay_seconds, "jitter_seconds": self.times.jitter_seconds}
        out.update(self.components.values)  # COMPONENT_FIELDS, then model_fields (none without a dtype)
        return out

    def parameter_tensors(self) -> tuple[torch.Tensor, ...]:
        """The per-env option values (what randomization and setters write)."""
        return tuple(self.state_tensors().values())

    def flags(self) -> dict[str, Any]:
        """The flags a checkpoint carries, under their checkpoint names (:data:`FLAG_NAMES`)."""
        c, t = self.components, self.times
        out = {f"has_{name}": c.nonzero[name] for name in COMPONENT_FIELDS}
        out.update(has_jitter=t.has_jitter, resolution_all_active=c.resolution_all_active)
        out["uniform_shift"] = t.fixed_shift
        return out

    def load_flags(self, flags: dict[str, Any]) -> None:
        for k in flags:
            if k not in FLAG_NAMES:
                raise ValueError(f"load_state_dict: unknown parameter flag {k!r}")
        c, t = self.components, self.times
        for name in COMPONENT_FIELDS:
            if f"has_{name}" in flags:
                c.nonzero[name] = flags[f"has_{name}"]
        t.has_jitter = flags.get("has_jitter", t.has_jitter)
        c.resolution_all_active = flags.get("resolution_all_active", c.resolution_all_active)
        t.fixed_shift = flags.get("uniform_shift", t.fixed_shift)
