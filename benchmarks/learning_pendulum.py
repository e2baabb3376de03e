"""Learning result: PPO on Pendulum-v1 with a delayed, noisy angle sensor and no velocity in the policy
observation, symmetric vs asymmetric critic, several seeds.

The policy sees [cos θ, sin θ] through a sensor (1 step delay, noise std 0.05, history 3), never θ̇. The
symmetric critic reads the same; the asymmetric critic also reads the ground truth and the full env
observation [cos θ, sin θ, θ̇]. Prints the mean final evaluation return per critic with its spread.

Usage:
    python benchmarks/learning_pendulum.py                      # 100k steps, seeds 0 1 2 (~10 min, 2 cores)
    python benchmarks/learning_pendulum.py --timesteps 20000 --seeds 0
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import sensorgym as sg
from sensorgym.app.config import AlgorithmConfig, Config, EnvConfig
from sensorgym.app.training import train_ppo

SENSORS = {
    "angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, noise=0.05, history_length=3),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--timesteps", type=int, default=100_000)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--json", help="also write the per-run results here")
    args = p.parse_args()
    rows = []
    for critic in ("symmetric", "asymmetric"):
        for seed in args.seeds:
            start = time.perf_counter()
            cfg = Config(
                sensors=SENSORS,
                env=EnvConfig(id="Pendulum-v1"),
                algorithm=AlgorithmConfig(
                    timesteps=args.timesteps, seed=seed, eval_episodes=args.eval_episodes
                ),
            )
            r = train_ppo(cfg, critic=critic)
            r.pop("eval_returns")
            rows.append(r)
            print(
                f"{critic:>10} seed {seed}: eval return {r['eval_return_mean']:8.1f} "
                f"(± {r['eval_return_std']:.1f} over episodes), {time.perf_counter() - start:.0f} s",
                flush=True,
            )
    print(f"\nPendulum-v1, {args.timesteps} steps, seeds {args.seeds}, {args.eval_episodes} eval episodes\n")
    print("| critic | mean final return | std over seeds | per seed |")
    print("|---|---:|---:|---|")
    for critic in ("symmetric", "asymmetric"):
        vals = [r["eval_return_mean"] for r in rows if r["critic"] == critic]
        print(
            f"| {critic} | {np.mean(vals):.1f} | {np.std(vals):.1f} | {', '.join(f'{v:.0f}' for v in vals)} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
