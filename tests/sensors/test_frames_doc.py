"""The code blocks of docs/frames.md run as written (tests/test_docs.py runs the other pages)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "frames.md"


def test_frames_code_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert blocks
    module = types.ModuleType("doc_frames")
    sys.modules[module.__name__] = module
    try:
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
