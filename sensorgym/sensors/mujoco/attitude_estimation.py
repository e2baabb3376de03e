"""The per-class state of ``AttitudeSensor`` (:mod:`sensorgym.sensors.mujoco.attitude`): the estimator over
every env and sensor of the class (:class:`Estimation`: its state, gains drawn at resets, the views a step
works on), the outputs computed from an orientation into the return buffer (:class:`Outputs`: compiled
where numba runs, :mod:`~sensorgym.sensors.mujoco.attitude_kernel`; op by op otherwise), and a reset's
start of the state (:func:`initialize`). Nothing here is allocated per step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ...core.randomization import Distribution
from .base import state_key

__all__ = [
    "ORIENTATION",
    "OUTPUTS",
    "CompiledFill",
    "Estimation",
    "Outputs",
    "TruthInputs",
    "initialize",
    "true_gyro_bias",
    "truth_key",
]

#: sensorgym.estimators.dispatch (whose ``enabled`` a step reads), once a manager has built an estimator
_dispatch: Any = None
#: the outputs an AttitudeSensor can read, with their widths
OUTPUTS = {"projected_gravity": 3, "quaternion": 4, "roll_pitch": 2, "bias": 3, "ang_vel": 3}
#: the outputs that carry the orientation (what ``orientation_noise`` perturbs)
ORIENTATION = ("projected_gravity", "quaternion", "roll_pitch")


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
        self.truth_keys = [truth_key(o) for o in opts]
        self.truth = TruthInputs(md)
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
        kernel, args = bound[0], bound[1]
        outputs, truth = self.outputs, self.truth
        if not is_measured:
            if outputs.true_bias:
                true_gyro_bias(md, truth.bias)
            if kernel is not None:  # the truth's rows and outputs: one compiled call
                kernel(truth.now, *args)
            else:
                truth.load()
                bias = truth.bias_rows if outputs.true_bias else outputs.zero_bias
                outputs.fill(truth.rows, bias, data, out)
        elif self.estimator is None:  # "none": the truth
            if kernel is not None:
                kernel(truth.now, *args)
            else:
                truth.load()
                outputs.fill(truth.rows, outputs.zero_bias, data, out)
        else:
            reset = md.context.reset_mask
            if reset is not None:  # start at the reset sample, then consume it
                parts = self.bind(md, data)[4]
                initialize(md, self, parts[0], parts[2], reset[:, None].expand(self.b, self.n).reshape(-1))
            if kernel is not None and _dispatch.enabled:  # samples in, update, outputs out: one call
                kernel(*args)
            else:
                acc, gyr, mag, take, parts = self.bind(md, data)
                self.estimator.update(self.state, gyr, acc, mag if self.magnetometer else None, take)
                rows = self.state.tensors
                outputs.fill(rows["q"], rows.get("bias", outputs.zero_bias), data, out)
                return self._noise(md, out)
        if kernel is not None and outputs.angles:
            outputs.finish_angles(args[-2])
        return self._noise(md, out) if is_measured else out

    def _noise(self, md: Any, out: torch.Tensor) -> torch.Tensor:
        """The measured branch's per-step white noise on the orientation outputs (``orientation_noise``)."""
        noise = self.outputs.noise
        if noise is not None:
            md.random.normal_(noise, None, 0)
            out.addcmul_(noise, self.outputs.noise_std)
        return out

    def _bind_call(self, md: Any, data: torch.Tensor, out: torch.Tensor, is_measured: bool) -> tuple:
        """The compiled call of a branch's step, ``(kernel, its arguments, data, out)`` for the branch
        buffer ``data`` and the ring slot ``out`` (numpy views made once; ``data`` and ``out`` kept, as
        their ids are the key), with kernel and arguments None where the op route runs. The ground truth's
        kernel is ``truth_outputs``, called with the truth's array of the step first (and so is the
        measured branch's without an estimator); with one, the fused update (``*_outputs``; with a take
        mask numpy can hand the kernel as it is)."""
        c = self.outputs.compiled
        if c is None or (is_measured and self.estimator is not None and self.fused is None):
            return None, None, data, out
        if not out.is_contiguous():
            return None, None, data, out
        (x, w), slot = c.samples(data), out.numpy()
        if not is_measured or self.estimator is None:  # from the truth, called with the step's array first
            bias = (self.truth.bias_rows if not is_measured else self.outputs.zero_bias).numpy()
            return c.truth, (bias, x, w, c.plan, c.n, c.consts, slot, c.ang), data, out
        sampler, host = md.imperfections.sampler, self.state.host
        mask = host.mask if sampler is None else sampler.take.view(-1).numpy()
        if mask.shape != host.mask.shape or not mask.flags.c_contiguous:
            return None, None, data, out
        tensors = self.state.tensors
        q, bias = tensors["q"].numpy(), tensors.get("bias", self.outputs.zero_bias).numpy()
        masked = sampler is not None
        args = (x, w, host.storage, self.consts, mask, masked, c.n, q, bias, c.plan, c.consts, slot, c.ang)
        return self.fused, args, data, out

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
    lies), else ``quat`` ``(B, n, 4)``, the class's copy."""

    def __init__(self, md: Any) -> None:
        b, n = md.num_envs, len(md.sensors)
        self.quat = torch.zeros(b, n, 4, dtype=torch.float32, device=md.device)
        self.rows = torch.zeros(4, b * n, dtype=torch.float32, device=md.device)
        self.bias = torch.zeros(b, n * 9, dtype=torch.float32, device=md.device)
        self.bias_rows = self.bias.view(b * n, 9)[:, 3:6].T
        self._view_quat()

    def _view_quat(self) -> None:
        # written from the sub-envs' numpy arrays: through a numpy view where the memory is the CPU's
        self.host = self.quat.numpy() if self.quat.device.type == "cpu" else None
        self.copied = self.host.reshape(-1, 4) if self.host is not None else self.quat.view(-1, 4)
        self.now: Any = self.copied

    def __getstate__(self) -> dict:
        """A copy views its own memory again (and holds no state array of the original's step)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("host", "copied", "now")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._view_quat()

    def take(self, state: Any, keys: list[str]) -> None:
        """This step's true orientations, ``state[key]`` of each sensor's key: read where they lie (one
        sensor, a float32 numpy array in C order) or copied into ``quat``."""
        host = self.host
        if host is not None and len(keys) == 1:
            src = state[keys[0]]
            if type(src) is np.ndarray and src.dtype == np.float32 and src.flags.c_contiguous:
                self.now = src
                return
        for j, key in enumerate(keys):
            src = state[key]
            if type(src) is np.ndarray and host is not None:
                np.copyto(host[:, j], src)
            else:
                self.quat[:, j].copy_(torch.as_tensor(src))
        self.now = self.copied

    def current(self) -> torch.Tensor:
        """This step's true orientations ``(B n, 4)`` as a tensor (a view of ``now``)."""
        now = self.now
        return now if type(now) is torch.Tensor else torch.from_numpy(now)

    def load(self) -> None:
        """``rows`` from ``now`` (the op route's input; the compiled route reads ``now`` where it lies)."""
        self.rows.copy_(self.current().T)


class CompiledFill:
    """The compiled outputs (:mod:`~sensorgym.sensors.mujoco.attitude_kernel`): the kernels, the plan of
    output blocks ``(output, sensor, first column)``, their float32 constants, and where roll/pitch's
    arguments (``ang``: the table's first 3 rows) and angles (``angles``: its next 2) go."""

    def __init__(self, md: Any, table: torch.Tensor) -> None:
        from .attitude_kernel import CONSTS, fill, scatter, truth_outputs

        self.fill, self.truth, self.scatter, self.consts = fill, truth_outputs, scatter, CONSTS
        self.n = len(md.sensors)
        plan, col = [], 0
        for j, s in enumerate(md.sensors):
            for o in s.options.outputs:
                plan.append((_FULL.index(o), j, col))
                col += OUTPUTS[o]
        self.plan = np.array(plan, dtype=np.int64).reshape(-1, 3)
        self.table = table
        self._view_table()

    def _view_table(self) -> None:
        table = self.table
        self.ang, self.angles = table.numpy()[:3], table[3:5]
        self.angles_host = table.numpy()[3:5]

    def __getstate__(self) -> dict:
        """A copy (deepcopy, pickle) views its own table again: a numpy view copied along would be an
        array of its own, which the kernel would write and the outputs never read."""
        return {k: v for k, v in self.__dict__.items() if k not in ("ang", "angles_host")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._view_table()

    @staticmethod
    def samples(data: torch.Tensor) -> tuple[np.ndarray, int]:
        """A branch's ``(B, 9 n)`` buffer as the kernels read it: a flat numpy view from its first element
        to its last, and the distance between its rows (it may be a column block of a wider buffer)."""
        b, width = data.shape
        w = data.stride(0)
        return data.as_strided(((b - 1) * w + width,), (1,)).numpy(), w


class Outputs:
    """Every output of a class's sensors, computed into one ``(15, B n)`` table of rows (projected gravity
    3, quaternion 4, roll/pitch 2, bias 3, angular velocity 3; only the rows some sensor reads) and
    gathered into the return buffer ``(B, return cols)`` in one op; buffers allocated once."""

    def __init__(self, md: Any, ops: Any) -> None:
        b, n = md.num_envs, len(md.sensors)
        self.ops, self.array = ops, md.array
        self.numpy = md.binding.name == "numpy"  # the executor whose atan2, asin and take run
        wanted = {o for s in md.sensors for o in s.options.outputs}
        self.wanted = [name for name in _FULL if name in wanted]
        self.angles = "roll_pitch" in wanted  # the compiled route finishes them (finish_angles)
        self.true_bias = "bias" in wanted  # the ground truth sums the gyroscope's bias error each step
        self.table = torch.zeros(_FULL_WIDTH, b * n, dtype=torch.float32, device=md.device)
        self.scratch = torch.zeros(4, b * n, dtype=torch.float32, device=md.device)
        cols = []
        for j, s in enumerate(md.sensors):
            for o in s.options.outputs:
                cols += [(_OFFSETS[o] + k) * b * n + j for k in range(OUTPUTS[o])]
        flat = torch.tensor(cols, dtype=torch.long).view(1, -1) + n * torch.arange(b).view(-1, 1)
        self.index = flat.reshape(-1).to(md.device)
        # orientation_noise: one standard deviation per return column (0 off the orientation outputs)
        std = [s.options.orientation_noise * (o in ORIENTATION) for s in md.sensors for o in s.options.outputs
               for _ in range(OUTPUTS[o])]  # fmt: skip
        self.noise_std = torch.tensor(std, dtype=torch.float32, device=md.device).expand(b, -1)
        self.noise = torch.zeros(b, len(cols), dtype=torch.float32, device=md.device) if any(std) else None
        self.zero_bias = torch.zeros(3, b * n, dtype=torch.float32, device=md.device)
        #: the compiled route (attitude_kernel) on CPU memory where numba is there; else the ops below
        self.compiled = CompiledFill(md, self.table) if _kernel(md.device) is not None else None
        self._views: dict[tuple, tuple] = {}
        self._host: dict[tuple, tuple] = {}  # per (q, bias, data, out): their host arrays (see fill)

    def __getstate__(self) -> dict:
        """A copy makes its own views (those cached here view the original's memory)."""
        return {**self.__dict__, "_views": {}, "_host": {}}

    def _view(self, t: torch.Tensor, host: bool) -> Any:
        """``t`` as a numpy array (``host``: for the kernel) or an array of the executor; made once per
        tensor (the tensors passed are the state's and the buffers' own views, which persist)."""
        key = (id(t), host)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = (t.numpy() if host else self.array(t), t)
        return view[0]

    def finish_angles(self, out: np.ndarray) -> None:
        """After the compiled fill into ``out`` (a numpy view of the slot), where a sensor reads roll/pitch:
        their ``atan2`` and ``asin`` by the executor's own functions on the arguments the kernel left,
        placed in their columns."""
        c, view = self.compiled, self._view
        a, angles = view(self.table, False), view(c.angles, False)
        _atan2(self.numpy, a[0], a[1], angles[0])
        _asin(self.numpy, a[2], angles[1])
        c.scatter(c.angles_host, c.plan, c.n, out)

    def _gyro_rows(self, data: torch.Tensor) -> torch.Tensor:
        """The gyroscope samples of ``data`` ``(B, 9 n)`` as a ``(B n, 3)`` view (made once per buffer)."""
        rows = self._views.get(("gyro", id(data)))
        if rows is None:
            b, n = data.shape[0], data.shape[1] // 9
            rows = self._views[("gyro", id(data))] = (data.view(b, n, 9)[..., 3:6].reshape(b * n, 3), data)
        return rows[0]

    def fill(
        self, q: torch.Tensor, bias: torch.Tensor, data: torch.Tensor, out: torch.Tensor
    ) -> torch.Tensor:
        """The outputs from the orientations ``q`` ``(4, B n)``, biases ``(3, B n)`` and the branch's samples
        ``data`` ``(B, 9 n)`` (views of the state and the working buffers) into ``out`` ``(B, return
        columns)`` (the ring's slot: nothing to copy after); returns ``out``."""
        view = self._view
        if self.compiled is not None:
            c = self.compiled
            # the four host arrays of this call's tensors, made once per combination (a branch's q, bias
            # and samples are fixed; out is one of its ring's slots): one lookup instead of four per step
            key = (id(q), id(bias), id(data), id(out))
            host = self._host.get(key)
            if host is None:
                host = self._host[key] = (view(q, True), view(bias, True), *c.samples(data), view(out, True))
            q_np, bias_np, x, w, out_np = host
            c.fill(q_np, bias_np, x, w, c.plan, c.n, c.consts, out_np, c.ang)
            if self.angles:
                self.finish_angles(out_np)
            return out
        gyr = self._gyro_rows(data)
        q, bias, gyr = view(q, False), view(bias, False), view(gyr, False).T
        ops, t, sc = self.ops, view(self.table, False), view(self.scratch, False)
        for name in self.wanted:
            at = _OFFSETS[name]
            if name == "projected_gravity":  # R(q)^T [0, 0, -1]
                ops.mul(q[0], q[2], sc[0])
                ops.mul(q[1], q[3], sc[1])
                ops.sub(sc[0], sc[1], t[at])
                ops.mul(t[at], 2.0, t[at])
                ops.mul(q[2], q[3], sc[0])
                ops.mul(q[0], q[1], sc[1])
                ops.add(sc[0], sc[1], t[at + 1])
                ops.mul(t[at + 1], -2.0, t[at + 1])
                ops.mul(q, q, sc)
                ops.add(sc[1], sc[2], t[at + 2])
                ops.sub(t[at + 2], sc[0], t[at + 2])
                ops.sub(t[at + 2], sc[3], t[at + 2])
            elif name == "quaternion":
                ops.copyto(t[at : at + 4], q)
            elif name == "roll_pitch":
                ops.mul(q[0], q[1], sc[0])
                ops.mul(q[2], q[3], sc[1])
                ops.add(sc[0], sc[1], sc[0])
                ops.mul(sc[0], 2.0, sc[0])  # 2 (q0 q1 + q2 q3)
                ops.mul(q[1], q[1], sc[1])
                ops.mul(q[2], q[2], sc[2])
                ops.add(sc[1], sc[2], sc[1])
                ops.mul(sc[1], -2.0, sc[1])
                ops.add(sc[1], 1.0, sc[1])  # 1 - 2 (q1^2 + q2^2)
                _atan2(self.numpy, sc[0], sc[1], t[at])
                ops.mul(q[0], q[2], sc[0])
                ops.mul(q[1], q[3], sc[1])
                ops.sub(sc[0], sc[1], sc[0])
                ops.mul(sc[0], 2.0, sc[0])
                ops.clip(sc[0], -1.0, 1.0, sc[0])
                _asin(self.numpy, sc[0], t[at + 1])
            elif name == "bias":
                ops.copyto(t[at : at + 3], bias)
            else:
                ops.copyto(t[at : at + 3], gyr)
        if self.numpy:
            np.take(t.reshape(-1), view(self.index, False), out=view(out, False).reshape(-1))
        else:
            torch.index_select(self.table.view(-1), 0, self.index, out=out.view(-1))
        return out


def _atan2(numpy: bool, y: Any, x: Any, out: Any) -> None:
    if numpy:
        np.arctan2(y, x, out=out)
    else:
        torch.atan2(y, x, out=out)


def _asin(numpy: bool, x: Any, out: Any) -> None:
    if numpy:
        np.arcsin(x, out=out)
    else:
        torch.asin(x, out=out)


def _kernel(device: torch.device) -> Any:
    """Whether the compiled fill can run: CPU memory, numba importable, kernels on (else None)."""
    from ...estimators import dispatch

    if torch.device(device).type != "cpu" or not dispatch.enabled or not dispatch.kernels_available():
        return None
    return True


def _interval(period: Any, dt: float) -> float:
    """A sensor's sample interval: its period when it samples slower than ``dt`` (a randomized period: its
    largest value), else ``dt``."""
    t = _number(period)
    return t if t > dt else dt


def _number(value: Any) -> float:
    return value.bounds[1] if isinstance(value, Distribution) else float(value)


_FULL = ("projected_gravity", "quaternion", "roll_pitch", "bias", "ang_vel")
_OFFSETS = {name: sum(OUTPUTS[o] for o in _FULL[: _FULL.index(name)]) for name in _FULL}
_FULL_WIDTH = sum(OUTPUTS.values())


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
