"""``IMUSensor``: accelerometer (specific force), gyroscope and magnetometer on a MuJoCo body.

Returns a NamedTuple ``IMUReading(lin_acc (B, 3), ang_vel (B, 3), mag (B, 3))`` in the sensor frame:
the body frame (MuJoCo's ``xpos``/``xmat``: the frame the MJCF body is declared in, not its centre of
mass or principal inertia axes) moved by ``pos_offset`` (metres, body frame) and rotated by
``euler_offset`` (degrees, intrinsic x-y-z: ``R = Rx @ Ry @ Rz``, MJCF's default ``eulerseq="xyz"``), so
it reads what MuJoCo's native ``accelerometer``/``gyro``/``magnetometer`` on a site with that ``pos`` and
``euler`` read. The acceleration at the mount point is ``a + alpha x r + w x (w x r)``. The accelerometer
reads specific force, so an IMU at rest reads ``+g`` pointing up and one in free fall reads zero. The
magnetometer reads the world field ``magnetic_field`` in the sensor frame. Per-axis cross-axis coupling
(misalignment) matrices are the sensor's response (``_apply_transform``, both branches); every
imperfection can be given per field (``acc_noise``, ``gyro_bias``, ``mag_resolution``, ...).

Where the model carries the IMU's native sensors (:mod:`sensorgym.sensors.mujoco.native`: a site at the mount
with an accelerometer, a gyro and, when the model's field is ``magnetic_field``, a magnetometer), the
reading is a copy of their ``data.sensordata`` slice; otherwise it is computed in Python from ``MjData``
(``_measure_python``). Both agree within float32 rounding.

Example:
    >>> import sensorgym as sg
    >>> o = sg.IMUOptions(body="torso", acc_noise=0.05, gyro_noise=0.01, gyro_cross_axis_coupling=0.02)
    >>> o.noise[:3], o.noise[3:6]
    ((0.05, 0.05, 0.05), (0.01, 0.01, 0.01))
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from ...core.options import option_error
from ...core.randomization import Distribution
from ...core.values import as_real
from .base import MujocoSensor, MujocoSensorOptions, cached, mj_handles, name_to_id, state_key

__all__ = ["IMUOptions", "IMUReading", "IMUSensor", "coupling_matrix", "euler_to_matrix"]

FIELDS = ("acc", "gyro", "mag")
# mujoco.mjtObj.mjOBJ_XBODY: the body *frame* (origin xpos, axes xmat). mjOBJ_BODY would be the inertial
# frame (centre of mass xipos, principal axes ximat), which is not where an IMU is mounted.
_OBJ_XBODY = 2
#: the component options the IMU also takes per field (``acc_noise``, ``gyro_noise_density``, ...)
IMPERFECTIONS = (
    "noise", "bias", "random_walk", "resolution", "noise_density", "random_walk_density", "bias_instability",
    "bias_correlation_time", "scale_factor", "bandwidth",
)  # fmt: skip
#: per-step option and its density twin: never both non-zero on one component
_EXCLUSIVE = (("noise", "noise_density"), ("random_walk", "random_walk_density"))


class IMUReading(NamedTuple):
    lin_acc: torch.Tensor
    ang_vel: torch.Tensor
    mag: torch.Tensor


def _cross(a: list[float], b: list[float]) -> list[float]:
    # plain floats: numpy costs microseconds per call on 3-vectors, and this runs every step in every env
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def euler_to_matrix(euler_deg: Any) -> np.ndarray:
    """Rotation matrix of intrinsic x-y-z Euler angles in degrees."""
    ax, ay, az = (math.radians(float(a)) for a in euler_deg)
    cx, sx, cy, sy, cz, sz = (
        math.cos(ax),
        math.sin(ax),
        math.cos(ay),
        math.sin(ay),
        math.cos(az),
        math.sin(az),
    )
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rx @ ry @ rz


def coupling_matrix(value: Any, what: str) -> np.ndarray:
    """Cross-axis coupling: a scalar (all off-diagonals), 3 values (xy, xz, yz pairs) or a 3x3 matrix."""
    v = np.asarray(value, dtype=np.float64)
    if v.shape == ():
        return np.eye(3) + float(v) * (np.ones((3, 3)) - np.eye(3))
    if v.shape == (3,):
        m = np.eye(3)
        m[0, 1] = m[1, 0] = v[0]
        m[0, 2] = m[2, 0] = v[1]
        m[1, 2] = m[2, 1] = v[2]
        return m
    if v.shape == (3, 3):
        return v.copy()
    raise ValueError(f"{what}={value!r}: expected a scalar, 3 values (xy, xz, yz) or a 3x3 matrix.")


def _field_part(value: Any, i: int) -> tuple:
    """The 3 components of field ``i`` of a 9-component option (a value, 1 or 9 values); () when the
    length is wrong (the base class names that)."""
    if isinstance(value, (list, np.ndarray)):  # not normalized yet: the base class does it after the merge
        value = tuple(np.asarray(value, dtype=object).ravel())
    if not isinstance(value, tuple):
        return (value,) * 3
    if len(value) == 1:
        return value * 3
    return value[3 * i : 3 * i + 3] if len(value) == 9 else ()


def _lowest(v: Any) -> float:
    if isinstance(v, Distribution):
        return v.bounds[0]
    x = as_real(v)
    return math.nan if x is None else x  # not a number: the base class reports it


def _can_be_nonzero(v: Any) -> bool:
    if isinstance(v, Distribution):
        return v.bounds != (0.0, 0.0)
    x = as_real(v)
    return x is not None and x != 0.0


@dataclass(frozen=True, kw_only=True)
class IMUOptions(MujocoSensorOptions):
    """Options of :class:`IMUSensor`.

    Args:
        body: the body the IMU is mounted on.
        pos_offset: mount position in the body frame (m).
        euler_offset: mount rotation relative to the body frame (degrees, intrinsic xyz).
        magnetic_field: world magnetic field the magnetometer reads (any unit).
        acc_cross_axis_coupling, gyro_cross_axis_coupling, mag_cross_axis_coupling: per-field coupling:
            a scalar, (xy, xz, yz) or a 3x3 matrix applied to the true vector.
        acc_noise, gyro_noise, mag_noise, ... : per-field imperfections (a scalar, 3 values or a
            distribution; None: not given). Every component option of the error model is taken per field
            under the prefixes ``acc_``, ``gyro_`` and ``mag_``: ``noise``, ``bias``, ``random_walk``,
            ``resolution``, ``noise_density``, ``random_walk_density``, ``bias_instability``,
            ``bias_correlation_time``, ``scale_factor`` and ``bandwidth`` (docs/error_model.md). A given
            per-field option overrides the matching 3 components of the 9-component option of the same
            name (components: acc x y z, gyro x y z, mag x y z); its checks name it (``gyro_noise`` and
            ``gyro_noise_density`` may not both be non-zero on one axis).

    Example:
        >>> import sensorgym as sg
        >>> o = sg.IMUOptions(body="torso", gyro_noise_density=1.7e-4, acc_bandwidth=50.0)
        >>> o.noise_density[3:6], o.bandwidth[:3], o.bandwidth[6:]
        ((0.00017, 0.00017, 0.00017), (50.0, 50.0, 50.0), (0.0, 0.0, 0.0))
    """

    body: str
    pos_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    euler_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    magnetic_field: tuple[float, float, float] = (0.0, 0.2, -0.45)
    acc_cross_axis_coupling: Any = 0.0
    gyro_cross_axis_coupling: Any = 0.0
    mag_cross_axis_coupling: Any = 0.0
    acc_noise: Any = None
    gyro_noise: Any = None
    mag_noise: Any = None
    acc_bias: Any = None
    gyro_bias: Any = None
    mag_bias: Any = None
    acc_random_walk: Any = None
    gyro_random_walk: Any = None
    mag_random_walk: Any = None
    acc_resolution: Any = None
    gyro_resolution: Any = None
    mag_resolution: Any = None
    acc_noise_density: Any = None
    gyro_noise_density: Any = None
    mag_noise_density: Any = None
    acc_random_walk_density: Any = None
    gyro_random_walk_density: Any = None
    mag_random_walk_density: Any = None
    acc_bias_instability: Any = None
    gyro_bias_instability: Any = None
    mag_bias_instability: Any = None
    acc_bias_correlation_time: Any = None
    gyro_bias_correlation_time: Any = None
    mag_bias_correlation_time: Any = None
    acc_scale_factor: Any = None
    gyro_scale_factor: Any = None
    mag_scale_factor: Any = None
    acc_bandwidth: Any = None
    gyro_bandwidth: Any = None
    mag_bandwidth: Any = None

    def _validate(self) -> None:
        if not isinstance(self.body, str) or not self.body:
            raise TypeError(
                f"IMUOptions.body={self.body!r} is invalid: expected a body name. Fix: pass body='torso'."
            )
        for name in ("pos_offset", "euler_offset", "magnetic_field"):
            v = getattr(self, name)
            if np.shape(v) != (3,) or not np.all(np.isfinite(np.asarray(v, dtype=float))):
                raise option_error(
                    "IMUOptions", name, v, "expected 3 finite numbers", f"pass {name}=(x, y, z)"
                )
            object.__setattr__(self, name, tuple(float(x) for x in v))
        for f in FIELDS:
            name = f"{f}_cross_axis_coupling"
            matrix = coupling_matrix(getattr(self, name), f"IMUOptions.{name}")
            value = np.asarray(getattr(self, name), dtype=float)
            object.__setattr__(self, name, float(value) if value.ndim == 0 else tuple(map(tuple, matrix)))
            for kind in IMPERFECTIONS:
                v = getattr(self, f"{f}_{kind}")
                if isinstance(v, (list, np.ndarray)):
                    v = tuple(v)
                    object.__setattr__(self, f"{f}_{kind}", v)
                if v is not None:
                    self._check_field_value(f"{f}_{kind}", kind, v)
        written = {kind: getattr(self, kind) for kind in IMPERFECTIONS}  # before the merge, for messages
        for kind in IMPERFECTIONS:
            merged = self._merge_fields(kind)
            if merged is not None:
                object.__setattr__(self, kind, merged)
        self._check_field_pairs(written)
        super()._validate()

    def _check_field_value(self, name: str, kind: str, value: Any) -> None:
        """One per-field option (``gyro_noise_density=...``): each component a finite number or a
        distribution, inside the range of ``kind`` (the merged 9 values are checked again by the base
        class, but its message would name ``kind`` and a component number instead of ``name``)."""
        non_negative = kind in getattr(self, "_non_negative", ())
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, Distribution):
                lo = v.bounds[0]
            else:
                lo = as_real(v)
                if lo is None:
                    raise TypeError(
                        f"IMUOptions.{name}={value!r} is invalid: expected a number, 3 numbers or a "
                        f"Distribution, got {type(v).__name__}. Fix: pass e.g. {name}=0.01."
                    )
                if not math.isfinite(lo):
                    raise option_error("IMUOptions", name, value, "values must be finite", f"pass {name}=0.0")
            if non_negative and lo < 0:
                raise option_error(
                    "IMUOptions", name, value, f"it can be {lo:g} but {kind} must be >= 0",
                    "use a value >= 0 (0.0: off), or a distribution such as sg.Uniform(0.0, x)",
                )  # fmt: skip
            if kind == "scale_factor" and lo <= -1.0:
                why = f"it can be {lo:g}; a gain 1 + k must stay positive, so k > -1"
                fix = f"use e.g. {name}=0.01 (1 %) or sg.Uniform(-0.02, 0.02)"
                raise option_error("IMUOptions", name, value, why, fix)

    def _check_field_pairs(self, written: dict[str, Any]) -> None:
        """The checks that tie two options of one field (``gyro_noise`` vs ``gyro_noise_density``, a
        correlation time for a bias instability), run on the merged values and naming the options as they
        were written: the per-field spelling where one was given, else the 9-component option."""

        def spelled(f: str, kind: str) -> tuple[str, Any]:
            v = getattr(self, f"{f}_{kind}")
            return (f"{f}_{kind}", v) if v is not None else (kind, written[kind])

        for i, f in enumerate(FIELDS):
            for a, b in (*_EXCLUSIVE, ("bias_instability", "bias_correlation_time")):
                if getattr(self, f"{f}_{a}") is None and getattr(self, f"{f}_{b}") is None:
                    continue  # neither per field: the base class checks (and names) the 9-component options
                pairs = zip(_field_part(getattr(self, a), i), _field_part(getattr(self, b), i), strict=True)
                for axis, (va, vb) in enumerate(pairs):
                    (name_a, given_a), (name_b, given_b) = spelled(f, a), spelled(f, b)
                    where = f"on {f} axis {'xyz'[axis]} (component {3 * i + axis} of 9)"
                    if b == "bias_correlation_time":
                        if _can_be_nonzero(va) and _lowest(vb) <= 0.0:
                            raise option_error(
                                "IMUOptions", name_a, given_a,
                                f"a bias instability needs a correlation time > 0 {where}, and "
                                f"{name_b}={given_b!r} gives none there",
                                f"give {f}_{b} in seconds, e.g. {f}_{b}=100.0",
                            )  # fmt: skip
                    elif _can_be_nonzero(va) and _can_be_nonzero(vb):
                        raise option_error(
                            "IMUOptions", name_b, given_b,
                            f"{name_a}={given_a!r} and {name_b} are both non-zero {where}; they are two "
                            "units of the same error term",
                            f"give one of {name_a} (per step) or {name_b} (per sqrt(Hz)) and set the other "
                            "to 0.0",
                        )  # fmt: skip

    def _merge_fields(self, kind: str) -> tuple | None:
        per_field = {f: getattr(self, f"{f}_{kind}") for f in FIELDS}
        if all(v is None for v in per_field.values()):
            return None
        base = getattr(self, kind)
        if isinstance(base, (tuple, list)):
            if len(base) not in (1, 9):
                raise option_error(
                    "IMUOptions",
                    kind,
                    base,
                    "an IMU has 9 components (acc, gyro, mag)",
                    "give 1 or 9 values, or use the per-field options",
                )
            base = tuple(base) * (9 if len(base) == 1 else 1)
        else:
            base = (base,) * 9
        out = list(base)
        for i, f in enumerate(FIELDS):
            v = per_field[f]
            if v is None:
                continue
            vals = tuple(v) if isinstance(v, (tuple, list, np.ndarray)) else (v,) * 3
            if len(vals) != 3:
                raise option_error(
                    "IMUOptions",
                    f"{f}_{kind}",
                    v,
                    "expected a scalar, a distribution or 3 values",
                    f"pass {f}_{kind}=0.01 or (x, y, z)",
                )
            out[3 * i : 3 * i + 3] = vals
        return tuple(out)

    # -- Kalibr ------------------------------------------------------------------------------------------
    @classmethod
    def from_kalibr(cls, source: str | os.PathLike | Mapping[str, Any], **kwargs: Any) -> IMUOptions:
        """Options of the IMU described by a Kalibr ``imu.yaml`` (a path, or the already parsed mapping).

        ``accelerometer_noise_density``/``gyroscope_noise_density`` become ``acc_``/``gyro_noise_density``,
        ``accelerometer_random_walk``/``gyroscope_random_walk`` become ``acc_``/``gyro_random_walk_density``
        and ``update_rate`` becomes ``update_period = 1 / update_rate`` (Kalibr's convention: the
        per-sample std is ``noise_density * sqrt(update_rate)``, docs/error_model.md). ``kwargs`` set the
        rest (``body`` is required: the file does not say where the IMU is). The keys Kalibr uses for
        other things than noise (``rostopic``, ``time_offset``) are ignored; any other key, a missing one, a
        value that is not a number ``>= 0`` (``update_rate > 0``), or a keyword that contradicts the file
        is a ``ValueError`` naming it. Reading a path needs PyYAML (``pip install pyyaml``).

        Example:
            >>> import sensorgym as sg
            >>> euroc = {"rostopic": "/imu0", "update_rate": 200.0,  # EuRoC's ADIS16448
            ...          "gyroscope_noise_density": 1.6968e-04, "gyroscope_random_walk": 1.9393e-05,
            ...          "accelerometer_noise_density": 2.0e-3, "accelerometer_random_walk": 3.0e-3}
            >>> o = sg.IMUOptions.from_kalibr(euroc, body="torso", pos_offset=(0.0, 0.0, 0.05))
            >>> o.update_period, o.noise_density[3:6], o.random_walk_density[:3]
            (0.005, (0.00016968, 0.00016968, 0.00016968), (0.003, 0.003, 0.003))
            >>> o.to_kalibr(rostopic="/imu0") == euroc
            True
        """
        table, where = _kalibr_table(source)
        read = (*KALIBR_KEYS, "update_rate")
        unknown = [k for k in table if k not in read and k not in KALIBR_IGNORED]
        if unknown:
            raise ValueError(
                f"IMUOptions.from_kalibr: {where} has the key {unknown[0]!r}, which is not part of a Kalibr "
                f"IMU noise model (it reads {list(read)} and ignores "
                f"{list(KALIBR_IGNORED)}). Fix: correct its spelling or remove it."
            )
        missing = [k for k in read if k not in table]
        if missing:
            raise ValueError(
                f"IMUOptions.from_kalibr: {where} has no {missing[0]!r}"
                + (f" (also missing: {missing[1:]})" if len(missing) > 1 else "")
                + f". Fix: add it; a Kalibr imu.yaml gives all of {list(read)}."
            )
        derived: dict[str, float] = {}
        source_of: dict[str, str] = {}
        for key, (f, kind) in KALIBR_KEYS.items():
            derived[f"{f}_{kind}"] = _kalibr_number(table[key], key, where, positive=False)
            source_of[f"{f}_{kind}"] = key
        rate = _kalibr_number(table["update_rate"], "update_rate", where, positive=True)
        derived["update_period"] = 1.0 / rate
        source_of["update_period"] = "update_rate"
        if "body" not in kwargs:
            raise TypeError(
                "IMUOptions.from_kalibr: body is required (a Kalibr file does not say where the IMU is "
                "mounted). Fix: pass body='torso' (and pos_offset/euler_offset for the mount)."
            )
        for name, value in derived.items():
            if name in kwargs and not _same_value(kwargs[name], value):
                key = source_of[name]
                raise ValueError(
                    f"IMUOptions.from_kalibr: the keyword {name}={kwargs[name]!r} contradicts {where}'s "
                    f"{key}: {table[key]!r} (which gives {name}={value!r}). Fix: drop {name} from the "
                    "keywords, or edit the file."
                )
        for kind in ("noise_density", "random_walk_density"):  # the 9-component spelling
            if kind not in kwargs:
                continue
            for i, f in enumerate(FIELDS[:2]):
                part = _field_part(_as_components(kwargs[kind]), i)
                if any(not _same_value(v, derived[f"{f}_{kind}"]) for v in part):
                    raise ValueError(
                        f"IMUOptions.from_kalibr: the keyword {kind}={kwargs[kind]!r} sets the {f} "
                        f"components, which {where} gives ({source_of[f'{f}_{kind}']}: "
                        f"{table[source_of[f'{f}_{kind}']]!r}). Fix: set only mag_{kind} (the "
                        "magnetometer, which Kalibr does not describe)."
                    )
        return cls(**{**kwargs, **derived})

    def to_kalibr(self, path: str | os.PathLike | None = None, *, rostopic: str | None = None) -> dict:
        """The Kalibr ``imu.yaml`` mapping of these options (the keys :meth:`from_kalibr` reads), written to
        ``path`` as YAML too when given (needs PyYAML). ``rostopic`` adds that key (Kalibr needs it to
        find the IMU's messages; it is not part of the noise model).

        Kalibr has one value per sensor: each of ``acc_``/``gyro_noise_density`` and
        ``acc_``/``gyro_random_walk_density`` must be one number for its three axes (a per-axis value or a
        distribution is a ``ValueError``), ``update_period`` a positive number (``update_rate = 1 /
        update_period``, written as the shortest decimal whose reciprocal is ``update_period``, so a file
        read by :meth:`from_kalibr` is written back exactly), and the per-step ``acc_``/``gyro_noise`` and
        ``_random_walk`` zero (a Kalibr file holds densities only: a per-step value would be lost).

        Example: see :meth:`from_kalibr`.
        """
        period = self.update_period
        if isinstance(period, Distribution) or not period > 0:
            raise option_error(
                "IMUOptions", "update_period", period,
                "a Kalibr file gives update_rate = 1 / update_period, which needs one positive period",
                "pass the IMU's own sample period, e.g. update_period=0.005 for 200 Hz",
            )  # fmt: skip
        out: dict[str, Any] = {}
        for key, (f, kind) in KALIBR_KEYS.items():
            i = FIELDS.index(f)
            per_step = kind.removesuffix("_density")
            steps = _field_part(_as_components(getattr(self, per_step)), i)
            if any(_can_be_nonzero(v) for v in steps):
                raise option_error(
                    "IMUOptions", f"{f}_{per_step}", tuple(steps),
                    "a Kalibr file holds densities only, and this per-step value would be lost",
                    f"give {f}_{kind} instead (a per-step std s at sample period T_s is the density "
                    "s * sqrt(T_s))",
                )  # fmt: skip
            values = _field_part(_as_components(getattr(self, kind)), i)
            first = values[0] if values else None
            if (
                len(values) != 3
                or any(isinstance(v, Distribution) for v in values)
                or any(as_real(v) != as_real(first) for v in values)
            ):
                raise option_error(
                    "IMUOptions", f"{f}_{kind}", tuple(values),
                    "Kalibr has one value per sensor: no per-axis value and no distribution",
                    f"give {f}_{kind} one number for the three axes",
                )  # fmt: skip
            out[key] = float(first)
        out["update_rate"] = _rate_of(float(period))
        if rostopic is not None:
            out["rostopic"] = rostopic
        if path is not None:
            with open(path, "w") as f:
                _yaml().safe_dump(out, f, sort_keys=False)
        return out


#: Kalibr imu.yaml key -> (field, component option) it sets
KALIBR_KEYS = {
    "accelerometer_noise_density": ("acc", "noise_density"),
    "accelerometer_random_walk": ("acc", "random_walk_density"),
    "gyroscope_noise_density": ("gyro", "noise_density"),
    "gyroscope_random_walk": ("gyro", "random_walk_density"),
}
#: Kalibr keys about other things than noise: read past
KALIBR_IGNORED = ("rostopic", "time_offset")


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise ImportError(
            "IMUOptions.from_kalibr/to_kalibr read and write YAML files with PyYAML, which is not "
            "installed. Fix: pip install pyyaml"
        ) from None
    return yaml


def _kalibr_table(source: Any) -> tuple[Mapping[str, Any], str]:
    """``(the mapping, how to name it in a message)`` of a Kalibr file given as a path or a mapping."""
    if isinstance(source, Mapping):
        return source, "the Kalibr mapping"
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            f"IMUOptions.from_kalibr(source={source!r}): expected the path of a Kalibr imu.yaml or its "
            "parsed mapping. Fix: pass e.g. from_kalibr('imu.yaml', body='torso')."
        )
    with open(source) as f:
        table = _yaml().safe_load(f)
    if not isinstance(table, Mapping):
        raise ValueError(
            f"IMUOptions.from_kalibr: {os.fspath(source)!r} holds {type(table).__name__}, not a mapping of "
            "keys to values. Fix: pass a Kalibr imu.yaml (accelerometer_noise_density: ..., ...)."
        )
    return table, repr(os.fspath(source))


def _kalibr_number(value: Any, key: str, where: str, *, positive: bool) -> float:
    """A Kalibr value as a float: a number, or a string of one (PyYAML reads ``2e-3``, without a dot, as a
    string: YAML 1.1 rules)."""
    x = as_real(value)
    if x is None and isinstance(value, str):
        try:
            x = float(value)
        except ValueError:
            x = None
    if x is None or not math.isfinite(x) or x < 0 or (positive and x == 0):
        need = "a number > 0" if positive else "a finite number >= 0"
        raise ValueError(
            f"IMUOptions.from_kalibr: {where} has {key}: {value!r}, expected {need}. Fix: correct {key}."
        )
    return x


def _as_components(value: Any) -> Any:
    """A component option as the IMU option functions see it (lists and arrays as tuples)."""
    return tuple(np.asarray(value, dtype=object).ravel()) if isinstance(value, (list, np.ndarray)) else value


def _same_value(value: Any, expected: float) -> bool:
    """Whether a keyword ``value`` (a number or per-component numbers) says ``expected`` (up to rounding)."""
    for v in _as_components(value) if isinstance(value, (tuple, list, np.ndarray)) else (value,):
        x = as_real(v)
        if x is None or not math.isclose(x, expected, rel_tol=1e-12, abs_tol=0.0):
            return False
    return True


def _rate_of(period: float) -> float:
    """``1 / period`` as the shortest decimal whose reciprocal is ``period`` (``1 / (1 / 49.0)`` is
    ``49.00000000000001``; this gives ``49.0``)."""
    rate = 1.0 / period
    for digits in range(1, 18):
        candidate = float(f"{rate:.{digits}g}")
        if 1.0 / candidate == period:
            return candidate
    return rate


class _NativeIMU:
    """Where an IMU's native sensors sit in ``sensordata``: accelerometer, gyro and, when the model's
    field is the IMU's, magnetometer; else the site whose frame the field is rotated into."""

    __slots__ = ("field", "index", "site")

    def __init__(self, index: slice | np.ndarray, site: int | None, field: np.ndarray) -> None:
        self.index, self.site, self.field = index, site, field

    def read(self, data: Any) -> np.ndarray:
        if self.site is None:
            return data.sensordata[self.index].astype(np.float32)
        out = np.empty(9, np.float32)
        out[:6] = data.sensordata[self.index]
        out[6:] = self.field @ data.site_xmat[self.site].reshape(3, 3)  # R_site^T field
        return out


def _native(model: Any, o: IMUOptions) -> _NativeIMU | None:
    """The IMU's native sensors in ``model`` (looked up once per model), or None."""

    def build() -> _NativeIMU | None:
        import mujoco

        from .native import imu_names, sensor_address

        site_name, acc, gyro, mag = imu_names(o)
        site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, site_name)
        if site < 0:
            return None
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, o.body)
        mount = np.zeros(4)
        mujoco.mju_mat2Quat(mount, euler_to_matrix(o.euler_offset).reshape(-1))
        if (  # the site must be the mount: on the body, at the offset, with the rotation
            int(model.site_bodyid[site]) != body
            or not np.allclose(model.site_pos[site], o.pos_offset, rtol=0, atol=1e-12)
            or not np.allclose(np.abs(model.site_quat[site] @ mount), 1.0, rtol=0, atol=1e-12)
        ):
            return None
        t, site_t = mujoco.mjtSensor, mujoco.mjtObj.mjOBJ_SITE
        adr = [
            sensor_address(model, n, k, site_t, site)
            for n, k in ((acc, t.mjSENS_ACCELEROMETER), (gyro, t.mjSENS_GYRO))
        ]
        if None in adr:
            return None
        m = sensor_address(model, mag, t.mjSENS_MAGNETOMETER, site_t, site)
        if m is not None and tuple(float(x) for x in model.opt.magnetic) == o.magnetic_field:
            adr.append(m)
        index = np.concatenate([np.arange(a, a + 3) for a in adr])
        if np.array_equal(index, np.arange(index[0], index[0] + len(index))):
            index = slice(int(index[0]), int(index[0]) + len(index))
        return _NativeIMU(
            index, None if len(adr) == 3 else site, np.asarray(o.magnetic_field, dtype=np.float64)
        )

    return cached(model, ("imu_native", o), build)


class IMUSensor(MujocoSensor):
    """Accelerometer + gyroscope + magnetometer; see the module docstring."""

    options_cls = IMUOptions
    return_type = IMUReading

    def _get_return_format(self) -> tuple:
        return ((3,), (3,), (3,))

    @classmethod
    def _measure(cls, model: Any, data: Any, o: IMUOptions) -> np.ndarray:
        native = _native(model, o)
        if native is None:
            return cls._measure_python(model, data, o)
        return native.read(data)

    @classmethod
    def _extract_state(cls, env: Any, options: list) -> dict[str, np.ndarray]:
        model, data = mj_handles(env)
        out = {}
        for o in options:
            native = _native(model, o)
            out[state_key(o)] = (
                native.read(data)
                if native is not None
                else np.asarray(cls._measure_python(model, data, o), dtype=np.float32).reshape(-1)
            )
        return out

    @classmethod
    def _gather_terms(cls, env: Any, options: list) -> list | None:
        """The readings as ``sensordata`` entries when every IMU is wholly native (see
        :mod:`~sensorgym.sensors.mujoco.gather`), else None."""
        model, _ = mj_handles(env)
        out = []
        for o in options:
            native = _native(model, o)
            if native is None or native.site is not None:  # measured, or its field rotated, in Python
                return None
            index = native.index
            adr = range(index.start, index.stop) if isinstance(index, slice) else index.tolist()
            out.append((state_key(o), [(("sensordata", int(a)), ()) for a in adr]))
        return out

    @classmethod
    def _measure_python(cls, model: Any, data: Any, o: IMUOptions) -> np.ndarray:
        """The reading computed in Python from ``MjData`` (the path of models without native sensors)."""
        import mujoco

        def build():
            body = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, o.body, "IMUOptions.body")
            r_mount = None if not any(o.euler_offset) else euler_to_matrix(o.euler_offset)
            # scratch for the MuJoCo calls, reused: this runs every step in every sub-env
            return body, r_mount, list(o.pos_offset), any(o.pos_offset), o.magnetic_field, np.empty((2, 6))

        body, r_mount, r, offset, (f0, f1, f2), scratch = cached(model, ("imu", o), build)
        vel, acc = scratch
        mujoco.mj_objectVelocity(model, data, _OBJ_XBODY, body, vel, 1)
        mujoco.mj_objectAcceleration(model, data, _OBJ_XBODY, body, acc, 1)
        # at the body frame's origin, in its axes (the frame xmat the magnetometer uses too); plain
        # floats: numpy costs a microsecond per call on 3-vectors
        w0, w1, w2, _, _, _, al0, al1, al2, a0, a1, a2 = scratch.ravel().tolist()
        if offset:  # the mount point's acceleration: a + alpha x r + w x (w x r)
            w, t1 = [w0, w1, w2], _cross([al0, al1, al2], r)
            t2 = _cross(w, _cross(w, r))
            a0, a1, a2 = a0 + t1[0] + t2[0], a1 + t1[1] + t2[1], a2 + t1[2] + t2[2]
        x = data.xmat[body].tolist()  # R_body^T field: column j of R dotted with the field
        out = np.array(
            [
                a0, a1, a2, w0, w1, w2,
                f0 * x[0] + f1 * x[3] + f2 * x[6],
                f0 * x[1] + f1 * x[4] + f2 * x[7],
                f0 * x[2] + f1 * x[5] + f2 * x[8],
            ]
        )  # fmt: skip
        if r_mount is not None:
            out = (out.reshape(3, 3) @ r_mount).reshape(-1)  # each row v -> R_mount^T v
        return out

    @classmethod
    def _coupling(cls, md: Any) -> torch.Tensor | None:
        """``(n_sensors, 3 fields, 3, 3)`` coupling matrices, or None when all are identity."""
        if "coupling" not in md.constants:
            mats = np.stack(
                [
                    np.stack(
                        [coupling_matrix(getattr(s.options, f"{f}_cross_axis_coupling"), f) for f in FIELDS]
                    )
                    for s in md.sensors
                ]
            )
            ident = np.allclose(mats, np.eye(3))
            md.constants["coupling"] = (
                None if ident else torch.tensor(mats, dtype=torch.float32, device=md.device)
            )
        return md.constants["coupling"]

    @classmethod
    def _apply_transform(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> None:
        c = cls._coupling(md)
        if c is None:
            return
        b, n = data.shape[0], len(md.sensors)
        if "coupling_scratch" not in md.constants:  # allocated once: no tensor allocation per step
            md.constants["coupling_scratch"] = (
                torch.empty(b, n, 3, 3, 3, dtype=data.dtype, device=data.device),
                torch.empty(b, n, 3, 3, dtype=data.dtype, device=data.device),
            )
        # tensors are kept, and md.array views them on the numpy executor (a view made once per tensor;
        # a copied manager makes its own)
        xp, x, c = md.xp, md.array(data), md.array(c)
        products, coupled = map(md.array, md.constants["coupling_scratch"])
        # coupled[e, s, f, i] = sum_j c[s, f, i, j] * x[e, s, f, j], summed in the order j = 0, 1, 2 on
        # both executors (same bits), into preallocated outputs (a broadcast matmul would allocate)
        xp.mul(x.reshape(b, n, 3, 1, 3), c, products)
        xp.add(products[..., 0], products[..., 1], coupled)
        xp.add(coupled, products[..., 2], coupled)
        xp.copy(x, coupled.reshape(b, -1))
