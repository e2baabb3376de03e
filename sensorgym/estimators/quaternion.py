"""Quaternion helpers for the estimators' inputs and outputs, on numpy arrays or torch tensors alike.

Conventions (the estimators' own): a quaternion is ``[w, x, y, z]`` along the last axis, unit, and
rotates sensor-frame vectors into the earth frame (``v_earth = q ⊗ v_sensor ⊗ q*``); the earth frame has
z up. These functions allocate their results: they serve initialization, offline outputs and tests, not
the per-step update (which works in place, see :mod:`sensorgym.estimators.base`).

Example:
    >>> import numpy as np
    >>> from sensorgym.estimators.quaternion import quat_from_acc, projected_gravity, roll_pitch
    >>> q = quat_from_acc(np.array([0.0, 9.81, 0.0]))  # lying on its left side: +y reads up
    >>> (np.round(projected_gravity(q), 12) + 0.0).tolist()
    [0.0, -1.0, 0.0]
    >>> (np.round(np.degrees(roll_pitch(q)), 9) + 0.0).tolist()
    [90.0, 0.0]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = [
    "attitude_errors",
    "projected_gravity",
    "quat_conjugate",
    "quat_from_acc",
    "quat_from_acc_mag",
    "quat_multiply",
    "roll_pitch",
    "rotate",
    "rotate_inverse",
]


def _stack(parts: list[Any]) -> Any:
    if isinstance(parts[0], torch.Tensor):
        return torch.stack(parts, dim=-1)
    return np.stack(parts, axis=-1)


def _lib(x: Any) -> Any:
    return torch if isinstance(x, torch.Tensor) else np


def _as_float(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x if x.is_floating_point() else x.to(torch.get_default_dtype())
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def quat_multiply(p: Any, q: Any) -> Any:
    """The Hamilton product ``p ⊗ q`` (``(..., 4)``, broadcasting)."""
    p, q = _as_float(p), _as_float(q)
    p0, p1, p2, p3 = (p[..., i] for i in range(4))
    q0, q1, q2, q3 = (q[..., i] for i in range(4))
    return _stack(
        [
            p0 * q0 - p1 * q1 - p2 * q2 - p3 * q3,
            p0 * q1 + p1 * q0 + p2 * q3 - p3 * q2,
            p0 * q2 - p1 * q3 + p2 * q0 + p3 * q1,
            p0 * q3 + p1 * q2 - p2 * q1 + p3 * q0,
        ]
    )


def quat_conjugate(q: Any) -> Any:
    """``q*``: the inverse rotation of a unit quaternion."""
    q = _as_float(q)
    return _stack([q[..., 0], -q[..., 1], -q[..., 2], -q[..., 3]])


def _cross(a: Any, b: Any) -> Any:
    return _stack(
        [
            a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
            a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
            a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0],
        ]
    )


def rotate(q: Any, v: Any) -> Any:
    """``q ⊗ v ⊗ q*`` for a unit ``q``: a sensor-frame vector ``v`` ``(..., 3)`` in the earth frame."""
    q, v = _as_float(q), _as_float(v)
    qv, w = q[..., 1:4], q[..., 0:1]
    c = _cross(qv, v)
    return v + 2.0 * (w * c + _cross(qv, c))


def rotate_inverse(q: Any, v: Any) -> Any:
    """``q* ⊗ v ⊗ q``: an earth-frame vector ``v`` in the sensor frame."""
    return rotate(quat_conjugate(q), v)


def projected_gravity(q: Any) -> Any:
    """Gravity's direction in the sensor frame, ``(..., 3)``: the earth's down axis ``[0, 0, -1]`` rotated
    into the sensor frame (``[0, 0, -1]`` when level; a resting accelerometer reads ``-g`` times it)."""
    q = _as_float(q)
    q0, q1, q2, q3 = (q[..., i] for i in range(4))
    return _stack(
        [
            2.0 * (q0 * q2 - q1 * q3),
            -2.0 * (q2 * q3 + q0 * q1),
            -(q0 * q0 - q1 * q1 - q2 * q2 + q3 * q3),
        ]
    )


def roll_pitch(q: Any) -> Any:
    """``[roll, pitch]`` in radians, ``(..., 2)``, of the z-y-x (yaw, pitch, roll) Euler angles of ``q``:
    roll about the sensor's x axis in ``(-pi, pi]``, pitch about y in ``[-pi/2, pi/2]``."""
    q = _as_float(q)
    lib = _lib(q)
    q0, q1, q2, q3 = (q[..., i] for i in range(4))
    roll = lib.arctan2(2.0 * (q0 * q1 + q2 * q3), 1.0 - 2.0 * (q1 * q1 + q2 * q2))
    s = 2.0 * (q0 * q2 - q1 * q3)
    s = lib.clip(s, -1.0, 1.0)  # rounding can leave |s| a hair above 1 at +-90 degrees of pitch
    return _stack([roll, lib.arcsin(s)])


def _normalized(v: Any) -> tuple[Any, Any]:
    lib = _lib(v)
    n = lib.sqrt((v * v).sum(-1))[..., None]
    safe = lib.where(n > 0, n, lib.ones_like(n))
    return v / safe, n[..., 0]


def quat_from_acc(acc: Any) -> Any:
    """The quaternion whose earth z axis is the measured specific force ``acc`` ``(..., 3)``, by the
    shortest rotation (no rotation about the vertical: the heading is whatever that leaves). A zero
    ``acc`` gives the identity; ``acc`` pointing straight down gives a half turn about x."""
    acc = _as_float(acc)
    lib = _lib(acc)
    z, n = _normalized(acc)
    # shortest arc from z to e_z: [1 + z.e_z, z x e_z], normalized
    q = _stack([1.0 + z[..., 2], z[..., 1], -z[..., 0], lib.zeros_like(z[..., 0])])
    qn, qnorm = _normalized(q)
    upside_down = _stack([lib.zeros_like(n), lib.ones_like(n), lib.zeros_like(n), lib.zeros_like(n)])
    identity = _stack([lib.ones_like(n), lib.zeros_like(n), lib.zeros_like(n), lib.zeros_like(n)])
    qn = lib.where((qnorm > 0)[..., None], qn, upside_down)
    return lib.where((n > 0)[..., None], qn, identity)


def _quat_from_rows(x: Any, y: Any, z: Any) -> Any:
    """The unit quaternion of the rotation matrix with rows ``x, y, z`` (each ``(..., 3)``), by the largest
    of its four diagonal combinations (each candidate is ``4 q_k q``, exact for a rotation matrix)."""
    lib = _lib(x)
    r00, r01, r02 = x[..., 0], x[..., 1], x[..., 2]
    r10, r11, r12 = y[..., 0], y[..., 1], y[..., 2]
    r20, r21, r22 = z[..., 0], z[..., 1], z[..., 2]
    cands = [
        _stack([1.0 + r00 + r11 + r22, r21 - r12, r02 - r20, r10 - r01]),
        _stack([r21 - r12, 1.0 + r00 - r11 - r22, r01 + r10, r02 + r20]),
        _stack([r02 - r20, r01 + r10, 1.0 - r00 + r11 - r22, r12 + r21]),
        _stack([r10 - r01, r02 + r20, r12 + r21, 1.0 - r00 - r11 + r22]),
    ]
    diag = _stack([c[..., k] for k, c in enumerate(cands)])
    best = diag.argmax(-1)
    q = cands[0]
    for k in (1, 2, 3):
        q = lib.where((best == k)[..., None], cands[k], q)
    q, _ = _normalized(q)
    return lib.where((q[..., :1] < 0), -q, q)  # w >= 0 (the same rotation)


def quat_from_acc_mag(acc: Any, mag: Any) -> Any:
    """The quaternion of the estimators' 9-axis earth frame from one sample: z along the measured
    specific force ``acc``, x along the horizontal part of the field ``mag``, y = z x x. Where ``mag`` has
    no horizontal part (zero, or parallel to ``acc``) it is :func:`quat_from_acc`."""
    acc, mag = _as_float(acc), _as_float(mag)
    lib = _lib(acc)
    z, n = _normalized(acc)
    horizontal = mag - (mag * z).sum(-1)[..., None] * z
    x, hn = _normalized(horizontal)
    y = _cross(z, x)
    q = _quat_from_rows(x, y, z)
    scale = lib.sqrt((mag * mag).sum(-1))
    usable = (n > 0) & (hn > 1e-9 * lib.where(scale > 0, scale, lib.ones_like(scale)))
    return lib.where(usable[..., None], q, quat_from_acc(acc))


def attitude_errors(q_est: Any, q_ref: Any) -> Any:
    """``[total, heading, inclination]`` errors in radians, ``(..., 3)``, of ``q_est`` against ``q_ref``
    (both rotating sensor vectors into one earth frame with z up): with ``e = q_est ⊗ q_ref*`` (the error
    expressed in the earth frame), total ``2·acos(|e_w|)``, heading ``2·atan(|e_z / e_w|)``, inclination
    ``2·acos(sqrt(e_w² + e_z²))`` (the metric of the BROAD benchmark)."""
    lib = _lib(q_est)
    q_est, _ = _normalized(_as_float(q_est))
    q_ref, _ = _normalized(_as_float(q_ref))
    e, _ = _normalized(quat_multiply(q_est, quat_conjugate(q_ref)))
    ew, ez = e[..., 0], e[..., 3]
    total = 2.0 * lib.arccos(lib.clip(lib.abs(ew), 0.0, 1.0))
    heading = 2.0 * lib.arctan(lib.abs(ez / ew))
    inclination = 2.0 * lib.arccos(lib.clip(lib.sqrt(ew * ew + ez * ez), 0.0, 1.0))
    return _stack([total, heading, inclination])


#: a quarter turn about z: the estimators' 9-axis earth frame (x along magnetic north, z up: "NWU") into
#: east-north-up, ``q_enu = Q_NWU_TO_ENU ⊗ q``
Q_NWU_TO_ENU = (math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5))
