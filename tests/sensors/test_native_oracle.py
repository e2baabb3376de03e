"""MuJoCo's own sensors as an oracle for the catalog.

Each catalog sensor that has a native MuJoCo counterpart is compared with that sensor attached to the same
point of the same model (sites in the MJCF below), over a moving trajectory, on bodies whose centre of
mass is off the body origin and whose principal inertia axes are rotated: the pairs are accelerometer,
gyro and magnetometer (IMU), touch and force (contact force), jointpos (encoder), jointactuatorfrc and
actuatorfrc (joint torque) and rangefinder (ray caster). Nobody here wrote the native sensors, so a frame
or convention error on our side shows up as a disagreement.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

import sensorgym as sg
from sensorgym.sensors.mujoco.raycaster import GridPattern
from sensorgym.wrappers.common import extract_state

from .mjscene import MjSceneEnv

MOUNT_POS = (0.11, -0.07, 0.23)
MOUNT_EULER = (30.0, -20.0, 45.0)  # degrees; MJCF's default eulerseq="xyz" is intrinsic x-y-z
FIELD = (0.05, 0.25, -0.45)

# An arm of two hinge links driven by motors. Each link's centre of mass is off its body origin and its
# inertia axes are rotated (explicit <inertial>), so the body frame, the inertial frame and the mount
# frame all differ. Sites carry the native sensors.
ARM = f"""
<mujoco>
  <option timestep="0.002" magnetic="{FIELD[0]} {FIELD[1]} {FIELD[2]}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="base" pos="0 0 1">
      <joint name="yaw" type="hinge" axis="0.2 0.3 0.93" damping="0.05"/>
      <inertial pos="0.1 0.05 0" quat="0.9 0.1 0.3 0.2" mass="2" diaginertia="0.03 0.02 0.01"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size=".03" contype="0" conaffinity="0"/>
      <body name="link" pos="0.4 0 0" euler="10 0 25">
        <joint name="pitch" type="hinge" axis="0 1 0" damping="0.05"/>
        <inertial pos="0.25 0.3 -0.05" quat="0.7 0.2 -0.5 0.4" mass="1.5" diaginertia="0.02 0.015 0.009"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size=".03" contype="0" conaffinity="0"/>
        <site name="origin"/>
        <site name="mount" pos="{MOUNT_POS[0]} {MOUNT_POS[1]} {MOUNT_POS[2]}"
              euler="{MOUNT_EULER[0]} {MOUNT_EULER[1]} {MOUNT_EULER[2]}"/>
        <site name="beam" pos="0.3 0 0" euler="0 90 0"/>
      </body>
    </body>
    <body name="wall" pos="0 0 -3"><geom type="box" size="10 10 .1"/></body>
  </worldbody>
  <actuator>
    <motor name="yaw_motor" joint="yaw" gear="3"/>
    <motor name="pitch_motor" joint="pitch" gear="1.5"/>
  </actuator>
  <sensor>
    <accelerometer name="acc_origin" site="origin"/>
    <gyro name="gyro_origin" site="origin"/>
    <magnetometer name="mag_origin" site="origin"/>
    <accelerometer name="acc_mount" site="mount"/>
    <gyro name="gyro_mount" site="mount"/>
    <magnetometer name="mag_mount" site="mount"/>
    <jointpos name="q_yaw" joint="yaw"/>
    <jointpos name="q_pitch" joint="pitch"/>
    <jointactuatorfrc name="tau_yaw" joint="yaw"/>
    <jointactuatorfrc name="tau_pitch" joint="pitch"/>
    <actuatorfrc name="f_yaw" actuator="yaw_motor"/>
    <actuatorfrc name="f_pitch" actuator="pitch_motor"/>
    <rangefinder name="range" site="beam"/>
  </sensor>
</mujoco>"""


def native(env: MjSceneEnv, name: str) -> np.ndarray:
    return env.data.sensor(name).data.copy()


def measure(env: MjSceneEnv, options) -> np.ndarray:
    """What the sensor measures inside the sub-env (float32, as it travels to the manager)."""
    return next(iter(extract_state(env, {"s": options}).values()))


def assert_f32(ours: np.ndarray, ref: np.ndarray) -> None:
    """Equal up to the float32 rounding of our values: a frame or convention error is far larger."""
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=3e-7, atol=1e-6)


def arm_trajectory(steps: int = 60):
    """Drive the arm with varying torques; yield the env at each control step, native sensors current."""
    env = MjSceneEnv(ARM, frame_skip=5, qvel={0: 2.0, 1: -1.5})
    env.reset(seed=0)
    for t in range(steps):
        env.step(np.array([0.4 * math.sin(0.3 * t), 0.8 * math.cos(0.2 * t)]))
        mujoco.mj_forward(env.model, env.data)  # native sensordata for the current state (as we measure)
        yield env


@pytest.mark.parametrize(
    ("site", "pos", "euler"), [("origin", (0, 0, 0), (0, 0, 0)), ("mount", MOUNT_POS, MOUNT_EULER)]
)
def test_imu_equals_mujocos_accelerometer_gyro_and_magnetometer(site, pos, euler):
    options = sg.IMUOptions(body="link", pos_offset=pos, euler_offset=euler, magnetic_field=FIELD)
    moving = 0
    for env in arm_trajectory():
        ours = measure(env, options)
        acc, gyro, mag = native(env, f"acc_{site}"), native(env, f"gyro_{site}"), native(env, f"mag_{site}")
        assert_f32(ours[:3], acc)
        assert_f32(ours[3:6], gyro)
        assert_f32(ours[6:], mag)
        moving += np.linalg.norm(gyro) > 0.5 and np.linalg.norm(acc - np.linalg.norm(acc)) > 0.1
    assert moving > 30  # the comparison ran on a body that really turns and accelerates


def test_imu_on_a_spinning_capsule_reads_its_rate_about_the_body_axis():
    """Issue 11.13: a capsule along x spinning about its body z axis. Its principal axes are not its body
    axes, and its centre of mass is 0.3 m off the spin axis: in the inertial frame the gyro read (3, 0, 0)
    and the accelerometer -w^2 * 0.3 that the body origin on the axis does not feel."""
    xml = """<mujoco><worldbody><body name="rotor" pos="0 0 1">
      <joint name="spin" type="hinge" axis="0 0 1"/>
      <geom type="capsule" fromto="0 0 0 0.6 0 0" size=".02" mass="1"/>
      <site name="s"/></body></worldbody>
      <sensor><gyro name="g" site="s"/><accelerometer name="a" site="s"/></sensor></mujoco>"""
    env = MjSceneEnv(xml, qvel={0: 3.0})
    env.reset(seed=0)
    ours = measure(env, sg.IMUOptions(body="rotor"))
    assert_f32(ours[3:6], np.array([0.0, 0.0, 3.0]))
    assert_f32(ours[:3], np.array([0.0, 0.0, 9.81]))  # no centripetal term at the axis
    assert_f32(ours[3:6], native(env, "g"))
    assert_f32(ours[:3], native(env, "a"))


def test_encoder_and_joint_torque_equal_jointpos_and_jointactuatorfrc():
    gear = np.array([3.0, 1.5])
    for env in arm_trajectory(20):
        q = measure(env, sg.JointEncoderOptions(joints=["yaw", "pitch"]))
        tau = measure(env, sg.JointTorqueOptions(joints=["yaw", "pitch"]))
        qpos = np.concatenate([native(env, "q_yaw"), native(env, "q_pitch")])
        np.testing.assert_array_equal(q, qpos.astype(np.float32))
        assert_f32(tau, np.concatenate([native(env, "tau_yaw"), native(env, "tau_pitch")]))
        actuator = np.concatenate([native(env, "f_yaw"), native(env, "f_pitch")])
        assert_f32(tau, gear * actuator)  # joint effort = gear x actuator force


def test_raycaster_single_ray_equals_rangefinder():
    # the beam site's +z axis is the rangefinder's ray; the link swings, so the distance to the wall changes
    options = sg.RaycasterOptions(
        body="link",
        pos_offset=(0.3, 0.0, 0.0),
        euler_offset=(0.0, 90.0, 0.0),
        pattern=GridPattern(size=(0.0, 0.0), resolution=0.1, direction=(0.0, 0.0, 1.0)),
        max_range=50.0,
        no_hit_value=-1.0,  # the rangefinder's "no hit"
    )
    distances = []
    for env in arm_trajectory(40):
        ours = measure(env, options)[-1]  # flat: points (1, 1, 3) then distances (1, 1)
        ref = native(env, "range")[0]
        assert_f32(np.array([ours]), np.array([ref]))
        distances.append(ref)
    hits = [d for d in distances if d >= 0]
    assert len(hits) >= 5 and max(hits) - min(hits) > 0.1  # real, varying hits were compared


# A box resting on a static plate. The plate has no joint: MuJoCo's force sensor on it reports the force
# its parent (the world) exerts to hold it, which is the load on the plate plus its own weight.
PLATE = """
<mujoco><option timestep="0.002"/>
  <worldbody>
    <body name="plate" pos="0.1 -0.2 0.05" euler="0 0 30">
      <inertial pos="0.2 0 0" mass="0.5" diaginertia="0.01 0.01 0.01"/>
      <geom name="plate_geom" type="box" size=".5 .5 .05"/>
      <site name="ft"/>
    </body>
    <body name="box" pos="0.15 -0.1 0.25" euler="0 0 10"><freejoint/>
      <inertial pos="0.03 -0.02 0.01" quat="0.8 0.2 0.1 0.3" mass="2" diaginertia="0.02 0.015 0.01"/>
      <geom name="box_geom" type="box" size=".1 .1 .1"/>
      <site name="pad" type="box" size=".11 .11 .11"/>
    </body>
  </worldbody>
  <sensor>
    <touch name="touch" site="pad"/>
    <force name="force" site="ft"/>
  </sensor>
</mujoco>"""


def settled_box():
    env = MjSceneEnv(PLATE)
    env.reset(seed=0)
    mujoco.mj_step(env.model, env.data, nstep=500)
    mujoco.mj_forward(env.model, env.data)
    return env


def test_contact_force_normal_component_equals_touch():
    env = settled_box()
    f = measure(env, sg.ContactForceOptions(body="box"))  # in the box's body frame
    body = env.model.body("box").id
    up_in_box = env.data.xmat[body].reshape(3, 3).T @ np.array([0.0, 0.0, 1.0])
    touch = native(env, "touch")[0]
    assert touch == pytest.approx(2 * 9.81, rel=0.01)
    # touch sums the normal forces of the contacts in the pad; all normals are the plate's +z
    assert float(f.astype(np.float64) @ up_in_box) == pytest.approx(touch, rel=1e-6)


def test_contact_force_on_a_welded_plate_equals_the_force_sensor_minus_its_weight():
    env = settled_box()
    load = measure(env, sg.ContactForceOptions(body="plate"))  # contact force on the plate, plate frame
    plate = env.model.body("plate").id
    r = env.data.xmat[plate].reshape(3, 3)
    weight = r.T @ np.array([0.0, 0.0, -0.5 * 9.81])  # plate frame (the site frame is the plate frame)
    support = native(env, "force")  # force the world applies to the plate, in the site frame
    np.testing.assert_allclose(support + load + weight, 0.0, atol=1e-5)  # the plate is in equilibrium
    assert load[2] == pytest.approx(-2 * 9.81, rel=0.01)  # the box presses down with its weight


# A paddle and a wall, both spinning about hinges with their centres of mass off their origins. The probe
# point sits just inside the paddle's reach of the wall face (x = 0.5), where both bodies carry a site.
PROBE = (0.495, 0.3, 0.0)
PADDLE = f"""
<mujoco><option gravity="0 0 0"/>
  <worldbody>
    <body name="paddle" pos="0 0 1">
      <joint type="hinge" axis="0 0 1"/>
      <inertial pos="0.2 -0.4 0" quat="0.9 0 0.3 0.1" mass="1" diaginertia="0.01 0.01 0.01"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size=".02" contype="0" conaffinity="0"/>
      <site name="on_paddle" pos="{PROBE[0]} {PROBE[1]} {PROBE[2]}"/>
    </body>
    <body name="wall" pos="0.6 0 1">
      <joint type="hinge" axis="0 0 1"/>
      <inertial pos="0.05 -0.3 0.1" mass="3" diaginertia="0.1 0.1 0.1"/>
      <geom type="box" size=".1 1 1" contype="0" conaffinity="0"/>
      <site name="on_wall" pos="{PROBE[0] - 0.6} {PROBE[1]} {PROBE[2]}"/>
    </body>
  </worldbody>
  <sensor><framelinvel name="v_paddle" objtype="site" objname="on_paddle"/>
    <framelinvel name="v_wall" objtype="site" objname="on_wall"/></sensor>
</mujoco>"""


def test_kinematic_probe_damping_uses_the_velocity_of_the_probe_point():
    """The spring-damper's rate is the normal speed of the probe point relative to the touched surface,
    which MuJoCo's framelinvel gives at sites on both bodies (it was taken at the centres of mass)."""
    o = sg.KinematicContactProbeOptions(
        body="paddle", probes=[PROBE], radius=0.01, stiffness=1000.0, damping=10.0, track_bodies=("wall",)
    )
    env = MjSceneEnv(PADDLE, qvel={0: -2.0, 1: 1.5})
    env.reset(seed=0)
    ours = measure(env, o)  # depth (1,), then force (1, 3) in the paddle frame (identity at reset)
    depth, force = ours[0], ours[1:]
    assert depth == pytest.approx(0.01 - 0.005, abs=1e-6)
    normal = np.array([-1.0, 0.0, 0.0])  # the wall face's outward normal
    rate = -float((native(env, "v_paddle") - native(env, "v_wall")) @ normal)
    expect = (1000.0 * 0.005 + 10.0 * rate) * normal
    assert abs(rate) > 0.5  # the damping term really matters here
    np.testing.assert_allclose(force, expect, rtol=1e-5, atol=1e-5)
