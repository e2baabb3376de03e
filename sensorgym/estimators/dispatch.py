"""Which route runs a step: the compiled kernel (:mod:`sensorgym.estimators.kernels`) or the recorded op
tape (:meth:`~sensorgym.estimators.base.AttitudeEstimator.plan`).

The kernel runs when all of these hold: kernels are on (:func:`use_kernels`, default on; the environment
variable ``SENSORGYM_ESTIMATOR_KERNELS=0`` turns them off at import), numba is importable (the ``fast``
extra), the state lives on the CPU (the numpy executor, or torch tensors on the CPU: the kernel works on
numpy views of the same memory), and the estimator is one of the four built-in variants with its own
step (a subclass that overrides the step, or a third estimator, runs its tape). Otherwise the tape runs:
on CUDA, for a user's estimator, without numba. Both give the same bits (tests/estimators/
test_kernels.py), so the switch changes the speed only.

Example:
    >>> import numpy as np
    >>> from sensorgym.estimators import Mahony, use_kernels
    >>> f, gyr, acc = Mahony(kp=1.0, ki=0.1, rate=100.0), np.full((50, 3), 0.1), np.tile([0, 0, 9.8], (50, 1))
    >>> previous = use_kernels(False)  # the tape
    >>> q_tape = f.run(gyr, acc)
    >>> _ = use_kernels(previous)
    >>> bool(np.array_equal(q_tape, f.run(gyr, acc)))
    True
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import numpy as np
import torch

from ._ops import NumpyOps

__all__ = ["kernels_available", "use_kernels"]


def switched_on(value: str) -> bool:
    """Whether ``SENSORGYM_ESTIMATOR_KERNELS=value`` leaves the kernels on (``0``, ``false``, ``no``,
    ``off`` turn them off)."""
    return value.strip().lower() not in ("0", "false", "no", "off")


#: whether a step may take its compiled kernel (read by AttitudeEstimator.step at every step)
enabled: bool = switched_on(os.environ.get("SENSORGYM_ESTIMATOR_KERNELS", "1"))
_available: bool | None = None


def use_kernels(on: bool) -> bool:
    """Let the built-in estimators' steps run their compiled kernels (``True``, the default) or force the
    recorded op tape (``False``); returns the previous setting. Process-wide."""
    global enabled
    previous, enabled = enabled, bool(on)
    return previous


def kernels_available() -> bool:
    """Whether numba can be imported (without importing it)."""
    global _available
    if _available is None:
        _available = importlib.util.find_spec("numba") is not None
    return _available


def bind(spec: tuple[str, str, float] | None, state: Any) -> tuple[Any, tuple] | None:
    """The kernel ``spec`` names (``(kernel name, layout name in kernels, earth-field scale)``, from the
    estimator) bound to ``state``'s memory: ``(kernel, (flat storage, consts, mask))``, or None where the
    tape runs (no spec, no numba, a state off the CPU, or a layout other than the kernel's). Imports
    numba; the kernel compiles at its first call (or loads from numba's cache)."""
    if spec is None or not kernels_available():
        return None
    host = state.host
    if host is None:
        return None
    from . import kernels

    name, layout, scale = spec
    if any(state.rows.get(block) != row for block, row in getattr(kernels, layout).items()):
        return None  # e.g. a subclass that adds state rows: its rows sit elsewhere
    return getattr(kernels, name), (host.storage, kernels.consts_for(host.storage.dtype, scale), host.mask)


#: ``dst[...] = src`` on numpy arrays (any dtype cast), as the numpy executor copies
copy = NumpyOps.copyto


def kernel_mask(mask: Any, own: np.ndarray) -> np.ndarray:
    """The mask a kernel reads: a contiguous numpy bool array of the batch's length as it is (or a CPU
    tensor's memory), anything else copied into the state's own (so the kernel sees one mask type and
    compiles once)."""
    m = host(mask)
    if type(m) is np.ndarray and m.dtype == np.bool_ and m.shape == own.shape and m.flags.c_contiguous:
        return m
    copy(own, m)
    return own


def host(x: Any) -> Any:
    """``x`` as a numpy array: a CPU tensor's memory, else a copy (a tensor on a device, or one that
    requires grad); anything else as it is (numpy converts it)."""
    if type(x) is torch.Tensor:
        return x.detach().cpu().numpy() if x.requires_grad or not x.is_cpu else x.numpy()
    return x
