"""docs/estimators.md's code blocks run as written, and its BROAD table is the one the benchmark script
prints for the in-repo trial (the rows of trial 02)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from .broad import SETTINGS, load_in_repo, run_settings
from .test_broad import PUBLISHED_02

PAGE = Path(__file__).resolve().parents[2] / "docs" / "estimators.md"


def test_code_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) >= 4
    module = types.ModuleType("doc_estimators")  # classes defined in a block need a real module
    sys.modules[module.__name__] = module
    try:
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]


@pytest.mark.slow
def test_the_pages_trial_02_rows_are_measured():
    """The table's "ours" cells for trial 02 are what the in-repo trial gives (4 decimals)."""
    text = PAGE.read_text()
    trial = load_in_repo()
    for label, cls, gains in SETTINGS:
        kwargs = {"earth_field": "c_code"} if label.startswith("madgwick") else {}
        ours = run_settings(trial, cls, [gains], **kwargs)[0]
        pub = " / ".join(f"{v:.4f}" for v in PUBLISHED_02[label])
        row = f"{pub} | {' / '.join(f'{v:.4f}' for v in ours)} |"
        assert row in text, (label, row)
    assert np.isfinite(ours).all()
