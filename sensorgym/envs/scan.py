"""A mobile base scanning a room: lidar, RGB and depth cameras on a velocity-controlled platform.

:class:`ScanEnv` is a small MuJoCo base (slide x, slide y, hinge yaw) in a walled 6 m x 6 m room with a
few obstacles. The action is a velocity command in the base frame (forward, lateral, yaw rate, each in
[-1, 1], scaled to ``max_speed`` m/s and ``max_yaw_rate`` rad/s); the observation is the base pose and
velocity ``(x, y, cos yaw, sin yaw, vx, vy, yaw rate)``. The task: cross the room toward +x. Reward per
step: progress along +x (m/s) minus ``collision_penalty`` while the base touches a wall or an obstacle;
the episode terminates when the base reaches ``goal_x`` and is truncated after ``max_episode_steps``.
Resets draw the start pose from ``np_random`` (the free west strip of the room, heading within 0.6 rad of
+x); ``reset(options={"pose": (x, y, yaw)})`` places the base explicitly.

:func:`scan_sensors` puts a 36x4-ray lidar on the base's lidar body and a 32x24 RGB and depth camera on its
front camera. :func:`register` registers ``sensorgym/Scan-v0`` (the raw env) and ``sensorgym/ScanSensors-v0``
(observed through the sensors; policy: lidar + both cameras; critic: clean lidar + the env's state).

Example:
    >>> from sensorgym.envs.scan import register, scan_sensors
    >>> from sensorgym.wrappers import make_sensor_vec
    >>> register()
    >>> envs = make_sensor_vec("sensorgym/Scan-v0", 2, scan_sensors(), seed=0)
    >>> obs, _ = envs.reset(seed=0)
    >>> envs.sensors["lidar"].read().distances.shape, envs.sensors["camera"].read().shape
    (torch.Size([2, 4, 36]), torch.Size([2, 24, 32, 3]))
    >>> envs.close()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ..sensors.mujoco.camera import CameraOptions, DepthCameraOptions
from ..sensors.mujoco.raycaster import RaycasterOptions, SphericalPattern

__all__ = ["ScanEnv", "register", "scan_sensors"]

XML = Path(__file__).with_name("assets") / "scan.xml"
ENV_ID = "sensorgym/Scan-v0"
SENSOR_ENV_ID = "sensorgym/ScanSensors-v0"
MAX_EPISODE_STEPS = 200


class ScanEnv(gym.Env):
    """Velocity-controlled mobile base in a room with obstacles; see the module docstring.

    Args:
        frame_skip: physics steps (0.01 s) per control step; ``dt = 0.01 * frame_skip``.
        max_speed: m/s at action 1 (forward and lateral).
        max_yaw_rate: rad/s at action 1.
        collision_penalty: subtracted from the reward on every step the base is in contact.
        goal_x: the episode terminates once the base is past this x (m).
        max_episode_steps: the episode is truncated after this many steps.

    Example:
        >>> env = ScanEnv()
        >>> obs, _ = env.reset(seed=1)
        >>> obs.shape, env.dt
        ((7,), 0.05)
        >>> obs2, reward, terminated, truncated, info = env.step([1.0, 0.0, 0.0])
        >>> bool(obs2[0] > obs[0]), terminated, truncated   # full speed ahead moves the base toward +x
        (True, False, False)
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention

    def __init__(
        self,
        frame_skip: int = 5,
        max_speed: float = 1.0,
        max_yaw_rate: float = 1.5,
        collision_penalty: float = 1.0,
        goal_x: float = 2.5,
        max_episode_steps: int = MAX_EPISODE_STEPS,
    ) -> None:
        import mujoco

        self.model = mujoco.MjModel.from_xml_path(str(XML))
        self.data = mujoco.MjData(self.model)
        self.frame_skip = int(frame_skip)
        self.dt = float(self.model.opt.timestep * self.frame_skip)
        self.max_speed, self.max_yaw_rate = float(max_speed), float(max_yaw_rate)
        self.collision_penalty, self.goal_x = float(collision_penalty), float(goal_x)
        self.max_episode_steps = int(max_episode_steps)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        # the walls keep the base inside the room; velocities have no hard limit (collisions)
        high = np.array([3.1, 3.1, 1.0, 1.0, np.inf, np.inf, np.inf], np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
        body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "base")
        self._base_geoms = set(
            np.flatnonzero(self.model.body_rootid[self.model.geom_bodyid] == body).tolist()
        )
        self._steps = 0

    def _obs(self) -> np.ndarray:
        x, y, yaw = self.data.qpos[:3]
        vx, vy, w = self.data.qvel[:3]
        return np.array([x, y, np.cos(yaw), np.sin(yaw), vx, vy, w], dtype=np.float32)

    def _in_collision(self) -> bool:
        # the base cannot touch the floor (contype bits), so any contact of its geoms is a collision
        geoms = self._base_geoms
        return any(
            int(self.data.contact[i].geom1) in geoms or int(self.data.contact[i].geom2) in geoms
            for i in range(self.data.ncon)
        )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        import mujoco

        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        pose = (options or {}).get("pose")
        if pose is None:  # start in the free west strip of the room, roughly facing the goal
            pose = self.np_random.uniform([-2.6, -2.2, -0.6], [-2.0, 2.2, 0.6])
        self.data.qpos[:3] = pose
        mujoco.mj_forward(self.model, self.data)
        self._steps = 0
        return self._obs(), {"collision": 0.0}

    def step(self, action: Any):
        import mujoco

        a = np.clip(np.asarray(action, dtype=np.float64).reshape(3), -1.0, 1.0)
        forward, lateral, turn = a[0] * self.max_speed, a[1] * self.max_speed, a[2] * self.max_yaw_rate
        yaw = self.data.qpos[2]
        c, s = np.cos(yaw), np.sin(yaw)
        # the actuators track world-frame velocities: rotate the base-frame command once per control step
        self.data.ctrl[:] = (c * forward - s * lateral, s * forward + c * lateral, turn)
        x_before = self.data.qpos[0]
        mujoco.mj_step(self.model, self.data, nstep=self.frame_skip)
        self._steps += 1
        collision = self._in_collision()
        progress = (self.data.qpos[0] - x_before) / self.dt
        reward = float(progress - self.collision_penalty * collision)
        terminated = bool(self.data.qpos[0] >= self.goal_x)
        truncated = self._steps >= self.max_episode_steps
        return self._obs(), reward, terminated, truncated, {"collision": float(collision)}


def scan_sensors() -> dict:
    """Lidar (36 azimuths x 4 elevations, 8 m) + 32x24 RGB and depth front cameras, with realistic
    imperfections (dt = 0.05 s): the cameras run one step behind the lidar. The RGB camera renders
    without shadows, which keeps software (CPU) rendering around a millisecond per image."""
    return {
        "lidar": RaycasterOptions(
            body="lidar",
            pattern=SphericalPattern(n_horizontal=36, n_vertical=4, fov_vertical=30.0),
            max_range=8.0,
            noise=0.01,
            delay=0.05,
        ),
        "camera": CameraOptions(camera="front_cam", width=32, height=24, noise=3.0, delay=0.1, shadows=False),
        "depth": DepthCameraOptions(
            camera="front_cam", width=32, height=24, noise=0.01, max_depth=8.0, delay=0.1
        ),
    }


def register() -> None:
    """Register ``sensorgym/Scan-v0`` and ``sensorgym/ScanSensors-v0`` (idempotent)."""
    from .registry import register_sensor_env

    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point="sensorgym.envs.scan:ScanEnv", max_episode_steps=MAX_EPISODE_STEPS)
    register_sensor_env(
        SENSOR_ENV_ID, ENV_ID, scan_sensors, policy=["lidar", "camera", "depth"], critic=["lidar"]
    )
