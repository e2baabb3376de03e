"""Old module paths forward to the modules' new homes (the package was split into layers)."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
import warnings

import pytest

import sensorgym
from sensorgym._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_path_forwards_to_its_new_module(old):
    new = importlib.import_module(MOVED[old])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sys.modules.pop(old, None)
        alias = importlib.import_module(old)
    assert any(issubclass(w.category, DeprecationWarning) and MOVED[old] in str(w.message) for w in caught)
    assert alias is new and alias.__name__ == MOVED[old] and alias.__spec__.name == MOVED[old]


def test_patching_an_old_path_patches_the_module_itself(monkeypatch):
    from sensorgym.app import cli

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("sensorgym.cli")
    monkeypatch.setattr(old, "EXIT_USAGE", 99, raising=False)
    assert cli.EXIT_USAGE == 99


def test_new_paths_do_not_warn():
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import sensorgym, sensorgym.core.manager, sensorgym.integrations.sb3, sensorgym.app.training\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_pickle_written_with_an_old_class_path_loads():
    # SB3 checkpoints store the policy class by module path; one saved before the split names the old path.
    old = b"sensorgym.randomization"
    # protocol 0 names the class on a text line, so the module path can be rewritten in place
    payload = pickle.dumps(sensorgym.Uniform(0.0, 1.0), protocol=0).replace(
        b"sensorgym.core.randomization", old
    )
    assert old + b"\n" in payload
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loaded = pickle.loads(payload)
    assert type(loaded) is sensorgym.Uniform and (loaded.low, loaded.high) == (0.0, 1.0)
