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
random-walk state and draws in its :class:`~sensorgym.core.imperfections.HardwareImperfections`
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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .parameters import COMPONENT_FIELDS, TIME_FIELDS
from .xp import Binding

if TYPE_CHECKING:
    from .imperfections import HardwareImperfections
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


def _read(component: str, name: str, doc: str) -> property:
    def get(self: SensorMetadata) -> Any:
        return getattr(getattr(self, component), name)

    return property(get, doc=doc)


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
        imperfections: HardwareImperfections,
        raw_step_stages: list = (),
        raw_reset_stages: list = (),
        binding: Binding | None = None,
    ) -> None:
        self.sensor_cls = sensor_cls
        self.sensors = sensors
        self.num_envs = num_envs
        self.dt = dt
        self.device = device
        self.random = random
        self.generator = random.generator  # for custom hooks that draw their own numbers
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
        #: ``array(t)``: ``t`` as an array of :attr:`xp`, the tensor itself (torch executor) or a numpy view
        #: of its memory (numpy executor), made once per tensor (:meth:`Binding.array
        #: <sensorgym.core.xp.Binding.array>`)
        self.array = self.binding.array
        #: ``numpy_view(t)``: a numpy array sharing the memory of the CPU tensor ``t`` whatever the executor
        #: (None where numpy cannot view it: a device tensor, a dtype numpy lacks), made once per tensor:
        #: hooks receive the same few ring slots every step, and ``Tensor.numpy()`` with its checks costs
        #: more than the numpy op it enables (:meth:`Binding.numpy <sensorgym.core.xp.Binding.numpy>`)
        self.numpy_view = self.binding.numpy

    # -- the capture context ---------------------------------------------------------------------------
    reset_mask = _read("context", "reset_mask", "``(B,)`` bool: envs whose episode starts now, or None.")
    capture_rows = _read("context", "rows", "The envs the current capture is for (None: all).")
    advancing = _read("context", "advancing", "False in a reset capture (time does not advance).")

    @property
    def executor(self) -> str:
        """``"torch"`` or ``"numpy"``: how the class's planned arithmetic runs (see
        :mod:`sensorgym.core.xp`)."""
        return self.binding.name

    @property
    def xp(self) -> Any:
        """The array namespace of :attr:`executor` (:data:`~sensorgym.core.xp.TORCH` or
        :data:`~sensorgym.core.xp.NUMPY`): a hook written against it, on arrays from :meth:`array`, runs
        on either executor with the same bits."""
        return self.binding.xp

    def finish_raw_capture(self, gt_timeline: Ring, measured_timeline: Ring) -> None:
        """Apply the non-finite policy and, for envs being reset, fill the older timeline slots with the
        value just captured (so a recurrent transform starts in steady state).

        :class:`~sensorgym.SimpleSensor` calls this right after ``_update_current_timestep_data``; a
        direct :class:`~sensorgym.Sensor` subclass using timeline rings should call it at the same point.
        """
        ctx = self.context
        for stage in self._raw_stages[ctx.reset_mask is not None]:
            stage(gt_timeline, measured_timeline, ctx)

    # -- the parameter table (read-only views) ---------------------------------------------------------
    noise = _read("params", "noise", "``(B, cols)`` noise std per env and component.")
    bias = _read("params", "bias", "``(B, cols)`` bias per env and component.")
    random_walk = _read("params", "random_walk", "``(B, cols)`` random-walk increment std.")
    resolution = _read("params", "resolution", "``(B, cols)`` quantization step (0: off).")
    resolution_step = _read("params", "resolution_step", "``resolution`` where > 0, else 1.")
    resolution_active = _read("params", "resolution_active", "``resolution > 0``.")
    delay_seconds = _read("params", "delay_seconds", "``(B, n_sensors)`` delay in seconds.")
    jitter_seconds = _read("params", "jitter_seconds", "``(B, n_sensors)`` jitter in seconds.")
    delay_steps = _read("params", "delay_steps", "``(B, n_sensors)`` ``round(delay / dt)``.")
    jitter_steps = _read("params", "jitter_steps", "``(B, n_sensors)`` ``min(jitter, delay) / dt``.")
    has_component_params = _read("params", "has_component_params", "Whether the class has noise etc.")
    has_noise = _read("params", "has_noise", "Whether any noise can be non-zero.")
    has_bias = _read("params", "has_bias", "Whether any bias can be non-zero.")
    has_random_walk = _read("params", "has_random_walk", "Whether any random walk can be non-zero.")
    has_resolution = _read("params", "has_resolution", "Whether any resolution can be non-zero.")
    has_jitter = _read("params", "has_jitter", "Whether any jitter can be non-zero.")
    resolution_all_active = _read("params", "resolution_all_active", "Every component quantized.")
    uniform_shift = _read("params", "fixed_shift", "The one delay shift of all envs, if fixed.")

    def max_shift_per_sensor(self) -> list[int]:
        """The deepest delay + jitter shift each sensor can reach from its options (ring sizing)."""
        return self.params.max_shift_per_sensor()

    # -- the default imperfections' state --------------------------------------------------------------
    random_walk_state = _read("imperfections", "random_walk_state", "``(B, cols)`` drift accumulator.")
    noise_draw = _read("imperfections", "noise_draw", "This step's standard normals for noise.")
    random_walk_draw = _read("imperfections", "random_walk_draw", "This step's normals for the walk.")
    scratch = _read("imperfections", "scratch", "``(B, cols)`` scratch of the default imperfections.")
    compiled = _read("imperfections", "compiled", "Whether the default imperfections run compiled.")
