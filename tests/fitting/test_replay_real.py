"""Real-noise replay (SPEC §5.4, issue 36 item 1) on real recordings: ``sensorgym fit --residuals`` makes
them from the project's real logs (tests/data/broad_rest_cut.npz: a BROAD gyroscope at rest, 285.7 Hz,
CC BY 4.0; tests/data/xio_fusion_sensor_data.csv: an x-io IMU at about 100 Hz, MIT; see
tests/data/README.md), and a sensor replays them:

* the file holds exactly what SPEC §5.4 pins (the fitted static window, less its mean, per channel);
* the replayed stream's overlapping Allan deviation lies inside the recording's 95% band at every octave
  tau in [2 T_s, T/10] (allantools as the oracle: its ``oadev``, Greenhall's degrees of freedom for white
  frequency noise, the narrowest band, and its chi-square interval);
* ``sensorgym fit`` of a simulated replay finds the recording's own noise density (real) and bias
  instability (a long recording with one, made through the same route) within their uncertainties;
* an IMU replays the x-io gyroscope through ``gyro_replay``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.app.cli import main
from sensorgym.core import diagnostics
from sensorgym.core.recording import write_residuals

at = pytest.importorskip("allantools")
pytest.importorskip("matplotlib")  # the figures sensorgym fit writes beside the residuals

DATA = Path(__file__).resolve().parents[1] / "data"
BROAD = DATA / "broad_rest_cut.npz"
XIO = DATA / "xio_fusion_sensor_data.csv"
XIO_GYRO = ["Gyroscope X (deg/s)", "Gyroscope Y (deg/s)", "Gyroscope Z (deg/s)"]


def _fit_cli(log: Path, channels: list[str], residuals: Path, *extra: str) -> list[str]:
    """``sensorgym fit LOG --channels ... --residuals FILE`` in this process; its printed lines."""
    lines: list[str] = []
    capture = pytest.MonkeyPatch()
    capture.setattr(sys, "stdout", _Lines(lines))
    try:
        argv = ["--residuals", str(residuals), "--out", str(residuals.parent / "fit"), "--envs", "4"]
        rc = main(["fit", str(log), "--channels", *channels, *argv, "--no-progress", *extra])
    finally:
        capture.undo()
    assert rc == 0
    return lines


class _Lines:
    def __init__(self, lines: list[str]) -> None:
        self.lines, self.part = lines, ""

    def write(self, text: str) -> int:
        self.part += text
        *done, self.part = self.part.split("\n")
        self.lines += done
        return len(text)

    def flush(self) -> None:
        pass


@pytest.fixture(scope="module")
def broad(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("broad") / "broad_rest.npz"
    lines = _fit_cli(BROAD, ["gyr_x", "gyr_z"], path)
    assert any(str(path) in line for line in lines if line.startswith("wrote "))
    return path


@pytest.fixture(scope="module")
def xio(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("xio") / "xio_gyro_rest.npz"
    _fit_cli(XIO, XIO_GYRO, path, "--names", "gyro")
    return path


def test_the_residuals_file_holds_the_fitted_window_less_its_mean(broad):
    fitted = sg.fit(BROAD, ["gyr_x", "gyr_z"], simulate_config=False)
    with np.load(broad, allow_pickle=False) as z:
        assert sorted(z.files) == ["T_s", "channels", "gyr_x", "gyr_z"]
        assert z["channels"].tolist() == ["gyr_x", "gyr_z"]  # --channels order
        assert float(z["T_s"]) == fitted.channels[0].timing.sample_interval
        for f in fitted.channels:
            values = f.samples[1]
            assert z[f.channel.name].dtype == np.float64 and len(z[f.channel.name]) == len(values) == 8200
            np.testing.assert_array_equal(z[f.channel.name], values - values.mean())


def _replay(path: Path, channel: str, steps: int, envs: int, dt: float, seed: int = 0) -> np.ndarray:
    """``(steps, envs)`` float64 readings of a replaying sensor at rest (its ground truth is zero)."""
    mgr = sg.SensorManager(num_envs=envs, dt=dt, seed=seed)
    s = mgr.add_sensor(
        sg.StateSensorOptions(key="w", shape=(1,), replay=str(path), replay_channels=[channel])
    )
    still = {"w": torch.zeros(envs, 1)}
    mgr.reset(still)
    out = np.empty((steps, envs))
    out[0] = s.read()[:, 0].numpy()
    for k in range(1, steps):
        mgr.step(still)
        out[k] = s.read()[:, 0].numpy()
    return out


@pytest.mark.parametrize("channel", ["gyr_x", "gyr_z"])
def test_the_replayed_allan_deviation_lies_in_the_recording_band(broad, channel):
    with np.load(broad, allow_pickle=False) as z:
        rec, ts = z[channel], float(z["T_s"])
    n = len(rec)
    m = 2 ** np.arange(1, int(np.log2(n // 10)) + 1)  # octave tau in [2 T_s, T/10]
    taus, adev, _, _ = at.oadev(rec, rate=1 / ts, data_type="freq", taus=m * ts)
    band = np.array(
        [
            at.confidence_interval(
                a,
                at.edf_greenhall(alpha=0, d=2, m=int(k), N=n + 1, overlapping=True, modified=False),
                ci=0.95,
            )
            for a, k in zip(adev, m, strict=True)
        ]
    )
    assert len(taus) == 9  # 0.007 s to 1.79 s
    replayed = _replay(broad, channel, 4 * n, 8, ts)  # each env wraps three or four times

    def adev(series: np.ndarray) -> np.ndarray:
        return at.oadev(series, rate=1 / ts, data_type="freq", taus=taus)[1]

    one = adev(replayed[:, 0])
    pooled = np.sqrt(np.mean([adev(replayed[:, b]) ** 2 for b in range(8)], axis=0))
    for name, got in (("env 0", one), ("8 envs pooled", pooled)):
        inside = (got >= band[:, 0]) & (got <= band[:, 1])
        assert inside.all(), (name, taus[~inside], got[~inside], band[~inside])


def test_fit_of_a_replay_finds_the_recording_noise_density(broad):
    """A replay over the recording's length (one env: its offset drawn, wrapping once) at its own rate, as
    a log: the fitted noise densities agree within the recording's own standard errors."""
    with np.load(broad, allow_pickle=False) as z:
        ts, n = float(z["T_s"]), len(z["gyr_x"])
    recording = sg.fit(BROAD, ["gyr_x", "gyr_z"], simulate_config=False)
    log = broad.parent / "replayed.npz"
    streams = {c: _replay(broad, c, n, 1, ts, seed=5)[:, 0] for c in ("gyr_x", "gyr_z")}
    np.savez(log, t=np.arange(n) * ts, **streams)
    again = sg.fit(log, ["gyr_x", "gyr_z"], simulate_config=False)
    for original, replayed in zip(recording.channels, again.channels, strict=True):
        a, b = original.noise.estimates["noise_density"], replayed.noise.estimates["noise_density"]
        assert a.identified and b.identified
        assert abs(a.value - b.value) <= a.se, (original.channel.name, a.value, b.value, a.se)


def test_fit_of_a_replay_finds_the_recording_bias_instability(tmp_path):
    """A recording with a bias instability (the rest windows of the real logs are too short to show one:
    sensorgym fit identifies none there) made by the same route: a simulated 600 s log, fit --residuals,
    then a replay of it fitted again: noise density and bias instability within their uncertainties."""
    dt, n = 0.01, 60_000
    truth = dict(noise_density=2e-3, bias_instability=0.01, bias_correlation_time=5.0)
    mgr = sg.SensorManager(num_envs=1, dt=dt, seed=1)
    s = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(1,), **truth))
    still = {"w": torch.zeros(1, 1)}
    mgr.reset(still)
    y = np.empty(n)
    y[0] = float(s.read()[0, 0])
    for k in range(1, n):
        mgr.step(still)
        y[k] = float(s.read()[0, 0])
    np.savez(tmp_path / "log.npz", t=np.arange(n) * dt, g=y)
    residuals = tmp_path / "rest.npz"
    recording = sg.fit(tmp_path / "log.npz", ["g"], residuals=residuals, simulate_config=False).channels[0]
    with np.load(residuals, allow_pickle=False) as z:
        samples = len(z["g"])
    np.savez(
        tmp_path / "replayed.npz", t=np.arange(samples) * dt, g=_replay(residuals, "g", samples, 1, dt)[:, 0]
    )
    replayed = sg.fit(tmp_path / "replayed.npz", ["g"], simulate_config=False).channels[0]
    for term in ("noise_density", "bias_instability"):
        a, b = recording.noise.estimates[term], replayed.noise.estimates[term]
        assert a.identified and b.identified, term
        assert abs(a.value - b.value) <= a.se, (term, a.value, b.value, a.se)
    assert abs(recording.noise.estimates["bias_instability"].value - 0.01) < 3 * a.se  # the log's own


def test_an_imu_replays_the_real_gyroscope_per_field(xio):
    """gyro_replay: the x-io gyroscope's three channels (T_s 10.08 ms, within 1% of dt = 10 ms) on the gyro
    columns, from one offset per env; the accelerometer keeps its parametric noise, the ground truth none."""
    with np.load(xio, allow_pickle=False) as z:
        rec = np.stack([z[c] for c in XIO_GYRO], 1).astype(np.float32)
    mgr = sg.SensorManager(num_envs=3, dt=0.01, seed=2)
    imu = mgr.add_sensor(sg.IMUOptions(body="b", gyro_replay=str(xio), acc_noise=0.05), name="imu")
    assert imu.options.replay_channels[3:6] == tuple(XIO_GYRO) and imu.options.replay[:3] == (None,) * 3
    still = {imu.state_key: torch.zeros(3, 9)}
    mgr.reset(still)
    start = diagnostics.replay_state(imu)["index"][:, 3].clone()
    for t in range(1, 40):
        mgr.step(still)
        reading = imu.read()
        at_t = (start + t) % len(rec)
        assert torch.equal(reading.ang_vel, torch.from_numpy(rec[at_t.numpy()])), t
        assert float(reading.lin_acc.abs().sum()) > 0 and float(reading.mag.abs().sum()) == 0
        assert float(imu.read_ground_truth().ang_vel.abs().sum()) == 0
    with pytest.raises(ValueError) as info:
        sg.IMUOptions(body="b", gyro_replay=str(xio), gyro_noise_density=1e-4)
    message = str(info.value)
    assert (
        message.startswith("IMUOptions.gyro_replay=") and "gyro_noise_density=0.0001 is given too" in message
    )
    with pytest.raises(ValueError, match=r"IMUOptions\.acc_replay=.*3 components.*acc_replay_channels"):
        sg.IMUOptions(body="b", acc_replay=str(_two(xio)))


def _two(xio: Path) -> Path:
    """A recording of two of the gyroscope's channels (an IMU field needs three)."""
    path = xio.parent / "two.npz"
    with np.load(xio, allow_pickle=False) as z:
        write_residuals(path, float(z["T_s"]), {c: z[c] for c in XIO_GYRO[:2]})
    return path


def test_residuals_of_channels_at_different_rates_are_refused(tmp_path):
    t = np.arange(4000) * 0.01
    rng = np.random.default_rng(0)
    slow = rng.normal(size=4000)
    slow[1::2] = np.nan  # a channel logged at half the rate of the rows
    log = tmp_path / "log.csv"
    np.savetxt(log, np.c_[t, rng.normal(size=4000), slow], delimiter=",", header="t,fast,slow", comments="")
    out = tmp_path / "rest.npz"
    assert main(["fit", str(log), "--channels", "fast", "slow", "--residuals", str(out), "--out",
                 str(tmp_path / "fit"), "--no-progress"]) == 2  # fmt: skip
    assert not out.exists()
    with pytest.raises(ValueError, match=r"^--residuals: the channels have different sample intervals"):
        sg.fit(log, ["fast", "slow"], residuals=out, simulate_config=False)
    with pytest.raises(ValueError, match=r"^--residuals 'rest.csv' is not an \.npz file name\. Fix:"):
        sg.fit(log, ["fast"], residuals="rest.csv", simulate_config=False)
