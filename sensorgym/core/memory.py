"""How many bytes of tensors a built :class:`~sensorgym.SensorManager` holds, in total, per env and per
sensor class. (The check that refuses, before allocating, a delay ring larger than the device's memory
lives with the delay line, :mod:`sensorgym.core.delay_line`; it is re-exported here.)

Every buffer the manager owns is counted once (views share their storage): intermediate buffers, timeline
rings, caches, return-space and history rings, delay tables, randomized parameters, scratch space and
the random generator state. It reads the manager through public methods only (``storage(cls)``,
``random``, ``episode.steps``, ``rollback``). Python objects (options, metadata) are not counted: they
do not grow with the number of envs.

Example:
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=8, dt=0.02)
    >>> _ = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), history_length=4))
    >>> mgr.reset({"x": torch.zeros(8, 3)})
    >>> report = sg.memory_report(mgr)
    >>> report.per_class["StateSensor"] > 0, report.total == sum(report.per_class.values()) + report.shared
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .delay_line import check_ring_memory, ring_memory_error

if TYPE_CHECKING:
    from .manager import SensorManager

__all__ = ["MemoryReport", "check_ring_memory", "memory_report", "ring_memory_error"]


@dataclass(frozen=True)
class MemoryReport:
    """Bytes held by a manager: ``total``, ``shared`` (per-dtype buffers, random state), ``per_class``."""

    total: int
    shared: int
    per_class: dict[str, int]
    num_envs: int

    @property
    def per_env(self) -> float:
        """Bytes per env (everything divided by the batch size)."""
        return self.total / self.num_envs

    def __str__(self) -> str:
        rows = ", ".join(f"{k} {v / self.num_envs:,.0f}" for k, v in self.per_class.items())
        return (
            f"{self.total:,} B for {self.num_envs} envs = {self.per_env:,.0f} B/env "
            f"(shared {self.shared / self.num_envs:,.0f}; {rows})"
        )


class _Counter:
    """Sums storage bytes reachable from objects, each storage once."""

    def __init__(self) -> None:
        self.storages: set[tuple[int, int]] = set()
        self.visited: set[int] = set()

    def count(self, obj: Any) -> int:
        if id(obj) in self.visited:
            return 0
        self.visited.add(id(obj))
        if torch.is_tensor(obj):
            storage = obj.untyped_storage()
            key = (storage.data_ptr(), storage.nbytes())
            if key in self.storages or storage.nbytes() == 0:
                return 0
            self.storages.add(key)
            return storage.nbytes()
        if isinstance(obj, dict):
            return sum(self.count(v) for v in obj.values())
        if isinstance(obj, (list, tuple)):
            return sum(self.count(v) for v in obj)
        if _owned(obj):
            return sum(self.count(v) for k, v in vars(obj).items() if k not in _SKIP)
        return 0


# references back up the object graph (counted by their owner)
_SKIP = frozenset({"_manager", "manager", "sensors", "_storage", "clock", "members"})


def _owned(obj: Any) -> bool:
    from .manager import SensorManager
    from .sensor import Sensor

    mod = type(obj).__module__ or ""
    return (
        mod.startswith("sensorgym")
        and hasattr(obj, "__dict__")
        and not isinstance(obj, (SensorManager, Sensor, type))
    )


def memory_report(manager: SensorManager) -> MemoryReport:
    """Count the tensor bytes of a built manager (see the module docstring)."""
    if not manager.is_built:
        raise RuntimeError("memory_report() before the manager was built. Fix: call mgr.reset(state) first.")
    c = _Counter()
    storages = [manager.storage(cls) for cls in dict.fromkeys(type(s) for s in manager.sensors)]
    shared = sum(c.count(g) for g in dict.fromkeys(storage.group for storage in storages))
    shared += c.count(manager.random.get_state())
    shared += c.count(manager.episode.steps)
    per_class = {storage.cls.__name__: c.count(vars(storage)) for storage in storages}
    shared += c.count(manager.rollback.saved)
    return MemoryReport(sum(per_class.values()) + shared, shared, per_class, manager.num_envs)
