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

from typing import Any

import numpy as np
import torch

from .metadata import CaptureContext, SensorMetadata
from .ring import Clock, Ring
from .sampler import Sampler
from .sensor import _overrides

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
    "fill_rows_numpy",
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
    """Episode-start padding of a ring ``(R, B, c)`` for the rows in ``mask``: every slot gets ``slot0``
    (``"reset"`` padding), or zero in ``zero_cols`` with ``slot0`` kept in slot 0 (``"zero"``).
    ``first`` (and ``pad``: a ``(B, c)`` buffer and a 0-d zero) are scratch; nothing is allocated."""
    rows = mask[None, :, None]
    first.copy_(slot0)  # slot0 aliases buffer; where() refuses overlapping input and output
    if zero_cols is None:
        torch.where(rows, first.unsqueeze(0), buffer, out=buffer)
        return
    padded, zero = pad
    torch.where(zero_cols[None, :], zero, first, out=padded)
    torch.where(rows, padded.unsqueeze(0), buffer, out=buffer)
    torch.where(mask[:, None], first, slot0, out=slot0)


def fill_rows_numpy(buffer: Any, slot0: Any, index: Any, zero_cols: Any = None) -> None:
    """:func:`fill_rows` on numpy views of the same memory (the numpy executor), for the envs in ``index``
    (int64 indices): the same values, written to those rows only."""
    first = slot0[index]  # a copy (fancy indexing): slot0 aliases buffer
    if zero_cols is None:
        buffer[:, index] = first
        return
    buffer[:, index] = np.where(zero_cols, np.zeros((), first.dtype), first)
    slot0[index] = first


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

    def __init__(self, sensors: list, like: torch.Tensor, clock: Clock) -> None:
        self.clock = clock
        self.raising = [s for s in sensors if s.options.nan_policy == "raise"]
        column_policy = [s.options.nan_policy for s in sensors for _ in range(_cols(s.cache_slice))]
        self.holds = "hold" in column_policy
        if self.holds:
            # True where the raw value is used as is (the column does not hold)
            self.passthrough = torch.tensor([p != "hold" for p in column_policy], device=like.device)
            self.gt_held, self.measured_held = torch.zeros_like(like), torch.zeros_like(like)
            self.keep = torch.zeros(like.shape, dtype=torch.bool, device=like.device)
            self.magnitude = torch.zeros_like(like)

    @classmethod
    def build(cls, sensors: list, like: torch.Tensor, clock: Clock) -> NanPolicy | None:
        """The policy of ``sensors`` (None when every sensor propagates or the dtype is not floating)."""
        policies = {s.options.nan_policy for s in sensors}
        if not like.dtype.is_floating_point or policies <= {"propagate"}:
            return None
        return cls(sensors, like, clock)

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
                    f"sensor {s.name!r} ({type(s).__name__}) captured non-finite raw values in envs "
                    f"{envs} at step {self.clock.t} (nan_policy='raise'). Fix: check the simulation "
                    "for instability, or use nan_policy='hold' to keep the last finite value."
                )

    def row_state(self) -> list[torch.Tensor]:
        return [self.gt_held, self.measured_held] if self.holds else []


class PrefillTimelines:
    """Raw-capture stage of reset captures: every older timeline slot of a reset env holds the value
    just captured in slot 0 (so a recurrent transform starts in steady state)."""

    def __init__(self, like: torch.Tensor, executor: str = "torch") -> None:
        self.scratch = torch.zeros_like(like)
        self.numpy = executor == "numpy"

    def __call__(self, gt_timeline: Ring, measured_timeline: Ring, ctx: CaptureContext) -> None:
        for timeline in (gt_timeline, measured_timeline):
            if self.numpy and ctx.reset_index is not None:
                fill_rows_numpy(timeline.numpy_buffer(), timeline.numpy_at(0), ctx.reset_index)
            else:
                fill_rows(timeline.buffer, timeline.at(0), ctx.reset_mask, self.scratch)


# -- the stages of a class's capture ----------------------------------------------------------------------
class CopyToReturnCache:
    """Stage: the latest snapshot of ``source`` (its slot 0) into a return cache."""

    __slots__ = ("cache", "source")

    def __init__(self, source: Ring, cache: torch.Tensor) -> None:
        self.source, self.cache = source, cache

    def __call__(self, ctx: CaptureContext) -> None:
        self.cache.copy_(self.source.at(0))

    def numpy_stage(self) -> Any:
        """This stage on numpy views of the same memory (the numpy executor), or None."""
        if self.cache.dtype != self.source.buffer.dtype or self.cache.shape != self.source.buffer.shape[1:]:
            return None
        return NumpyCopy(self.source, self.cache)


class ProjectIntoRing:
    """Stage: ``_post_process`` of the branch's intermediate snapshot into slot 0 of its return ring, and
    (given ``cache``: the GT branch, never delayed) on into the return cache."""

    __slots__ = ("cache", "is_measured", "md", "numpy_cache", "post_process", "ring", "sensor_cls", "source")

    def __init__(
        self,
        sensor_cls: type,
        md: SensorMetadata,
        source: Ring,
        ring: Ring,
        is_measured: bool,
        cache: torch.Tensor | None = None,
    ) -> None:
        self.sensor_cls, self.md, self.source, self.ring = sensor_cls, md, source, ring
        self.post_process, self.is_measured, self.cache = sensor_cls._post_process, is_measured, cache
        self.numpy_cache: Any = None  # the numpy executor's view of `cache` (see numpy_stage)

    def __call__(self, ctx: CaptureContext) -> None:
        slot = self.ring.at(0)
        out = self.post_process(self.md, self.source.at(0), self.ring, is_measured=self.is_measured)
        if out.data_ptr() != slot.data_ptr() or out.stride() != slot.stride() or out.dtype != slot.dtype:
            if out.shape != slot.shape:
                raise ValueError(
                    f"{self.sensor_cls.__name__}._post_process returned shape {tuple(out.shape)}; the return "
                    f"format needs {tuple(slot.shape)} (B, return columns)."
                )
            slot.copy_(out)
        if self.numpy_cache is not None:
            np.copyto(self.numpy_cache, self.ring.numpy_at(0))
        elif self.cache is not None:
            self.cache.copy_(slot)

    def numpy_stage(self) -> Any:
        """The identity projection as numpy copies of the same memory (the numpy executor). With an
        overridden ``_post_process`` (the hook runs as it is written, e.g. on ``md.xp``): this stage with
        its copy into the return cache through numpy; None when it has no such copy, or for a projection
        that changes dtype or shape."""
        if _overrides(self.sensor_cls, "_post_process"):
            if self.cache is None or self.cache.dtype != self.ring.buffer.dtype:
                return None
            stage = ProjectIntoRing(
                self.sensor_cls, self.md, self.source, self.ring, self.is_measured, self.cache
            )
            stage.numpy_cache = self.cache.numpy()
            return stage
        src, ring = self.source.buffer, self.ring.buffer
        if src.dtype != ring.dtype or src.shape[1:] != ring.shape[1:]:
            return None
        return NumpyCopy(self.source, self.ring, self.cache)


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

    __slots__ = ("cache", "history")

    def __init__(self, history: Ring, cache: torch.Tensor) -> None:
        self.history, self.cache = history, cache

    def __call__(self, ctx: CaptureContext) -> None:
        self.history.at(0).copy_(self.cache)

    def numpy_stage(self) -> Any:
        """This stage on numpy views of the same memory (the numpy executor)."""
        return NumpyCopy(self.cache, self.history)


class NumpyCopy:
    """A copy stage of the numpy executor: slot 0 of ``source`` (a :class:`Ring`, or a cache) into slot 0
    of ``target`` (a ring or a cache), and on into ``cache`` when given; numpy views of the same memory."""

    __slots__ = ("cache", "source", "source_ring", "target", "target_ring")

    def __init__(self, source: Ring | torch.Tensor, target: Ring | torch.Tensor, cache: Any = None) -> None:
        self.cache = None if cache is None else cache.numpy()
        self.source_ring = source if isinstance(source, Ring) else None
        self.target_ring = target if isinstance(target, Ring) else None
        self.source = None if self.source_ring is not None else source.numpy()
        self.target = None if self.target_ring is not None else target.numpy()

    def __call__(self, ctx: CaptureContext) -> None:
        src = self.source if self.source_ring is None else self.source_ring.numpy_at(0)
        dst = self.target if self.target_ring is None else self.target_ring.numpy_at(0)
        np.copyto(dst, src)
        if self.cache is not None:
            np.copyto(self.cache, dst)


class PadRing:
    """Stage of reset captures: padding of the reset envs' rows of a return ring (see :class:`Padding`)."""

    __slots__ = ("padding", "ring")

    def __init__(self, ring: Ring, padding: Padding) -> None:
        self.ring, self.padding = ring, padding

    def __call__(self, ctx: CaptureContext) -> None:
        ring, pad = self.ring, self.padding
        fill_rows(ring.buffer, ring.at(0), ctx.reset_mask, pad.first, pad.zero_columns, pad.scratch)

    def numpy_stage(self) -> Any:
        """This stage on numpy views of the same memory (the numpy executor)."""
        return _PadRingNumpy(self)


class _PadRingNumpy:
    """:class:`PadRing` on numpy views, writing only the reset envs' rows (``ctx.reset_index``)."""

    __slots__ = ("stage", "zero_columns")

    def __init__(self, stage: PadRing) -> None:
        zero = stage.padding.zero_columns
        self.stage, self.zero_columns = stage, None if zero is None else zero.numpy()

    def __call__(self, ctx: CaptureContext) -> None:
        if ctx.reset_index is None:  # a context made without the indices: the masked torch route
            self.stage(ctx)
            return
        ring = self.stage.ring
        fill_rows_numpy(ring.numpy_buffer(), ring.numpy_at(0), ctx.reset_index, self.zero_columns)


def _cols(columns: slice) -> int:
    return columns.stop - columns.start
