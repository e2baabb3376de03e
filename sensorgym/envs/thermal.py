"""``ThermalEnv``: a heater block pressed onto a plate, observed through a temperature grid.

A fixed aluminium-like plate (0.4 x 0.2 x 0.02 m) and a 1 kg heater block on a vertical slide above its
left half. The action in ``[-1, 1]`` is the target height of the heater's position servo: ``+1`` lifts
it 6 cm clear of the plate, ``-1`` puts the target 6 cm *below* the plate surface, so the heater presses
with about ``400 N/m * 0.06 m + m g ≈ 34 N``. The reward asks for a contact force of ``target_force``
(default 20 N): ``-|F - target_force| / target_force``. The observation is the heater's height and
velocity ``[q, q̇]`` (float32); ``info["contact_force"]`` is the force ``F`` (N). Episodes last 200
steps of ``dt = 0.05`` s when made through Gymnasium (``sensorgym/Thermal-v0``).

The heating itself is the sensor's business: :func:`thermal_sensors` puts a
:class:`~sensorgym.sensors.mujoco.temperature.TemperatureGridSensor`
on the plate (heater at 80 °C, conductance
proportional to the press) and a height encoder on the slide. ``register()`` registers
``sensorgym/Thermal-v0`` (the bare env) and ``sensorgym/ThermalSensors-v0`` (observed through the
sensors: ``gym.make`` for one env, ``gym.make_vec`` for a batch).

Example:
    >>> import numpy as np
    >>> from sensorgym.envs.thermal import ThermalEnv
    >>> env = ThermalEnv()
    >>> obs, info = env.reset(seed=0)
    >>> for _ in range(20):
    ...     obs, reward, terminated, truncated, info = env.step(np.array([-1.0], np.float32))
    >>> obs.shape, env.dt, round(info["contact_force"])  # 400 N/m * 6 cm + 9.81 N
    ((2,), 0.05, 34)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ..sensors.mujoco.base import MujocoSensorOptions
from ..sensors.mujoco.joint import JointEncoderOptions
from ..sensors.mujoco.temperature import TemperatureGridOptions
from .registry import register_sensor_env

__all__ = ["THERMAL_XML", "ThermalEnv", "register", "thermal_sensors"]

THERMAL_XML = Path(__file__).resolve().parent / "assets" / "thermal.xml"
ENV_ID = "sensorgym/Thermal-v0"
SENSOR_ENV_ID = "sensorgym/ThermalSensors-v0"
MAX_EPISODE_STEPS = 200


class ThermalEnv(gym.Env):
    """A heater pressed onto a plate; see the module docstring.

    Example:
        >>> import numpy as np
        >>> from sensorgym.envs.thermal import ThermalEnv
        >>> env = ThermalEnv(target_force=10.0)
        >>> _ = env.reset(seed=1)
        >>> rewards = [env.step(np.array([0.0], np.float32))[1] for _ in range(20)]
        >>> round(rewards[-1], 2)  # resting on the plate by its weight alone: 9.81 N
        -0.02

    Args:
        frame_skip: MuJoCo steps (5 ms) per control step.
        target_force: the contact force (N) the reward asks for.
        xml_file: the MJCF model (default: ``assets/thermal.xml``).
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium's convention

    def __init__(
        self, frame_skip: int = 10, target_force: float = 20.0, xml_file: str | Path = THERMAL_XML
    ) -> None:
        import mujoco

        if isinstance(frame_skip, bool) or not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(f"ThermalEnv(frame_skip={frame_skip!r}): expected an int >= 1, e.g. 10.")
        if not target_force > 0:
            raise ValueError(f"ThermalEnv(target_force={target_force!r}): expected a force > 0 N, e.g. 20.0.")
        self.model = mujoco.MjModel.from_xml_path(str(xml_file))
        self.data = mujoco.MjData(self.model)
        self.frame_skip = frame_skip
        self.target_force = float(target_force)
        self._ctrl_lo, self._ctrl_hi = (float(x) for x in self.model.actuator_ctrlrange[0])
        heater = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "heater")
        plate = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "plate")
        self._heater_geoms = self.model.geom_bodyid == heater
        self._plate_geoms = self.model.geom_bodyid == plate
        self._f6 = np.zeros(6)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)
        # the slide's range, and a speed the servo (at most ~60 N against 40 N·s/m of damping) never nears
        high = np.array([0.1, 10.0], dtype=np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    @property
    def dt(self) -> float:
        return float(self.model.opt.timestep) * self.frame_skip

    def _obs(self) -> np.ndarray:
        return np.array([self.data.qpos[0], self.data.qvel[0]], dtype=np.float32)

    def contact_force(self) -> float:
        """Normal force (N) between the heater and the plate."""
        import mujoco

        total = 0.0
        d = self.data
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = int(c.geom1), int(c.geom2)
            if (self._heater_geoms[g1] and self._plate_geoms[g2]) or (
                self._heater_geoms[g2] and self._plate_geoms[g1]
            ):
                mujoco.mj_contactForce(self.model, d, i, self._f6)
                total += abs(float(self._f6[0]))
        return total

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        import mujoco

        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        # start clear of the plate (it touches at q = -0.06), at rest, with the servo holding there
        q0 = float(self.np_random.uniform(-0.03, 0.03))
        self.data.qpos[0] = q0
        self.data.ctrl[0] = np.clip(q0, self._ctrl_lo, self._ctrl_hi)
        mujoco.mj_forward(self.model, self.data)
        return self._obs(), {"contact_force": self.contact_force()}

    def step(self, action: Any):
        import mujoco

        a = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0))
        self.data.ctrl[0] = self._ctrl_lo + (a + 1.0) * 0.5 * (self._ctrl_hi - self._ctrl_lo)
        for _ in range(self.frame_skip):
            mujoco.mj_step(self.model, self.data)
        # contacts and forces of the state we return, not of the last substep's start
        mujoco.mj_forward(self.model, self.data)
        force = self.contact_force()
        reward = -abs(force - self.target_force) / self.target_force
        return self._obs(), reward, False, False, {"contact_force": force}


def thermal_sensors() -> dict[str, MujocoSensorOptions]:
    """What the policy sees: the plate's temperature grid (8 x 4 cells, a thermal lag of 0.25 s, noise,
    0.05 s delay) and the heater's height from a slide encoder (0.1 mm ticks).

    Example:
        >>> from sensorgym.envs.thermal import thermal_sensors
        >>> {name: type(o).__name__ for name, o in thermal_sensors().items()}
        {'plate_temperature': 'TemperatureGridOptions', 'heater_height': 'JointEncoderOptions'}
    """
    return {
        "plate_temperature": TemperatureGridOptions(
            body="plate",
            grid_size=(8, 4, 1),
            diffusivity=2e-3,  # faster than aluminium (1e-4) so heat visibly spreads within an episode
            heat_transfer=0.05,
            # 1/(s·N); box on box touches at 4 corners: at 20 N each corner cell nears 80 °C at 0.25/s
            contact_heat=0.05,
            contact_temperature=80.0,
            source_bodies=("heater",),
            fluctuation=0.05,
            time_constant=0.25,
            noise=0.05,
            resolution=0.0625,
            delay=0.05,
        ),
        "heater_height": JointEncoderOptions(joints=["heater_z"], resolution=1e-4, noise=2e-4),
    }


def register() -> None:
    """Register ``sensorgym/Thermal-v0`` and ``sensorgym/ThermalSensors-v0`` (idempotent).

    Example:
        >>> import gymnasium as gym
        >>> from sensorgym.envs.thermal import register
        >>> register()
        >>> gym.spec("sensorgym/Thermal-v0").max_episode_steps
        200
    """
    if ENV_ID not in gym.registry:
        gym.register(
            ENV_ID, entry_point="sensorgym.envs.thermal:ThermalEnv", max_episode_steps=MAX_EPISODE_STEPS
        )
    register_sensor_env(SENSOR_ENV_ID, ENV_ID, thermal_sensors, policy=["plate_temperature", "heater_height"])
