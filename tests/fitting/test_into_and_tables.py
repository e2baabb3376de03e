"""What `fit --into` writes and refuses, and one table as one sensor (issue 27 audit items 1, 2, 5, 8, 10):
a [sweep] that varies a key the fit decides is refused before the work; fitted_config.toml's tables are
the sensor the closed loop simulated (every term the fit estimates fitted or removed, the rest kept and
listed); an IMU's fields share one rate and one sampler; names and --out are checked first."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import tomllib

import sensorgym as sg
from sensorgym.app.config import load_config, parse_config
from sensorgym.fitting import api
from sensorgym.fitting.config_out import merge_into, owned_keys
from sensorgym.fitting.errors import FitError

ROOT = Path(__file__).resolve().parents[2]
ABLATE = ROOT / "examples" / "configs" / "ablate.toml"


def _white_log(path: Path, rate: float = 100.0, seconds: float = 120.0, columns=("gx", "gy")) -> Path:
    rng = np.random.default_rng(0)
    t = np.arange(round(rate * seconds)) / rate
    np.savez(path, t=t, **{c: rng.normal(0.0, 0.02 * (i + 1), len(t)) for i, c in enumerate(columns)})
    return path


def _reject(raw):
    parse_config(raw)  # raises ConfigError (a ValueError) for a config train would refuse


# -- item 1: a sweep over a key the fit decides ------------------------------------------------------------
def test_a_sweep_over_a_fitted_key_is_refused_before_the_work(tmp_path, monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("the log was read: the config should have been refused first")

    monkeypatch.setattr(api, "read_channels", no_work)
    with pytest.raises(FitError) as e:
        api.fit(tmp_path / "log.npz", ["gx", "gy"], names=["angle"], into=ABLATE, out=tmp_path / "out")
    message = str(e.value)
    assert "'sensors.angle.noise'" in message and "Fix:" in message and "\n" not in message
    assert "noise_density" in message  # why: the two cannot coexist
    assert not (tmp_path / "out" / "fitted_config.toml").exists()


def test_sweep_list_cells_and_field_keys_are_seen_too():
    raw = {
        "sensors": {"imu": {"type": "IMUOptions", "body": "pole"}},
        "sweep": {"list": [{"sensors.imu.gyro_bandwidth": 20.0}, {"sensors.imu.acc_noise": 0.1}]},
    }
    with pytest.raises(FitError, match=r"sensors\.imu\.gyro_bandwidth"):
        merge_into(raw, {"imu.gyro": {}}, {"imu.gyro": 3}, "c.toml")
    merge_into(raw, {"imu.mag": {}}, {"imu.mag": 3}, "c.toml")  # other fields' keys are not the fit's


def test_a_config_that_would_not_load_is_never_written(tmp_path):
    log = _white_log(tmp_path / "log.npz")
    config = tmp_path / "c.toml"
    config.write_text('[sensors.angle]\ntype = "StateSensorOptions"\nkey = "obs"\nindex = [0, 1]\n')
    calls = []

    def refuse_the_second(raw):
        calls.append(raw)
        if len(calls) == 2:
            raise FitError("would not load", "see why")

    with pytest.raises(FitError, match="would not load"):
        api.fit(log, ["gx", "gy"], names=["angle"], into=config, out=tmp_path / "out", simulate_config=False,
                check_config=refuse_the_second)  # fmt: skip
    assert len(calls) == 2 and not (tmp_path / "out" / "fitted_config.toml").exists()


# -- item 2: fitted_config.toml is the sensor the fit simulated --------------------------------------------
USER_TABLE = """
[env]
id = "Pendulum-v1"

[sensors.angle]
type = "StateSensorOptions"
key = "obs"
index = [0, 1]
history_length = 2
noise = 0.05
random_walk = 0.01
resolution = 0.5
bandwidth = 5.0
bias_instability = 0.2
bias_correlation_time = 3.0
delay = 0.05
bias = 0.1
scale_factor = 0.01
"""


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("into")
    log = _white_log(folder / "log.npz")
    (folder / "user.toml").write_text(USER_TABLE)
    result = api.fit(log, ["gx", "gy"], names=["angle"], into=folder / "user.toml", out=folder / "out",
                     simulate_config=False, check_config=_reject)  # fmt: skip
    return result, folder / "out"


def test_every_term_the_fit_estimates_is_the_fitted_value_or_gone(merged):
    _, out = merged
    fitted = tomllib.loads((out / "fitted.toml").read_text())["sensors"]["angle"]
    written = tomllib.loads((out / "fitted_config.toml").read_text())["sensors"]["angle"]
    # the closed loop simulated exactly fitted.toml's options: the config's table holds the same ones
    owned = set(owned_keys())
    assert {k: v for k, v in written.items() if k in owned} == fitted
    for key in (
        "noise",
        "random_walk",
        "resolution",
        "bandwidth",
        "bias_instability",
        "bias_correlation_time",
    ):
        assert key not in written, key  # a white log: none of these is in fitted.toml
    # and as the options train builds: the fitted error model, the source and the unfittable terms
    angle = load_config(out / "fitted_config.toml").sensors["angle"]
    reference = sg.StateSensorOptions(key="obs", index=(0, 1), **fitted)
    for f in dataclasses.fields(sg.StateSensorOptions):
        if f.name in owned:
            assert getattr(angle, f.name) == getattr(reference, f.name), f.name
    assert (angle.delay, angle.bias, angle.scale_factor, angle.history_length) == (0.05, 0.1, 0.01, 2)


def test_removed_and_kept_terms_are_listed(merged):
    result, out = merged
    removed = " ".join(result.into_removed["angle"])
    for key in (
        "noise (replaced by noise_density)",
        "random_walk (not identifiable",
        "resolution",
        "bandwidth",
    ):
        assert key in removed, key
    assert result.into_kept["angle"] == ["delay", "bias", "scale_factor"]
    report = (out / "fit_report.md").read_text()
    assert "kept from" in report and "not fitted: delay, bias, scale_factor" in report
    assert "random_walk (not identifiable from this log)" in report


def test_merging_into_an_imu_table_loads(tmp_path):
    log = _white_log(tmp_path / "imu.npz", seconds=60.0, columns=("gx", "gy", "gz"))
    config = tmp_path / "imu.toml"
    config.write_text(
        '[env]\nid = "InvertedPendulum-v5"\n\n[sensors.imu]\ntype = "IMUOptions"\nbody = "pole"\n'
        "noise = 0.02\ngyro_noise = 0.01\nacc_bias = 0.3\n"
    )
    out = tmp_path / "out"
    api.fit(log, ["gx", "gy", "gz"], names=["imu.gyro"], into=config, out=out, simulate_config=False,
            check_config=_reject)  # fmt: skip
    imu = load_config(out / "fitted_config.toml").sensors["imu"]
    fitted = tomllib.loads((out / "fitted.toml").read_text())["sensors"]["imu"]
    np.testing.assert_allclose(imu.noise_density[3:6], fitted["gyro_noise_density"])
    # the table's 9-component noise no longer applies to the fitted field; the others keep it
    assert tuple(imu.noise[3:6]) == (0.0,) * 3 and tuple(imu.noise[:3] + imu.noise[6:]) == (0.02,) * 6
    assert imu.update_period == fitted["update_period"] and imu.acc_bias == 0.3


# -- item 5: one table, one rate, one sampler --------------------------------------------------------------
def _two_rates(path: Path) -> Path:
    rng = np.random.default_rng(1)
    t = np.arange(24_000) * 0.005  # gx at 200 Hz, ax at 100 Hz (every other row empty)
    ax = rng.normal(0.0, 0.1, len(t))
    ax[1::2] = np.nan
    np.savetxt(path, np.column_stack([t, rng.normal(0.0, 0.01, len(t)), ax]), delimiter=",",
               header="t,gx,ax", comments="")  # fmt: skip
    return path


def test_imu_fields_at_different_rates_are_refused(tmp_path):
    with pytest.raises(FitError) as e:
        api.fit(_two_rates(tmp_path / "mixed.csv"), ["gx", "ax"], names=["imu.gyro", "imu.acc"])
    assert "an IMU has one update_period" in str(e.value) and "\n" not in str(e.value)


def test_an_imus_fields_are_one_simulated_sensor(tmp_path):
    rng = np.random.default_rng(2)
    t = np.delete(np.arange(12_000) * 0.01, rng.choice(12_000, 240, replace=False)[1:])  # shared losses
    np.savez(tmp_path / "imu.npz", t=t, gx=rng.normal(0, 0.01, len(t)), ax=rng.normal(0, 0.1, len(t)))
    result = api.fit(tmp_path / "imu.npz", ["gx", "ax"], names=["imu.gyro", "imu.acc"], envs=2)
    assert list(result.sim.timing) == ["imu"]  # one sampler: the fields are lost together
    assert result.options["imu.gyro"]["dropout"] == result.options["imu.acc"]["dropout"]


# -- item 8 and 10: checked before the work -----------------------------------------------------------------
@pytest.mark.parametrize("names", [["bad name!"], ["a.b.c"], ["ok", "9x"]])
def test_every_name_is_checked(names):
    with pytest.raises(FitError, match="is not a table name"):
        api._names(["x", "y"], names)


def test_an_out_that_is_a_file_is_refused_before_the_work(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    monkeypatch.setattr(api, "read_channels", lambda *a, **k: pytest.fail("the log was read first"))
    with pytest.raises(FitError, match="is a file, not a folder"):
        api.fit(tmp_path / "log.npz", ["gx"], out=tmp_path / "afile")


def test_a_static_window_past_the_end_names_the_end(tmp_path):
    log = _white_log(tmp_path / "log.npz", seconds=60.0)
    with pytest.raises(FitError, match=r"the log ends \(59.99 s from its first time stamp\)"):
        api.fit(log, ["gx"], static="200:300", simulate_config=False)
    with pytest.raises(FitError, match=r"the log ends at 59.99 s"):
        api.fit(log, ["gx"], static="59.5:300", simulate_config=False)


def test_a_log_in_motion_throughout_is_warned_of(tmp_path):
    # as /tmp/audit_27/bad/moving.csv: a 4.8 Hz shake that grows for 40 s; the finder still returns its
    # quietest stretch, whose Allan deviation no error model explains
    t = np.arange(4000) * 0.01
    moving = 0.1 * t * np.sin(2 * np.pi * 4.8 * t) + np.random.default_rng(3).normal(0, 0.01, len(t))
    np.savez(tmp_path / "moving.npz", t=t, gx=moving)
    result = api.fit(tmp_path / "moving.npz", ["gx"], simulate_config=False)
    assert result.warnings and "not demonstrably at rest" in result.warnings[0]


# -- item 11: the figures ------------------------------------------------------------------------------------
def test_the_timing_figure_labels_its_axes_and_a_lossless_log_warns_nothing(tmp_path, monkeypatch):
    import warnings

    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    labels: dict[str, list[str]] = {}
    save = Figure.savefig

    def record(fig, path, *args, **kwargs):
        labels[Path(path).name] = [ax.get_ylabel() for ax in fig.axes if ax.axison]
        return save(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", record)
    log = _white_log(tmp_path / "lossless.npz", seconds=60.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # matplotlib's "No artists with labels found"
        api.fit(log, ["gx", "gy"], names=["gyro"], out=tmp_path / "out", envs=2)
    assert labels["timing.png"] == ["fraction of intervals (density)", "fraction of runs"]
    assert all(labels["allan.png"])
