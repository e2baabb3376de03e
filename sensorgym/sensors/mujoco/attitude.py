"""``AttitudeSensor``: an IMU whose readings are what the robot's attitude estimator makes of it.

A robot's policy does not read its IMU's samples as its orientation: firmware or the robot's computer runs
an attitude estimator (Madgwick, Mahony) on the measured gyroscope, accelerometer and magnetometer
samples, and the policy reads the estimate. ``AttitudeSensor`` is the :class:`~sensorgym.IMUSensor` with
that estimator in its pipeline (docs/estimators.md):

* the IMU is measured as any IMU (mount, couplings, every error term of docs/error_model.md, its own rate
  and lost samples): those samples, after every imperfection, are the estimator's input;
* the estimator (:mod:`sensorgym.estimators`) updates once per sample the sampler takes (at the IMU's own
  rate and phase; a lost sample is not consumed, the estimate holds between samples), with per-env state;
  at each env's reset it starts from that env's first measured sample (``estimator_init="first_sample"``,
  as firmware does) or from the truth turned by ``estimator_init_error`` degrees about a random
  horizontal axis (``"truth"``); its gains may be distributions, drawn per env and sensor at every reset;
* the readable outputs (``outputs``) are written after the estimator, so they get delay, jitter, holds
  and history like any reading: ``projected_gravity`` (gravity's direction in the IMU frame, what a
  legged-robot policy reads), ``quaternion`` (``[w, x, y, z]``, IMU frame to the estimator's earth frame),
  ``roll_pitch`` (radians), ``bias`` (Mahony's gyro-bias estimate, rad/s; 0 for Madgwick) and ``ang_vel``
  (the measured gyroscope, rad/s);
* their ground-truth twins are the true quantities of the IMU frame at its nominal mount: the projected
  gravity and roll/pitch of the true orientation, the true orientation in the world frame (MuJoCo's,
  z up), the gyroscope's true bias error (its bias, random walk and bias instability: what ``bias``
  estimates) and the true angular velocity. They do not depend on the estimator.

Example (synthetic states: the IMU reads ``+g`` along its z axis while level):
    >>> import torch, sensorgym as sg
    >>> from sensorgym.sensors.mujoco.attitude import truth_key
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.02, seed=0)
    >>> o = sg.AttitudeOptions(body="torso", estimator="mahony", estimator_kp=2.0,
    ...                        outputs=("projected_gravity", "ang_vel"))
    >>> att = mgr.add_sensor(o)
    >>> level = {att.state_key: torch.tensor([[0.0, 0.0, 9.81, 0.0, 0.0, 0.0, 0.2, 0.0, -0.4]] * 2),
    ...          truth_key(o): torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 2)}
    >>> mgr.reset(level)
    >>> att.read().projected_gravity[0].tolist()
    [0.0, 0.0, -1.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from ...core.options import option_error
from ...core.randomization import Distribution
from .base import cached, mj_handles, name_to_id, state_key
from .geometry import euler_to_matrix
from .imu import IMUOptions, IMUSensor

__all__ = ["OUTPUTS", "AttitudeOptions", "AttitudeSensor", "truth_key"]

#: the outputs an AttitudeSensor can read, with their widths
OUTPUTS = {"projected_gravity": 3, "quaternion": 4, "roll_pitch": 2, "bias": 3, "ang_vel": 3}
ESTIMATORS = ("madgwick", "mahony", "none")
INITS = ("first_sample", "truth")
_GAINS = {"madgwick": ("estimator_beta",), "mahony": ("estimator_kp", "estimator_ki"), "none": ()}
#: the outputs that carry the orientation (what ``orientation_noise`` perturbs)
ORIENTATION = ("projected_gravity", "quaternion", "roll_pitch")


def truth_key(options: Any) -> str:
    """State key of the IMU frame's true orientation (``[w, x, y, z]``, IMU frame at the nominal mount to
    the world frame), measured inside each sub-env beside the IMU's reading."""
    return state_key(options) + ".quat"


@dataclass(frozen=True, kw_only=True)
class AttitudeOptions(IMUOptions):
    """Options of :class:`AttitudeSensor`: every :class:`~sensorgym.IMUOptions` option (the IMU measured
    as any IMU) and the estimator's.

    Args:
        estimator: ``"madgwick"`` (gradient descent, gain ``estimator_beta``), ``"mahony"`` (explicit
            complementary filter, gains ``estimator_kp`` and ``estimator_ki``) or ``"none"`` (no
            estimator: the orientation outputs are the IMU frame's true orientation, what most simulators
            hand a policy; ``ang_vel`` is still the measured gyroscope).
        estimator_beta, estimator_kp, estimator_ki: the gains (rad/s, 1/s, 1/s^2); numbers or
            distributions drawn per env and sensor at every reset.
        estimator_magnetometer: run the 9-axis update (with the magnetometer; else 6-axis).
        estimator_earth_field: Madgwick's 9-axis earth-field reference, ``"paper"`` or ``"c_code"``.
        estimator_init: ``"first_sample"`` (the state starts from the episode's first measured sample)
            or ``"truth"`` (from the true orientation turned by ``estimator_init_error``).
        estimator_init_error: degrees, about a horizontal axis drawn per env and sensor at every reset
            (with ``"truth"``).
        outputs: the readable fields, in order, among :data:`OUTPUTS`.
        orientation_noise: the standard deviation of white Gaussian noise added at every step to each
            component of the orientation outputs (``projected_gravity``, ``quaternion``, ``roll_pitch``),
            after the estimator: the per-step observation noise Isaac Lab and mjlab configs put on the
            projected gravity (with ``estimator="none"``: the truth plus that noise).

    Example:
        >>> import sensorgym as sg
        >>> o = sg.AttitudeOptions(body="torso", estimator_beta=sg.Uniform(0.02, 0.2), gyro_noise=0.01)
        >>> o.estimator, o.outputs
        ('madgwick', ('projected_gravity',))
    """

    estimator: str = "madgwick"
    estimator_beta: Any = 0.1
    estimator_kp: Any = 1.0
    estimator_ki: Any = 0.0
    estimator_magnetometer: bool = False
    estimator_earth_field: str = "paper"
    estimator_init: str = "first_sample"
    estimator_init_error: float = 0.0
    outputs: tuple[str, ...] = ("projected_gravity",)
    orientation_noise: float = 0.0

    randomizable: ClassVar[tuple[str, ...]] = (
        *IMUOptions.randomizable, "estimator_beta", "estimator_kp", "estimator_ki",
    )  # fmt: skip

    def _validate(self) -> None:
        super()._validate()
        name = "AttitudeOptions"
        if self.estimator not in ESTIMATORS:
            raise option_error(name, "estimator", self.estimator, f"it must be one of {ESTIMATORS}",
                               'use estimator="madgwick" or estimator="mahony"')  # fmt: skip
        for gain in ("estimator_beta", "estimator_kp", "estimator_ki"):
            value = getattr(self, gain)
            lo = value.bounds[0] if isinstance(value, Distribution) else value
            if isinstance(value, bool) or not isinstance(lo, (int, float)) or not math.isfinite(lo) or lo < 0:
                raise option_error(name, gain, value, "a gain is a number >= 0 or a distribution of them",
                                   f"pass e.g. {gain}=0.1 or sg.Uniform(0.05, 0.2)")  # fmt: skip
        if self.estimator_earth_field not in ("paper", "c_code"):
            raise option_error(name, "estimator_earth_field", self.estimator_earth_field,
                               "it must be 'paper' or 'c_code'",
                               'use "paper" (the report\'s reference)')  # fmt: skip
        if self.estimator_init not in INITS:
            raise option_error(name, "estimator_init", self.estimator_init, f"it must be one of {INITS}",
                               'use "first_sample" (as firmware does) or "truth"')  # fmt: skip
        err = self.estimator_init_error
        if isinstance(err, bool) or not isinstance(err, (int, float)) or not (0 <= err <= 180):
            raise option_error(name, "estimator_init_error", err, "it is an angle in degrees in [0, 180]",
                               "pass e.g. estimator_init_error=5.0")  # fmt: skip
        outputs = tuple(self.outputs) if not isinstance(self.outputs, str) else (self.outputs,)
        bad = [o for o in outputs if o not in OUTPUTS]
        if not outputs or bad or len(set(outputs)) != len(outputs):
            raise option_error(name, "outputs", self.outputs,
                               f"the outputs are distinct names among {tuple(OUTPUTS)}",
                               'pass e.g. outputs=("projected_gravity", "ang_vel")')  # fmt: skip
        object.__setattr__(self, "outputs", outputs)
        noise = self.orientation_noise
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not (0 <= noise < math.inf):
            raise option_error(name, "orientation_noise", noise, "it is a standard deviation >= 0",
                               "pass e.g. orientation_noise=0.02")  # fmt: skip

    def gains(self) -> dict[str, Any]:
        """The estimator's gains as its constructor takes them: ``{"beta": ...}`` or ``{"kp", "ki"}``."""
        return {g.removeprefix("estimator_"): getattr(self, g) for g in _GAINS[self.estimator]}


class _Estimation:
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
        self.estimator: Any = None
        if kind == "none":  # the truth is the output: no state, nothing drawn
            self.state = None
            self.outputs = _Outputs(md, ops_for(md.executor, md.device))
            return
        rate = 1.0 / md.dt  # the rate only sets the default interval: each sensor's is written below
        if kind == "madgwick":
            self.estimator = Madgwick(beta=0.0, rate=rate, earth_field=earth)
        else:
            self.estimator = Mahony(kp=0.0, ki=0.0, rate=rate)
        self.state = self.estimator.new_state(b * n, dtype=torch.float32, device=device, executor=md.executor)
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
        self.outputs = _Outputs(md, self.state.ops)

    def bind(self, md: Any, data: torch.Tensor) -> tuple:
        """The samples of ``data`` ``(B, n * 9)`` (the measured or the true working buffer) as ``(B n, 3)``
        arrays of the executor (accelerometer, gyroscope, magnetometer), the take mask's array and the
        torch views; made once per buffer (each keeps its tensor, so its id is not reused)."""
        bound = self._bound.get(id(data))
        if bound is None:
            x = data.view(self.b, self.n, 9)
            parts = [x[..., k : k + 3].reshape(self.b * self.n, 3) for k in (0, 3, 6)]
            sampler = md.imperfections.sampler  # which envs took a sample this step (None: all, always)
            take = None if sampler is None else md.array(sampler.take.view(-1))
            bound = self._bound[id(data)] = (*map(md.array, parts), take, parts, data)
        return bound[:5]

    def resample(self, md: Any, mask: torch.Tensor) -> None:
        """Draw the gains (and the initial error's axis) of the envs in ``mask`` (the manager's random
        source: same seed, same draws)."""
        for out, dist in self.draws:
            md.random.sample_(dist, out, mask, 0)
        if self.any_truth:
            md.random.uniform_(self.axis, mask, 0)


class _Outputs:
    """Every output of a class's sensors, computed into one ``(15, B n)`` table of rows (projected gravity
    3, quaternion 4, roll/pitch 2, bias 3, angular velocity 3; only the rows some sensor reads) and
    gathered into the return buffer ``(B, return cols)`` in one op; buffers allocated once."""

    def __init__(self, md: Any, ops: Any) -> None:
        b, n = md.num_envs, len(md.sensors)
        self.ops, self.array = ops, md.array
        wanted = {o for s in md.sensors for o in s.options.outputs}
        self.wanted = [name for name in _FULL if name in wanted]
        self.table = torch.zeros(_FULL_WIDTH, b * n, dtype=torch.float32, device=md.device)
        self.scratch = torch.zeros(4, b * n, dtype=torch.float32, device=md.device)
        self.table_a, self.scratch_a = md.array(self.table), md.array(self.scratch)
        cols = []
        for j, s in enumerate(md.sensors):
            for o in s.options.outputs:
                cols += [(_OFFSETS[o] + k) * b * n + j for k in range(OUTPUTS[o])]
        flat = torch.tensor(cols, dtype=torch.long).view(1, -1) + n * torch.arange(b).view(-1, 1)
        self.index = flat.reshape(-1).to(md.device)
        self.width = len(cols)
        self.flat = (self.table_a.reshape(-1), md.array(self.index))
        # orientation_noise: one standard deviation per return column (0 off the orientation outputs)
        std = [s.options.orientation_noise * (o in ORIENTATION) for s in md.sensors for o in s.options.outputs
               for _ in range(OUTPUTS[o])]  # fmt: skip
        self.noise_std = torch.tensor(std, dtype=torch.float32, device=md.device).expand(b, -1)
        self.noise = torch.zeros(b, self.width, dtype=torch.float32, device=md.device) if any(std) else None
        self.lib = np if md.executor == "numpy" else torch
        self.zero_bias = torch.zeros(3, b * n, dtype=torch.float32, device=md.device)
        # the ground truth's inputs: the true orientation (written by the raw capture) and, for "bias",
        # the gyroscope's bias error, summed into a buffer of its own
        self.truth = torch.zeros(b, n, 4, dtype=torch.float32, device=md.device)
        # written from the sub-envs' numpy arrays: through a numpy view where the memory is the CPU's
        self.truth_host = self.truth.numpy() if self.truth.device.type == "cpu" else None
        self.truth_rows = self.truth.view(-1, 4).T
        self.true_bias = torch.zeros(b, n * 9, dtype=torch.float32, device=md.device)
        self.true_bias_rows = self.true_bias.view(b * n, 9)[:, 3:6].T
        # the compiled fill (attitude_kernel) on CPU memory where numba is there; else the ops below
        self.kernel, self.n, self._views = _kernel(md.device), n, {}
        if self.kernel is not None:
            plan, col = [], 0
            for j, s in enumerate(md.sensors):  # one block per (sensor, output): (output, sensor, column)
                for o in s.options.outputs:
                    plan.append((_FULL.index(o), j, col))
                    col += OUTPUTS[o]
            self.plan = np.array(plan, dtype=np.int64).reshape(-1, 3)
            self.ang_np = self.table.numpy()[:3]  # roll/pitch's arguments: then the executor's functions
            self.consts = _kernel_consts()
            self.angles = self.table[3:5]

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
        if self.kernel is not None:
            fill, scatter = self.kernel
            out_np = self._view(out, True)
            fill(self._view(q, True), self._view(bias, True), self._view(gyr, True), self.plan, self.n,
                 self.consts, out_np, self.ang_np)  # fmt: skip
            if "roll_pitch" in self.wanted:
                a, angles = self.table_a, self._view(self.angles, False)
                _atan2(self.lib, a[0], a[1], angles[0])
                _asin(self.lib, a[2], angles[1])
                scatter(self.table.numpy()[3:5], self.plan, self.n, out_np)
            return out
        q, bias, gyr = self._view(q, False), self._view(bias, False), self._view(gyr, False).T
        ops, t, sc = self.ops, self.table_a, self.scratch_a
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
            np.take(*self.flat, out=self._view(out, False).reshape(-1))
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
    """The compiled fill where it can run (CPU memory, numba importable, kernels on), else None."""
    from ...estimators import dispatch

    if torch.device(device).type != "cpu" or not dispatch.enabled or not dispatch.kernels_available():
        return None
    from .attitude_kernel import fill, scatter

    return fill, scatter


def _kernel_consts() -> np.ndarray:
    from .attitude_kernel import CONSTS

    return CONSTS


def _interval(period: Any, dt: float) -> float:
    """A sensor's sample interval: its period when it samples slower than ``dt`` (a randomized period: its
    largest value), else ``dt``."""
    t = _number(period)
    return t if t > dt else dt


def _number(value: Any) -> float:
    return value.bounds[1] if isinstance(value, Distribution) else float(value)


class AttitudeSensor(IMUSensor):
    """An IMU read through an attitude estimator; see the module docstring."""

    options_cls = AttitudeOptions
    return_type = None

    def _get_intermediate_format(self) -> tuple:
        return ((3,), (3,), (3,))  # the IMU's samples: the estimator's input

    def _get_return_format(self) -> tuple:
        return tuple((OUTPUTS[o],) for o in self.options.outputs)

    def _pack(self, flat: torch.Tensor, lead: tuple[int, ...]) -> Any:
        parts = super()._pack(flat, lead)
        outputs = self.options.outputs
        if len(outputs) == 1:
            return parts
        return _reading_type(outputs)(*parts)

    # -- inside each sub-env: the IMU's reading and its frame's true orientation ----------------------------
    @classmethod
    def _extract_state(cls, env: Any, options: list) -> dict[str, np.ndarray]:
        out = super()._extract_state(env, options)
        model, data = mj_handles(env)
        for o in options:
            out[truth_key(o)] = _frame_quaternion(model, data, o)
        return out

    @classmethod
    def _check_state(cls, state: Any, md: Any) -> None:
        super()._check_state(state, md)
        shape = (md.num_envs, 4)
        for key in md.constants["attitude"].truth_keys:
            found = state.get(key) if hasattr(state, "get") else None
            if getattr(found, "shape", None) != shape and (found is None or tuple(np.shape(found)) != shape):
                got = "nothing" if found is None else f"shape {tuple(np.shape(found))}"
                raise ValueError(
                    f"an AttitudeSensor needs its IMU frame's true orientation {key!r} of shape {shape} in "
                    "the state (measured inside each sub-env); "
                    "got " + got + ". Fix: build the env with make_sensor_vec(...) or add "
                    "SimStateExtractor(env, sensors) with these options to every sub-env."
                )

    # -- manager side -----------------------------------------------------------------------------------
    @classmethod
    def _init_metadata(cls, md: Any) -> None:
        super()._init_metadata(md)
        est = md.constants["attitude"] = _Estimation(md)
        if est.state is not None:
            md.extra["attitude_state"] = est.rows  # the estimator's persistent state, env-major
        sampler = md.imperfections.sampler
        if sampler is not None:
            sampler.decides_early = True  # the estimator consumes the samples taken this step

    @classmethod
    def _reset_envs(cls, md: Any, envs_mask: torch.Tensor) -> None:
        super()._reset_envs(md, envs_mask)
        md.constants["attitude"].resample(md, envs_mask)

    @classmethod
    def _update_raw_data(cls, state: Any, md: Any, raw: torch.Tensor) -> None:
        super()._update_raw_data(state, md, raw)
        est = md.constants["attitude"]
        truth, host = est.outputs.truth, est.outputs.truth_host
        for j, key in enumerate(est.truth_keys):
            src = state[key]
            if type(src) is np.ndarray and host is not None:
                np.copyto(host[:, j], src)
            else:
                truth[:, j].copy_(torch.as_tensor(src))

    @classmethod
    def _post_process(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> torch.Tensor:
        est: _Estimation = md.constants["attitude"]
        outputs = est.outputs
        acc, gyr, mag, take, parts = est.bind(md, data)
        if not is_measured:  # the true quantities of the IMU frame
            bias = outputs.zero_bias
            if "bias" in outputs.wanted:
                _true_gyro_bias(md, outputs.true_bias)
                bias = outputs.true_bias_rows
            return outputs.fill(outputs.truth_rows, bias, parts[1], timeline.at(0))
        reset = md.context.reset_mask
        if reset is not None and est.estimator is not None:  # start at the reset sample, then consume it
            _initialize(md, est, parts[0], parts[2], reset[:, None].expand(est.b, est.n).reshape(-1))
        if est.estimator is None:  # estimator "none": the true orientation
            out = outputs.fill(outputs.truth_rows, outputs.zero_bias, parts[1], timeline.at(0))
        else:
            est.estimator.update(est.state, gyr, acc, mag if est.magnetometer else None, take)  # None: all
            rows = est.state.tensors
            out = outputs.fill(rows["q"], rows.get("bias", outputs.zero_bias), parts[1], timeline.at(0))
        if outputs.noise is not None:  # per-step white noise on the orientation outputs
            md.random.normal_(outputs.noise, None, 0)
            out.addcmul_(outputs.noise, outputs.noise_std)
        return out


def _reading_type(outputs: tuple[str, ...]) -> type:
    import collections

    key = ("attitude", outputs)
    if key not in _TYPES:
        _TYPES[key] = collections.namedtuple("AttitudeReading", outputs)
    return _TYPES[key]


_TYPES: dict = {}
_FULL = ("projected_gravity", "quaternion", "roll_pitch", "bias", "ang_vel")
_OFFSETS = {name: sum(OUTPUTS[o] for o in _FULL[: _FULL.index(name)]) for name in _FULL}
_FULL_WIDTH = sum(OUTPUTS.values())


def _initialize(md: Any, est: _Estimation, acc: torch.Tensor, mag: torch.Tensor, rows: torch.Tensor) -> None:
    """Start the rows ``rows`` (``(B n,)`` bool) of the estimator before they consume their reset sample:
    from that sample, or from the truth turned by the configured error (allocates: resets only)."""
    b, n = est.b, est.n
    use = est.use_truth.expand(b, n).reshape(-1)
    est.estimator.initialize(est.state, acc, mag if est.magnetometer else None, mask=rows & ~use)
    if est.any_truth:
        truth = est.outputs.truth.to(torch.float64).reshape(b * n, 4)
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


def _true_gyro_bias(md: Any, out: torch.Tensor) -> None:
    """``out`` ``(B, cols)`` = every component's bias error now: its bias, random walk and bias
    instability (what the ``bias`` output estimates, on the gyroscope's columns)."""
    model = md.imperfections
    out.copy_(md.params.components.values["bias"])
    for name in ("random_walk_state", "markov_state"):
        if name in model.states:
            out.add_(model.states[name])


def _frame_quaternion(model: Any, data: Any, o: AttitudeOptions) -> np.ndarray:
    """The IMU frame's world orientation at the nominal mount, ``[w, x, y, z]`` float32."""
    import mujoco

    def build():
        body = name_to_id(model, mujoco.mjtObj.mjOBJ_BODY, o.body, "AttitudeOptions.body")
        mount = np.zeros(4)
        mujoco.mju_mat2Quat(mount, euler_to_matrix(o.nominal_euler_offset).reshape(-1))
        return body, mount, np.zeros(4)

    body, mount, out = cached(model, ("attitude", o), build)
    mujoco.mju_mulQuat(out, data.xquat[body], mount)
    return out.astype(np.float32)
