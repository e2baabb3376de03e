"""The narrow views the per-class components take of what sits above them.

The parameter table, the sampler and the metadata read a sensor's name, options and place in its class,
never the :class:`~sensorgym.core.sensor.Sensor` itself; the imperfections read the class metadata's
bound imperfections and capture context; the CUDA-graph step and the memory check read a manager. Each
is a :class:`typing.Protocol` here, at the bottom of the core, so no component imports a module above it
(not even for its annotations).

Example:
    >>> import sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=1, dt=0.1)
    >>> s = mgr.add_sensor(sg.StateSensorOptions(key="obs"), name="angle")
    >>> isinstance(s, SensorHandle)
    True
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["ManagerHandle", "SensorHandle"]


@runtime_checkable
class SensorHandle(Protocol):
    """A sensor as its class's components see it: ``name``, ``options``, ``index`` (its position among
    the sensors of its class) and ``cache_slice`` (its columns in the class's cache)."""

    name: str
    options: Any
    index: int
    cache_slice: slice


class ManagerHandle(Protocol):
    """The manager as a sensor, the CUDA-graph step and the memory check see it: its batch, step and
    device (a sensor's public methods forward to the manager's own private methods)."""

    num_envs: int
    dt: float
    device: Any
