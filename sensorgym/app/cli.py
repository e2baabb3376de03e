"""The ``sensorgym`` command line: see what sensors do, train with them, measure what they cost.

Commands (each runs an embedded default when called without ``--config``):

* ``sensorgym inspect``: GT vs measured traces (a PNG) and a table of each imperfection as configured and
  as estimated from the traces;
* ``sensorgym train`` / ``sensorgym eval``: PPO with a symmetric or asymmetric critic, saved with its
  config; replay it (``eval`` takes the run directory), optionally under another sensor configuration;
* ``sensorgym ablate``: a resumable sweep over imperfection levels x critic type x seeds, in local worker
  processes (``--workers``) or on a Ray cluster (``--ray``), with a CSV, a summary that states the answer
  with its uncertainty, and a plot;
* ``sensorgym demo``: a few lines of GT vs measured values.

A mistake the user can fix (a config, a flag, a path, a missing package) prints one line naming what is
wrong and the fix, and exits with code 2; Ctrl-C stops within seconds, keeps what is finished, prints how
to resume, and exits with code 130; SIGTERM (SLURM, ``timeout``, ``docker stop``) does the same and exits
with code 143 (:mod:`~sensorgym.app.signals`). A reused ``--out`` never loses results: ``train`` and
``ablate`` refuse a folder holding another run or study, and ``--force`` moves it aside
(:mod:`~sensorgym.app.outdir`). Progress bars are drawn on a terminal only; a log gets plain lines.

This module is the dispatch and that error handling only: each subcommand is one module of
:mod:`sensorgym.app.commands` (its parser section and its ``run``), and the options several of them share
are declared once, in :data:`sensorgym.app.commands.options.SHARED`.

Example:
    >>> from sensorgym.app.cli import main
    >>> main(["demo", "--steps", "3"])  # doctest: +ELLIPSIS
    sensorgym demo: ...
    0
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Sequence

from .commands import COMMANDS
from .commands.common import DEFAULT_OUT, EXTRAS, install_fix, installed, one_line, stopped
from .commands.options import EXIT_USER_ERROR, Formatter, Parser, add_arguments

os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering for camera sensors, before mujoco loads

__all__ = ["DEFAULT_OUT", "EXTRAS", "build_parser", "exit_if_missing", "install_fix", "main"]

#: exit code of an interruption (128 + SIGINT, what shells report for Ctrl-C)
EXIT_INTERRUPTED = 130


def build_parser() -> Parser:
    """The ``sensorgym`` argument parser (every option has help text): one subparser per module of
    :data:`~sensorgym.app.commands.COMMANDS`, from its parser section, running its ``run``."""
    parser = Parser(
        prog="sensorgym",
        description="Robot sensors for Gymnasium envs: see what they do (inspect, demo), train with them "
        "(train, eval) and measure what they cost (ablate). Each command runs an embedded default config "
        "unless given --config (examples: examples/configs/).",
        formatter_class=Formatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        section = sub.add_parser(
            command.NAME,
            help=command.HELP,
            description=command.DESCRIPTION,
            epilog=command.EPILOG,
            formatter_class=Formatter,
        )
        add_arguments(section, command.ARGUMENTS)
        section.set_defaults(func=command.run)
    return parser


def exit_if_missing(program: str, modules: Sequence[str]) -> None:
    """For scripts outside the command line (the examples): when an optional module is missing, print one
    line naming it and the exact pip command, and exit with code 2 (instead of a raw
    ``ModuleNotFoundError`` traceback).

    Example:
        >>> exit_if_missing("my_script.py", ["numpy"])   # installed: nothing happens
    """
    missing = [m for m in modules if not installed(m)]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        print(
            f"{program}: needs {', '.join(missing)}, which {verb} not installed. Fix: {install_fix(missing)}",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_USER_ERROR)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0, 2 for a user error, 130 for Ctrl-C, 143 for
    SIGTERM)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad flag (2, its one-line message already printed)
        return e.code if isinstance(e.code, int) else 0
    args.argv = argv
    prefix = f"sensorgym {args.command}:"
    from .signals import interrupted_exit_code, sigterm_as_sigint, stop_requested

    try:
        with sigterm_as_sigint():  # SIGTERM (SLURM, timeout, docker stop) stops a command as Ctrl-C does
            try:
                code = args.func(args)
            except KeyboardInterrupt:  # outside the commands' own handling (e.g. while loading torch)
                print(f"{prefix} {stopped()}.", file=sys.stderr)
                code = interrupted_exit_code()
    except KeyboardInterrupt:  # a second signal during the first one's message
        code = interrupted_exit_code()
    except BrokenPipeError:  # the output went to a pipe that closed early (e.g. `| head`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python would otherwise complain when flushing at exit
        return 141
    except Exception as e:
        message = _user_message(e)
        if message is None:
            raise  # an internal bug: the traceback is for us
        print(f"{prefix} {message}", file=sys.stderr)
        return EXIT_USER_ERROR
    if stop_requested():
        # CPython remembers a KeyboardInterrupt that left code run by exec() (dataclasses and namedtuples
        # build their methods so: a stop during an import that makes one lands there) as "unhandled" even
        # once caught, and at exit kills the process with SIGINT (exit status -2, not 130/143); the next
        # exec() forgets it
        exec("None")
    return code


def _user_message(e: Exception) -> str | None:
    """The one-line message of an error the user can fix, or ``None`` for an internal bug."""
    from .config import UserError

    if isinstance(e, UserError):
        return one_line(e)
    if isinstance(e, ModuleNotFoundError) and e.name and not e.name.startswith("sensorgym"):
        top = e.name.split(".")[0]
        return f"needs {top}, which is not installed. Fix: {install_fix([top])}"
    try:
        import gymnasium as gym
    except ImportError:  # pragma: no cover - gymnasium is a core dependency
        gym = None
    if gym is not None and isinstance(e, gym.error.DependencyNotInstalled):
        return _dependency_message(one_line(e))
    if isinstance(e, (ValueError, TypeError, RuntimeError)) and "Fix:" in str(e):
        return one_line(e)
    if isinstance(e, OSError) and e.errno is None and re.fullmatch(r"File .+ does not exist", str(e)):
        # Gymnasium's MuJoCo envs on a model file (xml_file) that is not there: a path the user gave
        return (
            f"the env could not open a file it was given ({e}; working directory {os.getcwd()}). Fix: run "
            "from the folder a relative path is relative to, or give an absolute path."
        )
    if isinstance(e, OSError) and e.errno in _ENVIRONMENT_ERRNOS:
        # the machine, not the code: a full disk, a read-only or protected folder, a file in the way; each
        # with its own fix ("free space" had been the fix for a folder without write permission too)
        from .outdir import write_error

        return write_error(e.filename or ".", e)
    return None


#: OSErrors that say something about the machine's folders and disks, not about sensorgym's code
_ENVIRONMENT_ERRNOS = {
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EEXIST,
    errno.ENOTDIR,
    errno.EISDIR,
}


def _dependency_message(text: str) -> str:
    """Gymnasium's "X is not installed" as one line with one fix (its own text names a fix of its own, so
    printing it with ours gave two different ones).

    Example:
        >>> _dependency_message('MuJoCo is not installed, run `pip install "gymnasium[mujoco]"`')
        'an env of the config needs MuJoCo, which is not installed. Fix: pip install "sensorgym[mujoco]"'
        >>> _dependency_message('Box2D is not installed, you can install it by run `pip install swig` '
        ...                     'followed by `pip install "gymnasium[box2d]"`').split(". ")[1]
        'Fix: pip install swig followed by pip install "gymnasium[box2d]"'
    """
    import re

    what = re.split(r" is not installed| not installed", text, maxsplit=1)[0].strip() or "a package"
    if "mujoco" in text.lower():
        fix = install_fix(["mujoco"])
    else:
        commands = re.findall(r"`([^`]+)`", text)
        fix = " followed by ".join(commands) if commands else f"install {what}"
    return f"an env of the config needs {what}, which is not installed. Fix: {fix}"


if __name__ == "__main__":
    raise SystemExit(main())
