"""The package's layers depend one way (issue 14): engine <- catalog <- Gymnasium layer <- RL adapters <-
app, with envs beside the Gymnasium layer. Read from the source (imports anywhere in a module, lazy ones
included), so a leak is caught even when it only runs on a rare path."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sensorgym"

ENGINE = {
    "accel", "delay_line", "imperfections", "manager", "memory", "metadata", "options", "parameters",
    "randomization", "ring", "rng",
    "sampler", "sensor", "storage", "values",
}  # fmt: skip
ADAPTERS = {"adapters", "sb3", "sb3_checkpoint", "rsl_rl", "skrl", "rl_games"}
APP = {"cli", "config", "configs", "training", "ablation", "inspection", "demo", "__main__"}
THIRD_PARTY_RL = ("stable_baselines3", "rsl_rl", "skrl", "rl_games", "ray")


def layer(module: str) -> str:
    parts = module.split(".")[1:]  # without "sensorgym"
    if not parts or parts == ["__init__"]:
        return "package"
    head = parts[0]
    if head in ENGINE:
        return "engine"
    if head == "sensors":
        return "catalog"
    if head == "wrappers":
        return "adapters" if len(parts) > 1 and parts[1] in ADAPTERS else "gym"
    if head == "checkpoint":
        return "gym"  # the vector env snapshot
    if head == "envs":
        return "envs"
    if head in APP:
        return "app"
    raise AssertionError(f"{module}: no layer assigned; add it to tests/test_layers.py")


ALLOWED = {
    "engine": {"engine"},
    "catalog": {"engine", "catalog"},
    "gym": {"engine", "catalog", "gym"},
    "adapters": {"engine", "catalog", "gym", "adapters"},
    "envs": {"engine", "catalog", "gym", "envs"},
    "app": {"engine", "catalog", "gym", "adapters", "envs", "app"},
    "package": {"engine", "catalog", "envs"},  # `import sensorgym` registers the envs
}
FORBIDDEN_THIRD_PARTY = {
    "engine": ("gymnasium", "mujoco", *THIRD_PARTY_RL),
    "catalog": ("gymnasium", *THIRD_PARTY_RL),
    "gym": THIRD_PARTY_RL,
    "envs": THIRD_PARTY_RL,
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


def test_the_checker_sees_a_leak():
    assert layer("sensorgym.wrappers.sb3") == "adapters" and "app" not in ALLOWED["adapters"]
    leak = "def f():\n    from ..training import save_checkpoint\n"
    tmp = PACKAGE.parent / "tests" / "_layer_probe.py"
    try:
        tmp.write_text(leak)
        assert "sensorgym.training" in imports_of("sensorgym.wrappers.probe", tmp)
    finally:
        tmp.unlink()
