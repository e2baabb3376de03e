"""The files users hand to ``sensorgym fit`` that are not the tidy CSV it was written for (issue 33 items 12,
15, 17): binary files, empty or damaged NPZ, other encodings, ``.txt`` tables, values that are not numbers,
channels that never change, and the unit a channel's name gives. Each is read (saying what it did) or
refused in one line naming the file and the fix; and any bytes at all under a reader's suffix give one of
the two, never another exception (a property test)."""

from __future__ import annotations

import codecs
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sensorgym.fitting.channels import unit_of
from sensorgym.fitting.errors import FitError
from sensorgym.fitting.readers import read_channels
from sensorgym.fitting.timing import analyse_timing

DATA = Path(__file__).resolve().parents[1] / "data"
ROWS = 400


def _table(sep: str = ",", header: str = "time,gx") -> tuple[str, np.ndarray, np.ndarray]:
    t = np.arange(ROWS) * 0.01
    gx = np.random.default_rng(0).normal(0.0, 0.05, ROWS)
    head = header.replace(",", sep)
    return (
        head + "\n" + "".join(f"{a}{sep}{b}\n" for a, b in zip(t.tolist(), gx.tolist(), strict=True)),
        t,
        gx,
    )


def refused(path: Path, words: list[str], channels: tuple[str, ...] = ("gx",)) -> str:
    with pytest.raises(FitError) as e:
        read_channels(path, list(channels))
    text = str(e.value)
    assert "\n" not in text and "Fix:" in text and all(w in text for w in words), text
    return text


# -- binary and damaged files --------------------------------------------------------------------------
def test_a_binary_file_named_csv_is_one_line(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(np.random.default_rng(1).bytes(5000))  # issue 33: a UnicodeDecodeError traceback
    refused(path, ["log.csv: a binary file, not a text table (byte ", "export the log as CSV"])


def test_a_log_of_another_format_under_csv_is_named_by_its_first_bytes(tmp_path):
    path = tmp_path / "flight.csv"
    path.write_bytes((DATA / "px4_sensor_combined.ulg").read_bytes())
    refused(path, ["its first bytes are those of a PX4 ULog: pass it as .ulg"])
    path = tmp_path / "arrays.txt"
    np.save(path.with_suffix(".npy"), np.arange(10.0))
    path.write_bytes(path.with_suffix(".npy").read_bytes())
    refused(path, ["a single numpy array (.npy): pass it as .npz: numpy.savez(path, t=times"])


def test_empty_and_damaged_npz_files_are_one_line(tmp_path):
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")  # issue 33 item 15: EOFError
    refused(empty, ["log", "empty.npz' is empty (0 bytes)", "Fix: pass the log itself"])
    noise = tmp_path / "noise.npz"
    noise.write_bytes(np.random.default_rng(2).bytes(4000))  # a ValueError about pickled data
    refused(noise, ["noise.npz: not an NPZ archive (numpy.savez writes a zip file)", "numpy.savez(path, t="])
    good = io.BytesIO()
    np.savez(good, t=np.arange(ROWS) * 0.01, gx=np.random.default_rng(0).normal(size=ROWS))
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.getvalue()[: len(good.getvalue()) // 2])  # a copy that stopped half-way
    refused(cut, ["cut.npz: a damaged NPZ archive ("])
    with zipfile.ZipFile(tmp_path / "junk.npz", "w") as z:
        z.writestr("t.npy", b"not an array")
    refused(tmp_path / "junk.npz", ["junk.npz: a damaged NPZ archive ("])


def test_object_and_text_arrays_in_an_npz_are_one_line(tmp_path):
    np.savez(tmp_path / "obj.npz", t=np.arange(5.0), gx=np.array([1, "a", None, 2, 3], dtype=object))
    refused(tmp_path / "obj.npz", ["an array of the NPZ holds Python objects"])
    np.savez(tmp_path / "text.npz", t=np.arange(5.0), gx=np.array(["1", "2", "3", "4", "5"]))
    refused(tmp_path / "text.npz", ["array 'gx' holds <U1 values, not numbers"])


def test_a_folder_and_an_unreadable_file_are_one_line(tmp_path):
    (tmp_path / "log.csv").mkdir()
    refused(tmp_path / "log.csv", ["log.csv' is a folder", "pass the log file inside it"])
    (tmp_path / "a.xlsx").write_bytes(b"PK\x03\x04" + bytes(60))
    refused(tmp_path / "a.xlsx", ["unknown format '.xlsx'; its first bytes are those of a zip archive"])


# -- encodings ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("encode", "what"),
    [
        (lambda text: text.encode("utf-16"), "UTF-16"),  # Windows' "Unicode text" export, with its BOM
        (lambda text: text.encode("utf-16-le"), "UTF-16 (no byte-order mark)"),
        (lambda text: text.encode("utf-16-be"), "UTF-16 (no byte-order mark)"),
        (lambda text: text.encode("utf-32"), "UTF-32"),
        (lambda text: codecs.BOM_UTF8 + text.encode(), "UTF-8"),  # Excel's "CSV UTF-8"
        (lambda text: text.replace("gx", "gx (°/s)").encode("latin-1"), "Latin-1 (not UTF-8)"),
    ],
)
def test_text_in_other_encodings_reads_the_same_numbers(tmp_path, encode, what):
    text, t, gx = _table()
    path = tmp_path / "log.csv"
    path.write_bytes(encode(text))  # issue 33 item 15: UTF-16 was a UnicodeDecodeError traceback
    name = "gx (°/s)" if "Latin" in what else "gx"
    [c] = read_channels(path, [name], time="time")
    assert c.times.tolist() == t.tolist() and c.values.tolist() == gx.tolist()
    assert f"({what}, separated by commas)" in c.source and c.warnings == []


# -- a .txt table ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sep", "word"), [(",", "commas"), ("\t", "tabs"), (" ", "spaces"), (";", "semicolons")]
)
def test_a_txt_table_is_read_as_csv_with_a_line_saying_so(tmp_path, sep, word):
    text, t, gx = _table(sep)
    path = tmp_path / "log.txt"
    path.write_text(text)
    [c] = read_channels(path, ["gx"])  # issue 33 item 17: read as CSV without a word
    assert c.values.tolist() == gx.tolist() and c.times.tolist() == t.tolist()
    assert c.warnings == [f"log.txt is read as CSV: a header line, then rows of numbers separated by {word}"]
    csv = tmp_path / "log.csv"
    csv.write_text(_table()[0])
    assert read_channels(csv, ["gx"])[0].warnings == []  # a .csv is what it says


# -- values that are not numbers ------------------------------------------------------------------------
def test_nan_and_inf_values_are_said_and_are_not_lost_samples(tmp_path):
    t = np.arange(20_000) * 0.01
    g = np.random.default_rng(3).normal(0.0, 0.05, t.size)
    g[5000:5010] = np.nan  # issue 33 item 12: "dropout 0.0005 (bursts of 10)", without a word
    g[[7000, 9000]] = [np.inf, -np.inf]
    np.savez(tmp_path / "log.npz", t=t, g=g)
    [c] = read_channels(tmp_path / "log.npz", ["g"])
    assert len(c.values) == 19_988 and np.isfinite(c.values).all()
    assert c.invalid_times.tolist() == [*t[5000:5010].tolist(), t[7000], t[9000]]
    assert c.warnings == [
        "12 of 20000 values of 'g' are not numbers (10 nan, 2 inf), the first 50 s from its start: left out "
        "of every estimate and not counted as lost samples (their time stamps are there; dropout counts only "
        "missing time stamps)"
    ]
    timing = analyse_timing(c.times, c.invalid_times)
    assert (timing.lost, timing.invalid, timing.dropout, timing.slots) == (0, 12, 0.0, 20_000)
    assert timing.sample_interval == pytest.approx(0.01)
    t2 = np.delete(t, [100, 101, 102])  # a real run of three lost samples is still one
    np.savez(tmp_path / "lossy.npz", t=t2, g=np.delete(g, [100, 101, 102]))
    [c2] = read_channels(tmp_path / "lossy.npz", ["g"])
    timing = analyse_timing(c2.times, c2.invalid_times)
    assert (timing.lost, timing.runs.tolist(), timing.invalid) == (3, [3], 12)


def test_a_log_of_sensors_at_several_rates_keeps_each_channels_own_rate(tmp_path):
    # a 100 Hz gyro and a 25 Hz magnetometer in one table: the magnetometer's empty fields are the
    # gyro's rows, not its lost or unusable samples
    t = np.arange(4000) * 0.01
    rng = np.random.default_rng(4)
    mag = np.where(np.arange(4000) % 4 == 0, rng.normal(50.0, 0.3, 4000), np.nan)
    mag[400] = np.nan  # one magnetometer sample that did not arrive
    rows = "".join(f"{a},{b},{'' if np.isnan(c) else c}\n" for a, b, c in zip(
        t.tolist(), rng.normal(size=4000).tolist(), mag.tolist(), strict=True))  # fmt: skip
    (tmp_path / "merged.csv").write_text("time,gyro,mag\n" + rows)
    gyro, m = read_channels(tmp_path / "merged.csv", ["gyro", "mag"])
    assert gyro.warnings == [] and len(m.values) == 999 and len(m.invalid_times) == 0
    assert m.warnings[0].startswith("3001 of 4000 values of 'mag' are not numbers (3001 nan): its values "
                                    "stand on fewer rows than the log has")  # fmt: skip
    timing = analyse_timing(m.times, m.invalid_times)
    assert timing.sample_interval == pytest.approx(0.04) and (timing.lost, timing.invalid) == (1, 0)


# -- channels that never change -------------------------------------------------------------------------
@pytest.mark.parametrize("level", [0.0, -9.81])
def test_a_constant_channel_is_refused_for_being_constant(tmp_path, level):
    t = np.arange(20_000) * 0.01
    np.savez(tmp_path / "flat.npz", t=t, g=np.full(t.size, level))  # issue 33: "20000 samples, too few"
    text = refused(tmp_path / "flat.npz", [f"holds the one value {level:g} in all its 20000 samples: there "
                                           "is no noise to fit", "not a status field"], ("g",))  # fmt: skip
    assert "too few" not in text


# -- the unit a channel's name gives --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("channel", "unit"),
    [
        ("sensor_combined.gyro_rad[0]", "rad/s"),  # issue 33: "0/√Hz" from the index
        ("sensor_combined.accelerometer_m_s2[2]", "m/s^2"),
        ("vehicle_magnetometer.magnetometer_ga[1]", "Ga"),
        ("vehicle_air_data.baro_pressure_pa", "Pa"),
        ("vehicle_air_data.baro_temp_celcius", "°C"),
        ("sensor_gyro.x", "rad/s"),
        ("sensor_accel.z", "m/s^2"),
        ("/imu/data.angular_velocity.z", "rad/s"),
        ("/imu/data.linear_acceleration.x", "m/s^2"),
        ("/mag.magnetic_field.y", "T"),
        ("Gyroscope X (deg/s)", "deg/s"),
        ("acc_z [m/s^2]", "m/s^2"),
        ("imu[2]", None),  # an NPZ column
        ("gyro[0] [deg/s]", "deg/s"),
        ("/imu/data.orientation_covariance[0]", None),
        ("gyro_x", None),
    ],
)
def test_the_unit_comes_from_the_name_never_from_an_index(channel, unit):
    assert unit_of(channel) == unit


def test_every_ulog_channel_gets_a_unit_from_its_field_or_none():
    pyulog = pytest.importorskip("pyulog")
    data = pyulog.ULog(str(DATA / "px4_sensor_combined.ulg")).get_dataset("sensor_combined").data
    for field in data:
        unit = unit_of(f"sensor_combined.{field}")
        assert unit is None or not unit.isdigit(), (field, unit)
    assert unit_of("sensor_combined.gyro_rad[1]") == "rad/s"


# -- any bytes at all -----------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.one_of(
        st.binary(max_size=600),
        st.sampled_from([_table()[0].encode(), _table(" ")[0].encode()]).flatmap(
            lambda good: st.tuples(st.integers(0, len(good)), st.binary(max_size=40)).map(
                lambda cut: good[: cut[0]] + cut[1]  # a good table cut anywhere, then anything
            )
        ),
    ),
    suffix=st.sampled_from([".csv", ".txt", ".tsv", ".npz"]),
)
def test_any_bytes_give_channels_or_one_line(tmp_path, data, suffix):
    path = tmp_path / f"log{suffix}"
    path.write_bytes(data)
    try:
        [c] = read_channels(path, ["gx"])
    except FitError as e:
        assert "\n" not in str(e) and "Fix: " in str(e)
    else:
        assert len(c.times) == len(c.values) >= 3 and np.isfinite(c.values).all()
