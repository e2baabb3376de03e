"""The catalog sensors' own hooks (IMU cross-axis coupling, contact threshold, contact-force limits, the
MuJoCo raw read) are written once against ``md.xp``: on a real MuJoCo robot, ``SensorManager(executor=
"torch")`` and ``executor="numpy"`` must give the same bits for every read, ground truth, history and the
whole ``state_dict``, through autoresets and partial resets.

The robot is Gymnasium's Ant-v5 (three envs, random actions), with the Ant reference set plus an IMU on
a leg link whose centre of mass is off the body origin (mount offset, rotation, accelerometer coupling),
an IMU whose mount and coupling are drawn per env at every reset, and a contact-force sensor with
saturation and deadband.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.envs.ant import ant_sensors
from sensorgym.wrappers.common import extract_state

NUM_ENVS, STEPS = 3, 120


def sensors() -> dict:
    out = ant_sensors()
    out["leg_imu"] = sg.IMUOptions(
        body="aux_1",  # a capsule link: its centre of mass is off the body origin
        pos_offset=(0.05, -0.02, 0.01),
        euler_offset=(10.0, -20.0, 30.0),
        acc_cross_axis_coupling=[0.02, 0.01, 0.03],
        gyro_cross_axis_coupling=0.01,
        acc_noise=0.05,
        delay=sg.Uniform(0.0, 0.1),
        jitter=0.05,
        history_length=2,
    )
    out["random_imu"] = sg.IMUOptions(  # its mount drawn per env at every reset (docs/frames.md)
        body="aux_2",
        pos_offset=(sg.Uniform(-0.05, 0.05), 0.02, sg.Normal(0.0, 0.02, low=-0.05, high=0.05)),
        euler_offset=(sg.Normal(0.0, 3.0, low=-9.0, high=9.0), sg.Uniform(-5.0, 5.0), 15.0),
        gyro_cross_axis_coupling=sg.Uniform(-0.02, 0.02),
        gyro_noise=0.01,
    )
    out["torso_force"] = sg.ContactForceOptions(
        body="torso", max_force=20.0, min_force=0.5, noise=0.2, history_length=3
    )
    return out


def snapshot(mgr: sg.SensorManager) -> dict[str, np.ndarray]:
    out = {}
    for s in mgr.sensors:
        reads = {
            "read": s.read(history_length=0),
            "gt": s.read_ground_truth(history_length=0),
            "history": s.read(),  # the option's history (the current read when it has none)
            "gt_history": s.read_ground_truth(),
            "age": s.read_age(),
        }
        for what, x in reads.items():
            fields = x._asdict() if hasattr(x, "_asdict") else {"": x}
            for key, value in fields.items():
                out[f"{s.name}.{what}.{key}"] = value.numpy().copy()
    return out


def state_tensors(sd, prefix: str = "") -> dict[str, np.ndarray]:
    out = {}
    if torch.is_tensor(sd):
        out[prefix] = sd.numpy().copy()
    elif isinstance(sd, dict):
        for k, v in sd.items():
            out.update(state_tensors(v, f"{prefix}/{k}"))
    elif isinstance(sd, (list, tuple)):
        for i, v in enumerate(sd):
            out.update(state_tensors(v, f"{prefix}/{i}"))
    return out


def batched(envs: list, options: dict) -> dict[str, np.ndarray]:
    rows = [extract_state(e, options) for e in envs]
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def step_envs(envs: list, rng: np.random.Generator, t: int, *, forced_env: int, every: int, seed: int):
    """One random-action step of every env; an env that ends its episode, and ``forced_env`` every
    ``every`` steps, is reset (an autoreset). Returns the mask of the envs reset."""
    done = np.zeros(len(envs), bool)
    for i, env in enumerate(envs):
        _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, env.action_space.shape))
        if terminated or truncated or (i == forced_env and t % every == every - 1):
            env.reset(seed=seed + t)
            done[i] = True
    return done


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_catalog_sensors_on_ant_give_identical_bits_on_both_executors():
    options = sensors()
    envs = [gym.make("Ant-v5") for _ in range(NUM_ENVS)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    managers = {}
    for executor in ("torch", "numpy"):
        mgr = sg.SensorManager(NUM_ENVS, dt=envs[0].unwrapped.dt, seed=7, executor=executor)
        for name, o in options.items():
            mgr.add_sensor(o, name=name)
        managers[executor] = mgr
    state = batched(envs, options)
    for mgr in managers.values():
        mgr.reset(state)
    assert managers["numpy"].executor_used == "numpy" and managers["torch"].executor_used == "torch"
    rng = np.random.default_rng(0)
    resets = 0
    for t in range(STEPS):
        # an autoreset every 40 steps in env 1 (Ant rarely terminates in 120 steps)
        done = step_envs(envs, rng, t, forced_env=1, every=40, seed=100)
        resets += int(done.sum())
        state = batched(envs, options)
        for mgr in managers.values():
            mgr.step(state, reset_mask=done)
        if t == 60:  # a partial reset outside a step
            for mgr in managers.values():
                mgr.reset(state, envs_idx=[2])
        a, b = snapshot(managers["torch"]), snapshot(managers["numpy"])
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"step {t}: {key}")
    assert resets >= 3
    a, b = (state_tensors(m.state_dict()) for m in (managers["torch"], managers["numpy"]))
    assert a.keys() == b.keys() and len(a) > 20
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    # the hooks ran on their executor's arrays, and the readings are not trivially equal (all zero)
    force = managers["numpy"].sensors[-1].read_ground_truth(history_length=0)
    assert managers["numpy"].metadata(sg.IMUSensor).xp.name == "numpy"
    assert managers["torch"].metadata(sg.IMUSensor).xp.name == "torch"
    reads = snapshot(managers["numpy"])
    leg = [k for k in reads if k.startswith("leg_imu.read.")]
    assert len(leg) == 3 and all(np.abs(reads[k]).max() > 1e-3 for k in leg) and force.shape == (NUM_ENVS, 3)


# -- the folded raw copy on the catalog (see tests/core/test_raw_copy_fold.py) ----------------------------
def _unfolded(sensor_cls: type) -> tuple[type, type]:
    """(options class, sensor class): ``sensor_cls`` with its hardware-imperfection hook overridden by a
    plain ``super()`` call, which the manager must not fold (the copy then runs as a pass of its own)."""
    options_cls = dataclasses.make_dataclass(
        f"Unfolded{sensor_cls.options_cls.__name__}", [], bases=(sensor_cls.options_cls,), frozen=True,
        kw_only=True,
    )  # fmt: skip

    def hook(cls, md, data):
        super(sub, cls)._apply_hardware_imperfections(md, data)

    sub = type(
        f"Unfolded{sensor_cls.__name__}", (sensor_cls,),
        {"options_cls": options_cls, "_apply_hardware_imperfections": classmethod(hook)},
    )  # fmt: skip
    return options_cls, sub


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("executor", ["torch", "numpy"])
def test_catalog_sensors_fold_the_raw_copy_with_the_same_bits(executor):
    options = sensors()
    options["hips"] = sg.JointEncoderOptions(joints=["hip_1", "hip_3"], bias=0.01, random_walk=0.001)
    replaced = {
        cls: _unfolded(cls) for cls in (sg.ContactSensor, sg.ContactForceSensor, sg.JointEncoderSensor)
    }
    twins = {}
    for name, o in options.items():
        for base, (opts_cls, _) in replaced.items():
            if type(o) is base.options_cls:
                o = opts_cls(**{f.name: getattr(o, f.name) for f in dataclasses.fields(o)})
        twins[name] = o
    envs = [gym.make("Ant-v5") for _ in range(NUM_ENVS)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    managers = []
    for opts in (options, twins):
        mgr = sg.SensorManager(NUM_ENVS, dt=envs[0].unwrapped.dt, seed=7, executor=executor)
        for name, o in opts.items():
            mgr.add_sensor(o, name=name)
        managers.append(mgr)
    specs = (options, twins)  # the state keys name the class: each manager gets its own extraction
    for mgr, opts in zip(managers, specs, strict=True):
        mgr.reset(batched(envs, opts))
    for base, (_, sub) in replaced.items():
        assert managers[0].metadata(base).imperfections.raw_source is not None
        assert managers[1].metadata(sub).imperfections.raw_source is None
    assert managers[1].metadata(sg.IMUSensor).imperfections.raw_source is None  # its hooks are its own
    rng = np.random.default_rng(1)
    for t in range(80):
        done = step_envs(envs, rng, t, forced_env=0, every=30, seed=200)
        for mgr, opts in zip(managers, specs, strict=True):
            mgr.step(batched(envs, opts), reset_mask=done)
        a, b = (snapshot(m) for m in managers)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"step {t}: {key}")
