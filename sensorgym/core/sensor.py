"""``Sensor`` and ``SimpleSensor``: the hooks a sensor class implements (the extension contract).

A sensor *class* is the unit of batching: the manager calls each hook once per class per step, batched
over all instances of the class (columns) and all envs (rows). A sensor *instance* is a handle that knows
its options and its columns, and reads its slice of the class's return cache.

Hook order per step (docs/pipeline.md, "Data flow of one step"), run by :class:`SimpleSensor`'s
``_update_shared_cache``::

    _update_current_timestep_data   raw -> GT slot 0 and measured slot 0, physics imperfections (measured)
    _apply_transform(GT, is_measured=False)
    _apply_transform(measured, is_measured=True) -> working buffer -> _apply_hardware_imperfections
    (manager) _post_process per branch -> return rings -> delay/jitter sample -> return caches

Example: a custom sensor that reads ``state["pos"]`` and reports it in centimetres
    >>> import torch, sensorgym as sg
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True, kw_only=True)
    ... class CmOptions(sg.SimpleSensorOptions):
    ...     pass
    >>> class CmSensor(sg.SimpleSensor):
    ...     options_cls = CmOptions
    ...     return_format = (2,)  # short for a _get_return_format that returns (2,)
    ...     cache_dtype = torch.float32  # short for a _get_cache_dtype classmethod
    ...     @classmethod
    ...     def _update_raw_data(cls, state, md, raw):
    ...         for s in md.sensors:  # one instance here; real sensors gather all columns at once
    ...             raw[:, s.cache_slice] = torch.as_tensor(state["pos"]) * 100.0
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.1)
    >>> cm = mgr.add_sensor(CmOptions(delay=0.1))
    >>> mgr.reset({"pos": torch.zeros(2, 2)})
    >>> mgr.step({"pos": torch.ones(2, 2)})
    >>> cm.read().tolist(), cm.read_ground_truth().tolist()
    ([[0.0, 0.0], [0.0, 0.0]], [[100.0, 100.0], [100.0, 100.0]])
"""

from __future__ import annotations

import collections
import math
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from .options import SensorOptions, SimpleSensorOptions

if TYPE_CHECKING:
    from .metadata import SensorMetadata
    from .protocols import ManagerHandle
    from .ring import RingView

__all__ = ["SENSOR_REGISTRY", "Format", "Sensor", "SimpleSensor", "normalize_format"]

Shape = tuple[int, ...]
Format = Shape | tuple[Shape, ...]

#: options class -> sensor class; filled by defining a subclass with its own ``options_cls``
SENSOR_REGISTRY: dict[type[SensorOptions], type[Sensor]] = {}
_AUTO_RETURN_TYPES: dict[tuple[type, int], type] = {}


def normalize_format(fmt: Any, where: str) -> tuple[Shape, ...]:
    """A format as a tuple of field shapes: ``(3,)`` -> ``((3,),)``; ``((3,), (3,))`` stays."""
    if not isinstance(fmt, tuple):
        raise TypeError(f"{where} must return a shape tuple or a tuple of shapes, got {fmt!r}")
    if all(isinstance(d, int) and not isinstance(d, bool) for d in fmt):
        fields = (fmt,)
    elif fmt and all(isinstance(f, tuple) for f in fmt):
        fields = fmt
    else:
        raise TypeError(f"{where} must return a shape tuple or a tuple of shapes, got {fmt!r}")
    for f in fields:
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in f):
            raise ValueError(f"{where} returned {fmt!r}; every dimension must be a positive int")
    return tuple(tuple(int(d) for d in f) for f in fields)


def _overrides(cls: type, name: str, base: type | None = None) -> bool:
    """Whether ``cls`` (or a class between it and ``base``, default ``Sensor``) redefines ``name``."""
    mine, ref = getattr(cls, name), getattr(base or Sensor, name)
    return getattr(mine, "__func__", mine) is not getattr(ref, "__func__", ref)


def reads_timeline(cls: type) -> bool:
    """Whether a hook of ``cls`` can observe its timeline rings.

    A :class:`SimpleSensor` that keeps the default ``_update_current_timestep_data``,
    ``_apply_physics_imperfections`` and ``_apply_transform`` never reads a timeline slot other than the
    one it just wrote, and its measured slot equals its GT slot; the manager then stores no timeline for
    it (slot 0 is the intermediate buffer itself), which saves two copies and the ring memory.
    """
    if not cls.uses_ring_pipeline:
        return False
    if not issubclass(cls, SimpleSensor):
        return True
    hooks = (
        "_update_shared_cache",
        "_update_current_timestep_data",
        "_apply_physics_imperfections",
        "_apply_transform",
    )
    return any(_overrides(cls, name, SimpleSensor) for name in hooks)


def folds_raw_copy(cls: type) -> bool:
    """Whether every hook of ``cls`` between the raw write and the imperfections is
    :class:`SimpleSensor`'s own, so that the copy of the raw value into the working buffer can be the
    imperfection kernel's first write instead of a pass of its own (the same numbers, one pass less).
    Decided when the manager builds, like :func:`reads_timeline`: a hook patched onto the class after
    that is not seen (subclass instead)."""
    hooks = (
        "_update_shared_cache",
        "_update_current_timestep_data",
        "_apply_physics_imperfections",
        "_apply_transform",
        "_apply_hardware_imperfections",
    )
    return (
        issubclass(cls, SimpleSensor)
        and cls.uses_ring_pipeline
        and not any(_overrides(cls, name, SimpleSensor) for name in hooks)
    )


class Sensor(ABC):
    """Minimal sensor contract: shapes, dtypes, one batched update per class, optional projection.

    Subclasses set ``options_cls`` (defining the subclass registers it, so
    ``SensorManager.add_sensor(options)`` finds it) and implement ``_get_return_format``,
    ``_get_cache_dtype`` and ``_update_shared_cache``. Most sensors should subclass
    :class:`SimpleSensor` instead, which implements the standard pipeline.

    Example:
        >>> import sensorgym as sg
        >>> sg.Sensor.registered_class(sg.StateSensorOptions) is sg.StateSensor
        True
    """

    #: the options class this sensor class is built from
    options_cls: ClassVar[type[SensorOptions]] = SensorOptions
    #: whether the manager allocates timeline rings (GT + measured) for the class
    uses_ring_pipeline: ClassVar[bool] = True
    #: how many timeline slots ``_apply_transform`` may read (``at(0)`` .. ``at(depth - 1)``)
    timeline_depth: ClassVar[int] = 2
    #: how many return-ring slots ``_post_process`` may read (``at(0)`` .. ``at(depth - 1)``); 1 (it reads
    #: none but the slot it writes): a branch with no delay and no history projects straight into its
    #: return cache, which saves a ring and a copy per branch and step
    projection_depth: ClassVar[int] = 2
    #: NamedTuple type for multi-field sensors (field order = return format order); auto if None
    return_type: ClassVar[type | None] = None

    # Shorthands for hooks that return a constant: a class that sets one of these attributes gets the
    # default hook that returns it (``cache_dtype = torch.float32`` stands for a ``_get_cache_dtype``
    # classmethod returning ``torch.float32``). A class may set the attribute or define the hook, not both.
    #: dtype of readings (``_get_cache_dtype``)
    cache_dtype: ClassVar[torch.dtype]
    #: dtype of the intermediate space (``_get_intermediate_dtype``)
    intermediate_dtype: ClassVar[torch.dtype]
    #: shape of one reading, or a tuple of shapes (``_get_return_format``), when it does not depend on options
    return_format: ClassVar[Format]
    #: shape in the intermediate space (``_get_intermediate_format``)
    intermediate_format: ClassVar[Format]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _install_constant_hooks(cls)
        if _overrides(cls, "_post_process") and not (
            _overrides(cls, "_get_intermediate_format") or _overrides(cls, "_get_intermediate_dtype")
        ):
            raise TypeError(
                f"{cls.__name__} overrides _post_process but neither _get_intermediate_format nor "
                "_get_intermediate_dtype: _post_process maps the intermediate space to the return space, "
                "so the class must declare the intermediate space it maps from. Fix: override "
                "_get_intermediate_dtype (e.g. return torch.float32) or _get_intermediate_format."
            )
        simple = globals().get("SimpleSensor")  # None while SimpleSensor itself is being defined
        if simple is not None and issubclass(cls, simple):
            # the default hook calls _apply_transform only where a class defines one (the default is a no-op)
            cls._transforms = _overrides(cls, "_apply_transform", simple)
        opts = cls.__dict__.get("options_cls")
        if opts is not None:
            if not (isinstance(opts, type) and issubclass(opts, SensorOptions)):
                raise TypeError(f"{cls.__name__}.options_cls must be a SensorOptions subclass, got {opts!r}")
            SENSOR_REGISTRY[opts] = cls

    @staticmethod
    def registered_class(options_cls: type[SensorOptions]) -> type[Sensor]:
        """The sensor class registered for ``options_cls`` (or its nearest registered base)."""
        for klass in options_cls.__mro__:
            if klass in SENSOR_REGISTRY and not SENSOR_REGISTRY[klass].__abstractmethods__:
                return SENSOR_REGISTRY[klass]
        known = sorted(k.__name__ for k, v in SENSOR_REGISTRY.items() if not v.__abstractmethods__)
        raise TypeError(
            f"no sensor class is registered for options class {options_cls.__name__}. Fix: use one of "
            f"{known}, or define `class MySensor(sg.SimpleSensor): options_cls = {options_cls.__name__}`."
        )

    def __init__(self, options: SensorOptions, manager: ManagerHandle, name: str) -> None:
        self.options = options
        self.name = name
        self._manager = manager
        self.index = -1  # position among the class's instances (column order), set at build
        self.cache_slice = slice(0, 0)  # intermediate columns within the class, set at build
        self.return_slice = slice(0, 0)  # return columns within the class, set at build
        self._storage: Any = None
        self._fields: tuple[Shape, ...] = ()  # the field shapes, set by the manager at build

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def _place(self, index: int, cache_slice: slice, return_slice: slice) -> None:
        """At build: this sensor's position among its class's instances and its intermediate and return
        columns within the class (the manager lays the class out; the sensor records where it is)."""
        self.index, self.cache_slice, self.return_slice = index, cache_slice, return_slice

    def _built_storage(self, what: str) -> Any:
        """The storage of this sensor's class (the owner a setter goes to), once the manager is built."""
        if self._storage is None:
            raise RuntimeError(f"{what} before the manager was built. Fix: call mgr.reset(state) first.")
        return self._storage

    def _attach(self, storage: Any) -> None:
        """At build: the storage of this sensor's class (what reads and setters go to); the formats are
        final from here on, so reads split the columns by the field shapes fixed now."""
        self._storage = storage
        self._fields = self.fields

    # -- shape and dtype accessors ---------------------------------------------------------------------
    @abstractmethod
    def _get_return_format(self) -> Format:
        """Shape of one reading, or a tuple of shapes for a multi-field sensor."""

    def _get_intermediate_format(self) -> Format:
        """Shape in the intermediate space (where transforms and imperfections run)."""
        return self._get_return_format()

    @classmethod
    @abstractmethod
    def _get_cache_dtype(cls) -> torch.dtype:
        """dtype of readings; uniform per class."""

    @classmethod
    def _get_intermediate_dtype(cls) -> torch.dtype:
        """dtype of the intermediate space; uniform per class."""
        return cls._get_cache_dtype()

    # -- per-step hooks --------------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def _update_shared_cache(
        cls,
        state: Any,
        md: SensorMetadata,
        gt_timeline: RingView,
        measured_timeline: RingView,
        intermediate: torch.Tensor,
    ) -> None:
        """Compute this step's GT (``gt_timeline.at(0)``) and measured working buffer (``intermediate``)
        for every instance and env of the class, in place."""

    @classmethod
    def _post_process(
        cls, md: SensorMetadata, data: torch.Tensor, timeline: RingView, *, is_measured: bool
    ) -> torch.Tensor:
        """Project the intermediate space ``(B, intermediate columns)`` to the return space ``(B, return
        columns)``; identity by default.

        ``timeline`` is the class's return-space ring: ``timeline.at(0)`` is the slot this step writes
        and ``timeline.at(1)`` the previous projected value. Writing the result into ``timeline.at(0)`` and
        returning it avoids an allocation.
        """
        return data

    @classmethod
    def _check_state(cls, state: Any, md: SensorMetadata) -> None:
        """Validate ``state`` before anything is written (raise a helpful error); default: no check.

        The manager calls it for every class before a step or reset touches any buffer, so a bad
        state leaves the manager exactly as it was.
        """

    @classmethod
    def _init_metadata(cls, md: SensorMetadata) -> None:
        """Called once at build, after ``md`` exists: create sensor-owned per-env state in ``md.extra``
        here so that ``load_state_dict`` finds it even before the first reset. Default: nothing."""

    @classmethod
    def _reset_envs(cls, md: SensorMetadata, envs_mask: torch.Tensor) -> None:
        """Reset sensor-owned state (``md.extra``) of the envs in ``envs_mask`` (B,) before the capture.

        Default: nothing (the manager resets rings, random walk, shifts and randomization itself).
        """

    @classmethod
    def _extract_state(cls, env: Any, options: list[SensorOptions]) -> dict[str, Any]:
        """Compute, inside one (sub-)env, the raw simulator state the class's sensors need.

        Called by :class:`~sensorgym.wrappers.SimStateExtractor` after every reset and step of a single
        env (inside Async workers too), so simulator objects never cross process boundaries: return
        compact numpy arrays keyed by the state keys the sensors read. Default: nothing.
        """
        return {}

    def _on_build(self, state: Any) -> None:
        """Called once at build with the first state (or None), before formats are queried."""

    # -- reads -----------------------------------------------------------------------------------------
    @property
    def fields(self) -> tuple[Shape, ...]:
        return normalize_format(self._get_return_format(), f"{type(self).__name__}._get_return_format")

    def read(self, history_length: int | None = None) -> Any:
        """Measured reading: ``(B, *shape)`` view of the return cache, or ``(B, n, *shape)`` history
        (a new tensor, newest first) when ``history_length`` (default: the option) is > 0.
        Multi-field sensors return a NamedTuple of such tensors."""
        return self._manager._read(self, history_length, ground_truth=False)

    def read_ground_truth(self, history_length: int | None = None) -> Any:
        """Ground truth: like :meth:`read` but never delayed and without hardware imperfections."""
        return self._manager._read(self, history_length, ground_truth=True)

    def read_age(self) -> torch.Tensor:
        """``(B,)`` float32 seconds since the sample behind :meth:`read` was taken: ``(t - s) * dt`` with
        ``t`` the steps since the env's reset and ``s`` the step of that sample (docs/pipeline.md). It
        counts the delay and any held sample; while a delayed read still shows padding, ``s`` is the
        reset step. A new tensor."""
        return self._manager._read_age(self)

    def _pack(self, flat: torch.Tensor, lead: tuple[int, ...]) -> Any:
        """Split ``(*lead, cols)`` into this sensor's field shapes (``_fields``: fixed at build)."""
        fields = self._fields
        out, start = [], 0
        for shape in fields:
            size = math.prod(shape)
            part = flat[..., start : start + size]
            out.append(part.reshape(*lead, *shape) if shape else part.reshape(*lead))
            start += size
        if len(fields) == 1:
            return out[0]
        return self._named_tuple_type(len(out))(*out)

    @classmethod
    def _named_tuple_type(cls, n_fields: int) -> type:
        if cls.return_type is not None:
            return cls.return_type
        key = (cls, n_fields)
        if key not in _AUTO_RETURN_TYPES:
            names = [f"field{i}" for i in range(n_fields)]
            _AUTO_RETURN_TYPES[key] = collections.namedtuple(f"{cls.__name__}Reading", names)
        return _AUTO_RETURN_TYPES[key]

    # -- run-time setters (per env) --------------------------------------------------------------------
    def set_delay(self, value: Any, envs_idx: Any = None) -> None:
        """Set the delay in seconds for the given envs (all by default); takes effect at the next step."""
        self._built_storage("set_delay()").set_time(self, "delay", value, envs_idx)

    def set_jitter(self, value: Any, envs_idx: Any = None) -> None:
        """Set the jitter in seconds (``0 <= jitter <= delay``) for the given envs."""
        self._built_storage("set_jitter()").set_time(self, "jitter", value, envs_idx)

    def read_randomization(self) -> dict[str, torch.Tensor]:
        """Per-env values of the options given as distributions: ``{field: (B, k)}`` new tensors."""
        return self._manager._read_randomization(self)

    def _extra_randomization(self) -> dict[str, tuple[torch.Tensor, list[int]]]:
        """Per-env values this sensor class draws itself at a reset, beyond the options' parameter table
        (the IMU's mount): ``{field: ((B, k) values, the k component indices)}``, only the components
        that are drawn (a fixed one would be a constant critic column), read by :meth:`read_randomization`
        and named ``"<sensor>.<field>[<component>]"`` by the manager. None by default."""
        return {}


#: class attribute -> the hook it stands for (see ``Sensor.cache_dtype``)
_CONSTANT_HOOKS = {
    "cache_dtype": "_get_cache_dtype",
    "intermediate_dtype": "_get_intermediate_dtype",
    "return_format": "_get_return_format",
    "intermediate_format": "_get_intermediate_format",
}


def _install_constant_hooks(cls: type) -> None:
    """Give ``cls`` the hook of each constant attribute it sets itself (it inherits them otherwise).

    Runs before ``ABCMeta`` collects the abstract methods, so a class whose attributes provide its
    abstract hooks is concrete; a class that provides neither attribute nor hook stays abstract."""
    for attribute, hook in _CONSTANT_HOOKS.items():
        if attribute not in cls.__dict__:
            continue
        if hook in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} sets both {attribute} and {hook}. Fix: keep one (the attribute is the "
                f"short form of a {hook} that returns a constant)."
            )
        setattr(cls, hook, _constant_hook(attribute, hook))


def _constant_hook(attribute: str, hook: str) -> Any:
    """The default ``hook`` that returns the class attribute ``attribute`` (read at call time, so a
    subclass that only changes the attribute's value is served too)."""
    if hook.endswith("_dtype"):  # dtypes are uniform per class: classmethods

        def dtype_hook(cls: type) -> torch.dtype:
            return getattr(cls, attribute)

        dtype_hook.__name__ = dtype_hook.__qualname__ = hook
        dtype_hook.__doc__ = f"``cls.{attribute}``."
        return classmethod(dtype_hook)

    def format_hook(self: Sensor) -> Format:
        return getattr(type(self), attribute)

    format_hook.__name__ = format_hook.__qualname__ = hook
    format_hook.__doc__ = f"``{attribute}`` of the class."
    return format_hook


class SimpleSensor(Sensor):
    """The standard pipeline; subclasses implement ``_update_raw_data`` and optionally the other hooks.

    Example: see the module docstring of :mod:`sensorgym.core.sensor` and ``docs/custom_sensors.md``.
    """

    options_cls: ClassVar[type[SensorOptions]] = SimpleSensorOptions
    #: whether the class defines ``_apply_transform`` (set at class definition; the default is a no-op
    #: the default hook does not call)
    _transforms: ClassVar[bool] = False

    @classmethod
    def _update_shared_cache(cls, state, md, gt_timeline, measured_timeline, intermediate) -> None:
        cls._update_current_timestep_data(state, md, gt_timeline, measured_timeline)
        if md.finishes_raw or md.context.reset_mask is not None:  # a NaN policy; a reset's prefill
            md.finish_raw_capture(gt_timeline, measured_timeline)
        measured = measured_timeline.at(0)
        if cls._transforms:
            cls._apply_transform(md, gt_timeline.at(0), gt_timeline, is_measured=False)
            cls._apply_transform(md, measured, measured_timeline, is_measured=True)
        if measured.data_ptr() != intermediate.data_ptr():  # the same buffer without a timeline
            md.xp.copy(md.array(intermediate), md.array(measured))  # one definition, either executor
        cls._apply_hardware_imperfections(md, intermediate)

    @classmethod
    def _update_current_timestep_data(cls, state, md, gt_timeline, measured_timeline) -> None:
        """Raw value into GT slot 0, copied to measured slot 0, then physics imperfections (measured)."""
        gt = gt_timeline.at(0)
        cls._update_raw_data(state, md, gt)
        if md.imperfections.raw_source is not None:
            return  # the default hooks run unchanged: the imperfections' first write is the copy
        measured = measured_timeline.at(0)
        md.xp.copy(md.array(measured), md.array(gt))
        cls._apply_physics_imperfections(md, measured, measured_timeline)

    @classmethod
    @abstractmethod
    def _update_raw_data(cls, state: Any, md: SensorMetadata, raw: torch.Tensor) -> None:
        """Write the raw physical value of every instance into ``raw`` ``(B, intermediate columns)``, in
        place."""

    @classmethod
    def _apply_physics_imperfections(cls, md, data: torch.Tensor, timeline) -> None:
        """Measured branch only, before the transform; propagates through the response. No-op."""

    @classmethod
    def _apply_transform(cls, md, data: torch.Tensor, timeline, *, is_measured: bool) -> None:
        """Sensor response in place on slot 0; may read ``timeline.at(1)``. No-op by default."""

    @classmethod
    def _apply_hardware_imperfections(cls, md, data: torch.Tensor) -> None:
        """Scale factor, drift, noise (through the sensor's filter), bias, resolution on the working
        buffer (never the timeline ring): the class's error terms, in order, as planned by its model
        (``md.imperfections``; :func:`sensorgym.core.terms.run_plan`)."""
        model = md.imperfections
        rows = model.rows(md.context.reset_mask) if md.context.reset_mask is not None else None
        array = model.data_array if data is model.data else model.bind_data(data)  # the same buffer each step
        model.run(model.xp, model.plan_steps, array, model.source, rows)

    # -- per-env setters for the hardware imperfections ------------------------------------------------
    def set_noise(self, value: Any, envs_idx: Any = None) -> None:
        """Noise std per component (scalar, ``(k,)``, or ``(n_envs, k)``) for the given envs."""
        self._built_storage("set_noise()").set_component(self, "noise", value, envs_idx)

    def set_bias(self, value: Any, envs_idx: Any = None) -> None:
        """Bias per component for the given envs."""
        self._built_storage("set_bias()").set_component(self, "bias", value, envs_idx)

    def set_random_walk(self, value: Any, envs_idx: Any = None) -> None:
        """Random-walk increment std per component for the given envs."""
        self._built_storage("set_random_walk()").set_component(self, "random_walk", value, envs_idx)

    def set_resolution(self, value: Any, envs_idx: Any = None) -> None:
        """Quantization step per component for the given envs (0 = off)."""
        self._built_storage("set_resolution()").set_component(self, "resolution", value, envs_idx)
