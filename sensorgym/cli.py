"""The ``sensorgym`` command line.

Example:
    >>> from sensorgym.cli import main
    >>> main(["demo", "--steps", "3"])  # doctest: +ELLIPSIS
    sensorgym demo: ...
    0
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    print(run_demo(steps=args.steps, seed=args.seed))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sensorgym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="print GT vs measured traces of a delayed, noisy, quantized sensor")
    demo.add_argument("--steps", type=int, default=40)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
