"""The IMU's per-field replay options (SPEC §5.4: ``acc_replay``, ``gyro_replay``, ``mag_replay`` and their
``*_replay_channels``) merge into the 9-component ``replay``/``replay_channels`` as the other per-field
options merge, reach the engine per field, and are refused in one line naming the options as written.
(tests/fitting/test_replay_real.py replays the real x-io gyroscope through ``gyro_replay``.)"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.core import diagnostics
from sensorgym.core.recording import write_residuals


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    gyro, acc = str(tmp_path / "gyro.npz"), str(tmp_path / "acc.npz")
    write_residuals(gyro, 0.01, {c: rng.normal(size=50) for c in ("gx", "gy", "gz")})
    write_residuals(acc, 0.005, {c: rng.normal(size=80) for c in ("ax", "ay", "az", "extra")})
    return gyro, acc


def test_per_field_recordings_merge_into_the_nine_components(files):
    gyro, acc = files
    o = sg.IMUOptions(body="b", gyro_replay=gyro, acc_replay=acc, acc_replay_channels=["az", "ay", "ax"])
    assert o.replay == (acc,) * 3 + (gyro,) * 3 + (None,) * 3
    assert o.replay_channels == ("az", "ay", "ax", "gx", "gy", "gz", None, None, None)
    # built again from its own fields (a copy, a config round trip): the same options
    again = sg.IMUOptions(**{f.name: getattr(o, f.name) for f in dataclasses.fields(o)})
    assert again == o
    assert sg.IMUOptions(body="b", gyro_replay=None, acc_replay_channels=None) == sg.IMUOptions(body="b")


def test_each_field_replays_its_own_recording_at_its_own_multiple(files):
    gyro, acc = files
    mgr = sg.SensorManager(num_envs=2, dt=0.01, seed=3)
    o = sg.IMUOptions(
        body="b", gyro_replay=gyro, acc_replay=acc, acc_replay_channels=["ax", "ay", "az"], mag_noise=0.1
    )
    imu = mgr.add_sensor(o, name="imu")
    still = {imu.state_key: torch.zeros(2, 9)}
    mgr.reset(still)
    state = diagnostics.replay_state(imu)
    assert state["advance"].tolist() == [2, 2, 2, 1, 1, 1, 0, 0, 0]  # acc 5 ms, gyro 10 ms, mag none
    assert state["length"].tolist() == [80] * 3 + [50] * 3 + [1] * 3
    with np.load(gyro) as g, np.load(acc) as a:
        g_rec = np.stack([g[c] for c in ("gx", "gy", "gz")], 1).astype(np.float32)
        a_rec = np.stack([a[c] for c in ("ax", "ay", "az")], 1).astype(np.float32)
    start = state["index"].clone()
    # one drawn fraction per env and sensor: the fields start at the same place of their recordings
    lo, hi = start[:, 0] * 50 // 80, (start[:, 0] + 1) * 50 // 80
    assert bool(((lo <= start[:, 3]) & (start[:, 3] <= hi)).all())
    for t in range(1, 30):
        mgr.step(still)
        r = imu.read()
        assert torch.equal(r.ang_vel, torch.from_numpy(g_rec[((start[:, 3] + t) % 50).numpy()]))
        assert torch.equal(r.lin_acc, torch.from_numpy(a_rec[((start[:, 0] + 2 * t) % 80).numpy()]))
        assert float(r.mag.abs().sum()) > 0 and float(imu.read_ground_truth().ang_vel.abs().sum()) == 0


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        (
            {"gyro_replay": "G", "gyro_noise": 0.01},
            r"^IMUOptions\.gyro_replay=.*: gyro_noise=0\.01 is given too",
        ),
        (
            {"gyro_replay": "G", "noise_density": 1e-4},
            r"^IMUOptions\.gyro_replay=.*: noise_density=0\.0001 is ",
        ),
        (
            {"gyro_replay": "G", "gyro_bandwidth": 20.0},
            r"gyro_bandwidth=20\.0 is given too on the gyro field",
        ),
        ({"acc_replay": "A"}, r"^IMUOptions\.acc_replay=.*4 channels .* acc_replay_channels"),
        ({"acc_replay": "A", "acc_replay_channels": ["ax", "ay"]}, r"acc_replay_channels=.*3 channel names"),
        ({"mag_replay_channels": ["x", "y", "z"]}, r"^IMUOptions\.mag_replay_channels=.*mag_replay is None"),
        (
            {"gyro_replay": "G", "gyro_replay_channels": ["gx", "gy", "gzz"]},
            r"no channel 'gzz'.*did you mean 'gz'",
        ),
    ],
)
def test_bad_per_field_replays_are_named_as_written(files, kwargs, pattern):
    gyro, acc = files
    kwargs = {k: {"G": gyro, "A": acc}.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(ValueError) as info:
        sg.IMUOptions(body="b", **kwargs)
    message = str(info.value)
    assert "\n" not in message and "Fix: " in message
    assert re.search(pattern, message), message


def test_an_imu_field_at_a_rate_it_cannot_replay_is_refused_naming_both_intervals(files):
    _, acc = files
    mgr = sg.SensorManager(num_envs=1, dt=0.0125)  # 2.5 x the file's 5 ms
    with pytest.raises(ValueError, match=r"T_s = 0\.0125 s \(its dt\) .* T_s = 0\.005 s"):
        mgr.add_sensor(sg.IMUOptions(body="b", acc_replay=acc, acc_replay_channels=["ax", "ay", "az"]))
