"""sensorgym: robot sensors for vectorized Gymnasium environments.

Measured readings (physics imperfection -> transform -> hardware imperfection -> projection ->
delay/jitter, optionally with history) for the policy, ground-truth twins for the critic, and per-episode
per-env randomization of every imperfection.

Example:
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=4, dt=0.02, seed=0)
    >>> imu = mgr.add_sensor(sg.StateSensorOptions(key="gyro", shape=(3,), noise=0.01, delay=0.04))
    >>> mgr.reset({"gyro": torch.zeros(4, 3)})
    >>> mgr.step({"gyro": torch.ones(4, 3)})
    >>> imu.read().shape, imu.read_ground_truth()[0].tolist()
    (torch.Size([4, 3]), [1.0, 1.0, 1.0])
"""

from . import _moved  # noqa: F401 - old module paths (sensorgym.manager, ...) forward to where they live now
from .core.manager import SensorManager
from .core.memory import MemoryReport, memory_report
from .core.metadata import SensorMetadata
from .core.options import SensorOptions, SimpleSensorOptions
from .core.randomization import Choice, Distribution, LogUniform, Normal, Uniform
from .core.sensor import Sensor, SimpleSensor
from .sensors import *  # noqa: F403 - the catalog
from .sensors import __all__ as _catalog

__version__ = "0.1.0"

# Register the reference envs (``gym.make("sensorgym/BatchedPendulum-v0")`` and the catalog envs) on
# ``import sensorgym``. The engine modules above stay torch-only; registering imports only gymnasium (a
# required dependency) and the envs' small modules, not MuJoCo.
from . import envs as _envs  # noqa: F401

__all__ = [
    *_catalog,
    "Choice",
    "Distribution",
    "LogUniform",
    "MemoryReport",
    "Normal",
    "Sensor",
    "SensorManager",
    "SensorMetadata",
    "SensorOptions",
    "SimpleSensor",
    "SimpleSensorOptions",
    "Uniform",
    "fit",  # noqa: F405 - lazy, from the module __getattr__ below
    "memory_report",
]


def __getattr__(name: str) -> object:
    """``sensorgym.fit`` (docs/fit.md), imported on first use: ``import sensorgym`` does not load the fitting
    code or its scipy/allantools."""
    if name == "fit":
        from .fitting.api import fit

        return fit
    raise AttributeError(f"module 'sensorgym' has no attribute {name!r}")
