"""The delay line of one sensor class: delayed and jittered reads of its measured snapshots.

A :class:`DelayLine` owns the measured return-space ring (every final snapshot, deep enough for the
deepest shift the options can reach), the per-env shift of the read of every sensor and the previous
shift, and writes the measured return cache from them each step. The per-env delay and jitter values it
reads come from the class's :class:`~sensorgym.core.parameters.ParameterTable` (which also randomizes and sets
them). The rule, per env and sensor, each step:

* ``D = round(delay / dt)``; with jitter, ``j ~ U[0, jitter)`` and ``u ~ U[0, 1)`` give
  ``shift = D + min(floor(j/dt + u), ceil(jitter/dt))``;
* reads never go back in capture time: ``shift <= previous shift + 1`` (else the previous snapshot is
  held); a reset forgets the previous shift;
* the read shows the snapshot captured ``shift`` steps ago (the ring never wraps: it holds the deepest
  shift). Before the episode has produced that many snapshots the ring holds padding (see
  :class:`~sensorgym.core.stages.Padding`).

While every env and sensor has one shift that cannot vary (no jitter, no randomized or per-sensor delays,
no setter call), the read is one slot copy (:meth:`DelayLine.hold_fixed_shift`); otherwise
:meth:`DelayLine.sample_delay` draws and gathers. The class's capture picks one of the two at build and
again after a setter.

Example: a 2-step delay of a ramp
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=1, dt=0.1)
    >>> s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), delay=0.2))
    >>> mgr.reset({"x": torch.zeros(1, 1)})
    >>> seen = []
    >>> for t in range(1, 5):
    ...     mgr.step({"x": torch.full((1, 1), float(t))})
    ...     seen.append(s.read().item())
    >>> seen, mgr.storage(sg.StateSensor).measured.delay_line.ring.depth
    ([0.0, 0.0, 1.0, 2.0], 3)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import torch

from .delay_law import JITTER_CEIL_TOLERANCE, seconds_to_steps
from .options import bounds_of
from .ring import Clock, Ring
from .xp import NUMPY, TORCH, Binding

if TYPE_CHECKING:
    from .metadata import CaptureContext
    from .parameters import ParameterTable

__all__ = [
    "FAR",
    "JITTER_CEIL_TOLERANCE",
    "DelayLine",
    "DelaySteps",
    "check_ring_memory",
    "delay_line_bytes",
    "device_memory",
    "human_bytes",
    "read_delayed",
    "ring_memory_error",
]

_FAR = 1 << 40  # "no previous read": larger than any shift
FAR = _FAR


class DelayLine:
    """Delayed, jittered, monotone reads of a ring of measured snapshots (see the module docstring).

    Args:
        widths: return columns of each sensor of the class (column order).
        params: the per-env delay and jitter in steps (``delay_steps``, ``jitter_steps_f32``,
            ``jitter_ceil``, ``has_jitter``, ``fixed_shift``): a class's
            :class:`~sensorgym.core.parameters.TimeTable` (its storage passes its parameter table's
            ``times``: ``has_jitter`` is read every step), a :class:`DelaySteps`, or a parameter table.
        cache: the measured return cache ``(B, cols)`` the reads are written into.
        depth: ring depth, at least the deepest shift + 1.
        random, clock: the manager's.
        binding: the executor the reads run on (:class:`~sensorgym.core.xp.Binding`; default torch). The
            gather of sensors of unequal widths has no numpy form: such a line runs on torch, on the same
            memory.
    """

    def __init__(
        self,
        widths: list[int],
        params: ParameterTable,
        cache: torch.Tensor,
        depth: int,
        random: Any,
        clock: Clock,
        binding: Binding | None = None,
    ) -> None:
        b, cols = cache.shape
        n, device = len(widths), cache.device
        self.params, self.cache, self.random, self.clock = params, cache, random, clock
        self.ring = Ring(depth, b, cols, cache.dtype, device, clock)
        #: the shift (steps) of every env's and sensor's current read; ``_FAR`` before the first sampled read
        self.prev_shift = torch.full((b, n), _FAR, dtype=torch.long, device=device)
        self.fixed_shift = params.fixed_shift
        self.jitter_draw = torch.zeros(2, b, n, dtype=torch.float32, device=device)  # (scale u, offset u)
        # what the random source fills: one stream per env is drawn as (2, B), the same numbers in the same
        # order, in the shape a user of one stream (ActionLatency) draws and logs
        self.draw_target = self.jitter_draw.view(2, b) if n == 1 else self.jitter_draw
        # the buffers read_delayed works on (torch tensors; `arrays` holds them as the executor's arrays)
        t = self._tables = _Arrays()
        t.shift, t.prev_shift = torch.zeros(b, n, dtype=torch.long, device=device), self.prev_shift
        t.one = torch.ones((), dtype=torch.long, device=device)
        t.jitter_steps_f32, t.jitter_ceil, t.delay_steps = (
            params.jitter_steps_f32, params.jitter_ceil, params.delay_steps,
        )  # fmt: skip
        t.u_scale, t.u_offset = self.jitter_draw.unbind(0)
        t.jitter_steps = torch.zeros(b, n, dtype=torch.float32, device=device)
        # slot of the snapshot `shift` steps back at clock phase p: (p - shift) % R, looked up in one
        # reversed cycle of 2R slots (its view from R - 1 - p is that phase's table: 2R entries in all, not
        # an R x R table, which at 20,000 steps of delay would take 3.2 GB)
        table = torch.arange(2 * depth - 1, -1, -1, device=device).remainder_(depth)
        self.equal_widths = len(set(widths)) == 1
        if self.equal_widths:
            # the ring read as (R * B * n) rows of w values: one index_select of whole rows (about 2x
            # faster than a gather with an index per element)
            w = widths[0]
            table = table * (b * n)  # -> first row of that slot
            t.row_base = torch.arange(b * n, device=device).view(b, n)  # env * n + sensor
            t.slot_index = torch.zeros(b, n, dtype=torch.long, device=device)
            t.prev_shift_flat, t.slot_index_flat = self.prev_shift.view(-1), t.slot_index.view(-1)
            t.source, t.target = self.ring.buffer.view(depth * b * n, w), cache.view(b * n, w)
        else:
            per_column = [j for j, w in enumerate(widths) for _ in range(w)]
            t.column_sensor = torch.tensor(per_column, dtype=torch.long, device=device)
            t.column_shift = torch.zeros(b, cols, dtype=torch.long, device=device)
            t.slot_index = torch.zeros(b, cols, dtype=torch.long, device=device)
            t.column_shift_flat, t.slot_index_flat = t.column_shift.view(-1), t.slot_index.view(-1)
            t.gather_index = t.slot_index.unsqueeze(0)
            t.source, t.target = self.ring.buffer, cache.unsqueeze(0)
        self._slot_table = table  # one view per clock phase, made once:
        t.slot_of_shift = tuple(table[depth - 1 - p : 2 * depth - 1 - p] for p in range(depth))
        self.binding = binding if binding is not None else Binding("torch")
        # the gather of sensors of unequal widths has no numpy form: those sampled reads stay on torch
        self._read_binding = self.binding if self.equal_widths else Binding("torch")
        self.bind()

    def bind(self) -> None:
        """Take the buffers the reads work on as arrays of their executor (at build, and when the class
        plans again: after a setter, a checkpoint, a copy)."""
        self.xp, self.read_xp = self.binding.xp, self._read_binding.xp
        self._cache = self.binding.array(self.cache)  # the ring's own slot arrays serve the fixed shift
        view, a = self._read_binding.array, _Arrays()
        for name, value in vars(self._tables).items():
            setattr(a, name, tuple(map(view, value)) if isinstance(value, tuple) else view(value))
        a.equal_widths = self.equal_widths
        self.arrays = a

    # -- the two reads (stages of the class's capture) -----------------------------------------------------
    def hold_fixed_shift(self, ctx: CaptureContext) -> None:
        """Stage: every env and sensor reads the snapshot ``fixed_shift`` steps back (one slot copy)."""
        ring = self.ring
        self.xp.copyto(self._cache, ring.arrays[(self.clock.t - self.fixed_shift) % ring.depth])

    def sample_delay(self, ctx: CaptureContext) -> None:
        """Stage: draw every env's and sensor's shift (monotone) and gather the snapshots it shows."""
        if self.params.has_jitter:
            self.random.uniform_(self.draw_target, ctx.rows, 1)
        phase = self.clock.t % self.ring.depth
        mask = ctx.reset_mask
        if mask is not None and self.read_xp is NUMPY:
            mask = mask.numpy()  # a reset capture's own mask (made per capture: not bound)
        read_delayed(self.read_xp, self.arrays, self.params.has_jitter, phase, mask)

    def stage(self) -> Any:
        """The read this step runs: :meth:`hold_fixed_shift` while the shift is fixed, else
        :meth:`sample_delay`."""
        return self.hold_fixed_shift if self.fixed_shift is not None else self.sample_delay

    def stage_name(self) -> str:
        """The name of the read :meth:`stage` returns (for ``ClassStorage.stage_names``)."""
        return "hold_fixed_shift" if self.fixed_shift is not None else "sample_delay"

    def stage_executor(self) -> str:
        """The executor the read :meth:`stage` returns runs on (``"torch"`` or ``"numpy"``)."""
        return (self.binding if self.fixed_shift is not None else self._read_binding).name

    def follow_parameters(self) -> None:
        """Adopt the parameters' ``fixed_shift`` after a setter: leaving the fixed shift, the previous
        shift of every read is the fixed one (what every read so far used)."""
        if self.fixed_shift is not None and self.params.fixed_shift is None:
            self.prev_shift.fill_(self.fixed_shift)
        self.fixed_shift = self.params.fixed_shift

    def current_shift(self, j: int) -> torch.Tensor | int:
        """The shift (steps) behind sensor ``j``'s current read: ``(B,)``, or one int for all."""
        return self.fixed_shift if self.fixed_shift is not None else self.prev_shift[:, j]


class DelaySteps:
    """Per-env delay and jitter in steps, ``(B, n)`` for ``n`` delayed streams, as a :class:`DelayLine`
    reads them; for a user of the delay line without a :class:`~sensorgym.core.parameters.ParameterTable`
    (the action queue of :class:`~sensorgym.wrappers.ActionLatency`). :meth:`set_seconds` converts by
    the one law (``D = round(delay / dt)`` half to even; effective jitter ``min(jitter, delay) / dt`` and its
    ceiling ``ceil(jitter / dt - 1e-9)``), the same arithmetic as the parameter table's.

    Example:
        >>> import torch
        >>> steps = DelaySteps(2, 1, "cpu", has_jitter=True)
        >>> steps.set_seconds(torch.tensor([0.1, 0.3], dtype=torch.float64),
        ...                   torch.tensor([0.14, 0.5], dtype=torch.float64), dt=0.02)
        >>> steps.delay_steps.flatten().tolist(), steps.jitter_ceil.flatten().tolist()
        ([5, 15], [5, 15])
    """

    def __init__(self, num_envs: int, n: int, device: Any, has_jitter: bool, fixed_shift: int | None = None):
        long = dict(dtype=torch.long, device=device)
        self.delay_steps = torch.zeros(num_envs, n, **long)
        self.jitter_ceil = torch.zeros(num_envs, n, **long)
        self.jitter_steps_f32 = torch.zeros(num_envs, n, dtype=torch.float32, device=device)
        self._scratch = torch.zeros(num_envs, n, dtype=torch.float64, device=device)
        self._jitter_steps = torch.zeros(num_envs, n, dtype=torch.float64, device=device)
        self.has_jitter = has_jitter
        #: one shift for every env and stream, or None (the delay line then samples each env's)
        self.fixed_shift = fixed_shift

    def set_seconds(self, delay: torch.Tensor, jitter: torch.Tensor, dt: float) -> None:
        """Per-env ``delay`` and ``jitter`` in seconds (float64, ``(B,)`` or ``(B, n)``) into steps."""
        b = self._scratch.shape[0]
        seconds_to_steps(
            TORCH, dt, delay.view(b, -1), jitter.view(b, -1),
            scratch=self._scratch, steps=self.delay_steps, jitter_steps=self._jitter_steps,
            jitter_ceil=self.jitter_ceil, jitter_steps_f32=self.jitter_steps_f32,
        )  # fmt: skip


class _Arrays:
    """The delay line's buffers as one executor's arrays (torch tensors or numpy views of them)."""


def read_delayed(xp: Any, a: _Arrays, has_jitter: bool, phase: int, reset_mask: Any) -> None:
    """The one definition of a delayed read, on the arrays ``a`` of the executor ``xp``
    (:mod:`sensorgym.core.xp`); the jitter's uniforms are already drawn. ``phase``: the clock mod the
    ring depth; ``reset_mask``: the envs this capture resets (None: none)."""
    shift = a.shift
    if has_jitter:
        # shift = delay + min(floor(jitter/dt * u + u'), ceil(jitter/dt))
        xp.mul(a.jitter_steps_f32, a.u_scale, a.jitter_steps)
        xp.add(a.jitter_steps, a.u_offset, a.jitter_steps)
        xp.floor(a.jitter_steps, a.jitter_steps)
        xp.copy(shift, a.jitter_steps)
        xp.minimum(shift, a.jitter_ceil, shift)
        xp.add(shift, a.delay_steps, shift)
    else:
        xp.copy(shift, a.delay_steps)
    if reset_mask is not None:
        xp.fill_where(a.prev_shift, reset_mask[:, None], _FAR)
    # reads never go back in capture time: this read's shift is at most the previous one plus one, and
    # becomes the previous one in place (`one` is a tensor on torch: a Python int would allocate)
    xp.add(a.prev_shift, a.one, a.prev_shift)
    xp.minimum(shift, a.prev_shift, a.prev_shift)
    # slot of the snapshot `shift` steps back: a lookup in the precomputed (t - s) % R table
    table = a.slot_of_shift[phase]
    if a.equal_widths:
        xp.take_in_range(table, a.prev_shift_flat, a.slot_index_flat)
        xp.add(a.slot_index, a.row_base, a.slot_index)
        xp.take_in_range(a.source, a.slot_index_flat, a.target)
    else:
        xp.take_in_range(a.prev_shift, a.column_sensor, a.column_shift, axis=1)
        xp.take_in_range(table, a.column_shift_flat, a.slot_index_flat)
        xp.gather0(a.source, a.gather_index, a.target)


# -- ring sizing -------------------------------------------------------------------------------------------
def check_ring_memory(
    sensors: tuple,
    num_envs: int,
    cols: int,
    dtype: torch.dtype,
    device: torch.device,
    dt: float,
    **costs: Any,
) -> None:
    """Refuse a delay ring larger than the device's memory with a ``ValueError`` naming the sensor, the
    option and the bytes it would need (instead of an allocator error, or a machine brought to a halt);
    ``sensors``: the class's :class:`~sensorgym.core.plan.SensorPlan` s; ``costs``:
    :func:`delay_line_bytes`' keywords (the executor's views, the sampler's ring)."""
    max_shift = max(s.deepest_shift for s in sensors)
    if not max_shift:
        return
    need = delay_line_bytes(max_shift + 1, num_envs, cols, dtype, **costs)
    limit = device_memory(device)
    if limit is not None and need > limit:
        raise ring_memory_error(sensors, num_envs, cols, dtype, device, dt, limit, **costs)


def ring_memory_error(
    sensors: tuple,
    num_envs: int,
    cols: int,
    dtype: torch.dtype,
    device: torch.device,
    dt: float,
    limit: int | None,
    **costs: Any,
) -> ValueError:
    shifts = [s.deepest_shift for s in sensors]
    depth = max(shifts) + 1
    need = delay_line_bytes(depth, num_envs, cols, dtype, **costs)
    ring = depth * num_envs * cols * dtype.itemsize
    j = max(range(len(sensors)), key=shifts.__getitem__)
    o = sensors[j]
    name, value = "delay", o.delay
    if o.max_delay is not None and o.max_delay >= bounds_of(o.delay)[1] + bounds_of(o.jitter)[1]:
        name, value = "max_delay", o.max_delay
    elif bounds_of(o.jitter)[1] > bounds_of(o.delay)[1] / 2:
        name, value = "jitter", o.jitter
    available = "the memory available" if limit is None else f"the {human_bytes(limit)} of memory"
    return ValueError(
        f"sensor {sensors[j].name!r}: {name}={value!r} at dt={dt:g} s needs a delay ring of {depth:,} "
        f"steps: about {human_bytes(need)} ({ring:,} bytes for {num_envs} envs x {cols} columns of {dtype} "
        f"and {need - ring:,} bytes of slot tables and views), more than {available} on {device}. "
        f"Fix: give the {name} in seconds (e.g. "
        f"{name}=0.04), not in steps or milliseconds, or lower it."
    )


#: bytes of one per-slot view object (a torch tensor view, or a numpy array view of a slot): the delay line
#: keeps a few per ring slot so that a step indexes a tuple instead of making a view. Measured as the peak
#: RSS per slot of a built manager (tests/core/test_memory_limits.py measures it against this count):
#: about 640 B each with torch 2.13 and numpy 2.4 on Linux x86-64, Python 3.11
VIEW_BYTES = 640
#: bytes of the slot table per ring slot: two int64 entries
TABLE_BYTES = 2 * 8


def delay_line_bytes(
    depth: int,
    num_envs: int,
    cols: int,
    dtype: torch.dtype,
    *,
    numpy_views: bool = False,
    sampler_columns: int = 0,
) -> int:
    """What a :class:`DelayLine` of ``depth`` slots of ``(num_envs, cols)`` ``dtype`` values allocates at
    its peak: per slot the ring's values, its slot-table entries, the view of the slot and of its phase's
    table (each a numpy array view too on the numpy executor, ``numpy_views``), and, for a class with a
    sampler (``sampler_columns`` = its sensors), the sampler's ring of sample steps (int64 per env and
    sensor, one view per slot)."""
    views = 2 * (2 if numpy_views else 1)
    per_slot = num_envs * cols * dtype.itemsize + TABLE_BYTES + views * VIEW_BYTES
    if sampler_columns:
        per_slot += num_envs * sampler_columns * 8 + VIEW_BYTES
    return depth * per_slot


def human_bytes(n: float) -> str:
    """``n`` bytes in binary units, e.g. ``'3.0 GiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} EiB"


def device_memory(device: torch.device) -> int | None:
    """Total memory of ``device`` in bytes (None when unknown)."""
    try:
        if device.type == "cuda":
            return torch.cuda.get_device_properties(device).total_memory
        if device.type == "cpu":
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError, RuntimeError):
        return None
    return None
