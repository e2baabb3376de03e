"""Ring buffers of per-step ``(B, cols)`` snapshots, rotated by index arithmetic.

All rings of a manager share one :class:`Clock`: advancing the clock rotates every ring at once without
moving data, so the GT and measured rings of a class (and all other rings) always share one index.
Slot ``k`` of a ring is the snapshot written ``k`` steps ago; ``at(0)`` is the slot written this step.

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
"""

from __future__ import annotations

import torch

__all__ = ["Clock", "Ring", "RingView", "SingleSlot"]


class Clock:
    """The shared step counter behind every ring of a manager."""

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = 0

    def tick(self) -> None:
        self.t += 1


class Ring:
    """A ring of ``depth`` snapshots of shape ``(batch, cols)``; storage ``(depth, batch, cols)``."""

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
        self.depth = depth
        self.clock = clock
        self.buffer = torch.zeros((depth, batch, cols), dtype=dtype, device=device)
        # one view per storage slot, made once: `at()` runs several times per class and step, and
        # indexing a tuple costs a fraction of creating a new view each time
        self._slots = self.buffer.unbind(0)
        self._order: torch.Tensor | None = None  # [t % depth, k] -> storage slot of the snapshot k back

    def slot(self, k: int) -> int:
        """Storage index of the snapshot ``k`` steps back."""
        return (self.clock.t - k) % self.depth

    def at(self, k: int) -> torch.Tensor:
        """``(batch, cols)`` view of the snapshot ``k`` steps back (``k < depth``)."""
        if not 0 <= k < self.depth:
            raise IndexError(f"ring holds {self.depth} snapshots; at({k}) is out of range")
        return self._slots[(self.clock.t - k) % self.depth]

    def block(self, start: int, width: int) -> RingView:
        """A ring over a contiguous block of each snapshot's storage: snapshot columns
        ``[start, start + width)`` of a ``(batch, cols)`` slot read as a contiguous ``(batch, width)``
        array (class-major layout: elementwise work on a contiguous block is several times faster than
        on a column slice with a long row stride)."""
        b = self.buffer.shape[1]
        flat = self.buffer.view(self.depth, -1)[:, b * start : b * (start + width)]
        return RingView(self, flat.view(self.depth, b, width))

    def order(self, n: int) -> torch.Tensor:
        """``(n,)`` storage slots of the last ``n`` snapshots, newest first (a view of a cached table)."""
        if self._order is None:
            ages = torch.arange(self.depth)
            self._order = (ages[:, None] - ages[None, :]).remainder(self.depth).to(self.buffer.device)
        return self._order[self.clock.t % self.depth, :n]

    def history(self, n: int, cols: slice | None = None) -> torch.Tensor:
        """New tensor ``(batch, n, cols)``: the last ``n`` snapshots, newest first."""
        if n > self.depth:
            raise IndexError(f"ring holds {self.depth} snapshots; asked for {n}")
        cols = slice(None) if cols is None else cols
        return torch.stack([self.buffer[self.slot(k), :, cols] for k in range(n)], dim=1)


class RingView:
    """Part of a :class:`Ring` (a column slice or a contiguous block of every slot): what a sensor class
    sees as its ``timeline``. ``timeline.at(k)`` is the class's ``(B, cols)`` view ``k`` steps back.
    """

    __slots__ = ("_slots", "buffer", "ring")

    def __init__(self, ring: Ring, buffer: torch.Tensor) -> None:
        self.ring = ring
        #: ``(depth, B, cols)`` view of the storage (slot order is storage order, not age order)
        self.buffer = buffer
        self._slots = buffer.unbind(0)  # per-slot views, made once (see Ring)

    @property
    def depth(self) -> int:
        return self.ring.depth

    def slot(self, k: int) -> int:
        return self.ring.slot(k)

    def at(self, k: int) -> torch.Tensor:
        if not 0 <= k < self.ring.depth:
            raise IndexError(f"ring holds {self.ring.depth} snapshots; at({k}) is out of range")
        return self._slots[(self.ring.clock.t - k) % self.ring.depth]

    def history(self, n: int) -> torch.Tensor:
        if n > self.ring.depth:
            raise IndexError(f"ring holds {self.ring.depth} snapshots; asked for {n}")
        return torch.stack([self.at(k) for k in range(n)], dim=1)


class SingleSlot:
    """A one-snapshot stand-in for a timeline (classes with ``uses_ring_pipeline = False``)."""

    __slots__ = ("data",)
    depth = 1

    def __init__(self, data: torch.Tensor) -> None:
        self.data = data

    def at(self, k: int) -> torch.Tensor:
        if k != 0:
            raise IndexError(
                "this sensor class has no timeline ring (uses_ring_pipeline = False); only at(0) exists"
            )
        return self.data
