"""Attitude estimators: what a robot's firmware runs between its IMU and its policy.

:class:`Madgwick` (gradient descent, gain ``beta``) and :class:`Mahony` (explicit complementary filter,
gains ``kp``, ``ki``, with its gyro-bias estimate), each 6-axis (gyroscope + accelerometer) and 9-axis
(+ magnetometer). One per-step update, batched over envs and written once for the numpy and the torch
executor, in place on preallocated state; ``run`` applies it to a whole log. A third estimator
subclasses :class:`AttitudeEstimator` (see its docstring and docs/estimators.md).

Conventions: quaternions ``[w, x, y, z]`` rotating sensor-frame vectors into the filter's earth frame,
z up (along the specific force at rest); with a magnetometer x along the horizontal field, y = z × x.
Angular rates in rad/s; accelerometer and magnetometer in any consistent units (they are normalized).

This package imports only numpy, torch and the engine (:mod:`sensorgym.core`); ``import sensorgym`` does
not load it.
"""

from __future__ import annotations

from .base import AttitudeEstimator, integrate_rate
from .dispatch import kernels_available, use_kernels
from .madgwick import EARTH_FIELDS, Madgwick
from .mahony import Mahony
from .quaternion import attitude_errors, projected_gravity, quat_from_acc, quat_from_acc_mag, roll_pitch
from .state import EstimatorState, pad

__all__ = [
    "EARTH_FIELDS",
    "AttitudeEstimator",
    "EstimatorState",
    "Madgwick",
    "Mahony",
    "attitude_errors",
    "integrate_rate",
    "kernels_available",
    "pad",
    "projected_gravity",
    "quat_from_acc",
    "quat_from_acc_mag",
    "roll_pitch",
    "use_kernels",
]
