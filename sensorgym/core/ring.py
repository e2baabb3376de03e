"""Ring buffers of per-step ``(B, cols)`` snapshots, rotated by index arithmetic.

All rings of a manager share one :class:`Clock`: advancing the clock rotates every ring at once without
moving data, so the GT and measured rings of a class (and all other rings) always share one index.
Slot ``k`` of a ring is the snapshot written ``k`` steps ago; ``at(0)`` is the slot written this step.

One class, :class:`Ring`, serves every use: a ring that owns its storage, a ring over part of another
ring's storage (:meth:`Ring.block`: what a sensor class sees as its ``timeline``), and the one-slot
stand-in of a class without a timeline (:meth:`Ring.single`).

Example:
    >>> import torch
    >>> from sensorgym.core.ring import Clock, Ring
    >>> clock = Clock()
    >>> ring = Ring(3, batch=2, cols=1, dtype=torch.float32, device="cpu", clock=clock)
    >>> for t in range(4):
    ...     clock.tick()
    ...     _ = ring.at(0).fill_(t)
    >>> [ring.at(k)[0, 0].item() for k in range(3)]
    [3.0, 2.0, 1.0]
    >>> ring.history(2)[0, :, 0].tolist()  # newest first
    [3.0, 2.0]
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["Clock", "EpisodeSteps", "Ring", "RingView"]


class Clock:
    """The shared step counter behind every ring of a manager."""

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = 0

    def tick(self) -> None:
        self.t += 1


class EpisodeSteps:
    """``(B,)`` int64 steps since each env's last reset, advanced by one per step (on the device: a CUDA
    graph replays the add) and zeroed for the envs a capture resets; on the numpy executor through numpy
    views of the same memory (:meth:`bind`).

    Example:
        >>> import torch
        >>> steps = EpisodeSteps(3, "cpu")
        >>> steps.advance(); steps.advance(); steps.restart(torch.tensor([False, True, False]), None)
        >>> steps.steps.tolist()
        [2, 0, 2]
    """

    def __init__(self, num_envs: int, device: torch.device | str) -> None:
        self.steps = torch.zeros(num_envs, dtype=torch.long, device=device)
        self._one = torch.ones((), dtype=torch.long, device=device)  # a tensor: an int would allocate
        self.arrays: tuple[Any, Any] | None = None

    def bind(self, binding: Any) -> None:
        """Advance and zero through ``binding``'s numpy views (the numpy executor), or None: torch."""
        numpy = binding is not None and binding.xp.name == "numpy"
        self.arrays = (binding.numpy(self.steps), binding.numpy(self._one)) if numpy else None

    def advance(self) -> None:
        if self.arrays is not None:  # the same add, without a torch op's dispatch
            steps, one = self.arrays
            steps += one
        else:
            self.steps.add_(self._one)

    def undo_advance(self) -> None:
        self.steps.sub_(self._one)

    def restart(self, mask: torch.Tensor | None, index: Any) -> None:
        """Zero the envs a capture resets: ``index`` (numpy indices, on the numpy executor) or ``mask``."""
        if index is not None and self.arrays is not None:
            self.arrays[0][index] = 0
        elif mask is not None:
            self.steps.masked_fill_(mask, 0)


class Ring:
    """A ring of ``depth`` snapshots of shape ``(batch, cols)``; storage ``(depth, batch, cols)``.

    ``Ring(depth, batch, cols, dtype, device, clock)`` allocates its storage; :meth:`over` wraps an
    existing ``(depth, batch, cols)`` tensor (a view: writes go to the owner's storage).
    """

    def __init__(
        self,
        depth: int,
        batch: int,
        cols: int,
        dtype: torch.dtype,
        device: torch.device | str,
        clock: Clock,
    ) -> None:
        if depth < 1:
            raise ValueError(f"Ring depth must be >= 1, got {depth}")
        self._wrap(torch.zeros((depth, batch, cols), dtype=dtype, device=device), clock)

    @classmethod
    def over(cls, buffer: torch.Tensor, clock: Clock) -> Ring:
        """A ring over an existing ``(depth, batch, cols)`` tensor (its slots in storage order)."""
        ring = cls.__new__(cls)
        ring._wrap(buffer, clock)
        return ring

    @classmethod
    def single(cls, data: torch.Tensor, clock: Clock) -> Ring:
        """A one-slot ring whose ``at(0)`` is ``data`` itself (a class without timeline rings)."""
        return cls.over(data.unsqueeze(0), clock)

    def _wrap(self, buffer: torch.Tensor, clock: Clock) -> None:
        self.depth = buffer.shape[0]
        self.clock = clock
        #: ``(depth, B, cols)`` storage (slot order is storage order, not age order)
        self.buffer = buffer
        #: one view per storage slot, made once, in storage order (slot ``(t - k) % depth`` is the snapshot
        #: ``k`` steps back): `at()` runs several times per class and step, and indexing a tuple costs a
        #: fraction of creating a new view each time; a stage indexes it inline (no call per step)
        self.slots = buffer.unbind(0)
        self._order: torch.Tensor | None = None  # [t % depth, k] -> storage slot of the snapshot k back
        self.bind(None)

    def bind(self, binding: Any) -> None:
        """Take the slots as arrays of ``binding``'s executor (see :class:`~sensorgym.core.xp.Binding`) for
        :attr:`arrays` and :attr:`array_buffer`; None: the tensors themselves (the torch executor)."""
        #: the storage slots as arrays of the bound executor, in storage order: slot ``(t - k) % depth`` is
        #: the snapshot ``k`` steps back (a stage indexes it inline: one lookup, no call, per step)
        self.arrays: tuple[Any, ...]
        if binding is None:
            self.arrays, self.array_buffer = self.slots, self.buffer
        else:
            self.arrays = tuple(binding.array(slot) for slot in self.slots)
            self.array_buffer = binding.array(self.buffer)

    def slot(self, k: int) -> int:
        """Storage index of the snapshot ``k`` steps back."""
        return (self.clock.t - k) % self.depth

    def at(self, k: int) -> torch.Tensor:
        """``(batch, cols)`` view of the snapshot ``k`` steps back (``k < depth``)."""
        if not 0 <= k < self.depth:
            raise IndexError(f"ring holds {self.depth} snapshot(s); at({k}) is out of range")
        return self.slots[(self.clock.t - k) % self.depth]

    def array_at(self, k: int) -> Any:
        """:meth:`at` as an array of the bound executor (a numpy view of the slot on the numpy executor)."""
        return self.arrays[(self.clock.t - k) % self.depth]

    def block(self, start: int, width: int) -> Ring:
        """A ring over a contiguous block of each snapshot's storage: snapshot columns
        ``[start, start + width)`` of a ``(batch, cols)`` slot read as a contiguous ``(batch, width)``
        array (class-major layout: elementwise work on a contiguous block is several times faster than
        on a column slice with a long row stride)."""
        b = self.buffer.shape[1]
        flat = self.buffer.view(self.depth, -1)[:, b * start : b * (start + width)]
        return Ring.over(flat.view(self.depth, b, width), self.clock)

    def order(self, n: int) -> torch.Tensor:
        """``(n,)`` storage slots of the last ``n`` snapshots, newest first (a view of a cached table)."""
        if self._order is None:
            ages = torch.arange(self.depth)
            self._order = (ages[:, None] - ages[None, :]).remainder(self.depth).to(self.buffer.device)
        return self._order[self.clock.t % self.depth, :n]

    def history(self, n: int, cols: slice | None = None) -> torch.Tensor:
        """New tensor ``(batch, n, cols)``: the last ``n`` snapshots, newest first."""
        if n > self.depth:
            raise IndexError(f"ring holds {self.depth} snapshot(s); asked for {n}")
        cols = slice(None) if cols is None else cols
        return torch.stack([self.at(k)[:, cols] for k in range(n)], dim=1)


#: the old name of a timeline (sensor.py's hook annotations use it): a timeline is a :class:`Ring`
RingView = Ring
