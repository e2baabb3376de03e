"""bitcheck scenarios of the Gymnasium layer: ``ActionLatency`` on small vector envs (numpy and torch
actions, the three autoreset modes, delay, jitter, distributions and initial actions, partial resets with
seeds, state dicts), ``SensorObservation`` on Pendulum-v1 sync envs (every autoreset mode, both executors,
ages, randomization, composed with ``ActionLatency``, an env attribute, an IMU on MuJoCo's Ant), the
checkpoint files of the wrappers (``file/``), and bad input: the exception type and message of invalid
options, states, masks, reads, setters and checkpoints (``err/``).
"""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space

import sensorgym as sg
from sensorgym.wrappers import ActionLatency, SensorObservation, SingleEnvSensorObservation, make_sensor_vec

U, N, C = sg.Uniform, sg.Normal, sg.Choice
MODES = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}
LAT_B, LAT_DT = 4, 0.1


# -- envs whose observation is the action they applied ---------------------------------------------------
class EchoEnv(gym.Env):
    """obs = [t, applied action (2)]; episodes end at random (its own generator) or after 9 steps."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention
    dt = LAT_DT

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0, -9.0, -9.0], np.float32), {"t": 0}

    def step(self, action: Any):
        self.t += 1
        end = bool(self.np_random.random() < 0.15)
        obs = np.array([self.t, *np.asarray(action, np.float32)], np.float32)
        return obs, float(self.t), end, self.t >= 9, {"t": self.t}


class TorchEchoEnv(VectorEnv):
    """The same, natively batched with torch tensors, in any autoreset mode."""

    dt = LAT_DT

    def __init__(self, num_envs: int, mode: AutoresetMode) -> None:
        self.num_envs, self.device = num_envs, torch.device("cpu")
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.single_action_space = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.gen = torch.Generator().manual_seed(0)
        self.obs = torch.zeros(num_envs, 3)
        self.autoreset = torch.zeros(num_envs, dtype=torch.bool)

    def _restart(self, rows: torch.Tensor) -> None:
        self.obs[rows] = torch.tensor([0.0, -9.0, -9.0])

    def reset(self, *, seed: Any = None, options: dict | None = None):
        if seed is not None:
            self.gen.manual_seed(seed if isinstance(seed, int) else seed[0])
        rows = torch.ones(self.num_envs, dtype=torch.bool)
        if options and "reset_mask" in options:
            rows = torch.as_tensor(options.pop("reset_mask"))
        self._restart(rows)
        self.autoreset &= ~rows
        return self.obs.clone(), {}

    def step(self, actions: Any):
        obs = torch.cat([self.obs[:, :1] + 1, torch.as_tensor(actions, dtype=torch.float32)], 1)
        term = torch.rand(self.num_envs, generator=self.gen) < 0.15
        trunc = obs[:, 0] >= 9
        mode, info = self.metadata["autoreset_mode"], {}
        if mode is AutoresetMode.NEXT_STEP:
            restart, self.obs = self.autoreset, obs
            self._restart(restart)
            term, trunc = term & ~restart, trunc & ~restart
            self.autoreset = term | trunc
        elif mode is AutoresetMode.SAME_STEP:
            done = term | trunc
            info = {"final_obs": obs.clone(), "_final_obs": done, "final_info": {}}
            self.obs = obs
            self._restart(done)
        else:
            self.obs = obs
        return self.obs.clone(), obs[:, 0].clone(), term, trunc, info


def echo_envs(backend: str, mode: AutoresetMode) -> VectorEnv:
    if backend == "torch":
        return TorchEchoEnv(LAT_B, mode)
    return SyncVectorEnv([EchoEnv for _ in range(LAT_B)], autoreset_mode=mode)


def _action(t: int, as_torch: bool, b: int = LAT_B) -> Any:
    a = np.stack([np.full(b, 0.1 * t), np.arange(b) - 0.5 * t], axis=1).astype(np.float32)
    return torch.from_numpy(a) if as_torch else a


LATENCIES: dict[str, dict[str, Any]] = {
    "delay": dict(delay=0.2),
    "jitter": dict(delay=0.3, jitter=0.2),
    "distributions_first": dict(delay=U(0.0, 0.3), jitter=U(0.0, 0.1), initial_action="first"),
    "fraction_array": dict(
        delay=0.15, jitter=C([0.0, 0.1]), initial_action=np.array([0.5, -0.5], np.float32)
    ),
}


def _lat_step(rec: Any, lat: Any, t: int, as_torch: bool, mode: AutoresetMode, done: Any) -> Any:
    """One step (in DISABLED mode, first a partial reset of the envs done, seeded every other time)."""
    if mode is AutoresetMode.DISABLED and done is not None and bool(np.asarray(done).any()):
        mask = done if torch.is_tensor(done) else np.asarray(done)
        seed = 40 + t if t % 2 else None
        rec.out(f"{t}.reset", lat.reset(seed=seed, options={"reset_mask": mask}))
    obs, reward, term, trunc, info = lat.step(_action(t, as_torch))
    rec.out(f"{t}.step", (obs, reward, term, trunc, info))
    return term | trunc


def latency_scenario(config: str, backend: str, mode: str, as_torch: bool) -> Callable:
    def scenario(rec: Any, ctx: Any) -> None:
        m = MODES[mode]
        lat = ActionLatency(echo_envs(backend, m), seed=3, **LATENCIES[config])
        rec.out(
            "max_shift",
            (
                lat.config.max_shift,
                lat.config.dt,
                lat.config.has_jitter,
                repr(lat.config.delay),
                repr(lat.config.jitter),
            ),
        )
        rec.out("0.reset", lat.reset(seed=1))
        done = None
        for t in range(1, 19):
            done = _lat_step(rec, lat, t, as_torch, m, done)
            if t == 9:
                rec.state("9.sd", lat.state_dict())
        rec.out("critic_sensors", lat.critic_sensors(applied=True, latency=True))

    return scenario


def latency_round_trip(backend: str) -> Callable:
    """Save at step 6; continue (``live``); a fresh wrapper around a copy of the env taken at step 6 loads
    the state and continues (``fresh``); a deep copy taken at 6 continues (``copy``)."""

    def scenario(rec: Any, ctx: Any) -> None:
        m = AutoresetMode.NEXT_STEP
        lat = ActionLatency(echo_envs(backend, m), delay=U(0.1, 0.3), jitter=0.1, seed=5)
        lat.reset(seed=2)
        for t in range(1, 7):
            _lat_step(rec, lat, t, backend == "torch", m, None)
        saved, env_copy, twin = lat.state_dict(), copy.deepcopy(lat.env), copy.deepcopy(lat)
        rec.state("6.sd", saved)
        for name, wrapper in (("live", lat), ("copy", twin)):
            for t in range(7, 13):
                _lat_step(rec, wrapper, t, backend == "torch", m, None)
            rec.out(f"{name}.sd", wrapper.state_dict()["ring"])
        fresh = ActionLatency(env_copy, delay=U(0.1, 0.3), jitter=0.1, seed=77)
        fresh.load_state_dict(saved)
        for t in range(7, 13):
            _lat_step(rec, fresh, t, backend == "torch", m, None)

    return scenario


# -- SensorObservation on Pendulum ---------------------------------------------------------------------
def pendulum(mode: AutoresetMode, n: int = 3) -> VectorEnv:
    return gym.make_vec(
        "Pendulum-v1",
        num_envs=n,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        max_episode_steps=7,
    )


ANGLE = sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, noise=0.01, history_length=2)
OBSERVATIONS: dict[str, Callable[[], Any]] = {
    "example": lambda: SensorObservation(pendulum(AutoresetMode.NEXT_STEP), {"angle": ANGLE}, seed=0),
    "same_step_ages": lambda: SensorObservation(
        pendulum(AutoresetMode.SAME_STEP),
        {
            "angle": sg.StateSensorOptions(
                key="obs", index=[0, 1], delay=0.1, jitter=0.05, noise=U(0.0, 0.02)
            ),
            "vel": sg.StateSensorOptions(
                key="obs", index=[2], bias=N(0.0, 0.1), resolution=0.01, update_period=0.1, dropout=0.2
            ),
        },
        seed=1,
        critic_randomization=True,
        policy_age=["vel"],
        critic_age=["angle"],
    ),
    "disabled_per_env_rng": lambda: SensorObservation(
        pendulum(AutoresetMode.DISABLED),
        {
            "angle": ANGLE,
            "vel": sg.StateSensorOptions(key="obs", index=[2], random_walk=0.1, delay=U(0.0, 0.1)),
        },
        seed=2,
        per_env_rng=True,
        critic_randomization=True,
    ),
    "torch_executor": lambda: SensorObservation(
        pendulum(AutoresetMode.NEXT_STEP),
        {
            "angle": ANGLE,
            "vel": sg.StateSensorOptions(key="obs", index=[2], noise_density=0.01, bandwidth=3.0),
        },
        seed=3,
        executor="torch",
        policy=["angle"],
        critic=["vel"],
        critic_env_obs=False,
    ),
    "attribute": lambda: make_sensor_vec(
        "Pendulum-v1",
        3,
        {
            "angle": ANGLE,
            "theta": sg.EnvAttributeOptions(attr="state", shape=(2,), index=[0], noise=0.05, delay=0.05),
        },
        policy=["angle"],
        critic=["theta"],
        seed=4,
        env_kwargs={"max_episode_steps": 7},
    ),
    "latency": lambda: _with_latency(),
}


def _with_latency() -> SensorObservation:
    lat = ActionLatency(pendulum(AutoresetMode.NEXT_STEP), delay=0.1, jitter=0.05, seed=1)
    sensors = {"angle": ANGLE, **lat.critic_sensors(applied=True, latency=True)}
    return SensorObservation(lat, sensors, policy=["angle"], seed=5)


def _pend_action(t: int, n: int = 3) -> np.ndarray:
    return np.array([[math.sin(0.7 * t + b)] for b in range(n)], np.float32) * 2


def _obs_step(rec: Any, env: Any, t: int, done: Any, tag: str = "") -> Any:
    if env.autoreset_mode is AutoresetMode.DISABLED and done is not None and done.any():
        rec.out(f"{tag}{t}.reset", env.reset(seed=60 + t, options={"reset_mask": done.copy()}))
    obs, reward, term, trunc, info = env.step(_pend_action(t))
    rec.out(f"{tag}{t}.step", (obs, reward, term, trunc, info))
    return np.asarray(term | trunc)


def observation_scenario(config: str) -> Callable:
    def scenario(rec: Any, ctx: Any) -> None:
        env = OBSERVATIONS[config]()
        rec.out("spaces", (repr(env.single_observation_space), repr(env.observation_space)))
        rec.out("0.reset", env.reset(seed=0))
        done = None
        for t in range(1, 17):
            done = _obs_step(rec, env, t, done)
        rec.out("current", env.current_observation())
        rec.state("end.sd", env.state_dict())
        env.close()

    return scenario


def observation_round_trip(executor: str) -> Callable:
    """``state_dict(include_envs=True)`` at step 5 into a fresh wrapper, and a deep copy, both continuing."""

    def build() -> SensorObservation:
        sensors = {
            "angle": ANGLE,
            "vel": sg.StateSensorOptions(key="obs", index=[2], noise=0.1, delay=U(0.0, 0.1)),
        }
        return SensorObservation(pendulum(AutoresetMode.NEXT_STEP), sensors, seed=6, executor=executor)

    def scenario(rec: Any, ctx: Any) -> None:
        env = build()
        env.reset(seed=1)
        for t in range(1, 6):
            _obs_step(rec, env, t, None)
        saved, twin = env.state_dict(include_envs=True), copy.deepcopy(env)
        fresh = build()
        fresh.reset(seed=9)
        fresh.load_state_dict(pickle.loads(pickle.dumps(saved)))
        for name, wrapper in (("live", env), ("copy", twin), ("fresh", fresh)):
            for t in range(6, 14):
                _obs_step(rec, wrapper, t, None, tag=f"{name}.")

    return scenario


def ant_imu(executor: str) -> Callable:
    """An IMU with a randomized mount and a per-field option on MuJoCo's Ant (real MuJoCo, 2 envs)."""

    def scenario(rec: Any, ctx: Any) -> None:
        imu = sg.IMUOptions(
            body="torso",
            pos_offset=U(-0.05, 0.05),
            euler_offset=(0.0, U(-3.0, 3.0), 0.0),
            noise=0.01,
            gyro_bias=N(0.0, 0.01),
            delay=0.05,
            acc_cross_axis_coupling=0.01,
        )
        env = make_sensor_vec("Ant-v5", 2, {"imu": imu}, seed=0, executor=executor)
        rec.out("0.reset", env.reset(seed=0))
        for t in range(1, 7):
            rec.out(f"{t}.step", env.step(np.full((2, 8), 0.3 * math.sin(t), np.float32)))
            rec.out(f"{t}.imu", (env.sensors["imu"].read(), env.sensors["imu"].read_ground_truth()))
            rec.out(f"{t}.mount", env.sensors["imu"].read_mount())
        env.close()

    return scenario


def single_env(executor: str) -> Callable:
    """``SingleEnvSensorObservation`` on one Pendulum-v1 (its own resets at the end of each episode)."""

    def scenario(rec: Any, ctx: Any) -> None:
        sensors = {
            "angle": ANGLE,
            "theta": sg.EnvAttributeOptions(
                attr="state", shape=(2,), noise=U(0.0, 0.1), delay=0.1, jitter=0.05
            ),
        }
        env = SingleEnvSensorObservation(
            gym.make("Pendulum-v1", max_episode_steps=6), sensors, seed=3, executor=executor,
            critic_randomization=True, policy_age=["theta"],
        )  # fmt: skip
        rec.out("0.reset", env.reset(seed=0))
        for t in range(1, 16):
            out = env.step(_pend_action(t, 1)[0])
            rec.out(f"{t}.step", out)
            if out[2] or out[3]:
                rec.out(f"{t}.reset", env.reset())
        env.close()

    return scenario


# -- checkpoint files of the wrappers ----------------------------------------------------------------------
def file_observation(rec: Any, ctx: Any) -> None:
    path = ctx.checkpoints / "observation.pt"

    def build() -> SensorObservation:
        return OBSERVATIONS["same_step_ages"]()

    if ctx.mode == "record":  # the run that saves is not recorded: compare mode does not run it
        env = build()
        env.reset(seed=0)
        for t in range(1, 7):
            _obs_step(type(rec)(), env, t, None)
        torch.save(env.state_dict(include_envs=True), path)
    env = build()
    env.reset(seed=3)
    env.load_state_dict(torch.load(path, weights_only=False))
    rec.out("loaded", env.current_observation())
    for t in range(7, 16):
        _obs_step(rec, env, t, None)


def file_latency(backend: str) -> Callable:
    def scenario(rec: Any, ctx: Any) -> None:
        path = ctx.checkpoints / f"latency_{backend}.pt"
        options = dict(delay=U(0.1, 0.3), jitter=0.1, initial_action="first")
        m, as_torch = AutoresetMode.SAME_STEP, backend == "torch"
        if ctx.mode == "record":
            lat = ActionLatency(echo_envs(backend, m), seed=8, **options)
            lat.reset(seed=4)
            for t in range(1, 8):  # not recorded: compare mode does not run it
                _lat_step(type(rec)(), lat, t, as_torch, m, None)
            torch.save(lat.state_dict(), path)
        lat = ActionLatency(echo_envs(backend, m), seed=0, **options)
        lat.reset(seed=4)
        lat.load_state_dict(torch.load(path, weights_only=False))
        rec.state("loaded", lat.state_dict())
        for t in range(8, 18):
            _lat_step(rec, lat, t, as_torch, m, None)

    return scenario


def scenarios() -> dict[str, Callable]:
    out: dict[str, Callable] = {}
    for config in LATENCIES:
        for mode in MODES:
            out[f"latency/{config}/numpy/{mode}"] = latency_scenario(config, "numpy", mode, as_torch=False)
            out[f"latency/{config}/torch/{mode}"] = latency_scenario(config, "torch", mode, as_torch=True)
    for mode in MODES:
        out[f"latency/jitter/numpy_env_torch_actions/{mode}"] = latency_scenario(
            "jitter", "numpy", mode, True
        )
    for backend in ("numpy", "torch"):
        out[f"latency/state_dict/{backend}"] = latency_round_trip(backend)
        out[f"file/latency_{backend}"] = file_latency(backend)
    for config in OBSERVATIONS:
        out[f"observation/{config}"] = observation_scenario(config)
    for executor in ("numpy", "torch"):
        out[f"observation/state_dict/{executor}"] = observation_round_trip(executor)
        out[f"observation/ant_imu/{executor}"] = ant_imu(executor)
        out[f"observation/single_env/{executor}"] = single_env(executor)
    out["file/observation"] = file_observation
    return out
