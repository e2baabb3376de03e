"""Physics truth of the raycaster: exact distances to known surfaces, no-returns, no self-hits, pattern
shapes and frames, and the manager's delay on top."""

from __future__ import annotations

import gc
import math

import gymnasium as gym
import mujoco
import numpy as np
import pytest

from sensorgym.sensors.mujoco import raycaster
from sensorgym.sensors.mujoco.raycaster import (
    GridPattern,
    RaycasterOptions,
    RaycasterReading,
    SphericalPattern,
)
from sensorgym.wrappers import SingleEnvSensorObservation
from sensorgym.wrappers.common import extract_state

WALL_X = 2.9  # the wall's near face
SCENE = """
<mujoco><option timestep="0.01"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 .1"/>
    <geom name="wall" type="box" pos="3 0 1" size=".1 5 1"/>
    <geom name="step" type="box" pos="-3 -3 0.15" size="1 1 .15"/>
    <body name="robot" pos="0 0 0.5">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="y" type="slide" axis="0 1 0"/>
      <joint name="yaw" type="hinge" axis="0 0 1"/>
      <geom name="torso" type="sphere" size=".2" mass="1"/>
      <body name="arm" pos="0.3 0 0"><geom name="arm_geom" type="box" size=".1 .05 .05" mass=".1"/></body>
      <body name="head" pos="0 0 0.25"><geom name="head_geom" type="sphere" size=".05" mass=".1"/></body>
    </body>
    <body name="crate" pos="-1.5 0 0.4"><geom name="crate_geom" type="box" size=".25 .25 .4"/></body>
    <geom name="post_a" type="sphere" pos="-4 4 0.2" size=".1"/>
    <geom name="post_b" type="sphere" pos="-4.5 4 0.2" size=".1"/>
  </worldbody>
</mujoco>"""


class SceneEnv(gym.Env):
    """The scene above; the action sets the robot's (x, y, yaw) velocity directly."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention

    def __init__(self, xml: str = SCENE, qpos=(0.0, 0.0, 0.0)):
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        self.dt = 0.05
        self.qpos0 = np.asarray(qpos, dtype=float)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:3] = self.qpos0
        mujoco.mj_forward(self.model, self.data)
        return self.data.qpos[:3].copy(), {}

    def step(self, action):
        self.data.qpos[:3] += np.asarray(action, dtype=float) * self.dt  # kinematic: exact poses
        mujoco.mj_forward(self.model, self.data)
        return self.data.qpos[:3].copy(), 0.0, False, False, {}


def scene(qpos=(0.0, 0.0, 0.0), xml: str = SCENE) -> SceneEnv:
    env = SceneEnv(xml, qpos)
    env.reset(seed=0)
    return env


def measure(env, o: RaycasterOptions) -> RaycasterReading:
    flat = next(iter(extract_state(env, {"lidar": o}).values()))
    shape = o.pattern.shape
    n = math.prod(shape)
    return RaycasterReading(flat[: 3 * n].reshape(*shape, 3), flat[3 * n :].reshape(shape))


def ring(n=4, **kw) -> RaycasterOptions:
    """One horizontal ring of ``n`` rays at azimuths -180 + k * 360 / n (k = n/2 points along +x)."""
    return RaycasterOptions(body="robot", pattern=SphericalPattern(n_horizontal=n, n_vertical=1), **kw)


# -- distances ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("x", [0.0, 0.7, -1.0])
def test_distance_to_a_wall_is_exact(x):
    r = measure(scene((x, 0.0, 0.0)), ring(4, max_range=50.0))
    # the ray along +x leaves the torso and passes through the robot's own arm on the way
    assert r.distances[0, 2] == pytest.approx(WALL_X - x, abs=1e-9)
    np.testing.assert_allclose(r.points[0, 2], [WALL_X - x, 0.0, 0.0], atol=1e-9)


def test_distance_follows_the_mount_offset_and_the_robot_yaw():
    yaw = math.radians(30.0)
    env = scene((0.5, 0.0, yaw))
    pattern = SphericalPattern(n_horizontal=3, n_vertical=1, fov_horizontal=60.0)  # -30, 0, 30 deg
    r = measure(env, RaycasterOptions(body="robot", pattern=pattern, pos_offset=(0.1, 0.0, 0.0)))
    sensor_x = 0.5 + 0.1 * math.cos(yaw)
    # azimuth -30 deg in the yawed body points along world +x; azimuth 0 meets the wall at 30 deg
    assert r.distances[0, 0] == pytest.approx(WALL_X - sensor_x, abs=1e-9)
    assert r.distances[0, 1] == pytest.approx((WALL_X - sensor_x) / math.cos(yaw), abs=1e-9)
    # a mount rotated by -30 deg about z undoes the yaw: its centre ray now points along world +x
    turned = RaycasterOptions(body="robot", pattern=pattern, euler_offset=(0.0, 0.0, -30.0))
    r = measure(env, turned)
    assert r.distances[0, 1] == pytest.approx(WALL_X - 0.5, abs=1e-9)


def test_elevation_rays_hit_the_floor_at_the_right_range():
    pattern = SphericalPattern(n_horizontal=1, n_vertical=3, fov_horizontal=0.0, fov_vertical=40.0)
    r = measure(scene(), RaycasterOptions(body="robot", pattern=pattern, max_range=50.0))
    # rays at -20, 0, +20 deg along +x from 0.5 m height: the floor at 0.5 / sin(20), the wall at
    # 2.9 / cos(20) (1.56 m up, below its 2 m top)
    a = math.radians(20.0)
    np.testing.assert_allclose(
        r.distances[:, 0], [0.5 / math.sin(a), WALL_X, WALL_X / math.cos(a)], atol=1e-6
    )


# -- no-returns --------------------------------------------------------------------------------------------
def test_misses_and_out_of_range_hits_report_the_no_hit_value():
    up_down = SphericalPattern(n_horizontal=1, n_vertical=3, fov_horizontal=0.0, fov_vertical=180.0)
    env = scene()
    # elevations -90 (floor at 0.5 m), 0 (wall at 2.9 m), +90 (the open sky)
    r = measure(env, RaycasterOptions(body="robot", pattern=up_down, max_range=10.0))
    np.testing.assert_allclose(r.distances[:, 0], [0.5, WALL_X, 10.0], atol=1e-9)
    np.testing.assert_allclose(r.points[2, 0], [0.0, 0.0, 10.0], atol=1e-9)  # origin + direction * 10
    # the wall beyond max_range and the floor below min_range are no-returns too
    r = measure(env, RaycasterOptions(body="robot", pattern=up_down, min_range=0.6, max_range=2.0))
    np.testing.assert_allclose(r.distances[:, 0], [2.0, 2.0, 2.0], atol=1e-9)
    r = measure(env, RaycasterOptions(body="robot", pattern=up_down, max_range=2.0, no_hit_value=-1.0))
    np.testing.assert_allclose(r.distances[:, 0], [0.5, -1.0, -1.0], atol=1e-9)
    np.testing.assert_allclose(r.points[1, 0], [-1.0, 0.0, 0.0], atol=1e-9)


# -- self-exclusion ----------------------------------------------------------------------------------------
def test_the_robot_never_sees_itself():
    env = scene()
    down_up = SphericalPattern(n_horizontal=1, n_vertical=2, fov_horizontal=0.0, fov_vertical=180.0)
    # mounted on the head: the ray down starts inside the head and crosses the torso below it
    r = measure(env, RaycasterOptions(body="head", pattern=down_up, max_range=50.0))
    np.testing.assert_allclose(r.distances[:, 0], [0.75, 50.0], atol=1e-6)  # the floor 0.75 m below; sky
    # without the exclusion the same rays stop inside the robot
    blind = measure(env, RaycasterOptions(body="head", pattern=down_up, max_range=50.0, exclude_self=False))
    np.testing.assert_allclose(blind.distances[:, 0], [0.05, 0.05], atol=1e-6)  # leaving the head sphere
    ahead = measure(env, ring(4, max_range=50.0, exclude_self=False))
    assert ahead.distances[0, 2] == pytest.approx(0.2, abs=1e-6)  # leaving the torso toward the arm
    # the geom groups are restored after the cast
    np.testing.assert_array_equal(env.model.geom_group, 0)


def test_excluded_bodies_are_transparent_and_other_bodies_are_not():
    env = scene()
    back = ring(2, max_range=50.0)  # azimuths -180 (toward the crate, then nothing) and 0
    assert measure(env, back).distances[0, 0] == pytest.approx(1.25, abs=1e-9)  # the crate's east face
    through = ring(2, max_range=50.0, exclude_bodies=("crate",))
    assert measure(env, through).distances[0, 0] == pytest.approx(50.0)  # nothing west of it: a miss


def test_exclusion_works_when_every_geom_group_is_in_use():
    xml = SCENE
    world = ("floor", "step", "crate_geom", "post_a", "post_b", "wall")  # groups 0 .. 5
    for group, name in [*enumerate(world), (5, "torso"), (3, "arm_geom"), (7, "head_geom")]:
        xml = xml.replace(f'name="{name}"', f'name="{name}" group="{group}"')
    env = scene(xml=xml)
    groups = env.model.geom_group.copy()
    assert set(np.clip(groups, 0, 5)) == {0, 1, 2, 3, 4, 5}
    r = measure(env, ring(4, max_range=50.0))
    assert r.distances[0, 2] == pytest.approx(WALL_X, abs=1e-6)  # the wall (group 5) stays visible
    np.testing.assert_array_equal(env.model.geom_group, groups)


def test_a_new_model_never_inherits_what_was_derived_for_a_freed_one():
    # CPython hands the address (id) of a freed model to the next one: a cache keyed by id(model) could
    # reuse the body ids and exclusion of a previous scene. The plans live exactly as long as their model.
    moved = SCENE.replace(
        '<body name="robot" pos="0 0 0.5">', '<body name="first"/><body name="robot" pos="0 0 0.5">'
    )
    o = ring(4, max_range=50.0)
    gc.collect()
    before = len(raycaster._PLANS)
    for i in range(6):
        env = scene((0.1 * i, 0.0, 0.0), xml=moved if i % 2 else SCENE)
        assert measure(env, o).distances[0, 2] == pytest.approx(WALL_X - 0.1 * i, abs=1e-6)
        assert env.model in raycaster._PLANS
        del env
        gc.collect()
        assert len(raycaster._PLANS) == before


# -- patterns and frames -----------------------------------------------------------------------------------
def test_pattern_shapes_through_the_wrapper():
    grid = RaycasterOptions(body="robot", pattern=GridPattern(size=(1.0, 0.5), resolution=0.25))
    sphere = RaycasterOptions(body="robot", pattern=SphericalPattern(n_horizontal=36, n_vertical=4))
    env = SingleEnvSensorObservation(scene(), {"grid": grid, "sphere": sphere})
    obs, _ = env.reset(seed=0)
    g, s = env.sensors["grid"].read(), env.sensors["sphere"].read()
    assert isinstance(g, RaycasterReading) and isinstance(s, RaycasterReading)
    assert g.points.shape == (1, 3, 5, 3) and g.distances.shape == (1, 3, 5)
    assert s.points.shape == (1, 4, 36, 3) and s.distances.shape == (1, 4, 36)
    assert obs["policy"].shape == (15 * 4 + 144 * 4,)


def test_grid_height_scan_over_a_step():
    env = scene((-3.0, -3.0, 0.0))  # above the middle of a 0.3 m high, 2 m wide step
    o = RaycasterOptions(body="robot", pattern=GridPattern(size=(2.4, 0.0), resolution=0.4), max_range=5.0)
    r = measure(env, o)
    assert r.distances.shape == (1, 7)  # x = -1.2 .. 1.2 in 0.4 m steps, straight down
    on_step = np.abs(np.arange(7) * 0.4 - 1.2) < 1.0
    np.testing.assert_allclose(r.distances[0], np.where(on_step, 0.2, 0.5), atol=1e-9)
    # points in the sensor frame: the grid origin plus the distance along -z
    np.testing.assert_allclose(r.points[0, :, 0], np.arange(7) * 0.4 - 1.2, atol=1e-12)
    np.testing.assert_allclose(r.points[0, :, 2], -r.distances[0], atol=1e-12)


def test_world_and_sensor_frame_points_agree():
    yaw = math.radians(70.0)
    env = scene((0.4, -0.3, yaw))
    pattern = SphericalPattern(n_horizontal=12, n_vertical=3, fov_vertical=40.0)
    kw = dict(body="robot", pattern=pattern, pos_offset=(0.1, 0.05, 0.02), euler_offset=(5.0, -10.0, 20.0))
    local = measure(env, RaycasterOptions(**kw, max_range=8.0))
    world = measure(env, RaycasterOptions(**kw, max_range=8.0, return_world_frame=True))
    np.testing.assert_array_equal(local.distances, world.distances)
    body = env.model.body("robot").id
    r_body = env.data.xmat[body].reshape(3, 3)
    from sensorgym.sensors.mujoco.imu import euler_to_matrix

    rot = r_body @ euler_to_matrix(kw["euler_offset"])
    pos = env.data.xpos[body] + r_body @ np.array(kw["pos_offset"])
    np.testing.assert_allclose(world.points, local.points @ rot.T + pos, atol=1e-5)
    # every point is `distance` away from the sensor origin
    np.testing.assert_allclose(np.linalg.norm(local.points, axis=-1), local.distances, atol=1e-5)
    hits = world.distances < 8.0
    assert hits.sum() > 10 and np.all(world.points[hits][:, 2] > -1e-5)  # nothing below the floor


# -- through the manager -----------------------------------------------------------------------------------
def test_delay_and_noise_come_from_the_manager():
    o = ring(4, max_range=50.0, delay=0.1, noise=0.01)
    env = SingleEnvSensorObservation(scene(), {"lidar": o}, seed=0)
    env.reset(seed=0)
    lidar = env.sensors["lidar"]
    truth = [lidar.read_ground_truth().distances[0, 0, 2].item()]
    for _ in range(4):
        env.step(np.array([1.0, 0.0, 0.0], np.float32))  # 5 cm closer to the wall per step
        truth.append(lidar.read_ground_truth().distances[0, 0, 2].item())
    np.testing.assert_allclose(truth, WALL_X - 0.05 * np.arange(5), atol=1e-6)
    measured = lidar.read().distances[0, 0, 2].item()
    assert abs(measured - truth[-3]) < 0.05 and abs(measured - truth[-1]) > 0.05  # two steps old + noise


# -- options -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: RaycasterOptions(body="robot", max_range=-1.0), "max_range"),
        (lambda: RaycasterOptions(body="robot", min_range=5.0, max_range=2.0), "max_range"),
        (lambda: RaycasterOptions(body="robot", no_hit_value=math.inf), "no_hit_value"),
        (lambda: RaycasterOptions(body="robot", pattern=(36, 4)), "pattern"),
        (lambda: RaycasterOptions(body="robot", exclude_bodies="arm"), "exclude_bodies"),
        (lambda: GridPattern(resolution=0.0), "resolution"),
        (lambda: GridPattern(direction=(0, 0, 0)), "direction"),
        (lambda: SphericalPattern(n_horizontal=0), "n_horizontal"),
        (lambda: SphericalPattern(fov_vertical=200.0), "fov_vertical"),
    ],
)
def test_bad_options_name_the_field_and_the_fix(make, field):
    with pytest.raises(ValueError, match=rf"\.{field}=.*Fix: "):
        make()


def test_unknown_body_lists_the_bodies():
    with pytest.raises(ValueError, match=r"RaycasterOptions\.body='nope'.*'robot'"):
        measure(scene(), RaycasterOptions(body="nope"))
