"""Readings that are signed sums of ``MjData`` entries, gathered for several sensor classes at once.

Several catalog readings are entries of ``MjData`` arrays, or differences of them: a native IMU is a slice
of ``sensordata``, a native contact switch is the count of its target minus the counts of its excluded
bodies (also in ``sensordata``), an encoder is a slice of ``qpos``, a torque sensor one of
``qfrc_actuator``. Such a class describes its readings for a model with ``_gather_terms(env, options)``:
per option its state key and, per value, the ``(array, index)`` it starts from and the ``(array, index)``
terms it subtracts, built from the same address lookups its own ``_extract_state`` uses.

:class:`GatherProgram` turns the terms of every class in an extraction into a few numpy calls per step
(one ``take`` per source array, one gather, one subtraction per layer of subtracted terms), where each
class's ``_extract_state`` costs several Python calls per sub-env and step. The arithmetic is the one of
the classes' own reads: float64 values, subtracted in order, rounded to float32 once
(``tests/wrappers/test_fused_extraction.py`` holds the two routes bit-identical).

Example:
    >>> import types
    >>> import numpy as np
    >>> data = types.SimpleNamespace(sensordata=np.array([3.0, 1.0, 0.5]), qpos=np.array([0.1, 0.2]))
    >>> program = GatherProgram([
    ...     ("switch", [(("sensordata", 0), (("sensordata", 1),))]),   # 3 - 1
    ...     ("encoder", [(("qpos", 1), ()), (("qpos", 0), ())]),      # qpos[1], qpos[0]
    ... ])
    >>> program(data).tolist(), program.layout
    ([2.0, 0.20000000298023224, 0.10000000149011612], (('switch', (1,)), ('encoder', (2,))))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["GatherProgram", "Terms"]

#: ``(array name, flat index)`` of one ``MjData`` entry
Entry = tuple[str, int]
#: one sensor's readings: ``(state key, [(first entry, entries subtracted from it), ...])``, a pair per
#: value
Terms = tuple[str, Sequence[tuple[Entry, Sequence[Entry]]]]


class GatherProgram:
    """The readings of ``terms`` (a list of :data:`Terms`, in output order) as one flat float32 array.

    See the module docstring for a runnable example.
    """

    def __init__(self, terms: Sequence[Terms]) -> None:
        slots: dict[Entry, int] = {}  # each entry gathered once, numbered in order of first use
        for _, values in terms:
            for first, minus in values:
                for entry in (first, *minus):
                    slots.setdefault(entry, len(slots))
        by_array: dict[str, list[tuple[int, int]]] = {}
        for (array, index), slot in slots.items():
            by_array.setdefault(array, []).append((slot, index))
        self._gathered = np.empty(len(slots), np.float64)
        # per source array: the slots it fills and the indices it gives, each a slice when consecutive (a
        # slice copy costs a fraction of a fancy index; this runs every step in every sub-env)
        self._sources = [
            (array, _as_slice([i for _, i in pairs]), _as_slice([s for s, _ in pairs]))
            for array, pairs in by_array.items()
        ]
        flat = [v for _, values in terms for v in values]
        self._first = np.array([slots[first] for first, _ in flat], dtype=np.int64)
        self._values = np.empty(len(flat), np.float64)
        # layer k subtracts the k-th subtracted entry of every value that has one (the classes' order)
        depth = max((len(minus) for _, minus in flat), default=0)
        self._layers = []
        for k in range(depth):
            rows = [r for r, (_, minus) in enumerate(flat) if len(minus) > k]
            cols = [slots[flat[r][1][k]] for r in rows]
            self._layers.append((np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)))
        self.layout = tuple((key, (len(values),)) for key, values in terms)
        self.size = len(flat)

    def __call__(self, data: Any) -> np.ndarray:
        """The readings from ``data`` (an ``MjData``): a new flat float32 array."""
        gathered = self._gathered
        for array, index, where in self._sources:
            # each attribute access builds a new view of MjData's memory: once per array
            gathered[where] = getattr(data, array)[index]
        values = self._values
        np.take(gathered, self._first, out=values)
        for rows, cols in self._layers:
            values[rows] -= gathered[cols]
        return values.astype(np.float32)  # the one new array: it travels through info


def _as_slice(index: list[int]) -> slice | np.ndarray:
    if index == list(range(index[0], index[0] + len(index))):
        return slice(index[0], index[0] + len(index))
    return np.array(index, dtype=np.int64)
