"""The package, the docs and the README describe their rules themselves or point to docs/: no references
to SPEC sections or DESIGN.md, which are not shipped with the package."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import sensorgym

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(sensorgym.__path__, "sensorgym.")
    if not m.name.endswith(("_moved", "__main__"))
)
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
UNSHIPPED = re.compile(r"\bSPEC\b|DESIGN\.md")


@pytest.mark.parametrize("name", MODULES)
def test_no_references_to_unshipped_documents(name):
    try:
        module = importlib.import_module(name)
    except ImportError as e:  # an optional RL library is missing
        pytest.skip(str(e))
    text = Path(module.__file__).read_text()
    hits = [line.strip() for line in text.splitlines() if UNSHIPPED.search(line)]
    assert not hits, hits


@pytest.mark.parametrize("name", DOCS)
def test_docs_do_not_point_at_unshipped_documents(name):
    hits = [line.strip() for line in (ROOT / name).read_text().splitlines() if UNSHIPPED.search(line)]
    assert not hits, hits
