"""The ops an estimator's step is written against: the engine's two executors (:mod:`sensorgym.core.xp`)
and the few more that attitude arithmetic needs (subtract, square root, a lower bound, negate, a 0/1
flag).

As in the engine, every op writes into ``out`` (nothing is allocated per step) and is one exactly rounded
IEEE operation on both executors (no reductions, no matrix products, no fused multiply-add), so the numpy
and the torch route of one step give the same bits, whatever the batch size. One op needs care: torch's
CPU square root is not correctly rounded (about 0.7% of float64 results and 0.2% of float32 ones are 1 ulp
off, measured with torch 2.13 on an AVX-512 CPU, and which ones depends on the tensor's size), so on CPU
tensors :class:`CpuTorchOps` takes numpy's (correctly rounded) square root on views of the same memory.
CUDA's square root is correctly rounded in both precisions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..core.xp import NUMPY, TORCH, Binding

__all__ = ["CpuTorchOps", "NumpyOps", "TorchOps", "ops_for"]


class NumpyOps(NUMPY):
    """:data:`~sensorgym.core.xp.NUMPY` plus the estimators' ops (ufuncs: ``out`` is positional)."""

    sub = np.subtract
    sqrt = np.sqrt
    neg = np.negative

    @staticmethod
    def lower_bound(a: Any, low: float, out: Any) -> Any:
        """``out = max(a, low)`` (``low`` a Python number)."""
        return np.maximum(a, low, out=out)

    @staticmethod
    def positive(a: Any, out: Any) -> Any:
        """``out = 1 where a > 0 else 0``, in ``out``'s (floating) dtype."""
        return np.greater(a, 0, out=out)


class TorchOps(TORCH):
    """:data:`~sensorgym.core.xp.TORCH` plus the estimators' ops."""

    @staticmethod
    def sub(a: Any, b: Any, out: Any) -> Any:
        return torch.sub(a, b, out=out)

    @staticmethod
    def sqrt(a: Any, out: Any) -> Any:
        return torch.sqrt(a, out=out)

    @staticmethod
    def neg(a: Any, out: Any) -> Any:
        return torch.neg(a, out=out)

    @staticmethod
    def lower_bound(a: Any, low: float, out: Any) -> Any:
        return torch.clamp(a, min=low, out=out)

    @staticmethod
    def positive(a: Any, out: Any) -> Any:
        return torch.gt(a, 0, out=out)


class CpuTorchOps(TorchOps):
    """:class:`TorchOps` for CPU tensors: the square root is numpy's, on views of the tensors' memory
    (made once per tensor). Used as an instance."""

    copyto = staticmethod(torch.Tensor.copy_)  # a plain method would bind to the instance

    def __init__(self) -> None:
        self._binding = Binding("numpy")

    def sqrt(self, a: Any, out: Any) -> Any:  # type: ignore[override]
        np.sqrt(self._binding.numpy(a), self._binding.numpy(out))
        return out


def ops_for(executor: str, device: Any = "cpu") -> Any:
    """The ops of ``executor`` (``"numpy"`` or ``"torch"``) for states on ``device``."""
    if executor not in ("numpy", "torch"):
        raise ValueError(f"executor={executor!r}: an estimator runs on 'numpy' or 'torch'")
    if executor == "numpy":
        return NumpyOps
    return CpuTorchOps() if torch.device(device).type == "cpu" else TorchOps
