"""Issue 35 item 2 / SPEC §6: what an ``AttitudeSensor`` measures and its ground truth, on real MuJoCo
physics (Ant-v5), against routes it did not write: MuJoCo's body orientation, a plain ``IMUSensor`` with
the same options and seed, and the same sensor with another estimator (the truth does not move). Also the
bias output against the gyroscope's true bias in the loop, and the options' refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.sensors.mujoco.geometry import euler_to_matrix
from sensorgym.wrappers import make_sensor_vec

pytest.importorskip("mujoco")

MOUNT = (10.0, -20.0, 30.0)
IMU = dict(
    body="torso",
    euler_offset=MOUNT,
    gyro_noise_density=1e-3,
    acc_noise_density=4e-3,
    gyro_bias=sg.Normal(0.0, 0.02),
    gyro_random_walk_density=1e-3,
    update_period=0.01,
    dropout=0.1,
)
ALL = ("projected_gravity", "quaternion", "roll_pitch", "bias", "ang_vel")


def _episode(options, steps=40, b=2, also=None):
    sensors = {"s": options, **(also or {})}
    env = make_sensor_vec("Ant-v5", b, sensors, seed=0, vectorization_mode="sync")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    out, bodies = [], []
    for _ in range(steps):
        env.step(rng.uniform(-1, 1, (b, 8)).astype(np.float32))
        out.append({k: (_copy(s.read()), _copy(s.read_ground_truth())) for k, s in env.sensors.items()})
        bodies.append(
            np.stack(
                [
                    e.unwrapped.data.xmat[e.unwrapped.model.body("torso").id].reshape(3, 3).copy()
                    for e in env.unwrapped.envs
                ]
            )
        )
    env.close()
    return out, bodies


def _copy(reading):
    """A reading is a view of the sensor's buffers, overwritten by the next step: keep a copy."""
    return type(reading)(*(x.clone() for x in reading)) if isinstance(reading, tuple) else reading.clone()


def _quat_to_matrix(q):
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        -1,
    ).reshape(*q.shape[:-1], 3, 3)


def test_the_truth_is_the_imu_frames_own_orientation_from_mujoco_mount_included():
    out, bodies = _episode(sg.AttitudeOptions(**IMU, outputs=ALL))
    mount = euler_to_matrix(MOUNT)
    for step, body in zip(out, bodies, strict=True):
        gt = step["s"][1]
        frame = torch.from_numpy(body @ mount)  # IMU frame -> world, (B, 3, 3)
        pg = frame.transpose(1, 2) @ torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64)
        torch.testing.assert_close(gt.projected_gravity.double(), pg, rtol=0, atol=1e-6)
        torch.testing.assert_close(_quat_to_matrix(gt.quaternion.double()), frame, rtol=0, atol=1e-6)
        roll = torch.atan2(frame[:, 2, 1], frame[:, 2, 2])
        pitch = torch.asin(-frame[:, 2, 0])
        torch.testing.assert_close(gt.roll_pitch.double(), torch.stack([roll, pitch], -1), rtol=0, atol=1e-5)


def test_the_measured_imu_is_the_plain_imus_and_the_truth_is_the_same_for_every_estimator():
    """Estimator on or off, and whichever estimator: the same IMU samples and the same ground truth. An
    estimator that draws at a reset (randomized gains, a truth initialization) takes those draws from the
    manager's stream like any randomized option, after the IMU's: the physical truth stays bit-identical,
    while the IMU's later noise draws (and so its measured samples and true bias error) shift."""
    plain, _ = _episode(sg.IMUOptions(**IMU))
    quiet = {  # estimators that draw nothing
        "madgwick": dict(estimator_beta=0.05),
        "mahony": dict(estimator="mahony", estimator_kp=1.5, estimator_ki=0.1),
        "madgwick-9": dict(estimator_magnetometer=True, estimator_earth_field="c_code"),
    }
    drawing = {
        "mahony-random": dict(estimator="mahony", estimator_kp=sg.Uniform(0.5, 2.0), estimator_ki=0.1),
        "truth-init": dict(estimator_init="truth", estimator_init_error=10.0),
    }
    runs = {
        name: _episode(sg.AttitudeOptions(**IMU, **kw, outputs=ALL))[0]
        for name, kw in {**quiet, **drawing}.items()
    }
    physical = ("projected_gravity", "quaternion", "roll_pitch", "ang_vel")
    for k, step in enumerate(plain):
        imu, imu_gt = step["s"]
        reference = runs["madgwick"][k]["s"][1]
        for name, run in runs.items():
            est, gt = run[k]["s"]
            assert torch.equal(gt.ang_vel, imu_gt.ang_vel), name
            for field in physical:
                assert torch.equal(getattr(gt, field), getattr(reference, field)), (name, field)
            if name in quiet:
                assert torch.equal(est.ang_vel, imu.ang_vel), name  # the IMU is measured as any IMU
                assert torch.equal(gt.bias, reference.bias), name
    # and the estimators do differ in what they measure
    assert not torch.equal(runs["madgwick"][-1]["s"][0].quaternion, runs["mahony"][-1]["s"][0].quaternion)


def test_the_estimate_tracks_the_truth_on_the_moving_ant_and_the_accelerometer_correction_helps():
    """Ant-v5 at 100 Hz (frame_skip=1, the IMU's rate) under random torques, the estimator started on the
    truth: the gyroscope alone (kp = 0) drifts with its bias (0.02 rad/s sd: ~3 degrees in 3 s); the
    accelerometer's correction (kp = 2) holds the error lower though the torso accelerates hard."""

    def tilt_errors(kp):
        o = sg.AttitudeOptions(
            **IMU, estimator="mahony", estimator_kp=kp, estimator_ki=0.05, estimator_init="truth"
        )
        env = make_sensor_vec("Ant-v5", 2, {"s": o}, seed=0, env_kwargs={"frame_skip": 1})
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        errs = []
        for _ in range(300):
            env.step((0.3 * rng.uniform(-1, 1, (2, 8))).astype(np.float32))
            est, gt = env.sensors["s"].read(), env.sensors["s"].read_ground_truth()
            cos = (est * gt).sum(-1).clamp(-1, 1)  # one output (projected_gravity): the reading is its tensor
            errs.append(torch.rad2deg(torch.acos(cos)))
        env.close()
        return torch.stack(errs)[150:]  # the second half

    gyro_only, corrected = tilt_errors(0.0), tilt_errors(2.0)
    assert 0.5 < corrected.mean() < 8.0 and corrected.max() < 20.0, (corrected.mean(), corrected.max())
    assert corrected.mean() < 0.85 * gyro_only.mean(), (corrected.mean(), gyro_only.mean())


def test_mahonys_bias_output_converges_to_the_true_gyro_bias_on_the_tilt_axes():
    """SPEC §6 closed form in the loop: a static, level IMU with a constant gyro bias; with ki > 0 the
    bias estimate converges to the bias (the tilt axes x and y; z, about gravity, is unobservable
    without a magnetometer) and the tilt error to zero."""
    from sensorgym.sensors.mujoco.attitude import truth_key

    b, n = 3, 3000
    mgr = sg.SensorManager(num_envs=b, dt=0.01, seed=0)
    o = sg.AttitudeOptions(
        body="torso",
        estimator="mahony",
        estimator_kp=1.0,
        estimator_ki=0.3,
        gyro_bias=sg.Uniform(-0.05, 0.05),
        outputs=("projected_gravity", "bias"),
    )
    att = mgr.add_sensor(o)
    level = {
        att.state_key: torch.tensor([[0.0, 0.0, 9.81, 0.0, 0.0, 0.0, 0.2, 0.0, -0.4]] * b),
        truth_key(o): torch.tensor([[1.0, 0.0, 0.0, 0.0]] * b),
    }
    mgr.reset(level)
    for _ in range(n):
        mgr.step(level)
    est, gt = att.read(), att.read_ground_truth()
    assert gt.bias.abs().min() > 0 and gt.bias.std() > 0.005  # drawn per env and axis
    torch.testing.assert_close(est.bias[:, :2], gt.bias[:, :2], rtol=0, atol=1e-4)
    torch.testing.assert_close(est.projected_gravity, gt.projected_gravity, rtol=0, atol=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        (dict(estimator="ekf"), ("estimator", "'ekf'", "madgwick")),
        (dict(estimator_beta=-0.1), ("estimator_beta", "-0.1", ">= 0")),
        (dict(estimator_kp=float("nan")), ("estimator_kp", "nan")),
        (dict(estimator_init="zero"), ("estimator_init", "'zero'", "first_sample")),
        (dict(estimator_init_error=270.0), ("estimator_init_error", "270", "[0, 180]")),
        (dict(estimator_earth_field="x"), ("estimator_earth_field", "'x'", "paper")),
        (dict(outputs=("gravity",)), ("outputs", "gravity", "projected_gravity")),
        (dict(outputs=("quaternion", "quaternion")), ("outputs", "distinct")),
    ],
)
def test_a_bad_option_is_refused_in_one_line_naming_it(kwargs, names):
    with pytest.raises(ValueError) as err:
        sg.AttitudeOptions(body="torso", **kwargs)
    message = str(err.value)
    assert "\n" not in message
    for name in names:
        assert name in message, (name, message)


def test_two_estimators_in_one_manager_are_refused_naming_the_fix():
    mgr = sg.SensorManager(num_envs=1, dt=0.01)
    mgr.add_sensor(sg.AttitudeOptions(body="torso"))
    mgr.add_sensor(sg.AttitudeOptions(body="torso", estimator="mahony"))
    from sensorgym.sensors.mujoco.attitude import truth_key

    state = {}
    for s in mgr.sensors:
        state[s.state_key] = torch.zeros(1, 9)
        state[truth_key(s.options)] = torch.tensor([[1.0, 0, 0, 0]])
    with pytest.raises(ValueError, match="same estimator"):
        mgr.reset(state)
