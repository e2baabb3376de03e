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
imperfection and error-model option can be given per field (``acc_noise``, ``gyro_noise_density``,
``mag_bandwidth``, ...), and :meth:`IMUOptions.from_kalibr` / :meth:`IMUOptions.to_kalibr` read and write
a Kalibr ``imu.yaml``.

The mount (``pos_offset``, ``euler_offset``, the couplings) may hold distributions, drawn per env at every
reset: the ground truth is measured at the nominal mount (:func:`nominal_value`), the measured branch at
each env's drawn one (:class:`_MountPlan`; docs/frames.md).

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
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch

from ...core.options import option_error
from ...core.randomization import Choice, Distribution, LogUniform, Normal, Uniform
from ...core.terms import component_options
from ...core.values import as_real
from .base import (
    _OBJ_XBODY,
    MujocoSensor,
    MujocoSensorOptions,
    body_angular_acceleration,
    cached,
    mj_handles,
    name_to_id,
    state_key,
)
from .geometry import euler_to_matrix
from .imu_replay import merge_replay
from .kalibr import KALIBR_NOT_NOISE, _yaml, kalibr_table

__all__ = [
    "IMUOptions",
    "IMUReading",
    "IMUSensor",
    "coupling_matrix",
    "coupling_parameters",
    "euler_to_matrix",
    "nominal_value",
]

FIELDS = ("acc", "gyro", "mag")
#: the component options the IMU also takes per field (``acc_noise``, ``gyro_noise_density``, ...): every
#: option of the error terms (:func:`sensorgym.core.terms.component_options`)
IMPERFECTIONS = component_options()
#: per-step option and its density twin: never both non-zero on one component
_EXCLUSIVE = (("noise", "noise_density"), ("random_walk", "random_walk_density"))


class IMUReading(NamedTuple):
    lin_acc: torch.Tensor
    ang_vel: torch.Tensor
    mag: torch.Tensor


def _cross(a: list[float], b: list[float]) -> list[float]:
    # plain floats: numpy costs microseconds per call on 3-vectors, and this runs every step in every env
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


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
    raise ValueError(
        f"{what}={value!r} is invalid: expected a scalar, 3 values (xy, xz, yz) or a 3x3 matrix. Fix: pass "
        "e.g. 0.01 (every pair), (0.01, 0.0, 0.02) or a 3x3 matrix."
    )


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


#: the options that place the IMU and its axes; each may hold distributions (resampled per env per reset)
MOUNT_FIELDS = (
    "pos_offset", "euler_offset", "acc_cross_axis_coupling", "gyro_cross_axis_coupling",
    "mag_cross_axis_coupling",
)  # fmt: skip


def nominal_value(value: float | Distribution) -> float:
    """The value a randomized mount option is centred on: the mean of the distribution as written, before
    any clipping. ``Uniform(low, high)``: ``(low + high) / 2``; ``Normal(mean, std, low, high)``: ``mean``
    (its clip bounds do not move it); ``Choice(values)``: the mean of ``values``; ``LogUniform(low,
    high)``: ``(high - low) / ln(high / low)`` (``low`` when ``low == high``). A number is itself. The
    ground truth of an IMU whose mount is randomized is measured at this nominal mount (docs/frames.md).

    Example:
        >>> import sensorgym as sg
        >>> nominal_value(sg.Uniform(-2.0, 4.0)), nominal_value(sg.Normal(1.0, 2.0, low=0.0, high=9.0))
        (1.0, 1.0)
        >>> nominal_value(sg.Choice([0.0, 0.0, 3.0])), nominal_value(0.25)
        (1.0, 0.25)
    """
    if isinstance(value, Uniform):
        return (value.low + value.high) / 2.0
    if isinstance(value, Normal):
        return value.mean
    if isinstance(value, Choice):
        return math.fsum(value.values) / len(value.values)
    if isinstance(value, LogUniform):
        if value.low == value.high:
            return value.low
        return (value.high - value.low) / math.log(value.high / value.low)
    if isinstance(value, Distribution):
        raise TypeError(
            f"{value!r}: a randomized IMU mount needs the centre of its distribution (the ground truth's "
            "mount), defined for Uniform, Normal, LogUniform and Choice. Fix: use one of those."
        )
    return float(value)


def _has_distribution(value: Any) -> bool:
    if isinstance(value, Distribution):
        return True
    if isinstance(value, (tuple, list, np.ndarray)):
        return any(_has_distribution(v) for v in value)
    return False


def _mount_number(name: str, whole: Any, v: Any) -> float | Distribution:
    """One component of a mount option: a finite number or a distribution with a centre."""
    if isinstance(v, Distribution):
        try:
            nominal_value(v)
        except TypeError as e:
            raise TypeError(f"IMUOptions.{name}={whole!r} is invalid: {e}") from None
        return v
    x = as_real(v)
    if x is None or not math.isfinite(x):
        raise option_error(
            "IMUOptions", name, whole, "expected finite numbers or distributions",
            f"pass e.g. {name}=(0.0, 0.0, 0.05) or {name}=(sg.Normal(0.0, 0.01), 0.0, 0.0)",
        )  # fmt: skip
    return x


def _mount_vector(name: str, value: Any) -> tuple:
    """``pos_offset``/``euler_offset``: 3 components, each a number or a distribution; one distribution
    stands for all three (drawn independently per component)."""
    if isinstance(value, Distribution):
        value = (value, value, value)
    if isinstance(value, (str, bytes)) or np.ndim(np.asarray(value, dtype=object)) != 1 or len(value) != 3:
        raise option_error(
            "IMUOptions", name, value, "expected 3 finite numbers or distributions (x, y, z)",
            f"pass {name}=(x, y, z), or one distribution for all three, e.g. {name}=sg.Uniform(-1.0, 1.0)",
        )  # fmt: skip
    return tuple(_mount_number(name, value, v) for v in value)


def _random_coupling(name: str, value: Any) -> Any:
    """A coupling holding distributions: one (each of xy, xz, yz drawn on its own), 3 values (xy, xz, yz)
    or a 3x3 matrix, each entry a number or a distribution."""
    if isinstance(value, Distribution):
        return (value, value, value)
    shape = np.shape(np.asarray(value, dtype=object))
    if shape == (3,):
        return tuple(_mount_number(name, value, v) for v in value)
    if shape == (3, 3):
        return tuple(tuple(_mount_number(name, value, v) for v in row) for row in value)
    raise option_error(
        "IMUOptions", name, value, "expected a number or distribution, 3 values (xy, xz, yz) or a 3x3 matrix",
        f"pass e.g. {name}=sg.Uniform(-0.01, 0.01) or {name}=(0.0, sg.Normal(0.0, 0.005), 0.0)",
    )  # fmt: skip


def coupling_parameters(value: Any) -> list[tuple[Any, tuple[tuple[int, int], ...]]]:
    """The free entries of a coupling option: ``[(value or distribution, ((row, col), ...)), ...]``
    covering all 9 matrix entries. A number or 3 values (xy, xz, yz) couple each pair symmetrically, so
    one value (one draw) fills both ``(i, j)`` and ``(j, i)``; the diagonal is 1. A 3x3 matrix has 9 free
    entries.

    Example:
        >>> [w for _, w in coupling_parameters(0.1)][3:]
        [((0, 1), (1, 0)), ((0, 2), (2, 0)), ((1, 2), (2, 1))]
    """
    if not isinstance(value, (tuple, list, np.ndarray)):
        value = (value, value, value)
    if np.shape(np.asarray(value, dtype=object)) == (3, 3):
        return [(value[i][j], ((i, j),)) for i in range(3) for j in range(3)]
    pairs = (((0, 1), (1, 0)), ((0, 2), (2, 0)), ((1, 2), (2, 1)))
    return [(1.0, ((i, i),)) for i in range(3)] + list(zip(value, pairs, strict=True))


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
        acc_replay, gyro_replay, mag_replay: a recording of a real sensor's errors for one field (the NPZ
            ``sensorgym fit --residuals`` writes; None: not replayed), with ``acc_replay_channels``, ... its
            3 channels (default: the file's, which must be 3); merged into ``replay`` and
            ``replay_channels`` (docs/error_model.md, "Replayed real errors").

    Example:
        >>> import sensorgym as sg
        >>> o = sg.IMUOptions(body="torso", gyro_noise_density=1.7e-4, acc_bandwidth=50.0)
        >>> o.noise_density[3:6], o.bandwidth[:3], o.bandwidth[6:]
        ((0.00017, 0.00017, 0.00017), (50.0, 50.0, 50.0), (0.0, 0.0, 0.0))
    """

    #: the native MuJoCo sensors this class reads (sensorgym.sensors.mujoco.native); not a field
    native_kind = "imu"

    body: str
    pos_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    euler_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    magnetic_field: tuple[float, float, float] = (0.0, 0.2, -0.45)
    acc_cross_axis_coupling: Any = 0.0
    gyro_cross_axis_coupling: Any = 0.0
    mag_cross_axis_coupling: Any = 0.0
    # the per-field twins of every component option of the error terms (``acc_noise``, ``gyro_noise``,
    # ``mag_noise``, ``acc_bias``, ...; None: not given), made from the terms' options: a new term's options
    # get theirs without an edit here
    for _kind in IMPERFECTIONS:
        for _field in FIELDS:
            __annotations__[f"{_field}_{_kind}"] = "Any"
            vars()[f"{_field}_{_kind}"] = None
    del _kind, _field
    # the per-field replayed recordings (imu_replay.py): a path and its 3 channels per field; None: not given
    acc_replay: Any = None
    gyro_replay: Any = None
    mag_replay: Any = None
    acc_replay_channels: Any = None
    gyro_replay_channels: Any = None
    mag_replay_channels: Any = None

    #: the mount may be randomized too (docs/frames.md); the error-model options come from the base class
    randomizable: ClassVar[tuple[str, ...]] = (*MujocoSensorOptions.randomizable, *MOUNT_FIELDS)
    #: imperfection levels besides the base class's (a trained policy may be scored under other values of
    #: these: ``sensorgym eval --config``, deployment conditions): the per-field error terms and recordings
    level_options: ClassVar[tuple[str, ...]] = tuple(
        f"{f}_{k}" for k in (*IMPERFECTIONS, "replay", "replay_channels") for f in FIELDS
    )

    def randomized_fields(self) -> tuple[str, ...]:
        """Names of the fields given as distributions (directly, per component or per matrix entry)."""
        return tuple(name for name in self.randomizable if _has_distribution(getattr(self, name)))

    @property
    def nominal_pos_offset(self) -> tuple[float, float, float]:
        """The mount position the ground truth keeps: ``pos_offset`` with each distribution replaced by its
        centre (:func:`nominal_value`)."""
        return tuple(nominal_value(v) for v in self.pos_offset)  # type: ignore[return-value]

    @property
    def nominal_euler_offset(self) -> tuple[float, float, float]:
        """The mount rotation the ground truth keeps (degrees; see :attr:`nominal_pos_offset`)."""
        return tuple(nominal_value(v) for v in self.euler_offset)  # type: ignore[return-value]

    def nominal_coupling(self, field: str) -> np.ndarray:
        """The 3x3 coupling matrix of ``field`` (``"acc"``, ``"gyro"`` or ``"mag"``) the ground truth keeps:
        each distribution replaced by its centre."""
        value = getattr(self, f"{field}_cross_axis_coupling")
        if not _has_distribution(value):
            return coupling_matrix(value, f"IMUOptions.{field}_cross_axis_coupling")
        out = np.zeros((3, 3))
        for v, where in coupling_parameters(value):
            for i, j in where:
                out[i, j] = nominal_value(v)
        return out

    def _validate(self) -> None:
        if not isinstance(self.body, str) or not self.body:
            raise TypeError(
                f"IMUOptions.body={self.body!r} is invalid: expected a body name. Fix: pass body='torso'."
            )
        for name in ("pos_offset", "euler_offset"):
            object.__setattr__(self, name, _mount_vector(name, getattr(self, name)))
        v = self.magnetic_field
        if np.shape(v) != (3,) or not np.all(np.isfinite(np.asarray(v, dtype=float))):
            raise option_error(
                "IMUOptions",
                "magnetic_field",
                v,
                "expected 3 finite numbers",
                "pass magnetic_field=(x, y, z)",
            )
        object.__setattr__(self, "magnetic_field", tuple(float(x) for x in v))
        for f in FIELDS:
            name = f"{f}_cross_axis_coupling"
            value = getattr(self, name)
            if _has_distribution(value):
                object.__setattr__(self, name, _random_coupling(name, value))
            else:  # fixed: a number, or the 3x3 matrix of 3 values or of a matrix
                try:
                    finite = bool(np.all(np.isfinite(np.asarray(value, dtype=float))))
                except (TypeError, ValueError):
                    finite = False
                if not finite:
                    raise option_error(
                        "IMUOptions", name, value, "expected finite numbers or distributions",
                        f"pass e.g. {name}=0.01 (every pair), (xy, xz, yz) or a 3x3 matrix",
                    )  # fmt: skip
                matrix = coupling_matrix(value, f"IMUOptions.{name}")
                value = np.asarray(value, dtype=float)
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
        merge_replay(self, written)
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
                what = f"it can produce {lo:g}" if isinstance(v, Distribution) else f"{lo:g} is not above -1"
                why = f"{what}; a gain 1 + k must stay positive, so k > -1"
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
                if all(getattr(self, f"{g}_{x}") is None for g in FIELDS for x in (a, b)):
                    continue  # never per field: the base class checks (and names) the 9-component options
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
    def from_kalibr(
        cls, source: str | os.PathLike | Mapping[str, Any], *, imu: str | None = None, **kwargs: Any
    ) -> IMUOptions:
        """Options of the IMU described by a Kalibr ``imu.yaml`` (a path, or the already parsed mapping).

        ``accelerometer_noise_density``/``gyroscope_noise_density`` become ``acc_``/``gyro_noise_density``,
        ``accelerometer_random_walk``/``gyroscope_random_walk`` become ``acc_``/``gyro_random_walk_density``
        and ``update_rate`` becomes ``update_period = 1 / update_rate`` (Kalibr's convention: the
        per-sample std is ``noise_density * sqrt(update_rate)``, docs/error_model.md). ``kwargs`` set the
        rest (``body`` is required: the file does not say where the IMU is). The keys Kalibr uses for
        other things than noise are ignored (``rostopic``, ``time_offset``; in the ``imu-*.yaml``
        ``kalibr_calibrate_imu_camera`` writes, ``T_i_b``, ``model`` and its ``accelerometers`` /
        ``gyroscopes`` matrices; OpenVINS's ``Tw``, ``R_IMUtoGYRO``, ``Ta``, ``R_IMUtoACC``, ``Tg``); any
        other key, a missing one, a value that is not a number ``>= 0`` (``update_rate > 0``), or a keyword
        that contradicts the file is a ``ValueError`` naming it. A file of IMU blocks (``imu0:``,
        ``imu1:``, ...: Kalibr's results, OpenVINS's ``kalibr_imu_chain.yaml``) gives the block ``imu``
        names, by default ``imu0`` (Kalibr's reference IMU); OpenCV's ``%YAML:1.0`` header is read past
        (:mod:`sensorgym.sensors.mujoco.kalibr`). Reading a path needs PyYAML (``pip install pyyaml``).

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
        table, where = kalibr_table(source, imu)
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
        for per_step, kind in _EXCLUSIVE:  # a per-step spelling of a term the file gives as a density
            for name in (per_step, *(f"{f}_{per_step}" for f in FIELDS[:2])):
                if name not in kwargs:
                    continue
                value = _as_components(kwargs[name])
                if name == per_step:  # 9 components: the file describes acc and gyro
                    parts = {f: _field_part(value, i) for i, f in enumerate(FIELDS[:2])}
                else:
                    parts = {name.split("_")[0]: value if isinstance(value, tuple) else (value,)}
                given = [f for f, part in parts.items() if any(map(_can_be_nonzero, part))]
                if not given:
                    continue
                key = source_of[f"{given[0]}_{kind}"]
                raise ValueError(
                    f"IMUOptions.from_kalibr: the keyword {name}={kwargs[name]!r} (per step) contradicts "
                    f"{where}'s {key}: {table[key]!r} (per sqrt(Hz)); they are two units of one error "
                    f"term. Fix: drop {name} (the file gives it), or set only mag_{per_step} (the "
                    "magnetometer, which Kalibr does not describe)."
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
KALIBR_IGNORED = KALIBR_NOT_NOISE


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
        mujoco.mju_mat2Quat(mount, euler_to_matrix(o.nominal_euler_offset).reshape(-1))
        if (  # the site must be the mount: on the body, at the offset, with the rotation
            int(model.site_bodyid[site]) != body
            or not np.allclose(model.site_pos[site], o.nominal_pos_offset, rtol=0, atol=1e-12)
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


def alpha_key(o: IMUOptions) -> str:
    """State key of the body's angular acceleration (rad/s^2, in the IMU's nominal frame) that an IMU with a
    randomized ``pos_offset`` needs beside its reading (measured inside the sub-env, like the reading)."""
    return state_key(o) + ".alpha"


def _rotations(euler_deg: torch.Tensor) -> torch.Tensor:
    """``(..., 3, 3)`` rotation matrices of intrinsic x-y-z Euler angles ``(..., 3)`` in degrees: batched
    :func:`euler_to_matrix`, ``Rx @ Ry @ Rz`` written out."""
    c, s = torch.cos(euler_deg * (math.pi / 180.0)), torch.sin(euler_deg * (math.pi / 180.0))
    cx, cy, cz = c.unbind(-1)
    sx, sy, sz = s.unbind(-1)
    rows = (
        cy * cz, -cy * sz, sy,
        sx * sy * cz + cx * sz, cx * cz - sx * sy * sz, -sx * cy,
        sx * sz - cx * sy * cz, cx * sy * sz + sx * cz, cx * cy,
    )  # fmt: skip
    return torch.stack(rows, -1).reshape(*euler_deg.shape[:-1], 3, 3)


class _MountPlan:
    """The per-env mount of one class's IMUs whose ``pos_offset``, ``euler_offset`` or cross-axis coupling
    holds distributions (built once at build; None for a class without any, which then runs exactly the
    fixed-mount code).

    At every reset of an env (:meth:`resample`) each distribution is drawn from the manager's random
    source, and the env's mount is derived from the draws into ``md.extra`` (saved by ``state_dict``,
    restored for the envs a reset does not touch). With ``R_nom``/``p_nom`` the nominal mount (rotation and
    position in the body frame, where the ground truth is measured) and ``R``/``p`` the env's drawn one:

    * ``mount_pos`` ``(B, n, 3)`` m and ``mount_euler`` ``(B, n, 3)`` degrees: the drawn mount of each IMU
      (a fixed component holds its value);
    * ``mount_matrix`` ``(B, n, 3, 3)``: ``M = R^T R_nom``, which takes a vector from the nominal sensor
      frame to the drawn one;
    * ``mount_arm`` ``(B, n, 3)``: ``d = R_nom^T (p - p_nom)``, the lever arm in the nominal frame;
      ``mount_lever`` ``(B, n, 3, 3)``: ``M [d]x^T`` (so that ``mount_lever @ alpha = M (alpha x d)``) and
      ``mount_arm_rotated`` ``(B, n, 3)``: ``M d`` (only when some position is randomized);
    * ``mount_coupling`` ``(B, n, 3 fields, 3, 3)`` float32: the coupling matrices of the measured branch
      (a fixed coupling holds its matrix).

    Every step (:meth:`apply`, on the measured timeline slot, before the coupling) the nominal reading
    ``(a, w, m)`` and the body's angular acceleration ``alpha`` (nominal frame) become the reading at the
    drawn mount: ``w' = M w``, ``m' = M m``, ``a' = M (a + alpha x d + w x (w x d)) = M a + mount_lever
    alpha + w' (w . d) - (M d) |w|^2``, in float64 with one rounding to float32, batched over envs and
    sensors with the executor's ops (the same bits on both), into buffers allocated here. The reset-time
    derivation runs in torch on either executor, so both hold the same numbers.
    """

    def __init__(self, md: Any) -> None:
        b, n, device = md.num_envs, len(md.sensors), md.device
        f64: dict[str, Any] = {"dtype": torch.float64, "device": device}
        opts: list[IMUOptions] = [s.options for s in md.sensors]
        self.b, self.n = b, n
        self.moved = [
            j
            for j, o in enumerate(opts)
            if _has_distribution(o.pos_offset) or _has_distribution(o.euler_offset)
        ]
        self.shifted = [j for j, o in enumerate(opts) if _has_distribution(o.pos_offset)]
        self.coupled = [
            j
            for j, o in enumerate(opts)
            if any(_has_distribution(getattr(o, f"{f}_cross_axis_coupling")) for f in FIELDS)
        ]
        self.alpha_keys = [(j, alpha_key(opts[j])) for j in self.shifted]
        # one column of draws per distribution, in sensor order: pos x y z, euler x y z, acc/gyro/mag coupling
        dists: list[Distribution] = []
        self.pos_targets: list[tuple[int, int, int]] = []  # (draw column, sensor, component)
        self.euler_targets: list[tuple[int, int, int]] = []
        self.coupling_targets: list[tuple[int, list[tuple[int, int, int, int]]]] = []  # column, entries
        for j, o in enumerate(opts):
            for targets, value in ((self.pos_targets, o.pos_offset), (self.euler_targets, o.euler_offset)):
                for c, v in enumerate(value):
                    if isinstance(v, Distribution):
                        targets.append((len(dists), j, c))
                        dists.append(v)
            for fi, f in enumerate(FIELDS):
                for v, where in coupling_parameters(getattr(o, f"{f}_cross_axis_coupling")):
                    if isinstance(v, Distribution):
                        self.coupling_targets.append((len(dists), [(j, fi, r, c) for r, c in where]))
                        dists.append(v)
        self.draws = torch.zeros(b, max(len(dists), 1), **f64)
        self.columns = [(self.draws[:, k : k + 1], dist) for k, dist in enumerate(dists)]
        nominal_euler = [o.nominal_euler_offset for o in opts]
        self.nominal_pos = torch.tensor([o.nominal_pos_offset for o in opts], **f64)
        self.nominal_euler = torch.tensor(nominal_euler, **f64)
        self.nominal_rotation = torch.tensor(np.stack([euler_to_matrix(e) for e in nominal_euler]), **f64)
        #: the per-step buffers of :meth:`apply` (xp ops write into them: nothing is allocated per step)
        self.scratch = _MountScratch()
        if self.moved:  # until the first reset: the nominal mount
            md.extra["mount_pos"] = self.nominal_pos.expand(b, n, 3).clone()
            md.extra["mount_euler"] = self.nominal_euler.expand(b, n, 3).clone()
            md.extra["mount_matrix"] = torch.eye(3, **f64).expand(b, n, 3, 3).clone()
            self.scratch.rotate(b, n, device)
            self.keep = torch.zeros(1, n, 1, 1, dtype=torch.bool, device=device)
            self.keep[0, self.moved] = True
        if self.shifted:
            md.extra["mount_arm"] = torch.zeros(b, n, 3, **f64)
            md.extra["mount_lever"] = torch.zeros(b, n, 3, 3, **f64)
            md.extra["mount_arm_rotated"] = torch.zeros(b, n, 3, **f64)
            self.scratch.lever(b, n, device)
        self.keep_uncoupled = None  # (1, n, 1, 1): the IMUs whose coupling is drawn, when the rest is none
        if self.coupled:
            base = np.stack([np.stack([o.nominal_coupling(f) for f in FIELDS]) for o in opts])
            self.coupling_base = torch.tensor(base, **f64)
            md.extra["mount_coupling"] = self.coupling_base.to(torch.float32).expand(b, n, 3, 3, 3).clone()
            if len(self.coupled) < n and np.allclose(base, np.eye(3)):
                self.keep_uncoupled = torch.zeros(1, n, 1, 1, dtype=torch.bool, device=device)
                self.keep_uncoupled[0, self.coupled] = True

    # -- at a reset --------------------------------------------------------------------------------------
    def resample(self, md: Any, mask: torch.Tensor) -> None:
        """Draw the mount of the envs in ``mask`` ``(B,)`` bool and derive its tables (see the class)."""
        for out, dist in self.columns:  # the manager's random source: same seed, same draws
            md.random.sample_(dist, out, mask, 0)
        b, n = self.b, self.n
        if self.moved:
            pos = self.nominal_pos.expand(b, n, 3).clone()
            euler = self.nominal_euler.expand(b, n, 3).clone()
            for targets, values in ((self.pos_targets, pos), (self.euler_targets, euler)):
                for k, j, c in targets:
                    values[:, j, c] = self.draws[:, k]
            matrix = _rotations(euler).transpose(-1, -2) @ self.nominal_rotation  # R^T R_nom
            rows = mask.view(b, 1, 1)
            _select(md.extra["mount_pos"], rows, pos)
            _select(md.extra["mount_euler"], rows, euler)
            _select(md.extra["mount_matrix"], rows[..., None], matrix)
            if self.shifted:
                arm = ((pos - self.nominal_pos)[..., None, :] @ self.nominal_rotation)[
                    ..., 0, :
                ]  # R_nom^T dr
                skew_t = torch.zeros(b, n, 3, 3, dtype=arm.dtype, device=arm.device)  # [d]x^T: a x d
                d0, d1, d2 = arm.unbind(-1)
                skew_t[..., 0, 1], skew_t[..., 0, 2] = d2, -d1
                skew_t[..., 1, 0], skew_t[..., 1, 2] = -d2, d0
                skew_t[..., 2, 0], skew_t[..., 2, 1] = d1, -d0
                _select(md.extra["mount_arm"], rows, arm)
                _select(md.extra["mount_lever"], rows[..., None], matrix @ skew_t)
                _select(md.extra["mount_arm_rotated"], rows, (matrix @ arm[..., None])[..., 0])
        if self.coupled:
            mats = self.coupling_base.expand(b, n, 3, 3, 3).clone()
            for k, entries in self.coupling_targets:
                for j, fi, r, c in entries:
                    mats[:, j, fi, r, c] = self.draws[:, k]
            _select(md.extra["mount_coupling"], mask.view(b, 1, 1, 1, 1), mats.to(torch.float32))

    # -- every step --------------------------------------------------------------------------------------
    def apply(self, state: Any, md: Any, measured: torch.Tensor) -> None:
        """The nominal reading in ``measured`` ``(B, 9 n)`` becomes the reading at each env's mount."""
        xp, a, b, n, sc = md.xp, md.array, self.b, self.n, self.scratch
        x = a(measured).reshape(b, n, 3, 3)
        nominal, products, y = a(sc.x), a(sc.products), a(sc.y)
        xp.copy(nominal, x)
        # y[e, s, f, i] = sum_j M[e, s, i, j] nominal[e, s, f, j], summed j = 0, 1, 2 on both executors
        xp.mul(nominal.reshape(b, n, 3, 1, 3), a(md.extra["mount_matrix"]).reshape(b, n, 1, 3, 3), products)
        xp.add(products[..., 0], products[..., 1], y)
        xp.add(y, products[..., 2], y)
        if self.shifted:
            alpha, lever, term, prod3, dot = map(a, (sc.alpha, sc.lever_products, sc.term, sc.prod3, sc.dot))
            self._copy_alpha(state, md)
            acc, w = y[:, :, 0, :], nominal[:, :, 1, :]
            xp.mul(alpha.reshape(b, n, 1, 3), a(md.extra["mount_lever"]), lever)  # M (alpha x d)
            xp.add(lever[..., 0], lever[..., 1], term)
            xp.add(term, lever[..., 2], term)
            xp.add(acc, term, acc)
            xp.mul(w, a(md.extra["mount_arm"]), prod3)  # w . d
            xp.add(prod3[..., 0:1], prod3[..., 1:2], dot)
            xp.add(dot, prod3[..., 2:3], dot)
            xp.mul(y[:, :, 1, :], dot, term)  # M w (w . d)
            xp.add(acc, term, acc)
            xp.mul(w, w, prod3)  # |w|^2
            xp.add(prod3[..., 0:1], prod3[..., 1:2], dot)
            xp.add(dot, prod3[..., 2:3], dot)
            xp.mul(a(md.extra["mount_arm_rotated"]), dot, term)  # - M d |w|^2
            xp.mul(term, -1.0, term)
            xp.add(acc, term, acc)
        if len(self.moved) == n:
            xp.copy(x, y)  # the one rounding to float32
        else:  # IMUs with a fixed mount keep their reading bit for bit
            out32 = a(sc.out32)
            xp.copy(out32, y)
            xp.select_into(x, a(self.keep), out32)

    def _copy_alpha(self, state: Any, md: Any) -> None:
        alpha = self.scratch.alpha
        view = md.numpy_view(alpha)
        for j, key in self.alpha_keys:
            src = state[key]
            if torch.is_tensor(src):
                alpha[:, j].copy_(src)
            elif view is not None:  # numpy measurements into a CPU buffer: one numpy copy
                np.copyto(view[:, j], src, casting="unsafe")
            else:
                alpha[:, j].copy_(torch.from_numpy(np.asarray(src)))


class _MountScratch:
    """The buffers :meth:`_MountPlan.apply` computes in, allocated once at build: the rotation's (every
    randomized mount) and the lever arm's (a randomized position; ``alpha`` is the body's angular
    acceleration, 0 for the IMUs whose position is fixed). None where the mount does not need them."""

    def __init__(self) -> None:
        self.x = self.products = self.y = self.out32 = None
        self.alpha = self.lever_products = self.term = self.prod3 = self.dot = None

    def rotate(self, b: int, n: int, device: torch.device) -> None:
        f64: dict[str, Any] = {"dtype": torch.float64, "device": device}
        self.x = torch.zeros(b, n, 3, 3, **f64)
        self.products = torch.zeros(b, n, 3, 3, 3, **f64)
        self.y = torch.zeros(b, n, 3, 3, **f64)
        self.out32 = torch.zeros(b, n, 3, 3, dtype=torch.float32, device=device)

    def lever(self, b: int, n: int, device: torch.device) -> None:
        f64: dict[str, Any] = {"dtype": torch.float64, "device": device}
        self.alpha = torch.zeros(b, n, 3, **f64)
        self.lever_products = torch.zeros(b, n, 3, 3, **f64)
        self.term = torch.zeros(b, n, 3, **f64)
        self.prod3 = torch.zeros(b, n, 3, **f64)
        self.dot = torch.zeros(b, n, 1, **f64)


def _select(dst: torch.Tensor, rows: torch.Tensor, src: torch.Tensor) -> None:
    """``dst = where(rows, src, dst)`` in place, without a device sync (a reset inside a CUDA graph)."""
    torch.where(rows, src, dst, out=dst)


class IMUSensor(MujocoSensor):
    """Accelerometer + gyroscope + magnetometer; see the module docstring.

    An IMU whose mount (``pos_offset``, ``euler_offset``, a cross-axis coupling) holds distributions
    measures its ground truth at the nominal mount and its measured branch at the mount drawn for each env
    at its last reset; :meth:`read_mount` gives those draws (docs/frames.md).

    Example:
        >>> import torch, sensorgym as sg
        >>> mgr = sg.SensorManager(num_envs=2, dt=0.02, seed=0)
        >>> imu = mgr.add_sensor(sg.IMUOptions(body="torso", euler_offset=(sg.Uniform(-5.0, 5.0), 0.0, 0.0)))
        >>> reading = torch.tensor([[0.0, 0.0, 9.81, 0.0, 0.0, 0.0, 0.0, 0.2, -0.45]] * 2)
        >>> mgr.reset({imu.state_key: reading})
        >>> roll = imu.read_mount()["euler_offset"][:, 0]
        >>> bool(((roll >= -5.0) & (roll < 5.0)).all()), imu.read_ground_truth().lin_acc[:, 2].tolist()
        (True, [9.8100004196167, 9.8100004196167])
        >>> expect = 9.81 * torch.cos(torch.deg2rad(roll))  # gravity seen by a sensor rolled about x
        >>> bool(torch.allclose(imu.read().lin_acc[:, 2], expect))
        True
    """

    options_cls = IMUOptions
    return_type = IMUReading

    def _get_return_format(self) -> tuple:
        return ((3,), (3,), (3,))

    def read_mount(self) -> dict[str, torch.Tensor]:
        """The mount drawn for each env at its last reset, for the options of this IMU given as
        distributions: ``{"pos_offset": (B, 3) m, "euler_offset": (B, 3) degrees,
        "acc_cross_axis_coupling": (B, 3, 3), ...}``, new float32 tensors (e.g. for a critic). The values
        live in the class metadata's ``md.extra`` (``mount_pos``, ``mount_euler``, ``mount_coupling``)."""
        if self._storage is None:
            raise RuntimeError("read_mount() before the manager was built. Fix: call mgr.reset(state) first.")
        extra, j, o = self._storage.md.extra, self.index, self.options
        out = {}
        for name, key in (("pos_offset", "mount_pos"), ("euler_offset", "mount_euler")):
            if _has_distribution(getattr(o, name)):
                out[name] = extra[key][:, j].to(torch.float32)
        for fi, f in enumerate(FIELDS):
            if _has_distribution(getattr(o, f"{f}_cross_axis_coupling")):
                out[f"{f}_cross_axis_coupling"] = extra["mount_coupling"][:, j, fi].clone()
        return out

    def _extra_randomization(self) -> dict[str, tuple[torch.Tensor, list[int]]]:
        # the drawn components of the mount join read_randomization() and the critic's randomization
        # columns: a component given as a number is the same in every env (a constant column)
        o, out = self.options, {}
        for name, value in self.read_mount().items():
            if name in ("pos_offset", "euler_offset"):
                comps = [c for c, v in enumerate(getattr(o, name)) if isinstance(v, Distribution)]
            else:  # a coupling matrix: the first entry each drawn value fills, row-major
                params = coupling_parameters(getattr(o, name))
                comps = [r * 3 + c for v, ((r, c), *_) in params if isinstance(v, Distribution)]
            out[name] = (value.reshape(value.shape[0], -1)[:, comps], comps)
        return out

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
            # the lever arm of a randomized position needs alpha (decided once per options: every step of
            # every sub-env runs this)
            if cached(model, ("imu_moved", o), lambda o=o: _has_distribution(o.pos_offset)):
                out[alpha_key(o)] = cls._angular_acceleration(model, data, o)
        return out

    @classmethod
    def _angular_acceleration(cls, model: Any, data: Any, o: IMUOptions) -> np.ndarray:
        """The body's angular acceleration in the IMU's nominal frame, float32 ``(3,)``."""
        import mujoco

        def build():
            body = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, o.body, "IMUOptions.body")
            euler = o.nominal_euler_offset
            return body, (euler_to_matrix(euler) if any(euler) else None), np.empty(6)

        body, r_mount, scratch = cached(model, ("imu_alpha", o), build)
        alpha = body_angular_acceleration(model, data, body, scratch)
        if r_mount is not None:
            alpha = alpha @ r_mount  # R_mount^T alpha
        return alpha.astype(np.float32)

    @classmethod
    def _gather_terms(cls, env: Any, options: list) -> list | None:
        """The readings as ``sensordata`` entries when every IMU is wholly native (see
        :mod:`~sensorgym.sensors.mujoco.gather`), else None (also when an IMU's position is randomized:
        its angular acceleration is measured in Python)."""
        model, _ = mj_handles(env)
        out = []
        for o in options:
            if _has_distribution(o.pos_offset):
                return None
            native = _native(model, o)
            if native is None or native.site is not None:  # measured, or its field rotated, in Python
                return None
            index = native.index
            adr = range(index.start, index.stop) if isinstance(index, slice) else index.tolist()
            out.append((state_key(o), [(("sensordata", int(a)), ()) for a in adr]))
        return out

    @classmethod
    def _measure_python(cls, model: Any, data: Any, o: IMUOptions) -> np.ndarray:
        """The reading computed in Python from ``MjData`` (the path of models without native sensors), at
        the nominal mount."""
        import mujoco

        def build():
            body = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, o.body, "IMUOptions.body")
            pos, euler = o.nominal_pos_offset, o.nominal_euler_offset
            r_mount = None if not any(euler) else euler_to_matrix(euler)
            # scratch for the MuJoCo calls, reused: this runs every step in every sub-env
            return body, r_mount, list(pos), any(pos), o.magnetic_field, np.empty((2, 6))

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

    # -- manager side ------------------------------------------------------------------------------------
    @classmethod
    def _init_metadata(cls, md: Any) -> None:
        randomized = any(
            _has_distribution(getattr(s.options, name)) for s in md.sensors for name in MOUNT_FIELDS
        )
        md.constants["imu_mount"] = _MountPlan(md) if randomized else None

    @classmethod
    def _reset_envs(cls, md: Any, envs_mask: torch.Tensor) -> None:
        mount = md.constants.get("imu_mount")
        if mount is not None:
            mount.resample(md, envs_mask)

    @classmethod
    def _check_state(cls, state: Any, md: Any) -> None:
        super()._check_state(state, md)
        mount = md.constants.get("imu_mount")
        if mount is None or not mount.alpha_keys:
            return
        shape = (md.num_envs, 3)
        for j, key in mount.alpha_keys:
            found = state.get(key)
            if found is None or tuple(np.shape(found)) != shape:
                got = "nothing" if found is None else f"shape {tuple(np.shape(found))}"
                raise ValueError(
                    f"sensor {md.sensors[j].name!r} (IMUSensor): its pos_offset is randomized, which needs "
                    f"the body's angular acceleration {key!r} of shape {shape} in the state (measured "
                    f"inside each sub-env); got {got}. Fix: build the env with make_sensor_vec(...) or add "
                    "SimStateExtractor(env, sensors) with these options to every sub-env."
                )

    @classmethod
    def _update_current_timestep_data(
        cls, state: Any, md: Any, gt_timeline: Any, measured_timeline: Any
    ) -> None:
        mount = md.constants.get("imu_mount")
        if mount is None or not mount.moved:  # a fixed mount: the standard capture, unchanged
            super()._update_current_timestep_data(state, md, gt_timeline, measured_timeline)
            return
        gt, measured = gt_timeline.at(0), measured_timeline.at(0)
        cls._update_raw_data(state, md, gt)  # the nominal mount: ground truth
        md.xp.copy(md.array(measured), md.array(gt))  # one definition, either executor
        mount.apply(state, md, measured)  # each env's drawn mount: the measured branch
        cls._apply_physics_imperfections(md, measured, measured_timeline)

    @classmethod
    def _coupling(cls, md: Any) -> torch.Tensor | None:
        """``(n_sensors, 3 fields, 3, 3)`` nominal coupling matrices, or None when all are identity."""
        if "coupling" not in md.constants:
            mats = np.stack([np.stack([s.options.nominal_coupling(f) for f in FIELDS]) for s in md.sensors])
            ident = np.allclose(mats, np.eye(3))
            md.constants["coupling"] = (
                None if ident else torch.tensor(mats, dtype=torch.float32, device=md.device)
            )
        return md.constants["coupling"]

    @classmethod
    def _apply_transform(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> None:
        mount = md.constants.get("imu_mount")
        keep = None
        if is_measured and mount is not None and mount.coupled:
            c = md.extra["mount_coupling"]  # (B, n, 3, 3, 3): each env's drawn coupling
            keep = mount.keep_uncoupled
        else:
            c = cls._coupling(md)  # the nominal coupling (the ground truth's, and every fixed one)
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
        # coupled[e, s, f, i] = sum_j c[(e,) s, f, i, j] * x[e, s, f, j], summed in the order j = 0, 1, 2 on
        # both executors (same bits), into preallocated outputs (a broadcast matmul would allocate)
        xp.mul(x.reshape(b, n, 3, 1, 3), c, products)
        xp.add(products[..., 0], products[..., 1], coupled)
        xp.add(coupled, products[..., 2], coupled)
        if keep is not None:
            # the class's nominal couplings are all identity: a fixed IMU is not coupled at all (as without
            # the randomized one), so only the IMUs with a drawn coupling take the product
            xp.select_into(x.reshape(b, n, 3, 3), md.array(keep), coupled)
        else:
            xp.copy(x, coupled.reshape(b, -1))
