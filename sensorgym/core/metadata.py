"""Per-class metadata (``md``): what every hook of a sensor class receives.

``md`` exposes ``md.sensors`` (instances in column order, each with ``.options`` and ``.cache_slice``),
the per-env parameter tensors ``md.noise``, ``md.bias``, ``md.random_walk`` and ``md.resolution``
(``(B, cols)``, one value per env and component), the per-env delay and jitter (``md.delay_steps``,
``md.jitter_steps``: ``(B, n_sensors)``), the random-walk accumulator, this step's standard-normal draws,
and the context of the current capture, ``md.context`` (a frozen :class:`CaptureContext`;
``md.reset_mask``, ``md.capture_rows`` and ``md.advancing`` read it). Sensor-owned per-env state goes
into ``md.extra`` (tensors with a leading ``B`` axis, saved by ``state_dict`` and restored for the envs a
reset does not touch); constants a class derives from its options (per-column tensors, plans, ...) can
be cached in ``md.constants``.

``md`` owns no parameter itself: the values live in the class's
:class:`~sensorgym.core.parameters.ParameterTable` (``md.params``: randomization, setters) and the
error terms' state and draws in its :class:`~sensorgym.core.error_model.ErrorModel`
(``md.imperfections``); the attributes above read them.

Example:
    >>> import sensorgym as sg, torch
    >>> mgr = sg.SensorManager(num_envs=3, dt=0.02, seed=0)
    >>> s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), noise=sg.Uniform(0.1, 0.2)))
    >>> mgr.reset({"x": torch.zeros(3, 2)})
    >>> md = mgr.metadata(sg.StateSensor)
    >>> md.noise.shape, bool(((md.noise >= 0.1) & (md.noise < 0.2)).all()), md.context.advancing
    (torch.Size([3, 2]), True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .parameters import COMPONENT_FIELDS, TIME_FIELDS
from .xp import Binding

if TYPE_CHECKING:
    from .error_model import ErrorModel
    from .parameters import ParameterTable
    from .protocols import SensorHandle
    from .ring import Ring
    from .rng import RandomSource

__all__ = ["COMPONENT_FIELDS", "STEP", "TIME_FIELDS", "CaptureContext", "SensorMetadata"]


@dataclass(frozen=True, slots=True)
class CaptureContext:
    """What one capture is: replaced (never mutated) per capture and handed to every stage; hooks see it
    as ``md.context``.

    Attributes:
        reset_mask: ``(B,)`` bool of the envs whose episode starts at this capture, or None.
        rows: the envs this capture is for (a partial reset), None for all.
        advancing: True for a step (time advances), False for a reset capture.
        reset_index: on the numpy executor, the indices of ``reset_mask``'s envs (numpy int64, made once
            per capture for the stages that write only those rows), else None.

    Example:
        >>> import torch
        >>> from sensorgym.core.metadata import STEP, CaptureContext
        >>> STEP.reset_mask is None and STEP.advancing  # a plain step: one shared object
        True
        >>> ctx = CaptureContext(torch.tensor([False, True]), rows=None, advancing=True)  # an autoreset
        >>> ctx.reset_mask.tolist()
        [False, True]
    """

    reset_mask: torch.Tensor | None = None
    rows: torch.Tensor | None = None
    advancing: bool = True
    reset_index: Any = None


#: the context of a plain step (no env resets): one object, no allocation per step
STEP = CaptureContext()


class SensorMetadata:
    """Metadata of one sensor class, shared by all its instances and envs (see the module docstring)."""

    def __init__(
        self,
        sensor_cls: type,
        sensors: list[SensorHandle],
        num_envs: int,
        dt: float,
        device: torch.device,
        random: RandomSource,
        params: ParameterTable,
        imperfections: ErrorModel,
        raw_step_stages: list = (),
        raw_reset_stages: list = (),
        binding: Binding | None = None,
    ) -> None:
        self.sensor_cls = sensor_cls
        self.sensors = sensors
        self.num_envs = num_envs
        self.dt = dt
        self.device = device
        self.random = random  # a custom hook that draws its own numbers uses ``random.generator``
        self.params = params
        self.imperfections = imperfections
        self.extra: dict[str, torch.Tensor] = {}  # sensor-owned per-env state (B, ...), saved
        self.constants: dict[str, Any] = {}  # sensor-owned values derived from options, not saved
        self.context = STEP  # replaced by the manager for every capture (a frozen CaptureContext)
        # what finish_raw_capture runs (NaN policy; in reset captures also the timeline prefill)
        self._raw_stages = (tuple(raw_step_stages), tuple(raw_reset_stages))
        #: whether a plain step's raw capture has a stage to finish with (the NaN policy): the default hook
        #: skips :meth:`finish_raw_capture` otherwise (reset captures always finish it)
        self.finishes_raw = bool(raw_step_stages)
        #: the class's executor, bound to its buffers (:class:`~sensorgym.core.xp.Binding`)
        self.binding = binding if binding is not None else imperfections.binding
        #: ``array(t)``: ``t`` as an array of ``xp``, the tensor itself (torch executor) or a numpy view
        #: of its memory (numpy executor), made once per tensor (:meth:`Binding.array
        #: <sensorgym.core.xp.Binding.array>`)
        self.array = self.binding.array
        #: ``numpy_view(t)``: a numpy array sharing the memory of the CPU tensor ``t`` whatever the executor
        #: (None where numpy cannot view it: a device tensor, a dtype numpy lacks), made once per tensor:
        #: hooks receive the same few ring slots every step, and ``Tensor.numpy()`` with its checks costs
        #: more than the numpy op it enables (:meth:`Binding.numpy <sensorgym.core.xp.Binding.numpy>`)
        self.numpy_view = self.binding.numpy

    def finish_raw_capture(self, gt_timeline: Ring, measured_timeline: Ring) -> None:
        """Apply the non-finite policy and, for envs being reset, fill the older timeline slots with the
        value just captured (so a recurrent transform starts in steady state).

        :class:`~sensorgym.SimpleSensor` calls this right after ``_update_current_timestep_data``; a
        direct :class:`~sensorgym.Sensor` subclass using timeline rings should call it at the same point.
        """
        ctx = self.context
        for stage in self._raw_stages[ctx.reset_mask is not None]:
            stage(gt_timeline, measured_timeline, ctx)


#: The custom-sensor surface of ``md`` (docs/custom_sensors.md): every name ``md`` forwards to the component
#: that owns the value, declared here and only here: ``name -> (getter, doc)``. Everything else a hook
#: reads is ``md``'s own (``sensors``, ``extra``, ``constants``, ``array``, ...) or its owner's (the
#: executor ``md.binding.name``, ``md.params.times.delay_seconds``, ``md.imperfections.table("sigma")``).
def _value(field: str) -> Callable[[SensorMetadata], Any]:
    return lambda md: md.params.components.values[field]


SURFACE: dict[str, tuple[Callable[[SensorMetadata], Any], str]] = {
    "xp": (
        lambda md: md.binding.xp,
        "The array namespace of the class's executor (``sensorgym.core.xp.TORCH`` or ``NUMPY``): a hook "
        "written against it, on arrays from ``md.array``, runs on either executor with the same bits.",
    ),
    "reset_mask": (
        lambda md: md.context.reset_mask,
        "``(B,)`` bool: envs whose episode starts now, or None.",
    ),
    "capture_rows": (lambda md: md.context.rows, "The envs the current capture is for (None: all)."),
    "advancing": (lambda md: md.context.advancing, "False in a reset capture (time does not advance)."),
    "noise": (_value("noise"), "``(B, cols)`` noise std per env and component."),
    "bias": (_value("bias"), "``(B, cols)`` bias per env and component."),
    "random_walk": (_value("random_walk"), "``(B, cols)`` random-walk increment std."),
    "resolution": (_value("resolution"), "``(B, cols)`` quantization step (0: off)."),
    "delay_steps": (lambda md: md.params.times.delay_steps, "``(B, n_sensors)`` ``round(delay / dt)``."),
    "jitter_steps": (lambda md: md.params.times.jitter_steps, "``(B, n_sensors)`` effective jitter, steps."),
    "random_walk_state": (
        lambda md: md.imperfections.states.get("random_walk_state"),
        "``(B, cols)`` the random walk's drift accumulator (None without per-component options).",
    ),
    "noise_draw": (lambda md: md.imperfections.draws(0), "This step's normals for the white noise, or None."),
    "random_walk_draw": (lambda md: md.imperfections.draws(1), "This step's normals for the walk, or None."),
    "scratch": (lambda md: md.imperfections.scratch, "``(B, cols)`` scratch of the default imperfections."),
}
for _name, (_get, _doc) in SURFACE.items():
    setattr(SensorMetadata, _name, property(_get, doc=_doc))
