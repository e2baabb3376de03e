"""Count the sensorgym functions and modules one engine step runs through (issue 34, item 4), independently
of tools/trace_step.py and its skip lists.

The rule, as the issue states it: ``sys.setprofile`` over one ``SensorManager.step`` of a ``StateSensor``
class with delay and noise, after a reset and a few warm-up steps; every Python function whose code lives in
the sensorgym package counts once (module + qualname; SPEC hooks, helpers, properties, lambdas and
generator expressions included), C functions (``c_call`` events) and frames outside sensorgym do not.
The same for one ``read()`` of that sensor. Both executors; 4 envs, ``dt = 0.02``, ``delay = 0.04`` (two
steps), ``noise = 0.01``, no history (``--history N`` adds one); the state is a numpy array, as a
Gymnasium env hands it over (``--torch-state``: a torch tensor).

Usage:
    python tools/count_step.py                  # the lists in first-call order and the counts
    python tools/count_step.py --json           # the counts and lists as JSON (tests/test_tools.py)
    PYTHONPATH=/tmp/old_tree python tools/count_step.py   # another tree's package, the same rule
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import sensorgym as sg

PACKAGE = Path(sg.__file__).resolve().parent
B, DT, WARMUP = 4, 0.02, 3
#: the issue's target: at most this many functions across at most this many modules per engine step
TARGET_FUNCTIONS, TARGET_MODULES = 15, 8


def profile(fn: Callable[[], Any]) -> list[tuple[str, str]]:
    """Distinct ``(module, qualname)`` of the sensorgym functions called while ``fn`` runs, first call
    first."""
    seen: dict[tuple[str, str], None] = {}

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "call":  # "c_call" and returns do not count
            return
        path = Path(frame.f_code.co_filename)
        if PACKAGE not in path.parents:
            return
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        seen.setdefault((module.removesuffix(".__init__"), frame.f_code.co_qualname), None)

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return list(seen)


def measure(executor: str, torch_state: bool = False, history: int = 0) -> dict[str, Any]:
    """The engine step's and the read's functions for one executor."""
    mgr = sg.SensorManager(num_envs=B, dt=DT, seed=0, executor=executor)
    options = sg.StateSensorOptions(key="obs", shape=(3,), delay=0.04, noise=0.01, history_length=history)
    sensor = mgr.add_sensor(options, name="s")
    rng = np.random.default_rng(0)

    def state() -> dict[str, Any]:
        x = rng.normal(size=(B, 3)).astype(np.float32)
        return {"obs": torch.from_numpy(x) if torch_state else x}

    mgr.reset(state())
    for _ in range(WARMUP):
        mgr.step(state())
    sensor.read()
    now = state()
    step = profile(lambda: mgr.step(now))
    read = profile(sensor.read)
    out: dict[str, Any] = {"executor": mgr.executor_used}
    for name, calls in (("step", step), ("read", read)):
        out[name] = {
            "functions": len(calls),
            "modules": len({m for m, _ in calls}),
            "list": [f"{m}.{q}" for m, q in calls],
            "module_of": [m for m, _ in calls],  # each listed function's module
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the counts and lists as JSON")
    parser.add_argument("--torch-state", action="store_true", help="hand the state over as a torch tensor")
    parser.add_argument("--history", type=int, default=0, help="the sensor's history_length (default 0)")
    args = parser.parse_args()
    results = {ex: measure(ex, args.torch_state, args.history) for ex in ("numpy", "torch")}
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for executor, result in results.items():
        for what in ("step", "read"):
            r = result[what]
            title = "SensorManager.step" if what == "step" else "read()"
            print(
                f"\n## {title}, {executor} executor: {r['functions']} functions across {r['modules']} modules"
            )
            for i, name in enumerate(r["list"], 1):
                print(f"{i:3d}. {name}")
    print("\n| executor | step: functions / modules | read(): functions / modules |\n|---|---|---|")
    for executor, result in results.items():
        s, r = result["step"], result["read"]
        print(f"| {executor} | {s['functions']} / {s['modules']} | {r['functions']} / {r['modules']} |")
    print(
        f"\ntarget (issue 34): at most {TARGET_FUNCTIONS} functions across {TARGET_MODULES} modules per step"
    )


if __name__ == "__main__":
    main()
