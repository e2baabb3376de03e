"""Issue 11.12: loading a checkpoint ran code embedded in it (``torch.load(weights_only=False)``).

A real checkpoint is written with ``save_checkpoint``; then its ``sensors.pt`` or ``state.pt`` is
replaced by a file carrying a pickled payload that would create a marker file when unpickled. Loading
must refuse it with a ``ValueError`` naming the file, and the payload must never run."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

pytest.importorskip("stable_baselines3")
from stable_baselines3 import PPO

import sensorgym as sg
from sensorgym.app.training import load_checkpoint, save_checkpoint
from sensorgym.integrations.sb3 import SB3VecEnv
from sensorgym.wrappers import make_sensor_vec

SENSORS = {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.05, delay=0.05)}


def _env() -> SB3VecEnv:
    return SB3VecEnv(make_sensor_vec("Pendulum-v1", 2, SENSORS, autoreset_mode="SameStep", seed=0))


class _Payload:
    """Unpickling it creates ``marker``: the proof that code from the file ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


@pytest.mark.parametrize("file", ["sensors.pt", "state.pt"])
def test_a_tampered_checkpoint_is_refused_and_its_code_never_runs(tmp_path, file):
    model = PPO("MultiInputPolicy", _env(), n_steps=16, batch_size=16, seed=0, device="cpu").learn(32)
    folder = tmp_path / "ckpt"
    save_checkpoint(folder, model, model.get_env())
    load_checkpoint(folder, _env())  # the untampered checkpoint loads

    marker = tmp_path / "code_ran"
    original = torch.load(folder / file, weights_only=True)
    tampered = {**original, "payload": _Payload(marker)}
    torch.save(tampered, folder / file, pickle_module=pickle)
    with pytest.raises(ValueError, match=rf"{file}: refused"):
        load_checkpoint(folder, _env())
    assert not marker.exists()
