"""The per-class state of ``AttitudeSensor`` (:mod:`sensorgym.sensors.mujoco.attitude`): the estimator over
every env and sensor of the class (:class:`Estimation`: its state, gains drawn at resets, each branch's
step: the compiled call bound once, or the op route), the true orientation it reads (:class:`TruthInputs`)
and a reset's start of the state (:func:`initialize`); the outputs themselves are computed by
:mod:`~sensorgym.sensors.mujoco.attitude_outputs`. Nothing here is allocated per step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ...core.randomization import Distribution
from .attitude_outputs import Outputs
from .base import state_key

__all__ = ["Estimation", "TruthInputs", "initialize", "true_gyro_bias", "truth_key"]

_F32 = np.dtype(np.float32)  # usually the array's dtype object itself: ``is`` tells it in one comparison
#: sensorgym.estimators.dispatch (whose ``enabled`` a step reads), once a manager has built an estimator
_dispatch: Any = None


def truth_key(options: Any) -> str:
    """State key of the IMU frame's true orientation (``[w, x, y, z]``, IMU frame at the nominal mount to
    the world frame), measured inside each sub-env beside the IMU's reading."""
    return state_key(options) + ".quat"


class Estimation:
    """The estimator of one class's AttitudeSensors (all of one kind; built at build): its state over
    ``B x n`` rows (sensor ``j`` of env ``b`` is row ``b n + j``), the per-env gains and what a reset draws,
    and the buffers a step works in (allocated here: nothing is allocated per step). Its persistent state
    is ``md.extra["attitude_state"]`` (saved by ``state_dict``, restored per env)."""

    def __init__(self, md: Any) -> None:
        opts = [s.options for s in md.sensors]
        kinds = {(o.estimator, o.estimator_magnetometer, o.estimator_earth_field) for o in opts}
        if len(kinds) > 1:
            raise ValueError(
                f"AttitudeSensors of one manager run one estimator: found {sorted(kinds)}. Fix: give every "
                "AttitudeOptions the same estimator, estimator_magnetometer and estimator_earth_field."
            )
        from ...estimators import Madgwick, Mahony, dispatch  # imported when a manager builds one, not by
        from ...estimators._ops import ops_for  # sensorgym

        global _dispatch
        _dispatch = dispatch

        kind, self.magnetometer, earth = kinds.pop()
        b, n, device = md.num_envs, len(opts), md.device
        self.b, self.n = b, n
        self.draws: list[tuple[torch.Tensor, Distribution]] = []
        self.use_truth = torch.tensor([o.estimator_init == "truth" for o in opts], device=device)
        self.any_truth = False
        self._bound: dict[int, tuple] = {}
        #: per (branch buffer, ring slot): the compiled call and its bound arguments (see _bind_call)
        self._calls: dict[tuple[int, int], tuple] = {}
        self.truth = TruthInputs(md, [truth_key(o) for o in opts])
        self.estimator: Any = None
        self.fused: Any = None  # the measured branch's one compiled call (set below where it binds)
        self.consts: Any = None
        if kind == "none":  # the truth is the output: no state, nothing drawn
            self.state = None
            self.outputs = Outputs(md, ops_for(md.binding.name, md.device))
            return
        rate = 1.0 / md.dt  # the rate only sets the default interval: each sensor's is written below
        if kind == "madgwick":
            self.estimator = Madgwick(beta=0.0, rate=rate, earth_field=earth)
        else:
            self.estimator = Mahony(kp=0.0, ki=0.0, rate=rate)
        executor = md.binding.name
        self.state = self.estimator.new_state(b * n, dtype=torch.float32, device=device, executor=executor)
        tensors = self.state.tensors
        # the estimator's step is the sensor's own sample interval: T when it samples slower than dt
        interval = [_interval(o.update_period, md.dt) for o in opts]
        tensors["dt"].view(b, n).copy_(torch.tensor(interval, dtype=torch.float32).expand(b, n))
        #: per gain: its row as (B, n); the distributions a reset draws into their (B, 1) columns
        gains = {g: tensors[g].view(b, n) for g in self.estimator.gain_names}
        for j, o in enumerate(opts):
            for g, value in o.gains().items():
                if isinstance(value, Distribution):
                    self.draws.append((gains[g][:, j : j + 1], value))
                else:
                    gains[g][:, j] = value
        self.any_truth = bool(self.use_truth.any())
        self.init_error = torch.tensor(
            [math.radians(o.estimator_init_error) for o in opts], dtype=torch.float64, device=device
        )
        self.axis = torch.zeros(b, n, dtype=torch.float32, device=device)  # the initial error's axis, turns
        self.rows = self.state.storage.T.view(b, n, -1)  # the persistent state with a leading env axis
        self.outputs = Outputs(md, self.state.ops)
        # the measured branch in one compiled call (attitude_kernel's ``*_outputs``: samples in, update,
        # outputs) where the outputs are compiled and the estimator's own kernel binds to its state
        if self.outputs.compiled is not None:
            from . import attitude_kernel

            spec = self.estimator._kernel_spec(self.magnetometer)
            bound = dispatch.bind(spec, self.state)
            if bound is not None:
                self.fused, self.consts = getattr(attitude_kernel, spec[0] + "_outputs"), bound[1][1]

    def __getstate__(self) -> dict:
        """A copy binds its own buffers again (the bound views point into the original's memory)."""
        return {**self.__dict__, "_bound": {}, "_calls": {}}

    def project(self, md: Any, data: torch.Tensor, out: torch.Tensor, is_measured: bool) -> torch.Tensor:
        """This step's outputs of one branch (``data``: its ``(B, 9 n)`` samples) into ``out`` (the return
        ring's slot): the true quantities (the ground truth, which runs first, and the measured branch
        without an estimator), or the estimator's update on the measured samples and its estimate."""
        key = (id(data), id(out))  # the ground truth's data is a slot of its timeline ring, which turns
        bound = self._calls.get(key)
        if bound is None:
            bound = self._calls[key] = self._bind_call(md, data, out, is_measured)
        kernel, outputs = bound[0], self.outputs
        if is_measured and self.estimator is not None:
            if md.context.reset_mask is not None:  # start at the reset sample, then consume it
                parts = self.bind(md, data)[4]
                reset = md.context.reset_mask[:, None].expand(self.b, self.n).reshape(-1)
                initialize(md, self, parts[0], parts[2], reset)
            if kernel is None or not _dispatch.enabled:
                return self._update_ops(md, data, out)
            kernel(bound[1])  # samples in, update, outputs out: one compiled call
        else:  # the truth's quantities: the ground truth, and the measured branch without an estimator
            if outputs.true_bias and not is_measured:
                true_gyro_bias(md, self.truth.bias)
            if kernel is None:
                return self._truth_ops(md, data, out, is_measured)
            kernel(self.truth.now, bound[1])  # from the truth where it lies: one compiled call
        if outputs.angles:
            outputs.finish_angles(bound[2])
        if is_measured and outputs.noise is not None:
            self._noise(md, out)
        return out

    def _truth_ops(self, md: Any, data: torch.Tensor, out: torch.Tensor, is_measured: bool) -> torch.Tensor:
        """:meth:`project`'s truth branch op by op (the reference route)."""
        truth, outputs = self.truth, self.outputs
        truth.load()
        bias = truth.bias_rows if outputs.true_bias and not is_measured else outputs.zero_bias
        outputs.fill(truth.rows, bias, data, out)
        return self._noise(md, out) if is_measured else out

    def _update_ops(self, md: Any, data: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """:meth:`project`'s estimator branch op by op: the estimator's update (its kernel or its tape),
        then the outputs."""
        acc, gyr, mag, take, _ = self.bind(md, data)
        self.estimator.update(self.state, gyr, acc, mag if self.magnetometer else None, take)
        rows = self.state.tensors
        self.outputs.fill(rows["q"], rows.get("bias", self.outputs.zero_bias), data, out)
        return self._noise(md, out)

    def _noise(self, md: Any, out: torch.Tensor) -> torch.Tensor:
        """The measured branch's per-step white noise on the orientation outputs (``orientation_noise``)."""
        noise = self.outputs.noise
        if noise is not None:
            md.random.normal_(noise, None, 0)
            out.addcmul_(noise, self.outputs.noise_std)
        return out

    def _bind_call(self, md: Any, data: torch.Tensor, out: torch.Tensor, is_measured: bool) -> tuple:
        """The compiled call of a branch's step, ``(kernel, its table, the slot's array, the table's
        owner, data, out)`` for the branch buffer ``data`` and the ring slot ``out`` (made once; ``data``
        and ``out`` kept, as their ids are the key), with kernel None where the op route runs. The ground
        truth's kernel is ``truth_outputs``, called with the truth's array of the step first (and so is the
        measured branch's without an estimator); with one, the fused update (``*_outputs``; with a take
        mask numpy can hand the kernel as it is)."""
        c = self.outputs.compiled
        op_route = (None, None, None, None, data, out)
        if c is None or (is_measured and self.estimator is not None and self.fused is None):
            return op_route
        if not out.is_contiguous():
            return op_route
        slot = out.numpy()
        if not is_measured or self.estimator is None:  # from the truth, called with the step's array first
            bias = (self.truth.bias_rows if not is_measured else self.outputs.zero_bias).numpy()
            table = c.table(data, slot, bias)
            if table is None:
                return op_route
            return c.entry(c.truth, True), table.table, slot, table, data, out
        sampler, host = md.imperfections.sampler, self.state.host
        mask = host.mask if sampler is None else sampler.take.view(-1).numpy()
        if mask.shape != host.mask.shape or not mask.flags.c_contiguous:
            return op_route
        bias = self.state.tensors.get("bias", self.outputs.zero_bias).numpy()
        table = c.table(data, slot, bias, host.storage, self.consts, mask, sampler is not None)
        if table is None:
            return op_route
        return c.entry(self.fused, False), table.table, slot, table, data, out

    def bind(self, md: Any, data: torch.Tensor) -> tuple:
        """The samples of ``data`` ``(B, n * 9)`` (the measured or the true working buffer) as ``(B n, 3)``
        arrays (accelerometer, gyroscope, magnetometer: numpy views where the state lives on the CPU, else
        the executor's), the take mask's array and the torch views; made once per buffer (each keeps its
        tensor, so its id is not reused)."""
        bound = self._bound.get(id(data))
        if bound is None:
            x = data.view(self.b, self.n, 9)
            parts = [x[..., k : k + 3].reshape(self.b * self.n, 3) for k in (0, 3, 6)]
            sampler = md.imperfections.sampler  # which envs took a sample this step (None: all, always)
            take = None if sampler is None else md.array(sampler.take.view(-1))
            # a CPU state's update copies the samples with numpy (EstimatorState.host): hand it numpy views
            # made once here, not the executor's tensors it would view again every step
            on_host = self.state is not None and self.state.host is not None
            samples = [p.numpy() if on_host else md.array(p) for p in parts]
            bound = self._bound[id(data)] = (*samples, take, parts, data)
        return bound[:5]

    def resample(self, md: Any, mask: torch.Tensor) -> None:
        """Draw the gains (and the initial error's axis) of the envs in ``mask`` (the manager's random
        source: same seed, same draws)."""
        for out, dist in self.draws:
            md.random.sample_(dist, out, mask, 0)
        if self.any_truth:
            md.random.uniform_(self.axis, mask, 0)


class TruthInputs:
    """What the ground truth is computed from, per env and sensor: the IMU frame's true orientation this
    step, ``now`` ``(B n, 4)`` (and, for the op route, its rows ``rows`` ``(4, B n)``: :meth:`load`), and
    the gyroscope's true bias error (``bias`` ``(B, n 9)``, summed from the error terms when read;
    ``bias_rows``: its gyroscope rows ``(3, B n)``). ``now`` is the state's own array where one sensor's
    true orientation comes as a float32 numpy array in C order (what the sub-envs measure; read where it
    lies), else ``quat`` ``(B, n, 4)``, the class's copy. ``keys``: each sensor's state key."""

    def __init__(self, md: Any, keys: list[str]) -> None:
        b, n = md.num_envs, len(md.sensors)
        self.keys, self.shape = keys, (b, 4)
        self.quat = torch.zeros(b, n, 4, dtype=torch.float32, device=md.device)
        self.rows = torch.zeros(4, b * n, dtype=torch.float32, device=md.device)
        self.bias = torch.zeros(b, n * 9, dtype=torch.float32, device=md.device)
        self.bias_rows = self.bias.view(b * n, 9)[:, 3:6].T
        self._view_quat()

    def _view_quat(self) -> None:
        # ``quat`` as (B n, 4): written from the sub-envs' numpy arrays through a numpy view where the memory
        # is the CPU's (sensor j of env b is row b n + j)
        flat = self.quat.view(-1, 4)
        self.copied = flat.numpy() if flat.device.type == "cpu" else flat
        self.now: Any = self.copied
        #: the key whose entry can be read where it lies (one sensor, CPU memory), else None
        self.direct = self.keys[0] if len(self.keys) == 1 and type(self.copied) is np.ndarray else None

    def __getstate__(self) -> dict:
        """A copy views its own memory again (and holds no state array of the original's step)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("copied", "now")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._view_quat()

    def take(self, state: Any) -> None:
        """This step's true orientations, ``state[key]`` of each sensor's key, checked (a missing or
        misshapen entry raises, naming it and the fix): read where they lie (one sensor, a float32 numpy
        array in C order) or copied into ``quat``. The manager's state check calls it, so it runs before
        every capture and before anything is written."""
        if self.direct is not None and type(state) is dict:  # the common case, checked in a few operations
            src = state.get(self.direct)
            fits = (
                type(src) is np.ndarray
                and (src.dtype is _F32 or src.dtype == _F32)
                and src.shape == self.shape
            )
            if fits and src.flags.carray:  # C order, aligned, writeable: the type the compiled call takes
                self.now = src
                return
        keys, copied = self.keys, self.copied
        found = [self._entry(state, key) for key in keys]  # every entry checked before any is copied
        n = len(keys)
        for j, src in enumerate(found):
            if type(src) is np.ndarray and type(copied) is np.ndarray:
                np.copyto(copied[j::n], src)
            else:  # detached: a check runs outside the capture's no-grad mode, and a state may require grad
                self.quat[:, j].copy_(torch.as_tensor(src).detach())
        self.now = copied

    def _entry(self, state: Any, key: str) -> Any:
        found = state.get(key) if hasattr(state, "get") else None
        shape = self.shape
        if getattr(found, "shape", None) != shape and (found is None or tuple(np.shape(found)) != shape):
            got = "nothing" if found is None else f"shape {tuple(np.shape(found))}"
            raise ValueError(
                f"an AttitudeSensor needs its IMU frame's true orientation {key!r} of shape {shape} in "
                "the state (measured inside each sub-env); "
                "got " + got + ". Fix: build the env with make_sensor_vec(...) or add "
                "SimStateExtractor(env, sensors) with these options to every sub-env."
            )
        return found

    def current(self) -> torch.Tensor:
        """This step's true orientations ``(B n, 4)`` as a tensor (a view of ``now``)."""
        now = self.now
        return now if type(now) is torch.Tensor else torch.from_numpy(now)

    def load(self) -> None:
        """``rows`` from ``now`` (the op route's input; the compiled route reads ``now`` where it lies)."""
        self.rows.copy_(self.current().T)


def _interval(period: Any, dt: float) -> float:
    """A sensor's sample interval: its period when it samples slower than ``dt`` (a randomized period: its
    largest value), else ``dt``."""
    t = _number(period)
    return t if t > dt else dt


def _number(value: Any) -> float:
    return value.bounds[1] if isinstance(value, Distribution) else float(value)


def initialize(md: Any, est: Estimation, acc: torch.Tensor, mag: torch.Tensor, rows: torch.Tensor) -> None:
    """Start the rows ``rows`` (``(B n,)`` bool) of the estimator before they consume their reset sample:
    from that sample, or from the truth turned by the configured error (allocates: resets only)."""
    b, n = est.b, est.n
    use = est.use_truth.expand(b, n).reshape(-1)
    est.estimator.initialize(est.state, acc, mag if est.magnetometer else None, mask=rows & ~use)
    if est.any_truth:
        truth = est.truth.current().to(torch.float64)  # this step's
        angle = est.axis.to(torch.float64).reshape(-1) * (2 * math.pi)
        half = est.init_error.expand(b, n).reshape(-1) / 2
        # a turn by the error about the world's horizontal axis (cos, sin, 0), then the truth
        turn = torch.stack(
            [half.cos(), half.sin() * angle.cos(), half.sin() * angle.sin(), torch.zeros_like(half)], -1
        )
        est.estimator.initialize(est.state, q0=_quat_mul(turn, truth), mask=rows & use)


def _quat_mul(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    p0, p1, p2, p3 = p.unbind(-1)
    q0, q1, q2, q3 = q.unbind(-1)
    return torch.stack([
        p0 * q0 - p1 * q1 - p2 * q2 - p3 * q3,
        p0 * q1 + p1 * q0 + p2 * q3 - p3 * q2,
        p0 * q2 - p1 * q3 + p2 * q0 + p3 * q1,
        p0 * q3 + p1 * q2 - p2 * q1 + p3 * q0,
    ], -1)  # fmt: skip


def true_gyro_bias(md: Any, out: torch.Tensor) -> None:
    """``out`` ``(B, cols)`` = every component's bias error now: its bias, random walk and bias
    instability (what the ``bias`` output estimates, on the gyroscope's columns)."""
    model = md.imperfections
    out.copy_(md.params.components.values["bias"])
    for name in ("random_walk_state", "markov_state"):
        if name in model.states:
            out.add_(model.states[name])
