"""The compiled (numba) form of ``AttitudeSensor``'s step, one call per branch and step:

* the ground truth (and the measured branch without an estimator): :func:`truth_outputs`, the outputs
  from the true orientations where they lie (the state's own array);
* the measured branch with a built-in estimator: :func:`madgwick6_outputs` and the three others, the
  samples copied into the estimator state's rows (as ``AttitudeEstimator.update`` copies them), the
  estimator's own kernel from :mod:`sensorgym.estimators.kernels`, then :func:`fill`.

At ``B = 1`` every Python call between the pieces costs about as much as the piece (the op-by-op fill
costs a numpy call per op, about 25 µs for the projected gravity and the rate, where the IMU's whole step
costs 10-30 µs), hence one call. :func:`fill` does, per return column, the scalar operations the op route
(:meth:`Outputs.fill <sensorgym.sensors.mujoco.attitude_outputs.Outputs.fill>`) does for that output,
in the same order and with the same operands, in float32 (the constants come in a float32 array, so
nothing is promoted to float64): the two routes give the same bits (tests/sensors/test_attitude_kernel.py),
and the op route stays the reference (on CUDA, without numba, or with ``SENSORGYM_ESTIMATOR_KERNELS=0``).
The one exception is roll/pitch's ``atan2`` and ``asin``: numba's float32 ones differ from numpy's (in 40%
and 19% of random arguments, measured) and from torch's, so :func:`fill` writes their arguments into
``ang`` ``(3, B n)`` and the executor's own functions finish them (``Outputs.finish_angles``),
:func:`scatter` placing them.

Layouts. An output block's recipe is a row of ``plan``: the output (0 projected gravity, 1 quaternion, 2
roll/pitch, 3 bias, 4 rate), the sensor ``j`` and its first return column; env ``b``'s sensor ``j`` is
column ``b n + j`` of the rows ``q`` ``(4, B n)`` and ``bias`` ``(3, B n)``. The branch's samples come as
``x``, a flat view of its ``(B, 9 n)`` buffer whose rows start ``w`` elements apart (the buffer may be a
column block of a wider one): env ``b``'s sensor ``j`` reads ``x[w b + 9 j + k]``, ``k`` = 0-2 the
accelerometer, 3-5 the gyroscope, 6-8 the magnetometer. ``out`` is the ring's slot ``(B, C)``.

Speed. The loops vectorize only where their strides are known when they compile (the store stride ``C``,
the sample stride ``w``, the sensor count ``n``): with them known at run time the compiler leaves the loops
scalar, 3-4x slower at ``B = 4096`` (measured). So the kernels take the common case, one sensor per class
whose samples are its whole buffer (``w`` = 9) and ``C`` of 3 or 6, through branches where those are
constants (:func:`_strides`, :func:`_load`), and every other layout through the same code with them as
variables.

Calls. A step calls its kernel with one argument, the branch's ``table`` (its :class:`Table`: the
addresses and sizes of every buffer it reads and writes, made once per branch buffer and ring slot), plus
the true orientations, which are the state's own array and so a new one each step. numba's dispatch of a
call costs about 0.05 µs per array argument (it types and unboxes each): an empty kernel with the
measured branch's former 13 arguments (10 arrays) costs 0.65-0.8 µs a call at ``B = 1``, one table
0.14 µs, and its compiled entry point (:func:`entry`) 0.07 µs (measured), while the kernel's own work
there is under 0.3 µs. Inside, :func:`_f32` views each buffer from its address as a C-ordered array, which is
what the array form indexed (flat views of contiguous buffers), so the compiled loops are the same (and,
unlike ``numba.carray``, no separately compiled function is inlined into the kernel: every compiled function
here that numba does not inline itself first calls :func:`~sensorgym.estimators.kernels.vectors_256`, which
keeps its loops to 256-bit vectors, and LLVM would drop that mark on inlining a callee without it). The table
holds addresses only: :class:`Table` keeps the arrays it was made from (so their memory lives as long as the
table), and its caller keeps the table with the buffers it binds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from ...estimators.kernels import (
    MADGWICK_ROWS,
    MAHONY_ROWS,
    madgwick6,
    madgwick9,
    mahony6,
    mahony9,
    vectors_256,
)

__all__ = [
    "CONSTS",
    "Table",
    "entry",
    "fill",
    "madgwick6_outputs",
    "madgwick9_outputs",
    "mahony6_outputs",
    "mahony9_outputs",
    "scatter",
    "truth_outputs",
]

#: the float32 constants the kernel reads: 2, -2, 1, -1
CONSTS = np.array([2.0, -2.0, 1.0, -1.0], dtype=np.float32)

# a table's slots (int64): envs B, sensors n, the samples (address, row stride w), the plan (address, rows),
# the fill's constants, the slot (address, columns C), ang, the bias (address, component and column
# strides), the estimator's state (address, size), its constants, the take mask, whether it applies
ENVS, N, X, W, PLAN, PLAN_ROWS, FILL_CONSTS, OUT, COLS, ANG, BIAS, BIAS_K, BIAS_R = range(13)
STATE, STATE_SIZE, EST_CONSTS, MASK, MASKED = range(13, 18)
SLOTS = 18


class Table:
    """A branch's kernel arguments as one int64 array of addresses and sizes (see the module docstring),
    keeping the arrays it was made from (so their memory outlives the table).

    Args:
        x, w: the samples, a flat float32 view of the branch's ``(B, 9 n)`` buffer, and its row stride.
        plan, n, out, ang: the output plan, the sensor count, the ring's slot ``(B, C)``, roll/pitch's
            arguments ``(3, B n)`` (float32, C order).
        bias: the ``(3, B n)`` float32 bias rows (any strides, over contiguous memory).
        state, consts, mask, masked: the estimator's flat storage, its constants, the take mask ``(B n,)``
            and whether the mask applies (the measured branch with an estimator; else None).
    """

    def __init__(self, x: np.ndarray, w: int, plan: np.ndarray, n: int, out: np.ndarray, ang: np.ndarray,
                 bias: np.ndarray, state: Any = None, consts: Any = None, mask: Any = None,
                 masked: bool = False) -> None:  # fmt: skip
        arrays = [(x, np.float32), (plan, np.int64), (out, np.float32), (ang, np.float32)]
        if state is not None:
            arrays += [(state, np.float32), (consts, np.float32), (mask, np.bool_)]
        # the kernel views each buffer from its address alone: anything else would be read out of bounds
        if any(a.dtype != dtype or not a.flags.c_contiguous for a, dtype in arrays) or (
            bias.dtype != np.float32 or bias.shape != (3, ang.shape[1]) or ang.shape[0] != 3
            or x.size < (out.shape[0] - 1) * w + 9 * n or ang.shape[1] != out.shape[0] * n
            or (state is not None and (mask.shape != (ang.shape[1],) or consts.shape != (6,)))
        ):  # fmt: skip
            raise ValueError("attitude_kernel.Table: a buffer of another dtype, shape or layout")
        t = np.zeros(SLOTS, dtype=np.int64)
        t[ENVS], t[N], t[X], t[W] = out.shape[0], n, x.ctypes.data, w
        t[PLAN], t[PLAN_ROWS], t[FILL_CONSTS] = plan.ctypes.data, plan.shape[0], CONSTS.ctypes.data
        t[OUT], t[COLS], t[ANG] = out.ctypes.data, out.shape[1], ang.ctypes.data
        t[BIAS], t[BIAS_K], t[BIAS_R] = bias.ctypes.data, bias.strides[0] // 4, bias.strides[1] // 4
        if state is not None:
            t[STATE], t[STATE_SIZE], t[EST_CONSTS] = state.ctypes.data, state.size, consts.ctypes.data
            t[MASK], t[MASKED] = mask.ctypes.data, masked
        self.table = t
        self._keep = (x, plan, out, ang, bias, state, consts, mask)


def entry(kernel: Any, truth: bool) -> Any:
    """``kernel``'s compiled entry point for the types a step hands it (the truth's ``(B n, 4)`` float32
    array in C order where ``truth``, then the table): a call without numba's dispatch, which first
    types every argument and looks the types up (about 0.07 µs of a 0.14 µs call of one argument in
    isolation; 0.5 µs less per B = 1 step of the sensor, measured in the pipeline). The caller hands it
    exactly those types (the entry point does not check them; ``TruthInputs.take`` reads the state's
    array where it lies only when it is one). The dispatcher itself where numba offers no entry point.
    (With ``NUMBA_DISABLE_JIT`` the compiled route is off: ``attitude_outputs._kernel``.)"""
    table = types.Array(types.int64, 1, "C")
    signature = (types.Array(types.float32, 2, "C"), table) if truth else (table,)
    compile_for = getattr(kernel, "compile", None)  # compiles or loads from the cache, once per process
    return kernel if compile_for is None else compile_for(signature)


def _viewer(dtype: Any, ndim: int) -> Any:
    """An intrinsic ``view(address, shape)``: the memory at the int64 ``address`` as a C-ordered array of
    ``dtype`` and ``shape`` (an ``ndim``-tuple of int64), built in place. What ``numba.carray`` does, but
    without a call to a separately compiled function, which LLVM would inline and so drop this module's
    vector-width mark (:func:`~sensorgym.estimators.kernels.vectors_256`)."""
    array = types.Array(dtype, ndim, "C")

    @intrinsic
    def view(typingctx: Any, address: Any, shape: Any) -> Any:
        if address != types.int64 or shape != types.UniTuple(types.int64, ndim):
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            out = make_array(array)(context, builder)
            extents = cgutils.unpack_tuple(builder, args[1], ndim)
            strides = [context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(dtype)))]
            for k in range(ndim - 1, 0, -1):  # C order: the last axis contiguous
                strides.insert(0, builder.mul(strides[0], extents[k]))
            data = builder.inttoptr(args[0], out.data.type)
            populate_array(out, data=data, shape=extents, strides=strides, itemsize=strides[-1], meminfo=None)
            return out._getvalue()

        return array(address, shape), codegen

    return view


_view_f32, _view_i64_2d = _viewer(types.float32, 1), _viewer(types.int64, 2)
_view_bool = _viewer(types.boolean, 1)


@intrinsic
def _flat(typingctx: Any, a: Any) -> Any:
    """A float32 C-ordered array of any shape as a flat view of its memory, built in place (what
    ``a.reshape(-1)`` gives, without its separately compiled call: see :func:`_viewer`). Any other dtype or
    layout is refused when the calling kernel compiles (a typing error), not read wrongly."""
    if not (isinstance(a, types.Array) and a.dtype == types.float32 and a.layout == "C"):
        return None
    flat = types.Array(types.float32, 1, "C")

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        source = make_array(a)(context, builder, value=args[0])
        out = make_array(flat)(context, builder)
        itemsize = context.get_constant(types.intp, 4)
        populate_array(out, data=source.data, shape=[source.nitems], strides=[itemsize], itemsize=itemsize,
                       meminfo=None)  # fmt: skip
        return out._getvalue()

    return flat(a), codegen


@njit(cache=True, inline="always")
def _f32(t, slot, size):
    """The float32 buffer at ``t[slot]`` as a flat C-ordered array of ``size``."""
    return _view_f32(t[slot], (size,))


@njit(cache=True, error_model="numpy", inline="always")
def _blocks(qf, sk, sb, x, w, plan, n, c, o, C):
    """The projected gravity, quaternion and rate blocks of ``plan`` into the flat slot ``o`` (rows of
    ``C``); see the module docstring. The orientations are the flat ``qf``: component ``k`` of column ``r``
    at ``qf[k sk + r sb]`` (rows ``(4, B n)``: ``sk = B n``, ``sb = 1``; the truth's ``(B n, 4)``:
    ``sk = 1``, ``sb = 4``). Inlined with ``n``, ``w``, ``C`` and ``sb`` constants where the caller knows
    them. Every offset of a block (its sensor, its first column) is folded into the base of a view, so the
    loops index with constant strides only."""
    two, mtwo = c[0], c[1]
    envs = o.shape[0] // C
    for i in range(plan.shape[0]):
        kind, j, col = plan[i, 0], plan[i, 1], plan[i, 2]
        oc = o[col:]
        at = j * sb  # sensor j's column of env b: (b n) sb further
        q0r, q1r, q2r, q3r = qf[at:], qf[sk + at :], qf[2 * sk + at :], qf[3 * sk + at :]
        step = n * sb
        if kind == 0:  # R(q)^T [0, 0, -1]
            for b in range(envs):
                q0, q1, q2, q3 = q0r[b * step], q1r[b * step], q2r[b * step], q3r[b * step]
                oc[C * b] = (q0 * q2 - q1 * q3) * two
                oc[C * b + 1] = (q2 * q3 + q0 * q1) * mtwo
                oc[C * b + 2] = ((q1 * q1 + q2 * q2) - q0 * q0) - q3 * q3
        elif kind == 1:
            for b in range(envs):
                oc[C * b], oc[C * b + 1] = q0r[b * step], q1r[b * step]
                oc[C * b + 2], oc[C * b + 3] = q2r[b * step], q3r[b * step]
        elif kind == 4:
            xj = x[9 * j + 3 :]  # sensor j's gyroscope
            for b in range(envs):
                oc[C * b], oc[C * b + 1], oc[C * b + 2] = xj[w * b], xj[w * b + 1], xj[w * b + 2]


@njit(cache=True, error_model="numpy")
def _angle_and_bias_blocks(qf, sk, sb, bias, bk, br, plan, n, c, o, C, ang):
    """The roll/pitch blocks' ``atan2`` and ``asin`` arguments into ``ang`` (flat ``(3, B n)``; the
    executor's functions finish them) and the bias blocks into ``o`` (component ``k`` of column ``r`` at
    ``bias[k bk + r br]``); strides as variables (rarer outputs)."""
    vectors_256()
    two, mtwo, one, mone = c[0], c[1], c[2], c[3]
    envs = o.shape[0] // C
    bn = envs * n
    for i in range(plan.shape[0]):
        kind, j, col = plan[i, 0], plan[i, 1], plan[i, 2]
        if kind == 2:
            for b in range(envs):
                r = b * n + j
                q0, q1, q2, q3 = qf[r * sb], qf[sk + r * sb], qf[2 * sk + r * sb], qf[3 * sk + r * sb]
                ang[r] = (q0 * q1 + q2 * q3) * two
                ang[bn + r] = (q1 * q1 + q2 * q2) * mtwo + one
                s = (q0 * q2 - q1 * q3) * two
                ang[2 * bn + r] = mone if s < mone else (one if s > one else s)
        elif kind == 3:
            for b in range(envs):
                r = b * n + j
                o[C * b + col], o[C * b + col + 1] = bias[r * br], bias[bk + r * br]
                o[C * b + col + 2] = bias[2 * bk + r * br]


@njit(cache=True, error_model="numpy", inline="always")
def _fill(qf, sk, sb, t):
    """Every output block of the table's plan from the flat orientations ``qf`` (strides ``sk``, ``sb``:
    see :func:`_blocks`) into its slot, the strides constant in the common case: one sensor (``n`` = 1)
    whose samples are its whole buffer (``w`` = 9), reading 3 or 6 columns (the projected gravity, with
    the rate); then the roll/pitch and bias blocks. ``sb`` is a constant at every call."""
    envs, n, w, C = t[ENVS], t[N], t[W], t[COLS]
    bn = envs * n
    x = _f32(t, X, (envs - 1) * w + 9 * n)
    plan = _view_i64_2d(t[PLAN], (t[PLAN_ROWS], 3))
    c, o = _f32(t, FILL_CONSTS, 4), _f32(t, OUT, envs * C)
    if n == 1 and w == 9 and C == 3:
        _blocks(qf, sk, sb, x, 9, plan, 1, c, o, 3)
    elif n == 1 and w == 9 and C == 6:
        _blocks(qf, sk, sb, x, 9, plan, 1, c, o, 6)
    else:
        _blocks(qf, sk, sb, x, w, plan, n, c, o, C)
    bk, br = t[BIAS_K], t[BIAS_R]
    bias = _f32(t, BIAS, 2 * bk + (bn - 1) * br + 1)
    _angle_and_bias_blocks(qf, sk, sb, bias, bk, br, plan, n, c, o, C, _f32(t, ANG, 3 * bn))


@njit(cache=True, error_model="numpy")
def fill(q: np.ndarray, t: np.ndarray) -> None:
    """Every output block ``plan[i] = (output, sensor j, first column)`` of every env into the table's slot
    from the orientation rows ``q`` ``(4, B n)`` (float32, C order; anything else is refused), but
    roll/pitch's, whose ``atan2`` arguments go to ``ang[0:2]`` and ``asin``'s to ``ang[2]`` (see the
    module docstring). One loop over the envs per block: no branch inside it."""
    vectors_256()
    _fill(_flat(q), q.shape[1], 1, t)


@njit(cache=True, error_model="numpy")
def truth_outputs(truth: np.ndarray, t: np.ndarray) -> None:
    """:func:`fill` from the true orientations ``truth`` ``(B n, 4)`` (float32, C order: the state's own
    array, or the class's copy of several sensors'), read where they lie."""
    vectors_256()
    _fill(_flat(truth), 1, 4, t)


@njit(cache=True, error_model="numpy")
def scatter(angles: np.ndarray, plan: np.ndarray, n: int, out: np.ndarray) -> None:
    """Roll/pitch ``angles`` ``(2, B n)`` into their return columns of ``out``."""
    vectors_256()
    for i in range(plan.shape[0]):
        if plan[i, 0] == 2:
            j, col = plan[i, 1], plan[i, 2]
            for b in range(out.shape[0]):
                out[b, col] = angles[0, b * n + j]
                out[b, col + 1] = angles[1, b * n + j]


# ---- the measured branch with a built-in estimator: samples in, update, outputs out, in one call --------
_MG, _MA, _MM, _MQ = MADGWICK_ROWS["g"], MADGWICK_ROWS["a"], MADGWICK_ROWS["m"], MADGWICK_ROWS["q"]
_HG, _HA, _HM, _HQ = MAHONY_ROWS["g"], MAHONY_ROWS["a"], MAHONY_ROWS["m"], MAHONY_ROWS["q"]


@njit(cache=True, error_model="numpy", inline="always")
def _copy_in(x, w, S, n, bn, rg, ra, rm, magnetometer):
    """The samples into the state's rows ``ra``, ``rg`` (and ``rm``) of the flat ``(rows, B n)`` storage
    ``S``; row offsets are constants at every call, the sensor's offsets folded into the views' bases."""
    for j in range(n):
        xj = x[9 * j :]
        a0, a1, a2 = S[ra * bn + j :], S[(ra + 1) * bn + j :], S[(ra + 2) * bn + j :]
        g0, g1, g2 = S[rg * bn + j :], S[(rg + 1) * bn + j :], S[(rg + 2) * bn + j :]
        for b in range(bn // n):
            a0[b * n], a1[b * n], a2[b * n] = xj[w * b], xj[w * b + 1], xj[w * b + 2]
            g0[b * n], g1[b * n], g2[b * n] = xj[w * b + 3], xj[w * b + 4], xj[w * b + 5]
        if magnetometer:
            m0, m1, m2 = S[rm * bn + j :], S[(rm + 1) * bn + j :], S[(rm + 2) * bn + j :]
            for b in range(bn // n):
                m0[b * n], m1[b * n], m2[b * n] = xj[w * b + 6], xj[w * b + 7], xj[w * b + 8]


@njit(cache=True, error_model="numpy", inline="always")
def _load(x, w, S, n, bn, rg, ra, rm, magnetometer):
    """:func:`_copy_in` with the sample stride and the sensor count constant in the common case (one
    sensor, its samples the whole buffer)."""
    if n == 1 and w == 9:
        _copy_in(x, 9, S, 1, bn, rg, ra, rm, magnetometer)
    else:
        _copy_in(x, w, S, n, bn, rg, ra, rm, magnetometer)


@njit(cache=True, error_model="numpy", inline="always")
def _update_and_fill(kind, t):
    """The samples into the state, the estimator's update (``kind``, a constant at every call: 0 Madgwick
    6-axis, 1 Madgwick 9-axis, 2 Mahony 6-axis, 3 Mahony 9-axis; envs where the mask applies and is False:
    held), then the outputs from its quaternion rows (the table's ``BIAS``: Mahony's bias rows, or zeros)."""
    envs, n, w = t[ENVS], t[N], t[W]
    bn = envs * n
    x, S = _f32(t, X, (envs - 1) * w + 9 * n), _f32(t, STATE, t[STATE_SIZE])
    consts, mask = _f32(t, EST_CONSTS, 6), _view_bool(t[MASK], (bn,))
    nine = kind == 1 or kind == 3
    if kind < 2:
        _load(x, w, S, n, bn, _MG, _MA, _MM, nine)
        rq = _MQ
    else:
        _load(x, w, S, n, bn, _HG, _HA, _HM, nine)
        rq = _HQ
    masked = t[MASKED] != 0
    if kind == 0:
        madgwick6(S, consts, mask, masked)
    elif kind == 1:
        madgwick9(S, consts, mask, masked)
    elif kind == 2:
        mahony6(S, consts, mask, masked)
    else:
        mahony9(S, consts, mask, masked)
    _fill(S[rq * bn : (rq + 4) * bn], bn, 1, t)


@njit(cache=True, error_model="numpy")
def madgwick6_outputs(t: np.ndarray) -> None:
    """Madgwick 6-axis: samples in, update, outputs out (see :func:`_update_and_fill`)."""
    vectors_256()
    _update_and_fill(0, t)


@njit(cache=True, error_model="numpy")
def madgwick9_outputs(t: np.ndarray) -> None:
    """Madgwick 9-axis (see :func:`_update_and_fill`)."""
    vectors_256()
    _update_and_fill(1, t)


@njit(cache=True, error_model="numpy")
def mahony6_outputs(t: np.ndarray) -> None:
    """Mahony 6-axis (see :func:`_update_and_fill`)."""
    vectors_256()
    _update_and_fill(2, t)


@njit(cache=True, error_model="numpy")
def mahony9_outputs(t: np.ndarray) -> None:
    """Mahony 9-axis (see :func:`_update_and_fill`)."""
    vectors_256()
    _update_and_fill(3, t)
