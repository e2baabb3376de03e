"""Per-class metadata (``md``): the sensors of a class and their per-env parameters.

Every hook receives ``md``. It exposes ``md.sensors`` (instances in column order, each with ``.options``
and ``.cache_slice``), the per-env parameter tensors ``md.noise``, ``md.bias``, ``md.random_walk`` and
``md.resolution`` (``(B, cols)``, one value per env and component), the per-env delay and jitter
(``md.delay_steps``, ``md.jitter_steps``: ``(B, n_sensors)``), the random-walk accumulator, this step's
standard-normal draws, and the reset context of the current capture (``md.reset_mask``,
``md.advancing``). Sensor-owned per-env state goes into ``md.extra`` (tensors with a leading ``B``
axis, saved by ``state_dict`` and restored for the envs a reset does not touch); constants a class
derives from its options (per-column tensors, ...) can be cached in ``md.constants``.

Domain randomization lives here too: options given as distributions are resampled per env at every reset
of that env (:meth:`SensorMetadata.resample`) and held for the episode.

Example:
    >>> import sensorgym as sg, torch
    >>> mgr = sg.SensorManager(num_envs=3, dt=0.02, seed=0)
    >>> s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), noise=sg.Uniform(0.1, 0.2)))
    >>> mgr.reset({"x": torch.zeros(3, 2)})
    >>> md = mgr.metadata(sg.StateSensor)
    >>> md.noise.shape, bool(((md.noise >= 0.1) & (md.noise < 0.2)).all())
    (torch.Size([3, 2]), True)
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .options import SimpleSensorOptions, bounds_of
from .randomization import Distribution
from .rng import RandomSource

if TYPE_CHECKING:
    from .sensor import Sensor

__all__ = ["COMPONENT_FIELDS", "TIME_FIELDS", "SensorMetadata"]

TIME_FIELDS = ("delay", "jitter")
COMPONENT_FIELDS = ("noise", "bias", "random_walk", "resolution")
_NON_NEGATIVE = ("noise", "random_walk", "resolution", "delay", "jitter")
_EPS = 1e-9


def delay_steps(seconds: float, dt: float) -> int:
    """``D = round(delay / dt)`` (half to even, like ``torch.round``)."""
    return round(seconds / dt)


def jitter_extra_steps(seconds: float, dt: float) -> int:
    """Largest extra shift jitter can add: ``ceil(jitter / dt)`` (0 for no jitter)."""
    return max(0, math.ceil(seconds / dt - _EPS))


def _components(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


class SensorMetadata:
    """Metadata of one sensor class, shared by all its instances and envs."""

    def __init__(
        self,
        sensor_cls: type[Sensor],
        sensors: list[Sensor],
        num_envs: int,
        dt: float,
        device: torch.device,
        random: RandomSource,
        sensor_cols: list[int],
        param_dtype: torch.dtype | None,
    ) -> None:
        self.sensor_cls = sensor_cls
        self.sensors = sensors
        self.num_envs = num_envs
        self.dt = dt
        self.device = device
        self.random = random
        self.generator = random.generator  # for custom hooks that draw their own numbers
        self.extra: dict[str, torch.Tensor] = {}  # sensor-owned per-env state (B, ...), saved
        self.compiled = (
            False  # run the default imperfections as one compiled kernel (SensorManager(compile=))
        )
        self.constants: dict[str, Any] = {}  # sensor-owned values derived from options, not saved
        self.reset_mask: torch.Tensor | None = None
        self.advancing = True
        self.capture_rows: torch.Tensor | None = None  # envs the current capture is for (None: all)
        self._finish_raw_capture: Any = None  # installed by the class storage
        self._prev_shift: torch.Tensor | None = None  # installed by the class storage

        b, n = num_envs, len(sensors)
        f64 = dict(dtype=torch.float64, device=device)
        self.delay_seconds = torch.zeros(b, n, **f64)
        self.jitter_seconds = torch.zeros(b, n, **f64)
        self.delay_steps = torch.zeros(b, n, dtype=torch.long, device=device)
        self.jitter_steps = torch.zeros(b, n, **f64)  # effective: min(jitter, delay) / dt
        self.jitter_ceil = torch.zeros(b, n, dtype=torch.long, device=device)
        self.jitter_steps_f32 = torch.zeros(b, n, dtype=torch.float32, device=device)
        self._time_scratch = torch.zeros(b, n, **f64)

        # (field -> list of (column index tensor or slice, Distribution)) of randomized options
        self._random: dict[str, list[tuple[slice, Distribution]]] = {}
        self._random_cols: dict[str, torch.Tensor] = {}
        self._random_scratch: dict[str, torch.Tensor] = {}

        self.has_component_params = param_dtype is not None
        self.has_noise = self.has_bias = self.has_random_walk = self.has_resolution = False
        self.resolution_all_active = False  # every component quantized: no mask needed
        self.has_jitter = False
        # the one delay shift of every env and sensor when it can never vary (no jitter, no
        # randomized or per-sensor delays, no setter calls): the delayed read is then one slot copy
        self.uniform_shift: int | None = None
        self.noise_draw: torch.Tensor | None = None
        self.random_walk_draw: torch.Tensor | None = None
        icols = sum(sensor_cols)
        if param_dtype is not None:
            p = dict(dtype=param_dtype, device=device)
            self.noise = torch.zeros(b, icols, **p)
            self.bias = torch.zeros(b, icols, **p)
            self.random_walk = torch.zeros(b, icols, **p)
            self.resolution = torch.zeros(b, icols, **p)
            self.resolution_step = torch.ones(b, icols, **p)
            self.resolution_active = torch.zeros(b, icols, dtype=torch.bool, device=device)
            self.random_walk_state = torch.zeros(b, icols, **p)
            self.scratch = torch.zeros(b, icols, **p)
            self._one = torch.ones((), **p)
        self._init_from_options(sensor_cols)

    # -- construction ----------------------------------------------------------------------------------
    def _init_from_options(self, sensor_cols: list[int]) -> None:
        for j, s in enumerate(self.sensors):
            opts = s.options
            for name in TIME_FIELDS:
                self._init_time(j, s, name, getattr(opts, name))
            if isinstance(opts, SimpleSensorOptions):
                if not self.has_component_params:
                    raise TypeError(
                        f"sensor {s.name!r}: {type(opts).__name__} has noise/bias/random_walk/resolution "
                        f"but {type(s).__name__} has a non-floating intermediate dtype. Fix: declare a "
                        "floating _get_intermediate_dtype and project in _post_process."
                    )
                for name in COMPONENT_FIELDS:
                    self._init_component(s, name, getattr(opts, name), sensor_cols[j])
        if self.has_component_params:
            self.resolution_all_active = all(
                bounds_of(v)[0] > 0
                for s in self.sensors
                for v in _components(getattr(s.options, "resolution", 0.0))
            )
        delays = {s.options.delay for s in self.sensors}
        if not self.has_jitter and "delay" not in self._random and len(delays) == 1:
            self.uniform_shift = delay_steps(delays.pop(), self.dt)
        for name, entries in self._random.items():
            width = self.delay_seconds.shape[1] if name in TIME_FIELDS else self.noise.shape[1]
            cols = torch.zeros(width, dtype=torch.bool, device=self.device)
            for sl, _ in entries:
                cols[sl] = True
            self._random_cols[name] = cols
            like = self.delay_seconds if name in TIME_FIELDS else self.noise
            self._random_scratch[name] = torch.zeros_like(like)
        self.refresh_derived()

    def _init_time(self, j: int, s: Sensor, name: str, value: float | Distribution) -> None:
        target = self.delay_seconds if name == "delay" else self.jitter_seconds
        if isinstance(value, Distribution):
            self._random.setdefault(name, []).append((slice(j, j + 1), value))
            hi = value.bounds[1]
        else:
            target[:, j] = value
            hi = value
            if name == "delay":
                self._warn_delay(s, value)
        if name == "jitter" and hi > 0:
            self.has_jitter = True

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
        target = getattr(self, name)
        if isinstance(value, tuple):
            if len(value) not in (1, ncomp):
                raise ValueError(
                    f"{type(s.options).__name__}.{name} has {len(value)} values but sensor {s.name!r} "
                    f"has {ncomp} components. Fix: give one value (all components) or exactly {ncomp}."
                )
            if len(value) == 1:
                value = value[0]
        values = value if isinstance(value, tuple) else (value,) * ncomp
        for i, v in enumerate(values):
            col = slice(sl.start + i, sl.start + i + 1)
            if isinstance(v, Distribution):
                self._random.setdefault(name, []).append((col, v))
                lo, hi = v.bounds
                nonzero = lo != 0.0 or hi != 0.0
            else:
                target[:, col] = v
                nonzero = v != 0.0
            if nonzero:
                setattr(self, f"has_{name}", True)

    # -- derived quantities ----------------------------------------------------------------------------
    def refresh_derived(self) -> None:
        """Recompute delay steps, effective jitter and the quantization tables from the parameters."""
        torch.div(self.delay_seconds, self.dt, out=self._time_scratch)
        self.delay_steps.copy_(self._time_scratch.round_())
        torch.minimum(self.jitter_seconds, self.delay_seconds, out=self.jitter_steps)
        self.jitter_steps.div_(self.dt)
        torch.sub(self.jitter_steps, _EPS, out=self._time_scratch)
        self.jitter_ceil.copy_(self._time_scratch.ceil_().clamp_(min=0))
        self.jitter_steps_f32.copy_(self.jitter_steps)
        if self.has_component_params:
            torch.gt(self.resolution, 0, out=self.resolution_active)
            torch.where(self.resolution_active, self.resolution, self._one, out=self.resolution_step)

    def max_shift_per_sensor(self) -> list[int]:
        """The deepest delay+jitter shift each sensor can reach from its options (ring sizing)."""
        out = []
        for s in self.sensors:
            o = s.options
            d_hi = bounds_of(o.delay)[1]
            j_hi = min(bounds_of(o.jitter)[1], d_hi)
            shift = delay_steps(d_hi, self.dt) + jitter_extra_steps(j_hi, self.dt)
            if o.max_delay is not None:
                shift = max(shift, jitter_extra_steps(o.max_delay, self.dt) + 1)
            out.append(shift)
        return out

    # -- randomization ---------------------------------------------------------------------------------
    def resample(self, mask: torch.Tensor) -> None:
        """Draw new values of every randomized option for the envs in ``mask`` (B,) bool."""
        if not self._random:
            return
        for name, entries in self._random.items():
            scratch = self._random_scratch[name]
            for cols, dist in entries:
                self.random.sample_(dist, scratch[:, cols], mask, 0)
            target = self._param(name)
            cond = mask[:, None] & self._random_cols[name][None, :]
            torch.where(cond, scratch, target, out=target)
        self.refresh_derived()

    def _param(self, name: str) -> torch.Tensor:
        if name == "delay":
            return self.delay_seconds
        if name == "jitter":
            return self.jitter_seconds
        return getattr(self, name)

    def randomized_components(self, s: Sensor) -> dict[str, list[int]]:
        """``{field: [component, ...]}`` of the options of ``s`` given as distributions (delay and
        jitter: ``[0]``, one value per sensor), in the column order of :meth:`randomization`."""
        out: dict[str, list[int]] = {}
        j, sl = s.index, s.cache_slice
        for name, entries in self._random.items():
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
                out[name] = self.delay_steps[:, j : j + 1].to(torch.float32) * self.dt
            elif name == "jitter":
                out[name] = (self.jitter_steps[:, j : j + 1] * self.dt).to(torch.float32)
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
        target = self._param(name)
        sl = s.cache_slice
        v = self._as_values(s, name, value, (len(rows), sl.stop - sl.start), target.dtype)
        target[rows, sl] = v
        if bool((v != 0).any()):
            setattr(self, f"has_{name}", True)
        if name == "resolution":
            self.resolution_all_active = bool((self.resolution > 0).all())
        self.refresh_derived()

    def set_time(self, s: Sensor, name: str, value: Any, rows: torch.Tensor, max_shift: int) -> None:
        j = s.index
        if not isinstance(value, Distribution) and np.ndim(value) == 1:
            value = np.asarray(value)[:, None]  # one value per selected env
        v = self._as_values(s, name, value, (len(rows), 1), torch.float64)[:, 0]
        delay = v if name == "delay" else self.delay_seconds[rows, j]
        jitter = v if name == "jitter" else self.jitter_seconds[rows, j]
        if bool((jitter > delay + 1e-12).any()):
            raise ValueError(
                f"{type(s).__name__}.set_{name}: jitter {jitter.tolist()} exceeds delay {delay.tolist()} "
                f"for sensor {s.name!r}; jitter must satisfy 0 <= jitter <= delay. Fix: set the delay "
                "first or lower the jitter."
            )
        limit = s.options.max_delay
        if limit is not None and bool((delay + jitter > limit + 1e-12).any()):
            raise ValueError(
                f"{type(s).__name__}.set_{name}: delay + jitter {(delay + jitter).tolist()} exceeds "
                f"max_delay={limit:g} of sensor {s.name!r}. Fix: raise max_delay in its options."
            )
        shift = torch.round(delay / self.dt).long() + torch.ceil(jitter / self.dt - _EPS).clamp(min=0)
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
        if self.uniform_shift is not None and self._prev_shift is not None:
            self._prev_shift.fill_(self.uniform_shift)  # what every read so far has used
        self.uniform_shift = None
        self._param(name)[rows, j] = v
        if name == "jitter" and bool((v > 0).any()):
            self.has_jitter = True
        self.refresh_derived()

    # -- capture helpers (called from hooks) -----------------------------------------------------------
    def finish_raw_capture(self, gt_timeline: Any, measured_timeline: Any) -> None:
        """Apply the non-finite policy and, for envs being reset, fill the older timeline slots with the
        value just captured (so a recurrent transform starts in steady state).

        :class:`~sensorgym.SimpleSensor` calls this right after ``_update_current_timestep_data``; a
        direct :class:`~sensorgym.Sensor` subclass using timeline rings should call it at the same point.
        """
        if self._finish_raw_capture is not None:
            self._finish_raw_capture(gt_timeline, measured_timeline)

    # -- persistence -----------------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        out = {
            "delay_seconds": self.delay_seconds,
            "jitter_seconds": self.jitter_seconds,
        }
        if self.has_component_params:
            for name in (*COMPONENT_FIELDS, "random_walk_state"):
                out[name] = getattr(self, name)
        for k, v in self.extra.items():
            out[f"extra.{k}"] = v
        return out

    def parameter_tensors(self) -> tuple[torch.Tensor, ...]:
        """The per-env option values (what randomization and setters write)."""
        out = (self.delay_seconds, self.jitter_seconds)
        if self.has_component_params:
            out += tuple(getattr(self, n) for n in COMPONENT_FIELDS)
        return out

    def flags(self) -> dict[str, bool]:
        return {
            k: getattr(self, k)
            for k in (
                "has_noise",
                "has_bias",
                "has_random_walk",
                "has_resolution",
                "has_jitter",
                "resolution_all_active",
                "uniform_shift",
            )
        }
