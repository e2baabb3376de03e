"""``JointEncoderSensor`` (joint positions) and ``JointTorqueSensor`` (actuator effort) on MuJoCo.

Both read one value per listed hinge or slide joint, in the order given. Encoder ticks are the
``resolution`` option (e.g. ``2 * pi / 4096`` for a 12-bit encoder); the torque sensor reports the
actuator force on each joint's degree of freedom (``qfrc_actuator``), not the contact or gravity load.

Example:
    >>> import sensorgym as sg
    >>> o = sg.JointEncoderOptions(joints=["hip_1", "ankle_1"], resolution=2 * 3.141592653589793 / 4096)
    >>> len(o.joints)
    2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.options import option_error
from .base import MujocoSensor, MujocoSensorOptions, cached, mj_handles, name_to_id, state_key

__all__ = ["JointEncoderOptions", "JointEncoderSensor", "JointTorqueOptions", "JointTorqueSensor"]


@dataclass(frozen=True, kw_only=True)
class _JointOptions(MujocoSensorOptions):
    joints: tuple[str, ...]

    def _validate(self) -> None:
        if (
            isinstance(self.joints, str)
            or not self.joints
            or not all(isinstance(j, str) for j in self.joints)
        ):
            raise option_error(
                type(self).__name__,
                "joints",
                self.joints,
                "expected a non-empty list of joint names",
                "pass joints=['hip_1', 'ankle_1']",
            )
        object.__setattr__(self, "joints", tuple(self.joints))
        super()._validate()

    def addresses(self, model: Any, kind: str) -> np.ndarray | slice:
        """Indices of the joints in ``qpos`` or the dof arrays: a slice when they are consecutive (a
        slice is several times cheaper than an index array, and this runs every step in every env)."""

        def build():
            import mujoco

            out = []
            for name in self.joints:
                j = name_to_id(model, mujoco.mjtObj.mjOBJ_JOINT, name, f"{type(self).__name__}.joints")
                if int(model.jnt_type[j]) not in (
                    int(mujoco.mjtJoint.mjJNT_HINGE),
                    int(mujoco.mjtJoint.mjJNT_SLIDE),
                ):
                    raise ValueError(f"{type(self).__name__}.joints: {name!r} is not a hinge or slide joint.")
                out.append(int(model.jnt_qposadr[j] if kind == "qpos" else model.jnt_dofadr[j]))
            if out == list(range(out[0], out[0] + len(out))):
                return slice(out[0], out[0] + len(out))
            return np.array(out, dtype=np.int64)

        return cached(model, (kind, self), build)


def _joint_terms(env: Any, options: list, array: str, kind: str) -> list:
    model, _ = mj_handles(env)
    out = []
    for o in options:
        adr = o.addresses(model, kind)
        adr = range(adr.start, adr.stop) if isinstance(adr, slice) else adr.tolist()
        out.append((state_key(o), [((array, int(a)), ()) for a in adr]))
    return out


@dataclass(frozen=True, kw_only=True)
class JointEncoderOptions(_JointOptions):
    """Options of :class:`JointEncoderSensor`: ``joints`` (hinge/slide joint names)."""


class JointEncoderSensor(MujocoSensor):
    """Joint positions ``(B, n_joints)``; see the module docstring."""

    options_cls = JointEncoderOptions
    # qpos is current after mj_step: an encoder needs none of the derived state mj_forward recomputes
    _prepare_extraction = None

    def _get_return_format(self) -> tuple[int, ...]:
        return (len(self.options.joints),)

    @classmethod
    def _measure(cls, model: Any, data: Any, o: JointEncoderOptions) -> np.ndarray:
        return data.qpos[o.addresses(model, "qpos")].copy()  # a slice is a live view of MjData

    @classmethod
    def _extract_state(cls, env: Any, options: list) -> dict[str, np.ndarray]:
        # one float32 copy of the qpos slice per sensor: the same values as ``_measure`` with one copy less
        # (the native ``jointpos`` sensor would be the same copy, from sensordata)
        model, data = mj_handles(env)
        qpos = data.qpos
        return {state_key(o): qpos[o.addresses(model, "qpos")].astype(np.float32) for o in options}

    @classmethod
    def _gather_terms(cls, env: Any, options: list) -> list:
        """The readings as ``qpos`` entries (see :mod:`~sensorgym.sensors.mujoco.gather`)."""
        return _joint_terms(env, options, "qpos", "qpos")


@dataclass(frozen=True, kw_only=True)
class JointTorqueOptions(_JointOptions):
    """Options of :class:`JointTorqueSensor`: ``joints`` (hinge/slide joint names)."""


class JointTorqueSensor(MujocoSensor):
    """Actuator effort on each joint ``(B, n_joints)``; see the module docstring."""

    options_cls = JointTorqueOptions

    def _get_return_format(self) -> tuple[int, ...]:
        return (len(self.options.joints),)

    @classmethod
    def _measure(cls, model: Any, data: Any, o: JointTorqueOptions) -> np.ndarray:
        return data.qfrc_actuator[o.addresses(model, "dof")].copy()

    @classmethod
    def _gather_terms(cls, env: Any, options: list) -> list:
        """The readings as ``qfrc_actuator`` entries (see :mod:`~sensorgym.sensors.mujoco.gather`)."""
        return _joint_terms(env, options, "qfrc_actuator", "dof")
