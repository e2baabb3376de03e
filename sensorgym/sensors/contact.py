"""``ContactSensor`` (touching or not) and ``ContactForceSensor`` (net contact force) on MuJoCo.

Both watch a *target*: a body (all its geoms) or a single geom, optionally ignoring contacts with
``exclude_bodies``.

* Contact: bool ``(B, 1)``. The intermediate value is the number of active contacts (float), projected
  to ``count > threshold`` in ``_post_process``, so noise on the count can flip a reading, as a real
  switch bounces.
* ContactForce: float ``(B, 3)``, the net force the rest of the world applies to the target, in the
  target's body frame (MuJoCo's ``xmat`` of the body; for a ``geom=`` target, the frame of the body that
  geom belongs to, not the geom's own frame). ``_post_process`` clamps each axis to ``±max_force`` and zeroes components below
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
from .mujoco_base import MujocoSensor, MujocoSensorOptions, cached, mj_handles, name_to_id, state_key

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

    def target(self, model: Any) -> tuple[np.ndarray, int, np.ndarray]:
        """(bool mask over geoms: the target's, its body id, bool mask over bodies: excluded)."""
        import mujoco

        def build():
            if self.body is not None:
                body = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, self.body, f"{type(self).__name__}.body")
                geoms = np.flatnonzero(model.geom_bodyid == body)
            else:
                g = name_to_id(model, mujoco.mjtObj.mjOBJ_GEOM, self.geom, f"{type(self).__name__}.geom")
                geoms, body = np.array([g]), int(model.geom_bodyid[g])
            excl = np.zeros(model.nbody, dtype=bool)
            for b in self.exclude_bodies:
                excl[name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, b, "exclude_bodies")] = True
            mask = np.zeros(model.ngeom, dtype=bool)
            mask[geoms] = True
            return mask, body, excl

        return cached(model, ("target", self), build)


def touching(model: Any, data: Any, target: np.ndarray, exclude: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices of the active contacts between the target geoms and anything not excluded, whether the
    target is the contact's second geom), vectorized over the contact list."""
    g1, g2 = data.contact.geom1, data.contact.geom2
    in1, in2 = target[g1], target[g2]
    other = np.where(in1, g2, g1)
    valid = (in1 != in2) & ~exclude[model.geom_bodyid[other]]  # not the target touching itself
    idx = np.flatnonzero(valid)
    return idx, in2[idx]


def contact_forces(model: Any, data: Any, target: np.ndarray, exclude: np.ndarray) -> tuple[int, np.ndarray]:
    """(number of contacts, net world-frame force on the target geoms) over the active contacts."""
    import mujoco

    idx, second = touching(model, data, target, exclude)
    total, f6 = np.zeros(3), np.zeros(6)
    for i, is_second in zip(idx.tolist(), second.tolist(), strict=True):
        mujoco.mj_contactForce(model, data, i, f6)
        # mj_contactForce is the force of geom1 on geom2 in the contact frame (rows: normal, tangents)
        f_world = data.contact.frame[i].reshape(3, 3).T @ f6[:3]
        total += f_world if is_second else -f_world
    return len(idx), total


class _ContactPlan:
    """Target geom sets and excluded body sets of several contact switches.

    Contact lists are short (a few to a few tens of entries), so plain Python set lookups beat numpy,
    whose per-call overhead dominates at these sizes; this runs every step in every sub-env.
    """

    def __init__(self, model: Any, options: list) -> None:
        self.options = options
        masks = [o.target(model) for o in options]
        self.targets = [set(np.flatnonzero(m[0]).tolist()) for m in masks]
        self.excluded = [set(np.flatnonzero(m[2]).tolist()) for m in masks]
        self.geom_body = model.geom_bodyid.tolist()
        self.keys = [state_key(o) for o in options]

    def counts(self, model: Any, data: Any) -> dict[str, np.ndarray]:
        if data.ncon == 0:
            return {key: np.zeros(1, np.float32) for key in self.keys}
        contact = data.contact  # each attribute access builds a new view: once
        pairs = list(zip(contact.geom1.tolist(), contact.geom2.tolist(), strict=True))
        body = self.geom_body
        out = {}
        for key, target, excluded in zip(self.keys, self.targets, self.excluded, strict=True):
            n = 0
            for g1, g2 in pairs:
                in1, in2 = g1 in target, g2 in target
                # a contact of the target with something else that is not excluded
                if in1 != in2 and body[g2 if in1 else g1] not in excluded:
                    n += 1
            out[key] = np.array([n], dtype=np.float32)
        return out


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
        target, _, excl = o.target(model)
        return np.array([len(touching(model, data, target, excl)[0])], dtype=np.float32)

    @classmethod
    def _extract_state(cls, env: Any, options: list) -> dict[str, np.ndarray]:
        # all switches of the class in one vectorized pass over the contact list
        model, data = mj_handles(env)
        plan = cached(model, ("contact_plan", options[0]), lambda: _ContactPlan(model, options))
        if plan.options is not options:
            plan = _ContactPlan(model, options)
        return plan.counts(model, data)

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
