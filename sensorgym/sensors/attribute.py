"""``EnvAttributeSensor``: a sensor reading an attribute of the unwrapped (sub-)env.

The attribute is read inside each sub-env (in Async workers too) by
:class:`~sensorgym.wrappers.SimStateExtractor` and reaches the manager as the state entry
``"attr.<name>"``; use it for privileged simulator state that is not in the observation, e.g.
Pendulum's ``state`` (angle, angular velocity).

Example:
    >>> import gymnasium as gym, sensorgym as sg
    >>> from sensorgym.wrappers import SingleEnvSensorObservation
    >>> env = SingleEnvSensorObservation(gym.make("Pendulum-v1"), {
    ...     "theta": sg.EnvAttributeOptions(attr="state", shape=(2,), index=[0])})
    >>> obs, _ = env.reset(seed=0)
    >>> obs["policy"].shape
    (1,)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .state import StateSensor, StateSensorOptions

__all__ = ["EnvAttributeOptions", "EnvAttributeSensor"]


@dataclass(frozen=True, kw_only=True)
class EnvAttributeOptions(StateSensorOptions):
    """Options of :class:`EnvAttributeSensor`: ``attr`` names the attribute of ``env.unwrapped``;
    ``shape`` is the shape of the attribute (before ``index``), needed before the first reset.

    Example:
        >>> import sensorgym as sg
        >>> sg.EnvAttributeOptions(attr="state", shape=(2,)).key
        'attr.state'
    """

    attr: str
    key: str = ""

    def _validate(self) -> None:
        if not isinstance(self.attr, str) or not self.attr:
            raise TypeError(
                f"EnvAttributeOptions.attr={self.attr!r} is invalid: expected the name of an "
                "attribute of env.unwrapped. Fix: pass e.g. attr='state'."
            )
        if not self.key:
            object.__setattr__(self, "key", f"attr.{self.attr}")
        if self.shape is not None and self.index is not None:
            # shape describes the attribute; the reading has len(index) entries on the last axis
            shape = tuple(self.shape) if isinstance(self.shape, tuple) else (self.shape,)
            object.__setattr__(self, "shape", (*shape[:-1], len(tuple(self.index))))
        super()._validate()


class EnvAttributeSensor(StateSensor):
    """Reads ``getattr(env.unwrapped, attr)`` as a float32 sensor.

    Example: see the module docstring.
    """

    options_cls = EnvAttributeOptions

    @classmethod
    def _extract_state(cls, env: Any, options: list) -> dict[str, np.ndarray]:
        base = env.unwrapped
        out = {}
        for o in options:
            value = getattr(base, o.attr, None)
            if value is None:
                raise ValueError(
                    f"EnvAttributeSensor: env.unwrapped.{o.attr} is missing or None; "
                    f"{type(base).__name__} has no such attribute set at this point."
                )
            out[o.key] = np.asarray(value, dtype=np.float32)
        return out
