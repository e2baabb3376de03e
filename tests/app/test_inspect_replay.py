"""``sensorgym inspect`` on a sensor that replays a real recording (SPEC §5.4; the x-io gyroscope's rest
window, made by ``sensorgym fit --residuals`` from tests/data/xio_fusion_sensor_data.csv): a ``replay`` row
says how many episodes wrapped around the recording's end, which the trace itself confirms; the noise,
bias and drift rows expect what the recording shows, so a correct config is flagged in about 5% of its
tables like any other (sensorgym/app/inspect_replay.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import sensorgym as sg
from sensorgym.app.inspection import compare_channel, format_summary, run_inspect
from sensorgym.core.recording import write_residuals

from .common import INSPECT_SEEDS, MOST_FALSE_TABLES, flagged, load_config_text

pytest.importorskip("allantools")

XIO = Path(__file__).resolve().parents[1] / "data" / "xio_fusion_sensor_data.csv"
GYRO = ["Gyroscope X (deg/s)", "Gyroscope Y (deg/s)", "Gyroscope Z (deg/s)"]

CONFIG = """
[env]
id = "Pendulum-v1"

[sensors.gyro]       # x-io's 10.08 ms recording at Pendulum's 50 ms: every 5th sample (within 1%)
type = "StateSensorOptions"
key = "obs"
index = [0, 1, 2]
replay = "{path}"
bias = 0.1
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    residuals = tmp_path_factory.mktemp("rest") / "xio_gyro.npz"
    sg.fit(XIO, GYRO, names=["gyro"], residuals=residuals, simulate_config=False)
    return load_config_text(tmp_path_factory, CONFIG.format(path=residuals), "replay.toml"), residuals


def _episodes_that_wrap(result, residuals: Path) -> tuple[int, int]:
    """From the trace alone: each episode's first replayed value found in the recording (its offset), and
    whether the episode's samples, 5 recorded samples apart, ran past the recording's end."""
    with np.load(residuals) as z:
        rec = z[GYRO[0]].astype(np.float32)
    c = result.channels.index("gyro[0]")
    error = (result.measured[:, c] - result.gt[:, c]).astype(np.float32) - np.float32(0.1)
    starts = [*np.flatnonzero(result.resets), len(error)]
    wrapped = 0
    for begin, end in itertools.pairwise(starts):
        offset = int(np.argmin(np.abs(rec - error[begin])))
        wrapped += offset + 5 * (end - begin - 1) >= len(rec)
    return wrapped, len(starts) - 1


def test_the_replay_row_counts_the_episodes_that_wrapped(config):
    cfg, residuals = config
    result = run_inspect(cfg, steps=500, seed=0)
    entry = next(e for e in result.summary if e["channel"] == "gyro[0]")
    configured, estimated, _ = entry["rows"]["replay"]
    assert configured == "xio_gyro.npz:Gyroscope X (deg/s), 1553 samples (15.7 s)"
    wrapped, episodes = _episodes_that_wrap(result, residuals)
    assert episodes == 3 and estimated == f"wrapped in {wrapped} of {episodes} episodes"
    assert wrapped > 0  # 200-step episodes reach 1000 of the 1553 samples: most wrap
    text = format_summary(result.summary, 0.05)
    assert f"wrapped in {wrapped} of 3 episodes" in text
    assert any("ran past the recording's end" in note for note in entry["notes"])


def test_a_correct_replay_config_is_rarely_flagged(config):
    cfg, _ = config
    tables = 0
    for seed in range(INSPECT_SEEDS):
        rows = flagged(run_inspect(cfg, steps=400, seed=seed))
        tables += bool(rows)
    assert tables <= MOST_FALSE_TABLES, tables


def test_a_recording_other_than_the_one_replayed_is_flagged(config, tmp_path):
    """The trace of the x-io replay compared with options that replay the same channels three times as
    loud: the noise row differs, in every one of a few traces."""
    cfg, residuals = config
    loud = tmp_path / "loud.npz"
    with np.load(residuals) as z:
        write_residuals(loud, float(z["T_s"]), {c: 3.0 * z[c] for c in GYRO})
    wrong = sg.StateSensorOptions(key="obs", index=(0, 1, 2), replay=str(loud), bias=0.1)
    for seed in range(3):
        result = run_inspect(cfg, steps=400, seed=seed)
        entry = next(e for e in result.summary if e["channel"] == "gyro[0]")
        rows = compare_channel(wrong, 0, entry, 0.05, z=result.z)["rows"]
        assert rows["noise std"][2].startswith("differs"), rows["noise std"]
        assert entry["rows"]["noise std"][2] == "ok"
