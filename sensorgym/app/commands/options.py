"""The parser's building blocks: the one-line-error parser, the help formatter, the argument types, and
the table of the options several subcommands share (:data:`SHARED`), declared once.

A subcommand's module declares its arguments as a tuple of ``(flags, kwargs)`` records (its parser
section); an option of the table appears there as ``shared(name, help=...)``: the table gives its flags
and what every use shares (type, action, metavar), the command what is its own (the help text, a
default, the example a refusal names). :func:`add_arguments` adds them in order. Standard library only:
``sensorgym --help`` and every argument error answer before torch is imported.

Example:
    >>> import argparse
    >>> p = argparse.ArgumentParser(prog="demo")
    >>> fast = (("--fast",), {"action": "store_true"})
    >>> add_arguments(p, (shared("seed", default=0, help="the seed"), fast))
    >>> p.parse_args(["--seed", "3"])
    Namespace(seed=3, fast=False)
    >>> shared("no_progress", help="no bar")
    (('--no-progress',), {'action': 'store_true', 'help': 'no bar'})
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "EXIT_USER_ERROR",
    "SHARED",
    "Argument",
    "Formatter",
    "Parser",
    "add_arguments",
    "non_negative",
    "positive",
    "shared",
]

#: exit code of a user error: a flag, a config, a path, a missing package
EXIT_USER_ERROR = 2

#: one argument of a subcommand: its flags (or positional name) and ``add_argument``'s keyword arguments
Argument = tuple[tuple[str, ...], dict[str, Any]]

#: the options several subcommands take: name -> (flags, the keyword arguments every use shares); each
#: use adds its help text (and a default or a type where its own differs), see :func:`shared`
SHARED: dict[str, Argument] = {
    "config": (("--config",), {}),  # demo has none; fit's config is --into
    "out": (("--out",), {}),  # inspect: a PNG path; train, ablate, fit: a folder
    "seed": (("--seed",), {"type": int}),
    "steps": (("--steps",), {}),  # demo, inspect: control steps (each its own example and default)
    "timesteps": (("--timesteps",), {"metavar": "STEPS"}),  # train, ablate: the training budget
    "force": (("--force",), {"action": "store_true"}),
    "no_progress": (("--no-progress",), {"action": "store_true"}),
}


def shared(name: str, **own: Any) -> Argument:
    """The record of the shared option ``name`` with a command's ``own`` keyword arguments (its help
    text first of all) added to the table's."""
    flags, common = SHARED[name]
    return flags, {**common, **own}


def add_arguments(parser: argparse.ArgumentParser, arguments: Iterable[Argument]) -> None:
    """Add ``arguments`` (``(flags, kwargs)`` records) to ``parser`` in order (the order ``--help``
    lists them in)."""
    for flags, kwargs in arguments:
        parser.add_argument(*flags, **kwargs)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block): what is wrong and where to look."""

    def error(self, message: str) -> Any:
        fix = "" if "Fix:" in message else f" Fix: see `{self.prog} --help`."
        self.exit(EXIT_USER_ERROR, f"{self.prog}: {message}.{fix}\n")


class Formatter(argparse.HelpFormatter):
    """Wraps the description's and epilog's paragraphs to the terminal, but keeps indented lines (examples)
    as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        out = []
        for line in text.splitlines():
            if line.startswith(" ") or not line:
                out.append(indent + line)
            else:
                out.append(textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent))
        return "\n".join(out)


def positive(what: str, example: int) -> Callable[[str], int]:
    """An argument type: a whole number >= 1 of ``what``; the refusal names ``example``.

    Example:
        >>> positive("steps", 40)("12")
        12
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a positive whole number of {what}. Fix: pass e.g. {example}"
            )
        return value

    return parse


def non_negative(text: str) -> int:
    """An argument type: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0. Fix: pass e.g. 20000, or 0")
    return value
