"""An IMU whose mount (``pos_offset``, ``euler_offset``, cross-axis couplings) is randomized per episode.

The oracle is MuJoCo's own accelerometer, gyro and magnetometer on a site placed at each env's drawn
mount (the route sensorgym did not write): the measured reading of env ``b`` must equal them, through env
``b``'s drawn coupling, on an arm that turns and accelerates (so the lever arm ``alpha x d + w x (w x d)``
matters), while the ground truth stays the nominal fixed-mount IMU's, bit for bit. Then the draws: per
reset and not between, same seed same draws, partial resets, ``state_dict``, both executors, and fixed
mounts left exactly as they were.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import mujoco
import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.sensors.mujoco.base import state_key
from sensorgym.sensors.mujoco.imu import alpha_key, coupling_parameters, euler_to_matrix, nominal_value
from sensorgym.sensors.mujoco.native import add_native_sensors, imu_names
from sensorgym.wrappers.common import ExtractionPlan, extract_state

from .mjscene import MjSceneEnv

FIELD = (0.05, 0.25, -0.45)
# Two hinge links driven by motors; the link's centre of mass is off its body origin and its inertia axes
# are rotated, so the body frame (where the IMU is mounted) is not the inertial frame. {sites}/{sensors}
# receive the oracle's site at an env's drawn mount.
ARM = """
<mujoco>
  <option timestep="0.002" magnetic="0.05 0.25 -0.45"/>
  <worldbody>
    <body name="base" pos="0 0 1">
      <joint name="yaw" type="hinge" axis="0.2 0.3 0.93" damping="0.05"/>
      <inertial pos="0.1 0.05 0" quat="0.9 0.1 0.3 0.2" mass="2" diaginertia="0.03 0.02 0.01"/>
      <body name="link" pos="0.4 0 0" euler="10 0 25">
        <joint name="pitch" type="hinge" axis="0 1 0" damping="0.05"/>
        <inertial pos="0.25 0.3 -0.05" quat="0.7 0.2 -0.5 0.4" mass="1.5" diaginertia="0.02 0.015 0.009"/>
        {sites}
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="yaw_motor" joint="yaw" gear="3"/>
    <motor name="pitch_motor" joint="pitch" gear="1.5"/>
  </actuator>
  <sensor>{sensors}</sensor>
</mujoco>"""
ORACLE_SENSORS = (
    '<accelerometer name="a" site="s"/><gyro name="g" site="s"/><magnetometer name="m" site="s"/>'
)

RANDOM = sg.IMUOptions(
    body="link",
    pos_offset=(sg.Uniform(0.0, 0.3), sg.Normal(-0.05, 0.05, low=-0.2, high=0.1), 0.23),
    euler_offset=(
        sg.Normal(30.0, 10.0, low=0.0, high=60.0),
        sg.Uniform(-30.0, -10.0),
        sg.Choice([40.0, 50.0]),
    ),
    magnetic_field=FIELD,
    acc_cross_axis_coupling=sg.Uniform(-0.02, 0.02),  # xy, xz, yz drawn on their own
    gyro_cross_axis_coupling=(0.01, sg.Normal(0.0, 0.01), 0.0),
)
# the nominal mount: each distribution's centre (Uniform midpoint, Normal mean, Choice mean)
NOMINAL = sg.IMUOptions(
    body="link",
    pos_offset=(0.15, -0.05, 0.23),
    euler_offset=(30.0, -20.0, 45.0),
    magnetic_field=FIELD,
    gyro_cross_axis_coupling=(0.01, 0.0, 0.0),
)
SENSORS = {"random": RANDOM, "nominal": NOMINAL}


def arm(b: int, sites: str = "", sensors: str = "") -> MjSceneEnv:
    """Env ``b``'s arm (its own initial velocities), optionally with the oracle's site."""
    env = MjSceneEnv(ARM.format(sites=sites, sensors=sensors), frame_skip=5, qvel={0: 2.0 - b, 1: -1.5 + b})
    env.reset(seed=0)
    return env


def action(t: int, b: int) -> np.ndarray:
    return np.array([0.4 * math.sin(0.3 * t + b), 0.8 * math.cos(0.2 * t - b)])


def batched(envs: list, sensors: dict = SENSORS) -> dict[str, np.ndarray]:
    rows = [extract_state(e, sensors) for e in envs]
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def oracle(md, b: int) -> MjSceneEnv:
    """Env ``b``'s arm with native sensors on a site at the mount drawn for env ``b``."""
    pos, euler = md.extra["mount_pos"][b, 0].tolist(), md.extra["mount_euler"][b, 0].tolist()
    site = '<site name="s" pos="{!r} {!r} {!r}" euler="{!r} {!r} {!r}"/>'.format(*pos, *euler)
    return arm(b, site, ORACLE_SENSORS)


def test_nominal_values():
    assert nominal_value(sg.Uniform(0.0, 0.3)) == 0.15
    assert nominal_value(sg.Normal(-0.05, 0.05, low=-0.2, high=0.1)) == -0.05  # clip bounds do not move it
    assert nominal_value(sg.Choice([40.0, 50.0])) == 45.0
    assert nominal_value(sg.LogUniform(1.0, math.e)) == pytest.approx(math.e - 1.0, rel=1e-15)
    assert nominal_value(sg.LogUniform(2.0, 2.0)) == 2.0
    assert RANDOM.nominal_pos_offset == NOMINAL.pos_offset
    assert RANDOM.nominal_euler_offset == NOMINAL.euler_offset
    np.testing.assert_array_equal(RANDOM.nominal_coupling("acc"), np.eye(3))
    np.testing.assert_array_equal(RANDOM.nominal_coupling("gyro"), NOMINAL.nominal_coupling("gyro"))
    assert RANDOM.randomized_fields() == (
        "pos_offset", "euler_offset", "acc_cross_axis_coupling", "gyro_cross_axis_coupling"
    )  # fmt: skip
    assert NOMINAL.randomized_fields() == ()


def test_measured_equals_mujocos_sensors_at_each_envs_drawn_mount_and_gt_stays_nominal():
    B, steps = 3, 60
    plain = [arm(b) for b in range(B)]
    mgr = sg.SensorManager(num_envs=B, dt=0.01, seed=3)
    rand, nom = mgr.add_sensor(RANDOM, name="random"), mgr.add_sensor(NOMINAL, name="nominal")
    mgr.reset(batched(plain))
    md = mgr.metadata(sg.IMUSensor)
    oracles = [oracle(md, b) for b in range(B)]  # same initial state as `plain`
    coupling = md.extra["mount_coupling"][:, 0].double().numpy()  # (B, field, 3, 3), float32 values
    worst, lever_seen, turning = 0.0, 0.0, 0
    for t in range(steps):
        for b, env in enumerate(oracles):
            env.step(action(t, b))
        state = batched(oracles)
        mgr.step(state)
        for ours, gt in zip(rand.read_ground_truth(), nom.read_ground_truth(), strict=True):
            assert torch.equal(ours, gt)  # the ground truth never moves
        measured = rand.read()
        for b, env in enumerate(oracles):
            for i, (name, ours) in enumerate(zip("agm", measured, strict=True)):
                ref = coupling[b, i] @ env.data.sensor(name).data
                scale = max(1.0, float(np.abs(ref).max()))
                err = float(np.abs(ours[b].double().numpy() - ref).max()) / scale
                worst = max(worst, err)
                assert err <= 4 * np.finfo(np.float32).eps, (t, b, name, ours[b], ref)
            # what the lever arm's alpha x d term contributes (it must matter for the test to mean much)
            alpha = state[alpha_key(RANDOM)][b].astype(np.float64)
            lever_seen = max(lever_seen, float(np.linalg.norm(np.cross(alpha, md.extra["mount_arm"][b, 0]))))
            turning += float(np.linalg.norm(env.data.sensor("g").data)) > 1.0
    assert worst < 2e-7  # float32 rounding (largest seen: ~1.4e-7 of the value)
    assert lever_seen > 1.0 and turning > B * steps // 2  # m/s^2: a real, rotating, accelerating lever
    # the drawn mounts really differ from the nominal one and from each other
    pos = rand.read_mount()["pos_offset"]
    assert len({tuple(p) for p in pos.tolist()}) == B and not torch.allclose(
        pos[0], torch.tensor([0.15, -0.05, 0.23])
    )


def synthetic_state(mgr, options, gen: np.random.Generator) -> dict[str, np.ndarray]:
    """A state for the manager without MuJoCo: random nominal readings and angular accelerations; one
    draw from ``gen`` per call, and each sensor's numbers from its own stream, so a sensor sees the same
    states whatever sensors share the manager."""
    tick = int(gen.integers(2**31))
    out = {}
    for o in options:
        own = np.random.default_rng([tick, int(state_key(o).rsplit(".", 1)[-1], 16)])
        out[state_key(o)] = own.normal(size=(mgr.num_envs, 9)).astype(np.float32) * 5
        if any(isinstance(v, sg.Distribution) for v in o.pos_offset):
            out[alpha_key(o)] = own.normal(size=(mgr.num_envs, 3)).astype(np.float32) * 20
    return out


MOUNTED = sg.IMUOptions(
    body="link",
    pos_offset=sg.Uniform(-0.1, 0.1),  # one distribution: each component drawn on its own
    euler_offset=(sg.Normal(0.0, 2.0, low=-6.0, high=6.0), 0.0, sg.Uniform(-5.0, 5.0)),
    mag_cross_axis_coupling=sg.Normal(0.0, 0.01),
    noise=0.01,
    delay=0.02,
)


def run(mgr, sensors, steps: int, seed: int = 0, resets: dict | None = None) -> list:
    """Reset, then ``steps`` steps (with the autoresets ``resets[t] = envs``); every read, GT and draw."""
    gen = np.random.default_rng(seed)
    opts = list(sensors.values())
    if not mgr.sensors:  # a new manager: add the sensors and start the episodes
        for name, o in sensors.items():
            mgr.add_sensor(o, name=name)
        mgr.reset(synthetic_state(mgr, opts, gen))
    handles = mgr.sensors
    out = []
    for t in range(steps):
        mask = None
        if resets and t in resets:
            mask = torch.zeros(mgr.num_envs, dtype=torch.bool)
            mask[resets[t]] = True
        mgr.step(synthetic_state(mgr, opts, gen), reset_mask=mask)
        for s in handles:
            row = [x.clone() for x in s.read()] + [x.clone() for x in s.read_ground_truth()]
            row += [v.clone() for v in s.read_mount().values()]
            out.append(row)
    return out


def draws(sensor) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in sensor.read_mount().items()}


def test_draws_change_at_each_reset_and_not_between():
    mgr = sg.SensorManager(num_envs=4, dt=0.01, seed=1)
    imu = mgr.add_sensor(MOUNTED, name="imu")
    gen = np.random.default_rng(0)
    mgr.reset(synthetic_state(mgr, [MOUNTED], gen))
    first = draws(imu)
    assert set(first) == {"pos_offset", "euler_offset", "mag_cross_axis_coupling"}
    for _ in range(5):
        mgr.step(synthetic_state(mgr, [MOUNTED], gen))
        for k, v in draws(imu).items():
            assert torch.equal(v, first[k])
    pos = first["pos_offset"]
    assert len(set(pos.flatten().tolist())) == 12  # per env and component
    assert bool(((pos >= -0.1) & (pos < 0.1)).all())
    euler = first["euler_offset"]
    assert euler[:, 1].eq(0).all() and bool(((euler[:, 0] >= -6) & (euler[:, 0] <= 6)).all())
    c = first["mag_cross_axis_coupling"]
    assert torch.equal(c, c.transpose(-1, -2)) and c.diagonal(dim1=-2, dim2=-1).eq(1).all()
    mgr.reset(synthetic_state(mgr, [MOUNTED], gen))
    for k, v in draws(imu).items():
        assert not torch.equal(v, first[k]), k


def test_same_seed_same_draws_and_partial_resets_redraw_only_their_envs():
    a, b = (sg.SensorManager(num_envs=4, dt=0.01, seed=7) for _ in range(2))
    ra, rb = run(a, {"imu": MOUNTED}, 3), run(b, {"imu": MOUNTED}, 3)
    for x, y in zip(ra, rb, strict=True):
        for u, v in zip(x, y, strict=True):
            assert torch.equal(u, v)
    imu = a.sensors[0]
    before = draws(imu)
    gen = np.random.default_rng(5)
    a.reset(synthetic_state(a, [MOUNTED], gen), envs_idx=[1, 3])  # a partial reset
    after = draws(imu)
    for k in before:
        assert torch.equal(after[k][[0, 2]], before[k][[0, 2]]), k
        assert not torch.equal(after[k][[1, 3]], before[k][[1, 3]]), k
    a.step(
        synthetic_state(a, [MOUNTED], gen), reset_mask=torch.tensor([False, False, True, False])
    )  # autoreset
    again = draws(imu)
    for k in before:
        assert torch.equal(again[k][[0, 1, 3]], after[k][[0, 1, 3]]), k
        assert not torch.equal(again[k][2], after[k][2]), k


def test_state_dict_round_trip_continues_bit_identically():
    sensors = {"imu": MOUNTED, "plain": NOMINAL}
    a = sg.SensorManager(num_envs=3, dt=0.01, seed=2)
    run(a, sensors, 4)
    saved = copy.deepcopy(a.state_dict())
    b = sg.SensorManager(num_envs=3, dt=0.01, seed=99)
    for n, o in sensors.items():
        b.add_sensor(o, name=n)
    b.reset(synthetic_state(b, list(sensors.values()), np.random.default_rng(1)))  # other draws ...
    b.load_state_dict(saved)  # ... replaced by a's
    resets = {2: [0], 5: [1, 2]}
    ra, rb = run(a, sensors, 8, seed=11, resets=resets), run(b, sensors, 8, seed=11, resets=resets)
    for x, y in zip(ra, rb, strict=True):
        for u, v in zip(x, y, strict=True):
            assert torch.equal(u, v)
    assert {"md.extra.mount_pos", "md.extra.mount_matrix", "md.extra.mount_coupling"} <= set(_keys(saved))


def _keys(sd):
    if isinstance(sd, dict):
        for k, v in sd.items():
            yield k
            yield from _keys(v)
    elif isinstance(sd, (list, tuple)):
        for v in sd:
            yield from _keys(v)


def test_both_executors_give_the_same_bits():
    sensors = {"imu": MOUNTED, "random": RANDOM, "plain": NOMINAL}
    out = {}
    for executor in ("numpy", "torch"):
        mgr = sg.SensorManager(num_envs=5, dt=0.01, seed=4, executor=executor)
        out[executor] = run(mgr, sensors, 10, resets={3: [0, 4], 7: [2]})
        assert mgr.metadata(sg.IMUSensor).xp.name == executor
        out[executor].append(list(_tensors(mgr.state_dict())))
    for x, y in zip(out["numpy"], out["torch"], strict=True):
        assert len(x) == len(y)
        for u, v in zip(x, y, strict=True):
            assert torch.equal(u, v)


def _tensors(sd):
    if torch.is_tensor(sd):
        yield sd
    elif isinstance(sd, dict):
        for v in sd.values():
            yield from _tensors(v)
    elif isinstance(sd, (list, tuple)):
        for v in sd:
            yield from _tensors(v)


def test_fixed_mounts_take_todays_path_and_keep_the_random_stream():
    explicit = sg.IMUOptions(
        body="link", noise=0.1, pos_offset=(0.0, 0.0, 0.0), euler_offset=(0.0, 0.0, 0.0),
        acc_cross_axis_coupling=0.0, gyro_cross_axis_coupling=0.0, mag_cross_axis_coupling=0.0,
    )  # fmt: skip
    default = sg.IMUOptions(body="link", noise=0.1)
    results = []
    for o in (explicit, default):
        mgr = sg.SensorManager(num_envs=3, dt=0.01, seed=0)
        results.append(run(mgr, {"imu": o}, 5, resets={2: [1]}))
        md = mgr.metadata(sg.IMUSensor)
        assert md.constants["imu_mount"] is None and md.extra == {}
        results[-1].append([mgr.random.generator.get_state()])  # the random stream after the run
    for x, y in zip(*results, strict=True):
        for u, v in zip(x, y, strict=True):
            assert torch.equal(u, v)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf * 0, discarded
def test_a_fixed_imu_beside_a_randomized_one_keeps_its_numbers():
    """In one class with a randomized IMU (mount and coupling drawn, nominal coupling identity), a fixed IMU
    without noise reads exactly what it reads alone, -0.0 and a non-finite axis included (a product with
    an identity matrix would turn them into +0.0 and NaN)."""
    fixed = sg.IMUOptions(body="link", pos_offset=(0.1, 0.0, 0.0), euler_offset=(0.0, 10.0, 0.0))
    random = dataclasses.replace(MOUNTED, noise=0.0)
    reads = []
    for sensors in ({"fixed": fixed}, {"random": random, "fixed": fixed}):
        mgr = sg.SensorManager(num_envs=3, dt=0.01, seed=0)
        for name, o in sensors.items():
            mgr.add_sensor(o, name=name)
        gen = np.random.default_rng(0)
        rows = []
        for t in range(5):
            state = synthetic_state(mgr, list(sensors.values()), gen)
            state[state_key(fixed)][:, 0] = -0.0
            state[state_key(fixed)][0, 7] = math.inf
            mgr.reset(state) if t == 0 else mgr.step(state, reset_mask=torch.tensor([t == 3, False, False]))
            s = mgr.sensors[-1]
            rows.append([*s.read(), *s.read_ground_truth()])
        reads.append(rows)
    for x, y in zip(*reads, strict=True):
        for u, v in zip(x, y, strict=True):
            assert torch.equal(u.view(torch.int32), v.view(torch.int32))  # the bits (NaN != NaN otherwise)
    assert reads[0][-1][0][0, 0].item() == 0.0 and math.copysign(1, reads[0][-1][0][0, 0].item()) == -1


def test_the_native_site_is_the_nominal_mount_and_the_gather_falls_back_for_a_randomized_position():
    assert imu_names(RANDOM) == imu_names(NOMINAL)
    spec = mujoco.MjSpec.from_string(ARM.format(sites="", sensors=""))
    add_native_sensors(spec, [RANDOM], set_magnetic=True)
    env = MjSceneEnv(spec.to_xml(), frame_skip=5, qvel={0: 2.0, 1: -1.5})
    env.reset(seed=0)
    for t in range(3):
        env.step(action(t, 0))
    plan = ExtractionPlan({"random": RANDOM})
    assert plan._gather_program(env) is None  # alpha is measured in Python beside the native read
    packed, layout = plan.packed_with_layout(env)
    values = plan(env)
    assert [k for k, _ in layout] == [state_key(RANDOM), alpha_key(RANDOM)] == list(values)
    np.testing.assert_array_equal(packed, ExtractionPlan.pack(values))
    # the reading is the native one of the nominal site: the nominal fixed IMU's
    nominal = extract_state(env, {"n": NOMINAL})[state_key(NOMINAL)]
    np.testing.assert_array_equal(values[state_key(RANDOM)], nominal)
    native = np.concatenate([env.data.sensor(n).data for n in imu_names(NOMINAL)[1:]])
    np.testing.assert_array_equal(nominal, native.astype(np.float32))
    # alpha: the body's angular acceleration, in the nominal frame
    acc = np.empty(6)
    body = env.model.body("link").id
    mujoco.mj_objectAcceleration(env.model, env.data, mujoco.mjtObj.mjOBJ_XBODY, body, acc, 1)
    expect = euler_to_matrix(NOMINAL.euler_offset).T @ acc[:3]
    np.testing.assert_allclose(values[alpha_key(RANDOM)], expect, rtol=1e-6, atol=1e-6)
    assert np.linalg.norm(expect) > 1.0


def test_a_randomized_rotation_alone_keeps_the_fused_gather():
    euler_only = sg.IMUOptions(
        body="link", euler_offset=(sg.Uniform(-5.0, 5.0), 0.0, 0.0), magnetic_field=FIELD
    )
    spec = mujoco.MjSpec.from_string(ARM.format(sites="", sensors=""))
    add_native_sensors(spec, [euler_only], set_magnetic=True)
    env = MjSceneEnv(spec.to_xml(), frame_skip=5)
    env.reset(seed=0)
    plan = ExtractionPlan({"imu": euler_only})
    assert plan._gather_program(env) is not None
    np.testing.assert_array_equal(plan.packed(env), ExtractionPlan.pack(plan(env)))


def test_a_state_without_the_angular_acceleration_is_refused_with_the_fix():
    mgr = sg.SensorManager(num_envs=2, dt=0.01, seed=0)
    imu = mgr.add_sensor(MOUNTED, name="imu")
    state = synthetic_state(mgr, [MOUNTED], np.random.default_rng(0))
    del state[alpha_key(MOUNTED)]
    match = r"sensor 'imu' \(IMUSensor\): its pos_offset is randomized, which needs the body's angular accel"
    with pytest.raises(ValueError, match=match + r"eration .* got nothing\. Fix: "):
        mgr.reset(state)
    assert imu.state_key + ".alpha" == alpha_key(MOUNTED)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"pos_offset": (0.0, 0.1)}, ValueError, r"IMUOptions\.pos_offset=\(0\.0, 0\.1\) is invalid: expect"),
        ({"euler_offset": (0.0, math.inf, 0.0)}, ValueError, r"IMUOptions\.euler_offset=.*finite numbers or"),
        ({"euler_offset": "xyz"}, ValueError, r"IMUOptions\.euler_offset='xyz'"),
        ({"acc_cross_axis_coupling": (sg.Uniform(0, 1), 0.0)}, ValueError,
         r"IMUOptions\.acc_cross_axis_coupling=.*3 values \(xy, xz, yz\) or a 3x3 matrix"),
        ({"gyro_cross_axis_coupling": [[1, 0, 0], [0, 1, "a"], [0, 0, 1]]}, ValueError,
         r"gyro_cross_axis_coupling"),
    ],
)  # fmt: skip
def test_bad_mount_options_are_named(kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        sg.IMUOptions(body="b", **kwargs)
    assert "Fix: " in str(info.value)


def test_a_distribution_without_a_centre_is_refused():
    class Bimodal(sg.Uniform):  # a user distribution nobody defined a centre for
        pass

    assert nominal_value(Bimodal(0.0, 1.0)) == 0.5  # a Uniform subclass is a Uniform
    from sensorgym.core.randomization import Distribution

    class Odd(Distribution):
        bounds = (0.0, 1.0)

        def sample_(self, out, generator):
            return out.fill_(0.5)

    with pytest.raises(TypeError, match=r"IMUOptions\.pos_offset=.*needs the centre of its distribution"):
        sg.IMUOptions(body="b", pos_offset=(Odd(), 0.0, 0.0))


def test_coupling_forms():
    u = sg.Uniform(-0.01, 0.01)
    matrix = [[1.0, u, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    o = sg.IMUOptions(body="b", acc_cross_axis_coupling=u, gyro_cross_axis_coupling=matrix)
    assert o.acc_cross_axis_coupling == (u, u, u)
    assert [w for v, w in coupling_parameters(o.acc_cross_axis_coupling) if v is u] == [
        ((0, 1), (1, 0)), ((0, 2), (2, 0)), ((1, 2), (2, 1))
    ]  # fmt: skip
    mgr = sg.SensorManager(num_envs=3, dt=0.01, seed=0)
    imu = mgr.add_sensor(o, name="imu")
    mgr.reset({imu.state_key: torch.zeros(3, 9)})
    c = imu.read_mount()
    acc, gyro = c["acc_cross_axis_coupling"], c["gyro_cross_axis_coupling"]
    assert torch.equal(acc, acc.transpose(-1, -2)) and len(set(acc[:, 0, 1].tolist())) == 3
    assert acc[:, 0, 1].ne(acc[:, 0, 2]).all()  # xy and xz drawn on their own
    assert gyro[:, 1, 0].eq(0).all() and gyro[:, 0, 1].ne(0).all()  # a matrix entry: only itself


def test_the_drawn_mount_is_in_read_randomization_and_its_names():
    """The mount draws are columns of the manager's randomization (what a critic gets), named per
    component, beside the options' own randomized values; a fixed IMU adds none."""
    u = sg.Uniform(-0.01, 0.01)
    o = sg.IMUOptions(
        body="b", euler_offset=(sg.Uniform(-5.0, 5.0), 0.0, 0.0), acc_cross_axis_coupling=u,
        gyro_noise=sg.Uniform(0.0, 0.1),
    )  # fmt: skip
    mgr = sg.SensorManager(num_envs=3, dt=0.01, seed=0)
    imu = mgr.add_sensor(o, name="imu")
    fixed = mgr.add_sensor(sg.IMUOptions(body="b", pos_offset=(0.1, 0.0, 0.0)), name="fixed")
    mgr.reset({imu.state_key: torch.zeros(3, 9), fixed.state_key: torch.zeros(3, 9)})
    names = mgr.randomization_names()
    table = mgr.read_randomization()
    assert table.shape == (3, len(names))
    # only the drawn components (issue 33 item 9): euler x, and the xy, xz, yz couplings (one draw each)
    mount = ["imu.euler_offset[0]"] + [f"imu.acc_cross_axis_coupling[{c}]" for c in (1, 2, 5)]
    assert names[-4:] == mount and not any(n.startswith("fixed.") for n in names)
    drawn = imu.read_mount()
    assert torch.equal(table[:, -4:-3], drawn["euler_offset"][:, :1])
    assert torch.equal(table[:, -3:], drawn["acc_cross_axis_coupling"].reshape(3, 9)[:, [1, 2, 5]])
    assert set(imu.read_randomization()) >= {"euler_offset", "acc_cross_axis_coupling"}


def test_per_env_generators_draw_the_mount_an_env_would_draw_alone():
    """With ``per_env_rng`` env ``b``'s mount comes from its own generator (seed + b): a batch of 3 draws
    what three single-env managers draw, at the first reset and at a partial one."""
    batch = sg.SensorManager(num_envs=3, dt=0.01, seed=20, per_env_rng=True)
    run(batch, {"imu": MOUNTED}, 2)
    singles = [sg.SensorManager(num_envs=1, dt=0.01, seed=20 + b, per_env_rng=True) for b in range(3)]
    for m in singles:
        run(m, {"imu": MOUNTED}, 2)
    for b, m in enumerate(singles):
        for k, v in draws(batch.sensors[0]).items():
            assert torch.equal(v[b], draws(m.sensors[0])[k][0]), (b, k)
    gen = np.random.default_rng(3)
    batch.reset(synthetic_state(batch, [MOUNTED], gen), envs_idx=[2])
    singles[2].reset(synthetic_state(singles[2], [MOUNTED], gen))
    for k, v in draws(batch.sensors[0]).items():
        assert torch.equal(v[2], draws(singles[2].sensors[0])[k][0]), k


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_through_the_gymnasium_wrapper_on_ant():
    """``make_sensor_vec``: the angular acceleration travels from the sub-envs with the reading, the ground
    truth is the nominal IMU's, and an autoreset draws a new mount for the env that restarts."""
    import gymnasium as gym

    from sensorgym.wrappers import make_sensor_vec

    random_imu = sg.IMUOptions(
        body="aux_1",
        pos_offset=(sg.Uniform(0.0, 0.1), 0.0, 0.0),
        euler_offset=(0.0, sg.Uniform(-10.0, 10.0), 0.0),
        acc_cross_axis_coupling=(sg.Uniform(-0.02, 0.02), 0.0, 0.0),
    )
    nominal_imu = sg.IMUOptions(body="aux_1", pos_offset=(0.05, 0.0, 0.0))
    envs = make_sensor_vec(
        "Ant-v5", 2, {"random": random_imu, "nominal": nominal_imu}, seed=0,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP, env_kwargs={"max_episode_steps": 50},
        critic_randomization=True,
    )  # fmt: skip
    obs, _ = envs.reset(seed=0)
    # the critic's randomization columns hold each env's drawn mount
    names = envs.manager.randomization_names()
    assert "random.euler_offset[1]" in names and "random.pos_offset[0]" in names
    cols = np.asarray(obs["critic"])[:, -len(names) :]  # the randomization: the critic's last columns
    col = names.index("random.euler_offset[1]")
    drawn = envs.sensors["random"].read_mount()["euler_offset"][:, 1].numpy()
    np.testing.assert_allclose(cols[:, col], drawn)
    assert np.all(np.abs(drawn) <= 10.0) and drawn[0] != drawn[1]
    random, nominal = envs.sensors["random"], envs.sensors["nominal"]
    first = draws(random)
    rng = np.random.default_rng(0)
    restarted = np.zeros(2, bool)
    for _ in range(80):
        _, _, terminated, truncated, _ = envs.step(rng.uniform(-1, 1, envs.action_space.shape))
        restarted |= terminated | truncated
        for ours, gt in zip(random.read_ground_truth(), nominal.read_ground_truth(), strict=True):
            assert torch.equal(ours, gt)
        diff = (random.read().lin_acc - nominal.read().lin_acc).abs().max()
        assert diff > 1e-4  # the drawn mounts are not the nominal one
    assert restarted.all()  # the time limit ended both episodes
    now = draws(random)
    for b in range(2):
        same = all(torch.equal(now[k][b], first[k][b]) for k in now)
        assert same != bool(restarted[b]), (b, restarted)
    envs.close()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_a_captured_graph_step_equals_the_eager_step():
    """The per-env draws at autoresets and the per-step mount run inside a CUDA graph (no host sync): the
    captured step gives the eager step's bits, and the ground truth stays the nominal IMU's."""
    sensors = {"imu": MOUNTED, "plain": NOMINAL}
    managers = []
    for _ in range(2):
        mgr = sg.SensorManager(num_envs=16, dt=0.01, seed=5, device="cuda")
        for name, o in sensors.items():
            mgr.add_sensor(o, name=name)
        managers.append(mgr)
    gen = np.random.default_rng(0)

    def state() -> dict[str, torch.Tensor]:
        return {
            k: torch.from_numpy(v).cuda()
            for k, v in synthetic_state(managers[0], list(sensors.values()), gen).items()
        }

    first = state()
    for mgr in managers:
        mgr.reset(first)
    captured = managers[1].capture_cuda_graph(first)
    masks = torch.Generator().manual_seed(1)
    for t in range(30):
        s, mask = state(), (torch.rand(16, generator=masks) < 0.2).cuda()
        managers[0].step(s, reset_mask=mask)
        captured(s, reset_mask=mask)
        reads = []
        for mgr in managers:
            imu, plain = mgr.sensors  # plain: a fixed IMU in the same class
            reads.append([*imu.read(), *imu.read_ground_truth(), *draws(imu).values(), *plain.read()])
            nominal = s[state_key(MOUNTED)].view(16, 3, 3)  # its nominal mount and coupling: the raw value
            assert torch.equal(torch.stack(list(imu.read_ground_truth()), 1), nominal)
        for a, b in zip(*reads, strict=True):
            assert torch.equal(a, b), t


def test_critic_columns_are_only_the_drawn_components_of_the_mount():
    """Issue 33 item 9: a partly randomized mount listed its fixed components too (constant critic
    columns). Every randomization column now varies over the envs, and each is named by its component."""
    mgr = sg.SensorManager(num_envs=64, dt=0.01, seed=1)
    mgr.add_sensor(MOUNTED, name="imu")
    mgr.add_sensor(RANDOM, name="random")
    gen = np.random.default_rng(0)
    mgr.reset(synthetic_state(mgr, [MOUNTED, RANDOM], gen))
    names, values = mgr.randomization_names(), mgr.read_randomization()
    mount = [n for n in names if "offset" in n or "coupling" in n]
    assert mount == [
        "imu.pos_offset[0]", "imu.pos_offset[1]", "imu.pos_offset[2]",
        "imu.euler_offset[0]", "imu.euler_offset[2]",  # euler y is fixed at 0
        "imu.mag_cross_axis_coupling[1]", "imu.mag_cross_axis_coupling[2]", "imu.mag_cross_axis_coupling[5]",
        "random.pos_offset[0]", "random.pos_offset[1]",  # z is fixed at 0.23
        "random.euler_offset[0]", "random.euler_offset[1]", "random.euler_offset[2]",
        "random.acc_cross_axis_coupling[1]", "random.acc_cross_axis_coupling[2]",
        "random.acc_cross_axis_coupling[5]",
        "random.gyro_cross_axis_coupling[2]",  # (0.01, Normal, 0.0): only xz is drawn
    ]  # fmt: skip
    assert values.shape == (64, len(names))
    constant = [n for n, s in zip(names, values.std(dim=0), strict=True) if s == 0]
    assert not constant, constant
    imu = mgr.sensors[0]
    full = imu.read_mount()  # the public read keeps whole vectors and matrices
    assert full["euler_offset"].shape == (64, 3) and full["mag_cross_axis_coupling"].shape == (64, 3, 3)
    picked = imu.read_randomization()["mag_cross_axis_coupling"]
    assert torch.equal(picked, full["mag_cross_axis_coupling"].reshape(64, 9)[:, [1, 2, 5]])
