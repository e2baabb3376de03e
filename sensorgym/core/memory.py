"""How many bytes of tensors a built :class:`~sensorgym.SensorManager` holds, in total, per env and per
sensor class; and the check that refuses, before allocating, a delay ring larger than the device's memory.

Every buffer the manager owns is counted once (views share their storage): intermediate buffers, timeline
rings, caches, return-space and history rings, delay tables, randomized parameters, scratch space and
the random generator state. Python objects (options, metadata) are not counted: they do not grow with
the number of envs.

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

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .options import bounds_of

if TYPE_CHECKING:
    from .manager import SensorManager
    from .metadata import SensorMetadata

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
            st = obj.untyped_storage()
            key = (st.data_ptr(), st.nbytes())
            if key in self.storages or st.nbytes() == 0:
                return 0
            self.storages.add(key)
            return st.nbytes()
        if isinstance(obj, dict):
            return sum(self.count(v) for v in obj.values())
        if isinstance(obj, (list, tuple)):
            return sum(self.count(v) for v in obj)
        if _owned(obj):
            return sum(self.count(v) for k, v in vars(obj).items() if k not in _SKIP)
        return 0


# references back up the object graph (counted by their owner)
_SKIP = frozenset({"_manager", "manager", "sensors", "_storage", "clock"})


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
    manager._require_built("memory_report()")
    c = _Counter()
    shared = sum(c.count(vars(g)) for g in manager._groups.values())
    shared += c.count(manager.random.get_state())
    shared += c.count(manager.episode_start)
    per_class = {st.cls.__name__: c.count(vars(st)) for st in manager._stores.values()}
    shared += c.count(manager._saved)
    return MemoryReport(sum(per_class.values()) + shared, shared, per_class, manager.num_envs)


# -- refusing a ring that cannot fit ---------------------------------------------------------------------
def check_ring_memory(
    sensors: list, md: SensorMetadata, max_shift: int, rcols: int, rdtype: torch.dtype
) -> None:
    """Refuse a delay ring larger than the device's memory with a ``ValueError`` naming the sensor, the
    option and the bytes it would need (instead of an allocator error, or a machine brought to a halt)."""
    if not max_shift:
        return
    need = (max_shift + 1) * md.num_envs * rcols * rdtype.itemsize
    limit = _device_memory(md.device)
    if limit is not None and need > limit:
        raise ring_memory_error(sensors, md, max_shift, rcols, rdtype, limit)


def ring_memory_error(
    sensors: list, md: SensorMetadata, max_shift: int, rcols: int, rdtype: torch.dtype, limit: int | None
) -> ValueError:
    depth = max_shift + 1
    need = depth * md.num_envs * rcols * rdtype.itemsize
    shifts = md.max_shift_per_sensor()
    j = max(range(len(sensors)), key=shifts.__getitem__)
    o = sensors[j].options
    name, value = "delay", o.delay
    if o.max_delay is not None and o.max_delay >= bounds_of(o.delay)[1] + bounds_of(o.jitter)[1]:
        name, value = "max_delay", o.max_delay
    elif bounds_of(o.jitter)[1] > bounds_of(o.delay)[1] / 2:
        name, value = "jitter", o.jitter
    available = "the memory available" if limit is None else f"the {_human(limit)} of memory"
    return ValueError(
        f"sensor {sensors[j].name!r}: {name}={value!r} at dt={md.dt:g} s needs a delay ring of {depth:,} "
        f"steps: about {_human(need)} ({need:,} bytes for {md.num_envs} envs x {rcols} columns of "
        f"{rdtype}), more than {available} on {md.device}. Fix: give the {name} in seconds (e.g. "
        f"{name}=0.04), not in steps or milliseconds, or lower it."
    )


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} EiB"


def _device_memory(device: torch.device) -> int | None:
    """Total memory of ``device`` in bytes (None when unknown)."""
    try:
        if device.type == "cuda":
            return torch.cuda.get_device_properties(device).total_memory
        if device.type == "cpu":
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError, RuntimeError):
        return None
    return None
