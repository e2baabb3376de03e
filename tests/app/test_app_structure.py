"""app/ as small commands (issue 34 item 5): one module per subcommand with its parser section and its run,
the options several subcommands share declared once, no function over 80 lines (tools/function_sizes.py),
and the engine read through its public surface only."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "sensorgym" / "app"


def _tool():
    spec = importlib.util.spec_from_file_location("function_sizes", ROOT / "tools" / "function_sizes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_function_in_app_is_over_80_lines():
    long = _tool().over(80, APP)
    assert long == [], [f"{r['module']}:{r['line']} {r['name']} ({r['lines']} lines)" for r in long]


def test_function_sizes_measures_methods_and_nested_functions(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    body = "\n".join(f"        x{i} = {i}" for i in range(5))
    (package / "a.py").write_text(
        f"def short():\n    return 1\n\n\nclass K:\n    def method(self):\n{body}\n\n"
        f"        def inner():\n            return 2\n\n        return inner\n"
    )
    (package / "sub" / "b.py").write_text("async def waits():\n" + "\n".join(["    pass"] * 9) + "\n")
    rows = _tool().function_sizes(package)
    sizes = {(r["module"], r["name"]): r["lines"] for r in rows}
    assert sizes == {
        ("pkg/sub/b.py", "waits"): 10,
        ("pkg/a.py", "K.method"): 11,  # def, 5 assignments, a blank line, inner (2), a blank line, return
        ("pkg/a.py", "short"): 2,
        ("pkg/a.py", "K.method.<locals>.inner"): 2,
    }
    assert [r["name"] for r in rows][:2] == ["K.method", "waits"]  # longest first, then by module
    assert [r["name"] for r in _tool().over(9, package)] == ["K.method", "waits"]
    out = subprocess.run(
        [sys.executable, "tools/function_sizes.py", "--over", "9", "--package", str(package)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "| `K.method` | pkg/a.py | 6 | 11 |" in out and "2 function(s) over 9 lines" in out


def test_each_command_is_one_module_with_its_parser_section_and_its_run():
    from sensorgym.app.cli import build_parser
    from sensorgym.app.commands import COMMANDS

    names = [c.NAME for c in COMMANDS]
    assert names == ["demo", "inspect", "train", "eval", "ablate", "fit"]
    for command in COMMANDS:
        assert Path(command.__file__).name == f"{command.NAME}.py"
        assert callable(command.run) and command.HELP and command.DESCRIPTION
        assert all(isinstance(flags, tuple) and isinstance(kw, dict) for flags, kw in command.ARGUMENTS)
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices) == names
    for command in COMMANDS:  # the subparser runs the module's own run and has its arguments in order
        section = sub.choices[command.NAME]
        assert section.get_default("func") is command.run
        declared = [flags[0] for flags, _ in command.ARGUMENTS]
        added = [a.option_strings[0] if a.option_strings else a.dest for a in section._actions[1:]]
        assert added == declared


def test_shared_options_are_declared_once_in_the_table():
    """A shared option's flags are written only in the table; every command takes them from it, with what
    every use shares (e.g. --seed is an int everywhere, --force and --no-progress are switches)."""
    from sensorgym.app.commands import COMMANDS
    from sensorgym.app.commands.options import SHARED

    shared_flags = {flags for flags, _ in SHARED.values()}
    for path in sorted((APP / "commands").glob("*.py")):
        if path.name == "options.py":
            continue
        tuples = [
            node
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Tuple)
            and node.elts
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
        ]
        written = {tuple(e.value for e in t.elts) for t in tuples}
        assert not written & shared_flags, (path.name, written & shared_flags)
    users = {name: 0 for name in SHARED}
    for command in COMMANDS:
        for flags, kwargs in command.ARGUMENTS:
            for name, (shared, common) in SHARED.items():
                if flags == shared:
                    users[name] += 1
                    assert common.items() <= kwargs.items(), (command.NAME, name)
    assert all(n >= 2 for n in users.values()), users  # each entry is shared by at least two commands


def test_cli_keeps_the_dispatch_and_the_error_handling_only():
    tree = ast.parse((APP / "cli.py").read_text())
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert functions == {"build_parser", "main", "exit_if_missing", "_user_message", "_dependency_message"}


#: names of the engine's components and buffers, which app/ must not read (it reads sensors, the manager's
#: public methods and sensorgym.core.diagnostics)
_ENGINE_INTERNALS = {
    "_storage",
    "storage",
    "sampler",
    "params",
    "md",
    "measured_cache",
    "ground_truth_cache",
    "m_cache",
    "gt_cache",
    "return_slice",
    "cache_slice",
}
_ENGINE_MODULES = ("sampler", "storage", "parameters", "metadata", "error_model", "stages", "ring", "rows")


@pytest.mark.parametrize("path", sorted(APP.rglob("*.py")), ids=lambda p: str(p.relative_to(APP)))
def test_app_reads_the_engine_through_its_public_surface(path):
    tree = ast.parse(path.read_text())
    read = sorted(
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in _ENGINE_INTERNALS}
    )
    assert read == [], f"{path.name} reads {read}: use sensorgym.core.diagnostics or a public method"
    imported = [
        n.module
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[-1] in _ENGINE_MODULES
    ]
    assert imported == [], f"{path.name} imports {imported}"


def test_the_checkpointing_ppo_keeps_the_name_old_checkpoints_record():
    """state.pt records the algorithm class as module:qualname and a resume checks the qualname: a checkpoint
    written before app/ was split must resume after it."""
    pytest.importorskip("stable_baselines3")
    from sensorgym.app import training

    cls = training._ppo_class()
    assert f"{cls.__module__}:{cls.__qualname__}" == (
        "sensorgym.app.training:_ppo_class.<locals>.RolloutCheckpointPPO"
    )
