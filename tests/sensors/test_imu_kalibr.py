"""``IMUOptions.from_kalibr`` / ``to_kalibr`` on EuRoC's real ADIS16448 file: the keys it maps, the exact
round trip, and every refusal (unknown, missing or bad keys, contradicting keywords, what Kalibr cannot
hold)."""

from __future__ import annotations

import math
import sys

import pytest
import torch
import yaml

import sensorgym as sg

# EuRoC MAV dataset, imu.yaml in Kalibr's format (ADIS16448), as distributed
EUROC = """\
#Accelerometers
accelerometer_noise_density: 2.0000e-3   #Noise density (continuous-time)
accelerometer_random_walk:   3.0000e-3   #Bias random walk

#Gyroscopes
gyroscope_noise_density:     1.6968e-04   #Noise density (continuous-time)
gyroscope_random_walk:       1.9393e-05   #Bias random walk

rostopic:                    /imu0      #the IMU ROS topic
update_rate:                 200.0      #Hz (for discretization of the values above)
"""
NOISE_KEYS = {
    "accelerometer_noise_density": 2.0e-3,
    "accelerometer_random_walk": 3.0e-3,
    "gyroscope_noise_density": 1.6968e-4,
    "gyroscope_random_walk": 1.9393e-5,
    "update_rate": 200.0,
}


@pytest.fixture
def euroc(tmp_path):
    path = tmp_path / "imu.yaml"
    path.write_text(EUROC)
    return path


def test_euroc_file_becomes_per_field_densities_and_the_sample_period(euroc):
    o = sg.IMUOptions.from_kalibr(euroc, body="torso")
    assert o.noise_density == (2.0e-3,) * 3 + (1.6968e-4,) * 3 + (0.0,) * 3
    assert o.random_walk_density == (3.0e-3,) * 3 + (1.9393e-5,) * 3 + (0.0,) * 3
    assert o.acc_noise_density == 2.0e-3 and o.gyro_random_walk_density == 1.9393e-5
    assert o.update_period == 1.0 / 200.0 == 0.005
    assert o.noise == 0.0 and o.random_walk == 0.0  # densities, not per-step values
    assert sg.IMUOptions.from_kalibr(str(euroc), body="torso") == o  # a str path too
    assert sg.IMUOptions.from_kalibr(yaml.safe_load(EUROC), body="torso") == o  # the parsed mapping


def test_round_trip_is_exact(euroc, tmp_path):
    o = sg.IMUOptions.from_kalibr(euroc, body="torso")
    assert o.to_kalibr() == NOISE_KEYS
    assert all(type(v) is float for v in o.to_kalibr().values())
    assert o.to_kalibr(rostopic="/imu0") == yaml.safe_load(EUROC)
    out = tmp_path / "written.yaml"
    assert o.to_kalibr(out, rostopic="/imu0") == yaml.safe_load(out.read_text()) == yaml.safe_load(EUROC)
    assert sg.IMUOptions.from_kalibr(out, body="torso") == o


@pytest.mark.parametrize("rate", [200.0, 49.0, 30.0, 100.0, 333.0, 400.0, 1000.0, 123.456, 2000.0 / 3.0])
def test_the_rate_comes_back_exactly(rate):
    # 1 / (1 / 49.0) is 49.00000000000001: the rate written is the shortest decimal of the same period
    table = {**NOISE_KEYS, "update_rate": rate}
    o = sg.IMUOptions.from_kalibr(table, body="b")
    assert o.to_kalibr()["update_rate"] == rate
    assert sg.IMUOptions.from_kalibr(o.to_kalibr(), body="b") == o


def test_keywords_set_the_rest(euroc):
    o = sg.IMUOptions.from_kalibr(
        euroc,
        body="torso",
        pos_offset=(0.0, 0.0, 0.05),
        mag_noise_density=1e-3,
        gyro_bias=0.01,
        delay=0.02,
        gyro_noise_density=1.6968e-4,  # the file's own value: no contradiction
        update_period=0.005,
    )
    assert o.pos_offset == (0.0, 0.0, 0.05) and o.delay == 0.02 and o.bias[3:6] == (0.01,) * 3
    assert o.noise_density[6:] == (1e-3,) * 3 and o.noise_density[3:6] == (1.6968e-4,) * 3
    assert o.to_kalibr() == NOISE_KEYS  # the magnetometer is not Kalibr's


def test_rostopic_and_time_offset_are_ignored_and_strings_of_numbers_read():
    table = {**NOISE_KEYS, "rostopic": "/imu0", "time_offset": 0.003}
    assert sg.IMUOptions.from_kalibr(table, body="b").to_kalibr() == NOISE_KEYS
    # PyYAML (YAML 1.1) reads 2e-3 without a dot as a string
    loaded = yaml.safe_load(EUROC.replace("2.0000e-3", "2e-3"))
    assert loaded["accelerometer_noise_density"] == "2e-3"
    assert sg.IMUOptions.from_kalibr(loaded, body="b").acc_noise_density == 2e-3


def test_the_densities_reach_the_per_env_tables(euroc):
    mgr = sg.SensorManager(num_envs=2, dt=0.02, seed=0)
    imu = mgr.add_sensor(sg.IMUOptions.from_kalibr(euroc, body="torso"), name="imu")
    mgr.reset({imu.state_key: torch.zeros(2, 9)})
    values = mgr.metadata(sg.IMUSensor).params.components.values
    expect = torch.tensor([2.0e-3] * 3 + [1.6968e-4] * 3 + [0.0] * 3, dtype=values["noise_density"].dtype)
    assert torch.equal(values["noise_density"], expect.expand(2, 9))
    expect = torch.tensor(
        [3.0e-3] * 3 + [1.9393e-5] * 3 + [0.0] * 3,
        dtype=values["random_walk_density"].dtype,
    )
    assert torch.equal(values["random_walk_density"], expect.expand(2, 9))


def refused(match: str, source=None, error=ValueError, **kwargs) -> str:
    with pytest.raises(error) as info:
        sg.IMUOptions.from_kalibr(NOISE_KEYS if source is None else source, **{"body": "b", **kwargs})
    assert info.match(match), str(info.value)
    assert "Fix: " in str(info.value)
    return str(info.value)


def test_an_unknown_key_is_named():
    refused(r"has the key 'gyroscope_noise_densty', which is not part of a Kalibr IMU noise model",
            {**NOISE_KEYS, "gyroscope_noise_densty": 1e-4})  # fmt: skip
    refused(r"has the key 'T_ib'", {**NOISE_KEYS, "T_ib": [[1, 0], [0, 1]]})  # Kalibr's is T_i_b
    refused(r"the Kalibr mapping, block imu0 has the key 'gyro_noise'",
            {"imu0": {**NOISE_KEYS, "gyro_noise": 1e-4}})  # fmt: skip


@pytest.mark.parametrize("key", list(NOISE_KEYS))
def test_a_missing_key_is_named(key):
    table = {k: v for k, v in NOISE_KEYS.items() if k != key}
    refused(rf"the Kalibr mapping has no '{key}'\. Fix: add it", table)


def test_missing_keys_of_a_file_name_the_file(tmp_path):
    path = tmp_path / "imu.yaml"
    path.write_text("rostopic: /imu0\nupdate_rate: 200.0\n")
    m = refused(r"imu\.yaml' has no 'accelerometer_noise_density' \(also missing: \[", path)
    assert "gyroscope_random_walk" in m


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("gyroscope_noise_density", -1e-4),
        ("accelerometer_random_walk", "three"),
        ("accelerometer_noise_density", math.nan),
        ("gyroscope_random_walk", None),
        ("update_rate", 0.0),
        ("update_rate", True),
    ],
)
def test_a_bad_value_is_named(key, value):
    refused(rf"has {key}: {value!r}, expected .*Fix: correct {key}", {**NOISE_KEYS, key: value})


CONTRADICTIONS = [
    ({"gyro_noise_density": 1e-3},
     r"the keyword gyro_noise_density=0\.001 contradicts the Kalibr mapping's gyroscope_noise_density: "
     r"0\.00016968"),
    ({"acc_random_walk_density": (3e-3, 3e-3, 0.0)},
     r"acc_random_walk_density=\(0\.003, 0\.003, 0\.0\) contradicts .* accelerometer_random_walk"),
    ({"update_period": 0.01},
     r"update_period=0\.01 contradicts .*update_rate: 200\.0 \(which gives update_period=0\.005\)"),
    ({"update_period": sg.Uniform(0.004, 0.006)}, r"update_period=Uniform.* contradicts"),
    ({"noise_density": 1e-3},
     r"noise_density=0\.001 sets the acc components, which the Kalibr mapping gives .*Fix: set only "
     r"mag_noise_density"),
    ({"random_walk_density": [3e-3] * 3 + [1.9393e-5] * 3 + [1.0] * 3}, None),  # agrees: accepted
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "match"), CONTRADICTIONS)
def test_a_keyword_that_contradicts_the_file_is_named(kwargs, match):
    if match is None:
        o = sg.IMUOptions.from_kalibr(NOISE_KEYS, body="b", **kwargs)
        assert o.random_walk_density[6:] == (1.0,) * 3
        return
    refused(match, **kwargs)


def test_a_per_step_keyword_on_a_kalibr_field_is_named_as_contradicting_the_file():
    """A per-step ``noise``/``random_walk`` keyword on a field the file gives as a density is two units of
    one error term: the message names the keyword and the file's key (not the density it derived)."""
    refused(r"the keyword acc_noise=0\.05 \(per step\) contradicts the Kalibr mapping's "
            r"accelerometer_noise_density: 0\.002 \(per sqrt\(Hz\)\).*Fix: drop acc_noise .*mag_noise",
            acc_noise=0.05)  # fmt: skip
    refused(r"the keyword noise=0\.1 \(per step\) contradicts .*accelerometer_noise_density", noise=0.1)
    refused(r"the keyword random_walk=0\.001 .* accelerometer_random_walk: 0\.003", random_walk=1e-3)
    refused(r"the keyword random_walk=\[0\.0, 0\.0, 0\.0, 0\.001, .*\] .*gyroscope_random_walk",
            random_walk=[0.0] * 3 + [1e-3] * 6)  # fmt: skip
    o = sg.IMUOptions.from_kalibr(NOISE_KEYS, body="b", mag_noise=0.1, random_walk=[0.0] * 6 + [1e-3] * 3)
    assert o.noise[6:] == (0.1,) * 3 and o.random_walk[6:] == (1e-3,) * 3  # the magnetometer: not in the file


def test_bad_sources_and_a_missing_body():
    with pytest.raises(TypeError, match=r"from_kalibr: body is required.*Fix: pass body="):
        sg.IMUOptions.from_kalibr(NOISE_KEYS)
    with pytest.raises(TypeError, match=r"from_kalibr\(source=42\): expected the path .*Fix: "):
        sg.IMUOptions.from_kalibr(42, body="b")


def test_a_file_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "imu.yaml"
    path.write_text("- 1\n- 2\n")
    refused(r"holds list, not a mapping", path)


NOT_KALIBR = [
    ({"gyro_noise_density": (1e-4, 2e-4, 1e-4)},
     r"IMUOptions\.gyro_noise_density=\(0\.0001, 0\.0002, 0\.0001\) is invalid: Kalibr has one value per "
     r"sensor"),
    ({"acc_random_walk_density": sg.Uniform(1e-3, 2e-3)}, r"IMUOptions\.acc_random_walk_density=\(Uniform"),
    ({"update_period": 0.0}, r"IMUOptions\.update_period=0\.0 is invalid: .*one positive period"),
    ({"update_period": sg.Uniform(0.004, 0.006)}, r"IMUOptions\.update_period=Uniform"),
    ({"gyro_noise": 0.01},
     r"IMUOptions\.gyro_noise=\(0\.01, 0\.01, 0\.01\) is invalid: a Kalibr file holds densities only.*"
     r"Fix: give gyro_noise_density instead"),
    ({"random_walk": [0.0] * 8 + [1e-3]}, None),  # the magnetometer's: nothing Kalibr would lose
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "match"), NOT_KALIBR)
def test_to_kalibr_refuses_what_kalibr_cannot_hold(kwargs, match):
    o = sg.IMUOptions(body="b", **{"update_period": 0.005, **kwargs})
    if match is None:
        o.to_kalibr()
        return
    with pytest.raises(ValueError, match=match) as info:
        o.to_kalibr()
    assert "Fix: " in str(info.value)


def test_without_pyyaml_a_path_names_the_package_and_a_mapping_still_works(monkeypatch, euroc):
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml now raises ImportError
    with pytest.raises(ImportError, match=r"PyYAML, which is not installed\. Fix: pip install pyyaml$"):
        sg.IMUOptions.from_kalibr(euroc, body="torso")
    o = sg.IMUOptions.from_kalibr(NOISE_KEYS, body="torso")
    assert o.to_kalibr() == NOISE_KEYS
    with pytest.raises(ImportError, match=r"pip install pyyaml"):
        o.to_kalibr(euroc.parent / "out.yaml")


# What kalibr_calibrate_imu_camera writes (imu-<bag>.yaml): one block per IMU with the calibration it made
# (T_i_b: pose against imu0, time_offset, model; the scale-misalignment model adds its matrices). The
# values are this test's own, in that layout.
KALIBR_RESULT = """\
imu0:
  T_i_b:
  - [1.0, 0.0, 0.0, 0.0]
  - [0.0, 1.0, 0.0, 0.0]
  - [0.0, 0.0, 1.0, 0.0]
  - [0.0, 0.0, 0.0, 1.0]
  accelerometer_noise_density: 0.0028
  accelerometer_random_walk: 0.00086
  gyroscope_noise_density: 0.00016
  gyroscope_random_walk: 2.2e-05
  model: calibrated
  rostopic: /imu0
  time_offset: 0.0
  update_rate: 200.0
imu1:
  T_i_b:
  - [0.0, -1.0, 0.0, 0.02]
  - [1.0, 0.0, 0.0, -0.01]
  - [0.0, 0.0, 1.0, 0.0]
  - [0.0, 0.0, 0.0, 1.0]
  accelerometer_noise_density: 0.0012
  accelerometer_random_walk: 0.0004
  accelerometers:
    M:
    - [1.001, 0.0, 0.0]
    - [0.002, 0.998, 0.0]
    - [-0.001, 0.003, 1.002]
  gyroscope_noise_density: 8.0e-05
  gyroscope_random_walk: 4.0e-06
  gyroscopes:
    A:
    - [0.0, 0.0, 0.0]
    - [0.0, 0.0, 0.0]
    - [0.0, 0.0, 0.0]
    C_gyro_i:
    - [1.0, 0.0, 0.0]
    - [0.0, 1.0, 0.0]
    - [0.0, 0.0, 1.0]
    M:
    - [0.999, 0.0, 0.0]
    - [0.001, 1.001, 0.0]
    - [0.0, -0.002, 1.0]
  model: scale-misalignment
  rostopic: /imu1
  time_offset: -0.0012
  update_rate: 400.0
"""
# OpenVINS's kalibr_imu_chain.yaml: the same block behind OpenCV's header, with OpenVINS's intrinsics
OPENVINS_CHAIN = """\
%YAML:1.0 # OpenCV's FileStorage header

imu0:
  T_i_b:
    - [1.0, 0.0, 0.0, 0.0]
    - [0.0, 1.0, 0.0, 0.0]
    - [0.0, 0.0, 1.0, 0.0]
    - [0.0, 0.0, 0.0, 1.0]
  accelerometer_noise_density: 2.0000e-3  # [ m / s^2 / sqrt(Hz) ]
  accelerometer_random_walk: 3.0000e-3    # [ m / s^3 / sqrt(Hz) ]
  gyroscope_noise_density: 1.6968e-04     # [ rad / s / sqrt(Hz) ]
  gyroscope_random_walk: 1.9393e-05       # [ rad / s^2 / sqrt(Hz) ]
  rostopic: /imu0
  time_offset: 0.0
  update_rate: 200.0
  model: "kalibr"
  Tw:
    - [ 1.0, 0.0, 0.0 ]
    - [ 0.0, 1.0, 0.0 ]
    - [ 0.0, 0.0, 1.0 ]
  R_IMUtoGYRO:
    - [ 1.0, 0.0, 0.0 ]
    - [ 0.0, 1.0, 0.0 ]
    - [ 0.0, 0.0, 1.0 ]
  Ta:
    - [ 1.0, 0.0, 0.0 ]
    - [ 0.0, 1.0, 0.0 ]
    - [ 0.0, 0.0, 1.0 ]
  R_IMUtoACC:
    - [ 1.0, 0.0, 0.0 ]
    - [ 0.0, 1.0, 0.0 ]
    - [ 0.0, 0.0, 1.0 ]
  Tg:
    - [ 0.0, 0.0, 0.0 ]
    - [ 0.0, 0.0, 0.0 ]
    - [ 0.0, 0.0, 0.0 ]
"""


def test_kalibr_calibration_output_gives_imu0_or_the_block_named(tmp_path):
    path = tmp_path / "imu-calibration.yaml"
    path.write_text(KALIBR_RESULT)
    o = sg.IMUOptions.from_kalibr(path, body="torso")  # imu0, Kalibr's reference IMU
    assert o.to_kalibr() == {
        "accelerometer_noise_density": 0.0028,
        "accelerometer_random_walk": 0.00086,
        "gyroscope_noise_density": 0.00016,
        "gyroscope_random_walk": 2.2e-05,
        "update_rate": 200.0,
    }
    o1 = sg.IMUOptions.from_kalibr(path, imu="imu1", body="torso")  # its matrices are read past
    assert o1.update_period == 1.0 / 400.0 and o1.gyro_noise_density == 8.0e-05
    assert o1.acc_random_walk_density == 4.0e-4 and o1.scale_factor == 0.0
    assert sg.IMUOptions.from_kalibr(yaml.safe_load(KALIBR_RESULT), imu="imu1", body="torso") == o1


def test_an_opencv_yaml_header_is_read_past(tmp_path):
    path = tmp_path / "kalibr_imu_chain.yaml"
    path.write_text(OPENVINS_CHAIN)
    o = sg.IMUOptions.from_kalibr(path, body="torso")
    assert o.to_kalibr() == NOISE_KEYS  # EuRoC's ADIS16448, as in the flat file
    flat = tmp_path / "imu.yaml"
    flat.write_text("%YAML:1.0\n---\n" + EUROC)  # the header over a flat file too (with a document start)
    assert sg.IMUOptions.from_kalibr(flat, body="torso") == o


@pytest.mark.parametrize("key", ["rostopic", "time_offset", "T_i_b", "model", "accelerometers", "gyroscopes",
                                 "Tw", "R_IMUtoGYRO", "Ta", "R_IMUtoACC", "Tg"])  # fmt: skip
def test_every_calibration_key_is_read_past_in_either_layout(key):
    value = [[1.0, 0.0], [0.0, 1.0]]
    flat = sg.IMUOptions.from_kalibr({**NOISE_KEYS, key: value}, body="b")
    nested = sg.IMUOptions.from_kalibr({"imu0": {**NOISE_KEYS, key: value}}, body="b")
    assert flat == nested == sg.IMUOptions.from_kalibr(NOISE_KEYS, body="b")


def test_a_nested_file_names_its_block_in_messages(tmp_path):
    path = tmp_path / "imu-calibration.yaml"
    path.write_text(KALIBR_RESULT.replace("  update_rate: 400.0\n", ""))
    refused(r"imu-calibration\.yaml', block imu1 has no 'update_rate'\. Fix: add it", path, imu="imu1")
    refused(r"the keyword update_period=0\.01 contradicts .*block imu0's update_rate: 200\.0", path,
            update_period=0.01)  # fmt: skip


def test_which_block_and_which_file_are_one_line_each(tmp_path):
    nested = yaml.safe_load(KALIBR_RESULT)
    refused(r"from_kalibr\(imu='imu2'\): .* has the IMU blocks \['imu0', 'imu1'\]\. Fix: pass one of them",
            nested, imu="imu2")  # fmt: skip
    refused(r"from_kalibr\(imu='imu0'\): .* describes one IMU .*Fix: drop imu=", NOISE_KEYS, imu="imu0")
    refused(r"has IMU blocks \['imu0', 'imu1'\] and also the top-level key 'update_rate'",
            {**nested, "update_rate": 200.0})  # fmt: skip
    refused(r"block imu0 holds list, not the IMU's keys", {"imu0": [1, 2]})
    camchain = {"cam0": {"camera_model": "pinhole", "T_cam_imu": [[1.0]], "rostopic": "/cam0/image_raw"}}
    refused(r"is a Kalibr camera chain \(\['cam0'\]\), which holds no IMU noise model\. Fix: pass the IMU's",
            camchain)  # fmt: skip
    assert sg.IMUOptions.from_kalibr({**nested, **camchain}, body="b").gyro_noise_density == 0.00016


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "%YAML:1.0\nimu0:\n  update_rate: [200.0\n",
            r"is not valid YAML at line 4, column 1: .*Fix: correct",
        ),
        (
            "accelerometer_noise_density: 2.0e-3\n  gyroscope_noise_density: 1e-4\n",
            r"is not valid YAML at line 2",
        ),
        ("%TAG:1.0\nimu0: 1\n", r"is not valid YAML at line 1"),
    ],
)
def test_a_file_that_is_not_yaml_is_one_line(tmp_path, text, match):
    path = tmp_path / "imu.yaml"
    path.write_text(text)
    assert "\n" not in refused(match, path)


def test_a_binary_file_is_one_line(tmp_path):
    path = tmp_path / "imu.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    assert "\n" not in refused(r"imu\.yaml' is not a text file \(byte 0 is 0x89\)", path)
