"""`sensorgym train --resume`: a run checkpointed mid-episode and resumed in a fresh process sees
exactly the observations (and takes exactly the actions) of an uninterrupted run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from .common import tiny_toml

ROOT = Path(__file__).resolve().parents[2]
# the shared tiny config with jitter, noise drawn per episode, the critic reading it, two epochs
CONFIG = (
    tiny_toml(timesteps=1024, extra="[critic]\nrandomization = true\n")
    .replace("delay = 0.05\n", "delay = 0.05\njitter = 0.05\n")
    .replace("noise = 0.05", 'noise = { dist = "LogUniform", low = 0.01, high = 0.1 }')
    .replace("n_epochs = 1", "n_epochs = 2")
)

SCRIPT = """
import sys, numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from sensorgym.app.config import load_config
from sensorgym.app.training import train_from_config

class Record(BaseCallback):
    def __init__(self):
        super().__init__()
        self.rows = []
    def _on_step(self):
        obs = self.locals["new_obs"]
        self.rows.append((self.num_timesteps, obs["policy"].copy(), obs["critic"].copy(),
                          np.asarray(self.locals["actions"]).copy()))
        return True

cfg_path, out, timesteps, dump = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[5]
resume = sys.argv[4] == "1"
rec = Record()
train_from_config(load_config(cfg_path), out, progress_bar=False, timesteps=timesteps, checkpoint_every=512,
                  resume=resume, callback=rec)
np.savez(dump, steps=np.array([r[0] for r in rec.rows]), policy=np.stack([r[1] for r in rec.rows]),
         critic=np.stack([r[2] for r in rec.rows]), actions=np.stack([r[3] for r in rec.rows]))
"""


def _run(tmp_path: Path, out: str, timesteps: int, resume: bool, dump: str) -> dict:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MUJOCO_GL": "egl"}
    args = [
        str(tmp_path / "c.toml"),
        str(tmp_path / out),
        str(timesteps),
        "1" if resume else "0",
        str(tmp_path / dump),
    ]
    subprocess.run([sys.executable, str(script), *args], check=True, env=env, timeout=600)
    return dict(np.load(tmp_path / dump))


def test_resume_continues_the_observation_stream_bit_identically(tmp_path):
    (tmp_path / "c.toml").write_text(CONFIG)
    full = _run(tmp_path, "full", 1024, False, "full.npz")  # uninterrupted (checkpoints along the way)
    _run(tmp_path, "split", 512, False, "first.npz")  # stops at 512 steps: mid-episode (256 per env)
    assert (tmp_path / "split" / "checkpoint" / "sensors.pt").exists()
    resumed = _run(tmp_path, "split", 1024, True, "resumed.npz")  # a fresh process continues
    after = full["steps"] > 512
    assert resumed["steps"][0] == full["steps"][after][0] and len(resumed["steps"]) == after.sum()
    for key in ("policy", "critic", "actions"):
        np.testing.assert_array_equal(resumed[key], full[key][after], err_msg=key)
