"""TemperatureGridSensor: the thermal model against closed-form solutions (exponential relaxation, steady
states, discrete diffusion modes, heat conservation), resets, the RC lag and the fluctuation through it,
and the contact-to-cell mapping on real MuJoCo models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.sensors.mujoco.base import state_key
from sensorgym.sensors.mujoco.temperature import (
    TemperatureGridOptions,
    TemperatureGridSensor,
    body_box,
    extent_key,
)

mujoco = pytest.importorskip("mujoco")

DT = 0.1


def _opts(**kw) -> TemperatureGridOptions:
    base = dict(
        body="plate",
        grid_size=(3, 2, 1),
        extent=(0.03, 0.02, 0.01),
        diffusivity=0.0,
        heat_transfer=0.0,
        contact_heat=0.0,
    )
    base.update(kw)
    return TemperatureGridOptions(**base)


def _manager(*options, num_envs=1, seed=0, dt=DT):
    mgr = sg.SensorManager(num_envs=num_envs, dt=dt, seed=seed)
    sensors = [mgr.add_sensor(o, name=f"t{i}") for i, o in enumerate(options)]
    return mgr, sensors


def _press(num_envs, *pairs):
    """State with the per-cell force of every sensor: ``(options, forces broadcast to (B, G))`` pairs."""
    return {
        state_key(o): np.broadcast_to(np.asarray(f, np.float32), (num_envs, o.num_cells)).copy()
        for o, f in pairs
    }


def _gt(sensor) -> np.ndarray:
    return sensor.read_ground_truth().numpy().copy()


def _measured(sensor) -> np.ndarray:
    return sensor.read().numpy().copy()


# -- options -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("grid_size", (4, 0, 1)),
        ("grid_size", (4, 4)),
        ("grid_size", (4.0, 4, 1)),
        ("extent", (0.1, -0.1, 0.1)),
        ("extent", (0.1, 0.1)),
        ("diffusivity", -1e-4),
        ("heat_transfer", float("nan")),
        ("contact_heat", -0.1),
        ("fluctuation", -0.1),
        ("time_constant", sg.Uniform(0.1, 0.2)),
        ("contact_temperature", float("inf")),
        ("base_temperature", "20"),
        ("source_bodies", "heater"),
    ],
)
def test_invalid_options_name_the_option_the_value_and_the_fix(field, value):
    with pytest.raises(ValueError, match=rf"TemperatureGridOptions\.{field}=.* is invalid: .*Fix: "):
        TemperatureGridOptions(body="plate", **{field: value})


def test_body_must_be_a_name_and_the_shape_comes_from_the_options_alone():
    with pytest.raises(TypeError, match=r"TemperatureGridOptions\.body=.*Fix: pass body="):
        TemperatureGridOptions(body="")
    o = TemperatureGridOptions(body="plate", grid_size=[5, 3, 2], extent=[0.1, 0.1, 0.1])
    assert o.grid_size == (5, 3, 2) and o.extent == (0.1, 0.1, 0.1)
    mgr, (s,) = _manager(o, num_envs=2)
    mgr.build()  # no state: the layout needs only the options
    assert s.fields == ((5, 3, 2),)
    mgr.reset(_press(2, (o, 0.0)))
    assert s.read().shape == (2, 5, 3, 2) and s.read().dtype == torch.float32
    assert torch.equal(s.read(), torch.full((2, 5, 3, 2), 20.0))


def test_a_missing_measurement_or_body_size_is_a_helpful_error():
    o = _opts(extent=None, diffusivity=1e-4)
    mgr, _ = _manager(o)
    with pytest.raises(ValueError, match="has no measurement in the state"):
        mgr.reset({})
    with pytest.raises(ValueError, match=r"no body size in the state.*extent=\(x, y, z\)"):
        mgr.reset(_press(1, (o, 0.0)))
    # without diffusion the size of the cells does not matter: no size needed
    mgr, _ = _manager(_opts(extent=None))
    mgr.reset(_press(1, (_opts(extent=None), 0.0)))
    # sub-envs with bodies of different sizes cannot share one grid geometry
    mgr, _ = _manager(o, num_envs=2)
    state = {**_press(2, (o, 0.0)), extent_key(o): np.array([[0.1, 0.1, 0.1], [0.2, 0.1, 0.1]])}
    mgr.reset(state)
    with pytest.raises(ValueError, match="different sizes of body 'plate'"):
        mgr.step(state)


def test_a_diffusivity_needing_very_many_substeps_warns():
    o = _opts(grid_size=(2, 1, 1), extent=(0.01, 0.01, 0.01), diffusivity=0.1)
    mgr, (s,) = _manager(o)
    mgr.reset(_press(1, (o, [[100.0, 0.0]])))
    with pytest.warns(UserWarning, match=r"needs 223 explicit substeps .* Fix: fewer cells"):
        mgr.step(_press(1, (o, [[100.0, 0.0]])))
    assert np.ptp(_gt(s)) < 1e-4  # two cells of 1 cm mix within the step


# -- the thermal model against closed forms ----------------------------------------------------------------


def test_uniform_heating_follows_the_exact_exponential_to_the_analytic_steady_state():
    # heat source + air exchange: dT/dt = c F - k (T - Ta) -> T_ss = Ta + c F / k, rate k
    k, c, ta, t0 = 0.2, 0.5, 15.0, 20.0
    o = _opts(grid_size=(3, 2, 2), diffusivity=1e-3, heat_transfer=k, contact_heat=c, ambient_temperature=ta)
    mgr, (s,) = _manager(o, num_envs=2)
    force = np.array([[4.0], [1.0]])  # per env, on every cell
    state = _press(2, (o, force))
    mgr.reset(state)
    t_ss = ta + c * force / k  # 25.0 and 17.5
    for n in range(1, 501):
        mgr.step(state)
        expected = t_ss + (t0 - t_ss) * math.exp(-k * n * DT)
        # float32 field: a few ulp of rounding per step, contracted by the relaxation
        np.testing.assert_allclose(
            _gt(s).reshape(2, -1), np.broadcast_to(expected, (2, 12)), rtol=0, atol=1e-4
        )
    np.testing.assert_allclose(_gt(s).reshape(2, -1), np.broadcast_to(t_ss, (2, 12)), rtol=0, atol=1e-3)


def test_without_input_the_field_relaxes_to_ambient_as_exp_minus_k_t():
    k = 0.3
    o = _opts(heat_transfer=k, base_temperature=60.0, ambient_temperature=20.0, diffusivity=5e-4)
    mgr, (s,) = _manager(o)
    state = _press(1, (o, 0.0))
    mgr.reset(state)
    for n in range(1, 101):
        mgr.step(state)
        np.testing.assert_allclose(_gt(s), 20.0 + 40.0 * math.exp(-k * n * DT), rtol=1e-6)
    # a coarser control step gives the same curve: the exchange is integrated exactly
    mgr, (s2,) = _manager(o, dt=1.0)
    mgr.reset(state)
    mgr.step(state)
    assert _gt(s2)[0, 0, 0, 0] == pytest.approx(20.0 + 40.0 * math.exp(-k), rel=1e-6)


def test_a_contact_temperature_pulls_the_pressed_cells_towards_it():
    # conductance g F towards Tc plus air exchange k: rate k + g F, steady state (k Ta + g F Tc) / (k + g F)
    k, g, tc, f = 0.1, 0.01, 80.0, 50.0
    o = _opts(
        grid_size=(2, 1, 1),
        heat_transfer=k,
        contact_heat=g,
        contact_temperature=tc,
        base_temperature=30.0,
        ambient_temperature=20.0,
    )
    mgr, (s,) = _manager(o)
    state = _press(1, (o, [[f, 0.0]]))
    mgr.reset(state)
    rate = k + g * f
    t_ss = (k * 20.0 + g * f * tc) / rate  # 70 °C
    for n in range(1, 81):
        mgr.step(state)
        hot, cold = _gt(s)[0, :, 0, 0]
        assert hot == pytest.approx(t_ss + (30.0 - t_ss) * math.exp(-rate * n * DT), abs=2e-5)
        assert cold == pytest.approx(20.0 + 10.0 * math.exp(-k * n * DT), abs=2e-5)


@pytest.mark.parametrize("diffusivity", [4e-4, 4e-3])  # 1 and 3 explicit substeps per control step
def test_a_cosine_mode_decays_at_the_rate_of_the_discrete_laplacian(diffusivity):
    # 1-D grid of 8 cells of 2 cm with insulated ends: cos(pi (i + 1/2) / 8) is an eigenmode, eigenvalue
    # -(4 / dx^2) sin^2(pi / 16); each substep of h multiplies it by 1 - 4 r sin^2(pi / 16), r = D h / dx^2
    n, dx = 8, 0.02
    o = _opts(grid_size=(n, 1, 1), extent=(n * dx / 2, 0.01, 0.01), diffusivity=diffusivity, contact_heat=1.0)
    mgr, (s,) = _manager(o)
    mode = np.cos(np.pi * (np.arange(n) + 0.5) / n)
    mgr.reset(_press(1, (o, 0.0)))
    mgr.step(_press(1, (o, 10.0 * (1.0 + mode))))  # one step of heating shaped like the mode
    idle = _press(1, (o, 0.0))
    n_sub = math.ceil(DT * diffusivity * 2 / dx**2 / 0.9)
    assert n_sub == (1 if diffusivity < 1e-3 else 3)
    r = diffusivity * DT / n_sub / dx**2
    per_step = (1 - 4 * r * math.sin(math.pi / (2 * n)) ** 2) ** n_sub
    continuous = math.exp(-diffusivity * (math.pi / (n * dx)) ** 2 * DT)
    assert per_step == pytest.approx(continuous, rel=3e-3)  # the grid resolves the mode
    mean = 20.0 + 1.0 * 10.0 * DT  # c F dt on average: the mode's mean is zero
    prev = _gt(s)[0, :, 0, 0] - mean
    assert abs(prev[0]) > 0.5
    for _ in range(20):
        mgr.step(idle)
        cur = _gt(s)[0, :, 0, 0] - mean
        np.testing.assert_allclose(cur, per_step * prev, rtol=0, atol=3e-5)
        np.testing.assert_allclose(cur / cur[0], mode / mode[0], atol=1e-4)  # the shape is kept
        prev = cur


def test_diffusion_alone_conserves_heat_and_spreads_it_without_overshoot():
    # a large diffusivity needs many substeps; an unstable explicit scheme would blow up here
    o = _opts(grid_size=(6, 4, 2), extent=(0.06, 0.04, 0.02), diffusivity=2e-2, contact_heat=1.0)
    mgr, (s,) = _manager(o, num_envs=2)
    mgr.reset(_press(2, (o, 0.0)))
    impulse = np.zeros((2, o.num_cells), np.float32)
    impulse[0, 0] = 100.0  # env 0: 10 °C into the corner cell (0, 0, 0) during one step
    impulse[1, -1] = 200.0  # env 1: 20 °C into the opposite corner
    mgr.step(_press(2, (o, impulse)))
    field = _gt(s).reshape(2, -1)
    mean0 = 20.0 + np.array([10.0, 20.0]) / o.num_cells
    np.testing.assert_allclose(field.mean(1), mean0, rtol=0, atol=1e-5)
    assert field[0, 0] > field[0, -1]  # still spreading
    idle = _press(2, (o, 0.0))
    peak = field.max(1)
    for _ in range(100):
        mgr.step(idle)
        field = _gt(s).reshape(2, -1)
        np.testing.assert_allclose(field.mean(1), mean0, rtol=0, atol=1e-5)
        assert (field.min(1) >= 20.0 - 1e-5).all() and (field.max(1) <= peak + 1e-5).all()
        peak = field.max(1)
    np.testing.assert_allclose(field, np.broadcast_to(mean0[:, None], field.shape), atol=1e-4)


def test_several_grids_in_one_class_evolve_as_they_would_alone():
    a = _opts(
        grid_size=(4, 3, 1),
        extent=(0.04, 0.03, 0.01),
        diffusivity=1e-3,
        heat_transfer=0.1,
        contact_heat=0.2,
        time_constant=0.3,
    )
    b = _opts(
        grid_size=(2, 2, 5),
        extent=(0.02, 0.02, 0.05),
        diffusivity=4e-3,
        contact_heat=0.05,
        contact_temperature=60.0,
        base_temperature=25.0,
    )
    rng = np.random.default_rng(0)
    forces = [rng.uniform(0, 20, (30, 3, o.num_cells)).astype(np.float32) for o in (a, b)]
    together, (ta, tb) = _manager(a, b, num_envs=3)
    alone_a, (sa,) = _manager(a, num_envs=3)
    alone_b, (sb,) = _manager(b, num_envs=3)
    for t in range(30):
        both = _press(3, (a, forces[0][t]), (b, forces[1][t]))
        call = (lambda m, st: m.reset(st)) if t == 0 else (lambda m, st: m.step(st))
        call(together, both)
        call(alone_a, {state_key(a): both[state_key(a)]})
        call(alone_b, {state_key(b): both[state_key(b)]})
        for x, y in ((ta, sa), (tb, sb)):
            # equal up to the last bit of float32 (vectorized and scalar tails of a kernel may round
            # differently depending on where a column sits)
            np.testing.assert_allclose(_gt(x), _gt(y), rtol=3e-7, atol=0)
            np.testing.assert_allclose(_measured(x), _measured(y), rtol=3e-7, atol=0)
    assert _gt(tb).max() > 26.0 and _measured(ta).max() > 20.5


# -- resets --------------------------------------------------------------------------------------------------


def test_a_partial_reset_restores_the_base_temperature_of_the_reset_envs_only():
    o = _opts(diffusivity=1e-3, heat_transfer=0.05, contact_heat=0.5, base_temperature=21.0)
    mgr, (s,) = _manager(o, num_envs=3)
    twin, (t,) = _manager(o, num_envs=3)  # the same envs, never reset
    rng = np.random.default_rng(1)
    hot = _press(3, (o, rng.uniform(0, 10, (3, o.num_cells))))
    for m in (mgr, twin):
        m.reset(hot)
        for _ in range(5):
            m.step(hot)
    before = _gt(s)
    assert (before > 21.5).all()
    mgr.reset(hot, envs_idx=[1])  # a reset capture: env 1 restarts, time does not pass for 0 and 2
    after = _gt(s)
    assert (after[1] == 21.0).all() and (_measured(s)[1] == 21.0).all()
    np.testing.assert_array_equal(after[[0, 2]], before[[0, 2]])
    mgr.step(hot)
    twin.step(hot)
    np.testing.assert_array_equal(_gt(s)[[0, 2]], _gt(t)[[0, 2]])
    assert (_gt(s)[1] < _gt(t)[1]).all()
    # an autoreset inside a step (NEXT_STEP): env 2 starts over, the others advance
    mgr.step(hot, reset_mask=np.array([False, False, True]))
    twin.step(hot)
    assert (_gt(s)[2] == 21.0).all()
    np.testing.assert_array_equal(_gt(s)[0], _gt(t)[0])


def test_state_dict_round_trip_continues_identically():
    o = _opts(diffusivity=1e-3, heat_transfer=0.05, contact_heat=0.5, fluctuation=0.1, time_constant=0.3)
    mgr, (s,) = _manager(o, num_envs=2)
    state = _press(2, (o, 3.0))
    mgr.reset(state)
    for _ in range(4):
        mgr.step(state)
    saved = mgr.state_dict()
    assert "md.extra.field" in saved["classes"]["TemperatureGridSensor"]["tensors"]
    runs = []
    for _ in range(2):
        mgr.load_state_dict(saved)
        out = []
        for _ in range(3):
            mgr.step(state)
            out.append((_gt(s), _measured(s)))
        runs.append(out)
    for (g1, m1), (g2, m2) in zip(*runs, strict=True):
        np.testing.assert_array_equal(g1, g2)
        np.testing.assert_array_equal(m1, m2)


# -- the thermometer: lag and fluctuation --------------------------------------------------------------------


@pytest.mark.parametrize(("tau", "gain"), [(0.4, 0.25), (0.05, 1.0), (0.0, 1.0)])
def test_the_thermal_lag_is_a_first_order_rc_filter_on_the_measured_reading(tau, gain):
    o = _opts(contact_heat=1.0, time_constant=tau)
    mgr, (s,) = _manager(o)
    idle = _press(1, (o, 0.0))
    mgr.reset(idle)
    for _ in range(3):
        mgr.step(idle)
        assert (_measured(s) == 20.0).all()  # steady state from the reset on: no transient
    mgr.step(_press(1, (o, 100.0)))  # 100 N for one step: the field steps up by 10 °C and stays
    for k in range(1, 15):
        if k > 1:
            mgr.step(idle)
        assert _gt(s) == pytest.approx(np.full((1, 3, 2, 1), 30.0))  # the ground truth jumps at once
        expected = 20.0 + 10.0 * (1.0 - (1.0 - gain) ** k)
        np.testing.assert_allclose(_measured(s), expected, rtol=0, atol=2e-5)


def test_the_fluctuation_goes_through_the_lag():
    sigma, b, steps = 0.5, 16, 120

    def residuals(tau):
        o = _opts(grid_size=(8, 8, 1), extent=(0.08, 0.08, 0.01), fluctuation=sigma, time_constant=tau)
        mgr, (s,) = _manager(o, num_envs=b, seed=3)
        idle = _press(b, (o, 0.0))
        mgr.reset(idle)
        out = []
        for t in range(steps):
            mgr.step(idle)
            assert (_gt(s) == 20.0).all()  # the ground truth has no fluctuation
            if t >= 20:  # after the start-up from one raw sample
                out.append(_measured(s).reshape(b, -1) - 20.0)
        return np.stack(out)  # (time, env, cell)

    raw = residuals(0.0)
    assert raw.std() == pytest.approx(sigma, rel=0.02) and abs(raw.mean()) < 0.01
    lagged = residuals(0.4)
    a = DT / 0.4
    # stationary AR(1) y' = (1 - a) y + a n: std sigma sqrt(a / (2 - a)), lag-1 correlation 1 - a
    assert lagged.std() == pytest.approx(sigma * math.sqrt(a / (2 - a)), rel=0.03)
    corr = (lagged[1:] * lagged[:-1]).mean() / lagged.var()
    assert corr == pytest.approx(1 - a, abs=0.03)
    assert abs((raw[1:] * raw[:-1]).mean() / raw.var()) < 0.03


# -- measuring on MuJoCo -------------------------------------------------------------------------------------

PLATE_XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <body name="plate" pos="0.3 0 0.1" euler="0 0 90">
      <geom name="plate" type="box" size="0.2 0.1 0.01"/>
      <geom name="tag" type="sphere" size="0.5" pos="0 0 0.5" contype="0" conaffinity="0"/>
    </body>
    <body name="heater" pos="0.3 -0.1 0.15">
      <freejoint/>
      <geom name="heater" type="box" size="0.04 0.04 0.03" mass="2"/>
    </body>
  </worldbody>
</mujoco>
"""


class _Sim:
    def __init__(self, xml):
        self.unwrapped = self
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)


def _settled(xml=PLATE_XML, steps=300):
    sim = _Sim(xml)
    for _ in range(steps):
        mujoco.mj_step(sim.model, sim.data)
    mujoco.mj_forward(sim.model, sim.data)
    mujoco.mj_rnePostConstraint(sim.model, sim.data)
    return sim


def test_contacts_heat_the_cells_under_them_in_the_body_frame():
    # the plate is turned 90° about z: the heater, at world (0.3, -0.1), sits at (-0.1, 0) in the plate
    # frame, over cells x 1..2, y 1..2 of an 8 x 4 grid of 5 cm cells; its weight is 2 kg * 9.81
    sim = _settled()
    o = TemperatureGridOptions(body="plate", grid_size=(8, 4, 1))
    out = TemperatureGridSensor._extract_state(sim, [o])
    heat = out[state_key(o)].reshape(8, 4)
    # the visual sphere is left out of the box: the plate's half sizes
    np.testing.assert_allclose(out[extent_key(o)], [0.2, 0.1, 0.01], rtol=1e-6)
    assert out[state_key(o)].dtype == np.float32
    assert set(zip(*np.nonzero(heat), strict=True)) == {(1, 1), (1, 2), (2, 1), (2, 2)}
    assert heat.sum() == pytest.approx(2.0 * 9.81, rel=1e-3)
    # an explicit extent centred on the body: contacts outside the box fall into the border cells
    o2 = TemperatureGridOptions(body="plate", grid_size=(2, 1, 1), extent=(0.05, 0.2, 0.01))
    heat2 = TemperatureGridSensor._extract_state(sim, [o2])[state_key(o2)]
    assert extent_key(o2) not in TemperatureGridSensor._extract_state(sim, [o2])
    assert heat2[0] == pytest.approx(2.0 * 9.81, rel=1e-3) and heat2[1] == 0.0
    # only contacts with the source bodies heat
    for sources, heated in ((("heater",), True), (("world",), False)):
        o4 = TemperatureGridOptions(body="plate", grid_size=(8, 4, 1), source_bodies=sources)
        total = TemperatureGridSensor._extract_state(sim, [o4])[state_key(o4)].sum()
        assert total == (pytest.approx(2.0 * 9.81, rel=1e-3) if heated else 0.0)
    with pytest.raises(ValueError, match=r"source_bodies='lamp': no such name"):
        bad = TemperatureGridOptions(body="plate", source_bodies=["lamp"])
        TemperatureGridSensor._extract_state(sim, [bad])
    # nothing touching: no heat
    o3 = TemperatureGridOptions(body="heater", grid_size=(1, 1, 1))
    lifted = _Sim(PLATE_XML)
    mujoco.mj_forward(lifted.model, lifted.data)
    assert TemperatureGridSensor._extract_state(lifted, [o3])[state_key(o3)].tolist() == [0.0]


def test_body_box_takes_rotated_geoms_into_account():
    xml = """
    <mujoco><worldbody><body name="b">
      <geom type="box" size="0.3 0.1 0.05" pos="0.1 0 0" euler="0 0 90"/>
      <geom type="sphere" size="0.05" pos="0 0.5 0"/>
    </body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    centre, half = body_box(model, 1)
    # the box turned 90°: x in [0, 0.2], y in [-0.3, 0.3]; the sphere: x from -0.05, y up to 0.55
    np.testing.assert_allclose(centre, [0.075, 0.125, 0.0], atol=1e-9)
    np.testing.assert_allclose(half, [0.125, 0.425, 0.05], atol=1e-9)
    with pytest.raises(ValueError, match="no such name"):
        TemperatureGridSensor._extract_state(_Sim(xml), [TemperatureGridOptions(body="nope")])


def test_a_pressed_plate_warms_under_the_heater_first():
    from sensorgym.envs.thermal import register, thermal_sensors
    from sensorgym.wrappers import make_sensor_vec

    register()
    sensors = thermal_sensors()
    envs = make_sensor_vec("sensorgym/Thermal-v0", 2, sensors, seed=0)
    envs.reset(seed=0)
    plate = envs.sensors["plate_temperature"]
    press = np.array([[-1.0], [1.0]], np.float32)  # env 0 presses (~34 N), env 1 stays clear
    for _ in range(40):
        envs.step(press)
    gt = plate.read_ground_truth().numpy()[..., 0]  # (2, 8, 4)
    under, far = gt[0, 1:3, 1:3], gt[0, 6:, :]
    assert under.min() > 30.0 and far.max() < 20.5
    assert (np.diff(gt[0].mean(1)[2:]) < 0).all()  # colder with distance from the heater
    np.testing.assert_allclose(gt[1], 20.0)  # nothing touches env 1's plate: it stays at ambient
    measured = plate.read().numpy()[..., 0]
    assert np.abs(measured[1] - 20.0).max() < 0.5  # noise, fluctuation and resolution only
    envs.close()


def test_state_dict_loads_into_a_built_manager_before_any_reset():
    o = _opts(diffusivity=1e-4, heat_transfer=0.1, contact_heat=0.5, fluctuation=0.01, time_constant=0.3)
    mgr, (s,) = _manager(o, num_envs=2)
    mgr.reset(_press(2, (o, 0.0)))
    for _ in range(5):
        mgr.step(_press(2, (o, [1.0, 0, 0, 0, 0, 2.0])))
    saved = mgr.state_dict()
    expected = []
    for _ in range(5):
        mgr.step(_press(2, (o, [1.0, 0, 0, 0, 0, 2.0])))
        expected.append(_measured(s))
    fresh, (t,) = _manager(o, num_envs=2, seed=123)
    fresh.build(_press(2, (o, 0.0)))  # built, never reset: the field must exist already
    fresh.load_state_dict(saved)
    for want in expected:
        fresh.step(_press(2, (o, [1.0, 0, 0, 0, 0, 2.0])))
        np.testing.assert_array_equal(_measured(t), want)
