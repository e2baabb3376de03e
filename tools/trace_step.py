"""Trace one wrapper step and one history read through sensorgym: which functions do the work, in which
modules (the hop count of docs/architecture.md §2).

The traced program is the module example of ``sensorgym/wrappers/vector.py``: Pendulum-v1, 4 envs,
NEXT_STEP autoreset, one ``StateSensor`` with ``delay=0.05`` (one step), ``noise=0.01``,
``history_length=2``; a step where no env resets, then ``read(history_length=2)``. It works on any commit
of the package (run it from that checkout), so the before/after numbers come from the same rule.

A hop is a sensorgym function that runs during the traced calls, counted once, in first-call order.
Functions that only index or check (``--skip``) are listed but not counted, and neither are the ops of
the executors' array namespace (``core.xp.TORCH``/``NUMPY``: each one torch or numpy call, the
instruction set the stages are written in, as a torch or numpy call is not counted) nor the binding's
view lookups (``core.xp.Binding``). The engine step is what runs inside ``SensorManager.step``.

Usage:
    python tools/trace_step.py            # the hop table and the counts
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

import sensorgym as sg
from sensorgym.wrappers import SensorObservation

SKIP = {
    "at", "slot", "array_at", "known_empty", "_same_storage", "_copy_mask", "clean_info", "__init__",
    "depth",
    "<genexpr>", "<listcomp>", "<dictcomp>", "<lambda>", "__post_init__", "__getattr__", "__hash__",
}  # fmt: skip
PACKAGE = Path(sg.__file__).resolve().parent
#: qualname prefixes of the executors' primitive ops and view lookups (see the module docstring)
PRIMITIVES = ("TORCH.", "NUMPY.", "Binding.")


def trace(fn, keep_profiler: list | None = None) -> list[tuple[str, str]]:
    """(module, qualname) of every sensorgym function called while ``fn`` runs, in call order
    (``keep_profiler``: a one-item list that receives the profiler, to resume it after a nested trace)."""
    calls: list[tuple[str, str]] = []

    def profiler(frame, event, arg):
        if event != "call":
            return
        path = Path(frame.f_code.co_filename).resolve()
        if PACKAGE in path.parents:
            rel = path.relative_to(PACKAGE.parent).with_suffix("")
            calls.append((".".join(rel.parts), frame.f_code.co_qualname))

    if keep_profiler is not None:
        keep_profiler[0] = profiler
    sys.setprofile(profiler)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def report(title: str, calls: list[tuple[str, str]], skip: set[str]) -> tuple[int, int]:
    seen: dict[tuple[str, str], int] = {}
    for c in calls:
        seen[c] = seen.get(c, 0) + 1
    hops = [
        (m, q)
        for (m, q) in seen
        if q.split(".")[-1] not in skip and not (m == "sensorgym.core.xp" and q.startswith(PRIMITIVES))
    ]
    modules = {m for m, _ in hops}
    print(
        f"\n## {title}: {len(hops)} hops across {len(modules)} modules "
        f"(raw: {len(calls)} calls to {len(seen)} functions in {len({m for m, _ in seen})} modules)\n"
    )
    for i, (m, q) in enumerate(hops, 1):
        print(f"{i:3d}. {m}.{q}" + (f"  (x{seen[(m, q)]})" if seen[(m, q)] > 1 else ""))
    left_out = sorted({f"{m}.{q}" for (m, q) in seen if (m, q) not in hops})
    if left_out:
        print("\nleft out (index/check helpers): " + ", ".join(left_out))
    return len(hops), len(modules)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", nargs="*", default=sorted(SKIP), help="function names not counted")
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    envs = SensorObservation(
        gym.make_vec("Pendulum-v1", num_envs=4, vectorization_mode="sync"),
        {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, noise=0.01, history_length=2)},
        seed=0,
    )
    envs.reset(seed=0)
    actions = np.zeros((4, 1), np.float32)
    for _ in range(3):
        envs.step(actions)
    sensor = envs.sensors["angle"] if hasattr(envs, "sensors") else envs.manager.sensors[0]
    manager = envs.manager
    engine: list[tuple[str, str]] = []
    inner_step = manager.step

    def traced_manager_step(*args, **kwargs):  # what runs inside SensorManager.step, while the wrapper steps
        sys.setprofile(None)
        engine.extend(trace(lambda: inner_step(*args, **kwargs)))
        sys.setprofile(profiler_of_step[0])

    profiler_of_step: list = [None]
    manager.step = traced_manager_step
    step = trace(lambda: envs.step(actions), profiler_of_step)
    del manager.step
    read = trace(lambda: sensor.read(history_length=2))
    skip = set(args.skip)
    w = report("wrapper step", step + engine, skip)
    r = report("read(history_length=2)", read, skip)
    e = report("engine step (SensorManager.step and below)", engine, skip)
    print(
        f"\nwrapper step + read: {w[0] + r[0]} hops; engine step + read: {e[0] + r[0]} hops "
        f"(modules: see the lists; manager {type(manager).__module__})"
    )


if __name__ == "__main__":
    main()
