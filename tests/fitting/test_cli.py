"""`sensorgym fit` on the command line, and the loop it closes: fitted_config.toml (--into) loads as a
config, `sensorgym inspect` estimates back the noise that fit wrote, `sensorgym train` runs on it; a log
or flag it cannot use is one line with the fix and exit code 2."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib

from sensorgym.app.cli import main
from sensorgym.app.config import load_config

pytest.importorskip("matplotlib")  # the figures of sensorgym fit (the plot extra)

LOG = Path(__file__).resolve().parents[1] / "data" / "xio_fusion_sensor_data.csv"
GYRO = ["Gyroscope X (deg/s)", "Gyroscope Y (deg/s)"]
SMALL_TRAIN = """
[env]
id = "Pendulum-v1"
n_envs = 2

[sensors.angle]
type = "StateSensorOptions"
key = "obs"
index = [0, 1]
history_length = 2
noise = 0.05

[algorithm]
timesteps = 128
eval_episodes = 1
kwargs = {n_steps = 64, batch_size = 64, n_epochs = 1}

[sweep]
seeds = [0]
critic = ["symmetric", "asymmetric"]
grid = { "sensors.angle.delay" = [0.0, 0.05] }
"""


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit")
    (out / "train_small.toml").write_text(SMALL_TRAIN)
    capture = pytest.MonkeyPatch()
    lines: list[str] = []
    capture.setattr(sys, "stdout", _Lines(lines))
    try:
        into = str(out / "train_small.toml")
        argv = ["--names", "angle", "--into", into, "--out", str(out), "--envs", "16", "--no-progress"]
        rc = main(["fit", str(LOG), "--channels", *GYRO, *argv])
    finally:
        capture.undo()
    return rc, lines, out


class _Lines:
    def __init__(self, lines: list[str]) -> None:
        self.lines, self.buf = lines, ""

    def write(self, text: str) -> int:
        self.buf += text
        *done, self.buf = self.buf.split("\n")
        self.lines += done
        return len(text)

    def flush(self) -> None:
        pass


def test_fit_writes_its_outputs_and_prints_the_closed_loop_last(fitted):
    rc, lines, out = fitted
    assert rc == 0
    for name in ("fitted.toml", "fitted_config.toml", "fit_report.md", "allan.png", "timing.png"):
        assert (out / name).stat().st_size > 0, name
    assert [re.sub(r":.*", "", line) for line in lines[-2:]] == [f"closed loop {c}" for c in GYRO]
    assert all("within the log's 95% band at 7 of 7 τ" in line for line in lines[-2:])
    table = tomllib.loads((out / "fitted.toml").read_text())["sensors"]["angle"]
    assert table["update_period"] == pytest.approx(0.01008, rel=1e-3)
    assert len(table["noise_density"]) == 2 and table["dropout_burst"] == 2.0
    report = (out / "fit_report.md").read_text()
    assert "not identifiable from this log" in report and "closed loop" in report
    assert "(deg/s)/√Hz" in report and "unit/√Hz" not in report  # the channel's own unit
    assert "  [sensors.angle]: noise_density" in "\n".join(lines)  # what --into changed, printed


def test_ablate_plans_and_builds_the_fitted_config(fitted):
    # `sensorgym ablate --config fitted_config.toml` up to its first run: the config loads as ablate loads
    # it, every sweep cell applies, and the env of a cell builds and steps with the fitted sensor
    pytest.importorskip("stable_baselines3")
    from sensorgym.app.ablation import plan_runs
    from sensorgym.app.config import apply_overrides
    from sensorgym.app.training import config_env_kwargs, make_sensor_env

    _, _, out = fitted
    cfg = load_config(out / "fitted_config.toml")
    runs = plan_runs(cfg)
    assert len(runs) == 4 and {r.cell["sensors.angle.delay"] for r in runs} == {0.0, 0.05}
    cell = apply_overrides(cfg, runs[-1].cell)
    assert (
        cell.sensors["angle"].delay == 0.05
        and cell.sensors["angle"].noise_density == cfg.sensors["angle"].noise_density
    )
    env = make_sensor_env(cell.env.id, cell.sensors, n_envs=2, seed=0, autoreset_mode="NextStep",
                          **config_env_kwargs(cell))  # fmt: skip
    try:
        env.reset(seed=0)
        for _ in range(5):
            env.step(env.action_space.sample())
    finally:
        env.close()


def _reference(t):
    """Band-limited motion after 2 min at rest (the recovery test's reference)."""
    ramp = np.clip((t - 120.0) / 5.0, 0.0, 1.0)
    ramp = ramp * ramp * (3 - 2 * ramp)
    freqs, amps, phases = (0.23, 0.61, 1.3, 2.7), (0.5, 0.3, 0.2, 0.1), (0.1, 1.7, 2.9, 4.0)
    return ramp * sum(a * np.sin(2 * np.pi * f * t + p) for f, a, p in zip(freqs, amps, phases, strict=True))


def test_a_reference_gives_the_delay_through_the_command_line(tmp_path, capsys):
    from .synthetic import Truth, generate

    truth = Truth(random_walk_density=2e-5, bias_instability=0.0)
    delay = 3.3 * truth.sample_interval
    t = np.arange(round(240.0 * truth.rate)) * truth.sample_interval
    times, values = generate(truth, 240.0, seed=4, signal_in=_reference(t - delay))
    np.savez(tmp_path / "moving.npz", t=t, ref=_reference(t), gyro=np.interp(t, times, values))
    rc = main(["fit", str(tmp_path / "moving.npz"), "--channels", "gyro", "--reference", "ref",
               "--static", "0:110",
               "--out", str(tmp_path / "out"), "--envs", "4", "--no-progress"])  # fmt: skip
    text = capsys.readouterr().out
    assert rc == 0 and re.search(r"; delay 0\.01[0-9]+ ± 0\.000[0-9]+ s", text), text
    fitted = tomllib.loads((tmp_path / "out" / "fitted.toml").read_text())["sensors"]["gyro"]
    assert abs(fitted["delay"] - delay) < 0.25 * truth.sample_interval


def test_a_long_log_reports_its_progress(tmp_path, capsys):
    # not a terminal (pytest captures stderr): plain lines, one per tenth of the simulation, as train does
    t = np.arange(60_000) * 0.005
    np.savez(tmp_path / "long.npz", t=t, g=np.random.default_rng(0).normal(0.0, 0.04, len(t)))
    assert main(["fit", str(tmp_path / "long.npz"), "--channels", "g", "--envs", "1",
                 "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    progress = [line for line in lines if line.startswith("  simulated ")]
    assert len(progress) == 10 and progress[-1].startswith("  simulated 60,000 of 60,000 steps (100%)")
    assert lines[-1].startswith("closed loop g:")  # the closed-loop lines stay last


def test_the_fitted_config_keeps_the_source_and_takes_the_options(fitted):
    _, _, out = fitted
    cfg = load_config(out / "fitted_config.toml")
    angle = cfg.sensors["angle"]
    assert angle.key == "obs" and angle.index == (0, 1) and angle.history_length == 2
    assert angle.noise == 0.0 and len(angle.noise_density) == 2  # noise is replaced by its density form
    fitted_table = tomllib.loads((out / "fitted.toml").read_text())["sensors"]["angle"]
    assert list(angle.noise_density) == pytest.approx(fitted_table["noise_density"])


def test_inspect_estimates_back_the_fitted_noise(fitted, capsys, tmp_path):
    _, _, out = fitted
    assert main(["inspect", "--config", str(out / "fitted_config.toml"), "--steps", "800", "--seed", "1",
                 "--out", str(tmp_path / "inspect.png")]) == 0  # fmt: skip
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.strip().startswith("noise std")]
    assert len(rows) == 2 and all(row.rstrip().endswith("ok") for row in rows), rows
    assert "noise_density" in text


@pytest.mark.slow
def test_train_runs_on_the_fitted_config(fitted, capsys, tmp_path):
    pytest.importorskip("stable_baselines3")
    _, _, out = fitted
    assert main(["train", "--config", str(out / "fitted_config.toml"), "--out", str(tmp_path / "run"),
                 "--no-progress"]) == 0  # fmt: skip
    assert "final score" in capsys.readouterr().out


def test_the_training_env_builds_and_steps_with_the_fitted_sensors(fitted):
    # the default-run part of the loop: train's own env constructor, with the fitted sensor
    pytest.importorskip("stable_baselines3")
    from sensorgym.app.training import config_env_kwargs, make_sensor_env

    _, _, out = fitted
    cfg = load_config(out / "fitted_config.toml")
    env = make_sensor_env(
        cfg.env.id, cfg.sensors, n_envs=2, seed=0, autoreset_mode="NextStep", **config_env_kwargs(cfg)
    )
    try:
        env.reset(seed=0)
        for _ in range(20):
            obs, *_ = env.step(env.action_space.sample())
        assert obs["policy"].shape == (2, 4)  # 2 components x history 2
    finally:
        env.close()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--channels", "Gyro Q"], "no channel 'Gyro Q'"),
        (["--channels", GYRO[0], "--static", "5-20"], "is not START:END"),
        (["--channels", GYRO[0], "--static", "0:0.3"], "too short for any estimate"),
        (["--channels", *GYRO, "--names", "a", "b", "c"], "gives 3 names for 2 channels"),
        (["--channels", GYRO[0], "--names", "angle", "--into", "nope.toml"], "no such config file"),
        (
            ["--channels", GYRO[0], "--names", "gyro", "--into", "examples/configs/train.toml"],
            "no [sensors.gyro]",
        ),
        (["--channels", GYRO[0], "--time", "Clock"], "no time column 'Clock'"),
        (["--channels", GYRO[0], "--reference", "Magnetometer X (uT)", "--static", "0:0.5"], "too short"),
    ],
)
def test_a_mistake_is_one_line_with_the_fix(argv, words, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    rc = main(["fit", str(LOG), *argv, "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "Fix:" in err and words in err, err


def test_a_missing_extra_names_the_pip_install(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "allantools", None)
    rc = main(["fit", str(LOG), "--channels", GYRO[0], "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and 'pip install "sensorgym[fit]"' in err and "\n" not in err


# -- logs that are not the tidy CSV fit was written for (issue 33 items 12, 15, 16a, 17) ------------------
def _white(n: int = 4000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(n) * 0.01, np.random.default_rng(seed).normal(0.0, 0.05, n)


def _csv(t: np.ndarray, g: np.ndarray, header: str = "time,g") -> str:
    return header + "\n" + "".join(f"{a},{b}\n" for a, b in zip(t.tolist(), g.tolist(), strict=True))


def _bad_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    t, g = _white()
    (tmp / "random.csv").write_bytes(np.random.default_rng(1).bytes(3000))
    (tmp / "empty.npz").write_bytes(b"")
    (tmp / "random.npz").write_bytes(np.random.default_rng(2).bytes(3000))
    np.savez(tmp / "zeros.npz", t=t, g=np.zeros_like(t))
    np.savez(tmp / "ms.npz", time=t * 1000, g=g)
    return {
        "binary": (tmp / "random.csv", "random.csv: a binary file, not a text table"),
        "0-byte npz": (tmp / "empty.npz", "empty.npz' is empty (0 bytes)"),
        "random npz": (tmp / "random.npz", "random.npz: not an NPZ archive"),
        "all zero": (tmp / "zeros.npz", "holds the one value 0 in all its 4000 samples: there is no noise"),
        "milliseconds": (tmp / "ms.npz", "in milliseconds it is a 100 Hz sensor. Fix: pass --time-unit ms"),
    }


@pytest.mark.parametrize("case", ["binary", "0-byte npz", "random npz", "all zero", "milliseconds"])
def test_a_log_it_cannot_read_is_one_line_naming_the_file(case, tmp_path, capsys):
    path, words = _bad_files(tmp_path)[case]
    rc = main(["fit", str(path), "--channels", "g", "--out", str(tmp_path / "out"), "--no-progress"])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert rc == 2 and "\n" not in err and words in err and "Fix:" in err and "Traceback" not in err, err
    assert captured.out == "" and not (tmp_path / "out").exists()


def test_a_millisecond_time_column_fits_once_its_unit_is_said(tmp_path, capsys):
    path, _ = _bad_files(tmp_path)["milliseconds"]
    rc = main(["fit", str(path), "--channels", "g", "--time-unit", "ms", "--envs", "2", "--no-progress",
               "--out", str(tmp_path / "out")])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "g -> [sensors.g]: T_s 0.01 s, dropout 0;" in out and "warning" not in out, out
    fitted = tomllib.loads((tmp_path / "out" / "fitted.toml").read_text())["sensors"]["g"]
    assert fitted["update_period"] == pytest.approx(0.01)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
def test_a_utf16_export_fits_as_its_utf8_twin(encoding, tmp_path, capsys):
    (tmp_path / "log.csv").write_text(_csv(*_white()), encoding=encoding)
    rc = main(["fit", str(tmp_path / "log.csv"), "--channels", "g", "--envs", "2", "--no-progress",
               "--out", str(tmp_path / "out")])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "g -> [sensors.g]: T_s 0.01 s, dropout 0;" in out, out
    fitted = tomllib.loads((tmp_path / "out" / "fitted.toml").read_text())["sensors"]["g"]
    assert fitted["noise_density"] == pytest.approx(0.005, rel=0.05)  # 0.05 per sample at 100 Hz


def test_a_txt_log_says_what_it_was_read_as(tmp_path, capsys):
    (tmp_path / "log.txt").write_text(_csv(*_white()).replace(",", " "))
    rc = main(["fit", str(tmp_path / "log.txt"), "--channels", "g", "--envs", "2", "--no-progress",
               "--out", str(tmp_path / "out")])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert (
        lines[0] == "warning: log.txt is read as CSV: a header line, then rows of numbers separated by spaces"
    )


def test_nan_values_are_said_and_are_not_dropout(tmp_path, capsys):
    t, g = _white(20_000)
    g[5000:5010] = np.nan  # issue 33: "dropout 0.0005 (bursts of 10)" without a word
    np.savez(tmp_path / "nan.npz", t=t, g=g)
    rc = main(["fit", str(tmp_path / "nan.npz"), "--channels", "g", "--envs", "2", "--no-progress",
               "--out", str(tmp_path / "out")])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0 and lines[0].startswith("warning: 10 of 20000 values of 'g' are not numbers (10 nan), the "
                                           "first 50 s from its start: left out of every estimate and not "
                                           "counted as lost samples")  # fmt: skip
    assert lines[1].startswith("g -> [sensors.g]: T_s 0.01 s, dropout 0, 10 values not numbers;"), lines[1]
    fitted = tomllib.loads((tmp_path / "out" / "fitted.toml").read_text())["sensors"]["g"]
    assert fitted["dropout"] == 0.0 and "dropout_burst" not in fitted


def test_a_ulog_channel_gets_its_unit_from_the_field_name(tmp_path, capsys):
    pytest.importorskip("pyulog")
    log = Path(__file__).resolve().parents[1] / "data" / "px4_sensor_combined.ulg"
    rc = main(["fit", str(log), "--channels", "sensor_combined.gyro_rad[0]",
               "sensor_combined.accelerometer_m_s2[2]", "--envs", "2", "--no-progress",
               "--out", str(tmp_path / "out")])  # fmt: skip
    capsys.readouterr()
    report = (tmp_path / "out" / "fit_report.md").read_text()
    assert rc == 0 and "(rad/s)/√Hz" in report and "(m/s^2)/√Hz" in report  # issue 33: "0/√Hz", "2/√Hz"
    assert "0/√Hz" not in report and "2/√Hz" not in report
