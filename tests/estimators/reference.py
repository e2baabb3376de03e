"""Slow per-sample references written straight from the papers, in plain Python floats (one env, one
sample at a time), for the batched estimators to match.

Madgwick: the report's equations as printed (S. O. H. Madgwick, 2010): the objective functions f_g
(eq. 25) and f_b (eq. 29) with their Jacobians J_g (eq. 26) and J_b (eq. 30), the reference
b = [sqrt(hx² + hy²), 0, hz] from h = q ⊗ m ⊗ q* (eqs. 45, 46), the gradient J^T f (eq. 34) and the
update q + (½ q ⊗ ω − β ∇f/|∇f|) Δt (eqs. 42-44), normalized. The report numbers q as q1..q4 = w, x, y, z.

Mahony: the explicit complementary filter (Mahony, Hamel, Pflimlin 2008) with unit weights, the
rotation matrix written out: ω_mes = Σ v_i × v̂_i, b̂ ← b̂ − k_I ω_mes Δt, Ω = ω − b̂ + k_P ω_mes,
q ← normalize(q + ½ q ⊗ (0, Ω) Δt).

A zero accelerometer (magnetometer) sample drops its own term only, as the estimators do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Vec = Sequence[float]


def qmul(p: Vec, q: Vec) -> list[float]:
    a1, a2, a3, a4 = p
    b1, b2, b3, b4 = q
    return [
        a1 * b1 - a2 * b2 - a3 * b3 - a4 * b4,
        a1 * b2 + a2 * b1 + a3 * b4 - a4 * b3,
        a1 * b3 - a2 * b4 + a3 * b1 + a4 * b2,
        a1 * b4 + a2 * b3 - a3 * b2 + a4 * b1,
    ]


def _unit(v: Vec) -> list[float] | None:
    n = math.sqrt(sum(x * x for x in v))
    return None if n == 0 else [x / n for x in v]


def _cross(a: Vec, b: Vec) -> list[float]:
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def madgwick_gradient(q: Vec, a: Vec | None, m: Vec | None, field_scale: float = 1.0) -> list[float]:
    """J^T f of the report for the normalized samples ``a``, ``m`` (None: that term left out)."""
    q1, q2, q3, q4 = q
    rows: list[tuple[list[float], float]] = []  # (a row of J, the matching entry of f)
    if a is not None:
        ax, ay, az = a
        rows += [
            ([-2 * q3, 2 * q4, -2 * q1, 2 * q2], 2 * (q2 * q4 - q1 * q3) - ax),
            ([2 * q2, 2 * q1, 2 * q4, 2 * q3], 2 * (q1 * q2 + q3 * q4) - ay),
            ([0.0, -4 * q2, -4 * q3, 0.0], 2 * (0.5 - q2 * q2 - q3 * q3) - az),
        ]
    if m is not None:
        mx, my, mz = m
        h = qmul(qmul(q, [0.0, mx, my, mz]), [q1, -q2, -q3, -q4])
        bx, bz = math.sqrt(h[1] ** 2 + h[2] ** 2) * field_scale, h[3] * field_scale
        rows += [
            (
                [-2 * bz * q3, 2 * bz * q4, -4 * bx * q3 - 2 * bz * q1, -4 * bx * q4 + 2 * bz * q2],
                2 * bx * (0.5 - q3 * q3 - q4 * q4) + 2 * bz * (q2 * q4 - q1 * q3) - mx,
            ),
            (
                [-2 * bx * q4 + 2 * bz * q2, 2 * bx * q3 + 2 * bz * q1,
                 2 * bx * q2 + 2 * bz * q4, -2 * bx * q1 + 2 * bz * q3],
                2 * bx * (q2 * q3 - q1 * q4) + 2 * bz * (q1 * q2 + q3 * q4) - my,
            ),
            (
                [2 * bx * q3, 2 * bx * q4 - 4 * bz * q2, 2 * bx * q1 - 4 * bz * q3, 2 * bx * q2],
                2 * bx * (q1 * q3 + q2 * q4) + 2 * bz * (0.5 - q2 * q2 - q3 * q3) - mz,
            ),
        ]  # fmt: skip
    return [sum(row[k] * f for row, f in rows) for k in range(4)]


def madgwick(
    q0: Vec, gyr: Sequence[Vec], acc: Sequence[Vec], mag: Sequence[Vec] | None, beta: float, dt: float,
    field_scale: float = 1.0,
) -> list[list[float]]:  # fmt: skip
    """The estimate after each sample."""
    q, out = list(q0), []
    for i in range(len(gyr)):
        qdot = [0.5 * x for x in qmul(q, [0.0, *gyr[i]])]
        a = _unit(acc[i])
        m = None if mag is None else _unit(mag[i])
        grad = madgwick_gradient(q, a, m, field_scale)
        n = math.sqrt(sum(x * x for x in grad))
        if n > 0:
            qdot = [d - beta * g / n for d, g in zip(qdot, grad, strict=True)]
        q = _unit([x + d * dt for x, d in zip(q, qdot, strict=True)])
        out.append(q)
    return out


def rotation_matrix(q: Vec) -> list[list[float]]:
    """R(q): sensor-frame vectors into the earth frame."""
    w, x, y, z = q
    return [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]


def mahony(
    q0: Vec, gyr: Sequence[Vec], acc: Sequence[Vec], mag: Sequence[Vec] | None, kp: float, ki: float,
    dt: float, bias0: Vec = (0.0, 0.0, 0.0),
) -> tuple[list[list[float]], list[list[float]]]:  # fmt: skip
    """The estimate and the bias estimate after each sample."""
    q, bias, out, biases = list(q0), list(bias0), [], []
    for i in range(len(gyr)):
        r = rotation_matrix(q)
        rt = [[r[j][k] for j in range(3)] for k in range(3)]
        e = [0.0, 0.0, 0.0]
        a = _unit(acc[i])
        if a is not None:
            v = [rt[k][2] for k in range(3)]  # R^T e_z
            e = [x + y for x, y in zip(e, _cross(a, v), strict=True)]
        m = None if mag is None else _unit(mag[i])
        if m is not None:
            h = [sum(r[j][k] * m[k] for k in range(3)) for j in range(3)]
            b = [math.hypot(h[0], h[1]), 0.0, h[2]]
            w = [sum(rt[j][k] * b[k] for k in range(3)) for j in range(3)]
            e = [x + y for x, y in zip(e, _cross(m, w), strict=True)]
        bias = [b - ki * x * dt for b, x in zip(bias, e, strict=True)]
        omega = [g - b + kp * x for g, b, x in zip(gyr[i], bias, e, strict=True)]
        qdot = [0.5 * x for x in qmul(q, [0.0, *omega])]
        q = _unit([x + d * dt for x, d in zip(q, qdot, strict=True)])
        out.append(q)
        biases.append(list(bias))
    return out, biases
