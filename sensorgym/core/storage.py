"""Storage of one dtype group and one sensor class, and the class's capture as a list of stages.

Storage scopes:

* per intermediate dtype (:class:`DtypeGroup`): the measured working buffer and the GT intermediate
  buffer, each class owning a contiguous block of ``B x class columns`` (class-major: a class's ``(B, c)``
  view is contiguous, so its elementwise work runs at full speed), the GT + measured timeline rings
  (intermediate space, over the classes that use the ring pipeline), and this step's standard normals;
* per class (:class:`ClassStorage`): per branch of the capture (a :class:`Branch`, ground truth and
  measured) the intermediate block, its timeline, the return cache, the return-space ring (GT: only when
  history or an overridden ``_post_process`` needs it) and, measured only, the history ring of the reads
  and the :class:`~sensorgym.core.delay_line.DelayLine` (only with delay or jitter); and for the class the
  :class:`~sensorgym.core.sampler.Sampler` (only with an own rate or dropout), the
  :class:`~sensorgym.core.parameters.ParameterTable`, :class:`NanPolicy` and :class:`Padding`. Without
  delay, history, sampler or ``_post_process``, the return caches are zero-copy views of the intermediate
  block.

**The capture is planned at build.** After the class's hook (``_update_shared_cache``) a class runs a
short list of stages chosen once from its configuration: :class:`CopyToReturnCache`,
:class:`ProjectIntoRing`, :class:`SampleAndHold`, the delay line's ``hold_fixed_shift`` or
``sample_delay``, :class:`WriteHistory`, and, in reset captures only, :class:`PadRing`. A zero-copy
branch has no stage at all. Every stage takes the step's :class:`CaptureContext` (frozen: which envs
reset, which envs the capture is for, whether time advances). A setter that changes what can vary re-plans
the list (:meth:`ClassStorage.plan`).

Example:
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.1)
    >>> fast = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,)))
    >>> slow = mgr.add_sensor(sg.StateSensorOptions(key="y", shape=(1,), delay=0.1, history_length=2))
    >>> mgr.reset({"x": torch.zeros(2, 1), "y": torch.zeros(2, 1)})
    >>> mgr.storage(sg.StateSensor).stage_names()
    ['ProjectIntoRing', 'ProjectIntoRing', 'sample_delay', 'WriteHistory']
"""

from __future__ import annotations

from typing import Any

import torch

from .delay_line import DelayLine, check_ring_memory, ring_memory_error
from .error_model import ErrorModel
from .metadata import CaptureContext, SensorMetadata
from .parameters import ParameterTable
from .plan import ClassPlan
from .replay import refuse_setter
from .ring import Clock, Ring
from .rows import env_mask
from .sampler import Sampler
from .sensor import _overrides, folds_raw_copy, reads_timeline
from .stages import (
    CopyToReturnCache,
    NanPolicy,
    Padding,
    PadRing,
    PrefillTimelines,
    ProjectIntoRing,
    SampleAndHold,
    WriteHistory,
)
from .xp import Binding, numpy_executes

__all__ = ["Branch", "ClassStorage", "DtypeGroup"]


# -- storage ----------------------------------------------------------------------------------------------
class DtypeGroup:
    """Buffers shared by all classes whose intermediate dtype is ``dtype``."""

    def __init__(
        self, dtype: torch.dtype, cols: int, ring_cols: int, depth: int, num_envs: int, device: torch.device,
        clock: Clock,
    ) -> None:  # fmt: skip
        self.dtype, self.cols = dtype, cols
        self.inter = torch.zeros(num_envs, cols, dtype=dtype, device=device)
        self.gt_inter = torch.zeros(num_envs, cols, dtype=dtype, device=device)
        self.gt_timeline = self.m_timeline = None
        if ring_cols:
            self.gt_timeline = Ring(depth, num_envs, ring_cols, dtype, device, clock)
            self.m_timeline = Ring(depth, num_envs, ring_cols, dtype, device, clock)
        # (k, B, span) standard normals: noise, random walk (and Gauss-Markov drive: k = 3)
        self.draws: torch.Tensor | None = None
        #: the classes of this dtype (their storages, added at build) and what a step fills with standard
        #: normals for them (:meth:`plan_draws`): the whole buffer with one generator, else a block per class
        self.members: list[ClassStorage] = []
        self.fills: list[torch.Tensor] = []
        self.one_generator = True

    def block(self, buffer: torch.Tensor, cols: slice) -> torch.Tensor:
        """The contiguous ``(B, width)`` block of columns ``cols`` of a ``(B, cols)`` group buffer (the
        storage is class-major: the block holds ``B * width`` consecutive elements)."""
        b = buffer.shape[0]
        return buffer.view(-1)[b * cols.start : b * cols.stop].view(b, cols.stop - cols.start)

    def plan_draws(self) -> None:
        """Lay out this step's standard normals over the member classes that need them and hand each its
        ``(k, B, c)`` block; :attr:`fills` is what a step fills (the whole buffer with one generator, else
        one block per class: per-env generators draw by env row). At build, and when a setter changes
        which classes draw."""
        storages = self.members
        users = [storage for storage in storages if storage.md.imperfections.needs_draws]
        for storage in storages:
            if storage not in users:
                storage.md.imperfections.use_draws(None)
        if not users:
            self.draws, self.fills = None, []
            return
        lo, hi = (
            min(storage.columns.start for storage in users),
            max(storage.columns.stop for storage in users),
        )
        b = self.inter.shape[0]
        # a third block drives Gauss-Markov biases; without one the layout (and the stream) is unchanged
        k = max(storage.md.imperfections.draw_blocks for storage in users)
        if self.draws is None or self.draws.shape != (k, b, hi - lo) or self._draw_start != lo:
            self.draws = torch.zeros(k, b, hi - lo, dtype=self.dtype, device=self.inter.device)
            self._draw_start = lo
        views = []
        for storage in users:  # class-major like the buffers: each class's draws are contiguous (B, c) blocks
            start, stop = storage.columns.start - lo, storage.columns.stop - lo
            view = self.draws.view(k, -1)[:, b * start : b * stop].view(k, b, stop - start)
            storage.md.imperfections.use_draws(view)
            views.append(view)
        self.fills = [self.draws] if self.one_generator else views

    def state_tensors(self) -> dict[str, torch.Tensor]:
        out = {"inter": self.inter, "gt_inter": self.gt_inter}
        if self.gt_timeline is not None:
            out["gt_timeline"] = self.gt_timeline.buffer
            out["m_timeline"] = self.m_timeline.buffer
        return out


class Branch:
    """The buffers of one branch of a class's capture: the ground truth (never delayed) or the measured
    reads. A :class:`ClassStorage` holds one of each (``gt``, ``measured``).

    Attributes:
        intermediate: the class's ``(B, c)`` block of its group's intermediate buffer (ground truth: the GT
            intermediate; measured: the working buffer, this step's measured snapshot).
        timeline: the ring of intermediate snapshots the class's hook sees (its block of the group's
            timeline ring, or a one-slot ring of ``intermediate`` for a class that reads no timeline).
        cache: the ``(B, return cols)`` return cache, or ``intermediate`` itself (zero copy:
            :attr:`is_alias`).
        ring: the return-space ring the capture projects into, or None (ground truth: with history or an
            overridden ``_post_process``; measured: the delay line's ring, or one for ``_post_process``).
        history: the ring ``read(history_length=n)`` reads, or None (ground truth: its ``ring``; measured:
            the ring of the last ``history_length`` reads, written after the delay).
        delay_line: the measured branch's :class:`~sensorgym.core.delay_line.DelayLine` (only with delay or
            jitter), else None.
    """

    def __init__(self, intermediate: torch.Tensor, timeline: Ring) -> None:
        self.intermediate, self.timeline = intermediate, timeline
        self.cache = intermediate  # zero copy until the storage gives the branch a cache of its own
        self.ring: Ring | None = None
        self.history: Ring | None = None
        self.delay_line: DelayLine | None = None

    @property
    def is_alias(self) -> bool:
        """Whether the return cache is the intermediate block itself (zero copy)."""
        return self.cache.data_ptr() == self.intermediate.data_ptr()


class ClassStorage:
    """Buffers, components and the planned capture of one sensor class (see the module docstring).

    The buffers of the capture's two branches are in :attr:`gt` and :attr:`measured` (each a
    :class:`Branch`, read through them: ``storage.measured.cache``, ``storage.gt.history``, ...); what a
    packer such as the Gymnasium layer's ``ObservationLayout`` reads of them is read-only by contract:
    the return caches ``(B, return cols)`` and the history rings (:class:`~sensorgym.core.ring.Ring`, or
    None). :meth:`ring_depths` and :meth:`stage_names` serve diagnostics.
    """

    def __init__(
        self,
        sensor_cls: type,
        sensors: list,
        group: DtypeGroup,
        columns: slice,
        return_dtype: torch.dtype,
        return_cols: int,
        *,
        dt: float,
        random: Any,
        clock: Clock,
        compiled: bool,
        episode_steps: torch.Tensor,
        executor: str = "torch",
    ) -> None:
        post_processed = _overrides(sensor_cls, "_post_process")
        same_space = return_dtype == group.dtype and return_cols == _cols(columns)
        # the executor: torch where numpy cannot view the buffers (bfloat16), promotes differently
        # (float16), or where an identity projection would cast between spaces (torch's cast is the
        # contract's)
        numpy_ok = numpy_executes(group.dtype, return_dtype) and (post_processed or same_space)
        #: the class's executor bound to its buffers: every stage and component takes its arrays from it;
        #: ``binding.name`` (``"torch"`` or ``"numpy"``) says how the planned stages and the kernel run
        self.binding = Binding(executor if numpy_ok else "torch")
        b, device = group.inter.shape[0], group.inter.device
        self.cls, self.sensors, self.group, self.columns = sensor_cls, sensors, group, columns
        working = group.block(group.inter, columns)  # this step's measured intermediate snapshot
        gt_intermediate = group.block(group.gt_inter, columns)
        self.uses_timeline = reads_timeline(sensor_cls)
        if self.uses_timeline:  # timeline classes come first in a group: their blocks start at column 0
            timeline = group.gt_timeline.block(columns.start, _cols(columns))
            measured_timeline = group.m_timeline.block(columns.start, _cols(columns))
        else:
            timeline = Ring.single(gt_intermediate, clock)
            measured_timeline = Ring.single(working, clock)
        gt, measured = Branch(gt_intermediate, timeline), Branch(working, measured_timeline)
        #: the two branches of the capture (:class:`Branch`): ground truth and measured
        self.gt, self.measured = gt, measured
        #: what the class's sensors' options ask of it, read once (:class:`~sensorgym.core.plan.ClassPlan`):
        #: every component below is built from it
        self.class_plan = plan = ClassPlan.build(sensors, dt)
        param_dtype = group.dtype if plan.simple and group.dtype.is_floating_point else None
        self.params = ParameterTable(plan, b, device, random, param_dtype, self.binding)
        self.nan_policy = NanPolicy.build(plan, working, clock)
        raw_step = [self.nan_policy] if self.nan_policy is not None else []
        raw_reset = raw_step + ([PrefillTimelines(working, self.binding)] if self.uses_timeline else [])
        self.md = SensorMetadata(
            sensor_cls, sensors, b, dt, device, random, self.params,
            ErrorModel(self.params, compiled, self.binding), raw_step, raw_reset, self.binding,
        )  # fmt: skip
        if folds_raw_copy(sensor_cls) and not raw_reset:  # no stage may look at the working buffer first
            self.md.imperfections.fold_raw_copy(gt_intermediate)

        self.history_length = plan.history_length
        shifts = [s.deepest_shift for s in plan.sensors]
        self.max_shift = max(shifts)
        widths = [_cols(s.return_slice) for s in sensors]
        sampled = plan.needs_sampler
        costs = dict(numpy_views=self.binding.name == "numpy", sampler_columns=len(sensors) if sampled else 0)
        check_ring_memory(plan.sensors, b, return_cols, return_dtype, device, dt, **costs)
        self.sampler: Sampler | None = None
        if sampled:
            self.sampler = Sampler(
                plan, widths, b, device, random, clock, return_dtype,
                self.max_shift + 1 if self.max_shift else 0, episode_steps,
            )  # fmt: skip
        self.md.imperfections.attach_sampler(self.sampler)
        #: the option fields a reset redraws (the error terms' tables that derive from them are recomputed)
        self._redrawn = frozenset(self.params._random) | frozenset(
            f
            for fields in (self.sampler.rates.randomized.values() if self.sampler is not None else ())
            for f in fields
        )
        gt_zero_copy = same_space and not post_processed and self.history_length == 0
        measured_zero_copy = gt_zero_copy and self.max_shift == 0 and self.sampler is None

        def ring(depth: int) -> Ring:
            return Ring(depth, b, return_cols, return_dtype, device, clock)

        def cache() -> torch.Tensor:
            return torch.zeros(b, return_cols, dtype=return_dtype, device=device)

        gt.cache = gt_intermediate if gt_zero_copy else cache()
        measured.cache = working if measured_zero_copy else cache()
        # _post_process may read timeline.at(1) .. at(projection_depth - 1)
        min_depth = sensor_cls.projection_depth if post_processed else 1
        if post_processed and self.history_length == 0 and min_depth == 1:  # it reads only what it writes
            gt.ring = gt.history = Ring.single(gt.cache, clock)  # the projection is the return cache
        elif post_processed or self.history_length:  # the GT ring is also the GT history
            gt.ring = gt.history = ring(max(self.history_length, min_depth))
        try:
            if self.max_shift:
                depth = max(self.max_shift + 1, min_depth)
                measured.delay_line = DelayLine(
                    widths, self.params.times, measured.cache, depth, random, clock, self.binding
                )
            if measured.delay_line is not None:
                measured.ring = measured.delay_line.ring
            elif post_processed:  # with projection_depth 1 the projection is the return cache itself
                measured.ring = Ring.single(measured.cache, clock) if min_depth == 1 else ring(min_depth)
        except (RuntimeError, MemoryError) as e:  # the allocator refused: say which option asked for it
            raise ring_memory_error(
                plan.sensors, b, return_cols, return_dtype, device, dt, None, **costs
            ) from e
        measured.history = ring(self.history_length) if self.history_length else None
        zero = [s.padding_type == "zero" for s in plan.sensors for _ in range(_cols(s.return_slice))]
        self.padding = Padding(zero, measured.cache)
        self.plan()

    # -- the planned capture -----------------------------------------------------------------------------
    def plan(self) -> None:
        """Compose the capture's stages from the configuration and bind every buffer they use to the class's
        executor (at build, after a setter that changes what can vary, after loading a checkpoint or
        copying the manager)."""
        binding, gt, measured = self.binding, self.gt, self.measured
        for ring in (gt.timeline, measured.timeline, gt.ring, measured.ring, measured.history):
            if ring is not None:
                ring.bind(binding)
        self.params.bind()
        line = measured.delay_line
        if line is not None:
            line.follow_parameters()
            line.bind()
        self.md.imperfections.plan()
        stages: list[tuple[Any, bool, str, str]] = []  # (stage, only in reset captures, name, executor)

        def add(stage: Any, reset_only: bool = False, name: str | None = None, executor: str = "") -> None:
            stages.append((stage, reset_only, name or type(stage).__name__, executor or binding.name))

        cls, md, clock = self.cls, self.md, gt.timeline.clock
        # an overridden _post_process runs as written (on torch tensors); the identity is a copy
        hook = "torch" if _overrides(cls, "_post_process") else ""
        # ground truth: never delayed
        if gt.is_alias:
            if self.uses_timeline:
                add(CopyToReturnCache(gt.timeline, gt.cache, binding))
        elif gt.ring is not None:
            # padding keeps slot 0, so the cache can be written before the ring is padded
            cache = None if _is_cache(gt.ring, gt.cache) else gt.cache
            project = ProjectIntoRing(cls, md, gt.timeline, gt.ring, False, binding, cache)
            add(project, executor=hook)
            add(PadRing(gt.ring, self.padding, binding), reset_only=True)
        else:
            add(CopyToReturnCache(gt.timeline, gt.cache, binding))
        # measured: project, hold, delay (+ jitter), history
        if not measured.is_alias:
            working = Ring.single(measured.intermediate, clock)
            working.bind(binding)
            if measured.ring is not None:
                add(ProjectIntoRing(cls, md, working, measured.ring, True, binding), executor=hook)
                if self.sampler is not None:
                    add(SampleAndHold(self.sampler, measured.ring), executor="torch")  # the sampler: torch
                add(PadRing(measured.ring, self.padding, binding), reset_only=True)
                if line is not None:  # its read, on the executor the delay line runs it on
                    add(line.stage(), name=line.stage_name(), executor=line.stage_executor())
                elif not _is_cache(measured.ring, measured.cache):
                    add(CopyToReturnCache(measured.ring, measured.cache, binding))
            else:
                add(CopyToReturnCache(working, measured.cache, binding))
                if self.sampler is not None:
                    held = Ring.single(measured.cache, clock)
                    add(SampleAndHold(self.sampler, held), executor="torch")
            if measured.history is not None:
                add(WriteHistory(measured.history, measured.cache, binding))
                add(PadRing(measured.history, self.padding, binding), reset_only=True)
        self.step_stages = tuple(stage for stage, reset_only, _, _ in stages if not reset_only)
        self.reset_stages = tuple(stage for stage, _, _, _ in stages)
        self._stage_names = (
            [(name, executor) for _, reset_only, name, executor in stages if not reset_only],
            [(name, executor) for _, _, name, executor in stages],
        )
        # the branches' buffers the hook receives, bound here: capture reads them as one attribute
        self._hook_args = (gt.timeline, measured.timeline, measured.intermediate)

    def capture(self, state: Any, ctx: CaptureContext) -> None:
        """One capture of the class: its hook, then its planned stages."""
        if self.sampler is not None and self.sampler.decides_early:  # the hook's filter needs the due samples
            self.sampler.decide(ctx)
        timeline, measured_timeline, working = self._hook_args
        if self.md.imperfections.inputs:  # the state entries an error term reads (an exogenous input)
            self.md.imperfections.copy_inputs(state)
        self.cls._update_shared_cache(state, self.md, timeline, measured_timeline, working)
        for stage in self.step_stages if ctx.reset_mask is None else self.reset_stages:
            stage(ctx)

    # -- the run-time setters (the parameter table owns the values; the class re-plans what they change) --
    def set_component(self, sensor: Any, name: str, value: Any, envs_idx: Any) -> None:
        """``set_noise``/``set_bias``/``set_random_walk``/``set_resolution`` of ``sensor`` for ``envs_idx``
        (all envs: None); the dtype group lays out its draws again (a class may start drawing)."""
        replay = self.class_plan.sensors[sensor.index].settings.get("replay")
        if replay is not None and name in ("noise", "random_walk"):  # the recording holds them
            refuse_setter(sensor, name, value, replay)
        self.params.set_component(sensor, name, value, self._rows(envs_idx))
        self.group.plan_draws()  # re-binds every member class's error terms too

    def set_time(self, sensor: Any, name: str, value: Any, envs_idx: Any) -> None:
        """``set_delay``/``set_jitter`` (seconds) of ``sensor`` for ``envs_idx`` (all envs: None)."""
        self.params.set_time(sensor, name, value, self._rows(envs_idx), self.max_shift)
        self.plan()  # the shift may no longer be fixed: the delay stage changes

    def _rows(self, envs_idx: Any) -> torch.Tensor:
        b = self.gt.intermediate.shape[0]
        if envs_idx is None:
            return torch.arange(b, device=self.gt.intermediate.device)
        return torch.nonzero(env_mask(envs_idx, b, self.gt.intermediate.device, "envs_idx")).flatten()

    def stage_names(self, reset: bool = False) -> list[str]:
        """Names of the stages a step (``reset=True``: a reset capture) runs after the class's hook."""
        return [name for name, _ in self._stage_names[reset]]

    def stage_executors(self, reset: bool = False) -> list[str]:
        """The executor (``"torch"`` or ``"numpy"``) each of :meth:`stage_names` runs on."""
        return [route for _, route in self._stage_names[reset]]

    # -- reads -------------------------------------------------------------------------------------------
    def current_shift(self, j: int) -> torch.Tensor | int:
        """The delay shift (steps) behind sensor ``j``'s current read: ``(B,)`` or one int for all."""
        line = self.measured.delay_line
        return 0 if line is None else line.current_shift(j)

    def ring_depths(self) -> list[int]:
        """Depths of every ring the class's capture indexes by the clock (CUDA-graph phases)."""
        gt, measured = self.gt, self.measured
        rings = [gt.timeline if self.uses_timeline else None, gt.ring, measured.ring, measured.history]
        if self.sampler is not None:
            rings.append(self.sampler.samples.ring)
        return [r.depth for r in rings if r is not None]

    # -- save/restore and persistence --------------------------------------------------------------------
    def row_state(self) -> list[torch.Tensor]:
        """Tensors (leading dim B) a capture writes for every env: what a reset must restore for the
        envs it does not reset."""
        gt, measured = self.gt, self.measured
        out = [measured.intermediate, gt.intermediate]
        if self.uses_timeline:
            out += [gt.timeline.at(0), measured.timeline.at(0)]
        out += [ring.at(0) for ring in (gt.ring, measured.ring, measured.history) if ring is not None]
        if not gt.is_alias:
            out.append(gt.cache)
        if not measured.is_alias:
            out.append(measured.cache)
        if measured.delay_line is not None:
            out.append(measured.delay_line.prev_shift)
        out += list(self.md.imperfections.state_tensors().values())
        if self.nan_policy is not None:
            out += self.nan_policy.row_state()
        if self.sampler is not None:
            out += self.sampler.row_state()
        out += list(self.md.extra.values())
        return out

    def resample(self, mask: torch.Tensor) -> None:
        """New values of every randomized option for the envs in ``mask`` (an episode starts), and the
        error model's coefficients derived from them."""
        self.params.resample(mask)
        if self.sampler is not None:
            self.sampler.resample(mask)
        self.md.imperfections.redraw(mask)  # what an error term draws at a reset (a replay's offsets)
        if self._redrawn:  # the error terms' tables derived from a value just drawn
            self.md.imperfections.refresh(self._redrawn)

    def refresh_derived(self) -> None:
        """Recompute every table derived from the per-env values (after restoring them)."""
        self.params.refresh_derived()
        if self.sampler is not None:
            self.sampler.refresh_derived()
        self.md.imperfections.refresh()

    def parameter_tensors(self) -> list[torch.Tensor]:
        """The per-env option values a reset resamples."""
        out = list(self.params.parameter_tensors())
        if self.sampler is not None:
            out += self.sampler.parameter_tensors()
        return out

    def state_tensors(self) -> dict[str, torch.Tensor]:
        gt, measured = self.gt, self.measured
        out: dict[str, torch.Tensor] = {}
        for name, ring in (("gt_ring", gt.ring), ("m_ring", measured.ring), ("hist", measured.history)):
            if ring is not None:
                out[name] = ring.buffer
        if not gt.is_alias:
            out["gt_cache"] = gt.cache
        if not measured.is_alias:
            out["m_cache"] = measured.cache
        if measured.delay_line is not None:
            out["prev_shift"] = measured.delay_line.prev_shift
        if self.nan_policy is not None and self.nan_policy.holds:
            out["gt_hold"], out["m_hold"] = self.nan_policy.row_state()
        if self.sampler is not None:
            for k, v in self.sampler.state_tensors().items():
                out[f"sampler.{k}"] = v
        for k, v in self.params.state_tensors().items():
            out[f"md.{k}"] = v
        for k, v in self.md.imperfections.state_tensors().items():
            out[f"md.{k}"] = v
        for k, v in self.md.extra.items():
            out[f"md.extra.{k}"] = v
        return out


def _cols(columns: slice) -> int:
    return columns.stop - columns.start


def _is_cache(ring: Ring, cache: torch.Tensor) -> bool:
    """Whether ``ring`` is the one-slot ring over the return cache ``cache`` (``projection_depth`` 1)."""
    return ring.depth == 1 and ring.buffer.data_ptr() == cache.data_ptr()
