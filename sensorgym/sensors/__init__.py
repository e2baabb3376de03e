"""The sensor catalog.

Generic: :class:`StateSensor` (any state entry), :class:`EnvAttributeSensor` (an attribute of the env).
MuJoCo (measured inside each sub-env, see :mod:`sensorgym.sensors.mujoco.base`): :class:`IMUSensor`,
:class:`ContactSensor`, :class:`ContactForceSensor`, :class:`JointEncoderSensor`,
:class:`JointTorqueSensor`, :class:`ProximitySensor`, :class:`KinematicContactProbe`,
:class:`ElastomerDisplacementSensor`, :class:`RaycasterSensor`, :class:`TemperatureGridSensor`,
:class:`RGBCameraSensor`, :class:`DepthCameraSensor`.
The MuJoCo sensors are importable without ``mujoco`` installed; they need it only when they measure.
"""

from .attribute import EnvAttributeOptions, EnvAttributeSensor
from .mujoco.attitude import AttitudeOptions, AttitudeSensor
from .mujoco.camera import CameraOptions, DepthCameraOptions, DepthCameraSensor, RGBCameraSensor
from .mujoco.contact import ContactForceOptions, ContactForceSensor, ContactOptions, ContactSensor
from .mujoco.imu import IMUOptions, IMUReading, IMUSensor
from .mujoco.joint import JointEncoderOptions, JointEncoderSensor, JointTorqueOptions, JointTorqueSensor
from .mujoco.raycaster import (
    GridPattern,
    LidarOptions,
    RaycasterOptions,
    RaycasterReading,
    RaycasterSensor,
    SphericalPattern,
)
from .mujoco.tactile import (
    ElastomerDisplacementOptions,
    ElastomerDisplacementSensor,
    KinematicContactProbe,
    KinematicContactProbeOptions,
    ProbeReading,
    ProximityOptions,
    ProximitySensor,
)
from .mujoco.temperature import TemperatureGridOptions, TemperatureGridSensor
from .state import StateSensor, StateSensorOptions

__all__ = [
    "AttitudeOptions",
    "AttitudeSensor",
    "CameraOptions",
    "ContactForceOptions",
    "ContactForceSensor",
    "ContactOptions",
    "ContactSensor",
    "DepthCameraOptions",
    "DepthCameraSensor",
    "ElastomerDisplacementOptions",
    "ElastomerDisplacementSensor",
    "EnvAttributeOptions",
    "EnvAttributeSensor",
    "GridPattern",
    "IMUOptions",
    "IMUReading",
    "IMUSensor",
    "JointEncoderOptions",
    "JointEncoderSensor",
    "JointTorqueOptions",
    "JointTorqueSensor",
    "KinematicContactProbe",
    "KinematicContactProbeOptions",
    "LidarOptions",
    "ProbeReading",
    "ProximityOptions",
    "ProximitySensor",
    "RGBCameraSensor",
    "RaycasterOptions",
    "RaycasterReading",
    "RaycasterSensor",
    "SphericalPattern",
    "StateSensor",
    "StateSensorOptions",
    "TemperatureGridOptions",
    "TemperatureGridSensor",
]
