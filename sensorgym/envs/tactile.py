"""A tactile manipulation scene: a position-controlled finger pressing on a box and a sphere.

The finger carries a proximity sensor (probes around its tip), kinematic contact probes and an elastomer
pad on its skin. The skin is a thin non-colliding layer under the rigid tip, so a pressed object sinks up
to 2 mm into it: that is what the tactile sensors read. The task: press the box with a target depth.

Registered as ``sensorgym/Tactile-v0`` (the raw env) and ``sensorgym/TactileSensors-v0`` (observed through
:func:`tactile_sensors`: the policy sees the touch sensors and the finger's joint encoders).

Example:
    >>> import gymnasium as gym, sensorgym.envs
    >>> env = gym.make("sensorgym/TactileSensors-v0")
    >>> obs, _ = env.reset(seed=0)
    >>> obs["policy"].shape   # 4 proximity + 5 probe depths + 15 probe forces + 4x4x3 pad + 3 encoders
    (75,)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ..sensors import (
    ElastomerDisplacementOptions,
    JointEncoderOptions,
    KinematicContactProbeOptions,
    ProximityOptions,
)

__all__ = ["TactileEnv", "tactile_sensors"]

XML = Path(__file__).with_name("assets") / "tactile.xml"
SKIN_Z = -0.02  # the skin's outer surface in the finger frame


class TactileEnv(gym.Env):
    """Finger over a table; action: position targets (x, y, z) relative to the start pose."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention

    def __init__(self, frame_skip: int = 25, target_depth: float = 0.001) -> None:
        import mujoco

        self.model = mujoco.MjModel.from_xml_path(str(XML))
        self.data = mujoco.MjData(self.model)
        self.frame_skip = frame_skip
        self.dt = self.model.opt.timestep * frame_skip
        self.target_depth = target_depth
        self.action_space = gym.spaces.Box(
            np.array([-0.2, -0.2, -0.2], np.float32), np.array([0.3, 0.2, 0.1], np.float32)
        )
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (9,), np.float32)
        self._finger = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "finger")
        self._block = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "block")

    def _obs(self) -> np.ndarray:
        return np.concatenate(
            [self.data.qpos[14:17], self.data.qvel[12:15], self.data.xpos[self._block]]
        ).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        import mujoco

        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[0:2] += self.np_random.uniform(-0.02, 0.02, 2)  # block position on the table
        self.data.qpos[14:17] = self.np_random.uniform([-0.05, -0.05, -0.05], [0.05, 0.05, 0.0])
        self.data.ctrl[:] = self.data.qpos[14:17]
        mujoco.mj_forward(self.model, self.data)
        return self._obs(), {}

    def step(self, action: Any):
        import mujoco

        self.data.ctrl[:] = np.clip(action, self.action_space.low, self.action_space.high)
        mujoco.mj_step(self.model, self.data, nstep=self.frame_skip)
        block_top = self.data.xpos[self._block][2] + 0.03
        skin = self.data.xpos[self._finger][2] + SKIN_Z
        depth = block_top - skin  # > 0: the block presses into the skin
        reward = -abs(depth - self.target_depth) * 100.0
        fell = bool(self.data.xpos[self._block][2] < 0.0)
        return self._obs(), float(reward), fell, False, {"press_depth": float(depth)}


def tactile_sensors() -> dict:
    """Proximity probes around the tip, 5 kinematic contact probes and a 4x4 elastomer pad on the skin,
    plus encoders of the finger joints."""
    tip = SKIN_Z
    return {
        "proximity": ProximityOptions(
            body="finger",
            probes=[(0.02, 0, tip), (-0.02, 0, tip), (0, 0.02, tip), (0, -0.02, tip)],
            max_range=0.1,
            noise=0.0005,
        ),
        "probes": KinematicContactProbeOptions(
            body="finger",
            probes=[
                (0, 0, tip),
                (0.01, 0.01, tip),
                (-0.01, 0.01, tip),
                (0.01, -0.01, tip),
                (-0.01, -0.01, tip),
            ],
            radius=0.0,
            stiffness=2000.0,
            damping=5.0,
            noise=0.0001,
        ),
        "pad": ElastomerDisplacementOptions(
            body="finger",
            center=(0, 0, tip),
            normal=(0, 0, -1),
            size=(0.012, 0.012),
            grid=(4, 4),
            spread=0.7,
            noise=0.00005,
        ),
        "encoders": JointEncoderOptions(joints=["finger_x", "finger_y", "finger_z"], resolution=1e-4),
    }


def register() -> None:
    from .registry import register_sensor_env

    if "sensorgym/Tactile-v0" not in gym.registry:
        gym.register(
            "sensorgym/Tactile-v0", entry_point="sensorgym.envs.tactile:TactileEnv", max_episode_steps=200
        )
    register_sensor_env("sensorgym/TactileSensors-v0", "sensorgym/Tactile-v0", tactile_sensors)
