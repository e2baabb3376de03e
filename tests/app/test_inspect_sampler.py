"""`sensorgym inspect`'s sampler figure (issue 15): for sensors with ``update_period``/``dropout`` it draws
the samples taken, the due samples lost and the reading's age against ground truth; its markers match
the sampler."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from sensorgym.app.cli import main
from sensorgym.app.config import load_config
from sensorgym.app.inspection import plot_sampling, run_inspect, sampling_path

from ..core.test_sampler_rate import due_steps

CONFIG = """
[env]
id = "Pendulum-v1"
[sensors.angle]
type = "StateSensorOptions"
key = "obs"
index = [0, 1]
noise = 0.01
update_period = 0.15     # every 3rd control step of 0.05 s
update_phase = 0.05
dropout = 0.2
[sensors.vel]
type = "StateSensorOptions"
key = "obs"
index = [2]
update_period = { dist = "Choice", values = [0.1, 0.12] }   # 2.4 steps: the 3, 2, 3, 2 ... pattern
delay = 0.05
[sensors.plain]           # no sampler options: no sampler panel
type = "StateSensorOptions"
key = "obs"
index = [2]
"""
DT = 0.05
STEPS = 450  # Pendulum truncates at 200 steps: three episodes (NEXT_STEP autoreset)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def inspected(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inspect")
    (folder / "c.toml").write_text(CONFIG)
    result = run_inspect(load_config(folder / "c.toml"), steps=STEPS, seed=3, out=folder / "inspect.png")
    return folder, result


def test_the_sampler_figure_is_written_beside_the_traces(inspected):
    folder, result = inspected
    assert result.figure == folder / "inspect.png"
    assert result.sampler_figure == folder / "inspect_sampler.png" == sampling_path(result.figure)
    image = matplotlib.image.imread(result.sampler_figure)
    assert image.shape[0] > 300 and image.shape[1] > 600
    assert list(result.sampling) == ["angle", "vel"]  # only sensors with update_period/dropout


def test_episode_steps_are_those_of_the_env(inspected):
    _, result = inspected
    steps = result.sampling["angle"]["step"]
    expected = np.r_[np.arange(201), np.arange(201), np.arange(STEPS + 1 - 402)]
    np.testing.assert_array_equal(steps, expected)


def test_markers_match_the_sampler_and_the_ages(inspected, tmp_path):
    _, result = inspected
    counts = plot_sampling(result, tmp_path / "again.png")
    d = result.sampling["angle"]
    age = d["age"]
    # no delay: a reading is fresh exactly when its age is 0
    fresh_from_age = np.isclose(age, 0.0, atol=1e-7)
    np.testing.assert_array_equal(d["fresh"], fresh_from_age)
    # due steps by SPEC 2.8's rule, written out in test_sampler_rate, per episode
    due = np.zeros(len(age), bool)
    starts = np.flatnonzero(d["step"] == 0)
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(age)
        for step in due_steps(0.15, 0.05, DT, end - start - 1):
            due[start + step] = True
    np.testing.assert_array_equal(d["due"], due)
    dropped = due & ~fresh_from_age
    np.testing.assert_array_equal(d["dropped"], dropped)
    assert counts["angle"] == {
        "fresh": int(fresh_from_age.sum()),
        "dropped": int(dropped.sum()),
        "due": due.sum(),
    }
    assert counts["angle"]["dropped"] > 0 and counts["angle"]["fresh"] > 0
    # about 20% of the due samples after a reset step are lost (the reset sample never is)
    lost = dropped.sum() / (due.sum() - len(starts))
    assert 0.1 < lost < 0.3
    # between samples the reading is held bit for bit; a lost sample adds one period to the age
    held = ~d["fresh"]
    np.testing.assert_array_equal(d["measured"][1:][held[1:]], d["measured"][:-1][held[1:]])
    last = np.maximum.accumulate(np.where(d["fresh"], np.arange(len(age)), 0))
    np.testing.assert_allclose(age, (np.arange(len(age)) - last) * DT, atol=1e-6)
    assert age.max() >= 2 * 0.15 - 1e-6  # a lost sample: the reading is at least one period older


def test_delayed_sensor_fresh_samples_show_one_step_later(inspected, tmp_path):
    _, result = inspected
    counts = plot_sampling(result, tmp_path / "again.png")
    d = result.sampling["vel"]
    # delay 1 step: the step after a sample was taken, the reading shows it with an age of one step
    # (except right after a reset, where the delayed read shows the reset sample)
    after = np.flatnonzero(d["fresh"][:-1]) + 1
    after = after[d["step"][after] != 0]
    np.testing.assert_allclose(d["age"][after], DT, atol=1e-6)
    assert counts["vel"]["dropped"] == 0 and counts["vel"]["fresh"] == counts["vel"]["due"]
    # 0.1 s = 2 steps or 0.12 s = 2.4 steps (3, 2, 3, 2, ...): never more than 3 steps apart in an episode
    gaps = np.diff(np.flatnonzero(d["fresh"]))
    assert set(gaps.tolist()) <= {1, 2, 3}


def test_cli_writes_and_names_the_sampler_figure(tmp_path, capsys):
    (tmp_path / "c.toml").write_text(CONFIG)
    assert main(["inspect", "--config", str(tmp_path / "c.toml"), "--out", "out/x.png", "--steps", "60"]) == 0
    out = capsys.readouterr().out
    assert "sampler figure: out/x_sampler.png" in out and Path("out/x_sampler.png").exists()
    # a config without sampler options writes no sampler figure
    plain = CONFIG.split("[sensors.angle]")[0] + CONFIG[CONFIG.index("[sensors.plain]") :]
    (tmp_path / "p.toml").write_text(plain)
    assert main(["inspect", "--config", str(tmp_path / "p.toml"), "--out", "p.png", "--steps", "20"]) == 0
    assert "sampler figure" not in capsys.readouterr().out and not Path("p_sampler.png").exists()


def test_the_summary_notes_the_hold_for_sampled_sensors_only(inspected):
    _, result = inspected
    notes = {row["channel"]: " ".join(row["notes"]) for row in result.summary}
    assert "holds each sample" in notes["angle[0]"] and "holds each sample" in notes["vel"]
    assert "holds each sample" not in notes["plain"]
