"""The IMU's per-field error-model options (``acc_noise_density``, ``gyro_bandwidth``, ``mag_scale_factor``,
...): each merges into the 9-component option of the same name exactly as ``acc_noise`` merges into
``noise``, and the checks that tie two options of one field name the options as the user wrote them."""

from __future__ import annotations

import re

import pytest
import torch

import sensorgym as sg
from sensorgym.sensors.mujoco.imu import FIELDS, IMPERFECTIONS

MODEL_KINDS = (
    "noise_density", "random_walk_density", "bias_instability", "bias_correlation_time", "scale_factor",
    "bandwidth",
)  # fmt: skip


def test_every_component_option_has_a_per_field_twin():
    assert set(MODEL_KINDS) <= set(IMPERFECTIONS)
    names = {f.name for f in sg.IMUOptions.__dataclass_fields__.values()}
    for kind in IMPERFECTIONS:
        assert kind in names
        for f in FIELDS:
            assert f"{f}_{kind}" in names


@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("field", range(3))
def test_a_per_field_value_fills_its_three_components_only(kind, field):
    f = FIELDS[field]
    extra = {"bias_instability": {f"{f}_bias_correlation_time": 50.0}}.get(kind, {})
    o = sg.IMUOptions(body="b", **{f"{f}_{kind}": 0.25}, **extra)
    expect = [0.0] * 9
    expect[3 * field : 3 * field + 3] = [0.25] * 3
    assert list(getattr(o, kind)) == expect


def test_per_field_values_merge_over_the_nine_component_option():
    o = sg.IMUOptions(
        body="b",
        bandwidth=80.0,  # all 9 ...
        gyro_bandwidth=(40.0, 41.0, 42.0),  # ... but the gyro's own
        mag_bandwidth=sg.Uniform(5.0, 6.0),
        scale_factor=[0.01] * 9,
        acc_scale_factor=[-0.02, 0.0, 0.02],
        gyro_noise_density=1.6968e-4,
        acc_random_walk_density=3.0e-3,
        acc_bias_instability=[0.0, 0.0, 0.05],
        acc_bias_correlation_time=[0.0, 0.0, 100.0],
    )
    u = sg.Uniform(5.0, 6.0)
    assert o.bandwidth == (80.0, 80.0, 80.0, 40.0, 41.0, 42.0, u, u, u)
    assert o.scale_factor == (-0.02, 0.0, 0.02) + (0.01,) * 6
    assert o.noise_density == (0.0,) * 3 + (1.6968e-4,) * 3 + (0.0,) * 3
    assert o.random_walk_density == (3.0e-3,) * 3 + (0.0,) * 6
    assert o.bias_instability == (0.0, 0.0, 0.05) + (0.0,) * 6
    assert o.bias_correlation_time == (0.0, 0.0, 100.0) + (0.0,) * 6


def test_per_field_values_reach_the_per_env_tables():
    o = sg.IMUOptions(body="b", gyro_noise_density=2e-4, acc_scale_factor=sg.Uniform(0.01, 0.02))
    mgr = sg.SensorManager(num_envs=4, dt=0.02, seed=0)
    imu = mgr.add_sensor(o, name="imu")
    mgr.reset({imu.state_key: torch.zeros(4, 9)})
    values = mgr.metadata(sg.IMUSensor).params.components.values
    assert values["noise_density"][:, 3:6].eq(torch.tensor(2e-4, dtype=values["noise_density"].dtype)).all()
    assert values["noise_density"][:, :3].eq(0).all() and values["noise_density"][:, 6:].eq(0).all()
    k = values["scale_factor"][:, :3]
    assert bool(((k >= 0.01) & (k < 0.02)).all()) and len(set(k.flatten().tolist())) == 12  # per env, axis
    assert values["scale_factor"][:, 3:].eq(0).all()
    assert mgr.randomization_names() == [f"imu.scale_factor[{c}]" for c in range(3)]


def test_default_per_field_options_change_nothing():
    plain = sg.IMUOptions(body="b", noise=0.1)
    assert sg.IMUOptions(body="b", noise=0.1, gyro_noise_density=None, acc_bandwidth=None) == plain
    assert plain.noise == 0.1 and plain.noise_density == 0.0  # not merged into 9 values when none is given


def fails(match: str, **kwargs) -> str:
    with pytest.raises(ValueError) as info:
        sg.IMUOptions(body="b", **kwargs)
    message = str(info.value)
    assert re.search(match, message), message
    assert "Fix: " in message
    return message


def test_noise_and_noise_density_of_one_field_are_exclusive_and_named_per_field():
    m = fails(r"^IMUOptions\.gyro_noise_density=0\.0001 is invalid: gyro_noise=0\.01 and gyro_noise_density "
              r"are both non-zero on gyro axis x \(component 3 of 9\)",
              gyro_noise=0.01, gyro_noise_density=1e-4)  # fmt: skip
    assert "give one of gyro_noise (per step) or gyro_noise_density (per sqrt(Hz))" in m
    # one side given for all 9 components: named as written
    fails(r"IMUOptions\.gyro_noise_density=0\.0001 .*: noise=0\.02 and gyro_noise_density .* gyro axis x",
          noise=0.02, gyro_noise_density=1e-4)  # fmt: skip
    fails(r"IMUOptions\.noise_density=0\.0001 .*: acc_noise=\(0\.0, 0\.1, 0\.0\) and noise_density .* acc "
          r"axis y \(component 1 of 9\)",
          acc_noise=[0.0, 0.1, 0.0], noise_density=1e-4)  # fmt: skip
    # a distribution that can be non-zero conflicts too; one that is always zero does not
    fails(r"IMUOptions\.mag_noise_density=Uniform", mag_noise=0.1, mag_noise_density=sg.Uniform(0.0, 1e-4))
    sg.IMUOptions(body="b", mag_noise=0.1, mag_noise_density=sg.Uniform(0.0, 0.0))
    # different fields, or different axes of one field, do not conflict
    sg.IMUOptions(body="b", acc_noise=0.1, gyro_noise_density=1e-4)
    sg.IMUOptions(body="b", gyro_noise=(0.1, 0.0, 0.0), gyro_noise_density=(0.0, 1e-4, 1e-4))


def test_random_walk_and_its_density_are_exclusive_per_field():
    fails(r"^IMUOptions\.acc_random_walk_density=0\.003 is invalid: acc_random_walk=0\.001 and "
          r"acc_random_walk_density are both non-zero on acc axis x",
          acc_random_walk=1e-3, acc_random_walk_density=3e-3)  # fmt: skip
    fails(r"IMUOptions\.gyro_random_walk_density=\(0\.0, 0\.0, 2e-05\) .*random_walk=0\.001 and "
          r"gyro_random_walk_density .* gyro axis z \(component 5 of 9\)",
          random_walk=1e-3, gyro_random_walk_density=[0.0, 0.0, 2e-5])  # fmt: skip


def test_a_per_field_bias_instability_needs_its_correlation_time():
    fails(r"^IMUOptions\.gyro_bias_instability=0\.1 is invalid: .* correlation time > 0 on gyro axis x .* "
          r"bias_correlation_time=0\.0 .*Fix: give gyro_bias_correlation_time in seconds",
          gyro_bias_instability=0.1)  # fmt: skip
    fails(r"gyro axis y \(component 4 of 9\), and gyro_bias_correlation_time=\(1\.0, 0\.0, 1\.0\)",
          gyro_bias_instability=0.1, gyro_bias_correlation_time=[1.0, 0.0, 1.0])  # fmt: skip
    o = sg.IMUOptions(body="b", gyro_bias_instability=0.1, gyro_bias_correlation_time=100.0)
    assert o.bias_correlation_time[3:6] == (100.0,) * 3
    # a 9-component bias instability with a per-field correlation time names the field left without one
    fails(r"^IMUOptions\.bias_instability=0\.1 is invalid: .* on acc axis x \(component 0 of 9\), and "
          r"bias_correlation_time=0\.0 gives none there\. Fix: give acc_bias_correlation_time",
          bias_instability=0.1, gyro_bias_correlation_time=5.0)  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mag_bandwidth": -1.0}, r"^IMUOptions\.mag_bandwidth=-1\.0 is invalid: it can be -1 but bandwidth"),
        ({"acc_noise_density": sg.Uniform(-1.0, 1.0)}, r"^IMUOptions\.acc_noise_density=Uniform.*can be -1"),
        ({"gyro_scale_factor": -1.0}, r"^IMUOptions\.gyro_scale_factor=-1\.0 is invalid: .*k > -1"),
        ({"acc_scale_factor": [0.0, -2.0, 0.0]}, r"^IMUOptions\.acc_scale_factor=\(0\.0, -2\.0, 0\.0\)"),
        ({"gyro_bias_correlation_time": float("nan")}, r"^IMUOptions\.gyro_bias_correlation_time=nan .*"),
        ({"gyro_bandwidth": [1.0, 2.0]}, r"^IMUOptions\.gyro_bandwidth=\(1\.0, 2\.0\) .*3 values"),
    ],
)
def test_bad_per_field_values_are_named(kwargs, match):
    fails(match, **kwargs)


def test_a_per_field_value_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match=r"^IMUOptions\.gyro_noise_density='x' is invalid: .*Fix: "):
        sg.IMUOptions(body="b", gyro_noise_density="x")
