"""The package's layers depend one way (issue 14): engine <- estimators <- catalog <- Gymnasium layer <- RL
adapters <- app, with envs beside the Gymnasium layer and fitting (issue 27: `sensorgym fit`) on the catalog.
Read from the source (imports anywhere in a module, lazy ones included), so a leak is caught even when it only
runs on a rare path."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sensorgym"

THIRD_PARTY_RL = ("stable_baselines3", "rsl_rl", "skrl", "rl_games", "ray")
LAYERS = {"core": "engine", "estimators": "estimators", "sensors": "catalog", "wrappers": "gym",
          "integrations": "adapters", "app": "app", "envs": "envs", "fitting": "fitting"}  # fmt: skip


def layer(module: str) -> str:
    parts = module.split(".")[1:]  # without "sensorgym"
    if not parts or parts[0] in ("__init__", "__main__", "_moved"):
        return "app" if parts[:1] == ["__main__"] else "package"
    if parts[0] in LAYERS:
        return LAYERS[parts[0]]
    raise AssertionError(
        f"{module}: no layer assigned; put it in a subpackage or add it to tests/test_layers.py"
    )


ALLOWED = {
    "engine": {"engine"},
    # attitude estimators (issue 35): numpy/torch array code on the engine's executors, below the catalog
    "estimators": {"engine", "estimators"},
    "catalog": {"engine", "estimators", "catalog"},
    "gym": {"engine", "estimators", "catalog", "gym"},
    "adapters": {"engine", "estimators", "catalog", "gym", "adapters"},
    "envs": {"engine", "estimators", "catalog", "gym", "envs"},
    "app": {"engine", "estimators", "catalog", "gym", "adapters", "envs", "fitting", "app"},
    # `sensorgym fit` (issue 27): log readers, Allan deviation and the model fit, simulated on the engine
    "fitting": {"engine", "estimators", "catalog", "fitting"},
    "package": {"engine", "estimators", "catalog", "envs", "fitting", "package"},  # registers the envs
}
FORBIDDEN_THIRD_PARTY = {
    "engine": ("gymnasium", "mujoco", *THIRD_PARTY_RL),
    "estimators": ("gymnasium", "mujoco", *THIRD_PARTY_RL),
    "catalog": ("gymnasium", *THIRD_PARTY_RL),
    "gym": THIRD_PARTY_RL,
    "envs": THIRD_PARTY_RL,
    "fitting": ("gymnasium", *THIRD_PARTY_RL),
}


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        out.append((".".join(rel.parts), path))
    return out


def imports_of(module: str, path: Path) -> set[str]:
    package = module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.add(node.module or "")
                continue
            base = package[: len(package) - node.level + 1]
            if node.module:
                found.add(".".join([*base, node.module]))
            else:  # from . import x
                found.update(".".join([*base, alias.name]) for alias in node.names)
    return found


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_imports_go_down_the_layers(module, path):
    own = layer(module)
    for name in sorted(imports_of(module, path)):
        top = name.split(".")[0]
        if top == "sensorgym":
            target = layer(name) if name != "sensorgym" else "package"
            assert target in ALLOWED[own], f"{module} ({own}) imports {name} ({target}): a layer above"
        else:
            assert top not in FORBIDDEN_THIRD_PARTY.get(own, ()), f"{module} ({own}) imports {name}"


def test_the_checker_sees_a_leak(tmp_path):
    assert layer("sensorgym.integrations.sb3") == "adapters" and "app" not in ALLOWED["adapters"]
    leak = "def f():\n    from ..app.training import save_checkpoint\n"
    probe = tmp_path / "_layer_probe.py"  # never in the checkout: another run or a crash would leave it there
    probe.write_text(leak)
    assert "sensorgym.app.training" in imports_of("sensorgym.integrations.probe", probe)


def _module_of(name: str, known: set[str]) -> str | None:
    """The module file an imported name lies in (a package is its ``__init__``; ``from . import attr``
    is the package's), or None outside the package."""
    parts = name.split(".")
    while parts and parts[0] == "sensorgym":
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        if f"{candidate}.__init__" in known:
            return f"{candidate}.__init__"
        parts = parts[:-1]
    return None


def import_circles() -> list[list[str]]:
    """The package's import circles (strongly connected modules), every import counted: top-level, lazy
    and type-only (``if TYPE_CHECKING:``) ones alike."""
    known = {m for m, _ in modules()}
    graph = {
        m: sorted({t for name in imports_of(m, p) if (t := _module_of(name, known)) and t != m})
        for m, p in modules()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles():
    """Issue 25: zero circles, type-only imports included (a component takes the narrow protocol of
    sensorgym.core.protocols, not the module above it)."""
    assert import_circles() == []


def test_the_circle_finder_sees_one(monkeypatch):
    real = imports_of

    def with_back_edge(module: str, path: Path) -> set[str]:
        found = real(module, path)
        return found | {"sensorgym.core.manager"} if module == "sensorgym.core.options" else found

    monkeypatch.setitem(globals(), "imports_of", with_back_edge)
    circles = import_circles()
    assert any({"sensorgym.core.options", "sensorgym.core.manager"} <= set(c) for c in circles), circles
