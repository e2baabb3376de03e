"""Cost of the MuJoCo sensor catalog.

1. Per sensor class: the measurement inside one sub-env (µs per env-step: ``ExtractionPlan.packed``, what
   a sub-env runs, the part that scales with B and runs in Async workers) and the manager's batched step
   for B in {1, 16, 64} (µs per step). The IMU and the contact switches are measured twice: computed in
   Python on ``Ant-v5``'s own model, and read from MuJoCo's native sensors on the patched model
   (:mod:`sensorgym.sensors.mujoco.native`).
2. Per part: one Ant sub-env's extraction (``mj_forward``, each class's ``_extract_state``, packing, and
   ``ExtractionPlan.packed``, which sub-envs run: on the native path one gather of every class's
   ``MjData`` entries), on both paths.
3. The Ant reference set (IMU + 4 foot contacts + 8 encoders): a SyncVectorEnv step of ``Ant-v5`` bare,
   observed through the sensors on the Python path (``make_sensor_vec("Ant-v5", ...)``) and on the native
   path (``gym.make_vec("sensorgym/AntSensors-v0", ...)``), rounds interleaved; targets: the sensors add
   at most 25 % to the env step at B=1 and 10 % at B=16.
4. Autoresets: ``sensorgym/AntSensors-v0`` under uniform random actions (its episodes end often, as at the
   start of training), with the manager's step timed separately on steps where an env starts a new
   episode (``--only resets``).
Camera and lidar are reported separately (they are much more expensive than the rest). On a shared
machine, compare the best of several rounds (printed) and look at the median (also printed) for noise.

Usage:
    MUJOCO_GL=egl python benchmarks/bench_catalog.py                 # everything
    MUJOCO_GL=egl python benchmarks/bench_catalog.py --only ant parts --rounds 9
    MUJOCO_GL=egl python benchmarks/bench_catalog.py --only resets --sizes 16
    MUJOCO_GL=egl python benchmarks/bench_catalog.py --clock cpu      # on a busy machine
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym
import numpy as np
import torch

import sensorgym as sg
import sensorgym.envs
from sensorgym.envs.ant import ant_sensors, native_ant_xml
from sensorgym.sensors.mujoco.base import sync_mjdata
from sensorgym.wrappers import make_sensor_vec
from sensorgym.wrappers.common import ExtractionPlan, extract_state

CLOCK = time.perf_counter  # --clock cpu: time.thread_time, the CPU time of the stepping thread


def best_time(fn, n: int, rounds: int = 3) -> float:
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = CLOCK()
        for _ in range(n):
            fn()
        best = min(best, (CLOCK() - start) / n)
    return best


def catalog_cases() -> list[tuple[str, str, dict]]:
    """(label, env id, sensors) per class, on an env that has the bodies they need."""
    from sensorgym.envs.ant import ANT_FEET, ANT_JOINTS
    from sensorgym.envs.tactile import tactile_sensors

    imu = {"s": sg.IMUOptions(body="torso", noise=0.01, delay=0.05)}
    feet = {f"f{i}": sg.ContactOptions(geom=g, delay=0.05) for i, g in enumerate(ANT_FEET)}
    cases = [
        ("IMU (Python)", "Ant-v5", imu),
        ("IMU (native)", "Ant-v5", imu),
        ("Contact x4 (Python)", "Ant-v5", feet),
        ("Contact x4 (native)", "Ant-v5", feet),
        ("ContactForce", "Ant-v5", {"s": sg.ContactForceOptions(body="torso", max_force=100.0)}),
        ("JointEncoder (8)", "Ant-v5", {"s": sg.JointEncoderOptions(joints=ANT_JOINTS, resolution=1e-3)}),
        ("JointTorque (8)", "Ant-v5", {"s": sg.JointTorqueOptions(joints=ANT_JOINTS)}),
    ]
    tactile = tactile_sensors()
    cases += [
        ("Proximity (4 probes)", "sensorgym/Tactile-v0", {"s": tactile["proximity"]}),
        ("KinematicContactProbe (5)", "sensorgym/Tactile-v0", {"s": tactile["probes"]}),
        ("ElastomerDisplacement 4x4", "sensorgym/Tactile-v0", {"s": tactile["pad"]}),
    ]
    try:  # catalog entries that may live in other modules
        from sensorgym.envs.scan import register as register_scan
        from sensorgym.envs.scan import scan_sensors

        register_scan()
        scan = scan_sensors()
        cases += [(f"{type(o).__name__} ({k})", "sensorgym/Scan-v0", {k: o}) for k, o in scan.items()]
    except ImportError:
        pass
    try:
        from sensorgym.envs.thermal import register as register_thermal
        from sensorgym.envs.thermal import thermal_sensors

        register_thermal()
        cases += [
            (f"{type(o).__name__} ({k})", "sensorgym/Thermal-v0", {k: o})
            for k, o in thermal_sensors().items()
        ]
    except ImportError:
        pass
    return cases


def per_class(sizes: list[int]) -> None:
    print(
        "| sensor class | measurement µs / env-step | "
        + " | ".join(f"manager µs/step B={b}" for b in sizes)
        + " |"
    )
    print("|---|---:|" + "---:|" * len(sizes))
    for label, env_id, sensors in catalog_cases():
        kwargs = {"xml_file": native_ant_xml(sensors)} if "(native)" in label else {}
        env = gym.make(env_id, **kwargs).unwrapped
        env.reset(seed=0)
        for _ in range(20):  # off the initial pose: the feet touch the floor
            env.step(env.action_space.sample())
        plan = ExtractionPlan(sensors)
        t_measure = best_time(lambda e=env, p=plan: p.packed(e), 200)  # what a sub-env runs per step
        one = extract_state(env, sensors)
        row = [f"{t_measure * 1e6:,.1f}"]
        for b in sizes:
            mgr = sg.SensorManager(num_envs=b, dt=0.05, seed=0)
            for name, o in sensors.items():
                mgr.add_sensor(o, name=name)
            state = {k: torch.from_numpy(np.repeat(v[None], b, axis=0)) for k, v in one.items()}
            mgr.reset(state)
            row.append(f"{best_time(lambda m=mgr, s=state: m.step(s), 300) * 1e6:,.1f}")
        print(f"| {label} | " + " | ".join(row) + " |")


def parts(rounds: int) -> None:
    """Per-part cost of one Ant sub-env's extraction, Python path vs native path (best of rounds)."""
    sensors = ant_sensors()
    rows: dict[str, dict[str, float]] = {}
    for path, kwargs in (("Python", {}), ("native", {"xml_file": native_ant_xml(sensors)})):
        env = gym.make("Ant-v5", **kwargs).unwrapped
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(40):  # walking, feet on the floor
            env.step(rng.uniform(-0.5, 0.5, 8))
        plan = ExtractionPlan(sensors)
        values = plan(env)
        cases = {"sync_mjdata (mj_forward [+ rnePostConstraint])": lambda e=env: sync_mjdata(e)}
        for cls, opts in plan.groups:
            cases[f"{cls.__name__}._extract_state"] = lambda c=cls, o=opts, e=env: c._extract_state(e, o)
        cases["pack"] = lambda v=values: ExtractionPlan.pack(v)
        cases["ExtractionPlan + pack (all, class by class)"] = lambda p=plan, e=env: ExtractionPlan.pack(p(e))
        # what a sub-env runs: one gather of every class's MjData entries where they allow it (native)
        cases["ExtractionPlan.packed (all, what a sub-env runs)"] = lambda p=plan, e=env: p.packed(e)
        for name, fn in cases.items():
            rows.setdefault(name, {})[path] = best_time(fn, 2000, rounds)
    print("\n| part (one Ant sub-env) | Python path µs | native path µs |")
    print("|---|---:|---:|")
    for name, t in rows.items():
        print(f"| {name} | {t['Python'] * 1e6:.1f} | {t['native'] * 1e6:.1f} |")


def ant_overhead(sizes: list[int], steps: int, rounds: int) -> None:
    sensors = ant_sensors()
    policy = ["imu", "foot_0", "foot_1", "foot_2", "foot_3", "encoders"]
    print(
        "\n| B | Ant-v5 bare µs/step | Python path µs/step | added | added / bare | native path µs/step "
        "| added | added / bare | bare, median of rounds | native, median of rounds |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in sizes:
        envs = {
            "bare": gym.make_vec("Ant-v5", num_envs=b, vectorization_mode="sync"),
            "python": make_sensor_vec("Ant-v5", b, sensors, seed=0, policy=policy),
            "native": gym.make_vec("sensorgym/AntSensors-v0", num_envs=b, seed=0),
        }
        assert envs["native"].unwrapped.get_attr("model")[0].nsensor > 0  # the patched model
        actions = np.random.default_rng(0).uniform(-0.5, 0.5, (steps, b, 8)).astype(np.float32)
        times: dict[str, list[float]] = {k: [] for k in envs}
        for env in envs.values():
            env.reset(seed=0)
        for _ in range(rounds):  # interleaved rounds: machine noise hits all alike; keep the best
            for kind, env in envs.items():
                start = CLOCK()
                for a in actions:
                    env.step(a)
                times[kind].append((CLOCK() - start) / steps)
        best = {k: min(v) for k, v in times.items()}
        med = {k: statistics.median(v) for k, v in times.items()}
        row = [f"{b}", f"{best['bare'] * 1e6:,.0f}"]
        for kind in ("python", "native"):
            added = best[kind] - best["bare"]
            row += [f"{best[kind] * 1e6:,.0f}", f"{added * 1e6:,.0f}", f"{added / best['bare']:.0%}"]
        row += [f"{med['bare'] * 1e6:,.0f}", f"{med['native'] * 1e6:,.0f}"]
        print("| " + " | ".join(row) + " |")
        for env in envs.values():
            env.close()


def ant_resets(sizes: list[int], steps: int) -> None:
    """The cost of autoresets: ``sensorgym/AntSensors-v0`` driven by uniform random actions over the whole
    action range (as a policy at the start of training: the Ant often falls and its episode ends), in
    Gymnasium's NextStep mode and in SameStep (SB3's), with the manager's time per vector step (its
    ``step`` and, in SameStep, the ``reset`` of the finished envs) split by whether an env started a new
    episode in that step."""
    print(
        "\n| B | autoreset mode | steps with an autoreset | manager µs/step, no reset (median) | manager "
        "µs/step with an autoreset (median) | added per step by resets, mean µs |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for b in sizes:
        for mode in ("NextStep", "SameStep"):
            envs = gym.make_vec("sensorgym/AntSensors-v0", num_envs=b, seed=0, autoreset_mode=mode)
            manager, spent = envs.manager, [0.0, False]

            def timed(method, resets, spent=spent):
                def run(state, *args, **kwargs):
                    mask = next(iter(args), None) if args else next(iter(kwargs.values()), None)
                    start = CLOCK()
                    method(state, *args, **kwargs)
                    spent[0] += CLOCK() - start
                    spent[1] = spent[1] or resets(mask)

                return run

            manager.step = timed(manager.step, lambda m: bool(np.any(m)))
            manager.reset = timed(manager.reset, lambda m: True)
            envs.reset(seed=0)
            envs.action_space.seed(0)
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(steps):
                spent[:] = [0.0, False]
                envs.step(envs.action_space.sample())
                times[spent[1]].append(spent[0])
            envs.close()
            plain, reset = statistics.median(times[False]), statistics.median(times[True] or [0.0])
            extra = (sum(times[True]) - len(times[True]) * plain) / steps
            share = len(times[True]) / steps
            cells = [f"{b}", mode, f"{share:.0%}"] + [f"{x * 1e6:,.0f}" for x in (plain, reset, extra)]
            print("| " + " | ".join(cells) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (best and median reported)")
    p.add_argument(
        "--only",
        nargs="+",
        choices=["classes", "parts", "ant", "resets"],
        default=["classes", "parts", "ant", "resets"],
    )
    p.add_argument("--reset-steps", type=int, default=2000, help="steps of the autoreset measurement")
    p.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: CPU time of the stepping thread (time.thread_time), which on a machine shared with other "
        "jobs leaves out the time spent waiting for a core (not cache interference); Sync envs step in "
        "this thread and torch does not split tensors this small across threads",
    )
    args = p.parse_args()
    global CLOCK
    CLOCK = time.thread_time if args.clock == "cpu" else time.perf_counter
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{os.cpu_count()} cores (load average {load:.1f}), torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), clock: {args.clock}\n"
    )
    if "classes" in args.only:
        per_class(args.sizes)
    if "parts" in args.only:
        parts(args.rounds)
    if "ant" in args.only:
        ant_overhead(args.sizes, args.steps, args.rounds)
    if "resets" in args.only:
        ant_resets(args.sizes, args.reset_steps)


if __name__ == "__main__":
    main()
