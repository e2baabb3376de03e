"""The steps of a class's capture after its hook, planned once at build (:meth:`ClassStorage.plan`), and
the two components they use: :class:`Padding` (what delayed and history reads show before an episode has
produced enough snapshots) and :class:`NanPolicy` (non-finite raw values: propagate, raise or hold).

A class runs a short list chosen from its configuration: :class:`CopyToReturnCache`,
:class:`ProjectIntoRing`, :class:`SampleAndHold`, the delay line's ``hold_fixed_shift`` or
``sample_delay`` (:class:`~sensorgym.core.delay_line.DelayLine`), :class:`WriteHistory`, and in reset
captures only :class:`PadRing`. :class:`PrefillTimelines` and the NaN policy run when the hook finishes
its raw capture (``md.finish_raw_capture``). Each stage is a callable taking the step's frozen
:class:`~sensorgym.core.metadata.CaptureContext`.

Example:
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.1)
    >>> s = mgr.add_sensor(sg.StateSensorOptions(key="y", shape=(1,), delay=0.1, history_length=2))
    >>> mgr.reset({"y": torch.zeros(2, 1)})
    >>> stages = mgr.storage(sg.StateSensor).stage_names(reset=True)  # one step of delay, the same for all
    >>> stages[:4]  # GT, then measured: project into the return ring, pad it for the reset envs
    ['ProjectIntoRing', 'PadRing', 'ProjectIntoRing', 'PadRing']
    >>> stages[4:]  # delayed read, history of reads
    ['hold_fixed_shift', 'WriteHistory', 'PadRing']
"""

from __future__ import annotations

import torch

from .metadata import CaptureContext, SensorMetadata
from .plan import ClassPlan
from .ring import Clock, Ring
from .sampler import Sampler
from .sensor import _overrides
from .xp import TORCH, Binding

__all__ = [
    "CopyToReturnCache",
    "NanPolicy",
    "PadRing",
    "Padding",
    "PrefillTimelines",
    "ProjectIntoRing",
    "SampleAndHold",
    "WriteHistory",
    "fill_rows",
]


# -- padding ----------------------------------------------------------------------------------------------
def fill_rows(
    buffer: torch.Tensor,
    slot0: torch.Tensor,
    mask: torch.Tensor,
    first: torch.Tensor,
    zero_cols: torch.Tensor | None = None,
    pad: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> None:
    """Episode-start padding of a ring ``(R, B, c)`` for the rows in ``mask``, on torch tensors: every slot
    gets ``slot0`` (``"reset"`` padding), or zero in ``zero_cols`` with ``slot0`` kept in slot 0
    (``"zero"``). ``first`` (and ``pad``: a ``(B, c)`` buffer and a 0-d zero) are scratch; nothing is
    allocated. (:meth:`~sensorgym.core.xp.TORCH.pad_rows`; the stages call the executor's.)"""
    TORCH.pad_rows(buffer, slot0, mask, None, first, zero_cols, pad)


class Padding:
    """What delayed and history reads show before an episode has produced enough snapshots.

    At a reset of env ``i``, every slot of a ring's row ``i`` gets the episode's first snapshot
    (``padding_type="reset"``), or zeros with the first snapshot kept in slot 0 (``"zero"``, per column).

    Example:
        >>> import torch
        >>> from sensorgym.core.ring import Clock, Ring
        >>> from sensorgym.core.storage import Padding
        >>> ring = Ring(3, batch=1, cols=2, dtype=torch.float32, device="cpu", clock=Clock())
        >>> _ = ring.at(0).fill_(7.0)
        >>> Padding([False, True], ring.at(0)).fill(ring, torch.tensor([True]))
        >>> [ring.at(k)[0].tolist() for k in range(3)]  # column 1 pads with zeros
        [[7.0, 7.0], [7.0, 0.0], [7.0, 0.0]]
    """

    def __init__(self, zero_columns: list[bool] | None, like: torch.Tensor) -> None:
        self.first = torch.zeros_like(like)
        self.zero_columns: torch.Tensor | None = None
        self.scratch: tuple[torch.Tensor, torch.Tensor] | None = None
        if zero_columns and any(zero_columns):
            self.zero_columns = torch.tensor(zero_columns, dtype=torch.bool, device=like.device)
            self.scratch = (torch.zeros_like(like), torch.zeros((), dtype=like.dtype, device=like.device))

    def fill(self, ring: Ring, mask: torch.Tensor) -> None:
        """Pad the rows ``mask`` of ``ring`` from its slot 0, in place."""
        fill_rows(ring.buffer, ring.at(0), mask, self.first, self.zero_columns, self.scratch)


# -- the NaN policy ---------------------------------------------------------------------------------------
class NanPolicy:
    """``nan_policy`` of a class's sensors, applied to the raw capture (GT and measured timeline slot 0)
    right after ``_update_current_timestep_data``: ``"raise"`` raises a ``ValueError`` naming the sensor,
    the envs and the step; ``"hold"`` keeps, per env and component, the last finite raw value of the
    episode (0 before the first); ``"propagate"`` (default) does nothing (and builds no policy).

    Example:
        >>> import torch, sensorgym as sg
        >>> mgr = sg.SensorManager(num_envs=1, dt=0.1)
        >>> s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), nan_policy="hold"))
        >>> mgr.reset({"x": torch.tensor([[1.0, 2.0]])})
        >>> mgr.step({"x": torch.tensor([[float("nan"), 3.0]])})
        >>> s.read().tolist()
        [[1.0, 3.0]]
    """

    def __init__(self, plan: ClassPlan, like: torch.Tensor, clock: Clock) -> None:
        self.clock = clock
        sensors = plan.sensors
        self.raising = [s for s in sensors if s.nan_policy == "raise"]
        column_policy = [s.nan_policy for s in sensors for _ in range(_cols(s.cache_slice))]
        self.holds = "hold" in column_policy
        if self.holds:
            # True where the raw value is used as is (the column does not hold)
            self.passthrough = torch.tensor([p != "hold" for p in column_policy], device=like.device)
            self.gt_held, self.measured_held = torch.zeros_like(like), torch.zeros_like(like)
            self.keep = torch.zeros(like.shape, dtype=torch.bool, device=like.device)
            self.magnitude = torch.zeros_like(like)

    @classmethod
    def build(cls, plan: ClassPlan, like: torch.Tensor, clock: Clock) -> NanPolicy | None:
        """The policy of a class's sensors (None when every sensor propagates or the dtype is not
        floating)."""
        policies = {s.nan_policy for s in plan.sensors}
        if not like.dtype.is_floating_point or policies <= {"propagate"}:
            return None
        return cls(plan, like, clock)

    def __call__(self, gt_timeline: Ring, measured_timeline: Ring, ctx: CaptureContext) -> None:
        """Raw-capture stage: check (``"raise"``) and hold (``"hold"``) slot 0 of both timelines."""
        gt0, measured0 = gt_timeline.at(0), measured_timeline.at(0)
        if self.raising:
            self._raise_on_non_finite(gt0, measured0, ctx.rows)
        if self.holds:
            for x, held in ((gt0, self.gt_held), (measured0, self.measured_held)):
                if ctx.reset_mask is not None:
                    held.masked_fill_(ctx.reset_mask[:, None], 0)  # nothing to hold from the last episode
                torch.abs(x, out=self.magnitude)
                torch.lt(self.magnitude, float("inf"), out=self.keep)
                torch.logical_or(self.keep, self.passthrough, out=self.keep)
                torch.where(self.keep, x, held, out=x)
                held.copy_(x)

    def _raise_on_non_finite(self, gt0: torch.Tensor, m0: torch.Tensor, rows: torch.Tensor | None) -> None:
        """``rows``: the envs this capture is for (a partial reset), None for all."""
        for s in self.raising:
            sl = s.cache_slice
            bad = ~(torch.isfinite(gt0[:, sl]).all(1) & torch.isfinite(m0[:, sl]).all(1))
            if rows is not None:
                bad &= rows  # an env that is not being reset keeps its state: its rows are not captured
            if bool(bad.any()):
                envs = torch.nonzero(bad).flatten().tolist()
                raise ValueError(
                    f"sensor {s.name!r} ({s.sensor_type}) captured non-finite raw values in envs "
                    f"{envs} at step {self.clock.t} (nan_policy='raise'). Fix: check the simulation "
                    "for instability, or use nan_policy='hold' to keep the last finite value."
                )

    def row_state(self) -> list[torch.Tensor]:
        return [self.gt_held, self.measured_held] if self.holds else []


class PrefillTimelines:
    """Raw-capture stage of reset captures: every older timeline slot of a reset env holds the value
    just captured in slot 0 (so a recurrent transform starts in steady state)."""

    def __init__(self, like: torch.Tensor, binding: Binding) -> None:
        self.binding, self.scratch = binding, torch.zeros_like(like)

    def __call__(self, gt_timeline: Ring, measured_timeline: Ring, ctx: CaptureContext) -> None:
        array = self.binding.array  # reset captures only: the views are looked up, made once
        for timeline in (gt_timeline, measured_timeline):
            self.binding.xp.pad_rows(
                array(timeline.buffer), array(timeline.at(0)), ctx.reset_mask, ctx.reset_index,
                array(self.scratch), None, None,
            )  # fmt: skip


# -- the stages of a class's capture ----------------------------------------------------------------------
# Each stage is written once against its class's executor (``binding.xp``), on arrays bound when the class
# plans (ring slots through ``Ring.arrays``, indexed by the clock inline; caches through ``binding.array``).
class CopyToReturnCache:
    """Stage: the latest snapshot of ``source`` (its slot 0) into a return cache."""

    __slots__ = ("cache", "copy", "source")

    def __init__(self, source: Ring, cache: torch.Tensor, binding: Binding) -> None:
        self.source, self.cache, self.copy = source, binding.array(cache), binding.xp.copyto

    def __call__(self, ctx: CaptureContext) -> None:
        source = self.source
        self.copy(self.cache, source.arrays[source.clock.t % source.depth])


class ProjectIntoRing:
    """Stage: ``_post_process`` of the branch's intermediate snapshot into slot 0 of its return ring, and
    (given ``cache``: the GT branch, never delayed) on into the return cache. The identity projection
    (``_post_process`` not overridden) is a copy on the class's executor; an overridden one runs as the
    hook is written (on torch tensors, or on ``md.xp``)."""

    __slots__ = (
        "cache", "copy", "identity", "is_measured", "md", "post_process", "ring", "sensor_cls", "source",
    )  # fmt: skip

    def __init__(
        self,
        sensor_cls: type,
        md: SensorMetadata,
        source: Ring,
        ring: Ring,
        is_measured: bool,
        binding: Binding,
        cache: torch.Tensor | None = None,
    ) -> None:
        self.sensor_cls, self.md, self.source, self.ring = sensor_cls, md, source, ring
        self.post_process, self.is_measured = sensor_cls._post_process, is_measured
        self.identity = not _overrides(sensor_cls, "_post_process")
        self.copy, self.cache = binding.xp.copyto, binding.array(cache)

    def __call__(self, ctx: CaptureContext) -> None:
        ring, source = self.ring, self.source
        if self.identity:
            slot = ring.arrays[ring.clock.t % ring.depth]
            self.copy(slot, source.arrays[source.clock.t % source.depth])
        else:  # the hook, its result into the ring's slot 0 unless written there (one frame: a B = 1 step
            # of a post-processed class runs two of these)
            target = ring.slots[ring.clock.t % ring.depth]  # ring.at(0), inline
            data = source.slots[source.clock.t % source.depth]
            out = self.post_process(self.md, data, ring, is_measured=self.is_measured)
            if out is not target:
                self._place(out, target)
            if self.cache is None:
                return
            slot = ring.arrays[ring.clock.t % ring.depth]
        if self.cache is not None:
            self.copy(self.cache, slot)

    def _place(self, out: torch.Tensor, slot: torch.Tensor) -> None:
        """The hook's result into the ring's slot, unless it is that memory."""
        if out.data_ptr() != slot.data_ptr() or out.stride() != slot.stride() or out.dtype != slot.dtype:
            if out.shape != slot.shape:
                raise ValueError(
                    f"{self.sensor_cls.__name__}._post_process returned shape {tuple(out.shape)}; the "
                    f"return format needs {tuple(slot.shape)} (B, return columns)."
                )
            slot.copy_(out)  # the hook's own tensor


class SampleAndHold:
    """Stage: the sampler's own rate and dropout; envs that take no sample this step show the held one."""

    __slots__ = ("sampler", "snapshots")

    def __init__(self, sampler: Sampler, snapshots: Ring) -> None:
        self.sampler, self.snapshots = sampler, snapshots

    def __call__(self, ctx: CaptureContext) -> None:
        self.sampler.hold(self.snapshots.at(0), ctx)


class WriteHistory:
    """Stage: this step's measured read into slot 0 of the history ring (history is causal: slot ``i``
    is what ``read()`` returned ``i`` steps ago)."""

    __slots__ = ("cache", "copy", "history")

    def __init__(self, history: Ring, cache: torch.Tensor, binding: Binding) -> None:
        self.history, self.cache, self.copy = history, binding.array(cache), binding.xp.copyto

    def __call__(self, ctx: CaptureContext) -> None:
        history = self.history
        self.copy(history.arrays[history.clock.t % history.depth], self.cache)


class PadRing:
    """Stage of reset captures: padding of the reset envs' rows of a return ring (see :class:`Padding`;
    the executor's ``pad_rows``: masked on torch, the reset rows only on numpy)."""

    __slots__ = ("args", "ring", "xp")

    def __init__(self, ring: Ring, padding: Padding, binding: Binding) -> None:
        self.ring, self.xp = ring, binding.xp
        scratch = padding.scratch
        self.args = (
            binding.array(padding.first), binding.array(padding.zero_columns),
            None if scratch is None else (binding.array(scratch[0]), binding.array(scratch[1])),
        )  # fmt: skip

    def __call__(self, ctx: CaptureContext) -> None:
        ring = self.ring
        self.xp.pad_rows(ring.array_buffer, ring.array_at(0), ctx.reset_mask, ctx.reset_index, *self.args)


def _cols(columns: slice) -> int:
    return columns.stop - columns.start
