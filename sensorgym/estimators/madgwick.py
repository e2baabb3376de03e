"""Madgwick's gradient-descent orientation filter (S. O. H. Madgwick, "An efficient orientation filter for
inertial and inertial/magnetic sensor arrays", report, University of Bristol, 2010), 6-axis (IMU) and
9-axis (MARG) forms, gain ``beta``.

Per sample, with ``q`` the previous estimate and ``â``, ``m̂`` the normalized samples:

* the objective ``f_g = R(q)ᵀ e_z − â`` (the report's eq. 25; ``R(q)ᵀ e_z`` is the earth's up axis in
  the sensor frame) and, with a magnetometer, ``f_b = R(q)ᵀ b − m̂`` with the report's earth-field
  reference ``b = [sqrt(hx² + hy²), 0, hz]``, ``h = q ⊗ m̂ ⊗ q*`` (eqs. 29, 45, 46);
* its gradient ``∇f = J_gᵀ f_g (+ J_bᵀ f_b)`` (eq. 34), computed without the 6×4 Jacobian. The report
  writes each ``f`` as a polynomial ``P(q) = H(q) + (1 − |q|²)·d`` (its ``2(0.5 − q3² − q4²)`` terms),
  where ``H(q) = q* ⊗ d ⊗ q`` is homogeneous; for a pure quaternion ``d``, ``J_Hᵀ f = −2·d ⊗ q ⊗ f``
  (differentiate ``|f|²/2`` along any ``δq``), so ``J_Pᵀ f = −2·d ⊗ q ⊗ f − 2(d · f)·q``: two quaternion
  products, ``q ⊗ (f_g + b_z f_b)`` and ``q ⊗ f_b``, and a radial term. The same vector as the report's
  Jacobians (the tests check it against them); the radial term matters, as the step is normalized;
* ``q ← normalize(q + (½·q ⊗ (0, ω) − β·∇f/|∇f|)·Δt)`` (eqs. 42-44). The correction has the
  fixed magnitude ``β`` whatever the error, so a tilt error closes at ``2β`` rad/s.

``earth_field="c_code"`` reproduces the widely copied C implementation (``MadgwickAHRS.c``), whose
9-axis update uses half the report's reference (``b/2``: its ``_2bx``, ``_2bz`` hold ``b_x``, ``b_z``
where the report's ``2b_x``, ``2b_z`` stand); the magnetometer term then has a different weight and
minimum. The 6-axis update is the same in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from .base import (
    AttitudeEstimator,
    gravity_up,
    integrate_rate,
    normalize3,
    normalize_rows,
    quat_times_vector,
    reference_field,
    rotate_into,
)
from .state import EstimatorState, pad

__all__ = ["EARTH_FIELDS", "Madgwick"]

#: ``earth_field`` values: the report's reference, or the C code's half of it
EARTH_FIELDS = {"paper": 1.0, "c_code": 0.5}


class Madgwick(AttitudeEstimator):
    """Madgwick's gradient-descent filter with gain ``beta`` (rad/s: the magnitude of the quaternion
    rate of its correction), at ``rate`` samples per second; ``earth_field`` picks the 9-axis earth-field
    reference: ``"paper"`` (default, the report's ``b``) or ``"c_code"`` (the C code's ``b/2``). ``beta``
    is a number, or a list of one number per env (``run`` then runs one log through every env's filter).

    ``run(gyr, acc, mag=None, q0=None)`` returns unit quaternions ``[w, x, y, z]`` rotating sensor vectors
    into the filter's earth frame: z up (along the specific force at rest), with a magnetometer x along
    the horizontal field and y = z × x.

    Example:
        >>> import numpy as np
        >>> from sensorgym.estimators import Madgwick
        >>> from sensorgym.estimators.quaternion import roll_pitch
        >>> n = 400
        >>> acc = np.tile([0.0, 9.81 * np.sin(0.2), 9.81 * np.cos(0.2)], (n, 1))  # rolled by 0.2 rad
        >>> q = Madgwick(beta=0.1, rate=100.0).run(np.zeros((n, 3)), acc, q0=[1.0, 0.0, 0.0, 0.0])
        >>> np.round(roll_pitch(q[[24, 49]])[:, 0], 3).tolist()  # closes at about 2·beta = 0.2 rad/s
        [0.05, 0.1]
        >>> bool(abs(roll_pitch(q[-1])[0] - 0.2) <= 2 * 0.1 / 100.0)  # then within 2·beta·dt
        True
    """

    gain_names = ("beta",)
    scratch_rows: ClassVar[dict[str, int]] = {
        "flag": 1, "f": 5, "fb": 5, "h": 3, "b": 5, "c": 5, "d": 3, "tmp": 3, "pz": 4, "px": 4, "s": 4,
    }  # fmt: skip
    padded_rows = ("f", "fb", "b", "c")

    def __init__(self, beta: float | Sequence[float], rate: float, earth_field: str = "paper") -> None:
        if earth_field not in EARTH_FIELDS:
            raise ValueError(
                f"Madgwick(earth_field={earth_field!r}): expected 'paper' (the report's reference) or "
                "'c_code' (the widely copied C code's half of it)"
            )
        super().__init__(rate, beta=beta)
        self.earth_field = earth_field

    def __repr__(self) -> str:
        return f"Madgwick(beta={self.gains['beta']!r}, rate={self.rate!r}, earth_field={self.earth_field!r})"

    def _kernel_spec(self, magnetometer: bool) -> tuple[str, str, float] | None:
        if type(self)._step is not Madgwick._step or type(self)._gradient is not Madgwick._gradient:
            return None  # a subclass with its own step runs its own tape
        name = "madgwick9" if magnetometer else "madgwick6"
        return name, "MADGWICK_ROWS", EARTH_FIELDS[self.earth_field]

    def _step(self, state: EstimatorState, magnetometer: bool) -> None:
        o, A = state.ops, state.arrays
        normalize3(o, A.a.v, A.t3, A.nrm, flag=A.flag)
        gravity_up(o, A, A.f.v)
        o.mul(A.f.v, A.flag, A.f.v)  # a zero accelerometer sample: f_g = 0, no gravity correction
        o.sub(A.f.v, A.a.v, A.f.v)  # f_g
        if magnetometer:
            normalize3(o, A.m.v, A.t3, A.nrm)  # a zero sample: m̂ = 0, so h = b = f_b = 0
            pad(o, A.m)
            rotate_into(o, A, A.m, A.h, A.c, A.d, A.tmp, inverse=False)  # h = q ⊗ m̂ ⊗ q*
            reference_field(o, A.h, A.b, A.d, EARTH_FIELDS[self.earth_field])
            rotate_into(o, A, A.b, A.fb.v, A.c, A.d, A.tmp, inverse=True)
            o.sub(A.fb.v, A.m.v, A.fb.v)  # f_b = Rᵀ b − m̂
            pad(o, A.fb)
            o.mul(A.fb.v, A.b.v[2], A.tmp)
            o.add(A.f.v, A.tmp, A.f.v)  # f_g + b_z f_b
        pad(o, A.f)
        self._gradient(state, magnetometer)
        pad(o, A.g)
        integrate_rate(o, A, A.g)  # qn = q + ½ q ⊗ (0, ω) Δt
        o.mul(A.s, A.beta, A.s)
        o.mul(A.s, A.dt, A.s)
        o.sub(A.qn, A.s, A.qn)  # − β ∇f/|∇f| Δt

    @staticmethod
    def _gradient(state: EstimatorState, magnetometer: bool) -> None:
        """``A.s`` = ``∇f/|∇f|`` (0 where ``∇f`` is 0). With ``p_z = q ⊗ (f_g + b_z f_b)`` and ``p_x = q ⊗
        f_b``, ``∇f = −2·(e_z ⊗ p_z + b_x e_x ⊗ p_x) − 2κ·q``, ``κ = e_z · f_g + b · f_b``; ``e_z ⊗ p =
        (−p3, −p2, p1, p0)``, ``e_x ⊗ p = (−p1, p0, −p3, p2)``; the factor 2 goes with the
        normalization."""
        o, A = state.ops, state.arrays
        pz, px, s = A.pz, A.px, A.s
        quat_times_vector(o, A, A.f, pz, A.tmp)
        o.copyto(s[0], pz[3])
        o.copyto(s[1], pz[2])
        o.neg(pz[1], s[2])
        o.neg(pz[0], s[3])
        if magnetometer:
            quat_times_vector(o, A, A.fb, px, A.tmp)
            o.mul(px, A.b.v[0], px)
            o.add(s[0], px[1], s[0])
            o.sub(s[1], px[0], s[1])
            o.add(s[2], px[3], s[2])
            o.sub(s[3], px[2], s[3])
            o.mul(A.fb.v[0], A.b.v[0], A.nrm)
            o.add(A.nrm, A.f.v[2], A.nrm)  # κ = e_z · (f_g + b_z f_b) + b_x (f_b)_x
            kappa = A.nrm
        else:
            kappa = A.f.v[2]
        o.mul(A.q, kappa, A.qq)
        o.sub(s, A.qq, s)  # the report's radial term
        normalize_rows(o, s, A.qq, A.nrm, keep_zero=True)
