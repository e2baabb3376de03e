"""The ``sensorgym`` subcommands, one module each: its parser section (``NAME``, ``HELP``,
``DESCRIPTION``, ``EPILOG`` and ``ARGUMENTS``, a tuple of ``(flags, kwargs)`` records whose shared options
come from :data:`~sensorgym.app.commands.options.SHARED`) and its ``run(args)`` (the exit code).
:func:`sensorgym.app.cli.build_parser` adds them in the order of :data:`COMMANDS`. What the run functions
share is :mod:`~sensorgym.app.commands.common`.

Every module here imports only the standard library at the top (the work is imported inside ``run``), so
``sensorgym --help`` and an argument error answer without loading torch.

Example:
    >>> [command.NAME for command in COMMANDS]
    ['demo', 'inspect', 'train', 'eval', 'ablate', 'fit']
"""

from __future__ import annotations

from . import ablate, demo, eval, fit, inspect, train

__all__ = ["COMMANDS"]

#: the subcommands in the order ``sensorgym --help`` lists them
COMMANDS = (demo, inspect, train, eval, ablate, fit)
