"""The small array namespace the per-step arithmetic is written against, and its two executors.

The error terms' operations (each ``Term``'s ``apply`` in :mod:`sensorgym.core.terms`, run in order by
:func:`~sensorgym.core.terms.run_plan`) and the delay line's shift sampling
(:func:`~sensorgym.core.delay_line.read_delayed`) are written once against an ``xp`` argument:
:data:`TORCH` runs them on torch tensors, :data:`NUMPY` on numpy views of the same CPU buffers
(``tensor.numpy()`` shares memory, so rings, caches, ``state_dict`` and the Gymnasium layer see one
storage). Every op writes into ``out`` (nothing is allocated per step) and is exactly rounded IEEE
arithmetic in both (no fused multiply-add; ``round`` is half to even in both), so the two routes give the
same bits. Both accept the same inputs and refuse the same ones (tests/core/test_xp.py); a class with a
float16 buffer stays on torch (:func:`numpy_executes`). Random numbers always come from the manager's torch
generators, drawn into the shared buffers.

Which route a manager uses is decided once at build (``SensorManager(executor=...)``, see
:func:`choose_executor`): numpy for small CPU batches, where a torch op's dispatch (~1-2 µs) costs more
than its work, torch everywhere else (large batches, CUDA, ``compile=True``).

Example:
    >>> import torch
    >>> from sensorgym.core.xp import NUMPY, TORCH, numpy_view
    >>> a, b = torch.tensor([1.5, 2.5]), torch.tensor([2.0, 2.0])
    >>> _ = TORCH.mul(a, b, a)           # torch.mul(a, b, out=a)
    >>> _ = NUMPY.round(numpy_view(a), numpy_view(a))  # in place on the same memory
    >>> a.tolist()
    [3.0, 5.0]
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch

__all__ = [
    "EXECUTORS",
    "MAX_VIEWS",
    "NUMPY",
    "NUMPY_MAX_ELEMENTS",
    "TORCH",
    "Binding",
    "choose_executor",
    "numpy_can_view",
    "numpy_executes",
    "numpy_view",
]

#: the ``executor`` values ``SensorManager`` accepts
EXECUTORS = ("auto", "torch", "numpy")

#: ``executor="auto"`` takes the numpy route on the CPU while ``num_envs x intermediate columns`` is at
#: most this. Measured on a 2-core Intel Xeon VM, both executors in one run: numpy was faster at every size up
#: to 2**20 elements (the standard suite at B = 16384: 4.2 ms vs 4.5 ms) and slower at 2**22 (B = 65536:
#: 19.0 ms vs 14.9 ms, where torch's step goes multi-threaded); the threshold keeps a 4x margin below the
#: last size where numpy won. See docs/performance.md.
NUMPY_MAX_ELEMENTS = 1 << 18


class TORCH:
    """The torch executor: each op is one ``out=`` (or in-place) torch call."""

    name = "torch"
    #: ``dst[...] = src`` as one C call (the stages' copies: :meth:`copy` without its Python frame)
    copyto = torch.Tensor.copy_

    @staticmethod
    def add(a: Any, b: Any, out: Any) -> Any:
        return torch.add(a, b, out=out)

    @staticmethod
    def sub(a: Any, b: Any, out: Any) -> Any:
        return torch.sub(a, b, out=out)

    @staticmethod
    def mul(a: Any, b: Any, out: Any) -> Any:
        return torch.mul(a, b, out=out)

    @staticmethod
    def div(a: Any, b: Any, out: Any) -> Any:
        return torch.div(a, b, out=out)

    @staticmethod
    def minimum(a: Any, b: Any, out: Any) -> Any:
        """``out = min(a, b)``, NaN propagating; ``b`` may be a Python number (as on numpy)."""
        if not isinstance(b, torch.Tensor):
            return torch.clamp(a, max=b, out=out)
        return torch.minimum(a, b, out=out)

    @staticmethod
    def round(a: Any, out: Any) -> Any:
        """Half to even; an ``out`` of another dtype receives the rounded value cast (as on numpy)."""
        if out.dtype != a.dtype:
            return out.copy_(torch.round(a))  # allocates: only hooks mixing dtypes take this branch
        return torch.round(a, out=out)

    @staticmethod
    def floor(a: Any, out: Any) -> Any:
        return torch.floor(a, out=out)

    @staticmethod
    def ceil(a: Any, out: Any) -> Any:
        return torch.ceil(a, out=out)

    @staticmethod
    def logical_and(a: Any, b: Any, out: Any) -> Any:
        return torch.logical_and(a, b, out=out)

    @staticmethod
    def greater(a: Any, b: Any, out: Any) -> Any:
        """``out = a > b`` (1/0 in ``out``'s dtype)."""
        return torch.gt(a, b, out=out)

    @staticmethod
    def less(a: Any, b: Any, out: Any) -> Any:
        """``out = a < b``."""
        return torch.lt(a, b, out=out)

    @staticmethod
    def abs(a: Any, out: Any) -> Any:
        return torch.abs(a, out=out)

    @staticmethod
    def clip(a: Any, low: Any, high: Any, out: Any) -> Any:
        """``out = min(max(a, low), high)`` (NaN stays NaN)."""
        return torch.clamp(a, low, high, out=out)

    @staticmethod
    def copy(dst: Any, src: Any) -> Any:
        """``dst[...] = src`` (casting, e.g. float to int truncates)."""
        return dst.copy_(src)

    @staticmethod
    def fill_where(dst: Any, mask: Any, value: float) -> Any:
        """``dst[mask] = value`` (``mask`` broadcasts)."""
        return dst.masked_fill_(mask, value)

    @staticmethod
    def select_into(out: Any, mask: Any, a: Any) -> Any:
        """``out = where(mask, a, out)``; ``a`` may be a Python number or of another dtype (cast to
        ``out``'s, as on numpy)."""
        if not isinstance(a, torch.Tensor):
            return out.masked_fill_(mask, a)
        if a.dtype != out.dtype:
            a = a.to(out.dtype)  # allocates: only hooks mixing dtypes take this branch
        return torch.where(mask, a, out, out=out)

    @staticmethod
    def take(src: Any, index: Any, out: Any, axis: int = 0) -> Any:
        """``out = src.take(index, axis)`` (``index`` 1-d, each in ``[0, src.shape[axis])``: an index out
        of range raises an ``IndexError`` on both executors)."""
        return torch.index_select(src, axis, index, out=out)

    take_in_range = take  # the pipeline's own gathers (indices in range by construction)

    @staticmethod
    def gather0(src: Any, index: Any, out: Any) -> Any:
        """``out[0, b, c] = src[index[0, b, c], b, c]``."""
        return torch.gather(src, 0, index, out=out)

    @staticmethod
    def pad_rows(buffer: Any, slot0: Any, mask: Any, index: Any, first: Any, zero_cols: Any, pad: Any) -> Any:
        """Episode-start padding of a ring ``(R, B, c)`` for the envs in ``mask``: every slot gets
        ``slot0`` (``"reset"`` padding), or zero in ``zero_cols`` with ``slot0`` kept in slot 0
        (``"zero"``). Masked ops over every row: on an accelerator the reset envs are never read back
        (``index`` is unused). ``first`` (and ``pad``: a ``(B, c)`` buffer and a 0-d zero) are scratch."""
        rows = mask[None, :, None]
        first.copy_(slot0)  # slot0 aliases buffer; where() refuses overlapping input and output
        if zero_cols is None:
            return torch.where(rows, first.unsqueeze(0), buffer, out=buffer)
        padded, zero = pad
        torch.where(zero_cols[None, :], zero, first, out=padded)
        torch.where(rows, padded.unsqueeze(0), buffer, out=buffer)
        return torch.where(mask[:, None], first, slot0, out=slot0)


class NUMPY:
    """The numpy executor: the same ops on numpy views of the CPU buffers (the ufuncs themselves: their
    third positional argument is ``out``, and calling them directly saves a Python frame per op)."""

    name = "numpy"
    #: ``dst[...] = src`` (casting) returning nothing, as one C call (the stages' copies)
    copyto = functools.partial(np.copyto, casting="unsafe")
    add = np.add
    sub = np.subtract
    mul = np.multiply
    div = np.divide

    @staticmethod
    def round(a: Any, out: Any) -> Any:
        try:
            return np.rint(a, out)  # half to even, like torch.round
        except TypeError:  # an integer array (rint has no integer loop): rounding it changes nothing
            if a.dtype.kind not in "iub":
                raise
            np.copyto(out, a, casting="same_kind")
            return out

    floor = np.floor
    ceil = np.ceil
    logical_and = np.logical_and
    greater = np.greater
    less = np.less
    abs = np.absolute

    @staticmethod
    def clip(a: Any, low: Any, high: Any, out: Any) -> Any:
        return np.clip(a, low, high, out=out)

    @staticmethod
    def minimum(a: Any, b: Any, out: Any) -> Any:
        return np.minimum(a, b, out=out)  # a positional `out` is deprecated for minimum (numpy 2.4)

    @staticmethod
    def copy(dst: Any, src: Any) -> Any:
        np.copyto(dst, src, casting="unsafe")
        return dst

    @staticmethod
    def fill_where(dst: Any, mask: Any, value: float) -> Any:
        if dst.dtype.kind in "iub" and isinstance(value, float) and not math.isfinite(value):
            # torch refuses too (an unsafe numpy cast would write INT_MIN)
            raise ValueError(f"fill_where: cannot write {value} into an array of dtype {dst.dtype}")
        np.copyto(dst, value, casting="unsafe", where=mask)
        return dst

    @staticmethod
    def select_into(out: Any, mask: Any, a: Any) -> Any:
        np.copyto(out, a, where=mask)
        return out

    @staticmethod
    def take(src: Any, index: Any, out: Any, axis: int = 0) -> Any:
        n = src.shape[axis]
        if index.size and (index.min() < 0 or index.max() >= n):  # torch raises; "clip" would not
            raise IndexError(f"take: index out of range for an axis of size {n}: {index.tolist()}")
        return src.take(index, axis, out, "clip")

    @staticmethod
    def take_in_range(src: Any, index: Any, out: Any, axis: int = 0) -> Any:
        """:meth:`take` without the bounds check, for the pipeline's own gathers (in range by construction);
        "clip" writes straight into ``out`` ("raise" buffers)."""
        return src.take(index, axis, out, "clip")

    @staticmethod
    def gather0(src: Any, index: Any, out: Any) -> Any:
        raise NotImplementedError("gather0 has no numpy executor; the stage stays on torch")

    @staticmethod
    def pad_rows(buffer: Any, slot0: Any, mask: Any, index: Any, first: Any, zero_cols: Any, pad: Any) -> Any:
        """:meth:`TORCH.pad_rows` writing only the reset envs' rows (``index``: their int64 indices, or None
        to take them from ``mask``): the same values. Where the two executors differ in kind, not only in
        spelling: masked writes over every row cost O(depth x B) (at B = 4096 and depth 3, 470 us against
        12 us indexed, numpy), while on torch an index would need the mask read back from the device."""
        if index is None:
            index = np.flatnonzero(np.asarray(mask))
        values = slot0[index]  # a copy (fancy indexing): slot0 aliases buffer
        if zero_cols is None:
            buffer[:, index] = values
            return buffer
        buffer[:, index] = np.where(zero_cols, np.zeros((), values.dtype), values)
        slot0[index] = values
        return buffer


class Binding:
    """One executor bound to the buffers it runs on: :attr:`xp` (:data:`TORCH` or :data:`NUMPY`) and
    :meth:`array`, a tensor as an array of that executor (the tensor itself, or a numpy view of its memory,
    made once per tensor). Every component of a class takes its buffers through its class's binding when it
    plans (at build, after a setter, after loading or copying), so each stage is written once against
    ``xp`` and runs on either executor.

    The numpy views are not state: they belong to the memory they view. A copied manager makes its own
    (:meth:`views` lists them, so a deep copy can leave them out and bind the copy's tensors instead).

    Example:
        >>> import torch
        >>> from sensorgym.core.xp import Binding
        >>> t = torch.zeros(2)
        >>> numpy = Binding("numpy")
        >>> a = numpy.array(t)
        >>> _ = numpy.xp.add(a, 1.0, a)  # on the tensor's memory
        >>> t.tolist(), numpy.array(t) is a, Binding("torch").array(t) is t
        ([1.0, 1.0], True, True)
    """

    __slots__ = ("_views", "name", "xp")

    def __init__(self, executor: str = "torch") -> None:
        if executor not in ("torch", "numpy"):
            raise ValueError(f"Binding({executor!r}): the executor is 'torch' or 'numpy'")
        self.name = executor
        self.xp = NUMPY if executor == "numpy" else TORCH
        self._views: dict[int, tuple[torch.Tensor, Any]] = {}  # id -> (tensor, its numpy view)

    def array(self, t: Any) -> Any:
        """``t`` as an array of :attr:`xp` (None stays None)."""
        if t is None or self.xp is TORCH:
            return t
        return self.numpy(t)

    def numpy(self, t: torch.Tensor) -> Any:
        """A numpy array sharing the memory of the CPU tensor ``t``, made once per tensor object (None where
        numpy cannot view it: a device tensor, one that requires grad, a dtype numpy lacks), whatever the
        executor. The tensor is kept with its view, so an id is never reused for another tensor."""
        known = self._views.get(id(t))
        if known is None or known[0] is not t:
            view = None
            if t.device.type == "cpu" and not t.requires_grad:
                try:
                    view = t.numpy()
                except TypeError:  # e.g. bfloat16
                    view = None
            if len(self._views) >= MAX_VIEWS:  # a hook passing a fresh tensor every call: start again
                self._views.clear()
            known = self._views[id(t)] = (t, view)
        return known[1]

    def views(self) -> list[Any]:
        """Every numpy view this binding made (what a deep copy must not copy)."""
        return [view for _, view in self._views.values() if view is not None]

    def __deepcopy__(self, memo: dict) -> Binding:
        return Binding(self.name)  # the copy's views are made from the copy's own tensors


#: numpy views one binding keeps (the components bind a fixed set of buffers; hooks pass the same few
#: every step; the bound keeps a hook that passes a new tensor on every call from growing it without end)
MAX_VIEWS = 1024


def numpy_view(t: torch.Tensor | None) -> np.ndarray | None:
    """A numpy array sharing ``t``'s CPU memory (None stays None)."""
    return None if t is None else t.detach().numpy()


def numpy_can_view(*dtypes: torch.dtype) -> bool:
    """Whether numpy can view CPU tensors of every one of ``dtypes`` (not e.g. bfloat16)."""
    try:
        for dtype in dtypes:
            torch.zeros(1, dtype=dtype).numpy()
    except TypeError:
        return False
    return True


def numpy_executes(*dtypes: torch.dtype) -> bool:
    """Whether the numpy executor can run a class with buffers of ``dtypes``: numpy must view them (not
    bfloat16), and none may be float16, where numpy and torch promote Python scalars and 0-d operands
    differently (a hook's ``md.xp.mul(x, 0.1, x)`` would round differently on the two executors)."""
    return numpy_can_view(*dtypes) and torch.float16 not in dtypes


def choose_executor(executor: str, device: torch.device, compiled: bool, elements: int) -> str:
    """``"torch"`` or ``"numpy"`` for a manager: ``executor`` as asked, ``"auto"`` decided from the device,
    ``compile`` and the step's size (``num_envs x intermediate columns``, see :data:`NUMPY_MAX_ELEMENTS`)."""
    if executor not in EXECUTORS:
        raise ValueError(
            f"SensorManager(executor={executor!r}): expected one of {EXECUTORS}. Fix: leave it out "
            "(auto), or pass 'torch' or 'numpy'."
        )
    numpy_possible = device.type == "cpu" and not compiled
    if executor == "numpy" and not numpy_possible:
        raise ValueError(
            f"SensorManager(executor='numpy'): the numpy executor runs on CPU buffers without "
            f"torch.compile; this manager has device={device} and compile={compiled}. Fix: use "
            "executor='auto' or 'torch'."
        )
    if executor == "auto":
        return "numpy" if numpy_possible and elements <= NUMPY_MAX_ELEMENTS else "torch"
    return executor
