"""``RaycasterSensor``: a lidar or height scanner on a MuJoCo body, by ray casting.

Rays leave the sensor frame (the body frame moved by ``pos_offset`` and rotated by ``euler_offset``,
degrees, intrinsic xyz) in one of two patterns:

* :class:`SphericalPattern`: rays from the sensor origin over a horizontal and vertical field of view (a
  spinning or solid-state lidar); azimuth 0 is the sensor's +x axis, counter-clockwise about +z, elevation
  positive toward +z. Shape ``(n_vertical, n_horizontal)``.
* :class:`GridPattern`: parallel rays from a grid in the sensor's xy plane along ``direction`` (a height
  scanner). Shape ``(n_y, n_x)``: row ``i`` starts at ``y = -sy/2 + i * resolution``, column ``j`` at
  ``x = -sx/2 + j * resolution``.

The reading is ``RaycasterReading(points (B, *shape, 3), distances (B, *shape))``: the hit points in the
sensor frame (or the world frame with ``return_world_frame=True``) and the distances along each ray.

No-return convention: a ray that hits nothing within ``max_range``, or whose hit is closer than
``min_range`` (too close to measure), reports the distance ``no_hit_value`` (default: ``max_range``) and
the point ``origin + direction * no_hit_value``, so ``|point - origin| == distance`` holds for every ray
whenever ``no_hit_value >= 0``. ``no_hit_value`` must be finite (noise, quantization and the
non-finite policy run on these values).

The sensor never sees its own robot: by default every geom of the kinematic tree its body belongs to
(the subtree of the root body below the world) is left out, plus the bodies in ``exclude_bodies``.
Geoms that MuJoCo's ray casting ignores (fully transparent ones) are invisible to the sensor as well.

Example:
    >>> import numpy as np, mujoco
    >>> from sensorgym.sensors.mujoco.raycaster import RaycasterOptions, RaycasterSensor, SphericalPattern
    >>> m = mujoco.MjModel.from_xml_string('''<mujoco><worldbody>
    ...   <geom type="box" pos="2 0 0" size=".1 5 5"/>
    ...   <body name="robot"><geom type="sphere" size=".3"/></body>
    ... </worldbody></mujoco>''')
    >>> d = mujoco.MjData(m); mujoco.mj_forward(m, d)
    >>> o = RaycasterOptions(body="robot", pattern=SphericalPattern(4, 1), max_range=5.0)
    >>> flat = RaycasterSensor._measure(m, d, o)   # points (1, 4, 3) then distances (1, 4)
    >>> flat[-4:].round(6).tolist()   # azimuths -180, -90, 0, 90 degrees: only the ray along +x hits
    [5.0, 5.0, 1.9, 5.0]
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from ...core.options import option_error
from ...core.values import as_int, as_real
from .base import MujocoSensor, MujocoSensorOptions, name_to_id
from .geometry import euler_to_matrix

__all__ = [
    "GridPattern",
    "LidarOptions",
    "RaycasterOptions",
    "RaycasterReading",
    "RaycasterSensor",
    "SphericalPattern",
]

_N_GROUPS = 6  # mjNGROUP: ray casting clamps geom groups into [0, 5]

#: MjModel -> {options repr: _Plan}. Keyed weakly by the model itself, not by id(model): CPython reuses the
#: id of a freed model for the next one, which would hand a new model the ids derived for an old one.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class RaycasterReading(NamedTuple):
    """A raycaster read: ``points (B, *shape, 3)`` (m, sensor or world frame) and ``distances (B, *shape)``
    (m along each ray). With history, both gain an axis after ``B``.

    Example:
        >>> RaycasterReading._fields
        ('points', 'distances')
    """

    points: torch.Tensor
    distances: torch.Tensor


def _finite_vector(owner: str, name: str, value: Any, n: int) -> tuple[float, ...]:
    if np.shape(value) != (n,) or not np.all(np.isfinite(np.asarray(value, dtype=float))):
        raise option_error(
            owner, name, value, f"expected {n} finite numbers", f"pass {name}=({', '.join('x' * n)})"
        )
    return tuple(float(x) for x in value)


def _positive_int(owner: str, name: str, value: Any) -> int:
    if as_int(value) is None or value < 1:
        raise option_error(owner, name, value, "expected an int >= 1", f"pass e.g. {name}=16")
    return as_int(value)


@dataclass(frozen=True)
class GridPattern:
    """Parallel rays from a ``size = (sx, sy)`` metre grid in the sensor's xy plane, ``resolution``
    metres apart, all along ``direction`` (sensor frame; normalized). Shape ``(n_y, n_x)``.

    Example:
        >>> GridPattern(size=(1.0, 0.5), resolution=0.25).shape
        (3, 5)
    """

    size: tuple[float, float] = (1.0, 1.0)
    resolution: float = 0.1
    direction: tuple[float, float, float] = (0.0, 0.0, -1.0)

    def __post_init__(self) -> None:
        size = _finite_vector("GridPattern", "size", self.size, 2)
        if min(size) < 0:
            raise option_error("GridPattern", "size", self.size, "sizes must be >= 0", "pass size=(1.0, 1.0)")
        object.__setattr__(self, "size", size)
        r = self.resolution
        if as_real(r) is None or not math.isfinite(as_real(r)) or r <= 0:
            raise option_error(
                "GridPattern",
                "resolution",
                r,
                "the ray spacing must be a finite number of metres > 0",
                "pass e.g. resolution=0.1",
            )
        object.__setattr__(self, "resolution", float(r))
        d = np.asarray(_finite_vector("GridPattern", "direction", self.direction, 3))
        if np.linalg.norm(d) < 1e-9:
            raise option_error(
                "GridPattern",
                "direction",
                self.direction,
                "the direction must be non-zero",
                "pass e.g. direction=(0, 0, -1) (straight down)",
            )
        object.__setattr__(self, "direction", tuple(float(x) for x in d / np.linalg.norm(d)))

    def _count(self, length: float) -> int:
        return math.floor(length / self.resolution + 1e-9) + 1  # the tolerance keeps 1.0/0.1 at 11

    @property
    def shape(self) -> tuple[int, int]:
        return (self._count(self.size[1]), self._count(self.size[0]))

    def rays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(origins (N, 3), directions (N, 3))`` in the sensor frame, rows in ``shape`` order."""
        ny, nx = self.shape
        x = -self.size[0] / 2 + self.resolution * np.arange(nx)
        y = -self.size[1] / 2 + self.resolution * np.arange(ny)
        yy, xx = np.meshgrid(y, x, indexing="ij")
        origins = np.stack([xx.ravel(), yy.ravel(), np.zeros(xx.size)], axis=1)
        return origins, np.tile(np.asarray(self.direction), (xx.size, 1))


@dataclass(frozen=True)
class SphericalPattern:
    """Rays from the sensor origin: ``n_horizontal`` azimuths over ``fov_horizontal`` degrees and
    ``n_vertical`` elevations over ``fov_vertical`` degrees, both centred on the sensor's +x axis. A full
    circle (360) spaces azimuths ``360 / n`` apart from -180 (no duplicate ray at +180); otherwise the
    angles span ``[-fov/2, fov/2]`` inclusive (a single ray points at 0). Shape ``(n_vertical,
    n_horizontal)``.

    Example:
        >>> p = SphericalPattern(n_horizontal=4, n_vertical=3, fov_vertical=20.0)
        >>> p.shape, p.azimuths().tolist(), p.elevations().tolist()
        ((3, 4), [-180.0, -90.0, 0.0, 90.0], [-10.0, 0.0, 10.0])
    """

    n_horizontal: int = 360
    n_vertical: int = 1
    fov_horizontal: float = 360.0
    fov_vertical: float = 30.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "n_horizontal", _positive_int("SphericalPattern", "n_horizontal", self.n_horizontal)
        )
        object.__setattr__(
            self, "n_vertical", _positive_int("SphericalPattern", "n_vertical", self.n_vertical)
        )
        for name, hi in (("fov_horizontal", 360.0), ("fov_vertical", 180.0)):
            v = getattr(self, name)
            if as_real(v) is None or not 0 <= as_real(v) <= hi:
                raise option_error(
                    "SphericalPattern",
                    name,
                    v,
                    f"the field of view must be degrees in [0, {hi:g}]",
                    f"pass e.g. {name}={hi:g}",
                )
            object.__setattr__(self, name, float(v))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_vertical, self.n_horizontal)

    def azimuths(self) -> np.ndarray:
        """Azimuths in degrees, counter-clockwise from +x."""
        n, fov = self.n_horizontal, self.fov_horizontal
        if fov == 360.0:
            return -180.0 + 360.0 / n * np.arange(n)
        return np.linspace(-fov / 2, fov / 2, n) if n > 1 else np.zeros(1)

    def elevations(self) -> np.ndarray:
        """Elevations in degrees, positive toward +z."""
        n, fov = self.n_vertical, self.fov_vertical
        return np.linspace(-fov / 2, fov / 2, n) if n > 1 else np.zeros(1)

    def rays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(origins (N, 3) zeros, unit directions (N, 3))`` in the sensor frame, rows in ``shape`` order."""
        el, az = np.meshgrid(np.radians(self.elevations()), np.radians(self.azimuths()), indexing="ij")
        dirs = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=-1).reshape(
            -1, 3
        )
        return np.zeros_like(dirs), dirs


@dataclass(frozen=True, kw_only=True)
class RaycasterOptions(MujocoSensorOptions):
    """Options of :class:`RaycasterSensor`.

    Args:
        body: the body the sensor is mounted on.
        pos_offset: mount position in the body frame (m).
        euler_offset: mount rotation relative to the body frame (degrees, intrinsic xyz).
        pattern: a :class:`SphericalPattern` (lidar) or a :class:`GridPattern` (height scanner).
        min_range, max_range: hits closer than ``min_range`` or farther than ``max_range`` are no-returns.
        no_hit_value: the distance a no-return reports (None: ``max_range``); see the module docstring.
        return_world_frame: points in the world frame instead of the sensor frame.
        exclude_self: leave out every geom of the robot the sensor is mounted on (the kinematic tree of
            ``body``; nothing for a sensor on the world body).
        exclude_bodies: more bodies (names) whose geoms the rays pass through.

    Noise, bias, random walk and resolution act on every component: the point coordinates and the
    distances.

    Example:
        >>> o = RaycasterOptions(body="base", pattern=SphericalPattern(36, 4), max_range=8.0, noise=0.01)
        >>> o.pattern.shape, o.miss_distance, o.exclude_bodies
        ((4, 36), 8.0, ())
    """

    body: str
    pos_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    euler_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    pattern: GridPattern | SphericalPattern = SphericalPattern()
    min_range: float = 0.0
    max_range: float = 20.0
    no_hit_value: float | None = None
    return_world_frame: bool = False
    exclude_self: bool = True
    exclude_bodies: tuple[str, ...] | None = None

    def _validate(self) -> None:
        owner = type(self).__name__
        if not isinstance(self.body, str) or not self.body:
            raise option_error(owner, "body", self.body, "expected a body name", "pass body='base'")
        for name in ("pos_offset", "euler_offset"):
            object.__setattr__(self, name, _finite_vector(owner, name, getattr(self, name), 3))
        if not isinstance(self.pattern, (GridPattern, SphericalPattern)):
            raise option_error(
                owner,
                "pattern",
                self.pattern,
                "expected a SphericalPattern or a GridPattern",
                "pass pattern=SphericalPattern(n_horizontal=360) or GridPattern(size=(1, 1), resolution=0.1)",
            )
        lo, hi = self.min_range, self.max_range
        for name, v in (("min_range", lo), ("max_range", hi)):
            if as_real(v) is None or not math.isfinite(as_real(v)) or v < 0:
                raise option_error(
                    owner, name, v, "expected a finite distance >= 0 in metres", f"pass e.g. {name}=10.0"
                )
        if not lo < hi:
            raise option_error(
                owner, "max_range", hi, f"it must exceed min_range={lo}", f"pass max_range > {lo}"
            )
        object.__setattr__(self, "min_range", float(lo))
        object.__setattr__(self, "max_range", float(hi))
        v = self.no_hit_value
        if v is not None and (as_real(v) is None or not math.isfinite(as_real(v))):
            raise option_error(
                owner,
                "no_hit_value",
                v,
                "it must be a finite number (noise and quantization run on it)",
                "pass None (report max_range), or a marker such as 0.0 or -1.0",
            )
        object.__setattr__(self, "no_hit_value", None if v is None else float(v))
        excl = () if self.exclude_bodies is None else self.exclude_bodies
        if isinstance(excl, str) or not all(isinstance(b, str) and b for b in excl):
            raise option_error(
                owner,
                "exclude_bodies",
                self.exclude_bodies,
                "expected a list of body names",
                "pass exclude_bodies=['gripper'] (or None)",
            )
        object.__setattr__(self, "exclude_bodies", tuple(excl))
        object.__setattr__(self, "return_world_frame", bool(self.return_world_frame))
        object.__setattr__(self, "exclude_self", bool(self.exclude_self))
        super()._validate()

    @property
    def miss_distance(self) -> float:
        """The distance a no-return reports."""
        return self.max_range if self.no_hit_value is None else self.no_hit_value


#: the same options under the name most robots use for a spinning range sensor
LidarOptions = RaycasterOptions


class _Plan:
    """What a raycaster derives once per model: ids, rays in the sensor frame, exclusion, buffers."""

    def __init__(self, model: Any, o: RaycasterOptions) -> None:
        import mujoco

        owner = type(o).__name__
        self.body = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, o.body, f"{owner}.body")
        self.r_mount = euler_to_matrix(o.euler_offset)
        self.pos_offset = np.asarray(o.pos_offset)
        self.origins, self.dirs = o.pattern.rays()
        self.spherical = isinstance(o.pattern, SphericalPattern)
        n = len(self.dirs)
        self.geomid = np.zeros(n, dtype=np.int32)
        self.dist = np.zeros(n, dtype=np.float64)
        self.one_id = np.zeros(1, dtype=np.int32)
        self.lo, self.hi, self.miss = o.min_range, o.max_range, o.miss_distance

        hidden = np.zeros(model.ngeom, dtype=bool)
        root = int(model.body_rootid[self.body])
        if o.exclude_self and root != 0:
            hidden |= model.body_rootid[model.geom_bodyid] == root
        for name in o.exclude_bodies:
            b = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, name, f"{owner}.exclude_bodies")
            hidden |= model.geom_bodyid == b
        # mj_ray/mj_multiRay skip only one body, so hidden geoms are parked in a geom group left out of
        # the mask for the duration of the call; a group no visible geom uses keeps the others untouched
        self.hidden = np.flatnonzero(hidden)
        self.mask = np.ones(_N_GROUPS, dtype=np.uint8)
        self.moved = np.zeros(0, dtype=np.int64)
        if len(self.hidden):
            groups = np.clip(model.geom_group, 0, _N_GROUPS - 1)
            used = set(groups[~hidden].tolist())
            free = [g for g in range(_N_GROUPS - 1, -1, -1) if g not in used]
            self.park = free[0] if free else _N_GROUPS - 1
            # every group in use: the visible geoms of the parking group move to another (visible) group
            self.moved = np.flatnonzero(~hidden & (groups == self.park))
            self.spare = 0 if self.park != 0 else 1
            self.mask[self.park] = 0
        self.touched = np.concatenate([self.hidden, self.moved])

    def cast(self, model: Any, data: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distances (N,), and the sensor pose ``(position (3,), rotation (3, 3))`` in the world."""
        import mujoco

        r_body = data.xmat[self.body].reshape(3, 3)
        rot = r_body @ self.r_mount
        pos = data.xpos[self.body] + r_body @ self.pos_offset
        dirs = self.dirs @ rot.T
        saved = None
        if len(self.touched):
            saved = model.geom_group[self.touched].copy()
            model.geom_group[self.hidden] = self.park
            model.geom_group[self.moved] = self.spare
        try:
            if self.spherical:
                mujoco.mj_multiRay(
                    model,
                    data,
                    pos,
                    dirs.reshape(-1),
                    self.mask,
                    1,
                    -1,
                    self.geomid,
                    self.dist,
                    None,
                    len(dirs),
                    self.hi,
                )
            else:  # parallel rays have no common origin: mj_multiRay cannot cast them
                starts = self.origins @ rot.T + pos
                for i in range(len(starts)):
                    self.dist[i] = mujoco.mj_ray(
                        model, data, starts[i], dirs[i], self.mask, 1, -1, self.one_id
                    )
                    self.geomid[i] = self.one_id[0]
        finally:
            if saved is not None:
                model.geom_group[self.touched] = saved
        d = self.dist
        # the cutoff only culls geoms whose bounding sphere lies beyond it (never planes): filter here
        valid = (self.geomid >= 0) & (d >= self.lo) & (d <= self.hi)
        return np.where(valid, d, self.miss), pos, rot


class RaycasterSensor(MujocoSensor):
    """Lidar / height scanner by ray casting; see the module docstring.

    Example:
        >>> import sensorgym as sg
        >>> mgr = sg.SensorManager(num_envs=2, dt=0.05)
        >>> grid = GridPattern(size=(1.0, 0.5), resolution=0.25)
        >>> scan = mgr.add_sensor(RaycasterOptions(body="base", pattern=grid, delay=0.05))
        >>> type(scan).__name__, scan.fields
        ('RaycasterSensor', ((3, 5, 3), (3, 5)))
    """

    options_cls = RaycasterOptions
    return_type = RaycasterReading

    def _get_return_format(self) -> tuple:
        shape = self.options.pattern.shape
        return ((*shape, 3), shape)

    @classmethod
    def _measure(cls, model: Any, data: Any, o: RaycasterOptions) -> np.ndarray:
        per_model = _PLANS.get(model)
        if per_model is None:
            per_model = _PLANS[model] = {}
        plan = per_model.get(repr(o))
        if plan is None:
            plan = per_model[repr(o)] = _Plan(model, o)
        dist, pos, rot = plan.cast(model, data)
        points = plan.origins + plan.dirs * dist[:, None]
        if o.return_world_frame:
            points = points @ rot.T + pos
        return np.concatenate([points.reshape(-1), dist])
