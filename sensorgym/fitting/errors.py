"""What ``sensorgym fit`` says when it cannot go on: a log it cannot use, or a missing optional package.

Both are one line that names the problem and the fix; the command line prints it and exits with code 2.

Example:
    >>> from sensorgym.fitting.errors import FitError, require
    >>> str(FitError("log.csv: no column 'gyro_x'", "use one of ['t', 'gx']"))
    "log.csv: no column 'gyro_x'. Fix: use one of ['t', 'gx']."
    >>> require("math", "fit", "the Allan deviation").sqrt(4.0)
    2.0
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["FitError", "MissingExtra", "require"]


class FitError(ValueError):
    """A log, a flag or a value that ``fit`` cannot use: ``problem. Fix: fix.`` in one line."""

    def __init__(self, problem: str, fix: str) -> None:
        self.problem, self.fix = problem.rstrip("."), fix.rstrip(".")
        super().__init__(f"{self.problem}. Fix: {self.fix}.")


class MissingExtra(ImportError):
    """An optional package that a reader or the estimation needs is not installed (the message names the
    ``pip install`` that adds it)."""


#: module -> the package pip installs it from (where the names differ)
_PIP = {"yaml": "pyyaml"}


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtra` saying that ``what`` needs it and how to install it
    (through sensorgym's ``extra``)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise MissingExtra(
            f"{what} needs {_PIP.get(top, top)}, which is not installed. "
            f'Fix: pip install "sensorgym[{extra}]"',
            name=top,
        ) from None
