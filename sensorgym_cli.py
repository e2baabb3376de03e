"""Console entry point of the ``sensorgym`` command.

It lives outside the ``sensorgym`` package on purpose. Importing the package loads torch, which takes a
second or two, and a Ctrl-C in that window would otherwise end in Python's ``KeyboardInterrupt``
traceback before :func:`sensorgym.app.cli.main` can handle it.
Here it ends in one line and exit code 130, like
a Ctrl-C at any later point.

Example:
    >>> import sensorgym_cli
    >>> callable(sensorgym_cli.main)
    True
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def main() -> int:
    """Import the command line and run it; a Ctrl-C while importing exits 130 with one line."""
    try:
        from sensorgym.app.cli import main as run
    except KeyboardInterrupt:
        print("sensorgym: interrupted while starting; nothing was run.", file=sys.stderr)
        return EXIT_INTERRUPTED
    return run()


if __name__ == "__main__":
    sys.exit(main())
