"""Each reader on a real file of its format (tests/data, README there), against the format's own library;
and the one-line messages for a log or channel that cannot be used."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from sensorgym.fitting.errors import FitError, MissingExtra
from sensorgym.fitting.readers import read_channels

DATA = Path(__file__).resolve().parents[1] / "data"
XIO = DATA / "xio_fusion_sensor_data.csv"


def test_csv_columns_and_time():
    gx, az = read_channels(XIO, ["Gyroscope X (deg/s)", "Accelerometer Z (g)"])
    raw = np.genfromtxt(XIO, delimiter=",", skip_header=1)
    np.testing.assert_array_equal(gx.times, raw[:, 0])
    np.testing.assert_array_equal(gx.values, raw[:, 1])
    np.testing.assert_array_equal(az.values, raw[:, 6])
    [g] = read_channels(XIO, ["Gyroscope X (deg/s)"], time="Time (s)")
    assert len(g.times) == 13514 and "CSV" in g.source


def test_csv_other_delimiter_and_missing_values(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("t;x;y\n0;1;nan\n0.1;2;5\n0.2;3;6\n0.3;4;7\n")
    x, y = read_channels(path, ["x", "y"])
    assert x.values.tolist() == [1, 2, 3, 4] and y.times.tolist() == [0.1, 0.2, 0.3]  # the nan row dropped


def test_npz_arrays_and_columns(tmp_path):
    t = np.arange(100) * 0.01
    imu = np.random.default_rng(0).normal(size=(100, 3))
    np.savez(tmp_path / "log.npz", time=t, imu=imu, temp=np.linspace(20.0, 20.5, 100))
    a, b = read_channels(tmp_path / "log.npz", ["imu[2]", "temp"])
    np.testing.assert_array_equal(a.values, imu[:, 2])
    np.testing.assert_array_equal(b.times, t)


def test_ulog_against_pyulog():
    pyulog = pytest.importorskip("pyulog")
    path = DATA / "px4_sensor_combined.ulg"
    [gyro] = read_channels(path, ["sensor_combined.gyro_rad[1]"])
    data = pyulog.ULog(str(path)).get_dataset("sensor_combined").data
    np.testing.assert_array_equal(gyro.values, data["gyro_rad[1]"].astype(float))
    np.testing.assert_allclose(gyro.times, data["timestamp"] * 1e-6)
    assert len(gyro.values) == 1298


def _rosbag_values(path: Path, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    highlevel = pytest.importorskip("rosbags.highlevel")
    stamps, values = [], []
    with highlevel.AnyReader([path]) as reader:
        for conn, _, raw in reader.messages(connections=reader.connections):
            msg = reader.deserialize(raw, conn.msgtype)
            stamps.append(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)
            values.append(msg.angular_velocity.z)
    return np.array(stamps[:n]), np.array(values[:n])


def test_ros1_bag_against_rosbags():
    path = DATA / "jackal_imu.bag"
    [wz] = read_channels(path, ["/imu/data.angular_velocity.z"])
    stamps, values = _rosbag_values(path)
    np.testing.assert_array_equal(wz.values, values)
    np.testing.assert_allclose(wz.times, stamps)
    assert "header.stamp" in wz.source and len(values) == 1000


def test_ros2_bag_and_mcap_hold_the_same_messages():
    pytest.importorskip("mcap")
    stamps, values = _rosbag_values(DATA / "jackal_imu.bag", 500)
    for path in (
        DATA / "jackal_imu_ros2",
        DATA / "jackal_imu_ros2" / "jackal_imu_ros2.db3",
        DATA / "jackal_imu.mcap",
    ):
        [wz] = read_channels(path, ["/imu/data.angular_velocity.z"])
        np.testing.assert_array_equal(wz.values, values)
        np.testing.assert_allclose(wz.times, stamps)
        # an element of an array field is read too: this one is a constant (the driver's covariance), and
        # a channel that never changes is refused for that reason, naming its value
        with pytest.raises(
            FitError, match=r"holds the one value 2\.5e-05 in all its 500 samples: there is no"
        ):
            read_channels(path, ["/imu/data.angular_velocity_covariance[8]"])


@pytest.mark.parametrize(
    ("path", "channel", "words"),
    [
        (XIO, "Gyro X", ["no channel 'Gyro X'", "did you mean 'Gyroscope X (deg/s)'"]),
        (DATA / "px4_sensor_combined.ulg", "sensor_combined.gyro[0]", ["no field 'gyro[0]'", "gyro_rad[0]"]),
        (DATA / "px4_sensor_combined.ulg", "vehicle_imu.x", ["no logged topic 'vehicle_imu'"]),
        (DATA / "jackal_imu.bag", "/imu/data.angular_velocity.w", ["no numeric field", "angular_velocity.z"]),
        (DATA / "jackal_imu.bag", "/imu/raw.x", ["no topic", "/imu/data"]),
        (DATA / "jackal_imu.mcap", "/odom.x", ["no topic", "/imu/data"]),
    ],
)
def test_an_unknown_channel_is_one_line_with_the_names_there_are(path, channel, words):
    pytest.importorskip({".ulg": "pyulog", ".bag": "rosbags", ".mcap": "mcap"}.get(path.suffix, "numpy"))
    with pytest.raises(FitError) as e:
        read_channels(path, [channel])
    text = str(e.value)
    assert "\n" not in text and "Fix:" in text
    for w in words:
        assert w in text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("t,x\n0,1\n0.2,2\n0.1,3\n0.3,4\n", ["goes back at sample 2", "sort the log by time"]),
        ("t,x\n0,1\n0.1,2\n0.1,3\n0.3,4\n", ["repeats at sample 2"]),
        ("0,1\n0.1,2\n0.2,3\n", ["holds numbers, not column names"]),
        ("t,x\n0,1\n0.1,two\n0.2,3\n", ["is not a number"]),
        ("t,x\n0,1\n", ["at least 3 samples"]),
    ],
)
def test_a_bad_csv_is_one_line(tmp_path, text, words):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(FitError) as e:
        read_channels(path, ["x"])
    assert "\n" not in str(e.value) and "Fix:" in str(e.value)
    for w in words:
        assert w in str(e.value)


def _column(n: int, start: float, step: float) -> str:
    rows = "".join(f"{start + i * step!r},{0.01 * (i % 7)}\n" for i in range(n))
    return rows


@pytest.mark.parametrize(
    ("header", "rows", "words"),
    [
        # no time column at all: the first column is a channel (audit: "sort the log by time")
        ("gx,gy", "0.01,0.2\n-0.02,0.1\n0.03,0.3\n-0.01,0.2\n", ["no time column", "--time COLUMN"]),
        # a sample counter is not seconds (audit: accepted as T_s = 1 s)
        ("sample,gx", _column(50, 0, 1), ["counts samples (steps of exactly 1)", "--time COLUMN"]),
        # numbers that step by 10 with no unit said (issue 33 item 16a: milliseconds named `time` gave
        # a warning and then T_s = 10 s): refused, naming the likely unit and the flag that says it
        (
            "time,gx",
            _column(50, 0, 10),
            [
                "median interval of 10: as seconds a 0.1 Hz sensor",
                "in milliseconds it is a 100 Hz sensor",
                "--time-unit ms",
            ],
        ),
        ("time,gx", _column(50, 0, 5000), ["in microseconds it is a 200 Hz sensor", "--time-unit us"]),
        ("stamp,gx", _column(50, 1.7e18, 4e6), ["a Unix time in nanoseconds", "--time-unit ns"]),
        ("time,gx", _column(50, 1.7e12, 5), ["a Unix time in milliseconds", "--time-unit ms"]),
    ],
)
def test_a_time_column_that_is_not_seconds_is_one_line(tmp_path, header, rows, words):
    path = tmp_path / "log.csv"
    path.write_text(f"{header}\n{rows}")
    with pytest.raises(FitError) as e:
        read_channels(path, ["gx"])
    text = str(e.value)
    assert "\n" not in text and "Fix:" in text and all(w in text for w in words), text


def test_numbers_in_messages_are_plain(tmp_path):
    path = tmp_path / "back.csv"
    path.write_text("t,x\n0,1\n0.25,2\n0.125,3\n0.5,4\n")
    with pytest.raises(FitError) as e:
        read_channels(path, ["x"])
    assert "(0.25 then 0.125)" in str(e.value) and "np.float64" not in str(e.value)


def test_a_slow_sensor_is_read_once_its_unit_is_said(tmp_path):
    path = tmp_path / "slow.csv"
    path.write_text("time,x\n" + _column(20, 1.7e9, 2.0))  # a Unix time in seconds, every 2 s
    with pytest.raises(FitError, match=r"its first value 1\.7e\+09 is a Unix time in seconds\. Fix: pass "
                                       r"--time-unit s if the sensor is that slow"):  # fmt: skip
        read_channels(path, ["x"])
    [x] = read_channels(path, ["x"], time_unit="s")  # a 0.5 Hz sensor may be real: said, read
    assert x.warnings == [] and np.diff(x.times).tolist() == [2.0] * 19


@pytest.mark.parametrize(
    ("header", "step", "unit", "interval"),
    [("t_ms", 10, "milliseconds", 0.01), ("time [us]", 5000, "microseconds", 0.005),
     ("stamp_ns", 2.5e6, "nanoseconds", 0.0025), ("time (μs)", 1000, "microseconds", 0.001)],
)  # fmt: skip
def test_a_time_column_named_in_another_unit_is_read_in_it_with_a_line(
    tmp_path, header, step, unit, interval
):
    path = tmp_path / "log.csv"
    path.write_text(f"{header},gx\n{_column(50, 0, step)}")
    [gx] = read_channels(path, ["gx"])
    assert np.allclose(np.diff(gx.times), interval, rtol=1e-9)
    assert gx.warnings == [f"the first column {header!r} is read as {unit}, as its name says (--time-unit "
                           "sets another unit)"]  # fmt: skip


def test_a_time_unit_is_checked_against_the_name(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("time,gx\n" + _column(50, 0, 10))
    [gx] = read_channels(path, ["gx"], time_unit="ms")  # the millisecond column of item 16a, said
    assert np.allclose(np.diff(gx.times), 0.01) and gx.warnings == []
    path.write_text("t_ms,gx\n" + _column(50, 0, 10))
    with pytest.raises(FitError, match=r"--time-unit s contradicts the first column 't_ms', which is in "
                                       r"milliseconds by its name\. Fix: drop --time-unit"):  # fmt: skip
        read_channels(path, ["gx"], time_unit="s")
    with pytest.raises(FitError, match=r"--time-unit 'min' is not a unit of time\. Fix: use one of s, ms"):
        read_channels(path, ["gx"], time_unit="min")
    with pytest.raises(FitError, match=r"--time-unit ms: a \.ulg log carries its own time stamps"):
        read_channels(DATA / "px4_sensor_combined.ulg", ["sensor_combined.gyro_rad[0]"], time_unit="ms")


def test_a_header_without_rows_is_one_line_and_no_numpy_warning(tmp_path):
    import warnings

    path = tmp_path / "hdr.csv"
    path.write_text("t,gx\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "input contained no data" would be an error here
        with pytest.raises(FitError, match="a header and no data rows"):
            read_channels(path, ["gx"])


def test_other_files_are_refused(tmp_path):
    (tmp_path / "log.xlsx").write_text("")
    for path, words in ((tmp_path / "log.xlsx", "unknown format"), (tmp_path / "none.csv", "does not exist")):
        with pytest.raises(FitError, match=words):
            read_channels(path, ["x"])
    with pytest.raises(FitError, match="carries its own time stamps"):
        read_channels(DATA / "jackal_imu.bag", ["/imu/data.angular_velocity.z"], time="t")


@pytest.mark.parametrize(
    ("path", "module", "extra"),
    [
        (DATA / "px4_sensor_combined.ulg", "pyulog", "ulog"),
        (DATA / "jackal_imu.bag", "rosbags", "rosbag"),
        (DATA / "jackal_imu.mcap", "mcap", "mcap"),
    ],
)
def test_a_missing_extra_names_the_pip_install(monkeypatch, path, module, extra):
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")] + [module]:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` now fails as if it were not installed
    with pytest.raises(MissingExtra) as e:
        read_channels(path, ["a.b"])
    assert f'pip install "sensorgym[{extra}]"' in str(e.value) and "\n" not in str(e.value)
