"""Physics truth of the MuJoCo catalog: IMU, contact, contact force, joint encoders and torques,
proximity, kinematic contact probes and the elastomer pad."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

import sensorgym as sg
from sensorgym.wrappers import SingleEnvSensorObservation
from sensorgym.wrappers.common import extract_state

from .mjscene import MjSceneEnv

G = 9.81
SCENE = """
<mujoco><option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="box" pos="0 0 0.1"><freejoint name="box_free"/>
      <geom name="box_geom" type="box" size=".1 .1 .1" mass="2"/></body>
    <body name="ball" pos="2 0 5"><freejoint/><geom type="sphere" size=".05" mass="1"/></body>
    <body name="spinner" pos="-2 0 1">
      <joint name="spin" type="hinge" axis="0 0 1"/>
      <geom type="box" size=".1 .05 .05" mass="1" contype="0" conaffinity="0"/>
    </body>
    <body name="arm" pos="0 3 1">
      <joint name="elbow" type="hinge" axis="0 1 0" damping="1"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size=".03" mass="1" contype="0" conaffinity="0"/>
    </body>
    <body name="target" pos="0 -3 1"><geom name="target_geom" type="sphere" size=".2"/></body>
  </worldbody>
  <actuator><motor name="elbow_motor" joint="elbow" gear="2"/></actuator>
</mujoco>"""
SPIN_DOF = 12  # dofs: box free (6), ball free (6), spinner hinge


def settled_scene(steps: int = 400):
    env = MjSceneEnv(SCENE, qvel={SPIN_DOF: 3.0})
    env.reset(seed=0)
    mujoco.mj_step(env.model, env.data, nstep=steps)
    return env


def measure(env, options) -> np.ndarray:
    return next(iter(extract_state(env, {"s": options}).values()))


# -- IMU ---------------------------------------------------------------------------------------------------
def test_imu_at_rest_reads_plus_g_up_and_zero_rate():
    env = settled_scene()
    r = measure(env, sg.IMUOptions(body="box", magnetic_field=(0.0, 0.3, -0.4)))
    np.testing.assert_allclose(r[:3], [0, 0, G], atol=0.02)
    np.testing.assert_allclose(r[3:6], 0.0, atol=1e-6)
    np.testing.assert_allclose(r[6:], [0.0, 0.3, -0.4], atol=1e-9)


def test_imu_in_free_fall_reads_zero_acceleration():
    env = MjSceneEnv(SCENE)
    env.reset(seed=0)
    mujoco.mj_step(env.model, env.data, nstep=100)  # 0.2 s: the ball at z=5 is still falling
    r = measure(env, sg.IMUOptions(body="ball"))
    np.testing.assert_allclose(r[:3], 0.0, atol=1e-9)


def test_imu_on_a_spinning_body_reads_its_rate_and_the_centripetal_term():
    env = settled_scene(100)
    w = env.data.qvel[SPIN_DOF]
    assert w == pytest.approx(3.0)
    r = measure(env, sg.IMUOptions(body="spinner"))
    np.testing.assert_allclose(r[3:6], [0, 0, w], atol=1e-9)
    off = measure(env, sg.IMUOptions(body="spinner", pos_offset=(0.5, 0.0, 0.0)))
    np.testing.assert_allclose(off[:3], [-w * w * 0.5, 0, G], atol=1e-6)  # -w^2 r toward the axis


def test_imu_mount_rotation_rotates_gravity_and_field():
    env = settled_scene()
    r = measure(env, sg.IMUOptions(body="box", euler_offset=(90.0, 0.0, 0.0), magnetic_field=(0, 0.3, 0)))
    # sensor frame = body frame rotated +90 deg about x: body z (up) is the sensor's +y, body y its -z
    np.testing.assert_allclose(r[:3], [0, G, 0], atol=0.02)
    np.testing.assert_allclose(r[6:], [0, 0, -0.3], atol=1e-9)


def test_imu_cross_axis_coupling_mixes_axes_on_both_branches():
    env = SingleEnvSensorObservation(
        MjSceneEnv(SCENE),
        {
            "imu": sg.IMUOptions(body="box", acc_cross_axis_coupling=[0.0, 0.1, 0.0]),  # xz coupling 0.1
            "plain": sg.IMUOptions(body="box"),
        },
        dt=0.02,
        critic_env_obs=False,
    )
    env.reset(seed=0)
    for _ in range(30):
        env.step(np.zeros(1))
    imu, plain = env.sensors["imu"], env.sensors["plain"]
    a = plain.read_ground_truth().lin_acc[0].numpy()
    coupled = imu.read_ground_truth().lin_acc[0].numpy()
    np.testing.assert_allclose(coupled, [a[0] + 0.1 * a[2], a[1], a[2] + 0.1 * a[0]], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(imu.read().lin_acc[0].numpy(), coupled, rtol=1e-5, atol=1e-5)


def test_imu_per_field_imperfections():
    o = sg.IMUOptions(body="box", acc_noise=0.1, gyro_bias=[0.0, 0.0, 0.5], mag_resolution=0.05)
    assert o.noise == (0.1,) * 3 + (0.0,) * 6
    assert o.bias == (0.0,) * 5 + (0.5,) + (0.0,) * 3
    assert o.resolution[6:] == (0.05,) * 3
    env = SingleEnvSensorObservation(MjSceneEnv(SCENE), {"imu": o}, dt=0.02, seed=0)
    env.reset(seed=0)
    for _ in range(30):
        env.step(np.zeros(1))
    r = env.sensors["imu"].read()
    assert r.ang_vel[0, 2].item() == pytest.approx(0.5, abs=1e-6)
    q = r.mag[0].numpy() / 0.05
    np.testing.assert_allclose(q, np.round(q), atol=1e-4)
    with pytest.raises(ValueError, match=r"gyro_noise.*3 values"):
        sg.IMUOptions(body="box", gyro_noise=[0.1, 0.2])


# -- contact and contact force ------------------------------------------------------------------------------
def test_resting_box_touches_and_feels_its_weight():
    env = settled_scene()
    assert measure(env, sg.ContactOptions(body="box"))[0] >= 1
    f = measure(env, sg.ContactForceOptions(body="box"))
    np.testing.assert_allclose(f, [0, 0, 2 * G], rtol=0.01, atol=0.05)
    floor = measure(env, sg.ContactForceOptions(geom="floor"))
    assert floor[2] == pytest.approx(-2 * G, rel=0.01)  # equal and opposite (the ball is still in the air)


def test_body_in_the_air_has_no_contact_and_no_force():
    env = MjSceneEnv(SCENE)
    env.reset(seed=0)
    mujoco.mj_step(env.model, env.data, nstep=50)
    assert measure(env, sg.ContactOptions(body="ball"))[0] == 0
    np.testing.assert_array_equal(measure(env, sg.ContactForceOptions(body="ball")), 0.0)


def test_excluded_bodies_are_ignored():
    env = settled_scene()
    assert measure(env, sg.ContactOptions(geom="floor", exclude_bodies=("box",)))[0] == 0


def test_contact_sensor_is_bool_and_force_sensor_clamps_and_deadbands():
    sensors = {
        "touch": sg.ContactOptions(body="box", delay=0.04),
        "clamped": sg.ContactForceOptions(body="box", max_force=15.0),
        "deadband": sg.ContactForceOptions(body="box", min_force=50.0),
    }
    env = SingleEnvSensorObservation(MjSceneEnv(SCENE), sensors, dt=0.02, critic_env_obs=False)
    env.reset(seed=0)
    for _ in range(25):
        env.step(np.zeros(1))
    touch = env.sensors["touch"].read()
    assert touch.dtype.is_floating_point is False and touch.item() is True
    assert env.sensors["clamped"].read()[0].tolist() == pytest.approx([0.0, 0.0, 15.0], abs=1e-4)
    assert env.sensors["clamped"].read_ground_truth()[0, 2].item() == 15.0  # GT is projected too
    assert env.sensors["deadband"].read()[0].tolist() == [0.0, 0.0, 0.0]


# -- joints --------------------------------------------------------------------------------------------------
def test_encoder_readings_are_exact_multiples_of_the_resolution():
    res = 2 * math.pi / 4096
    env = SingleEnvSensorObservation(
        MjSceneEnv(SCENE, qvel={SPIN_DOF: 3.0}),
        {
            "enc": sg.JointEncoderOptions(joints=["spin", "elbow"], resolution=res, noise=0.01),
        },
        dt=0.02,
        seed=1,
    )
    env.reset(seed=0)
    for _ in range(10):
        env.step(np.array([0.3]))
        ticks = env.sensors["enc"].read()[0].numpy() / np.float32(res)
        np.testing.assert_allclose(ticks, np.round(ticks), atol=1e-3)
    gt = env.sensors["enc"].read_ground_truth()[0].numpy()
    np.testing.assert_allclose(gt, env.unwrapped.data.qpos[[14, 15]], atol=1e-6)


def test_joint_torque_is_the_actuator_effort_only():
    env = MjSceneEnv(SCENE)
    env.reset(seed=0)
    env.step(np.array([0.4]))
    tau = measure(env, sg.JointTorqueOptions(joints=["elbow", "spin"]))
    np.testing.assert_allclose(tau, [0.8, 0.0], atol=1e-6)  # gear 2 x ctrl 0.4; gravity is not in it


def test_encoder_reads_joints_in_the_given_order_consecutive_or_not():
    env = MjSceneEnv(SCENE, qvel={SPIN_DOF: 3.0})
    env.reset(seed=0)
    env.step(np.array([0.3]))
    qpos = env.unwrapped.data.qpos
    # consecutive addresses are read through a slice, others through an index array: same values
    np.testing.assert_allclose(measure(env, sg.JointEncoderOptions(joints=["spin", "elbow"])), qpos[[14, 15]])
    np.testing.assert_allclose(measure(env, sg.JointEncoderOptions(joints=["elbow", "spin"])), qpos[[15, 14]])
    np.testing.assert_allclose(measure(env, sg.JointEncoderOptions(joints=["elbow"])), qpos[[15]])


def test_imu_measures_in_the_body_frame_not_the_inertial_frame():
    from sensorgym.sensors.mujoco.imu import _OBJ_XBODY

    assert int(mujoco.mjtObj.mjOBJ_XBODY) == _OBJ_XBODY  # frame origin and axes, not the centre of mass


def test_bad_names_are_reported_with_the_available_ones():
    env = settled_scene(1)
    with pytest.raises(ValueError, match=r"IMUOptions.body='torso'.*available: \['world', 'box'"):
        measure(env, sg.IMUOptions(body="torso"))
    with pytest.raises(ValueError, match=r"joints.*hinge or slide"):
        measure(env, sg.JointEncoderOptions(joints=["box_free"]))


# -- proximity and tactile -------------------------------------------------------------------------------
def test_proximity_to_a_sphere_at_a_known_distance_and_clamped():
    env = settled_scene(1)
    # probes on the arm body (at y=3): the target sphere (radius .2) is at y=-3, z=1: measure from the world
    o = sg.ProximityOptions(
        body="spinner",
        probes=[(2.0, -3.0, 0.0), (2.0, -3.0, 0.5), (2.0, 0.0, 0.0)],
        track_bodies=("target",),
        max_range=1.0,
    )
    d = measure(env, o)
    # spinner at (-2, 0, 1) rotated a little: probes are in its frame; use the measured world points
    assert d[2] == 1.0  # far away: clamped
    body = env.model.body("spinner").id
    world = env.data.xpos[body] + np.array(o.probes) @ env.data.xmat[body].reshape(3, 3).T
    expect = np.linalg.norm(world - np.array([0, -3, 1]), axis=1) - 0.2
    np.testing.assert_allclose(d[:2], np.clip(expect[:2], 0, 1.0), atol=1e-9)


PRESS = """
<mujoco><option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 .1"/>
    <body name="block" pos="0 0 0.05"><geom name="block_geom" type="box" size=".05 .05 .05"/></body>
    <body name="finger" pos="0 0 0.3">
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="box" size=".01 .01 .01" contype="0" conaffinity="0" mass=".1"/>
    </body>
  </worldbody>
</mujoco>"""


@pytest.mark.parametrize("depth", [0.0, 0.002, 0.005])
def test_probe_penetration_of_a_box_pressed_by_a_known_depth(depth):
    env = MjSceneEnv(PRESS)
    env.reset(seed=0)
    # place the finger so its probe at (0, 0, -0.01) sits `depth` below the block top (z = 0.1)
    env.data.qpos[0] = (0.1 - depth) - 0.3 + 0.01
    mujoco.mj_forward(env.model, env.data)
    o = sg.KinematicContactProbeOptions(
        body="finger", probes=[(0, 0, -0.01), (0.2, 0, -0.01)], radius=0.001, stiffness=1000.0, damping=0.0
    )
    r = measure(env, o)
    pen, force = r[:2], r[2:].reshape(2, 3)
    assert pen[0] == pytest.approx(depth + 0.001, abs=1e-9)
    assert pen[1] == 0.0  # off the block: the floor is far below
    np.testing.assert_allclose(force[0], [0, 0, 1000.0 * (depth + 0.001)], atol=1e-6)  # pushes up
    np.testing.assert_array_equal(force[1], 0.0)


def test_elastomer_pad_displacement_follows_the_pressing_surface():
    env = MjSceneEnv(PRESS)
    env.reset(seed=0)
    env.data.qpos[0] = (0.1 - 0.003) - 0.3 + 0.01  # pad surface 3 mm inside the block
    mujoco.mj_forward(env.model, env.data)
    sharp = sg.ElastomerDisplacementOptions(
        body="finger", center=(0, 0, -0.01), size=(0.08, 0.01), grid=(5, 1), spread=0.0
    )
    d = measure(env, sharp).reshape(5, 1, 3)
    # taxels at x = -0.08, -0.04, 0, 0.04, 0.08: the block spans |x| <= 0.05
    np.testing.assert_allclose(d[:, 0, 2], [0, 0.003, 0.003, 0.003, 0], atol=1e-9)
    np.testing.assert_allclose(d[..., :2], 0.0, atol=1e-9)
    soft = measure(
        env,
        sg.ElastomerDisplacementOptions(
            body="finger", center=(0, 0, -0.01), size=(0.08, 0.01), grid=(5, 1), spread=1.0
        ),
    )
    soft = soft.reshape(5, 1, 3)[:, 0, 2]
    assert 0 < soft[0] < 0.003 and soft[2] < 0.003  # the elastomer spreads the indentation to neighbours
