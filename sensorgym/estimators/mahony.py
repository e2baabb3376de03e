"""Mahony's explicit complementary filter (R. Mahony, T. Hamel, J.-M. Pflimlin, "Nonlinear Complementary
Filters on the Special Orthogonal Group", IEEE Trans. Automatic Control 53(5), 2008), in its quaternion
form with the integral gyro-bias estimate, 6-axis and 9-axis.

Per sample, with ``q`` the previous estimate (rotating sensor vectors into the earth frame, z up), ``â``
and ``m̂`` the normalized accelerometer and magnetometer samples:

* the estimated directions in the sensor frame: up ``v̂ = R(q)ᵀ e_z``; with a magnetometer the field
  reference ``b = [sqrt(hx² + hy²), 0, hz]`` from ``h = R(q) m̂`` and its direction ``ŵ = R(q)ᵀ b``;
* the correction ``ω_mes = â × v̂ (+ m̂ × ŵ)`` (the paper's ``Σ k_i v_i × v̂_i`` with unit weights);
* the bias estimate ``b̂ ← b̂ − k_I·ω_mes·Δt``, then the corrected rate ``Ω = ω_y − b̂ + k_P·ω_mes``;
* ``q ← normalize(q + ½·q ⊗ (0, Ω)·Δt)``.

This is the widely used discretization (the bias estimate is updated before it is used in the same
step), so with the same initial state it follows the original C code the BROAD benchmark ran. One
deliberate difference: a sample whose accelerometer reads zero skips only its correction term (and the
C code skips every correction and the bias estimate with it); here the bias estimate keeps correcting
the gyroscope, as the paper's filter does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from .base import AttitudeEstimator, gravity_up, integrate_rate, normalize3, reference_field, rotate_into
from .state import EstimatorState, cross, pad

__all__ = ["Mahony"]


class Mahony(AttitudeEstimator):
    """Mahony's explicit complementary filter with gains ``kp`` (rad/s per unit of the cross-product
    error: the inverse time constant of small tilt errors) and ``ki`` (rad/s² per unit: the gyro-bias
    integral), at ``rate`` samples per second. A gain is a number, or a list of one number per env.

    ``run(gyr, acc, mag=None, q0=None)`` returns unit quaternions ``[w, x, y, z]`` rotating sensor vectors
    into the filter's earth frame: z up (along the specific force at rest), with a magnetometer x along
    the horizontal field and y = z × x. Per-step use: :meth:`new_state`, :meth:`initialize`,
    :meth:`update`; the bias estimate ``b̂`` (rad/s, sensor frame) is :meth:`bias`. The paper's integral
    term ``k_I ∫ ω_mes`` is ``−b̂``: under a constant gyro bias it converges to minus that bias.

    Example:
        >>> import numpy as np
        >>> from sensorgym.estimators import Mahony
        >>> n = 2000
        >>> gyr = np.tile([0.01, 0.0, 0.0], (n, 1))  # at rest, a gyro bias of 0.01 rad/s about x
        >>> acc = np.tile([0.0, 0.0, 9.81], (n, 1))
        >>> f = Mahony(kp=1.0, ki=0.3, rate=100.0)
        >>> q = f.run(gyr, acc)
        >>> q.shape, bool(np.allclose(q[-1], [1, 0, 0, 0], atol=1e-4))
        ((2000, 4), True)
        >>> state = f.new_state(1, executor="numpy")
        >>> f.initialize(state, acc[:1])
        >>> for i in range(n):
        ...     f.update(state, gyr[i : i + 1], acc[i : i + 1])
        >>> np.round(f.bias(state), 4).tolist()
        [[0.01, 0.0, 0.0]]
    """

    gain_names = ("kp", "ki")
    state_rows: ClassVar[dict[str, int]] = {"bias": 3}
    scratch_rows: ClassVar[dict[str, int]] = {
        "v": 5, "e": 3, "w": 5, "h": 3, "b": 5, "c": 5, "d": 3, "tmp": 3,
    }  # fmt: skip
    padded_rows = ("v", "w", "b", "c")

    def __init__(self, kp: float | Sequence[float], ki: float | Sequence[float], rate: float) -> None:
        super().__init__(rate, kp=kp, ki=ki)

    def bias(self, state: EstimatorState) -> Any:
        """The gyro-bias estimate ``b̂``, ``(B, 3)`` rad/s in the sensor frame (a view of the state)."""
        return state.arrays.bias.T

    def _kernel_spec(self, magnetometer: bool) -> tuple[str, str, float] | None:
        if type(self)._step is not Mahony._step:
            return None  # a subclass with its own step runs its own tape
        name = "mahony9" if magnetometer else "mahony6"
        return name, "MAHONY_ROWS", 1.0

    def _step(self, state: EstimatorState, magnetometer: bool) -> None:
        o, A = state.ops, state.arrays
        normalize3(o, A.a.v, A.t3, A.nrm)  # a zero sample stays zero: its cross product vanishes
        pad(o, A.a)
        gravity_up(o, A, A.v.v)
        pad(o, A.v)
        cross(o, A.a, A.v, A.e, A.tmp)  # ω_mes = â × v̂
        if magnetometer:
            normalize3(o, A.m.v, A.t3, A.nrm)
            pad(o, A.m)
            rotate_into(o, A, A.m, A.h, A.c, A.d, A.tmp, inverse=False)  # h = R m̂
            reference_field(o, A.h, A.b, A.d)
            rotate_into(o, A, A.b, A.w.v, A.c, A.d, A.tmp, inverse=True)  # ŵ = Rᵀ b
            pad(o, A.w)
            cross(o, A.m, A.w, A.d, A.tmp)
            o.add(A.e, A.d, A.e)  # ω_mes += m̂ × ŵ
        o.mul(A.e, A.ki, A.tmp)
        o.mul(A.tmp, A.dt, A.tmp)
        o.sub(A.bias, A.tmp, A.bias_new)  # b̂ ← b̂ − k_I ω_mes Δt
        o.sub(A.g.v, A.bias_new, A.w.v)
        o.mul(A.e, A.kp, A.tmp)
        o.add(A.w.v, A.tmp, A.w.v)  # Ω = ω_y − b̂ + k_P ω_mes
        pad(o, A.w)
        integrate_rate(o, A, A.w)
