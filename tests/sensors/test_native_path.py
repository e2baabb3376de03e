"""The native path of the catalog
(``data.sensordata`` of sensors added by ``sensorgym.sensors.mujoco.native``)
equals the Python path it replaces, and the Python path still runs where native sensors are absent.

IMU: on the two links of the oracle arm (centre of mass off the body origin, rotated inertia axes), with
and without mount offset and rotation, with the model's magnetic field (native magnetometer) and another
one (the field rotated in Python). Contact switches: a rod falling across two boxes and the floor, with
excluded bodies, a body target, an explicit self pair, and the cases that must fall back. The Ant
reference env: ``sensorgym/AntSensors-v0`` (patched model, native path) against a plain ``Ant-v5`` observed
through the same sensors (Python path) over a whole episode.
"""

from __future__ import annotations

import math

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import sensorgym as sg
import sensorgym.envs
from sensorgym.envs.ant import ant_sensors
from sensorgym.sensors.mujoco import base as mujoco_base
from sensorgym.sensors.mujoco.contact import ContactSensor, _native_count
from sensorgym.sensors.mujoco.imu import IMUSensor, _native
from sensorgym.sensors.mujoco.native import add_native_sensors, imu_names, native_model_xml
from sensorgym.wrappers import SingleEnvSensorObservation
from sensorgym.wrappers.common import ExtractionPlan, extract_state

from .mjscene import MjSceneEnv
from .test_native_oracle import ARM, FIELD, MOUNT_EULER, MOUNT_POS

OTHER_FIELD = (0.3, -0.1, 0.2)


def scene(xml: str, options: list, frame_skip: int = 5, **kw) -> MjSceneEnv:
    """An ``MjSceneEnv`` whose model is ``xml`` with the native sensors of ``options`` added (by MjSpec,
    compiled directly: no trip through MJCF text)."""
    env = MjSceneEnv(xml, frame_skip=frame_skip, **kw)
    spec = mujoco.MjSpec.from_string(xml)
    add_native_sensors(spec, options)
    env.model = spec.compile()
    env.data = mujoco.MjData(env.model)
    return env


def without_sensors(xml: str) -> str:
    return xml[: xml.index("<sensor>")] + xml[xml.index("</sensor>") + len("</sensor>") :]


def assert_f32(ours: np.ndarray, ref: np.ndarray) -> None:
    """Equal up to float32 rounding (the two paths round different float64 arithmetic to float32)."""
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=3e-7, atol=1e-6)


def arm_steps(env: MjSceneEnv, steps: int = 60):
    env.reset(seed=0)
    for t in range(steps):
        env.step(np.array([0.4 * math.sin(0.3 * t), 0.8 * math.cos(0.2 * t)]))
        yield t


@pytest.mark.parametrize("body", ["base", "link"])
@pytest.mark.parametrize(
    ("pos", "euler"),
    [((0, 0, 0), (0, 0, 0)), (MOUNT_POS, (0, 0, 0)), ((0, 0, 0), MOUNT_EULER), (MOUNT_POS, MOUNT_EULER)],
)
@pytest.mark.parametrize("field", [FIELD, OTHER_FIELD], ids=["native-mag", "python-mag"])
def test_imu_native_equals_python_on_a_moving_arm(body, pos, euler, field):
    o = sg.IMUOptions(body=body, pos_offset=pos, euler_offset=euler, magnetic_field=field)
    env = scene(without_sensors(ARM), [o], qvel={0: 2.0, 1: -1.5})
    native = _native(env.model, o)
    assert native is not None  # the native path is the one measured
    assert (native.site is None) == (field == FIELD)  # magnetometer native only where the field matches
    assert env.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_SENSOR  # off in mj_step
    moving = 0
    for _ in arm_steps(env):
        ours = extract_state(env, {"imu": o})[mujoco_base.state_key(o)]
        python = np.asarray(IMUSensor._measure_python(env.model, env.data, o), dtype=np.float32)
        assert_f32(ours, python)
        moving += np.linalg.norm(python[3:6]) > 0.5
    assert moving > 30
    assert env.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_SENSOR  # restored after each sync


def test_sensors_disabled_in_step_are_current_after_each_sync():
    o = sg.IMUOptions(body="link", pos_offset=MOUNT_POS, euler_offset=MOUNT_EULER, magnetic_field=FIELD)
    env = scene(without_sensors(ARM), [o], qvel={0: 2.0, 1: -1.5})
    assert int(mujoco.mjtDisableBit.mjDSBL_SENSOR) == mujoco_base._SENSOR_OFF
    previous = None
    for _ in arm_steps(env, 5):
        if previous is not None:  # mj_step did not compute them ...
            np.testing.assert_array_equal(env.data.sensordata, previous)
        ours = extract_state(env, {"imu": o})[mujoco_base.state_key(o)]
        np.testing.assert_array_equal(ours, env.data.sensordata.astype(np.float32))  # ... the sync did
        previous = env.data.sensordata.copy()
    assert env.data.flg_rnepost  # the accelerometer ran mj_rnePostConstraint: sync_mjdata skips it


def test_imu_in_a_model_with_its_own_sensors_keeps_them_on_in_step():
    o = sg.IMUOptions(body="link", pos_offset=MOUNT_POS, euler_offset=MOUNT_EULER, magnetic_field=FIELD)
    env = scene(ARM, [o], qvel={0: 2.0, 1: -1.5})
    assert not env.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_SENSOR
    for _ in arm_steps(env, 20):
        ours = extract_state(env, {"imu": o})[mujoco_base.state_key(o)]
        # the native sensors the model already had on the same mount read the same values
        ref = np.concatenate([env.data.sensor(f"{k}_mount").data for k in ("acc", "gyro", "mag")])
        assert_f32(ours, ref)


# A rod falls with one end on a tall box (body a) and its tip on the floor, next to a low box (body b):
# excluding a body changes the count.
ROD = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="a" pos="-0.4 0 0.1"><geom name="a_box" type="box" size=".1 .3 .1"/></body>
    <body name="b" pos="0.1 0 0.02"><geom name="b_box" type="box" size=".05 .3 .02"/></body>
    <body name="rod" pos="0 0 0.35" euler="0 8 10">
      <freejoint/>
      <geom name="rod_geom" type="capsule" fromto="-0.5 0 0 0.5 0 0" size=".03"/>
      <geom name="rod_tip" type="sphere" pos="0.5 0 0" size=".05"/>
    </body>
  </worldbody>
  PAIRS
</mujoco>"""
SELF_PAIR = '<contact><pair geom1="rod_geom" geom2="rod_tip" margin="0.1"/></contact>'

SWITCHES = {
    "geom_minus_a": sg.ContactOptions(geom="rod_geom", exclude_bodies=("a",)),
    "body_minus_a_b": sg.ContactOptions(body="rod", exclude_bodies=("a", "b", "a")),
    "tip": sg.ContactOptions(geom="rod_tip"),
    "body": sg.ContactOptions(body="rod"),
    "own_body_excluded": sg.ContactOptions(geom="rod_geom", exclude_bodies=("rod",)),
}


@pytest.mark.parametrize("pairs", ["", SELF_PAIR], ids=["no-pair", "self-pair"])
def test_contact_native_equals_python_on_a_falling_rod(pairs):
    xml = ROD.replace("PAIRS", pairs)
    env = scene(xml, list(SWITCHES.values()), frame_skip=10, qvel={0: 0.2, 4: 1.0})
    native = {name: _native_count(env.model, o) is not None for name, o in SWITCHES.items()}
    # own body excluded: not a subtraction; a self pair: the body targets would count it
    assert native == {
        "geom_minus_a": True,
        "body_minus_a_b": not pairs,
        "tip": True,
        "body": not pairs,
        "own_body_excluded": False,
    }
    env.reset(seed=0)
    plan = ExtractionPlan(SWITCHES)
    excluded_mattered = touching = 0
    for _ in range(60):
        env.step(np.zeros(1))
        state = plan(env)
        for o in SWITCHES.values():
            python = ContactSensor._measure_python(env.model, env.data, o)
            np.testing.assert_array_equal(state[mujoco_base.state_key(o)], python)
            np.testing.assert_array_equal(ContactSensor._measure(env.model, env.data, o), python)
        everything = ContactSensor._measure_python(env.model, env.data, sg.ContactOptions(body="rod"))
        excluded_mattered += state[mujoco_base.state_key(SWITCHES["body_minus_a_b"])][0] < everything[0]
        touching += state[mujoco_base.state_key(SWITCHES["body_minus_a_b"])][0] > 0
    assert excluded_mattered > 10 and touching > 10  # the rod touched excluded and counted bodies
    assert list(state) == [mujoco_base.state_key(o) for o in SWITCHES.values()]  # order kept when mixed


def test_fallback_without_native_sensors():
    """A model without sensorgym's sensors, or with a sensor of the right name that is not the right one,
    measures in Python."""
    o = sg.IMUOptions(body="link", pos_offset=MOUNT_POS, magnetic_field=FIELD)
    plain = MjSceneEnv(without_sensors(ARM), frame_skip=5, qvel={0: 2.0})
    site = imu_names(o)[0]
    moved = without_sensors(ARM).replace(
        '<site name="origin"/>',
        f'<site name="origin"/><site name="{site}" pos="0 0 0.5"/>',  # our name, another mount
    )
    moved = moved.replace(
        "</mujoco>",
        f'<sensor><accelerometer name="{site}_acc" site="{site}"/><gyro name="{site}_gyro" '
        f'site="{site}"/></sensor></mujoco>',
    )
    impostor = MjSceneEnv(moved, frame_skip=5, qvel={0: 2.0})
    for env in (plain, impostor):
        assert _native(env.model, o) is None
        for _ in arm_steps(env, 10):
            ours = extract_state(env, {"imu": o})[mujoco_base.state_key(o)]
            assert_f32(ours, IMUSensor._measure_python(env.model, env.data, o).astype(np.float32))
    switch = sg.ContactOptions(geom="rod_geom", exclude_bodies=("a",))
    rod = MjSceneEnv(ROD.replace("PAIRS", ""), frame_skip=10)
    assert _native_count(rod.model, switch) is None
    rod.reset(seed=0)
    for _ in range(30):
        rod.step(np.zeros(1))
        got = extract_state(rod, {"s": switch})[mujoco_base.state_key(switch)]
        np.testing.assert_array_equal(got, ContactSensor._measure_python(rod.model, rod.data, switch))


def test_mjcf_copy_keeps_full_precision_and_the_physics(tmp_path):
    """``native_model_xml`` patches the MJCF text: the mount is exact (MuJoCo's writer would round it to
    6 digits and the check would send the IMU to the Python path) and the original numbers are kept."""
    src = tmp_path / "arm.xml"
    src.write_text(without_sensors(ARM))
    o = sg.IMUOptions(body="link", pos_offset=(0.1234567891, 0, 0), euler_offset=MOUNT_EULER)
    path = native_model_xml(src, [o], cache_dir=tmp_path / "cache")
    assert native_model_xml(src, [o], cache_dir=tmp_path / "cache") == path  # written once
    model = mujoco.MjModel.from_xml_path(path)
    assert _native(model, o) is not None
    original = mujoco.MjModel.from_xml_path(str(src))
    for name in ("body_pos", "body_quat", "body_ipos", "body_iquat", "body_mass", "jnt_axis", "geom_size"):
        np.testing.assert_array_equal(getattr(model, name), getattr(original, name))
    np.testing.assert_array_equal(model.opt.magnetic, o.magnetic_field)  # set: every IMU agrees


def test_ant_sensors_env_uses_the_native_path():
    env = gym.make("sensorgym/AntSensors-v0", seed=0)
    env.reset(seed=0)
    model = env.unwrapped.model
    sensors = ant_sensors()
    assert model.nsensor == 3 + 4 * 2
    assert _native(model, sensors["imu"]) is not None and _native(model, sensors["imu"]).site is None
    assert all(_native_count(model, sensors[f"foot_{i}"]) is not None for i in range(4))
    plain = gym.make("sensorgym/AntSensors-v0", xml_file=gym.spec("Ant-v5").kwargs.get("xml_file", "ant.xml"))
    assert plain.unwrapped.model.nsensor == 0  # an explicit xml_file is the caller's: Python path


def test_ant_sensors_env_equals_plain_ant_with_the_python_path_over_an_episode():
    native = gym.make("sensorgym/AntSensors-v0", seed=0)
    policy = ["imu", "foot_0", "foot_1", "foot_2", "foot_3", "encoders"]
    python = SingleEnvSensorObservation(gym.make("Ant-v5"), ant_sensors(), policy=policy, seed=0)
    assert python.unwrapped.model.nsensor == 0
    obs_n, _ = native.reset(seed=0)
    obs_p, _ = python.reset(seed=0)
    rng = np.random.default_rng(0)
    feet_down = steps = 0
    done = False
    while not done:
        action = rng.uniform(-0.5, 0.5, 8).astype(np.float32)  # walks a whole episode without flipping
        obs_n, r_n, term_n, trunc_n, _ = native.step(action)
        obs_p, r_p, term_p, trunc_p, _ = python.step(action)
        # the physics is Ant-v5's own: the env's observation (the critic's tail) is bit-identical
        np.testing.assert_array_equal(obs_n["critic"][21:], obs_p["critic"][21:])
        assert (r_n, term_n, trunc_n) == (r_p, term_p, trunc_p)
        np.testing.assert_allclose(obs_n["critic"][:21], obs_p["critic"][:21], rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(obs_n["policy"], obs_p["policy"], rtol=1e-6, atol=1e-5)
        feet_down += int(obs_p["critic"][9:13].sum())
        steps += 1
        done = term_n or trunc_n
    assert steps == 1000 and feet_down > 500  # truncated by Ant-v5's time limit, feet on the ground
