"""The fused extraction (one :class:`~sensorgym.sensors.mujoco.gather.GatherProgram` over every class's
``_gather_terms``) against each class's own ``_extract_state``, packed: the same bits and layout on a real
MuJoCo robot, step after step, through resets; the fallback where a class cannot be gathered; and the
observations of a vector env and a single env through either route.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.mujoco.mujoco_env import expand_model_path

import sensorgym as sg
from sensorgym.envs.ant import ANT_JOINTS, ant_sensors
from sensorgym.sensors.mujoco.base import state_key
from sensorgym.sensors.mujoco.native import native_model_xml
from sensorgym.wrappers import SingleEnvSensorObservation, make_sensor_vec
from sensorgym.wrappers.common import ExtractionPlan


def gatherable() -> dict:
    """The Ant set plus a rotated, offset IMU on a leg link, switches with two excluded bodies and on a
    body target, a torque sensor and encoders listed out of order (index arrays, not slices)."""
    out = ant_sensors()
    out["leg_imu"] = sg.IMUOptions(
        body="aux_1", pos_offset=(0.05, -0.02, 0.01), euler_offset=(10.0, -20.0, 30.0)
    )
    out["ankle_2x"] = sg.ContactOptions(geom="left_ankle_geom", exclude_bodies=("torso", "aux_2"))
    out["leg_body"] = sg.ContactOptions(body="front_left_leg", exclude_bodies=("torso",))
    out["torques"] = sg.JointTorqueOptions(joints=list(ANT_JOINTS[::-1]))
    out["hips"] = sg.JointEncoderOptions(joints=["hip_3", "hip_1", "ankle_4"])
    return out


def ant(sensors: dict) -> gym.Env:
    return gym.make("Ant-v5", xml_file=native_model_xml(expand_model_path("ant.xml"), sensors))


def per_class(plan: ExtractionPlan, env: gym.Env) -> tuple[np.ndarray, tuple]:
    values = plan(env)
    return ExtractionPlan.pack(values), ExtractionPlan.layout(values)


@dataclass(frozen=True, kw_only=True)
class _TotalTorqueOptions(sg.JointTorqueOptions):
    pass


class _TotalTorqueSensor(sg.JointTorqueSensor):
    """Measures differently from its parent (actuator plus passive force): it must not inherit the
    parent's terms."""

    options_cls = _TotalTorqueOptions

    @classmethod
    def _measure(cls, model, data, o):
        adr = o.addresses(model, "dof")
        return data.qfrc_actuator[adr] + data.qfrc_passive[adr]


@dataclass(frozen=True, kw_only=True)
class _EncoderDegreesOptions(sg.JointEncoderOptions):
    pass


class _EncoderDegreesSensor(sg.JointEncoderSensor):
    options_cls = _EncoderDegreesOptions

    @classmethod
    def _extract_state(cls, env, options):
        return {k: np.degrees(v) for k, v in super()._extract_state(env, options).items()}


def test_fused_gather_equals_the_per_class_extraction_bit_for_bit():
    sensors = gatherable()
    env = ant(sensors)
    plan = ExtractionPlan(sensors)
    env.reset(seed=0)
    env.action_space.seed(0)
    touched, steps = 0, 0
    for t in range(400):
        if t % 150 == 149:
            env.reset(seed=t)
        else:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset(seed=t)
        fused, layout = plan.packed_with_layout(env)
        ours, our_layout = per_class(plan, env)
        assert plan._program[1] is not None  # the fused route ran
        assert layout == our_layout
        assert fused.dtype == np.float32 and fused.tobytes() == ours.tobytes(), t
        assert plan.packed(env).tobytes() == ours.tobytes()  # what sub-envs run on steps
        # the readings move: the switch with two excluded bodies counts the ankle's ground contacts
        keys, sizes = zip(*[(k, shape[0]) for k, shape in layout], strict=True)
        parts = dict(zip(keys, np.split(fused, np.cumsum(sizes)[:-1]), strict=True))
        touched += int(parts[state_key(sensors["ankle_2x"])][0] > 0)
        steps += 1
    assert 0 < touched < steps


@pytest.mark.parametrize(
    "extra",
    [
        # its magnetic field differs from the one the model gets: rotated into the site frame in Python
        {"odd_mag": sg.IMUOptions(body="torso", magnetic_field=(0.0, 0.3, 0.0))},
        # its own body excluded: not expressible by subtraction, counted in Python
        {"own": sg.ContactOptions(body="torso", exclude_bodies=("torso",))},
        # a class without terms
        {"force": sg.ContactForceOptions(body="torso", max_force=50.0)},
        # subclasses that measure differently from their parent must not inherit its terms
        {"total": _TotalTorqueOptions(joints=list(ANT_JOINTS))},
        {"degrees": _EncoderDegreesOptions(joints=["hip_1", "ankle_1"])},
    ],
    ids=[
        "imu-python-magnetometer",
        "switch-python-count",
        "class-without-terms",
        "subclass-overrides-_measure",
        "subclass-overrides-_extract_state",
    ],
)
def test_a_set_that_cannot_be_gathered_falls_back_to_the_classes(extra):
    sensors = {**ant_sensors(), **extra}
    env = ant(sensors)
    plan = ExtractionPlan(sensors)
    env.reset(seed=1)
    env.action_space.seed(1)
    for _ in range(30):
        env.step(env.action_space.sample())
        fused, layout = plan.packed_with_layout(env)
        ours, our_layout = per_class(plan, env)
        assert layout == our_layout and fused.tobytes() == ours.tobytes()
    assert plan._program == (env.unwrapped.model, None)


def test_a_plan_used_on_another_model_rebuilds_its_program():
    sensors = {"enc": sg.JointEncoderOptions(joints=["hip_1", "hip_2"])}
    plan = ExtractionPlan(sensors)
    first, second = gym.make("Ant-v5"), ant(ant_sensors())
    for env in (first, second, first):
        env.reset(seed=0)
        env.step(env.action_space.sample())
        fused = plan.packed(env)
        assert plan._program[0] is env.unwrapped.model
        np.testing.assert_array_equal(fused, env.unwrapped.data.qpos[[7, 9]].astype(np.float32))


def _vector_trace(sensors: dict, steps: int = 80) -> list[dict]:
    xml = native_model_xml(expand_model_path("ant.xml"), sensors)
    envs = make_sensor_vec("Ant-v5", 3, sensors, env_kwargs={"xml_file": xml}, seed=5)
    envs.action_space.seed(0)
    obs, _ = envs.reset(seed=0)
    trace = [{k: v.copy() for k, v in obs.items()}]
    for _ in range(steps):
        obs, *_ = envs.step(envs.action_space.sample())
        trace.append({k: v.copy() for k, v in obs.items()})
    envs.close()
    return trace


def _single_trace(sensors: dict, steps: int = 60) -> list[dict]:
    env = SingleEnvSensorObservation(ant(sensors), sensors, seed=2)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    trace = [obs]
    for _ in range(steps):
        obs, *_ = env.step(env.action_space.sample())
        trace.append(obs)
    return trace


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("trace", [_vector_trace, _single_trace], ids=["vector", "single"])
def test_observations_are_identical_through_either_route(trace, monkeypatch):
    fused = trace(gatherable())
    with monkeypatch.context() as m:
        m.setattr(ExtractionPlan, "_gather_program", lambda self, base: None)  # class by class
        classes = trace(gatherable())
    for a, b in zip(fused, classes, strict=True):
        for key in a:
            assert a[key].tobytes() == b[key].tobytes()


def test_fused_switch_counts_subtract_excluded_bodies_that_touch():
    """A falling rod touches the excluded boxes: the subtracted layers carry non-zero counts."""
    from ..sensors.test_native_path import ROD, SWITCHES, scene

    switches = {k: o for k, o in SWITCHES.items() if k != "own_body_excluded"}  # all native here
    env = scene(ROD.replace("PAIRS", ""), list(switches.values()), frame_skip=10, qvel={0: 0.2, 4: 1.0})
    env.reset(seed=0)
    plan = ExtractionPlan(switches)
    excluded_mattered = 0
    for _ in range(60):
        env.step(np.zeros(1))
        fused, layout = plan.packed_with_layout(env)
        ours, our_layout = per_class(plan, env)
        assert plan._program[1] is not None and layout == our_layout
        assert fused.tobytes() == ours.tobytes()
        parts = dict(zip([k for k, _ in layout], fused, strict=True))  # one value per switch
        excluded_mattered += parts[state_key(switches["body_minus_a_b"])] < parts[state_key(switches["body"])]
    assert excluded_mattered > 10


def test_options_repeated_or_equal_are_measured_once_as_by_the_classes():
    sensors = ant_sensors()
    sensors["imu_again"] = sensors["imu"]  # the same object
    sensors["encoders_equal"] = sg.JointEncoderOptions(  # equal by value: the same state key
        joints=sensors["encoders"].joints,
        resolution=sensors["encoders"].resolution,
        noise=sensors["encoders"].noise,
    )
    assert state_key(sensors["encoders_equal"]) == state_key(sensors["encoders"])
    env = ant(sensors)
    plan = ExtractionPlan(sensors)
    env.reset(seed=0)
    for _ in range(5):
        env.step(env.action_space.sample())
        fused, layout = plan.packed_with_layout(env)
        ours, our_layout = per_class(plan, env)
        assert plan._program[1] is not None
        assert layout == our_layout and fused.tobytes() == ours.tobytes()
