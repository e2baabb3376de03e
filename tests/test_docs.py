"""The code blocks of the docs and the README run as written."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(path: Path) -> list[str]:
    text = path.read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize(
    "page",
    [
        "docs/custom_sensors.md",
        "docs/pipeline.md",
        "docs/integration.md",
        "docs/action_latency.md",
        "docs/error_model.md",
        "docs/fit.md",
        "README.md",
    ],
)
def test_code_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # what a snippet writes (e.g. skrl's ./runs) lands in a temp dir
    blocks = python_blocks(ROOT / page)
    assert blocks, f"{page} has no python code block"
    module = types.ModuleType(f"doc_{Path(page).stem}")  # dataclasses need a real module
    sys.modules[module.__name__] = module
    try:
        for block in blocks:
            try:
                exec(compile(block, page, "exec"), module.__dict__)
            except ModuleNotFoundError as e:  # an optional extra (sb3, mujoco, ...) is not installed
                pytest.skip(f"{page}: optional dependency missing: {e.name}")
    finally:
        del sys.modules[module.__name__]
