"""The compiled (numba) form of ``AttitudeSensor``'s outputs: :meth:`_Outputs.fill
<sensorgym.sensors.mujoco.attitude._Outputs.fill>` in one loop, written straight into the return buffer.

At ``B = 1`` the op-by-op fill costs a numpy call per op (about 25 µs for the projected gravity and the
rate, measured) where the IMU's whole step costs 10-30 µs; this kernel is one call. It does, per return
column, the scalar operations the op route does for that output, in the same order and with the same
operands, in float32 (the constants come in a float32 array, so nothing is promoted to float64): the two
routes give the same bits (tests/sensors/test_attitude_kernel.py), and the op route stays the reference
(on CUDA, without numba, or with ``SENSORGYM_ESTIMATOR_KERNELS=0``). The one exception is roll/pitch's
``atan2`` and ``asin``: numba's float32 ones differ from numpy's (in 40% and 19% of random arguments,
measured) and from torch's, so :func:`fill` writes their arguments into ``ang`` ``(3, B n)`` and the
executor's own functions finish them (``_Outputs.fill``), :func:`scatter` placing them.

An output block's recipe is a row of ``plan``: the output (0 projected gravity, 1 quaternion, 2
roll/pitch, 3 bias, 4 rate), the sensor ``j`` and its first return column; env ``b``'s sensor ``j`` is
column ``b n + j`` of the rows ``q`` ``(4, B n)`` and ``bias`` ``(3, B n)`` and row ``b n + j`` of ``gyr``
``(B n, 3)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["CONSTS", "fill", "scatter"]

#: the float32 constants the kernel reads: 2, -2, 1, -1
CONSTS = np.array([2.0, -2.0, 1.0, -1.0], dtype=np.float32)


@njit(cache=True, error_model="numpy")
def fill(
    q: np.ndarray,
    bias: np.ndarray,
    gyr: np.ndarray,
    plan: np.ndarray,
    n: int,
    c: np.ndarray,
    out: np.ndarray,
    ang: np.ndarray,
) -> None:
    """Every output block ``plan[i] = (output, sensor j, first column)`` of every env into ``out``, but
    roll/pitch's, whose ``atan2`` arguments go to ``ang[0:2]`` and ``asin``'s to ``ang[2]`` (see the module
    docstring). One loop over the envs per block: no branch inside it."""
    two, mtwo, one, mone = c[0], c[1], c[2], c[3]
    for i in range(plan.shape[0]):
        kind, j, col = plan[i, 0], plan[i, 1], plan[i, 2]
        if kind == 0:  # R(q)^T [0, 0, -1]
            for b in range(out.shape[0]):
                r = b * n + j
                q0, q1, q2, q3 = q[0, r], q[1, r], q[2, r], q[3, r]
                out[b, col] = (q0 * q2 - q1 * q3) * two
                out[b, col + 1] = (q2 * q3 + q0 * q1) * mtwo
                out[b, col + 2] = ((q1 * q1 + q2 * q2) - q0 * q0) - q3 * q3
        elif kind == 1:
            for b in range(out.shape[0]):
                r = b * n + j
                out[b, col], out[b, col + 1] = q[0, r], q[1, r]
                out[b, col + 2], out[b, col + 3] = q[2, r], q[3, r]
        elif kind == 2:  # the arguments only: the executor's atan2 and asin finish them
            for b in range(out.shape[0]):
                r = b * n + j
                q0, q1, q2, q3 = q[0, r], q[1, r], q[2, r], q[3, r]
                ang[0, r] = (q0 * q1 + q2 * q3) * two
                ang[1, r] = (q1 * q1 + q2 * q2) * mtwo + one
                s = (q0 * q2 - q1 * q3) * two
                ang[2, r] = mone if s < mone else (one if s > one else s)
        elif kind == 3:
            for b in range(out.shape[0]):
                r = b * n + j
                out[b, col], out[b, col + 1], out[b, col + 2] = bias[0, r], bias[1, r], bias[2, r]
        else:
            for b in range(out.shape[0]):
                r = b * n + j
                out[b, col], out[b, col + 1], out[b, col + 2] = gyr[r, 0], gyr[r, 1], gyr[r, 2]


@njit(cache=True, error_model="numpy")
def scatter(angles: np.ndarray, plan: np.ndarray, n: int, out: np.ndarray) -> None:
    """Roll/pitch ``angles`` ``(2, B n)`` into their return columns of ``out``."""
    for i in range(plan.shape[0]):
        if plan[i, 0] == 2:
            j, col = plan[i, 1], plan[i, 2]
            for b in range(out.shape[0]):
                out[b, col] = angles[0, b * n + j]
                out[b, col + 1] = angles[1, b * n + j]
