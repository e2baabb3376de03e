"""The sensor catalog.

Generic: :class:`StateSensor` (any state entry), :class:`EnvAttributeSensor` (an attribute of the env).
MuJoCo (measured inside each sub-env, see :mod:`sensorgym.sensors.mujoco_base`): :class:`IMUSensor`,
:class:`ContactSensor`, :class:`ContactForceSensor`, :class:`JointEncoderSensor`, :class:`JointTorqueSensor`.
The MuJoCo sensors are importable without ``mujoco`` installed; they need it only when they measure.
"""

from .attribute import EnvAttributeOptions, EnvAttributeSensor
from .contact import ContactForceOptions, ContactForceSensor, ContactOptions, ContactSensor
from .imu import IMUOptions, IMUReading, IMUSensor
from .joint import JointEncoderOptions, JointEncoderSensor, JointTorqueOptions, JointTorqueSensor
from .state import StateSensor, StateSensorOptions
from .tactile import (
    ElastomerDisplacementOptions,
    ElastomerDisplacementSensor,
    KinematicContactProbe,
    KinematicContactProbeOptions,
    ProbeReading,
    ProximityOptions,
    ProximitySensor,
)
from .temperature import TemperatureGridOptions, TemperatureGridSensor

__all__ = [
    "ContactForceOptions",
    "ContactForceSensor",
    "ContactOptions",
    "ContactSensor",
    "ElastomerDisplacementOptions",
    "ElastomerDisplacementSensor",
    "EnvAttributeOptions",
    "EnvAttributeSensor",
    "IMUOptions",
    "IMUReading",
    "IMUSensor",
    "JointEncoderOptions",
    "JointEncoderSensor",
    "JointTorqueOptions",
    "JointTorqueSensor",
    "KinematicContactProbe",
    "KinematicContactProbeOptions",
    "ProbeReading",
    "ProximityOptions",
    "ProximitySensor",
    "StateSensor",
    "StateSensorOptions",
    "TemperatureGridOptions",
    "TemperatureGridSensor",
]
