"""From a vector env's ``(obs, info)`` to the state mapping the sensor manager reads.

Keys: ``"obs"`` for an array observation (``"obs.<key>"``/``"obs.<index>"`` for each leaf of a Dict or Tuple
observation, nested as ``"obs.<key>.<key>"``; see :mod:`sensorgym.wrappers.spaces`), every numeric
info entry under its key (nested dicts as ``"parent.child"``), and the entries a
:class:`~sensorgym.wrappers.SimStateExtractor` computed inside the sub-envs (``info["sensorgym"]``) under
their own keys. Values stay what they are (numpy arrays or torch tensors); sensors convert them.

Example:
    >>> import numpy as np
    >>> from sensorgym.wrappers.state_mapping import build_state
    >>> obs = np.zeros((2, 3), np.float32)
    >>> info = {"t": np.array([4, 5]), "_t": np.array([True, True]), "name": np.array(["a", "b"])}
    >>> sorted(build_state(obs, info))
    ['obs', 't']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .spaces import state_entries

__all__ = ["EXTRACTOR_KEY", "LAYOUT_KEY", "build_state", "is_numeric", "merge_rows", "split_extracted"]

#: the info key under which :class:`~sensorgym.wrappers.SimStateExtractor` passes raw sim state: one flat
#: float32 array per env (a single info entry keeps Gymnasium's per-key info batching cheap) ...
EXTRACTOR_KEY = "sensorgym"
#: ... laid out as described by this entry, sent with every reset: ``((state key, shape), ...)``
LAYOUT_KEY = "sensorgym_layout"


def is_numeric(value: Any) -> bool:
    if torch.is_tensor(value):
        return not value.is_complex()
    return isinstance(value, np.ndarray) and (value.dtype.kind in "biuf")


_SPANS: dict[Any, list[tuple[str, slice, tuple]]] = {}


def _spans(layout: Any) -> list[tuple[str, slice, tuple]]:
    """``(key, columns, shape)`` per entry of an extraction layout (computed once per layout)."""
    try:
        spans = _SPANS.get(layout)
    except TypeError:  # an unhashable layout (e.g. lists from a checkpoint): use its tuple form
        layout = tuple((k, tuple(shape)) for k, shape in layout)
        spans = _SPANS.get(layout)
    if spans is None:
        spans, start = [], 0
        for key, shape in layout:
            size = int(np.prod(shape)) if len(shape) else 1
            spans.append((key, slice(start, start + size), tuple(shape)))
            start += size
        if len(_SPANS) < 64:  # layouts are few (one per sensor set); never grow without bound
            _SPANS[layout] = spans
    return spans


def split_extracted(flat: Any, layout: Any) -> dict[str, Any]:
    """Views of a batched flat extraction ``(B, total)`` per state key (see :data:`LAYOUT_KEY`)."""
    num_envs = flat.shape[0]
    return {key: flat[:, cols].reshape(num_envs, *shape) for key, cols, shape in _spans(layout)}


def _add_info(state: dict, info: Mapping, prefix: str, layout: Any = None) -> None:
    for key, value in info.items():
        if key.startswith("_") or key == LAYOUT_KEY:
            continue  # gymnasium's per-key masks; the extraction layout
        if not prefix and key == EXTRACTOR_KEY and layout is not None and not isinstance(value, Mapping):
            state.update(split_extracted(value, layout))
            continue
        if type(value) is np.ndarray:  # the common case first: Gymnasium batches info entries into arrays
            if value.dtype.kind in "biuf":
                state[f"{prefix}{key}"] = value
            continue
        if isinstance(value, Mapping):
            inner = "" if (not prefix and key == EXTRACTOR_KEY) else f"{prefix}{key}."
            _add_info(state, value, inner)
        elif is_numeric(value):
            state[f"{prefix}{key}"] = value


def build_state(obs: Any, info: Mapping | None, layout: Any = None) -> dict[str, Any]:
    """The state mapping for one step of a vector env (``layout``: of the flat extraction, if any)."""
    state: dict[str, Any] = {}
    if info:
        _add_info(state, info, "", layout)
    if obs is not None:
        state.update(state_entries(obs))
    return state


def merge_rows(base: dict[str, Any], other: dict[str, Any], rows: np.ndarray | torch.Tensor) -> dict:
    """``base`` with the rows in ``rows`` (bool (B,)) taken from ``other`` where ``other`` has the key."""
    out = dict(base)
    for key, value in other.items():
        if key not in base:
            continue
        current = base[key]
        if torch.is_tensor(current):
            row_mask = torch.as_tensor(rows, device=current.device)
            replacement = torch.as_tensor(value, device=current.device, dtype=current.dtype)
            out[key] = torch.where(row_mask.view(-1, *([1] * (current.dim() - 1))), replacement, current)
        else:
            current = np.array(current, copy=True)
            row_mask = np.asarray(rows)
            current[row_mask] = np.asarray(value)[row_mask]
            out[key] = current
    return out
