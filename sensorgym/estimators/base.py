"""What every attitude estimator shares, and the place a new one goes.

An estimator is a class with a per-step update written once against an ops namespace (numpy or torch,
:mod:`sensorgym.estimators._ops`), batched over ``B`` envs, working in place on an
:class:`~sensorgym.estimators.state.EstimatorState`. The base class owns everything around that update:
allocating the state, initializing it from a sample or a given quaternion, copying a step's samples in,
normalizing and committing the new quaternion for the envs that took a sample (the others hold), the
offline :meth:`AttitudeEstimator.run` over a log, and the outputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from . import dispatch
from . import quaternion as quat
from .state import EstimatorState, Padded, cross, pad

__all__ = [
    "AttitudeEstimator",
    "gravity_up",
    "integrate_rate",
    "normalize3",
    "normalize_rows",
    "quat_times_vector",
    "reference_field",
    "rotate_into",
]


class AttitudeEstimator:
    """Base class of the attitude estimators (:class:`~sensorgym.estimators.Madgwick`,
    :class:`~sensorgym.estimators.Mahony`), and the extension point for another one.

    A subclass declares its gains (:attr:`gain_names`, each a constructor keyword and one value per env in
    the state), its own persistent state rows (:attr:`state_rows`, e.g. a bias estimate; each is zeroed at
    :meth:`initialize`) and its scratch rows (:attr:`scratch_rows`; a block of 5 rows named in
    :attr:`padded_rows` is a padded 3-vector), and implements :meth:`_step`: from the state and the
    step's inputs (``arrays.g`` gyroscope, ``arrays.a`` accelerometer and ``arrays.m`` magnetometer, each
    a padded 3-vector whose ``.v`` is ``(3, B)``; only ``.v`` is up to date), write the unnormalized new
    quaternion into ``arrays.qn`` ``(4, B)`` and each state row's new value into ``arrays.<name>_new``,
    using only the ops of ``state.ops`` (each writes into its last argument; no allocation, and no branch
    on the data, as the step is recorded once and replayed: :meth:`plan`). The base class normalizes and
    commits. Nothing in the engine needs to change.

    Example (a gyro-only integrator as a third estimator; its ``run`` comes with the base class):
        >>> import numpy as np
        >>> from sensorgym.estimators import AttitudeEstimator, integrate_rate, pad
        >>> class GyroOnly(AttitudeEstimator):
        ...     def _step(self, state, magnetometer):
        ...         pad(state.ops, state.arrays.g)  # refresh g's cyclic copy before a cross product
        ...         integrate_rate(state.ops, state.arrays, state.arrays.g)
        >>> gyr = np.tile([0.0, 0.0, np.pi / 2], (100, 1))  # a quarter turn per second about z
        >>> q = GyroOnly(rate=100.0).run(gyr, np.tile([0.0, 0.0, 9.81], (100, 1)))
        >>> np.round(np.degrees(2 * np.arctan2(q[-1, 3], q[-1, 0])), 2)
        np.float64(90.0)
    """

    #: the gains: constructor keywords, one ``(B,)`` row each in the state
    gain_names: ClassVar[tuple[str, ...]] = ()
    #: the estimator's own persistent state besides the quaternion: name -> rows
    state_rows: ClassVar[dict[str, int]] = {}
    #: the step's scratch: name -> rows
    scratch_rows: ClassVar[dict[str, int]] = {}
    #: which blocks of 5 rows are padded 3-vectors
    padded_rows: ClassVar[tuple[str, ...]] = ()

    def __init__(self, rate: float, **gains: float | Sequence[float]) -> None:
        name = type(self).__name__
        if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
            raise ValueError(f"{name}(rate={rate!r}): the sample rate in Hz must be a positive number")
        unknown = set(gains) - set(self.gain_names)
        if unknown:
            raise TypeError(f"{name}: unknown gain(s) {sorted(unknown)}; expected {list(self.gain_names)}")
        self.rate = float(rate)
        self.gains: dict[str, float | tuple[float, ...]] = {}
        #: the number of envs the gains are given for (None: one value for every env)
        self.gain_batch: int | None = None
        for key in self.gain_names:
            value = gains.get(key, 0.0)
            values = (value,) if isinstance(value, (int, float)) else tuple(value)
            if not values or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                for v in values
            ):
                raise ValueError(
                    f"{name}({key}={value!r}): a gain is a number >= 0, or one such number per env"
                )
            if isinstance(value, (int, float)):
                self.gains[key] = float(value)
                continue
            if self.gain_batch not in (None, len(values)):
                raise ValueError(
                    f"{name}({key}={value!r}): {len(values)} values; other gains have {self.gain_batch}"
                )
            self.gain_batch = len(values)
            self.gains[key] = tuple(float(v) for v in values)

    def __repr__(self) -> str:
        gains = ", ".join(f"{k}={v!r}" for k, v in self.gains.items())
        return f"{type(self).__name__}({gains}, rate={self.rate!r})"

    # ---- the state ---------------------------------------------------------------------------------

    def new_state(
        self,
        batch: int,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
        executor: str = "torch",
    ) -> EstimatorState:
        """A state for ``batch`` envs: identity quaternions, zero own state, this estimator's gains (one
        value for all envs, or one per env) and sample interval (write ``state.tensors[gain]`` /
        ``["dt"]`` per env to change them)."""
        if self.gain_batch is not None and batch != self.gain_batch:
            raise ValueError(
                f"{self!r}.new_state({batch}): the gains are given for {self.gain_batch} envs, not {batch}"
            )
        blocks = {"q": 6, **self.state_rows}
        blocks.update({g: 1 for g in self.gain_names})
        blocks.update({"dt": 1, "g": 5, "a": 5, "m": 5, "qn": 4, "qq": 4, "nrm": 1, "t3": 3, "u3": 3})
        blocks.update({f"{k}_new": rows for k, rows in self.state_rows.items()})
        blocks.update(self.scratch_rows)
        persistent = ("q", *self.state_rows, *self.gain_names, "dt")
        state = EstimatorState(
            blocks,
            persistent,
            ("g", "a", "m", *self.padded_rows),
            batch,
            dtype=dtype,
            device=device,
            executor=executor,
        )
        state.tensors["q"][0] = 1.0
        for g in self.gain_names:
            state.tensors[g].copy_(torch.tensor(self.gains[g], dtype=torch.float64))
        state.tensors["dt"].fill_(1.0 / self.rate)
        return state

    def initialize(
        self,
        state: EstimatorState,
        acc: Any = None,
        mag: Any = None,
        q0: Any = None,
        mask: Any = None,
    ) -> None:
        """Start the envs in ``mask`` (all if None) from ``q0`` (``(4,)`` or ``(B, 4)``, normalized here)
        or, without it, from one accelerometer (and magnetometer) sample ``(B, 3)`` (see
        :func:`~sensorgym.estimators.quaternion.quat_from_acc_mag`); the estimator's own state rows start
        at zero. Numpy or torch inputs; this allocates (it runs at a reset, not every step)."""
        device = state.storage.device
        on_cpu = device.type == "cpu"  # numpy's correctly rounded sqrt there (see _ops)
        if q0 is not None:
            q, _ = quat._normalized(_as_float64(q0, on_cpu, device).reshape(-1, 4))
        elif acc is not None:
            a = _as_float64(acc, on_cpu, device).reshape(-1, 3)
            q = (
                quat.quat_from_acc(a)
                if mag is None
                else quat.quat_from_acc_mag(a, _as_float64(mag, on_cpu, device).reshape(-1, 3))
            )
        else:
            raise ValueError(f"{type(self).__name__}.initialize: give q0 or a first accelerometer sample")
        q = torch.from_numpy(np.ascontiguousarray(q)) if on_cpu else q
        q = q.to(device=device, dtype=state.storage.dtype).expand(state.batch, 4)
        rows = [state.tensors["q"], *(state.tensors[k] for k in self.state_rows)]
        values = [q.T, *(torch.zeros_like(t) for t in rows[1:])]
        for t, v in zip(rows, values, strict=True):
            if mask is None:
                t.copy_(v)
            else:
                t.copy_(torch.where(torch.as_tensor(mask, device=device), v, t))

    # ---- the step ----------------------------------------------------------------------------------

    def update(self, state: EstimatorState, gyr: Any, acc: Any, mag: Any = None, mask: Any = None) -> None:
        """One sample per env: ``gyr``, ``acc``, ``mag`` ``(B, 3)`` arrays of the state's executor (rad/s;
        ``mag=None``: the 6-axis update). Envs where ``mask`` ``(B,)`` is False hold their state."""
        host = state.host
        if host is None:  # off the CPU: the executor's copies
            ops, arr = state.ops, state.arrays
            ops.copyto(arr.g.v, gyr.T)
            ops.copyto(arr.a.v, acc.T)
            if mag is not None:
                ops.copyto(arr.m.v, mag.T)
        else:  # numpy's copies into the same memory, whatever the executor: the same values, faster
            to_host = dispatch.host
            host.g[...] = to_host(gyr).T
            host.a[...] = to_host(acc).T
            if mag is not None:
                host.m[...] = to_host(mag).T
        self.step(state, mag is not None, mask)

    def step(self, state: EstimatorState, magnetometer: bool, mask: Any = None) -> None:
        """One update from the samples already in ``state.arrays`` (``g.v``, ``a.v``, ``m.v``, ``(3, B)``);
        envs where ``mask`` ``(B,)`` is False hold. Runs the compiled kernel of a built-in estimator on a
        CPU state where numba is installed, else the step's recorded op list (:meth:`plan`); the same
        bits either way (:mod:`sensorgym.estimators.dispatch`)."""
        if dispatch.enabled:
            key = (self, magnetometer)
            call = state.kernels.get(key, _UNBOUND)
            if call is _UNBOUND:
                call = state.kernels[key] = dispatch.bind(self._kernel_spec(magnetometer), state)
            if call is not None:
                kernel, (storage, consts, own_mask) = call
                if mask is None:
                    kernel(storage, consts, own_mask, False)
                else:
                    kernel(storage, consts, dispatch.kernel_mask(mask, own_mask), True)
                return
        if mask is not None:
            if state.host is None:
                state.ops.copyto(state.arrays.mask, mask)
            else:
                dispatch.copy(state.host.mask, dispatch.host(mask))
        for fn, args in self.plan(state, magnetometer, mask is not None):
            fn(*args)

    def _kernel_spec(self, magnetometer: bool) -> tuple[str, str, float] | None:
        """The compiled kernel of this step, ``(name in kernels, its layout there, earth-field scale)``, or
        None (a third estimator's default: its tape runs)."""
        return None

    def plan(self, state: EstimatorState, magnetometer: bool, masked: bool) -> list[tuple[Any, tuple]]:
        """The step as a flat list of ``(op, args)`` with every array view bound, recorded once per state
        and variant by running the step's code against a recorder: replaying it costs the ops themselves,
        with no attribute look-up, helper call or view made per step. The step's code is straight-line
        (its only branches are on ``magnetometer`` and ``masked``), so the list is the step."""
        key = (self, magnetometer, masked)
        tape = state.plans.get(key)
        if tape is None:
            tape = state.plans[key] = self._record(state, magnetometer, masked)
        return tape

    def _record(self, state: EstimatorState, magnetometer: bool, masked: bool) -> list[tuple[Any, tuple]]:
        real = state.ops
        recorder = state.ops = _Recorder(real)  # type: ignore[assignment]
        try:
            arr = state.arrays
            pad(recorder, arr.qv)
            self._step(state, magnetometer)
            normalize_rows(recorder, arr.qn, arr.qq, arr.nrm)
            pairs = [(arr.q, arr.qn)] + [(getattr(arr, k), getattr(arr, f"{k}_new")) for k in self.state_rows]
            for dst, src in pairs:
                if masked:
                    recorder.select_into(dst, arr.mask, src)
                else:
                    recorder.copyto(dst, src)
        finally:
            state.ops = real
        return recorder.tape

    def _step(self, state: EstimatorState, magnetometer: bool) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _step")

    # ---- outputs -----------------------------------------------------------------------------------

    def quaternion(self, state: EstimatorState) -> Any:
        """The current estimate, ``(B, 4)`` ``[w, x, y, z]`` (a view of the state: copy it to keep it)."""
        return state.arrays.q.T

    def projected_gravity(self, state: EstimatorState, out: Any) -> Any:
        """Write gravity's direction in the sensor frame (``[0, 0, -1]`` when level) into ``out``
        ``(B, 3)`` (an array of the state's executor), in place."""
        ops, arr = state.ops, state.arrays
        pad(ops, arr.qv)
        gravity_up(ops, arr, out.T)
        return ops.neg(out, out)

    # ---- offline -----------------------------------------------------------------------------------

    def run(self, gyr: Any, acc: Any, mag: Any = None, q0: Any = None) -> Any:
        """Run over a log: ``gyr`` (rad/s), ``acc`` and optionally ``mag`` as ``(N, 3)`` or ``(B, N, 3)``,
        all numpy or all torch, one sample per ``1/rate`` s. Returns the unit quaternions ``[w, x, y, z]``
        ``(N, 4)`` / ``(B, N, 4)`` of the same kind, dtype (float32 stays float32, anything else runs in
        float64) and device; row ``n`` is the estimate after consuming sample ``n``. ``q0`` (``(4,)`` or
        ``(B, 4)``) is the state before sample 0; without it, the first sample gives it. With gains given
        per env (``G`` values), one ``(N, 3)`` log runs through all ``G`` filters: ``(G, N, 4)``."""
        gyr, acc, mag, single = _check_log(type(self).__name__, gyr, acc, mag)
        if self.gain_batch is not None and single:
            gyr, acc, mag = (None if x is None else _repeat(x, self.gain_batch) for x in (gyr, acc, mag))
            single = False
        torch_in = isinstance(gyr, torch.Tensor)
        batch, n = gyr.shape[0], gyr.shape[1]
        dtype = _state_dtype(gyr.dtype)
        device = gyr.device if torch_in else "cpu"
        state = self.new_state(batch, dtype=dtype, device=device, executor="torch" if torch_in else "numpy")
        out = torch.zeros(n, 4, batch, dtype=dtype, device=device)
        if n:
            self.initialize(state, acc[:, 0], None if mag is None else mag[:, 0], q0)
            self._run_into(state, out, gyr, acc, mag)
        result = out.permute(2, 0, 1).contiguous()
        if not torch_in:
            result = result.numpy()
        return result[0] if single else result

    def _run_into(self, state: EstimatorState, out: torch.Tensor, gyr: Any, acc: Any, mag: Any) -> None:
        ops, arr = state.ops, state.arrays
        lib = torch if isinstance(gyr, torch.Tensor) else np
        # each step's samples as contiguous (3, B) rows: one transposed copy of the log, not one per step
        g, a = (_to_rows(x, state, lib) for x in (gyr, acc))
        m = None if mag is None else _to_rows(mag, state, lib)
        out_a = state._binding.array(out)
        for i in range(g.shape[0]):
            ops.copyto(arr.g.v, g[i])
            ops.copyto(arr.a.v, a[i])
            if m is not None:
                ops.copyto(arr.m.v, m[i])
            self.step(state, m is not None, None)
            ops.copyto(out_a[i], arr.q)


_UNBOUND = object()  # no kernel looked up yet for this (estimator, variant) and state


class _Recorder:
    """Stands in for an ops namespace while a step is planned: each op call is appended to ``tape``
    (with its arguments, the bound views) instead of running."""

    def __init__(self, ops: Any) -> None:
        self._ops = ops
        self.tape: list[tuple[Any, tuple]] = []

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._ops, name)

        def record(*args: Any) -> None:
            self.tape.append((fn, args))

        return record


# ---- the shared pieces of a step (ops, in place) -----------------------------------------------------


def normalize_rows(ops: Any, x: Any, sq: Any, n: Any, keep_zero: bool = False) -> Any:
    """``x /= |x|`` over its rows (``x`` ``(4, B)``; ``sq`` ``(4, B)`` and ``n`` ``(B,)`` scratch);
    ``keep_zero``: a zero ``x`` stays zero instead of turning NaN."""
    ops.mul(x, x, sq)
    ops.add(sq[0], sq[1], n)
    ops.add(n, sq[2], n)
    ops.add(n, sq[3], n)
    ops.sqrt(n, n)
    if keep_zero:
        ops.lower_bound(n, _TINY[n.dtype], n)
    return ops.div(x, n, x)


def normalize3(ops: Any, x: Any, sq: Any, n: Any, flag: Any = None) -> Any:
    """``x /= |x|`` for a 3-vector ``(3, B)``; a zero vector stays zero (so its correction vanishes).
    ``flag`` (optional ``(B,)``) receives 1 where ``x`` was non-zero, else 0."""
    ops.mul(x, x, sq)
    ops.add(sq[0], sq[1], n)
    ops.add(n, sq[2], n)
    if flag is not None:
        ops.positive(n, flag)
    ops.sqrt(n, n)
    ops.lower_bound(n, _TINY[n.dtype], n)  # 0 / tiny = 0, where 0 / 0 would be NaN
    return ops.div(x, n, x)


def gravity_up(ops: Any, arr: Any, out: Any) -> Any:
    """``out`` ``(3, B)`` = the earth's up axis in the sensor frame, ``R(q)ᵀ e_z`` = ``[2(q1q3 - q0q2),
    2(q2q3 + q0q1), q0² - q1² - q2² + q3²]`` (``arr.qv`` padded; scratch ``t3``, ``u3``, ``qq``)."""
    p, s, sq = arr.t3, arr.u3, arr.qq
    ops.mul(arr.qv.v, arr.q0, p)  # q0q1, q0q2, q0q3
    ops.mul(arr.qv.v, arr.qv.s2, s)  # q1q3, q2q1, q3q2
    ops.mul(arr.q, arr.q, sq)
    ops.sub(s[0], p[1], out[0])
    ops.add(s[2], p[0], out[1])
    ops.mul(out[0:2], 2.0, out[0:2])
    ops.sub(sq[0], sq[1], out[2])
    ops.sub(sq[3], sq[2], p[0])
    return ops.add(out[2], p[0], out[2])


def rotate_into(ops: Any, arr: Any, x: Padded, out: Any, c: Padded, d: Any, tmp: Any, inverse: bool) -> Any:
    """``out = R(q) x`` (sensor to earth; ``inverse``: ``R(q)ᵀ x``, earth to sensor) for the unit state
    quaternion, by ``x + 2·(±q0 (qv × x) + qv × (qv × x))``. ``x`` padded and up to date; ``c`` (padded),
    ``d`` and ``tmp`` ``(3, B)`` scratch; ``out`` ``(3, B)``."""
    cross(ops, arr.qv, x, c.v, tmp)
    pad(ops, c)
    cross(ops, arr.qv, c, d, tmp)
    ops.mul(c.v, arr.q0, tmp)
    (ops.sub if inverse else ops.add)(d, tmp, tmp)
    ops.mul(tmp, 2.0, tmp)
    return ops.add(x.v, tmp, out)


def quat_times_vector(ops: Any, arr: Any, w: Padded, out: Any, tmp: Any) -> Any:
    """``out`` ``(4, B)`` = ``q ⊗ (0, w)`` for the state quaternion: ``[-(qv · w), q0 w + qv × w]``
    (``w`` padded and up to date; ``tmp`` ``(3, B)`` scratch)."""
    ops.mul(arr.qv.v, w.v, tmp)
    ops.add(tmp[0], tmp[1], out[0])
    ops.add(out[0], tmp[2], out[0])
    ops.neg(out[0], out[0])
    cross(ops, arr.qv, w, out[1:4], tmp)
    ops.mul(w.v, arr.q0, tmp)
    return ops.add(out[1:4], tmp, out[1:4])


def integrate_rate(ops: Any, arr: Any, w: Padded) -> Any:
    """``arr.qn = q + (dt/2)·q ⊗ (0, w)``: first-order integration of the body rate ``w`` (padded, up to
    date; not changed) from the state quaternion. Scratch: ``arr.qq`` (the product), ``arr.t3``."""
    prod = arr.qq
    quat_times_vector(ops, arr, w, prod, arr.t3)
    ops.mul(prod, arr.dt, prod)
    ops.mul(prod, 0.5, prod)
    return ops.add(arr.q, prod, arr.qn)


def reference_field(ops: Any, h: Any, b: Padded, tmp: Any, scale: float = 1.0) -> Any:
    """The earth-frame field reference from ``h = R(q) m`` ``(3, B)``: ``b = scale·[sqrt(hx² + hy²), 0,
    hz]`` (padded; its middle row is never written, so it stays 0). ``tmp`` ``(3, B)`` scratch."""
    ops.mul(h[0:2], h[0:2], tmp[0:2])
    ops.add(tmp[0], tmp[1], b.v[0])
    ops.sqrt(b.v[0], b.v[0])
    ops.copyto(b.v[2], h[2])
    if scale != 1.0:
        ops.mul(b.v, scale, b.v)
    pad(ops, b)
    return b


_TINY = {
    np.dtype(np.float64): float(np.finfo(np.float64).tiny),
    np.dtype(np.float32): float(np.finfo(np.float32).tiny),
    torch.float64: float(np.finfo(np.float64).tiny),
    torch.float32: float(np.finfo(np.float32).tiny),
}


def _state_dtype(dtype: Any) -> torch.dtype:
    return torch.float32 if dtype in (np.float32, np.dtype(np.float32), torch.float32) else torch.float64


def _as_float64(x: Any, numpy: bool, device: torch.device) -> Any:
    """``x`` as float64: a numpy array (``numpy``) or a tensor on ``device``."""
    if numpy:
        return np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(device, torch.float64)


def _to_rows(x: Any, state: EstimatorState, lib: Any) -> Any:
    """A ``(B, N, 3)`` log as ``(N, 3, B)`` contiguous rows of the state's executor and dtype."""
    if lib is torch:
        return x.detach().to(state.storage.dtype).permute(1, 2, 0).contiguous()
    return np.ascontiguousarray(x.transpose(1, 2, 0), dtype=state.storage.dtype.__repr__().split(".")[-1])


def _repeat(x: Any, batch: int) -> Any:
    return (
        x.expand(batch, *x.shape[1:])
        if isinstance(x, torch.Tensor)
        else np.broadcast_to(x, (batch, *x.shape[1:]))
    )


def _check_log(name: str, gyr: Any, acc: Any, mag: Any) -> tuple[Any, Any, Any, bool]:
    """The log as ``(B, N, 3)`` arrays of one kind, and whether it came as ``(N, 3)``."""
    given = {"gyr": gyr, "acc": acc} if mag is None else {"gyr": gyr, "acc": acc, "mag": mag}
    kinds = {isinstance(x, torch.Tensor) for x in given.values()}
    if len(kinds) > 1:
        names = "gyr and acc" if mag is None else "gyr, acc and mag"
        raise TypeError(f"{name}.run: {names} must all be numpy arrays or all torch tensors")
    if kinds == {False}:
        given = {k: np.asarray(x) for k, x in given.items()}
    shapes = {k: tuple(x.shape) for k, x in given.items()}
    shape = shapes["gyr"]
    if len(shape) not in (2, 3) or shape[-1] != 3 or any(s != shape for s in shapes.values()):
        raise ValueError(
            f"{name}.run: expected gyr, acc{', mag' if mag is not None else ''} of one shape (N, 3) or "
            f"(B, N, 3); got {', '.join(f'{k} {s}' for k, s in shapes.items())}"
        )
    single = len(shape) == 2
    out = [x[None] if single else x for x in given.values()]
    return out[0], out[1], (out[2] if mag is not None else None), single
