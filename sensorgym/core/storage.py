"""Storage of one dtype group and one sensor class, and the per-class step that runs on it.

Storage scopes (SPEC 2.4):

* per intermediate dtype (:class:`DtypeGroup`): the measured working buffer and the GT intermediate
  buffer, each class owning a contiguous block of ``B x class columns`` (class-major: a class's ``(B, c)``
  view is contiguous, so its elementwise work runs at full speed), and the GT + measured timeline rings
  (intermediate space), laid out the same way in every slot, over the classes that use the ring pipeline;
* per class (:class:`ClassStorage`): return caches, GT and measured return-space rings (only when delay,
  jitter, history or an overridden ``_post_process`` needs them), the history ring of delayed reads, the
  delay/jitter state, and the :class:`~sensorgym.core.sampler.Sampler` of classes whose sensors have their own
  update rate or dropout (SPEC 2.8). Without any of those the return caches are zero-copy views of the
  intermediate slice.

Example:
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.1)
    >>> fast = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,)))
    >>> mgr.reset({"x": torch.zeros(2, 1)})
    >>> mgr.storage(sg.StateSensor).measured_is_alias  # no delay/history/post-process: zero copy
    True
"""

from __future__ import annotations

from typing import Any

import torch

from .memory import check_ring_memory, ring_memory_error
from .metadata import SensorMetadata
from .ring import Clock, Ring, SingleSlot
from .sampler import Sampler, needs_sampler
from .sensor import reads_timeline

__all__ = ["ClassStorage", "DtypeGroup", "fill_rows"]

_FAR = 1 << 40  # "no previous read": larger than any shift


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


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr() and a.stride() == b.stride() and a.dtype == b.dtype


class DtypeGroup:
    """Buffers shared by all classes whose intermediate dtype is ``dtype``."""

    def __init__(
        self,
        dtype: torch.dtype,
        cols: int,
        ring_cols: int,
        depth: int,
        num_envs: int,
        device: torch.device,
        clock: Clock,
    ) -> None:
        self.dtype = dtype
        self.cols = cols
        self.ring_cols = ring_cols
        self.inter = torch.zeros(num_envs, cols, dtype=dtype, device=device)
        self.gt_inter = torch.zeros(num_envs, cols, dtype=dtype, device=device)
        self.gt_timeline = self.m_timeline = None
        if ring_cols:
            self.gt_timeline = Ring(depth, num_envs, ring_cols, dtype, device, clock)
            self.m_timeline = Ring(depth, num_envs, ring_cols, dtype, device, clock)
        self.draws: torch.Tensor | None = None  # (2, B, span) standard normals: noise, random walk
        self.draw_start = 0
        self.draw_views: list[torch.Tensor] = []  # per class (2, B, c) blocks of ``draws``

    def block(self, buffer: torch.Tensor, cols: slice) -> torch.Tensor:
        """The contiguous ``(B, width)`` block of columns ``cols`` of a ``(B, cols)`` group buffer (the
        storage is class-major: the block holds ``B * width`` consecutive elements)."""
        b = buffer.shape[0]
        return buffer.view(-1)[b * cols.start : b * cols.stop].view(b, cols.stop - cols.start)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        out = {"inter": self.inter, "gt_inter": self.gt_inter}
        if self.gt_timeline is not None:
            out["gt_timeline"] = self.gt_timeline.buffer
            out["m_timeline"] = self.m_timeline.buffer
        return out


class ClassStorage:
    """Buffers and the per-step pipeline of one sensor class."""

    def __init__(
        self,
        cls: type,
        sensors: list,
        md: SensorMetadata,
        group: DtypeGroup,
        islice: slice,
        rdtype: torch.dtype,
        rcols: int,
        pp_overridden: bool,
        clock: Clock,
    ) -> None:
        self.cls, self.sensors, self.md, self.group = cls, sensors, md, group
        self.islice, self.rdtype, self.rcols = islice, rdtype, rcols
        self.pp = pp_overridden
        self.clock = clock
        b, device = md.num_envs, md.device
        self.inter = group.block(group.inter, islice)
        self.gt_inter = group.block(group.gt_inter, islice)
        self.uses_timeline = reads_timeline(cls)
        if self.uses_timeline:  # timeline classes come first in a group: their blocks start at column 0
            width = islice.stop - islice.start
            self.gt_tl = group.gt_timeline.block(islice.start, width)
            self.m_tl = group.m_timeline.block(islice.start, width)
        else:
            self.gt_tl, self.m_tl = SingleSlot(self.gt_inter), SingleSlot(self.inter)
        md._finish_raw_capture = self._finish_raw_capture

        same_space = rdtype == group.dtype and rcols == islice.stop - islice.start
        self.H = max(s.options.history_length for s in sensors)
        self.max_shift = max(md.max_shift_per_sensor())
        check_ring_memory(sensors, md, self.max_shift, rcols, rdtype)
        self.sampler: Sampler | None = None
        if any(needs_sampler(s.options, md.dt) for s in sensors):
            self.sampler = Sampler(
                sensors,
                [_width(s) for s in sensors],
                b,
                md.dt,
                device,
                md.random,
                clock,
                rdtype,
                self.max_shift + 1 if self.max_shift else 0,
            )
        self.gt_is_alias = same_space and not self.pp and self.H == 0
        self.measured_is_alias = self.gt_is_alias and self.max_shift == 0 and self.sampler is None

        def ring(depth: int) -> Ring:
            return Ring(depth, b, rcols, rdtype, device, clock)

        def cache() -> torch.Tensor:
            return torch.zeros(b, rcols, dtype=rdtype, device=device)

        self.gt_cache = self.gt_inter if self.gt_is_alias else cache()
        self.m_cache = self.inter if self.measured_is_alias else cache()
        pp_depth = 2 if self.pp else 1
        self.gt_ring = ring(max(self.H, pp_depth)) if (self.pp or self.H) else None
        try:
            self.m_ring = ring(max(self.max_shift + 1, pp_depth)) if (self.pp or self.max_shift) else None
        except (RuntimeError, MemoryError) as e:  # the allocator refused: say which option asked for it
            raise ring_memory_error(sensors, md, self.max_shift, rcols, rdtype, None) from e
        self.hist = ring(self.H) if self.H else None

        zero = [s.options.padding_type == "zero" for s in sensors for _ in range(_width(s))]
        self.zero_cols = torch.tensor(zero, dtype=torch.bool, device=device) if any(zero) else None
        zero0d = torch.zeros((), dtype=rdtype, device=device)
        self.pad_scratch = (cache(), zero0d) if any(zero) else None
        self.first_scratch = cache()
        self.tl_scratch = torch.zeros_like(self.inter)

        if self.max_shift:
            n = len(sensors)
            col_to_sensor = [j for j, s in enumerate(sensors) for _ in range(_width(s))]
            self.col_to_sensor = torch.tensor(col_to_sensor, dtype=torch.long, device=device)
            self.shift = torch.zeros(b, n, dtype=torch.long, device=device)
            self.prev_shift = torch.full((b, n), _FAR, dtype=torch.long, device=device)
            md._prev_shift = self.prev_shift
            self._one = torch.ones((), dtype=torch.long, device=device)
            widths = {_width(s) for s in sensors}
            self.per_sensor_index = len(widths) == 1
            r = self.m_ring.depth
            ages = torch.arange(r, device=device)
            table = (ages[:, None] - ages[None, :]).remainder(r)  # [t % R, shift] -> slot
            if self.per_sensor_index:
                # equal widths: the ring read as (R * B * n) rows of w values; one index_select of whole
                # rows (about 2x faster than a gather with an index per element)
                (w,) = widths
                table = table * (b * n)  # -> first row of that slot
                self._row_base = torch.arange(b * n, device=device).view(b, n)  # env * n + sensor
                self.slot_idx = torch.zeros(b, n, dtype=torch.long, device=device)
                self._gather_src = self.m_ring.buffer.view(r * b * n, w)
                self._gather_out = self.m_cache.view(b * n, w)
            else:
                self.shift_cols = torch.zeros(b, rcols, dtype=torch.long, device=device)
                self.slot_idx = torch.zeros(b, rcols, dtype=torch.long, device=device)
                self._gather_index = self.slot_idx.unsqueeze(0)
                self._gather_src = self.m_ring.buffer
                self._gather_out = self.m_cache.unsqueeze(0)
            self._slot_rows = table.unbind(0)  # one view per clock phase, made once
            self.jitter_draw = torch.zeros(2, b, n, dtype=torch.float32, device=device)
            self._jitter_u = self.jitter_draw.unbind(0)  # (scale draw, offset draw) views, made once
            self.jitter_tmp = torch.zeros(b, n, dtype=torch.float32, device=device)

        self._init_nan_policy()

    # -- non-finite policy and reset prefill -------------------------------------------------------------
    def _init_nan_policy(self) -> None:
        md, device = self.md, self.md.device
        icol_policy = [
            s.options.nan_policy
            for s in self.sensors
            for _ in range(s.cache_slice.stop - s.cache_slice.start)
        ]
        floating = self.group.dtype.is_floating_point
        self.raise_sensors = [s for s in self.sensors if s.options.nan_policy == "raise"] if floating else []
        self.hold_keep = None
        if floating and "hold" in icol_policy:
            # True where the raw value is used as is (finite, or the column does not hold)
            self.hold_passthrough = torch.tensor([p != "hold" for p in icol_policy], device=device)
            shape = (md.num_envs, len(icol_policy))
            self.gt_hold = torch.zeros(shape, dtype=self.group.dtype, device=device)
            self.m_hold = torch.zeros_like(self.gt_hold)
            self.hold_keep = torch.zeros(shape, dtype=torch.bool, device=device)
            self.hold_abs = torch.zeros_like(self.gt_hold)

    def _finish_raw_capture(self, gt_tl: Any, m_tl: Any) -> None:
        mask = self.md.reset_mask
        gt0, m0 = gt_tl.at(0), m_tl.at(0)
        if self.raise_sensors:
            self._raise_on_non_finite(gt0, m0, self.md.capture_rows)
        if self.hold_keep is not None:
            for x, hold in ((gt0, self.gt_hold), (m0, self.m_hold)):
                if mask is not None:
                    hold.masked_fill_(mask[:, None], 0)  # nothing to hold from the last episode
                torch.abs(x, out=self.hold_abs)
                torch.lt(self.hold_abs, float("inf"), out=self.hold_keep)
                torch.logical_or(self.hold_keep, self.hold_passthrough, out=self.hold_keep)
                torch.where(self.hold_keep, x, hold, out=x)
                hold.copy_(x)
        if mask is not None and self.uses_timeline:
            for tl, x in ((gt_tl, gt0), (m_tl, m0)):
                fill_rows(tl.buffer, x, mask, self.tl_scratch)

    def _raise_on_non_finite(self, gt0: torch.Tensor, m0: torch.Tensor, rows: torch.Tensor | None) -> None:
        """``rows``: the envs this capture is for (a partial reset), None for all."""
        for s in self.raise_sensors:
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

    # -- the per-step pipeline ---------------------------------------------------------------------------
    def capture(self, state: Any, reset_mask: torch.Tensor | None) -> None:
        cls, md = self.cls, self.md
        cls._update_shared_cache(state, md, self.gt_tl, self.m_tl, self.inter)
        gt_src = self.gt_tl.at(0)
        # ground truth: never delayed
        if self.gt_is_alias:
            if self.uses_timeline:
                self.gt_inter.copy_(gt_src)
        elif self.gt_ring is not None:
            slot = self._project(gt_src, self.gt_ring, is_measured=False)
            if reset_mask is not None:
                self._pad(self.gt_ring.buffer, slot, reset_mask)
            self.gt_cache.copy_(slot)
        else:
            self.gt_cache.copy_(gt_src)
        # measured: project, store, sample delay + jitter
        if not self.measured_is_alias:
            if self.m_ring is not None:
                slot = self._project(self.inter, self.m_ring, is_measured=True)
                if self.sampler is not None:
                    self._sample_and_hold(slot, reset_mask)
                if reset_mask is not None:
                    self._pad(self.m_ring.buffer, slot, reset_mask)
                if self.md.uniform_shift is not None:  # one shift for every env and sensor
                    self.m_cache.copy_(self.m_ring.at(self.md.uniform_shift))
                elif self.max_shift:
                    self._sample_delay(reset_mask)
                else:
                    self.m_cache.copy_(slot)
            else:
                self.m_cache.copy_(self.inter)
                if self.sampler is not None:
                    self._sample_and_hold(self.m_cache, reset_mask)
            if self.hist is not None:
                h0 = self.hist.at(0)
                h0.copy_(self.m_cache)
                if reset_mask is not None:
                    self._pad(self.hist.buffer, h0, reset_mask)

    def _sample_and_hold(self, snapshot: torch.Tensor, reset_mask: torch.Tensor | None) -> None:
        self.sampler.hold(snapshot, reset_mask, self.md.advancing, self.md.capture_rows)

    def current_shift(self, j: int) -> torch.Tensor | int:
        """The delay shift (steps) behind sensor ``j``'s current read: ``(B,)`` or one int for all."""
        if not self.max_shift:
            return 0
        if self.md.uniform_shift is not None:
            return self.md.uniform_shift
        return self.prev_shift[:, j]

    def _pad(self, buffer: torch.Tensor, slot0: torch.Tensor, mask: torch.Tensor) -> None:
        fill_rows(buffer, slot0, mask, self.first_scratch, self.zero_cols, self.pad_scratch)

    def _project(self, data: torch.Tensor, ring: Ring, *, is_measured: bool) -> torch.Tensor:
        slot = ring.at(0)
        out = self.cls._post_process(self.md, data, ring, is_measured=is_measured)
        if not _same_storage(out, slot):
            if out.shape != slot.shape:
                raise ValueError(
                    f"{self.cls.__name__}._post_process returned shape {tuple(out.shape)}; the return "
                    f"format needs {tuple(slot.shape)} (B, return columns)."
                )
            slot.copy_(out)
        return slot

    def _sample_delay(self, reset_mask: torch.Tensor | None) -> None:
        """One gather per class: per env and sensor, ``shift = D + floor(j/dt + u)``, never older than
        the previous read (``shift <= prev + 1``)."""
        md = self.md
        if md.has_jitter:
            md.random.uniform_(self.jitter_draw, md.capture_rows, 1)
            u_scale, u_offset = self._jitter_u
            torch.mul(md.jitter_steps_f32, u_scale, out=self.jitter_tmp)
            self.jitter_tmp.add_(u_offset).floor_()
            self.shift.copy_(self.jitter_tmp)
            torch.minimum(self.shift, md.jitter_ceil, out=self.shift)
            self.shift.add_(md.delay_steps)
        else:
            self.shift.copy_(md.delay_steps)
        if reset_mask is not None:
            self.prev_shift.masked_fill_(reset_mask[:, None], _FAR)
        self.prev_shift.add_(self._one)  # a tensor: adding a Python int would allocate a 0-d tensor
        torch.minimum(self.shift, self.prev_shift, out=self.shift)
        self.prev_shift.copy_(self.shift)
        # slot of the snapshot `shift` steps back: a lookup in the precomputed (t - s) % R table
        table = self._slot_rows[self.clock.t % self.m_ring.depth]
        shift = (
            self.shift
            if self.per_sensor_index
            else torch.index_select(self.shift, 1, self.col_to_sensor, out=self.shift_cols)
        )
        torch.index_select(table, 0, shift.view(-1), out=self.slot_idx.view(-1))
        if self.per_sensor_index:
            self.slot_idx.add_(self._row_base)
            torch.index_select(self._gather_src, 0, self.slot_idx.view(-1), out=self._gather_out)
        else:
            torch.gather(self._gather_src, 0, self._gather_index, out=self._gather_out)

    # -- save/restore and persistence --------------------------------------------------------------------
    def row_state(self) -> list[torch.Tensor]:
        """Tensors (leading dim B) a capture writes for every env: what a reset must restore for the
        envs it does not reset."""
        out = [self.inter, self.gt_inter]
        if self.uses_timeline:
            out += [self.gt_tl.at(0), self.m_tl.at(0)]
        for ring in (self.gt_ring, self.m_ring, self.hist):
            if ring is not None:
                out.append(ring.at(0))
        if not self.gt_is_alias:
            out.append(self.gt_cache)
        if not self.measured_is_alias:
            out.append(self.m_cache)
        if self.max_shift:
            out.append(self.prev_shift)
        if self.md.has_component_params:
            out.append(self.md.random_walk_state)
        if self.hold_keep is not None:
            out += [self.gt_hold, self.m_hold]
        if self.sampler is not None:
            out += self.sampler.row_state()
        out += list(self.md.extra.values())
        return out

    def parameter_tensors(self) -> list[torch.Tensor]:
        """The per-env option values a reset resamples."""
        out = list(self.md.parameter_tensors())
        if self.sampler is not None:
            out += self.sampler.parameter_tensors()
        return out

    def state_tensors(self) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for name in ("gt_ring", "m_ring", "hist"):
            ring = getattr(self, name)
            if ring is not None:
                out[name] = ring.buffer
        if not self.gt_is_alias:
            out["gt_cache"] = self.gt_cache
        if not self.measured_is_alias:
            out["m_cache"] = self.m_cache
        if self.max_shift:
            out["prev_shift"] = self.prev_shift
        if self.hold_keep is not None:
            out["gt_hold"], out["m_hold"] = self.gt_hold, self.m_hold
        if self.sampler is not None:
            for k, v in self.sampler.state_tensors().items():
                out[f"sampler.{k}"] = v
        for k, v in self.md.state_tensors().items():
            out[f"md.{k}"] = v
        return out


def _width(sensor: Any) -> int:
    return sensor.return_slice.stop - sensor.return_slice.start
