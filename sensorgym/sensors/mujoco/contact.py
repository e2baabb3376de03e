"""``ContactSensor`` (touching or not) and ``ContactForceSensor`` (net contact force) on MuJoCo.

Both watch a *target*: a body (all its geoms) or a single geom, optionally ignoring contacts with
``exclude_bodies``.

* Contact: bool ``(B, 1)``. The intermediate value is the number of active contacts (float), projected
  to ``count > threshold`` in ``_post_process``, so noise on the count can flip a reading, as a real
  switch bounces.
* ContactForce: float ``(B, 3)``, the net force the rest of the world applies to the target, in the
  target's body frame (MuJoCo's ``xmat`` of the body; for a ``geom=`` target, the frame of the body that
  geom belongs to, not the geom's own frame). ``_post_process`` clamps each axis to ``±max_force`` and
  zeroes components below ``min_force`` (a deadband), on both branches.

A contact switch reads MuJoCo's native ``contact`` sensors where the model has them
(:mod:`sensorgym.sensors.mujoco.native`), and counts in Python otherwise; both give the same count.

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

from ...core.options import option_error
from .base import MujocoSensor, MujocoSensorOptions, cached, mj_handles, name_to_id, state_key

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


def _native_count(model: Any, o: Any) -> np.ndarray | None:
    """``sensordata`` addresses of a switch's native ``contact`` sensors (all contacts of the target, then
    one per excluded body, subtracted), or None where the native count would differ from ours: the
    target's own body excluded, an explicit ``<pair>`` joining two geoms of the target (a contact with
    itself, which ours skips), flex contacts (no geom on one side)."""

    def build() -> np.ndarray | None:
        import mujoco

        from .native import _excluded, contact_names, sensor_address

        target, body, _ = o.target(model)
        names = contact_names(o)
        excl = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in _excluded(o)]
        pairs = (
            np.stack([model.pair_geom1, model.pair_geom2], axis=1) if model.npair else np.zeros((0, 2), int)
        )
        if body in excl or model.nflex or np.any(target[pairs].all(axis=1)):
            return None
        if o.geom is not None:
            objtype, objid = mujoco.mjtObj.mjOBJ_GEOM, int(np.flatnonzero(target)[0])
        else:
            objtype, objid = mujoco.mjtObj.mjOBJ_BODY, body
        kind, body_t = mujoco.mjtSensor.mjSENS_CONTACT, mujoco.mjtObj.mjOBJ_BODY
        adr = [sensor_address(model, names[0], kind, objtype, objid)]
        adr += [
            sensor_address(model, n, kind, objtype, objid, body_t, b)
            for n, b in zip(names[1:], excl, strict=True)
        ]
        return None if None in adr else np.array(adr, dtype=np.int64)

    return cached(model, ("contact_native", o), build)


class _ContactPlan:
    """Target geom sets and excluded body sets of several contact switches.

    Switches whose native ``contact`` sensors are in the model (:mod:`sensorgym.sensors.mujoco.native`) read
    their counts from ``sensordata`` in one gather (the count of the target minus that of each excluded
    body). The others count in Python: contact lists are short (a few to a few tens of entries), so
    plain Python set lookups beat numpy, whose per-call overhead dominates at these sizes; this runs
    every step in every sub-env.
    """

    def __init__(self, model: Any, options: list) -> None:
        self.options = options
        self.keys = [state_key(o) for o in options]
        native = [_native_count(model, o) for o in options]
        self.native_keys = [k for k, adr in zip(self.keys, native, strict=True) if adr is not None]
        self.python = [(k, o) for k, o, adr in zip(self.keys, options, native, strict=True) if adr is None]
        # per native switch: (position of the target's count, positions of the excluded bodies' counts)
        # in one gather of sensordata, done on plain floats (a handful of values: numpy would cost more)
        self.terms: list[tuple[int, tuple[int, ...]]] = []
        flat: list[int] = []
        for adr in (a for a in native if a is not None):
            self.terms.append((len(flat), tuple(range(len(flat) + 1, len(flat) + len(adr)))))
            flat += adr.tolist()
        self.index: slice | list[int] = flat
        self.native_slots = [(key, slice(i, i + 1)) for i, key in enumerate(self.native_keys)]
        if flat and flat == list(range(flat[0], flat[0] + len(flat))):
            self.index = slice(flat[0], flat[0] + len(flat))
        masks = [o.target(model) for _, o in self.python]
        self.targets = [set(np.flatnonzero(m[0]).tolist()) for m in masks]
        self.excluded = [set(np.flatnonzero(m[2]).tolist()) for m in masks]
        self.geom_body = model.geom_bodyid.tolist()

    def counts(self, model: Any, data: Any) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        if self.native_keys:
            v = data.sensordata[self.index].tolist()
            counts = []
            for i, sub in self.terms:
                n = v[i]
                for j in sub:
                    n -= v[j]  # integers in float64: exact
                counts.append(n)
            c = np.array(counts, dtype=np.float32)
            for key, one in self.native_slots:  # (1,) views of one array: cheaper than one array each
                out[key] = c[one]
        if self.python:
            out.update(self.python_counts(data))
        return {key: out[key] for key in self.keys} if self.python and self.native_keys else out

    def python_counts(self, data: Any) -> dict[str, np.ndarray]:
        keys = [k for k, _ in self.python]
        if data.ncon == 0:
            return {key: np.zeros(1, np.float32) for key in keys}
        contact = data.contact  # each attribute access builds a new view: once
        pairs = list(zip(contact.geom1.tolist(), contact.geom2.tolist(), strict=True))
        body = self.geom_body
        out = {}
        for key, target, excluded in zip(keys, self.targets, self.excluded, strict=True):
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

    #: the native MuJoCo sensors this class reads (sensorgym.sensors.mujoco.native); not a field
    native_kind = "contact"

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
        adr = _native_count(model, o)
        if adr is not None:
            found = data.sensordata[adr]
            return np.array([found[0] - found[1:].sum()], dtype=np.float32)
        return cls._measure_python(model, data, o)

    @classmethod
    def _measure_python(cls, model: Any, data: Any, o: ContactOptions) -> np.ndarray:
        """The count over ``data.contact`` in Python (the path of models without native sensors)."""
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
    def _gather_terms(cls, env: Any, options: list) -> list | None:
        """Each count as its native target count minus those of its excluded bodies when every switch is
        native (see :mod:`~sensorgym.sensors.mujoco.gather`), else None."""
        model, _ = mj_handles(env)
        out = []
        for o in options:
            adr = _native_count(model, o)
            if adr is None:
                return None
            first, *minus = (("sensordata", int(a)) for a in adr)
            out.append((state_key(o), [(first, tuple(minus))]))
        return out

    @classmethod
    def _post_process(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> torch.Tensor:
        if "threshold" not in md.constants:
            values = [[s.options.threshold for s in md.sensors]]
            md.constants["threshold"] = torch.tensor(values, dtype=torch.float32, device=md.device)
        out = timeline.at(0)
        md.xp.greater(md.array(data), md.array(md.constants["threshold"]), md.array(out))
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
    def _limits(cls, md: Any, data: torch.Tensor) -> tuple:
        """``(-max, max, min, scratch, below)`` as arrays of ``md.xp`` (tensors made once, kept in
        ``md.constants``; ``md.array`` views them on the numpy executor)."""
        if "limits" not in md.constants:
            cols = [(s.options.max_force, s.options.min_force) for s in md.sensors for _ in range(3)]
            lim = torch.tensor(cols, dtype=torch.float32, device=md.device).T
            md.constants["limits"] = (
                -lim[0:1].contiguous(),
                lim[0:1].contiguous(),
                lim[1:2].contiguous(),
                torch.empty_like(data),
                torch.empty(data.shape, dtype=torch.bool, device=data.device),
            )
        return tuple(map(md.array, md.constants["limits"]))

    @classmethod
    def _post_process(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> torch.Tensor:
        xp = md.xp
        low, high, min_f, magnitude, below = cls._limits(md, data)
        out = timeline.at(0)
        x = md.array(out)
        xp.clip(md.array(data), low, high, x)  # saturation, then the deadband: no allocation per step
        xp.abs(x, magnitude)
        xp.less(magnitude, min_f, below)
        xp.fill_where(x, below, 0.0)
        return out
