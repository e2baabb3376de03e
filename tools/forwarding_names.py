"""Forwarding names of the package's classes: second names for a value another object owns (issue 34 item 1).

A forwarding name is, per class, found by an AST walk (no import, so it runs on any commit's package):

* a generated property: ``name = property(...)`` in a class body, ``name = make(...)`` where ``make`` is a
  module-level function that returns ``property(...)`` (a closure getter), or ``setattr(Class, name,
  property(...))`` at module level; in a ``for`` loop over a module-level literal (a dict, tuple or list,
  e.g. ``SensorMetadata``'s ``SURFACE``) each entry is one name, attributed to that table;
* a ``@property`` whose body is ``return <chain>`` (a docstring aside), where ``<chain>`` reads an
  attribute of another object: ``self.a.b`` (two attribute steps or more, subscripts with constant keys
  and ``getattr(<chain>, "name")`` allowed), or ``None if <test> else <chain>`` (either order).

Not counted: a property that computes (a call, arithmetic, a comparison), one that reads its own attribute
(``self._x``), a setter, and plain attribute aliases (``self.array = self.binding.array``).

Usage:
    python tools/forwarding_names.py                   # per class: the count and the names
    python tools/forwarding_names.py --json            # the same as JSON (tests/test_architecture_doc.py)
    python tools/forwarding_names.py --package /tmp/old/sensorgym   # another checkout's package
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sensorgym"
#: the one table of forwarding names issue 34 allows (the custom-sensor surface of ``md``)
SURFACE = ("sensorgym/core/metadata.py", "SURFACE")
#: the issue's target: at most this many forwarding names outside :data:`SURFACE`
TARGET_ELSEWHERE = 5


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _steps(node: ast.expr) -> int | None:
    """Attribute steps of a chain rooted at ``self`` (``self.a.b["k"]`` -> 2), None if it is no chain."""
    steps = 0
    while True:
        if isinstance(node, ast.Attribute):
            steps, node = steps + 1, node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) == 2
            and not node.keywords
        ):
            steps, node = steps + 1, node.args[0]
        else:
            return steps if isinstance(node, ast.Name) and node.id == "self" else None


def forwards(node: ast.expr) -> bool:
    """Whether a getter's return value reads an attribute of another object (see the module docstring)."""
    if isinstance(node, ast.IfExp):
        if _is_none(node.body):
            return forwards(node.orelse)
        if _is_none(node.orelse):
            return forwards(node.body)
        return False
    steps = _steps(node)
    return steps is not None and steps >= 2


def _is_property_decorated(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)


def _returned(fn: ast.FunctionDef) -> ast.expr | None:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        return body[0].value
    return None


def _calls_property(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "property"


def _generators(tree: ast.Module) -> set[str]:
    """Module-level functions that return ``property(...)``."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and inner.value is not None and _calls_property(inner.value):
                    found.add(node.name)
    return found


def _makes_property(value: ast.expr, generators: set[str]) -> bool:
    return _calls_property(value) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in generators
    )


def _literals(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level names bound to a dict/tuple/list literal: their entries (dict keys, constant items)."""
    out: dict[str, list[str]] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if not isinstance(target, ast.Name):
            continue
        if isinstance(value, ast.Dict):
            out[target.id] = [k.value if isinstance(k, ast.Constant) else "?" for k in value.keys]
        elif isinstance(value, (ast.Tuple, ast.List)):
            out[target.id] = [e.value if isinstance(e, ast.Constant) else "?" for e in value.elts]
    return out


def _table_of(loop: ast.For) -> str | None:
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "keys"):
        it = it.func.value
    return it.id if isinstance(it, ast.Name) else None


def _setattr_calls(node: ast.AST) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "setattr"
        and len(n.args) == 3
    ]


def scan(package: Path = PACKAGE) -> list[dict]:
    """One row per forwarding name: ``module``, ``cls``, ``name``, ``kind`` (``"property"``: a forwarding
    ``@property``; ``"generated"``; ``"table"``: generated from a module-level table) and ``table``
    (``"<module>:<name>"`` for ``"table"``)."""
    package = Path(package)
    rows: list[dict] = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        module = str(path.relative_to(package.parent))
        generators, literals = _generators(tree), _literals(tree)

        def add(cls: str, name: str, kind: str, table: str = "", module: str = module) -> None:
            rows.append(dict(module=module, cls=cls, name=name, kind=kind, table=table))

        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and _is_property_decorated(item):
                    value = _returned(item)
                    if value is not None and forwards(value):
                        add(node.name, item.name, "property")
                elif isinstance(item, (ast.Assign, ast.AnnAssign)) and item.value is not None:
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    if _makes_property(item.value, generators):
                        for t in targets:
                            if isinstance(t, ast.Name):
                                add(node.name, t.id, "generated")
        for top in tree.body:  # setattr(Class, name, property(...)) at module level
            loop = top if isinstance(top, ast.For) else None
            for call in _setattr_calls(top):
                target, name, value = call.args
                if not isinstance(target, ast.Name) or not _makes_property(value, generators):
                    continue
                if isinstance(name, ast.Constant):
                    add(target.id, str(name.value), "generated")
                elif loop is not None and _table_of(loop) in literals:
                    table = _table_of(loop)
                    for entry in literals[table]:
                        add(target.id, str(entry), "table", f"{module}:{table}")
                else:
                    add(target.id, "?", "generated")
    return rows


def per_class(rows: list[dict]) -> list[dict]:
    """``[{module, cls, count, generated, table, names}]``, largest first: ``generated`` counts the generated
    properties (``table``: of them, those generated from a module-level table), ``names`` lists every name."""
    classes: dict[tuple[str, str], dict] = {}
    for r in rows:
        c = classes.setdefault(
            (r["module"], r["cls"]),
            dict(module=r["module"], cls=r["cls"], count=0, generated=0, table=0, names=[]),
        )
        c["count"] += 1
        c["generated"] += r["kind"] != "property"
        c["table"] += r["kind"] == "table"
        c["names"].append(r["name"])
    return sorted(classes.values(), key=lambda c: (-c["count"], c["module"], c["cls"]))


def outside_surface(rows: list[dict]) -> list[dict]:
    """The forwarding names that are not generated from the one allowed table (:data:`SURFACE`)."""
    return [r for r in rows if r["table"] != ":".join(SURFACE)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=Path, default=PACKAGE, help="a sensorgym folder (default: this)")
    parser.add_argument("--json", action="store_true", help="print the rows and the per-class counts as JSON")
    args = parser.parse_args()
    rows = scan(args.package)
    classes = per_class(rows)
    elsewhere = outside_surface(rows)
    if args.json:
        print(json.dumps(dict(rows=rows, classes=classes, outside_surface=len(elsewhere)), indent=1))
        return
    print("| class | module | forwarding names | generated | from a table | names |")
    print("|---|---|---:|---:|---:|---|")
    for c in classes:
        names = ", ".join(f"`{n}`" for n in c["names"])
        print(f"| `{c['cls']}` | {c['module']} | {c['count']} | {c['generated']} | {c['table']} | {names} |")
    print(
        f"\n{len(rows)} forwarding name(s) in {len(classes)} class(es); outside {SURFACE[0]}:{SURFACE[1]}: "
        f"{len(elsewhere)} (target: at most {TARGET_ELSEWHERE})"
    )


if __name__ == "__main__":
    main()
