"""Cost of the MuJoCo sensor catalog.

1. Per sensor class: the measurement inside one sub-env (µs per env-step, the part that scales with B
   and runs in Async workers) and the manager's batched step for B in {1, 16, 64} (µs per step).
2. The Ant reference set (IMU + 4 foot contacts + 8 encoders): a SyncVectorEnv step of ``Ant-v5`` bare vs
   observed through the sensors, for B in {1, 16, 64}; target: the sensors add under 25% to the env step.
Camera and lidar are reported separately (they are much more expensive than the rest).

Usage:
    MUJOCO_GL=egl python benchmarks/bench_catalog.py
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym
import numpy as np
import torch

import sensorgym as sg
import sensorgym.envs
from sensorgym.envs.ant import ant_sensors
from sensorgym.wrappers import make_sensor_vec
from sensorgym.wrappers.common import ExtractionPlan, extract_state


def best_time(fn, n: int, rounds: int = 3) -> float:
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def catalog_cases() -> list[tuple[str, str, dict]]:
    """(label, env id, sensors) per class, on an env that has the bodies they need."""
    from sensorgym.envs.ant import ANT_FEET, ANT_JOINTS
    from sensorgym.envs.tactile import tactile_sensors

    cases = [
        ("IMU", "Ant-v5", {"s": sg.IMUOptions(body="torso", noise=0.01, delay=0.05)}),
        (
            "Contact x4",
            "Ant-v5",
            {f"f{i}": sg.ContactOptions(geom=g, delay=0.05) for i, g in enumerate(ANT_FEET)},
        ),
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
        env = gym.make(env_id).unwrapped
        env.reset(seed=0)
        plan = ExtractionPlan(sensors)
        t_measure = best_time(lambda e=env, p=plan: p(e), 200)
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


def ant_overhead(sizes: list[int], steps: int) -> None:
    sensors = ant_sensors()
    print("\n| B | Ant-v5 bare µs/step | with IMU + 4 contacts + encoders µs/step | added | added / bare |")
    print("|---:|---:|---:|---:|---:|")
    for b in sizes:
        envs = {
            "bare": gym.make_vec("Ant-v5", num_envs=b, vectorization_mode="sync"),
            "sensors": make_sensor_vec("Ant-v5", b, sensors, seed=0),
        }
        actions = np.random.default_rng(0).uniform(-1, 1, (steps, b, 8)).astype(np.float32)
        times = dict.fromkeys(envs, float("inf"))
        for env in envs.values():
            env.reset(seed=0)
        for _ in range(5):  # interleaved rounds: machine noise hits both alike; keep the best
            for kind, env in envs.items():
                start = time.perf_counter()
                for a in actions:
                    env.step(a)
                times[kind] = min(times[kind], (time.perf_counter() - start) / steps)
        added = times["sensors"] - times["bare"]
        print(
            f"| {b} | {times['bare'] * 1e6:,.0f} | {times['sensors'] * 1e6:,.0f} | {added * 1e6:,.0f} | "
            f"{added / times['bare']:.0%} |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--steps", type=int, default=100)
    args = p.parse_args()
    print(f"{os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads)\n")
    per_class(args.sizes)
    ant_overhead(args.sizes, args.steps)


if __name__ == "__main__":
    main()
