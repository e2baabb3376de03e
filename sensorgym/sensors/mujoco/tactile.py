"""Proximity and tactile sensors on MuJoCo: distances, penetrations and pad displacements from the
geometry of the scene (:mod:`sensorgym.sensors.mujoco.geometry`), measured inside each sub-env.

* :class:`ProximitySensor`: distance from probe points on a body to the nearest tracked geom, clamped to
  ``[0, max_range]`` (``(n_probes,)``).
* :class:`KinematicContactProbe`: per probe point, the penetration depth into the nearest geom (a probe
  of radius ``radius`` touches when the surface is closer than that) and a spring-damper contact force
  ``(stiffness * depth + damping * depth_rate) * normal`` (no adhesion), in the body frame. Reads
  ``ProbeReading(penetration (n,), force (n, 3))``.
* :class:`ElastomerDisplacementSensor`: a tactile pad: a grid of taxels on a face of the body; each taxel
  the scene presses into is displaced by its penetration along the pressing surface's normal; the
  elastomer couples neighbours (a Gaussian spread over ``spread`` taxels). Reads ``(nx, ny, 3)`` in the
  body frame.

Tracked geoms default to everything outside the sensor's own kinematic tree (the robot never senses
itself); ``track_bodies`` restricts them to named bodies.

Example:
    >>> import sensorgym as sg
    >>> sg.ElastomerDisplacementOptions(body="finger", grid=(4, 3), size=(0.01, 0.01)).grid
    (4, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from ...core.options import option_error
from ...core.values import as_int, as_real
from .base import MujocoSensor, MujocoSensorOptions, cached, name_to_id
from .geometry import nearest_surface, tree_geoms

__all__ = [
    "ElastomerDisplacementOptions",
    "ElastomerDisplacementSensor",
    "KinematicContactProbe",
    "KinematicContactProbeOptions",
    "ProbeReading",
    "ProximityOptions",
    "ProximitySensor",
]


def _points(value: Any, owner: str, name: str) -> tuple[tuple[float, float, float], ...]:
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 1 and arr.size == 3:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != 3 or len(arr) == 0 or not np.isfinite(arr).all():
        raise option_error(
            owner,
            name,
            value,
            "expected a list of (x, y, z) points in the body frame",
            f"pass {name}=[(0, 0, 0.05)]",
        )
    return tuple(tuple(float(x) for x in p) for p in arr)


@dataclass(frozen=True, kw_only=True)
class _BodyGeometryOptions(MujocoSensorOptions):
    body: str
    track_bodies: tuple[str, ...] | None = None

    def _validate(self) -> None:
        if not isinstance(self.body, str) or not self.body:
            raise option_error(
                type(self).__name__, "body", self.body, "expected a body name", "pass body='finger'"
            )
        if self.track_bodies is not None:
            object.__setattr__(self, "track_bodies", tuple(self.track_bodies))
        super()._validate()

    def resolve(self, model: Any) -> tuple[int, np.ndarray]:
        """(body id, ids of the tracked geoms)."""
        import mujoco

        def build():
            body = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, self.body, f"{type(self).__name__}.body")
            if self.track_bodies is None:
                own = set(tree_geoms(model, body).tolist())
                geoms = np.array([g for g in range(model.ngeom) if g not in own], dtype=np.int64)
            else:
                ids = [
                    name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, b, "track_bodies") for b in self.track_bodies
                ]
                geoms = np.flatnonzero(np.isin(model.geom_bodyid, ids))
            return body, geoms

        return cached(model, ("geometry", self), build)


def _world(data: Any, body: int, local: np.ndarray) -> np.ndarray:
    return data.xpos[body] + local @ data.xmat[body].reshape(3, 3).T


@dataclass(frozen=True, kw_only=True)
class ProximityOptions(_BodyGeometryOptions):
    """Options of :class:`ProximitySensor`: ``body``, ``probes`` (points in the body frame),
    ``max_range`` (m) and ``track_bodies``.

    Example:
        >>> import sensorgym as sg
        >>> len(sg.ProximityOptions(body="finger", probes=[(0, 0, 0), (0.01, 0, 0)]).probes)
        2
    """

    probes: Any = ((0.0, 0.0, 0.0),)
    max_range: float = 0.1

    def _validate(self) -> None:
        object.__setattr__(self, "probes", _points(self.probes, "ProximityOptions", "probes"))
        if not (as_real(self.max_range) is not None and self.max_range > 0):
            raise option_error(
                "ProximityOptions", "max_range", self.max_range, "it must be > 0", "pass max_range=0.1"
            )
        super()._validate()


class ProximitySensor(MujocoSensor):
    """Distance from each probe to the nearest tracked surface, clamped to [0, max_range]."""

    options_cls = ProximityOptions

    def _get_return_format(self) -> tuple[int, ...]:
        return (len(self.options.probes),)

    @classmethod
    def _measure(cls, model: Any, data: Any, o: ProximityOptions) -> np.ndarray:
        body, geoms = o.resolve(model)
        dist, _, _ = nearest_surface(model, data, _world(data, body, np.asarray(o.probes)), geoms)
        return np.clip(dist, 0.0, o.max_range)


class ProbeReading(NamedTuple):
    penetration: torch.Tensor
    force: torch.Tensor


@dataclass(frozen=True, kw_only=True)
class KinematicContactProbeOptions(_BodyGeometryOptions):
    """Options of :class:`KinematicContactProbe`: ``body``, ``probes`` (body frame), ``radius`` (m),
    ``stiffness`` (N/m), ``damping`` (N s/m), ``track_bodies``.

    Example:
        >>> import sensorgym as sg
        >>> sg.KinematicContactProbeOptions(body="finger", probes=[(0, 0, -0.01)], stiffness=500.0).radius
        0.005
    """

    probes: Any = ((0.0, 0.0, 0.0),)
    radius: float = 0.005
    stiffness: float = 1000.0
    damping: float = 10.0

    def _validate(self) -> None:
        object.__setattr__(self, "probes", _points(self.probes, "KinematicContactProbeOptions", "probes"))
        for name in ("radius", "stiffness", "damping"):
            v = getattr(self, name)
            if not (as_real(v) is not None and v >= 0):
                raise option_error(
                    "KinematicContactProbeOptions",
                    name,
                    v,
                    "it must be a number >= 0",
                    f"pass {name}=0.0 to disable it",
                )
        super()._validate()


class KinematicContactProbe(MujocoSensor):
    """Penetration depth and spring-damper force per probe point (body frame)."""

    options_cls = KinematicContactProbeOptions
    return_type = ProbeReading

    def _get_return_format(self) -> tuple:
        n = len(self.options.probes)
        return ((n,), (n, 3))

    @classmethod
    def _measure(cls, model: Any, data: Any, o: KinematicContactProbeOptions) -> np.ndarray:
        import mujoco

        body, geoms = o.resolve(model)
        local = np.asarray(o.probes)
        points = _world(data, body, local)
        dist, which, normal = nearest_surface(model, data, points, geoms)
        depth = np.clip(o.radius - dist, 0.0, None)
        # depth rate: how fast the probe moves into the surface (relative to the touched body)
        # mjOBJ_XBODY: the velocity of the body frame's origin xpos (the lever arms below start there);
        # mjOBJ_BODY would give the centre of mass's
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, body, vel, 0)
        rel = vel[3:] + np.cross(vel[:3], points - data.xpos[body])
        for g in np.unique(which[(which >= 0) & (depth > 0)]):
            other = int(model.geom_bodyid[g])
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, other, vel, 0)
            rows = which == g
            rel[rows] -= vel[3:] + np.cross(vel[:3], points[rows] - data.xpos[other])
        rate = np.where(depth > 0, -(rel * normal).sum(axis=1), 0.0)
        magnitude = np.clip(o.stiffness * depth + o.damping * rate, 0.0, None) * (depth > 0)
        force_world = magnitude[:, None] * normal  # pushes the probe out of the surface
        force_local = force_world @ data.xmat[body].reshape(3, 3)
        return np.concatenate([depth, force_local.reshape(-1)])


@dataclass(frozen=True, kw_only=True)
class ElastomerDisplacementOptions(_BodyGeometryOptions):
    """Options of :class:`ElastomerDisplacementSensor`: ``body``, ``center`` of the pad (body frame),
    ``normal`` (outward pad normal, body frame), ``size`` (half extents along the pad's two tangent
    axes), ``grid`` (taxels ``(nx, ny)``), ``spread`` (elastic coupling, Gaussian sigma in taxels; 0 for
    none), ``track_bodies``.

    Example: see the module docstring.
    """

    center: tuple[float, float, float] = (0.0, 0.0, 0.0)
    normal: tuple[float, float, float] = (0.0, 0.0, -1.0)
    size: tuple[float, float] = (0.01, 0.01)
    grid: tuple[int, int] = (8, 8)
    spread: float = 1.0

    def _validate(self) -> None:
        owner = "ElastomerDisplacementOptions"
        n = np.asarray(self.normal, dtype=float)
        if n.shape != (3,) or not np.linalg.norm(n) > 0:
            raise option_error(
                owner, "normal", self.normal, "expected a non-zero 3-vector", "pass (0, 0, -1)"
            )
        object.__setattr__(self, "normal", tuple(float(x) for x in n / np.linalg.norm(n)))
        object.__setattr__(self, "center", _points(self.center, owner, "center")[0])
        if np.shape(self.size) != (2,) or min(self.size) <= 0:
            raise option_error(
                owner, "size", self.size, "expected two positive half extents", "pass size=(0.01, 0.01)"
            )
        object.__setattr__(self, "size", tuple(float(x) for x in self.size))
        grid = tuple(self.grid)
        if len(grid) != 2 or not all(as_int(g) is not None and g >= 1 for g in grid):
            raise option_error(owner, "grid", self.grid, "expected two taxel counts >= 1", "pass grid=(8, 8)")
        object.__setattr__(self, "grid", (int(grid[0]), int(grid[1])))
        if not (as_real(self.spread) is not None and self.spread >= 0):
            raise option_error(owner, "spread", self.spread, "it must be >= 0", "pass spread=0.0 for none")
        super()._validate()

    def taxels(self) -> tuple[np.ndarray, np.ndarray]:
        """(taxel positions (nx * ny, 3) in the body frame, smoothing matrix (n, n) or None)."""
        n = np.asarray(self.normal)
        a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        t1 = a - (a @ n) * n
        t1 /= np.linalg.norm(t1)
        t2 = np.cross(n, t1)
        nx, ny = self.grid
        u = np.linspace(-self.size[0], self.size[0], nx) if nx > 1 else np.zeros(1)
        v = np.linspace(-self.size[1], self.size[1], ny) if ny > 1 else np.zeros(1)
        uu, vv = np.meshgrid(u, v, indexing="ij")
        pos = np.asarray(self.center) + uu.reshape(-1, 1) * t1 + vv.reshape(-1, 1) * t2
        smooth = None
        if self.spread > 0:
            ij = np.stack(np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij"), axis=-1).reshape(-1, 2)
            d2 = ((ij[:, None, :] - ij[None, :, :]) ** 2).sum(-1)
            w = np.exp(-d2 / (2 * self.spread**2))
            smooth = w / w.sum(axis=1, keepdims=True)
        return pos, smooth


class ElastomerDisplacementSensor(MujocoSensor):
    """Taxel displacements of a tactile pad ``(nx, ny, 3)``, body frame."""

    options_cls = ElastomerDisplacementOptions

    def _get_return_format(self) -> tuple[int, ...]:
        return (*self.options.grid, 3)

    @classmethod
    def _measure(cls, model: Any, data: Any, o: ElastomerDisplacementOptions) -> np.ndarray:
        body, geoms = o.resolve(model)
        local, smooth = cached(model, ("taxels", o), o.taxels)
        dist, _, normal = nearest_surface(model, data, _world(data, body, local), geoms)
        depth = np.clip(-dist, 0.0, None)
        disp = (depth[:, None] * normal) @ data.xmat[body].reshape(3, 3)  # into the body frame
        if smooth is not None:
            disp = smooth @ disp
        return disp.reshape(-1)
