"""The Ant (``Ant-v5``) observed the way a real quadruped sees itself: an IMU on the torso, a contact
switch per foot and joint encoders. The policy gets only those measured readings; the critic gets their
ground truth and the full simulator observation (105 values).

Registered as ``sensorgym/AntSensors-v0`` (``gym.make`` for one env, ``gym.make_vec`` for a batch). Its
``Ant-v5`` is built from a copy of ``ant.xml`` with MuJoCo's native sensors added (:func:`native_ant_xml`):
an accelerometer, gyro and magnetometer on a site at the torso's origin and, per foot, a ``contact`` sensor
of the foot and one of the foot with the torso (subtracted: ``exclude_bodies=("torso",)``). The IMU and
the switches read them from ``data.sensordata``, computed in C by the one ``mj_forward`` per step the
catalog already runs; the encoders copy ``qpos``. The physics is ``Ant-v5``'s own (the added sensors do
not act on it) and the readings equal the Python path's within float32 rounding.

Example:
    >>> import gymnasium as gym, sensorgym.envs
    >>> env = gym.make("sensorgym/AntSensors-v0")
    >>> obs, _ = env.reset(seed=0)
    >>> obs["policy"].shape, obs["critic"].shape  # 9 IMU + 4 feet + 8 encoders; GT (21) + env obs (105)
    ((21,), (126,))
"""

from __future__ import annotations

import math

from ..core.randomization import Normal, Uniform
from ..sensors import AttitudeOptions, ContactOptions, IMUOptions, JointEncoderOptions

__all__ = ["ANT_FEET", "ANT_JOINTS", "ant_attitude_sensors", "ant_sensors", "native_ant_xml"]

ANT_FEET = ("left_ankle_geom", "right_ankle_geom", "third_ankle_geom", "fourth_ankle_geom")
ANT_JOINTS = ("hip_1", "ankle_1", "hip_2", "ankle_2", "hip_3", "ankle_3", "hip_4", "ankle_4")


def ant_sensors() -> dict:
    """IMU + 4 foot contacts + 8 joint encoders, with realistic imperfections (dt = 0.05 s)."""
    sensors = {
        "imu": IMUOptions(
            body="torso",
            acc_noise=0.1,
            gyro_noise=0.02,
            mag_noise=0.01,
            gyro_bias=Normal(0.0, 0.01),
            acc_random_walk=0.002,
            gyro_cross_axis_coupling=0.01,
            delay=Uniform(0.0, 0.05),
        ),
    }
    for i, geom in enumerate(ANT_FEET):
        sensors[f"foot_{i}"] = ContactOptions(geom=geom, exclude_bodies=("torso",), noise=0.1, delay=0.05)
    sensors["encoders"] = JointEncoderOptions(joints=ANT_JOINTS, resolution=2 * math.pi / 4096, noise=0.002)
    return sensors


def ant_attitude_sensors() -> dict:
    """The sensors of ``sensorgym/AntAttitude-v0`` (and of ``examples/configs/ant_attitude.toml``, the
    same): the torso IMU read through a Mahony estimator (its projected gravity and the measured rate),
    the encoders and one contact switch per foot, for a 50 Hz policy (``frame_skip=2``). The estimator's
    ``kp`` is drawn per env at every reset; it starts 2 degrees off the truth (a robot booted at rest)."""
    sensors: dict = {
        "imu": AttitudeOptions(
            body="torso",
            estimator="mahony",
            estimator_kp=Uniform(0.3, 1.0),
            estimator_ki=0.05,
            estimator_init="truth",
            estimator_init_error=2.0,
            outputs=("projected_gravity", "ang_vel"),
            gyro_noise_density=0.002,
            gyro_bias=Normal(0.0, 0.01),
            gyro_random_walk_density=0.0001,
            acc_noise_density=0.02,
            acc_bias=Normal(0.0, 0.05),
            delay=0.02,
        ),
        "encoders": JointEncoderOptions(joints=ANT_JOINTS, resolution=0.0015, noise=0.002),
    }
    for i, geom in enumerate(ANT_FEET):
        sensors[f"foot_{i}"] = ContactOptions(geom=geom, exclude_bodies=("torso",))
    return sensors


def native_ant_xml(sensors: dict | None = None) -> str:
    """Path of ``Ant-v5``'s ``ant.xml`` with the native sensors of ``sensors`` (default
    :func:`ant_sensors`) added, for ``gym.make("Ant-v5", xml_file=...)`` (written once per content).

    Example:
        >>> import gymnasium as gym
        >>> gym.make("Ant-v5", xml_file=native_ant_xml()).unwrapped.model.nsensor
        11
    """
    from gymnasium.envs.mujoco.mujoco_env import expand_model_path

    from ..sensors.mujoco.native import native_model_xml

    return native_model_xml(expand_model_path("ant.xml"), ant_sensors() if sensors is None else sensors)
