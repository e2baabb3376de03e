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
    >>> (att.read().projected_gravity[0] + 0.0).tolist()  # + 0.0: a -0.0 prints as 0.0
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
from .attitude_estimation import Estimation, truth_key
from .attitude_outputs import OUTPUTS
from .base import cached, mj_handles, name_to_id
from .geometry import euler_to_matrix
from .imu import IMUOptions, IMUSensor

__all__ = ["OUTPUTS", "AttitudeOptions", "AttitudeSensor", "truth_key"]

ESTIMATORS = ("madgwick", "mahony", "none")
INITS = ("first_sample", "truth")
_GAINS = {"madgwick": ("estimator_beta",), "mahony": ("estimator_kp", "estimator_ki"), "none": ()}


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
    #: the estimator is a level too: what the robot runs may differ from what a policy was trained with
    #: (the outputs, which the policy reads, are not)
    level_options: ClassVar[tuple[str, ...]] = (
        *IMUOptions.level_options, "estimator", "estimator_beta", "estimator_kp", "estimator_ki",
        "estimator_magnetometer", "estimator_earth_field", "estimator_init", "estimator_init_error",
        "orientation_noise",
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


class AttitudeSensor(IMUSensor):
    """An IMU read through an attitude estimator; see the module docstring."""

    options_cls = AttitudeOptions
    return_type = None
    projection_depth = 1  # _post_process reads no earlier output: it projects straight into the caches

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
        # the IMU frame's true orientation: checked, and kept for the capture that follows every check
        # (this step's outputs read it; nothing the class owns between steps is written). A subclass that
        # overrides this hook calls it through super(): it is where the step's truth is taken
        md.constants["attitude"].truth.take(state)

    # -- manager side -----------------------------------------------------------------------------------
    @classmethod
    def _init_metadata(cls, md: Any) -> None:
        super()._init_metadata(md)
        est = md.constants["attitude"] = Estimation(md)
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
    def _post_process(cls, md: Any, data: torch.Tensor, timeline: Any, *, is_measured: bool) -> torch.Tensor:
        # ground truth: the true quantities of the IMU frame; measured: the estimator's update and estimate
        return md.constants["attitude"].project(md, data, timeline.at(0), is_measured)


def _reading_type(outputs: tuple[str, ...]) -> type:
    import collections

    key = ("attitude", outputs)
    if key not in _TYPES:
        _TYPES[key] = collections.namedtuple("AttitudeReading", outputs)
    return _TYPES[key]


_TYPES: dict = {}


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
