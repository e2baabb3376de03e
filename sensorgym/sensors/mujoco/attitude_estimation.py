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
        from ...estimators import Madgwick, Mahony  # imported when a manager builds one: not by sensorgym
        from ...estimators._ops import ops_for

        kind, self.magnetometer, earth = kinds.pop()
        b, n, device = md.num_envs, len(opts), md.device
        self.b, self.n = b, n
        self.draws: list[tuple[torch.Tensor, Distribution]] = []
        self.use_truth = torch.tensor([o.estimator_init == "truth" for o in opts], device=device)
        self.any_truth = False
        self._bound: dict[int, tuple] = {}
        self.truth_keys = [truth_key(o) for o in opts]
        self.truth = TruthInputs(md)
        self.estimator: Any = None
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
    """What the ground truth is computed from, per env and sensor: the IMU frame's true orientation
    (``quat`` ``(B, n, 4)``, written each step from the sub-envs; ``rows``: its ``(4, B n)`` view) and the
    gyroscope's true bias error (``bias`` ``(B, n 9)``, summed from the error terms when read; ``bias_rows``:
    its gyroscope rows ``(3, B n)``)."""

    def __init__(self, md: Any) -> None:
        b, n = md.num_envs, len(md.sensors)
        self.quat = torch.zeros(b, n, 4, dtype=torch.float32, device=md.device)
        # written from the sub-envs' numpy arrays: through a numpy view where the memory is the CPU's
        self.host = self.quat.numpy() if self.quat.device.type == "cpu" else None
        self.rows = self.quat.view(-1, 4).T
        self.bias = torch.zeros(b, n * 9, dtype=torch.float32, device=md.device)
        self.bias_rows = self.bias.view(b * n, 9)[:, 3:6].T


class CompiledFill:
    """The compiled outputs (:mod:`~sensorgym.sensors.mujoco.attitude_kernel`): the kernels, the plan of
    output blocks ``(output, sensor, first column)``, their float32 constants, and where roll/pitch's
    arguments (``ang``: the table's first 3 rows) and angles (``angles``: its next 2) go."""

    def __init__(self, md: Any, table: torch.Tensor) -> None:
        from .attitude_kernel import CONSTS, fill, scatter

        self.fill, self.scatter, self.consts, self.n = fill, scatter, CONSTS, len(md.sensors)
        plan, col = [], 0
        for j, s in enumerate(md.sensors):
            for o in s.options.outputs:
                plan.append((_FULL.index(o), j, col))
                col += OUTPUTS[o]
        self.plan = np.array(plan, dtype=np.int64).reshape(-1, 3)
        self.ang, self.angles = table.numpy()[:3], table[3:5]
        self.angles_host = table.numpy()[3:5]


class Outputs:
    """Every output of a class's sensors, computed into one ``(15, B n)`` table of rows (projected gravity
    3, quaternion 4, roll/pitch 2, bias 3, angular velocity 3; only the rows some sensor reads) and
    gathered into the return buffer ``(B, return cols)`` in one op; buffers allocated once."""

    def __init__(self, md: Any, ops: Any) -> None:
        b, n = md.num_envs, len(md.sensors)
        self.ops, self.array = ops, md.array
        self.lib = np if md.binding.name == "numpy" else torch
        wanted = {o for s in md.sensors for o in s.options.outputs}
        self.wanted = [name for name in _FULL if name in wanted]
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
        self._host: dict[tuple, tuple] = {}  # per (q, bias, gyr, out): their host arrays (see fill)

    def _view(self, t: torch.Tensor, host: bool) -> Any:
        """``t`` as a numpy array (``host``: for the kernel) or an array of the executor; made once per
        tensor (the tensors passed are the state's and the buffers' own views, which persist)."""
        key = (id(t), host)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = (t.numpy() if host else self.array(t), t)
        return view[0]

    def fill(self, q: torch.Tensor, bias: torch.Tensor, gyr: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The outputs from the orientations ``q`` ``(4, B n)``, biases ``(3, B n)`` and rates
        ``(B n, 3)`` (views of the state and the working buffers) into ``out`` ``(B, return columns)``
        (the ring's slot: nothing to copy after); returns ``out``."""
        view = self._view
        if self.compiled is not None:
            c = self.compiled
            # the four host arrays of this call's tensors, made once per combination (a branch's q, bias
            # and rates are fixed; out is one of its ring's slots): one lookup instead of four per step
            key = (id(q), id(bias), id(gyr), id(out))
            host = self._host.get(key)
            if host is None:
                host = self._host[key] = (view(q, True), view(bias, True), view(gyr, True), view(out, True))
            q_np, bias_np, gyr_np, out_np = host
            c.fill(q_np, bias_np, gyr_np, c.plan, c.n, c.consts, out_np, c.ang)
            if "roll_pitch" in self.wanted:  # the executor's atan2 and asin on the arguments, then placed
                a, angles = view(self.table, False), view(c.angles, False)
                _atan2(self.lib, a[0], a[1], angles[0])
                _asin(self.lib, a[2], angles[1])
                c.scatter(c.angles_host, c.plan, c.n, out_np)
            return out
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
                _atan2(self.lib, sc[0], sc[1], t[at])
                ops.mul(q[0], q[2], sc[0])
                ops.mul(q[1], q[3], sc[1])
                ops.sub(sc[0], sc[1], sc[0])
                ops.mul(sc[0], 2.0, sc[0])
                ops.clip(sc[0], -1.0, 1.0, sc[0])
                _asin(self.lib, sc[0], t[at + 1])
            elif name == "bias":
                ops.copyto(t[at : at + 3], bias)
            else:
                ops.copyto(t[at : at + 3], gyr)
        if self.lib is np:
            np.take(t.reshape(-1), view(self.index, False), out=view(out, False).reshape(-1))
        else:
            torch.index_select(self.table.view(-1), 0, self.index, out=out.view(-1))
        return out


def _atan2(lib: Any, y: Any, x: Any, out: Any) -> None:
    if lib is np:
        np.arctan2(y, x, out=out)
    else:
        torch.atan2(y, x, out=out)


def _asin(lib: Any, x: Any, out: Any) -> None:
    if lib is np:
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
        truth = est.truth.quat.to(torch.float64).reshape(b * n, 4)
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
