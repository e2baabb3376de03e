"""``ContactSensor`` (touching or not) and ``ContactForceSensor`` (net contact force) on MuJoCo.

Both watch a *target*: a body (all its geoms) or a single geom, optionally ignoring contacts with
``exclude_bodies``.

* Contact: bool ``(B, 1)``. The intermediate value is the number of active contacts (float), projected
  to ``count > threshold`` in ``_post_process``, so noise on the count can flip a reading, as a real
  switch bounces.
* ContactForce: float ``(B, 3)``, the net force the rest of the world applies to the target, in the
  target's body frame. ``_post_process`` clamps each axis to ``±max_force`` and zeroes components below
  ``min_force`` (a deadband), on both branches.

Example:
    >>> import sensorgym as sg
    >>> sg.ContactOptions(geom="left_ankle_geom", delay=0.05).threshold
    0.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..options import option_error
from .mujoco_base import MujocoSensor, MujocoSensorOptions, cached, name_to_id

__all__ = ["ContactForceOptions", "ContactForceSensor", "ContactOptions", "ContactSensor", "contact_forces"]


@dataclass(frozen=True, kw_only=True)
class _TargetOptions(MujocoSensorOptions):
    body: str | None = None
    geom: str | None = None
    exclude_bodies: tuple[str, ...] = field(default_factory=tuple)

    def _validate(self) -> None:
        if (self.body is None) == (self.geom is None):
            raise option_error(
                type(self).__name__,
                "body/geom",
                (self.body, self.geom),
                "give exactly one target",
                "pass body='torso' or geom='left_ankle_geom'",
            )
        object.__setattr__(self, "exclude_bodies", tuple(self.exclude_bodies))
        super()._validate()

    def target(self, model: Any) -> tuple[np.ndarray, int, set[int]]:
        """(geom ids of the target, its body id, excluded body ids)."""
        import mujoco

        def build():
            if self.body is not None:
                body = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, self.body, f"{type(self).__name__}.body")
                geoms = np.flatnonzero(model.geom_bodyid == body)
            else:
                g = name_to_id(model, mujoco.mjtObj.mjOBJ_GEOM, self.geom, f"{type(self).__name__}.geom")
                geoms, body = np.array([g]), int(model.geom_bodyid[g])
            excl = {
                name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, b, "exclude_bodies") for b in self.exclude_bodies
            }
            return geoms, body, excl

        return cached(model, ("target", self), build)


def contact_forces(model: Any, data: Any, geoms: np.ndarray, exclude: set[int]) -> tuple[int, np.ndarray]:
    """(number of contacts, net world-frame force on ``geoms``) over the active contacts."""
    import mujoco

    count, total, f6 = 0, np.zeros(3), np.zeros(6)
    gset = set(int(g) for g in geoms)
    for i in range(data.ncon):
        c = data.contact[i]
        g1, g2 = int(c.geom1), int(c.geom2)
        if (g1 in gset) == (g2 in gset):
            continue  # not the target, or the target touching itself
        other = g2 if g1 in gset else g1
        if int(model.geom_bodyid[other]) in exclude:
            continue
        count += 1
        mujoco.mj_contactForce(model, data, i, f6)
        # mj_contactForce is the force of geom1 on geom2 in the contact frame (rows: normal, tangents)
        f_world = c.frame.reshape(3, 3).T @ f6[:3]
        total += f_world if g2 in gset else -f_world
    return count, total


@dataclass(frozen=True, kw_only=True)
class ContactOptions(_TargetOptions):
    """Options of :class:`ContactSensor`: target (``body`` or ``geom``), ``exclude_bodies``, and the
    ``threshold`` on the contact count above which the reading is True.

    Example: see the module docstring.
    """

    threshold: float = 0.5


class ContactSensor(MujocoSensor):
    """Touching or not; bool ``(B, 1)`` from a float contact count. See the module docstring."""

    options_cls = ContactOptions

    def _get_return_format(self) -> tuple[int, ...]:
        return (1,)

    @classmethod
    def _get_cache_dtype(cls) -> torch.dtype:
        return torch.bool

    @classmethod
    def _get_intermediate_dtype(cls) -> torch.dtype:
        return torch.float32

    @classmethod
    def _measure(cls, model: Any, data: Any, o: ContactOptions) -> np.ndarray:
        geoms, _, excl = o.target(model)
        return np.array([contact_forces(model, data, geoms, excl)[0]], dtype=np.float32)

    @classmethod
    def _post_process(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> torch.Tensor:
        if "threshold" not in md.constants:
            md.constants["threshold"] = torch.tensor(
                [[s.options.threshold for s in md.sensors]], dtype=torch.float32, device=md.device
            )
        out = timeline.at(0)
        torch.gt(data, md.constants["threshold"], out=out)
        return out


@dataclass(frozen=True, kw_only=True)
class ContactForceOptions(_TargetOptions):
    """Options of :class:`ContactForceSensor`: target, ``exclude_bodies``, ``max_force`` (saturation,
    per axis) and ``min_force`` (deadband, per axis), in newtons.

    Example:
        >>> import sensorgym as sg
        >>> sg.ContactForceOptions(body="torso", max_force=200.0, min_force=0.5).max_force
        200.0
    """

    max_force: float = math.inf
    min_force: float = 0.0

    def _validate(self) -> None:
        if not self.max_force > 0:
            raise option_error(
                "ContactForceOptions",
                "max_force",
                self.max_force,
                "it must be > 0",
                "use math.inf for no saturation",
            )
        if not 0 <= self.min_force < self.max_force:
            raise option_error(
                "ContactForceOptions",
                "min_force",
                self.min_force,
                "it must satisfy 0 <= min_force < max_force",
                "use 0.0 for no deadband",
            )
        object.__setattr__(self, "max_force", float(self.max_force))
        object.__setattr__(self, "min_force", float(self.min_force))
        super()._validate()


class ContactForceSensor(MujocoSensor):
    """Net contact force on the target in its body frame, saturated and dead-banded. See the module
    docstring."""

    options_cls = ContactForceOptions

    def _get_return_format(self) -> tuple[int, ...]:
        return (3,)

    @classmethod
    def _get_intermediate_dtype(cls) -> torch.dtype:
        return torch.float32  # the same space: _post_process only clamps

    @classmethod
    def _measure(cls, model: Any, data: Any, o: ContactForceOptions) -> np.ndarray:
        geoms, body, excl = o.target(model)
        _, f_world = contact_forces(model, data, geoms, excl)
        return data.xmat[body].reshape(3, 3).T @ f_world

    @classmethod
    def _limits(cls, md: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if "limits" not in md.constants:
            cols = [(s.options.max_force, s.options.min_force) for s in md.sensors for _ in range(3)]
            lim = torch.tensor(cols, dtype=torch.float32, device=md.device).T
            md.constants["limits"] = (lim[0:1].contiguous(), lim[1:2].contiguous())
        return md.constants["limits"]

    @classmethod
    def _post_process(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> torch.Tensor:
        max_f, min_f = cls._limits(md)
        out = timeline.at(0)
        torch.clamp(data, -max_f, max_f, out=out)
        out.masked_fill_(out.abs() < min_f, 0.0)
        return out
