"""Sizes of the package's classes: lines, methods and instance attributes (docs/architecture.md §5).

Instance attributes are the names assigned as ``self.X = ...`` or ``self.X: T = ...`` (tuple targets
included) anywhere in the class body, found by an AST walk. Works on any commit (run from that checkout).

Usage:
    python tools/class_sizes.py                 # the 15 largest classes by lines
    python tools/class_sizes.py --top 30 --names SensorMetadata ClassStorage
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sensorgym"


def self_attributes(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()

    def add(target: ast.expr) -> None:
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            names.add(target.attr)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                add(element)

    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                add(target)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            add(node.target)
    return names


def classes(package: Path = PACKAGE) -> list[dict]:
    rows = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                rows.append(
                    dict(
                        name=node.name,
                        module=str(path.relative_to(package.parent)),
                        lines=node.end_lineno - node.lineno + 1,
                        methods=len(methods),
                        attributes=len(self_attributes(node)),
                    )
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--names", nargs="*", default=[], help="classes to show whatever their size")
    parser.add_argument(
        "--package", type=Path, default=PACKAGE, help="the sensorgym folder of another checkout"
    )
    args = parser.parse_args()
    rows = classes(args.package)
    chosen = sorted(rows, key=lambda r: -r["lines"])[: args.top]
    chosen += [r for r in rows if r["name"] in args.names and r not in chosen]
    print("| class | module | lines | methods | instance attributes |\n|---|---|---:|---:|---:|")
    for r in chosen:
        print(f"| `{r['name']}` | {r['module']} | {r['lines']} | {r['methods']} | {r['attributes']} |")


if __name__ == "__main__":
    main()
