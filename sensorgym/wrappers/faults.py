"""Faults of the wrapped vector env, turned into errors that say which env failed and what state the
sensors are in.

* a sub-env raising in ``step``/``reset``: the exception keeps its type and gets a note naming the
  sub-env and saying the sensors did not advance;
* an ``AsyncVectorEnv`` worker that died (killed, out of memory, segfault): a ``RuntimeError`` naming
  the worker and its exit code instead of a bare ``BrokenPipeError``/``EOFError``;
* an info entry a sensor reads that some sub-envs stopped returning: Gymnasium fills those rows with
  zeros and marks them in ``info["_<key>"]``; reading the zeros would be a silent wrong answer, so it is a
  ``ValueError`` naming the sensor, the key and the envs.

Example:
    >>> import numpy as np
    >>> from sensorgym.wrappers.faults import missing_info_rows
    >>> info = {"speed": np.array([1.0, 0.0]), "_speed": np.array([True, False])}
    >>> missing_info_rows(info, "speed")
    [1]
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium.vector import SyncVectorEnv

__all__ = ["DEAD_PIPE", "annotate_env_error", "dead_workers", "missing_info_rows"]

#: what a pipe to a dead worker raises
DEAD_PIPE = (BrokenPipeError, EOFError, ConnectionResetError)


def _failing_sync_env(exc: BaseException) -> int | None:
    """The sub-env index a ``SyncVectorEnv`` was stepping when ``exc`` was raised (from the traceback)."""
    trace = exc.__traceback__
    while trace is not None:
        frame = trace.tb_frame
        if isinstance(frame.f_locals.get("self"), SyncVectorEnv) and isinstance(frame.f_locals.get("i"), int):
            return frame.f_locals["i"]
        trace = trace.tb_next
    return None


def dead_workers(processes: Any, wait: float = 0.0) -> list[tuple[int, int | None]]:
    """``(index, exit code)`` of the worker processes that exited; waits up to ``wait`` seconds for one
    to be reaped (a closed pipe can be seen just before its process has finished exiting)."""
    deadline = time.monotonic() + wait
    while True:
        dead = [(i, p.exitcode) for i, p in enumerate(processes) if not p.is_alive()]
        if dead or time.monotonic() >= deadline:
            return dead
        time.sleep(0.01)


def annotate_env_error(exc: BaseException, env: Any, call: str) -> BaseException:
    """The exception to raise for ``exc`` coming out of ``env.<call>()`` (``env``: the wrapped vector env).

    Returns ``exc`` itself with a note added, or a ``RuntimeError`` chained to it for a dead Async worker.
    """
    inner = getattr(env, "unwrapped", env)
    processes = getattr(inner, "processes", None)
    if processes is not None and isinstance(exc, DEAD_PIPE):
        dead = dead_workers(processes, wait=2.0)
        if dead:
            which = ", ".join(f"worker {i} (exit code {code})" for i, code in dead)
            return RuntimeError(
                f"sensorgym: {type(inner).__name__} {which} died during {call}(). The sensors did not "
                "advance (their state is unchanged). Fix: build a new vector env and reset it, or restore a "
                "checkpoint (sensorgym.wrappers.checkpoint); check the worker's memory use and logs."
            )
    if isinstance(exc, Exception) and not isinstance(exc, DEAD_PIPE):
        where = ""
        idx = _failing_sync_env(exc)
        if idx is not None:
            where = f"sub-env {idx} of "
        elif processes is not None:
            pipes = getattr(inner, "parent_pipes", ())
            failed = [i for i, p in enumerate(pipes) if p is None]
            where = f"sub-env(s) {failed} of " if failed else ""
        exc.add_note(
            f"sensorgym: raised by {where}the wrapped {type(inner).__name__} during {call}(); the sensors "
            "did not advance (their state is unchanged)."
        )
    return exc


def _lookup(info: Mapping, key: str) -> tuple[Any, Any]:
    """``(value, gymnasium mask)`` of a state key in a batched info. State keys join nested info keys with
    a dot (``"a.b"`` -> ``info["a"]["b"]``), and an info key may hold a dot itself (``info["imu.temp"]``),
    so every split is tried, the key as it stands first (as :func:`~sensorgym.wrappers.state_mapping.
    build_state` names both)."""
    if key in info:
        return info[key], info.get("_" + key)
    start = key.find(".")
    while start > 0:
        parent = info.get(key[:start])
        if isinstance(parent, Mapping):
            value, mask = _lookup(parent, key[start + 1 :])
            if value is not None:
                return value, mask
        start = key.find(".", start + 1)
    return None, None


def missing_info_rows(info: Mapping | None, key: str, rows: np.ndarray | None = None) -> list[int]:
    """Envs (among ``rows``, a bool mask; default all) whose ``info`` lacks ``key`` although other envs
    returned it: Gymnasium zero-filled them.

    Masks held as torch tensors (natively batched envs) are not checked: that would cost a device sync.
    """
    if not info:
        return []
    value, mask = _lookup(info, key)
    if value is None or not isinstance(mask, np.ndarray) or mask.dtype != bool:
        return []
    missing = ~mask if rows is None else ~mask & rows
    return np.flatnonzero(missing).tolist() if missing.any() else []
