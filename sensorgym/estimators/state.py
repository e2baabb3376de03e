"""An estimator's per-env state: one preallocated ``(rows, B)`` block whose named row ranges are the
quaternion, the estimator's own state (e.g. Mahony's bias estimate), the per-env gains and sample
interval, the step's inputs and its scratch.

Rows, not columns: each component of a batch is one contiguous ``(B,)`` row, so the step's ops run on
whole rows or stacks of rows without strided access, and a 3-vector that takes part in cross products is
stored *padded* (5 rows: ``x, y, z, x, y``), so that its cyclic shifts ``(y, z, x)`` and ``(z, x, y)`` are
plain views (:class:`Padded`): a cross product is three ops on views, with no gather.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from ..core.xp import Binding
from ._ops import ops_for

__all__ = ["EstimatorState", "Padded", "cross", "pad"]


class Padded:
    """Views of a padded 3-vector block ``(5, B)``: ``v`` (the vector), ``s1`` = (y, z, x) and
    ``s2`` = (z, x, y) (its cyclic shifts), ``head``/``tail`` (what :func:`pad` copies)."""

    __slots__ = ("head", "s1", "s2", "tail", "v")

    def __init__(self, block: Any) -> None:
        self.v, self.s1, self.s2 = block[0:3], block[1:4], block[2:5]
        self.head, self.tail = block[0:2], block[3:5]


def pad(ops: Any, p: Padded) -> None:
    """Refresh the padding of ``p`` after its vector was written."""
    ops.copyto(p.tail, p.head)


def cross(ops: Any, a: Padded, b: Padded, out: Any, tmp: Any) -> Any:
    """``out = a × b`` (``(3, B)``; ``a`` and ``b`` padded and up to date; ``tmp`` scratch ``(3, B)``)."""
    ops.mul(a.s1, b.s2, out)
    ops.mul(a.s2, b.s1, tmp)
    return ops.sub(out, tmp, out)


class EstimatorState:
    """The per-env state and scratch of one estimator over ``B`` envs, allocated once.

    ``tensors`` holds torch views of the persistent rows (``"q"`` ``(4, B)``, the estimator's own state
    rows, one ``(B,)`` row per gain, ``"dt"`` ``(B,)``): write a gain or ``dt`` per env there (e.g. at a
    reset); what a checkpoint must keep is :attr:`persistent`. ``arrays`` holds the same memory as arrays
    of the executor (``numpy`` views of the CPU tensors, or the tensors themselves) under the block
    names, padded blocks as :class:`Padded`, plus ``q0`` (the scalar row) and ``qv`` (the vector part,
    padded). ``storage`` (optional) is the ``(rows, batch)`` memory to lay the state over, contiguous, of
    ``dtype`` (a copy's, see :meth:`__reduce__`); zeros are allocated without it.
    """

    def __init__(
        self,
        blocks: dict[str, int],
        persistent: tuple[str, ...],
        padded: tuple[str, ...],
        batch: int,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
        executor: str = "torch",
        storage: torch.Tensor | None = None,
    ) -> None:
        if int(batch) != batch or batch < 1:
            raise ValueError(f"batch={batch!r}: the number of envs must be a positive integer")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype={dtype}: an estimator's state is torch.float32 or torch.float64")
        #: the constructor's arguments (what a copy rebuilds from, see __reduce__)
        self._spec = (
            dict(blocks),
            tuple(persistent),
            tuple(padded),
            int(batch),
            dtype,
            str(device),
            executor,
        )
        self.ops: Any = ops_for(executor, device)
        self.executor = executor
        self.batch = int(batch)
        shape = (sum(blocks.values()), self.batch)
        if storage is None:
            storage = torch.zeros(shape, dtype=dtype, device=device)
        elif tuple(storage.shape) != shape or storage.dtype != dtype or not storage.is_contiguous():
            raise ValueError(f"storage: a contiguous {dtype} tensor of shape {shape} (got {storage.shape})")
        self.storage = storage
        self._binding = Binding(executor)
        if executor == "numpy" and self._binding.numpy(self.storage) is None:
            raise ValueError(f"executor='numpy' runs on CPU memory; this state is on {self.storage.device}")
        self.persistent = persistent
        #: the recorded step of each (estimator, magnetometer, masked) variant (see AttitudeEstimator.plan)
        self.plans: dict[tuple, list] = {}
        #: the compiled update bound to this state, per (estimator, magnetometer) (see AttitudeEstimator.step)
        self.kernels: dict[tuple, Any] = {}
        #: the first row of each block in :attr:`storage` (what a compiled update indexes)
        self.rows: dict[str, int] = {}
        self._mask = torch.zeros(self.batch, dtype=torch.bool, device=device)
        self.tensors: dict[str, torch.Tensor] = {}
        self.arrays = SimpleNamespace()
        row = 0
        for name, rows in blocks.items():
            self.rows[name] = row
            t = self.storage[row] if rows == 1 else self.storage[row : row + rows]
            row += rows
            if name == "q":  # rows q0..q3 then q1, q2: the vector part is padded in place
                self.tensors["q"] = t[0:4]
                a = self._binding.array(t)
                self.arrays.q, self.arrays.q0, self.arrays.qv = a[0:4], a[0], Padded(a[1:6])
                continue
            self.tensors[name] = t[0:3] if name in padded else t
            a = self._binding.array(t)
            setattr(self.arrays, name, Padded(a) if name in padded else a)
        self.arrays.mask = self._binding.array(self._mask)
        #: numpy views of the same memory where the state is on the CPU (either executor), else None:
        #: ``storage`` (flat), ``g``, ``a``, ``m`` (the samples' ``(3, B)`` rows) and ``mask``. What the
        #: compiled kernels run on, and what a CPU state's samples are copied into (numpy's transposed
        #: copy is about 5x faster than torch's at B = 4096)
        self.host: SimpleNamespace | None = None
        if self.storage.device.type == "cpu":
            flat = self.storage.numpy().reshape(-1)
            rows = self.storage.numpy()
            views = {k: rows[self.rows[k] : self.rows[k] + 3] for k in ("g", "a", "m") if k in self.rows}
            self.host = SimpleNamespace(storage=flat, mask=self._mask.numpy(), **views)

    def __reduce__(self) -> tuple[Any, tuple]:
        """A copy (``copy.deepcopy``, pickle) is a new state over a copy of the memory: its views, recorded
        steps and bound kernels are made from its own storage (copied as they are, they would still
        point into the original's)."""
        return _rebuild, (self._spec, self.storage, self._mask)

    def array(self, name: str) -> Any:
        """The executor array of a persistent row block (``"q"`` ``(4, B)``, a gain, ``"dt"``, ...)."""
        return self._binding.array(self.tensors[name])

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Copies of the persistent rows (a checkpoint)."""
        return {name: self.tensors[name].clone() for name in self.persistent}

    def load_state_dict(self, saved: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict`'s rows in place."""
        missing = set(self.persistent) - set(saved)
        if missing:
            raise KeyError(f"EstimatorState.load_state_dict: missing {sorted(missing)}")
        for name in self.persistent:
            self.tensors[name].copy_(saved[name])


def _rebuild(spec: tuple, storage: torch.Tensor, mask: torch.Tensor) -> EstimatorState:
    blocks, persistent, padded, batch, dtype, device, executor = spec
    # over the copied memory itself: views of it copied along (an AttitudeSensor's env-major rows) share it
    state = EstimatorState(
        blocks, persistent, padded, batch, dtype=dtype, device=device, executor=executor, storage=storage
    )
    state._mask.copy_(mask)
    return state
