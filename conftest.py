"""pytest configuration: skip the doctests of modules whose optional dependency is not installed."""

import importlib.util
import os

import pytest
from _pytest.doctest import DoctestItem

# headless rendering for the camera sensors; must be set before mujoco is first imported
os.environ.setdefault("MUJOCO_GL", "egl")

_OPTIONAL = {
    "sensorgym/integrations/sb3.py": "stable_baselines3",
    "sensorgym/integrations/sb3_checkpoint.py": "stable_baselines3",
    "sensorgym/app/training.py": "stable_baselines3",
    "sensorgym/integrations/rsl_rl.py": "rsl_rl",
    "sensorgym/integrations/skrl.py": "skrl",
    "sensorgym/integrations/rl_games.py": "rl_games",
}

collect_ignore = [path for path, dep in _OPTIONAL.items() if importlib.util.find_spec(dep) is None]


@pytest.fixture(autouse=True)
def _doctests_write_into_a_temp_dir(request, tmp_path, monkeypatch):
    """Doctests run in a temp working directory: what an example writes (skrl's ``./runs``, ...) must not
    land in the checkout."""
    if isinstance(request.node, DoctestItem):
        monkeypatch.chdir(tmp_path)
