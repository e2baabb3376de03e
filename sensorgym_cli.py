"""Console entry point of the ``sensorgym`` command.

It lives outside the ``sensorgym`` package on purpose. Importing the package loads torch (and Gymnasium,
numpy), which takes a second or two on an idle machine and far longer on a busy one, and two things must
not wait for it:

* ``--help`` and every argument error (``sensorgym trian``, ``--steps 0``): the argument parser
  (:func:`sensorgym.app.cli.build_parser`, which imports only the standard library) runs first, with the
  package's ``__init__`` not run, and answers those alone; a command that parses imports the package and
  runs as always;
* a Ctrl-C while the package loads: one line and exit code 130, not Python's ``KeyboardInterrupt``
  traceback, like a Ctrl-C at any later point.

Example:
    >>> import sensorgym_cli
    >>> callable(sensorgym_cli.main)
    True
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import sys
from collections.abc import Iterator, Sequence

EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments (answering ``--help`` and argument errors without loading torch), then import
    the command line and run it; a Ctrl-C while starting exits 130 with one line."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        answered = _parse_before_the_package(args)
        if answered is not None:
            return answered
        with _sigint_deferred():
            from sensorgym.app.cli import main as run
    except KeyboardInterrupt:
        print("sensorgym: interrupted while starting; nothing was run.", file=sys.stderr)
        return EXIT_INTERRUPTED
    return run(args)


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold a Ctrl-C back until the block ends, then raise it as ``KeyboardInterrupt``.

    Importing the package loads torch's compiled extension; a ``KeyboardInterrupt`` raised inside a
    pybind11 module's initialization is a C++ exception in a place that cannot take one, and the process
    aborts (``terminate called after throwing an instance of 'pybind11::error_already_set'``, exit status
    -6) instead of ending in one line. Where SIGINT is ignored (a background job) it stays ignored."""
    noted: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if noted:
        raise KeyboardInterrupt


def _parse_before_the_package(args: list[str]) -> int | None:
    """The exit code of ``--help`` or of an argument error, answered by the real parser with the package's
    ``__init__`` (torch, Gymnasium) not run; ``None`` when the arguments parse (the command then runs).

    The package's module object is made from its spec without running it, so ``sensorgym.app.cli`` (which
    imports only the standard library at the top) loads below it; everything loaded so is dropped again
    afterwards, so the command imports the real package as it always did. Where the package is already
    imported (a program that embeds the command) there is nothing to save, and nothing is done."""
    if "sensorgym" in sys.modules:
        return None
    spec = importlib.util.find_spec("sensorgym")
    if spec is None or spec.submodule_search_locations is None:
        return None
    sys.modules["sensorgym"] = importlib.util.module_from_spec(spec)  # its __init__ is not executed
    try:
        from sensorgym.app.cli import build_parser

        try:
            build_parser().parse_args(args)
        except SystemExit as e:  # --help (0) or an argument error (2, its one line already printed)
            return e.code if isinstance(e.code, int) else 0
        return None
    finally:
        for name in [n for n in sys.modules if n == "sensorgym" or n.startswith("sensorgym.")]:
            del sys.modules[name]


if __name__ == "__main__":
    sys.exit(main())
