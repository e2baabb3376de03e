"""``SimStateExtractor``: compute the raw simulator state sensors need inside each sub-env.

Sensor classes that read simulator state implement ``_extract_state(env, options)``. This single-env
wrapper runs them after every reset and step of its env and passes the result through ``info`` as one
flat float32 array (``info["sensorgym"]``, cheap for Gymnasium's info batching), with its layout in
``info["sensorgym_layout"]`` at every reset; the vector wrapper splits it into the sensor state. With
``AsyncVectorEnv`` this runs inside the worker processes, so simulator objects are never pickled per step.

Example:
    >>> import gymnasium as gym, sensorgym as sg
    >>> from sensorgym.wrappers import SimStateExtractor
    >>> sensors = {"theta": sg.EnvAttributeOptions(attr="state", shape=(2,))}
    >>> env = SimStateExtractor(gym.make("Pendulum-v1"), sensors=sensors)
    >>> _, info = env.reset(seed=0)
    >>> info["sensorgym"].shape, info["sensorgym_layout"]
    ((2,), (('attr.state', (2,)),))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from ..core.options import SensorOptions
from .common import ExtractionPlan
from .state_mapping import EXTRACTOR_KEY, LAYOUT_KEY

__all__ = ["SimStateExtractor"]


class SimStateExtractor(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Adds ``info["sensorgym"] = {state key: array}`` for the sensors in ``sensors``.

    See the module docstring for a runnable example.
    """

    def __init__(self, env: gym.Env, sensors: Mapping[str, SensorOptions]) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, sensors=sensors)
        gym.Wrapper.__init__(self, env)
        self._plan = ExtractionPlan(sensors)

    def _with_state(self, info: dict, with_layout: bool = False) -> dict:
        if with_layout:
            flat, layout = self._plan.packed_with_layout(self.env)
            return {**info, EXTRACTOR_KEY: flat, LAYOUT_KEY: layout}
        return {**info, EXTRACTOR_KEY: self._plan.packed(self.env)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self._with_state(info, with_layout=True)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._with_state(info)
