"""Old import paths of the modules that moved when the package was split into layers.

Before the split every engine and application module sat at the top of the package
(``sensorgym.manager``, ``sensorgym.training``) and the RL-library adapters sat in
``sensorgym.wrappers`` (``sensorgym.wrappers.sb3``). Code and checkpoints written against those paths
keep working: importing an old path gives the module itself (registered under both names) and warns once
with a :class:`DeprecationWarning`. Pickled objects (SB3 checkpoints store their policy class by module
path) load the same way.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     from sensorgym.wrappers.sb3 import SB3VecEnv
    >>> SB3VecEnv.__module__
    'sensorgym.integrations.sb3'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType

_CORE = ("accel", "manager", "memory", "metadata", "options", "randomization", "ring", "rng", "sampler",
         "sensor", "storage", "values")  # fmt: skip
_APP = ("ablation", "cli", "config", "demo", "inspection", "training")
_INTEGRATIONS = ("adapters", "rl_games", "rsl_rl", "sb3", "sb3_checkpoint", "skrl")
_MUJOCO = {"mujoco_base": "base", "camera": "camera", "contact": "contact", "geometry": "geometry",
           "imu": "imu", "joint": "joint", "native": "native", "raycaster": "raycaster",
           "tactile": "tactile", "temperature": "temperature"}  # fmt: skip

MOVED: dict[str, str] = {
    **{f"sensorgym.{m}": f"sensorgym.core.{m}" for m in _CORE},
    **{f"sensorgym.{m}": f"sensorgym.app.{m}" for m in _APP},
    **{f"sensorgym.wrappers.{m}": f"sensorgym.integrations.{m}" for m in _INTEGRATIONS},
    **{f"sensorgym.sensors.{old}": f"sensorgym.sensors.mujoco.{new}" for old, new in _MUJOCO.items()},
    "sensorgym.checkpoint": "sensorgym.wrappers.checkpoint",
    "sensorgym.wrappers.state": "sensorgym.wrappers.state_mapping",
    # the imperfection kernel's module became the error terms' (sensorgym.core.imperfections is gone)
    "sensorgym.imperfections": "sensorgym.core.terms",
}
"""Old dotted module path -> the path it lives at now."""


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers only for the old paths in :data:`MOVED`; every other import is left to Python."""

    def __init__(self) -> None:
        self._specs: dict[str, object] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        # The old name becomes the very same module object: identity, monkeypatching and pickles all agree.
        target = importlib.import_module(MOVED[spec.name])
        self._specs[spec.name] = target.__spec__
        return target

    def exec_module(self, module: ModuleType) -> None:
        old = next(name for name, new in MOVED.items() if new == module.__name__ and name in self._specs)
        # importlib stamped the alias spec on the module; put its own back
        module.__spec__ = self._specs.pop(old)
        warnings.warn(
            f"{old} moved to {module.__name__}; import it from there (the old path keeps working for now)",
            DeprecationWarning,
            stacklevel=2,
        )


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once), so old paths never reach the file system."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedModuleFinder())


install()
