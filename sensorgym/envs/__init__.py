"""Reference environments, registered with Gymnasium under ``sensorgym/...``.

* ``sensorgym/BatchedPendulum-v0``: :class:`BatchedPendulumEnv`, a natively batched torch pendulum
  (``gym.make_vec("sensorgym/BatchedPendulum-v0", num_envs=..., vectorization_mode="vector_entry_point")``).
* ``sensorgym/AntSensors-v0``: ``Ant-v5`` whose policy sees only an IMU, foot contacts and joint encoders
  (:mod:`sensorgym.envs.ant`); ``gym.make`` for one env, ``gym.make_vec`` for a batch.
* ``sensorgym/AntAttitude-v0``: ``Ant-v5`` at 50 Hz whose policy reads its orientation through an
  attitude estimator (Mahony) on a noisy, biased IMU: the estimated projected gravity and the measured
  rate, beside encoders and foot switches (:func:`~sensorgym.envs.ant.ant_attitude_sensors`).
* ``sensorgym/Tactile-v0`` / ``sensorgym/TactileSensors-v0``: a finger pressing on objects, with proximity,
  kinematic contact probes and an elastomer pad (:mod:`sensorgym.envs.tactile`).
* ``sensorgym/Scan-v0`` / ``sensorgym/ScanSensors-v0``: a mobile base in a room with a lidar, an RGB and a
  depth camera (:mod:`sensorgym.envs.scan`).
* ``sensorgym/Thermal-v0`` / ``sensorgym/ThermalSensors-v0``: a heater pressed on a plate with a temperature
  grid (:mod:`sensorgym.envs.thermal`).
"""

import gymnasium as gym

from .ant import ant_attitude_sensors, ant_sensors
from .batched_pendulum import BatchedPendulumEnv
from .registry import register_sensor_env
from .scan import ScanEnv, scan_sensors
from .scan import register as _register_scan
from .tactile import register as _register_tactile
from .thermal import ThermalEnv, thermal_sensors
from .thermal import register as _register_thermal

__all__ = [
    "BatchedPendulumEnv",
    "ScanEnv",
    "ThermalEnv",
    "ant_attitude_sensors",
    "ant_sensors",
    "register_sensor_env",
    "scan_sensors",
    "thermal_sensors",
]

if "sensorgym/BatchedPendulum-v0" not in gym.registry:
    gym.register(
        "sensorgym/BatchedPendulum-v0",
        vector_entry_point="sensorgym.envs.batched_pendulum:BatchedPendulumEnv",
    )

register_sensor_env(
    "sensorgym/AntSensors-v0",
    "Ant-v5",
    ant_sensors,
    policy=["imu", "foot_0", "foot_1", "foot_2", "foot_3", "encoders"],
)
register_sensor_env(
    "sensorgym/AntAttitude-v0",
    "Ant-v5",
    ant_attitude_sensors,
    policy=["imu", "encoders", "foot_0", "foot_1", "foot_2", "foot_3"],
    base_kwargs={"frame_skip": 2},
)
_register_tactile()
_register_scan()
_register_thermal()
