"""docs/architecture.md is true (issue 34 item 6): every count, size, module list, name and "only" on it is
produced by a script of tools/ or checked here against the package as it is.

The page marks each checked block with an HTML comment, ``<!-- check: NAME -->``; the block is the text
from the marker to the end of its paragraph (a table is one paragraph). The "d71066f" columns are the same
scripts run on that commit's package, extracted with ``git archive`` (skipped where the history is absent).
The scripts that trace a step and the term recipe's package copy run as subprocesses, started together.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sensorgym"
DOC = ROOT / "docs" / "architecture.md"
TEXT = DOC.read_text()
BEFORE = "d71066f"  # the commit issue 34 measured


# -- reading the page ---------------------------------------------------------------------------------------
def block(marker: str) -> str:
    """The text from ``<!-- check: marker -->`` to the next ``<!-- end -->`` or the end of its paragraph,
    whichever comes first."""
    tag = f"<!-- check: {marker} -->"
    assert TEXT.count(tag) == 1, f"docs/architecture.md needs exactly one {tag}"
    rest = TEXT.split(tag, 1)[1].lstrip("\n")
    return rest.split("\n\n", 1)[0].split("<!-- end -->", 1)[0]


def table(marker: str) -> list[list[str]]:
    """The rows (cells stripped) of the table of a block, header and separator left out."""
    rows = [line for line in block(marker).splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows[2:]]


def spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def prose() -> str:
    """The page without its fenced code blocks, its mermaid diagram and its HTML comments."""
    text = re.sub(r"```.*?```", "", TEXT, flags=re.S)
    return re.sub(r"<!--.*?-->", "", text)


@cache
def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _number(cell: str) -> int:
    return 0 if cell in ("", "—") else int(cell)


# -- the subprocesses, started together ----------------------------------------------------------------------
def _extract_before(out: Path) -> Path | None:
    """The sensorgym package of d71066f under ``out`` (None where this checkout has no such history)."""
    archive = subprocess.run(["git", "archive", BEFORE, "sensorgym"], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out / "sensorgym"


class _Run:
    """A subprocess started now and read when a test first needs it."""

    def __init__(self, args: list[str], env: dict | None = None, cwd: Path = ROOT) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._out: str | None = None

    def out(self) -> str:
        if self._out is None:
            stdout, stderr = self.process.communicate(timeout=120)
            assert self.process.returncode == 0, stderr[-3000:]
            self._out = stdout
        return self._out


def _env(pythonpath: Path | None = None) -> dict:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


@pytest.fixture(scope="module", autouse=True)
def runs(tmp_path_factory) -> dict[str, Any]:
    """The scripts' runs, started at once before the first test (the tools on this package, the recipe's
    check on its copy)."""
    started: dict[str, Any] = {
        "trace": _Run(["tools/trace_step.py"]),
    }
    try:  # a recipe that no longer applies fails its own test, not the module's
        copy = started["recipe_copy"] = _recipe_copy(tmp_path_factory.mktemp("recipe"))
    except AssertionError as e:
        started["recipe_copy"] = e
    else:
        started["recipe"] = _Run(
            ["-c", RECIPE_CHECK, str(copy["checkpoint"]), str(copy["root"])],
            _env(copy["root"]),
            cwd=copy["root"],
        )
        _save_checkpoint(copy["checkpoint"])  # meanwhile, with this package (the recipe's check waits for it)
    yield started
    for run in started.values():
        if isinstance(run, _Run) and run.process.poll() is None:
            run.process.kill()
            run.process.communicate()


@pytest.fixture(scope="module")
def before(tmp_path_factory) -> dict[str, Any]:
    """d71066f's package and its step count (the slow tests' "d71066f" columns)."""
    package = _extract_before(tmp_path_factory.mktemp("before"))
    if package is None:
        pytest.skip(f"no {BEFORE} in this checkout's history")
    return {"package": package, "count": _Run(["tools/count_step.py", "--json"], _env(package.parent))}


@pytest.fixture(scope="module")
def recipe_copy(runs) -> dict[str, Any]:
    if isinstance(runs["recipe_copy"], AssertionError):
        raise runs["recipe_copy"]
    return runs["recipe_copy"]


# -- section 1: layers ---------------------------------------------------------------------------------------
LAYER_OF_NODE = {"app": "app", "integ": "adapters", "gym": "gym", "envs": "envs", "fitting": "fitting",
                 "sensors": "catalog", "estimators": "estimators", "core": "engine"}  # fmt: skip


def _diagram() -> str:
    return re.search(r"```mermaid\n(.*?)```", TEXT, flags=re.S).group(1)


def test_each_layer_lists_exactly_the_modules_of_its_folder():
    nodes = re.findall(r'^\s*(\w+)\["sensorgym/(\w+)/: (.*?)"\]', _diagram(), flags=re.M)
    assert {n for n, _, _ in nodes} == set(LAYER_OF_NODE), nodes
    for _, folder, listing in nodes:
        listed = []
        for i, group in enumerate(listing.split("; ")):
            sub, names = ("", group) if i == 0 else group.split("/: ", 1)
            listed += [f"{sub}/{n.strip()}" if sub else n.strip() for n in names.split(",")]
        assert len(listed) == len(set(listed)), f"{folder}: a module is listed twice"
        actual = {
            str(p.relative_to(PACKAGE / folder).with_suffix(""))
            for p in (PACKAGE / folder).rglob("*.py")
            if p.name != "__init__.py"
        }
        assert set(listed) == actual, (
            f"sensorgym/{folder}/: listed but absent {sorted(set(listed) - actual)}, "
            f"present but not listed {sorted(actual - set(listed))}"
        )
    top = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert top == {folder for _, folder, _ in nodes}, "a subpackage of sensorgym/ is missing from the diagram"


def test_the_arrows_allow_what_the_layer_test_allows():
    from tests import test_layers

    edges: dict[str, set[str]] = {n: set() for n in LAYER_OF_NODE}
    for line in _diagram().splitlines():
        chain = [part.strip() for part in line.split("-->")]
        for a, b in itertools.pairwise(chain):
            edges[a].add(b)

    def below(node: str) -> set[str]:
        seen, todo = {node}, [node]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    for node, layer in LAYER_OF_NODE.items():
        assert {LAYER_OF_NODE[n] for n in below(node)} == test_layers.ALLOWED[layer], node
    forbidden = test_layers.FORBIDDEN_THIRD_PARTY
    assert "gymnasium" in forbidden["engine"] and "mujoco" in forbidden["engine"]
    assert forbidden["estimators"] == forbidden["engine"] and "gymnasium" in forbidden["catalog"]
    for layer in ("engine", "estimators", "catalog", "gym", "envs", "fitting"):
        assert set(test_layers.THIRD_PARTY_RL) <= set(forbidden[layer]), layer


def test_the_engine_imports_torch_and_numpy_and_no_other_package():
    from tests import test_layers

    third = set()
    for module, path in test_layers.modules():
        if module.startswith("sensorgym.core."):
            for name in test_layers.imports_of(module, path):
                root = name.split(".")[0]
                if root and root != "sensorgym" and root not in sys.stdlib_module_names:
                    third.add(root)
    assert third == {"torch", "numpy"}, third
    terms = test_layers.imports_of("sensorgym.core.terms", PACKAGE / "core" / "terms.py")
    assert {m for m in terms if m.startswith("sensorgym")} == {"sensorgym.core.xp", "sensorgym.core.replay"}
    replay = test_layers.imports_of("sensorgym.core.replay", PACKAGE / "core" / "replay.py")
    assert {m for m in replay if m.startswith("sensorgym")} == {"sensorgym.core.recording"}
    recording = test_layers.imports_of("sensorgym.core.recording", PACKAGE / "core" / "recording.py")
    assert not {m for m in recording if m.startswith("sensorgym")}  # "which imports none"


def test_the_shared_options_are_the_table_of_commands_options():
    from sensorgym.app.commands.options import SHARED

    paragraph = next(p for p in TEXT.split("\n\n") if "`SHARED`" in p)
    flags = [s for s in spans(paragraph) if s.startswith("--") and s not in ("--help",)]
    assert flags == [flags[0] for flags, _ in SHARED.values()]


# -- section 2: one engine step ------------------------------------------------------------------------------
def test_the_step_table_is_the_count_of_tools_count_step(runs):
    counts = _counts()
    listed = [spans(row[1])[0] for row in table("step-functions")]
    assert [int(row[0]) for row in table("step-functions")] == list(range(1, len(listed) + 1))
    assert listed == counts["numpy"]["step"]["list"], "\n".join(counts["numpy"]["step"]["list"])
    extra = [f for f in counts["torch"]["step"]["list"] if f not in listed]
    paragraph = TEXT.split("<!-- check: step-counts -->", 1)[1].split("\n\n", 2)[1]
    assert extra == [s for s in spans(paragraph) if s.startswith("sensorgym.core.xp.")], extra
    read = counts["numpy"]["read"]["list"]
    assert [f"{f.split('.')[-2]}.{f.split('.')[-1]}" for f in read] == [
        s for s in spans(paragraph) if s.endswith(("read", "_read", "_pack"))
    ]


def _functions_across(cell: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+) functions across (\d+) modules", cell)
    assert m, cell
    return int(m.group(1)), int(m.group(2))


@cache
def _counts() -> dict[str, Any]:
    """tools/count_step.py's count on this package, in this process (its rule counts sensorgym's frames
    only, so the test runner's own frames do not count)."""
    tool = _load("count_step")
    return {executor: tool.measure(executor) for executor in ("numpy", "torch")}


def _check_step_counts(counts: dict[str, Any], column: int) -> None:
    rows = {row[0]: row[1:] for row in table("step-counts")}
    assert set(rows) == {
        "engine step, numpy executor",
        "engine step, torch executor",
        "`read()`, both executors",
    }
    for executor in ("numpy", "torch"):
        step, read = counts[executor]["step"], counts[executor]["read"]
        cell = rows[f"engine step, {executor} executor"][column]
        assert _functions_across(cell) == (step["functions"], step["modules"]), (executor, column)
        cell = rows["`read()`, both executors"][column]
        assert _functions_across(cell) == (read["functions"], read["modules"]), (executor, column)


def test_the_step_counts_are_those_of_tools_count_step():
    _check_step_counts(_counts(), 1)


@pytest.mark.slow
def test_the_step_counts_of_d71066f_are_those_of_tools_count_step_on_it(before):
    _check_step_counts(json.loads(before["count"].out()), 0)


def test_the_counted_examples_are_the_ones_the_tools_run():
    count = _load("count_step")
    paragraph = " ".join(TEXT.split("## 2. One engine step", 1)[1].split("\n\n", 2)[1].split())
    assert f"`dt = {count.DT}`" in paragraph and f"{count.B} envs" in paragraph
    assert (
        f"after a reset and {['no', 'one', 'two', 'three', 'four'][count.WARMUP]} warm-up steps" in paragraph
    )
    source = (ROOT / "tools" / "count_step.py").read_text()
    for option in re.findall(r"`((?:delay|noise)=[\d.]+)`", paragraph):
        assert option in source, option
    trace = (ROOT / "tools" / "trace_step.py").read_text()
    claim = " ".join(block("trace").split())
    assert '"Pendulum-v1", num_envs=4' in trace and "delay=0.05" in trace and "history_length=2" in trace
    assert "(Pendulum-v1, 4 envs, one `StateSensor` with a one-step delay" in " ".join(TEXT.split())
    assert claim.startswith("the wrapper step is")


def test_the_target_is_the_one_of_tools_count_step():
    tool = _load("count_step")
    claim = " ".join(block("target").split())
    assert claim.startswith(f"at most {tool.TARGET_FUNCTIONS} functions across {tool.TARGET_MODULES} modules")
    test = (ROOT / "tests" / "tools" / "test_count_step.py").read_text()
    assert (
        f'numpy["functions"] <= {tool.TARGET_FUNCTIONS} and numpy["modules"] <= {tool.TARGET_MODULES}' in test
    )


def test_the_wrapper_counts_are_those_of_tools_trace_step(runs):
    out = runs["trace"].out()
    found = {
        title: (int(h), int(m))
        for title, h, m in re.findall(r"^## (.+?): (\d+) hops across (\d+) modules", out, flags=re.M)
    }
    text = " ".join(block("trace").split())
    what = r"(wrapper step|engine step inside it|`read\(history_length=2\)`)"
    claimed = re.findall(what + r" (?:is )?(\d+) hops across (\d+)\s+modules", text)
    assert len(claimed) == 3, text
    keys = {
        "wrapper step": "wrapper step",
        "engine step inside it": "engine step (SensorManager.step and below)",
        "`read(history_length=2)`": "read(history_length=2)",
    }
    for what, hops, modules in claimed:
        assert found[keys[what]] == (int(hops), int(modules)), (what, found)


# -- section 3: components -----------------------------------------------------------------------------------
def test_the_stage_plans_are_what_the_storage_plans():
    import torch

    import sensorgym as sg

    for row in table("stages"):
        options = eval(f"dict({spans(row[0])[0]})", {"sg": sg})  # the page's own text
        mgr = sg.SensorManager(num_envs=2, dt=0.02)
        mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), **options))
        mgr.reset({"x": torch.zeros(2, 2)})
        storage = mgr.storage(sg.StateSensor)
        terms = [t.name for t, _ in mgr.metadata(sg.StateSensor).imperfections.terms_run()]
        assert spans(row[1]) == storage.stage_names(), row
        assert spans(row[2]) == storage.stage_names(reset=True), row
        assert spans(row[3]) == terms, row
        assert (row[1] == "none (zero copy)") == (storage.measured.is_alias and storage.gt.is_alias)


# -- section 4: the surface and the forwarding names ---------------------------------------------------------
@cache
def _forwarding(package: Path) -> list[dict]:
    return _load("forwarding_names").scan(package)


def test_the_surface_is_the_table_of_core_metadata():
    names = spans(block("surface"))
    table_rows = [r for r in _forwarding(PACKAGE) if r["table"] == "sensorgym/core/metadata.py:SURFACE"]
    assert names == [r["name"] for r in table_rows]


def test_md_attributes_are_the_ones_the_class_assigns():
    tool = _load("class_sizes")
    tree = ast.parse((PACKAGE / "core" / "metadata.py").read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "SensorMetadata")
    own = sorted(a for a in tool.self_attributes(cls) if not a.startswith("_"))
    properties = [n.name for n in cls.body if isinstance(n, ast.FunctionDef) and any(
        isinstance(d, ast.Name) and d.id == "property" for d in n.decorator_list)]  # fmt: skip
    text = block("md-attributes").split(". ", 1)[0]
    listed, props = text.split("and the properties") if "and the properties" in text else (text, "")
    assert sorted(spans(listed)) == own
    assert spans(props) == properties
    assert properties or text.endswith("and no property"), text


def test_the_forwarding_names_are_those_of_tools_forwarding_names():
    tool = _load("forwarding_names")
    rows = table("forwarding")
    total = rows.pop()
    assert total[0] == "all classes"
    now_classes = {c["cls"]: c for c in tool.per_class(_forwarding(PACKAGE))}
    assert {spans(r[0])[0] for r in rows if _number(r[2])} == set(now_classes), "a class is missing"
    surface = "sensorgym/core/metadata.py:SURFACE"
    for row in rows:
        name = spans(row[0])[0]
        now = [r for r in _forwarding(PACKAGE) if r["cls"] == name]
        assert _number(row[2]) == len(now), name
        assert spans(row[3]) == [r["name"] for r in now if r["table"] != surface], name
    elsewhere = tool.outside_surface(_forwarding(PACKAGE))
    assert total[2] == str(len(_forwarding(PACKAGE)))
    assert total[3] == f"{len(elsewhere)} outside `SURFACE`"
    target = " ".join(block("forwarding-target").split())
    words = ["no", "one", "two", "three", "four", "five"]
    assert (
        f"at most {tool.TARGET_ELSEWHERE} forwarding names elsewhere, is met: {len(elsewhere)} are "
        f"elsewhere, the {words[len(elsewhere)]} " in target
    )
    assert len(elsewhere) <= tool.TARGET_ELSEWHERE, [f"{r['cls']}.{r['name']}" for r in elsewhere]
    # each one left is justified on the page, by name
    justified = target.split(" are elsewhere, ", 1)[1].split(". ", 1)[0]
    assert sorted(spans(justified)) == sorted(r["name"] for r in elsewhere), justified


@pytest.mark.slow
def test_the_forwarding_names_of_d71066f_are_those_of_tools_forwarding_names_on_it(before):
    rows = table("forwarding")
    total = rows.pop()
    target = " ".join(block("forwarding-target").split())
    old = _forwarding(before["package"])
    for row in rows:
        assert _number(row[1]) == sum(r["cls"] == spans(row[0])[0] for r in old), row
    assert total[1] == str(len(old))
    generated = [r for r in old if r["kind"] != "property"]
    by_class = {c: sum(r["cls"] == c for r in generated) for c in {r["cls"] for r in generated}}
    issue = ("ParameterTable", "SensorMetadata", "Sampler", "ErrorModel", "ClassStorage")
    assert sum(by_class[c] for c in issue) == 91 and by_class["ActionLatency"] == 13
    assert f"were {len(generated)} (the issue's 91" in target


def test_the_forwarding_tool_finds_each_kind_and_nothing_else(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text(
        textwrap.dedent('''
        TABLE = {"one": 1, "two": 2}

        def view(name):
            def get(self):
                return getattr(self.inner, name)
            return property(get)

        class A:
            made = view("made")
            direct = property(lambda self: self.x)

            @property
            def forwards(self):
                """Doc."""
                return self.inner.value

            @property
            def guarded(self):
                return None if self.inner is None else self.inner.value

            @property
            def keyed(self):
                return self.inner.values["k"]

            @property
            def own(self):
                return self._own

            @property
            def computed(self):
                return self.inner.value + 1

            @property
            def called(self):
                return self.inner.value()

        for _name in TABLE:
            setattr(A, _name, property(lambda self: self.inner))
        setattr(A, "single", view("single"))
    ''')
    )
    tool = _load("forwarding_names")
    rows = tool.scan(package)
    assert [(r["name"], r["kind"]) for r in rows] == [
        ("made", "generated"), ("direct", "generated"), ("forwards", "property"), ("guarded", "property"),
        ("keyed", "property"), ("one", "table"), ("two", "table"), ("single", "generated"),
    ]  # fmt: skip
    assert rows[5]["table"] == "pkg/a.py:TABLE"
    assert [c["count"] for c in tool.per_class(rows)] == [8]


# -- section 5: sizes ----------------------------------------------------------------------------------------
@cache
def _classes(package: Path) -> list[dict]:
    return _load("class_sizes").classes(package)


@cache
def _long(package: Path) -> list[dict]:
    """The functions over 80 lines of ``package`` (tools/function_sizes.py), longest first."""
    return _load("function_sizes").over(80, package)


def _sizes(package: Path) -> dict[tuple[str, str], str]:
    return {
        (
            r["name"],
            r["module"].removeprefix("sensorgym/"),
        ): f"{r['lines']} / {r['methods']} / {r['attributes']}"
        for r in _classes(package)
    }


def _check_sizes(package: Path, column: int, what: str) -> None:
    sizes = _sizes(package)
    wrong = []
    for row in table("class-sizes"):
        key = (spans(row[0])[0], row[1])
        if sizes.get(key, "") != row[column]:
            wrong.append(f"| `{key[0]}` | {key[1]} | {sizes.get(key, '')} | ({what})")
    assert not wrong, "docs/architecture.md section 5 should read:\n" + "\n".join(wrong)


def test_the_class_sizes_are_those_of_tools_class_sizes():
    _check_sizes(PACKAGE, 2, "now")


@pytest.mark.slow
def test_the_class_sizes_of_d71066f_are_those_of_tools_class_sizes_on_it(before):
    _check_sizes(before["package"], 3, BEFORE)


def test_the_most_instance_attributes():
    rows = sorted(_classes(PACKAGE), key=lambda r: -r["attributes"])
    first, second, third = rows[:3]
    assert f"The class with the most instance attributes is `{first['name']}` ({first['attributes']}:" in TEXT
    claim = " ".join(block("most-attributes").split())
    assert claim.startswith(
        f"the next are `{second['name']}` ({second['module'].removeprefix('sensorgym/')}) with "
        f"{second['attributes']} and `{third['name']}` with {third['attributes']}."
    ), claim


def test_the_long_functions_are_those_of_tools_function_sizes():
    text = " ".join(block("long-functions").split())
    long = _long(PACKAGE)
    m = re.search(r"(\d+) in the package, none in app/, against (\d+) \((\d+) in app/\)", text)
    assert m and int(m.group(1)) == len(long), (text, long)
    assert [r for r in long if r["module"].startswith("sensorgym/app/")] == []
    listed = [(s, p) for s, p in re.findall(r"`([\w.]+)` \(([\w/.]+\.py)\)", text)]
    assert listed == [(r["name"], r["module"].removeprefix("sensorgym/")) for r in long]


@pytest.mark.slow
def test_the_long_functions_of_d71066f_are_those_of_tools_function_sizes_on_it(before):
    text = " ".join(block("long-functions").split())
    m = re.search(r"none in app/, against (\d+) \((\d+) in app/\)", text)
    old = _long(before["package"])
    assert (int(m.group(1)), int(m.group(2))) == (
        len(old),
        sum(r["module"].startswith("sensorgym/app/") for r in old),
    )


def test_no_function_in_app_is_over_80_lines():
    claim = " ".join(block("app-functions").split())
    assert claim.startswith("No function in app/ is over 80 lines")
    assert [r for r in _long(PACKAGE) if r["module"].startswith("sensorgym/app/")] == []


def test_the_long_modules_are_the_modules_over_500_lines():
    text = " ".join(block("long-modules").split())
    listed = set(re.findall(r"([\w/]+\.py)", text))
    actual = {
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if len(p.read_text().splitlines()) > 500
    }
    assert listed == actual, (sorted(listed - actual), sorted(actual - listed))


# -- section 6: the term recipe ------------------------------------------------------------------------------
RECIPE_BLOCK = re.compile(
    r"^( *)```python\n\1# (sensorgym/\S+), (after|before): (.+?)\n(.*?)^\1```", re.M | re.S
)


def recipe_blocks() -> list[tuple[str, str, str, list[str]]]:
    """``(file, "after"/"before", anchor, lines)`` of each recipe block of the page, in order."""
    out = []
    for indent, path, where, anchor, body in RECIPE_BLOCK.findall(TEXT):
        lines = [line[len(indent) :] if line.startswith(indent) else line for line in body.splitlines()]
        out.append((path, where, anchor.strip(), lines))
    return out


def apply_recipe(root: Path) -> set[str]:
    """Apply the page's recipe blocks to the package copy under ``root``; the files they change."""
    changed = set()
    for path, where, anchor, lines in recipe_blocks():
        target = root / path
        text = target.read_text().splitlines()
        hits = [i for i, line in enumerate(text) if line.strip().startswith(anchor)]
        assert len(hits) == 1, f"the recipe's anchor {anchor!r} matches {len(hits)} lines of {path}"
        at = hits[0] + (where == "after")
        text[at:at] = lines
        target.write_text("\n".join(text) + "\n")
        changed.add(path)
    return changed


RECIPE_CHECK = """
import json, sys, torch
import sensorgym as sg
assert sg.__file__.startswith(sys.argv[2]), sg.__file__
out = {}
for executor in ("numpy", "torch"):
    mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0, executor=executor)
    options = sg.StateSensorOptions(key="x", shape=(2,), temperature_coefficient=[0.5, -0.25], bias=1.0)
    s = mgr.add_sensor(options)
    mgr.reset({"x": torch.zeros(2, 2), "temperature": torch.tensor([2.0, 4.0])})
    first = s.read().tolist()
    mgr.step({"x": torch.ones(2, 2), "temperature": torch.tensor([[0.0], [8.0]])})
    model = mgr.metadata(sg.StateSensor).imperfections
    out[executor] = [first, s.read().tolist(), [t.name for t, _ in model.terms_run()]]
mgr = sg.SensorManager(num_envs=3, dt=0.1, seed=0)
s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), temperature_coefficient=sg.Uniform(0.0, 1.0)))
mgr.reset({"x": torch.zeros(3, 2), "temperature": torch.ones(3)})
drawn = s.read_randomization()["temperature_coefficient"]
out["randomized"] = [list(drawn.shape), len(set(drawn.flatten().tolist()))]
imu = sg.IMUOptions(body="b", gyro_temperature_coefficient=0.1)
out["imu"] = list(imu.temperature_coefficient)
import os, time
deadline = time.monotonic() + 120
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:  # the test process writes it
    time.sleep(0.05)
old = sg.SensorManager(num_envs=2, dt=0.1, seed=0)
s = old.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), noise=0.1))
old.reset({"x": torch.zeros(2, 2)})
old.load_state_dict(torch.load(sys.argv[1], weights_only=True))
old.step({"x": torch.zeros(2, 2)})
out["checkpoint"] = list(s.read().shape)
print(json.dumps(out))
"""


def _recipe_copy(root: Path) -> dict[str, Any]:
    """A copy of the package under ``root`` with the page's recipe applied."""
    shutil.copytree(PACKAGE, root / "sensorgym", ignore=shutil.ignore_patterns("__pycache__"))
    changed = apply_recipe(root)
    return {"root": root, "changed": changed, "checkpoint": root / "before.pt"}


def _save_checkpoint(path: Path) -> None:
    """A checkpoint of this (unchanged) package, written whole or not at all."""
    import torch

    import sensorgym as sg

    mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), noise=0.1))
    mgr.reset({"x": torch.zeros(2, 2)})
    mgr.step({"x": torch.zeros(2, 2)})
    torch.save(mgr.state_dict(), path.with_suffix(".tmp"))
    path.with_suffix(".tmp").rename(path)


def test_the_term_recipe_adds_a_term_in_two_package_files(recipe_copy, runs):
    changed = recipe_copy["changed"]
    assert changed == {"sensorgym/core/options.py", "sensorgym/core/terms.py"}
    claim = " ".join(block("recipe").split())
    assert claim.startswith("Two package files: core/options.py") and "core/terms.py" in claim
    assert len(changed) <= 3  # issue 34: a term in at most 3 package files
    differ = {
        str(p.relative_to(recipe_copy["root"]))
        for p in (recipe_copy["root"] / "sensorgym").rglob("*.py")
        if p.read_text() != (ROOT / p.relative_to(recipe_copy["root"])).read_text()
    }
    assert differ == changed
    out = json.loads(runs["recipe"].out())
    for executor in ("numpy", "torch"):  # x + k T, then the bias: exact in float32
        first, second, terms = out[executor]
        assert first == [[2.0, 0.5], [3.0, 0.0]]
        assert second == [[2.0, 2.0], [6.0, 0.0]]
        assert terms == ["temperature_bias", "bias"]
    assert out["randomized"] == [[3, 2], 6]
    assert out["imu"][3:6] == [0.1, 0.1, 0.1] and out["imu"][:3] == [0.0, 0.0, 0.0]
    assert out["checkpoint"] == [2, 2]


def test_the_extension_recipe_points_at_a_test_that_registers_a_term_and_a_stage():
    text = (ROOT / "tests" / "core" / "test_extension.py").read_text()
    calls = {
        n.func.id
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert {"register_term", "register_stage", "Term"} <= calls
    assert "sensorgym/" not in text.replace("sensorgym.core", "")  # it writes no package file


# -- the whole page: paths, names, "only" --------------------------------------------------------------------
@cache
def _files() -> tuple[str, ...]:
    """The repository's files (tracked, and new ones git does not ignore), as posix paths."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if out.returncode == 0 and out.stdout:
        return tuple(out.stdout.split())
    return tuple(
        str(p.relative_to(ROOT))
        for d in ("sensorgym", "tests", "tools", "docs")
        for p in (ROOT / d).rglob("*")
    )


def test_every_named_path_and_test_exists():
    """A file named on the page (``core/plan.py``, ``tests/core/test_extension.py``, ``custom_sensors.md``)
    is a file of the repository whose path ends so; a folder (``sensors/mujoco/``) holds one; a cited test
    (``path::name``) is defined there."""
    files = _files()
    text = re.sub(r"```mermaid.*?```", "", TEXT, flags=re.S)
    for name in set(re.findall(r"(?<![\w/.])([\w/]*\w\.(?:py|md|toml))\b", text)):
        assert any(f == name or f.endswith("/" + name) for f in files), name
    for folder in set(re.findall(r"(?<![\w/.])((?:\w+/)+)(?=[\s`,:)]|$)", text, flags=re.M)):
        assert any(f.startswith(folder) or f"/{folder}" in f for f in files), folder
    for path, name in re.findall(r"(tests/[\w/]+\.py)::(\w+)", TEXT):
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), flags=re.M), f"{path}::{name}"


@cache
def _defined() -> frozenset[str]:
    """Every name the package defines: modules, classes, functions, arguments, attributes, assigned
    names, and identifier-like string constants (table keys such as the ``SURFACE`` names)."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        names.add(path.stem)
        names.add(path.parent.name)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)
    return frozenset(names | set(dir(builtins)))


#: names of other libraries and of local variables the page uses in examples
EXTERNAL = {"torch", "np", "gym", "scipy", "copy", "sys", "md", "sg", "mgr", "storage", "params", "manager",
            "learn", "compile", "deepcopy", "stats", "setprofile", "Class", "name", "property", "self", "a",
            "b", "register_term", "X", "MjData"}  # fmt: skip


def test_every_backticked_name_is_defined_in_the_package():
    chains = [s.removesuffix("()") for s in spans(prose())]
    chains = [
        c for c in chains if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", c) and not c.endswith(".py")
    ]
    unknown = sorted(
        {c for c in chains if c.split(".")[0] not in ("torch", "copy", "sys", "scipy") and any(
            part not in _defined() and part not in EXTERNAL for part in c.split("."))}
    )  # fmt: skip
    assert not unknown, f"names on docs/architecture.md that the package does not define: {unknown}"


def test_every_sentence_that_says_only_names_its_check():
    text = re.sub(r"\|.*\|", "", prose())  # the tables are checked cell by cell
    sentences = re.split(r"(?<=[.:])\s+(?=[A-Z*])", " ".join(text.split()))
    says_only = re.compile(r"(?<![-\w\"])only(?![-\w\"])", flags=re.I)
    unchecked = [
        s for s in sentences if says_only.search(s) and not re.search(r"(tests|tools)/[\w/]+\.py", s)
    ]
    assert not unchecked, unchecked


def test_every_count_in_the_prose_is_in_a_checked_block():
    """A number of functions, modules, hops, names, lines, files or classes outside a checked block would
    be a claim no test holds: the page keeps them all in checked blocks."""
    text = prose()
    checked = "".join(block(m) for m in re.findall(r"<!-- check: ([\w-]+) -->", TEXT))
    checked = re.sub(r"<!--.*?-->", "", checked)
    counts = re.findall(
        r"\b\d+\s+(?:\w+\s+)?(?:functions?|modules?|hops|names?|lines|files|classes|attributes|methods)\b",
        text,
    )
    outside = [c for c in counts if c not in checked]
    assert not outside, outside
