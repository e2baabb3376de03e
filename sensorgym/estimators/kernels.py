"""Compiled (numba) updates of the four built-in estimators: the recorded op tape's arithmetic, per env.

Each kernel does, for every env, exactly the scalar operations the tape
(:meth:`~sensorgym.estimators.base.AttitudeEstimator.plan`) does for all envs at once, in the same order
and with the same operands: every tape op is an exactly rounded elementwise IEEE operation, so the same
operations on the same scalars give the same bits (and so do the compiler's SIMD lanes: a vector divide
or square root is the same correctly rounded operation per lane). What keeps that true:

* no ``fastmath`` (no reassociation, no contraction of ``a*b + c`` into a fused multiply-add: LLVM
  fuses only where the IR allows it, and numba's IR does not without ``fastmath``; the tests compare
  the bits and the compiled code has no FMA instruction);
* the constants ``2``, ``0.5``, the lower bound ``tiny``, ``1``, ``0`` and the earth-field scale come in
  an array of the state's dtype (``consts``), so float32 arithmetic stays float32 (a Python float
  literal would promote it to float64, where numpy's scalars are weak and do not);
* ``error_model="numpy"``: a division by zero gives inf or NaN as numpy's does (Python's model would
  raise, and its check keeps the loops from vectorizing);
* ``max(n, tiny)`` is written ``tiny if n < tiny else n``, which keeps a NaN as ``np.maximum`` does;
* the tape's in-place side effects on the inputs are kept: the accelerometer (and magnetometer) rows
  hold the normalized samples afterwards, as after the tape (a step run twice on the same rows gives
  what the tape gives).

A kernel works in place on an :class:`~sensorgym.estimators.state.EstimatorState`'s storage, flat
(``S``: the ``(rows, B)`` block as one numpy array, the numpy executor's memory or a view of a CPU
tensor's), in the estimator's layout (:data:`MADGWICK_ROWS`, :data:`MAHONY_ROWS`), with ``consts``
(:func:`consts_for`) and ``mask`` ``(B,)`` bool: where ``masked`` and not ``mask[j]``, env ``j``
computes (and normalizes its input rows, as the tape does) but keeps its state bit for bit. Each
kernel is two loops over the envs, both vectorized by the compiler (see the layouts below).

Every compiled function here first calls :func:`vectors_256`, which keeps the compiled loops to 256-bit
vectors (why: its docstring). Compiled lazily at the first call of each variant and dtype; ``cache=True``
keeps the machine code next to this file (or in numba's user cache) for the next process.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

try:
    from numba import njit, types
    from numba.core.config import DISABLE_JIT
    from numba.extending import intrinsic
except ImportError:  # without numba nothing dispatches here (dispatch.kernels_available); the module
    # still imports (doctest collection, documentation tools), its kernels then plain Python
    DISABLE_JIT = True

    def njit(*args: object, **kwargs: object) -> object:
        return lambda fn: fn


def _marker(fn: Any) -> Any:
    """``fn`` as an intrinsic, or a call that does nothing where the kernels run as Python (no numba, or
    ``NUMBA_DISABLE_JIT``: an intrinsic cannot run as Python)."""
    return (lambda: None) if DISABLE_JIT else intrinsic(fn)


__all__ = ["CONSTS", "consts_for", "madgwick6", "madgwick9", "mahony6", "mahony9", "vectors_256"]


@_marker
def vectors_256(typingctx: Any) -> Any:
    """Marks the compiled function it is called in to use vectors of at most 256 bits (LLVM's
    ``"min-legal-vector-width"="256"`` and ``"prefer-vector-width"="256"``, as Clang sets them).

    Why: on a CPU with AVX-512, LLVM otherwise legalizes wide vectors in 512-bit (zmm) registers: the kernels'
    strided loads and stores (gathers and scatters over interleaved rows) took zmm index registers. After any
    zmm code the core runs slower for about a millisecond (measured; presumably its AVX-512 frequency
    licence): torch's noise draws in the IMU's own step, right after these kernels, took 8% longer, about 13
    µs of a 220 µs step at ``B = 4096`` (measured; 256-bit code leaves them as they are). With the mark the
    same loops compile to 256-bit (ymm) vectors, about as fast alone, and the attitude sensor's step at ``B =
    4096`` adds 15-17% to the IMU's instead of 21-27% (docs/estimators.md, "Speed").

    LLVM drops ``min-legal-vector-width`` from a function when it inlines a callee without it, so every
    compiled function here and in :mod:`sensorgym.sensors.mujoco.attitude_kernel` that numba itself does
    not inline (``inline="always"``) calls this first (tests/sensors/test_attitude_kernel.py checks the
    compiled code). Elsewhere (no AVX-512, not x86) the
    attributes change nothing. The values are the same either way: each operation is correctly rounded
    per lane whatever the vector width."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        attributes = builder.function.attributes  # a set whose add() knows only LLVM's keyword attributes
        set.add(attributes, '"min-legal-vector-width"="256"')
        set.add(attributes, '"prefer-vector-width"="256"')
        return context.get_dummy_value()

    return types.none(), codegen


#: the order of the constants in ``consts``
CONSTS = ("two", "half", "tiny", "one", "zero", "scale")


def consts_for(dtype: np.dtype, scale: float = 1.0) -> np.ndarray:
    """The ``consts`` array of a kernel for states of ``dtype``."""
    dtype = np.dtype(dtype)
    return np.array([2.0, 0.5, float(np.finfo(dtype).tiny), 1.0, 0.0, scale], dtype=dtype)


# ---- the tape's shared pieces, per env (base.py / state.py spell each as ops on rows) --------------


@njit(cache=True, error_model="numpy")
def _normalize3(x0, x1, x2, tiny, one, zero):
    """``normalize3``: ``x / max(sqrt(x·x), tiny)`` and the flag ``|x|² > 0``."""
    vectors_256()
    s0, s1, s2 = x0 * x0, x1 * x1, x2 * x2
    n = s0 + s1
    n = n + s2
    flag = one if n > 0 else zero
    n = math.sqrt(n)
    n = tiny if n < tiny else n
    return x0 / n, x1 / n, x2 / n, flag


@njit(cache=True, error_model="numpy")
def _gravity_up(q0, q1, q2, q3, two):
    """``gravity_up``: ``R(q)ᵀ e_z``."""
    vectors_256()
    p0, p1 = q1 * q0, q2 * q0
    s0, s2 = q1 * q3, q3 * q2
    sq0, sq1, sq2, sq3 = q0 * q0, q1 * q1, q2 * q2, q3 * q3
    o0 = s0 - p1
    o1 = s2 + p0
    o0 = o0 * two
    o1 = o1 * two
    o2 = sq0 - sq1
    p0 = sq3 - sq2
    return o0, o1, o2 + p0


@njit(cache=True, error_model="numpy")
def _cross(a0, a1, a2, b0, b1, b2):
    """``cross``: ``a.s1 * b.s2 - a.s2 * b.s1``."""
    vectors_256()
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True, error_model="numpy")
def _rotate_into(q0, q1, q2, q3, x0, x1, x2, two, inverse):
    """``rotate_into``: ``x + 2·(±q0 (qv × x) + qv × (qv × x))``."""
    vectors_256()
    c0, c1, c2 = _cross(q1, q2, q3, x0, x1, x2)
    d0, d1, d2 = _cross(q1, q2, q3, c0, c1, c2)
    t0, t1, t2 = c0 * q0, c1 * q0, c2 * q0
    if inverse:
        t0, t1, t2 = d0 - t0, d1 - t1, d2 - t2
    else:
        t0, t1, t2 = d0 + t0, d1 + t1, d2 + t2
    t0, t1, t2 = t0 * two, t1 * two, t2 * two
    return x0 + t0, x1 + t1, x2 + t2


@njit(cache=True, error_model="numpy")
def _quat_times_vector(q0, q1, q2, q3, w0, w1, w2):
    """``quat_times_vector``: ``q ⊗ (0, w)``."""
    vectors_256()
    t0, t1, t2 = q1 * w0, q2 * w1, q3 * w2
    o0 = t0 + t1
    o0 = o0 + t2
    o0 = -o0
    o1, o2, o3 = _cross(q1, q2, q3, w0, w1, w2)
    t0, t1, t2 = w0 * q0, w1 * q0, w2 * q0
    return o0, o1 + t0, o2 + t1, o3 + t2


@njit(cache=True, error_model="numpy")
def _integrate_rate(q0, q1, q2, q3, w0, w1, w2, dt, half):
    """``integrate_rate``: ``q + (q ⊗ (0, w))·dt·0.5`` (unnormalized)."""
    vectors_256()
    p0, p1, p2, p3 = _quat_times_vector(q0, q1, q2, q3, w0, w1, w2)
    p0, p1, p2, p3 = p0 * dt, p1 * dt, p2 * dt, p3 * dt
    p0, p1, p2, p3 = p0 * half, p1 * half, p2 * half, p3 * half
    return q0 + p0, q1 + p1, q2 + p2, q3 + p3


@njit(cache=True, error_model="numpy")
def _reference_field(h0, h1, h2, scale, one, zero):
    """``reference_field``: ``scale·[sqrt(h0² + h1²), 0, h2]`` (the middle row: the storage's 0)."""
    vectors_256()
    bx = h0 * h0 + h1 * h1
    bx = math.sqrt(bx)
    by = zero  # the tape's never-written middle row (0), multiplied by the scale below all the same
    bz = h2
    if scale != one:
        bx, by, bz = bx * scale, by * scale, bz * scale
    return bx, by, bz


@njit(cache=True, error_model="numpy")
def _normalize4(x0, x1, x2, x3, tiny, keep_zero):
    """``normalize_rows``: ``x / sqrt(x·x)`` (``keep_zero``: the norm bounded below by ``tiny``)."""
    vectors_256()
    s0, s1, s2, s3 = x0 * x0, x1 * x1, x2 * x2, x3 * x3
    n = s0 + s1
    n = n + s2
    n = n + s3
    n = math.sqrt(n)
    if keep_zero:
        n = tiny if n < tiny else n
    return x0 / n, x1 / n, x2 / n, x3 / n


# ---- the layouts: the first row of each block the kernels read or write ------------------------------
# Literal offsets into the flat storage, not arguments: with the row stride B also the trip count, the
# compiler proves that two different rows never overlap within a loop (their distance is a multiple of
# B) and vectorizes it; with offsets known only at run time it cannot, and the loop runs one env at a
# time (4 to 10x slower at B = 4096). dispatch.bind checks that a state's layout is this one (else the
# tape runs). LLVM 22's loop-access analysis also gives up past about 128 pairs of a stored row with
# another row in one loop (measured), hence two loops per update: the samples' normalization, in place,
# then the rest, committing in place.

#: Madgwick's blocks (AttitudeEstimator.new_state's order)
MADGWICK_ROWS = {"q": 0, "beta": 6, "dt": 7, "g": 8, "a": 13, "m": 18, "flag": 38}
#: Mahony's blocks
MAHONY_ROWS = {"q": 0, "bias": 6, "kp": 9, "ki": 10, "dt": 11, "g": 12, "a": 17, "m": 22}
_GQ, _GBETA, _GDT, _GG, _GA, _GM, _GFLAG = 0, 6, 7, 8, 13, 18, 38
_HQ, _HB, _HKP, _HKI, _HDT, _HG, _HA, _HM = 0, 6, 9, 10, 11, 12, 17, 22


@njit(cache=True, error_model="numpy", inline="always")
def _normalize_samples(S, c, B, ra, rm, rflag, magnetometer, flag):
    """``normalize3`` of the accelerometer rows (and the magnetometer's), in place; ``flag``: the
    accelerometer's non-zero flag into row ``rflag``. The row arguments are literals at every call."""
    vectors_256()
    tiny, one, zero = c[2], c[3], c[4]
    for j in range(B):
        a0, a1, a2, f = _normalize3(S[ra * B + j], S[(ra + 1) * B + j], S[(ra + 2) * B + j], tiny, one, zero)
        S[ra * B + j], S[(ra + 1) * B + j], S[(ra + 2) * B + j] = a0, a1, a2
        if flag:
            S[rflag * B + j] = f
        if magnetometer:
            m0, m1, m2, _ = _normalize3(
                S[rm * B + j], S[(rm + 1) * B + j], S[(rm + 2) * B + j], tiny, one, zero
            )
            S[rm * B + j], S[(rm + 1) * B + j], S[(rm + 2) * B + j] = m0, m1, m2


# ---- Madgwick ----------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def _madgwick(S, c, mask, masked, magnetometer):
    """The update of every env (``S`` flat, Madgwick's layout); envs out of ``mask`` (if ``masked``)
    keep their quaternion."""
    vectors_256()
    two, half, tiny, one, zero, scale = c[0], c[1], c[2], c[3], c[4], c[5]
    B = mask.shape[0]
    _normalize_samples(S, c, B, _GA, _GM, _GFLAG, magnetometer, True)
    for j in range(B):
        q0, q1, q2, q3 = S[_GQ * B + j], S[(_GQ + 1) * B + j], S[(_GQ + 2) * B + j], S[(_GQ + 3) * B + j]
        a0, a1, a2, flag = S[_GA * B + j], S[(_GA + 1) * B + j], S[(_GA + 2) * B + j], S[_GFLAG * B + j]
        f0, f1, f2 = _gravity_up(q0, q1, q2, q3, two)
        f0, f1, f2 = f0 * flag, f1 * flag, f2 * flag  # a zero accelerometer sample: f_g = 0
        f0, f1, f2 = f0 - a0, f1 - a1, f2 - a2
        # the 6-axis form never reads these; they keep the compiler's types whole
        bx = zero
        e0, e1, e2 = zero, zero, zero
        if magnetometer:
            m0, m1, m2 = S[_GM * B + j], S[(_GM + 1) * B + j], S[(_GM + 2) * B + j]
            h0, h1, h2 = _rotate_into(q0, q1, q2, q3, m0, m1, m2, two, False)
            bx, by, bz = _reference_field(h0, h1, h2, scale, one, zero)
            e0, e1, e2 = _rotate_into(q0, q1, q2, q3, bx, by, bz, two, True)
            e0, e1, e2 = e0 - m0, e1 - m1, e2 - m2  # f_b
            f0, f1, f2 = f0 + e0 * bz, f1 + e1 * bz, f2 + e2 * bz  # f_g + b_z f_b
        # the gradient's direction
        z0, z1, z2, z3 = _quat_times_vector(q0, q1, q2, q3, f0, f1, f2)
        s0, s1, s2, s3 = z3, z2, -z1, -z0
        kappa = f2
        if magnetometer:
            x0, x1, x2, x3 = _quat_times_vector(q0, q1, q2, q3, e0, e1, e2)
            x0, x1, x2, x3 = x0 * bx, x1 * bx, x2 * bx, x3 * bx
            s0, s1, s2, s3 = s0 + x1, s1 - x0, s2 + x3, s3 - x2
            kappa = e0 * bx
            kappa = kappa + f2
        s0, s1, s2, s3 = s0 - q0 * kappa, s1 - q1 * kappa, s2 - q2 * kappa, s3 - q3 * kappa
        s0, s1, s2, s3 = _normalize4(s0, s1, s2, s3, tiny, True)
        dt = S[_GDT * B + j]
        g0, g1, g2 = S[_GG * B + j], S[(_GG + 1) * B + j], S[(_GG + 2) * B + j]
        n0, n1, n2, n3 = _integrate_rate(q0, q1, q2, q3, g0, g1, g2, dt, half)
        beta = S[_GBETA * B + j]
        s0, s1, s2, s3 = s0 * beta, s1 * beta, s2 * beta, s3 * beta
        s0, s1, s2, s3 = s0 * dt, s1 * dt, s2 * dt, s3 * dt
        n0, n1, n2, n3 = _normalize4(n0 - s0, n1 - s1, n2 - s2, n3 - s3, tiny, False)
        take = not masked or mask[j]  # a select, not a branch: the loop stays vectorizable
        S[_GQ * B + j] = n0 if take else q0
        S[(_GQ + 1) * B + j] = n1 if take else q1
        S[(_GQ + 2) * B + j] = n2 if take else q2
        S[(_GQ + 3) * B + j] = n3 if take else q3


@njit(cache=True, error_model="numpy")
def madgwick6(S: np.ndarray, c: np.ndarray, mask: np.ndarray, masked: bool) -> None:
    """Madgwick's 6-axis update of every env, in place (see the module docstring)."""
    vectors_256()
    _madgwick(S, c, mask, masked, False)


@njit(cache=True, error_model="numpy")
def madgwick9(S: np.ndarray, c: np.ndarray, mask: np.ndarray, masked: bool) -> None:
    """Madgwick's 9-axis update (earth-field scale ``c[5]``) of every env, in place."""
    vectors_256()
    _madgwick(S, c, mask, masked, True)


# ---- Mahony ------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def _mahony(S, c, mask, masked, magnetometer):
    """The update of every env (``S`` flat, Mahony's layout); envs out of ``mask`` (if ``masked``) keep
    their quaternion and bias estimate."""
    vectors_256()
    two, half, one, zero = c[0], c[1], c[3], c[4]
    tiny = c[2]
    B = mask.shape[0]
    _normalize_samples(S, c, B, _HA, _HM, 0, magnetometer, False)
    for j in range(B):
        q0, q1, q2, q3 = S[_HQ * B + j], S[(_HQ + 1) * B + j], S[(_HQ + 2) * B + j], S[(_HQ + 3) * B + j]
        a0, a1, a2 = S[_HA * B + j], S[(_HA + 1) * B + j], S[(_HA + 2) * B + j]
        v0, v1, v2 = _gravity_up(q0, q1, q2, q3, two)
        e0, e1, e2 = _cross(a0, a1, a2, v0, v1, v2)  # ω_mes = â × v̂
        if magnetometer:
            m0, m1, m2 = S[_HM * B + j], S[(_HM + 1) * B + j], S[(_HM + 2) * B + j]
            h0, h1, h2 = _rotate_into(q0, q1, q2, q3, m0, m1, m2, two, False)
            bx, by, bz = _reference_field(h0, h1, h2, one, one, zero)
            w0, w1, w2 = _rotate_into(q0, q1, q2, q3, bx, by, bz, two, True)
            d0, d1, d2 = _cross(m0, m1, m2, w0, w1, w2)
            e0, e1, e2 = e0 + d0, e1 + d1, e2 + d2
        kp, ki, dt = S[_HKP * B + j], S[_HKI * B + j], S[_HDT * B + j]
        t0, t1, t2 = e0 * ki, e1 * ki, e2 * ki
        t0, t1, t2 = t0 * dt, t1 * dt, t2 * dt
        o0, o1, o2 = S[_HB * B + j], S[(_HB + 1) * B + j], S[(_HB + 2) * B + j]
        b0, b1, b2 = o0 - t0, o1 - t1, o2 - t2  # b̂ ← b̂ − k_I ω_mes Δt
        w0, w1, w2 = S[_HG * B + j] - b0, S[(_HG + 1) * B + j] - b1, S[(_HG + 2) * B + j] - b2
        w0, w1, w2 = w0 + e0 * kp, w1 + e1 * kp, w2 + e2 * kp  # Ω = ω − b̂ + k_P ω_mes
        n0, n1, n2, n3 = _integrate_rate(q0, q1, q2, q3, w0, w1, w2, dt, half)
        n0, n1, n2, n3 = _normalize4(n0, n1, n2, n3, tiny, False)
        take = not masked or mask[j]  # a select, not a branch: the loop stays vectorizable
        S[_HQ * B + j] = n0 if take else q0
        S[(_HQ + 1) * B + j] = n1 if take else q1
        S[(_HQ + 2) * B + j] = n2 if take else q2
        S[(_HQ + 3) * B + j] = n3 if take else q3
        S[_HB * B + j] = b0 if take else o0
        S[(_HB + 1) * B + j] = b1 if take else o1
        S[(_HB + 2) * B + j] = b2 if take else o2


@njit(cache=True, error_model="numpy")
def mahony6(S: np.ndarray, c: np.ndarray, mask: np.ndarray, masked: bool) -> None:
    """Mahony's 6-axis update of every env, in place (see the module docstring)."""
    vectors_256()
    _mahony(S, c, mask, masked, False)


@njit(cache=True, error_model="numpy")
def mahony9(S: np.ndarray, c: np.ndarray, mask: np.ndarray, masked: bool) -> None:
    """Mahony's 9-axis update of every env, in place."""
    vectors_256()
    _mahony(S, c, mask, masked, True)
