"""Stop signals: SIGTERM does exactly what Ctrl-C (SIGINT) does.

Batch systems and supervisors stop a command with SIGTERM, not SIGINT: SLURM at the end of a job's time
(then SIGKILL after its grace period), ``timeout``, ``docker stop`` and systemd. Python's default for
SIGTERM is to die on the spot, with no cleanup: ``ablate`` lost its resume line and left its worker
queues' semaphores behind ("leaked semaphore" warnings), ``train`` wrote no checkpoint. While
:func:`sigterm_as_sigint` is active, a SIGTERM calls whatever SIGINT handler is installed at that moment
(``KeyboardInterrupt`` by default, ``train``'s "stop at the next step" handler while training, nothing
while a cleanup runs, :func:`stop_deferred`), so every command stops on SIGTERM as it stops on Ctrl-C,
also when it was started with SIGINT ignored (a background job of a script: SLURM batch scripts,
``nohup``). The exit code says which signal stopped it, as a shell would: 130 (128 + SIGINT) or 143
(128 + SIGTERM).

Example:
    >>> import signal
    >>> with sigterm_as_sigint():
    ...     try:
    ...         signal.raise_signal(signal.SIGTERM)
    ...     except KeyboardInterrupt:
    ...         print("stopped", interrupted_exit_code())
    stopped 143
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["interrupted_exit_code", "signal_name", "sigterm_as_sigint", "stop_deferred", "stop_requested"]

#: the stop signals received while :func:`sigterm_as_sigint` was active (newest last)
_received: list[int] = []


def _forward(signum: int, frame: Any) -> None:
    """SIGTERM: do what the SIGINT handler installed right now does; stop (``KeyboardInterrupt``) also when
    SIGINT has been ignored since the command started (a background job of a shell script, ``nohup``: the
    shell made Ctrl-C not reach it, but a SIGTERM from SLURM, ``timeout`` or ``kill`` must still stop it)."""
    _received.append(signum)
    if _deferred:  # a cleanup after the first stop is running and must finish (it is bounded to seconds)
        return
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler not in (signal.default_int_handler, _note_sigint):
        handler(signal.SIGINT, frame)  # e.g. train's: the first signal stops at the next step
        return
    raise KeyboardInterrupt


#: depth of the :func:`stop_deferred` blocks now running
_deferred = 0


@contextlib.contextmanager
def stop_deferred() -> Iterator[None]:
    """Ignore further Ctrl-C and SIGTERM while cleaning up after the first stop (main thread only; the
    cleanup is bounded to seconds). The signals are still remembered for the exit code."""
    global _deferred
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    _deferred += 1
    try:
        yield
    finally:
        _deferred -= 1
        signal.signal(signal.SIGINT, previous)


def _note_sigint(signum: int, frame: Any) -> None:
    _received.append(signum)
    signal.default_int_handler(signum, frame)


@contextlib.contextmanager
def sigterm_as_sigint() -> Iterator[None]:
    """While active (main thread only; elsewhere it does nothing), SIGTERM behaves as SIGINT, and the
    signal that stopped the command is remembered for :func:`interrupted_exit_code`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    previous_term = signal.signal(signal.SIGTERM, _forward)
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:  # remember a Ctrl-C too (for its exit code)
        signal.signal(signal.SIGINT, _note_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)


def stop_requested() -> bool:
    """Whether SIGTERM (or a Ctrl-C seen by :func:`sigterm_as_sigint`'s handler) has arrived."""
    return bool(_received)


def interrupted_exit_code() -> int:
    """128 + the first stop signal received: 143 after SIGTERM, else 130 (Ctrl-C, what shells report)."""
    return 128 + (_received[0] if _received else int(signal.SIGINT))


def signal_name() -> str:
    """How to name the stop in a message: ``"SIGTERM"`` or ``"Ctrl-C"``."""
    return "SIGTERM" if _received and _received[0] == signal.SIGTERM else "Ctrl-C"
