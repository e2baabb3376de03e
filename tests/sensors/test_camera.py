"""RGB and depth cameras: image shape and dtype, depth of known planes, content, delay / jitter / history
of whole frames through the manager, pixel noise statistics, saturation, batching over envs, errors."""

from __future__ import annotations

import gc
import itertools

import gymnasium as gym
import mujoco
import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.sensors.mujoco import camera
from sensorgym.sensors.mujoco.camera import (
    CameraOptions,
    DepthCameraOptions,
    DepthCameraSensor,
    RGBCameraSensor,
)
from sensorgym.wrappers import SensorObservation, SimStateExtractor, SingleEnvSensorObservation

H, W = 24, 32
TILE_TOP = 0.02  # the red tile's top face; the floor is at z = 0
SCENE = """
<mujoco>
  <asset><material name="red" rgba="1 0 0 1" emission="1" specular="0" shininess="0"/></asset>
  <worldbody>
    <light pos="0 0 5" dir="0 0 -1" castshadow="false"/>
    <geom name="floor" type="plane" size="5 5 .1" rgba=".5 .5 .5 1"/>
    <geom name="tile" type="box" pos="0 0 0.01" size=".3 .3 .01" material="red"/>
    <body name="rig" pos="0 0 2">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <inertial pos="0 0 0" mass="0.1" diaginertia="1e-3 1e-3 1e-3"/>
      <camera name="down" pos="0 0 0"/>
    </body>
  </worldbody>
</mujoco>"""


class RigEnv(gym.Env):
    """A camera rig 2 m above a floor with a red tile; the action moves it (x, z) kinematically."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention

    def __init__(self, x0: float = 0.0, step_size: float = 1.0):
        self.model = mujoco.MjModel.from_xml_string(SCENE)
        self.data = mujoco.MjData(self.model)
        self.dt, self.x0, self.step_size = 0.05, x0, step_size
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[0] = self.x0
        mujoco.mj_forward(self.model, self.data)
        return self.data.qpos.copy(), {}

    def step(self, action):
        self.data.qpos[:] += np.asarray(action, dtype=float) * self.dt * self.step_size
        mujoco.mj_forward(self.model, self.data)
        return self.data.qpos.copy(), 0.0, False, False, {}


def rgb(**kw) -> CameraOptions:
    return CameraOptions(camera="down", width=W, height=H, **kw)


def depth(**kw) -> DepthCameraOptions:
    return DepthCameraOptions(camera="down", width=W, height=H, **kw)


def wrapped(sensors: dict, env: RigEnv | None = None, **kw) -> SingleEnvSensorObservation:
    env = SingleEnvSensorObservation(env or RigEnv(), sensors, seed=0, **kw)
    env.reset(seed=0)
    return env


# -- images ------------------------------------------------------------------------------------------------
def test_rgb_image_shape_dtype_and_content():
    env = wrapped({"cam": rgb()})
    img = env.sensors["cam"].read()
    assert img.dtype == torch.uint8 and img.shape == (1, H, W, 3)
    centre, corner = img[0, H // 2, W // 2].tolist(), img[0, 0, 0].tolist()
    assert centre[0] >= 250 and max(centre[1:]) <= 10  # the emissive red tile below the camera
    assert max(corner) - min(corner) <= 2 and 40 < corner[0] < 220  # the grey floor around it
    assert torch.equal(img, env.sensors["cam"].read_ground_truth())  # no noise: GT == measured
    obs, *_ = env.step(np.zeros(2, np.float32))
    assert obs["policy"].dtype == np.float32 and obs["policy"].shape == (H * W * 3,)


def test_depth_of_planes_at_known_distances():
    env = wrapped({"d": depth()})
    d = env.sensors["d"].read()
    assert d.dtype == torch.float32 and d.shape == (1, H, W)
    # z-depth: every pixel of a plane facing the camera reads the plane's distance
    assert d[0, H // 2, W // 2].item() == pytest.approx(2.0 - TILE_TOP, abs=1e-3)
    assert d[0, 0, 0].item() == pytest.approx(2.0, abs=1e-3)
    floor = (d[0] - 2.0).abs() < 0.01
    assert floor.sum() > 0.5 * H * W and torch.allclose(d[0][floor], torch.tensor(2.0), atol=1e-3)
    env.step(np.array([0.0, 10.0], np.float32))  # 0.5 m up
    assert env.sensors["d"].read()[0, 0, 0].item() == pytest.approx(2.5, abs=1e-3)


def test_free_camera_looks_at_the_target():
    o = DepthCameraOptions(width=W, height=H, lookat=(0.0, 0.0, 0.0), distance=3.0, elevation=-90.0)
    env = RigEnv()
    env.reset(seed=0)
    (flat,) = DepthCameraSensor._extract_state(env, [o]).values()
    assert flat.dtype == np.float32 and flat.shape == (H * W,)
    assert flat.reshape(H, W)[H // 2, W // 2] == pytest.approx(3.0 - TILE_TOP, abs=1e-3)


# -- time: delay, jitter, history --------------------------------------------------------------------------
def _run(env, n=8, action=(2.0, 1.0)):
    """Step ``n`` times; per step the GT of every sensor (cloned) and the measured reads."""
    gts, reads = [], []
    for t in range(n + 1):
        if t:
            env.step(np.array(action, np.float32))
        gts.append({k: s.read_ground_truth(history_length=0).clone() for k, s in env.sensors.items()})
        reads.append({k: s.read().clone() for k, s in env.sensors.items()})
    return gts, reads


def test_a_delayed_camera_shows_the_frame_rendered_two_steps_earlier():
    env = wrapped({"cam": rgb(delay=0.1), "d": depth(delay=0.1)})  # 2 * dt
    gts, reads = _run(env)
    for k in ("cam", "d"):
        frames = [g[k] for g in gts]
        assert all(not torch.equal(a, b) for a, b in itertools.pairwise(frames))  # the scene moves
        for t, r in enumerate(reads):
            assert torch.equal(r[k], frames[max(t - 2, 0)])  # before 2 steps: the episode's first frame


def test_jitter_and_history_of_frames():
    env = wrapped({"cam": rgb(delay=0.1, jitter=0.05, history_length=3)})  # 2 or 3 steps old
    gts, reads = _run(env, n=16, action=(1.0, 1.0))
    frames = [g["cam"] for g in gts]
    assert all(not torch.equal(a, b) for i, a in enumerate(frames) for b in frames[i + 1 :])
    shown = []  # the capture step each read shows
    for t, r in enumerate(reads):
        assert r["cam"].shape == (1, 3, H, W, 3)
        (step,) = [i for i, f in enumerate(frames) if torch.equal(r["cam"][:, 0], f)]
        assert max(t - 3, 0) <= step <= max(t - 2, 0)
        shown.append(step)
        for k in (1, 2):  # the history holds the previous reads, newest first (padded with the first)
            assert torch.equal(r["cam"][:, k], reads[max(t - k, 0)]["cam"][:, 0])
    assert all(b >= a for a, b in itertools.pairwise(shown))  # reads never go back in capture time
    assert {t - s for t, s in enumerate(shown) if t >= 3} == {2, 3}


def test_rgb_delay_and_history_reach_the_policy_observation():
    env = SingleEnvSensorObservation(RigEnv(), {"cam": rgb(delay=0.05, history_length=2)}, seed=0)
    obs, _ = env.reset(seed=0)
    frames = [env.sensors["cam"].read_ground_truth(history_length=0).clone()]
    for _ in range(3):
        obs, *_ = env.step(np.array([2.0, 0.0], np.float32))
        frames.append(env.sensors["cam"].read_ground_truth(history_length=0).clone())
    expected = torch.stack([frames[-2], frames[-3]], dim=1).float().numpy().reshape(-1)  # 1 step old, then 2
    np.testing.assert_array_equal(obs["policy"], expected)
    np.testing.assert_array_equal(obs["critic"][: H * W * 3], frames[-1].float().numpy().reshape(-1))


# -- pixel noise -------------------------------------------------------------------------------------------
def test_depth_pixel_noise_has_the_configured_std():
    env = wrapped({"d": depth(noise=0.05)})
    err = []
    for _ in range(10):
        env.step(np.zeros(2, np.float32))
        s = env.sensors["d"]
        err.append((s.read() - s.read_ground_truth()).flatten())
    err = torch.cat(err)
    assert err.numel() == 10 * H * W
    assert err.std().item() == pytest.approx(0.05, rel=0.03)
    assert abs(err.mean().item()) < 4 * 0.05 / err.numel() ** 0.5
    assert env.sensors["d"].read_ground_truth()[0, 0, 0].item() == pytest.approx(2.0, abs=1e-3)  # clean GT


def test_rgb_pixel_noise_has_the_configured_std_in_intensity_units():
    env = wrapped({"cam": rgb(noise=8.0)})
    err = []
    for _ in range(10):
        env.step(np.zeros(2, np.float32))
        s = env.sensors["cam"]
        gt = s.read_ground_truth().float()
        keep = (gt > 40) & (gt < 215)  # away from the clamp at 0 and 255
        err.append((s.read().float() - gt)[keep])
    err = torch.cat(err)
    assert err.numel() > 10 * H * W  # most of the grey floor
    # rounding to integers adds a uniform error of variance 1/12
    assert err.std().item() == pytest.approx((64 + 1 / 12) ** 0.5, rel=0.03)
    assert abs(err.mean().item()) < 0.1


def test_noise_saturates_instead_of_wrapping():
    env = wrapped({"cam": rgb(noise=1e4), "d": depth(noise=5.0, max_depth=3.0)})
    img, d = env.sensors["cam"].read(), env.sensors["d"].read()
    # a uint8 cast without the clamp would wrap around and spread values over 0..255
    assert ((img == 0) | (img == 255)).float().mean().item() > 0.95
    assert d.min().item() == 0.0 and d.max().item() == 3.0
    assert ((d == 0) | (d == 3.0)).float().mean().item() > 0.5


# -- batching over envs ------------------------------------------------------------------------------------
def test_vector_env_rows_hold_their_own_env_images():
    sensors = {"cam": rgb(), "d": depth(delay=0.05)}
    starts = (0.0, 0.6, -0.6)
    fns = [lambda x=x: SimStateExtractor(RigEnv(x0=x), sensors) for x in starts]
    envs = SensorObservation(gym.vector.SyncVectorEnv(fns), sensors, seed=0)
    envs.reset(seed=0)
    envs.step(np.zeros((3, 2), np.float32))
    cam, d = envs.sensors["cam"].read(), envs.sensors["d"].read()
    assert cam.shape == (3, H, W, 3) and d.shape == (3, H, W)
    for i, x in enumerate(starts):
        ref = RigEnv(x0=x)
        ref.reset(seed=0)
        (img,) = RGBCameraSensor._extract_state(ref, [sensors["cam"]]).values()
        (dep,) = DepthCameraSensor._extract_state(ref, [sensors["d"]]).values()
        np.testing.assert_array_equal(cam[i].numpy().reshape(-1), img.astype(np.uint8))
        np.testing.assert_allclose(d[i].numpy().reshape(-1), dep, atol=1e-6)
    assert not torch.equal(cam[0], cam[1]) and not torch.equal(cam[1], cam[2])
    envs.close()


def test_renderers_live_as_long_as_their_env():
    gc.collect()
    before = len(camera._RENDERERS)
    env = _rig()
    for _ in range(3):  # one renderer per env, size and kind, reused every step
        RGBCameraSensor._extract_state(env, [rgb(), rgb(shadows=False)])
        DepthCameraSensor._extract_state(env, [depth()])
    assert sorted(camera._RENDERERS[env.data]) == [(H, W, False), (H, W, True)]
    del env
    gc.collect()
    assert len(camera._RENDERERS) == before


# -- errors ------------------------------------------------------------------------------------------------
def test_a_state_without_the_image_says_how_to_fix_it():
    mgr = sg.SensorManager(num_envs=2, dt=0.05)
    mgr.add_sensor(rgb(), name="cam")
    with pytest.raises(ValueError, match=r"cam.*SimStateExtractor"):
        mgr.reset({})
    bad = {next(iter(RGBCameraSensor._extract_state(_rig(), [rgb()]))): np.zeros((2, 5), np.float32)}
    with pytest.raises(ValueError, match=r"image of shape \(2, 5\), expected \(2, 2304\)"):
        mgr.reset(bad)


def _rig() -> RigEnv:
    env = RigEnv()
    env.reset(seed=0)
    return env


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: rgb(noise=-1.0), "noise"),
        (lambda: rgb(noise=sg.Uniform(0.0, 2.0)), "noise"),
        (lambda: CameraOptions(width=0), "width"),
        (lambda: CameraOptions(camera=""), "camera"),
        (lambda: CameraOptions(distance=0.0), "distance"),
        (lambda: CameraOptions(lookat=(0.0, 1.0)), "lookat"),
        (lambda: depth(max_depth=0.0), "max_depth"),
    ],
)
def test_bad_options_name_the_field_and_the_fix(make, field):
    with pytest.raises(ValueError, match=rf"\.{field}=.*Fix: "):
        make()


def test_unknown_camera_and_oversized_images_explain_the_fix():
    env = _rig()
    with pytest.raises(ValueError, match=r"CameraOptions\.camera='nope'.*'down'"):
        RGBCameraSensor._extract_state(env, [CameraOptions(camera="nope", width=W, height=H)])
    with pytest.raises(ValueError, match="offwidth"):
        RGBCameraSensor._extract_state(env, [CameraOptions(camera="down", width=2000, height=H)])
