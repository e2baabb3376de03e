"""A minimal gym.Env over an inline MJCF scene, for the catalog tests."""

from __future__ import annotations

import gymnasium as gym
import mujoco
import numpy as np


class MjSceneEnv(gym.Env):
    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention

    def __init__(self, xml: str, frame_skip: int = 10, qpos: dict | None = None, qvel: dict | None = None):
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        self.frame_skip = frame_skip
        self.dt = self.model.opt.timestep * frame_skip
        self._qpos, self._qvel = qpos or {}, qvel or {}
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.model.nq,), np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (max(self.model.nu, 1),), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        for i, v in self._qpos.items():
            self.data.qpos[i] = v
        for i, v in self._qvel.items():
            self.data.qvel[i] = v
        mujoco.mj_forward(self.model, self.data)
        return self.data.qpos.copy(), {}

    def step(self, action):
        if self.model.nu:
            self.data.ctrl[:] = action
        mujoco.mj_step(self.model, self.data, nstep=self.frame_skip)
        return self.data.qpos.copy(), 0.0, False, False, {}
