"""What counts as a number wherever sensorgym accepts one.

Any real number type is accepted: Python ``int``/``float``, numpy scalars (``np.float32(0.02)``), 0-d
numpy arrays and 0-d torch tensors. ``bool`` is not a number here (``True`` as a delay is a bug).

Example:
    >>> import numpy as np
    >>> from sensorgym.core.values import as_int, as_real
    >>> as_real(np.float32(0.5)), as_real(np.array(2)), as_real(True), as_real("1")
    (0.5, 2.0, None, None)
    >>> as_int(np.int64(3)), as_int(3.0), as_int(np.array(4))
    (3, None, 4)
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

__all__ = ["as_int", "as_real"]


def _scalar(value: Any) -> Any:
    """A 0-d numpy array or torch tensor as its Python scalar; anything else unchanged."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item() if value.dtype.kind in "iuf" else None
    if torch.is_tensor(value) and value.ndim == 0:
        return None if value.dtype.is_complex or value.dtype == torch.bool else value.item()
    return value


def as_real(value: Any) -> float | None:
    """``value`` as a float if it is a real number (not a bool), else None."""
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def as_int(value: Any) -> int | None:
    """``value`` as an int if it is an integer number (not a bool), else None."""
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        return None
    return int(value)
