"""Functions longer than N lines in a package (the project's rule: no function over ~80 lines).

A function's length is its ``def`` line to its last line (``end_lineno - lineno + 1``: docstring and
comments included, decorators not), found by an AST walk, so nested functions and methods are measured
on their own too (and also count in the function that holds them). Works on any commit (run from that
checkout, or pass ``--package`` the folder of another one).

Usage:
    python tools/function_sizes.py                          # functions over 80 lines in sensorgym/
    python tools/function_sizes.py --over 60 --package sensorgym/app
    python tools/function_sizes.py --top 10                 # the 10 longest, whatever their size
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sensorgym"


def function_sizes(package: Path = PACKAGE) -> list[dict]:
    """Every function and method under ``package`` (a folder of .py files, searched recursively): its
    ``name`` (``Class.method``, ``outer.<locals>.inner``), ``module`` (path from the package's parent),
    first ``line`` and ``lines``, longest first."""
    package = Path(package)
    rows = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        module = str(path.relative_to(package.parent))
        _walk(tree, "", module, rows)
    return sorted(rows, key=lambda r: (-r["lines"], r["module"], r["line"]))


def _walk(node: ast.AST, prefix: str, module: str, rows: list[dict]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            lines = child.end_lineno - child.lineno + 1
            rows.append(dict(name=name, module=module, line=child.lineno, lines=lines))
            _walk(child, name + ".<locals>.", module, rows)
        elif isinstance(child, ast.ClassDef):
            _walk(child, prefix + child.name + ".", module, rows)
        else:
            _walk(child, prefix, module, rows)


def over(limit: int, package: Path = PACKAGE) -> list[dict]:
    """The functions under ``package`` longer than ``limit`` lines, longest first."""
    return [r for r in function_sizes(package) if r["lines"] > limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--over", type=int, default=80, help="list functions longer than this (default 80)")
    parser.add_argument("--top", type=int, help="list the TOP longest functions instead, whatever their size")
    parser.add_argument(
        "--package", type=Path, default=PACKAGE, help="a package folder (default: this checkout's sensorgym/)"
    )
    args = parser.parse_args()
    rows = function_sizes(args.package)
    chosen = rows[: args.top] if args.top is not None else [r for r in rows if r["lines"] > args.over]
    print("| function | module | line | lines |\n|---|---|---:|---:|")
    for r in chosen:
        print(f"| `{r['name']}` | {r['module']} | {r['line']} | {r['lines']} |")
    if args.top is None:
        print(f"\n{len(chosen)} function(s) over {args.over} lines in {args.package}")


if __name__ == "__main__":
    main()
